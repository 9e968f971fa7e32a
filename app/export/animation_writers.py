"""Animation files written a frame at a time: a GIF encoded as each frame comes, an MP4 piped to
ffmpeg. Nothing accumulates: memory holds the frame being encoded, whatever the frame count.

Qt-free (frames are RGB NumPy arrays), used by the exporter's encoding thread
(app/export/animation_export.py). Every failure is an `AnimationWriteError` with one line for
a user (a full disk says so, never a broken pipe and ffmpeg's command line); `discard()` closes
a writer without raising, so a cancelled or failed export leaves nothing behind to be reported
later.

GIF: Pillow quantizes each frame to its own 256-colour palette (octree, no dithering: the flat
colours of the canvas stay flat) and encodes it at once with its own colour table, through
Pillow's GIF header and frame writers (`getheader`, `getdata`). A GIF's frames are whole images,
so its file grows with frames × size; the exporter bounds that (MAX_ANIMATION_PIXELS).

MP4: frames go as raw RGB to ffmpeg's standard input (the binary of imageio-ffmpeg), H.264 in
yuv420p; ffmpeg's error output is kept (its last lines) to say why it stopped. ffmpeg writes
through a descriptor of the file that this process opened (its `fd` protocol), never by name,
and is started without a hook between fork and exec (see `lower_priority_of`).

Both write into a file that exists (the caller's partial file, gpu.files.fileio): one removed
before the writer opened it (a signal ended the export) is not made again.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import importlib.util
import os
import subprocess
import threading
from typing import IO, Any, Protocol

import numpy as np


class AnimationWriteError(Exception):
    """An animation file that cannot be written; the message is one line for a user."""


class AnimationWriter(Protocol):
    def append(self, frame: np.ndarray) -> None: ...
    def close(self) -> None: ...
    def discard(self) -> None: ...


def open_writer(kind: str, path: str, size: tuple[int, int], fps: float) -> AnimationWriter:
    """A writer for `kind` (".gif" or ".mp4") into `path` (an existing temporary file the
    caller renames when done); frames must be `size` (width, height). AnimationWriteError if
    it cannot open."""
    if kind == ".gif":
        return GifStreamWriter(path, fps)
    if kind == ".mp4":
        return Mp4PipeWriter(path, size, fps)
    raise AnimationWriteError(f"no animation writer for {kind!r} (.gif or .mp4)")


#: How much lower the encoder's scheduling priority is than the app's (POSIX nice): an
#: export is background work, and x264 on every core would take the CPU from the GUI thread.
ENCODER_NICENESS = 10


def lower_priority_of(pid: int) -> None:
    """`pid` at ENCODER_NICENESS below this process, set from here after it started. A hook
    run in the child between fork and exec (`preexec_fn`) would make Python use a real
    `fork()`, whose handlers (OpenBLAS's) wait for library threads busy with a computation
    while this thread holds the interpreter: the app froze for good. Without one, the child
    starts by `vfork`, which runs no such handler."""
    with contextlib.suppress(OSError, AttributeError):  # no setpriority (Windows): as it is
        own = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, pid, min(19, own + ENCODER_NICENESS))


def _open_existing(path: str) -> int:
    """A descriptor of `path`, which must exist (the caller's partial file): a file removed
    meanwhile (a signal ended the export) is not made again, by us or by the encoder, which
    writes through this descriptor and never opens the file by its name."""
    try:
        return os.open(path, os.O_RDWR | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise AnimationWriteError(disk_error(exc, path)) from exc


#: The package each animation format is written with (both are dependencies of the app; a
#: copy installed without them says so before the export dialog asks for anything).
FORMAT_PACKAGES = {"gif": ("PIL", "Pillow"), "mp4": ("imageio_ffmpeg", "imageio-ffmpeg")}


def missing_package(kind: str) -> str:
    """'' when the package that writes `kind` ("gif", "mp4") is installed, else what to do:
    'needs Pillow (pip install pillow)'. Looked up without importing it."""
    module, name = FORMAT_PACKAGES.get(kind, ("", ""))
    if not module or importlib.util.find_spec(module) is not None:
        return ""
    return f"needs {name} (pip install {name.lower()})"


def disk_error(exc: BaseException, path: str) -> str:
    """Why writing `path` failed, in words: a full disk is named as such."""
    if getattr(exc, "errno", None) == errno.ENOSPC or "No space left" in str(exc):
        return "the disk is full (no space left on device)"
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return f"cannot write {path}: {reason.splitlines()[0]}"


# ------------------------------------------------------------------------------------ GIF


class GifStreamWriter:
    """A looping GIF written frame by frame (see the module docstring)."""

    def __init__(self, path: str, fps: float) -> None:
        try:
            from PIL import GifImagePlugin, Image
        except ImportError as exc:
            raise AnimationWriteError(f"exporting .gif {missing_package('gif')}") from exc
        self._gif, self._image = GifImagePlugin, Image
        self.path = path
        self.duration_ms = max(10, round(1000 / fps))
        self.frames = 0
        self._file: IO[bytes] | None = os.fdopen(_open_existing(path), "wb")

    def append(self, frame: np.ndarray) -> None:
        image = self._image.fromarray(np.ascontiguousarray(frame), "RGB").quantize(
            256, method=self._image.Quantize.FASTOCTREE, dither=self._image.Dither.NONE
        )
        parts: list[Any] = []
        if self.frames == 0:
            header, _ = self._gif.getheader(image, info={"loop": 0, "duration": self.duration_ms})
            parts += header
        parts += self._gif.getdata(image, duration=self.duration_ms, include_color_table=True)
        self._write(b"".join(bytes(p) for p in parts))
        self.frames += 1

    def close(self) -> None:
        """Write the trailer and close; AnimationWriteError if the bytes did not all land."""
        self._write(b";")
        file, self._file = self._file, None
        try:
            if file is not None:
                file.close()
        except OSError as exc:
            raise AnimationWriteError(disk_error(exc, self.path)) from exc

    def discard(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()

    def _write(self, data: bytes) -> None:
        if self._file is None:
            raise AnimationWriteError(f"{self.path} is closed")
        try:
            self._file.write(data)
        except OSError as exc:
            raise AnimationWriteError(disk_error(exc, self.path)) from exc


# ------------------------------------------------------------------------------------ MP4

#: Lines of ffmpeg's error output kept to say why it stopped.
FFMPEG_LOG_LINES = 20


class Mp4PipeWriter:
    """H.264 in an MP4 file, frames piped to ffmpeg (see the module docstring)."""

    def __init__(self, path: str, size: tuple[int, int], fps: float) -> None:
        try:
            import imageio_ffmpeg
        except ImportError as exc:
            raise AnimationWriteError(f"exporting .mp4 {missing_package('mp4')}") from exc
        self.path = path
        self.size = size
        w, h = size
        self._file = _open_existing(path)
        command = [
            imageio_ffmpeg.get_ffmpeg_exe(),
            "-hide_banner",
            "-nostdin",
            "-loglevel",
            "error",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-s",
            f"{w}x{h}",
            "-r",
            f"{fps:g}",
            "-i",
            "pipe:0",
            "-an",
            "-c:v",
            "libx264",
            "-pix_fmt",
            "yuv420p",
            "-crf",
            "20",
            "-f",
            "mp4",
            "-fd",
            str(self._file),
            "fd:",
        ]
        try:
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(self._file,),
            )
        except OSError as exc:
            raise AnimationWriteError(f"cannot start the video encoder (ffmpeg): {exc}") from exc
        finally:
            os.close(self._file)  # ffmpeg holds its own copy
        lower_priority_of(self._process.pid)
        self._log: collections.deque[str] = collections.deque(maxlen=FFMPEG_LOG_LINES)
        self._log_reader = threading.Thread(target=self._read_log, daemon=True)
        self._log_reader.start()

    def _read_log(self) -> None:
        process = self._process
        if process is None or process.stderr is None:
            return
        for line in iter(process.stderr.readline, b""):
            text = line.decode("utf-8", "replace").strip()
            if text:
                self._log.append(text)

    def append(self, frame: np.ndarray) -> None:
        if frame.shape[:2] != (self.size[1], self.size[0]):
            raise AnimationWriteError(f"a frame of {frame.shape[1]}×{frame.shape[0]} pixels")
        process = self._process
        if process is None or process.stdin is None:
            raise AnimationWriteError(f"{self.path} is closed")
        try:
            # The array's own memory, not a copy: the write releases the interpreter.
            process.stdin.write(memoryview(np.ascontiguousarray(frame, dtype=np.uint8)))
        except OSError as exc:  # ffmpeg stopped (a full disk, an error): say why it did
            raise AnimationWriteError(self._why_stopped(exc)) from None

    def close(self) -> None:
        """Let ffmpeg finish the file; AnimationWriteError (with its reason) if it fails."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
        except OSError as exc:
            self._stop(process)
            raise AnimationWriteError(self._why_stopped(exc)) from None
        code = process.wait()
        self._log_reader.join(1.0)
        if code != 0:
            raise AnimationWriteError(self._why_stopped(None))

    def discard(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            self._stop(process)

    @staticmethod
    def _stop(process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()
        with contextlib.suppress(OSError):
            process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5.0)

    def _why_stopped(self, exc: BaseException | None) -> str:
        process = self._process
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5.0)  # its error output is complete once it has exited
        self._log_reader.join(1.0)
        log = " ".join(self._log)
        if "No space left" in log or (exc is not None and "No space left" in str(exc)):
            return "the disk is full (no space left on device)"
        last = self._log[-1] if self._log else ""
        if last:
            return f"the video encoder (ffmpeg) stopped: {last}"
        return "the video encoder (ffmpeg) stopped" + (
            f": {os.strerror(exc.errno)}" if isinstance(exc, OSError) and exc.errno else ""
        )
