"""A plotting kit for log-log plots that follow a slider, on pyqtgraph.

Generic parts, with no lesson in them: axes that tick log10 coordinates at powers of two or
decades and print real values; `Style` (how an item is drawn, by palette key, so a theme switch
restyles in place); `RingMarkers` (cheap hollow markers that follow the slider); `MetricPlot`
(named items, error bars, one cursor, a hover read-out that stays inside the data area, a legend
strip above the data, a cached grid, ranges that fit the data until the user zooms and come
back on a double-click); `SeriesKey` (one key to the colours and symbols all plots share);
`LabelledLine` (a labelled horizontal or vertical line, such as a memory budget or a ridge
point).

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
from pyqtgraph.graphicsItems.ScatterPlotItem import drawSymbol
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import (
    QGraphicsEllipseItem,
    QGraphicsItem,
    QGraphicsLineItem,
    QGraphicsSimpleTextItem,
    QSizePolicy,
    QWidget,
)

from ..state.units import fmt_int, short_n
from ..window.plain_text import html_text, tooltip
from ..window.theme import Palette

pg.setConfigOptions(antialias=True)

_LOG2 = math.log10(2.0)


# ------------------------------------------------------------------------------------- axes


#: What a log axis can draw: positive values from 1e-200 to 1e200 (pyqtgraph refuses a range
#: that is not finite, and 1e308 overflows the padding around it). A figure outside is left
#: out of the plot, never drawn as a range error.
DRAWABLE = (1e-200, 1e200)


def drawable(value: float | None) -> bool:
    """Whether a log axis can draw `value` (see DRAWABLE)."""
    return value is not None and DRAWABLE[0] <= value <= DRAWABLE[1]


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
    fill: int = 0  # alpha (0..255) of a fill below the line, for a legend sample of a band


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


class CachedBoundsScatter(pg.ScatterPlotItem):
    """A ScatterPlotItem whose bounding rect is worked out once per data and view transform.

    Qt asks every item it paints for its bounding rect; pyqtgraph's works out pixel vectors in
    Python each time (tens of calls per slider move across the four plots). Every change that
    moves the rect (new data, sizes, a new view transform) replaces `self.bounds`, so the list
    object itself says whether the rect kept is still the item's."""

    _rect_for: object = None
    _rect = QRectF()

    def boundingRect(self):  # type: ignore[no-untyped-def]
        if self._rect_for is not self.bounds:
            self._rect = super().boundingRect()
            self._rect_for = self.bounds
        return QRectF(self._rect)


class CursorLine:
    """The cursor at N: a vertical line and its "N = …" label drawn by Qt's own items (no Python
    paint, no Python bounding rect), so a slider move repaints the two thin strips the line
    leaves and enters from the data items' cached pixmaps. They live in the view box's pixel
    coordinates (in log-data coordinates a pen's width would be decades wide and every move
    would repaint a wide band), under the view box's data group, as a line among the data
    would be. Mimics the part of pyqtgraph's InfiniteLine that the plots use (`value`,
    `setValue`, `setPen`, visibility)."""

    def __init__(self, plot: pg.PlotWidget, label: bool) -> None:
        self.vb = plot.plotItem.vb
        # Below the data group (z 0), above the view box's background.
        self.line = QGraphicsLineItem(self.vb)
        self.line.setZValue(-2)
        self.text = QGraphicsSimpleTextItem(self.vb)
        self.text.setZValue(-1)
        self.text.setVisible(label)
        self.labelled = label
        self._value = 0.0
        self._visible = True
        self._side = 0.0  # 0: text right of the line, 1: left of it
        self._label_text = ""
        self._dx = 4.0
        self.vb.sigTransformChanged.connect(self._place)  # a new range or size

    def value(self) -> float:
        return self._value

    def setValue(self, x: float) -> None:
        self._value = float(x)
        self._place()

    def set_label(self, text: str, side: float) -> None:
        """The label's text, right of the line (`side` 0) or left of it (1)."""
        if text != self._label_text:
            self._label_text = text
            self.text.setText(text)
            self._side = -1.0  # re-anchor for the new width
        if side != self._side:
            self._side = side
            self._dx = -self.text.boundingRect().width() - 4 if side else 4.0
            self._place()

    def _place(self, *_: object) -> None:
        """The line across the view box; the label near its foot (4 % up the view)."""
        x = self.vb.mapFromView(QPointF(self._value, 0.0)).x()
        height = self.vb.height()
        self.line.setLine(x, 0.0, x, height)
        if self.labelled:
            self.text.setPos(x + self._dx, 0.96 * height - self.text.boundingRect().height())

    def setPen(self, pen: QPen) -> None:
        pen = QPen(pen)
        pen.setCosmetic(True)
        self.line.setPen(pen)
        self.text.setBrush(pen.color())

    def setVisible(self, visible: bool) -> None:
        self._visible = visible
        self.line.setVisible(visible)
        self.text.setVisible(visible and self.labelled)

    def isVisible(self) -> bool:
        return self._visible


