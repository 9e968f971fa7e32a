"""The `tileAnimation` widget: controls, the lanes canvas, online-softmax and source panels, and
a second mode, "Real GPU trace" (trace_panel.py): what the hardware did, SM by SM.

Keys: with the canvas (or the trace view) focused, ← and → step back and on; elsewhere the
window's own ← / → change N. Space plays or pauses, Home goes back to the start."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QElapsedTimer, QEvent, QObject, QSize, QSizeF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QHideEvent,
    QImage,
    QKeyEvent,
    QKeySequence,
    QPainter,
    QShortcut,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QFrame,
    QHBoxLayout,
    QLineEdit,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from gpu.algorithms import ALGORITHMS, LAZY, NAIVE, TILED, single_kernel_fused
from gpu.config import AttentionConfig
from gpu.model.costmodel import DEFAULT_GPU, GPUS, GpuSpec

from ..state.animation.lane import Lane, build_lanes
from ..state.animation.player import DEFAULT_DURATION_S, Player
from ..state.animation.snapshots import Counters, LaneFrame
from ..state.current_point import point_for
from ..state.decode_fit import prefill_of
from ..state.units import fmt_seconds
from ..work.background import LatestOnly
from ..work.pacing import LANES_MS, SOURCE_MS, coalesced
from .canvas import TileCanvas, scene_for
from .canvas_checks import layout_problems
from .colors import DARK, AnimColors, colors_for
from .measured_clocks import MeasuredClocks, ResultLookup
from .playback_controls import TIMELINE_STEPS, PlaybackControls, lanes_box, mode_tabs
from .softmax_panel import OnlineSoftmaxPanel
from .source_panel import SourcePanel

FRAME_MS = 16
GLIDE_S = 0.35
#: The fused kernels naive can be compared with (the second lane): the registry's one-kernel
#: forwards.
FUSED = single_kernel_fused()


def _rescales_lazily(algorithm: str | None) -> bool:
    """Whether the lane's kernel rescales its online softmax lazily (the registry's `rescale`)."""
    info = ALGORITHMS.get(algorithm or "")
    return info is not None and info.rescale == LAZY


class StepKeys(QObject):
    """← and → step the animation while a widget it watches has the focus. It takes the keys
    before the window's shortcuts see them (by accepting their ShortcutOverride), so the
    window's own ← / → (smaller / larger N) stay the keys everywhere else."""

    KEYS = (Qt.Key.Key_Left, Qt.Key.Key_Right)

    def __init__(self, back: Callable[[], None], forward: Callable[[], None], parent: QObject):
        super().__init__(parent)
        self.back, self.forward = back, forward

    def eventFilter(self, _watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind in (QEvent.Type.ShortcutOverride, QEvent.Type.KeyPress):
            assert isinstance(event, QKeyEvent)
            if event.key() in self.KEYS and event.modifiers() in (
                Qt.KeyboardModifier.NoModifier,
                Qt.KeyboardModifier.KeypadModifier,
            ):
                event.accept()
                if kind == QEvent.Type.KeyPress:
                    (self.forward if event.key() == Qt.Key.Key_Right else self.back)()
                return True
        return False


class TileAnimationWidget(QWidget):
    """Plays naive and tiled attention's HBM <-> SRAM tile schedule on one modeled clock.

    API for the main window: `set_config(config)` (resets the schedule; follow the slider
    live), `set_gpu(spec)` (the GPU the lanes model), `set_result_source(lookup)` and
    `results_changed()` (lanes with a measurement of this config on this GPU run on its measured
    clock), `set_theme(name)`, and `render_canvas(painter, size)` / `canvas_image(size)` (the
    canvas alone, for exports). Counters at the end of a play equal
    `gpu.model.costmodel.algorithm_cost` totals for all B·h heads.

    A new config's lanes are built off the GUI thread (tens of ms at N = 131072) by a LatestOnly
    worker, paced by app/work/pacing.py: while the slider moves only the newest config is built, at
    most every LANES_MS, and the finished lanes are swapped in at once (`configApplied`).
    Anything that needs the new lanes now (counters, frames, stepping) builds them on the spot
    (`flush`).
    """

    frameChanged = Signal()
    configApplied = Signal()
    modeChanged = Signal(int)

    MODEL_MODE, TRACE_MODE, BACKWARD_MODE, DECODE_MODE = 0, 1, 2, 3

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
        #: The lanes' measured clocks and the results they read.
        self.measured = MeasuredClocks(self.player)
        #: Whether the user picked the second lane (the window then leaves it alone).
        self.lanes_chosen = False
        self.colors: AnimColors = DARK
        self._frames: list[LaneFrame] = []
        #: Wall seconds a step-forward takes to glide to the boundary (0: jump).
        self.glide_s = GLIDE_S
        self._pending_config: AttentionConfig | None = None
        self._builds_asked = 0  # lanes asked for (a config or the lanes changed)
        self.lanes_worker = LatestOnly(self)
        # While the slider moves, lanes are built at most every LANES_MS (each build is tens of
        # ms of a worker that shares the GIL with this thread), always for the newest config.
        self._paced_build = coalesced(self._build, LANES_MS, parent=self)
        self._paced_source = coalesced(self._show_source, SOURCE_MS, parent=self)

        # controls
        c = self.playback = PlaybackControls(self, duration_s)
        self.play_button, self.back_button = c.play_button, c.back_button
        self.fwd_button, self.restart_button = c.fwd_button, c.restart_button
        self.speed, self.duration = c.speed, c.duration
        self.timeline, self.time_label = c.timeline, c.time_label
        self.play_button.clicked.connect(self.toggle_play)
        self.back_button.clicked.connect(self.step_back)
        self.fwd_button.clicked.connect(self.step_forward)
        self.restart_button.clicked.connect(self.restart)
        self.speed.currentIndexChanged.connect(
            lambda _i: setattr(self.player, "speed", float(self.speed.currentData()))
        )
        self.duration.currentIndexChanged.connect(self._on_duration)
        self.timeline.valueChanged.connect(self._on_timeline)
        self.timeline.sliderPressed.connect(self._on_scrub_start)
        self.timeline.sliderReleased.connect(self._on_scrub_end)
        self._resume_after_scrub = False
        controls = c.row

        # views
        self.canvas = TileCanvas(self)
        self.softmax_panel = OnlineSoftmaxPanel(self)
        fused = next((a for a in self.player.algorithms if a != NAIVE), None)
        self.softmax_panel.set_lazy(_rescales_lazily(fused))
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
        self.mode_tabs = mode_tabs(self, self.DECODE_MODE)
        self.mode_tabs.currentChanged.connect(self.set_mode)
        self.lanes_box = lanes_box(self, FUSED, algorithms)
        self.lanes_box.currentIndexChanged.connect(self._on_lanes)
        mode_row = QHBoxLayout()
        mode_row.setContentsMargins(0, 0, 0, 0)
        mode_row.addWidget(self.mode_tabs)
        mode_row.addStretch(1)
        mode_row.addWidget(self.lanes_box)
        self.pages = QStackedWidget(self)
        self.pages.addWidget(model_page)
        self._trace_panel = None
        self._backward_lane = None
        self._backward_config: AttentionConfig | None = None
        self._decode_lane = None
        self._decode_config: AttentionConfig | None = None
        self._pending_traces: tuple | None = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(mode_row)
        lay.addWidget(self.pages, 1)

        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self._tick)
        self._clock = QElapsedTimer()
        self.source_panel.sourceLoaded.connect(lambda _a: self._push_source(force=True))
        self.source_panel.set_lanes(self.player.algorithms)
        # ← / → belong to the canvas (and the trace view) while focused; see StepKeys
        self.step_keys = StepKeys(self.step_back, self.step_forward, self)
        self.canvas.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.canvas.installEventFilter(self.step_keys)
        for key, slot in ((Qt.Key.Key_Space, self.toggle_play), (Qt.Key.Key_Home, self.restart)):
            sc = QShortcut(QKeySequence(key), self)
            sc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            sc.activated.connect(slot)
        self._apply_scene()
        self.refresh()

    # ---- public API

    @property
    def trace_panel(self):
        """The real-trace page (app.animation.trace_panel.TracePanel), created on first use."""
        if self._trace_panel is None:
            from .trace_panel import TracePanel

            panel = TracePanel(self)
            panel.set_colors(self.colors)
            panel.view.installEventFilter(self.step_keys)
            self.pages.addWidget(_scrolled(panel))
            if self._pending_traces is not None:
                panel.set_traces(self._pending_traces, source="recording")
            else:
                panel.load_shipped()
            self._trace_panel = panel
        return self._trace_panel

    @property
    def backward_lane(self):
        """The backward lane's page (app.animation.backward_lane.BackwardLane), made on first
        use; it shows the backward of the config the animation follows."""
        if self._backward_lane is None:
            from .backward_lane import BackwardLane

            lane = BackwardLane(self, kernel_dir=self.source_panel.kernel_dir)
            lane.set_colors(self.colors)
            self.pages.addWidget(_scrolled(lane))
            lane.set_config(self._backward_config or self.config)
            self._backward_lane = lane
        return self._backward_lane

    @property
    def decode_lane(self):
        """The decode lanes' page (app.animation.decode_lane.DecodeLaneView), made on first
        use; it shows the decode config the animation follows."""
        if self._decode_lane is None:
            from .decode_lane import DecodeLaneView

            lane = DecodeLaneView(self, kernel_dir=self.source_panel.kernel_dir)
            lane.set_colors(self.colors)
            self.pages.addWidget(lane)
            self._decode_lane = lane
            if self._decode_config is not None:
                _, results = self.measured.question(self._decode_config)
                lane.set_config(self._decode_config, self.player.gpu, results)
        return self._decode_lane

    def _follow_decode(self) -> None:
        """The decode tab follows the pass: shown (and chosen, from the modeled schedule) for
        a decode config, left for the modeled schedule otherwise."""
        config = self._decode_config
        if config is None:
            if self.mode == self.DECODE_MODE:
                self.set_mode(self.MODEL_MODE)
            # after leaving it: a tab bar moves off a current tab disabled under it
            self.mode_tabs.setTabEnabled(self.DECODE_MODE, False)
            return
        self.mode_tabs.setTabEnabled(self.DECODE_MODE, True)
        if self._decode_lane is not None:
            _, results = self.measured.question(config)
            self._decode_lane.set_config(config, self.player.gpu, results)
        if self.mode == self.MODEL_MODE:
            self.set_mode(self.DECODE_MODE)

    @property
    def decode_busy(self) -> bool:
        """The decode lanes of a new config are being built."""
        return self._decode_lane is not None and self._decode_lane.busy

    def _page_lane(self):
        """The backward or decode lanes when their page is shown: they play on their own."""
        page = self.pages.currentWidget()
        for lane in (self._backward_lane, self._decode_lane):
            if page is not None and lane is not None and (page is lane or page.isAncestorOf(lane)):
                return lane
        return None

    @property
    def mode(self) -> int:
        page = self.pages.currentWidget()
        lane, trace = self._backward_lane, self._trace_panel
        if page is not None and page is self._decode_lane:
            return self.DECODE_MODE
        if page is not None and lane is not None and page.isAncestorOf(lane):
            return self.BACKWARD_MODE
        if page is not None and trace is not None and page.isAncestorOf(trace):
            return self.TRACE_MODE
        return self.MODEL_MODE

    def set_mode(self, mode: int) -> None:
        """MODEL_MODE (the modeled schedule), TRACE_MODE (a trace recorded on a GPU) or
        BACKWARD_MODE (the training step's backward, in tile order)."""
        if self._backward_lane is not None and mode != self.BACKWARD_MODE:
            self._backward_lane.pause()
        if self._decode_lane is not None and mode != self.DECODE_MODE:
            self._decode_lane.pause()
        if mode == self.DECODE_MODE:
            self.pause()
            if self._trace_panel is not None:
                self._trace_panel.stop_replay()
            self.pages.setCurrentWidget(self.decode_lane)
        elif mode == self.TRACE_MODE:
            self.pause()
            self.pages.setCurrentWidget(_page_of(self.trace_panel))
        elif mode == self.BACKWARD_MODE:
            self.pause()
            if self._trace_panel is not None:
                self._trace_panel.stop_replay()
            self.pages.setCurrentWidget(_page_of(self.backward_lane))
        else:
            if self._trace_panel is not None:
                self._trace_panel.stop_replay()
            self.pages.setCurrentWidget(self.model_page)
        self.lanes_box.setVisible(mode == self.MODEL_MODE)  # the modeled schedule's lanes
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
        the start when they are ready; only the newest of a burst of calls is built. The lanes
        play its forward pass; the backward lane, its backward; the decode lanes, a decode
        config (whose prefill the other lanes play)."""
        self._decode_config = config if config.is_decode else None
        self._follow_decode()
        config = prefill_of(config)
        self._backward_config = config
        if self._backward_lane is not None:
            self._backward_lane.set_config(config)
        config = config.forward()
        if config == self.config and not self.lanes_worker.busy:
            return
        self._ask_build(config)

    def _ask_build(self, config: AttentionConfig) -> None:
        self._pending_config = config
        self._builds_asked += 1
        self._paced_build()

    def _build(self) -> None:
        config = self._pending_config
        if config is None:
            return
        gpu, algorithms = self.player.gpu, self.player.algorithms
        clocks = self.measured.clocks(config, gpu, compute=False)
        shown, results = self.measured.question(config)
        asked = self._builds_asked

        counted = self.measured.counted(results)

        def work() -> list[Lane]:
            if counted:  # the current point's bands, off the GUI thread
                point_for(config, shown, gpu, results)
            return build_lanes(config, gpu, algorithms, clocks)

        self.lanes_worker.submit(work, lambda lanes: self._adopt(config, lanes, asked))

    # ---- measured clocks

    def set_result_source(self, lookup: ResultLookup | None) -> None:
        """Where measured results come from: `lookup(config, algorithm)` gives the result of
        that config (or None). A lane runs on its measured clock when that result was timed on
        the GPU the lanes model; call `results_changed()` when new results arrive."""
        self.measured.lookup = lookup
        self.results_changed()

    def set_shown_algorithms(self, algorithms: tuple[str, ...]) -> None:
        """The algorithms the window shows: the banner's measured figures are read from the
        current point of these and the lanes' (app/state/current_point.py), the one the
        explain pane, the plots and the status bar read."""
        if tuple(algorithms) != self.measured.shown:
            self.measured.shown = tuple(algorithms)
            self.results_changed()

    def results_changed(self) -> None:
        """Look the measurements up again (cheap: a lane's clock is rescaled, not rebuilt)."""
        if self.player.set_clocks(self.measured.clocks(self.player.config, self.player.gpu)):
            self._apply_scene()
            self.refresh()
        if self._decode_config is not None:
            self._follow_decode()

    # ---- lanes and theme

    @property
    def algorithms(self) -> tuple[str, ...]:
        return self.player.algorithms

    def set_algorithms(self, algorithms: tuple[str, ...]) -> None:
        """Play these lanes (rebuilt off the GUI thread, from the start)."""
        if tuple(algorithms) == self.player.algorithms:
            return
        self.player.algorithms = tuple(algorithms)
        self.source_panel.set_lanes(self.player.algorithms)
        second = next((a for a in algorithms if a != NAIVE), None)
        # the readable kernel rescales on every growth of the max, the tensor-core ones lazily
        self.softmax_panel.set_lazy(_rescales_lazily(second))
        if second in FUSED and self.lanes_box.currentData() != second:
            self.lanes_box.blockSignals(True)
            self.lanes_box.setCurrentIndex(FUSED.index(second))
            self.lanes_box.blockSignals(False)
        self._ask_build(self.config)

    def _on_lanes(self, _index: int) -> None:
        self.lanes_chosen = True  # the user's pick: the window's default no longer applies
        self.set_algorithms((NAIVE, str(self.lanes_box.currentData())))

    def set_theme(self, theme: str) -> None:
        """Paint the canvas, the trace views and the kernel source in `theme`'s colours."""
        self.colors = colors_for(theme)
        self.canvas.set_colors(self.colors)
        self.source_panel.set_colors(self.colors)
        self.softmax_panel.set_colors(self.colors)
        if self._trace_panel is not None:
            self._trace_panel.set_colors(self.colors)
        if self._backward_lane is not None:
            self._backward_lane.set_colors(self.colors)
        if self._decode_lane is not None:
            self._decode_lane.set_colors(self.colors)

    # ---- the canvas alone, for exports

    def render_canvas(self, painter: QPainter, size: QSize | QSizeF) -> None:
        """Paint the lanes canvas alone (no controls, no panels) at `size` into `painter`, as
        it shows now; its layout fits every label from the canvas's minimum size up
        (canvas.MINIMUM_SIZE, what exports enforce)."""
        self._flush_config()
        self.canvas.render_to(painter, size)

    def canvas_problems(self, size: QSize | QSizeF) -> list[str]:
        """What would not fit if the canvas were drawn at `size` now (overlapping or cut
        labels; empty when every label fits): pick an export size with it."""
        self._flush_config()
        items = self.canvas.text_items(size)
        return layout_problems(self.canvas.fonts, items, size.width(), size.height())

    def canvas_image(self, size: QSize, device_pixel_ratio: float = 1.0) -> QImage:
        """The canvas alone as an image of `size` (logical pixels)."""
        return _image(size, device_pixel_ratio, self.render_canvas)

    def flush(self) -> None:
        """Apply a config still being built (or waiting to be), now."""
        self._paced_build.flush()
        self.lanes_worker.flush()

    def _flush_config(self) -> None:
        self.flush()

    def _adopt(self, config: AttentionConfig, lanes: list[Lane], asked: int) -> None:
        # A build can land before the paced build of a newer request (another N, other
        # lanes) starts: that request stays pending and is built next.
        if asked == self._builds_asked:
            self._pending_config = None
        self.player.adopt(config, lanes)
        self.player.set_clocks(
            self.measured.clocks(config, self.player.gpu)
        )  # results since the build
        self._apply_scene()
        self.refresh()
        self.configApplied.emit()

    def set_gpu(self, spec: GpuSpec) -> None:
        """Model the clock on another GPU (bytes and FLOPs are unchanged)."""
        if spec == self.player.gpu:
            return
        self.player.set_gpu(spec, self.measured.clocks(self.player.config, spec))
        self._apply_scene()
        self.refresh()
        if self._decode_config is not None:
            self._follow_decode()

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
        if (lane := self._page_lane()) is not None:  # the backward or decode lanes
            lane.toggle()
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
        if (lane := self._page_lane()) is not None:
            lane.seek(lane.step + 1)
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
        if (lane := self._page_lane()) is not None:
            lane.seek(lane.step - 1)
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
        """The source highlight follows the clock, paced while playing (app/work/pacing.py)."""
        if force:
            self._paced_source.cancel()
            self._show_source()
        else:
            self._paced_source()

    def _show_source(self) -> None:
        for f in self._frames:
            name = "" if f.done else f.step.name
            self.source_panel.show_step(f.algorithm, f.kernel, name)

    def _sync_buttons(self) -> None:
        playing = self.player.playing
        if playing != self.play_button.property("playing"):
            self.play_button.setProperty("playing", playing)
            self.play_button.setText("Pause" if playing else "Play")
            pixmap = (
                QStyle.StandardPixmap.SP_MediaPause
                if playing
                else QStyle.StandardPixmap.SP_MediaPlay
            )
            self.play_button.setIcon(self.style().standardIcon(pixmap))

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
        # the tab's ← / → step the animation: give the canvas the focus, unless the user is
        # typing somewhere
        focus = QApplication.focusWidget()
        if self.mode == self.MODEL_MODE and not isinstance(focus, QLineEdit | QAbstractSpinBox):
            self.canvas.setFocus(Qt.FocusReason.OtherFocusReason)

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self._timer.stop()  # no frames for nobody; playback resumes when shown again
        if self._backward_lane is not None:
            self._backward_lane.pause()
        if self._decode_lane is not None:
            self._decode_lane.pause()


def _scrolled(page: QWidget) -> QScrollArea:
    """A page in a frameless scroll area: a page taller or wider than the room the window has
    (the real trace's SM view over its replay canvas) scrolls instead of growing the window
    past the screen."""
    area = QScrollArea()
    area.setObjectName(f"{page.objectName() or 'page'}Scroll")
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidgetResizable(True)
    area.setWidget(page)
    return area


def _page_of(widget: QWidget) -> QWidget:
    """The stacked page holding `widget` (its scroll area)."""
    area = widget.parentWidget()
    while area is not None and not isinstance(area, QScrollArea):
        area = area.parentWidget()
    return area if area is not None else widget


def _image(
    size: QSize, device_pixel_ratio: float, render: Callable[[QPainter, QSize], None]
) -> QImage:
    """An image of `size` (logical pixels) that `render` paints."""
    image = QImage(
        round(size.width() * device_pixel_ratio),
        round(size.height() * device_pixel_ratio),
        QImage.Format.Format_RGB32,
    )
    image.setDevicePixelRatio(device_pixel_ratio)
    p = QPainter(image)
    p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
    render(p, size)
    p.end()
    return image
