"""GUI latency benchmark: how long the GUI thread is busy, and how long it ever stalls.

    QT_QPA_PLATFORM=offscreen python bench/bench_gui.py [--backend model|cuda|cpu]
        [--moves 200] [--seq-max 131072] [--starts 5] [--out bench_gui.json]
    QT_QPA_PLATFORM=xcb xvfb-run -s "-screen 0 1920x1080x24" python bench/bench_gui.py ...

Every figure is taken on the real main window at 1600×1000 with the explain pane open, offscreen
or on a real X display (Qt's xcb platform, e.g. under Xvfb). `--backend model` (the default)
answers from the cost model (gpu.backends.model_backend, `--delay-ms` per run): the
GUI's own cost on any machine. `--backend cuda` measures on the GPU.

1. Slider move → frame presented, with the Measurements tab and with the Tiles tab shown. Every
   N of the slider's scale (up to --seq-max) is measured first, so the runner has nothing to do;
   then the slider is dragged over the whole scale and back, one move per 16 ms frame at most
   (as a mouse delivers them), each move an arrow key's press and release sent to the slider
   (`QTest.keyClick`: Qt's event delivery, one step of the scale). A sample is the wall time
   from the key event until the last frame the move painted is presented: painted, and on xcb
   acknowledged by the X server (a `QGuiApplication.sync()` round trip right after the paint),
   with nothing painted for 20 ms after it. Targets: median ≤ 8 ms, p95 ≤ 16. On xcb, 60 more
   moves follow, each left to come to rest, then (untimed) the X server's image of each view
   shown is compared with a fresh render of it (tests/real_display.py): a speed figure counts
   only where the screen stays true. The drag reaches N = 131072 (the top of the scale) on both
   tabs. Then a whole-window repaint per move: `setValue`, then `window.grab()` (every widget of
   the window painted into a picture), the wall time of the two together (no target: a figure
   of what painting everything costs).
2. GUI-thread CPU time of a heads change and of a dtype change (Measurements tab, N =
   --change-n): `time.thread_time()` of the GUI thread from the change until the window is idle
   again (the measurements it asks for answered and drawn), minus an idle loop of the same
   length, in total and outside paint events (the GUI thread's own work besides painting; the
   target is stated for this one). Each heads change is to a shape not seen before, and the
   GUI process's cost-model memo is cleared before each change. Target: ≤ 50 ms.
3. Longest GUI-thread stall: a 10 ms heartbeat QTimer runs and the largest gap between its ticks
   is reported, during a drag on the Tiles tab up to --seq-max, a sweep up to --sweep-max
   (default --seq-max; the store is cleared first), a 4000×2500 PNG export of the plots, and
   opening the shipped recording (resources/recorded/h200_sweep.json). Target: no gap over
   50 ms. `slowest_events` in the JSON lists the longest events behind each stall.
   `--only files` measures the same without the drag and the sweep: the PNG export, a
   4000×2500 SVG export of the plots and the open.
4. Longest GUI-thread stall under load (`--only storm,failed_export`), with the same heartbeat:
   a config storm of --storm-s seconds (every 50–150 ms a random change of heads, dtype, N or
   the tab shown, as a user trying things fast; on --backend cpu the runs are real NumPy work
   competing for the machine's cores), and --failed-exports PNG exports of the plots at
   4000×2500 that fail as on a full disk (the process may write files of 64 KiB at most, so the
   write fails with EFBIG, the way ENOSPC does). Target: no gap over 50 ms; a failing export as
   quiet as a succeeding one.
5. The trace at the format's limits (`--only trace`): bench/limit_trace.py writes 1,048,576
   blocks on 1,024 SMs (75 MB) once into the temporary folder; it is opened in the Tiles tab's
   trace mode (File ▸ Open trace…) until shown and 2 s more, then the Measurements tab is shown
   and the Tiles tab again. Reported: the longest heartbeat gap of the open, the milliseconds
   from showing the Tiles tab again to its trace view's paint, and the longest gap meanwhile.
   Targets: no gap over 50 ms, shown again within 50 ms.
6. Exports during a config storm (`--only export_storm`): a PNG of the plots at 1600×1000,
   an SVG at 1600×1000 and a PNG at 6000×4000, each started while the storm of 4. goes on and
   the storm kept up until it has ended, --storm-exports rounds, after 10 s of the storm alone.
   Reported: the longest gap from each export's start to its end, the storm alone's, and the
   events that took the most of the GUI thread's CPU meanwhile (on a loaded machine a gap
   also holds the waits for a core). Target: no gap over 50 ms.
7. A ring run of about 200,000 timeline events (`--only ring`, bench/large_ring.py): the
   recording opened with File ▸ Open and the Ring tab shown for 2 s. Target: no gap over 50 ms.
8. Cold start (--starts runs): a fresh process imports the app, builds and shows the window; the
   sample is the wall time from launching it to the window's first paint. Target: ≤ 2 s.

Prints a short table last; `--out` also writes every sample as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

RECORDING = ROOT / "resources" / "recorded" / "h200_sweep.json"
FRAME_S = 0.016
#: A move's frames are over once nothing has painted for this long (longer than a frame).
QUIET_S = 0.02
#: A checked move is at rest once nothing has painted for this long and nothing is under way.
REST_S = 0.3
#: Moves whose screen is checked at rest, after the timed drag (on a real display).
CHECKED_MOVES = 60
HEARTBEAT_MS = 10


def _quiet_qt() -> None:
    """Drop the offscreen plugin's 'does not support propagateSizeHints()' chatter."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(mode, context, message):  # type: ignore[no-untyped-def]
        if "propagateSizeHints" not in message:
            sys.stderr.write(message + "\n")

    qInstallMessageHandler(handler)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "median": statistics.median(values),
        "p95": _percentile(values, 0.95),
        "max": max(values),
    }


