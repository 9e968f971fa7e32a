"""The steps inside one thread block as NumPy arrays, plus O(1) access to any single step.

Why this exists: at N = 131072 one block of the tiled kernel has ~10 000 steps and building them
as `Step` objects costs ~35 ms, far too slow to do for every block the playhead crosses. The two
kernels whose blocks loop (the tiled `flash_fwd` and naive `gemm_pv`) get a vectorised
description here that follows `gpu.model.schedule` rule for rule; every other kernel (the loop-free
`gemm_qk` and `softmax` blocks, or any kernel added later) is read from `block_steps` itself.
The fast paths are checked against `block_steps` by tests/test_animation.py, and at run time
each block's array sums are checked against the schedule's per-block table; a mismatch switches
that kernel back to `block_steps` (see `Lane`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpu.algorithms import NAIVE, tile_shape
from gpu.config import STAT_BYTES, AttentionConfig, ceil_div
from gpu.model.costmodel import kv_tiles_for_query_tile, tile_rows
from gpu.model.schedule import (
    COMPUTE,
    READ,
    STEP_NAMES,
    WRITE,
    KernelSchedule,
    Step,
    launch_query_tile,
)

KIND_CODES = {READ: 0, WRITE: 1, COMPUTE: 2}


@dataclass(frozen=True)
class BlockDetail:
    """One block's steps: per-step bytes/FLOPs arrays (one head) and a lookup of the `Step`."""

    kernel: str
    block: int
    names: tuple[str, ...]  # the name table; `name_ids` index into it
    name_ids: np.ndarray
    kinds: np.ndarray  # KIND_CODES
    read: np.ndarray
    written: np.ndarray
    flops: np.ndarray
    step_at: Callable[[int], Step]

    @property
    def count(self) -> int:
        return len(self.read)

    def name(self, s: int) -> str:
        return self.names[int(self.name_ids[s])]


def detail_from_steps(kernel: str, block: int, steps: list[Step]) -> BlockDetail:
    """The generic path: arrays from the schedule's own `Step` list."""
    names: list[str] = []
    ids = np.empty(len(steps), np.int16)
    for k, st in enumerate(steps):
        if st.name not in names:
            names.append(st.name)
        ids[k] = names.index(st.name)
    kinds = np.array([KIND_CODES[st.kind] for st in steps], np.int8)
    read = np.array([st.bytes if st.kind == READ else 0 for st in steps], np.int64)
    written = np.array([st.bytes if st.kind == WRITE else 0 for st in steps], np.int64)
    flops = np.array([st.flops for st in steps], np.int64)
    frozen = tuple(steps)
    return BlockDetail(
        kernel, block, tuple(names), ids, kinds, read, written, flops, frozen.__getitem__
    )


# --------------------------------------------------------------------------------------------
# Fast paths (mirror gpu/model/schedule.py; verified by tests against block_steps).


def _flash_detail(config: AttentionConfig, algorithm: str, block: int) -> BlockDetail:
    n, d, eb = config.seq_len, config.head_dim, config.elem_bytes
    bm, bn = tile_shape(config, algorithm)
    i = launch_query_tile(config, ceil_div(n, bm), block, algorithm)  # the kernel's order
    names = STEP_NAMES["flash_fwd"]
    ri, i0 = tile_rows(n, bm, i), i * bm
    v = kv_tiles_for_query_tile(config, bm, bn, i)
    rj = np.minimum(bn, n - np.arange(v, dtype=np.int64) * bn)
    count = 1 + 5 * v + 2
    body = slice(1, 1 + 5 * v)
    ids = np.empty(count, np.int16)
    ids[0] = 0
    ids[body] = np.tile(np.arange(1, 6, dtype=np.int16), v)
    ids[-2:] = (6, 7)
    kinds = np.full(count, KIND_CODES[COMPUTE], np.int8)
    kinds[0] = KIND_CODES[READ]
    kinds[1 : 1 + 5 * v : 5] = KIND_CODES[READ]
    kinds[2 : 1 + 5 * v : 5] = KIND_CODES[READ]
    kinds[-2:] = KIND_CODES[WRITE]
    read = np.zeros(count, np.int64)
    read[0] = ri * d * eb
    read[1 : 1 + 5 * v : 5] = rj * d * eb
    read[2 : 1 + 5 * v : 5] = rj * d * eb
    flops = np.zeros(count, np.int64)
    flops[3 : 1 + 5 * v : 5] = 2 * ri * rj * d
    flops[5 : 1 + 5 * v : 5] = 2 * ri * rj * d
    written = np.zeros(count, np.int64)
    written[-2] = ri * d * eb
    written[-1] = 2 * ri * STAT_BYTES

    def step_at(s: int) -> Step:
        if s == 0:
            return Step("load_Q_i", "flash_fwd", READ, "Q", (i0, i0 + ri, 0, d), ri * d * eb)
        if s == count - 2:
            return Step("store_O_i", "flash_fwd", WRITE, "O", (i0, i0 + ri, 0, d), ri * d * eb)
        if s == count - 1:
            return Step(
                "store_ml", "flash_fwd", WRITE, "ml", (i0, i0 + ri, 0, 2), 2 * ri * STAT_BYTES
            )
        j, k = divmod(s - 1, 5)
        r, j0 = tile_rows(n, bn, j), j * bn
        if k == 0:
            return Step("load_K_j", "flash_fwd", READ, "K", (j0, j0 + r, 0, d), r * d * eb)
        if k == 1:
            return Step("load_V_j", "flash_fwd", READ, "V", (j0, j0 + r, 0, d), r * d * eb)
        if k == 2:
            return Step(
                "compute_S_ij",
                "flash_fwd",
                COMPUTE,
                "S",
                (i0, i0 + ri, j0, j0 + r),
                flops=2 * ri * r * d,
            )
        if k == 3:
            return Step("online_softmax", "flash_fwd", COMPUTE, "ml", (i0, i0 + ri, j0, j0 + r))
        return Step(
            "accumulate_O_i", "flash_fwd", COMPUTE, "O", (i0, i0 + ri, 0, d), flops=2 * ri * r * d
        )

    return BlockDetail("flash_fwd", block, names, ids, kinds, read, written, flops, step_at)


