"""The controls panel's inline messages: each field has a label beside it that says why a value
was refused (a ConfigError's message, or typed text a number field cannot take), never a
dialog. A refused typed value keeps its message until an edit of that field is accepted."""

from __future__ import annotations

import contextlib

from PySide6.QtWidgets import QDoubleSpinBox, QLabel

from gpu.config import ConfigError

from ..kit.plain_text import PlainLabel, tooltip
from .spin_boxes import SeqLenSpinBox, ValidatedDoubleSpinBox, ValidatedSpinBox

#: Fields a ConfigError may name that have no label of their own.
FIELD_ALIASES = {"config": "seq_len", "algorithm": "algorithms"}


class FieldErrors:
    """The inline error label of each field (module docstring)."""

    def __init__(self) -> None:
        self._labels: dict[str, QLabel] = {}
        self._refused: set[str] = set()  # fields showing a refused typed value

    def label(self, field: str) -> QLabel:
        """A new, hidden error label for `field`, to be placed beside it."""
        label = PlainLabel()
        label.setObjectName("fieldError")
        label.setProperty("role", "error")
        label.setWordWrap(True)
        label.setVisible(False)
        self._labels[field] = label
        return label

    def show(self, field: str, message: str) -> None:
        """Show `message` next to `field` (a ConfigError's field); unknown fields go to N's."""
        label = self._labels.get(field) or self._labels.get(FIELD_ALIASES.get(field, ""))
        if label is None:
            label = self._labels["seq_len"]
        label.setText(message)
        label.setToolTip(tooltip(message))
        label.setVisible(True)

    def clear(self, field: str) -> None:
        label = self._labels.get(field)
        if label is not None and label.isVisible():
            label.setVisible(False)
            label.clear()

    def forget(self, field: str) -> None:
        """A valid value of `field` arrived: its message, a refused typed value's too, is moot."""
        self.clear(field)
        self._refused.discard(field)

    def text(self, field: str) -> str:
        label = self._labels.get(field)
        return label.text() if label is not None and label.isVisible() else ""

    def watch(self, box: ValidatedSpinBox | ValidatedDoubleSpinBox, field: str) -> None:
        """Say why text typed into `box` is refused, until an edit of it is accepted."""
        box.rejected.connect(lambda text: self._refuse(box, field, text))
        box.editingFinished.connect(lambda: self._edit_finished(box, field))

    def _refuse(
        self, box: ValidatedSpinBox | ValidatedDoubleSpinBox, field: str, text: str
    ) -> None:
        """Say why typed `text` is refused, naming the field; the field keeps its value."""
        decimal = isinstance(box, QDoubleSpinBox)
        value: object = text
        with contextlib.suppress(ValueError):
            value = float(text.replace(",", ".")) if decimal else int(text)
        if decimal:
            unit = box.suffix().strip()
            allowed = f"a number from {box.minimum():g} to {box.maximum():g} {unit}".rstrip()
            kept = f"{box.value():g} {unit}".rstrip()
        else:
            allowed = f"an integer from {box.minimum()} to {box.maximum()}"
            if isinstance(box, SeqLenSpinBox) and box.snap:
                allowed += " (the N values of the recorded run)"
            kept = str(box.value())
        self.show(field, f"{ConfigError(field, value, allowed)}; kept {kept}")
        self._refused.add(field)

    def _edit_finished(self, box: ValidatedSpinBox | ValidatedDoubleSpinBox, field: str) -> None:
        if box.rejections:  # this edit was refused: its message stays
            box.rejections = 0
        elif field in self._refused:  # an accepted edit: an older refusal is moot
            self._refused.discard(field)
            self.clear(field)
