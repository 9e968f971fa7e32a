"""`MetricPlot`: one log-log plot that follows a slider, on pyqtgraph. Named items, error bars,
one cursor, a hover read-out that stays inside the data area, a legend strip above the data, a
cached grid, ranges that fit the data until the user zooms and come back on a double-click.

Every item is created once and updated with `setData`/`setValue`. Data are plotted in log10
coordinates by us (not pyqtgraph's log mode) so cursors, labels and markers share one coordinate
system; `series` on each plot keeps the linear data of every item for tests and exports. What
moves with the slider (the cursor and the markers added with `moves=True`) is the plot's slider
layer (app/plotting/slider_layer.py), an item of the scene that repaints only the strips it
leaves and enters, where the data items are blitted from their caches. Every painter, the
screen's included, paints the scene the same way, so the screen shows what an export or a grab
shows."""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QGraphicsItem

from ..kit.plain_text import html_text, tooltip
from ..kit.theme import Palette
from ..state.units import fmt_int
from .axes import Log2NAxis, LogValueAxis, decades, drawable, octaves
from .legend import LegendRows, LegendStrip
from .plot_items import CachedBoundsScatter, Style, with_alpha
from .slider_layer import LayerMarkers, SliderLayer
from .staged import StagedBuild

#: The narrowest view the user can zoom to, in log10 units (0.1 % of a decade).
MIN_RANGE = 1e-3


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
        staged: bool = False,
        plot_item: pg.PlotItem | None = None,
    ) -> None:
        """`staged`: make the view only; `build_steps()` makes the rest a piece at a time (see
        `in_steps`). `plot_item`: its `plot_item(axes(y_format, x_format))`, made already."""
        self._n_axis = x_format is None
        super().__init__(plotItem=plot_item or self.plot_item(self.axes(y_format, x_format)))
        self.setObjectName(object_name)
        self.setAccessibleName(title)
        self.title = title
        self._staged = StagedBuild(self._construct(title, y_label, x_label, cursor_label), staged)

    def build_steps(self) -> Iterator[None]:
        """The rest of a staged construction, one piece per step."""
        return self._staged.steps

    @staticmethod
    def axes(
        y_format: Callable[[float], str], x_format: Callable[[float], str] | None = None
    ) -> dict[str, pg.AxisItem]:
        """Our log axes, at the left and the bottom."""
        bottom = Log2NAxis("bottom") if x_format is None else LogValueAxis("bottom", x_format)
        return {"bottom": bottom, "left": LogValueAxis("left", y_format)}

    @staticmethod
    def plot_item(axes: dict[str, pg.AxisItem]) -> pg.PlotItem:
        """pyqtgraph's plot with our `axes`, the larger part of a MetricPlot's making."""
        # No context menus (a ViewBox menu costs ~10 ms to build and the app never shows one).
        return pg.PlotItem(axisItems=axes, enableMenu=False)

    @classmethod
    def in_steps(
        cls,
        object_name: str,
        title: str,
        y_label: str,
        y_format: Callable[[float], str],
        **kwargs: Any,
    ) -> Generator[None, None, MetricPlot]:
        """A plot made a piece per step, a few ms each (`plot = yield from ...`): an export's
        replica is built between the window's frames, and pyqtgraph's plot alone takes
        10-20 ms on two cores."""
        axes = cls.axes(y_format, kwargs.get("x_format"))
        yield
        item = cls.plot_item(axes)
        yield
        plot = cls(object_name, title, y_label, y_format, staged=True, plot_item=item, **kwargs)
        yield
        yield from plot.build_steps()
        return plot

    def _construct(
        self, title: str, y_label: str, x_label: str, cursor_label: bool
    ) -> Iterator[None]:
        self.plotItem.setMenuEnabled(False)
        self.plotItem.hideButtons()
        self.setLabel("bottom", x_label)
        self.setLabel("left", y_label)
        self.getAxis("left").setWidth(62)
        # The axes' ticks reach a few pixels into the data area, where the cursor's strips
        # repaint at every move: cached, the axes are blitted there instead of replayed.
        for axis in ("left", "bottom"):
            self.getAxis(axis).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.plotItem.setTitle(title, size="10pt")
        self.plotItem.layout.setRowFixedHeight(0, 22)
        # The legend takes the top axis's place in the plot's layout (the axis is never shown).
        layout = self.plotItem.layout
        layout.removeItem(self.plotItem.getAxis("top"))
        self.legend = LegendStrip()
        self.legend_rows = LegendRows(self.legend, layout)
        layout.addItem(self.legend, 1, 1)
        self.legend.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        # Its rows are inside it: a repaint elsewhere (the cursor's strips) skips them unasked.
        self.legend.setFlag(QGraphicsItem.GraphicsItemFlag.ItemClipsChildrenToShape)
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
        yield
        self.layer = SliderLayer(self.plotItem.vb, cursor_label, self.font())
        self.cursor = self.layer.cursor
        self._show_cursor_label = cursor_label
        #: What the cursor's label says at N (default "N = …").
        self.cursor_text: Callable[[int], str] | None = None
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
        # Ranges are set by fit_y / fit_xy when data change, never by pyqtgraph's auto-range: it
        # re-ranges (and repaints the whole plot) whenever any item moves, cursors included.
        self.plotItem.vb.disableAutoRange()
        self.plotItem.vb.setLimits(minXRange=MIN_RANGE, minYRange=MIN_RANGE)
        self._bounded: set[str] = set()
        self._spot_colors: dict[str, list[str]] = {}
        #: How each series was last drawn (log x, point colours, palette): set_series skips a
        #: series given again as it is drawn.
        self._series_look: dict[str, tuple] = {}
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

    def add(self, name: str, label: str, style: Style, bounds: bool = True, moves: bool = False):  # type: ignore[no-untyped-def]
        """A named item; `bounds=False` keeps it out of the fitted ranges (markers that follow
        the slider must not make every move re-range and repaint the whole plot). `moves`:
        hollow markers that follow the slider, drawn by the plot's slider layer
        (app/plotting/slider_layer.py)."""
        self.styles[name] = style
        self.labels[name] = label
        self.series[name] = ([], [])
        if moves:
            markers = self.layer.add_markers(style.symbol or "o", style.symbol_size)
            self.items[name] = markers  # type: ignore[assignment]
            if bounds:
                self._bounded.add(name)
            return markers
        # Markers alone are plain ScatterPlotItems: a PlotDataItem costs twice as much per setData.
        # No dynamic range limit: pyqtgraph re-clips (and re-sets the data of) every line at
        # every change of the y range for it, which only matters a million view heights away;
        # log10 data span a few dozen units and the zoom floor (MIN_RANGE) keeps the view
        # wider than a thousandth of one.
        item = (
            pg.PlotDataItem(dynamicRangeLimit=None)
            if style.line
            else CachedBoundsScatter(pxMode=True)
        )
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

    @property
    def shown_palette(self) -> Palette | None:
        """The palette the plot is drawn in (None until `apply_palette`)."""
        return self._palette

    def restyle(self, name: str) -> None:
        """Give item `name` the plot's palette (an item added after the palette was set)."""
        if self._palette is not None:
            self._restyle(self.items[name], self.styles[name], self._palette)

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
        series = ([p[0] for p in pts], [p[1] for p in pts])
        look = (log_x, tuple(self._spot_colors.get(name, ())), self._palette)
        if series == self.series[name] and look == self._series_look.get(name, look):
            return  # as drawn: a change redraws many series that it leaves as they were
        self.series[name] = series
        self._series_look[name] = look
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
        pens = [pg.mkPen(style_color(self._palette, c), width=2) for c in colors[:count]]
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
        self.cursor.set_label(self.cursor_text(n) if self.cursor_text else f"N = {fmt_int(n)}")

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

    def fit_xy(self, extra_x: Sequence[float] = (), extra_y: Sequence[float] = ()) -> None:
        """`fit_x` and `fit_y` in one change of the view's range: what follows the range (the
        roofline's roofs and their labels) follows it once, not once per axis."""
        self._x_extra = [v for v in extra_x if drawable(v)]
        self._y_extra = [y for y in extra_y if drawable(y)]
        if self.user_zoomed:
            return
        x, y = self._x_target(), self._y_target()
        x = None if x == self._x_range else x
        y = None if y == self._y_range else y
        if x is None and y is None:
            return
        self._x_range = x or self._x_range
        self._y_range = y or self._y_range
        self._setting_range = True
        try:
            self.plotItem.vb.setRange(xRange=x, yRange=y, padding=0)
        finally:
            self._setting_range = False

    def _fit_x_now(self) -> None:
        self._apply_x(*self._x_target())

    def _x_target(self) -> tuple[float, float]:
        if self._x_span is not None:
            lo, hi = self._x_span
            pad = 0.06 * (hi - lo)
            return lo - pad, hi + pad
        xs = list(self._x_extra)
        for name in self._bounded:
            if self.items[name].isVisible():
                xs.extend(self.series[name][0])
        if xs:
            lo, hi = math.floor(math.log10(min(xs)) - 0.3), math.ceil(math.log10(max(xs)) + 0.3)
            lo, hi = min(lo, hi - 2), max(hi, lo + 2)
        else:
            lo, hi = self.default_x
        return lo - 0.02, hi + 0.02

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
        target = self._y_target()
        if target != self._y_range:
            self._y_range = target
            self._setting_range = True
            try:
                self.setYRange(*target, padding=0)
            finally:
                self._setting_range = False

    def _y_target(self) -> tuple[float, float]:
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
        return lo - pad, hi + pad

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
        """Lay out the rows of `names` (keys or items)."""
        entries = []
        for name in names:
            if name in self.keys:
                text, _, source = self.keys[name]
            else:
                text = self.labels[name]
                item = self.items[name]
                source = item.legend_sample if isinstance(item, LayerMarkers) else item
            entries.append((name, text, source))
        self.legend_rows.fill(entries, self._legend_width())

    def _legend_width(self) -> float:
        return max(120.0, self.width() - 70.0)

    def set_legend_visible(self, visible: bool) -> None:
        """Show or hide the legend strip (its rows go back to the data when hidden)."""
        if visible != self.legend_rows.shown:
            self.legend_rows.shown = visible
            self.legend_rows.relayout(self._legend_width(), force=True)

    # ------------------------------------------------------------------ painting

    def resizeEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().resizeEvent(event)
        if "legend" in self.__dict__:  # pyqtgraph resizes the view before __init__ is done
            self.legend_rows.relayout(self._legend_width())
            self._show_title()

    def legend_texts(self) -> list[str]:
        """The legend's entries as shown (tests, exports)."""
        return self.legend_rows.texts()

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
        self.legend_rows.drop()
        self._fill_legend(self._legend_names)

    def _restyle(self, item, style: Style, p: Palette) -> None:  # type: ignore[no-untyped-def]
        color = style_color(p, style.color)
        if isinstance(item, LayerMarkers):
            item.set_symbol(style.symbol or "o", style.symbol_size)
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
        self.hover_at(event[0])

    def hover_at(self, pos: QPointF) -> None:
        """The read-out of the point under the pointer at scene `pos` (none outside the data
        area or where the provider has nothing to say)."""
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
        corner = _hover_corner(pos, vb.sceneBoundingRect(), self.hover.textItem.boundingRect())
        self.hover.setPos(vb.mapSceneToView(corner))
        self.hover.setVisible(True)

    def leaveEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        self.hover.setVisible(False)
        super().leaveEvent(event)


def style_color(p: Palette, key: str) -> str:
    """A style's colour key in palette `p`: a role, else an algorithm's or a kernel's."""
    return {
        "cursor": p.cursor,
        "budget": p.budget,
        "oom": p.oom,
        "roof": p.roof,
        "muted": p.muted,
        "fg": p.foreground,
    }.get(key) or p.color(key)


def _hover_corner(pos: QPointF, area: QRectF, box: QRectF) -> QPointF:
    """Where a read-out of size `box` puts its top-left corner (scene pixels): beside the
    pointer at `pos`, flipped to the other side near an edge, and always inside `area`."""
    w, h, gap = box.width() + 2, box.height() + 2, 14
    x = pos.x() + gap if pos.x() + gap + w <= area.right() else pos.x() - gap - w
    y = pos.y() + gap if pos.y() + gap + h <= area.bottom() else pos.y() - gap - h
    x = min(max(x, area.left()), max(area.left(), area.right() - w))
    y = min(max(y, area.top()), max(area.top(), area.bottom() - h))
    return QPointF(x, y)
