"""Render the first screen a newcomer sees at 1280×800 and 1920×1080, offscreen, and check that
nothing on it is cut (tests/clipping.py, the check the layout test makes).

    QT_QPA_PLATFORM=offscreen python bench/first_screen_screenshots.py --out docs/screenshots

A first launch: no saved settings, so the default view (naive, the fastest fused kernel the
backend has), the lesson strip at its first step and the CPU backend measuring N = --seq. Once
the first results are drawn it saves first_run_<W>x<H>.png as 256-colour palette PNGs
(app/export/plot_images.palette_png_bytes), prints what, if anything, is cut, and exits 1 if
something is.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SCREEN = ROOT / "tests" / "data" / "offscreen_1920x1080.json"
if os.environ.get("QT_QPA_PLATFORM", "offscreen") == "offscreen":  # a 1920×1080 desktop
    os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={SCREEN}"

import app  # noqa: E402, F401  (Qt work-arounds before any Qt call)

SIZES = ((1280, 800), (1920, 1080))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for first_run_<W>x<H>.png")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda", "auto"))
    ap.add_argument("--force", action="store_true", help="replace existing files")
    args = ap.parse_args(argv)

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from app.export.plot_images import palette_png_bytes
    from app.launch import quiet_offscreen_chatter
    from app.window.main_window import MainWindow
    from gpu.files.fileio import atomic_write_bytes
    from tests.clipping import clipped

    quiet_offscreen_chatter()
    qapp = QApplication.instance() or QApplication(sys.argv)
    qapp.setStyle("Fusion")
    bad = 0
    args.out.mkdir(parents=True, exist_ok=True)
    for w, h in SIZES:
        folder = tempfile.mkdtemp()
        settings = QSettings(str(Path(folder) / "settings.ini"), QSettings.Format.IniFormat)
        settings.setValue("controls/seq_len", args.seq)
        window = MainWindow(settings=settings, backend=args.backend)
        window.resize(w, h)
        window.show()

        def wait(until: Callable[[], bool], seconds: float = 120.0) -> None:
            end = time.monotonic() + seconds
            while not until() and time.monotonic() < end:
                qapp.processEvents()
                time.sleep(0.005)

        def drawn(window=window) -> bool:
            s = window.state.value
            if s.backend is None or window.runner.busy or window.animation is None:
                return False
            return all(
                window.measurements.store.get(s.config, a, s.backend.key, s.run_budget)
                for a in s.algorithms
            )

        wait(drawn)
        window.plots.flush_model()
        window.lesson.flush()
        wait(lambda window=window: bool(window.lesson.steps), 10.0)
        # what the views draw when the slider rests (coalesced timers) lands within this
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            qapp.processEvents()
            time.sleep(0.005)
        window.plots.flush_model()
        qapp.processEvents()
        problems = clipped(window)
        print(f"{w}×{h}: window {window.width()}×{window.height()}, {len(problems)} cut")
        for p in problems:
            print(f"  {p}")
        bad += bool(problems)
        path = args.out / f"first_run_{w}x{h}.png"
        if path.exists() and not args.force:
            print(f"{path} exists (use --force to replace it)", file=sys.stderr)
            return 2
        atomic_write_bytes(path, palette_png_bytes(window.grab().toImage()), overwrite=True)
        print(f"  wrote {path}")
        window.close()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
