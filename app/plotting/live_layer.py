"""What moves with the slider on a plot: the cursor at N (a dashed line and its "N = …" label)
and the "you are here" markers. They are not scene items: the plot paints them over its
picture of the scene (app/plotting/scene_picture.py), so a move changes no item, leaves every
data item's cache alone and repaints only the strips they leave and enter.

`LayerCursor` and `LayerMarkers` mimic the part of pyqtgraph's InfiniteLine and
ScatterPlotItem that the plots use; `LiveLayer` holds them, says which pixels they cover and
paints them in device pixels (the same on screen, in a PNG and in an SVG)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRect, QRectF, Qt
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


class LayerCursor:
    """The cursor at x (data coordinates of the view box): a vertical line across the data
    area, with an optional label near its foot, right of the line (`side` 0) or left (1)."""

    def __init__(self, changed: Callable[[], None], label: bool) -> None:
        self._changed = changed
        self.labelled = label
        self._value = 0.0
        self._visible = True
        self.text = ""
        self.side = 0.0
        self.pen = QPen(QColor("gray"))

    def value(self) -> float:
        return self._value

    def setValue(self, x: float) -> None:
        if float(x) != self._value:
            self._value = float(x)
            self._changed()

    def set_label(self, text: str, side: float) -> None:
        if (text, side) != (self.text, self.side):
            self.text, self.side = text, side
            self._changed()

    def setPen(self, pen: QPen) -> None:
        self.pen = QPen(pen)
        self.pen.setCosmetic(True)
        self._changed()

    def setVisible(self, visible: bool) -> None:
        if visible != self._visible:
            self._visible = visible
            self._changed()

    def isVisible(self) -> bool:
        return self._visible


class LayerMarkers:
    """Hollow markers of one symbol and size (pixels) at data points, a pen each or one for
    all. `legend_sample` is what a legend row shows for them."""

    def __init__(self, changed: Callable[[], None], symbol: str, size: float) -> None:
        self._changed = changed
        self.symbol = symbol
        self.size = size
        self.points: list[tuple[float, float]] = []
        self.pens: list[QPen] = []
        self.pen = QPen()
        self.visible = True
        self.legend_sample = pg.ScatterPlotItem(symbol=symbol, size=size)

    def setData(self, x=(), y=(), pen=None, **_: object) -> None:  # type: ignore[no-untyped-def]
        self.points = [(float(a), float(b)) for a, b in zip(x, y, strict=True)]
        self.pens = [QPen(p) for p in pen] if isinstance(pen, list) else []
        self._changed()

    def setVisible(self, visible: bool) -> None:
        if visible != self.visible:
            self.visible = visible
            self._changed()

    def isVisible(self) -> bool:
        return self.visible

    def setPen(self, pen: QPen) -> None:
        self.pen = QPen(pen)
        self.legend_sample.setPen(pen)
        self.legend_sample.setBrush(None)
        self._changed()

    def set_symbol(self, symbol: str, size: float) -> None:
        self.symbol, self.size = symbol, size
        self.legend_sample.setSymbol(symbol)
        self.legend_sample.setSize(size)
        self._changed()

    def pen_at(self, i: int) -> QPen:
        return self.pens[i] if i < len(self.pens) else self.pen


def _symbol_path(symbol: str, size: float) -> QPainterPath:
    """pyqtgraph's symbol of unit size, scaled to `size` pixels."""
    base = pg.graphicsItems.ScatterPlotItem.Symbols.get(symbol)
    if base is None:
        base = pg.graphicsItems.ScatterPlotItem.Symbols["o"]
    return QTransform.fromScale(size, size).map(base)


class LiveLayer:
    """The cursor and marker sets of one plot; `changed` is told whenever one of them moves
    or restyles."""

    def __init__(self, changed: Callable[[], None], cursor_label: bool, font: QFont) -> None:
        self.cursor = LayerCursor(changed, cursor_label)
        self.markers: list[LayerMarkers] = []
        self._changed = changed
        self.font = QFont(font)
        self._metrics = QFontMetricsF(self.font)

    def add_markers(self, symbol: str, size: float) -> LayerMarkers:
        markers = LayerMarkers(self._changed, symbol, size)
        self.markers.append(markers)
        return markers

    # ------------------------------------------------------------------ geometry

    def _cursor_x(self, to_device: QTransform) -> float:
        """The cursor's x in device pixels, on a pixel's centre (a crisp one-pixel line)."""
        return math.floor(to_device.map(QPointF(self.cursor.value(), 0.0)).x()) + 0.5

    def _label_rect(self, x: float, area: QRectF) -> QRectF:
        box = self._metrics.boundingRect(self.cursor.text)
        left = x - box.width() - 4 if self.cursor.side else x + 4
        top = area.top() + 0.96 * area.height() - box.height()
        return QRectF(left, top, box.width(), box.height())

    def _marker_points(self, to_device: QTransform) -> list[tuple[LayerMarkers, int, QPointF]]:
        out = []
        for m in self.markers:
            if m.visible:
                for i, (x, y) in enumerate(m.points):
                    out.append((m, i, to_device.map(QPointF(x, y))))
        return out

    def region(self, to_device: QTransform, area: QRectF) -> QRegion:
        """The device pixels the layer covers, with a margin, inside the data area `area`."""
        region = QRegion()
        inside = area.toAlignedRect()
        if self.cursor.isVisible():
            x = self._cursor_x(to_device)
            if area.left() - MARGIN_PX <= x <= area.right() + MARGIN_PX:
                strip = QRect(
                    round(x) - MARGIN_PX, inside.top(), 2 * MARGIN_PX + 1, inside.height()
                )
                region += strip.intersected(inside)
                if self.cursor.labelled and self.cursor.text:
                    label = self._label_rect(x, area).toAlignedRect()
                    region += label.adjusted(-MARGIN_PX, -MARGIN_PX, MARGIN_PX, MARGIN_PX)
        for m, i, p in self._marker_points(to_device):
            half = m.size / 2 + m.pen_at(i).widthF() + MARGIN_PX
            box = QRectF(p.x() - half, p.y() - half, 2 * half, 2 * half).toAlignedRect()
            region += box.intersected(inside)
        return region

    # ------------------------------------------------------------------ painting

    def paint(self, painter: QPainter, to_device: QTransform, area: QRectF) -> None:
        """Draw the layer in device pixels (the painter's world transform is reset), clipped to
        the data area `area` as the scene's items are."""
        painter.save()
        painter.resetTransform()
        painter.setClipRect(area, Qt.ClipOperation.IntersectClip)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        if self.cursor.isVisible():
            x = self._cursor_x(to_device)
            painter.setPen(self.cursor.pen)
            painter.drawLine(QPointF(x, area.top()), QPointF(x, area.bottom()))
            if self.cursor.labelled and self.cursor.text:
                painter.setFont(self.font)
                painter.setPen(self.cursor.pen.color())
                rect = self._label_rect(x, area)
                painter.drawText(rect, Qt.AlignmentFlag.AlignLeft, self.cursor.text)
        paths: dict[tuple[str, float], QPainterPath] = {}
        for m, i, p in self._marker_points(to_device):
            pen = QPen(m.pen_at(i))
            pen.setCosmetic(True)
            painter.setPen(pen)
            if m.symbol == "o":
                r = m.size / 2
                painter.drawEllipse(p, r, r)
                continue
            key = (m.symbol, m.size)
            path = paths.get(key) or paths.setdefault(key, _symbol_path(m.symbol, m.size))
            painter.drawPath(path.translated(p))
        painter.restore()
