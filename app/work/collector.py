"""The cyclic garbage collector kept off the GUI thread's busy moments.

Every full collection walks every tracked object while it holds the interpreter, and Python
starts one whenever enough objects have survived the young collections: in whatever event is
running then. Two things keep those walks short:

- `freeze_long_lived` moves the objects alive now out of the collector's reach (`gc.freeze`);
  later collections walk only what was made since. The window calls it once its rooms are
  built: over a hundred thousand objects (Qt wrappers, pyqtgraph items, modules) that live as
  long as the window, whose full collection takes 20-70 ms on 2 cores.
- `IdleCollector` does the full collection itself when the window has been at rest for a
  while (no change, no result, no run, no export), then freezes what survived. What a session
  keeps adds up (measured results, the figures worked out for them: 45,000 tracked objects
  after a 30 s config storm on 2 cores, 80,000 after four), and a full collection that Python
  starts walks all of it, 55-73 ms in the middle of an export's step; after one at rest, they
  walk only what was made since the window last rested.

Objects frozen while alive are freed as usual when their last reference goes; only a cycle
among frozen objects stays uncollected. So at rest, at most once every FULL_EVERY_S, the
collector unfreezes everything for one complete collection first.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

from ..state.units import fmt_seconds

log = logging.getLogger(__name__)

#: The window counts as at rest after this long without a change, a result or an export.
REST_S = 0.5
#: How often the collector looks whether the window is at rest.
CHECK_MS = 250
#: At rest, a collection over every object, the frozen ones too, at most this often.
FULL_EVERY_S = 1800.0


def freeze_long_lived() -> None:
    """Freeze the objects alive now (counting them walks them all: gc.get_freeze_count())."""
    gc.freeze()


def _young_collections() -> int:
    """How many times objects were found surviving a young collection, so far: none since the
    last look means nothing new reached the older generations."""
    return gc.get_stats()[1]["collections"]


class IdleCollector(QObject):
    """Collects and freezes at rest (see the module docstring). `busy()`: work is under way
    that a collection must not interrupt (a run, an export); `active()` notes a change."""

    def __init__(
        self,
        busy: Callable[[], bool],
        parent: QObject | None = None,
        rest_s: float = REST_S,
        check_ms: int = CHECK_MS,
    ) -> None:
        super().__init__(parent)
        self._busy = busy
        self._rest_s = rest_s
        now = time.monotonic()
        self._last_active = now
        self._last_full = now
        self._seen = _young_collections()
        #: (seconds, objects collected, everything unfrozen first) of each collection made.
        self.collections: list[tuple[float, int, bool]] = []
        self._timer = QTimer(self)
        self._timer.setInterval(check_ms)
        self._timer.timeout.connect(self._check)
        self._timer.start()

    def active(self, *_: object) -> None:
        self._last_active = time.monotonic()

    def stop(self) -> None:
        """No more collections (the window has closed)."""
        self._timer.stop()

    @property
    def running(self) -> bool:
        return self._timer.isActive()

    def _check(self) -> None:
        now = time.monotonic()
        if now - self._last_active < self._rest_s or _young_collections() == self._seen:
            return
        if self._busy():
            self._last_active = now
            return
        self.collect(full=now - self._last_full >= FULL_EVERY_S)

    def collect(self, full: bool = False) -> int:
        """Collect what was made since the last freeze (`full`: everything) and freeze what
        survived; returns how many objects were collected."""
        t0 = time.perf_counter()
        if full:
            gc.unfreeze()
            self._last_full = time.monotonic()
        found = gc.collect()
        gc.freeze()
        seconds = time.perf_counter() - t0
        self._seen = _young_collections()
        if len(self.collections) >= 100:
            del self.collections[:50]
        self.collections.append((seconds, found, full))
        log.debug(
            "collected %d objects at rest in %s (full: %s)", found, fmt_seconds(seconds), full
        )
        return found
