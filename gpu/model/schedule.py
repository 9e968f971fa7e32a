"""The ordered HBM <-> SRAM transfers each algorithm performs, block by block, with their bytes.

This is what the animation plays. It follows the same rules as the cost model (same tile sizes,
same ragged edges, same causal skipping), and the tests check that its byte and FLOP sums equal
the model's exactly. Steps are produced lazily: at N = 131072 one head's tiled schedule has tens
of millions of steps, so callers either iterate, or use each kernel's per-block tables (NumPy
arrays, cheap even for a million blocks) to aggregate and seek.

Step names are stable and match the `// STEP <name>` tags in gpu/kernels/*.cu, so the source panel
can highlight the lines a step corresponds to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..algorithms import NAIVE, TILED, single_kernel_fused, tile_shape
from ..config import STAT_BYTES, AttentionConfig, ceil_div
from .costmodel import (
    kv_tiles_for_query_tile,
    softmax_reads_s_once,
    softmax_row_smem_bytes,
    tile_rows,
)

READ, WRITE, COMPUTE = "read", "write", "compute"

#: Every step name, in the order a block performs them, per kernel.
STEP_NAMES: dict[str, tuple[str, ...]] = {
    "gemm_qk": ("qk_load_Q_i", "qk_load_K_j", "qk_compute_S_ij", "qk_store_S_ij"),
    "softmax": ("softmax_read_S", "softmax_write_P"),
    "gemm_pv": ("pv_load_P_ik", "pv_load_V_k", "pv_compute_O_i", "pv_store_O_i"),
    "flash_fwd": (
        "load_Q_i",
        "load_K_j",
        "load_V_j",
        "compute_S_ij",
        "online_softmax",
        "accumulate_O_i",
        "store_O_i",
        "store_ml",
    ),
}


@dataclass(frozen=True)
class Step:
    """One thing a thread block does: move a tile between HBM and SRAM, or compute on chip.

    `region` is (row_start, row_stop, col_start, col_stop) in elements of `matrix`, so a view can
    draw the tile to scale. Bytes and FLOPs are for one (batch, head); multiply by B·h for all.
    """

    name: str
    kernel: str
    kind: str  # READ (HBM -> SRAM), WRITE (SRAM -> HBM) or COMPUTE (on chip)
    matrix: str  # "Q", "K", "V", "O", "S", "P", "ml"; for compute steps, the tile it produces
    region: tuple[int, int, int, int]
    bytes: int = 0
    flops: int = 0


@dataclass(frozen=True)
class BlockTable:
    """Per-block totals of one kernel (one head), as arrays indexed by block number."""

    bytes_read: np.ndarray
    bytes_written: np.ndarray
    flops: np.ndarray
    steps: np.ndarray

    @property
    def blocks(self) -> int:
        return len(self.steps)


@dataclass(frozen=True)
class KernelSchedule:
    """One kernel launch: how many blocks (per head), each block's steps, and per-block totals."""

    name: str
    blocks: int
    block_steps: Callable[[int], list[Step]]
    table: Callable[[], BlockTable]
    #: On-chip bytes one block holds while it runs (shared memory + register accumulators).
    sram_bytes: int

    def steps(self) -> Iterator[Step]:
        for b in range(self.blocks):
            yield from self.block_steps(b)


@dataclass(frozen=True)
class Schedule:
    """An algorithm's kernels in launch order for one (batch, head); totals multiply by B·h."""

    config: AttentionConfig
    algorithm: str
    kernels: tuple[KernelSchedule, ...]

    @property
    def heads_multiplier(self) -> int:
        return self.config.bh

    def steps(self) -> Iterator[Step]:
        for kernel in self.kernels:
            yield from kernel.steps()

    def step_count(self) -> int:
        return sum(int(k.table().steps.sum()) for k in self.kernels)

    def totals(self) -> dict[str, int]:
        """All heads: bytes read, bytes written and FLOPs, summed from the per-block tables."""
        read = written = flops = 0
        for k in self.kernels:
            t = k.table()
            read += int(t.bytes_read.sum())
            written += int(t.bytes_written.sum())
            flops += int(t.flops.sum())
        m = self.heads_multiplier
        return {"bytes_read": read * m, "bytes_written": written * m, "flops": flops * m}