def _pv_detail(config: AttentionConfig, b: int) -> BlockDetail:
    n, d, eb = config.seq_len, config.head_dim, config.elem_bytes
    t, _ = tile_shape(config, NAIVE)
    r, c = ceil_div(n, t), ceil_div(d, t)
    names = STEP_NAMES["gemm_pv"]
    i, cc = divmod(b, c)
    ri, wc = tile_rows(n, t, i), tile_rows(d, t, cc)
    i0, c0 = i * t, cc * t
    rk = np.minimum(t, n - np.arange(r, dtype=np.int64) * t)
    count = 3 * r + 1
    ids = np.empty(count, np.int16)
    ids[:-1] = np.tile(np.arange(3, dtype=np.int16), r)
    ids[-1] = 3
    kinds = np.full(count, KIND_CODES[READ], np.int8)
    kinds[2 : 3 * r : 3] = KIND_CODES[COMPUTE]
    kinds[-1] = KIND_CODES[WRITE]
    read = np.zeros(count, np.int64)
    read[0 : 3 * r : 3] = ri * rk * eb
    read[1 : 3 * r : 3] = rk * wc * eb
    flops = np.zeros(count, np.int64)
    flops[2 : 3 * r : 3] = 2 * ri * rk * wc
    written = np.zeros(count, np.int64)
    written[-1] = ri * wc * eb

    def step_at(s: int) -> Step:
        if s == count - 1:
            return Step(
                "pv_store_O_i", "gemm_pv", WRITE, "O", (i0, i0 + ri, c0, c0 + wc), ri * wc * eb
            )
        k, m = divmod(s, 3)
        rkk, k0 = tile_rows(n, t, k), k * t
        if m == 0:
            return Step(
                "pv_load_P_ik", "gemm_pv", READ, "P", (i0, i0 + ri, k0, k0 + rkk), ri * rkk * eb
            )
        if m == 1:
            return Step(
                "pv_load_V_k", "gemm_pv", READ, "V", (k0, k0 + rkk, c0, c0 + wc), rkk * wc * eb
            )
        return Step(
            "pv_compute_O_i",
            "gemm_pv",
            COMPUTE,
            "O",
            (i0, i0 + ri, c0, c0 + wc),
            flops=2 * ri * rkk * wc,
        )

    return BlockDetail("gemm_pv", b, names, ids, kinds, read, written, flops, step_at)


def fast_detail(
    config: AttentionConfig, algorithm: str, kernel: KernelSchedule, block: int
) -> BlockDetail | None:
    """The vectorised description of `block`, or None where only `block_steps` knows it."""
    if kernel.name == "flash_fwd":
        return _flash_detail(config, algorithm, block)
    if kernel.name == "gemm_pv" and algorithm == NAIVE:
        return _pv_detail(config, block)
    return None


def block_detail(
    config: AttentionConfig,
    algorithm: str,
    kernel: KernelSchedule,
    block: int,
    use_fast: bool = True,
) -> BlockDetail:
    detail = fast_detail(config, algorithm, kernel, block) if use_fast else None
    if detail is None:
        detail = detail_from_steps(kernel.name, block, kernel.block_steps(block))
    return detail
