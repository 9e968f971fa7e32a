"""Images of the plots and the window: PNG at any size, SVG, and a palette PNG for docs.

Plots are exported from a replica of the live panel (PlotsPanel.replicate) laid out offscreen at
the size asked for, so fonts and markers keep their size instead of being stretched and the live
panel's caches are left alone. A PNG of the plots is made by `PlotImageExport` a piece at a
time between the window's frames (the replica built plot by plot, laid out without painting,
rendered plot by plot), and encoded and written on a worker thread: at 4000×2500 that is half a
second of work, none of it a stall of the GUI thread.

SVG is drawn by Qt's own QSvgGenerator: pyqtgraph 0.14's SVG exporter fails on Qt 6.12 ("not
enough values to unpack" on a 'Z' path command), and ours also keeps markers as vector symbols
(pyqtgraph blits them from a pixmap atlas on screen). Its strokes are then rewritten in output
coordinates (app/plotting/svg_coordinates.py), so librsvg and cairo draw it as browsers and Qt do.
`PlotSvgExport` makes it the PNG's way: the replica a piece per frame, painted into the SVG a
plot per timer tick, the rewrite and the write on a worker thread.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Generator, Iterator
from typing import Any

import numpy as np
from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QIODevice,
    QObject,
    QPoint,
    QRect,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QColor, QImage, QPainter, QRegion
from PySide6.QtWidgets import QApplication, QGraphicsItem, QGraphicsView, QWidget

from ..measure.plot_spec import PLOTS
from ..measure.plots import PlotsPanel
from ..measure.strip_chart import STRIP_NAME
from ..plotting.svg_coordinates import output_space
from ..work.background import LatestOnly
from .export_files import ExportError, write_file

MIN_SIZE = 64


MAX_SIZE = 8192


#: Rows of pixels a PNG export of the plots renders per step (a few ms each at 4000 px wide).
RENDER_BAND_PX = 150


#: Where R, G and B sit in the bytes of a 32-bit QImage pixel (0xffRRGGBB in native order).
_RGB32_CHANNELS = slice(2, None, -1) if sys.byteorder == "little" else slice(1, 4)


def frame_array(image: QImage) -> np.ndarray:
    """`image` as an (h, w, 3) RGB array. A 32-bit image (what the exports paint) is rearranged
    by NumPy, which lets other threads run meanwhile (Qt's conversion would hold the
    interpreter for 12 ms at 3840×2160, stalling the GUI thread from an encoding thread)."""
    w, h, stride = image.width(), image.height(), image.bytesPerLine()
    if image.format() in (QImage.Format.Format_RGB32, QImage.Format.Format_ARGB32):
        raw = np.frombuffer(image.constBits(), dtype=np.uint8, count=stride * h)
        return raw.reshape(h, stride // 4, 4)[:, :w, _RGB32_CHANNELS].copy()
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    stride = image.bytesPerLine()
    raw = np.frombuffer(image.constBits(), dtype=np.uint8, count=stride * h)
    return raw.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()


def png_bytes(image: QImage) -> bytes:
    return encoded_image(image, "PNG")


def encoded_image(image: QImage, fmt: str) -> bytes:
    """`image` encoded by Qt's writer for `fmt` ("PNG", "JPEG")."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, fmt):
        raise ExportError(f"could not encode the {fmt}")
    return bytes(data.data())


