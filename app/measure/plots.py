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
  measured, at the model's (hollow) otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPixmapCache, QPolygonF
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QToolButton, QWidget

from gpu.algorithms import ALGORITHMS, NAIVE, RING, TILED, TILED_MMA, TILED_WGMMA
from gpu.config import BACKWARD, STEP, AttentionConfig
from gpu.model.backward_cost import NAIVE_BACKWARD_KERNELS
from gpu.model.costmodel import FP32, TENSOR, GpuSpec
from gpu.model.roofline import (
    DRAM,
    HBM,
    L2,
    MEASURED,
    MEMORY_ROOFS,
    MMA,
    XU,
    counted_dram_bytes,
    roofs,
)
from gpu.results import RunResult

from ..plotting.axes import drawable
from ..plotting.label_placement import first_free, stacked_candidates
from ..plotting.labelled_line import LabelledLine
from ..plotting.metric_plot import MetricPlot
from ..plotting.plot_items import Style, with_alpha
from ..plotting.series_key import SeriesKey
from ..state.app_state import AppState, Change
from ..state.current_point import AlgorithmFigures, CurrentPoint, point_for
from ..state.device_memory import device_memory_note
from ..state.family import cache_config, family
from ..state.model.cache import band, cost, known, known_band, known_verdict, prime
from ..state.model.curves import MODEL_GRID, ModelCurves, model_curves
from ..state.recorded_run import reference_label
from ..state.seq_scale import SEQ_MAX, SEQ_MIN
from ..state.units import (
    fmt_bytes,
    fmt_bytes_axis,
    fmt_flops_axis,
    fmt_int,
    fmt_intensity,
    fmt_ms,
    fmt_ms_axis,
    fmt_plain_axis,
    fmt_rate,
)
from ..window.theme import Palette
from ..work.background import LatestOnly, in_process
from ..work.pacing import before_paint, coalesced, once_per_turn, own_turn
from .explain import binds_text
from .strip_chart import TrafficStripChart

ALGOS = tuple(ALGORITHMS)  # naive first, then the fused (tiled) kernels
NAIVE_FORWARD_KERNELS = ("gemm_qk", "softmax", "gemm_pv")
#: Naive's kernels, each drawn on the time plot where measured: the forward's, then the
#: backward's (a training step times both).
NAIVE_KERNELS = NAIVE_FORWARD_KERNELS + NAIVE_BACKWARD_KERNELS
#: The time plot's title per pass.
TIME_TITLES = {
    "forward": "Time per forward pass",
    BACKWARD: "Time per backward pass",
    STEP: "Time per training step",
}
SYMBOLS = {NAIVE: "o", TILED: "s", TILED_MMA: "t", TILED_WGMMA: "d"}
#: How a reference series (a peer such as PyTorch SDPA, recorded beside ours) is drawn: muted,
#: dashed, small crosses; never in an algorithm's colour, so it cannot pass for one of ours.
REFERENCE_STYLES: dict[str, tuple[str, Qt.PenStyle, str]] = {
    "sdpa_flash": ("fg", Qt.PenStyle.DashLine, "+"),
    "sdpa_cudnn": ("muted", Qt.PenStyle.DashDotLine, "x"),
    "sdpa_math": ("muted", Qt.PenStyle.DashDotDotLine, "+"),
}
_DEFAULT_REFERENCE_STYLE = ("muted", Qt.PenStyle.DashLine, "+")
#: Roofs: (name, legend label prefix, line style).
ROOF_STYLES: dict[str, Style] = {
    HBM: Style("roof", 2.0),
    DRAM: Style("roof", 2.0),
    L2: Style("roof", 1.4, Qt.PenStyle.DashLine),
    TENSOR: Style("roof", 2.0),
    MMA: Style("roof", 1.4, Qt.PenStyle.DashLine),
    FP32: Style("muted", 1.4, Qt.PenStyle.DashDotLine),
    XU: Style("muted", 1.4, Qt.PenStyle.DotLine),
}
#: Roof names on the roofline plot (the full label, with its source, is explain's and the
#: tooltip's).
ROOF_LABELS = {HBM: "HBM", DRAM: "memory", L2: "L2", TENSOR: "tensor (wgmma)", MMA: "mma.sync",
               FP32: "fp32", XU: "exponentials"}  # fmt: skip
#: Band fill opacity (0..255) on the traffic plot.
BAND_ALPHA = 38
#: The strip chart follows the slider at most this often (ms).
STRIP_MS = 120
#: Qt's pixmap cache (KiB) that the plots' cached items share. Every data item is cached as a
#: pixmap of its extent, so a slider move blits the strips it exposes instead of repainting
#: them; at Qt's default of 10 MiB the four plots' items outgrow the cache, evict each other
#: and repaint on every move (docs/RESPONSIVENESS.md, "The pixmap cache": with this cache the
#: GUI thread's CPU per move is a third of what the plots took before at Qt's default).
PIXMAP_CACHE_KIB = 64 * 1024


def xu_label(exp_per_s: float) -> str:
    """The exponential unit's roof in plain words: how many exponentials it returns a second."""
    return f"exponentials {exp_per_s / 1e12:.3g} trillion/s"


def xu_explained(exp_per_s: float, flops_per_s: float) -> str:
    """Why the exponential unit has a roof on a FLOP/s axis, for the roofline's hover."""
    per = flops_per_s / exp_per_s
    return (
        f"{xu_label(exp_per_s)}: attention takes one exponential per score, and each score "
        f"costs {per:.0f} FLOPs of matmul (4·d), so this unit caps the FLOP rate at "
        f"{fmt_rate(flops_per_s, 'FLOP/s')}"
    )


