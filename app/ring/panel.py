"""The Ring tab: ring attention over P devices, played, timed and modelled.

What it shows is one (config, P) and, when there is one, a ring run of exactly that pair: by
default the controls' N and Devices (following the app state), or a run picked in the Run list
(recorded runs opened with File ▸ Open, runs measured on GPUs or simulated in NumPy this
session). From it:
- the ring view plays the schedule (app/ring/view.py) on the run's measured timeline, or on the
  model's when nothing was measured;
- the timeline draws each device's compute and communication streams with the hidden share and
  the link speed against its peak (app/ring/timeline_view.py);
- the plots (app/ring/plots.py) give time against N for each P, measured where measured and
  modelled elsewhere, time and efficiency against P = 1 … 1024 (model), and memory per device.

The GUI thread only paints: the model's curves are computed in the compute process (a
LatestOnly worker waits for them), paced while the slider moves; a hidden tab only notes that it
is out of date and catches up when shown; the animation ticks only while it plays and is
visible, and a frame touches at most 2·SUMMARY_SIDE devices and a MATRIX_MAX² image whatever P
is.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from PySide6.QtCore import QElapsedTimer, Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSlider,
    QSplitter,
    QStyle,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpu.algorithms import RING
from gpu.config import AttentionConfig
from gpu.model.links import DEFAULT_TOPOLOGY, TOPOLOGIES
from gpu.results import RunResult
from gpu.ring.model import RooflineThroughput, device_peak_bytes

from ..kit.plain_text import PlainLabel, tooltip
from ..kit.state_signal import StateSignal
from ..kit.theme import Palette, palette
from ..state.app_state import AppState, Change
from ..state.family import cache_config, family_of
from ..state.ring.curves import RingCurves, ring_curves
from ..state.ring.playback import (
    MEASURED_CLOCK,
    PASS_SECONDS,
    STEP_SECONDS,
    RingClock,
    RingPlayer,
    cell_states,
    measured_clock,
    model_clock,
    schedule_clock,
    score_matrix,
)
from ..state.ring.runs import RingRun, RingRuns, shipped_ring_recording
from ..state.ring.story import (
    device_word,
    memory_caption,
    split_text,
    step_caption,
    timeline_summary,
    too_short_text,
)
from ..state.units import fmt_ms
from ..work.background import LatestOnly, in_process
from ..work.pacing import LANES_MS, RESULTS_MS, coalesced, own_turn
from .plots import RingPlots
from .timeline_view import RingTimelineView
from .view import RingView

FRAME_MS = 16
POSITION_STEPS = 10_000
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 16.0)


class RingPanel(QWidget):
    """See the module docstring. Feed it the runner's outcomes with `on_outcome`; it follows the
    app state by itself. `openWanted(path)` asks the window to open a recording ('' : ask)."""

    openWanted = Signal(str)

    def __init__(self, state: StateSignal, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ringPanel")
        self.state = state
        self.runs = RingRuns()
        self.pinned: RingRun | None = None
        self.topology = DEFAULT_TOPOLOGY
        self.curves: RingCurves | None = None
        self.run: RingRun | None = None
        self.player = RingPlayer(AttentionConfig(), schedule_clock(1))
        self.matrix = score_matrix(1, False)
        self._shown_key: tuple | None = None
        self._stale = True
        self._palette: Palette = palette("dark")
        self._listed: tuple[RingRun, ...] = ()
        self._caption_key: tuple | None = None
        self._worker = LatestOnly(self)
        self._paced_curves = coalesced(self._request_curves, LANES_MS, parent=self)
        self._paced_refresh = coalesced(self._refresh_if_stale, RESULTS_MS, parent=self)
        self._prepare_items = own_turn(self._prepare_plot_items, parent=self)
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self._tick)
        self._clock = QElapsedTimer()
        self._build()
        state.changed.connect(self.on_state)
        self.on_state(Change.initial(state.value))

    # ------------------------------------------------------------------ construction

    def _build(self) -> None:
        top = QHBoxLayout()
        top.addWidget(PlainLabel("Run"))
        self.run_combo = QComboBox()
        self.run_combo.setObjectName("ringRunCombo")
        self.run_combo.setToolTip(
            "What the tab shows: the controls' N and Devices (a run of exactly that pair when "
            "there is one, else the model), or one recorded, measured or simulated ring run."
        )
        self.run_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.run_combo.setMinimumContentsLength(12)
        self.run_combo.currentIndexChanged.connect(self._on_run_combo)
        top.addWidget(self.run_combo, 1)
        top.addWidget(PlainLabel("Cluster"))
        self.topology_combo = QComboBox()
        self.topology_combo.setObjectName("ringTopologyCombo")
        for name in TOPOLOGIES:
            self.topology_combo.addItem(name, name)
        self.topology_combo.setCurrentIndex(self.topology_combo.findData(DEFAULT_TOPOLOGY.name))
        self.topology_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.topology_combo.setMinimumContentsLength(10)
        self.topology_combo.setToolTip(
            "The links the model assumes: GPUs per node on a fast link, nodes joined by a slower "
            "one. A ring runs at its slowest hop (gpu/model/links.py: every figure with its "
            "source)."
        )
        self.topology_combo.currentIndexChanged.connect(self._on_topology)
        top.addWidget(self.topology_combo)
        self.open_button = QPushButton("Open…")
        self.open_button.setObjectName("ringOpenButton")
        self.open_button.setToolTip(
            "Replay a recorded run (bench/bench_ring.py --out FILE) through File ▸ Open."
        )
        self.open_button.clicked.connect(lambda: self.openWanted.emit(""))
        top.addWidget(self.open_button)
        self.shipped_button = QPushButton("Two-H200 run")
        self.shipped_button.setObjectName("ringShippedButton")
        self.shipped_button.setToolTip(
            "The ring measured on two H200s joined by NVLink, shipped with the app."
        )
        self.shipped_button.clicked.connect(self._open_shipped)
        self.shipped_button.setVisible(shipped_ring_recording() is not None)
        top.addWidget(self.shipped_button)

        self.view = RingView()
        self.timeline = RingTimelineView()
        self.timeline.seekRequested.connect(self._seek_ms)
        self.timeline_summary = PlainLabel()
        self.timeline_summary.setObjectName("ringTimelineSummary")
        self.timeline_summary.setWordWrap(True)
        scroll = QScrollArea()
        scroll.setWidget(self.timeline)
        scroll.setWidgetResizable(True)  # scrolls sideways only in a narrow window
        scroll.setAccessibleName("Per-device timeline")
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        title = QLabel("<b>Per-device timeline</b>: compute and communication streams")
        title.setTextFormat(Qt.TextFormat.RichText)  # our own markup, no outside text
        title.setWordWrap(True)
        rv.addWidget(title)
        rv.addWidget(self.timeline_summary)
        rv.addWidget(scroll, 1)
        upper = QSplitter(Qt.Orientation.Horizontal)
        upper.addWidget(self.view)
        upper.addWidget(right)
        upper.setStretchFactor(0, 3)
        upper.setStretchFactor(1, 2)

        controls = QHBoxLayout()
        self.restart_button = self._button("ringRestart", "|◀", "Back to the start.")
        self.back_button = self._button("ringStepBack", "◀ Step", "To the start of this step.")
        self.play_button = self._button("ringPlayButton", "Play", "Play or pause the ring.")
        # The style's own play and pause pictures: "⏸" is missing from common fonts (a box).
        self.play_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self._play_icons = {
            playing: self.style().standardIcon(pixmap)
            for playing, pixmap in (
                (False, QStyle.StandardPixmap.SP_MediaPlay),
                (True, QStyle.StandardPixmap.SP_MediaPause),
            )
        }
        self.play_button.setIcon(self._play_icons[False])
        self.forward_button = self._button("ringStepForward", "Step ▶", "To the next step.")
        self.restart_button.clicked.connect(self.restart)
        self.back_button.clicked.connect(self.step_back)
        self.play_button.clicked.connect(self.toggle_play)
        self.forward_button.clicked.connect(self.step_forward)
        for b in (self.restart_button, self.back_button, self.play_button, self.forward_button):
            controls.addWidget(b)
        self.position = QSlider(Qt.Orientation.Horizontal)
        self.position.setObjectName("ringPosition")
        self.position.setRange(0, POSITION_STEPS)
        self.position.setToolTip("Where in the ring's run the picture is; drag to scrub.")
        self.position.valueChanged.connect(self._on_position)
        controls.addWidget(self.position, 1)
        self.time_label = PlainLabel()
        self.time_label.setObjectName("ringTime")
        self.time_label.setMinimumWidth(150)
        controls.addWidget(self.time_label)
        self.speed = QComboBox()
        self.speed.setObjectName("ringSpeed")
        for s in SPEEDS:
            self.speed.addItem(f"{s:g}×", s)
        self.speed.setCurrentIndex(SPEEDS.index(1.0))
        shortest, longest = PASS_SECONDS
        self.speed.setToolTip(
            f"Playback speed: at 1× a step takes about {STEP_SECONDS:g} s of wall time, a "
            f"whole pass no less than {shortest:g} s and no more than {longest:g} s."
        )
        self.speed.currentIndexChanged.connect(
            lambda _i: setattr(self.player, "speed", float(self.speed.currentData()))
        )
        controls.addWidget(self.speed)
        self.caption = PlainLabel()
        self.caption.setObjectName("ringCaption")
        self.caption.setWordWrap(True)
        self.split_label = PlainLabel()
        self.split_label.setObjectName("ringSplit")
        self.split_label.setWordWrap(True)
        self.split_label.setProperty("role", "hint")

        upper_box = QWidget()
        uv = QVBoxLayout(upper_box)
        uv.setContentsMargins(0, 0, 0, 0)
        uv.addWidget(upper, 1)
        uv.addLayout(controls)
        uv.addWidget(self.caption)
        uv.addWidget(self.split_label)

        #: The plots (RingPlots), made when the tab is first shown: four pyqtgraph plots cost
        #: tens of ms that the window's first frame does not need.
        self.plots: RingPlots | None = None
        self.memory_caption = PlainLabel()
        self.memory_caption.setObjectName("ringMemoryCaption")
        self.memory_caption.setWordWrap(True)
        self.memory_caption.setProperty("role", "hint")
        lower = QWidget()
        lv = QVBoxLayout(lower)
        lv.setContentsMargins(0, 0, 0, 0)
        self._plots_box = lv
        lv.addWidget(self.memory_caption)
        lower.setMinimumHeight(200)
        outer = QSplitter(Qt.Orientation.Vertical)
        outer.addWidget(upper_box)
        outer.addWidget(lower)
        outer.setStretchFactor(0, 3)
        outer.setStretchFactor(1, 2)
        self._splitter = outer

        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(outer, 1)
        self._fill_run_combo()

    def _button(self, name: str, text: str, tip: str) -> QToolButton:
        b = QToolButton(self)
        b.setObjectName(name)
        b.setText(text)
        b.setToolTip(tooltip(tip))
        return b

    def set_palette(self, pal: Palette) -> None:
        self._palette = pal
        self.view.set_palette(pal)
        self.timeline.set_palette(pal)
        if self.plots is not None:
            self.plots.apply_palette(pal)

    # ------------------------------------------------------------------ inputs

    def on_state(self, change: Change) -> None:
        s = change.new
        if change.changed("backend"):
            self._absorb_recording(s)
        if change.changed("config", "devices", "backend", "target_gpu"):
            self._mark_stale()

    def on_outcome(self, outcome: object) -> None:
        """A runner outcome: ring runs and one-GPU fused results measured live are kept."""
        result = getattr(outcome, "result", None)
        if result is None or result.recorded:
            return
        if self.runs.add(result):
            self._fill_run_combo()
            self._mark_stale()

    def add_results(self, results, source: str = "") -> int:  # type: ignore[no-untyped-def]
        """Keep the ring runs and one-GPU results among `results` (a recording's, say)."""
        kept = self.runs.add_all(results, source)
        if kept:
            self._fill_run_combo()
            self._mark_stale()
        return kept

    def _absorb_recording(self, s: AppState) -> None:
        """A recorded run became the backend: its ring runs join the list, and when none of them
        is the controls' (config, P), the controls move to one that is (`ring_run_to_show`)."""
        if not s.replay or s.backend is None:
            return
        backend = s.backend.backend
        recording = getattr(backend, "recording", None)
        if recording is None:
            return
        self.runs.add_recording(recording, getattr(backend, "path", ""))
        self.pinned = None
        self._fill_run_combo()
        target = ring_run_to_show(recording.ring_results, s.config, s.devices)
        if target is not None:
            config = target.config.with_(block_m=s.config.block_m, block_n=s.config.block_n)
            self.state.update(config=config, devices=target.ring.devices)
        self._mark_stale()

    def _mark_stale(self) -> None:
        """Out of date: caught up at most once a frame while shown, else when shown."""
        self._stale = True
        if self.isVisible():
            self._paced_refresh()

    def _on_run_combo(self, index: int) -> None:
        self.pinned = self._listed[index - 1] if 0 < index <= len(self._listed) else None
        self.refresh()

    def pin(self, run: RingRun | None) -> None:
        """Show `run` whatever the controls say (None: follow the controls)."""
        index = 0 if run is None else 1 + self._listed.index(run)
        self.run_combo.setCurrentIndex(index)
        self._on_run_combo(index)

    def _on_topology(self, _index: int) -> None:
        self.topology = TOPOLOGIES[self.topology_combo.currentData()]
        self.curves = None
        self.refresh()

    def _open_shipped(self) -> None:
        path = shipped_ring_recording()
        if path is not None:
            self.openWanted.emit(str(path))

    def _fill_run_combo(self) -> None:
        runs = self.runs.runs()
        if runs == self._listed and self.run_combo.count():
            return
        self._listed = runs
        self.run_combo.blockSignals(True)
        self.run_combo.clear()
        self.run_combo.addItem("Follow the controls (N and Devices)")
        for run in runs:
            self.run_combo.addItem(run.label())
        index = 1 + runs.index(self.pinned) if self.pinned in runs else 0
        self.run_combo.setCurrentIndex(index)
        self.run_combo.blockSignals(False)
        if index == 0:
            self.pinned = None

    # ------------------------------------------------------------------ what is shown

    def shown(self) -> tuple[AttentionConfig, int, RingRun | None]:
        """(config, P, run of exactly those, if any)."""
        if self.pinned is not None:
            return self.pinned.config, self.pinned.devices, self.pinned
        s = self.state.value
        config = cache_config(s.config, RING)
        return config, s.devices, self.runs.find(config, s.devices)

    def _refresh_if_stale(self) -> None:
        if self._stale:
            self.refresh()

    def refresh(self) -> None:
        """Bring every view up to the shown (config, P); the curves follow off the GUI thread."""
        self._stale = False
        config, devices, run = self.shown()
        key = (config, devices, None if run is None else id(run.result))
        if key != self._shown_key:
            self._shown_key = key
            self.run = run
            clock = measured_clock(run.measurement) if run is not None else None
            self._set_clock(config, clock or self._model_clock(config, devices))
            self.split_label.setText(split_text(config, devices, self.word))
            self._ensure_plots().show_memory(config, devices, run)
            self.memory_caption.setText(
                memory_caption(config, devices, run, device_peak_bytes(config, devices))
            )
        self._paced_curves()  # the plots are drawn when the curves for this (config, P) come

    @property
    def word(self) -> str:
        return device_word(self.run)

    def _model_clock(self, config: AttentionConfig, devices: int) -> RingClock:
        c = self.curves
        if c is not None and c.current is not None and (c.config, c.devices) == (config, devices):
            return model_clock(c.current)
        return schedule_clock(devices)

    def _set_clock(self, config: AttentionConfig, clock: RingClock) -> None:
        self.player.set_clock(config, clock)
        self.matrix = score_matrix(clock.devices, config.causal)
        measurement = self.run.measurement if self.run is not None else None
        self.timeline.set_run(clock if clock.timed else None, measurement, self.word)
        self._update_summary()
        self.render()

    def _update_summary(self) -> None:
        c = self.curves
        config, devices, _ = self.shown()
        current = (
            c.current if c is not None and (c.config, c.devices) == (config, devices) else None
        )
        measurement = self.run.measurement if self.run is not None else None
        short = too_short_text(config, devices)
        text = timeline_summary(measurement, self.player.clock, current, self.word, short)
        self.timeline_summary.setText(text)

    # ------------------------------------------------------------ the model, off the GUI thread

    def _request_curves(self) -> None:
        if not self.isVisible() and self.curves is not None:
            self._stale = True  # caught up when shown
            return
        config, devices, _ = self.shown()
        s = self.state.value
        fallback = RooflineThroughput(gpu=s.target_gpu)
        throughput = self.runs.throughput(fallback) or fallback
        topology = self.topology
        measured = tuple(self.runs.family_runs(config))
        # Mostly Python (a few hundred predictions): in the compute process, not a thread.
        work = in_process(ring_curves, config, devices, throughput, topology, measured)
        self._worker.submit(work, self._apply_curves, self._curves_failed)

    def flush_curves(self) -> None:
        """Compute the pending curves now (tests, exports)."""
        self._paced_curves.flush()
        self._worker.flush()

    def _apply_curves(self, curves: RingCurves) -> None:
        self.curves = curves
        config, devices, _ = self.shown()
        here = (curves.config, curves.devices) == (config, devices)
        if here and self.player.clock.source != MEASURED_CLOCK and curves.current is not None:
            self._set_clock(config, model_clock(curves.current))
        self._update_summary()
        self._draw_plots()

    def _curves_failed(self, exc: BaseException) -> None:
        self.timeline_summary.setText(f"The model could not be computed: {exc}")
        self._draw_plots(model=False)  # what was measured at the shown (config, P), no model

    def _draw_plots(self, model: bool = True) -> None:
        config, devices, _ = self.shown()
        singles = self.runs.singles(config)
        single_here = next((r for r in singles if r.config.seq_len == config.seq_len), None)
        self._ensure_plots().set_data(
            config,
            devices,
            self.curves if model else None,
            self.runs.family_runs(config),
            singles,
            self.runs.at_config(config),
            single_here,
            self.topology,
        )

    def prepare(self) -> None:
        """Build what the first show would (its plots), ahead of it; the items of the P that
        every set of curves draws follow in a turn of their own (made when the first curves
        arrive, they cost some 30 ms of the turn that delivers them)."""
        self._ensure_plots()
        self._prepare_items()

    def _prepare_plot_items(self) -> None:
        if self.plots is not None:
            self.plots.prepare()

    def _ensure_plots(self) -> RingPlots:
        if self.plots is None:
            self.plots = RingPlots()
            self.plots.apply_palette(self._palette)
            self._plots_box.insertWidget(0, self.plots, 1)
            total = sum(self._splitter.sizes())
            if total > 0:  # three fifths for the ring and its timeline, the rest for the plots
                self._splitter.setSizes([total * 3 // 5, total - total * 3 // 5])
        return self.plots

    # ------------------------------------------------------------------ playing

    def render(self) -> None:
        """Draw the player's current moment in the ring view and the timeline."""
        player = self.player
        frame = player.frame()
        states = cell_states(self.matrix, player.clock, player.t)
        self.view.set_frame(frame, self.matrix, states, self.word)
        self.timeline.set_cursor(player.t)
        self.position.blockSignals(True)
        self.position.setValue(round(player.fraction * POSITION_STEPS))
        self.position.blockSignals(False)
        clock = player.clock
        if clock.timed:
            self.time_label.setText(f"{fmt_ms(player.t)} / {fmt_ms(player.span)}")
        else:
            self.time_label.setText(f"step {min(frame.step + 1, frame.devices)} of {frame.devices}")
        key = (self._shown_key, frame.step, frame.devices)
        if key != self._caption_key:
            self._caption_key = key
            self.caption.setText(step_caption(frame, player.config, self.word))
        self.play_button.setText("Pause" if player.playing else "Play")
        self.play_button.setIcon(self._play_icons[player.playing])

    def play(self) -> None:
        self.player.play()
        if self.isVisible() and not self._timer.isActive():
            self._clock.start()
            self._timer.start()
        self.render()

    def pause(self) -> None:
        self.player.pause()
        self._timer.stop()
        self.render()

    def toggle_play(self) -> None:
        self.pause() if self.player.playing else self.play()

    def step_forward(self) -> None:
        self.player.step_forward()
        self.render()

    def step_back(self) -> None:
        self.player.step_back()
        self.render()

    def restart(self) -> None:
        self.player.seek_fraction(0.0)
        self.render()

    def _seek_ms(self, t: float) -> None:
        span = self.player.span
        self.player.seek_fraction(t / span if span else 0.0)
        self.render()

    def _on_position(self, value: int) -> None:
        self.player.seek_fraction(value / POSITION_STEPS)
        self.render()

    def _tick(self) -> None:
        dt = self._clock.restart() / 1000.0
        self.player.advance(min(dt, 0.25))
        self.render()
        if not self.player.playing:
            self._timer.stop()

    # ------------------------------------------------------------------ visibility

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._stale or self.curves is None:
            self.refresh()
        if self.player.playing and not self._timer.isActive():
            self._clock.start()
            self._timer.start()

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self._timer.stop()  # no frames for nobody; playing resumes when shown again


def ring_run_to_show(
    results: Iterable[RunResult], config: AttentionConfig, devices: int
) -> RunResult | None:
    """The ring result a just-opened recording should show, None when one of (config, P) is
    there already: in config's family if the recording has one (else any), the most common P
    (the larger on a tie), the N nearest config's."""
    rings = [r for r in results if r.ring is not None and not r.oom]
    want = cache_config(config, RING)
    if not rings or any(
        cache_config(r.config, RING) == want and r.ring.devices == devices for r in rings
    ):
        return None
    fam = family_of(config, RING)
    pool = [r for r in rings if family_of(r.config, RING) == fam] or rings
    counts = Counter(r.ring.devices for r in pool)
    p = max(counts, key=lambda q: (counts[q], q))
    pool = [r for r in pool if r.ring.devices == p]
    return min(pool, key=lambda r: abs(math.log(r.config.seq_len / config.seq_len)))
