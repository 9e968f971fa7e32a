"""How long a run will take, from what this machine measured: the runner refuses a run estimated
past its time limit (NumPy cannot be interrupted mid-call), so the estimate must be close.

A rate is the useful FLOPs of a pass over the median time of one timed run of it, learned per
backend, algorithm and pass at each N it was measured (a result's median, not the wall time of
the whole job: the median of interleaved rounds is what load disturbs least). A run is
estimated at the rate measured at the N nearest its own (on a log scale: overheads weigh more
at small N, so the rate of N = 1024 says more about 2048 than that of 256 does), else at the
same algorithm's forward rate, else at a prior, and counts every run the job makes (warm-up,
timed and the metered one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpu.config import FORWARD, AttentionConfig
from gpu.model.costmodel import pass_useful_flops
from gpu.results import RunResult

#: A first guess at each backend's attention throughput (FLOP/s), until it has run once.
PRIOR_FLOPS_PER_S = {"cpu": 8e9}
#: The shortest median a rate is learned from: below it a timer's resolution and per-call
#: overheads would make the rate say nothing about larger N.
MIN_LEARN_MS = 2.0


@dataclass(frozen=True)
class Estimate:
    seconds: float
    #: Where the rate came from: "measured at N = 1024" or "a first guess".
    source: str


@dataclass
class RunRates:
    """Rates (FLOP/s) by (backend key, algorithm, pass), each by N."""

    rates: dict[tuple[str, str, str], dict[int, float]] = field(default_factory=dict)

    def learn(self, key: str, result: RunResult) -> None:
        """Keep the rate a measured result shows (a recorded, failed or tiny one says nothing
        about this machine now)."""
        ms = result.total_ms
        if result.recorded or result.oom or not ms or ms < MIN_LEARN_MS or not result.flops:
            return
        c = result.config
        by_n = self.rates.setdefault((key, result.algorithm, c.pass_), {})
        by_n[c.seq_len] = pass_useful_flops(c) / (ms * 1e-3)

    def estimate(
        self, key: str, backend_name: str, config: AttentionConfig, algorithm: str, runs: int
    ) -> Estimate | None:
        """About how long `runs` runs of `algorithm` on `config` take here; None when nothing
        is known (no rate and no prior for this backend)."""
        by_n, whose = self.rates.get((key, algorithm, config.pass_)), ""
        if not by_n and config.pass_ != FORWARD:
            by_n, whose = self.rates.get((key, algorithm, FORWARD)), "the forward's rate, "
        work = pass_useful_flops(config) * runs
        if by_n:
            n = min(by_n, key=lambda m: (abs(math.log2(m / config.seq_len)), -m))
            return Estimate(work / by_n[n], f"{whose}measured at N = {n}")
        prior = PRIOR_FLOPS_PER_S.get(backend_name)
        if not prior:
            return None
        return Estimate(work / prior, "a first guess")
