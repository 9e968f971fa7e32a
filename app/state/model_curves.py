"""The cost model's curves over N for one family: what the plots draw as lines.

Computing them walks the tiled model's query tiles at every grid point (tens of ms of Python for
the four algorithms), so the plots ask for them in a separate process (a thread would hold the
GIL the GUI thread needs) and draw the finished set in one go. The same job works out the costs
at every slider stop and hands them back with the curves (`costs`), so the markers that follow
the slider afterwards are memo look-ups.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpu.algorithms import ALGORITHMS, NAIVE, TILED
from gpu.config import AttentionConfig
from gpu.costmodel import AlgorithmCost, GpuSpec

from .family import Family
from .model_cache import cost as memo_cost
from .seq_scale import SEQ_MAX, SEQ_MIN, log_grid

#: Where the model curves are sampled: smooth on log-log axes.
MODEL_GRID = tuple(log_grid(SEQ_MIN, SEQ_MAX, per_octave=4))

Series = tuple[tuple[int, ...], tuple[float, ...]]


@dataclass(frozen=True)
class ModelCurves:
    """Line series by (plot, item): memory `model_naive`/`model_tiled`, traffic `model_<algo>`,
    timing `roofline_<algo>` (empty where an algorithm is off or no GPU times apply)."""

    family: Family
    algorithms: tuple[str, ...]
    time_gpu: GpuSpec | None
    series: dict[tuple[str, str], Series]
    #: Every cost computed on the way, for app.state.model_cache.prime.
    costs: dict[tuple[AttentionConfig, str], AlgorithmCost]


def model_curves(
    family: Family,
    algorithms: tuple[str, ...],
    time_gpu: GpuSpec | None,
    warm: Iterable[int] = (),
) -> ModelCurves:
    """Every model line for `family`; `warm`: more N whose costs to work out for the slider."""
    costs: dict[tuple[AttentionConfig, str], AlgorithmCost] = {}

    def cost(config: AttentionConfig, algorithm: str) -> AlgorithmCost:
        key = (config, algorithm)
        if key not in costs:
            costs[key] = memo_cost(config, algorithm)
        return costs[key]

    configs = [family.with_(seq_len=n) for n in MODEL_GRID]
    grid = MODEL_GRID
    out: dict[tuple[str, str], Series] = {
        ("memory", "model_naive"): (grid, tuple(cost(c, NAIVE).peak_bytes for c in configs)),
        ("memory", "model_tiled"): (grid, tuple(cost(c, TILED).peak_bytes for c in configs)),
    }
    for a in ALGORITHMS:
        on = a in algorithms
        out[("traffic", f"model_{a}")] = (
            (grid, tuple(cost(c, a).hbm_bytes for c in configs)) if on else ((), ())
        )
        out[("timing", f"roofline_{a}")] = (
            (grid, tuple(cost(c, a).modeled_seconds(time_gpu) * 1e3 for c in configs))
            if on and time_gpu is not None
            else ((), ())
        )
    for n in warm:
        for a in algorithms:
            cost(family.with_(seq_len=n), a)
    return ModelCurves(family, algorithms, time_gpu, out, costs)
