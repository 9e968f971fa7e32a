"""A one-line label that never clips: text too long for its width ends in "…", and the whole
text is its tooltip.

Status texts can be long ("naive at N = 65536 needs 206 GB, the budget allows 141 GB"); a
plain QLabel in a fixed-size row cuts them mid-word. This one keeps the full text (`text()`),
paints what fits (`shown_text()`), and never asks for more width than its minimum, so a
longer text cannot resize the header or the status bar either.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from .plain_text import tooltip


class ElidedLabel(QLabel):
    """See the module docstring. `tip`: the tooltip (after the whole text when that does not
    fit)."""

    def __init__(self, text: str = "", tip: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # outside text is text (app/kit/plain_text.py)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._full = ""
        self._tip = tip
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.setText(text)

    def setText(self, text: str) -> None:
        if text == self._full and super().text() == text:
            return
        self._full = text
        super().setText(text)
        self._sync_tip()

    def set_tip(self, tip: str) -> None:
        """The tooltip shown while the whole text fits."""
        self._tip = tip
        self._sync_tip()

    def shown_text(self) -> str:
        """The text as painted at the current width ("…" at its end when it does not fit)."""
        width = self.contentsRect().width()
        return self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, width)

    def is_elided(self) -> bool:
        return self.shown_text() != self._full

    def _sync_tip(self) -> None:
        tip = self._tip
        if self.is_elided():
            tip = self._full if not tip or tip == self._full else f"{self._full}\n\n{tip}"
        if self.toolTip() != tooltip(tip):
            self.setToolTip(tooltip(tip))

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        least = self.fontMetrics().horizontalAdvance("…") * 4
        return QSize(min(hint.width(), least), hint.height())

    def resizeEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().resizeEvent(event)
        self._sync_tip()

    def paintEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.setFont(self.font())
        align = self.alignment() | Qt.AlignmentFlag.AlignVCenter
        painter.drawText(self.contentsRect(), align, self.shown_text())
