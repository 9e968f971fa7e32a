"""Cost-model figures, memoized: the slider asks for the same configs again and again, and the
tiled model walks every query tile (16 384 of them at N = 131072 with 8-row tiles).

Three memos: the no-reuse cost (`cost`), the three-figure traffic band on a GPU (`band`:
compulsory, L2-aware, no reuse; the L2-aware figure walks the cache model too), and the
roofline verdict of one algorithm at one config (`verdict`), measured figures included when a
result is given. The first two can be primed with figures computed elsewhere (the model curves
are computed in a separate process, which hands back every figure it worked out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gpu.config import AttentionConfig
from gpu.model.costmodel import AlgorithmCost, GpuSpec, TrafficBand, algorithm_cost, traffic_band
from gpu.model.roofline import AlgorithmVerdict, algorithm_verdict
from gpu.results import RunResult

from ..family import cache_config

MAX_ENTRIES = 8192
_memo: dict[tuple[AttentionConfig, str], AlgorithmCost] = {}
_bands: dict[tuple[AttentionConfig, str, GpuSpec], TrafficBand] = {}
_verdicts: dict[tuple[AttentionConfig, str, GpuSpec, RunResult | None], AlgorithmVerdict] = {}

BandKey = tuple[AttentionConfig, str, GpuSpec]


def _put(memo: dict, key: object, value: object) -> None:
    if len(memo) >= MAX_ENTRIES:
        memo.clear()  # a long session's shapes: start afresh rather than grow
    memo[key] = value


def cost(config: AttentionConfig, algorithm: str) -> AlgorithmCost:
    key = (config, algorithm)
    hit = _memo.get(key)
    if hit is None:
        hit = algorithm_cost(config, algorithm)
        _put(_memo, key, hit)
    return hit


def known(config: AttentionConfig, algorithm: str) -> AlgorithmCost | None:
    """The memoized figure, or None if it was not worked out yet (never computes)."""
    return _memo.get((config, algorithm))


def band(config: AttentionConfig, algorithm: str, gpu: GpuSpec) -> TrafficBand:
    """Compulsory ≤ L2-aware ≤ no-reuse DRAM traffic of `algorithm` at `config` on `gpu`."""
    key = (config, algorithm, gpu)
    hit = _bands.get(key)
    if hit is None:
        hit = traffic_band(config, algorithm, gpu)
        _put(_bands, key, hit)
    return hit


def known_band(config: AttentionConfig, algorithm: str, gpu: GpuSpec) -> TrafficBand | None:
    return _bands.get((config, algorithm, gpu))


def verdict(
    config: AttentionConfig, algorithm: str, gpu: GpuSpec, result: RunResult | None = None
) -> AlgorithmVerdict:
    """gpu.model.roofline's verdict for `algorithm` at `config` on `gpu`, from `result`'s measured
    times and bytes where it has them. A result of an algorithm that ignores the tile sizes
    holds at `config`'s tiles too; a result of another config counts as none."""
    if result is not None and (
        result.oom or cache_config(result.config, algorithm) != cache_config(config, algorithm)
    ):
        result = None
    elif result is not None and result.config != config:
        result = replace(result, config=config)
    key = (config, algorithm, gpu, result)
    try:
        hit = _verdicts.get(key)
    except TypeError:  # a result built with lists instead of tuples: not hashable, not memoized
        return algorithm_verdict(config, algorithm, gpu, result, band=band(config, algorithm, gpu))
    if hit is None:
        hit = algorithm_verdict(config, algorithm, gpu, result, band=band(config, algorithm, gpu))
        _put(_verdicts, key, hit)
    return hit


def known_verdict(
    config: AttentionConfig, algorithm: str, gpu: GpuSpec, result: RunResult | None = None
) -> AlgorithmVerdict | None:
    """`verdict` if its traffic band is worked out already (the GUI thread never walks a
    tiled model), else None."""
    if known_band(config, algorithm, gpu) is None:
        return None
    return verdict(config, algorithm, gpu, result)


def prime(
    costs: Mapping[tuple[AttentionConfig, str], AlgorithmCost],
    bands: Mapping[BandKey, TrafficBand] | None = None,
) -> None:
    """Add figures computed elsewhere."""
    if len(_memo) + len(costs) > MAX_ENTRIES:
        _memo.clear()
    _memo.update(costs)
    if bands:
        if len(_bands) + len(bands) > MAX_ENTRIES:
            _bands.clear()
        _bands.update(bands)


def clear() -> None:
    """Forget every figure (a benchmark measures the window's cost of computing them)."""
    _memo.clear()
    _bands.clear()
    _verdicts.clear()
