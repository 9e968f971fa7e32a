"""The tile animation as GIF or MP4.

The animation is the canvas of a second, offscreen TileAnimationWidget whose clock is stepped
(not played): the canvas alone (no buttons or side panels), at the size asked for and no
smaller than the canvas's minimum, so that every label fits. Frames are painted a band of rows
at a time on a QTimer and encoded and written one by one on a worker thread, so the window
stays responsive, memory holds a few frames whatever their count, and the user's own
animation is not disturbed. The file is a temporary one beside the target
(gpu.files.fileio.new_partial_file), renamed at the end.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from PySide6.QtCore import (
    QObject,
    QRect,
    QTimer,
    Signal,
)
from PySide6.QtGui import QImage, QPainter, QRegion
from PySide6.QtWidgets import QWidget

from gpu.config import AttentionConfig
from gpu.errors import FileWriteError
from gpu.files.fileio import (
    commit_partial_file,
    discard_partial_file,
    new_partial_file,
)
from gpu.model.costmodel import GpuSpec
from gpu.results import RunResult
from gpu.units import fmt_bytes

from .animation_writers import (
    AnimationWriteError,
    AnimationWriter,
    disk_error,
    open_writer,
)
from .export_files import ExportError, check_target
from .plot_images import check_size, frame_array, lay_out

ANIMATION_FORMATS = (".gif", ".mp4")


#: The animation's default size: the canvas alone, every label of it whole, HD video.
ANIMATION_SIZE = (1280, 720)


MAX_FRAMES = 2000


#: Most pixels one animation export renders in all (frames × width × height): 2000 frames at
#: 1920×1080, 500 at 3840×2160. It bounds the time an export takes and the size of its file.
MAX_ANIMATION_PIXELS = 2**32


MAX_ANIMATION_PIXELS_LABEL = "2³² pixels (4.3 billion)"


#: Bytes of frames painted ahead of the encoder (6 frames at most, fewer when large).
IN_FLIGHT_BYTES = 256 * 2**20


#: Share of the free memory an animation export may need (`animation_memory_bytes`).
MEMORY_SHARE = 0.5


#: Seconds of painting per timer tick: the GUI gets the rest.
CHUNK_S = 0.008


#: Pixels of a frame painted per step (a band of rows: a few milliseconds each).
BAND_PIXELS = 1 << 20


def even_size(size: tuple[int, int], block: int = 16) -> tuple[int, int]:
    """Round down to a multiple of `block` (video encoders work in 16-pixel macro blocks)."""
    return tuple(max(block, int(v) // block * block) for v in size)  # type: ignore[return-value]


def animation_memory_bytes(size: tuple[int, int]) -> int:
    """Memory an animation export of `size` holds at most, whatever its frame count: the frames
    waiting for the encoder, the one being painted, the one being encoded (its RGB copy and
    palette image) and the canvas's own background picture, at 4 bytes a pixel each."""
    return (frames_in_flight(size) + 4) * size[0] * size[1] * 4


