"""Exports: the plots as PNG (at any size) or SVG, their results as a tidy CSV (one row per result
and kernel) and every plotted series as a wide CSV, the window as PNG, and the tile animation as
GIF or MP4.

Plots are exported from a replica of the live panel (PlotsPanel.replicate) laid out offscreen at
the size asked for, so fonts and markers keep their size instead of being stretched and the live
panel's caches are left alone. A PNG of the plots is made by `PlotImageExport` a piece at a
time between the window's frames (the replica built plot by plot, laid out without painting,
rendered plot by plot), and encoded and written on a worker thread: at 4000×2500 that is half a
second of work, none of it a stall of the GUI thread.

SVG is drawn by Qt's own QSvgGenerator: pyqtgraph 0.14's SVG exporter fails on Qt 6.12 ("not
enough values to unpack" on a 'Z' path command), and ours also keeps markers as vector symbols
(pyqtgraph blits them from a pixmap atlas on screen). Its strokes are then rewritten in output
coordinates (app/svg_coordinates.py), so librsvg and cairo draw it as browsers and Qt do.

Every file is written atomically (gpu.fileio.atomic_write_bytes, or a temporary file beside
the target that is renamed at the end for the animation writers), so an unwritable folder, a
full disk or a cancelled export never leaves a partial file. Overwriting is the caller's
decision: these functions refuse an existing file unless `overwrite` is True.

The animation is rendered frame by frame from a second, offscreen TileAnimationWidget whose
clock is stepped (not played), in chunks on a QTimer, so the window stays responsive and the
user's own animation is not disturbed.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import queue
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
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
from PySide6.QtGui import QImage, QPainter, QRegion
from PySide6.QtWidgets import QApplication, QGraphicsItem, QGraphicsView, QWidget

from gpu.algorithms import ALGORITHMS
from gpu.config import AttentionConfig
from gpu.costmodel import GpuSpec
from gpu.errors import FileWriteError
from gpu.fileio import atomic_write_bytes
from gpu.results import RunResult

from .background import LatestOnly
from .plot_kit import MetricPlot
from .plots import PlotsPanel
from .state.model_cache import band as model_band
from .state.recorded_run import reference_label
from .svg_coordinates import output_space

PLOT_NAMES = ("memoryPlot", "timingPlot", "trafficPlot", "rooflinePlot", "trafficStrip")
_N_AXIS = ("sequence length N", "tokens")
#: (quantity, unit) of x and y on each plot, for the CSV header.
AXES: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "memoryPlot": (_N_AXIS, ("peak memory", "B")),
    "timingPlot": (_N_AXIS, ("time per forward pass", "ms")),
    "trafficPlot": (_N_AXIS, ("DRAM traffic", "B")),
    "rooflinePlot": (("arithmetic intensity", "FLOP/B"), ("achieved", "FLOP/s")),
}
MIN_SIZE, MAX_SIZE = 64, 8192
ANIMATION_FORMATS = (".gif", ".mp4")
#: Seconds of rendering per timer tick: the GUI gets the rest.
CHUNK_S = 0.04
#: Rows of pixels a PNG export of the plots renders per step (~10 ms each at 2000 px wide).
RENDER_BAND_PX = 300


class ExportError(Exception):
    """An export that cannot be made; the message says why (shown in the banner)."""


# ----------------------------------------------------------------------------------- files


def write_file(path: str | os.PathLike[str], data: bytes, *, overwrite: bool = False) -> None:
    """Atomic write. FileExistsError when `path` exists and not `overwrite`; ExportError when
    the folder cannot be written (nothing is left behind either way)."""
    try:
        atomic_write_bytes(path, data, overwrite=overwrite)
    except FileWriteError as exc:
        raise ExportError(str(exc)) from exc
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _temp_beside(path: Path, suffix: str) -> str:
    """A temporary file in `path`'s folder (so the final rename is atomic)."""
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".part{suffix}", dir=folder)
    except OSError as exc:
        raise ExportError(f"cannot write in {folder}: {exc.strerror or exc}") from exc
    os.close(fd)
    return tmp


