"""Placing a plot label: the first place beside its line that covers no label, point or line."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QPolygonF

from app.plotting.label_placement import GAP, first_free, segment_hits_rect, stacked_candidates

BOX = QRectF(0, 0, 400, 300)


def test_a_segment_hits_a_rect_only_where_it_passes_through_it():
    rect = QRectF(100, 100, 50, 20)
    assert segment_hits_rect(QPointF(0, 110), QPointF(400, 110), rect)  # straight through
    assert segment_hits_rect(QPointF(90, 130), QPointF(160, 90), rect)  # a diagonal across
    assert not segment_hits_rect(QPointF(0, 0), QPointF(90, 200), rect)  # passes beside it
    assert not segment_hits_rect(QPointF(0, 150), QPointF(400, 150), rect)  # below it
    assert not segment_hits_rect(QPointF(160, 0), QPointF(300, 122), rect)  # ends short of it


def test_a_label_goes_above_its_line_at_the_right_end_when_that_is_free():
    end = QPointF(390, 100)
    rect = first_free(stacked_candidates(end, (120, 20), []), BOX, [], [])
    assert rect == QRectF(390 - GAP - 120, 100 - 20 - GAP, 120, 20)


def test_a_label_moves_left_of_a_label_in_its_place_then_up_then_below():
    end = QPointF(390, 100)
    neighbour = QPolygonF(QRectF(250, 75, 140, 22))  # another roof's label, at the right end
    rect = first_free(stacked_candidates(end, (120, 20), [neighbour]), BOX, [neighbour], [])
    assert rect.right() < 250 and rect.bottom() <= 100  # beside it, still above the line
    diagonal = [(QPointF(0, 300), QPointF(300, 0))]  # a memory roof through that place
    rect = first_free(stacked_candidates(end, (120, 20), [neighbour]), BOX, [neighbour], diagonal)
    assert rect.left() >= 250 and rect.bottom() <= 75  # not across it: above the neighbour
    low = QRectF(0, 60, 400, 240)  # no room above the neighbour in this plot: below the line
    rect = first_free(stacked_candidates(end, (120, 20), [neighbour]), low, [neighbour], diagonal)
    assert rect is not None and rect.top() >= 100


def test_no_free_place_leaves_the_label_out():
    end = QPointF(390, 100)
    crowd = [QPolygonF(QRectF(0, 0, 400, 300))]  # every place covers something
    assert first_free(stacked_candidates(end, (120, 20), crowd), BOX, crowd, []) is None
