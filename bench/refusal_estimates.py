"""The run-time estimates the runner refuses runs by, against the runs' measured times on this
machine: measure the CPU backend the way the window does (interleaved rounds, the window's
warm-up and repeats), learn the rates (app/state/run_estimate.py), then estimate each larger
job and time it for real. A good estimate is within 2× of the real time.

    python bench/refusal_estimates.py [--learn 512,1024] [--check 2048] [--step 1024]

Prints, per job: the estimate, where its rate came from, the measured wall time and their
ratio; exits 1 when any ratio is outside 0.5–2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learn", default="512,1024", help="N measured first, to learn from")
    ap.add_argument("--check", default="2048", help="N estimated, then measured")
    ap.add_argument("--step", default="1024", help="N of training steps estimated, then measured")
    args = ap.parse_args(argv)

    from app.state.run_estimate import RunRates
    from app.work.runner import default_options
    from gpu.algorithms import NAIVE, TILED
    from gpu.backends.cpu_backend import CpuBackend
    from gpu.config import AttentionConfig
    from gpu.units import fmt_seconds

    backend, key = CpuBackend(), "cpu"
    options = default_options("cpu")
    runs = options.warmup + options.repeats + 1  # what a job costs: warm-up, repeats, metered
    rates = RunRates()
    algos = (NAIVE, TILED)
    base = AttentionConfig(seq_len=1024)

    for n in (int(x) for x in args.learn.split(",") if x):  # as the window measures them
        for r in backend.run_interleaved(base.with_(seq_len=n), algos, options).values():
            rates.learn(key, r)
    jobs = [base.with_(seq_len=int(n)) for n in args.check.split(",") if n]
    jobs += [base.with_(seq_len=int(n), pass_="step") for n in args.step.split(",") if n]
    bad = 0
    print(
        f"# {runs} runs a job (the app's: warm-up {options.warmup}, repeats {options.repeats}, "
        "1 metered); each job timed alone, its whole wall time"
    )
    for config in jobs:
        estimates = {a: rates.estimate(key, "cpu", config, a, runs) for a in algos}
        results = {}
        for a in algos:  # one at a time, so each job's own wall time is measured
            t = time.perf_counter()
            results[a] = backend.run(config, a, options)
            results[a] = (results[a], time.perf_counter() - t)
        for a in algos:
            result, wall = results[a]
            e = estimates[a]
            ratio = e.seconds / wall
            ok = 0.5 <= ratio <= 2.0
            bad += not ok
            where = f"{config.pass_:8} N={config.seq_len:<6} {a:6}"
            print(
                f"{where} estimate {fmt_seconds(e.seconds):>9} ({e.source}), "
                f"measured {fmt_seconds(wall):>9}: ×{ratio:.2f}"
                + ("" if ok else "  OUTSIDE 0.5–2"),
                flush=True,
            )
            rates.learn(key, result)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
