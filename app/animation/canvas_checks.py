"""The rules a lanes layout keeps at every size, checked on the layout model: no two texts
overlap, every text fits its rectangle, no quantity is cut."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from .canvas_text import Fonts, TextItem

_BARE_TOTAL = re.compile(r"/ [\d.,\u2009]+$")


def layout_problems(
    fonts: Fonts, items: Sequence[TextItem], width: float, height: float
) -> list[str]:
    """What breaks the rules of the module docstring in `items` drawn on a `width` × `height`
    canvas (empty when nothing): a text wider or taller than its rectangle or off the canvas, two
    texts overlapping, a quantity missing or cut, an elided text that carries a quantity."""
    out: list[str] = []
    for it in items:
        w, h = fonts.width(it.text, it.font), fonts.height(it.font)
        if w > it.rect.width() + 0.75:
            out.append(f"{it.key}: {it.text!r} needs {w:.1f} px, has {it.rect.width():.1f}")
        if h > it.rect.height() + 1.5:
            out.append(
                f"{it.key}: {it.text!r} needs {h:.1f} px of height, has {it.rect.height():.1f}"
            )
        r = it.rect
        if (
            r.left() < -0.5
            or r.top() < -0.5
            or r.right() > width + 0.5
            or r.bottom() > height + 0.5
        ):
            out.append(f"{it.key}: {it.text!r} lies outside the canvas")
        missing = [q for q in it.quantities if q not in it.text]
        if missing:
            out.append(f"{it.key}: {it.text!r} lost {missing}")
        if it.elided and it.quantities:
            out.append(f"{it.key}: {it.text!r} is elided but carries quantities")
        if _BARE_TOTAL.search(it.text):
            out.append(f"{it.key}: {it.text!r} ends in a number without its unit")
    for a, b in itertools.combinations(items, 2):
        inter = a.rect.intersected(b.rect)
        if inter.width() > 0.5 and inter.height() > 0.5:
            out.append(f"{a.key} {a.text!r} overlaps {b.key} {b.text!r}")
    return out
