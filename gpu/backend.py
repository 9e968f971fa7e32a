"""The one interface every backend implements, and how `auto` picks one.

Backends are imported lazily: CuPy can take seconds to import and is optional, so the CPU path and
the cost model never pay for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .config import AttentionConfig
from .results import DeviceInfo, RunResult

BACKEND_NAMES = ("auto", "cuda", "cpu")


@dataclass(frozen=True)
class RunOptions:
    """How to measure: warm-up and repeats for timing, a reference check, a memory budget, and
    whether to sample the kernels' hardware counters after timing them (measured traffic)."""

    warmup: int = 1
    repeats: int = 5
    check: bool = False
    #: Emulates a smaller GPU (CUDA: CuPy pool limit) or caps RAM use (CPU). None = no limit.
    budget_bytes: int | None = None
    seed: int = 0
    #: Sample DRAM/L2 bytes and unit activity per kernel (CUDA, gpu.profiler). The timed runs
    #: stay unsampled; the counters come from separate launches after them.
    profile: bool = False


class BackendUnavailable(RuntimeError):
    """The backend cannot run on this machine (no CUDA device, CuPy missing, ...)."""


class Backend(Protocol):
    name: str

    def device_info(self) -> DeviceInfo: ...

    def algorithms(self) -> tuple[str, ...]:
        """The algorithm ids this backend can run here."""
        ...

    def run(
        self, config: AttentionConfig, algorithm: str, options: RunOptions | None = None
    ) -> RunResult: ...


def cuda_available() -> bool:
    """True when CuPy imports and sees a CUDA device; never raises."""
    try:
        import cupy
    except Exception:
        return False
    try:
        return bool(cupy.is_available())
    except Exception:
        return False


def create_backend(name: str = "auto") -> Backend:
    """Build a backend by name; `auto` picks cuda when a device is present, else cpu."""
    if name == "auto":
        name = "cuda" if cuda_available() else "cpu"
    if name == "cpu":
        from .cpu_backend import CpuBackend

        return CpuBackend()
    if name == "cuda":
        if not cuda_available():
            raise BackendUnavailable(
                "cuda backend unavailable: CuPy is not installed or sees no CUDA device "
                "(install the cuda12 or cuda13 extra on a machine with an NVIDIA GPU)"
            )
        from .cuda_backend import CudaBackend

        return CudaBackend()
    raise ValueError(f"backend = {name!r} is not allowed: one of {', '.join(BACKEND_NAMES)}")
