"""A plot's legend as a strip above the data area: entries flow left to right and wrap at the
plot's width, so the legend never covers data."""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QGraphicsItem

from ..kit.plain_text import html_text


class LegendSample(pg.ItemSample):
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
        self.sampleType = LegendSample
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

    def forget_placement(self) -> None:
        """The next `relayout` places the entries again, whether or not they changed."""
        self._placed = ()

    def updateSize(self) -> None:
        """Sized by the plot's layout (see relayout), never by pyqtgraph's own rule."""
        return

    def paint(self, p, *args) -> None:  # type: ignore[no-untyped-def]
        return  # no frame: a strip, not a box over data


#: Space after each legend entry.
ENTRY_GAP_PX = 12


class LegendRows:
    """The rows a plot's legend strip lists, and the room the strip takes in the plot's layout
    (its row 1). A row's sample and label are made once per entry and kept while hidden:
    making a label costs a text layout (~2 ms), and a recording's legends hold many of them."""

    def __init__(self, strip: LegendStrip, layout: QGraphicsItem) -> None:
        self.strip = strip
        self.layout = layout
        #: Whether the strip is shown (View ▸ Plot legends); hidden, its row goes to the data.
        self.shown = True
        self._rows: dict[str, tuple] = {}  # name -> (sample, label)

    def fill(self, entries: Sequence[tuple[str, str, object]], width: float) -> None:
        """Lay out the rows of `entries` (name, text, the item its sample shows)."""
        legend = self.strip
        for sample, label in legend.items:
            sample.hide()
            label.hide()
        legend.items = []
        for name, text, source in entries:
            row = self._rows.get(name)
            if row is None or row[0].item is not source:
                label = pg.LabelItem(
                    html_text(text),  # a label is HTML to pyqtgraph
                    color=legend.opts["labelTextColor"],
                    justify="left",
                    size=legend.opts["labelTextSize"],
                )
                label.setParentItem(legend)
                row = self._rows[name] = (LegendSample(source), label)
                row[0].setParentItem(legend)
            elif row[1].text != html_text(text):
                row[1].setText(html_text(text))
            for part in row:
                part.show()
            legend.items.append(row)
        self.relayout(width, force=True)

    def relayout(self, width: float, force: bool = False) -> None:
        """Flow the rows at `width` pixels; the strip's height follows where that changed it."""
        if force:
            self.strip.forget_placement()
        if self.strip.relayout(width) or force:
            shown = self.shown and bool(self.strip.items)
            height = self.strip.height_px if shown else 0
            self.strip.setVisible(shown)
            # A graphics layout keeps room for hidden items: the strip's own size says it.
            self.strip.setMinimumHeight(height)
            self.strip.setMaximumHeight(height)
            self.layout.setRowFixedHeight(1, height)

    def texts(self) -> list[str]:
        """The entries as shown."""
        return [label.item.toPlainText() for _, label in self.strip.items]

    def drop(self) -> None:
        """Forget the kept rows (their look is cached: a new palette needs new ones)."""
        for sample, label in self._rows.values():
            for part in (sample, label):
                part.setParentItem(None)
                if part.scene() is not None:
                    part.scene().removeItem(part)
        self._rows = {}
        self.strip.items = []
        self.strip.forget_placement()


def flow(widths: Sequence[float], available: float) -> list[tuple[float, int]]:
    """(x, row) of entries of these widths placed left to right, wrapping at `available`."""
    x, row, out = 0.0, 0, []
    for w in widths:
        if x > 0 and x + w > available:
            x, row = 0.0, row + 1
        out.append((x, row))
        x += w
    return out