class _Sample(pg.ItemSample):
    """A compact legend sample that only shows: a click does not hide the series (the legend
    is a key to the plot's encodings, not a switch)."""

    def __init__(self, item) -> None:  # type: ignore[no-untyped-def]
        super().__init__(item)
        self.setFixedHeight(SAMPLE_PX)

    def boundingRect(self):  # type: ignore[no-untyped-def]
        return QRectF(0, 0, 20, SAMPLE_PX)

    def paint(self, p, *args) -> None:  # type: ignore[no-untyped-def]
        p.translate(0, (SAMPLE_PX - 20) / 2)
        super().paint(p, *args)

    def mouseClickEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        event.ignore()


#: Height of a legend row, and of its sample.
ROW_PX = 15
SAMPLE_PX = 14


class LegendStrip(pg.LegendItem):
    """A legend laid out above the data area (in the plot's own layout, where a top axis would
    go), so it never covers data: entries flow left to right and wrap at the plot's width."""

    def __init__(self) -> None:
        super().__init__(offset=None, labelTextSize="8pt", verSpacing=0, horSpacing=6)
        self.sampleType = _Sample
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations, False)
        self.layout.setContentsMargins(0, 0, 0, 0)  # entries are placed by hand (relayout)
        self.width_px = 400.0
        self.height_px = 0
        self._placed: tuple = ()

    def relayout(self, width_px: float | None = None) -> bool:
        """Place the entries in reading order, wrapping at `width_px`; True when that changed
        the strip (the plot then lays its data area out again)."""
        if width_px is not None:
            self.width_px = width_px
        widths = [20 + label.itemRect().width() + ENTRY_GAP_PX for _, label in self.items]
        places = flow(widths, self.width_px)
        placed = (tuple(places), tuple(id(s) for s, _ in self.items))
        if placed == self._placed:
            return False
        self._placed = placed
        for (sample, label), (x, row) in zip(self.items, places, strict=True):
            y = row * ROW_PX
            sample.setPos(x, y + (ROW_PX - SAMPLE_PX) / 2)
            label.setPos(x + 20, y + (ROW_PX - label.itemRect().height()) / 2)
        rows = max((row for _, row in places), default=-1) + 1
        self.height_px = rows * ROW_PX
        return True

    def updateSize(self) -> None:
        """Sized by the plot's layout (see relayout), never by pyqtgraph's own rule."""
        return

    def paint(self, p, *args) -> None:  # type: ignore[no-untyped-def]
        return  # no frame: a strip, not a box over data


#: Space after each legend entry.
ENTRY_GAP_PX = 12


def flow(widths: Sequence[float], available: float) -> list[tuple[float, int]]:
    """(x, row) of entries of these widths placed left to right, wrapping at `available`."""
    x, row, out = 0.0, 0, []
    for w in widths:
        if x > 0 and x + w > available:
            x, row = 0.0, row + 1
        out.append((x, row))
        x += w
    return out


