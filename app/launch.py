"""Entry points for main.py: the desktop app, and a headless render of the window to a PNG."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

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


def run_gui(open_path: str | None = None) -> int:
    """Open the main window (on a recorded run when `open_path` is given); returns exit code."""
    app = _application()
    from .main_window import MainWindow

    window = MainWindow(open_path=open_path)
    window.show()
    return app.exec()


def _spin(app, until: Callable[[], bool], timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() > deadline:
            return False
        app.processEvents()
        time.sleep(0.005)
    return True


def render_window(
    config: AttentionConfig,
    backend: str = "auto",
    out: str = "tilescope.png",
    open_path: str | None = None,
    overwrite: bool = False,
    size: tuple[int, int] = RENDER_SIZE,
    sweep: bool = True,
    timeout_s: float = 600.0,
) -> int:
    """Run `config` (a sweep up to its N unless `sweep` is False) and save the whole window as a
    PNG, offscreen. The user's saved settings are neither read nor changed. Returns 0, 1 when
    the window could not be rendered, 2 when `out` exists and `overwrite` is False."""
    if Path(out).exists() and not overwrite:
        print(f"tilescope: error: {out} exists (use --force to replace it)", file=sys.stderr)
        return 2
    from PySide6.QtWidgets import QApplication

    if QApplication.instance() is None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    app = _application()
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QSettings

    from gpu.recording import RecordingError, atomic_write_bytes

    from .main_window import MainWindow

    with tempfile.TemporaryDirectory() as folder:
        settings = QSettings(os.path.join(folder, "render.ini"), QSettings.Format.IniFormat)
        settings.setValue("controls/seq_len", config.seq_len)
        window = MainWindow(
            settings=settings,
            restore=True,
            open_path=open_path,
            backend=None if open_path else ("auto" if backend == "replay" else backend),
        )
        try:
            window.resize(*size)
            window.show()
            window.controls.set_config(config)
            if not _spin(app, lambda: window.backend is not None, 120.0):
                print(f"tilescope: error: {window.banner.message or 'no backend'}", file=sys.stderr)
                return 1
            if sweep:
                window.sweep()
            _spin(app, lambda: not window.runner.busy, timeout_s)
            _spin(app, lambda: False, 0.3)  # let the last results paint
            if window.banner.message:
                print(f"tilescope: note: {window.banner.message}", file=sys.stderr)
            data = QByteArray()
            buffer = QBuffer(data)
            buffer.open(QIODevice.OpenModeFlag.WriteOnly)
            if not window.grab().save(buffer, "PNG"):
                print("tilescope: error: could not encode the PNG", file=sys.stderr)
                return 1
            try:
                atomic_write_bytes(out, bytes(data.data()), overwrite=overwrite)
            except (OSError, RecordingError) as exc:
                print(f"tilescope: error: {exc}", file=sys.stderr)
                return 1
            print(f"wrote {out} ({size[0]}×{size[1]}, {len(window.store)} results)")
            return 0
        finally:
            window.close()
