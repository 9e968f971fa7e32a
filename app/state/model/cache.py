"""Cost-model figures, memoized: the slider asks for the same configs again and again, and the
tiled model walks every query tile (16 384 of them at N = 131072 with 8-row tiles).

Three memos: the no-reuse cost (`cost`), the three-figure traffic band on a GPU (`band`:
compulsory, L2-aware, no reuse; the L2-aware figure walks the cache model too), and the
roofline verdict of one algorithm at one config (`verdict`), measured figures included when a
result is given. The first two can be primed with figures computed elsewhere (the model curves
are computed in a separate process, which hands back every figure it worked out).

Primed figures are kept pickled (`Packed`), each under a key of plain values, and made into
objects when first asked for. Held as objects, the thousands a session primes (each cost and
band a tree of a dozen objects) were walked by every full garbage collection: on the 2-core
machine one collection then held the GUI thread 20-60 ms. Bytes under tuples of plain values
are nothing the collector walks; only the figures the GUI thread asked for are objects.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from operator import attrgetter

from gpu.config import AttentionConfig
from gpu.model.costmodel import AlgorithmCost, GpuSpec, TrafficBand, algorithm_cost, traffic_band
from gpu.model.roofline import AlgorithmVerdict, algorithm_verdict
from gpu.results import RunResult

from ..family import cache_config

#: Figures held as objects per memo (those the GUI thread asked for), and pickled ones per store.
MAX_ENTRIES = 8192
MAX_PACKED = 8192
#: GPUs whose bands are kept pickled (a session sees a few).
MAX_PACKED_GPUS = 4
_memo: dict[tuple[AttentionConfig, str], AlgorithmCost] = {}
_bands: dict[tuple[AttentionConfig, str, GpuSpec], TrafficBand] = {}
_verdicts: dict[tuple[AttentionConfig, str, GpuSpec, RunResult | None], AlgorithmVerdict] = {}

BandKey = tuple[AttentionConfig, str, GpuSpec]

_config_values = attrgetter(*(f.name for f in fields(AttentionConfig)))


def plain_key(config: AttentionConfig, algorithm: str) -> tuple:
    """`config`'s fields and `algorithm` as a tuple of plain values (ints, strings, bools)."""
    return (*_config_values(config), algorithm)


@dataclass(frozen=True)
class Packed:
    """Figures worked out elsewhere, each pickled, by `plain_key` (bands also by GPU)."""

    costs: dict[tuple, bytes]
    bands: dict[GpuSpec, dict[tuple, bytes]]


def pack(
    costs: Mapping[tuple[AttentionConfig, str], AlgorithmCost],
    bands: Mapping[BandKey, TrafficBand],
) -> Packed:
    """The figures as `prime` keeps them (done where they were computed, off the GUI thread)."""
    by_gpu: dict[GpuSpec, dict[tuple, bytes]] = {}
    for (config, algorithm, gpu), b in bands.items():
        by_gpu.setdefault(gpu, {})[plain_key(config, algorithm)] = pickle.dumps(b, protocol=5)
    return Packed(
        {plain_key(c, a): pickle.dumps(v, protocol=5) for (c, a), v in costs.items()}, by_gpu
    )


_packed_costs: dict[tuple, bytes] = {}
_packed_bands: dict[GpuSpec, dict[tuple, bytes]] = {}


def _put(memo: dict, key: object, value: object) -> None:
    if len(memo) >= MAX_ENTRIES:
        memo.clear()  # a long session's shapes: start afresh rather than grow
    memo[key] = value


def cost(config: AttentionConfig, algorithm: str) -> AlgorithmCost:
    hit = known(config, algorithm)
    if hit is None:
        hit = algorithm_cost(config, algorithm)
        _put(_memo, (config, algorithm), hit)
    return hit


def known(config: AttentionConfig, algorithm: str) -> AlgorithmCost | None:
    """The memoized or primed figure, or None if it was not worked out yet (never computes)."""
    key = (config, algorithm)
    hit = _memo.get(key)
    if hit is None:
        blob = _packed_costs.get(plain_key(config, algorithm))
        if blob is not None:
            hit = pickle.loads(blob)
            _put(_memo, key, hit)
    return hit


def band(config: AttentionConfig, algorithm: str, gpu: GpuSpec) -> TrafficBand:
    """Compulsory ≤ L2-aware ≤ no-reuse DRAM traffic of `algorithm` at `config` on `gpu`."""
    hit = known_band(config, algorithm, gpu)
    if hit is None:
        hit = traffic_band(config, algorithm, gpu)
        _put(_bands, (config, algorithm, gpu), hit)
    return hit


def known_band(config: AttentionConfig, algorithm: str, gpu: GpuSpec) -> TrafficBand | None:
    key = (config, algorithm, gpu)
    hit = _bands.get(key)
    if hit is None:
        blob = _packed_bands.get(gpu, {}).get(plain_key(config, algorithm))
        if blob is not None:
            hit = pickle.loads(blob)
            _put(_bands, key, hit)
    return hit


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


def prime(packed: Packed) -> None:
    """Add figures computed elsewhere (`pack`)."""
    _add_packed(_packed_costs, packed.costs)
    for gpu, blobs in packed.bands.items():
        if gpu not in _packed_bands and len(_packed_bands) >= MAX_PACKED_GPUS:
            _packed_bands.clear()  # start afresh rather than grow
        _add_packed(_packed_bands.setdefault(gpu, {}), blobs)


def _add_packed(store: dict[tuple, bytes], blobs: dict[tuple, bytes]) -> None:
    if len(store) + len(blobs) > MAX_PACKED:
        store.clear()
    store.update(blobs)


def clear() -> None:
    """Forget every figure (a benchmark measures the window's cost of computing them)."""
    _memo.clear()
    _bands.clear()
    _verdicts.clear()
    _packed_costs.clear()
    _packed_bands.clear()
