"""Synthetic kernel trace rows, laid out exactly as the trace build writes them, for tests that
must not need a GPU (parsing, validation, JSON) and for the view's tests when no recorded trace
is shipped. Not a model of the hardware: a greedy block scheduler with jittered phase times."""

from __future__ import annotations

import numpy as np

from gpu.algorithms import tile_shape
from gpu.config import AttentionConfig, ceil_div
from gpu.costmodel import kv_tiles_for_query_tile
from gpu.trace import END_CODE, ROW_WORDS, rows_per_block


def fake_rows(
    config: AttentionConfig,
    algorithm: str,
    *,
    sm_count: int = 132,
    slots: int = 2,
    seed: int = 0,
    t0: int = 1_700_000_000_000,
) -> np.ndarray:
    """(blocks · R, 5) int64 rows with -1 fill, as one traced launch leaves the buffer."""
    rng = np.random.default_rng(seed)
    bm, bn = tile_shape(config, algorithm)
    q_tiles = ceil_div(config.seq_len, bm)
    blocks = q_tiles * config.bh
    rpb = rows_per_block(config, algorithm)
    rows = np.full((blocks * rpb, ROW_WORDS), -1, dtype=np.int64)
    free = np.full((sm_count, slots), t0, dtype=np.int64)
    for b in range(blocks):
        i = b % q_tiles
        sm, slot = np.unravel_index(int(np.argmin(free)), free.shape)
        t = int(free[sm, slot]) + int(rng.integers(0, 300))
        out = []
        out.append((0, i, t))
        t += 900 + int(rng.integers(0, 200))
        for j in range(kv_tiles_for_query_tile(config, bm, bn, i)):
            out.append((1, j, t))
            t += 400 + int(rng.integers(0, 200))
            out.append((2, j, t))
            t += 1500 + int(rng.integers(0, 300))
        out.append((3, i, t))
        t += 700
        out.append((END_CODE, i, t))
        for r, (code, j, tt) in enumerate(out):
            rows[b * rpb + r] = (b, sm, code, j, tt)
        free[sm, slot] = t
    return rows
