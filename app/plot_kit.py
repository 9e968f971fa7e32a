"""A plotting kit for log-log plots that follow a slider, on pyqtgraph.

Generic parts, with no lesson in them: axes that tick log10 coordinates at powers of two or
decades and print real values; `Style` (how an item is drawn, by palette key, so a theme switch
restyles in place); `RingMarkers` (cheap hollow markers that follow the slider); `MetricPlot`
(named items, one cursor, a hover read-out, legends, a cached grid); `LabelledLine` (a labelled
horizontal or vertical line, such as a memory budget or a ridge point).

Every item is created once and updated with `setData`/`setValue`. Data are plotted in log10
coordinates by us (not pyqtgraph's log mode) so cursors, labels and markers share one coordinate
system; `series` on each plot keeps the linear data of every item for tests and exports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QGraphicsEllipseItem, QGraphicsItem

from .state.units import fmt_int
from .theme import Palette

pg.setConfigOptions(antialias=True)

_LOG2 = math.log10(2.0)


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


def compact(v: float, unit: str, prefixes: str = "kMGTPE") -> str:
    """Axis labels: '1 GB', '20 MB', '500 ms' — at most 3 significant digits, no padding zeros."""
    scale, prefix = 1.0, ""
    for i, p in enumerate(prefixes):
        if abs(v) >= 1000.0 ** (i + 1) * 0.9995:
            scale, prefix = 1000.0 ** (i + 1), p
    return f"{float(f'{v / scale:.3g}'):g}\u2009{prefix}{unit}"


def fmt_bytes_axis(v: float) -> str:
    return compact(v, "B")


def fmt_ms_axis(v: float) -> str:
    if v >= 1000:
        return compact(v / 1000, "s", prefixes="")
    if v >= 1:
        return compact(v, "ms", prefixes="")
    return compact(v * 1000, "µs", prefixes="")


def fmt_plain(v: float) -> str:
    return f"{float(f'{v:.3g}'):g}" if v < 1000 else f"{float(f'{v / 1000:.3g}'):g}k"


def fmt_flops_axis(v: float) -> str:
    return compact(v, "", prefixes="kMGTPE") or "1"


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
        # No context menus (a ViewBox menu costs ~10 ms to build and the app never shows one).
        super().__init__(
            axisItems={"bottom": bottom, "left": LogValueAxis("left", y_format)}, enableMenu=False
        )
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
        self.x_ticks: Callable[[float, float], list[float]] = octaves if self._n_axis else decades
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
        #: Legend rows made so far, kept while hidden: id(legend) -> name -> (sample, label).
        self._legend_rows: dict[int, dict[str, tuple]] = {}
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
        for y in decades(y0, y1):
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
            side = [n for n in names if n.startswith("reference_") and self.labels.get(n)]
            if side and self.side_legend is None:
                self._make_side_legend()
            self._fill_legend(self.legend, [n for n in names if n not in side])
            if self.side_legend is not None:
                self._fill_legend(self.side_legend, side)
                self.side_legend.setVisible(bool(side))

    def _fill_legend(self, legend: pg.LegendItem, names: Sequence[str]) -> None:
        """Lay out the rows of `names` (those with a label). A row's sample and label are made
        once per item and kept while hidden: making a label costs a text layout (~2 ms), and a
        recording's legends hold thirty of them."""
        rows = self._legend_rows.setdefault(id(legend), {})
        for sample, label in legend.items:
            for part in (sample, label):
                legend.layout.removeItem(part)
                part.hide()
        legend.items = []
        for name in names:
            text = self.labels.get(name)
            if not text:
                continue
            item = self.items[name]
            source = item.legend_sample if isinstance(item, RingMarkers) else item
            row = rows.get(name)
            if row is None or row[0].item is not source:
                label = pg.LabelItem(
                    text,
                    color=legend.opts["labelTextColor"],
                    justify="left",
                    size=legend.opts["labelTextSize"],
                )
                row = rows[name] = (legend.sampleType(source), label)
            elif row[1].text != text:
                row[1].setText(text)
            for part in row:
                part.show()
            legend.items.append(row)
            legend._addItemToLayout(*row)
        legend.updateSize()

    def _drop_legend_rows(self) -> None:
        """Forget the kept rows (their look is cached: a new palette needs new ones)."""
        for legend in (self.legend, self.side_legend):
            if legend is None:
                continue
            for row in self._legend_rows.pop(id(legend), {}).values():
                legend._removeItemFromLayout(*row)
            legend.items = []
            legend.updateSize()

    def _make_side_legend(self) -> None:
        legend = pg.LegendItem(offset=(6, 4), labelTextSize="8pt", verSpacing=-6)
        legend.setParentItem(self.plotItem.vb)
        legend.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.side_legend = legend
        if self._palette is not None:
            self._style_legend(legend, self._palette)

    def _style_legend(self, legend: pg.LegendItem, p: Palette) -> None:
        legend.setLabelTextColor(p.foreground)
        legend.setBrush(pg.mkBrush(with_alpha(p.background, 200)))
        legend.setPen(pg.mkPen(with_alpha(p.muted, 120)))

    def apply_palette(self, p: Palette) -> None:
        self._palette = p
        self.setBackground(p.background)
        for axis in ("left", "bottom"):
            ax = self.getAxis(axis)
            ax.setPen(pg.mkPen(p.muted))
            ax.setTextPen(pg.mkPen(p.foreground))
            ax.setGrid(False)
        self.grid.setPen(pg.mkPen(with_alpha(p.foreground, int(255 * p.grid_alpha)), width=1))
        self.plotItem.titleLabel.setText(self.title, color=p.foreground, size="10pt")
        for axis in ("left", "bottom"):
            label = self.getAxis(axis).labelText
            self.setLabel(axis, label, color=p.muted)
        for name, style in self.styles.items():
            self._restyle(self.items[name], style, p)
        self.cursor.setPen(pg.mkPen(p.cursor, width=1.2, style=Qt.PenStyle.DashLine))
        self.cursor_label.setColor(p.cursor)
        self.hover.setColor(p.foreground)
        self.hover.fill = pg.mkBrush(with_alpha(p.background, 225))
        self.hover.border = pg.mkPen(p.muted)
        for legend in (self.legend, self.side_legend):
            if legend is not None:
                self._style_legend(legend, p)
        # Legend samples cache their look; new rows pick up the new pens.
        self._drop_legend_rows()
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