def build_schedule(config: AttentionConfig, algorithm: str) -> Schedule:
    if algorithm == NAIVE:
        return Schedule(config, algorithm, _naive_kernels(config))
    if algorithm in single_kernel_fused():
        kernel = _flash_kernel(config, algorithm, *tile_shape(config, algorithm))
        return Schedule(config, algorithm, (kernel,))
    raise KeyError(f"unknown algorithm {algorithm!r}")


# --------------------------------------------------------------------------------------------
# Naive: three kernels, S and P round-trip through HBM.


def _tile_extents(total: int, tile: int) -> np.ndarray:
    """Rows of every tile of a dimension, ragged last tile included."""
    count = ceil_div(total, tile)
    sizes = np.full(count, tile, dtype=np.int64)
    sizes[-1] = total - (count - 1) * tile
    return sizes


def _naive_kernels(config: AttentionConfig) -> tuple[KernelSchedule, ...]:
    n, d, eb = config.seq_len, config.head_dim, config.elem_bytes
    t, _ = tile_shape(config, NAIVE)
    r = ceil_div(n, t)  # row tiles of S (and of Q, K, P)
    c = ceil_div(d, t)  # column tiles of O
    rows = _tile_extents(n, t)
    cols = _tile_extents(d, t)

    def qk_steps(b: int) -> list[Step]:
        i, j = divmod(b, r)
        ri, rj = tile_rows(n, t, i), tile_rows(n, t, j)
        i0, j0 = i * t, j * t
        return [
            Step("qk_load_Q_i", "gemm_qk", READ, "Q", (i0, i0 + ri, 0, d), ri * d * eb),
            Step("qk_load_K_j", "gemm_qk", READ, "K", (j0, j0 + rj, 0, d), rj * d * eb),
            Step(
                "qk_compute_S_ij",
                "gemm_qk",
                COMPUTE,
                "S",
                (i0, i0 + ri, j0, j0 + rj),
                flops=2 * ri * rj * d,
            ),
            Step("qk_store_S_ij", "gemm_qk", WRITE, "S", (i0, i0 + ri, j0, j0 + rj), ri * rj * eb),
        ]

    def qk_table() -> BlockTable:
        ri = np.repeat(rows, r)
        rj = np.tile(rows, r)
        return BlockTable((ri + rj) * d * eb, ri * rj * eb, 2 * ri * rj * d, np.full(r * r, 4))

    # A row longer than one block's shared memory goes through the two-pass kernel: read twice.
    reads = 1 if softmax_reads_s_once(config) else 2

    def softmax_steps(row: int) -> list[Step]:
        read = Step("softmax_read_S", "softmax", READ, "S", (row, row + 1, 0, n), n * eb)
        return [
            *[read] * reads,
            Step("softmax_write_P", "softmax", WRITE, "P", (row, row + 1, 0, n), n * eb),
        ]

    def softmax_table() -> BlockTable:
        per_row = np.full(n, n * eb, dtype=np.int64)
        return BlockTable(
            reads * per_row, per_row.copy(), np.zeros(n, np.int64), np.full(n, reads + 1)
        )

    def pv_steps(b: int) -> list[Step]:
        i, cc = divmod(b, c)
        ri, wc = tile_rows(n, t, i), tile_rows(d, t, cc)
        i0, c0 = i * t, cc * t
        out: list[Step] = []
        for k in range(r):
            rk, k0 = tile_rows(n, t, k), k * t
            out += [
                Step(
                    "pv_load_P_ik", "gemm_pv", READ, "P", (i0, i0 + ri, k0, k0 + rk), ri * rk * eb
                ),
                Step("pv_load_V_k", "gemm_pv", READ, "V", (k0, k0 + rk, c0, c0 + wc), rk * wc * eb),
                Step(
                    "pv_compute_O_i",
                    "gemm_pv",
                    COMPUTE,
                    "O",
                    (i0, i0 + ri, c0, c0 + wc),
                    flops=2 * ri * rk * wc,
                ),
            ]
        out.append(
            Step("pv_store_O_i", "gemm_pv", WRITE, "O", (i0, i0 + ri, c0, c0 + wc), ri * wc * eb)
        )
        return out

    def pv_table() -> BlockTable:
        ri = np.repeat(rows, c)
        wc = np.tile(cols, r)
        return BlockTable(
            ri * n * eb + n * wc * eb, ri * wc * eb, 2 * ri * n * wc, np.full(r * c, 3 * r + 1)
        )

    acc = t * t * 4  # fp32 accumulator tile
    return (
        KernelSchedule("gemm_qk", r * r, qk_steps, qk_table, 2 * t * d * eb + acc),
        KernelSchedule("softmax", n, softmax_steps, softmax_table, softmax_row_smem_bytes(config)),
        KernelSchedule("gemm_pv", r * c, pv_steps, pv_table, 2 * t * t * eb + acc),
    )