class MetricPlot(pg.PlotWidget):
    """One plot: named items, a cursor, a hover read-out, a legend strip above the data;
    data in log10 coordinates.

    Ranges: the plot fits its data (x: a fixed span or the data, y: the data) whenever the
    data change, until the user zooms or pans (wheel, drag); from then on it keeps the user's
    view, panning only to keep the cursor in sight, until `reset_view` (a double-click, or the
    window's View ▸ Reset plots).
    """

    def __init__(
        self,
        object_name: str,
        title: str,
        y_label: str,
        y_format: Callable[[float], str],
        x_label: str = "sequence length N",
        x_format: Callable[[float], str] | None = None,
        cursor_label: bool = True,
    ) -> None:
        bottom = Log2NAxis("bottom") if x_format is None else LogValueAxis("bottom", x_format)
        self._n_axis = x_format is None
        # No context menus (a ViewBox menu costs ~10 ms to build and the app never shows one).
        super().__init__(
            axisItems={"bottom": bottom, "left": LogValueAxis("left", y_format)}, enableMenu=False
        )
        self.setObjectName(object_name)
        self.setAccessibleName(title)
        self.title = title
        self.plotItem.setMenuEnabled(False)
        self.plotItem.hideButtons()
        self.setLabel("bottom", x_label)
        self.setLabel("left", y_label)
        self.getAxis("left").setWidth(62)
        self.plotItem.setTitle(title, size="10pt")
        self.plotItem.layout.setRowFixedHeight(0, 22)
        # The legend takes the top axis's place in the plot's layout (the axis is never shown).
        layout = self.plotItem.layout
        layout.removeItem(self.plotItem.getAxis("top"))
        self.legend = LegendStrip()
        self.legend_shown = True
        layout.addItem(self.legend, 1, 1)
        self.legend.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.items: dict[str, pg.PlotDataItem] = {}
        self.styles: dict[str, Style] = {}
        self.labels: dict[str, str] = {}
        #: Legend-only samples (a key to an encoding, such as "hollow: model bytes"): name ->
        #: (label, style, sample item that is never drawn in the plot).
        self.keys: dict[str, tuple[str, Style, pg.PlotDataItem]] = {}
        #: Linear data of every item, as last set: name -> (x, y).
        self.series: dict[str, tuple[list[float], list[float]]] = {}
        #: Error bars (linear low, high per point) of items drawn with `add_error_bars`.
        self.spreads: dict[str, tuple[list[float], list[float]]] = {}
        # The grid is a cached line item of ours: pyqtgraph's axis grid repaints both axes
        # (a QPicture replay each) in every strip the cursor exposes.
        self.grid = pg.PlotCurveItem(connect="pairs")
        self.grid.setZValue(-100)
        self.grid.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.addItem(self.grid, ignoreBounds=True)
        self.x_ticks: Callable[[float, float], list[float]] = octaves if self._n_axis else decades
        self.plotItem.vb.sigRangeChanged.connect(self._update_grid)
        self.plotItem.vb.sigRangeChangedManually.connect(self._zoomed_by_user)
        self.cursor = CursorLine(self, label=cursor_label)
        self._show_cursor_label = cursor_label
        self.cursor_n: int | None = None
        self.hover = pg.TextItem(anchor=(0, 0))
        hover_font = QFont(self.font())
        hover_font.setPointSizeF(8.5)
        self.hover.setFont(hover_font)
        self.hover.setZValue(100)
        self.hover.setVisible(False)
        self.addItem(self.hover, ignoreBounds=True)
        self.hover_provider: Callable[[float, float], str | None] | None = None
        self._proxy = pg.SignalProxy(self.scene().sigMouseMoved, rateLimit=30, slot=self._on_mouse)
        self._palette: Palette | None = None
        self._visible_names: list[str] = []
        self._legend_names: list[str] = []
        #: Legend rows made so far, kept while hidden: name -> (sample, label).
        self._legend_rows: dict[str, tuple] = {}
        # Ranges are set by fit_y / fit_x when data change, never by pyqtgraph's auto-range: it
        # re-ranges (and repaints the whole plot) whenever any item moves, cursors included.
        self.plotItem.vb.disableAutoRange()
        self._bounded: set[str] = set()
        self._spot_colors: dict[str, list[str]] = {}
        self._y_range: tuple[float, float] | None = None
        self._y_extra: list[float] = []
        self._x_span: tuple[float, float] | None = None  # log10; None: fit x to the data
        self._x_extra: list[float] = []
        self._x_range: tuple[float, float] | None = None
        self.default_y = (0.0, 1.0)
        self.default_x = (0.0, 4.0)
        #: True once the user zoomed or panned, until reset_view.
        self.user_zoomed = False
        self._setting_range = False

    # ------------------------------------------------------------------ items

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
        item = pg.PlotDataItem() if style.line else CachedBoundsScatter(pxMode=True)
        self._register(name, item, bounds)
        return item

    def add_error_bars(self, name: str, label: str, style: Style) -> pg.ErrorBarItem:
        """Vertical bars (set_error_bars) from each point's low to its high value."""
        self.styles[name] = style
        self.labels[name] = label
        self.series[name] = ([], [])
        self.spreads[name] = ([], [])
        item = pg.ErrorBarItem(x=np.zeros(0), y=np.zeros(0), beam=0.0)
        self._register(name, item, bounds=False)
        return item

    def _register(self, name: str, item, bounds: bool) -> None:  # type: ignore[no-untyped-def]
        self.items[name] = item
        self.addItem(item, ignoreBounds=not bounds)
        if bounds:
            self._bounded.add(name)
        # Data items change only with data; cached as pixmaps, the strips a slider move
        # exposes are blitted instead of repainted in Python (measured: -25% per move).
        parts = (item.curve, item.scatter) if isinstance(item, pg.PlotDataItem) else (item,)
        for part in parts:
            part.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)

    def key(self, name: str, label: str, style: Style) -> None:
        """A legend-only entry: a sample of `style` with `label`, for an encoding that several
        items share (filled vs hollow markers, a model's line style)."""
        sample = pg.PlotDataItem()
        self.keys[name] = (label, style, sample)
        if self._palette is not None:
            self._restyle(sample, style, self._palette)

    def set_series(self, name: str, xs: Sequence[float], ys: Sequence[float], log_x: bool = True):
        """Plot linear (x, y); missing values and values a log axis cannot draw (not positive,
        not finite, beyond DRAWABLE) are left out."""
        pts = [
            (x, y)
            for x, y in zip(xs, ys, strict=True)
            if drawable(y) and (drawable(x) if log_x else x is not None and math.isfinite(x))
        ]
        self.series[name] = ([p[0] for p in pts], [p[1] for p in pts])
        item = self.items[name]
        if not pts:
            item.setData(x=[], y=[])
            return
        arr = np.asarray(pts, dtype=float)
        x = np.log10(arr[:, 0]) if log_x else arr[:, 0]
        item.setData(x=x, y=np.log10(arr[:, 1]), **self._spot_style(name, len(pts)))

    def set_error_bars(
        self,
        name: str,
        xs: Sequence[float],
        ys: Sequence[float],
        lows: Sequence[float],
        highs: Sequence[float],
    ) -> None:
        """Bars from `lows` to `highs` at (xs, ys), linear values; points without a positive
        spread are left out."""
        pts = [
            p
            for p in zip(xs, ys, lows, highs, strict=True)
            if all(drawable(v) for v in p) and p[3] > p[2]
        ]
        self.series[name] = ([p[0] for p in pts], [p[1] for p in pts])
        self.spreads[name] = ([p[2] for p in pts], [p[3] for p in pts])
        item = self.items[name]
        if not pts:
            item.setData(x=np.zeros(0), y=np.zeros(0), top=None, bottom=None)
            return
        x, y, lo, hi = np.log10(np.asarray(pts, dtype=float)).T
        item.setData(x=x, y=y, top=hi - y, bottom=y - lo, beam=0.035)

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

    def set_title(self, title: str) -> None:
        self.title = title
        self._show_title()

    def set_title_tip(self, tip: str) -> None:
        """A longer title for the tooltip (the title shown stays short)."""
        self._title_tip = tip
        self._title_shown = None
        self._show_title()

    def title_room(self) -> int:
        """The pixels a title has: the plot's width less the left axis beside its column and
        the label's margins."""
        axis = self.plotItem.getAxis("left")
        left = int(axis.width()) if axis.isVisible() else 0
        return max(60, self.width() - left - 40)

    def _show_title(self) -> None:
        """The title, elided to the plot's width (a title wider than the plot would widen the
        plot's scene past its view and push the right of the plot out of sight)."""
        text = self.title + (" · zoomed: double-click resets" if self.user_zoomed else "")
        font = QFont(self.font())
        font.setPointSizeF(10)
        shown = QFontMetrics(font).elidedText(text, Qt.TextElideMode.ElideRight, self.title_room())
        if (shown, self._palette) == getattr(self, "_title_shown", None):
            return
        self._title_shown = (shown, self._palette)
        color = self._palette.foreground if self._palette else None
        label = self.plotItem.titleLabel
        label.setText(html_text(shown), color=color, size="10pt")  # pyqtgraph reads HTML
        label.setMinimumWidth(0)
        tip = getattr(self, "_title_tip", "")
        self.setToolTip(tooltip(text if shown != text and not tip else tip))

    # ------------------------------------------------------------------ cursor, ranges

    def set_cursor(self, n: int) -> None:
        self.cursor_n = n
        x = math.log10(n)
        self.cursor.setValue(x)
        (x0, x1), _ = self.plotItem.vb.viewRange()
        if self.user_zoomed and not x0 <= x <= x1:  # keep the user's zoom, bring N in sight
            half = (x1 - x0) / 2
            self._apply_x(x - half, x + half)
            (x0, x1), _ = self.plotItem.vb.viewRange()
        if not self._show_cursor_label:
            return
        # Text on the right of the line, or on its left near the right edge (never clipped).
        side = 1.0 if x1 > x0 and (x - x0) / (x1 - x0) > 0.7 else 0.0
        self.cursor.set_label(f"N = {fmt_int(n)}", side)

    def _update_grid(self, *_: object) -> None:
        (x0, x1), (y0, y1) = self.plotItem.vb.viewRange()
        xs, ys = [], []
        # Exactly the view's extent: an SVG export has no clipping, so nothing may reach past it.
        for x in self.x_ticks(x0, x1):
            xs += [x, x]
            ys += [y0, y1]
        for y in decades(y0, y1):
            xs += [x0, x1]
            ys += [y, y]
        self.grid.setData(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))

    def set_x_span(self, lo: float, hi: float) -> None:
        """Fix the x range (linear units) so the cursor never leaves the view."""
        self._x_span = (math.log10(lo), math.log10(hi))
        self.plotItem.vb.enableAutoRange(x=False)
        if not self.user_zoomed:
            self._fit_x_now()

    def fit_x(self, extra: Sequence[float] = ()) -> None:
        """Range x over the visible data (and `extra` linear values), for a plot whose x is
        not N (no fixed span): a decade of margin, never narrower than two decades."""
        self._x_extra = [v for v in extra if drawable(v)]
        if not self.user_zoomed:
            self._fit_x_now()

    def _fit_x_now(self) -> None:
        if self._x_span is not None:
            lo, hi = self._x_span
            pad = 0.06 * (hi - lo)
            self._apply_x(lo - pad, hi + pad)
            return
        xs = list(self._x_extra)
        for name in self._bounded:
            if self.items[name].isVisible():
                xs.extend(self.series[name][0])
        if xs:
            lo, hi = math.floor(math.log10(min(xs)) - 0.3), math.ceil(math.log10(max(xs)) + 0.3)
            lo, hi = min(lo, hi - 2), max(hi, lo + 2)
        else:
            lo, hi = self.default_x
        self._apply_x(lo - 0.02, hi + 0.02)

    def _apply_x(self, lo: float, hi: float) -> None:
        if (lo, hi) == self._x_range and not self.user_zoomed:
            return
        self._x_range = (lo, hi)
        self._setting_range = True
        try:
            self.setXRange(lo, hi, padding=0)
        finally:
            self._setting_range = False

    def fit_y(self, extra: Sequence[float] = ()) -> None:
        """Range y over the visible data items (and `extra` values), in log10 units; the user's
        zoom, if any, is kept (the fit applies at reset_view)."""
        self._y_extra = [y for y in extra if drawable(y)]
        if not self.user_zoomed:
            self._fit_y_now()

    def _fit_y_now(self) -> None:
        ys = list(self._y_extra)
        for name in self._bounded:
            if self.items[name].isVisible():
                ys.extend(self.series[name][1])
        for name, (lows, highs) in self.spreads.items():
            if self.items[name].isVisible():
                ys.extend(lows + highs)
        if ys:
            lo, hi = math.log10(min(ys)), math.log10(max(ys))
        else:
            lo, hi = self.default_y
        pad = max(0.08 * (hi - lo), 0.3)
        target = (lo - pad, hi + pad)
        if target != self._y_range:
            self._y_range = target
            self._setting_range = True
            try:
                self.setYRange(*target, padding=0)
            finally:
                self._setting_range = False

    def _zoomed_by_user(self, *_: object) -> None:
        if self._setting_range or self.user_zoomed:
            return
        self.user_zoomed = True
        self._show_title()

    def reset_view(self) -> None:
        """Back to the fitted view: x span (or data) and y over the data, as data change."""
        was = self.user_zoomed
        self.user_zoomed = False
        self._y_range = self._x_range = None
        self._fit_x_now()
        self._fit_y_now()
        if was:
            self._show_title()

    def mouseDoubleClickEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        self.reset_view()
        event.accept()

    # ------------------------------------------------------------------ legend

    def set_visible_items(
        self, names: Sequence[str], force: bool = False, legend: Sequence[str] | None = None
    ) -> None:
        """Show these items and hide the others; the legend lists `legend` (keys or items, in
        this order), by default the shown items that have a label."""
        names = [n for n in names if n in self.items]
        for name, item in self.items.items():
            item.setVisible(name in names)
        if legend is None:
            legend = [n for n in names if self.labels.get(n)]
        legend = [n for n in legend if n in self.keys or self.labels.get(n)]
        if force or names != self._visible_names or legend != self._legend_names:
            self._visible_names = list(names)
            self._legend_names = list(legend)
            self._fill_legend(legend)

    def _fill_legend(self, names: Sequence[str]) -> None:
        """Lay out the rows of `names`. A row's sample and label are made once per entry and
        kept while hidden: making a label costs a text layout (~2 ms), and a recording's
        legends hold many of them."""
        legend = self.legend
        for sample, label in legend.items:
            sample.hide()
            label.hide()
        legend.items = []
        for name in names:
            if name in self.keys:
                text, _, source = self.keys[name]
            else:
                text = self.labels[name]
                item = self.items[name]
                source = item.legend_sample if isinstance(item, RingMarkers) else item
            row = self._legend_rows.get(name)
            if row is None or row[0].item is not source:
                label = pg.LabelItem(
                    html_text(text),  # a label is HTML to pyqtgraph
                    color=legend.opts["labelTextColor"],
                    justify="left",
                    size=legend.opts["labelTextSize"],
                )
                label.setParentItem(legend)
                row = self._legend_rows[name] = (_Sample(source), label)
                row[0].setParentItem(legend)
            elif row[1].text != html_text(text):
                row[1].setText(html_text(text))
            for part in row:
                part.show()
            legend.items.append(row)
        self._relayout_legend(force=True)

    def _relayout_legend(self, force: bool = False) -> None:
        width = max(120.0, self.width() - 70.0)
        if force:
            self.legend._placed = ()
        if self.legend.relayout(width) or force:
            shown = self.legend_shown and bool(self.legend.items)
            height = self.legend.height_px if shown else 0
            self.legend.setVisible(shown)
            # A graphics layout keeps room for hidden items: the strip's own size says it.
            self.legend.setMinimumHeight(height)
            self.legend.setMaximumHeight(height)
            self.plotItem.layout.setRowFixedHeight(1, height)

    def set_legend_visible(self, visible: bool) -> None:
        """Show or hide the legend strip (its rows go back to the data when hidden)."""
        if visible != self.legend_shown:
            self.legend_shown = visible
            self._relayout_legend(force=True)

    def resizeEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().resizeEvent(event)
        if "legend" in self.__dict__:  # pyqtgraph resizes the view before __init__ is done
            self._relayout_legend()
            self._show_title()

    def legend_texts(self) -> list[str]:
        """The legend's entries as shown (tests, exports)."""
        return [label.item.toPlainText() for _, label in self.legend.items]

    def _drop_legend_rows(self) -> None:
        """Forget the kept rows (their look is cached: a new palette needs new ones)."""
        for sample, label in self._legend_rows.values():
            for part in (sample, label):
                part.setParentItem(None)
                if part.scene() is not None:
                    part.scene().removeItem(part)
        self._legend_rows = {}
        self.legend.items = []
        self.legend._placed = ()

    # ------------------------------------------------------------------ style

    def apply_palette(self, p: Palette) -> None:
        self._palette = p
        self.setBackground(p.background)
        for axis in ("left", "bottom"):
            ax = self.getAxis(axis)
            ax.setPen(pg.mkPen(p.muted))
            ax.setTextPen(pg.mkPen(p.foreground))
            ax.setGrid(False)
        self.grid.setPen(pg.mkPen(with_alpha(p.foreground, int(255 * p.grid_alpha)), width=1))
        self._show_title()
        for axis in ("left", "bottom"):
            label = self.getAxis(axis).labelText
            self.setLabel(axis, label, color=p.muted)
        for name, style in self.styles.items():
            self._restyle(self.items[name], style, p)
        for _, style, sample in self.keys.values():
            self._restyle(sample, style, p)
        self.cursor.setPen(pg.mkPen(p.cursor, width=1.2, style=Qt.PenStyle.DashLine))
        self.hover.setColor(p.foreground)
        self.hover.fill = pg.mkBrush(with_alpha(p.background, 235))
        self.hover.border = pg.mkPen(p.muted)
        self.legend.setLabelTextColor(p.foreground)
        # Legend samples cache their look; new rows pick up the new pens.
        self._drop_legend_rows()
        self._fill_legend(self._legend_names)

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
        if isinstance(item, pg.ErrorBarItem):
            item.setData(pen=pg.mkPen(with_alpha(color, 170), width=style.width))
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
        if style.fill:
            item.setFillLevel(0)
            item.setFillBrush(pg.mkBrush(with_alpha(color, style.fill)))
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

    # ------------------------------------------------------------------ hover

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
        # Wider than the data area: wrap (the box never reaches past the plot).
        area = vb.sceneBoundingRect().width() - 4
        item = self.hover.textItem
        item.setTextWidth(-1)
        if item.boundingRect().width() > area:
            item.setTextWidth(max(80.0, area))
        self.hover.updateTextPos()
        self.hover.setPos(vb.mapSceneToView(self._hover_corner(pos)))
        self.hover.setVisible(True)

    def _hover_corner(self, pos: QPointF) -> QPointF:
        """Where the read-out's top-left corner goes (scene pixels): beside the pointer,
        flipped to the other side near an edge, and always inside the data area."""
        area = self.plotItem.vb.sceneBoundingRect()
        box = self.hover.textItem.boundingRect()
        w, h, gap = box.width() + 2, box.height() + 2, 14
        x = pos.x() + gap if pos.x() + gap + w <= area.right() else pos.x() - gap - w
        y = pos.y() + gap if pos.y() + gap + h <= area.bottom() else pos.y() - gap - h
        x = min(max(x, area.left()), max(area.left(), area.right() - w))
        y = min(max(y, area.top()), max(area.top(), area.bottom() - h))
        return QPointF(x, y)

    def leaveEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        self.hover.setVisible(False)
        super().leaveEvent(event)


