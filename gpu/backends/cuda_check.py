"""Whether this machine can run the cuda backend: a quick check of file names that a window
can make while it starts, and CuPy's own answer, which imports it (seconds) and is final."""

from __future__ import annotations

import glob
import importlib.util
import sys

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
