"""The sequence-length slider's scale: quarter steps within each octave, from 128 to 131072.

Positions map to 2^k·{1, 1.25, 1.5, 1.75}: round numbers (1536, 3072, 24576...) that are
multiples of 32, evenly spread on the log axis within a few percent. A recorded run replaces the
scale by the N values it holds, so the slider only lands on measured points.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence

SEQ_MIN = 128
SEQ_MAX = 131072
STEPS_PER_OCTAVE = (1.0, 1.25, 1.5, 1.75)


def default_scale(lo: int = SEQ_MIN, hi: int = SEQ_MAX) -> tuple[int, ...]:
    values = set()
    k = 0
    while (1 << k) <= hi:
        for step in STEPS_PER_OCTAVE:
            n = round((1 << k) * step)
            if lo <= n <= hi:
                values.add(n)
        k += 1
    return tuple(sorted(values))


def nearest_index(scale: Sequence[int], n: int) -> int:
    """Index of the scale value closest to `n` on a log axis (ties go to the smaller value)."""
    if not scale:
        raise ValueError("empty scale")
    i = bisect.bisect_left(scale, n)
    if i == 0:
        return 0
    if i >= len(scale):
        return len(scale) - 1
    lower, upper = scale[i - 1], scale[i]
    if n <= 0:
        return i - 1
    return i - 1 if math.log(n / lower) <= math.log(upper / n) else i


def powers_of_two_up_to(n: int, lo: int = SEQ_MIN) -> list[int]:
    """The sweep's grid: every power of two from `lo` to `n`, plus `n` itself."""
    out = []
    p = 1
    while p <= n:
        if p >= lo:
            out.append(p)
        p <<= 1
    if n not in out:
        out.append(n)
    return out


def log_grid(lo: int, hi: int, per_octave: int = 8) -> list[int]:
    """Integer N values evenly spaced in log2 from lo to hi: the model curves' sample points."""
    steps = max(1, round(math.log2(hi / lo) * per_octave))
    values = {round(lo * (hi / lo) ** (i / steps)) for i in range(steps + 1)}
    return sorted(values)


def sorted_unique(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(set(values)))
