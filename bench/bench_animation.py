"""Benchmark the tile animation offscreen: paint time per frame and memory over a long play.

    python bench/bench_animation.py                  # N = 32768, then a 10-minute play
    python bench/bench_animation.py --minutes 1      # shorter memory run
    python bench/bench_animation.py --minutes 0      # paint times only
    python bench/bench_animation.py --minutes 0 --no-paint --trace-switch   # trace mode's cost

Part 1 plays one full pass frame by frame (60 frames per second of the 20 s pass) and reports the
canvas's own paintEvent time (median, p95, max), the playback model's snapshot time, and the
whole widget's frame time (snapshot + every child repainted), for both lanes together and for
each lane alone. Part 2 plays for --minutes with the real 60 Hz timer, looping the pass, and
samples the process RSS (psutil) every --sample-s seconds; "flat" means the fitted slope after
warm-up is ~0 MB/min. --trace-switch times the first switch to the real-trace mode (the shipped
traces are read and laid out off the GUI thread: the longest stall of the event loop is what a
user feels).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import psutil
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.animation import TileAnimationWidget
from app.work.background import LatestOnly
from gpu.algorithms import NAIVE, TILED
from gpu.config import AttentionConfig


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def paint_times(
    app: QApplication,
    n: int,
    algorithms: tuple[str, ...],
    fps: int = 60,
    size: tuple[int, int] = (1280, 900),
) -> dict:
    w = TileAnimationWidget(config=AttentionConfig(seq_len=n), algorithms=algorithms)
    w.resize(*size)
    w.show()
    app.processEvents()
    w.canvas.repaint()  # background pixmap built once, not counted
    w.canvas.paint_ms.clear()
    player = w.player
    player.playing = True
    frames = int(player.duration_s * fps)
    snap_ms, frame_ms = [], []
    for _ in range(frames):
        player.advance(1 / fps)
        t0 = time.perf_counter()
        frames_now = player.frames()
        t1 = time.perf_counter()
        w._frames = frames_now
        w.canvas.set_frames(frames_now)
        w._push_source()
        w.canvas.repaint()
        app.processEvents()  # the rest of the widget (slider, labels, source panel)
        t2 = time.perf_counter()
        snap_ms.append((t1 - t0) * 1e3)
        frame_ms.append((t2 - t0) * 1e3)
        if not player.playing:
            break
    paint = list(w.canvas.paint_ms)
    w.close()
    w.deleteLater()
    app.processEvents()
    return {
        "n": n,
        "lanes": list(algorithms),
        "frames": len(paint),
        "paint_ms_median": statistics.median(paint),
        "paint_ms_p95": _pct(paint, 95),
        "paint_ms_max": max(paint),
        "snapshot_ms_median": statistics.median(snap_ms),
        "frame_ms_median": statistics.median(frame_ms),
        "frame_ms_p95": _pct(frame_ms, 95),
    }


def memory_over_play(
    app: QApplication, n: int, minutes: float, sample_s: float, vary: bool
) -> dict:
    proc = psutil.Process()
    w = TileAnimationWidget(config=AttentionConfig(seq_len=n))
    w.resize(1280, 900)
    w.show()
    w.player.loop = True
    w.play()
    samples: list[tuple[float, float]] = []
    start = time.monotonic()
    configs = [AttentionConfig(seq_len=s) for s in (n, 4096, 131072, 1000)]
    state = {"k": 0, "passes": 0}

    def sample() -> None:
        t = time.monotonic() - start
        samples.append((t, proc.memory_info().rss / 2**20))
        if vary and int(t // 30) > state["k"]:  # a new config every 30 s, like a slider drag
            state["k"] = int(t // 30)
            w.set_config(configs[state["k"] % len(configs)])
            w.play()
        if t >= minutes * 60:
            app.quit()

    timer = QTimer()
    timer.timeout.connect(sample)
    timer.start(int(sample_s * 1000))
    sample()
    paints_before = len(w.canvas.paint_ms)
    app.exec()
    timer.stop()
    frames = len(w.canvas.paint_ms)
    w.pause()
    w.close()
    t = np.array([s[0] for s in samples])
    rss = np.array([s[1] for s in samples])
    warm = t >= min(30.0, t[-1] / 4)  # skip warm-up (first pass, caches filling)
    slope = float(np.polyfit(t[warm] / 60, rss[warm], 1)[0]) if warm.sum() >= 3 else float("nan")
    return {
        "n": n,
        "minutes": minutes,
        "vary_config": vary,
        "rss_mb_start": float(rss[0]),
        "rss_mb_after_warmup": float(rss[warm][0]) if warm.any() else float("nan"),
        "rss_mb_end": float(rss[-1]),
        "rss_mb_max": float(rss.max()),
        "slope_mb_per_min_after_warmup": slope,
        "samples": [(round(a, 1), round(b, 2)) for a, b in samples],
        "paint_ms_median_during_play": statistics.median(list(w.canvas.paint_ms))
        if w.canvas.paint_ms
        else float("nan"),
        "paint_events_recent": frames - paints_before if frames > paints_before else frames,
    }


def trace_switch(app: QApplication) -> dict:
    """The first switch to the "Real GPU trace" mode: how long set_mode blocks the GUI thread,
    the longest the event loop then goes without running (a 5 ms heartbeat timer), and how long
    until the shipped traces are shown."""
    w = TileAnimationWidget(config=AttentionConfig(seq_len=4096))
    w.resize(1280, 900)
    w.show()
    for _ in range(20):
        app.processEvents()
    gaps: list[float] = []
    last = [time.perf_counter()]

    def beat() -> None:
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    heart = QTimer()
    heart.setInterval(5)
    heart.timeout.connect(beat)
    heart.start()
    t0 = time.perf_counter()
    w.set_mode(w.TRACE_MODE)
    blocked = time.perf_counter() - t0
    last[0] = time.perf_counter()
    panel = w.trace_panel
    while not panel.traces and time.perf_counter() - t0 < 60:
        app.processEvents()
        time.sleep(0.001)
    shown = time.perf_counter() - t0
    for _ in range(10):  # the first paint of the trace view
        app.processEvents()
    heart.stop()
    for worker in w.findChildren(LatestOnly):  # let a re-render for the final size finish
        worker.wait()
    app.processEvents()
    w.close()
    return {
        "set_mode_blocks_ms": blocked * 1e3,
        "longest_stall_ms": max(gaps, default=0.0) * 1e3,
        "traces_shown_after_ms": shown * 1e3,
        "traces": len(panel.traces),
    }


def screenshots(
    app: QApplication,
    out: Path,
    n: int,
    fractions: tuple[float, ...],
    size: tuple[int, int] = (1280, 900),
) -> list[Path]:
    """Grab the widget mid-play (after really playing into each moment, so trails show)."""
    out.mkdir(parents=True, exist_ok=True)
    w = TileAnimationWidget(config=AttentionConfig(seq_len=n))
    w.resize(*size)
    w.show()
    app.processEvents()
    paths = []
    for frac in fractions:
        w.player.seek_fraction(max(0.0, frac - 0.02))
        w.player.playing = True
        while w.player.fraction < frac and w.player.playing:
            w.player.advance(1 / 60)
            w.refresh()
        w.player.playing = False
        w.refresh()
        app.processEvents()
        path = out / f"animation_N{n}_{round(frac * 100):02d}pct.png"
        w.grab().save(str(path))
        paths.append(path)
    w.close()
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32768, help="sequence length (default 32768)")
    ap.add_argument("--minutes", type=float, default=10.0, help="memory run length (0: skip)")
    ap.add_argument("--sample-s", type=float, default=5.0, help="RSS sampling period")
    ap.add_argument("--vary", action="store_true", help="change the config every 30 s")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--shots", type=Path, help="save mid-play screenshots in this folder")
    ap.add_argument("--no-paint", action="store_true", help="skip the paint-time part")
    ap.add_argument("--trace-switch", action="store_true", help="time the first trace switch")
    args = ap.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv)
    results: dict = {
        "paint": [],
        "memory": None,
        "cpu": os.cpu_count(),
        "platform": os.environ.get("QT_QPA_PLATFORM"),
    }
    if args.shots:
        for n, fracs in ((4096, (0.12, 0.45, 0.8)), (args.n, (0.2, 0.5, 0.85))):
            for path in screenshots(app, args.shots, n, fracs):
                print(f"screenshot: {path}", flush=True)
    if args.trace_switch:
        r = trace_switch(app)
        results["trace_switch"] = r
        print(
            f"first switch to the real-trace mode: set_mode blocks {r['set_mode_blocks_ms']:.0f} "
            f"ms, longest event-loop stall {r['longest_stall_ms']:.0f} ms, {r['traces']} traces "
            f"shown after {r['traces_shown_after_ms']:.0f} ms",
            flush=True,
        )
    for lanes in () if args.no_paint else ((NAIVE, TILED), (NAIVE,), (TILED,)):
        r = paint_times(app, args.n, lanes)
        results["paint"].append(r)
        print(
            f"N={r['n']:>6} lanes={'+'.join(r['lanes']):<12} frames={r['frames']:>5}  "
            f"paint median {r['paint_ms_median']:.2f} ms  p95 {r['paint_ms_p95']:.2f} ms  "
            f"max {r['paint_ms_max']:.2f} ms  | snapshot {r['snapshot_ms_median']:.2f} ms  "
            f"| whole frame median {r['frame_ms_median']:.2f} ms p95 {r['frame_ms_p95']:.2f} ms",
            flush=True,
        )
    if args.minutes > 0:
        m = memory_over_play(app, args.n, args.minutes, args.sample_s, args.vary)
        results["memory"] = m
        print(
            f"memory over {m['minutes']:g} min (N={m['n']}, vary={m['vary_config']}): RSS start "
            f"{m['rss_mb_start']:.1f} MB, after warm-up {m['rss_mb_after_warmup']:.1f} MB, end "
            f"{m['rss_mb_end']:.1f} MB, max {m['rss_mb_max']:.1f} MB, slope "
            f"{m['slope_mb_per_min_after_warmup']:+.3f} MB/min; paint median during play "
            f"{m['paint_ms_median_during_play']:.2f} ms",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
