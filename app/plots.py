"""The live plots: peak memory, time, HBM traffic over N, and a roofline.

Every item is created once and updated with `setData`/`setValue`; nothing is rebuilt while the
slider moves. Data are plotted in log10 coordinates by us (not pyqtgraph's log mode) so cursors,
labels and markers share one coordinate system; the axes print the real values. `series` on each
plot keeps the linear data of every item for tests and exports.

Model figures (lines) come from gpu.costmodel for the whole N range; measurements (markers)
come from the result store; an out-of-memory run is a red ✕ at the memory it would have needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QGraphicsEllipseItem, QGraphicsItem, QGridLayout, QWidget

from gpu.algorithms import ALGORITHMS, NAIVE, TILED, TILED_MMA, TILED_WGMMA
from gpu.config import AttentionConfig
from gpu.costmodel import GpuSpec
from gpu.results import RunResult

from .state.model_cache import cost
from .state.recorded_run import reference_label
from .state.seq_scale import SEQ_MAX, SEQ_MIN, log_grid
from .state.units import fmt_bytes, fmt_int, fmt_ms, fmt_rate
from .theme import Palette

pg.setConfigOptions(antialias=True)

ALGOS = tuple(ALGORITHMS)  # naive first, then the fused (tiled) kernels
NAIVE_KERNELS = ("gemm_qk", "softmax", "gemm_pv")
SYMBOLS = {NAIVE: "o", TILED: "s", TILED_MMA: "t", TILED_WGMMA: "d"}
MODEL_GRID = tuple(log_grid(SEQ_MIN, SEQ_MAX, per_octave=4))  # smooth on log-log axes
#: How a reference series (a peer such as PyTorch SDPA, recorded beside ours) is drawn: muted,
#: dashed, small crosses; never in an algorithm's colour, so it cannot pass for one of ours.
REFERENCE_STYLES: dict[str, tuple[str, Qt.PenStyle, str]] = {
    "sdpa_flash": ("fg", Qt.PenStyle.DashLine, "+"),
    "sdpa_cudnn": ("muted", Qt.PenStyle.DashDotLine, "x"),
    "sdpa_math": ("muted", Qt.PenStyle.DashDotDotLine, "+"),
}
_DEFAULT_REFERENCE_STYLE = ("muted", Qt.PenStyle.DashLine, "+")
_LOG2 = math.log10(2.0)


def _log(values: Sequence[float]) -> np.ndarray:
    return np.log10(np.asarray(values, dtype=float))


def short_n(n: float) -> str:
    n = round(n)
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return str(n)


# ------------------------------------------------------------------------------------- axes


class Log2NAxis(pg.AxisItem):
    """x axis of N in log10 coordinates, ticked at powers of two (128, 512, 2k, ... 128k)."""

    def tickValues(self, minVal, maxVal, size):
        lo, hi = sorted((minVal, maxVal))
        if hi - lo <= 0 or size <= 0:
            return []
        k0, k1 = math.ceil(lo / _LOG2 - 1e-9), math.floor(hi / _LOG2 + 1e-9)
        px_per_octave = size * _LOG2 / (hi - lo)
        step = 1
        while px_per_octave * step < 38:
            step += 1
        # Label the first power of two in view (128 on the default scale), then every step-th.
        major = [k * _LOG2 for k in range(k0, k1 + 1) if (k - k0) % step == 0]
        minor = [k * _LOG2 for k in range(k0, k1 + 1) if (k - k0) % step != 0]
        return [(step * _LOG2, major), (_LOG2, minor)]

    def tickStrings(self, values, scale, spacing):
        return [short_n(2 ** round(v / _LOG2)) for v in values]


class LogValueAxis(pg.AxisItem):
    """y (or x) axis in log10 coordinates, ticked at decades, printed with `formatter`."""

    def __init__(self, orientation: str, formatter: Callable[[float], str]) -> None:
        super().__init__(orientation)
        self.formatter = formatter

    def tickValues(self, minVal, maxVal, size):
        lo, hi = sorted((minVal, maxVal))
        if hi - lo <= 0 or size <= 0:
            return []
        d0, d1 = math.ceil(lo - 1e-9), math.floor(hi + 1e-9)
        px_per_decade = size / (hi - lo)
        step = 1
        while px_per_decade * step < 24:
            step += 1
        major = [float(d) for d in range(d0, d1 + 1) if d % step == 0]
        minor = [float(d) for d in range(d0, d1 + 1) if d % step != 0]
        if step == 1 and px_per_decade > 70:
            for d in range(math.floor(lo), math.ceil(hi) + 1):
                for m in (2, 5) if px_per_decade < 160 else (2, 3, 5):
                    v = d + math.log10(m)
                    if lo <= v <= hi:
                        (major if px_per_decade > 110 else minor).append(v)
        return [(float(step), sorted(major)), (1.0, sorted(minor))]

    def tickStrings(self, values, scale, spacing):
        return [self.formatter(10.0**v) for v in values]


def _compact(v: float, unit: str, prefixes: str = "kMGTPE") -> str:
    """Axis labels: '1 GB', '20 MB', '500 ms' — at most 3 significant digits, no padding zeros."""
    scale, prefix = 1.0, ""
    for i, p in enumerate(prefixes):
        if abs(v) >= 1000.0 ** (i + 1) * 0.9995:
            scale, prefix = 1000.0 ** (i + 1), p
    return f"{float(f'{v / scale:.3g}'):g}\u2009{prefix}{unit}"


def _fmt_bytes_axis(v: float) -> str:
    return _compact(v, "B")


def _fmt_ms_axis(v: float) -> str:
    if v >= 1000:
        return _compact(v / 1000, "s", prefixes="")
    if v >= 1:
        return _compact(v, "ms", prefixes="")
    return _compact(v * 1000, "µs", prefixes="")


def _fmt_plain(v: float) -> str:
    return f"{float(f'{v:.3g}'):g}" if v < 1000 else f"{float(f'{v / 1000:.3g}'):g}k"


def _fmt_flops_axis(v: float) -> str:
    return _compact(v, "", prefixes="kMGTPE") or "1"


# ------------------------------------------------------------------------------------- items


@dataclass(frozen=True)
class Style:
    """How an item is drawn, by palette key, so a theme switch can restyle it in place."""

    color: str  # palette series key, or "cursor" / "budget" / "oom" / "roof" / "muted"
    width: float = 2.0
    dash: Qt.PenStyle = Qt.PenStyle.SolidLine
    symbol: str | None = None
    symbol_size: float = 8.0
    line: bool = True
    hollow: bool = False


class RingMarkers:
    """Hollow circles in pixel size, drawn by Qt's own ellipse items: the markers that follow the
    slider then cost no Python paint and no Python bounding-rect calls. Mimics the part of
    ScatterPlotItem's API that MetricPlot uses."""

    def __init__(self, plot: pg.PlotWidget, size: float) -> None:
        self.vb = plot.plotItem.vb
        self.size = size
        self.rings: list[QGraphicsEllipseItem] = []
        self.visible = True
        self.count = 0
        self.pen = QPen()
        #: What the legend shows for this item (a ring drawn by pyqtgraph, never in the plot).
        self.legend_sample = pg.ScatterPlotItem(symbol="o", size=size)

    def _ring(self, i: int) -> QGraphicsEllipseItem:
        while len(self.rings) <= i:
            s = self.size
            ring = QGraphicsEllipseItem(-s / 2, -s / 2, s, s)
            ring.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations)
            ring.setBrush(Qt.BrushStyle.NoBrush)
            ring.setPen(self.pen)
            ring.setZValue(50)
            self.vb.addItem(ring, ignoreBounds=True)
            self.rings.append(ring)
        return self.rings[i]

    def setData(self, x=(), y=(), pen=None, **_: object) -> None:  # type: ignore[no-untyped-def]
        self.count = len(x)
        for i in range(self.count):
            ring = self._ring(i)
            ring.setPos(float(x[i]), float(y[i]))
            ring.setPen(pen[i] if isinstance(pen, list) else self.pen)
            ring.setVisible(self.visible)
        for ring in self.rings[self.count :]:
            ring.setVisible(False)

    def setVisible(self, visible: bool) -> None:
        self.visible = visible
        for i, ring in enumerate(self.rings):
            ring.setVisible(visible and i < self.count)

    def isVisible(self) -> bool:
        return self.visible

    def setPen(self, pen: QPen) -> None:
        self.pen = QPen(pen)
        for ring in self.rings:
            ring.setPen(self.pen)
        self.legend_sample.setPen(pen)
        self.legend_sample.setBrush(None)