def backend_factory(kind: str, delay_ms: float):  # type: ignore[no-untyped-def]
    if kind == "model":
        from gpu.algorithms import ALGORITHMS
        from gpu.backends.model_backend import CostModelBackend

        backend = CostModelBackend(
            name="model",
            device="cost model (benchmark)",
            memory_bytes=80 * 10**9,
            algorithms=tuple(ALGORITHMS),
            delay_s=delay_ms / 1e3,
            record_calls=False,
        )
        return lambda name: backend
    from gpu.backend_factory import create_backend

    # The window's own fallbacks (to "cpu") still work; main() says when they happened.
    return lambda name: create_backend(kind if name in ("auto", kind) else name)


# ------------------------------------------------------------------------------------ measuring


def make_app():  # type: ignore[no-untyped-def]
    """A QApplication that counts the GUI thread's CPU time spent in paint events, and notes
    every top-level event that kept the GUI thread busy for over 20 ms (what a stall was)."""
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    class CountingApp(QApplication):
        paint_cpu_s = 0.0
        slow_events: ClassVar[list] = []  # (ms, event type, receiver class, objectName)
        #: The same for events that took more than 10 ms of the GUI thread's CPU: (CPU ms,
        #: ...). A wall time on a loaded machine also holds the waits for a core; this not.
        cpu_events: ClassVar[list] = []
        _depth = 0
        _painting = False

        def notify(self, receiver, event):  # type: ignore[no-untyped-def]
            top = CountingApp._depth == 0
            paint = event.type() == QEvent.Type.Paint and not CountingApp._painting
            CountingApp._depth += 1
            CountingApp._painting |= paint
            c0, t0 = time.thread_time(), time.perf_counter()
            try:
                return super().notify(receiver, event)
            finally:
                CountingApp._depth -= 1
                if paint:
                    CountingApp._painting = False
                    CountingApp.paint_cpu_s += time.thread_time() - c0
                ms = (time.perf_counter() - t0) * 1e3
                cpu_ms = (time.thread_time() - c0) * 1e3
                if top and (ms > 20 or cpu_ms > 10):
                    try:
                        what = (type(receiver).__name__, receiver.objectName())
                    except RuntimeError:  # deleted meanwhile
                        what = ("?", "")
                    if ms > 20:
                        CountingApp.slow_events.append((round(ms, 1), event.type().name, *what))
                    if cpu_ms > 10:
                        CountingApp.cpu_events.append((round(cpu_ms, 1), event.type().name, *what))

    app = QApplication.instance() or CountingApp([])
    app.setStyle("Fusion")
    return app


def slow_events(app, since: int = 0, top: int = 5, kind: str = "slow_events") -> list:  # type: ignore[no-untyped-def]
    """The longest events noted since index `since` (see make_app); `kind` "cpu_events": by
    the GUI thread's CPU time."""
    events = getattr(type(app), kind, [])[since:]
    return sorted(events, reverse=True)[:top]


def paint_cpu_ms(app) -> float:  # type: ignore[no-untyped-def]
    return getattr(type(app), "paint_cpu_s", 0.0) * 1e3


class Heartbeat:
    """A 10 ms QTimer on the GUI thread; the largest gap between its ticks is the longest
    stretch the GUI thread could not run a timer (a stall). `slowest` lists the longest events
    handled meanwhile (what the stall was)."""

    def __init__(self) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(HEARTBEAT_MS)
        self.timer.timeout.connect(self._tick)
        self.gaps: list[float] = []
        self._last = 0.0

    def _tick(self) -> None:
        now = time.perf_counter()
        self.gaps.append((now - self._last) * 1e3)
        self._last = now

    def __enter__(self) -> Heartbeat:
        from PySide6.QtWidgets import QApplication

        self.gaps = []
        self._since = len(getattr(type(QApplication.instance()), "slow_events", []))
        self._since_cpu = len(getattr(type(QApplication.instance()), "cpu_events", []))
        self._last = time.perf_counter()
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        from PySide6.QtWidgets import QApplication

        self._tick()
        self.timer.stop()
        self.slowest = slow_events(QApplication.instance(), self._since)
        self.slowest_cpu = slow_events(QApplication.instance(), self._since_cpu, kind="cpu_events")

    @property
    def max_gap(self) -> float:
        return max(self.gaps, default=0.0)


class PaintWatch:
    """Records which watched widgets received a Paint event."""

    def __init__(self) -> None:
        from PySide6.QtCore import QEvent, QObject

        watch = self

        class Filter(QObject):
            def eventFilter(self, obj, event):  # type: ignore[no-untyped-def]
                if event.type() == QEvent.Type.Paint:
                    watch.painted.add(obj)
                return False

        self.painted: set = set()
        self.filter = Filter()
        self.targets: list = []

    def watch(self, widgets) -> None:  # type: ignore[no-untyped-def]
        for t in self.targets:
            t.removeEventFilter(self.filter)
        self.targets = list(widgets)
        for t in self.targets:
            t.installEventFilter(self.filter)

    def all_painted(self) -> bool:
        return all(t in self.painted for t in self.targets)


