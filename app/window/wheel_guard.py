"""The mouse wheel changes a setting only on the control that has the focus.

Scrolling down the Controls panel passes over combo boxes, spin boxes and sliders; Qt's default
lets each one under the pointer take the wheel, so a scroll through the panel switched the
backend, the dtype or N, with no undo. Guarded controls take the focus only by a click or Tab
(never by the wheel), and while they do not have it the wheel goes on to the panel, which
scrolls. A control clicked or tabbed into takes the wheel as before.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractSlider, QAbstractSpinBox, QComboBox, QScrollBar, QWidget

#: The kinds of control whose value the wheel changes.
GUARDED = (QComboBox, QAbstractSpinBox, QAbstractSlider)


class WheelGuard(QObject):
    """An event filter: a wheel event on an unfocused control is left to its parents."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        wheel = event.type() == QEvent.Type.Wheel
        if wheel and isinstance(watched, QWidget) and not watched.hasFocus():
            event.ignore()  # not accepted: Qt hands it on to the parent (the scroll area)
            return True  # and the control itself never sees it
        return False


def guard_wheel(root: QWidget, guard: WheelGuard) -> int:
    """Guard every wheel-driven control under `root` (again is harmless: Qt keeps one filter
    per object). Returns how many controls are guarded."""
    count = 0
    for widget in root.findChildren(QWidget):
        if isinstance(widget, GUARDED) and not isinstance(widget, QScrollBar):
            if widget.focusPolicy() == Qt.FocusPolicy.WheelFocus:
                widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            widget.installEventFilter(guard)
            count += 1
    return count
