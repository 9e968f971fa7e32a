"""A long read that whoever asked for it can stop: a window that closes during a 250 MB open,
a signal that ends the program, a newer open that supersedes a slow one.

Checking a large recording builds hundreds of thousands of results, one at a time, in pure
Python: tens of seconds on a slow machine. Nothing outside the reading thread can interrupt
that, and a program that ends waits for it (a closed window's process ran on for 25-35 s). So
the reader runs the read inside `stoppable(hook)`, and the loops over a file's items call
`check_stop()`, which raises ReadStopped once the hook says so. The hook travels with the
thread's context (a ContextVar): no signature between the reader and the loops has to carry it,
and a thread that set none reads to the end.

No Qt here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from ..errors import ReadStopped

_hook: ContextVar[Callable[[], bool] | None] = ContextVar("tilescope_read_stop", default=None)


@contextlib.contextmanager
def stoppable(stop: Callable[[], bool]) -> Iterator[None]:
    """Reads in this block (on this thread) stop with ReadStopped once `stop()` is true."""
    token = _hook.set(stop)
    try:
        yield
    finally:
        _hook.reset(token)


def check_stop() -> None:
    """Raise ReadStopped if the read running on this thread was asked to stop."""
    stop = _hook.get()
    if stop is not None and stop():
        raise ReadStopped("the read was stopped")
