"""Spin boxes that report what they cannot take instead of silently restoring the old value:
out-of-range numbers may be typed, so that Enter can say why they are refused (`rejected(text)`;
the panel shows the message), letters are refused as they are typed; the sequence-length box
steps along the slider's scale."""

from __future__ import annotations

import bisect
import re

from PySide6.QtCore import Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QSpinBox,
    QWidget,
)

from ..state.seq_scale import default_scale

_NUMBER_LIKE = re.compile(r"[+-]?\d*(?:[.,]\d*)?(?:[eE][+-]?\d*)?")


def _bare_text(box: QSpinBox | QDoubleSpinBox, text: str) -> str:
    return text.removeprefix(box.prefix()).removesuffix(box.suffix()).strip()


def _number_like(box: QSpinBox | QDoubleSpinBox, text: str, result: object) -> object:
    """Let out-of-range numbers be typed (Qt would drop the keystroke without a word), so that
    Enter can say why they are refused; letters are still refused as they are typed."""
    state = result[0] if isinstance(result, tuple) else result
    if state == QValidator.State.Invalid and _NUMBER_LIKE.fullmatch(_bare_text(box, text)):
        return (QValidator.State.Intermediate, text, result[2] if isinstance(result, tuple) else 0)
    return result


def _report_refusal(box: ValidatedSpinBox | ValidatedDoubleSpinBox, text: str, fixed: str) -> None:
    """Qt keeps the old value unless its own fix-up (dropping group separators, say) turned
    `text` into an acceptable value: only a refusal is reported."""
    if fixed != text and box.validate(fixed, len(fixed))[0] == QValidator.State.Acceptable:
        return
    box.rejections += 1
    box.rejected.emit(_bare_text(box, text))


class _ReportsRefusals:
    """Validation shared by the spin boxes below (mixed in before the Qt class): typed text that
    is not a number of this field is Invalid, and a refusal is reported, not silently undone."""

    rejections = 0  # edits refused since the last accepted one (set per box once refused)

    def validate(self, text: str, pos: int) -> object:
        return _number_like(self, text, super().validate(text, pos))

    def fixup(self, text: str) -> str:
        fixed = super().fixup(text)
        _report_refusal(self, text, fixed)
        return fixed


class ValidatedSpinBox(_ReportsRefusals, QSpinBox):
    """A spin box that reports typed text it cannot take instead of silently restoring the old
    value: `rejected(text)` fires when Enter or leaving the field finds such text."""

    rejected = Signal(str)


class ValidatedDoubleSpinBox(_ReportsRefusals, QDoubleSpinBox):
    """ValidatedSpinBox for decimals (the custom memory budget)."""

    rejected = Signal(str)


class SeqLenSpinBox(ValidatedSpinBox):
    """Exact N; the arrows step along the slider's scale instead of by 1."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.scale: tuple[int, ...] = default_scale()
        self.snap = False  # a recorded run: only its N values are allowed

    def stepBy(self, steps: int) -> None:
        n, scale = self.value(), self.scale
        if steps > 0:
            i = bisect.bisect_right(scale, n) + steps - 1
        elif steps < 0:
            i = bisect.bisect_left(scale, n) + steps
        else:
            return
        self.setValue(scale[max(0, min(len(scale) - 1, i))])
