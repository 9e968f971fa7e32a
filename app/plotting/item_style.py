"""How a plot item looks in a palette: one function for every kind of item a plot holds (a
line, a scatter, error bars, the slider layer's markers), so a theme change restyles each the
same way, and one for the colour a style's key names."""

from __future__ import annotations

import pyqtgraph as pg

from ..kit.theme import Palette
from .plot_items import Style, with_alpha
from .slider_layer import LayerMarkers


def style_color(p: Palette, key: str) -> str:
    """The colour of a style's key in `p`: a palette role (cursor, budget, ...) or a series'."""
    return {
        "cursor": p.cursor,
        "budget": p.budget,
        "oom": p.oom,
        "roof": p.roof,
        "muted": p.muted,
        "fg": p.foreground,
    }.get(key) or p.color(key)


def restyle_item(item, style: Style, p: Palette) -> None:  # type: ignore[no-untyped-def]
    """Give `item` the pens, brushes and symbol of `style` in the palette `p`."""
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
