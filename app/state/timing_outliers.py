"""Times out of line with their neighbours: a point to measure again.

A pass over more tokens does more work: its time cannot be shorter than a pass over fewer. On a
CPU shared with other work a sample can be many times too slow (start-up work, another
process), and the time plot then zigzags (N = 1024 slower than 2048). Such a point is measured
once more, the way the CUDA timing policy takes a noisy kernel's samples again.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpu.results import RunResult

#: A time this much above the next larger N's is out of line (5 % is the timing's own noise).
SLACK = 1.05


def out_of_line(results: Iterable[RunResult]) -> list[RunResult]:
    """The results (one algorithm, one family) slower than a result at a larger N."""
    timed = sorted(
        (r for r in results if not r.oom and r.total_ms and not r.recorded),
        key=lambda r: r.config.seq_len,
    )
    out = []
    fastest_above = float("inf")
    for r in reversed(timed):
        if r.total_ms > SLACK * fastest_above:
            out.append(r)
        fastest_above = min(fastest_above, r.total_ms)
    return sorted(out, key=lambda r: r.config.seq_len)
