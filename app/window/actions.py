"""One way to make the window's menu actions: text, key, what it does, and the tip shown in
menus and the status bar. Added to the window itself, so its key works wherever the focus is
(the Help menu's shortcut list reads them from there)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QWidget

from ..kit.plain_text import tooltip


def make_action(
    window: QWidget,
    text: str,
    shortcut: QKeySequence | QKeySequence.StandardKey | str | None,
    slot: Callable[[], object],
    tip: str,
) -> QAction:
    action = QAction(text, window)
    if shortcut is not None:
        action.setShortcut(QKeySequence(shortcut))
    action.setToolTip(tooltip(tip))
    action.setStatusTip(tip)
    action.triggered.connect(lambda *_: slot())
    window.addAction(action)
    return action
