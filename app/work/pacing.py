"""One policy for work that follows a stream of changes: coalesced, at most once per interval.

`coalesced(func, interval_ms)` returns a callable. The first call starts a timer; calls made
before it fires only replace the arguments; when it fires, `func` runs once with the newest
arguments. A steady stream of calls therefore runs `func` once per interval (a throttle, never
starved as a debounce would be), a burst runs it once, and the last call always runs. With an
interval of 0 a burst that arrives within one turn of the event loop runs it once.

It is superqt's trailing throttle (`qthrottled(leading=False)`); the intervals the app uses are
named here, so every pane that follows the slider is paced the same way.

`once_per_turn(func)` is for what follows the slider's every move (its markers): the first call
in a turn of the event loop runs at once, so a single move repaints its cursor and markers
together; calls after it in the same turn (a fast drag delivers several moves per frame) only
note that a run is due, and `func` runs once more when the event loop turns (a posted event).
A burst costs two runs and two repaints, whatever its length.

`settled(func, pause_ms)` is the other policy, for text a reader reads rather than watches (the
explain pane, the lesson strip): `func` runs once the calls have paused for `pause_ms`, with the
newest arguments, so a drag lays the text out when it pauses or ends, never on every move.

`own_turn(func)` is for the GUI thread's larger pieces of work that fall due together after a
change (the model curves' redraw, the legends' and ranges' pass): each waits for a turn of
the event loop of its own, oldest first, so no turn runs them all and timers and repaints run
between them. `before_paint(func)` runs `func` once at the start of the next turn, before its
repaints, however often it was asked for in this one (the roof labels, which every range change
of a turn would otherwise place again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt, QTimer
from superqt.utils import qthrottled

#: Redraw of the measured series after results arrive: at most once a frame.
RESULTS_MS = 16
#: The explain pane's and the lesson strip's texts: laid out once the slider has rested this
#: long (several ms of layout each; nobody reads them while the slider moves).
PAUSE_MS = 120
#: The animation's lanes while the slider moves (each build is tens of ms of a worker).
LANES_MS = 150
#: The kernel source highlight while the animation plays.
SOURCE_MS = 150
#: Results that arrive while the model curves of their family are being worked out wait for
#: them up to this long and are drawn in the turn after theirs: the plots' ranges and legends
#: are then set once, for both.
MODEL_WAIT_MS = 100
#: Results of one config that the runner is still measuring (the other algorithms of a new
#: shape or N) are drawn together once the last arrives, or this long after the first: drawn
#: as each arrives, every one costs a pass over every plot and a repaint, and on a GPU they
#: arrive tens to hundreds of ms apart.
ARRIVALS_HOLD_MS = 400


def coalesced(func: Callable[..., Any], interval_ms: int, parent: QObject | None = None) -> Any:
    """`func`, paced by the policy in the module docstring. The result has `flush()` (run a
    pending call now) and `cancel()` (drop it)."""
    return qthrottled(
        func, interval_ms, leading=False, timer_type=Qt.TimerType.PreciseTimer, parent=parent
    )


class Settled(QObject):
    """`func`, run once the calls have paused for `pause_ms` (see the module docstring)."""

    def __init__(
        self, func: Callable[..., Any], pause_ms: int, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self._func = func
        self._args: tuple[Any, ...] = ()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(pause_ms)
        self._timer.timeout.connect(self._fire)

    def __call__(self, *args: Any) -> None:
        self._args = args
        self._timer.start()  # a call while waiting starts the wait again

    @property
    def pending(self) -> bool:
        return self._timer.isActive()

    def flush(self) -> None:
        """Run a waiting call now."""
        if self._timer.isActive():
            self._timer.stop()
            self._fire()

    def cancel(self) -> None:
        self._timer.stop()

    def _fire(self) -> None:
        args, self._args = self._args, ()
        self._func(*args)


def settled(func: Callable[..., Any], pause_ms: int, parent: QObject | None = None) -> Settled:
    """`func`, run when its calls pause (see the module docstring)."""
    return Settled(func, pause_ms, parent)


_TURN = QEvent.Type(QEvent.registerEventType())


class _DueCall(QObject):
    """`func` and whether a call of it is due: what OncePerTurn and BeforePaint share."""

    def __init__(self, func: Callable[[], Any], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._func = func
        self._due = False

    @property
    def pending(self) -> bool:
        return self._due

    def flush(self) -> None:
        """Run a due call now."""
        if self._due:
            self._due = False
            self._func()


class OncePerTurn(_DueCall):
    """`func`, run at the first call of a turn of the event loop and once more at its end when
    called again meanwhile (see the module docstring)."""

    def __init__(self, func: Callable[[], Any], parent: QObject | None = None) -> None:
        super().__init__(func, parent)
        # A call ran in this turn and the turn's end is posted; `_due`: called again since.
        self._in_turn = False

    def __call__(self) -> None:
        if self._in_turn:
            self._due = True
            return
        self._in_turn = True
        QCoreApplication.postEvent(self, QEvent(_TURN))
        self._func()

    def event(self, event: QEvent) -> bool:
        if event.type() == _TURN:
            self._in_turn = False
            self.flush()
            return True
        return super().event(event)


def once_per_turn(func: Callable[[], Any], parent: QObject | None = None) -> OncePerTurn:
    """`func`, run at most at the start and at the end of a turn of the event loop."""
    return OncePerTurn(func, parent)


class BeforePaint(_DueCall):
    """`func`, run once at the start of the next turn of the event loop, before the repaints
    that turn delivers (a posted event of high priority), however often it was asked for.

    For work that only places things (labels beside lines that a range change moved): a
    state change moves the view's range several times in one turn, and placing the labels
    after each move would cost several placements for one picture. A flush runs a due call
    now; its posted event then finds nothing to do."""

    def __call__(self) -> None:
        if not self._due:
            self._due = True
            QCoreApplication.postEvent(
                self, QEvent(_BEFORE_PAINT), Qt.EventPriority.HighEventPriority.value
            )

    def event(self, event: QEvent) -> bool:
        if event.type() == _BEFORE_PAINT:
            self.flush()
            return True
        return super().event(event)


def before_paint(func: Callable[[], Any], parent: QObject | None = None) -> BeforePaint:
    """`func`, run at most once per turn of the event loop, before its repaints."""
    return BeforePaint(func, parent)


_BEFORE_PAINT = QEvent.Type(QEvent.registerEventType())


class _TurnQueue(QObject):
    """The jobs waiting for a turn of their own, oldest first; one runs per turn.

    A zero-interval timer, not a posted event, starts each: Qt delivers a chain of posted
    events ahead of due timers (a 10 ms heartbeat was seen starved for 50 ms by a chain of
    5 ms events), while timers that fall due meanwhile run between two timer-started jobs.
    The timer is started once the events posted before it have been delivered (a posted
    event of low priority does it): started at once, it would fall due ahead of a timer that
    falls due while those events run (a change's repaint), and the job would run straight
    after them."""

    def __init__(self) -> None:
        super().__init__(QCoreApplication.instance())
        self.jobs: list[OwnTurn] = []
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._run_one)
        self._arming = False

    def add(self, job: OwnTurn) -> None:
        if job not in self.jobs:
            self.jobs.append(job)
        self._arm()

    def remove(self, job: OwnTurn) -> None:
        if job in self.jobs:
            self.jobs.remove(job)

    def _arm(self) -> None:
        if not self._arming and not self._timer.isActive():
            self._arming = True
            QCoreApplication.postEvent(
                self, QEvent(_ARM_TURN), Qt.EventPriority.LowEventPriority.value
            )

    def event(self, event: QEvent) -> bool:
        if event.type() == _ARM_TURN:
            self._arming = False
            if self.jobs and not self._timer.isActive():
                self._timer.start()
            return True
        return super().event(event)

    def _run_one(self) -> None:
        if not self.jobs:
            return
        job = self.jobs.pop(0)
        try:
            if shiboken6.isValid(job):  # its owner may have gone meanwhile
                job.run()
        finally:
            # The next job in a later turn, after the events this one posted (its repaint).
            if self.jobs:
                self._arm()


_ARM_TURN = QEvent.Type(QEvent.registerEventType())
_turns: _TurnQueue | None = None


def _turn_queue() -> _TurnQueue:
    global _turns
    app = QCoreApplication.instance()
    if _turns is None or _turns.parent() is not app:
        _turns = _TurnQueue()
    return _turns


class OwnTurn(QObject):
    """`func`, run in a turn of the event loop of its own (see `own_turn`)."""

    def __init__(self, func: Callable[..., Any], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._func = func
        self._args: tuple[Any, ...] = ()
        self._due = False

    def __call__(self, *args: Any) -> None:
        self._args = args
        self._due = True
        _turn_queue().add(self)

    @property
    def pending(self) -> bool:
        return self._due

    def run(self) -> None:
        if self._due:
            self._due = False
            args, self._args = self._args, ()
            self._func(*args)

    def flush(self) -> None:
        """Run a due call now."""
        if self._due:
            _turn_queue().remove(self)
            self.run()

    def cancel(self) -> None:
        self._due = False
        self._args = ()
        _turn_queue().remove(self)


def own_turn(func: Callable[..., Any], parent: QObject | None = None) -> OwnTurn:
    """`func`, run in a turn of the event loop of its own, with the newest arguments.

    The GUI thread's larger pieces of work (a model redraw, a relayout of the legends) fall
    due together after a change: run in the same turn they make one long
    stall. Each queued here runs in its own turn, oldest first, so timers, input and the
    repaints of each piece run between them. A call while waiting only replaces the
    arguments."""
    return OwnTurn(func, parent)
