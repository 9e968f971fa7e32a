"""What makes results one series over N: a config's family.

A family is the config with its sequence length set aside (normalised to SEQ_MIN): everything
that changes the shape of the curves over N (heads, head dim, batch, dtype, mask, tiles). The
plots redraw their model curves per family, the result store files series per family, and a
recorded run opens on its most common family; all of them use `family` below.

`cache_config` narrows that per algorithm: algorithms that ignore the readable kernel's tile
sizes (naive's GEMMs, the tensor-core kernels) are filed without them, so changing tiles keeps
their measurements.
"""

from __future__ import annotations

from functools import lru_cache

from gpu.algorithms import ALGORITHMS
from gpu.config import AttentionConfig

from .seq_scale import SEQ_MIN

#: Tile sizes every cache key of a tile-agnostic algorithm is normalised to.
NEUTRAL_TILES = {"block_m": 64, "block_n": 64}

Family = AttentionConfig
"""A config whose N is SEQ_MIN, standing for every N (see `family`)."""


@lru_cache(maxsize=4096)  # asked for on every slider move; configs are immutable
def family(config: AttentionConfig) -> Family:
    """`config` with N normalised: equal for two configs exactly when only N differs."""
    return config if config.seq_len == SEQ_MIN else config.with_(seq_len=SEQ_MIN)


def tile_agnostic(algorithm: str) -> bool:
    """Whether one of our algorithms ignores the config's tile sizes (all but the readable
    kernel choose their own). A reference peer is filed by app.state.recorded_run instead."""
    info = ALGORITHMS.get(algorithm)
    return info is not None and not info.uses_config_tiles


@lru_cache(maxsize=4096)
def cache_config(config: AttentionConfig, algorithm: str) -> AttentionConfig:
    """The config as far as `algorithm` can tell: tile sizes dropped where they do not matter."""
    if tile_agnostic(algorithm) and (config.block_m, config.block_n) != (64, 64):
        return config.with_(**NEUTRAL_TILES)
    return config


@lru_cache(maxsize=4096)
def family_of(config: AttentionConfig, algorithm: str) -> Family:
    """The family `algorithm`'s results of `config` are filed under."""
    return family(cache_config(config, algorithm))
