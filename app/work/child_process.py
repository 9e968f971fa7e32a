"""Child processes end with the program, however it ends.

A child started with "spawn" sits blocked on a pipe whose both ends it holds, so it never sees
the parent go: killed with SIGKILL, by the OOM killer or a segfault, or ended by `os._exit`, the
parent would leave it running, holding its memory (a CUDA context on a GPU host) and the
parent's stdout, so that `main.py render ... | grep ...` never ends. Each child therefore runs
`die_with_parent` first:

- on Linux the kernel sends it SIGKILL when its parent thread ends (`prctl(PR_SET_PDEATHSIG)`),
  even while it is deep in a C call that holds the interpreter (a large `json.loads`);
- everywhere (macOS has no PDEATHSIG) a daemon thread checks every WATCH_INTERVAL_S that its
  parent is still the process that started it, and ends the child when it is not;
- Ctrl+C in a terminal reaches the whole process group: the child ignores SIGINT (it printed a
  KeyboardInterrupt traceback) and the parent, which handles it, shuts the child down. A child
  started with SIGINT blocked (app.work.background.start_compute_process) unblocks it once it
  ignores it.

A child does background work, so it runs at a lower scheduling priority (`lower_priority`):
on a machine of two cores a busy child would otherwise take a core from the GUI thread and
from the app's thread that reads the child's answers.

PDEATHSIG follows the *thread* that started the child, so `KeeperThread` starts children from
a thread that lives as long as the process. The resource tracker that multiprocessing starts
beside them reads a pipe the children hold: it ends on its own once they are gone.

No Qt here: this module runs in the children.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

#: How often a child checks that its parent is alive where the kernel cannot tell it.
WATCH_INTERVAL_S = 0.25
#: How much lower a child's scheduling priority is than the app's (POSIX nice).
BACKGROUND_NICENESS = 10
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Initializer of a child process: end it when `parent_pid` ends (see the module)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # its parent may have started it with SIGINT blocked
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform.startswith("linux"):
        _kill_me_with_parent()
    if os.getppid() != parent_pid:  # the parent ended before the kernel was asked
        os._exit(0)
    threading.Thread(
        target=_watch_parent, args=(parent_pid,), name="tilescope-parent-watch", daemon=True
    ).start()


def background_child(parent_pid: int) -> None:
    """Initializer of a child that does background work: it dies with `parent_pid` and yields
    the CPU to the app (see the module)."""
    die_with_parent(parent_pid)
    lower_priority()


def lower_priority() -> None:
    """This process at BACKGROUND_NICENESS below its parent; where it cannot be lowered, as
    it is."""
    with contextlib.suppress(OSError, AttributeError):  # no os.nice (Windows): as it is
        os.nice(BACKGROUND_NICENESS)


def _kill_me_with_parent() -> None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the watching thread still ends the child
        pass


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(WATCH_INTERVAL_S)
        if os.getppid() != parent_pid:  # re-parented: the parent is gone
            os._exit(0)


class KeeperThread:
    """One daemon thread that lives as long as the process and runs what it is given: children
    started from it are not killed when a short-lived worker thread ends (PDEATHSIG)."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue]] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._serve, name="tilescope-keeper", daemon=True)
        self._thread.start()

    def call(self, func: Callable[[], Any]) -> Any:
        """`func()` on the keeper thread; its result, or its exception raised here."""
        if threading.current_thread() is self._thread:
            return func()
        answer: queue.SimpleQueue = queue.SimpleQueue()
        self._calls.put((func, answer))
        ok, value = answer.get()
        if not ok:
            raise value
        return value

    def _serve(self) -> None:
        while True:
            func, answer = self._calls.get()
            try:
                answer.put((True, func()))
            except BaseException as exc:  # handed back to the caller
                answer.put((False, exc))
