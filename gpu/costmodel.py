"""Exact bytes and FLOPs of naive and tiled attention, and the GPUs they run on.

Conventions (the same ones the schedule and the kernels follow):
- HBM traffic counts what each kernel's thread blocks read from and write to device memory, tile
  by tile, with no credit for the L2 cache. For naive attention the GEMMs are modeled as
  128×128-output-tile GEMMs that re-read their input strips per output tile; the softmax kernel
  reads each row of S once and writes each row of P once.
- The tiled kernel reads Q_i once per block, K_j and V_j once per (block, key tile), writes O_i
  and the per-row statistics m and l (fp32). With a causal mask, key tiles wholly above the
  diagonal are skipped.
- `flops` is the useful matmul work, 4·B·h·N²·d (half of it with a causal mask): the number
  TFLOP/s figures are quoted against. `executed_flops` is what the kernels really issue (naive
  computes the whole N×N product even when causal; tiled computes diagonal tiles in full).
  Softmax's exponentials are not counted as FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass

from .algorithms import NAIVE, NAIVE_GEMM_TILE, RING, TILED, TILED_MMA, TILED_WGMMA, tile_shape
from .config import STAT_BYTES, AttentionConfig, ceil_div


@dataclass(frozen=True)
class KernelCost:
    """One kernel launch's modeled HBM traffic and executed matmul FLOPs (all B·h heads)."""

    name: str
    bytes_read: int
    bytes_written: int
    flops: int

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
    def arithmetic_intensity(self) -> float:
        """Useful FLOPs per HBM byte: below a GPU's ridge point the algorithm is memory-bound."""
        return self.flops / self.hbm_bytes

    def modeled_seconds(self, gpu: GpuSpec) -> float:
        """Roofline time: each kernel takes the longer of moving its bytes and doing its FLOPs."""
        return sum(gpu.kernel_seconds(k.hbm_bytes, k.flops) for k in self.kernels)


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


def naive_peak_bytes(config: AttentionConfig) -> int:
    return 4 * matrix_bytes(config) + 2 * attention_matrix_bytes(config)


def tiled_peak_bytes(config: AttentionConfig) -> int:
    return 4 * matrix_bytes(config) + stats_bytes(config)


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


def naive_cost(config: AttentionConfig) -> AlgorithmCost:
    n, d, eb, bh = config.seq_len, config.head_dim, config.elem_bytes, config.bh
    t = NAIVE_GEMM_TILE
    row_tiles = ceil_div(n, t)
    d_tiles = ceil_div(d, t)
    # GEMM 1, S = Q Kᵀ·scale: output tile (i, j) reads Q_i (rows_i×d) and K_j (rows_j×d).
    gemm_qk = KernelCost(
        "gemm_qk",
        bytes_read=bh * 2 * row_tiles * n * d * eb,
        bytes_written=bh * n * n * eb,
        flops=bh * 2 * n * n * d,
    )
    # Softmax: one pass, each row of S read once and each row of P written once.
    softmax = KernelCost(
        "softmax", bytes_read=bh * n * n * eb, bytes_written=bh * n * n * eb, flops=0
    )
    # GEMM 2, O = P V: output tile (i, c) reads the strip P_i (rows_i×N) and V[:, c] (N×cols_c).
    gemm_pv = KernelCost(
        "gemm_pv",
        bytes_read=bh * (d_tiles * n * n * eb + row_tiles * n * d * eb),
        bytes_written=bh * n * d * eb,
        flops=bh * 2 * n * n * d,
    )
    return AlgorithmCost(
        NAIVE, config, (gemm_qk, softmax, gemm_pv), naive_peak_bytes(config), useful_flops(config)
    )


def tiled_cost(config: AttentionConfig, algorithm: str = TILED) -> AlgorithmCost:
    n, d, eb, bh = config.seq_len, config.head_dim, config.elem_bytes, config.bh
    bm, bn = tile_shape(config, algorithm)
    read = written = flops = 0
    for i in range(ceil_div(n, bm)):
        rows = tile_rows(n, bm, i)
        kv_rows = min(kv_tiles_for_query_tile(config, bm, bn, i) * bn, n)
        read += rows * d * eb + 2 * kv_rows * d * eb  # Q_i once; every visited K_j and V_j
        written += rows * d * eb + 2 * rows * STAT_BYTES  # O_i, m_i, l_i
        flops += 4 * rows * kv_rows * d  # S_ij = Q_i K_jᵀ and O_i += P_ij V_j, tile by tile
    kernel = KernelCost("flash_fwd", bh * read, bh * written, bh * flops)
    return AlgorithmCost(
        algorithm, config, (kernel,), tiled_peak_bytes(config), useful_flops(config)
    )


def algorithm_cost(config: AttentionConfig, algorithm: str) -> AlgorithmCost:
    if algorithm == NAIVE:
        return naive_cost(config)
    if algorithm in (TILED, TILED_MMA, TILED_WGMMA, RING):  # ring: its one-device cost
        return tiled_cost(config, algorithm)
    raise KeyError(f"unknown algorithm {algorithm!r}")