def check_writable(path: str | os.PathLike[str]) -> None:
    """ExportError now if `path`'s folder cannot take a file (before any work is spent on it)."""
    target = Path(path)
    if target.is_dir():
        raise ExportError(f"{target} is a folder")
    os.unlink(_temp_beside(target, target.suffix))


def _check_target(path: Path, overwrite: bool) -> None:
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists (use --force to replace it)")
    if path.is_dir():
        raise ExportError(f"{path} is a folder")


# ----------------------------------------------------------------------------------- images


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
    pil = Image.fromarray(_frame_array(image))
    quantized = pil.quantize(colors, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    out = io.BytesIO()
    quantized.save(out, "PNG", optimize=True)
    return out.getvalue()


def _check_size(size: tuple[int, int]) -> tuple[int, int]:
    w, h = (int(v) for v in size)
    if not (MIN_SIZE <= w <= MAX_SIZE and MIN_SIZE <= h <= MAX_SIZE):
        raise ExportError(f"size {w}×{h} is outside {MIN_SIZE}..{MAX_SIZE} pixels per side")
    return w, h


def _lay_out(widget: QWidget, size: tuple[int, int]) -> None:
    """Lay `widget` out offscreen at `size`, without painting it (render() paints it later)."""
    for _ in _lay_out_steps(widget, size):
        QApplication.sendPostedEvents()


def _lay_out_steps(widget: QWidget, size: tuple[int, int]) -> Iterator[None]:
    """`_lay_out` in two steps: the caller lets posted events (resizes, layout requests) be
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


def _check_only(only: str | None) -> None:
    if only is not None and only not in PLOT_NAMES:
        raise ExportError(f"no plot named {only!r} (one of {', '.join(PLOT_NAMES)})")


def _replica(panel: PlotsPanel, size: tuple[int, int], only: str | None) -> PlotsPanel:
    """The SVG's panel: fitted views (an SVG has no clipping: a zoomed curve would reach past
    its plot)."""
    _check_only(only)
    panel.flush_model()
    replica = panel.replicate(keep_zoom=False)
    replica.show_only(only)
    _lay_out(replica, size)
    return replica


def plots_image(panel: PlotsPanel, size: tuple[int, int], only: str | None = None) -> QImage:
    """The four plots (or the one named `only`) at exactly `size` pixels."""
    job = PlotImageExport(panel, size, only)
    for _ in job.image_steps():
        QApplication.sendPostedEvents()
    assert job.image is not None
    return job.image


def plots_png(panel: PlotsPanel, size: tuple[int, int], only: str | None = None) -> bytes:
    return png_bytes(plots_image(panel, size, only))


class PlotImageExport(QObject):
    """A PNG of the plots, made without stalling the GUI thread (see the module docstring).

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
        self.size = _check_size(size)
        _check_only(only)
        self.panel, self.only, self.path, self.overwrite = panel, only, path, overwrite
        self.image: QImage | None = None
        self._steps: Iterator[None] | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._tick)
        self._writer = LatestOnly(self)

    def start(self) -> None:
        self.panel.flush_model()  # the curves of the config being shown, not a pending one
        self._steps = self.image_steps()
        self._timer.start()

    def image_steps(self) -> Iterator[None]:
        """The GUI thread's share, one piece per step (each a few tens of ms at most)."""
        replication = self.panel.replicate_steps()
        yield from replication
        replica = replication.panel
        try:
            replica.show_only(self.only)
            yield from _lay_out_steps(replica, self.size)
            for view in replica.graphics_views():  # a cache holds a whole item: render bands
                for item in view.scene().items():
                    item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
            image = QImage(*self.size, QImage.Format.Format_RGB32)
            image.fill(replica.palette().window().color())
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

    def _tick(self) -> None:
        assert self._steps is not None
        try:
            next(self._steps)
            return
        except StopIteration:
            pass
        except Exception as exc:
            self._timer.stop()
            self.failed.emit(str(exc))
            return
        self._timer.stop()
        image, path, overwrite = self.image, self.path, self.overwrite

        def encode_and_write() -> str:
            assert image is not None
            write_file(path, png_bytes(image), overwrite=overwrite)
            return path

        self._writer.submit(encode_and_write, self.finished.emit, self._failed)

    def _failed(self, exc: BaseException) -> None:
        self.failed.emit(str(exc))


