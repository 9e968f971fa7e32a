"""Captions and labels shared by the real-trace widgets (trace_view, block_strip, trace_panel);
their colours are the theme's (colors.py)."""

from __future__ import annotations

import math

from gpu.algorithms import ALGORITHMS
from gpu.files.trace import (
    Trace,
)

KERNEL_CAPTIONS = {
    "gemm_qk": "S = Q·Kᵀ/√d  (cuBLAS GEMM, writes S)",
    "softmax": "P = softmax(S)  (our kernel, reads S, writes P)",
    "gemm_pv": "O = P·V  (cuBLAS GEMM, reads P)",
}


def nice_step(span: float, target: int) -> float:
    """A 1-2-5 step giving about `target` ticks over `span`."""
    if span <= 0:
        return 1.0
    raw = span / max(1, target)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def algo_label(algorithm: str) -> str:
    info = ALGORITHMS.get(algorithm)
    return info.label if info else algorithm


def trace_title(t: Trace) -> str:
    return f"{algo_label(t.algorithm)} on {t.device}: {t.config.label()}"


def query_tile_rows(trace: Trace) -> int:
    """Rows of Q per block of the traced kernel."""
    from gpu.algorithms import tile_shape

    return tile_shape(trace.config, trace.algorithm)[0]
