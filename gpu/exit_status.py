"""An ending signal ends the program within a bound, whatever it is doing, with 128 + its number.

SIGTERM, SIGINT and SIGHUP end the program with 128 + the signal's number (143, 130, 129), and
every partial file goes first; one the process was started with ignored (`nohup`'s SIGHUP, the
SIGINT of a shell's background job) stays ignored. The handler only notes the signal, removes
the partial files and wakes whoever ends the program; it raises nothing. An exception raised
from a handler lands in whatever Python code runs at that moment, and where C calls Python (a Qt
slot, the import machinery, NumPy's allocator hooks of the CPU backend's meter) it is printed as
"Exception ignored" and lost: the program ran on for half a minute with its children alive. So
the main thread acts on the flag where it can: the command line at its own safe points (`check`:
between runs, through the backends' cancel hook), the window's event loop through the response
it sets (`respond_with`: close the windows, quit the loop), `render`'s loop when it next turns.

The main thread may be unable to act: building the window, inside a long computation or a C
call that no signal interrupts. A watchdog thread therefore wakes at the signal itself (the
C-level handler writes the signal's number to a pipe, `signal.set_wakeup_fd`: no Python bytecode
has to run first) and, if the process is still alive GRACE_S later, ends it: the partial files
go, every descendant gets SIGKILL, the standard streams are flushed and the process exits with
128 + the signal's number. Only a C call that holds the interpreter lock for longer can delay
that.

Once `main` has returned (`shutting_down`), the interpreter winds down: a Python handler no
longer runs once the last bytecode has, and near the very end the interpreter puts the default
actions back, so a signal then killed the process by the signal itself (a status of -15 or -2
to a parent) or was lost. From then on the ending signals are only noted, and the last exit
hook (`finish_at_exit`, registered first so that it runs after every other) flushes the
standard streams and ends the process with 128 + the noted signal, else with the status `main`
returned: nothing is left for a signal to interrupt.

No Qt here: the command line and the desktop app share it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

ENDING_SIGNALS: tuple[signal.Signals, ...] = tuple(
    s for s in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)) if s is not None
)
#: How long the program may take to end by itself after an ending signal before the watchdog
#: ends it: the ending's bound is this plus a few milliseconds.
GRACE_S = 1.0

_status: int | None = None  # what main returned, once it has
_signal: int | None = None  # the first ending signal noted since
_cleanup: Callable[[], None] | None = None
_respond: Callable[[int], None] | None = None
_responded = False  # the main thread was asked to end
_installed = False
_wakeup_write: int | None = None
#: Ending signals the process was started with ignored (nohup's SIGHUP, the SIGINT of a shell's
#: background job): they stay ignored, as Python itself leaves an ignored SIGINT.
_ignored: frozenset[int] = frozenset()


def finish_at_exit(cleanup: Callable[[], None] | None = None) -> None:
    """Call first thing (before anything else registers an exit hook): the hook that ends
    the process runs last. `cleanup` runs when a signal is noted (remove partial files)."""
    global _cleanup
    _cleanup = cleanup
    atexit.register(_finish)


def install(cleanup: Callable[[], None] | None = None) -> bool:
    """The process's ending signals, once, from the main thread (see the module): the exit hook
    that runs last, handlers that note the signal, run `cleanup` and call the response
    (`respond_with`), and the watchdog. Called again, it only takes a `cleanup` given now.
    False where handlers cannot be installed (not the main thread, an embedding host)."""
    global _installed, _wakeup_write, _cleanup, _ignored
    if _installed:
        _cleanup = cleanup or _cleanup
        return True
    try:
        _ignored = frozenset(s for s in ENDING_SIGNALS if signal.getsignal(s) == signal.SIG_IGN)
        for signum in _handled():
            signal.signal(signum, _on_signal)
    except (ValueError, OSError, AttributeError):
        return False
    _installed = True
    finish_at_exit(cleanup)
    read, write = os.pipe()
    os.set_blocking(write, False)
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    _wakeup_write = write
    threading.Thread(
        target=_watch, args=(read,), name="tilescope-ending-watchdog", daemon=True
    ).start()
    return True


def respond_with(respond: Callable[[int], None] | None) -> Callable[[int], None] | None:
    """What the main thread does at the first ending signal (None: nothing, it looks itself:
    `signalled`, `check`). The handler calls it on the main thread, between two bytecodes of
    whatever runs there, so it must only ask for the ending (post an event), never carry it
    out. A response set after a signal came is called at once. Returns the one it replaces."""
    global _respond, _responded
    previous, _respond = _respond, respond
    if respond is not None and _signal is not None and not _responded and _status is None:
        _responded = True
        respond(_signal)
    return previous


def check() -> None:
    """The command line's safe point: if an ending signal came, raise KeyboardInterrupt
    (SIGINT) or SystemExit with 128 + its number, in the main thread's own code."""
    if _signal is None:
        return
    if _signal == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + _signal)


def signalled() -> int | None:
    """The first ending signal received, if any: the program is ending."""
    return _signal


def shutting_down(status: int) -> None:
    """`main` returned `status`: note ending signals from now on instead of acting on them."""
    global _status
    _status = status
    for signum in _handled():
        with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing to do
            signal.signal(signum, _on_signal if _installed else _note)


def _handled() -> list[signal.Signals]:
    return [s for s in ENDING_SIGNALS if s not in _ignored]


def _note(signum: int, frame: object) -> None:
    global _signal
    if _signal is None:
        _signal = signum
    if _cleanup is not None:
        with contextlib.suppress(Exception):
            _cleanup()


def _on_signal(signum: int, frame: object) -> None:
    global _responded
    _note(signum, frame)
    if _wakeup_write is not None:  # the watchdog wakes even where the C handler's byte is lost
        with contextlib.suppress(OSError):
            os.write(_wakeup_write, bytes([signum]))
    if _respond is None or _responded or _status is not None:
        return
    _responded = True
    _respond(signum)


def _watch(read: int) -> None:
    ending = {int(s) for s in ENDING_SIGNALS}
    while True:
        try:
            data = os.read(read, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        received = [b for b in data if b in ending]
        if received:
            break
    arrived = time.monotonic()
    global _signal
    if _signal is None:  # the Python handler has not run yet (the main thread is held)
        _signal = received[0]
    if _cleanup is not None:  # at once, whatever the main thread is doing
        with contextlib.suppress(Exception):
            _cleanup()
    time.sleep(max(0.0, GRACE_S - (time.monotonic() - arrived)))
    end_now()


def end_now() -> None:
    """End the process at once (the watchdog's last resort): partial files, descendants,
    streams, then 128 + the signal's number."""
    with contextlib.suppress(Exception):
        name = signal.Signals(_signal or signal.SIGTERM).name
        sys.stderr.write(f"tilescope: still ending {GRACE_S:g} s after {name}: stopped now\n")
    if _cleanup is not None:
        with contextlib.suppress(Exception):
            _cleanup()
    kill_descendants()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(128 + (_signal or signal.SIGTERM))


def kill_descendants() -> None:
    """SIGKILL every process this one started, and theirs."""
    try:
        import psutil

        children = psutil.Process().children(recursive=True)
    except Exception:  # no psutil, no /proc: the children die by their own watch
        return
    for child in children:
        with contextlib.suppress(Exception):
            child.kill()


def _finish() -> None:
    if _status is None:  # main never returned (an exception ends the process its own way)
        return
    if _signal is not None:  # whatever this process started goes with it
        kill_descendants()
    for signum in ENDING_SIGNALS:  # from here on nothing runs that a signal could interrupt
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(128 + _signal if _signal is not None else _status)
