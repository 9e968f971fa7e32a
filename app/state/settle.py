"""Settle before measuring: a freshly started NumPy backend warms up until its times agree.

Why: the first runs after the app starts were up to 10× the steady ones (naive at N = 1024:
710 ms to 1.5 s against 68–144 ms from `bench`), and the time plot zigzagged. Those first runs
share the cores with the window's own start-up work (the first paints, the model curves'
process starting and computing, the explain text) and pay for NumPy's first calls (the BLAS
threads starting, the first pages of each buffer). So before its first measurement the runner
repeats a small run (`SETTLE_CONFIG`, each algorithm once per round) until two rounds in a row
agree within `AGREE`, for at most `BUDGET_S`: the measurements that follow meet a settled
machine. The warm-up's results are thrown away. A sweep's outliers are still measured again
afterwards (app/state/timing_outliers.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gpu.config import AttentionConfig

#: The warm-up's run: small enough for a round of tens of milliseconds on a laptop.
SETTLE_CONFIG = AttentionConfig(seq_len=256, heads=4)
#: Two rounds agree when they differ by at most this share of the faster.
AGREE = 0.25
#: The warm-up ends after this long even when its rounds still disagree.
BUDGET_S = 1.5


@dataclass(frozen=True)
class Settling:
    """How a warm-up went: each round's seconds, and whether the last two agreed."""

    rounds_s: tuple[float, ...]
    settled: bool


def settle(
    run_round: Callable[[], None],
    *,
    agree: float = AGREE,
    budget_s: float = BUDGET_S,
    stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.perf_counter,
) -> Settling:
    """Call `run_round` until two rounds in a row take times within `agree` of each other,
    `budget_s` has passed, or `stop()` says so (a newer backend, the app closing)."""
    rounds: list[float] = []
    start = clock()
    while not stop():
        t0 = clock()
        run_round()
        rounds.append(clock() - t0)
        if len(rounds) >= 2 and abs(rounds[-1] - rounds[-2]) <= agree * min(rounds[-2:]):
            return Settling(tuple(rounds), True)
        if clock() - start >= budget_s:
            break
    return Settling(tuple(rounds), False)
