"""The `tileAnimation` widget: controls, the lanes canvas, online-softmax and source panels, and
a second mode, "Real GPU trace" (trace_panel.py): what the hardware did, SM by SM."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QElapsedTimer, Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QKeySequence, QShortcut, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSlider,
    QSplitter,
    QStackedWidget,
    QTabBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpu.algorithms import NAIVE, TILED
from gpu.config import AttentionConfig
from gpu.costmodel import DEFAULT_GPU, GPUS, GpuSpec

from ..background import LatestOnly
from ..pacing import LANES_MS, SOURCE_MS, coalesced
from ..state.animation.player import (
    DEFAULT_DURATION_S,
    Counters,
    Lane,
    LaneFrame,
    Player,
    build_lanes,
)
from ..state.units import fmt_seconds
from .canvas import TileCanvas, scene_for
from .softmax_panel import OnlineSoftmaxPanel
from .source_panel import SourcePanel

FRAME_MS = 16
TIMELINE_STEPS = 10_000
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
DURATIONS = (10.0, 20.0, 40.0, 60.0, 120.0)
GLIDE_S = 0.35


class TileAnimationWidget(QWidget):
    """Plays naive and tiled attention's HBM <-> SRAM tile schedule on one modeled clock.

    API for the main window: `set_config(config)` (resets the schedule; follow the slider
    live) and `set_gpu(spec)` (the modeled clock's GPU). Counters at the end of a play equal
    `gpu.costmodel.algorithm_cost` totals for all B·h heads.

    A new config's lanes are built off the GUI thread (tens of ms at N = 131072) by a LatestOnly
    worker, paced by app/pacing.py: while the slider moves only the newest config is built, at
    most every LANES_MS, and the finished lanes are swapped in at once (`configApplied`).
    Anything that needs the new lanes now (counters, frames, stepping) builds them on the spot
    (`flush`).
    """

    frameChanged = Signal()
    configApplied = Signal()
    modeChanged = Signal(int)

    MODEL_MODE, TRACE_MODE = 0, 1

    def __init__(
        self,
        parent: QWidget | None = None,
        config: AttentionConfig | None = None,
        gpu: GpuSpec | None = None,
        kernel_dir: Path | None = None,
        duration_s: float = DEFAULT_DURATION_S,
        algorithms: tuple[str, ...] = (NAIVE, TILED),
    ) -> None:
        super().__init__(parent)
        self.setObjectName("tileAnimation")
        self.player = Player(
            config or AttentionConfig(),
            gpu or GPUS[DEFAULT_GPU],
            algorithms=algorithms,
            duration_s=duration_s,
        )
        self._frames: list[LaneFrame] = []
        #: Wall seconds a step-forward takes to glide to the boundary (0: jump).
        self.glide_s = GLIDE_S
        self._pending_config: AttentionConfig | None = None
        self.lanes_worker = LatestOnly(self)
        # While the slider moves, lanes are built at most every LANES_MS (each build is tens of
        # ms of a worker that shares the GIL with this thread), always for the newest config.
        self._paced_build = coalesced(self._build, LANES_MS, parent=self)
        self._paced_source = coalesced(self._show_source, SOURCE_MS, parent=self)

        # controls
        self.play_button = self._button("animPlay", "▶ Play", "Play / pause (Space)")
        self.back_button = self._button("animStepBack", "◀ Step", "One step back (←)")
        self.fwd_button = self._button("animStepForward", "Step ▶", "One step forward (→)")
        self.restart_button = self._button("animRestart", "|◀", "Back to the start (Home)")
        self.play_button.clicked.connect(self.toggle_play)
        self.back_button.clicked.connect(self.step_back)
        self.fwd_button.clicked.connect(self.step_forward)
        self.restart_button.clicked.connect(self.restart)
        self.speed = QComboBox(self)
        self.speed.setObjectName("animSpeed")
        for s in SPEEDS:
            self.speed.addItem(f"{s:g}×", s)
        self.speed.setCurrentIndex(SPEEDS.index(1.0))
        self.speed.currentIndexChanged.connect(
            lambda _i: setattr(self.player, "speed", float(self.speed.currentData()))
        )
        self.duration = QComboBox(self)
        self.duration.setObjectName("animDuration")
        for d in DURATIONS:
            self.duration.addItem(f"pass = {d:g} s", d)
        if duration_s in DURATIONS:
            self.duration.setCurrentIndex(DURATIONS.index(duration_s))
        else:
            self.duration.addItem(f"pass = {duration_s:g} s", duration_s)
            self.duration.setCurrentIndex(self.duration.count() - 1)
        self.duration.currentIndexChanged.connect(self._on_duration)
        self.timeline = QSlider(Qt.Orientation.Horizontal, self)
        self.timeline.setObjectName("animTimeline")
        self.timeline.setRange(0, TIMELINE_STEPS)
        self.timeline.valueChanged.connect(self._on_timeline)
        self.timeline.sliderPressed.connect(self._on_scrub_start)
        self.timeline.sliderReleased.connect(self._on_scrub_end)
        self._resume_after_scrub = False
        self.time_label = QLabel(self)
        self.time_label.setObjectName("animTime")
        self.time_label.setMinimumWidth(150)
        controls = QHBoxLayout()
        for w in (
            self.restart_button,
            self.back_button,
            self.play_button,
            self.fwd_button,
            self.speed,
            self.duration,
        ):
            controls.addWidget(w)
        controls.addWidget(self.timeline, 1)
        controls.addWidget(self.time_label)

        # views
        self.canvas = TileCanvas(self)
        self.softmax_panel = OnlineSoftmaxPanel(self)
        self.source_panel = SourcePanel(self, kernel_dir=kernel_dir)
        bottom = QSplitter(Qt.Orientation.Horizontal, self)
        bottom.addWidget(self.softmax_panel)
        bottom.addWidget(self.source_panel)
        bottom.setSizes([560, 640])
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.canvas)
        split.addWidget(bottom)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setSizes([620, 230])
        self.splitter = split
        model_page = QWidget(self)
        model_lay = QVBoxLayout(model_page)
        model_lay.setContentsMargins(0, 0, 0, 0)
        model_lay.addLayout(controls)
        model_lay.addWidget(split, 1)
        self.model_page = model_page
        # Modes: the modeled schedule (above) or a real trace recorded on a GPU (built lazily:
        # it reads the shipped trace file only when first shown).
        self.mode_tabs = QTabBar(self)
        self.mode_tabs.setObjectName("animMode")
        self.mode_tabs.addTab("Modeled schedule")
        self.mode_tabs.addTab("Real GPU trace")
        self.mode_tabs.setTabToolTip(
            0, "Naive and tiled attention's tile schedule on one modeled clock"
        )
        self.mode_tabs.setTabToolTip(
            1, "What the GPU really did: every SM as a lane, every block where and when it ran"
        )
        self.mode_tabs.setExpanding(False)
        self.mode_tabs.currentChanged.connect(self.set_mode)
        self.pages = QStackedWidget(self)
        self.pages.addWidget(model_page)
        self._trace_panel = None
        self._pending_traces: tuple | None = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.mode_tabs)
        lay.addWidget(self.pages, 1)

        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self._tick)
        self._clock = QElapsedTimer()
        self.source_panel.sourceLoaded.connect(lambda _a: self._push_source(force=True))
        for key, slot in (
            (Qt.Key.Key_Space, self.toggle_play),
            (Qt.Key.Key_Right, self.step_forward),
            (Qt.Key.Key_Left, self.step_back),
            (Qt.Key.Key_Home, self.restart),
        ):
            sc = QShortcut(QKeySequence(key), self)
            sc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            sc.activated.connect(slot)
        self._apply_scene()
        self.refresh()

    def _button(self, name: str, text: str, tip: str) -> QToolButton:
        b = QToolButton(self)
        b.setObjectName(name)
        b.setText(text)
        b.setToolTip(tip)
        b.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        return b

    # ---- public API

    @property
    def trace_panel(self):
        """The real-trace page (app.animation.trace_panel.TracePanel), created on first use."""
        if self._trace_panel is None:
            from .trace_panel import TracePanel

            panel = TracePanel(self)
            self.pages.addWidget(panel)
            if self._pending_traces is not None:
                panel.set_traces(self._pending_traces, source="recording")
            else:
                panel.load_shipped()
            self._trace_panel = panel
        return self._trace_panel

    @property
    def mode(self) -> int:
        return self.pages.currentIndex()

    def set_mode(self, mode: int) -> None:
        """MODEL_MODE (the modeled schedule) or TRACE_MODE (a trace recorded on a GPU)."""
        if mode == self.TRACE_MODE:
            self.pause()
            self.pages.setCurrentWidget(self.trace_panel)
        else:
            if self._trace_panel is not None:
                self._trace_panel.stop_replay()
            self.pages.setCurrentWidget(self.model_page)
        if self.mode_tabs.currentIndex() != mode:
            self.mode_tabs.blockSignals(True)
            self.mode_tabs.setCurrentIndex(mode)
            self.mode_tabs.blockSignals(False)
        self.modeChanged.emit(mode)

    def set_traces(self, traces: tuple) -> None:
        """Show these traces (e.g. a recording's `traces`) in the real-trace mode."""
        self._pending_traces = tuple(traces)
        if self._trace_panel is not None:
            self._trace_panel.set_traces(self._pending_traces, source="recording")

    @property
    def config(self) -> AttentionConfig:
        """The config being shown (or about to be, if a coalesced change is pending)."""
        return self._pending_config or self.player.config

    def set_config(self, config: AttentionConfig) -> None:
        """Follow the configuration: rebuild the schedules (off the GUI thread) and go back to
        the start when they are ready; only the newest of a burst of calls is built."""
        if config == self.config and not self.lanes_worker.busy:
            return
        self._pending_config = config
        self._paced_build()

    def _build(self) -> None:
        config = self._pending_config
        if config is None:
            return
        gpu, algorithms = self.player.gpu, self.player.algorithms
        self.lanes_worker.submit(
            lambda: build_lanes(config, gpu, algorithms),
            lambda lanes: self._adopt(config, lanes),
        )

    def flush(self) -> None:
        """Apply a config still being built (or waiting to be), now."""
        self._paced_build.flush()
        self.lanes_worker.flush()

    def _flush_config(self) -> None:
        self.flush()

    def _adopt(self, config: AttentionConfig, lanes: list[Lane]) -> None:
        self._pending_config = None
        self.player.adopt(config, lanes)
        self._apply_scene()
        self.refresh()
        self.configApplied.emit()

    def set_gpu(self, spec: GpuSpec) -> None:
        """Model the clock on another GPU (bytes and FLOPs are unchanged)."""
        if spec == self.player.gpu:
            return
        self.player.set_gpu(spec)
        self._apply_scene()
        self.refresh()

    def set_duration(self, seconds: float) -> None:
        self.player.duration_s = float(seconds)

    def set_speed(self, speed: float) -> None:
        self.player.speed = float(speed)

    def counters(self, algorithm: str) -> Counters:
        self._flush_config()
        return self.player.counters(algorithm)

    def frames(self) -> list[LaneFrame]:
        self._flush_config()
        return self._frames

    @property
    def playing(self) -> bool:
        return self.player.playing

    def play(self) -> None:
        self._flush_config()
        self.player.play()
        self._clock.start()
        if self.isVisible():
            self._timer.start()
        self._sync_buttons()

    def pause(self) -> None:
        self.player.pause()
        self._timer.stop()
        self._sync_buttons()
        self._push_source(force=True)

    def toggle_play(self) -> None:
        if self.mode == self.TRACE_MODE:  # Space replays the selected block there
            self.trace_panel.toggle_replay()
            return
        if self.player.playing:
            self.pause()
        else:
            self.play()

    def step_forward(self) -> None:
        """One step on; the clock glides there over `glide_s` so the tile visibly travels."""
        if self.mode == self.TRACE_MODE:  # one traced phase of the selected block
            self.trace_panel.step_phase(+1)
            return
        self._flush_config()
        self._timer.stop()
        self.player.step_forward(glide_s=self.glide_s if self.isVisible() else 0.0)
        if self.player.gliding:
            self._clock.start()
            self._timer.start()
        self.refresh()

    def step_back(self) -> None:
        if self.mode == self.TRACE_MODE:
            self.trace_panel.step_phase(-1)
            return
        self._flush_config()
        self._timer.stop()
        self.player.step_back()
        self.refresh()

    def restart(self) -> None:
        self._flush_config()
        self.player.seek(0.0)
        self.refresh()

    def seek_fraction(self, frac: float) -> None:
        self._flush_config()
        self.player.seek_fraction(frac)
        self.refresh()

    # ---- internals

    def _apply_scene(self) -> None:
        self.canvas.set_scene(scene_for(self.player.config, self.player.gpu, self.player.lanes))

    def _tick(self) -> None:
        dt = self._clock.restart() / 1000.0
        if self.player.advance(min(dt, 0.25)):
            self.refresh()
        if not self.player.playing and not self.player.gliding:
            self._timer.stop()
            self._sync_buttons()
            self._push_source(force=True)

    def refresh(self) -> None:
        """Take a snapshot of the clock and hand it to the views."""
        self._frames = self.player.frames()
        self.canvas.set_frames(self._frames)
        self.timeline.blockSignals(True)
        self.timeline.setValue(round(self.player.fraction * TIMELINE_STEPS))
        self.timeline.blockSignals(False)
        self.time_label.setText(
            f"{fmt_seconds(self.player.t)} / {fmt_seconds(self.player.total_time)}"
        )
        self._push_source(force=not self.player.playing)
        self._sync_buttons()
        self.frameChanged.emit()

    def _push_source(self, force: bool = False) -> None:
        """The source highlight follows the clock, paced while playing (app/pacing.py)."""
        if force:
            self._paced_source.cancel()
            self._show_source()
        else:
            self._paced_source()

    def _show_source(self) -> None:
        for f in self._frames:
            name = "" if f.done else f.step.name
            self.source_panel.show_step(
                f.algorithm if f.algorithm != "tiled_mma" else "tiled", f.kernel, name
            )

    def _sync_buttons(self) -> None:
        self.play_button.setText("⏸ Pause" if self.player.playing else "▶ Play")

    def _on_duration(self, _i: int) -> None:
        self.set_duration(float(self.duration.currentData()))

    def _on_timeline(self, value: int) -> None:
        self.player.seek_fraction(value / TIMELINE_STEPS)
        self.refresh()

    def _on_scrub_start(self) -> None:
        self._resume_after_scrub = self.player.playing
        if self.player.playing:
            self.pause()

    def _on_scrub_end(self) -> None:
        if self._resume_after_scrub:
            self.play()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self.player.playing and not self._timer.isActive():
            self._clock.start()
            self._timer.start()

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self._timer.stop()  # no frames for nobody; playback resumes when shown again
