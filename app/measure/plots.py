"""The lesson's plots: peak memory, time, DRAM traffic over N, a hierarchical roofline, and the
measured samples of the current point.

Built from the plotting kit (app/plotting/). One key above the plots names the
algorithms (an algorithm has the same colour and symbol everywhere); each plot's own legend
strip, above its data, names what its line styles and markers mean. The panel follows the app state
(`on_state`): the cursor and the "you are here" markers move with the slider at once; the model
curves of a new family are computed off the GUI thread (app/state/model/curves.py, through a
LatestOnly worker) and drawn in one step when they arrive. Measurements (markers) come from the
result store through `set_measured`:

- memory: the CuPy pool's peak (filled) and the whole device's (hollow: cudaMemGetInfo, which
  also sees the cuBLAS workspace and the context); an out-of-memory run is a red ✕ at the
  memory it would have needed;
- time: the median of the repeats, with a bar from the fastest to the slowest;
- traffic: the model's band per algorithm (compulsory bytes … no reuse, the L2-aware estimate
  as the line) with the DRAM bytes the hardware counters measured as points;
- roofline: HBM and L2 roofs, a roof per compute unit (tensor cores, fp32 CUDA cores, the
  exponential unit); a point sits at measured intensity (filled) where its bytes were
  measured, at the model's (hollow) otherwise."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPixmapCache
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QToolButton, QWidget

from gpu.algorithms import NAIVE, TILED, TILED_MMA
from gpu.config import AttentionConfig
from gpu.model.costmodel import TENSOR, GpuSpec
from gpu.model.roofline import (
    HBM,
    L2,
    MEASURED,
    counted_dram_bytes,
    roofs,
)
from gpu.results import RunResult

from ..kit.theme import Palette
from ..plotting.metric_plot import MetricPlot
from ..plotting.plot_items import Style, with_alpha
from ..plotting.series_key import SeriesKey
from ..plotting.staged import Staged
from ..state.app_state import AppState, Change
from ..state.current_point import AlgorithmFigures, CurrentPoint, point_for
from ..state.decode_bandwidth import copy_bandwidth
from ..state.family import cache_config, family
from ..state.model.cache import band, cost, known, known_band, known_verdict
from ..state.model.curves import ModelCurves
from ..state.recorded_run import reference_label
from ..state.seq_scale import SEQ_MAX, SEQ_MIN
from ..state.units import (
    fmt_bandwidth_axis,
    fmt_bytes,
    fmt_bytes_axis,
    fmt_flops_axis,
    fmt_ms_axis,
    fmt_plain_axis,
)
from ..work.background import LatestOnly
from ..work.pacing import before_paint, coalesced, once_per_turn, own_turn
from .decode_plots import DecodePlots
from .model_drawing import ModelDrawing
from .plot_fit import PlotFit
from .plot_hover import PlotHover
from .plot_series import PlotSeries
from .plot_styles import (
    ALGOS,
    BAND_ALPHA,
    DEFAULT_REFERENCE_STYLE,
    NAIVE_KERNELS,
    REFERENCE_STYLES,
    TIME_TITLES,
    timing_spread,
)
from .roof_lines import RoofLines
from .strip_chart import TrafficStripChart

#: The strip chart follows the slider at most this often (ms).
STRIP_MS = 120

#: Qt's pixmap cache (KiB) that the plots' cached items share. Every data item is cached as a
#: pixmap of its extent, so a slider move blits the strips it exposes instead of repainting
#: them; at Qt's default of 10 MiB the four plots' items outgrow the cache, evict each other
#: and repaint on every move (docs/RESPONSIVENESS.md, "The pixmap cache": with this cache the
#: GUI thread's CPU per move is a third of what the plots took before at Qt's default).
PIXMAP_CACHE_KIB = 64 * 1024


class PlotsPanel(PlotSeries, RoofLines, ModelDrawing, PlotFit, PlotHover, Staged, QWidget):
    """The plots; follows the app state (`on_state`) and the results (`set_measured`)."""

    #: New model curves are drawn, their legends and ranges not yet: results drawn now share
    #: that pass (the window draws results it held for them).
    modelDrawn = Signal()

    def __init__(self, parent: QWidget | None = None, staged: bool = False) -> None:
        """`staged`: build nothing yet; `build_steps()` builds it a piece at a time (an export
        builds its panel between frames, so the window keeps painting)."""
        super().__init__(parent)
        self._build(self._construct(), staged)

    def _construct(self) -> Iterator[None]:
        if QPixmapCache.cacheLimit() < PIXMAP_CACHE_KIB:
            QPixmapCache.setCacheLimit(PIXMAP_CACHE_KIB)
        self.key = SeriesKey()
        # Each plot a few pieces at a time (MetricPlot.in_steps).
        self.memory = yield from MetricPlot.in_steps(
            "memoryPlot", "Peak memory", "peak memory", fmt_bytes_axis
        )
        yield
        # One N label (on the memory plot) is enough; each costs a text layout per move.
        self.timing = yield from MetricPlot.in_steps(
            "timingPlot", "Time per forward pass", "time", fmt_ms_axis, cursor_label=False
        )
        yield
        self.traffic = yield from MetricPlot.in_steps(
            "trafficPlot",
            "DRAM (HBM) traffic",
            "bytes moved",
            fmt_bytes_axis,
            cursor_label=False,
        )
        yield
        # The decode pass's figure of merit, in the traffic plot's place while it is shown.
        self.bandwidth = yield from MetricPlot.in_steps(
            "bandwidthPlot",
            "KV cache read per step ÷ time",
            "bytes per second",
            fmt_bandwidth_axis,
        )
        yield
        self.roofline = yield from MetricPlot.in_steps(
            "rooflinePlot",
            "Roofline",
            "achieved FLOP/s",
            fmt_flops_axis,
            x_label="useful FLOP per DRAM byte (intensity)",
            x_format=fmt_plain_axis,
        )
        yield
        self.strip = TrafficStripChart(staged=True)
        yield
        yield from self.strip.build_steps()
        yield
        self.roofline.cursor.setVisible(False)  # x is FLOP/byte here, not N
        self.roofline.default_x = (0.0, 4.0)  # 1 to 10 000 FLOP/byte until points arrive
        self.timing.default_y = (-1.0, 3.0)  # 0.1 ms to 1 s until something is measured
        self.plots = (self.memory, self.timing, self.traffic, self.roofline, self.bandwidth)
        #: The plots whose x is N: they share the slider's span and cursor.
        self.n_plots = (self.memory, self.timing, self.traffic, self.bandwidth)
        self.decode = DecodePlots(self.memory, self.bandwidth)
        grid = QGridLayout(self)
        grid.setContentsMargins(4, 0, 4, 4)
        grid.setSpacing(6)
        # Row 0: the key, and "Every series" at its right (the default view shows a few).
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.key, 1)
        self.every_button = QToolButton()
        self.every_button.setObjectName("everySeriesButton")
        self.every_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        top.addWidget(self.every_button, 0, Qt.AlignmentFlag.AlignTop)
        grid.addLayout(top, 0, 0, 1, 2)
        grid.addWidget(self.memory, 1, 0)
        grid.addWidget(self.timing, 1, 1)
        grid.addWidget(self.traffic, 2, 0)
        grid.addWidget(self.bandwidth, 2, 0)
        self.bandwidth.setVisible(False)
        self._only: str | None = None  # show_only's plot
        grid.addWidget(self.roofline, 2, 1)
        grid.addWidget(self.strip, 3, 0, 1, 2)
        grid.setRowStretch(1, 5)
        grid.setRowStretch(2, 5)
        self._grid = grid
        self.strip.collapsedChanged.connect(self._strip_collapsed)
        self.strip.set_collapsed(True)  # until some result carries samples

        self._config: AttentionConfig | None = None
        self._family: AttentionConfig | None = None
        self._layers = 1  # the saved-activation stack's L (training passes)
        self._algorithms: tuple[str, ...] = (NAIVE, TILED)
        self._every = False  # "Every series": naive's kernel lines too
        self._measured: dict[str, list[RunResult]] = {a: [] for a in ALGOS}
        self._by_n: dict[str, dict[int, RunResult]] = {a: {} for a in ALGOS}
        self._any_samples = False  # some result of the family carries counter samples
        #: Some result shown since the backend came carried samples: the strip chart keeps its
        #: room from then on, so changing the shape never changes the plots' sizes (each
        #: change of them relays out and repaints every plot in full).
        self._samples_seen = False
        self._gpu: GpuSpec | None = None
        self._gpu_label = ""
        self._time_model_gpu: GpuSpec | None = None
        self._budget: int | None = None
        self._budget_label = ""
        self._n_span: tuple[int, int] = (SEQ_MIN, SEQ_MAX)
        self._references: dict[str, list[RunResult]] = {}
        self._reference_by_n: dict[str, dict[int, RunResult]] = {}
        self._reference_ids: list[str] = []
        self._recorded_note = ""
        self._model: ModelCurves | None = None
        self._seen: AppState | None = None  # the state shown
        self._pending: AppState | None = None  # a newer one, noted while hidden
        self._pending_measured: dict[str, list[RunResult]] | None = None
        self._pending_reference: dict[str, list[RunResult]] | None = None
        self._relabel = False
        # Legends and ranges, and new model curves: each in a turn of its own (app/work/pacing.py)
        self._paced_visibility = own_turn(self._apply_visibility, parent=self)
        self._paced_model = own_turn(self._draw_model, parent=self)
        self._paced_strip = coalesced(self._show_strip, STRIP_MS, parent=self)
        self._paced_markers = once_per_turn(self._move_markers, parent=self)
        #: The roof labels follow the roofline's view once per turn, however often it moved.
        self._paced_roof_labels = before_paint(self._place_roof_labels, parent=self)
        #: Model curves are computed here, off the GUI thread; only the newest set is drawn.
        self.model_worker = LatestOnly(self)
        yield from self._build_items()
        yield
        yield from self.decode.build()
        for plot in self.plots:
            plot.set_visible_items([])
            yield
        self.set_n_span(SEQ_MIN, SEQ_MAX)
        self.memory.hover_provider = self._hover_memory
        self.timing.hover_provider = self._hover_timing
        self.traffic.hover_provider = self._hover_traffic
        self.roofline.hover_provider = self._hover_roofline

    # ------------------------------------------------------------------ inputs

    def apply_palette(self, p: Palette) -> None:
        for _ in self.palette_steps(p):
            pass

    def palette_steps(self, p: Palette) -> Iterator[None]:
        """`apply_palette` a plot per step (an export's replica)."""
        for plot in self.plots:
            plot.apply_palette(p)
            yield
        self.key.apply_palette(p)
        self.strip.apply_palette(p)
        for a, fill in self.bands.items():
            fill.setBrush(pg.mkBrush(with_alpha(p.color(a), BAND_ALPHA)))
            fill.setPen(pg.mkPen(None))
        self.budget_line.set_style(p.budget, 1.5, Qt.PenStyle.DashLine, background=p.background)
        self.ridge_line.set_style(p.muted, 1.0, Qt.PenStyle.DotLine, background=p.background)
        for name, label in self.roof_labels.items():
            label.setColor(p.roof if name in (HBM, L2, TENSOR) else p.muted)
        self.growth_label.setColor(p.color(NAIVE))
        self.decode.apply_palette(p)

    def set_legends_visible(self, visible: bool) -> None:
        """Show or hide every plot's legend strip (View ▸ Plot legends): hidden, the data get
        their rows; the key above the plots stays."""
        for plot in self.plots:
            plot.set_legend_visible(visible)

    def on_state(self, change: Change) -> None:
        """Show what changed in the app state (one call per change; see the module docstring).
        While the panel is hidden (the Tiles tab is shown) it only notes the newest state and
        catches up when shown: a hidden panel costs the slider nothing."""
        if self._seen is not None and not self.isVisible():
            self._pending = change.new
            return
        self._apply_state(change)

    def catch_up(self) -> None:
        """Apply a state noted while hidden."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._apply_state(Change.between(self._seen, pending))
        reference, self._pending_reference = self._pending_reference, None
        if reference is not None:
            self._show_reference(reference)
        measured, self._pending_measured = self._pending_measured, None
        if measured is not None:
            self._show_measured(measured)

    def showEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().showEvent(event)
        self.catch_up()

    def _apply_state(self, change: Change) -> None:
        self._seen = change.new
        s = change.new
        if change.changed("seq_scale"):
            lens = s.seq_scale
            if lens:
                self.set_n_span(min(lens[0], SEQ_MIN), max(lens[-1], SEQ_MAX))
            else:
                self.set_n_span(SEQ_MIN, SEQ_MAX)
        if change.changed("backend"):
            self.set_recorded_note(s.backend.backend.label() if s.replay else "")
            self._samples_seen = False
        if change.changed("budget", "budget_line_label"):
            self.set_budget(s.budget.line_bytes, s.budget_line_label)
        if change.changed("fit_weights", "fit_kv"):
            self.decode.set_storage(s.fit_weights, s.fit_kv)
            self._update_visibility(force=True)
        if change.changed("roof_device", "backend") and s.backend is not None:
            self.decode.set_device(s.roof_device, copy_bandwidth(s.backend.info.details))
        # While a backend starts (none ready) the roofs stay those of the last one: its
        # successor names its own GPU a moment later, and drawing a reference GPU's roofs in
        # between would redraw every roof and point twice.
        starting = s.backend is None and self._gpu is not None
        if change.changed("roof_device", "roof_device_label", "on_gpu", "backend") and not (
            starting
            or (s.roof_device, s.roof_device_label, s.on_gpu)
            == (self._gpu, self._gpu_label, self._time_model_gpu is not None)
        ):
            self.set_gpu(s.roof_device, s.roof_device_label, time_model=s.on_gpu)
        if change.changed("layers") and s.layers != self._layers:
            self.set_layers(s.layers)
        if change.changed("config", "algorithms", "seq_scale"):
            self.set_config(s.config, s.algorithms, warm=s.scale)
        if change.changed("all_series") and s.all_series != self._every:
            self._every = s.all_series
            self._update_visibility(force=True)

    def show_state(self, s: AppState) -> None:
        """Everything the state says, at once (a new panel's first look)."""
        self.on_state(Change.initial(s))

    def set_n_span(self, lo: int, hi: int) -> None:
        """The N range every N plot shows: the slider's whole scale."""
        self._n_span = (lo, hi)
        for plot in self.n_plots:
            plot.set_x_span(lo, hi)

    def set_config(
        self, config: AttentionConfig, algorithms: Sequence[str], warm: Sequence[int] = ()
    ) -> None:
        """A new config: move the cursors now; new model curves if the family or algorithms
        changed (computed off the GUI thread; `warm`: N whose costs the slider will ask for)."""
        algorithms = tuple(a for a in ALGOS if a in algorithms)
        fam = family(config)
        if fam != self._family or algorithms != self._algorithms:
            old = self._family
            new_pass = old is None or fam.pass_ != old.pass_
            self._family = fam
            self.decode.set_family(fam)
            if new_pass:
                self._place_plots()
            if new_pass or fam.new_tokens != old.new_tokens:
                self._show_timing_title()
            self._algorithms = algorithms
            self._request_model((*warm, config.seq_len))
            self._draw_roofs()
            self._update_visibility()
        self.set_seq_len(config)

    def set_layers(self, layers: int) -> None:
        """L of a training pass's saved-activation stack: its lines are redrawn (off the GUI
        thread, with the other model curves) when the family trains."""
        self._layers = layers
        self.memory.labels["stack_naive"] = f"naive, {layers} layers' saved activations (model)"
        self.memory.labels["stack_tiled"] = f"tiled, {layers} layers' saved activations (model)"
        if self._family is not None and self._family.has_backward:
            self._request_model()
        self._update_visibility(force=True)

    def set_seq_len(self, config: AttentionConfig) -> None:
        """The fast path of a slider move: the cursors (Qt-drawn lines over the cached data
        items) and the "you are here" markers; a burst of moves in one turn of the event loop
        (a fast drag) moves the markers twice, for its first move and its last."""
        self._config = config
        n = config.seq_len
        for plot in self.n_plots:
            plot.set_cursor(n)
        self.roofline.cursor_n = n
        self._paced_markers()

    def _move_markers(self) -> None:
        self._model_markers()
        self._measured_markers()
        if self._any_samples or not self.strip.is_empty():
            self._paced_strip()

    def flush_markers(self) -> None:
        """Move the markers to the N shown now, now (exports, tests)."""
        self._paced_markers.flush()

    def _model_markers(self) -> None:
        """The "you are here" markers that show the model (memory, traffic, roofline bound)."""
        config, algos = self._config, self._algorithms
        if config is None:
            return
        n = config.seq_len
        # Every fused kernel has the same peak (4 matrices + m, l): one marker for all of them.
        fused = [a for a in algos if a != NAIVE]
        model_algos = [a for a in algos if a == NAIVE] + fused[:1]
        # A shape whose model is still being worked out (off the GUI thread) gets its model
        # markers with its curves (_draw_model); the cursor moves now.
        ready = self._model_ready()
        figure = cost if ready else known
        mem = [(c.peak_bytes if (c := figure(config, a)) else None) for a in model_algos]
        self.memory.set_series("current", [n] * len(mem), mem)
        hbm = [
            (b.l2_aware.hbm_bytes if (b := self._band(config, a, ready)) else None) for a in algos
        ]
        self.traffic.set_series("current", [n] * len(hbm), hbm)
        self._draw_bounds()

    def _point(self, n: int, compute: bool = False) -> CurrentPoint | None:
        """The current point at N = n (app/state/current_point.py): the figures the explain
        pane, the Tiles banner and the status bar show for the same config and results. None
        until its model is worked out (`compute`: work it out now, the hover read-outs)."""
        if self._gpu is None or self._family is None:
            return None
        results = {a: r for a in self._algorithms if (r := self._by_n[a].get(n)) is not None}
        config = self._family.with_(seq_len=n)
        return point_for(config, self._algorithms, self._gpu, results, compute=compute)

    def _figures(self, n: int, algorithm: str, compute: bool = False) -> AlgorithmFigures | None:
        point = self._point(n, compute)
        return point.algorithms.get(algorithm) if point is not None else None

    def _verdict(self, result: RunResult, algorithm: str):  # type: ignore[no-untyped-def]
        """The roofline verdict of a shown result: the current point's at its N (None until
        its model is worked out). A result of an algorithm that ignores the tile sizes holds
        at the family's tiles too."""
        fam = self._family
        config = result.config
        if fam is None or cache_config(fam.with_(seq_len=config.seq_len), algorithm) != (
            cache_config(config, algorithm)
        ):
            return None  # not of the series shown
        f = self._figures(config.seq_len, algorithm)
        return f.verdict if f is not None else None

    def _band(self, config: AttentionConfig, algorithm: str, compute: bool):  # type: ignore[no-untyped-def]
        if self._gpu is None:
            return None
        if compute:
            return band(config, algorithm, self._gpu)
        return known_band(config, algorithm, self._gpu)

    def _model_ready(self) -> bool:
        """Whether the model curves drawn are the current family's."""
        m = self._model
        return (
            m is not None
            and m.family == self._family
            and m.algorithms == self._algorithms
            and m.gpu == self._gpu
        )

    def _measured_markers(self) -> None:
        """The "you are here" markers that show measurements (time, achieved FLOP/s)."""
        config, algos = self._config, self._algorithms
        if config is None:
            return
        n = config.seq_len
        times = [self._by_n[a].get(n) for a in algos]
        self.timing.set_series(
            "current", [n] * len(times), [r.total_ms if r else None for r in times]
        )
        xs, ys, l2x, l2y = [], [], [], []
        has_l2 = self._gpu is not None and L2 in roofs(self._gpu)
        for a in algos:
            res = self._by_n[a].get(n)
            v = self._verdict(res, a) if res is not None else None
            if v is not None and v.intensity and res is not None and res.tflops:
                xs.append(v.intensity)
                ys.append(res.tflops * 1e12)
                if has_l2 and v.l2_intensity:
                    l2x.append(v.l2_intensity)
                    l2y.append(res.tflops * 1e12)
        self.roofline.set_series("current", xs, ys, log_x=True)
        self.decode.markers(n, algos)
        self._keep_markers_in_view()
        self.roofline.set_series("l2_current", l2x, l2y, log_x=True)

    def set_measured(self, series: dict[str, list[RunResult]]) -> None:
        """Measured results of the current family, per algorithm, sorted by N (noted only while
        the panel is hidden, like the state)."""
        if self._seen is not None and not self.isVisible():
            self._pending_measured = series
            return
        self._show_measured(series)

    def _show_measured(self, series: dict[str, list[RunResult]]) -> None:
        changed = set()
        for a in ALGOS:
            results = list(series.get(a, ()))
            if _same_results(results, self._measured.get(a)):
                continue  # a result of another algorithm arrived: this one's items stay
            changed.add(a)
            self._measured[a] = results
            self._by_n[a] = {r.config.seq_len: r for r in results}
            ok = [r for r in results if not r.oom]
            ns = [r.config.seq_len for r in ok]
            self.memory.set_series(f"measured_{a}", ns, [r.peak_bytes for r in ok])
            self.memory.set_series(f"device_{a}", ns, [r.device_peak_bytes for r in ok])
            timed = [r for r in ok if r.total_ms]
            tn = [r.config.seq_len for r in timed]
            self.timing.set_series(f"measured_{a}", tn, [r.total_ms for r in timed])
            spread = [timing_spread(r) for r in timed]
            self.timing.set_error_bars(
                f"spread_{a}",
                tn,
                [r.total_ms for r in timed],
                [lo for lo, _ in spread],
                [hi for _, hi in spread],
            )
            # Measured DRAM bytes with the compulsory writes counted (some are still in L2
            # when the counters' window closes): never below the band's compulsory edge.
            self.traffic.set_series(f"measured_{a}", ns, [counted_dram_bytes(r) for r in ok])
        self.decode.set_measured(self._measured)
        self._any_samples = any(
            t.strip.t_us for a in ALGOS for r in self._measured[a] for t in r.traffic
        )
        self._samples_seen |= self._any_samples
        self.strip.set_collapsed(not self._samples_seen)
        if not changed:  # nothing to redraw; the markers follow the config all the same
            self._measured_markers()
            self._paced_strip()
            return
        self._draw_points(changed)
        naive_timed = [r for r in self._measured[NAIVE] if not r.oom and r.kernel_times]
        for k in NAIVE_KERNELS:
            xs, ys = [], []
            for r in naive_timed:
                for kt in r.kernel_times:
                    if kt.name == k:
                        xs.append(r.config.seq_len)
                        ys.append(kt.ms)
            self.timing.set_series(f"kernel_{k}", xs, ys)
        ooms = [r for a in ALGOS for r in self._measured[a] if r.oom]
        self.memory.set_series(
            "oom", [r.config.seq_len for r in ooms], [r.model_peak_bytes for r in ooms]
        )
        self._update_visibility()
        self._measured_markers()
        self._draw_bounds()  # a result with counted bytes puts its bound at measured intensity
        self._paced_strip()

    def _draw_points(self, algorithms: Iterable[str] = ALGOS) -> None:
        """The measured points on the roofline: at measured intensity where the result's bytes
        were counted (filled), at the model's otherwise (hollow), joined in N order. A point
        whose model is still being worked out (off the GUI thread) comes with the curves."""
        gpu = self._gpu
        for a in algorithms:
            timed = [r for r in self._measured[a] if not r.oom and r.tflops]
            placed = [(self._verdict(r, a), r) for r in timed] if gpu else []
            placed = [(v, r) for v, r in placed if v is not None and v.intensity]
            self.roofline.set_series(
                f"path_{a}", [v.intensity for v, _ in placed], [r.tflops * 1e12 for _, r in placed]
            )
            for source, name in ((True, f"at_measured_{a}"), (False, f"at_model_{a}")):
                pts = [(v, r) for v, r in placed if (v.bytes_source == MEASURED) == source]
                self.roofline.set_series(
                    name, [v.intensity for v, _ in pts], [r.tflops * 1e12 for _, r in pts]
                )

    def set_budget(self, budget_bytes: int | None, label: str) -> None:
        self._budget = budget_bytes
        self._budget_label = label
        figure = fmt_bytes(budget_bytes)
        text = label if label.endswith(figure) else f"{label}: {figure}"
        self.budget_line.set(budget_bytes, text)
        self.decode.set_budget(budget_bytes)
        self.memory.fit_y(extra=[budget_bytes] if budget_bytes else [])
        self._update_visibility(force=True)

    def set_gpu(self, gpu: GpuSpec, label: str, time_model: bool) -> None:
        """The GPU whose roofline is drawn; `time_model` also draws its roofline times."""
        changed = gpu != self._gpu
        self._gpu = gpu
        self._gpu_label = label
        self._time_model_gpu = gpu if time_model else None
        self._draw_roofs()
        # The GPU's name in the title, the whole label (its memory, "reference") on hover.
        self.roofline.set_title(f"Roofline: {label.split(',')[0]}")
        self.roofline.set_title_tip(f"Roofline: {label}")
        if self._family is not None and (
            self._model is None
            or self._model.time_gpu != self._time_model_gpu
            or self._model.gpu != gpu
        ):
            self._request_model()
        if changed:
            self._draw_points()
        self._draw_bounds()
        self._update_visibility(force=True)

    def set_reference(self, series: dict[str, list[RunResult]]) -> None:
        """See `_show_reference`; noted only while the panel is hidden."""
        if self._seen is not None and not self.isVisible():
            self._pending_reference = series
            return
        self._show_reference(series)

    def _show_reference(self, series: dict[str, list[RunResult]]) -> None:
        """Peers measured beside ours (PyTorch SDPA in a recording), per peer id, sorted by N:
        dashed reference series on the timing and roofline plots, labelled "PyTorch SDPA flash
        (recorded)" and so on, never as one of our algorithms. `{}` removes them."""
        if not series and not self._references:
            return  # the common case (live measurements): nothing to draw, nothing to undo
        for peer in series:
            self._ensure_reference(peer)
        self._references = {p: list(rs) for p, rs in series.items()}
        self._reference_by_n = {
            p: {r.config.seq_len: r for r in rs} for p, rs in self._references.items()
        }
        relabel = False
        for peer in self._reference_ids:
            name = f"reference_{peer}"
            timed = [r for r in self._references.get(peer, ()) if not r.oom and r.total_ms]
            label = reference_label(peer, recorded=all(r.recorded for r in timed))
            for plot in (self.timing, self.roofline):
                relabel |= plot.labels[name] != label
                plot.labels[name] = label
            self.timing.set_series(
                name, [r.config.seq_len for r in timed], [r.total_ms for r in timed]
            )
            placed = [(self._reference_intensity(r.config, peer), r) for r in timed]
            self.roofline.set_series(
                name, [x for x, _ in placed], [r.tflops * 1e12 for _, r in placed]
            )
        self.decode.set_reference(self._references)
        self._update_visibility(force=relabel)

    def _reference_intensity(self, config: AttentionConfig, peer: str) -> float | None:
        """Roofline x of a peer: its FLOPs over the DRAM bytes our model gives the same
        algorithm (our tensor-core tiled kernel for the fused SDPA backends, naive for the math
        backend, which writes S and P); the peer's own traffic is not measured."""
        if self._gpu is None:
            return None
        ours = NAIVE if peer == "sdpa_math" else TILED_MMA
        v = known_verdict(config, ours, self._gpu)
        return v.intensity if v is not None else None

    def _ensure_reference(self, peer: str) -> None:
        name = f"reference_{peer}"
        if name in self.timing.items:
            return
        self._reference_ids.append(peer)
        color, dash, symbol = REFERENCE_STYLES.get(peer, DEFAULT_REFERENCE_STYLE)
        for plot in (self.timing, self.roofline):
            item = plot.add(
                name, reference_label(peer), Style(color, 1.6, dash, symbol=symbol, symbol_size=8)
            )
            item.setVisible(False)
            if plot._palette is not None:
                plot._restyle(item, plot.styles[name], plot._palette)

    def reference_series(self) -> dict[str, list[RunResult]]:
        return {p: list(rs) for p, rs in self._references.items()}

    def set_recorded_note(self, note: str) -> None:
        """Say on the timing plot where and when its measurements were recorded
        ("NVIDIA H200, recorded 2025-06-01"); '' for live measurements."""
        self._recorded_note = note
        self._show_timing_title()

    def _show_timing_title(self) -> None:
        """'Time per training step · NVIDIA H200, recorded …': the pass, and where measured."""
        fam = self._family
        base = TIME_TITLES[fam.pass_ if fam is not None else "forward"]
        if fam is not None and fam.is_decode and fam.new_tokens > 1:
            base = f"Decode step time (q = {fam.new_tokens})"
        note = self._recorded_note
        self.timing.set_title(f"{base} · {note}" if note else base)

    def replicate(self, keep_zoom: bool = True) -> PlotsPanel:
        """A new panel showing the same data and style: exports render it offscreen at the size
        asked for, leaving the live panel (and its caches) alone. `keep_zoom`: plots the user
        zoomed show the same ranges (an SVG, which cannot clip, gets the fitted views)."""
        steps = self.replicate_steps(keep_zoom)
        for _ in steps:
            pass
        return steps.panel  # type: ignore[attr-defined]

    def replicate_steps(self, keep_zoom: bool = True) -> _Replication:
        """`replicate` a piece per step (see `build_steps`); the panel is `.panel`."""
        return _Replication(self, keep_zoom)

    def views(self) -> tuple[QWidget, ...]:
        """Every part of the panel, top to bottom: the key, the four plots, the strip chart."""
        return (self.key, *self.plots, self.strip)

    def graphics_views(self) -> tuple[pg.PlotWidget, ...]:
        """The pyqtgraph views (exports switch their caches off and draw them as vectors)."""
        return (*self.plots, self.strip.plot)

    def show_only(self, only: str | None) -> None:
        """Show one plot (by objectName) and the key, or everything (None): the decode pass
        shows the bandwidth plot in the traffic plot's place."""
        self._only = only
        self._place_plots()

    def _place_plots(self) -> None:
        only = self._only
        decode = self._family is not None and self._family.is_decode
        swapped = {self.traffic: not decode, self.bandwidth: decode}
        for view in (*self.plots, self.strip):
            if only is None:
                view.setVisible(swapped.get(view, True))
            else:
                view.setVisible(view.objectName() == only)

    def reset_views(self) -> None:
        """Every plot back to its fitted view (View ▸ Reset plots)."""
        for plot in self.plots:
            plot.reset_view()

    # ------------------------------------------------------------------ drawing

    def _strip_collapsed(self, collapsed: bool) -> None:
        self._grid.setRowStretch(3, 0 if collapsed else 2)

    def _show_strip(self) -> None:
        """The counters' samples at the current N, per algorithm (paced)."""
        config = self._config
        if config is None:
            return
        self.strip.show_point(config.seq_len, self.current_results())

    # ------------------------------------------------------------------ hover read-outs

    # ------------------------------------------------------------------ for tests and exports

    def measured_ns(self, plot: MetricPlot, algorithm: str) -> list[float]:
        return list(plot.series.get(f"measured_{algorithm}", ([], []))[0])

    def results_shown(self) -> dict[str, list[RunResult]]:
        """The results drawn now: ours per algorithm shown, and the reference peers."""
        out = {a: list(self._measured[a]) for a in self._algorithms if self._measured[a]}
        out.update({p: list(rs) for p, rs in self._references.items() if rs})
        return out

    def target_gpu(self) -> GpuSpec | None:
        return self._gpu

    def current_results(self) -> Mapping[str, RunResult]:
        """The shown algorithms' results at the current N."""
        if self._config is None:
            return {}
        n = self._config.seq_len
        return {a: r for a in self._algorithms if (r := self._by_n[a].get(n)) is not None}


class _Replication:
    """Iterates the steps of PlotsPanel.replicate; `panel` is the copy being made."""

    def __init__(self, source: PlotsPanel, keep_zoom: bool = True) -> None:
        self.source = source
        self.keep_zoom = keep_zoom
        self.panel = PlotsPanel(staged=True)
        self._steps = self._run()

    def __iter__(self) -> Iterator[None]:
        return self._steps

    def __next__(self) -> None:
        return next(self._steps)

    def _run(self) -> Iterator[None]:
        src, other = self.source, self.panel
        yield from other.build_steps()
        other.every_button.setVisible(False)  # a control, not a figure: never exported
        other._every = src._every  # the series on screen, no more, no fewer
        if src.memory._palette is not None:
            yield from other.palette_steps(src.memory._palette)
        other.set_n_span(*src._n_span)
        other.decode.copy_settings(src.decode)
        yield
        if src._gpu is not None:
            other.set_gpu(src._gpu, src._gpu_label, src._time_model_gpu is not None)
            yield
        other.set_budget(src._budget, src._budget_label)
        other.set_recorded_note(src._recorded_note)
        yield
        if src._config is not None:
            other._family, other._algorithms = src._family, src._algorithms
            other.decode.set_family(src._family)
            other._place_plots()
            other._layers = src._layers
            other.memory.labels.update(src.memory.labels)
            other._show_timing_title()
            other._draw_roofs()
            yield
            if src._model is not None:
                other._draw_model(src._model)
                yield
            other.set_seq_len(src._config)
        yield
        other.set_measured(src._measured)
        yield
        other.set_reference(src._references)
        other.flush_visibility()
        other._paced_strip.flush()
        for mine, theirs in zip(other.plots, src.plots, strict=True):
            if theirs.user_zoomed and self.keep_zoom:  # the export shows what the user sees
                (x0, x1), (y0, y1) = theirs.plotItem.vb.viewRange()
                mine.user_zoomed = True
                mine.setXRange(x0, x1, padding=0)
                mine.setYRange(y0, y1, padding=0)


def _same_results(new: list[RunResult], old: list[RunResult] | None) -> bool:
    """The same results, object for object (the store hands out the objects it holds)."""
    if old is None or len(new) != len(old):
        return False
    return all(a is b for a, b in zip(new, old, strict=True))
