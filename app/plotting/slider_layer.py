"""What moves with the slider on a plot: the cursor at N (a dashed line and its "N = …" label)
and the "you are here" markers, as one item of the plot's scene.

It is an ordinary scene item in the view box's data coordinates, so every painter (the screen,
a grab, an export, SVG) paints it with the rest of the scene: what the screen shows is what
they show. It covers the data area, but a move asks Qt to repaint only the pixels its parts
covered and cover now (a strip for the line, a box for the label and each marker), once per
turn of the event loop: the data items there are blitted from their caches, and it paints its
few shapes in device pixels.
One item instead of a line, a label and a scatter per marker set keeps a move to one Python
paint call and a few rects per plot.

`LayerCursor` and `LayerMarkers` mimic the part of pyqtgraph's InfiniteLine and
ScatterPlotItem that the plots use."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPen,
    QRegion,
    QTransform,
)

#: Pixels around what the layer draws that a repaint includes (antialiasing, pen widths).
MARGIN_PX = 3
#: Where the label's foot sits, as a share of the data area's height above its bottom.
LABEL_HEIGHT = 0.04
#: Beyond this share of the data area's width the label goes left of the line (never clipped).
LABEL_FLIP = 0.7
#: Drawn above the data items and below the hover read-out.
Z_VALUE = 50
#: The event that asks for the repaint of what moved in a turn (see `SliderLayer.moved`).
FLUSH_EVENT = QEvent.Type(QEvent.registerEventType())


class LayerCursor:
    """The cursor at x (data coordinates of the view box): a vertical line across the data
    area, with an optional label near its foot, right of the line or left of it near the
    right edge."""

    def __init__(self, layer: SliderLayer, label: bool) -> None:
        self._layer = layer
        self.labelled = label
        self._value = 0.0
        self._visible = True
        self.text = ""
        self.pen = QPen(QColor("gray"))

    def value(self) -> float:
        return self._value

    def setValue(self, x: float) -> None:
        if float(x) != self._value:
            self._value = float(x)
            self._layer.moved()

    def set_label(self, text: str) -> None:
        if text != self.text:
            self.text = text
            self._layer.moved()

    def setPen(self, pen: QPen) -> None:
        self.pen = QPen(pen)
        self.pen.setCosmetic(True)
        self._layer.moved()

    def setVisible(self, visible: bool) -> None:
        if visible != self._visible:
            self._visible = visible
            self._layer.moved()

    def isVisible(self) -> bool:
        return self._visible


class LayerMarkers:
    """Hollow markers of one symbol and size (pixels) at data points, a pen each or one for
    all. `legend_sample` is what a legend row shows for them."""

    def __init__(self, layer: SliderLayer, symbol: str, size: float) -> None:
        self._layer = layer
        self.symbol = symbol
        self.size = size
        self.points: list[tuple[float, float]] = []
        self.pens: list[QPen] = []
        self.pen = QPen()
        self.visible = True
        self.legend_sample = pg.ScatterPlotItem(symbol=symbol, size=size)

    def setData(self, x=(), y=(), pen=None, **_: object) -> None:  # type: ignore[no-untyped-def]
        points = [(float(a), float(b)) for a, b in zip(x, y, strict=True)]
        pens = [QPen(p) for p in pen] if isinstance(pen, list) else []
        if (points, pens) != (self.points, self.pens):
            self.points, self.pens = points, pens
            self._layer.moved()

    def setVisible(self, visible: bool) -> None:
        if visible != self.visible:
            self.visible = visible
            self._layer.moved()

    def isVisible(self) -> bool:
        return self.visible

    def setPen(self, pen: QPen) -> None:
        self.pen = QPen(pen)
        self.legend_sample.setPen(pen)
        self.legend_sample.setBrush(None)
        self._layer.moved()

    def set_symbol(self, symbol: str, size: float) -> None:
        self.symbol, self.size = symbol, size
        self.legend_sample.setSymbol(symbol)
        self.legend_sample.setSize(size)
        self._layer.moved()

    def pen_at(self, i: int) -> QPen:
        return self.pens[i] if i < len(self.pens) else self.pen


def _symbol_path(symbol: str, size: float) -> QPainterPath:
    """pyqtgraph's symbol of unit size, scaled to `size` pixels."""
    symbols = pg.graphicsItems.ScatterPlotItem.Symbols
    return QTransform.fromScale(size, size).map(symbols.get(symbol, symbols["o"]))


@dataclass(frozen=True)
class Shapes:
    """What the layer draws, in data coordinates: enough to work out the pixels it covers
    under any view transform."""

    cursor_x: float | None  # None: no cursor
    label: str  # the cursor's label, "" for none
    marks: tuple[tuple[float, float, float], ...]  # (x, y, half the symbol's extent in px)


