"""A clock for the stall tests on a shared machine.

A stall test measures the gaps between the ticks of a timer on the GUI thread. On a machine
whose cores are shared with other processes, a gap also holds the time the GUI thread was ready
to run but waited for a core, which says how busy the machine is, not what the code did. This
clock is the wall clock minus that wait (Linux's per-thread schedstat), so a gap still counts the
GUI thread's own work and every wait the code made it do (a lock, the GIL, a blocking call), and
no longer the other processes' turns on the CPU. Where schedstat is missing it is the wall clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path


def stall_clock() -> Callable[[], float]:
    """A clock in seconds for the calling thread (make it on the GUI thread)."""
    path = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat")
    try:
        int(path.read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return time.monotonic

    def now() -> float:
        run_delay_ns = int(path.read_text().split()[1])  # time spent waiting for a CPU
        return time.monotonic() - run_delay_ns * 1e-9

    return now
