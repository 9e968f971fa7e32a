"""Soak: the real main window, offscreen, for a long time; does memory stay flat?

    QT_QPA_PLATFORM=offscreen nice -n 10 python bench/soak.py [--minutes 30] [--backend cpu]
        [--interval 5] [--seq-max 1024] [--out soak.json]

What runs: the real `MainWindow` (real runner, result store, plots, tile animation) on the real
backend (`cpu` NumPy here, `--backend cuda` on a GPU host; `--backend fake` answers from the
cost model in 0.5 ms, to put GPU-like result rates through the GUI on any machine). It repeats
a cycle:
1. slider: ~3 s of random slider moves (one every 100 ms) up to N = --seq-max, with the
   Measurements tab shown, so live requests are coalesced and the plots repaint;
   then storm: --storm-s seconds (default 5) of random changes every 50-150 ms of the heads
   (1-64), dtype, causal mask and N (the whole scale), as a user trying things fast: each new
   shape has the compute process work out its model curves;
2. sweep: the store is cleared (so the sweep really measures again) and a sweep of every power
   of two up to --seq-max runs, with the Tiles tab shown and the animation playing in a loop;
   heads and the causal mask rotate from cycle to cycle, so each sweep is a fresh family;
3. rest: once the runner is idle, a quiescent sample is taken, then ~--rest seconds of animation.

What is sampled, every --interval seconds and at each rest: the RSS (psutil) of the window's
process and of its compute process (app.work.background: the model curves, large reads) and,
on CUDA, device memory in use (cudaMemGetInfo: total − free) and the CuPy pool's used and held
bytes. Each process's idle RSS at the start, the middle and the end is printed too.
Each sample says whether the runner was idle. A run in flight holds its own S and P (tens of MB
on the CPU, GBs on a GPU), so memory is judged on idle samples only: those say what the app
keeps, not what one measurement borrows.

Verdict: warm-up is the first 10% of the run (imports, caches, the first compiles, allocator
arenas). Baseline = median of the idle samples in the next 10% (10-20% of the run); final =
median of the idle samples in the last 10% (90-100%). Flat when |final / baseline − 1| ≤ 5% for
every metric (windows without idle samples fall back to the first/last tenth of the idle
samples after warm-up). The largest post-warm-up idle value and a least-squares slope are shown
too. Exit status 0 when flat, 1 when not, 2 when the window could not start.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

WARMUP_FRACTION = 0.1
TOLERANCE = 0.05
METRICS_CPU = ("rss_bytes", "compute_rss_bytes")
METRICS_CUDA = (*METRICS_CPU, "device_used_bytes", "pool_used_bytes", "pool_held_bytes")
#: A metric whose baseline is below this is compared in absolute terms (an empty CuPy pool is 0 B:
#: a relative change of "0 → 2 MB" would be infinite and meaningless).
ABS_FLOOR_BYTES = 64 << 20


@dataclass
class Sample:
    t_s: float
    idle: bool
    kind: str  # "periodic" or "rest"
    rss_bytes: int
    compute_rss_bytes: int | None = None  # the compute process's, once it runs
    device_used_bytes: int | None = None
    pool_used_bytes: int | None = None
    pool_held_bytes: int | None = None
    results_cached: int = 0
    runs_finished: int = 0


@dataclass
class Counters:
    cycles: int = 0
    sweeps_finished: int = 0
    sweeps_cancelled: int = 0
    slider_moves: int = 0
    storm_changes: int = 0
    outcomes: int = 0
    oom_results: int = 0
    skipped: int = 0
    cancelled: int = 0
    errors: list[str] = field(default_factory=list)  # banner messages and failed outcomes


def _quiet_qt() -> None:
    from PySide6.QtCore import qInstallMessageHandler

    def handler(mode, context, message):  # type: ignore[no-untyped-def]
        if "propagateSizeHints" not in message:
            sys.stderr.write(message + "\n")

    qInstallMessageHandler(handler)


class Sampler:
    """Reads process and device memory; CuPy is touched only for --backend cuda."""

    def __init__(self, cuda: bool) -> None:
        import psutil

        self.process = psutil.Process()
        self.cuda = cuda
        self.cupy = None
        if cuda:
            import cupy

            self.cupy = cupy

    def compute_rss(self) -> int | None:
        """The compute process's RSS: the window's child that multiprocessing spawned (not its
        resource tracker)."""
        import psutil

        for child in self.process.children():
            try:
                if "spawn_main" in " ".join(child.cmdline()):
                    return int(child.memory_info().rss)
            except psutil.Error:
                continue
        return None

    def read(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {
            "rss_bytes": int(self.process.memory_info().rss),
            "compute_rss_bytes": self.compute_rss(),
        }
        if self.cupy is not None:
            try:
                free, total = self.cupy.cuda.runtime.memGetInfo()
                pool = self.cupy.get_default_memory_pool()
                out.update(
                    device_used_bytes=int(total - free),
                    pool_used_bytes=int(pool.used_bytes()),
                    pool_held_bytes=int(pool.total_bytes()),
                )
            except Exception as exc:  # a sample is not worth a crash; say it once
                print(f"soak: device memory not readable: {exc}", file=sys.stderr)
                self.cupy = None
        return out


class Soak:
    """Drives the window from QTimers on the GUI thread (never a blocking loop): see the module
    docstring for the cycle."""

    def __init__(self, args: argparse.Namespace) -> None:
        from PySide6.QtCore import QSettings, QTimer

        from app.state.seq_scale import powers_of_two_up_to
        from app.window.main_window import MainWindow

        self.args = args
        self.rng = random.Random(args.seed)
        self.folder = tempfile.TemporaryDirectory()
        settings = QSettings(os.path.join(self.folder.name, "soak.ini"), QSettings.Format.IniFormat)
        settings.setValue("controls/seq_len", 256)
        if args.backend == "fake":
            self.window = MainWindow(
                backend_factory=_fake_backend_factory(), settings=settings, restore=True
            )
        else:
            self.window = MainWindow(settings=settings, restore=True, backend=args.backend)
        self.window.resize(1500, 920)
        self.window.show()
        self.counters = Counters()
        self.samples: list[Sample] = []
        self.sampler = Sampler(cuda=False)  # upgraded once the backend says it is CUDA
        self.t0 = time.monotonic()
        self.duration_s = args.minutes * 60.0
        self.seq_positions = [
            i for i, n in enumerate(self.window.controls.seq_scale) if n <= args.seq_max
        ]
        self.sweep_n = max(powers_of_two_up_to(args.seq_max))
        self.phase = "start"
        self.phase_until = 0.0
        self.done = False

        w = self.window
        w.runner.outcome.connect(self._on_outcome)
        w.runner.sweepFinished.connect(self._on_sweep_finished)
        self._last_banner = ""

        self.tick = QTimer()
        self.tick.setInterval(100)
        self.tick.timeout.connect(self._step)
        self.sample_timer = QTimer()
        self.sample_timer.setInterval(int(args.interval * 1000))
        self.sample_timer.timeout.connect(lambda: self._sample("periodic"))

    # ---------------------------------------------------------------- driving

    def start(self) -> None:
        self.tick.start()
        self.sample_timer.start()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def _step(self) -> None:
        w = self.window
        now = self.elapsed()
        if w.banner.message and w.banner.message != self._last_banner:
            self._last_banner = w.banner.message
            self.counters.errors.append(f"{now:.0f}s banner: {w.banner.message}")
        if self.phase == "start":
            if w.backend is None:
                if now > 180:
                    self.counters.errors.append("the backend did not start in 180 s")
                    self.finish()
                return
            self.sampler = Sampler(cuda=w.backend.info.backend == "cuda")
            self._sample("rest")
            self._begin_slider(now)
        elif self.phase == "slider":
            if now < self.phase_until:
                self.counters.slider_moves += 1
                w.controls.slider.setValue(self.rng.choice(self.seq_positions))
            else:
                self.phase, self.phase_until = "storm", now + self.args.storm_s
                self._storm()
        elif self.phase == "storm":
            if now >= self.phase_until:
                self._begin_sweep()
        elif self.phase == "sweep":
            if not w.runner.busy and not w.runner.sweeping:
                self._sample("rest")
                self.phase, self.phase_until = "rest", now + self.args.rest
        elif self.phase == "rest":
            if now >= self.duration_s:
                self.finish()
            elif now >= self.phase_until:
                self._begin_slider(now)

    def _storm(self) -> None:
        """One random change, the next 50-150 ms later, while the storm lasts."""
        from PySide6.QtCore import QTimer

        if self.phase != "storm" or self.done:
            return
        w, rng = self.window, self.rng
        what = rng.choice(("heads", "dtype", "causal", "seq_len"))
        value = {
            "heads": lambda: rng.randint(1, 64),
            "dtype": lambda: rng.choice(("fp16", "bf16", "fp32")),
            "causal": lambda: rng.random() < 0.5,
            "seq_len": lambda: rng.choice(list(w.controls.seq_scale)),
        }[what]()
        w.controls.set_config(w.config.with_(**{what: value}))
        self.counters.storm_changes += 1
        QTimer.singleShot(rng.randint(50, 150), self._storm)

    def _begin_slider(self, now: float) -> None:
        self.counters.cycles += 1
        self.window.tabs.setCurrentIndex(0)
        self.phase, self.phase_until = "slider", now + 3.0

    def _begin_sweep(self) -> None:
        w = self.window
        c = self.counters.cycles
        config = w.config.with_(
            seq_len=self.sweep_n, heads=(4, 8, 12)[c % 3], causal=bool((c // 3) % 2)
        )
        # so the sweep measures again instead of finding everything cached
        w.measurements.store.clear()
        w.controls.set_config(config)
        w.tabs.setCurrentIndex(1)
        anim = w.animation
        if anim is not None:
            anim.player.loop = True
            if not anim.playing:
                anim.play()
        total = w.measurements.sweep()
        self.phase = "sweep"
        if total == 0:
            self.counters.errors.append(f"cycle {c}: the sweep found nothing to measure")

    def _on_outcome(self, outcome) -> None:  # type: ignore[no-untyped-def]
        self.counters.outcomes += 1
        if outcome.result is not None and outcome.result.oom:
            self.counters.oom_results += 1
        elif outcome.skipped:
            self.counters.skipped += 1
        elif outcome.cancelled:  # a newer request stopped it (the storm): no error
            self.counters.cancelled += 1
        elif outcome.error:
            self.counters.errors.append(f"{self.elapsed():.0f}s outcome: {outcome.error}")

    def _on_sweep_finished(self, cancelled: bool) -> None:
        if cancelled:
            self.counters.sweeps_cancelled += 1
        else:
            self.counters.sweeps_finished += 1

    def _sample(self, kind: str) -> None:
        w = self.window
        values = self.sampler.read()
        self.samples.append(
            Sample(
                t_s=round(self.elapsed(), 2),
                idle=not w.runner.busy,
                kind=kind,
                results_cached=len(w.measurements.store),
                runs_finished=w.runner.stats.runs_finished,
                **values,  # type: ignore[arg-type]
            )
        )

    def finish(self) -> None:
        from PySide6.QtWidgets import QApplication

        if self.done:
            return
        self.done = True
        self.tick.stop()
        self.sample_timer.stop()
        QApplication.quit()

    def close(self) -> None:
        self.window.close()
        self.folder.cleanup()


def _fake_backend_factory():  # type: ignore[no-untyped-def]
    """Every backend choice answers with a CostModelBackend: results from the cost model
    after 0.5 ms, so the window handles thousands of results a minute, as with a GPU."""
    from gpu.algorithms import NAIVE, TILED, TILED_MMA
    from gpu.backends.model_backend import CostModelBackend

    fake = CostModelBackend(
        delay_s=0.0005, algorithms=(NAIVE, TILED, TILED_MMA), record_calls=False
    )
    return lambda name: fake


# -------------------------------------------------------------------- verdict


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    if len(points) < 3:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return None
    return sum((t - mt) * (v - mv) for t, v in points) / var * 3600


def verdict(
    samples: list[Sample], duration_s: float, metrics: tuple[str, ...], tolerance: float = TOLERANCE
) -> dict:
    """The flatness verdict of the module docstring, per metric and overall."""
    warm_end = WARMUP_FRACTION * duration_s
    idle = [s for s in samples if s.idle]
    post = [s for s in idle if s.t_s >= warm_end]
    out: dict = {
        "warmup_s": round(warm_end, 1),
        "tolerance": tolerance,
        "idle_samples": len(idle),
        "idle_samples_after_warmup": len(post),
        "metrics": {},
    }
    flat = bool(post)
    for metric in metrics:
        base_w = [s for s in post if s.t_s < warm_end + WARMUP_FRACTION * duration_s]
        final_w = [s for s in post if s.t_s >= (1 - WARMUP_FRACTION) * duration_s]
        k = max(1, math.ceil(len(post) * WARMUP_FRACTION))
        if not base_w or not final_w:
            base_w, final_w = post[:k], post[-k:]
        base_v = [getattr(s, metric) for s in base_w if getattr(s, metric) is not None]
        final_v = [getattr(s, metric) for s in final_w if getattr(s, metric) is not None]
        all_v = [(s.t_s, getattr(s, metric)) for s in post if getattr(s, metric) is not None]
        base, final = _median(base_v), _median(final_v)
        if base is None or final is None:
            out["metrics"][metric] = {"flat": None, "note": "no samples"}
            continue
        peak = max(v for _, v in all_v)
        if base >= ABS_FLOOR_BYTES:
            change = final / base - 1
            ok = abs(change) <= tolerance
            peak_change = peak / base - 1
        else:  # tiny baseline: judge the change against the floor instead
            change = (final - base) / ABS_FLOOR_BYTES
            ok = abs(change) <= tolerance
            peak_change = (peak - base) / ABS_FLOOR_BYTES
        flat = flat and ok
        out["metrics"][metric] = {
            "baseline": base,
            "final": final,
            "change": round(change, 5),
            "peak_after_warmup": peak,
            "peak_change": round(peak_change, 5),
            "slope_bytes_per_hour": _slope_per_hour(all_v),
            "relative_to": "baseline" if base >= ABS_FLOOR_BYTES else f"{ABS_FLOOR_BYTES} B floor",
            "flat": ok,
        }
    out["flat"] = flat
    return out


def per_process(samples: list[Sample], duration_s: float) -> dict:
    """Each process's idle RSS (median) at the start (the tenth after warm-up), the middle
    (45-55% of the run) and the end (the last tenth)."""
    idle = [s for s in samples if s.idle]
    windows = {
        "start": (WARMUP_FRACTION, 2 * WARMUP_FRACTION),
        "middle": (0.45, 0.55),
        "end": (1 - WARMUP_FRACTION, 1.01),
    }
    out: dict = {}
    for metric, name in (("rss_bytes", "window"), ("compute_rss_bytes", "compute")):
        out[name] = {}
        for when, (lo, hi) in windows.items():
            vals = [
                getattr(s, metric)
                for s in idle
                if lo * duration_s <= s.t_s < hi * duration_s and getattr(s, metric) is not None
            ]
            out[name][when] = _median(vals)
    return out


def _mb(v: float | None) -> str:
    """Mebibytes (2^20 B), the unit every figure this script prints is in."""
    return "—" if v is None else f"{v / 2**20:,.1f}"


def table(samples: list[Sample], duration_s: float, cuda: bool, rows: int = 12) -> str:
    """One row per time slice: idle medians (what the app keeps) and the busy maximum."""
    head = f"{'t (min)':>9} {'samples':>7} {'idle':>4} {'RSS idle MiB':>12} {'RSS max MiB':>11}"
    if cuda:
        head += f" {'dev used MiB':>12} {'pool used MiB':>13} {'pool held MiB':>13}"
    head += f" {'runs':>6} {'cached':>6}"
    lines = [head, "-" * len(head)]
    duration_s = max(duration_s, samples[-1].t_s if samples else 0)
    span = duration_s / rows
    for r in range(rows):
        lo, hi = r * span, (r + 1) * span
        part = [s for s in samples if lo <= s.t_s < hi or (r == rows - 1 and s.t_s >= hi)]
        if not part:
            continue
        idle = [s for s in part if s.idle] or part
        line = (
            f"{lo / 60:4.1f}-{min(hi, duration_s) / 60:<4.1f} {len(part):>7} "
            f"{sum(s.idle for s in part):>4} "
            f"{_mb(_median([s.rss_bytes for s in idle])):>12} "
            f"{_mb(max(s.rss_bytes for s in part)):>11}"
        )
        if cuda:
            for m, width in (
                ("device_used_bytes", 12),
                ("pool_used_bytes", 13),
                ("pool_held_bytes", 13),
            ):
                vals = [getattr(s, m) for s in idle if getattr(s, m) is not None]
                line += f" {_mb(_median(vals)):>{width}}"
        line += f" {part[-1].runs_finished:>6} {part[-1].results_cached:>6}"
        lines.append(line)
    return "\n".join(lines)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="how long to soak (default 30)")
    p.add_argument(
        "--backend",
        choices=("cpu", "cuda", "auto", "fake"),
        default="cpu",
        help="fake: the tests' cost-model backend, 0.5 ms a run: the GUI path at GPU run rates",
    )
    p.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--rest", type=float, default=2.0, help="seconds of animation after a sweep")
    p.add_argument("--storm-s", type=float, default=5.0, help="seconds of random changes a cycle")
    p.add_argument(
        "--seq-max", type=int, default=None, help="largest N swept (cpu 1024, cuda/fake 16384)"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="soak.json", help="where the JSON goes")
    args = p.parse_args(argv)
    if args.minutes <= 0 or args.interval <= 0:
        p.error("--minutes and --interval must be positive")
    if args.seq_max is None:
        args.seq_max = 16384 if args.backend in ("cuda", "fake") else 1024
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from PySide6.QtWidgets import QApplication

    _quiet_qt()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setStyle("Fusion")
    soak = Soak(args)
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop early, still report what was sampled
        signal.signal(sig, lambda *_: soak.finish())
    # Python sees signals only between bytecodes: a timer lets it in while Qt waits.
    from PySide6.QtCore import QTimer

    wake = QTimer()
    wake.timeout.connect(lambda: None)
    wake.start(250)
    soak.start()
    wall0 = time.monotonic()
    app.exec()
    wall = time.monotonic() - wall0
    cuda = soak.sampler.cuda
    metrics = METRICS_CUDA if cuda else METRICS_CPU
    started = soak.window.backend is not None
    info = soak.window.backend.info if started else None
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "args": vars(args),
        "host": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "backend": None if info is None else {"backend": info.backend, "device": info.name},
        "duration_s": round(wall, 1),
        "requested_s": soak.duration_s,
        "counters": asdict(soak.counters),
        "runner": asdict(soak.window.runner.stats),
        "verdict": verdict(soak.samples, min(wall, soak.duration_s) or wall, metrics),
        "per_process_idle_rss": per_process(soak.samples, min(wall, soak.duration_s) or wall),
        "samples": [asdict(s) for s in soak.samples],
    }
    soak.close()
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(
        f"soak: {wall / 60:.1f} min on {result['backend']}, {soak.counters.cycles} cycles, "
        f"{soak.counters.sweeps_finished} sweeps, {soak.window.runner.stats.runs_finished} runs, "
        f"{soak.counters.slider_moves} slider moves, {soak.counters.storm_changes} storm "
        f"changes, {len(soak.counters.errors)} errors"
    )
    for name, whens in result["per_process_idle_rss"].items():
        print(f"  {name} process, idle RSS MiB: " + ", ".join(
            f"{when} {_mb(v)}" for when, v in whens.items()))  # fmt: skip
    print(table(soak.samples, wall, cuda))
    v = result["verdict"]
    print(
        f"\nwarm-up {v['warmup_s']:.0f} s; {v['idle_samples_after_warmup']} idle samples after it"
    )
    for metric, m in v["metrics"].items():
        if m.get("flat") is None:
            print(f"  {metric}: no samples")
            continue
        slope = m["slope_bytes_per_hour"]
        print(
            f"  {metric}: baseline {_mb(m['baseline'])} MiB -> final {_mb(m['final'])} MiB "
            f"({m['change']:+.2%} of the {m['relative_to']}), peak after warm-up "
            f"{_mb(m['peak_after_warmup'])} MiB ({m['peak_change']:+.2%}), slope "
            f"{_mb(slope) if slope is not None else '—'} MiB/h: "
            f"{'flat' if m['flat'] else 'NOT FLAT'}"
        )
    for e in soak.counters.errors[:10]:
        print(f"  error: {e}")
    print(f"verdict: {'FLAT' if v['flat'] else 'NOT FLAT'} (within {TOLERANCE:.0%}); {args.out}")
    if not started:
        return 2
    return 0 if v["flat"] else 1


if __name__ == "__main__":
    sys.exit(main())
