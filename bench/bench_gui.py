"""GUI latency benchmark: slider move → repainted plots (cached results), and cold start.

    QT_QPA_PLATFORM=offscreen python bench/bench_gui.py [--moves 200] [--starts 5]

1. Slider → paint: every N of the slider's scale is measured first (a model-based backend, so
   the numbers cost nothing), then the slider moves back and forth; each sample is the time from
   `setValue` until every N plot (memory, timing, traffic) and the roofline have painted again.
   The runner has nothing to do (all cached), so this is the GUI's own cost. Target: median
   ≤ 16 ms.
2. Cold start: a fresh Python process imports the app, builds the window and shows it; the
   sample is the wall time from launching the process to the window's first paint event, as
   the parent sees it. Target: ≤ 2 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _quiet_qt() -> None:
    """Drop the offscreen plugin's 'does not support propagateSizeHints()' chatter."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(mode, context, message):  # type: ignore[no-untyped-def]
        if "propagateSizeHints" not in message:
            sys.stderr.write(message + "\n")

    qInstallMessageHandler(handler)


class ModelBackend:
    """Answers instantly from the cost model (times at 1 TFLOP/s): GUI cost only, no compute."""

    name = "model"

    def device_info(self):  # type: ignore[no-untyped-def]
        from gpu.results import DeviceInfo

        return DeviceInfo("model", "cost model (benchmark)", 80 * 10**9, 80 * 10**9)

    def algorithms(self):  # type: ignore[no-untyped-def]
        return ("naive", "tiled")

    def run(self, config, algorithm, options=None):  # type: ignore[no-untyped-def]
        from gpu.costmodel import algorithm_cost
        from gpu.results import KernelTime, RunResult

        cost = algorithm_cost(config, algorithm)
        base = dict(
            config=config,
            algorithm=algorithm,
            backend=self.name,
            device="model",
            model_peak_bytes=cost.peak_bytes,
            hbm_bytes=cost.hbm_bytes,
            flops=cost.flops,
        )
        if options is not None and options.budget_bytes and cost.peak_bytes > options.budget_bytes:
            return RunResult(**base, oom=True, message="over budget")
        times = tuple(KernelTime(k.name, max(k.flops, k.hbm_bytes) / 1e9) for k in cost.kernels)
        return RunResult(**base, kernel_times=times, peak_bytes=cost.peak_bytes, repeats=1)


#: GUI-thread CPU time of each move of the last bench_slider run (robust to other load).
LAST_CPU: list[float] = []


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class _PaintWatch:
    """Records when each watched widget last received a Paint event."""

    def __init__(self, widgets):  # type: ignore[no-untyped-def]
        from PySide6.QtCore import QEvent, QObject

        watch = self

        class Filter(QObject):
            def eventFilter(self, obj, event):  # type: ignore[no-untyped-def]
                if event.type() == QEvent.Type.Paint:
                    watch.painted.add(obj)
                return False

        self.painted: set = set()
        self.filter = Filter()
        self.targets = [w.viewport() for w in widgets]
        for t in self.targets:
            t.installEventFilter(self.filter)

    def all_painted(self) -> bool:
        return all(t in self.painted for t in self.targets)


def _settings(folder: str):  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QSettings

    s = QSettings(os.path.join(folder, "bench.ini"), QSettings.Format.IniFormat)
    s.setValue("controls/seq_len", 1024)
    s.setValue("view/explain", True)
    return s


def bench_slider(moves: int) -> list[float]:
    from PySide6.QtWidgets import QApplication

    _quiet_qt()
    app = QApplication.instance() or QApplication([])
    from app.main_window import MainWindow

    with tempfile.TemporaryDirectory() as folder:
        window = MainWindow(backend_factory=lambda name: ModelBackend(), settings=_settings(folder))
        window.resize(1600, 1000)
        window.show()
        deadline = time.monotonic() + 10
        while window.backend is None and time.monotonic() < deadline:
            app.processEvents()
        # Measure every N of the scale first, so every move below is served from the cache.
        scale = window.controls.seq_scale
        for n in scale:
            window.controls.set_seq_len(n)
            window.sweep()
            while window.runner.busy:
                app.processEvents()
                time.sleep(0.001)
        for _ in range(20):
            app.processEvents()
        runs_before = window.runner.stats.runs_started
        plots = window.plots.plots
        watch = _PaintWatch(plots)
        slider = window.controls.slider
        positions = [i for i in range(slider.maximum() + 1)]
        positions += positions[::-1]
        samples: list[float] = []
        cpu_samples: list[float] = []
        i = 0
        while len(samples) < moves:
            pos = positions[i % len(positions)]
            i += 1
            if pos == slider.value():
                continue
            watch.painted.clear()
            c0 = time.thread_time()
            t0 = time.perf_counter()
            slider.setValue(pos)
            while not watch.all_painted():
                app.processEvents()
                if time.perf_counter() - t0 > 2:
                    break
            samples.append((time.perf_counter() - t0) * 1e3)
            cpu_samples.append((time.thread_time() - c0) * 1e3)
        assert window.runner.stats.runs_started == runs_before, "moves were not cached"
        window.close()
    LAST_CPU[:] = cpu_samples
    return samples


def bench_cold_start(runs: int) -> list[float]:
    samples = []
    env = dict(
        os.environ,
        TILESCOPE_BENCH_CHILD="1",
        QT_QPA_PLATFORM="offscreen",
    )
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, __file__], env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("painted"):
                samples.append(time.perf_counter() - t0)
                break
        proc.wait(timeout=60)
    return samples


def _child_first_paint() -> int:
    """In the child: build and show the window, print 'painted' at its first paint, exit."""
    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QApplication

    from app.launch import _application
    from app.main_window import MainWindow

    _quiet_qt()
    app = _application()
    folder = tempfile.mkdtemp()
    window = MainWindow(settings=_settings(folder))

    class Filter(QObject):
        def eventFilter(self, obj, event):  # type: ignore[no-untyped-def]
            if event.type() == QEvent.Type.Paint:
                obj.removeEventFilter(self)
                QTimer.singleShot(0, _done)
            return False

    def _done() -> None:
        print("painted", flush=True)
        window.close()
        QApplication.quit()

    keep = Filter()
    window.plots.memory.viewport().installEventFilter(keep)
    window.show()
    app.exec()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    if os.environ.get("TILESCOPE_BENCH_CHILD"):
        return _child_first_paint()
    lat = bench_slider(args.moves)
    starts = bench_cold_start(args.starts)
    print(
        f"slider move -> repainted plots (cached, {len(lat)} moves): "
        f"median {statistics.median(lat):.1f} ms, p95 {_percentile(lat, 0.95):.1f} ms, "
        f"max {max(lat):.1f} ms  (target: median <= 16 ms); GUI-thread CPU per move: "
        f"median {statistics.median(LAST_CPU):.1f} ms"
    )
    print(
        f"cold start -> first painted window ({len(starts)} runs): "
        f"median {statistics.median(starts):.2f} s, max {max(starts):.2f} s  (target: <= 2 s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
