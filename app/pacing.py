"""One policy for work that follows a stream of changes: coalesced, at most once per interval.

`coalesced(func, interval_ms)` returns a callable. The first call starts a timer; calls made
before it fires only replace the arguments; when it fires, `func` runs once with the newest
arguments. A steady stream of calls therefore runs `func` once per interval (a throttle, never
starved as a debounce would be), a burst runs it once, and the last call always runs. With an
interval of 0 a burst that arrives within one turn of the event loop runs it once.

It is superqt's trailing throttle (`qthrottled(leading=False)`); the intervals the app uses are
named here, so every pane that follows the slider is paced the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt
from superqt.utils import qthrottled

#: Redraw of the measured series after results arrive: at most once a frame.
RESULTS_MS = 16
#: The explain pane's rich text (several ms to lay out; nobody reads it 60 times a second).
EXPLAIN_MS = 60
#: The animation's lanes while the slider moves (each build is tens of ms of a worker).
LANES_MS = 150
#: The kernel source highlight while the animation plays.
SOURCE_MS = 150


def coalesced(func: Callable[..., Any], interval_ms: int, parent: QObject | None = None) -> Any:
    """`func`, paced by the policy in the module docstring. The result has `flush()` (run a
    pending call now) and `cancel()` (drop it)."""
    return qthrottled(
        func, interval_ms, leading=False, timer_type=Qt.TimerType.PreciseTimer, parent=parent
    )