def spin(app, seconds: float) -> None:  # type: ignore[no-untyped-def]
    """Run the event loop for `seconds` (a real loop: idle costs no CPU)."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(max(0, round(seconds * 1e3)), loop.quit)
    loop.exec()


def wait_until(app, done, timeout_s: float = 600.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        spin(app, 0.005)
    return True


def wait_idle(app, window, timeout_s: float = 600.0) -> None:  # type: ignore[no-untyped-def]
    wait_until(app, lambda: not window.runner.busy, timeout_s)
    spin(app, 0.15)  # results land, coalesced redraws and throttled panes catch up
    wait_until(app, lambda: not window.runner.busy, timeout_s)


def clear_model_memo() -> None:
    from app.state.model import cache as model_cache

    model_cache.clear()


def make_window(app, folder: str, factory):  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QSettings

    from app.window.main_window import MainWindow

    s = QSettings(os.path.join(folder, "bench.ini"), QSettings.Format.IniFormat)
    s.setValue("controls/seq_len", 1024)
    s.setValue("view/explain", True)
    window = MainWindow(backend_factory=factory, settings=s)
    window.resize(1600, 1000)
    window.show()
    if not wait_until(app, lambda: window.backend is not None, 300):
        raise SystemExit(f"bench_gui: no backend: {window.banner.message}")
    wait_until(app, lambda: window.animation is not None, 30)
    return window


def show_tab(app, window, index: int) -> None:  # type: ignore[no-untyped-def]
    window.tabs.setCurrentIndex(index)
    spin(app, 0.3)


def scale_up_to(window, seq_max: int) -> list[int]:  # type: ignore[no-untyped-def]
    return [n for n in window.controls.seq_scale if n <= seq_max]


def measure_scale(app, window, seq_max: int) -> None:  # type: ignore[no-untyped-def]
    """Measure every N of the slider's scale, so the moves below are served from the cache."""
    for n in scale_up_to(window, seq_max):
        window.controls.set_seq_len(n)
        window.measurements.sweep()
        wait_idle(app, window)


# ------------------------------------------------------------------------------------ scenarios


class Frames:
    """When the window last presented a frame: the end of the last paint, and on a real display
    the X server's acknowledgement of everything the app sent up to then (`QGuiApplication.sync`
    after the paint: the flushed backing store is on the server)."""

    def __init__(self, app) -> None:  # type: ignore[no-untyped-def]
        from PySide6.QtCore import QEvent, QObject

        frames = self
        self.app = app
        self.painted = 0  # paint events seen
        self.presented_at = 0.0  # perf_counter() of the last frame known to be on the screen
        self.presented_cpu = 0.0  # the GUI thread's CPU time then

        class Filter(QObject):
            def eventFilter(self, obj, event):  # type: ignore[no-untyped-def]
                if event.type() == QEvent.Type.Paint:
                    frames.painted += 1
                return False

        self.filter = Filter()
        app.installEventFilter(self.filter)

    def close(self) -> None:
        self.app.removeEventFilter(self.filter)

    def until_quiet(self, quiet_s: float, limit_s: float = 5.0) -> None:
        """Run the event loop until nothing has painted for `quiet_s`; each frame painted
        meanwhile is synced to the display as soon as the loop returns from painting it."""
        seen = self.painted
        last = time.perf_counter()
        end = last + limit_s
        while True:
            self.app.processEvents()
            now = time.perf_counter()
            if self.painted != seen:
                seen = self.painted
                self.app.sync()  # a round trip: the server has the frame
                self.presented_at = last = time.perf_counter()
                self.presented_cpu = time.thread_time()
            elif now - last >= quiet_s or now > end:
                return
            else:
                time.sleep(0.0002)


