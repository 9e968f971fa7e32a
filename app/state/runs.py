"""What the runner hands back, as plain records: a backend ready or failed, a job, its outcome.

Qt-free, so the app state can hold them and tests can build them without a runner.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu.backends.backend import Backend
from gpu.config import AttentionConfig
from gpu.results import DeviceInfo, RunResult


@dataclass(frozen=True)
class BackendReady:
    generation: int
    requested: str  # what the user asked for: "auto", "cuda", "cpu", "recorded"
    backend: Backend
    key: str  # identifies the device for the result cache
    info: DeviceInfo
    algorithms: tuple[str, ...]
    seconds: float  # how long creating it took (CuPy import, compiles)


@dataclass(frozen=True)
class BackendFailure:
    generation: int
    requested: str
    message: str


@dataclass(frozen=True)
class Job:
    request_id: int
    backend_generation: int
    config: AttentionConfig
    algorithm: str
    budget_bytes: int | None
    sweep: bool = False
    #: Sample the kernels' hardware counters after timing them (RunOptions.profile).
    profile: bool = False


@dataclass(frozen=True)
class RunOutcome:
    """What became of one job: a result, a skip or an error (with the field, for a ConfigError)."""

    job: Job
    backend_key: str
    result: RunResult | None = None
    error: str = ""
    error_field: str = ""
    skipped: bool = False  # not run: estimated too slow, or not in the recorded run
    stale: bool = False  # a newer live request arrived while this one ran
    seconds: float = 0.0
    details: str = ""  # long text for a "Details…" view: a compiler log, a traceback line
    unsupported: bool = False  # this algorithm cannot run this config on this device
    unavailable: bool = False  # the algorithm is off for this session (its kernel won't build)
    backend_lost: bool = False  # the backend failed mid-run; the worker stopped using it
    cancelled: bool = False  # stopped mid-run through the cancel hook (a newer request, Esc)
    #: Live jobs of the same config still queued behind this one: its results are drawn with
    #: theirs (see MainWindow's `_arrivals_held`).
    more_to_come: int = 0
    #: A run skipped as too long: its estimate and the limit it passed (seconds).
    too_long: tuple[float, float] | None = None


def backend_key(info: DeviceInfo) -> str:
    """The result store's key for a backend's results: its device, and for a recording also
    the file it replays (`details["source_id"]`), so each recording is a source of its own."""
    key = f"{info.backend}:{info.name}"
    source = info.details.get("source_id") if isinstance(info.details, dict) else None
    return f"{key}@{source}" if source else key