def plots_svg(
    panel: PlotsPanel, size: tuple[int, int], only: str | None = None, description: str = ""
) -> bytes:
    """The plots as SVG through QSvgGenerator: curves are <path>/<polyline> elements with every
    point, markers vector symbols, text real text."""
    from PySide6.QtSvg import QSvgGenerator

    size = _check_size(size)
    replica = _replica(panel, size, only)
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(QSize(*size))
    generator.setViewBox(QRect(0, 0, *size))
    generator.setTitle("Tilescope plots")
    generator.setDescription(description or "Tilescope: the attention memory wall")
    painter = QPainter()
    try:
        if not painter.begin(generator):
            raise ExportError("could not start the SVG painter")
        _vector_mode(replica, painter)
        painter.fillRect(QRect(0, 0, *size), replica.palette().window())
        replica.render(painter, QPoint(0, 0))
    finally:
        if painter.isActive():
            painter.end()
        replica.deleteLater()
    return output_space(bytes(data.data()))


def _vector_mode(panel: PlotsPanel, painter: QPainter) -> None:
    """No pixmap caches anywhere, and pyqtgraph items in export mode (scatter symbols drawn as
    paths rather than blitted from the atlas), so the SVG holds vectors, not pictures."""
    for view in panel.graphics_views():
        view.setCacheMode(QGraphicsView.CacheModeFlag.CacheNone)
        opts = {"antialias": True, "background": None, "painter": painter, "resolutionScale": 1.0}
        for item in view.scene().items():
            item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
            set_export = getattr(item, "setExportMode", None)
            if set_export is not None:
                with contextlib.suppress(Exception):
                    set_export(True, opts)


# ----------------------------------------------------------------------------------- CSV

_HEADER = re.compile(
    r"^(?P<plot>\w+)/(?P<name>\S+) (?P<axis>[xy]): (?P<q>[^\[]*) \[(?P<unit>[^\]]*)\]"
)


def _plots(panel: PlotsPanel, only: str | None) -> list[MetricPlot]:
    return [p for p in panel.plots if only is None or p.objectName() == only]


def plotted_series(
    panel: PlotsPanel, only: str | None = None
) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """Every series drawn now (visible, with points): (plot, item name) -> (x, y), linear."""
    out = {}
    for plot in _plots(panel, only):
        for name, item in plot.items.items():
            xs, ys = plot.series.get(name, ([], []))
            if xs and item.isVisible():
                out[(plot.objectName(), name)] = (list(xs), list(ys))
    return out


#: Columns of the results CSV, in order; the unit is in the name (ms, bytes, FLOP, TFLOP/s).
RESULT_COLUMNS: tuple[str, ...] = (
    "algorithm",
    "label",
    "reference",
    "kernel",
    "seq_len",
    "batch",
    "heads",
    "head_dim",
    "dtype",
    "causal",
    "block_m",
    "block_n",
    "backend",
    "device",
    "recorded",
    "oom",
    "kernel_ms",
    "kernel_min_ms",
    "kernel_max_ms",
    "kernel_samples",
    "kernel_dram_read_measured_bytes",
    "kernel_dram_write_measured_bytes",
    "kernel_l2_measured_bytes",
    "kernel_dram_model_compulsory_bytes",
    "kernel_dram_model_l2_aware_bytes",
    "kernel_dram_model_no_reuse_bytes",
    "total_ms",
    "useful_flops",
    "achieved_tflop_s",
    "peak_pool_bytes",
    "peak_device_bytes",
    "model_peak_bytes",
    "max_abs_error",
    "model_gpu",
    "message",
)