def _symbol(a: str) -> str:
    return SYMBOLS.get(a, "h")


def _label(a: str) -> str:
    return ALGORITHMS[a].label if a in ALGORITHMS else a


class PlotsPanel(QWidget):
    """The plots; follows the app state (`on_state`) and the results (`set_measured`)."""

    def __init__(self, parent: QWidget | None = None, staged: bool = False) -> None:
        """`staged`: build nothing yet; `build_steps()` builds it a piece at a time (an export
        builds its panel between frames, so the window keeps painting)."""
        super().__init__(parent)
        self._steps = self._construct()
        if not staged:
            for _ in self._steps:
                pass

    def build_steps(self) -> Iterator[None]:
        """The rest of a staged construction, one piece (~a plot) per step."""
        return self._steps

    def _construct(self) -> Iterator[None]:
        if QPixmapCache.cacheLimit() < PIXMAP_CACHE_KIB:
            QPixmapCache.setCacheLimit(PIXMAP_CACHE_KIB)
        self.key = SeriesKey()
        self.memory = MetricPlot("memoryPlot", "Peak memory", "peak memory", fmt_bytes_axis)
        yield
        # One N label (on the memory plot) is enough; each costs a text layout per move.
        self.timing = MetricPlot(
            "timingPlot", "Time per forward pass", "time", fmt_ms_axis, cursor_label=False
        )
        yield
        self.traffic = MetricPlot(
            "trafficPlot",
            "DRAM (HBM) traffic",
            "bytes moved",
            fmt_bytes_axis,
            cursor_label=False,
        )
        yield
        self.roofline = MetricPlot(
            "rooflinePlot",
            "Roofline",
            "achieved FLOP/s",
            fmt_flops_axis,
            x_label="useful FLOP per DRAM byte (intensity)",
            x_format=fmt_plain_axis,
        )
        yield
        self.strip = TrafficStripChart()
        yield
        self.roofline.cursor.setVisible(False)  # x is FLOP/byte here, not N
        self.roofline.default_x = (0.0, 4.0)  # 1 to 10 000 FLOP/byte until points arrive
        self.timing.default_y = (-1.0, 3.0)  # 0.1 ms to 1 s until something is measured
        self.plots = (self.memory, self.timing, self.traffic, self.roofline)
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
        for plot in self.plots:
            plot.set_visible_items([])
            yield
        self.set_n_span(SEQ_MIN, SEQ_MAX)
        self.memory.hover_provider = self._hover_memory
        self.timing.hover_provider = self._hover_timing
        self.traffic.hover_provider = self._hover_traffic
        self.roofline.hover_provider = self._hover_roofline

    def _build_items(self) -> Iterator[None]:
        m, t, h, r = self.memory, self.timing, self.traffic, self.roofline
        m.add("model_naive", "naive (model)", Style(NAIVE, 2.0))
        m.add("model_tiled", "tiled, every kernel (model)", Style(TILED, 2.0))
        # A training step's saved activations for L layers (gpu/model/layer_stack.py), dashed.
        m.add("stack_naive", "naive, L layers (model)", Style(NAIVE, 1.6, Qt.PenStyle.DashLine))
        m.add("stack_tiled", "tiled, L layers (model)", Style(TILED, 1.6, Qt.PenStyle.DashLine))
        for a in ALGOS:
            m.add(
                f"measured_{a}",
                f"{_label(a)}: measured, CuPy pool",
                Style(a, symbol=_symbol(a), line=False, symbol_size=9),
            )
            m.add(
                f"device_{a}",
                f"{_label(a)}: measured, whole device",
                Style(a, symbol=_symbol(a), line=False, symbol_size=11, hollow=True),
            )
        m.add("oom", "out of memory", Style("oom", symbol="x", line=False, symbol_size=15))
        m.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=15, hollow=True),
            bounds=False,
        )
        m.key("k_model", "model", Style("fg", 2.0))
        m.key(
            "k_stack", "model: L layers' saved activations", Style("fg", 1.6, Qt.PenStyle.DashLine)
        )
        m.key("k_pool", "pool peak", Style("fg", symbol="o", line=False))
        m.key(
            "k_device",
            "device peak",
            Style("fg", symbol="o", line=False, symbol_size=10, hollow=True),
        )
        m.key("k_budget", "budget", Style("budget", 1.5, Qt.PenStyle.DashLine))
        # Left end: the small-N corner stays clear of the markers that meet the budget.
        self.budget_line = LabelledLine(m, angle=0, position=0.03, anchors=[(0, 1), (0, 1)])
        #: The lesson's first point, said on the plot: naive's peak ×4 per doubling of N.
        self.growth_label = pg.TextItem("×4 per doubling of N", anchor=(0, 0))
        self.growth_label.setVisible(False)
        m.addItem(self.growth_label, ignoreBounds=True)
        m.plotItem.vb.sigRangeChanged.connect(self._place_growth_label)
        yield

        for a in ALGOS:
            t.add(
                f"measured_{a}",
                f"{_label(a)}: measured (median)",
                Style(a, 2.0, symbol=_symbol(a), symbol_size=7),
            )
            t.add_error_bars(f"spread_{a}", f"{_label(a)}: fastest … slowest", Style(a, 1.2))
        yield
        for k in NAIVE_KERNELS:
            t.add(f"kernel_{k}", f"naive: {k}", Style(k, 1.5, Qt.PenStyle.DashLine))
        for a in ALGOS:
            t.add(
                f"roofline_{a}", f"{_label(a)}: roofline model", Style(a, 1.2, Qt.PenStyle.DotLine)
            )
        t.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=15, hollow=True),
            bounds=False,
        )
        t.key("k_measured", "median, bar: min…max", Style("fg", 2.0, symbol="o"))
        t.key("k_roofline", "roofline model", Style("fg", 1.2, Qt.PenStyle.DotLine))

        yield
        self.bands: dict[str, pg.FillBetweenItem] = {}
        for a in ALGOS:
            thin = Style(a, 0.8)
            lower = h.add(f"compulsory_{a}", f"{_label(a)}: compulsory bytes (model)", thin)
            upper = h.add(f"noreuse_{a}", f"{_label(a)}: no reuse (model)", thin)
            fill = pg.FillBetweenItem(lower, upper)
            fill.setZValue(-10)
            fill.setCacheMode(fill.CacheMode.DeviceCoordinateCache)
            h.addItem(fill)
            self.bands[a] = fill
            h.add(f"model_{a}", f"{_label(a)}: L2-aware estimate (model)", Style(a, 2.0))
            h.add(
                f"measured_{a}",
                f"{_label(a)}: measured (hardware counters)",
                Style(a, symbol=_symbol(a), line=False, symbol_size=10),
            )
            yield
        h.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=13, hollow=True),
            bounds=False,
        )
        h.key("k_l2", "model: L2-aware", Style("fg", 2.0))
        h.key("k_band", "model: compulsory…no reuse", Style("fg", 0.8, fill=90))
        h.key(
            "k_measured",
            "measured (hardware counters)",
            Style("fg", symbol="o", line=False, symbol_size=9),
        )

        yield
        for name, style in ROOF_STYLES.items():
            r.add(f"roof_{name}", name, style, bounds=False)
        for a in ALGOS:
            r.add(f"path_{a}", "", Style(a, 1.0, Qt.PenStyle.DotLine))
            r.add(
                f"at_measured_{a}",
                f"{_label(a)}: at measured intensity",
                Style(a, symbol=_symbol(a), line=False, symbol_size=9),
            )
            r.add(
                f"at_model_{a}",
                f"{_label(a)}: at model intensity",
                Style(a, symbol=_symbol(a), line=False, symbol_size=9, hollow=True),
            )
        yield
        # Where the roofline puts each algorithm at the current N: one item, a colour per point.
        r.add(
            "bounds",
            "bound at this N",
            Style("muted", symbol="o", line=False, symbol_size=13, hollow=True),
            bounds=False,
        )
        r.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=16, hollow=True),
            bounds=False,
        )
        # The L2 roof judges L2 bytes: each algorithm at its L2 intensity at this N (Nsight
        # Compute's hierarchical roofline draws one point per memory level the same way).
        r.add(
            "l2_current",
            "at L2 intensity (against the L2 roof)",
            Style("muted", symbol="d", line=False, symbol_size=11, hollow=True),
        )
        r.key("k_l2", "◇ at L2 intensity (L2 roof)", Style("muted", symbol="d", line=False))
        r.key("k_measured", "bytes measured", Style("fg", symbol="o", line=False))
        r.key("k_model", "bytes: model", Style("fg", symbol="o", line=False, hollow=True))
        self.ridge_line = LabelledLine(r, angle=90, position=0.04, anchors=[(0, 1), (0, 1)])
        self._roofs: dict[str, float] = {}  # memory roofs: B/s
        self._flat_roofs: dict[str, float] = {}  # compute roofs: FLOP/s
        #: Each roof's name and peak, written along it (Nsight Compute's way): a roof is the
        #: upper edge of where points can be, so its label never covers one.
        self.roof_labels: dict[str, pg.TextItem] = {}
        for name in ROOF_STYLES:
            diagonal = name in MEMORY_ROOFS
            label = pg.TextItem(
                anchor=(0, 1.25) if diagonal else (0, 0) if name == XU else (1, 1),
                rotateAxis=(1, 1) if diagonal else None,
            )
            label.setVisible(False)
            r.addItem(label, ignoreBounds=True)
            self.roof_labels[name] = label
        r.plotItem.vb.sigRangeChanged.connect(self._clip_roofs)
        # the exponential unit's label is placed in pixels: again when the plot's size changes
        r.plotItem.vb.sigResized.connect(self._roofline_resized)

    # ------------------------------------------------------------------ inputs

    def apply_palette(self, p: Palette) -> None:
        for plot in self.plots:
            plot.apply_palette(p)
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
        if change.changed("budget", "budget_line_label"):
            self.set_budget(s.budget.line_bytes, s.budget_line_label)
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
        for plot in self.plots[:3]:
            plot.set_x_span(lo, hi)

    def set_config(
        self, config: AttentionConfig, algorithms: Sequence[str], warm: Sequence[int] = ()
    ) -> None:
        """A new config: move the cursors now; new model curves if the family or algorithms
        changed (computed off the GUI thread; `warm`: N whose costs the slider will ask for)."""
        algorithms = tuple(a for a in ALGOS if a in algorithms)
        fam = family(config)
        if fam != self._family or algorithms != self._algorithms:
            new_pass = self._family is None or fam.pass_ != self._family.pass_
            self._family = fam
            if new_pass:
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
        for plot in self.plots[:3]:
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
            spread = [_spread(r) for r in timed]
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
        self._any_samples = any(
            t.strip.t_us for a in ALGOS for r in self._measured[a] for t in r.traffic
        )
        self.strip.set_collapsed(not self._any_samples)
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

    def _draw_roofs(self) -> None:
        """HBM and L2 roofs up to the tensor cores' peak, and a flat roof per compute unit
        (the exponential unit's in FLOP/s at this shape's 4·d FLOPs per exponential)."""
        gpu = self._gpu
        if gpu is None:
            return
        r = self.roofline
        # the backend's own: a GPU's per instruction family, or this CPU's; a roof a log axis
        # cannot draw is left out (the check refuses such files; this is the point of use)
        peaks = {n: roof for n, roof in roofs(gpu).items() if drawable(roof.peak)}
        if not peaks:
            self._roofs, self._flat_roofs = {}, {}
            return
        d = self._family.head_dim if self._family is not None else 64
        self._roofs = {n: peaks[n].peak for n in MEMORY_ROOFS if n in peaks}
        self._flat_roofs = {n: p.peak for n, p in peaks.items() if n not in MEMORY_ROOFS}
        for name, roof in peaks.items():
            r.labels[f"roof_{name}"] = ROOF_LABELS.get(name, roof.label.split(" ")[0]) + (
                f" {fmt_rate(roof.peak, roof.unit)}"
            )
        if XU in peaks:
            # one exponential per score, whose two matmuls cost 4·d FLOPs: the roof in FLOP/s
            self._flat_roofs[XU] = peaks[XU].peak * 4 * d
            r.labels[f"roof_{XU}"] = xu_label(peaks[XU].peak)
        if L2 in peaks and peaks[L2].nominal:
            r.labels[f"roof_{L2}"] += " nominal ◇"
        self._clip_roofs()
        ridge = gpu.ridge_flops_per_byte
        self.ridge_line.set(ridge, f"ridge {ridge:.0f}")

    def _clip_roofs(self, *_: object) -> None:
        """The roofs drawn within the roofline's view only (an SVG export has no clipping):
        again whenever the view's range changes."""
        if not self._flat_roofs:
            return
        r = self.roofline
        (x0, x1), (y0, y1) = r.plotItem.vb.viewRange()
        top = math.log10(max(self._flat_roofs.values()))
        for name in MEMORY_ROOFS:
            bandwidth = self._roofs.get(name)
            if bandwidth is None:
                r.set_series(f"roof_{name}", [], [])
                continue
            b = math.log10(bandwidth)  # log y = b + log x
            lo, hi = max(x0, y0 - b), min(x1, top - b, y1 - b)
            xs = [10**lo, 10**hi] if lo < hi else []
            r.set_series(f"roof_{name}", xs, [10 ** (b + x) for x in (lo, hi)][: len(xs)])
        fastest = max(self._roofs.values(), default=0.0)
        for name in ROOF_STYLES:
            value = self._flat_roofs.get(name)
            if value is None or name in MEMORY_ROOFS:
                continue
            v = math.log10(value)
            start = max(x0, v - math.log10(fastest)) if fastest else x0
            inside = y0 <= v <= y1 and start < x1
            r.set_series(
                f"roof_{name}", [10**start, 10**x1] if inside else [], [value] * 2 if inside else []
            )
        self._label_roofs()
        self._paced_roof_labels()  # placed once this turn's range changes are over

    def _label_roofs(self) -> None:
        """Each roof label's text, shown where its roof is drawn (now: the roofline's fit
        reads the labels' size; their places follow before the next paint)."""
        r = self.roofline
        for name, label in self.roof_labels.items():
            text = r.labels.get(f"roof_{name}", "")
            if text != label.toPlainText():
                label.setText(text)
            drawn = bool(r.series.get(f"roof_{name}", ([], []))[0])
            if name != XU or not drawn:  # the exponential unit's is shown where it has room
                label.setVisible(drawn)

    def _place_roof_labels(self) -> None:
        """Diagonal roofs: the label along the line near its lower end; flat roofs: above the
        line at its right end (mma.sync's mid-line, just below the wgmma roof). The exponential
        unit's goes last, to the first place free of the other labels and the memory roofs
        (at d = 64 its roof coincides with the tensor cores')."""
        r = self.roofline
        self._label_roofs()
        for name, label in self.roof_labels.items():
            xs, ys = r.series.get(f"roof_{name}", ([], []))
            if not xs or name == XU:
                continue
            lx, hx = math.log10(xs[0]), math.log10(xs[-1])
            ly = math.log10(ys[0])
            if name in MEMORY_ROOFS:
                x = lx + 0.15 * (hx - lx)
                label.setPos(x, ly + (x - lx))
            elif name == MMA:  # just below the wgmma roof: its label sits mid-line
                label.setPos(lx + 0.8 * (hx - lx), ly)
            else:
                label.setPos(hx, ly)
        self._place_xu_label()

    def _roofline_resized(self, *_: object) -> None:
        """The label room above the roofs is in pixels: fit again (unless zoomed), and place
        the exponential unit's label again."""
        if XU in self._flat_roofs and not self.roofline.user_zoomed:
            self._fit_roofline()
        self._paced_roof_labels()

    def _place_xu_label(self) -> None:
        """The exponential unit's label at its roof's right end, above the line, else moved
        left or up past what it would cover, else below the line: the first such place inside
        the plot that covers no other roof label, no point and no memory roof
        (app/plotting/label_placement.py).
        Where a small plot has no such place the label is left out; the roofline's hover
        read-out names the roof."""
        r, label = self.roofline, self.roof_labels[XU]
        xs, ys = r.series.get(f"roof_{XU}", ([], []))
        if not xs:
            return
        vb = r.plotItem.vb
        end = vb.mapViewToScene(pg.Point(math.log10(xs[-1]), math.log10(ys[0])))
        others = []
        for name, other in self.roof_labels.items():
            if name != XU and other.isVisible():
                other.updateTransform(force=True)  # the view moved: its shape follows now
                others.append(other.mapToScene(other.boundingRect()))
        lines = []
        for name in MEMORY_ROOFS:
            mx, my = r.series.get(f"roof_{name}", ([], []))
            if len(mx) == 2:
                a, b = (
                    vb.mapViewToScene(pg.Point(math.log10(x), math.log10(y)))
                    for x, y in zip(mx, my, strict=True)
                )
                lines.append((a, b))
        points = QPolygonF(  # the points, mapped in one call: a label never covers one
            [
                QPointF(math.log10(x), math.log10(y))
                for name, (mx, my) in r.series.items()
                if not name.startswith("roof_")
                for x, y in zip(mx, my, strict=True)
                if x > 0 and y > 0
            ]
        )
        for p in vb.mapViewToScene(points):
            others.append(QPolygonF(QRectF(p.x() - 7, p.y() - 7, 14, 14)))
        size = label.textItem.boundingRect()
        candidates = stacked_candidates(end, (size.width(), size.height()), others)
        rect = first_free(candidates, vb.sceneBoundingRect(), others, lines)
        label.setVisible(rect is not None)
        if rect is None:
            return
        label.setAnchor((1, 1))
        label.setPos(vb.mapSceneToView(rect.bottomRight()))
        label.updateTransform(force=True)

    def roof_label_rect(self, name: str):  # type: ignore[no-untyped-def]
        """The scene rectangle a roof's label covers now (what the layout test checks)."""
        self.flush_roof_labels()
        label = self.roof_labels[name]
        label.updateTransform(force=True)
        return label.sceneBoundingRect()

    def flush_roof_labels(self) -> None:
        """Place the roof labels now if a range change left them due (exports, tests)."""
        self._paced_roof_labels.flush()

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
        color, dash, symbol = REFERENCE_STYLES.get(peer, _DEFAULT_REFERENCE_STYLE)
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
        base = TIME_TITLES[self._family.pass_ if self._family is not None else "forward"]
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
        """Show one plot (by objectName) and the key, or everything (None)."""
        for view in (*self.plots, self.strip):
            view.setVisible(only is None or view.objectName() == only)

    def reset_views(self) -> None:
        """Every plot back to its fitted view (View ▸ Reset plots)."""
        for plot in self.plots:
            plot.reset_view()

    # ------------------------------------------------------------------ drawing

    def _request_model(self, warm: Sequence[int] = ()) -> None:
        """Compute the model curves of the current family off the GUI thread."""
        fam, algos, gpu = self._family, self._algorithms, self._time_model_gpu
        if fam is None:
            return
        warm = tuple(warm)
        self.model_worker.submit(
            in_process(model_curves, fam, algos, gpu, warm, self._gpu, self._layers),
            self._paced_model,
            failed=self._model_failed,
        )

    def _model_failed(self, exc: BaseException) -> None:
        fam, algos, gpu, band_gpu = self._family, self._algorithms, self._time_model_gpu, self._gpu
        layers = self._layers
        self.model_worker.submit(
            lambda: model_curves(fam, algos, gpu, (), band_gpu, layers), self._paced_model
        )

    def _draw_model(self, curves: ModelCurves) -> None:
        """Draw a finished set of model curves, all in one step."""
        prime(curves.costs, curves.bands)
        self._model = curves
        plots = {"memory": self.memory, "traffic": self.traffic, "timing": self.timing}
        for (plot, name), (xs, ys) in curves.series.items():
            plots[plot].set_series(name, xs, ys)
        self._place_growth_label()
        self._model_markers()  # those of a shape just worked out
        self._draw_points()
        self._measured_markers()
        if self._references:
            self._show_reference(self._references)
        self._update_visibility()

    def _place_growth_label(self, *_: object) -> None:
        """The "×4 per doubling" note just below naive's model curve, from 35 % of the view's
        width (the curve rises to its upper right, the text runs clear of it to the right),
        where the curve is in sight (hidden when naive is not shown)."""
        xs, ys = self.memory.series.get("model_naive", ([], []))
        label = self.growth_label
        shown = bool(xs) and NAIVE in self._algorithms
        if shown:
            (x0, x1), (y0, y1) = self.memory.plotItem.vb.viewRange()
            x = x0 + 0.35 * (x1 - x0)
            lx = [math.log10(v) for v in xs]
            ly = [math.log10(v) for v in ys]
            i = next((k for k in range(1, len(lx)) if lx[k] >= x), None)
            if i is None:
                shown = False
            else:
                t = (x - lx[i - 1]) / ((lx[i] - lx[i - 1]) or 1.0)
                y = ly[i - 1] + t * (ly[i] - ly[i - 1])
                shown = y0 <= y <= y1
                label.setPos(x + 0.03 * (x1 - x0), y)
        label.setVisible(shown)

    def flush_model(self) -> None:
        """Show the newest state and its model curves now (tests, exports)."""
        self.catch_up()
        self._paced_markers.flush()
        self.model_worker.flush()
        self._paced_model.flush()
        self._paced_strip.flush()
        self._paced_visibility.flush()
        self.flush_roof_labels()

    def _draw_bounds(self) -> None:
        """Where the roofline puts each algorithm at the current N (hollow markers on the
        roof that binds): its intensity, and its useful FLOPs over its roofline time."""
        gpu, config = self._gpu, self._config
        if gpu is None or config is None:
            self.roofline.set_series("bounds", [], [])
            return
        xs, ys, keys = [], [], []
        # worked out with the curves (off the GUI thread) unless they are drawn already
        point = self._point(config.seq_len, compute=self._model_ready())
        for a in self._algorithms:
            f = point.algorithms.get(a) if point is not None else None
            if f is None:
                continue
            v = f.verdict
            if not v.intensity or not v.roofline_ms:
                continue
            xs.append(v.intensity)
            ys.append(v.flops / (v.roofline_ms * 1e-3))
            keys.append(a)
        self.roofline.set_colors("bounds", keys)
        self.roofline.set_series("bounds", xs, ys)
        self._keep_markers_in_view()

    def _strip_collapsed(self, collapsed: bool) -> None:
        self._grid.setRowStretch(3, 0 if collapsed else 2)

    def _show_strip(self) -> None:
        """The counters' samples at the current N, per algorithm (paced)."""
        config = self._config
        if config is None:
            return
        self.strip.show_point(config.seq_len, self.current_results())

    def _update_visibility(self, force: bool = False) -> None:
        """Legends and y ranges follow at the end of this turn of the event loop: a state
        change, cleared series and new markers arriving together relayout them once."""
        self._relabel = self._relabel or force
        self._paced_visibility()

    def flush_visibility(self) -> None:
        self._paced_markers.flush()
        self._paced_visibility.flush()

    def _naive_kernels(self) -> tuple[str, ...]:
        """Naive's kernels the current pass times, in launch order."""
        pass_ = self._family.pass_ if self._family is not None else "forward"
        if pass_ == STEP:
            return NAIVE_KERNELS
        return NAIVE_BACKWARD_KERNELS if pass_ == BACKWARD else NAIVE_FORWARD_KERNELS

    def _has(self, plot: MetricPlot, name: str) -> bool:
        return bool(plot.series.get(name, ((), ()))[0])

    def _apply_visibility(self) -> None:
        force, self._relabel = self._relabel, False
        algos = self._algorithms
        refs = [
            f"reference_{p}" for p in self._reference_ids if self.timing.series[f"reference_{p}"][0]
        ]
        key = [(_label(a), Style(a, 2.0, symbol=_symbol(a), symbol_size=8)) for a in algos]
        kernels_shown = NAIVE in algos and self._every  # "Every series" only
        if kernels_shown:  # naive's kernels on the time plot: in their colours, so named here
            key += [
                (f"naive: {k}", self.timing.styles[f"kernel_{k}"]) for k in self._naive_kernels()
            ]
        for name in refs:
            style = self.timing.styles[name]
            key.append((self.timing.labels[name], style))
        self.key.set_entries(key)

        m = self.memory
        # The fused kernels' model curve, only under their key entries (not under the ring's:
        # its per-device memory is the Ring tab's).
        tiled_any = any(a not in (NAIVE, RING) for a in algos)
        mem = (["model_naive"] if NAIVE in algos else []) + (["model_tiled"] if tiled_any else [])
        stacks = [n for n in ("stack_naive", "stack_tiled") if self._has(m, n)]
        mem += stacks
        mem += [f"measured_{a}" for a in algos] + [f"device_{a}" for a in algos]
        if self._has(m, "oom"):
            mem.append("oom")
        mem.append("current")
        legend = ["k_model", *(["k_stack"] if stacks else []), "k_pool"]
        if any(self._has(m, f"device_{a}") for a in algos):
            legend.append("k_device")
        if self._has(m, "oom"):
            legend.append("oom")
        if self.budget_line.text:
            legend.append("k_budget")
        m.set_visible_items(mem, force=force, legend=legend)

        t = self.timing
        tim = [f"measured_{a}" for a in algos] + [f"spread_{a}" for a in algos]
        kernels = [f"kernel_{k}" for k in self._naive_kernels()] if kernels_shown else []
        tim += kernels  # listed whether or not measured yet: the legend stays put
        legend = ["k_measured"]
        if self._time_model_gpu is not None:
            tim += [f"roofline_{a}" for a in algos]
            legend.append("k_roofline")
        tim += [*refs, "current"]
        t.set_visible_items(tim, force=force, legend=legend)

        h = self.traffic
        traffic = []
        for a in algos:
            traffic += [f"compulsory_{a}", f"noreuse_{a}", f"model_{a}", f"measured_{a}"]
        for a, fill in self.bands.items():
            fill.setVisible(a in algos and self._has(h, f"noreuse_{a}"))
        legend = ["k_l2"] + (["k_band"] if any(f.isVisible() for f in self.bands.values()) else [])
        if any(self._has(h, f"measured_{a}") for a in algos):
            legend.append("k_measured")
        h.set_visible_items([*traffic, "current"], force=force, legend=legend)

        r = self.roofline
        known = {**self._roofs, **self._flat_roofs}
        roof_items = [f"roof_{n}" for n in ROOF_STYLES if n in known]
        points = []
        for a in algos:
            points += [f"path_{a}", f"at_measured_{a}", f"at_model_{a}"]
        legend = []  # the roofs are labelled along their lines
        if any(self._has(r, f"at_measured_{a}") for a in algos):
            legend.append("k_measured")
        if any(self._has(r, f"at_model_{a}") for a in algos):
            legend.append("k_model")
        legend.append("bounds")
        if self._has(r, "l2_current"):
            legend.append("k_l2")
        r.set_visible_items(
            [*roof_items, *points, *refs, "bounds", "l2_current", "current"], force, legend
        )
        self.fit()
        self._place_growth_label()

    def fit(self) -> None:
        """Re-range every plot to its visible data (after data, not cursor, changes)."""
        self.memory.fit_y(extra=[self._budget] if self._budget else [])
        self.timing.fit_y()
        self.traffic.fit_y()
        self._fit_roofline()

    def _roofline_extent(self) -> tuple[list[float], list[float]]:
        """What the roofline's axes must hold besides its data: the ridge with the roofs that
        meet there (a decade each side along x, three decades below the top roof), and the
        markers of the current N (where the roofline puts each algorithm, and where its
        measurement landed), wherever they are."""
        xs: list[float] = []
        ys: list[float] = []
        gpu = self._gpu
        if gpu is not None:
            ridge = gpu.ridge_flops_per_byte
            top = max(self._flat_roofs.values(), default=0.0) or gpu.top_flops
            xs += [ridge / 30, ridge * 10]
            ys += [top * self._label_headroom(top), top / 1000]
        for name in ("bounds", "current"):
            mx, my = self.roofline.series.get(name, ((), ()))
            xs += mx
            ys += my
        return xs, ys

    def _label_headroom(self, top: float) -> float:
        """How far above the top roof (a factor) the roofline's range reaches: 1.5, or room
        for two rows of labels where the exponential unit's roof ties with the top one (at
        d = 64 on Hopper), its label above the tensor cores' (see `_place_xu_label`)."""
        xu = self._flat_roofs.get(XU)
        vb = self.roofline.plotItem.vb
        if xu is None or xu < top / 1.5 or vb.height() <= 0:
            return 1.5
        rows = 2 * (self.roof_labels[XU].textItem.boundingRect().height() + 4) + 4
        if rows * 3 > vb.height():
            return 1.5  # too small a plot to give up that much: the hover names the roof
        (_, _), (y0, y1) = vb.viewRange()
        return max(1.5, 10 ** (rows * (y1 - y0) / vb.height()))

    def _fit_roofline(self) -> None:
        xs, ys = self._roofline_extent()
        self.roofline.fit_x(extra=xs)
        self.roofline.fit_y(extra=ys)

    def _keep_markers_in_view(self) -> None:
        """After a slider move: refit the roofline only when a marker of the new N would fall
        outside its view (a moved marker costs no relayout otherwise)."""
        r = self.roofline
        if r.user_zoomed:
            return
        (x0, x1), (y0, y1) = r.plotItem.vb.viewRange()
        for name in ("bounds", "current"):
            mx, my = r.series.get(name, ((), ()))
            for x, y in zip(mx, my, strict=True):
                lx, ly = math.log10(x), math.log10(y)
                if not (x0 <= lx <= x1 and y0 <= ly <= y1):
                    self._fit_roofline()
                    return

    # ------------------------------------------------------------------ hover read-outs

    def _nearest_n(self, x: float) -> int:
        n = 10.0**x
        candidates = set(MODEL_GRID)
        for a in self._algorithms:
            candidates.update(self._by_n[a])
        for by_n in self._reference_by_n.values():
            candidates.update(by_n)
        if self._config is not None:
            candidates.add(self._config.seq_len)
        return min(candidates, key=lambda c: abs(math.log10(c) - math.log10(n)))

    def _hover_memory(self, x: float, _y: float) -> str | None:
        if self._family is None:
            return None
        n = self._nearest_n(x)
        config = self._family.with_(seq_len=n)
        lines = [f"N = {fmt_int(n)}"]
        for a in self._algorithms:
            res = self._by_n[a].get(n)
            line = f"{_label(a)}: model {fmt_bytes(cost(config, a).peak_bytes)}"
            f = self._figures(n, a, compute=True) if res is not None and not res.oom else None
            if res is not None:
                if res.oom:
                    line += ", OOM"
                else:
                    peak = f.peak_bytes.value if f is not None else res.peak_bytes
                    line += f", measured {fmt_bytes(peak)} (CuPy pool)"
                    if res.device_peak_bytes is not None:
                        line += f", {fmt_bytes(res.device_peak_bytes)} (whole device)"
                        line += f"\n   {device_memory_note(res)}"
            lines.append(line)
        if self._budget:
            lines.append(f"budget {fmt_bytes(self._budget)}")
        if any(
            r.device_peak_bytes is not None for a in self._algorithms for r in self._measured[a]
        ):
            lines.append("pool: the buffers the run allocated")
            lines.append(
                "whole device: the drop in the device's free memory during the run (the pool's "
                "buffers and what CUDA libraries took meanwhile)"
            )
        return "\n".join(lines)

    def _hover_timing(self, x: float, _y: float) -> str | None:
        n = self._nearest_n(x)
        lines = [f"N = {fmt_int(n)}"]
        for a in self._algorithms:
            res = self._by_n[a].get(n)
            if res is None:
                lines.append(f"{_label(a)}: not measured")
            elif res.oom:
                lines.append(f"{_label(a)}: out of memory")
            else:
                lines.append(f"{_label(a)}: {fmt_ms(res.total_ms)}{_spread_text(res)}")
                if len(res.kernel_times) > 1:
                    parts = ", ".join(f"{k.name} {fmt_ms(k.ms)}" for k in res.kernel_times)
                    lines.append(f"   {parts}")
            if self._time_model_gpu is not None and (f := self._figures(n, a, True)) is not None:
                lines.append(f"   roofline {fmt_ms(f.roofline_ms.value)}")
        for peer, by_n in self._reference_by_n.items():
            res = by_n.get(n)
            if res is not None and res.total_ms:
                lines.append(f"{reference_label(peer, res.recorded)}: {fmt_ms(res.total_ms)}")
        return "\n".join(lines)

    def _hover_traffic(self, x: float, _y: float) -> str | None:
        if self._family is None or self._gpu is None:
            return None
        n = self._nearest_n(x)
        config = self._family.with_(seq_len=n)
        lines = [f"N = {fmt_int(n)}"]
        for a in self._algorithms:
            b = band(config, a, self._gpu)
            lines.append(
                f"{_label(a)}: model {fmt_bytes(b.l2_aware.hbm_bytes)} L2-aware "
                f"({fmt_bytes(b.compulsory.hbm_bytes)} … {fmt_bytes(b.no_reuse.hbm_bytes)})"
            )
            res = self._by_n[a].get(n)
            f = self._figures(n, a, compute=True) if res is not None else None
            if res is not None and f is not None and f.dram_bytes.source == MEASURED:
                # the current point's figure: the counters, compulsory writes counted in full
                dram = int(f.dram_bytes.value or 0)
                read = sum(t.dram_read_bytes for t in res.traffic)
                lines.append(
                    f"   DRAM {f.dram_bytes.text()}: hardware counters, read {fmt_bytes(read)}, "
                    f"written {fmt_bytes(dram - read)} (writes still in L2 counted)"
                )
            if res is not None and res.total_ms:
                lines.append(f"   {_bandwidth_text(res, f)}")
        return "\n".join(lines)

    def _hover_roofline(self, x: float, y: float) -> str | None:
        best, best_d = None, 0.12  # within ~0.12 decades of a marker
        gpu = self._gpu
        if gpu is None:
            return None
        for a in self._algorithms:
            for r in self._measured[a]:
                if r.oom or not r.tflops:
                    continue
                v = self._verdict(r, a)
                if v is None or not v.intensity:
                    continue
                d = math.hypot(math.log10(v.intensity) - x, math.log10(r.tflops * 1e12) - y)
                if d < best_d:
                    best, best_d = (a, r, v.intensity, v.bytes_source, v), d
        for peer, results in self._references.items():
            for r in results:
                ai = self._reference_intensity(r.config, peer) if r.tflops else None
                if r.oom or not ai:
                    continue
                d = math.hypot(math.log10(ai) - x, math.log10(r.tflops * 1e12) - y)
                if d < best_d:
                    best, best_d = (peer, r, ai, "model", None), d
        if best is None:
            ai = 10.0**x
            peaks = roofs(gpu)
            top = gpu.top_flops
            parts = [
                f"{n.upper()} roof {fmt_rate(min(top, peaks[n].peak * ai), 'FLOP/s')}"
                for n in MEMORY_ROOFS
                if n in peaks
            ]
            text = f"{fmt_intensity(ai)} FLOP/B on {self._gpu_label}: " + ", ".join(parts)
            if XU in peaks and XU in self._flat_roofs:
                text += "\n" + xu_explained(peaks[XU].peak, self._flat_roofs[XU])
            return text
        a, r, ai, source, v = best
        name = _label(a) if a in ALGORITHMS else reference_label(a, r.recorded)
        how = "measured DRAM bytes" if source == MEASURED else "model DRAM bytes (L2-aware)"
        lines = [
            f"{name}, N = {fmt_int(r.config.seq_len)}",
            f"{fmt_intensity(ai)} FLOP/B ({how}) · {fmt_rate(r.tflops * 1e12, 'FLOP/s')} achieved",
            _bandwidth_text(r, self._figures(r.config.seq_len, a) if v is not None else None),
        ]
        if v is not None:
            roof = roofs(gpu)[v.roof].label if v.roof in roofs(gpu) else v.roof
            # a tie said as the explain pane says it, not as the roof that won by a hair
            binds = binds_text(v.ties) if v.tie else f"{roof} binds"
            lines.append(f"{v.bound}-bound: {binds} (roofline {fmt_ms(v.roofline_ms)})")
        return "\n".join(lines)

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


