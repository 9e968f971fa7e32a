"""`LabelledLine`: a labelled horizontal or vertical line on a log10 axis, such as a memory
budget or a ridge point, its label on a patch of the background above the data."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pyqtgraph as pg
from PySide6.QtCore import Qt

from .plot_items import with_alpha

if TYPE_CHECKING:
    from .metric_plot import MetricPlot


class LabelledLine:
    """A labelled line at a linear value on a log10 axis: horizontal (a memory budget) or
    vertical (a ridge point); hidden while it has no value. The label sits on a patch of the
    background, above the data, so no marker crosses it."""

    def __init__(
        self,
        plot: MetricPlot,
        angle: int,
        position: float,
        anchors: list,
        along: bool = False,
    ) -> None:
        """`along`: the label runs along the line (a vertical line's reads upwards)."""
        self.line = pg.InfiniteLine(angle=angle, movable=False)
        self.line.setZValue(40)
        self.label = pg.InfLineLabel(
            self.line,
            text="",
            position=position,
            anchors=anchors,
            rotateAxis=(1, 0) if along else None,
        )
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
