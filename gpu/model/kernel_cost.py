"""What one kernel and one algorithm cost, and the sizes every cost is built from.

`KernelCost` (one launch: bytes read and written, FLOPs, exponentials, the unit the FLOPs run
on) and `AlgorithmCost` (its kernels, the peak and the useful FLOPs) are what the forward model
(gpu/model/costmodel.py) and the backward one (gpu/model/backward_cost.py) both return; the
tensor sizes, tile helpers and the L2 re-read rule here are the terms both are written in.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..algorithms import ALGORITHMS, FP32_CORES
from ..config import STAT_BYTES, AttentionConfig, ceil_div
from .gpus import FP32, TENSOR, GpuSpec

#: Static shared memory of the softmax kernels (their 32-float reduction scratch) plus slack;
#: a row of S is read once when it fits with this in one block's opt-in shared memory.
SOFTMAX_STATIC_SMEM = 1024
#: Threads per block of the softmax kernel for long rows, and blocks of it resident per SM.
SOFTMAX_BLOCKS_PER_SM = 2
#: Fraction of the L2 that data read by every SM can use (two partitions: the docstring of
#: gpu/model/costmodel.py).
L2_SHARED_FRACTION = 0.5


@dataclass(frozen=True)
class KernelCost:
    """One kernel launch's modeled DRAM traffic, executed matmul FLOPs and exponentials."""

    name: str
    bytes_read: int
    bytes_written: int
    flops: int
    exps: int = 0  # exponentials (exp/exp2) issued, all B·h heads
    unit: str = ""  # where the FLOPs run: TENSOR, FP32, or "" (no matmul)
    #: Of `flops`, the products this kernel does again because nothing kept their result (the
    #: fused backward's S, the deterministic dQ pass's S and dP): executed, never useful.
    recomputed_flops: int = 0

    @property
    def hbm_bytes(self) -> int:
        return self.bytes_read + self.bytes_written


@dataclass(frozen=True)
class AlgorithmCost:
    """The whole algorithm: its kernels, peak device memory and the lesson's derived figures."""

    algorithm: str
    config: AttentionConfig
    kernels: tuple[KernelCost, ...]
    peak_bytes: int
    flops: int

    @property
    def bytes_read(self) -> int:
        return sum(k.bytes_read for k in self.kernels)

    @property
    def bytes_written(self) -> int:
        return sum(k.bytes_written for k in self.kernels)

    @property
    def hbm_bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def executed_flops(self) -> int:
        return sum(k.flops for k in self.kernels)

    @property
    def exps(self) -> int:
        return sum(k.exps for k in self.kernels)

    @property
    def arithmetic_intensity(self) -> float:
        """Useful FLOPs per modeled DRAM byte (this model's bytes; see the module docstring)."""
        return self.flops / self.hbm_bytes

    def modeled_seconds(self, gpu: GpuSpec) -> float:
        """Roofline time: each kernel takes the longer of moving its bytes and doing its FLOPs."""
        return sum(gpu.kernel_seconds(k.hbm_bytes, k.flops) for k in self.kernels)

    def kernel(self, name: str) -> KernelCost:
        return next(k for k in self.kernels if k.name == name)


@dataclass(frozen=True)
class TrafficBand:
    """The three DRAM traffic figures of one algorithm: compulsory ≤ L2-aware ≤ no reuse."""

    compulsory: AlgorithmCost
    l2_aware: AlgorithmCost
    no_reuse: AlgorithmCost


# --------------------------------------------------------------------------------------------
# Sizes


def matrix_bytes(config: AttentionConfig) -> int:
    """One of Q, K, V or O: B·h·N·d elements."""
    return config.bh * config.seq_len * config.head_dim * config.elem_bytes


def attention_matrix_bytes(config: AttentionConfig) -> int:
    """One of S or P: B·h·N² elements. The matrix that makes the memory wall."""
    return config.bh * config.seq_len * config.seq_len * config.elem_bytes


def stats_bytes(config: AttentionConfig) -> int:
    """The tiled kernel's row statistics m and l together: 2·B·h·N fp32 values."""
    return 2 * config.bh * config.seq_len * STAT_BYTES


def useful_flops(config: AttentionConfig) -> int:
    """4·B·h·N²·d for QKᵀ and PV (2 FLOPs per multiply-add); half of it with a causal mask."""
    full = 4 * config.bh * config.seq_len * config.seq_len * config.head_dim
    return full // 2 if config.causal else full


