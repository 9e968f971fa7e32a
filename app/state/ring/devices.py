"""How many devices the ring spans, and what each choice of P means on this machine.

The Devices control offers P = 1 … 1024. What the app can do with P depends on the backend:
- `cuda`: one GPU per device, so P up to the GPUs present is *measured* (NCCL between them);
- `cpu`: the NumPy ring (gpu/ring/sim.py) runs P virtual devices on any machine, so P up to
  SIMULATED_MAX is *simulated* (beyond it a simulation teaches nothing more and takes long);
- a recorded run: the P it holds are *recorded*;
- every other P is *model only*: the cost model predicts it (gpu/ring/model.py), nothing runs.
The runner measures with the ring backend of P devices when P > 1 can run here, and with the
single-device backend otherwise (P = 1, or a model-only P), so the single-device algorithms keep
working whatever P shows.

Counting GPUs imports CuPy, which takes seconds: `backend_for` (called on the runner's thread)
counts them and remembers the count, and the GUI thread only reads what was remembered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu.backend_factory import BACKENDS, REPLAY, RING_BACKEND, BackendRequest
from gpu.backends.backend import Backend
from gpu.ring.backend import cuda_device_count
from gpu.ring.schedule import MAX_DEVICES

if TYPE_CHECKING:
    from ..app_state import AppState

#: The most virtual devices the CPU backend simulates when asked from the app.
SIMULATED_MAX = 16

MEASURED, SIMULATED, RECORDED, MODEL = "measured", "simulated", "recorded", "model only"

#: Model-only device counts the control always offers: powers of two up to MAX_DEVICES.
MODEL_COUNTS = tuple(2**i for i in range(MAX_DEVICES.bit_length()) if 2**i <= MAX_DEVICES)

_gpus_present: dict[str, int] = {}


def count_cuda_devices() -> int:
    """CUDA devices present (imports CuPy: call it off the GUI thread); remembered."""
    count = cuda_device_count()
    _gpus_present["cuda"] = count
    return count


def known_cuda_devices() -> int | None:
    """The GPU count found by the last `count_cuda_devices`, None before any."""
    return _gpus_present.get("cuda")


@dataclass(frozen=True)
class DeviceChoice:
    """One entry of the Devices control: P and what the app does with it here."""

    devices: int
    mode: str  # MEASURED, SIMULATED, RECORDED or MODEL

    @property
    def label(self) -> str:
        if self.devices == 1 and self.mode != MODEL:
            return "1 (one device)"
        return f"{self.devices} · {self.mode}"


def runnable_limit(kind: str) -> int:
    """The largest P the runner can run on a backend of `kind` (1: none beyond one device)."""
    if kind == REPLAY:
        return 1
    if kind == "cuda":
        return max(1, known_cuda_devices() or 1)
    return SIMULATED_MAX  # cpu, and any backend that is not a GPU: the NumPy ring


def mode_for(devices: int, kind: str, recorded: Iterable[int] = ()) -> str:
    """What P = `devices` is on a backend of `kind` (`recorded`: the P a recorded run holds)."""
    if kind == REPLAY:
        return RECORDED if devices in set(recorded) else MODEL
    if devices == 1:
        return MEASURED
    if devices <= runnable_limit(kind):
        return MEASURED if kind == "cuda" else SIMULATED
    return MODEL


def device_choices(
    kind: str, recorded: Iterable[int] = (), current: int = 1
) -> tuple[DeviceChoice, ...]:
    """The control's entries: every P the backend runs (or the recording holds), the model's
    powers of two up to 1024, and `current` whatever it is, in increasing P."""
    recorded = tuple(recorded)
    counts = set(MODEL_COUNTS) | set(recorded) | {1, current}
    if kind != REPLAY:
        counts |= set(range(1, runnable_limit(kind) + 1))
    return tuple(DeviceChoice(p, mode_for(p, kind, recorded)) for p in sorted(counts))


def ring_span(devices: int, kind: str) -> int:
    """How many devices the runner's backend should span for P = `devices`."""
    return devices if 1 < devices <= runnable_limit(kind) else 1


def backend_span(backend: object) -> int:
    """How many devices a running backend spans (a RingBackend's P; 1 for any other)."""
    return int(getattr(backend, "devices", 1))


def backend_for(
    choice: str,
    devices: int,
    make: Callable[[BackendRequest], Backend] = BACKENDS,
    path: str = "",
) -> Backend:
    """The backend to measure with for backend `choice` ("auto", "cuda", "cpu", or "recorded"
    with the file at `path`) and P devices, made by `make` (gpu/backend_factory.py): the ring's
    over P devices where P > 1 runs here, else the backend of one device. Runs on the runner's
    thread: it may import CuPy to count the GPUs."""
    if choice == "recorded":
        return make(BackendRequest(REPLAY, path=path))
    if devices > 1:
        kind = _resolve(choice)
        span = ring_span(devices, kind)
        if span > 1:
            return make(BackendRequest(RING_BACKEND, devices=span, on=kind))
    backend = make(BackendRequest(choice))
    if getattr(backend, "name", "") == "cuda":
        count_cuda_devices()  # CuPy is loaded by now: the Devices control can label P
    return backend


def _resolve(choice: str) -> str:
    """The kind "auto" stands for here ("cuda" when CuPy sees a GPU), counting the GPUs."""
    if choice not in ("auto", "cuda"):
        return choice
    gpus = count_cuda_devices()
    return "cuda" if choice == "cuda" or gpus else "cpu"


_CHOICE_KINDS = {"cpu": "cpu", "cuda": "cuda", "recorded": REPLAY}


def backend_kind(s: AppState) -> str:
    """The kind of backend P is judged against: the running one, else the one asked for."""
    if s.backend is not None:
        return s.backend_name
    if s.backend_choice == "auto":
        return "cuda" if known_cuda_devices() else "cpu"
    return _CHOICE_KINDS.get(s.backend_choice, "cpu")


def recorded_devices(s: AppState) -> tuple[int, ...]:
    """The P a replayed recording holds (P = 1 for its one-device results)."""
    if not s.replay or s.backend is None:
        return ()
    recording = getattr(s.backend.backend, "recording", None)
    if recording is None:
        return ()
    return recording.devices


def restart_needed(s: AppState) -> bool:
    """Whether the state's P needs another backend than the running one: never for a recorded
    run; always while none runs yet (the newest P is the one to start with)."""
    kind = backend_kind(s)
    if kind == REPLAY:
        return False
    if s.backend is None:
        return True
    return ring_span(s.devices, kind) != backend_span(s.backend.backend)


def parse_devices(raw: object) -> int | None:
    """A saved Devices value, or None when missing or no longer valid."""
    try:
        value = int(str(raw))
    except (TypeError, ValueError):
        return None
    return value if 1 <= value <= MAX_DEVICES else None
