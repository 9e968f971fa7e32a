"""Texts of the lanes canvas: the fonts it paints with, a placed text, and how a text is fitted
to its rectangle (the longest phrasing that fits, its quantities whole; only titles elided)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFont, QFontMetricsF

#: How many measured text widths a canvas keeps (a few scenes' worth).
WIDTHS_KEPT = 8192
#: How many font objects a canvas keeps metrics for by identity (its own ten, with room).
FONTS_HELD = 32
#: Fractions of an end value whose formatted strings bound a running value's width.
FRACTIONS = (0.0, 0.001, 0.0099, 0.099, 0.37, 0.999, 1.0)


LEFT = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter


RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


CENTER = Qt.AlignmentFlag.AlignCenter


class Fonts:
    """The canvas's fonts and their metrics (one instance per canvas)."""

    def __init__(self) -> None:
        self.small = QFont("DejaVu Sans", 8)
        self.norm = QFont("DejaVu Sans", 9)
        self.bold = QFont("DejaVu Sans", 9, QFont.Weight.Bold)
        self.small_bold = QFont("DejaVu Sans", 8, QFont.Weight.Bold)
        self.title = QFont("DejaVu Sans", 10, QFont.Weight.Bold)
        self.big = QFont("DejaVu Sans", 13, QFont.Weight.Bold)
        self.mono = QFont("DejaVu Sans Mono", 9)
        self.mono_small = QFont("DejaVu Sans Mono", 8)
        self.mono_b = QFont("DejaVu Sans Mono", 9, QFont.Weight.Bold)
        self.mono_small_b = QFont("DejaVu Sans Mono", 8, QFont.Weight.Bold)
        self._metrics: dict[str, QFontMetricsF] = {}
        #: Metrics by font object: a layout asks for thousands of widths, and QFont.key() costs
        #: more than the look-up (the font is held, so its id is never another's).
        self._by_font: dict[int, tuple[QFont, QFontMetricsF]] = {}
        #: Widths by (font object, text): a new scene lays out mostly the texts of the last.
        self._widths: dict[tuple[int, str], float] = {}

    def metrics(self, font: QFont) -> QFontMetricsF:
        held = self._by_font.get(id(font))
        if held is not None and held[0] is font:
            return held[1]
        key = font.key()
        fm = self._metrics.get(key)
        if fm is None:
            fm = self._metrics[key] = QFontMetricsF(font)
        if len(self._by_font) < FONTS_HELD:  # the canvas's own fonts, not a stream of copies
            self._by_font[id(font)] = (font, fm)
        return fm

    def width(self, text: str, font: QFont) -> float:
        fm = self.metrics(font)
        if id(font) not in self._by_font:  # a font not held: its id may be another's later
            return fm.horizontalAdvance(text)
        key = (id(font), text)
        w = self._widths.get(key)
        if w is None:
            if len(self._widths) >= WIDTHS_KEPT:
                self._widths.clear()  # figures change with every scene: keep the set small
            w = self._widths[key] = fm.horizontalAdvance(text)
        return w

    def height(self, font: QFont) -> float:
        return self.metrics(font).height()


@dataclass(frozen=True)
class TextItem:
    """One text the canvas draws: where, what, in which font and colour role (an AnimColors
    attribute), and the quantities it must show whole."""

    key: str
    rect: QRectF
    text: str
    font: QFont
    align: Qt.AlignmentFlag = LEFT
    color: str = "text"
    quantities: tuple[str, ...] = ()
    elided: bool = False


Variant = tuple[str, tuple[str, ...]]  # (text, the quantities in it)


def fit(fonts: Fonts, variants: Sequence[Variant], font: QFont, width: float) -> Variant | None:
    """The first phrasing that fits `width` in `font`, or None."""
    for text, quantities in variants:
        if text and fonts.width(text, font) <= width:
            return text, quantities
    return None


def place(
    fonts: Fonts,
    key: str,
    rect: QRectF,
    variants: Sequence[Variant],
    font: QFont,
    align: Qt.AlignmentFlag = LEFT,
    color: str = "text",
    shrink: bool = True,
) -> TextItem | None:
    """A TextItem of the longest fitting phrasing, its rectangle shrunk to the text (aligned as
    asked) so that neighbours may use the rest; None if no phrasing fits."""
    got = fit(fonts, variants, font, rect.width())
    if got is None:
        return None
    text, quantities = got
    if shrink:
        w = math.ceil(fonts.width(text, font)) + 1
        w = min(w, rect.width())
        if align & Qt.AlignmentFlag.AlignRight:
            rect = QRectF(rect.right() - w, rect.y(), w, rect.height())
        elif align & Qt.AlignmentFlag.AlignHCenter:
            rect = QRectF(rect.center().x() - w / 2, rect.y(), w, rect.height())
        else:
            rect = QRectF(rect.x(), rect.y(), w, rect.height())
    return TextItem(key, rect, text, font, align, color, quantities)


def elided(
    fonts: Fonts,
    key: str,
    rect: QRectF,
    text: str,
    font: QFont,
    align: Qt.AlignmentFlag = LEFT,
    color: str = "text",
) -> TextItem | None:
    """A free text (no quantities) elided to `rect`; None if not even "a…" fits."""
    fm = fonts.metrics(font)
    shown = fm.elidedText(text, Qt.TextElideMode.ElideRight, rect.width())
    if not shown or shown == "…":
        return None
    w = min(rect.width(), math.ceil(fm.horizontalAdvance(shown)) + 1)
    r = QRectF(rect.x(), rect.y(), w, rect.height())
    if align & Qt.AlignmentFlag.AlignRight:
        r.moveRight(rect.right())
    return TextItem(key, r, shown, font, align, color, (), shown != text)
