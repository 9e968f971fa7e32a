"""The decode pass's transfers, step by step, for one (batch, KV head): what the Tiles tab's
decode lane plays. Like gpu/model/schedule.py for the prefill, it follows the cost model's
rules (gpu/model/decode_cost.py: the same tiles, the same split), and the tests check that its
sums, times the B·H_kv pairs, equal the cost model's no-reuse kernels exactly.

- naive: the query group's G·q rows against the cache, as the three kernels the backends time.
  `gemm_qk` takes 128×128 output tiles of S (the group's rows × 128 keys): each reads its rows
  of Q and a tile of K and writes its tile of S, the score row, to HBM; `softmax` reads each
  row of S (twice where a row does not fit one block's shared memory) and writes P; `gemm_pv`
  walks P and V tile by tile for each 128-column tile of O, then writes O.
- split_kv: the kernel's own split (gpu.launch.decode_split.split_plan, the plan the CUDA
  launch and the CPU backend use): `splits` blocks per row chunk, side by side, each reading the
  rows of Q and then its range of `keys_per_split` keys, KEYS_PER_STEP keys a step (the
  kernel's `stream_kv` loop: each key group loads KPT keys), keeping (m, l, O) on chip. Then
  `write_partial` (O itself with one split), and the last block of each unit merges the
  partials (`merge_splits` reads every split's m and l, `store_o` every O_s, and writes O).
  The lane plays the splits together, step for step: they run in the same wave when the
  blocks fit the GPU's resident slots (the plan says how many waves there are).

Step names are the `// STEP` tags of gpu/kernels/decode_split.cu (split_kv) and of the naive
path's schedule (gpu.model.schedule.STEP_NAMES), so the source panel can point at them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..algorithms import NAIVE, NAIVE_GEMM_TILE, SPLIT_KV
from ..config import AttentionConfig, ceil_div
from ..launch import decode_split
from .costmodel import softmax_reads_s_once
from .gpus import GpuSpec

#: Every step name of the decode lanes, with its kernel.
NAIVE_STEPS = ("qk_store_S_ij", "softmax_write_P", "pv_load_V_k", "pv_store_O_i")
SPLIT_STEPS = (
    "load_q",
    "stream_kv",
    "combine_groups",
    "write_partial",
    "merge_splits",
    "store_o",
)
STEP_KERNEL = {
    "qk_store_S_ij": "gemm_qk",
    "softmax_write_P": "softmax",
    "pv_load_V_k": "gemm_pv",
    "pv_store_O_i": "gemm_pv",
    **{name: "decode_split" for name in SPLIT_STEPS},
}
STEP_NAMES = NAIVE_STEPS + SPLIT_STEPS


@dataclass(frozen=True)
class DecodeSchedule:
    """One algorithm's steps for one (batch, KV head), as arrays indexed by step: the name
    (an index into STEP_NAMES), the tile or step of keys it handles (-1 for none), the first
    key it reads and how many, and its bytes and FLOPs. `pairs` (B·H_kv) multiplies them to
    the whole launch; `plan` is the split-KV kernel's split (None for naive)."""

    config: AttentionConfig
    algorithm: str
    name: np.ndarray
    tile: np.ndarray
    key_start: np.ndarray
    keys: np.ndarray
    bytes_read: np.ndarray
    bytes_written: np.ndarray
    flops: np.ndarray
    plan: decode_split.SplitPlan | None = None

    @property
    def steps(self) -> int:
        return len(self.name)

    @property
    def pairs(self) -> int:
        return self.config.kv_bh

    def kernels(self) -> tuple[str, ...]:
        """The kernels of the schedule, in launch order."""
        seen: dict[str, None] = {}
        for code in np.unique(self.name):
            seen[STEP_KERNEL[STEP_NAMES[int(code)]]] = None
        order = ("gemm_qk", "softmax", "gemm_pv", "decode_split")
        return tuple(k for k in order if k in seen)

    def kernel_of(self) -> np.ndarray:
        """Each step's kernel, as an index into `kernels()`."""
        kernels = self.kernels()
        table = np.array(
            [kernels.index(STEP_KERNEL[n]) if STEP_KERNEL[n] in kernels else -1 for n in STEP_NAMES]
        )
        return table[self.name]

    def totals(self) -> dict[str, dict[str, int]]:
        """Per kernel, the whole launch's bytes read and written and FLOPs."""
        out: dict[str, dict[str, int]] = {}
        of = self.kernel_of()
        for k, kernel in enumerate(self.kernels()):
            mine = of == k
            out[kernel] = {
                "bytes_read": int(self.bytes_read[mine].sum()) * self.pairs,
                "bytes_written": int(self.bytes_written[mine].sum()) * self.pairs,
                "flops": int(self.flops[mine].sum()) * self.pairs,
            }
        return out


def _extents(total: int, tile: int) -> np.ndarray:
    count = ceil_div(total, tile)
    sizes = np.full(count, tile, dtype=np.int64)
    sizes[-1] = total - (count - 1) * tile
    return sizes


