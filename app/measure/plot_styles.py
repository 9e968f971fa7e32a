"""How the Measurements tab's plots name and draw what they show: the algorithms and naive's
kernels in their order, the time plot's titles, each series' symbol and label, the peers' and
the roofs' styles and names, and the texts of a result's spread and bandwidth."""

from __future__ import annotations

from PySide6.QtCore import Qt

from gpu.algorithms import ALGORITHMS
from gpu.config import BACKWARD, DECODE, STEP
from gpu.model.backward_cost import NAIVE_BACKWARD_KERNELS
from gpu.model.costmodel import FP32, TENSOR
from gpu.model.roofline import (
    DRAM,
    HBM,
    L2,
    MEASURED,
    MMA,
    XU,
)
from gpu.results import RunResult

from ..plotting.plot_items import Style
from ..state.current_point import AlgorithmFigures
from ..state.units import (
    fmt_ms,
    fmt_rate,
)

ALGOS = tuple(ALGORITHMS)  # naive first, then the fused (tiled) kernels


NAIVE_FORWARD_KERNELS = ("gemm_qk", "softmax", "gemm_pv")


#: Naive's kernels, each drawn on the time plot where measured: the forward's, then the
#: backward's (a training step times both).
NAIVE_KERNELS = NAIVE_FORWARD_KERNELS + NAIVE_BACKWARD_KERNELS


#: The time plot's title per pass (short: where the results were recorded follows it, and the
#: title must fit a plot a quarter of a 1280-pixel window wide).
TIME_TITLES = {
    "forward": "Time",
    BACKWARD: "Backward time",
    STEP: "Step time",
    DECODE: "Decode step time",
}


#: Each algorithm's symbol, the registry's (`AlgorithmInfo.style`).
SYMBOLS = {a: info.style.symbol for a, info in ALGORITHMS.items()}


#: How a reference series (a peer such as PyTorch SDPA, recorded beside ours) is drawn: muted,
#: dashed, small crosses; never in an algorithm's colour, so it cannot pass for one of ours.
REFERENCE_STYLES: dict[str, tuple[str, Qt.PenStyle, str]] = {
    "sdpa_flash": ("fg", Qt.PenStyle.DashLine, "+"),
    "sdpa_cudnn": ("muted", Qt.PenStyle.DashDotLine, "x"),
    "sdpa_math": ("muted", Qt.PenStyle.DashDotDotLine, "+"),
}


DEFAULT_REFERENCE_STYLE = ("muted", Qt.PenStyle.DashLine, "+")


#: Roofs: (name, legend label prefix, line style).
ROOF_STYLES: dict[str, Style] = {
    HBM: Style("roof", 2.0),
    DRAM: Style("roof", 2.0),
    L2: Style("roof", 1.4, Qt.PenStyle.DashLine),
    TENSOR: Style("roof", 2.0),
    MMA: Style("roof", 1.4, Qt.PenStyle.DashLine),
    FP32: Style("muted", 1.4, Qt.PenStyle.DashDotLine),
    XU: Style("muted", 1.4, Qt.PenStyle.DotLine),
}


#: Roof names on the roofline plot (the full label, with its source, is explain's and the
#: tooltip's).
ROOF_LABELS = {HBM: "HBM", DRAM: "memory", L2: "L2", TENSOR: "tensor (wgmma)", MMA: "mma.sync",
               FP32: "fp32", XU: "exponentials"}  # fmt: skip


#: Band fill opacity (0..255) on the traffic plot.
BAND_ALPHA = 38


def xu_label(exp_per_s: float) -> str:
    """The exponential unit's roof in plain words: how many exponentials it returns a second."""
    return f"exponentials {exp_per_s / 1e12:.3g} trillion/s"


def xu_explained(exp_per_s: float, flops_per_s: float) -> str:
    """Why the exponential unit has a roof on a FLOP/s axis, for the roofline's hover."""
    per = flops_per_s / exp_per_s
    return (
        f"{xu_label(exp_per_s)}: attention takes one exponential per score, and each score "
        f"costs {round(per)} FLOPs of matmul (4·d), so this unit caps the FLOP rate at "
        f"{fmt_rate(flops_per_s, 'FLOP/s')}"
    )


def series_symbol(a: str) -> str:
    return SYMBOLS.get(a, "h")


def series_label(a: str) -> str:
    return ALGORITHMS[a].label if a in ALGORITHMS else a


def timing_spread(result: RunResult) -> tuple[float | None, float | None]:
    """(fastest, slowest) total time of a result: the sum of its kernels' min (max) times."""
    times = result.kernel_times
    if not times or any(k.min_ms is None or k.max_ms is None for k in times):
        return None, None
    return sum(k.min_ms for k in times), sum(k.max_ms for k in times)  # type: ignore[misc]


def spread_text(result: RunResult) -> str:
    lo, hi = timing_spread(result)
    samples = max((k.count for k in result.kernel_times), default=0)
    if lo is None or hi is None:
        return ""
    return f", median of {samples}\n   fastest {fmt_ms(lo)}, slowest {fmt_ms(hi)}"


def bandwidth_text(result: RunResult, figures: AlgorithmFigures | None = None) -> str:
    """DRAM bandwidth, measured where the counters were read (the current point's bytes,
    `figures`, over the measured time where given), and the model's figure named as such
    (the model's bytes over the measured time: what the run would need if every modeled byte
    went to DRAM)."""
    model = result.model_bandwidth_gbs
    measured = result.measured_bandwidth_gbs
    if figures is not None and figures.dram_bytes.source == MEASURED and result.total_ms:
        measured = (figures.dram_bytes.value or 0) / (result.total_ms * 1e-3) / 1e9
    parts = []
    if measured is not None:
        parts.append(f"DRAM {fmt_rate(measured * 1e9, 'B/s')} measured")
    if model is not None:
        parts.append(f"{fmt_rate(model * 1e9, 'B/s')} model (no-reuse bytes ÷ time)")
    return "bandwidth: " + ", ".join(parts) if parts else ""
