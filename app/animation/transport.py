"""The modeled schedule's transport row (`Transport`, a part of the animation widget): back to
the start, a step back, play / pause, a step on, the speed, the pass's duration, a timeline to
scrub and the clock. It shows the player's state and says what the user asks for; the widget
does it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QSlider, QStyle, QToolButton, QWidget

from ..kit.plain_text import PlainLabel, tooltip
from ..state.units import fmt_seconds

TIMELINE_STEPS = 10_000
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
DURATIONS = (10.0, 20.0, 40.0, 60.0, 120.0)


class Transport:
    """The row's widgets (children of `parent`) in `layout`. `seek(fraction)` is called as the
    timeline moves; `playing()` says whether the player plays, so that a scrub pauses it and
    resumes it after."""

    def __init__(
        self,
        parent: QWidget,
        duration_s: float,
        *,
        toggle_play: Callable[[], None],
        step_back: Callable[[], None],
        step_forward: Callable[[], None],
        restart: Callable[[], None],
        set_speed: Callable[[float], None],
        set_duration: Callable[[float], None],
        seek: Callable[[float], None],
        playing: Callable[[], bool],
        play: Callable[[], None],
        pause: Callable[[], None],
    ) -> None:
        self._parent = parent
        self._seek, self._playing, self._play, self._pause = seek, playing, play, pause
        icon = QStyle.StandardPixmap
        self.play_button = self._button(
            "animPlay", "Play", "Play / pause (Space)", icon.SP_MediaPlay
        )
        self.back_button = self._button(
            "animStepBack",
            "Step",
            "One step back (← with the canvas focused)",
            icon.SP_MediaSeekBackward,
        )
        self.fwd_button = self._button(
            "animStepForward",
            "Step",
            "One step forward (→ with the canvas focused)",
            icon.SP_MediaSeekForward,
        )
        self.fwd_button.setLayoutDirection(Qt.LayoutDirection.RightToLeft)  # icon after the text
        self.restart_button = self._button(
            "animRestart", "", "Back to the start (Home)", icon.SP_MediaSkipBackward
        )
        self.play_button.clicked.connect(toggle_play)
        self.back_button.clicked.connect(step_back)
        self.fwd_button.clicked.connect(step_forward)
        self.restart_button.clicked.connect(restart)
        self.speed = QComboBox(parent)
        self.speed.setObjectName("animSpeed")
        for s in SPEEDS:
            self.speed.addItem(f"{s:g}×", s)
        self.speed.setCurrentIndex(SPEEDS.index(1.0))
        self.speed.currentIndexChanged.connect(
            lambda _i: set_speed(float(self.speed.currentData()))
        )
        self.duration = QComboBox(parent)
        self.duration.setObjectName("animDuration")
        for d in DURATIONS:
            self.duration.addItem(f"pass = {d:g} s", d)
        if duration_s in DURATIONS:
            self.duration.setCurrentIndex(DURATIONS.index(duration_s))
        else:
            self.duration.addItem(f"pass = {duration_s:g} s", duration_s)
            self.duration.setCurrentIndex(self.duration.count() - 1)
        self.duration.currentIndexChanged.connect(
            lambda _i: set_duration(float(self.duration.currentData()))
        )
        self.timeline = QSlider(Qt.Orientation.Horizontal, parent)
        self.timeline.setObjectName("animTimeline")
        self.timeline.setRange(0, TIMELINE_STEPS)
        self.timeline.valueChanged.connect(lambda v: seek(v / TIMELINE_STEPS))
        self.timeline.sliderPressed.connect(self._scrub_start)
        self.timeline.sliderReleased.connect(self._scrub_end)
        self._resume_after_scrub = False
        self.time_label = PlainLabel(parent)
        self.time_label.setObjectName("animTime")
        self.time_label.setMinimumWidth(
            self.time_label.fontMetrics().horizontalAdvance("888 µs / 888 µs") + 6
        )
        self.layout = QHBoxLayout()
        for w in (
            self.restart_button,
            self.back_button,
            self.play_button,
            self.fwd_button,
            self.speed,
            self.duration,
        ):
            self.layout.addWidget(w)
        self.layout.addWidget(self.timeline, 1)
        self.layout.addWidget(self.time_label)

    def _button(self, name: str, text: str, tip: str, icon: QStyle.StandardPixmap) -> QToolButton:
        b = QToolButton(self._parent)
        b.setObjectName(name)
        b.setText(text)
        b.setToolTip(tooltip(tip))
        b.setAccessibleName(tip.split(" (")[0])
        b.setIcon(self._parent.style().standardIcon(icon))
        b.setIconSize(QSize(14, 14))
        b.setToolButtonStyle(
            Qt.ToolButtonStyle.ToolButtonTextBesideIcon
            if text
            else Qt.ToolButtonStyle.ToolButtonIconOnly
        )
        return b

    def show_clock(self, fraction: float, t: float, total: float) -> None:
        """The timeline at `fraction` of the pass (without seeking) and the clock's text."""
        self.timeline.blockSignals(True)
        self.timeline.setValue(round(fraction * TIMELINE_STEPS))
        self.timeline.blockSignals(False)
        self.time_label.setText(f"{fmt_seconds(t)} / {fmt_seconds(total)}")

    def show_playing(self, playing: bool) -> None:
        """Play or Pause on the button, as the player is."""
        button = self.play_button
        if playing != button.property("playing"):
            button.setProperty("playing", playing)
            button.setText("Pause" if playing else "Play")
            pixmap = (
                QStyle.StandardPixmap.SP_MediaPause
                if playing
                else QStyle.StandardPixmap.SP_MediaPlay
            )
            button.setIcon(self._parent.style().standardIcon(pixmap))

    def _scrub_start(self) -> None:
        self._resume_after_scrub = self._playing()
        if self._resume_after_scrub:
            self._pause()

    def _scrub_end(self) -> None:
        if self._resume_after_scrub:
            self._play()