def _spread(result: RunResult) -> tuple[float | None, float | None]:
    """(fastest, slowest) total time of a result: the sum of its kernels' min (max) times."""
    times = result.kernel_times
    if not times or any(k.min_ms is None or k.max_ms is None for k in times):
        return None, None
    return sum(k.min_ms for k in times), sum(k.max_ms for k in times)  # type: ignore[misc]


def _spread_text(result: RunResult) -> str:
    lo, hi = _spread(result)
    samples = max((k.count for k in result.kernel_times), default=0)
    if lo is None or hi is None:
        return ""
    return f", median of {samples}\n   fastest {fmt_ms(lo)}, slowest {fmt_ms(hi)}"


def _bandwidth_text(result: RunResult, figures: AlgorithmFigures | None = None) -> str:
    """DRAM bandwidth, measured where the counters were read (the current point's bytes,
    `figures`, over the measured time where given), and the model's figure named as such
    (the model's bytes over the measured time: what the run would need if every modeled byte
    went to DRAM)."""
    model = result.model_bandwidth_gbs
    measured = result.measured_bandwidth_gbs
    if figures is not None and figures.dram_bytes.source == MEASURED and result.total_ms:
        measured = (figures.dram_bytes.value or 0) / (result.total_ms * 1e-3) / 1e9
    parts = []
    if measured is not None:
        parts.append(f"DRAM {fmt_rate(measured * 1e9, 'B/s')} measured")
    if model is not None:
        parts.append(f"{fmt_rate(model * 1e9, 'B/s')} model (no-reuse bytes ÷ time)")
    return "bandwidth: " + ", ".join(parts) if parts else ""


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
            other.apply_palette(src.memory._palette)
        other.set_n_span(*src._n_span)
        yield
        if src._gpu is not None:
            other.set_gpu(src._gpu, src._gpu_label, src._time_model_gpu is not None)
            yield
        other.set_budget(src._budget, src._budget_label)
        other.set_recorded_note(src._recorded_note)
        yield
        if src._config is not None:
            other._family, other._algorithms = src._family, src._algorithms
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