def bench_slider(app, window, moves: int, seq_max: int, tab: int, check: bool = False) -> dict:  # type: ignore[no-untyped-def]
    """Drag over the scale and back, one move per frame at most. A sample is the time from
    `setValue` until the last frame that the move painted is presented (nothing painted for
    QUIET_S after it). With `check` (a real display), CHECKED_MOVES more moves follow, each
    left to come to rest (the window idle, nothing painted for REST_S), then the X server's
    image of the views shown is compared with a fresh render of them (untimed)."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QToolTip

    from tests.real_display import PIXEL_SHARE_TOLERANCE, screen_mismatches, window_busy

    show_tab(app, window, tab)
    if check:  # the pointer off the window: no hover read-out or tooltip over what is checked
        from PySide6.QtGui import QCursor

        QCursor.setPos(window.screen().geometry().bottomRight())
    slider = window.controls.slider
    top = window.controls.seq_scale.index(scale_up_to(window, seq_max)[-1])
    positions = list(range(top + 1))
    positions += positions[::-1]
    frames = Frames(app)
    runs_before = window.runner.stats.runs_started
    samples: list[float] = []
    cpu: list[float] = []
    untrue: list[dict] = []
    worst_share = 0.0
    checked = 0
    i = 0
    last_move = 0.0
    with Heartbeat() as beat:
        while len(samples) < moves:
            pos = positions[i % len(positions)]
            i += 1
            if pos == slider.value():
                continue
            while time.perf_counter() - last_move < FRAME_S:
                app.processEvents()
            # The input event a user's arrow key sends (a step of the scale, as a drag's mouse
            # moves deliver them), through Qt's event delivery to the slider.
            key = Qt.Key.Key_Right if pos > slider.value() else Qt.Key.Key_Left
            c0 = time.thread_time()
            t0 = last_move = time.perf_counter()
            painted = frames.painted
            QTest.keyClick(slider, key)
            frames.until_quiet(QUIET_S)
            if frames.painted == painted:
                continue  # nothing painted (cannot happen: the slider moved)
            samples.append((frames.presented_at - t0) * 1e3)
            cpu.append((frames.presented_cpu - c0) * 1e3)
        spin(app, 0.3)
    cached = window.runner.stats.runs_started == runs_before
    if check:  # the same moves again, each checked once the window is at rest (untimed)
        for k in range(min(moves, CHECKED_MOVES)):
            pos = positions[(i + k) % len(positions)]
            if pos == slider.value():
                continue
            slider.setValue(pos)
            frames.until_quiet(QUIET_S)
            wait_until(app, lambda: not window_busy(window), 60)
            frames.until_quiet(REST_S)
            QToolTip.hideText()  # a tooltip is a window of its own over the views
            frames.until_quiet(QUIET_S)
            shares = screen_mismatches(window)
            checked += 1
            worst_share = max([worst_share, *shares.values()])
            bad = {v: s for v, s in shares.items() if s > PIXEL_SHARE_TOLERANCE}
            if bad:
                untrue.append({"n": window.config.seq_len, "views": bad})
        i += min(moves, CHECKED_MOVES)
    grabs: list[float] = []
    for k in range(min(moves, len(positions))):
        pos = positions[(i + k) % len(positions)]
        if pos == slider.value():
            continue
        t0 = time.perf_counter()
        slider.setValue(pos)
        window.grab()
        grabs.append((time.perf_counter() - t0) * 1e3)
        spin(app, FRAME_S)
    out = {
        "latency_ms": _summary(samples),
        "gui_cpu_ms": _summary(cpu),
        "window_grab_ms": _summary(grabs),
        "top_n": window.controls.seq_scale[top],
        "max_heartbeat_gap_ms": beat.max_gap,
        "slowest_events": beat.slowest,
        "all_cached": cached,
        "samples_ms": samples,
    }
    if check:
        out["screen_checked_moves"] = checked
        out["screen_untrue_moves"] = untrue
        out["screen_worst_share"] = worst_share
    return out


def idle_cpu_ms(app, seconds: float) -> float:  # type: ignore[no-untyped-def]
    c0 = time.thread_time()
    spin(app, seconds)
    return (time.thread_time() - c0) * 1e3


def gui_cost(app, window, change, settle_s: float = 0.4) -> tuple[float, float, float, float]:  # type: ignore[no-untyped-def]
    """GUI-thread CPU ms of `change()` until idle again (minus what an idle loop costs over the
    same wall time, the heartbeat's ticks included), the part of it spent painting, the longest
    stall meanwhile, and the wall seconds from the change until the runner was idle."""
    clear_model_memo()
    wait_idle(app, window)
    with Heartbeat():  # its ticks cost the GUI thread ~20 ms a second: the bench's, not the app's
        idle_rate = idle_cpu_ms(app, settle_s) / settle_s  # ms of CPU per wall second, idle
    with Heartbeat() as beat:
        c0, t0, p0 = time.thread_time(), time.perf_counter(), paint_cpu_ms(app)
        change()
        spin(app, settle_s)
        wait_until(app, lambda: not window.runner.busy)
        spin(app, 0.1)
        cpu = (time.thread_time() - c0) * 1e3
        wall = time.perf_counter() - t0
        paint = paint_cpu_ms(app) - p0
    return max(0.0, cpu - idle_rate * wall), paint, beat.max_gap, wall


def bench_changes(app, window, count: int, n: int) -> dict:  # type: ignore[no-untyped-def]
    show_tab(app, window, 0)
    c = window.controls
    c.set_seq_len(n)
    wait_idle(app, window)
    heads, heads_paint, heads_gap, dtype, dtype_paint, dtype_gap = [], [], [], [], [], []
    walls = []
    for i in range(count):
        value = 13 + i  # a shape never seen before each time
        ms, paint, gap, wall = gui_cost(app, window, lambda v=value: c.heads.setValue(v))
        walls.append(wall)
        heads.append(ms)
        heads_paint.append(paint)
        heads_gap.append(gap)
    dtypes = ["bf16", "fp32", "fp16"]
    for i in range(count):
        d = dtypes[i % len(dtypes)]
        ms, paint, gap, wall = gui_cost(
            app, window, lambda d=d: c.dtype.setCurrentIndex(c.dtype.findData(d))
        )
        walls.append(wall)
        dtype.append(ms)
        dtype_paint.append(paint)
        dtype_gap.append(gap)
    c.heads.setValue(12)
    c.dtype.setCurrentIndex(c.dtype.findData("fp16"))
    wait_idle(app, window)
    return {
        "n": n,
        "heads_gui_cpu_ms": _summary(heads),
        "heads_paint_cpu_ms": _summary(heads_paint),
        "heads_gui_cpu_not_painting_ms": _summary(
            [a - b for a, b in zip(heads, heads_paint, strict=True)]
        ),
        "heads_max_heartbeat_gap_ms": max(heads_gap),
        "dtype_gui_cpu_ms": _summary(dtype),
        "dtype_paint_cpu_ms": _summary(dtype_paint),
        "dtype_gui_cpu_not_painting_ms": _summary(
            [a - b for a, b in zip(dtype, dtype_paint, strict=True)]
        ),
        "dtype_max_heartbeat_gap_ms": max(dtype_gap),
        "heads_samples_ms": heads,
        "dtype_samples_ms": dtype,
        "wall_s": walls,  # heads changes, then dtype changes
    }


def stall_drag(app, window, seq_max: int) -> dict:  # type: ignore[no-untyped-def]
    out = bench_slider(app, window, 2 * len(scale_up_to(window, seq_max)), seq_max, tab=1)
    return {
        "max_heartbeat_gap_ms": out["max_heartbeat_gap_ms"],
        "slowest_events": out["slowest_events"],
    }


def stall_sweep(app, window, seq_max: int) -> dict:  # type: ignore[no-untyped-def]
    show_tab(app, window, 0)
    window.controls.set_seq_len(scale_up_to(window, seq_max)[-1])
    wait_idle(app, window)
    window.measurements.store.clear()
    with Heartbeat() as beat:
        t0 = time.perf_counter()
        total = window.measurements.sweep()
        wait_idle(app, window)
        seconds = time.perf_counter() - t0
    return {
        "max_heartbeat_gap_ms": beat.max_gap,
        "runs": total,
        "seconds": seconds,
        "slowest_events": beat.slowest,
    }


def stall_export(app, window, folder: str, kind: str = "plots_png") -> dict:  # type: ignore[no-untyped-def]
    from app.window.file_menu import ExportRequest

    show_tab(app, window, 0)
    path = os.path.join(folder, "plots_4000x2500." + ("svg" if kind == "plots_svg" else "png"))
    fm = window.file_menu
    ended: list[str] = []
    fm.exported.connect(ended.append)
    fm.exportFailed.connect(ended.append)
    with Heartbeat() as beat:
        t0 = time.perf_counter()
        started = fm.export(ExportRequest(kind, path, size=(4000, 2500)))
        if started:
            wait_until(app, lambda: bool(ended), 120)
        seconds = time.perf_counter() - t0
        spin(app, 0.1)
    fm.exported.disconnect(ended.append)
    fm.exportFailed.disconnect(ended.append)
    ok = started and os.path.isfile(path) and ended == [path]
    size = os.path.getsize(path) if ok else 0
    return {
        "max_heartbeat_gap_ms": beat.max_gap,
        "ok": ok,
        "seconds": seconds,
        "bytes": size,
        "slowest_events": beat.slowest,
    }


def stall_open(app, window) -> dict:  # type: ignore[no-untyped-def]
    show_tab(app, window, 0)
    wait_idle(app, window)
    with Heartbeat() as beat:
        t0 = time.perf_counter()
        window.file_menu.open_file(str(RECORDING))
        wait_until(
            app,
            lambda: window.backend is not None and window.backend.info.backend == "replay",
            120,
        )
        wait_idle(app, window)
        seconds = time.perf_counter() - t0
    ok = window.backend is not None and window.backend.info.backend == "replay"
    return {
        "max_heartbeat_gap_ms": beat.max_gap,
        "ok": ok,
        "seconds": seconds,
        "slowest_events": beat.slowest,
    }


def stall_trace(app, window, path: Path) -> dict:  # type: ignore[no-untyped-def]
    """The trace at the format's limits (bench/limit_trace.py) opened in the Tiles tab's trace
    mode (File ▸ Open trace…) until it is shown and 2 s more, then the Measurements tab shown and
    the Tiles tab again: the longest heartbeat gaps, the open's seconds and the milliseconds
    from showing the Tiles tab again to its trace view's paint."""
    show_tab(app, window, 0)
    wait_idle(app, window)
    with Heartbeat() as beat:
        t0 = time.perf_counter()
        window.show_trace(str(path))
        panel = window.animation.trace_panel
        wait_until(app, lambda: panel.trace is not None and len(panel.trace.blocks) > 10**5, 900)
        seconds = time.perf_counter() - t0
        spin(app, 2.0)  # what the shown trace does next: its layout, its paints
    opened = {"max_heartbeat_gap_ms": beat.max_gap, "seconds": seconds, "info": panel.info.text()}
    opened["slowest_events"] = beat.slowest
    show_tab(app, window, 0)
    spin(app, 0.5)
    watch = PaintWatch()
    with Heartbeat() as again:
        watch.watch([panel.view])
        t0 = time.perf_counter()
        window.tabs.setCurrentWidget(window.animation)
        wait_until(app, watch.all_painted, 600)
        reshow_ms = (time.perf_counter() - t0) * 1e3
        spin(app, 1.0)
    return {
        "open": opened,
        "reshow_ms": reshow_ms,
        "reshow_max_heartbeat_gap_ms": again.max_gap,
        "reshow_slowest_events": again.slowest,
    }


def stall_ring(app, window, path: Path) -> dict:  # type: ignore[no-untyped-def]
    """A recording whose ring run holds about 200,000 timeline events (bench/large_ring.py)
    opened with File ▸ Open, then the Ring tab shown for 2 s: the longest heartbeat gap."""
    show_tab(app, window, 0)
    wait_idle(app, window)
    with Heartbeat() as beat:
        t0 = time.perf_counter()
        window.file_menu.open_file(str(path))
        wait_until(
            app,
            lambda: window.backend is not None and window.backend.info.backend == "replay",
            300,
        )
        wait_idle(app, window)
        seconds = time.perf_counter() - t0
        window.tabs.setCurrentWidget(window.ring_panel)
        spin(app, 2.0)
    return {
        "max_heartbeat_gap_ms": beat.max_gap,
        "seconds": seconds,
        "slowest_events": beat.slowest,
    }


def _storm_change(app, window, rng, changes: dict) -> None:  # type: ignore[no-untyped-def]
    """One change of the config storm (heads, dtype, N or the tab shown), then 50-150 ms of
    the event loop."""
    what = rng.choice(tuple(changes))
    changes[what] += 1
    if what == "tab":
        window.tabs.setCurrentIndex(rng.randrange(window.tabs.count()))
    else:
        scale = list(window.controls.seq_scale)
        value = {
            "heads": lambda: rng.choice((1, 2, 4, 8, 12, 16, 24, 32)),
            "dtype": lambda: rng.choice(("fp16", "bf16", "fp32")),
            "seq_len": lambda: rng.choice(scale[: max(1, len(scale) * 2 // 3)]),
        }[what]()
        window.controls.set_config(window.config.with_(**{what: value}))
    spin(app, rng.uniform(0.05, 0.15))


def stall_storm(app, window, seconds: float, seed: int = 1) -> dict:  # type: ignore[no-untyped-def]
    """Random config changes every 50-150 ms for `seconds` (heads, dtype, N, the tab shown)."""
    import random

    rng = random.Random(seed)
    changes = {"heads": 0, "dtype": 0, "seq_len": 0, "tab": 0}
    with Heartbeat() as beat:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            _storm_change(app, window, rng, changes)
        window.tabs.setCurrentIndex(0)
        wait_idle(app, window)
    gaps = sorted(beat.gaps)
    return {
        "max_heartbeat_gap_ms": beat.max_gap,
        "p99_heartbeat_gap_ms": gaps[int(0.99 * (len(gaps) - 1))] if gaps else 0.0,
        "gaps_over_50_ms": sum(g > 50 for g in gaps),
        "changes": changes,
        "seconds": seconds,
        "slowest_events": beat.slowest,
    }


#: The exports made during a config storm (`--only export_storm`): (kind, width, height).
STORM_EXPORTS = (("plots_png", 1600, 1000), ("plots_svg", 1600, 1000), ("plots_png", 6000, 4000))


def stall_export_storm(app, window, folder: str, rounds: int, seed: int = 1) -> dict:  # type: ignore[no-untyped-def]
    """Each of STORM_EXPORTS `rounds` times, started in the middle of a config storm that goes
    on until the export has ended (and at least 1 s): the longest heartbeat gap from the
    export's start to its end, per export."""
    import random

    from app.window.file_menu import ExportRequest

    rng = random.Random(seed)
    fm = window.file_menu
    ended: list[str] = []
    fm.exported.connect(ended.append)
    fm.exportFailed.connect(ended.append)
    changes = {"heads": 0, "dtype": 0, "seq_len": 0, "tab": 0}
    with Heartbeat() as alone:  # the storm without an export, for comparison
        end = time.perf_counter() + 10.0
        while time.perf_counter() < end:
            _storm_change(app, window, rng, changes)
    rows = []
    try:
        for k in range(rounds):
            for kind, w, h in STORM_EXPORTS:
                path = os.path.join(folder, f"storm_{k}_{w}x{h}.{kind.rsplit('_', 1)[1]}")
                ended.clear()
                for _ in range(5):  # the storm is under way when the export starts
                    _storm_change(app, window, rng, changes)
                with Heartbeat() as beat:
                    t0 = time.perf_counter()
                    started = fm.export(ExportRequest(kind, path, size=(w, h)))
                    while started and not ended and time.perf_counter() - t0 < 300:
                        _storm_change(app, window, rng, changes)
                    seconds = time.perf_counter() - t0
                rows.append({
                    "export": f"{kind} {w}x{h}",
                    "ok": bool(started) and ended == [path] and os.path.isfile(path),
                    "max_heartbeat_gap_ms": beat.max_gap,
                    "gaps_over_50_ms": sum(g > 50 for g in beat.gaps),
                    "seconds": seconds,
                    "slowest_events": beat.slowest,
                    "slowest_cpu_events": beat.slowest_cpu,
                })  # fmt: skip
                with contextlib.suppress(OSError):
                    os.remove(path)
    finally:
        fm.exported.disconnect(ended.append)
        fm.exportFailed.disconnect(ended.append)
    window.tabs.setCurrentIndex(0)
    wait_idle(app, window)
    worst: dict[str, float] = {}
    for row in rows:
        worst[row["export"]] = max(worst.get(row["export"], 0.0), row["max_heartbeat_gap_ms"])
    return {
        "max_heartbeat_gap_ms": max(worst.values(), default=0.0),
        "worst_by_export_ms": worst,
        "storm_alone_10s": {
            "max_heartbeat_gap_ms": alone.max_gap,
            "gaps_over_50_ms": sum(g > 50 for g in alone.gaps),
            "slowest_events": alone.slowest,
            "slowest_cpu_events": alone.slowest_cpu,
        },
        "load_average": list(os.getloadavg()),
        "changes": changes,
        "exports": rows,
    }


def stall_failed_export(app, window, folder: str, count: int) -> dict:  # type: ignore[no-untyped-def]
    """PNG exports that fail the way a full disk fails them: files are limited to 64 KiB
    (RLIMIT_FSIZE, SIGXFSZ ignored), so the write of a 4000×2500 picture raises EFBIG."""
    import resource
    import signal

    from app.window.file_menu import ExportRequest

    show_tab(app, window, 0)
    wait_idle(app, window)
    fm = window.file_menu
    ended: list[str] = []
    fm.exported.connect(ended.append)
    fm.exportFailed.connect(ended.append)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    failed = 0
    seconds = []
    try:
        with Heartbeat() as beat:
            for k in range(count):
                path = os.path.join(folder, f"full_{k}.png")
                ended.clear()
                resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, old_limit[1]))
                t0 = time.perf_counter()
                started = fm.export(ExportRequest("plots_png", path, size=(4000, 2500)))
                if started:
                    wait_until(app, lambda: bool(ended), 120)
                seconds.append(time.perf_counter() - t0)
                resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
                failed += not os.path.exists(path)
                spin(app, 0.2)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    return {
        "max_heartbeat_gap_ms": beat.max_gap,
        "exports": count,
        "failed_as_expected": failed,
        "banner": window.banner.message,
        "seconds": _summary(seconds),
        "slowest_events": beat.slowest,
    }


def bench_cold_start(runs: int) -> list[float]:
    samples = []
    env = dict(os.environ, TILESCOPE_BENCH_CHILD="1", QT_QPA_PLATFORM="offscreen")
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
    from PySide6.QtCore import QEvent, QObject, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from app.launch import _application
    from app.window.main_window import DEFAULT_SIZE, MainWindow

    _quiet_qt()
    app = _application()
    folder = tempfile.mkdtemp()
    settings = QSettings(os.path.join(folder, "bench.ini"), QSettings.Format.IniFormat)
    window = MainWindow(settings=settings)
    # The offscreen screen is 800×800 and the window keeps to its screen: start at the
    # default size a desktop gives it, as every figure here is taken.
    window.resize(*DEFAULT_SIZE)

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


# ------------------------------------------------------------------------------------ report


def _fmt(v: float | None) -> str:
    return f"{'—':>7}" if v is None else f"{v:7.1f}"


def table(report: dict) -> str:
    rows = []
    r = report["results"]

    def latency(name: str, key: str) -> None:
        if key in r:
            s = r[key]["latency_ms"]
            rows.append((name, s["median"], s["p95"], s["max"], "≤ 8 / ≤ 16 ms"))
            s = r[key]["gui_cpu_ms"]
            rows.append(("  GUI-thread CPU per move", s["median"], s["p95"], s["max"], ""))
            s = r[key]["window_grab_ms"]
            rows.append(("  whole window: setValue + grab()", s["median"], s["p95"], s["max"], ""))
            if "screen_checked_moves" in r[key]:
                untrue = len(r[key]["screen_untrue_moves"])
                checked = r[key]["screen_checked_moves"]
                rows.append(
                    (
                        f"  screen = fresh render: {checked - untrue}/{checked} moves",
                        None,
                        None,
                        None,
                        "all",
                    )
                )

    latency("slider → repaint, Measurements tab", "slider_measurements")
    latency("slider → repaint, Tiles tab (to 131072)", "slider_tiles")
    if "changes" in r:
        for what in ("heads", "dtype"):
            s = r["changes"][f"{what}_gui_cpu_ms"]
            rows.append((f"{what} change, GUI-thread CPU", s["median"], s["p95"], s["max"], ""))
            s = r["changes"][f"{what}_paint_cpu_ms"]
            rows.append(("  of which painting", s["median"], s["p95"], s["max"], ""))
            s = r["changes"][f"{what}_gui_cpu_not_painting_ms"]
            rows.append(("  the rest (not painting)", s["median"], s["p95"], s["max"], "≤ 50 ms"))
    for key, name in (
        ("stall_drag", "longest stall: drag, Tiles tab"),
        ("stall_sweep", "longest stall: sweep"),
        ("stall_export", "longest stall: 4000×2500 PNG export"),
        ("stall_svg_export", "longest stall: 4000×2500 SVG export"),
        ("stall_open", "longest stall: open h200_sweep.json"),
        ("stall_storm", "longest stall: config storm"),
        ("stall_failed_export", "longest stall: PNG export failing"),
        ("stall_ring", "longest stall: a ring of 200,000 events"),
    ):
        if key in r:
            rows.append((name, None, None, r[key]["max_heartbeat_gap_ms"], "≤ 50 ms"))
    if "stall_trace" in r:
        t = r["stall_trace"]
        rows.append(("longest stall: open the limit trace", None, None,
                     t["open"]["max_heartbeat_gap_ms"], "≤ 50 ms"))  # fmt: skip
        rows.append(("  Tiles tab shown again → painted", None, None, t["reshow_ms"], "≤ 50 ms"))
        rows.append(("  longest stall meanwhile", None, None,
                     t["reshow_max_heartbeat_gap_ms"], "≤ 50 ms"))  # fmt: skip
    if "stall_export_storm" in r:
        e = r["stall_export_storm"]
        rows.append(("longest stall: the storm alone, 10 s", None, None,
                     e["storm_alone_10s"]["max_heartbeat_gap_ms"], "≤ 50 ms"))  # fmt: skip
        for export, gap in e["worst_by_export_ms"].items():
            rows.append((f"longest stall: {export} in a storm", None, None, gap, "≤ 50 ms"))
    if r.get("cold_start_s"):
        s = r["cold_start_s"]
        rows.append(("cold start → first paint [s]", s["median"], None, s["max"], "≤ 2 s"))
    head = f"{'':40} {'median':>7} {'p95':>7} {'max':>7}  target"
    lines = [head]
    for name, med, p95, mx, target in rows:
        lines.append(f"{name:40} {_fmt(med)} {_fmt(p95)} {_fmt(mx)}  {target}")
    return "\n".join(lines)


SCENARIOS = (
    "slider", "changes", "stalls", "files", "storm", "failed_export", "cold", "trace", "ring",
    "export_storm",
)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="model", choices=("model", "cuda", "cpu"))
    parser.add_argument("--delay-ms", type=float, default=1.0, help="per run, --backend model")
    parser.add_argument("--moves", type=int, default=200)
    parser.add_argument("--seq-max", type=int, default=131072)
    parser.add_argument(
        "--sweep-max", type=int, default=0, help="N the stall-during-a-sweep scenario sweeps to"
    )
    parser.add_argument("--change-n", type=int, default=32768)
    parser.add_argument("--changes", type=int, default=6, help="heads and dtype changes each")
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--storm-s", type=float, default=60.0, help="length of the config storm")
    parser.add_argument("--failed-exports", type=int, default=5, help="failing PNG exports")
    parser.add_argument(
        "--storm-exports", type=int, default=3, help="rounds of exports during a storm"
    )
    parser.add_argument(
        "--only",
        # "stalls" measures the files too; "trace" writes and opens a 75 MB trace
        default=",".join(
            s for s in SCENARIOS if s not in ("files", "trace", "ring", "export_storm")
        ),
        help=f"of {','.join(SCENARIOS)}",
    )
    parser.add_argument("--out", default="", help="write every sample as JSON here")
    parser.add_argument(
        "--profile-changes",
        default="",
        help="write a cProfile over the changes (other threads too on Python 3.12+)",
    )
    args = parser.parse_args()
    if os.environ.get("TILESCOPE_BENCH_CHILD"):
        return _child_first_paint()
    only = set(args.only.split(","))
    _quiet_qt()
    app = make_app()
    #: On a real X display each slider move's screen is checked against a fresh render.
    real_display = app.platformName() == "xcb"
    results: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        window = make_window(app, folder, backend_factory(args.backend, args.delay_ms))
        device = window.backend.info.name
        if args.backend != "model" and window.backend.info.backend != args.backend:
            print(
                f"bench_gui: the {args.backend} backend did not start ({window.banner.message})",
                file=sys.stderr,
            )
            return 1
        if "slider" in only:
            measure_scale(app, window, args.seq_max)
            results["slider_measurements"] = bench_slider(
                app, window, args.moves, args.seq_max, tab=0, check=real_display
            )
            results["slider_tiles"] = bench_slider(
                app, window, args.moves, args.seq_max, tab=1, check=real_display
            )
        if "changes" in only:
            profiler = cProfile.Profile() if args.profile_changes else None
            if profiler is not None:
                profiler.enable()  # Python < 3.12 profiles this thread only, 3.12+ every thread
            results["changes"] = bench_changes(app, window, args.changes, args.change_n)
            if profiler is not None:
                profiler.disable()
                text = io.StringIO()
                stats = pstats.Stats(profiler, stream=text)
                stats.sort_stats("tottime").print_stats(40)
                stats.sort_stats("cumulative").print_stats(60)
                Path(args.profile_changes).write_text(text.getvalue())
        if "stalls" in only:
            results["stall_drag"] = stall_drag(app, window, args.seq_max)
            results["stall_sweep"] = stall_sweep(app, window, args.sweep_max or args.seq_max)
            results["stall_export"] = stall_export(app, window, folder)
            results["stall_open"] = stall_open(app, window)
        if "files" in only:
            results["stall_export"] = stall_export(app, window, folder)
            results["stall_svg_export"] = stall_export(app, window, folder, "plots_svg")
            results["stall_open"] = stall_open(app, window)
        if "trace" in only:
            from limit_trace import write_limit_trace

            trace_path = write_limit_trace(
                Path(tempfile.gettempdir()) / "tilescope-limit-trace.json"
            )
            results["stall_trace"] = stall_trace(app, window, trace_path)
        if "ring" in only:
            from large_ring import write_large_ring

            ring = Path(tempfile.gettempdir()) / "tilescope-ring-200k.json"
            results["stall_ring"] = stall_ring(app, window, write_large_ring(ring))
        if "storm" in only:
            results["stall_storm"] = stall_storm(app, window, args.storm_s)
        if "failed_export" in only:
            results["stall_failed_export"] = stall_failed_export(
                app, window, folder, args.failed_exports
            )
        if "export_storm" in only:
            results["stall_export_storm"] = stall_export_storm(
                app, window, folder, args.storm_exports
            )
        window.close()
        spin(app, 0.2)
    if "cold" in only and args.starts > 0:
        results["cold_start_s"] = _summary(bench_cold_start(args.starts))
    report = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "platform": app.platformName(),
        "backend": args.backend,
        "device": device,
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "results": results,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"bench_gui on {device} ({args.backend} backend, {app.platformName()} platform, "
        f"{os.cpu_count()} CPUs)"
    )
    print(table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