def frames_in_flight(size: tuple[int, int]) -> int:
    """Frames painted ahead of the encoder: up to 6, fewer for large frames (at most
    IN_FLIGHT_BYTES of them)."""
    return max(1, min(6, IN_FLIGHT_BYTES // (size[0] * size[1] * 4)))


@functools.cache
def canvas_minimum_size() -> tuple[int, int]:
    """The smallest canvas the tile animation lays its labels out in (the canvas's own minimum
    size): an animation is exported at this size or larger."""
    from ..animation.canvas import TileCanvas

    canvas = TileCanvas()
    try:
        return canvas.minimumSize().width(), canvas.minimumSize().height()
    finally:
        canvas.deleteLater()


def check_animation_request(frames: int, size: tuple[int, int]) -> None:
    """ExportError when an animation of `frames` frames of `size` is beyond the limits: the
    canvas's minimum size, MAX_ANIMATION_PIXELS in all, or more memory than half of what is
    free now (see `animation_memory_bytes`)."""
    w, h = size
    min_w, min_h = canvas_minimum_size()
    if w < min_w or h < min_h:
        raise ExportError(
            f"the tile animation needs at least {min_w}×{min_h} pixels for its labels, not {w}×{h}"
        )
    if frames * w * h > MAX_ANIMATION_PIXELS:
        most = MAX_ANIMATION_PIXELS // (w * h)
        raise ExportError(
            f"{frames} frames of {w}×{h} are more than {MAX_ANIMATION_PIXELS_LABEL} in all "
            f"(frames × width × height): at most {most} frames at this size"
        )
    need = animation_memory_bytes(size)
    free = psutil.virtual_memory().available
    if need > free * MEMORY_SHARE:
        raise ExportError(
            f"a {w}×{h} animation needs about {fmt_bytes(need)} of memory while it renders, and "
            f"{fmt_bytes(free)} are free: choose a smaller size"
        )


class AnimationExporter(QObject):
    """Renders the tile animation of `config` to a GIF or MP4 (by `path`'s extension): the
    animation's canvas only (no buttons, no side panels), at `size`.

    `start()` checks the request and the target and opens the writer (raising
    FileExistsError or ExportError at once). Then, on a timer, the GUI thread paints frames a
    band of rows at a time (a paint must happen there; a band takes a few milliseconds, so a
    4K or 8K frame never stalls the window), and a worker thread converts, encodes and writes
    each frame as it comes (app/export/animation_writers.py): memory holds a few frames, never the
    whole animation. `progress(done, total)` follows each chunk, then exactly one of
    `finished(path)`, `failed(message)` or `cancelled()`. The frames are `frames` equally
    spaced instants of one pass of the modeled clock, first to last.

    The file is written to a temporary file beside the target (gpu.files.fileio.new_partial_file,
    removed on SIGTERM and SIGINT too) and renamed over it at the end; `abort()` stops at once
    and removes it (the window closing).
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
        size: tuple[int, int] = ANIMATION_SIZE,
        overwrite: bool = False,
        gpu: GpuSpec | None = None,
        duration_s: float | None = None,
        algorithms: tuple[str, ...] | None = None,
        results: Callable[[AttentionConfig, str], RunResult | None] | None = None,
        theme: str = "dark",
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.config = config
        #: What the Tiles tab shows, so the file shows it too: its lanes (naive and the kernel
        #: picked), the results that put a lane on its measured clock, its theme.
        self.algorithms = algorithms
        self.results = results
        self.theme = theme
        self.path = Path(path)
        self.kind = self.path.suffix.lower()
        if self.kind not in ANIMATION_FORMATS:
            raise ExportError(f"{self.path.name}: the animation exports to .gif or .mp4")
        if not 2 <= int(frames) <= MAX_FRAMES:
            raise ExportError(f"frames must be between 2 and {MAX_FRAMES}")
        if not 1 <= fps <= 60:
            raise ExportError("fps must be between 1 and 60")
        self.frames = int(frames)
        self.fps = float(fps)
        self.size = even_size(check_size(size)) if self.kind == ".mp4" else check_size(size)
        self.overwrite = overwrite
        self.gpu = gpu
        self.duration_s = duration_s
        self.done = 0  # frames painted
        self.state = "idle"  # -> running -> finished | failed | cancelled
        self._tmp = ""
        self._writer: AnimationWriter | None = None
        self._widget: QWidget | None = None
        self._canvas: QWidget | None = None
        self._frame: QImage | None = None  # being painted, band by band
        self._band_top = 0
        self._queue: queue.Queue[QImage | None] = queue.Queue(maxsize=frames_in_flight(self.size))
        self._worker: threading.Thread | None = None
        self._worker_error: BaseException | None = None
        self._abort = threading.Event()
        self._ending = ""  # "", "finish" or "cancel": waiting for the worker to wind up
        self._timer = QTimer(self)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._tick)

    # ---- public

    def start(self) -> None:
        check_animation_request(self.frames, self.size)
        check_target(self.path, self.overwrite)
        try:
            self._tmp = new_partial_file(self.path, self.kind)
        except FileWriteError as exc:
            raise ExportError(str(exc)) from exc
        try:
            self._writer = open_writer(self.kind, self._tmp, self.size, self.fps)
            self._widget, self._canvas = self._make_canvas()
        except AnimationWriteError as exc:
            self._cleanup()
            raise ExportError(str(exc)) from exc
        except BaseException:
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

    def abort(self, timeout_s: float = 10.0) -> None:
        """Stop now and wind up before returning (the window is closing): the encoder is
        stopped, the partial file removed, the offscreen canvas dropped; `cancelled` follows."""
        if self.state != "running":
            return
        self.cancel()
        if self._worker is not None:
            self._worker.join(timeout_s)
        self._wind_up()

    # ---- the worker thread: convert, encode and write frames as they come

    def _encode(self) -> None:
        writer = self._writer
        assert writer is not None
        try:
            while not self._abort.is_set():
                image = self._queue.get()
                if image is None or self._abort.is_set():
                    break
                writer.append(frame_array(image))
            if not self._abort.is_set():
                writer.close()
        except BaseException as exc:  # reported by the GUI thread
            self._worker_error = exc
            self._abort.set()
        finally:
            if self._abort.is_set():
                writer.discard()  # nothing to flush into a file to be deleted

    # ---- the GUI thread

    def _tick(self) -> None:
        if self._ending or self._worker_error is not None:
            self._wind_up()
            return
        t0 = time.monotonic()
        try:
            while self.done < self.frames and time.monotonic() - t0 < CHUNK_S:
                if self._frame is None:
                    if self._queue.full():
                        break  # the encoder is behind: let it catch up, keep the GUI free
                    self._begin_frame()
                if self._paint_band():  # the frame is whole: to the encoder
                    self._queue.put_nowait(self._frame)
                    self._frame = None
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

    def _begin_frame(self) -> None:
        assert self._widget is not None and self._canvas is not None
        self._widget.seek_fraction(self.done / (self.frames - 1))  # type: ignore[attr-defined]
        # Not filled: the canvas paints every pixel (an opaque widget), and a fill would touch
        # every page of a large frame at once; painting touches them a band at a time.
        self._frame = QImage(*self.size, QImage.Format.Format_RGB32)
        self._band_top = 0

    def _paint_band(self) -> bool:
        """Paint the next band of rows of the frame; True once the frame is whole."""
        assert self._canvas is not None and self._frame is not None
        w, h = self.size
        rows = max(8, BAND_PIXELS // w)
        band = QRect(0, self._band_top, w, min(rows, h - self._band_top))
        painter = QPainter(self._frame)
        try:
            self._canvas.render(painter, band.topLeft(), QRegion(band))
        finally:
            painter.end()
        self._band_top += band.height()
        return self._band_top >= h

    def _wind_up(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            return  # still encoding or closing: look again at the next tick
        self._timer.stop()
        if self.state != "running":
            return
        if self._ending == "cancel":
            self._cleanup()
            self.state = "cancelled"
            self.cancelled.emit()
            return
        error = self._worker_error
        if error is None:
            try:
                commit_partial_file(self._tmp, self.path, overwrite=self.overwrite)
                self._tmp = ""
            except (FileWriteError, FileExistsError) as exc:
                error = exc
        if error is not None:
            self._cleanup()
            self.state = "failed"
            self.failed.emit(_write_failure(error, self.path))
            return
        self.state = "finished"
        self.finished.emit(str(self.path))

    def _make_canvas(self) -> tuple[QWidget, QWidget]:
        """An offscreen animation of the config and its canvas, laid out alone at the export
        size (the buttons and side panels are not part of the picture)."""
        from ..animation.widget import TileAnimationWidget
        from ..state.animation.player import DEFAULT_DURATION_S

        extra = {"algorithms": self.algorithms} if self.algorithms else {}
        widget = TileAnimationWidget(
            config=self.config,
            gpu=self.gpu,
            duration_s=self.duration_s or DEFAULT_DURATION_S,
            **extra,
        )
        if self.results is not None:  # measured clocks, as on screen
            widget.set_result_source(self.results)
        widget.set_theme(self.theme)
        widget.glide_s = 0.0
        canvas = widget.canvas
        canvas.setParent(None)  # drawn on its own: the widget keeps feeding it frames
        lay_out(canvas, self.size)
        if (canvas.width(), canvas.height()) != self.size:
            raise ExportError(
                f"the tile animation's canvas cannot be laid out at {self.size[0]}×{self.size[1]}"
            )
        return widget, canvas

    def _cleanup(self) -> None:
        if self._writer is not None and self.state != "finished":
            self._writer.discard()
        if self._tmp:
            discard_partial_file(self._tmp)
            self._tmp = ""
        self._drop_widget()

    def _drop_widget(self) -> None:
        for widget in (self._canvas, self._widget):
            if widget is not None:
                widget.hide()
                widget.deleteLater()
        self._widget = self._canvas = None
        self._frame = None


def _write_failure(error: BaseException, path: Path) -> str:
    """One line for the banner: why the animation could not be written."""
    if isinstance(error, (AnimationWriteError, FileWriteError, FileExistsError, ExportError)):
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    return f"could not write {path}: {disk_error(error, str(path))}"