def result_rows(
    results: dict[str, list[RunResult]], gpu: GpuSpec | None
) -> list[dict[str, object]]:
    """One row per result and kernel (a result without kernel times, such as an out-of-memory
    one, gets one row with an empty kernel): the tidy form of what the plots show. Model
    columns are the cost model's DRAM bytes on `gpu` (empty for a reference peer)."""
    rows = []
    for algorithm, series in results.items():
        ours = algorithm in ALGORITHMS
        for r in series:
            c = r.config
            band = model_band(c, algorithm, gpu) if ours and gpu is not None else None
            base = {
                "algorithm": algorithm,
                "label": ALGORITHMS[algorithm].label if ours else reference_label(algorithm),
                "reference": not ours,
                "seq_len": c.seq_len,
                "batch": c.batch,
                "heads": c.heads,
                "head_dim": c.head_dim,
                "dtype": c.dtype,
                "causal": c.causal,
                "block_m": c.block_m,
                "block_n": c.block_n,
                "backend": r.backend,
                "device": r.device,
                "recorded": r.recorded,
                "oom": r.oom,
                "total_ms": r.total_ms,
                "useful_flops": r.flops,
                "achieved_tflop_s": r.tflops,
                "peak_pool_bytes": r.peak_bytes,
                "peak_device_bytes": r.device_peak_bytes,
                "model_peak_bytes": r.model_peak_bytes,
                "max_abs_error": r.max_abs_error,
                "model_gpu": gpu.name if band is not None and gpu is not None else "",
                "message": r.message,
            }
            kernels = r.kernel_times or ((None),)
            for k in kernels:
                row = dict(base, kernel=k.name if k is not None else "")
                if k is not None:
                    row.update(
                        kernel_ms=k.ms,
                        kernel_min_ms=k.min_ms,
                        kernel_max_ms=k.max_ms,
                        kernel_samples=k.count,
                    )
                    t = r.kernel_traffic(k.name)
                    if t is not None:
                        row.update(
                            kernel_dram_read_measured_bytes=t.dram_read_bytes,
                            kernel_dram_write_measured_bytes=t.dram_write_bytes,
                            kernel_l2_measured_bytes=t.l2_bytes,
                        )
                    if band is not None:
                        for key, cost in (
                            ("compulsory", band.compulsory),
                            ("l2_aware", band.l2_aware),
                            ("no_reuse", band.no_reuse),
                        ):
                            kc = next((x for x in cost.kernels if x.name == k.name), None)
                            if kc is not None:
                                row[f"kernel_dram_model_{key}_bytes"] = kc.hbm_bytes
                rows.append(row)
    return rows


def results_csv(panel: PlotsPanel, only: str | None = None) -> str:
    """The results the plots show as a tidy CSV: one row per result and kernel, named columns
    with their unit in the name (RESULT_COLUMNS), config and device on every row. `only` is
    accepted for symmetry with the other plot exports (every plot shows the same results)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=RESULT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in result_rows(panel.results_shown(), panel.target_gpu()):
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buf.getvalue()


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return value


def plots_csv(panel: PlotsPanel, only: str | None = None) -> str:
    """Every plotted series as two columns (x, y), side by side (a wide table of the plots'
    series, not of results: `results_csv` is the tidy one); the header names the plot, the
    series, the quantity and its unit in brackets, then the legend label:
    `timingPlot/measured_naive y: time per forward pass [ms] | naive`. Shorter series leave
    their cells empty below their last point. Numbers are written exactly (repr)."""
    series = plotted_series(panel, only)
    labels = {p.objectName(): p.labels for p in panel.plots}
    header, columns = [], []
    for (plot, name), (xs, ys) in series.items():
        label = labels.get(plot, {}).get(name, "")
        for axis, values, (quantity, unit) in zip("xy", (xs, ys), AXES[plot], strict=True):
            text = f"{plot}/{name} {axis}: {quantity} [{unit}]"
            header.append(f"{text} | {label}" if label else text)
            columns.append(values)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    rows = max((len(c) for c in columns), default=0)
    for i in range(rows):
        writer.writerow([repr(float(c[i])) if i < len(c) else "" for c in columns])
    return buf.getvalue()


def read_plots_csv(text: str) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """The series of a CSV written by plots_csv, as plotted_series returns them."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return {}
    keys = []
    for cell in rows[0]:
        m = _HEADER.match(cell)
        if m is None:
            raise ValueError(f"not a Tilescope plot column: {cell!r}")
        keys.append((m["plot"], m["name"], m["axis"]))
    out: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for col, (plot, name, axis) in enumerate(keys):
        values = [float(r[col]) for r in rows[1:] if col < len(r) and r[col] != ""]
        xs, ys = out.setdefault((plot, name), ([], []))
        (xs if axis == "x" else ys).extend(values)
    return out


