"""The Tiles tab's controls, made for the `tileAnimation` widget that owns and wires them: the
playback row above the canvas (restart, step back, play, step forward, speed, pass duration,
the timeline and the time), the mode tabs, and the choice of the second lane's kernel."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QSlider, QStyle, QTabBar, QToolButton, QWidget

from gpu.algorithms import ALGORITHMS, NAIVE, TILED

from ..kit.plain_text import PlainLabel, tooltip

TIMELINE_STEPS = 10_000
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
DURATIONS = (10.0, 20.0, 40.0, 60.0, 120.0)


class PlaybackControls:
    """The playback row's widgets (children of `parent`) and the row that lays them out."""

    def __init__(self, parent: QWidget, duration_s: float) -> None:
        icon = QStyle.StandardPixmap
        self.play_button = _button(
            parent, "animPlay", "Play", "Play / pause (Space)", icon.SP_MediaPlay
        )
        self.back_button = _button(
            parent,
            "animStepBack",
            "Step",
            "One step back (← with the canvas focused)",
            icon.SP_MediaSeekBackward,
        )
        self.fwd_button = _button(
            parent,
            "animStepForward",
            "Step",
            "One step forward (→ with the canvas focused)",
            icon.SP_MediaSeekForward,
        )
        self.fwd_button.setLayoutDirection(Qt.LayoutDirection.RightToLeft)  # icon after the text
        self.restart_button = _button(
            parent, "animRestart", "", "Back to the start (Home)", icon.SP_MediaSkipBackward
        )
        self.speed = QComboBox(parent)
        self.speed.setObjectName("animSpeed")
        for s in SPEEDS:
            self.speed.addItem(f"{s:g}×", s)
        self.speed.setCurrentIndex(SPEEDS.index(1.0))
        self.duration = QComboBox(parent)
        self.duration.setObjectName("animDuration")
        for d in DURATIONS:
            self.duration.addItem(f"pass = {d:g} s", d)
        if duration_s in DURATIONS:
            self.duration.setCurrentIndex(DURATIONS.index(duration_s))
        else:
            self.duration.addItem(f"pass = {duration_s:g} s", duration_s)
            self.duration.setCurrentIndex(self.duration.count() - 1)
        self.timeline = QSlider(Qt.Orientation.Horizontal, parent)
        self.timeline.setObjectName("animTimeline")
        self.timeline.setRange(0, TIMELINE_STEPS)
        self.time_label = PlainLabel(parent)
        self.time_label.setObjectName("animTime")
        self.time_label.setMinimumWidth(
            self.time_label.fontMetrics().horizontalAdvance("888 µs / 888 µs") + 6
        )
        self.row = QHBoxLayout()
        for w in (
            self.restart_button,
            self.back_button,
            self.play_button,
            self.fwd_button,
            self.speed,
            self.duration,
        ):
            self.row.addWidget(w)
        self.row.addWidget(self.timeline, 1)
        self.row.addWidget(self.time_label)


def mode_tabs(parent: QWidget, decode_mode: int) -> QTabBar:
    """The modes: the modeled schedule, a real trace recorded on a GPU, the backward, decode
    (enabled while the pass is decode)."""
    tabs = QTabBar(parent)
    tabs.setObjectName("animMode")
    tabs.addTab("Modeled schedule")
    tabs.addTab("Real GPU trace")
    tabs.addTab("Backward")
    tabs.addTab("Decode")
    tabs.setTabEnabled(decode_mode, False)  # until the pass is decode
    tabs.setTabToolTip(0, "Naive and tiled attention's tile schedule on one modeled clock")
    tabs.setTabToolTip(
        1, "What the GPU really did: every SM as a lane, every block where and when it ran"
    )
    tabs.setTabToolTip(
        2,
        "FlashAttention's backward in tile order: K/V tiles held on chip, Q/dO tiles "
        "streaming past, P recomputed, dQ accumulated with atomics",
    )
    tabs.setTabToolTip(
        3,
        "Decode (Pass: inference decode): the KV cache streaming from HBM into the SMs, "
        "naive's scores written to HBM, the split-KV kernel's partials and their merge",
    )
    tabs.setExpanding(False)
    return tabs


def lanes_box(parent: QWidget, fused: tuple[str, ...], algorithms: tuple[str, ...]) -> QComboBox:
    """The fused kernel the second lane plays against naive, of `fused`; the first of
    `algorithms` that is one, else tiled."""
    box = QComboBox(parent)
    box.setObjectName("animLanes")
    box.setToolTip(
        "The fused kernel the second lane plays against naive (the warp-specialized one "
        "shows its producer and consumer warps)"
    )
    for algo in fused:
        box.addItem(f"naive vs {ALGORITHMS[algo].label}", algo)
    second = next((a for a in algorithms if a != NAIVE), TILED)
    if second in fused:
        box.setCurrentIndex(fused.index(second))
    return box


def _button(
    parent: QWidget, name: str, text: str, tip: str, icon: QStyle.StandardPixmap
) -> QToolButton:
    b = QToolButton(parent)
    b.setObjectName(name)
    b.setText(text)
    b.setToolTip(tooltip(tip))
    b.setAccessibleName(tip.split(" (")[0])
    b.setIcon(parent.style().standardIcon(icon))
    b.setIconSize(QSize(14, 14))
    b.setToolButtonStyle(
        Qt.ToolButtonStyle.ToolButtonTextBesideIcon
        if text
        else Qt.ToolButtonStyle.ToolButtonIconOnly
    )
    return b
