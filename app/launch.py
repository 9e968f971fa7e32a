"""Entry points for main.py: the desktop app, and a headless render of the window to a PNG."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gpu import exit_status

if TYPE_CHECKING:
    from gpu.config import AttentionConfig

RENDER_SIZE = (1600, 1000)


def _application():  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication(sys.argv[:1])
        app.setStyle("Fusion")  # the same look everywhere; the themes' palettes are made for it
    app.setOrganizationName("Tilescope")
    app.setApplicationName("Tilescope")
    app.setApplicationDisplayName("Tilescope")
    return app


#: The one line the offscreen platform prints for every window it shows, about nothing the
#: picture depends on.
OFFSCREEN_CHATTER = "This plugin does not support propagateSizeHints()"


def quiet_offscreen_chatter():  # type: ignore[no-untyped-def]
    """Drop the offscreen platform's OFFSCREEN_CHATTER line: a headless render says only what
    concerns its picture. Every other Qt message still reaches stderr. Returns the handler it
    replaced."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(mode, context, message):  # type: ignore[no-untyped-def]
        if message != OFFSCREEN_CHATTER:
            sys.stderr.write(message + "\n")

    return qInstallMessageHandler(handler)


def run_gui(open_path: str | None = None) -> int:
    """Open the main window (on a recorded run when `open_path` is given); returns exit code."""
    app = _application()
    quit_on_signals(app)
    from .window.main_window import MainWindow
    from .work.background import finish_pool_jobs

    window = MainWindow(open_path=open_path)
    window.show()
    code = app.exec()
    finish_pool_jobs()  # while the window and what its jobs report through still exist
    return code


#: How often the event loop hands control to Python, so a signal is handled while Qt is idle.
SIGNAL_CHECK_MS = 100


