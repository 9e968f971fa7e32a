"""Which algorithm is faster at the point on screen, and whether its measurements can say so.

Each measured time is a median with a spread (the fastest and the slowest timed round, each
kernel's summed). Two times whose spreads overlap do not say which algorithm is faster: on a
busy machine the same algorithm was once measured at 0.97 s and once at 3.16 s. Then the text
says so instead of naming a winner. The NumPy backend measures both in interleaved rounds
(gpu/backends/cpu_backend.py), so load hits them alike and their spreads rarely overlap
unless the two are close.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpu.algorithms import ALGORITHMS, NAIVE
from gpu.results import RunResult

from .units import fmt_ms

#: Why the NumPy backend's tiled path can be slower than naive: what the app says beside it.
CPU_TILED_SLOWER = (
    "On a CPU this can happen: each tile is a separate NumPy call whose overhead small tiles "
    "do not amortize, while naive's three large matrix products run at BLAS speed. The tiled "
    "path still never holds S or P: its lesson here is the memory plot."
)


@dataclass(frozen=True)
class TimeComparison:
    """`faster` against `slower` at one config; `decided` when their spreads do not overlap."""

    faster: str
    slower: str
    ratio: float  # the slower median over the faster one
    decided: bool
    text: str


def time_range(r: RunResult) -> tuple[float, float] | None:
    """(fastest, slowest) total in ms: each kernel's fastest and slowest timed sample summed;
    None where the result kept no spread."""
    if r.oom or not r.kernel_times:
        return None
    lo = [k.min_ms for k in r.kernel_times]
    hi = [k.max_ms for k in r.kernel_times]
    if None in lo or None in hi:
        return None
    return sum(lo), sum(hi)  # type: ignore[arg-type]


def _timed(r: RunResult) -> str:
    span = time_range(r)
    spread = f" ({fmt_ms(span[0])}–{fmt_ms(span[1])})" if span and span[0] < span[1] else ""
    return f"{fmt_ms(r.total_ms)}{spread}"


def compare_times(
    results: Mapping[str, RunResult], fused: str, backend: str = ""
) -> TimeComparison | None:
    """Naive against `fused` at this config, from their results (None unless both ran)."""
    a, b = results.get(NAIVE), results.get(fused)
    if a is None or b is None or not a.total_ms or not b.total_ms:
        return None
    faster, slower = (b, a) if b.total_ms <= a.total_ms else (a, b)
    ratio = slower.total_ms / faster.total_ms
    ra, rb = time_range(faster), time_range(slower)
    decided = ra is None or rb is None or ra[1] < rb[0]
    f_name, s_name = ALGORITHMS[faster.algorithm].label, ALGORITHMS[slower.algorithm].label
    times = f"{f_name} {_timed(faster)}, {s_name} {_timed(slower)}"
    if decided:
        why = ""
        if faster.algorithm == NAIVE and backend == "cpu":
            why = " " + CPU_TILED_SLOWER
        spread = "" if ra is None or rb is None else " (their spreads do not overlap)"
        text = f"{times}: {f_name} is {ratio:.1f}× faster{spread}.{why}"
    else:
        text = (
            f"{times}: their spreads overlap, so these runs cannot say which is faster (other "
            "work on the machine slowed the rounds): Run ▸ Re-measure this N (Ctrl+Shift+R) "
            "measures them again."
        )
    return TimeComparison(faster.algorithm, slower.algorithm, ratio, decided, text)