def palette_png_bytes(image: QImage, colors: int = 256) -> bytes:
    """A PNG reduced to `colors` colours, about a third of the full-colour bytes; needs Pillow
    (installed with imageio). Octree keeps the few saturated series colours (median cut spends
    the palette on the greys of antialiased text and merges them); no dithering: flat UI
    colours stay flat."""
    try:
        from PIL import Image
    except ImportError as exc:
        raise ExportError("a palette PNG needs Pillow (pip install pillow)") from exc
    if not 2 <= colors <= 256:
        raise ExportError(f"colors must be 2..256, not {colors}")
    pil = Image.fromarray(frame_array(image))
    quantized = pil.quantize(colors, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    out = io.BytesIO()
    quantized.save(out, "PNG", optimize=True)
    return out.getvalue()


def check_size(size: tuple[int, int]) -> tuple[int, int]:
    w, h = (int(v) for v in size)
    if not (MIN_SIZE <= w <= MAX_SIZE and MIN_SIZE <= h <= MAX_SIZE):
        raise ExportError(f"size {w}×{h} is outside {MIN_SIZE}..{MAX_SIZE} pixels per side")
    return w, h


def lay_out(widget: QWidget, size: tuple[int, int]) -> None:
    """Lay `widget` out offscreen at `size`, without painting it (render() paints it later)."""
    for _ in _lay_out_steps(widget, size):
        QApplication.sendPostedEvents()


def _lay_out_steps(widget: QWidget, size: tuple[int, int]) -> Iterator[None]:
    """`lay_out` in two steps: the caller lets posted events (resizes, layout requests) be
    delivered between them, by the event loop or by sendPostedEvents."""
    widget.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
    widget.setUpdatesEnabled(False)  # shown only to be laid out: no paint events
    widget.resize(*size)
    widget.show()
    yield
    widget.resize(*size)
    widget.hide()  # a hidden widget still renders; re-enabling updates must not paint it
    widget.setUpdatesEnabled(True)
    yield


def render_image(widget: QWidget, size: tuple[int, int] | None = None) -> QImage:
    """`widget` painted into an image of exactly `size` (default: its own size), whatever the
    screen's device pixel ratio."""
    w, h = size or (widget.width(), widget.height())
    image = QImage(w, h, QImage.Format.Format_RGB32)
    image.fill(widget.palette().window().color())
    painter = QPainter(image)
    try:
        widget.render(painter, QPoint(0, 0))
    finally:
        painter.end()
    return image


def window_png(window: QWidget) -> bytes:
    """A screenshot of the whole window at its size (menus, docks, plots, status bar)."""
    return png_bytes(render_image(window))


#: The views an export of one of them may name: the plots and the strip chart.
VIEW_NAMES = (*PLOTS, STRIP_NAME)


def _check_only(only: str | None) -> None:
    if only is not None and only not in VIEW_NAMES:
        raise ExportError(f"no plot named {only!r} (one of {', '.join(VIEW_NAMES)})")


def plots_image(panel: PlotsPanel, size: tuple[int, int], only: str | None = None) -> QImage:
    """The four plots (or the one named `only`) at exactly `size` pixels."""
    job = PlotImageExport(panel, size, only)
    for _ in job.image_steps():
        QApplication.sendPostedEvents()
    assert job.image is not None
    return job.image


def plots_png(panel: PlotsPanel, size: tuple[int, int], only: str | None = None) -> bytes:
    return png_bytes(plots_image(panel, size, only))


class _SteppedPlotExport(QObject):
    """An export of the plots made without stalling the GUI thread: `steps()` is the GUI
    thread's share, one piece per timer tick; then `file_bytes()` (encoding, rewriting) and
    the write run on a worker thread.

    `start()` checks the request and returns; then `finished(path)` or `failed(message)`.
    """

    finished = Signal(str)
    failed = Signal(str)

    def __init__(
        self,
        panel: PlotsPanel,
        size: tuple[int, int],
        only: str | None = None,
        path: str = "",
        overwrite: bool = False,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.size = check_size(size)
        _check_only(only)
        self.panel, self.only, self.path, self.overwrite = panel, only, path, overwrite
        self._steps: Iterator[None] | None = None
        self._timer = QTimer(self)
        # One step per tick, the next started once this one is done: a timer that fell due
        # meanwhile (input, a frame) runs before it.
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._tick)
        self._writer = LatestOnly(self)

    def start(self) -> None:
        self.panel.flush_model()  # the curves of the config being shown, not a pending one
        self._steps = self.steps()
        self._timer.start()

    def steps(self) -> Iterator[None]:
        raise NotImplementedError

    def file_bytes(self) -> Callable[[], bytes]:
        """What the worker thread turns into the file's bytes, made from this export's result
        on the GUI thread (the worker touches no Qt object the GUI thread owns)."""
        raise NotImplementedError

    def _tick(self) -> None:
        assert self._steps is not None
        try:
            next(self._steps)
            self._timer.start()
            return
        except StopIteration:
            pass
        except Exception as exc:
            self.failed.emit(str(exc))
            return
        make, path, overwrite = self.file_bytes(), self.path, self.overwrite

        def write() -> str:
            write_file(path, make(), overwrite=overwrite)
            return path

        self._writer.submit(write, self.finished.emit, self._failed)

    def _failed(self, exc: BaseException) -> None:
        self.failed.emit(str(exc))


class PlotImageExport(_SteppedPlotExport):
    """A PNG of the plots, made without stalling the GUI thread (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.image: QImage | None = None

    def steps(self) -> Iterator[None]:
        return self.image_steps()

    def file_bytes(self) -> Callable[[], bytes]:
        image = self.image
        assert image is not None
        return lambda: png_bytes(image)

    def image_steps(self) -> Iterator[None]:
        """The GUI thread's share, one piece per step (each a few tens of ms at most)."""
        replication = self.panel.replicate_steps()
        yield from replication
        replica = replication.panel
        try:
            replica.show_only(self.only)
            yield from _lay_out_steps(replica, self.size)
            replica.flush_roof_labels()
            yield
            for view in replica.graphics_views():  # a cache holds a whole item: render bands
                for item in view.scene().items():
                    item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
            yield
            image = yield from _filled_image(self.size, replica.palette().window().color())
            for view in replica.views():
                if not view.isVisibleTo(replica):
                    continue
                rect = view.geometry()
                for top in range(rect.top(), rect.bottom() + 1, RENDER_BAND_PX):
                    band = rect.intersected(QRect(rect.left(), top, rect.width(), RENDER_BAND_PX))
                    painter = QPainter(image)
                    try:
                        replica.render(painter, band.topLeft(), QRegion(band))
                    finally:
                        painter.end()
                    yield
            self.image = image
        finally:
            replica.deleteLater()


def _filled_image(size: tuple[int, int], color: QColor) -> Generator[None, None, QImage]:
    """A 32-bit image of `size` filled with `color`, RENDER_BAND_PX·8 rows per step (filling
    4000×2500 pixels at once is 40 MB of memory touched in one step)."""
    image = QImage(*size, QImage.Format.Format_RGB32)
    rows = 8 * RENDER_BAND_PX
    for top in range(0, size[1], rows):
        painter = QPainter(image)
        try:
            painter.fillRect(QRect(0, top, size[0], rows), color)
        finally:
            painter.end()
        yield
    return image


def plots_svg(
    panel: PlotsPanel, size: tuple[int, int], only: str | None = None, description: str = ""
) -> bytes:
    """The plots as SVG through QSvgGenerator: curves are <path>/<polyline> elements with every
    point, markers vector symbols, text real text (`PlotSvgExport`, all its steps at once)."""
    job = PlotSvgExport(panel, size, only, description=description)
    for _ in job.svg_steps():
        QApplication.sendPostedEvents()
    assert job.svg is not None
    return output_space(job.svg)


class PlotSvgExport(_SteppedPlotExport):
    """An SVG of the plots, made without stalling the GUI thread: the replica is built a piece
    at a time between frames, laid out without painting, painted into the SVG a plot per timer
    tick, and its coordinates rewritten and the file written on a worker thread."""

    def __init__(
        self,
        panel: PlotsPanel,
        size: tuple[int, int],
        only: str | None = None,
        path: str = "",
        overwrite: bool = False,
        description: str = "",
        parent: QObject | None = None,
    ) -> None:
        super().__init__(panel, size, only, path, overwrite, parent)
        self.description = description
        self.svg: bytes | None = None  # as QSvgGenerator wrote it (before output_space)

    def steps(self) -> Iterator[None]:
        return self.svg_steps()

    def file_bytes(self) -> Callable[[], bytes]:
        svg = self.svg
        assert svg is not None
        return lambda: output_space(svg)

    def svg_steps(self) -> Iterator[None]:
        """The GUI thread's share, one piece per step. The SVG gets the fitted views: it has
        no clipping, and a zoomed curve would reach past its plot."""
        from PySide6.QtSvg import QSvgGenerator

        self.panel.flush_model()
        replication = self.panel.replicate_steps(keep_zoom=False)
        yield from replication
        replica = replication.panel
        painter = QPainter()
        try:
            replica.show_only(self.only)
            yield from _lay_out_steps(replica, self.size)
            replica.flush_roof_labels()
            data = QByteArray()
            buffer = QBuffer(data)
            buffer.open(QIODevice.OpenModeFlag.WriteOnly)
            generator = QSvgGenerator()
            generator.setOutputDevice(buffer)
            generator.setSize(QSize(*self.size))
            generator.setViewBox(QRect(0, 0, *self.size))
            generator.setTitle("Tilescope plots")
            generator.setDescription(self.description or "Tilescope: the attention memory wall")
            if not painter.begin(generator):
                raise ExportError("could not start the SVG painter")
            for view in replica.graphics_views():
                _vector_mode(view, painter)
                yield
            painter.fillRect(QRect(0, 0, *self.size), replica.palette().window())
            for view in replica.views():
                if not view.isVisibleTo(replica):
                    continue
                rect = view.geometry()
                replica.render(painter, rect.topLeft(), QRegion(rect))
                yield
            painter.end()
            self.svg = bytes(data.data())
        finally:
            if painter.isActive():
                painter.end()
            replica.deleteLater()


def _vector_mode(view: QGraphicsView, painter: QPainter) -> None:
    """No pixmap caches anywhere, and pyqtgraph items in export mode (scatter symbols drawn as
    paths rather than blitted from the atlas), so the SVG holds vectors, not pictures."""
    view.setCacheMode(QGraphicsView.CacheModeFlag.CacheNone)
    opts = {"antialias": True, "background": None, "painter": painter, "resolutionScale": 1.0}
    for item in view.scene().items():
        item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
        set_export = getattr(item, "setExportMode", None)
        if set_export is not None:
            with contextlib.suppress(Exception):
                set_export(True, opts)
