"""The ring runs the Ring tab can show, and the one-device results measured beside them.

A ring run is a `RunResult` of the `ring` algorithm with its `RingMeasurement`: recorded (from a
results file, e.g. `bench/bench_ring.py --out`), measured on GPUs this session, or simulated in
NumPy. The one-GPU results of the fused kernel (recorded beside the ring, or measured live on a
GPU) calibrate the model's throughput (`ring_model.MeasuredThroughput`) and are the measured
P = 1 points. CPU results of single-device algorithms are kept out: NumPy's speed says nothing
about a GPU's. No Qt here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from gpu.algorithms import ALGORITHMS, RING, fastest_fused_first
from gpu.config import AttentionConfig
from gpu.files.recording import Recording
from gpu.results import RunResult
from gpu.ring.model import MeasuredThroughput, Throughput
from gpu.ring_timeline import RingMeasurement

from ..family import cache_config, family, family_of
from ..recorded_run import RECORDED_DIR
from ..units import fmt_int

#: The two-H200 ring run shipped with the app (`bench/bench_ring.py --out …`), when present.
SHIPPED_RING_RECORDING = RECORDED_DIR / "h200x2_ring.json"

#: Fused kernels whose one-GPU results may calibrate the model, best first (the ring runs the
#: best one the GPU has): the registry's speed order.
FUSED_KERNELS = fastest_fused_first()

RECORDED, MEASURED, SIMULATED = "recorded", "measured", "simulated"


def shipped_ring_recording() -> Path | None:
    return SHIPPED_RING_RECORDING if SHIPPED_RING_RECORDING.is_file() else None


@dataclass(frozen=True)
class RingRun:
    """One ring result and where it came from (`source`: the file's name; '' when live)."""

    result: RunResult
    source: str = ""

    @property
    def measurement(self) -> RingMeasurement:
        assert self.result.ring is not None
        return self.result.ring

    @property
    def devices(self) -> int:
        return self.measurement.devices

    @property
    def config(self) -> AttentionConfig:
        return cache_config(self.result.config, RING)

    @property
    def kind(self) -> str:
        """RECORDED (from a file), SIMULATED (the NumPy ring) or MEASURED (GPUs, this session)."""
        if self.source or self.result.recorded:
            return RECORDED
        return SIMULATED if self.measurement.transport == "simulated" else MEASURED

    @property
    def total_ms(self) -> float | None:
        return self.result.total_ms

    def label(self) -> str:
        """'P = 2 · N = 65 536 · h=12 d=64 fp16 causal · recorded (nccl)'."""
        c = self.config
        mask = " causal" if c.causal else ""
        how = f"{self.kind} ({self.measurement.transport})"
        if self.source:
            how += f", {self.source}"
        return (
            f"P = {self.devices} · N = {fmt_int(c.seq_len)} · h={c.heads} d={c.head_dim} "
            f"{c.dtype}{mask} · {how}"
        )


def _ring_key(config: AttentionConfig, devices: int) -> tuple[AttentionConfig, int]:
    return cache_config(config, RING), devices


def _is_single(result: RunResult) -> bool:
    """A one-GPU result of a fused kernel on a GPU (what calibrates the ring's model)."""
    info = ALGORITHMS.get(result.algorithm)
    return info is not None and info.fused and result.backend == "cuda" and result.ring is None


class RingRuns:
    """Ring runs and one-GPU fused results, newest last; see the module docstring."""

    def __init__(self) -> None:
        self._runs: dict[tuple[AttentionConfig, int, str], RingRun] = {}
        #: One-GPU results by algorithm, each by its cache config, oldest first, with whether it
        #: came from a recording (kept as they are: copying tens of thousands of results to flag
        #: them would stall the GUI thread on opening).
        self._singles: dict[str, dict[AttentionConfig, tuple[RunResult, bool]]] = {}
        #: The same results filed by (ring family, algorithm): what the tab draws for one
        #: family is a lookup, whatever the other families hold.
        self._by_family: dict[tuple[AttentionConfig, str], dict[AttentionConfig, RunResult]] = {}
        #: Bumped by every result kept: `kernel` and `throughput` are worked out again only then.
        self._version = 0
        self._kernel: tuple[int, str | None] | None = None
        self._throughput: tuple[int, Throughput, MeasuredThroughput | None] | None = None
        #: Recordings whose one-GPU results are not sorted in yet: a recording can hold tens of
        #: thousands, so opening one takes only its ring runs; the rest waits until asked for.
        self._pending: list[tuple[tuple[RunResult, ...], str]] = []

    def __len__(self) -> int:
        return len(self._runs)

    def add(self, result: RunResult, source: str = "", recorded: bool = False) -> bool:
        """Keep `result` if it is a ring run or a one-GPU fused result; True when kept.
        `recorded`: it comes from a recorded run (file), whatever its own flag says."""
        if result.oom or result.total_ms is None:
            return False
        if result.ring is not None:
            run = RingRun(replace(result, recorded=True) if recorded else result, source)
            key = (*_ring_key(result.config, run.devices), run.kind)
            self._runs.pop(key, None)  # the newest goes last
            self._runs[key] = run
            self._version += 1
            return True
        if not _is_single(result):
            return False
        algorithm = result.algorithm
        key = cache_config(result.config, algorithm)
        self._singles.setdefault(algorithm, {})[key] = (result, recorded or result.recorded)
        fam = (family_of(result.config, RING), algorithm)
        self._by_family.setdefault(fam, {})[key] = result
        self._version += 1
        return True

    def add_all(
        self, results: Iterable[RunResult], source: str = "", recorded: bool = False
    ) -> int:
        return sum(self.add(r, source, recorded) for r in results)

    def add_recording(self, recording: Recording, path: str = "") -> int:
        source = os.path.basename(path) or "recorded run"
        rings = sum(self.add(r, source, recorded=True) for r in recording.ring_results)
        self._pending.append((recording.results, source))
        return rings

    def _settle(self) -> None:
        """Sort in the one-GPU results of recordings added since the last call."""
        pending, self._pending = self._pending, []
        for results, source in pending:
            for r in results:
                if r.ring is None:
                    self.add(r, source, recorded=True)

    def runs(self) -> tuple[RingRun, ...]:
        return tuple(self._runs.values())

    def find(self, config: AttentionConfig, devices: int) -> RingRun | None:
        """The newest run of exactly this config on `devices` devices, if any."""
        want = _ring_key(config, devices)
        found = None
        for (c, p, _kind), run in self._runs.items():
            if (c, p) == want:
                found = run
        return found

    def family_runs(self, config: AttentionConfig) -> dict[int, list[RingRun]]:
        """Runs in `config`'s family (any N) by P, each list by N."""
        fam = family_of(config, RING)
        out: dict[int, list[RingRun]] = {}
        for run in self._runs.values():
            if family(run.config) == fam:
                out.setdefault(run.devices, []).append(run)
        for runs in out.values():
            runs.sort(key=lambda r: r.config.seq_len)
        return out

    def at_config(self, config: AttentionConfig) -> dict[int, RingRun]:
        """The newest run of exactly `config` (this N) per P."""
        want = cache_config(config, RING)
        out: dict[int, RingRun] = {}
        for (c, p, _kind), run in self._runs.items():
            if c == want:
                out[p] = run
        return out

    # ---------------------------------------------------------------- one GPU

    def kernel(self) -> str | None:
        """The fused kernel the model is calibrated with: the one the newest GPU ring ran, else
        the best one measured on one GPU."""
        self._settle()
        if self._kernel is None or self._kernel[0] != self._version:
            self._kernel = (self._version, self._pick_kernel())
        return self._kernel[1]

    def _pick_kernel(self) -> str | None:
        for run in reversed(self._runs.values()):
            k = run.measurement.kernel
            if k in self._singles:
                return k
        return next((k for k in FUSED_KERNELS if k in self._singles), None)

    def singles(self, config: AttentionConfig) -> list[RunResult]:
        """One-GPU results of the calibrating kernel in `config`'s family, by N."""
        kernel = self.kernel()  # settles pending recordings
        found = self._by_family.get((family_of(config, RING), kernel or ""), {})
        return sorted(found.values(), key=lambda r: r.config.seq_len)

    def throughput(self, fallback: Throughput) -> MeasuredThroughput | None:
        """The calibrating kernel's measured throughput (None without one-GPU results)."""
        kernel = self.kernel()
        cached = self._throughput
        if cached is not None and cached[0] == self._version and cached[1] == fallback:
            return cached[2]
        measured = None
        if kernel is not None:
            entries = self._singles[kernel].values()
            results = [r for r, _ in entries]
            recorded = any(rec for _, rec in entries)
            source = f"{kernel} on one GPU, {'recorded' if recorded else 'measured'}"
            measured = MeasuredThroughput.from_results(results, kernel, source, fallback=fallback)
        self._throughput = (self._version, fallback, measured)
        return measured
