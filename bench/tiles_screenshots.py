"""Render the window with its Tiles tab open at the sizes the tab must fit, offscreen, and check
every label of the lanes canvas on its layout model (none cut, none overlapping).

    QT_QPA_PLATFORM=offscreen python bench/tiles_screenshots.py --out docs/screenshots

The window replays the shipped H200 recording (so the lanes run on measured clocks) at
N = 4096, with naive against the lane named by --lanes, 30% into a pass, and saves
tiles_<W>x<H>.png as 256-colour palette PNGs (app/export/plot_images.palette_png_bytes). It
prints each size's canvas and what, if anything, does not fit, and exits 1 if something does not.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import app  # noqa: F401  (Qt work-arounds before any Qt call)

SIZES = ((1280, 800), (1500, 920))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for tiles_<W>x<H>.png")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--lanes", default="tiled", help="the fused lane beside naive")
    ap.add_argument("--fraction", type=float, default=0.3, help="how far into a pass")
    ap.add_argument("--theme", default="dark", choices=("dark", "light"))
    ap.add_argument("--force", action="store_true", help="replace existing files")
    args = ap.parse_args(argv)

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from app.export.plot_images import palette_png_bytes
    from app.state.recorded_run import shipped_recording
    from app.window.main_window import MainWindow
    from gpu.algorithms import NAIVE
    from gpu.files.fileio import atomic_write_bytes

    qapp = QApplication.instance() or QApplication(sys.argv)
    folder = tempfile.mkdtemp()
    settings = QSettings(str(Path(folder) / "settings.ini"), QSettings.Format.IniFormat)
    settings.setValue("controls/seq_len", args.seq)
    window = MainWindow(settings=settings, open_path=str(shipped_recording()))
    window.apply_theme(args.theme)
    window.show()

    def wait(until: Callable[[], bool], seconds: float = 20.0) -> None:
        end = time.monotonic() + seconds
        while not until() and time.monotonic() < end:
            qapp.processEvents()
            time.sleep(0.005)

    wait(lambda: window.animation is not None and window.state.value.replay)
    window.tabs.setCurrentWidget(window.animation)
    anim = window.animation
    anim.set_algorithms((NAIVE, args.lanes))
    bad = 0
    args.out.mkdir(parents=True, exist_ok=True)
    for w, h in SIZES:
        window.resize(w, h)
        wait(lambda w=w, h=h: (window.width(), window.height()) == (w, h), 2.0)
        for _ in range(20):
            qapp.processEvents()
        anim.flush()
        wait(lambda: anim.player.config.seq_len == args.seq)
        anim.seek_fraction(args.fraction)
        for _ in range(5):
            qapp.processEvents()
        canvas = anim.canvas
        problems = anim.canvas_problems(canvas.size())
        clocks = ", ".join(f"{lane.algorithm}: {lane.clock.label()}" for lane in anim.player.lanes)
        print(
            f"{w}x{h}: window {window.width()}x{window.height()}, canvas "
            f"{canvas.width()}x{canvas.height()}, {len(canvas.text_items())} labels, "
            f"{len(problems)} problems; clocks {clocks}"
        )
        for p in problems:
            print(f"  {p}")
        bad += bool(problems)
        path = args.out / f"tiles_{w}x{h}.png"
        data = palette_png_bytes(window.grab().toImage(), 256)
        atomic_write_bytes(path, data, overwrite=args.force)
        print(f"  {path}: {len(data) / 1e3:.0f} kB")
    window.close()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
