"""The cost model's curves over N for one family: what the plots draw as lines and bands.

Computing them walks the tiled model's query tiles at every grid point (tens of ms of Python for
the four algorithms), so the plots ask for them in a separate process (a thread would hold the
GIL the GUI thread needs) and draw the finished set in one go. The same job works out the costs
and traffic bands at every slider stop and hands them back with the curves (`figures`),
so the markers that follow the slider afterwards are memo look-ups (packed where they were
computed: app/state/model/cache.py says why).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpu.algorithms import ALGORITHMS, NAIVE, SPLIT_KV, TILED, runs_pass
from gpu.config import AttentionConfig
from gpu.model.costmodel import AlgorithmCost, GpuSpec, TrafficBand
from gpu.model.layer_stack import layer_stack
from gpu.model.roofline import algorithm_verdict

from ..decode_fit import prefill_of
from ..family import Family
from ..seq_scale import SEQ_MAX, SEQ_MIN, log_grid
from .cache import BandKey, Packed, pack
from .cache import band as memo_band
from .cache import cost as memo_cost

#: Where the model curves are sampled: smooth on log-log axes.
MODEL_GRID = tuple(log_grid(SEQ_MIN, SEQ_MAX, per_octave=4))

Series = tuple[tuple[int, ...], tuple[float, ...]]


@dataclass(frozen=True)
class ModelCurves:
    """Line series by (plot, item): memory `model_naive`/`model_tiled` (and, for a training
    pass, `stack_naive`/`stack_tiled`: the peak of `layers` layers' saved activations plus one
    layer's backward, gpu/model/layer_stack.py; for decode, `prefill_naive`: naive's peak for
    the prefill of the same shape, N²); traffic `model_<algo>`
    (the L2-aware estimate on `gpu`) between `compulsory_<algo>` and `noreuse_<algo>` (the
    band); timing `roofline_<algo>`, the hierarchical roofline's time on `time_gpu` (empty
    where an algorithm is off or no GPU times apply)."""

    family: Family
    algorithms: tuple[str, ...]
    time_gpu: GpuSpec | None
    series: dict[tuple[str, str], Series]
    #: Every cost and traffic band computed on the way, for app.state.model.cache.prime.
    figures: Packed
    #: The GPU whose cache the traffic band assumes.
    gpu: GpuSpec | None = None
    #: The layer count of the memory plot's stack lines (training passes only).
    layers: int = 1


def model_curves(
    family: Family,
    algorithms: tuple[str, ...],
    time_gpu: GpuSpec | None,
    warm: Iterable[int] = (),
    gpu: GpuSpec | None = None,
    layers: int = 1,
) -> ModelCurves:
    """Every model line for `family`; `warm`: more N whose costs to work out for the slider;
    `gpu`: the GPU of the traffic band (default `time_gpu`; no band without either);
    `layers`: the layer count of a training pass's saved-activation stack."""
    gpu = gpu or time_gpu
    # Only the algorithms written for the family's pass have its model (no forward of a decode
    # kernel, no decode of a prefill kernel).
    algorithms = tuple(a for a in algorithms if runs_pass(a, family.pass_))
    costs: dict[tuple[AttentionConfig, str], AlgorithmCost] = {}
    bands: dict[BandKey, TrafficBand] = {}

    def cost(config: AttentionConfig, algorithm: str) -> AlgorithmCost:
        key = (config, algorithm)
        if key not in costs:
            costs[key] = memo_cost(config, algorithm)
        return costs[key]

    def band(config: AttentionConfig, algorithm: str) -> TrafficBand:
        assert gpu is not None
        key = (config, algorithm, gpu)
        if key not in bands:
            bands[key] = memo_band(config, algorithm, gpu)
            costs.setdefault((config, algorithm), bands[key].no_reuse)
        return bands[key]

    def roofline_ms(config: AttentionConfig, algorithm: str, on: GpuSpec) -> float:
        """The hierarchical roofline's lower bound on the time (gpu.model.roofline)."""
        figures = band(config, algorithm) if on == gpu else None
        return algorithm_verdict(config, algorithm, on, band=figures).roofline_ms

    configs = [family.with_(seq_len=n) for n in MODEL_GRID]
    grid = MODEL_GRID
    fused = SPLIT_KV if family.is_decode else TILED  # the fused kernel the memory line is
    out: dict[tuple[str, str], Series] = {
        ("memory", "model_naive"): (grid, tuple(cost(c, NAIVE).peak_bytes for c in configs)),
        ("memory", "model_tiled"): (grid, tuple(cost(c, fused).peak_bytes for c in configs)),
    }
    empty: Series = ((), ())
    # Decode: the prefill of the same shape, naive's N² peak, drawn beside the cache for contrast.
    out[("memory", "prefill_naive")] = (
        (grid, tuple(cost(prefill_of(c), NAIVE).peak_bytes for c in configs))
        if family.is_decode
        else empty
    )
    for key, algorithm in (("stack_naive", NAIVE), ("stack_tiled", TILED)):
        out[("memory", key)] = (
            (grid, tuple(layer_stack(c, algorithm, layers).peak_bytes for c in configs))
            if family.has_backward
            else empty
        )
    for a in ALGORITHMS:
        on = a in algorithms
        if on and gpu is not None:
            figures = [band(c, a) for c in configs]
            out[("traffic", f"model_{a}")] = (grid, tuple(b.l2_aware.hbm_bytes for b in figures))
            out[("traffic", f"compulsory_{a}")] = (
                grid,
                tuple(b.compulsory.hbm_bytes for b in figures),
            )
            out[("traffic", f"noreuse_{a}")] = (grid, tuple(b.no_reuse.hbm_bytes for b in figures))
        else:
            out[("traffic", f"model_{a}")] = (
                (grid, tuple(cost(c, a).hbm_bytes for c in configs)) if on else empty
            )
            out[("traffic", f"compulsory_{a}")] = empty
            out[("traffic", f"noreuse_{a}")] = empty
        out[("timing", f"roofline_{a}")] = (
            (grid, tuple(roofline_ms(c, a, time_gpu) for c in configs))
            if on and time_gpu is not None
            else empty
        )
    for n in warm:
        for a in algorithms:
            config = family.with_(seq_len=n)
            if gpu is not None:
                band(config, a)
            else:
                cost(config, a)
    return ModelCurves(family, algorithms, time_gpu, out, pack(costs, bands), gpu, layers)