# --------------------------------------------------------------------------------------------
# Tiled (FlashAttention-2 order): one block per query tile; K_j, V_j stream through SRAM.


def flash_sram_bytes(config: AttentionConfig, bm: int, bn: int) -> int:
    """On-chip bytes of one block: Q_i, K_j, V_j tiles, the S_ij tile and O_i accumulator in
    fp32, and the row statistics m and l."""
    d, eb = config.head_dim, config.elem_bytes
    return bm * d * eb + 2 * bn * d * eb + bm * bn * 4 + bm * d * 4 + 2 * bm * STAT_BYTES


def launch_query_tile(config: AttentionConfig, q_tiles: int, block: int, algorithm: str) -> int:
    """The query tile of the `block`-th block `algorithm`'s fused kernel launches: under a
    causal mask the kernels launch the longest blocks (the last query tiles) first, so the short
    ones fill the tail of the grid; without one, in order, except the readable kernel, which
    takes its query tiles last first with or without the mask (flash_readable.cu: i =
    num_q_tiles - 1 - blockIdx.x). Its own inverse (block of a query tile)."""
    reverse = config.causal or algorithm == TILED
    return q_tiles - 1 - block if reverse else block


def _flash_kernel(config: AttentionConfig, algorithm: str, bm: int, bn: int) -> KernelSchedule:
    n, d, eb = config.seq_len, config.head_dim, config.elem_bytes
    q_tiles = ceil_div(n, bm)

    def steps(block: int) -> list[Step]:
        i = launch_query_tile(config, q_tiles, block, algorithm)
        ri, i0 = tile_rows(n, bm, i), i * bm
        out = [Step("load_Q_i", "flash_fwd", READ, "Q", (i0, i0 + ri, 0, d), ri * d * eb)]
        for j in range(kv_tiles_for_query_tile(config, bm, bn, i)):
            rj, j0 = tile_rows(n, bn, j), j * bn
            out += [
                Step("load_K_j", "flash_fwd", READ, "K", (j0, j0 + rj, 0, d), rj * d * eb),
                Step("load_V_j", "flash_fwd", READ, "V", (j0, j0 + rj, 0, d), rj * d * eb),
                Step(
                    "compute_S_ij",
                    "flash_fwd",
                    COMPUTE,
                    "S",
                    (i0, i0 + ri, j0, j0 + rj),
                    flops=2 * ri * rj * d,
                ),
                Step("online_softmax", "flash_fwd", COMPUTE, "ml", (i0, i0 + ri, j0, j0 + rj)),
                Step(
                    "accumulate_O_i",
                    "flash_fwd",
                    COMPUTE,
                    "O",
                    (i0, i0 + ri, 0, d),
                    flops=2 * ri * rj * d,
                ),
            ]
        out += [
            Step("store_O_i", "flash_fwd", WRITE, "O", (i0, i0 + ri, 0, d), ri * d * eb),
            Step("store_ml", "flash_fwd", WRITE, "ml", (i0, i0 + ri, 0, 2), 2 * ri * STAT_BYTES),
        ]
        return out

    def table() -> BlockTable:
        order = [launch_query_tile(config, q_tiles, b, algorithm) for b in range(q_tiles)]
        ri = _tile_extents(n, bm)[order]
        visited = np.array(
            [kv_tiles_for_query_tile(config, bm, bn, i) for i in order], dtype=np.int64
        )
        kv_rows = np.minimum(visited * bn, n)
        return BlockTable(
            ri * d * eb + 2 * kv_rows * d * eb,
            ri * d * eb + 2 * ri * STAT_BYTES,
            4 * ri * kv_rows * d,
            1 + 5 * visited + 2,
        )

    return KernelSchedule("flash_fwd", q_tiles, steps, table, flash_sram_bytes(config, bm, bn))