class MetricPlot(pg.PlotWidget):
    """One plot: named items, a cursor, a hover read-out; data in log10 coordinates."""

    def __init__(
        self,
        object_name: str,
        title: str,
        y_label: str,
        y_format: Callable[[float], str],
        x_label: str = "sequence length N",
        x_format: Callable[[float], str] | None = None,
        legend_cols: int = 1,
        cursor_label: bool = True,
        legend_at: tuple[int, int] = (6, 4),
    ) -> None:
        bottom = Log2NAxis("bottom") if x_format is None else LogValueAxis("bottom", x_format)
        self._n_axis = x_format is None
        super().__init__(axisItems={"bottom": bottom, "left": LogValueAxis("left", y_format)})
        self.setObjectName(object_name)
        self.title = title
        self.plotItem.setMenuEnabled(False)
        self.plotItem.hideButtons()
        self.setLabel("bottom", x_label)
        self.setLabel("left", y_label)
        self.getAxis("left").setWidth(62)
        self.plotItem.setTitle(title, size="10pt")
        self.legend = self.plotItem.addLegend(
            offset=legend_at, labelTextSize="8pt", colCount=legend_cols, verSpacing=-6
        )
        self.legend.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        #: A second legend (top left) for reference series, made on first use: peers get their
        #: own box instead of lengthening the main one over the data.
        self.side_legend: pg.LegendItem | None = None
        self.items: dict[str, pg.PlotDataItem] = {}
        self.styles: dict[str, Style] = {}
        self.labels: dict[str, str] = {}
        #: Linear data of every item, as last set: name -> (x, y).
        self.series: dict[str, tuple[list[float], list[float]]] = {}
        # The grid is a cached line item of ours: pyqtgraph's axis grid repaints both axes
        # (a QPicture replay each) in every strip the cursor exposes.
        self.grid = pg.PlotCurveItem(connect="pairs")
        self.grid.setZValue(-100)
        self.grid.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.addItem(self.grid, ignoreBounds=True)
        self.x_ticks: Callable[[float, float], list[float]] = _octaves if self._n_axis else _decades
        self.plotItem.vb.sigRangeChanged.connect(self._update_grid)
        self.cursor = pg.InfiniteLine(angle=90, movable=False)
        self.cursor_label = pg.InfLineLabel(
            self.cursor, text="", position=0.04, anchors=[(0, 1), (0, 1)]
        )
        self.cursor_label.setVisible(cursor_label)
        self._show_cursor_label = cursor_label
        self.addItem(self.cursor, ignoreBounds=True)
        self.cursor_n: int | None = None
        self.hover = pg.TextItem(anchor=(0, 1))
        self.hover.setZValue(100)
        self.hover.setVisible(False)
        self.addItem(self.hover, ignoreBounds=True)
        self.hover_provider: Callable[[float, float], str | None] | None = None
        self._proxy = pg.SignalProxy(self.scene().sigMouseMoved, rateLimit=30, slot=self._on_mouse)
        self._palette: Palette | None = None
        self._visible_names: list[str] = []
        # Ranges are set by fit_y when data change, never by pyqtgraph's auto-range: it
        # re-ranges (and repaints the whole plot) whenever any item moves, cursors included.
        self.plotItem.vb.disableAutoRange()
        self._bounded: set[str] = set()
        self._spot_colors: dict[str, list[str]] = {}
        self._y_range: tuple[float, float] | None = None
        self.default_y = (0.0, 1.0)

    def add(self, name: str, label: str, style: Style, bounds: bool = True):  # type: ignore[no-untyped-def]
        """A named item; `bounds=False` keeps it out of auto-range (markers that follow the
        slider must not make every move re-range and repaint the whole plot)."""
        self.styles[name] = style
        self.labels[name] = label
        self.series[name] = ([], [])
        if not bounds and style.hollow:  # moves with the slider: Qt-drawn rings
            self.items[name] = RingMarkers(self, style.symbol_size)
            return self.items[name]
        # Markers alone are plain ScatterPlotItems: a PlotDataItem costs twice as much per setData.
        item = pg.PlotDataItem() if style.line else pg.ScatterPlotItem(pxMode=True)
        self.items[name] = item
        self.addItem(item, ignoreBounds=not bounds)
        if bounds:
            self._bounded.add(name)
            # Data items change only with data; cached as pixmaps, the strips a slider move
            # exposes are blitted instead of repainted in Python (measured: -25% per move).
            for part in (
                (item,) if isinstance(item, pg.ScatterPlotItem) else (item.curve, item.scatter)
            ):
                part.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        return item

    def fit_y(self, extra: Sequence[float] = ()) -> None:
        """Range y over the visible data items (and `extra` values), in log10 units."""
        ys = [y for y in extra if y and y > 0]
        for name in self._bounded:
            if self.items[name].isVisible():
                ys.extend(self.series[name][1])
        if ys:
            lo, hi = math.log10(min(ys)), math.log10(max(ys))
        else:
            lo, hi = self.default_y
        pad = max(0.08 * (hi - lo), 0.3)
        target = (lo - pad, hi + pad)
        if target != self._y_range:
            self._y_range = target
            self.setYRange(*target, padding=0)

    def set_series(self, name: str, xs: Sequence[float], ys: Sequence[float], log_x: bool = True):
        """Plot linear (x, y); non-positive or missing values are left out (log axes)."""
        pts = [
            (x, y)
            for x, y in zip(xs, ys, strict=True)
            if x is not None and y is not None and x > 0 and y > 0
        ]
        self.series[name] = ([p[0] for p in pts], [p[1] for p in pts])
        item = self.items[name]
        if not pts:
            item.setData(x=[], y=[])
            return
        arr = np.asarray(pts, dtype=float)
        x = np.log10(arr[:, 0]) if log_x else arr[:, 0]
        item.setData(x=x, y=np.log10(arr[:, 1]), **self._spot_style(name, len(pts)))

    def _spot_style(self, name: str, count: int) -> dict:
        """Per-point colours of a multi-colour marker item (set_colors), else nothing."""
        colors = self._spot_colors.get(name)
        if not colors or self._palette is None:
            return {}
        pens = [pg.mkPen(self._color(self._palette, c), width=2) for c in colors[:count]]
        return {"pen": pens, "brush": None} if self.styles[name].hollow else {"brush": pens}

    def set_colors(self, name: str, color_keys: Sequence[str]) -> None:
        """Colour the points of `name` one by one (palette keys), for the next set_series."""
        self._spot_colors[name] = list(color_keys)

    def set_cursor(self, n: int) -> None:
        self.cursor_n = n
        x = math.log10(n)
        self.cursor.setValue(x)
        if not self._show_cursor_label:
            return
        self.cursor_label.setFormat(f"N = {fmt_int(n)}")
        # Text on the right of the line, or on its left near the right edge (never clipped).
        (x0, x1), _ = self.plotItem.vb.viewRange()
        side = 1.0 if x1 > x0 and (x - x0) / (x1 - x0) > 0.7 else 0.0
        if self.cursor_label.anchors[0][0] != side:
            self.cursor_label.anchors = [(side, 1), (side, 1)]
            self.cursor_label.updatePosition()

    def _update_grid(self, *_: object) -> None:
        (x0, x1), (y0, y1) = self.plotItem.vb.viewRange()
        xs, ys = [], []
        for x in self.x_ticks(x0, x1):
            xs += [x, x]
            ys += [y0 - 1, y1 + 1]
        for y in _decades(y0, y1):
            xs += [x0 - 1, x1 + 1]
            ys += [y, y]
        self.grid.setData(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))

    def set_x_span(self, lo: float, hi: float) -> None:
        """Fix the x range (linear units) so the cursor never leaves the view."""
        self.plotItem.vb.enableAutoRange(x=False)
        self.setXRange(math.log10(lo), math.log10(hi), padding=0.06)

    def set_visible_items(self, names: Sequence[str], force: bool = False) -> None:
        """Show these items (legend in this order); hide the others."""
        names = [n for n in names if n in self.items]
        for name, item in self.items.items():
            item.setVisible(name in names)
        if force or names != self._visible_names:
            self._visible_names = list(names)
            self.legend.clear()
            side = [n for n in names if n.startswith("reference_") and self.labels.get(n)]
            if side and self.side_legend is None:
                self._make_side_legend()
            if self.side_legend is not None:
                self.side_legend.clear()
                self.side_legend.setVisible(bool(side))
            for name in names:
                if self.labels.get(name):
                    item = self.items[name]
                    sample = item.legend_sample if isinstance(item, RingMarkers) else item
                    legend = self.side_legend if name in side else self.legend
                    legend.addItem(sample, self.labels[name])

    def _make_side_legend(self) -> None:
        legend = pg.LegendItem(offset=(6, 4), labelTextSize="8pt", verSpacing=-6)
        legend.setParentItem(self.plotItem.vb)
        legend.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.side_legend = legend
        if self._palette is not None:
            self._style_legend(legend, self._palette)

    def _style_legend(self, legend: pg.LegendItem, p: Palette) -> None:
        legend.setLabelTextColor(p.foreground)
        legend.setBrush(pg.mkBrush(_with_alpha(p.background, 200)))
        legend.setPen(pg.mkPen(_with_alpha(p.muted, 120)))

    def apply_palette(self, p: Palette) -> None:
        self._palette = p
        self.setBackground(p.background)
        for axis in ("left", "bottom"):
            ax = self.getAxis(axis)
            ax.setPen(pg.mkPen(p.muted))
            ax.setTextPen(pg.mkPen(p.foreground))
            ax.setGrid(False)
        self.grid.setPen(pg.mkPen(_with_alpha(p.foreground, int(255 * p.grid_alpha)), width=1))
        self.plotItem.titleLabel.setText(self.title, color=p.foreground, size="10pt")
        for axis in ("left", "bottom"):
            label = self.getAxis(axis).labelText
            self.setLabel(axis, label, color=p.muted)
        for name, style in self.styles.items():
            self._restyle(self.items[name], style, p)
        self.cursor.setPen(pg.mkPen(p.cursor, width=1.2, style=Qt.PenStyle.DashLine))
        self.cursor_label.setColor(p.cursor)
        self.hover.setColor(p.foreground)
        self.hover.fill = pg.mkBrush(_with_alpha(p.background, 225))
        self.hover.border = pg.mkPen(p.muted)
        for legend in (self.legend, self.side_legend):
            if legend is not None:
                self._style_legend(legend, p)
        # Legend samples cache their look; re-adding them picks up the new pens.
        names, self._visible_names = self._visible_names, []
        self.set_visible_items(names)

    @staticmethod
    def _color(p: Palette, key: str) -> str:
        return {
            "cursor": p.cursor,
            "budget": p.budget,
            "oom": p.oom,
            "roof": p.roof,
            "muted": p.muted,
            "fg": p.foreground,
        }.get(key) or p.color(key)

    def _restyle(self, item, style: Style, p: Palette) -> None:  # type: ignore[no-untyped-def]
        color = self._color(p, style.color)
        if isinstance(item, RingMarkers):
            item.setPen(pg.mkPen(color, width=2))
            return
        if isinstance(item, pg.ScatterPlotItem):
            item.setSymbol(style.symbol or "o")
            item.setSize(style.symbol_size)
            if style.hollow:
                item.setBrush(None)
                item.setPen(pg.mkPen(color, width=2))
            else:
                item.setBrush(pg.mkBrush(color))
                item.setPen(pg.mkPen(p.background, width=1))
            return
        pen = pg.mkPen(color, width=style.width, style=style.dash) if style.line else None
        item.setPen(pen)
        if style.symbol:
            item.setSymbol(style.symbol)
            item.setSymbolSize(style.symbol_size)
            if style.hollow:
                item.setSymbolBrush(None)
                item.setSymbolPen(pg.mkPen(color, width=2))
            else:
                item.setSymbolBrush(pg.mkBrush(color))
                item.setSymbolPen(pg.mkPen(p.background, width=1))
        else:
            item.setSymbol(None)

    def _on_mouse(self, event: tuple[QPointF]) -> None:
        pos = event[0]
        vb = self.plotItem.vb
        if self.hover_provider is None or not vb.sceneBoundingRect().contains(pos):
            self.hover.setVisible(False)
            return
        point = vb.mapSceneToView(pos)
        text = self.hover_provider(point.x(), point.y())
        if not text:
            self.hover.setVisible(False)
            return
        self.hover.setText(text)
        # Keep the box inside the view: flip to the left/below in the right/top half.
        (x0, x1), (y0, y1) = vb.viewRange()
        ax = 1.0 if point.x() > (x0 + x1) / 2 else 0.0
        ay = 0.0 if point.y() > (y0 + y1) / 2 else 1.0
        self.hover.setAnchor((ax, ay))
        self.hover.setPos(point)
        self.hover.setVisible(True)


