"""What the runner says about a run that failed, and how it gives memory back: the outcome's
words for an exception, and the heap trim after each CPU run (app/work/runner.py)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import traceback
from collections.abc import Callable

from gpu.backends.backend import Backend, oom_result
from gpu.launch.cuda_kernels import KernelCompileError
from gpu.results import RunResult

from ..state.runs import Job


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim  # glibc only
    except (OSError, AttributeError):
        return None


def trim_heap() -> None:
    """Give freed heap memory back to the OS (glibc; elsewhere a no-op).

    Why: a CPU run frees its S and P (tens of MB), but once glibc's dynamic mmap threshold has
    risen, such blocks come from and return to the heap, which keeps them. The runner trims after
    each CPU run (outside its timing, ~0.3 ms), and, whatever the backend, once it has been idle
    for IDLE_TRIM_AFTER_S: results, plots and Qt churn the heap too, and at GPU run rates their
    retained free blocks made most of a slow RSS rise (docs/RELIABILITY.md). Never at once on
    going idle: a trim holds the allocator's lock, which a busy GUI thread would wait for."""
    trim = _malloc_trim()
    if trim is not None:
        with contextlib.suppress(Exception):
            trim(0)


def compile_summary(exc: KernelCompileError) -> str:
    """One line for the banner: the file and NVRTC's first error (the whole log goes to
    Details…)."""
    lines = [ln.strip() for ln in (exc.log or "").splitlines() if ln.strip()]
    first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
    name = getattr(exc.path, "name", str(exc.path))
    return f"{name} failed to compile" + (f": {first}" if first else "")


def oom_outcome_result(
    job: Job, backend_name: str, backend: Backend, exc: BaseException
) -> RunResult:
    """An out-of-memory result for a MemoryError that escaped a backend."""
    try:
        device = backend.device_info().name
    except Exception:
        device = backend_name
    return oom_result(job.config, job.algorithm, backend_name, device, exc)


def describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, (ValueError, RuntimeError, LookupError, OSError, MemoryError)):
        return f"{type(exc).__name__}: {text}" if not str(exc) else text
    # Unexpected: keep the last frame so a bug report has somewhere to start.
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" ({tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {text}{where}"
