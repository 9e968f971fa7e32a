"""Cost-model figures, memoized: the slider asks for the same configs again and again, and the
tiled model walks every query tile (16 384 of them at N = 131072 with 8-row tiles)."""

from __future__ import annotations

from functools import lru_cache

from gpu.config import AttentionConfig
from gpu.costmodel import AlgorithmCost, algorithm_cost


@lru_cache(maxsize=8192)
def cost(config: AttentionConfig, algorithm: str) -> AlgorithmCost:
    return algorithm_cost(config, algorithm)