def _code(name: str) -> int:
    return STEP_NAMES.index(name)


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _block(
    name: str,
    tile: np.ndarray,
    start: np.ndarray,
    keys: np.ndarray,
    read: np.ndarray,
    written: np.ndarray,
    flops: np.ndarray,
) -> dict[str, np.ndarray]:
    n = len(tile)
    return dict(
        name=np.full(n, _code(name), dtype=np.int16),
        tile=tile.astype(np.int64),
        key_start=start.astype(np.int64),
        keys=keys.astype(np.int64),
        bytes_read=read.astype(np.int64),
        bytes_written=written.astype(np.int64),
        flops=flops.astype(np.int64),
    )


def naive_schedule(config: AttentionConfig) -> DecodeSchedule:
    """Naive decode for one (batch, KV head): see the module docstring."""
    n, d, eb = config.seq_len, config.head_dim, config.elem_bytes
    rows = decode_split.group_rows(config)
    t = NAIVE_GEMM_TILE
    row_tiles, key_tiles, col_tiles = _extents(rows, t), _extents(n, t), _extents(d, t)
    kt = len(key_tiles)
    j = np.arange(kt)
    parts = []
    for ri in row_tiles:  # gemm_qk: one output tile of S per 128 keys
        parts.append(
            _block(
                "qk_store_S_ij",
                j,
                j * t,
                key_tiles,
                (ri + key_tiles) * d * eb,
                ri * key_tiles * eb,
                2 * ri * key_tiles * d,
            )
        )
    reads = 1 if softmax_reads_s_once(config) else 2
    r = np.arange(rows)
    ones = np.ones(rows, dtype=np.int64)
    parts.append(
        _block("softmax_write_P", r, 0 * r, n * ones, reads * n * eb * ones, n * eb * ones, 0 * r)
    )
    for ri in row_tiles:  # gemm_pv: P and V tile by tile for each tile of O's columns
        for wc in col_tiles:
            parts.append(
                _block(
                    "pv_load_V_k",
                    j,
                    j * t,
                    key_tiles,
                    (ri + wc) * key_tiles * eb,
                    0 * j,
                    2 * ri * key_tiles * wc,
                )
            )
            z = np.zeros(1, dtype=np.int64)
            parts.append(_block("pv_store_O_i", z - 1, z, z, z, z + ri * wc * eb, z))
    return DecodeSchedule(config, NAIVE, **_concat(parts))


def keys_per_step(config: AttentionConfig) -> int:
    """Keys a block reads per step of its loop: key groups × KPT (the kernel's KEYS_PER_STEP)."""
    lanes = max(1, config.head_dim // 8)
    groups = max(1, decode_split.THREADS // lanes)
    return groups * decode_split.keys_per_thread(config)


def split_schedule(config: AttentionConfig, gpu: GpuSpec) -> DecodeSchedule:
    """The split-KV kernel for one (batch, KV head), its splits side by side, its row chunks
    with them (see the module docstring); the split is the kernel's on `gpu`."""
    plan = decode_split.split_plan(config, gpu.sms)
    n, d, eb = config.seq_len, config.head_dim, config.elem_bytes
    rows = decode_split.group_rows(config)  # every row chunk's rows together
    chunks, splits, per = plan.row_chunks, plan.splits, plan.keys_per_split
    kps = keys_per_step(config)
    steps = ceil_div(per, kps)
    lengths = np.minimum(per, n - np.arange(splits) * per)  # keys of each split
    i = np.arange(steps)
    # keys read at step i, over every split (the last split may run out first)
    keys = np.clip(lengths[None, :] - i[:, None] * kps, 0, kps).sum(axis=1)
    one = np.zeros(1, dtype=np.int64)
    parts = [
        _block("load_q", one - 1, one, one, one + splits * rows * d * eb, one, one),
        _block(
            "stream_kv", i, i * kps, keys, chunks * 2 * keys * d * eb, 0 * i, 4 * rows * keys * d
        ),
        _block("combine_groups", one - 1, one, one, one, one, one),
    ]
    if splits == 1:  # the block writes O itself
        parts.append(_block("write_partial", one - 1, one, one, one, one + rows * d * eb, one))
    else:
        partial = rows * splits * (d + 2) * 4
        parts += [
            _block("write_partial", one - 1, one, one, one, one + partial, one),
            _block("merge_splits", one - 1, one, one, one + rows * splits * 2 * 4, one, one),
            _block(
                "store_o", one - 1, one, one, one + rows * splits * d * 4, one + rows * d * eb, one
            ),
        ]
    return DecodeSchedule(config, SPLIT_KV, plan=plan, **_concat(parts))


def decode_schedule(config: AttentionConfig, algorithm: str, gpu: GpuSpec) -> DecodeSchedule:
    """The decode lane's steps of `algorithm` (naive or split_kv) for `config` on `gpu`."""
    if not config.is_decode:
        raise ValueError(f"{config.label()} is not a decode config")
    if algorithm == NAIVE:
        return naive_schedule(config)
    if algorithm == SPLIT_KV:
        return split_schedule(config, gpu)
    raise KeyError(f"{algorithm!r} has no decode pass: the decode lanes are naive and split_kv")
