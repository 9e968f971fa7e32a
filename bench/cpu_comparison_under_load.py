"""The window's own comparison of naive and tiled on the CPU backend, on a quiet machine and with
an extra CPU-heavy process running: does it choose the same winner, and what spreads does it
show? The app's real window (offscreen), its real runner (settling, interleaved rounds: app/work/
runner.py) and the CPU backend, at one N; the verdict is the explain pane's
(app/state/time_comparison.py).

    QT_QPA_PLATFORM=offscreen python bench/cpu_comparison_under_load.py [--seq 1024] [--burners 1]

`--burners K` runs K processes that spin on the CPU for the whole of the loaded measurement
(one per core keeps every core busy). Prints one line per condition and exits 1 when the
loaded one names another winner than the quiet one.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import app  # noqa: E402, F401  (Qt work-arounds before any Qt call)


def burn(stop: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    """Keep one core busy until told to stop."""
    x = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        for _ in range(100_000):
            x += 1


def window_verdict(seq: int, timeout_s: float = 600.0):  # type: ignore[no-untyped-def]
    """Start the window on the CPU backend at N = `seq` and wait for naive's and tiled's
    results there; returns (TimeComparison, {algorithm: RunResult})."""
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from app.launch import _application, quiet_offscreen_chatter
    from app.state.time_comparison import compare_times
    from app.window.main_window import MainWindow
    from gpu.algorithms import NAIVE, TILED

    quiet_offscreen_chatter()
    qapp = _application()
    with tempfile.TemporaryDirectory() as folder:
        settings = QSettings(str(Path(folder) / "s.ini"), QSettings.Format.IniFormat)
        settings.setValue("controls/seq_len", seq)
        window = MainWindow(settings=settings, backend="cpu")
        window.show()
        deadline = time.monotonic() + timeout_s
        results: dict = {}
        while time.monotonic() < deadline:
            qapp.processEvents()
            s = window.state.value
            if s.backend is not None:
                results = {
                    a: r
                    for a in (NAIVE, TILED)
                    if (r := window.store.get(s.config, a, s.backend.key, s.run_budget))
                }
                if len(results) == 2:
                    break
            time.sleep(0.01)
        window.close()
        QApplication.processEvents()
    if len(results) < 2:
        raise SystemExit("the window measured nothing in time")
    return compare_times(results, TILED, "cpu"), results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--burners", type=int, default=1)
    args = ap.parse_args(argv)

    verdicts = {}
    for label, burners in (("quiet", 0), (f"{args.burners} CPU-heavy process(es)", args.burners)):
        stop = multiprocessing.Event()
        procs = [multiprocessing.Process(target=burn, args=(stop,)) for _ in range(burners)]
        for p in procs:
            p.start()
        try:
            verdict, _ = window_verdict(args.seq)
        finally:
            stop.set()
            for p in procs:
                p.join(10)
        verdicts[label] = verdict
        winner = verdict.faster if verdict.decided else "cannot tell"
        print(f"{label}: winner {winner} · {verdict.text}", flush=True)
    quiet, loaded = verdicts.values()
    same = loaded.decided and quiet.decided and loaded.faster == quiet.faster
    print("same winner" if same else "NOT the same winner")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