def decode_useful_flops(config: AttentionConfig) -> int:
    """4 · B · H_q · q · N · d: a decode step's Q Kᵀ and P V, 2 FLOPs per multiply-add."""
    return 4 * config.bh * config.new_tokens * config.seq_len * config.head_dim


def pass_useful_flops(config: AttentionConfig) -> int:
    """Useful FLOPs of the pass a config times: the forward's 4·B·h·N²·d, the backward's twice
    that, a training step's both (three times the forward's); halved when causal. A decode
    step's are 4·B·h·q·N·d (q new tokens)."""
    if config.is_decode:
        return decode_useful_flops(config)
    forward = useful_flops(config.forward())
    return forward * {"forward": 1, "backward": 2, "step": 3}[config.pass_]


def visible_scores(config: AttentionConfig) -> int:
    """Scores that take part in the softmax: B·h·N², or B·h·N(N+1)/2 with a causal mask."""
    n = config.seq_len
    return config.bh * (n * (n + 1) // 2 if config.causal else n * n)


def naive_peak_bytes(config: AttentionConfig) -> int:
    return 4 * matrix_bytes(config) + 2 * attention_matrix_bytes(config)


def tiled_peak_bytes(config: AttentionConfig) -> int:
    return 4 * matrix_bytes(config) + stats_bytes(config)


def matmul_unit(config: AttentionConfig, algorithm: str) -> str:
    """The readable kernel multiplies on fp32 CUDA cores (the registry's `matmul`), as does
    cuBLAS for fp32 inputs; the tensor-core kernels, and cuBLAS for fp16/bf16, on tensor
    cores (a peer, not in the registry, counts as a tensor-core kernel)."""
    info = ALGORITHMS.get(algorithm)
    if (info is not None and info.matmul == FP32_CORES) or config.dtype == "fp32":
        return FP32
    return TENSOR


# --------------------------------------------------------------------------------------------
# Tiles: how many rows a tile really holds at the ragged end, and which key tiles a causal block
# needs. The schedule uses the same helpers, so its byte sums equal these by construction of the
# same rules, and the tests check that they do.


def tile_rows(total: int, tile: int, index: int) -> int:
    """Rows in tile `index` of a dimension of `total` rows cut into tiles of `tile` rows."""
    return min(tile, total - index * tile)


def kv_tiles_for_query_tile(config: AttentionConfig, block_m: int, block_n: int, i: int) -> int:
    """Key/value tiles that query tile i visits: all of them, or up to the diagonal if causal."""
    n = config.seq_len
    if not config.causal:
        return ceil_div(n, block_n)
    last_row = min((i + 1) * block_m, n) - 1
    return last_row // block_n + 1


#: Shared memory one block may opt in to on the default GPU (H100/H200: 227 KiB), used where no
#: device is given to decide whether the softmax reads a row of S once or twice.
DEFAULT_SMEM_OPTIN_BYTES = 232_448


def softmax_reads_s_once(config: AttentionConfig, smem_limit_bytes: int | None = None) -> bool:
    """Whether a row of S fits in one block's shared memory (the one-read kernel); a longer row
    (fp16/bf16 N > ~115k, fp32 N > ~58k on Hopper) goes through the two-pass kernel, which reads
    it twice. The CUDA backend launches whichever this says."""
    limit = DEFAULT_SMEM_OPTIN_BYTES if smem_limit_bytes is None else smem_limit_bytes
    return config.seq_len * config.elem_bytes + SOFTMAX_STATIC_SMEM <= limit


def cached_reads(
    once: int, no_reuse: int, cohorts: int, units: int, working_set: int, usable_l2: float
) -> int:
    """DRAM reads of data read `once` compulsorily and `no_reuse` bytes in all: re-reads within a
    cohort hit L2; re-reads across the cohorts (a share (cohorts-1)/(units-1) of them) miss
    with probability 1 - min(1, usable_l2 / working_set)."""
    rereads = no_reuse - once
    if rereads <= 0 or cohorts <= 1 or units <= 1:
        return min(once, no_reuse)
    across = min(1.0, (cohorts - 1) / (units - 1))
    hit = 1.0 if working_set <= 0 else min(1.0, usable_l2 / working_set)
    return once + round(rereads * across * (1.0 - hit))