class SliderLayer(pg.GraphicsObject):
    """The cursor and marker sets of one plot, an item of its view box (data coordinates)."""

    def __init__(self, view_box: pg.ViewBox, cursor_label: bool, font: QFont) -> None:
        super().__init__()
        self._vb = view_box
        self.setZValue(Z_VALUE)
        self.cursor = LayerCursor(self, cursor_label)
        self.markers: list[LayerMarkers] = []
        self.font = QFont(font)
        self._metrics = QFontMetricsF(self.font)
        self._rect: QRectF | None = None
        self._asked = self.shapes()  # the shapes whose pixels were last asked for
        self._flush_posted = False
        view_box.addItem(self, ignoreBounds=True)

    def add_markers(self, symbol: str, size: float) -> LayerMarkers:
        markers = LayerMarkers(self, symbol, size)
        self.markers.append(markers)
        return markers

    # ------------------------------------------------------------------ geometry

    def boundingRect(self) -> QRectF:
        """The data area (the view's range): the layer may draw anywhere in it."""
        if self._rect is None:
            self._rect = QRectF(self._vb.viewRect())
        return QRectF(self._rect)

    def viewTransformChanged(self) -> None:
        """A new range or size: Qt repaints the whole plot, the layer with it."""
        self.prepareGeometryChange()
        self._rect = None

    def moved(self) -> None:
        """A part moved or restyled: its pixels are asked for once all of this turn's changes
        are in (a move changes the cursor, its label and several marker sets), in an event
        posted now, which Qt delivers before it works out what to repaint."""
        if not self._flush_posted:
            self._flush_posted = True
            QCoreApplication.postEvent(self, QEvent(FLUSH_EVENT))

    def event(self, event: QEvent) -> bool:
        if event.type() == FLUSH_EVENT:
            self._flush_posted = False
            self._ask_repaint()
            return True
        return super().event(event)

    def _ask_repaint(self) -> None:
        """Repaint the pixels of the shapes last asked for and of the shapes now, both under
        the view's transform now: whatever moved the view since (a new range, size or
        layout) repainted the whole plot, so the screen holds one of the two there. Asked of
        the scene rect by rect: an item's own updates in a turn are merged into one rect
        around them all (the cursor's two strips and the markers far apart would repaint
        everything between them)."""
        to_device = self.deviceTransform_()
        view = self.getViewWidget()
        if to_device is None or view is None:
            return  # not in a view yet: its first paint draws it
        area = to_device.mapRect(self.boundingRect())
        now = self.shapes()
        region = self.region(self._asked, to_device, area) + self.region(now, to_device, area)
        scene = self.scene()
        for rect in region:
            scene.update(view.mapToScene(rect).boundingRect())
        self._asked = now

    def shapes(self) -> Shapes:
        """What the layer draws now, in data coordinates."""
        c = self.cursor
        marks = tuple(
            (x, y, m.size / 2 + m.pen_at(i).widthF())
            for m in self.markers
            if m.visible
            for i, (x, y) in enumerate(m.points)
        )
        label = c.text if c.labelled else ""
        return Shapes(c.value() if c.isVisible() else None, label, marks)

    def _cursor_x(self, x: float, to_device: QTransform) -> float:
        """The cursor's x in device pixels, on a pixel's centre (a crisp one-pixel line)."""
        return math.floor(to_device.map(QPointF(x, 0.0)).x()) + 0.5

    def _label_rect(self, text: str, x: float, area: QRectF) -> QRectF:
        box = self._metrics.boundingRect(text)
        # left of the line near the right edge, or wherever the right has no room for it
        left = x > area.left() + LABEL_FLIP * area.width() or x + 4 + box.width() > area.right()
        x0 = x - box.width() - 4 if left else x + 4
        top = area.bottom() - LABEL_HEIGHT * area.height() - box.height()
        return QRectF(x0, top, box.width(), box.height())

    def region(self, shapes: Shapes, to_device: QTransform, area: QRectF) -> QRegion:
        """The device pixels `shapes` cover, with a margin, inside the data area `area`."""
        region = QRegion()
        inside = area.toAlignedRect()
        if shapes.cursor_x is not None:
            x = self._cursor_x(shapes.cursor_x, to_device)
            if area.left() - MARGIN_PX <= x <= area.right() + MARGIN_PX:
                strip = QRect(
                    round(x) - MARGIN_PX, inside.top(), 2 * MARGIN_PX + 1, inside.height()
                )
                region += strip.intersected(inside)
                if shapes.label:
                    label = self._label_rect(shapes.label, x, area).toAlignedRect()
                    region += label.adjusted(-MARGIN_PX, -MARGIN_PX, MARGIN_PX, MARGIN_PX)
        for x, y, half in shapes.marks:
            p = to_device.map(QPointF(x, y))
            half += MARGIN_PX
            box = QRectF(p.x() - half, p.y() - half, 2 * half, 2 * half).toAlignedRect()
            region += box.intersected(inside)
        return region

    # ------------------------------------------------------------------ painting

    def paint(self, painter: QPainter, *_: object) -> None:
        """Draw the layer in device pixels (the same size at any zoom and on any painter)."""
        to_device = painter.transform()
        area = to_device.mapRect(self.boundingRect())
        painter.save()
        painter.resetTransform()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        c = self.cursor
        if c.isVisible():
            x = self._cursor_x(c.value(), to_device)
            painter.setPen(c.pen)
            painter.drawLine(QPointF(x, area.top()), QPointF(x, area.bottom()))
            if c.labelled and c.text:
                painter.setFont(self.font)
                painter.setPen(c.pen.color())
                rect = self._label_rect(c.text, x, area)
                painter.drawText(rect, Qt.AlignmentFlag.AlignLeft, c.text)
        for m in self.markers:
            if not m.visible:
                continue
            path = _symbol_path(m.symbol, m.size)
            for i, (x, y) in enumerate(m.points):
                pen = QPen(m.pen_at(i))
                pen.setCosmetic(True)
                painter.setPen(pen)
                painter.drawPath(path.translated(to_device.map(QPointF(x, y))))
        painter.restore()
