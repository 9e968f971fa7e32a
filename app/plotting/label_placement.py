"""Where a text label goes on a plot so that it covers no other label and no line: the first
free place among a few beside its line, in scene pixels.

Why its own module: the roofline's flat roofs can lie a few pixels apart (at d = 64 the
exponential unit's coincides with the tensor cores'), so a label at a fixed spot lands on its
neighbour's label or on the diagonal memory roof. Plain geometry on Qt's value types, no
widgets: the plot hands in the shapes to keep clear of (labels as polygons, the memory roofs'
rotated along their lines; markers as small squares) and the lines a label must not cross.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QPolygonF

#: Pixels kept between a label and what it must not touch.
GAP = 2.0
#: How many times a label may be moved past what it would cover, along or above its line.
MAX_STACK = 4


def segment_hits_rect(a: QPointF, b: QPointF, rect: QRectF) -> bool:
    """Whether the segment a–b passes through `rect` (Liang–Barsky clipping)."""
    t0, t1 = 0.0, 1.0
    dx, dy = b.x() - a.x(), b.y() - a.y()
    for p, q in (
        (-dx, a.x() - rect.left()),
        (dx, rect.right() - a.x()),
        (-dy, a.y() - rect.top()),
        (dy, rect.bottom() - a.y()),
    ):
        if p == 0:
            if q < 0:
                return False  # parallel to this edge and outside it
            continue
        t = q / p
        if p < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return False
    return True


def _padded(rect: QRectF) -> QRectF:
    return rect.adjusted(-GAP, -GAP, GAP, GAP)


def _hits(rect: QRectF, shapes: Iterable[QPolygonF]) -> list[QPolygonF]:
    box = QPolygonF(_padded(rect))
    return [s for s in shapes if s.intersects(box)]


def is_free(
    rect: QRectF,
    box: QRectF,
    labels: Iterable[QPolygonF],
    lines: Iterable[tuple[QPointF, QPointF]],
) -> bool:
    """Inside `box`, clear (by GAP) of every shape (labels, markers), crossed by no line."""
    if not box.contains(rect) or _hits(rect, labels):
        return False
    return not any(segment_hits_rect(a, b, rect) for a, b in lines)


def stacked_candidates(
    anchor: QPointF, size: tuple[float, float], obstacles: Sequence[QPolygonF]
) -> list[QRectF]:
    """Rectangles of `size` beside a flat line whose right end is `anchor`: above the line
    (bottom-right corner there), moved left past each obstacle it would overlap, then moved up
    past them; then below the line (top-right corner there) and moved left (at most MAX_STACK
    moves each way): the places to try, in order."""
    w, h = size
    above = QRectF(anchor.x() - GAP - w, anchor.y() - h - GAP, w, h)
    below = QRectF(anchor.x() - GAP - w, anchor.y() + GAP, w, h)
    out = []
    for first, steps in ((above, (_left_of, _above)), (below, (_left_of,))):
        out.append(first)
        for step in steps:
            rect = first
            for _ in range(MAX_STACK):
                hit = _hits(rect, obstacles)
                if not hit:
                    break
                rect = step(rect, [s.boundingRect() for s in hit])
                out.append(rect)
    return out


def _left_of(rect: QRectF, hit: list[QRectF]) -> QRectF:
    right = min(b.left() for b in hit) - 2 * GAP
    return QRectF(right - rect.width(), rect.top(), rect.width(), rect.height())


def _above(rect: QRectF, hit: list[QRectF]) -> QRectF:
    bottom = min(b.top() for b in hit) - 2 * GAP
    return QRectF(rect.left(), bottom - rect.height(), rect.width(), rect.height())


def first_free(
    candidates: Sequence[QRectF],
    box: QRectF,
    labels: Sequence[QPolygonF],
    lines: Sequence[tuple[QPointF, QPointF]],
) -> QRectF | None:
    """The first candidate that is free (is_free); None when none is."""
    for rect in candidates:
        if is_free(rect, box, labels, lines):
            return rect
    return None
