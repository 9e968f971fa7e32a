"""Colours, captions and labels shared by the real-trace widgets (trace_view, block_strip,
trace_panel)."""

from __future__ import annotations

import math

from PySide6.QtGui import (
    QColor,
)

from app.state.units import fmt_seconds
from gpu.algorithms import ALGORITHMS
from gpu.trace import (
    Trace,
)

from .canvas import (
    COMPUTE_C,
    READ_C,
    WRITE_C,
)

WAVE_COLORS = tuple(
    QColor(c) for c in ("#4f8fd0", "#a77be0", "#4fb07a", "#d6a24a", "#d0607d", "#5fc0c0")
)
KERNEL_COLORS = {
    "gemm_qk": QColor("#a77be0"),
    "softmax": QColor("#c4576f"),
    "gemm_pv": QColor("#a77be0"),
}
KERNEL_CAPTIONS = {
    "gemm_qk": "S = Q·Kᵀ/√d  (cuBLAS GEMM, writes S)",
    "softmax": "P = softmax(S)  (our kernel, reads S, writes P)",
    "gemm_pv": "O = P·V  (cuBLAS GEMM, reads P)",
}
PHASE_COLORS = {
    "load_Q_i": READ_C,
    "load_K_j": QColor("#7fc4ff"),
    "compute_S_ij": COMPUTE_C,
    "store_O_i": WRITE_C,
}
SELECT_C = QColor("#ffffff")
CURSOR_C = QColor("#ffe066")
REF_C = QColor("#e0b84a")


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


def fmt_ns(t: float) -> str:
    return fmt_seconds(t * 1e-9)


def algo_label(algorithm: str) -> str:
    info = ALGORITHMS.get(algorithm)
    return info.label if info else algorithm


def trace_title(t: Trace) -> str:
    return f"{algo_label(t.algorithm)} on {t.device}: {t.config.label()}"


def query_tile_rows(trace: Trace) -> int:
    """Rows of Q per block of the traced kernel."""
    from gpu.algorithms import tile_shape

    return tile_shape(trace.config, trace.algorithm)[0]
