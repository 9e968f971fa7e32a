"""A real X display for the tests: an Xvfb server of a chosen size with a window manager on it,
and the check that what the X server holds equals a fresh render.

The suite itself runs offscreen, where a widget's pixels exist only when something paints them;
on a real display the screen keeps whatever was last flushed to it, and a view that forgets to
repaint shows stale pixels for good. `screen_mismatches` reads the server's image of the window
(`QScreen.grabWindow(winId)` on xcb) before anything grabs a widget, and compares each view
with a fresh render of it (`QWidget.grab()`, which repaints the widget into a picture).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

#: A pixel differs when one of its channels differs by more than this (antialiasing differs by
#: less between two paints of the same picture; a stale axis or curve differs by far more).
CHANNEL_TOLERANCE = 48
#: The share of a view's pixels that may differ (a caret or a focus frame drawn a pixel apart);
#: a stale plot differs in whole axes, curves and labels: several percent of its pixels.
PIXEL_SHARE_TOLERANCE = 0.002
#: The views compared, by objectName, where visible.
VIEWS = (
    "memoryPlot",
    "timingPlot",
    "trafficPlot",
    "bandwidthPlot",
    "rooflinePlot",
    "trafficStripPlot",
    "tileAnimation",
    "decodeCanvas",
    "explainPane",
    "ringView",
    "ringTimeline",
)


def tools_present() -> bool:
    """Whether this machine can start a display of its own (Xvfb) for the real-display tests."""
    return shutil.which("Xvfb") is not None


@contextlib.contextmanager
def x_display(width: int, height: int) -> Iterator[dict[str, str]]:
    """An Xvfb server of `width`×`height` (24-bit) with openbox managing its windows where
    openbox is installed: yields the environment (DISPLAY set, no XAUTHORITY needed) for a
    child process; both servers end with the block."""
    read, write = os.pipe()
    server = subprocess.Popen(
        [
            "Xvfb",
            "-displayfd",
            str(write),
            "-screen",
            "0",
            f"{width}x{height}x24",
            "-nolisten",
            "tcp",
            "-noreset",
        ],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    manager = None
    try:
        with os.fdopen(read) as f:
            number = f.readline().strip()
        if not number:
            raise RuntimeError("Xvfb did not start")
        env = {k: v for k, v in os.environ.items() if k != "XAUTHORITY"}
        env["DISPLAY"] = f":{number}"
        if shutil.which("openbox"):
            manager = subprocess.Popen(
                ["openbox", "--sm-disable"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(0.5)  # managing before the first window maps
        yield env
    finally:
        for proc in (manager, server):
            if proc is not None:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


def busy_parts(window) -> dict[str, bool]:  # type: ignore[no-untyped-def]
    """What of the main window's work is under way now, by name (see `window_busy`)."""
    return {
        "backend starting": window.backend is None,
        "animation not built": window.animation is None,
        "runner": window.runner.busy,
        "results not drawn": not window.results_drawn,
        "export": window.file_menu.exporting,
        "file read": window.file_menu.reader.busy,
        "model curves": window.plots.model_worker.busy,
        "explain pane": window.explain.busy,
        "lesson strip": window.lesson.busy,
        "decode lanes": window.animation is not None and window.animation.decode_busy,
    }


def window_busy(window) -> bool:  # type: ignore[no-untyped-def]
    """Whether the main window still has work under way that will change what it shows: a
    backend starting, a run, results not drawn yet, a file being read, an export, a pane's
    text or the model curves being worked out, the animation not built yet."""
    return any(busy_parts(window).values())


def _pixels(image):  # type: ignore[no-untyped-def]
    """An image's RGB pixels as an int array (rows, columns, 3)."""
    import numpy as np
    from PySide6.QtGui import QImage

    image = image.convertToFormat(QImage.Format.Format_RGB32)
    w, h, stride = image.width(), image.height(), image.bytesPerLine()
    raw = np.frombuffer(image.constBits(), np.uint8, count=stride * h).reshape(h, stride)
    return raw[:, : w * 4].reshape(h, w, 4)[:, :, :3].astype(np.int16)


def _unclipped(view):  # type: ignore[no-untyped-def]
    """The part of `view`'s rect (its own coordinates) that its parents do not clip."""
    from PySide6.QtCore import QPoint, QRect

    rect = view.rect()
    child, parent = view, view.parentWidget()
    offset = QPoint(0, 0)
    while parent is not None and not child.isWindow():
        offset += child.pos()
        rect = rect.intersected(QRect(parent.rect().topLeft() - offset, parent.size()))
        child, parent = parent, parent.parentWidget()
    return rect


def screen_mismatches(  # type: ignore[no-untyped-def]
    window, save_to: Path | None = None, tag: str = "", boxes: dict | None = None
) -> dict[str, float]:
    """Per visible view of `window` (VIEWS): the share of its pixels that differ between the X
    server's image of the window and a fresh render of the view. The server's image is read
    first, before any grab. With `save_to`, the two pictures of a view over the tolerance are
    saved there (`<tag>-<view>-screen.png`, `-render.png`); `boxes` gets the bounding box of
    each such view's differing pixels ([x, y, width, height] in the view's coordinates)."""
    import numpy as np
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QWidget

    screen = window.screen().grabWindow(window.winId()).toImage()
    views = [
        w
        for name in VIEWS
        for w in window.findChildren(QWidget, name)
        if w.isVisible() and w.width() > 2 and w.height() > 2
    ]
    out: dict[str, float] = {}
    for view in views:
        # Only the part of the view not clipped by its parents (a view inside a scroll area
        # may reach past it) is on the screen.
        seen = _unclipped(view)
        if seen.width() <= 2 or seen.height() <= 2:
            continue
        shown = screen.copy(QRect(view.mapTo(window, seen.topLeft()), seen.size()))
        fresh = view.grab().toImage().copy(seen)
        a, b = _pixels(shown), _pixels(fresh)
        if a.shape != b.shape:
            out[view.objectName()] = 1.0
            continue
        # The outermost pixel ring is the frame the parent draws around some views.
        differ = (np.abs(a - b).max(axis=2) > CHANNEL_TOLERANCE)[1:-1, 1:-1]
        share = float(differ.mean()) if differ.size else 0.0
        out[view.objectName()] = share
        if boxes is not None and share > PIXEL_SHARE_TOLERANCE and differ.any():
            ys, xs = np.nonzero(differ)
            x0, y0 = int(xs.min()), int(ys.min())
            width, height = int(xs.max()) - x0 + 1, int(ys.max()) - y0 + 1
            boxes[view.objectName()] = [seen.x() + 1 + x0, seen.y() + 1 + y0, width, height]
        if save_to is not None and share > PIXEL_SHARE_TOLERANCE:
            shown.save(str(save_to / f"{tag}-{view.objectName()}-screen.png"))
            fresh.save(str(save_to / f"{tag}-{view.objectName()}-render.png"))
    return out