def quit_on_signals(app) -> bool:  # type: ignore[no-untyped-def]
    """SIGTERM, SIGHUP and SIGINT end the app promptly and leave no partial file behind: the
    handler (gpu.exit_status) removes every temporary file being written (gpu.files.fileio's
    registry: an animation export's, a session's) at once and raises nothing; the event loop
    then closes the windows (an export in flight stops, the runner and background work wind
    up) and ends with 128 + the signal's number (143, 129, 130), and if that takes longer than
    exit_status.GRACE_S the watchdog ends the process. A signal that came while the window was
    being built is acted on as soon as the loop runs. Python runs a handler only between
    bytecodes and Qt's event loop is C++: a timer gives Python a turn every SIGNAL_CHECK_MS.
    False where handlers cannot be installed (not the main thread)."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from gpu.files.fileio import remove_partial_files_on_signals

    if not remove_partial_files_on_signals():  # also removes them at exit
        return False

    def quit_app(code: int) -> None:
        app.setQuitOnLastWindowClosed(False)  # the exit status is the signal's, not 0
        QApplication.closeAllWindows()
        app.exit(code)

    def respond(signum: int) -> None:
        QTimer.singleShot(0, lambda: quit_app(128 + signum))

    timer = QTimer(app)
    timer.timeout.connect(lambda: None)
    timer.start(SIGNAL_CHECK_MS)
    exit_status.respond_with(respond)  # at once if a signal came during the start
    return True


class _Ended(Exception):
    """An ending signal came while `render` waited: it stops and says so by its status."""


def _spin(app, until: Callable[[], bool], timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    """Run the event loop until `until()` or `timeout_s`; _Ended as soon as an ending signal
    has come (gpu.exit_status)."""
    deadline = time.monotonic() + timeout_s
    while not until():
        if exit_status.signalled() is not None:
            raise _Ended
        if time.monotonic() > deadline:
            return False
        app.processEvents()
        time.sleep(0.005)
    return True


def say_progress(window) -> None:  # type: ignore[no-untyped-def]
    """Each measurement and the sweep's progress on stderr, as they happen: a render on the
    CPU backend measures for tens of seconds."""

    def started(job) -> None:  # type: ignore[no-untyped-def]
        print(f"tilescope: measuring N = {job.config.seq_len}…", file=sys.stderr, flush=True)

    def progress(done: int, total: int) -> None:
        print(f"tilescope: sweep {done}/{total}", file=sys.stderr, flush=True)

    window.runner.jobStarted.connect(started)
    window.runner.sweepProgress.connect(progress)


def measurements_done(window) -> bool:  # type: ignore[no-untyped-def]
    """Nothing runs or waits to run, and no sweep is shown as under way (its end, and a sweep
    of points measured again, arrive as queued signals after the runner goes idle)."""
    return not window.runner.busy and not window.run_status.progress.isVisible()


def render_window(
    config: AttentionConfig,
    backend: str = "auto",
    out: str = "tilescope.png",
    open_path: str | None = None,
    overwrite: bool = False,
    size: tuple[int, int] = RENDER_SIZE,
    sweep: bool = True,
    timeout_s: float = 600.0,
    colors: int = 0,
) -> int:
    """Run `config` (a sweep up to its N unless `sweep` is False) and save the whole window as a
    PNG (a JPEG when `out` ends in .jpg or .jpeg) of exactly `size` pixels, offscreen.
    `open_path` (a saved session or recorded run) or `backend="replay"` (the shipped H200
    recording unless `open_path` names another) replays recorded results instead of measuring;
    when the recording shows another config than `config`, a note on stderr says which. The
    user's saved settings are neither read nor changed. `colors` (2..256) reduces the PNG to a
    palette: a third of the bytes, for docs. Returns 0, 1 when the window could not be
    rendered, 2 when `out` exists and `overwrite` is False or the recording to replay is
    missing or unreadable."""
    if Path(out).exists() and not overwrite:
        print(f"tilescope: error: {out} exists (use --force to replace it)", file=sys.stderr)
        return 2
    from .state.recorded_run import RecordedBackend, shipped_recording

    if backend == "replay" and not open_path:
        shipped = shipped_recording()
        if shipped is None:
            print(
                "tilescope: error: --backend replay needs --open FILE (no recording is shipped "
                "in resources/recorded/)",
                file=sys.stderr,
            )
            return 2
        open_path = str(shipped)
    if open_path:
        from gpu.errors import ReadStopped
        from gpu.files.read_stop import stoppable

        try:  # a clear message now rather than a banner in the picture
            with stoppable(lambda: exit_status.signalled() is not None):
                RecordedBackend.from_file(open_path)
        except ValueError as exc:  # RecordingError, SessionError
            print(f"tilescope: error: {exc}", file=sys.stderr)
            return 2
        except ReadStopped:  # an ending signal came during the check
            return 128 + (exit_status.signalled() or 0)
    from PySide6.QtWidgets import QApplication

    if QApplication.instance() is None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        quiet_offscreen_chatter()
    app = _application()
    from PySide6.QtCore import QSettings

    responded = exit_status.respond_with(None)  # this loop acts on a signal: _spin

    from .export.export_files import ExportError, write_file
    from .export.plot_images import encoded_image, palette_png_bytes, png_bytes, render_image
    from .window.main_window import MainWindow
    from .work.background import finish_pool_jobs

    with tempfile.TemporaryDirectory() as folder:
        settings = QSettings(os.path.join(folder, "render.ini"), QSettings.Format.IniFormat)
        settings.setValue("controls/seq_len", config.seq_len)
        window = MainWindow(
            settings=settings,
            restore=True,
            open_path=open_path,
            backend=None if open_path else backend,
        )
        try:
            window.setMinimumSize(0, 0)
            window.resize(*size)
            window.show()
            window.controls.set_config(config)
            if not _spin(app, lambda: window.backend is not None, 120.0):
                print(f"tilescope: error: {window.banner.message or 'no backend'}", file=sys.stderr)
                return 1
            say_progress(window)
            if sweep and not open_path:  # a recording holds what it holds: nothing to sweep
                window.measurements.sweep()
            # Until the measurements are done and shown: the sweep, and the points it measures
            # again for being out of line, which start only once its last result is in.
            _spin(app, lambda: measurements_done(window), timeout_s)
            window.plots.flush_model()  # the model curves of the config shown, not a pending one
            window.resize(*size)
            _spin(app, lambda: False, 0.3)  # let the last results paint
            # The explain pane and the lesson strip make their texts off the GUI thread once the
            # point rests: made now, for the point the plots show, or the picture could hold an
            # earlier point's text beside them.
            window.settle_texts()
            if window.banner.message:
                print(f"tilescope: note: {window.banner.message}", file=sys.stderr)
            if (window.width(), window.height()) != tuple(size):
                print(
                    f"tilescope: note: the window is {window.width()}×{window.height()}, "
                    f"not {size[0]}×{size[1]}",
                    file=sys.stderr,
                )
            if window.config != config:  # say what was substituted
                why = " (the recorded run holds no results for it)" if open_path else ""
                print(
                    f"tilescope: note: the window shows {window.config.label()}, not the "
                    f"requested {config.label()}{why}",
                    file=sys.stderr,
                )
            try:
                image = render_image(window, size)
                if Path(out).suffix.lower() in (".jpg", ".jpeg"):
                    data = encoded_image(image, "JPEG")
                else:
                    data = palette_png_bytes(image, colors) if colors else png_bytes(image)
                write_file(out, data, overwrite=overwrite)
            except (OSError, ExportError) as exc:
                print(f"tilescope: error: {exc}", file=sys.stderr)
                return 1
            print(f"wrote {out} ({size[0]}×{size[1]}, {len(window.measurements.store)} results)")
            return 0
        except _Ended:  # the handler removed any partial file: nothing was written
            return 128 + (exit_status.signalled() or 0)
        finally:
            window.close()
            finish_pool_jobs()
            exit_status.respond_with(responded)
