"""The exit status says how the process ended, even when a signal arrives while it shuts down.

SIGTERM, SIGINT and SIGHUP end the program with 128 + the signal's number (143, 130, 129), and
their handlers remove any partial file first. Once `main` has returned, though, the interpreter
winds down: a Python handler no longer runs once the last bytecode has, and near the very end
the interpreter puts the default actions back, so a signal then killed the process by the
signal itself (a status of -15 or -2 to a parent) or was lost. So, from the moment `main`
returns (`shutting_down`), the ending signals are only noted (and partial files removed), and
the last exit hook (`finish_at_exit`, registered first so that it runs after every other)
flushes the standard streams and ends the process with 128 + the noted signal, else with the
status `main` returned: nothing is left for a signal to interrupt.

No Qt here: the command line and the desktop app share it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from collections.abc import Callable

ENDING_SIGNALS: tuple[signal.Signals, ...] = tuple(
    s for s in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)) if s is not None
)

_status: int | None = None  # what main returned, once it has
_signal: int | None = None  # the first ending signal noted since
_cleanup: Callable[[], None] | None = None


def finish_at_exit(cleanup: Callable[[], None] | None = None) -> None:
    """Call first thing (before anything else registers an exit hook): the hook that ends
    the process runs last. `cleanup` runs when a signal is noted (remove partial files)."""
    global _cleanup
    _cleanup = cleanup
    atexit.register(_finish)


def shutting_down(status: int) -> None:
    """`main` returned `status`: note ending signals from now on instead of acting on them."""
    global _status
    _status = status
    for signum in ENDING_SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing to do
            signal.signal(signum, _note)


def _note(signum: int, frame: object) -> None:
    global _signal
    if _signal is None:
        _signal = signum
    if _cleanup is not None:
        with contextlib.suppress(Exception):
            _cleanup()


def _finish() -> None:
    if _status is None:  # main never returned (an exception ends the process its own way)
        return
    for signum in ENDING_SIGNALS:  # from here on nothing runs that a signal could interrupt
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(128 + _signal if _signal is not None else _status)
