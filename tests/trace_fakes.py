"""Synthetic kernel trace rows, laid out exactly as the trace build writes them, for tests that
must not need a GPU (parsing, validation, JSON) and for the view's tests when no recorded trace
is shipped. Not a model of the hardware: a greedy block scheduler with jittered phase times."""

from __future__ import annotations

import numpy as np

from gpu.algorithms import tile_shape
from gpu.config import AttentionConfig, ceil_div
from gpu.files.trace import END_CODE, ROW_WORDS, rows_per_block
from gpu.model.costmodel import kv_tiles_for_query_tile


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


def fake_ws_rows(
    config: AttentionConfig,
    *,
    sm_count: int = 132,
    seed: int = 0,
    t0: int = 1_700_000_000_000,
) -> np.ndarray:
    """(blocks · R, 5) int64 rows as the warp-specialized kernel's trace build leaves them
    (gpu/kernels/flash_ws.cu: per block the producer's 2T + 2 rows, then 4T + 4 per consumer;
    phase word role · 256 + code), with -1 in rows a causal block never reaches. One block per
    SM at a time; each consumer's phases are offset and jittered on their own."""
    from gpu.launch import flash_ws

    rng = np.random.default_rng(seed)
    launch = flash_ws.default_launch(config.head_dim)
    bm, bn = launch.block_m, launch.block_n
    q_tiles = ceil_div(config.seq_len, bm)
    blocks = q_tiles * config.bh
    producer, consumer = flash_ws.trace_segments(config)[:2]
    rpb = flash_ws.trace_rows_per_block(config)
    rows = np.full((blocks * rpb, ROW_WORDS), -1, dtype=np.int64)
    free = np.full(sm_count, t0, dtype=np.int64)
    for b in range(blocks):
        i = b % q_tiles
        tiles = kv_tiles_for_query_tile(config, bm, bn, i)
        sm = int(np.argmin(free))
        start = int(free[sm]) + int(rng.integers(0, 200))
        prod = [(0, i, start)]
        t = start + 64
        prod.append((1, 0, t))
        for j in range(tiles):
            if j + 1 < tiles:
                t += 100 + int(rng.integers(0, 50))
                prod.append((1, j + 1, t))
            t += 100 + int(rng.integers(0, 50))
            prod.append((2, j, t))
        prod.append((4, i, t + 10))
        marks = [prod]
        end = t + 10
        for c in range(launch.consumers):
            t = start + 1000 + 300 * c
            mine = [(256 * (1 + c) + 0, i, t)]
            for j in range(tiles + 1):
                if j < tiles:  # the last P·V's turn (j = T) has no wait mark
                    t += 30
                    mine.append((256 * (1 + c) + 5, j, t))
                t += 200
                mine.append((256 * (1 + c) + 6, j, t))
                if j == tiles:
                    break
                t += 500
                mine.append((256 * (1 + c) + 7, j, t))
                t += 900 + int(rng.integers(0, 100))
                mine.append((256 * (1 + c) + 8, j, t))
            t += 400
            mine.append((256 * (1 + c) + 3, i, t))
            t += 300
            mine.append((256 * (1 + c) + 4, i, t))
            marks.append(mine)
            end = max(end, t)
        first = [0, producer] + [producer + consumer * c for c in range(1, launch.consumers)]
        for offset, role_marks in zip(first, marks, strict=True):
            for r, (word, j, tt) in enumerate(role_marks):
                rows[b * rpb + offset + r] = (b, sm, word, j, tt)
        free[sm] = end
    return rows
