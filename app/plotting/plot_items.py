"""The items a plot is made of, each created once and updated in place: `Style` (how an item is
drawn, by palette key, so a theme switch restyles it), the scatter that caches its bounds, and
`with_alpha`. (What follows the slider: app/plotting/slider_layer.py.)
Importing this module turns pyqtgraph's antialiasing on for every plot."""

from __future__ import annotations

from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt

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


def with_alpha(color: str, alpha: int) -> tuple[int, int, int, int]:
    c = pg.mkColor(color)
    return (c.red(), c.green(), c.blue(), alpha)
