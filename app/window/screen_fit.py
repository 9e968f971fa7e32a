"""The window stays on its screen, title bar and frame included.

Before a window is shown its frame is unknown (Qt reports the frame as the window itself), so a
window sized to the whole screen ran past its bottom by the window manager's title bar once
shown, and the status bar was hidden. Until the frame is known, `fit_to_screen` keeps
FRAME_GUESS for it; `ScreenFit` fits the window again as soon as the window manager has put its
frame on (a move or resize after the show tells), with the frame's real size.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRect
from PySide6.QtWidgets import QApplication, QWidget

#: Room kept for a frame not yet known (width, height in px): a title bar and thin borders of
#: common window managers (openbox 20 px, GNOME's and KDE's up to about 37 px).
FRAME_GUESS = (4, 40)


def frame_extra(window: QWidget) -> tuple[int, int] | None:
    """What the frame adds to the window's width and height; None while it is not known."""
    frame, inner = window.frameGeometry(), window.geometry()
    extra = (frame.width() - inner.width(), frame.height() - inner.height())
    return extra if window.isVisible() and extra != (0, 0) else None


def fit_to_screen(window: QWidget, area: QRect | None = None) -> None:
    """Shrink and move `window` so that it and its frame lie on its screen's available area
    (`area`, for tests): a default or restored size larger than a 1280×800 laptop's screen is
    shrunk to it, never left to hang off the edges."""
    if area is None:
        screen = window.screen() or QApplication.primaryScreen()
        if screen is None:
            return
        area = screen.availableGeometry()
    known = frame_extra(window)
    extra_w, extra_h = known if known is not None else FRAME_GUESS
    w = max(min(window.width(), area.width() - extra_w), window.minimumWidth())
    h = max(min(window.height(), area.height() - extra_h), window.minimumHeight())
    if (w, h) != (window.width(), window.height()):
        window.resize(w, h)
    frame = window.frameGeometry()
    x = min(max(frame.x(), area.x()), area.right() - w - extra_w + 1)
    y = min(max(frame.y(), area.y()), area.bottom() - h - extra_h + 1)
    if (x, y) != (frame.x(), frame.y()):
        window.move(max(x, area.x()), max(y, area.y()))


class ScreenFit(QObject):
    """Fits `window` again once its real frame is known after it is shown (an event filter on
    the window: its moves and resizes while the window manager decorates it), once per size of
    the frame."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.window = window
        self._fitted_for: tuple[int, int] | None = None
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.window and event.type() in (
            QEvent.Type.Show,
            QEvent.Type.Move,
            QEvent.Type.Resize,
        ):
            extra = frame_extra(self.window)
            if extra is not None and extra != self._fitted_for:
                self._fitted_for = extra
                fit_to_screen(self.window)
        return False
