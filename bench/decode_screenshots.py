"""Screenshots of the shipped decode recording replayed in the window, from a real X display
(what the X server shows, window manager's frame and all: `import -window root`).

    Xvfb :55 -screen 0 1280x800x24 &  DISPLAY=:55 openbox &
    DISPLAY=:55 QT_QPA_PLATFORM=xcb python bench/decode_screenshots.py --out docs/screenshots

The window starts with empty settings, opens resources/recorded/h100_decode.json through
File ▸ Open, moves N to the last stop (128k) and saves decode_replay_<W>x<H>.png (the
Measurements tab), then decode_tiles_<W>x<H>.png (the Tiles tab's decode lanes, --fraction
into a step). Each picture is taken once the window is idle (tests/real_display.window_busy);
an existing file is replaced only with --force, and a picture is written whole or not at all.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RECORDING = ROOT / "resources" / "recorded" / "h100_decode.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the PNG files")
    ap.add_argument("--fraction", type=float, default=0.45, help="how far into a decode step")
    ap.add_argument("--force", action="store_true", help="replace existing files")
    args = ap.parse_args(argv)
    if not os.environ.get("DISPLAY") or shutil.which("import") is None:
        print("needs an X display (DISPLAY) and ImageMagick's import", file=sys.stderr)
        return 2

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    import app  # noqa: F401  (Qt work-arounds before any Qt call)
    from app.window.main_window import MainWindow
    from tests.real_display import window_busy

    qapp = QApplication.instance() or QApplication(sys.argv[:1])
    qapp.setStyle("Fusion")
    folder = tempfile.mkdtemp(prefix="tilescope-shots-")
    settings = QSettings(os.path.join(folder, "settings.ini"), QSettings.Format.IniFormat)
    window = MainWindow(settings=settings)
    window.showMaximized()

    def spin(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            qapp.processEvents()
            time.sleep(0.005)

    def settle() -> None:
        end = time.monotonic() + 240
        while time.monotonic() < end and (window_busy(window) or not window.isVisible()):
            spin(0.1)
        spin(1.0)  # nothing due: the screen has caught up

    size = f"{window.screen().size().width()}x{window.screen().size().height()}"
    args.out.mkdir(parents=True, exist_ok=True)

    def shot(stem: str) -> bool:
        settle()
        target = args.out / f"{stem}_{size}.png"
        if target.exists() and not args.force:
            print(f"{target} exists: pass --force to replace it", file=sys.stderr)
            return False
        partial = Path(folder) / target.name
        subprocess.run(["import", "-window", "root", str(partial)], check=True)
        shutil.move(str(partial), str(target))
        print(f"wrote {target}")
        return True

    settle()
    ok = window.file_menu.open_file(str(RECORDING))
    settle()
    window.controls.set_seq_len(window.state.value.scale[-1])
    ok = ok and shot("decode_replay")
    window.tabs.setCurrentWidget(window.animation)
    settle()
    lanes = window.animation.decode_lane
    lanes.flush()
    lanes.seek_time(args.fraction * lanes.total_seconds)
    ok = ok and shot("decode_tiles")
    window.close()
    spin(0.2)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