# ----------------------------------------------------------------------------------- animation


def _frame_array(image: QImage) -> np.ndarray:
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = image.width(), image.height(), image.bytesPerLine()
    raw = np.frombuffer(image.constBits(), dtype=np.uint8, count=stride * h)
    return raw.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()


def even_size(size: tuple[int, int], block: int = 16) -> tuple[int, int]:
    """Round down to a multiple of `block` (video encoders work in 16-pixel macro blocks)."""
    return tuple(max(block, int(v) // block * block) for v in size)  # type: ignore[return-value]


class AnimationExporter(QObject):
    """Renders the tile animation of `config` to a GIF or MP4 (by `path`'s extension).

    `start()` checks the target and opens the writer (raising FileExistsError or ExportError at
    once). Then, on a timer, the GUI thread renders frames in short chunks (a frame is a widget
    paint, which must happen there) and a worker thread encodes them (GIF palettes, the ffmpeg
    pipe, the final compression), so the window keeps repainting throughout.
    `progress(done, total)` follows each chunk, then exactly one of `finished(path)`,
    `failed(message)` or `cancelled()`. The frames are `frames` equally spaced instants of one
    pass of the modeled clock, first to last.
    """

    progress = Signal(int, int)
    finished = Signal(str)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(
        self,
        config: AttentionConfig,
        path: str | os.PathLike[str],
        *,
        frames: int = 60,
        fps: float = 12.0,
        size: tuple[int, int] = (960, 544),
        overwrite: bool = False,
        gpu: GpuSpec | None = None,
        duration_s: float | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.config = config
        self.path = Path(path)
        self.kind = self.path.suffix.lower()
        if self.kind not in ANIMATION_FORMATS:
            raise ExportError(f"{self.path.name}: the animation exports to .gif or .mp4")
        if not 2 <= int(frames) <= 2000:
            raise ExportError("frames must be between 2 and 2000")
        if not 1 <= fps <= 60:
            raise ExportError("fps must be between 1 and 60")
        self.frames = int(frames)
        self.fps = float(fps)
        self.size = even_size(_check_size(size)) if self.kind == ".mp4" else _check_size(size)
        self.overwrite = overwrite
        self.gpu = gpu
        self.duration_s = duration_s
        self.done = 0  # frames rendered
        self.state = "idle"  # -> running -> finished | failed | cancelled
        self._tmp = ""
        self._writer: Any = None
        self._widget: QWidget | None = None
        self._queue: queue.Queue[np.ndarray | None] = queue.Queue(maxsize=6)
        self._worker: threading.Thread | None = None
        self._worker_error: BaseException | None = None
        self._abort = threading.Event()
        self._ending = ""  # "", "finish" or "cancel": waiting for the worker to wind up
        self._timer = QTimer(self)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._tick)

    # ---- public

    def start(self) -> None:
        _check_target(self.path, self.overwrite)
        self._tmp = _temp_beside(self.path, self.kind)
        try:
            self._writer = self._open_writer(self._tmp)
            self._widget = self._make_widget()
        except BaseException:
            self._close_writer(discard=True)
            self._cleanup()
            raise
        self.state = "running"
        self._worker = threading.Thread(target=self._encode, name="tilescope-export", daemon=True)
        self._worker.start()
        self._timer.start()

    def cancel(self) -> None:
        """Stop; the partial file is deleted and `cancelled` follows once the encoder stops."""
        if self.state != "running" or self._ending == "cancel":
            return
        self._ending = "cancel"
        self._abort.set()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)  # wake the worker if it waits for a frame

    # ---- the worker thread: encode frames as they come, then close the writer

    def _encode(self) -> None:
        try:
            while not self._abort.is_set():
                frame = self._queue.get()
                if frame is None or self._abort.is_set():
                    break
                if self.kind == ".gif":
                    # Quantized as it comes (1 byte a pixel), each frame its own palette.
                    self._writer.write(
                        frame, is_batch=False, duration=round(1000 / self.fps), loop=0, bits=8
                    )
                else:
                    self._writer.append_data(frame)
        except BaseException as exc:  # reported by the GUI thread
            self._worker_error = exc
            self._abort.set()
        self._close_writer(discard=self._abort.is_set())

    def _close_writer(self, discard: bool) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            if discard and self.kind == ".gif":
                writer.images_to_write.clear()  # nothing to flush into a file to be deleted
            writer.close()
        except BaseException as exc:
            if not discard and self._worker_error is None:
                self._worker_error = exc

    # ---- the GUI thread

    def _tick(self) -> None:
        if self._ending or self._worker_error is not None:
            self._wind_up()
            return
        assert self._widget is not None
        t0 = time.monotonic()
        try:
            while self.done < self.frames and time.monotonic() - t0 < CHUNK_S:
                if self._queue.full():
                    break  # the encoder is behind: let it catch up, keep the GUI free
                self._widget.seek_fraction(self.done / (self.frames - 1))  # type: ignore[attr-defined]
                self._queue.put_nowait(_frame_array(render_image(self._widget, self.size)))
                self.done += 1
        except Exception as exc:
            self._worker_error = exc
            self._abort.set()
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(None)
            return
        self.progress.emit(self.done, self.frames)
        if self.done == self.frames:
            self._ending = "finish"
            self._drop_widget()
            self._queue.put(None)  # the worker drains the queue, then closes the file
            self._timer.setInterval(15)

    def _wind_up(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            return  # still encoding or closing: look again at the next tick
        self._timer.stop()
        if self._ending == "cancel":
            self._cleanup()
            self.state = "cancelled"
            self.cancelled.emit()
            return
        error = self._worker_error
        if error is None:
            try:
                self._publish()
            except OSError as exc:
                error = exc
        if error is not None:
            self._cleanup()
            self.state = "failed"
            why = getattr(error, "strerror", None) or error
            self.failed.emit(f"could not write {self.path}: {why}")
            return
        self.state = "finished"
        self.finished.emit(str(self.path))

    def _publish(self) -> None:
        """Give the finished file its usual mode and its name (an atomic rename)."""
        mask = os.umask(0o22)
        os.umask(mask)
        os.chmod(self._tmp, 0o666 & ~mask)
        if self.path.exists() and not self.overwrite:
            raise FileExistsError(f"{self.path} appeared while exporting; not replaced")
        os.replace(self._tmp, self.path)
        self._tmp = ""

    def _open_writer(self, tmp: str) -> Any:
        try:
            if self.kind == ".gif":
                import imageio.v3 as iio

                return iio.imopen(tmp, "w", extension=".gif", plugin="pillow")
            import imageio.v2 as imageio

            return imageio.get_writer(
                tmp,
                format="FFMPEG",
                mode="I",
                fps=self.fps,
                codec="libx264",
                pixelformat="yuv420p",
                quality=7,
                macro_block_size=16,
                ffmpeg_log_level="error",
            )
        except ImportError as exc:
            need = "imageio" if self.kind == ".gif" else "imageio imageio-ffmpeg"
            raise ExportError(f"exporting {self.kind} needs: pip install {need}") from exc
        except (RuntimeError, ValueError, OSError) as exc:
            raise ExportError(f"cannot open a {self.kind} writer: {exc}") from exc

    def _make_widget(self) -> QWidget:
        from .animation.widget import TileAnimationWidget
        from .state.animation.player import DEFAULT_DURATION_S

        widget = TileAnimationWidget(
            config=self.config,
            gpu=self.gpu,
            duration_s=self.duration_s or DEFAULT_DURATION_S,
        )
        widget.glide_s = 0.0
        _lay_out(widget, self.size)
        return widget

    def _cleanup(self) -> None:
        if self._tmp:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)
            self._tmp = ""
        self._drop_widget()

    def _drop_widget(self) -> None:
        if self._widget is not None:
            self._widget.hide()
            self._widget.deleteLater()
            self._widget = None