def decades(lo: float, hi: float) -> list[float]:
    return [float(d) for d in range(math.ceil(lo), math.floor(hi) + 1)]


def octaves(lo: float, hi: float) -> list[float]:
    return [k * _LOG2 for k in range(math.ceil(lo / _LOG2), math.floor(hi / _LOG2) + 1)]


def with_alpha(color: str, alpha: int) -> tuple[int, int, int, int]:
    c = pg.mkColor(color)
    return (c.red(), c.green(), c.blue(), alpha)


class LabelledLine:
    """A labelled line at a linear value on a log10 axis: horizontal (a memory budget) or
    vertical (a ridge point); hidden while it has no value."""

    def __init__(self, plot: MetricPlot, angle: int, position: float, anchors: list) -> None:
        self.line = pg.InfiniteLine(angle=angle, movable=False)
        self.label = pg.InfLineLabel(self.line, text="", position=position, anchors=anchors)
        plot.addItem(self.line, ignoreBounds=True)
        self.line.setVisible(False)

    def set(self, value: float | None, text: str) -> None:
        if value and value > 0:
            self.line.setValue(math.log10(value))
            self.label.setFormat(text)
            self.line.setVisible(True)
        else:
            self.line.setVisible(False)

    def set_style(self, color: str, width: float, dash: Qt.PenStyle) -> None:
        self.line.setPen(pg.mkPen(color, width=width, style=dash))
        self.label.setColor(color)
