"""One key to the colours and symbols every plot shares, shown once above the plots."""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from pyqtgraph.graphicsItems.ScatterPlotItem import drawSymbol
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter
from PySide6.QtWidgets import (
    QSizePolicy,
    QWidget,
)

from ..kit.theme import Palette
from .legend import ROW_PX
from .metric_plot import style_color
from .plot_items import Style


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
                color = style_color(p, style.color)
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
