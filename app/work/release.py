"""Large object graphs freed off the GUI thread, a few objects at a time.

A recording of 72,000 results is about a million objects. Whoever drops the last reference to
it frees them all in one C call that holds the interpreter: about 150 ms when a second large
recording replaces the first, on the GUI thread, which then cannot paint. `free_later(obj)`
hands the reference to one daemon thread instead. That thread waits until it holds the only
reference (others let go of theirs: the state, the runner), then takes the graph apart: it
empties the large containers into a work list and drops their members one at a time, so the
interpreter changes hands between them and no single free is long.

No Qt here.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from typing import Any

#: How long the thread waits for the other holders to let go before it drops its reference
#: anyway (the last holder then frees the graph, as it would have without this module).
WAIT_FOR_OTHERS_S = 10.0
#: A container with more members than this is emptied member by member; smaller ones are
#: freed whole (a result and its kernels are a few dozen objects).
LARGE = 16
#: Objects let go of between two pauses, and the pause: the thread then takes the interpreter
#: for well under a millisecond at a time and leaves it free in between, so the GUI thread
#: never queues behind it (a busy thread costs each of the GUI thread's returns from Qt into
#: Python up to the interpreter's 5 ms switch interval).
BATCH = 200
PAUSE_S = 0.002

_queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()
_freed = 0  # graphs taken apart so far (tests)


def free_later(obj: Any) -> None:
    """Take over a reference to `obj` and free what it holds off the calling thread. Drop your
    own references after the call."""
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_serve, name="tilescope-release", daemon=True)
            _thread.start()
    _queue.put(obj)


def freed() -> int:
    """How many graphs the thread has taken apart."""
    return _freed


def _serve() -> None:
    global _freed
    while True:
        held = [_queue.get()]
        deadline = time.monotonic() + WAIT_FOR_OTHERS_S
        # 2: the list's reference and getrefcount's own argument
        while sys.getrefcount(held[0]) > 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        _take_apart(held)
        _freed += 1


def _take_apart(work: list[Any]) -> None:
    """Empty `work`, moving the members of every large container into it before the container
    goes: each object is then freed on its own, never a million in one call."""
    done = 0
    while work:
        done += 1
        if done % BATCH == 0:
            time.sleep(PAUSE_S)
        item = work.pop()
        # 2: `item` and getrefcount's argument. A container someone else still holds is only
        # let go of: emptying it would change what they see.
        alone = sys.getrefcount(item) == 2
        if isinstance(item, dict):
            if alone and len(item) > LARGE:
                work.extend(item.values())
                item.clear()
        elif isinstance(item, list):
            if alone and len(item) > LARGE:
                work.extend(item)
                item.clear()
        elif isinstance(item, (tuple, frozenset, set)):
            if alone and len(item) > LARGE:
                work.extend(item)
        elif alone:
            fields = getattr(item, "__dict__", None)
            if isinstance(fields, dict):
                work.extend(fields.values())
        del item  # freed here if it was the last reference
