"""The items a plot is made of, each created once and updated in place: `Style` (how an item is
drawn, by palette key, so a theme switch restyles it), `RingMarkers` (cheap hollow markers that
follow the slider), the scatter that caches its bounds, the cursor line, and `with_alpha`.
Importing this module turns pyqtgraph's antialiasing on for every plot."""

from __future__ import annotations

from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPen
from PySide6.QtWidgets import (
    QGraphicsEllipseItem,
    QGraphicsItem,
    QGraphicsLineItem,
    QGraphicsSimpleTextItem,
)

pg.setConfigOptions(antialias=True)


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


def with_alpha(color: str, alpha: int) -> tuple[int, int, int, int]:
    c = pg.mkColor(color)
    return (c.red(), c.green(), c.blue(), alpha)
