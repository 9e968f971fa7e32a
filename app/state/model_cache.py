"""Cost-model figures, memoized: the slider asks for the same configs again and again, and the
tiled model walks every query tile (16 384 of them at N = 131072 with 8-row tiles).

The memo can be primed with figures computed elsewhere (the model curves are computed in a
separate process, which hands back every cost it worked out).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpu.config import AttentionConfig
from gpu.costmodel import AlgorithmCost, algorithm_cost

MAX_ENTRIES = 8192
_memo: dict[tuple[AttentionConfig, str], AlgorithmCost] = {}


def cost(config: AttentionConfig, algorithm: str) -> AlgorithmCost:
    key = (config, algorithm)
    hit = _memo.get(key)
    if hit is None:
        hit = algorithm_cost(config, algorithm)
        if len(_memo) >= MAX_ENTRIES:
            _memo.clear()  # a long session's shapes: start afresh rather than grow
        _memo[key] = hit
    return hit


def known(config: AttentionConfig, algorithm: str) -> AlgorithmCost | None:
    """The memoized figure, or None if it was not worked out yet (never computes)."""
    return _memo.get((config, algorithm))


def prime(costs: Mapping[tuple[AttentionConfig, str], AlgorithmCost]) -> None:
    """Add figures computed elsewhere."""
    if len(_memo) + len(costs) > MAX_ENTRIES:
        _memo.clear()
    _memo.update(costs)


def clear() -> None:
    _memo.clear()


cost.cache_clear = clear  # type: ignore[attr-defined]  # the functools.lru_cache spelling
