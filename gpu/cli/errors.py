"""How the command line reports a failure: one line on stderr, never a traceback, and an exit
status that says whose fault it was (2 for bad flags, values or files; 1 for a failed check or
run; 130 for Ctrl-C). TILESCOPE_DEBUG=1 adds the traceback of an error nobody expected."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback

from gpu.config import ConfigError
from gpu.errors import BackendUnavailable, FileReadError, TilescopeError, UnsupportedConfig
from gpu.launch.cuda_kernels import KernelCompileError

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_CHECK_FAILED = 1
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
DEBUG_ENV = "TILESCOPE_DEBUG"


class UsageError(Exception):
    """Bad command-line input: reported on one line, exit status 2."""


#: Errors in what the user gave (flags, values, files): exit 2.
BAD_INPUT: tuple[type[BaseException], ...] = (
    UsageError,
    ConfigError,
    FileReadError,
    FileExistsError,
    BackendUnavailable,
    UnsupportedConfig,
)


#: Failures of a run or a write the engine knows about: exit 1, no hint needed.
KNOWN_FAILURES: tuple[type[BaseException], ...] = (
    TilescopeError,
    KernelCompileError,
    MemoryError,
    OSError,
)


def one_line(exc: BaseException) -> str:
    """What went wrong, in one line: a compile failure's first compiler error, else the first
    line of the message, else the error's type."""
    if isinstance(exc, KernelCompileError):
        lines = [ln.strip() for ln in (exc.log or "").splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
        return f"{exc.path.name} failed to compile" + (f": {first}" if first else "")
    if isinstance(exc, MemoryError):
        return f"out of memory{': ' + str(exc) if str(exc) else ''}"
    text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        text = f"{exc.filename}: {exc.strerror}"
    return text or type(exc).__name__


def report_error(exc: BaseException) -> int:
    """Print `exc` as one `tilescope: error:` line on stderr; return the exit status."""
    debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    line = one_line(exc)
    if isinstance(exc, BAD_INPUT):
        print(f"tilescope: error: {line}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, KNOWN_FAILURES):
        print(f"tilescope: error: {line}", file=sys.stderr)
        return EXIT_FAILED
    hint = "" if debug else f" (run with {DEBUG_ENV}=1 for a traceback)"
    print(f"tilescope: error: {type(exc).__name__}: {line}{hint}", file=sys.stderr)
    return EXIT_FAILED


def reader_gone() -> int:
    """The reader of stdout went away (`main.py model ... | head -n1`): what it wanted was
    written, so this is no error; stdout goes to the null device, so that flushing it at exit
    does not raise again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_OK
