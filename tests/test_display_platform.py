"""The app starts on a real X display, not only offscreen: Qt's xcb platform plugin loads with the
system libraries README's set-up command installs, and the main window reaches its first paint.

The rest of the suite runs offscreen, which needs none of the xcb libraries, so without this test
a missing one (Qt then aborts with a misleading "xcb-cursor0 is needed") would only show on a
user's desktop. It runs where a display is available (README's test command runs the suite under
`xvfb-run`) and is skipped elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FIRST_PAINT = textwrap.dedent(
    """
    import os, sys, tempfile, time
    from PySide6.QtCore import QEvent, QObject, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    start = time.monotonic()
    app = QApplication(sys.argv[:1])
    from app.window.main_window import MainWindow

    settings = QSettings(os.path.join(tempfile.mkdtemp(), "t.ini"), QSettings.Format.IniFormat)
    window = MainWindow(settings=settings, restore=False, backend="cpu")


    class FirstPaint(QObject):
        def eventFilter(self, obj, event):
            if event.type() == QEvent.Type.Paint:
                app.removeEventFilter(self)
                print(f"painted on {app.platformName()} in {time.monotonic() - start:.2f} s")
                QTimer.singleShot(0, window.close)
                QTimer.singleShot(50, app.quit)
            return False


    watcher = FirstPaint()
    app.installEventFilter(watcher)
    window.show()
    QTimer.singleShot(60_000, lambda: app.exit(3))
    sys.exit(app.exec())
    """
)


def _xcb_plugin_present() -> bool:
    import PySide6

    plugins = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms"
    return any(plugins.glob("libqxcb*"))


@pytest.mark.skipif(not os.environ.get("DISPLAY"), reason="no X display (run under xvfb-run)")
def test_main_window_reaches_first_paint_on_the_xcb_platform(tmp_path: Path) -> None:
    if not _xcb_plugin_present():
        pytest.skip("this Qt build has no xcb platform plugin")
    env = {**os.environ, "QT_QPA_PLATFORM": "xcb", "HOME": str(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_PAINT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "painted on xcb" in proc.stdout