class SeriesKey(QWidget):
    """One key to the colours and symbols every plot shares (an algorithm looks the same in
    all of them): entries flow left to right and wrap. Painted by hand, once per change."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("seriesKey")
        self.setAccessibleName("Key to the plots' series")
        self.entries: list[tuple[str, Style]] = []
        self._palette: Palette | None = None
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(ROW_PX + 6)

    def set_entries(self, entries: Sequence[tuple[str, Style]]) -> None:
        entries = list(entries)
        if entries != self.entries:
            self.entries = entries
            self._fit_height()
            self.update()

    def apply_palette(self, p: Palette) -> None:
        self._palette = p
        self.update()

    def texts(self) -> list[str]:
        return [text for text, _ in self.entries]

    def _places(self, width: int) -> list[tuple[int, int, int]]:
        """(x, y, text width) of each entry, wrapping at `width`."""
        fm = QFontMetrics(self._font())
        x, y, out = 4, 3, []
        for text, _ in self.entries:
            w = fm.horizontalAdvance(text)
            if x > 4 and x + 26 + w > width:
                x, y = 4, y + ROW_PX + 2
            out.append((x, y, w))
            x += 26 + w + 16
        return out

    def _fit_height(self) -> None:
        places = self._places(max(200, self.width()))
        rows = len({y for _, y, _ in places}) or 1
        height = rows * (ROW_PX + 2) + 4
        if height != self.height():
            self.setFixedHeight(height)

    def resizeEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().resizeEvent(event)
        self._fit_height()

    def _font(self) -> QFont:
        font = QFont(self.font())
        font.setPointSizeF(8.5)
        return font

    def paintEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        p = self._palette
        if p is None:
            return
        painter = QPainter(self)
        try:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setFont(self._font())
            for (text, style), (x, y, w) in zip(
                self.entries, self._places(self.width()), strict=True
            ):
                color = MetricPlot._color(p, style.color)
                mid = y + ROW_PX / 2
                if style.line:
                    painter.setPen(pg.mkPen(color, width=min(style.width, 2.0), style=style.dash))
                    painter.drawLine(QPointF(x, mid), QPointF(x + 22, mid))
                if style.symbol:
                    painter.save()
                    painter.translate(x + 11, mid)
                    brush = pg.mkBrush(None if style.hollow else color)
                    pen = pg.mkPen(color, width=2) if style.hollow else pg.mkPen(p.background)
                    drawSymbol(painter, style.symbol, min(style.symbol_size, 10), pen, brush)
                    painter.restore()
                painter.setPen(QColor(p.foreground))
                painter.drawText(
                    QRectF(x + 26, y, w + 2, ROW_PX),
                    int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                    text,
                )
        finally:
            painter.end()


def decades(lo: float, hi: float) -> list[float]:
    return [float(d) for d in range(math.ceil(lo), math.floor(hi) + 1)]


def octaves(lo: float, hi: float) -> list[float]:
    return [k * _LOG2 for k in range(math.ceil(lo / _LOG2), math.floor(hi / _LOG2) + 1)]


def with_alpha(color: str, alpha: int) -> tuple[int, int, int, int]:
    c = pg.mkColor(color)
    return (c.red(), c.green(), c.blue(), alpha)


class LabelledLine:
    """A labelled line at a linear value on a log10 axis: horizontal (a memory budget) or
    vertical (a ridge point); hidden while it has no value. The label sits on a patch of the
    background, above the data, so no marker crosses it."""

    def __init__(self, plot: MetricPlot, angle: int, position: float, anchors: list) -> None:
        self.line = pg.InfiniteLine(angle=angle, movable=False)
        self.line.setZValue(40)
        self.label = pg.InfLineLabel(self.line, text="", position=position, anchors=anchors)
        plot.addItem(self.line, ignoreBounds=True)
        self.line.setVisible(False)
        self.text = ""

    def set(self, value: float | None, text: str) -> None:
        self.text = text if value and value > 0 else ""
        if value and value > 0:
            self.line.setValue(math.log10(value))
            self.line.setVisible(True)  # first: a hidden label ignores its new text
            self.label.setFormat(text)
        else:
            self.line.setVisible(False)

    def set_style(
        self, color: str, width: float, dash: Qt.PenStyle, background: str | None = None
    ) -> None:
        self.line.setPen(pg.mkPen(color, width=width, style=dash))
        self.label.setColor(color)
        self.label.fill = pg.mkBrush(with_alpha(background, 230)) if background else None
