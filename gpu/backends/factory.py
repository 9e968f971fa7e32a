"""Which backends exist and how `auto` picks one: cuda when CuPy sees a device, else cpu.

Backends are imported lazily: CuPy can take seconds to import and is optional, so the CPU path
and the cost model never pay for it.
"""

from __future__ import annotations

import glob
import importlib.util
import sys

from ..errors import BackendUnavailable
from .backend import Backend

BACKEND_NAMES = ("auto", "cuda", "cpu")

#: Device nodes an NVIDIA driver creates on Linux (/dev/dxg: a GPU shared into WSL).
_LINUX_GPU_NODES = ("/dev/nvidia[0-9]*", "/dev/dxg")


def cuda_possible() -> bool:
    """False only where no CUDA device can exist: CuPy is not installed, or on Linux no NVIDIA
    device node is present. A check of file names, no import (CuPy takes seconds to import),
    so a window can ask it while it starts; True still needs `cuda_available` to confirm."""
    if importlib.util.find_spec("cupy") is None:
        return False
    if sys.platform.startswith("linux"):
        return any(glob.glob(pattern) for pattern in _LINUX_GPU_NODES)
    return True


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
