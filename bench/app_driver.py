"""The desktop app as `python main.py` runs it, with an MP4 export of the tile animation started
from a timer: the user's File ▸ Export, at a moment the benchmark chooses.

    python bench/app_driver.py mp4-at SECONDS --out FILE.mp4
        the app; SECONDS after the window is shown, an MP4 export to FILE.mp4 starts and
        "export started" goes to stderr (bench/signal_trials.py then signals the process)
    python bench/app_driver.py close-at SECONDS --open FILE
        the app opening FILE (`main.py --open FILE`); SECONDS after the window is shown it is
        closed as a user closes it, and "closing" goes to stderr (bench/signal_trials.py
        --close-during-open measures how long the program takes to end after that)
    python bench/app_driver.py mp4-during-compute --count 20 --out FOLDER [--seq 4096]
        the app on the CPU backend; a sweep up to N = --seq, and while it computes one MP4
        export after another (--count in all), each started while a run is in flight. Prints
        one line per export (its seconds, the GUI thread's longest gap while it ran) and exits
        0 when all were written. A freeze shows as no line for a long time: the caller's
        timeout decides (bench/signal_trials.py --mp4-during-compute).

Everything else is main.py's own entry point (signal handlers, exit status, exit hooks).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

#: The export: small frames, enough of them that the encoder runs a while.
SIZE = (864, 448)


def _when_shown(act) -> None:  # type: ignore[no-untyped-def]
    """Call `act(window)` once the main window is shown (from inside main.py's run)."""
    from app.window import main_window

    real_show = main_window.MainWindow.show

    def show(self) -> None:  # type: ignore[no-untyped-def]
        real_show(self)
        act(self)

    main_window.MainWindow.show = show  # type: ignore[method-assign]


def mp4_at(seconds: float, out: str) -> None:
    from PySide6.QtCore import QTimer

    from app.window.file_menu import ExportRequest

    def start(window) -> None:  # type: ignore[no-untyped-def]
        def go() -> None:
            window.file_menu.export(ExportRequest("mp4", out, size=SIZE, frames=240))
            print("export started", file=sys.stderr, flush=True)

        QTimer.singleShot(round(seconds * 1000), go)

    _when_shown(start)


def close_at(seconds: float) -> None:
    from PySide6.QtCore import QTimer

    def start(window) -> None:  # type: ignore[no-untyped-def]
        def go() -> None:
            print("closing", file=sys.stderr, flush=True)
            window.close()

        QTimer.singleShot(round(seconds * 1000), go)

    _when_shown(start)


def mp4_during_compute(count: int, folder: str, seq: int) -> None:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.window.file_menu import ExportRequest

    done: list[int] = []
    clock = {"last": time.monotonic(), "gap": 0.0, "t0": 0.0}

    def tick() -> None:
        now = time.monotonic()
        clock["gap"] = max(clock["gap"], now - clock["last"])
        clock["last"] = now

    def start(window) -> None:  # type: ignore[no-untyped-def]
        timer = QTimer(window)
        timer.timeout.connect(tick)
        timer.start(10)

        def begin() -> None:
            if window.backend is None:  # still starting
                QTimer.singleShot(100, begin)
                return
            if not window.runner.busy:
                window.measurements.store.clear()
                window.controls.set_config(window.config.with_(seq_len=seq))
                window.measurements.sweep()
                QTimer.singleShot(200, begin)  # the sweep's first run starts
                return
            i = len(done)
            clock.update(gap=0.0, last=time.monotonic(), t0=time.monotonic())
            path = os.path.join(folder, f"tiles{i}.mp4")
            if not window.file_menu.export(ExportRequest("mp4", path, size=SIZE, frames=24)):
                print(f"export {i} refused", flush=True)
                QApplication.exit(1)

        def exported(path: str) -> None:
            done.append(1)
            took = time.monotonic() - clock["t0"]
            busy = "computing" if window.runner.busy else "idle"
            print(
                f"export {len(done)} {took:.2f} s, longest GUI gap {clock['gap'] * 1e3:.0f} ms, "
                f"runner {busy} at its end",
                flush=True,
            )
            if len(done) >= count:
                QApplication.exit(0)
            else:
                QTimer.singleShot(0, begin)

        window.file_menu.exported.connect(exported)
        window.file_menu.exportFailed.connect(lambda msg: (print(msg), QApplication.exit(1)))
        QTimer.singleShot(0, begin)

    _when_shown(start)


def main() -> int:
    from gpu import exit_status

    exit_status.install()  # as main.py does first
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("mp4-at", "mp4-during-compute", "close-at"))
    parser.add_argument("seconds", nargs="?", type=float, default=0.0)
    parser.add_argument("--out", default="")
    parser.add_argument("--open", default="")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seq", type=int, default=4096)
    args = parser.parse_args()
    argv = []
    if args.mode == "mp4-at":
        mp4_at(args.seconds, args.out)
    elif args.mode == "close-at":
        close_at(args.seconds)
        argv = ["--open", args.open]
    else:
        mp4_during_compute(args.count, args.out, args.seq)
    import main as entry

    sys.argv[1:] = argv
    return entry.run(argv)


if __name__ == "__main__":
    sys.exit(main())