def _reference_intensity(config: AttentionConfig, peer: str) -> float:
    """Roofline x of a peer: its FLOPs over the HBM bytes our model gives the same algorithm
    (our tensor-core tiled kernel for the fused SDPA backends, naive for the math backend,
    which writes S and P); the peer's own traffic is not measured."""
    return cost(config, NAIVE if peer == "sdpa_math" else TILED_MMA).arithmetic_intensity


def _decades(lo: float, hi: float) -> list[float]:
    return [float(d) for d in range(math.ceil(lo), math.floor(hi) + 1)]


def _octaves(lo: float, hi: float) -> list[float]:
    return [k * _LOG2 for k in range(math.ceil(lo / _LOG2), math.floor(hi / _LOG2) + 1)]


def _with_alpha(color: str, alpha: int) -> tuple[int, int, int, int]:
    c = pg.mkColor(color)
    return (c.red(), c.green(), c.blue(), alpha)


# ------------------------------------------------------------------------------------- panel


class PlotsPanel(QWidget):
    """The four plots, driven by the main window: model on config, markers on results."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.memory = MetricPlot("memoryPlot", "Peak memory", "peak memory", _fmt_bytes_axis)
        # One N label (on the memory plot) is enough; each costs a text layout per move.
        self.timing = MetricPlot(
            "timingPlot",
            "Time per forward pass",
            "time",
            _fmt_ms_axis,
            cursor_label=False,
            legend_at=(-6, -4),  # nothing is ever fast at large N: the bottom right stays empty
        )
        self.traffic = MetricPlot(
            "trafficPlot",
            "HBM traffic (model)",
            "bytes moved",
            _fmt_bytes_axis,
            cursor_label=False,
        )
        self.roofline = MetricPlot(
            "rooflinePlot",
            "Roofline",
            "achieved FLOP/s",
            _fmt_flops_axis,
            x_label="arithmetic intensity (FLOP/byte)",
            x_format=_fmt_plain,
            legend_at=(-6, -4),  # under the flat roof, right of the points: stays empty
        )
        self.roofline.cursor.setVisible(False)  # x is FLOP/byte here, not N
        self.roofline.setXRange(0.0, 4.0, padding=0.02)  # 1 to 10 000 FLOP/byte
        self.timing.default_y = (-1.0, 3.0)  # 0.1 ms to 1 s until something is measured
        self.plots = (self.memory, self.timing, self.traffic, self.roofline)
        grid = QGridLayout(self)
        grid.setContentsMargins(4, 4, 4, 4)
        grid.setSpacing(6)
        grid.addWidget(self.memory, 0, 0)
        grid.addWidget(self.timing, 0, 1)
        grid.addWidget(self.traffic, 1, 0)
        grid.addWidget(self.roofline, 1, 1)

        self._config: AttentionConfig | None = None
        self._family: AttentionConfig | None = None
        self._algorithms: tuple[str, ...] = (NAIVE, TILED)
        self._measured: dict[str, list[RunResult]] = {a: [] for a in ALGOS}
        self._by_n: dict[str, dict[int, RunResult]] = {a: {} for a in ALGOS}
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
        self._build_items()
        for plot in self.plots:
            plot.set_visible_items([])
        self.set_n_span(SEQ_MIN, SEQ_MAX)
        self.memory.hover_provider = self._hover_memory
        self.timing.hover_provider = self._hover_timing
        self.traffic.hover_provider = self._hover_traffic
        self.roofline.hover_provider = self._hover_roofline

    def _build_items(self) -> None:
        m, t, h, r = self.memory, self.timing, self.traffic, self.roofline
        m.add("model_naive", "naive (model)", Style(NAIVE, 2.0))
        m.add("model_tiled", "tiled, every kernel (model)", Style(TILED, 2.0))
        for a in ALGOS:
            m.add(
                f"measured_{a}",
                f"{ALGORITHMS[a].label}",
                Style(a, symbol=SYMBOLS.get(a, "h"), line=False, symbol_size=9),
            )
        m.add("oom", "out of memory", Style("oom", symbol="x", line=False, symbol_size=15))
        m.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=15, hollow=True),
            bounds=False,
        )
        self.budget_line = pg.InfiniteLine(angle=0, movable=False)
        self.budget_label = pg.InfLineLabel(
            self.budget_line, text="", position=0.97, anchors=[(1, 1), (1, 1)]
        )
        m.addItem(self.budget_line, ignoreBounds=True)
        self.budget_line.setVisible(False)

        for a in ALGOS:
            t.add(
                f"measured_{a}",
                ALGORITHMS[a].label,
                Style(a, 2.0, symbol=SYMBOLS.get(a, "h"), symbol_size=7),
            )
        for k in NAIVE_KERNELS:
            t.add(
                f"kernel_{k}",
                f"naive: {k}",
                Style(k, 1.5, Qt.PenStyle.DashLine),
            )
        for a in ALGOS:
            t.add(f"roofline_{a}", "", Style(a, 1.2, Qt.PenStyle.DotLine))
        t.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=15, hollow=True),
            bounds=False,
        )

        for a in ALGOS:
            h.add(f"model_{a}", f"{ALGORITHMS[a].label}", Style(a, 2.0))
        h.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=13, hollow=True),
            bounds=False,
        )

        r.add("roof", "roofline", Style("roof", 2.0))
        # Where the roofline puts each algorithm at the current N: one item, a colour per point.
        r.add(
            "bounds",
            "roofline bound",
            Style("muted", symbol="o", line=False, symbol_size=13, hollow=True),
            bounds=False,
        )
        for a in ALGOS:
            r.add(
                f"measured_{a}",
                f"{ALGORITHMS[a].label}",
                Style(a, 1.0, Qt.PenStyle.DotLine, symbol=SYMBOLS.get(a, "h"), symbol_size=8),
            )
        r.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=16, hollow=True),
            bounds=False,
        )
        self.ridge_line = pg.InfiniteLine(angle=90, movable=False)
        self.ridge_label = pg.InfLineLabel(
            self.ridge_line, text="", position=0.55, anchors=[(0, 0.5), (0, 0.5)]
        )
        r.addItem(self.ridge_line, ignoreBounds=True)

    # ------------------------------------------------------------------ inputs

    def apply_palette(self, p: Palette) -> None:
        for plot in self.plots:
            plot.apply_palette(p)
        self.budget_line.setPen(pg.mkPen(p.budget, width=1.5, style=Qt.PenStyle.DashLine))
        self.budget_label.setColor(p.budget)
        self.ridge_line.setPen(pg.mkPen(p.muted, width=1, style=Qt.PenStyle.DotLine))
        self.ridge_label.setColor(p.muted)

    def set_n_span(self, lo: int, hi: int) -> None:
        """The N range every N plot shows: the slider's whole scale."""
        self._n_span = (lo, hi)
        for plot in self.plots[:3]:
            plot.set_x_span(lo, hi)

    def set_config(self, config: AttentionConfig, algorithms: Sequence[str]) -> None:
        """A new config: redraw model curves if the family or algorithms changed, move cursors."""
        algorithms = tuple(a for a in ALGOS if a in algorithms)
        family = config.with_(seq_len=SEQ_MIN)
        if family != self._family or algorithms != self._algorithms:
            self._family = family
            self._algorithms = algorithms
            self._draw_model()
            self._update_visibility()
        self.set_seq_len(config)

    def set_seq_len(self, config: AttentionConfig) -> None:
        """The fast path of a slider move: cursors and "you are here" markers only."""
        self._config = config
        n = config.seq_len
        for plot in self.plots[:3]:
            plot.set_cursor(n)
        self.roofline.cursor_n = n
        algos = self._algorithms
        # Every fused kernel has the same peak (4 matrices + m, l): one marker for all of them.
        fused = [a for a in algos if a != NAIVE]
        model_algos = [a for a in algos if a == NAIVE] + fused[:1]
        mem_y = [cost(config, a).peak_bytes for a in model_algos]
        self.memory.set_series("current", [n] * len(mem_y), mem_y)
        self.traffic.set_series(
            "current", [n] * len(algos), [cost(config, a).hbm_bytes for a in algos]
        )
        times = [self._by_n[a].get(n) for a in algos]
        self.timing.set_series(
            "current", [n] * len(times), [r.total_ms if r else None for r in times]
        )
        xs, ys = [], []
        for a in algos:
            c = cost(config, a)
            res = self._by_n[a].get(n)
            if res is not None and res.tflops:
                xs.append(c.arithmetic_intensity)
                ys.append(res.tflops * 1e12)
        self.roofline.set_series("current", xs, ys, log_x=True)
        self._draw_bounds()

    def set_measured(self, series: dict[str, list[RunResult]]) -> None:
        """Measured results of the current family, per algorithm, sorted by N."""
        for a in ALGOS:
            results = list(series.get(a, ()))
            self._measured[a] = results
            self._by_n[a] = {r.config.seq_len: r for r in results}
            ok = [r for r in results if not r.oom]
            self.memory.set_series(
                f"measured_{a}", [r.config.seq_len for r in ok], [r.peak_bytes for r in ok]
            )
            timed = [r for r in ok if r.total_ms]
            self.timing.set_series(
                f"measured_{a}", [r.config.seq_len for r in timed], [r.total_ms for r in timed]
            )
            self.roofline.set_series(
                f"measured_{a}",
                [cost(r.config, a).arithmetic_intensity for r in timed],
                [r.tflops * 1e12 for r in timed],
            )
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
        if self._config is not None:
            self.set_seq_len(self._config)

    def set_budget(self, budget_bytes: int | None, label: str) -> None:
        self._budget = budget_bytes
        self._budget_label = label
        if budget_bytes:
            self.budget_line.setValue(math.log10(budget_bytes))
            text = label if "GB" in label else f"{label}: {fmt_bytes(budget_bytes)}"
            self.budget_label.setFormat(text)
            self.budget_line.setVisible(True)
        else:
            self.budget_line.setVisible(False)
        self.memory.fit_y(extra=[budget_bytes] if budget_bytes else [])

    def set_gpu(self, gpu: GpuSpec, label: str, time_model: bool) -> None:
        """The GPU whose roofline is drawn; `time_model` also draws its roofline times."""
        self._gpu = gpu
        self._gpu_label = label
        self._time_model_gpu = gpu if time_model else None
        ai = np.logspace(0, 4, 60)
        roof = np.minimum(gpu.fp16_tensor_flops, gpu.bandwidth_bytes_s * ai)
        self.roofline.set_series("roof", ai, roof)
        ridge = gpu.ridge_flops_per_byte
        self.ridge_line.setValue(math.log10(ridge))
        self.ridge_label.setFormat(f"ridge {ridge:.0f} FLOP/B")
        self.roofline.title = f"Roofline: {label}"
        self.roofline.plotItem.titleLabel.setText(
            self.roofline.title,
            color=self.roofline._palette.foreground if self.roofline._palette else None,
            size="10pt",
        )
        self._draw_time_model()
        self._draw_bounds()
        self._update_visibility()

    def set_reference(self, series: dict[str, list[RunResult]]) -> None:
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
            self.roofline.set_series(
                name,
                [_reference_intensity(r.config, peer) for r in timed],
                [r.tflops * 1e12 for r in timed],
            )
        self._update_visibility(force=relabel)

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
        base = "Time per forward pass"
        self.timing.title = f"{base} · {note}" if note else base
        pal = self.timing._palette
        self.timing.plotItem.titleLabel.setText(
            self.timing.title, color=pal.foreground if pal else None, size="10pt"
        )

    def replicate(self) -> PlotsPanel:
        """A new panel showing the same data and style: exports render it offscreen at the size
        asked for, leaving the live panel (and its caches) alone."""
        other = PlotsPanel()
        if self.memory._palette is not None:
            other.apply_palette(self.memory._palette)
        other.set_n_span(*self._n_span)
        if self._gpu is not None:
            other.set_gpu(self._gpu, self._gpu_label, self._time_model_gpu is not None)
        other.set_budget(self._budget, self._budget_label)
        other.set_recorded_note(self._recorded_note)
        if self._config is not None:
            other.set_config(self._config, self._algorithms)
        other.set_measured(self._measured)
        other.set_reference(self._references)
        return other

    # ------------------------------------------------------------------ drawing

    def _draw_model(self) -> None:
        fam = self._family
        assert fam is not None
        configs = [fam.with_(seq_len=n) for n in MODEL_GRID]
        self.memory.set_series(
            "model_naive", MODEL_GRID, [cost(c, NAIVE).peak_bytes for c in configs]
        )
        self.memory.set_series(
            "model_tiled", MODEL_GRID, [cost(c, TILED).peak_bytes for c in configs]
        )
        for a in ALGOS:
            if a in self._algorithms:
                self.traffic.set_series(
                    f"model_{a}", MODEL_GRID, [cost(c, a).hbm_bytes for c in configs]
                )
            else:
                self.traffic.set_series(f"model_{a}", [], [])
        self._draw_time_model()

    def _draw_time_model(self) -> None:
        gpu, fam = self._time_model_gpu, self._family
        for a in ALGOS:
            if gpu is None or fam is None or a not in self._algorithms:
                self.timing.set_series(f"roofline_{a}", [], [])
                continue
            ys = [cost(fam.with_(seq_len=n), a).modeled_seconds(gpu) * 1e3 for n in MODEL_GRID]
            self.timing.set_series(f"roofline_{a}", MODEL_GRID, ys)

    def _draw_bounds(self) -> None:
        """Where the roofline puts each algorithm at the current N (hollow markers on the roof)."""
        gpu, config = self._gpu, self._config
        if gpu is None or config is None:
            self.roofline.set_series("bounds", [], [])
            return
        xs, ys = [], []
        for a in self._algorithms:
            ai = cost(config, a).arithmetic_intensity
            xs.append(ai)
            ys.append(min(gpu.fp16_tensor_flops, gpu.bandwidth_bytes_s * ai))
        self.roofline.set_colors("bounds", self._algorithms)
        self.roofline.set_series("bounds", xs, ys)

    def _update_visibility(self, force: bool = False) -> None:
        algos = self._algorithms
        refs = [
            f"reference_{p}" for p in self._reference_ids if self.timing.series[f"reference_{p}"][0]
        ]
        tiled_any = any(a != NAIVE for a in algos)
        mem = []
        if NAIVE in algos:
            mem.append("model_naive")
        if tiled_any:
            mem.append("model_tiled")
        mem += [f"measured_{a}" for a in algos]
        if self.memory.series["oom"][0]:
            mem.append("oom")
        mem.append("current")
        self.memory.set_visible_items(mem)
        tim = [f"measured_{a}" for a in algos]
        if NAIVE in algos:
            tim += [f"kernel_{k}" for k in NAIVE_KERNELS if self.timing.series[f"kernel_{k}"][0]]
        relabel = False
        if self._time_model_gpu is not None:
            tim += [f"roofline_{a}" for a in algos]
            for i, a in enumerate(algos):
                label = f"roofline model ({self._gpu_label})" if i == 0 else ""
                relabel |= self.timing.labels[f"roofline_{a}"] != label
                self.timing.labels[f"roofline_{a}"] = label
        tim += refs
        tim.append("current")
        self.timing.set_visible_items(tim, force=relabel or force)
        self.traffic.set_visible_items([f"model_{a}" for a in algos] + ["current"])
        roof = ["roof", *[f"measured_{a}" for a in algos], *refs, "bounds", "current"]
        self.roofline.set_visible_items(roof, force=force)
        self.fit()

    def fit(self) -> None:
        """Re-range every plot's y axis to its visible data (after data, not cursor, changes)."""
        self.memory.fit_y(extra=[self._budget] if self._budget else [])
        self.timing.fit_y()
        self.traffic.fit_y()
        self.roofline.fit_y()

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
            line = f"{ALGORITHMS[a].label}: model {fmt_bytes(cost(config, a).peak_bytes)}"
            if res is not None:
                line += ", OOM" if res.oom else f", measured {fmt_bytes(res.peak_bytes)}"
            lines.append(line)
        if self._budget:
            lines.append(f"budget {fmt_bytes(self._budget)}")
        return "\n".join(lines)

    def _hover_timing(self, x: float, _y: float) -> str | None:
        n = self._nearest_n(x)
        lines = [f"N = {fmt_int(n)}"]
        for a in self._algorithms:
            res = self._by_n[a].get(n)
            if res is None:
                lines.append(f"{ALGORITHMS[a].label}: not measured")
            elif res.oom:
                lines.append(f"{ALGORITHMS[a].label}: out of memory")
            else:
                parts = ", ".join(f"{k.name} {fmt_ms(k.ms)}" for k in res.kernel_times)
                extra = f" ({parts})" if len(res.kernel_times) > 1 else ""
                lines.append(f"{ALGORITHMS[a].label}: {fmt_ms(res.total_ms)}{extra}")
            if self._time_model_gpu is not None and self._family is not None:
                s = cost(self._family.with_(seq_len=n), a).modeled_seconds(self._time_model_gpu)
                lines.append(f"   roofline {fmt_ms(s * 1e3)}")
        for peer, by_n in self._reference_by_n.items():
            res = by_n.get(n)
            if res is not None and res.total_ms:
                lines.append(f"{reference_label(peer, res.recorded)}: {fmt_ms(res.total_ms)}")
        return "\n".join(lines)

    def _hover_traffic(self, x: float, _y: float) -> str | None:
        if self._family is None:
            return None
        n = self._nearest_n(x)
        config = self._family.with_(seq_len=n)
        lines = [f"N = {fmt_int(n)}"]
        for a in self._algorithms:
            c = cost(config, a)
            lines.append(
                f"{ALGORITHMS[a].label}: {fmt_bytes(c.hbm_bytes)} "
                f"({c.arithmetic_intensity:.3g} FLOP/B)"
            )
        return "\n".join(lines)

    def _hover_roofline(self, x: float, y: float) -> str | None:
        best, best_d = None, 0.12  # within ~0.12 decades of a marker
        for a in self._algorithms:
            for r in self._measured[a]:
                if r.oom or not r.tflops:
                    continue
                ai = cost(r.config, a).arithmetic_intensity
                d = math.hypot(math.log10(ai) - x, math.log10(r.tflops * 1e12) - y)
                if d < best_d:
                    best, best_d = (a, r, ai), d
        for peer, results in self._references.items():
            for r in results:
                if r.oom or not r.tflops:
                    continue
                ai = _reference_intensity(r.config, peer)
                d = math.hypot(math.log10(ai) - x, math.log10(r.tflops * 1e12) - y)
                if d < best_d:
                    best, best_d = (peer, r, ai), d
        if best is None:
            if self._gpu is None:
                return None
            ai = 10.0**x
            roof = min(self._gpu.fp16_tensor_flops, self._gpu.bandwidth_bytes_s * ai)
            return f"{ai:.3g} FLOP/B: roof {fmt_rate(roof, 'FLOP/s')} on {self._gpu_label}"
        a, r, ai = best
        name = ALGORITHMS[a].label if a in ALGORITHMS else reference_label(a, r.recorded)
        return (
            f"{name}, N = {fmt_int(r.config.seq_len)}\n"
            f"{ai:.3g} FLOP/B · {fmt_rate(r.tflops * 1e12, 'FLOP/s')} · "
            f"{fmt_rate((r.bandwidth_gbs or 0) * 1e9, 'B/s')}"
        )

    # ------------------------------------------------------------------ for tests and exports

    def measured_ns(self, plot: MetricPlot, algorithm: str) -> list[float]:
        return list(plot.series.get(f"measured_{algorithm}", ([], []))[0])
