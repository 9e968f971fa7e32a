"""The lesson strip: the guided first run above the plots, four steps with Back and Next.

Each step (app/state/lesson.py) says one point of the lesson with the figures of the config
on screen and names the view it is about; the window shows that view (`focusWanted`). The
strip follows the point on screen like the explain pane, from the same results at N (the window
works them out once for both): the texts are made off the GUI thread once the slider rests
(`settled`, app/work/pacing.py), never on every move. Dismissing it is remembered
(`dismissed`); Help ▸ "The lesson, step by step" opens it again.
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import QEvent, Signal
from PySide6.QtWidgets import QFrame, QGridLayout, QSizePolicy, QToolButton, QWidget

from gpu.results import RunResult

from ..kit.elided_label import ElidedLabel
from ..kit.plain_text import PlainLabel
from ..state.app_state import AppState
from ..state.lesson import STEPS, LessonStep, lesson_steps
from ..state.point_inputs import PointInputs
from ..work.background import LatestOnly
from ..work.pacing import PAUSE_MS, settled


class LessonStrip(QFrame):
    """objectName lessonStrip. See the module docstring."""

    focusWanted = Signal(str)
    #: The N the step shown describes: the window moves the slider there.
    pointWanted = Signal(int)
    dismissed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("lessonStrip")
        self.setAccessibleName("The lesson, step by step")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        # Title and ✕ on top, the step's text below, Back and Next under it: the strip heads
        # the explain pane, a narrow column.
        grid = QGridLayout(self)
        grid.setContentsMargins(10, 2, 4, 4)
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(2)
        self.title = ElidedLabel()
        self.title.setObjectName("lessonTitle")
        bold = self.title.font()
        bold.setBold(True)
        self.title.setFont(bold)
        grid.addWidget(self.title, 0, 0, 1, 3)
        self.close_button = self._button(
            "lessonClose",
            "✕",
            "Close the lesson (Help ▸ The lesson, step by step opens it again).",
            self.dismiss,
        )
        grid.addWidget(self.close_button, 0, 3)
        self.text = PlainLabel()
        self.text.setObjectName("lessonText")
        self.text.setWordWrap(True)
        self.text.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        grid.addWidget(self.text, 1, 0, 1, 4)
        self.back = self._button("lessonBack", "‹ Back", "The previous step.", self.go_back)
        self.next = self._button("lessonNext", "Next ›", "The next step.", self.go_next)
        grid.addWidget(self.back, 2, 1)
        grid.addWidget(self.next, 2, 2, 1, 2)
        for b in (self.back, self.next, self.close_button):
            b.setAutoRaise(True)

        grid.setColumnStretch(0, 1)
        self.step = 0
        self.steps: tuple[LessonStep, ...] = ()
        self._inputs: PointInputs | None = None
        self._made: PointInputs | None = None
        self._paced = settled(self._make, PAUSE_MS, parent=self)
        self.worker = LatestOnly(self)
        self._show()

    def _button(self, name, text, tip, slot) -> QToolButton:  # type: ignore[no-untyped-def]
        b = QToolButton(self)
        b.setObjectName(name)
        b.setText(text)
        b.setToolTip(tip)
        b.clicked.connect(slot)
        return b

    # ------------------------------------------------------------------ following the state

    def follow(self, s: AppState, results: Mapping[str, RunResult]) -> None:
        """The point on screen: the state and the shown algorithms' results at its N."""
        inputs = PointInputs.from_state(s, results)
        if inputs == self._inputs:
            return
        self._inputs = inputs
        if self.isVisible():
            self._paced()

    @property
    def busy(self) -> bool:
        """Texts are waiting for the slider to rest, or being made."""
        return self._paced.pending or self.worker.busy

    def showEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().showEvent(event)
        self._fit_buttons()
        self._paced()

    def changeEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().changeEvent(event)
        if event.type() in (QEvent.Type.StyleChange, QEvent.Type.FontChange):
            self._fit_buttons()

    def _fit_buttons(self) -> None:
        """Next stays where it is while its text turns to "Done": as wide as either (in the
        style in use, which a theme's style sheet pads)."""
        shown = self.next.text()
        widest = 0
        for text in ("Next ›", "Done"):
            self.next.setText(text)
            widest = max(widest, self.next.sizeHint().width())
        self.next.setText(shown)
        self.next.setMinimumWidth(widest)

    def _make(self) -> None:
        inputs = self._inputs
        if inputs is None or inputs == self._made or not self.isVisible():
            return
        self._made = inputs
        self.worker.submit(lambda: lesson_steps(inputs), self._adopt)

    def flush(self) -> None:
        """Make the texts for the state shown now, now (tests)."""
        self._paced.flush()
        self.worker.flush()

    def _adopt(self, steps: tuple[LessonStep, ...]) -> None:
        self.steps = steps
        self._show()

    # ------------------------------------------------------------------ steps

    def _show(self) -> None:
        self.back.setEnabled(self.step > 0)
        self.next.setText("Done" if self.step == STEPS - 1 else "Next ›")
        head = f"{self.step + 1}/{STEPS}"
        if not self.steps:
            self.title.setText(head)
            self.text.setText("Working out the figures…")
            return
        step = self.steps[self.step]
        self.title.setText(f"{head} · {step.title}")
        self.text.setText(step.text)
        self._fit_height()

    def _fit_height(self) -> None:
        """As tall as the text needs at this width: never a cut line. It only grows while
        the slider changes the figures (a strip changing height relayouts the plots)."""
        m = self.layout().contentsMargins()
        text = self.text.heightForWidth(max(100, self.text.width()))
        rows = self.next.sizeHint().height() + self.close_button.sizeHint().height()
        need = text + rows + m.top() + m.bottom() + 4 + 2 * self.frameWidth()
        if need > self.minimumHeight() or need < self.minimumHeight() - 24:
            self.setFixedHeight(need)

    def resizeEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().resizeEvent(event)
        self._fit_height()

    def current(self) -> LessonStep | None:
        return self.steps[self.step] if self.steps else None

    def go_to(self, step: int) -> None:
        """Show `step`, its view and its point (the slider moves to the N it describes)."""
        self.step = max(0, min(STEPS - 1, step))
        self._show()
        if self.steps:
            current = self.steps[self.step]
            self.focusWanted.emit(current.focus)
            if current.seq_len is not None:
                self.pointWanted.emit(current.seq_len)

    def go_next(self) -> None:
        if self.step == STEPS - 1:
            self.dismiss()
        else:
            self.go_to(self.step + 1)

    def go_back(self) -> None:
        self.go_to(self.step - 1)

    def open(self, step: int = 0) -> None:
        """Show the strip at `step` (Help ▸ The lesson, step by step)."""
        self.setVisible(True)
        self.go_to(step)
        self._paced()

    def dismiss(self) -> None:
        self.setVisible(False)
        self.dismissed.emit()