def naive_oom_seq_len(config: AttentionConfig, budget_bytes: int) -> int:
    """The smallest N at which naive's modeled peak exceeds `budget_bytes` (where the wall is)."""

    def peak(n: int) -> int:  # naive_peak_bytes as a function of N alone
        return config.bh * config.elem_bytes * (4 * n * config.head_dim + 2 * n * n)

    lo, hi = 1, 1 << 40
    while lo < hi:
        mid = (lo + hi) // 2
        if peak(mid) > budget_bytes:
            hi = mid
        else:
            lo = mid + 1
    return lo


# --------------------------------------------------------------------------------------------
# GPUs


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU: enough to draw its roofline and its memory wall."""

    name: str
    memory_bytes: int
    bandwidth_bytes_s: float
    smem_per_sm_bytes: int
    fp16_tensor_flops: float  # dense, fp32 accumulate
    sms: int
    source: str

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity above which a kernel can be compute-bound on this GPU."""
        return self.fp16_tensor_flops / self.bandwidth_bytes_s

    def kernel_seconds(self, hbm_bytes: int, flops: int) -> float:
        return max(hbm_bytes / self.bandwidth_bytes_s, flops / self.fp16_tensor_flops)


GB = 10**9
KiB = 1024

GPUS: dict[str, GpuSpec] = {
    spec.name: spec
    for spec in (
        # NVIDIA H200 Tensor Core GPU datasheet (2024): 141 GB HBM3e, 4.8 TB/s, FP16 Tensor Core
        # 1,979 TFLOPS with sparsity (989.5 dense); Hopper tuning guide: 228 KB shared/SM
        # (227 KB usable by one block); 132 SMs on the SXM part.
        GpuSpec(
            "H200 SXM 141 GB",
            141 * GB,
            4.8e12,
            228 * KiB,
            989.5e12,
            132,
            "NVIDIA H200 datasheet; Hopper tuning guide",
        ),
        # NVIDIA H100 datasheet (SXM5): 80 GB HBM3, 3.35 TB/s, FP16 Tensor 1,979 TFLOPS sparse.
        GpuSpec(
            "H100 SXM 80 GB",
            80 * GB,
            3.35e12,
            228 * KiB,
            989.5e12,
            132,
            "NVIDIA H100 datasheet; Hopper tuning guide",
        ),
        # NVIDIA A100 datasheet: 40 GB HBM2 at 1,555 GB/s, 80 GB HBM2e at 2,039 GB/s; FP16 Tensor
        # 312 TFLOPS dense; Ampere tuning guide: 164 KB shared/SM; 108 SMs.
        GpuSpec(
            "A100 SXM 40 GB",
            40 * GB,
            1.555e12,
            164 * KiB,
            312e12,
            108,
            "NVIDIA A100 datasheet; Ampere tuning guide",
        ),
        GpuSpec(
            "A100 SXM 80 GB",
            80 * GB,
            2.039e12,
            164 * KiB,
            312e12,
            108,
            "NVIDIA A100 datasheet; Ampere tuning guide",
        ),
        # NVIDIA Ada GPU architecture whitepaper (RTX 4090): 24 GB GDDR6X at 1,008 GB/s, FP16 Tensor
        # with FP32 accumulate 165.2 TFLOPS dense; Ada tuning guide: 100 KB shared/SM; 128 SMs.
        GpuSpec(
            "RTX 4090 24 GB",
            24 * GB,
            1.008e12,
            100 * KiB,
            165.2e12,
            128,
            "NVIDIA Ada whitepaper; Ada tuning guide",
        ),
        # RTX 3060 12 GB: 360 GB/s (192-bit GDDR6 at 15 Gbps, NVIDIA spec page), 28 SMs at
        # 1.777 GHz boost; GA10x whitepaper's GeForce rate of 512 dense FP16 FLOP/clk/SM with FP32
        # accumulate gives 25.5 TFLOPS (derived); Ampere tuning guide: 100 KB shared/SM on GA10x.
        GpuSpec(
            "RTX 3060 12 GB",
            12 * GB,
            360e9,
            100 * KiB,
            25.5e12,
            28,
            "NVIDIA spec page; GA10x whitepaper (derived rate)",
        ),
        # NVIDIA T4 datasheet: 16 GB GDDR6, 320 GB/s, 65 TFLOPS mixed precision; Turing tuning
        # guide: 64 KB shared/SM; 40 SMs.
        GpuSpec(
            "T4 16 GB",
            16 * GB,
            320e9,
            64 * KiB,
            65e12,
            40,
            "NVIDIA T4 datasheet; Turing tuning guide",
        ),
    )
}

DEFAULT_GPU = "H200 SXM 141 GB"


def gpu_for_device_name(device_name: str) -> GpuSpec | None:
    """Best-effort match of a CUDA device name ('NVIDIA H200') to the table."""
    lowered = device_name.lower()
    for key, spec in GPUS.items():
        model = key.split()[0].lower()
        if model in lowered and (model != "a100" or key.split()[2].lower() in lowered):
            return spec
    for key, spec in GPUS.items():
        if key.split()[0].lower() in lowered:
            return spec
    return None
