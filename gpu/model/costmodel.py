"""Exact bytes and FLOPs of naive and tiled attention, and the GPUs they run on.

Three traffic figures per kernel, from low to high (`traffic_band`):

- **compulsory** (`compulsory_cost`): every tensor the kernel must read or write crosses the
  DRAM interface once: Q, K, V read and O, m, l written by a fused kernel; Q, K read and S
  written by naive's first GEMM, S read and P written by the softmax, P, V read and O written by
  the second GEMM. No cache can do better than this.
- **no reuse** (`algorithm_cost`, the FlashAttention paper's count, and the app's historical
  figure): what the kernels' thread blocks read and write, tile by tile, as if nothing were
  cached: a fused kernel reads K_j and V_j once per (query tile, key tile), naive's GEMMs (modeled
  as 128×128-output-tile GEMMs) re-read their input strips per output tile, and the softmax reads
  a row of S twice when the row does not fit in one block's shared memory (the two-pass kernel).
  This is also the traffic between the SMs and the L2 cache, so the roofline uses it for L2.
- **L2-aware** (`l2_aware_cost`): between the two. Re-reads hit the L2 cache while the data that
  concurrently running blocks share fits in it. Assumptions, stated so they can be checked
  against the hardware counters:
  1. Blocks are dispatched in grid order, query tiles of one (batch, head) first, then the next
     head; `SMs × blocks per SM` blocks are resident at a time (one wave).
  2. Blocks of one head that are resident together move through the key tiles in near lockstep,
     so a key/value tile is fetched from DRAM once per such cohort; the other blocks of the
     cohort find it in L2. A head whose query tiles all fit in one wave therefore reads K and V
     from DRAM once, whatever the L2 size.
  3. A head with more query tiles than one wave holds runs in several cohorts; a later cohort
     finds the head's K and V still in L2 with probability min(1, usable L2 / working set),
     where the working set is K and V of every head a wave touches (plus the resident blocks'
     own Q and O tiles), and the usable L2 is half the L2 (`L2_SHARED_FRACTION`): Ampere and
     Hopper split the L2 into two partitions, each caching the data its own SMs access, so data
     read by every SM can sit in both.
  4. Naive's GEMMs: the same rule with the GEMM's 128×128 output tiles as blocks (one per SM);
     the softmax's second read of a long row hits L2 with the same probability, its working set
     being the rows of all resident blocks.
  5. Writes are compulsory in every model (each output is written once).

Measured DRAM bytes (gpu.profiling.profiler) replace these estimates wherever a run was profiled.

`flops` is the useful matmul work, 4·B·h·N²·d (half of it with a causal mask): the number
TFLOP/s figures are quoted against. `executed_flops` is what the kernels really issue (naive
computes the whole N×N product even when causal; tiled computes diagonal tiles in full).
Exponentials are counted separately (`exps`): they run on the special-function unit (XU), whose
throughput is a roof of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..algorithms import ALGORITHMS, NAIVE, NAIVE_GEMM_TILE, RING, TILED, tile_shape
from ..config import STAT_BYTES, AttentionConfig, ceil_div

#: Compute units a kernel's matmul FLOPs run on (keys of `GpuSpec.compute_peaks`).
TENSOR = "tensor"
FP32 = "fp32"

#: Static shared memory of the softmax kernels (their 32-float reduction scratch) plus slack;
#: a row of S is read once when it fits with this in one block's opt-in shared memory.
SOFTMAX_STATIC_SMEM = 1024
#: Threads per block of the softmax kernel for long rows, and blocks of it resident per SM.
SOFTMAX_BLOCKS_PER_SM = 2
#: Fraction of the L2 that data read by every SM can use (two partitions; see the docstring).
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


def pass_useful_flops(config: AttentionConfig) -> int:
    """Useful FLOPs of the pass a config times: the forward's 4·B·h·N²·d, the backward's twice
    that, a training step's both (three times the forward's); halved when causal."""
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
    """The readable kernel multiplies on fp32 CUDA cores, as does cuBLAS for fp32 inputs; the
    tensor-core kernels, and cuBLAS for fp16/bf16, on tensor cores."""
    if algorithm == TILED or config.dtype == "fp32":
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


# --------------------------------------------------------------------------------------------
# The no-reuse model (the upper bound)

#: Shared memory one block may opt in to on the default GPU (H100/H200: 227 KiB), used where no
#: device is given to decide whether the softmax reads a row of S once or twice.
DEFAULT_SMEM_OPTIN_BYTES = 232_448


def softmax_reads_s_once(config: AttentionConfig, smem_limit_bytes: int | None = None) -> bool:
    """Whether a row of S fits in one block's shared memory (the one-read kernel); a longer row
    (fp16/bf16 N > ~115k, fp32 N > ~58k on Hopper) goes through the two-pass kernel, which reads
    it twice. The CUDA backend launches whichever this says."""
    limit = DEFAULT_SMEM_OPTIN_BYTES if smem_limit_bytes is None else smem_limit_bytes
    return config.seq_len * config.elem_bytes + SOFTMAX_STATIC_SMEM <= limit


def naive_cost(config: AttentionConfig, smem_limit_bytes: int | None = None) -> AlgorithmCost:
    n, d, eb, bh = config.seq_len, config.head_dim, config.elem_bytes, config.bh
    t = NAIVE_GEMM_TILE
    row_tiles = ceil_div(n, t)
    d_tiles = ceil_div(d, t)
    unit = matmul_unit(config, NAIVE)
    s_bytes = attention_matrix_bytes(config)
    # GEMM 1, S = Q Kᵀ·scale: output tile (i, j) reads Q_i (rows_i×d) and K_j (rows_j×d).
    gemm_qk = KernelCost(
        "gemm_qk",
        bytes_read=bh * 2 * row_tiles * n * d * eb,
        bytes_written=s_bytes,
        flops=bh * 2 * n * n * d,
        unit=unit,
    )
    # Softmax: each row of S read once (twice by the two-pass kernel), each row of P written
    # once; two exponentials per visible score (one for the row sum, one for P).
    reads = 1 if softmax_reads_s_once(config, smem_limit_bytes) else 2
    softmax = KernelCost(
        "softmax",
        bytes_read=reads * s_bytes,
        bytes_written=s_bytes,
        flops=0,
        exps=2 * visible_scores(config),
    )
    # GEMM 2, O = P V: output tile (i, c) reads the strip P_i (rows_i×N) and V[:, c] (N×cols_c).
    gemm_pv = KernelCost(
        "gemm_pv",
        bytes_read=bh * (d_tiles * n * n * eb + row_tiles * n * d * eb),
        bytes_written=matrix_bytes(config),
        flops=bh * 2 * n * n * d,
        unit=unit,
    )
    return AlgorithmCost(
        NAIVE, config, (gemm_qk, softmax, gemm_pv), naive_peak_bytes(config), useful_flops(config)
    )


def tiled_cost(config: AttentionConfig, algorithm: str = TILED) -> AlgorithmCost:
    n, d, eb, bh = config.seq_len, config.head_dim, config.elem_bytes, config.bh
    bm, bn = tile_shape(config, algorithm)
    read = written = flops = scores = tile_rows_visited = 0
    for i in range(ceil_div(n, bm)):
        rows = tile_rows(n, bm, i)
        kv_tiles = kv_tiles_for_query_tile(config, bm, bn, i)
        kv_rows = min(kv_tiles * bn, n)
        read += rows * d * eb + 2 * kv_rows * d * eb  # Q_i once; every visited K_j and V_j
        written += rows * d * eb + 2 * rows * STAT_BYTES  # O_i, m_i, l_i
        flops += 4 * rows * kv_rows * d  # S_ij = Q_i K_jᵀ and O_i += P_ij V_j, tile by tile
        scores += rows * kv_rows
        tile_rows_visited += rows * kv_tiles
    # One exponential per computed score; the readable kernel also takes one per row and key
    # tile for the rescale factor (the tensor-core kernels rescale lazily, rarely).
    exps = scores + (tile_rows_visited if algorithm == TILED else 0)
    kernel = KernelCost(
        "flash_fwd", bh * read, bh * written, bh * flops, bh * exps, matmul_unit(config, algorithm)
    )
    return AlgorithmCost(
        algorithm, config, (kernel,), tiled_peak_bytes(config), useful_flops(config)
    )


def algorithm_cost(
    config: AttentionConfig, algorithm: str, smem_limit_bytes: int | None = None
) -> AlgorithmCost:
    """The no-reuse model (module docstring); `smem_limit_bytes` is the device's opt-in shared
    memory per block (default: the H100/H200's), which decides naive's softmax kernel. A config
    whose pass is backward or step gets gpu.model.backward_cost's kernels (the step's after the
    forward's) and the step's peak."""
    if config.has_backward:
        if algorithm == RING:
            raise KeyError("ring attention has no backward pass here")
        if algorithm != NAIVE and not getattr(ALGORITHMS.get(algorithm), "fused", False):
            raise KeyError(f"unknown algorithm {algorithm!r}")
        from .backward_cost import training_cost

        return training_cost(config, algorithm, smem_limit_bytes)
    if algorithm == NAIVE:
        return naive_cost(config, smem_limit_bytes)
    info = ALGORITHMS.get(algorithm)
    if info is not None and info.fused:
        return tiled_cost(config, algorithm)
    raise KeyError(f"unknown algorithm {algorithm!r}")


# --------------------------------------------------------------------------------------------
# The compulsory traffic (the lower bound) and the L2-aware estimate


def compulsory_cost(
    config: AttentionConfig, algorithm: str, smem_limit_bytes: int | None = None
) -> AlgorithmCost:
    """Every tensor read or written once (module docstring); FLOPs and exponentials as in the
    no-reuse model, since caching changes the bytes, not the work."""
    if config.has_backward:
        from .backward_cost import compulsory_backward, with_forward

        forward = compulsory_cost(config.forward(), algorithm, smem_limit_bytes)
        backward = compulsory_backward(config, algorithm, smem_limit_bytes)
        return with_forward(config, algorithm, backward, forward)
    upper = algorithm_cost(config, algorithm, smem_limit_bytes)
    qkvo, s_bytes = matrix_bytes(config), attention_matrix_bytes(config)
    if algorithm == NAIVE:
        reads = {"gemm_qk": 2 * qkvo, "softmax": s_bytes, "gemm_pv": s_bytes + qkvo}
        return replace(
            upper, kernels=tuple(replace(k, bytes_read=reads[k.name]) for k in upper.kernels)
        )
    (kernel,) = upper.kernels
    return replace(upper, kernels=(replace(kernel, bytes_read=3 * qkvo),))


def _cached_reads(
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


def resident_blocks_per_sm(config: AttentionConfig, algorithm: str, gpu: GpuSpec) -> int:
    """Blocks of a fused kernel one SM holds at a time: the readable kernel fits two when its
    shared memory allows (launch bound 2), the tensor-core kernels one (registers)."""
    if algorithm != TILED:
        return 1
    from ..launch.flash_readable import smem_bytes  # pure function: no device needed

    return max(1, min(2, gpu.smem_per_sm_bytes // smem_bytes(config)))


def l2_aware_cost(
    config: AttentionConfig, algorithm: str, gpu: GpuSpec, smem_limit_bytes: int | None = None
) -> AlgorithmCost:
    """The L2-aware estimate (assumptions in the module docstring)."""
    if config.has_backward:
        from .backward_cost import l2_aware_backward, with_forward

        forward = l2_aware_cost(config.forward(), algorithm, gpu, smem_limit_bytes)
        backward = l2_aware_backward(config, algorithm, gpu, smem_limit_bytes)
        return with_forward(config, algorithm, backward, forward)
    upper = algorithm_cost(config, algorithm, smem_limit_bytes)
    lower = compulsory_cost(config, algorithm, smem_limit_bytes)
    n, d, eb, bh = config.seq_len, config.head_dim, config.elem_bytes, config.bh
    usable = gpu.l2_bytes * L2_SHARED_FRACTION
    head_matrix = n * d * eb  # one (batch, head)'s Q, K, V or O
    if algorithm == NAIVE:
        reads = {}
        t = NAIVE_GEMM_TILE
        tiles_per_head = ceil_div(n, t) ** 2
        row_tiles = ceil_div(n, t)
        cohorts = ceil_div(tiles_per_head, min(tiles_per_head, gpu.sms))
        heads = min(bh, ceil_div(gpu.sms, tiles_per_head))
        for k_up, k_low in zip(upper.kernels, lower.kernels, strict=True):
            if k_up.name == "softmax":
                resident_rows = gpu.sms * SOFTMAX_BLOCKS_PER_SM
                ws = resident_rows * n * eb
                reads[k_up.name] = _cached_reads(
                    k_low.bytes_read, k_up.bytes_read, 2, 2, ws, usable
                )
            else:
                ws = heads * 2 * head_matrix  # the two operand matrices a head's tiles share
                p_strips = k_low.bytes_read - matrix_bytes(config) if k_up.name == "gemm_pv" else 0
                reads[k_up.name] = p_strips + _cached_reads(
                    k_low.bytes_read - p_strips,
                    k_up.bytes_read - p_strips,
                    cohorts,
                    row_tiles,
                    ws,
                    usable,
                )
        kernels = tuple(replace(k, bytes_read=reads[k.name]) for k in upper.kernels)
        return replace(upper, kernels=kernels)
    bm, _ = tile_shape(config, algorithm)
    q_tiles = ceil_div(n, bm)
    resident = gpu.sms * resident_blocks_per_sm(config, algorithm, gpu)
    cohorts = ceil_div(q_tiles, min(q_tiles, resident))
    heads = min(bh, ceil_div(resident, q_tiles))
    ws = heads * 2 * head_matrix + resident * 2 * bm * d * eb
    q_bytes = matrix_bytes(config)
    (k_up,), (k_low,) = upper.kernels, lower.kernels
    kv = _cached_reads(
        k_low.bytes_read - q_bytes, k_up.bytes_read - q_bytes, cohorts, q_tiles, ws, usable
    )
    return replace(upper, kernels=(replace(k_up, bytes_read=q_bytes + kv),))


def traffic_band(
    config: AttentionConfig, algorithm: str, gpu: GpuSpec, smem_limit_bytes: int | None = None
) -> TrafficBand:
    return TrafficBand(
        compulsory_cost(config, algorithm, smem_limit_bytes),
        l2_aware_cost(config, algorithm, gpu, smem_limit_bytes),
        algorithm_cost(config, algorithm, smem_limit_bytes),
    )


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

GB = 10**9
GiB = 2**30
MiB = 2**20
KiB = 1024

#: Results per clock per SM of exp2 and the other special functions on the XU (MUFU) unit:
#: 16 on compute capability 5.x to 9.0 (CUDA C++ Programming Guide, "Arithmetic Instructions"
#: throughput table).
XU_OPS_PER_CLOCK_PER_SM = 16
#: Dense fp16/bf16 FLOPs per clock per SM of Hopper's tensor cores through wgmma: four tensor
#: cores of 512 FMA/clock each (NVIDIA Hopper architecture whitepaper). The counters agree: for
#: wgmma and cuBLAS/cuDNN kernels on the H200, sm__pipe_tensor_cycles_active (one count per
#: busy sub-partition cycle) equals FLOPs / 1024 exactly.
HOPPER_WGMMA_FLOPS_PER_CLOCK_PER_SM = 4096
#: The same tensor cores driven by the warp-level mma.sync.m16n8k16 (Ampere's instruction):
#: the counters measured 682.7 FLOPs per busy sub-partition cycle for every mma.sync kernel on
#: the H200 (tiled_mma and FlashAttention-2, resources/recorded/h200_sweep.json: FLOPs ÷
#: sm__pipe_tensor_cycles_active), 2/3 of wgmma's 1,024: 4 × 2048/3 per SM.
HOPPER_MMA_SYNC_FLOPS_PER_CLOCK_PER_SM = 4 * 2048 / 3
#: fp32 FLOPs per clock per SM: 128 FP32 lanes × 2 (an FMA) (Hopper whitepaper, SM diagram).
HOPPER_FP32_FLOPS_PER_CLOCK_PER_SM = 256
#: SM sub-partitions (each with its own tensor core, warp scheduler and MUFU): Volta to Hopper.
SUBPARTITIONS_PER_SM = 4
#: The H100/H200 SXM's maximum SM boost clock: 1,980 MHz (on the H200: nvidia-smi -q -d CLOCK
#: "Max Clocks" SM 1980 MHz, cudaDevAttrClockRate 1,980,000 kHz; docs/bench/h200_clocks.txt).
#: The roofs are quoted at it unless the counters measured the clock.
HOPPER_SXM_BOOST_CLOCK_HZ = 1.98e9
HOPPER_CLOCK_SOURCE = "boost clock 1.98 GHz (H200's max SM clock, nvidia-smi 'Max Clocks')"

GPU, CPU = "gpu", "cpu"


@dataclass(frozen=True)
class GpuSpec:
    """The figures of one processor that its roofline and memory wall are drawn from.

    `name` is the product as its maker sells it ("H200 SXM 141 GB"; saved settings refer to
    it). Capacities and rates are decimal (GB = 10⁹ B, TB/s = 10¹² B/s, TFLOP/s = 10¹² FLOP/s):
    the H200's datasheet says 141 GB (`memory_bytes` = 141·10⁹), the device reports
    150,109,880,320 B (150.1 GB), which `Device`/`DeviceInfo` carry apart. GiB appear only
    where named.

    Compute roofs are per-clock rates × `clock_hz` where the rate per clock is known
    (`*_per_clock_per_sm`; Hopper), else the datasheet's peak at its own clock. `clock_hz` is
    the datasheet's boost clock unless `clock_source` says the counters measured it
    (`with_clock`). `kind` is GPU, or CPU for this machine's processor (gpu/model/cpu_roofs.py):
    then `sms` are cores and the compute roof is fp32 SIMD.
    """

    name: str
    memory_bytes: int
    bandwidth_bytes_s: float
    smem_per_sm_bytes: int
    fp16_tensor_flops: float  # dense, fp32 accumulate, at the datasheet's clock
    sms: int
    source: str
    l2_bytes: int = 0
    #: L2 bandwidth; None where no measured or published figure is known.
    l2_bandwidth_bytes_s: float | None = None
    fp32_flops: float = 0.0  # CUDA cores, FMA = 2 FLOPs, at the datasheet's clock
    clock_hz: float = 0.0
    xu_ops_per_clock_per_sm: int = XU_OPS_PER_CLOCK_PER_SM
    l2_source: str = ""
    #: Whether the L2 figure is a nominal peak (the counters' own), not a measured rate.
    l2_nominal: bool = False
    clock_source: str = ""
    clock_measured: bool = False
    tensor_flops_per_clock_per_sm: float = 0.0  # wgmma on Hopper; 0: use fp16_tensor_flops
    mma_sync_flops_per_clock_per_sm: float = 0.0  # 0: mma.sync is the tensor path itself
    fp32_flops_per_clock_per_sm: float = 0.0  # 0: use fp32_flops
    kind: str = GPU
    bandwidth_source: str = ""

    @property
    def tensor_flops(self) -> float:
        """Dense fp16/bf16 tensor FLOP/s at `clock_hz` (wgmma on Hopper)."""
        if self.tensor_flops_per_clock_per_sm and self.clock_hz:
            return self.tensor_flops_per_clock_per_sm * self.sms * self.clock_hz
        return self.fp16_tensor_flops

    @property
    def mma_sync_flops(self) -> float:
        if self.mma_sync_flops_per_clock_per_sm and self.clock_hz:
            return self.mma_sync_flops_per_clock_per_sm * self.sms * self.clock_hz
        return self.tensor_flops

    @property
    def fp32_peak_flops(self) -> float:
        if self.fp32_flops_per_clock_per_sm and self.clock_hz:
            return self.fp32_flops_per_clock_per_sm * self.sms * self.clock_hz
        return self.fp32_flops

    @property
    def top_flops(self) -> float:
        """The fastest compute roof: the tensor cores on a GPU, fp32 SIMD on a CPU."""
        return max(self.tensor_flops, self.fp32_peak_flops)

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity above which a kernel can be compute-bound on this device (its
        fastest compute roof over its DRAM bandwidth)."""
        return self.top_flops / self.bandwidth_bytes_s

    @property
    def xu_ops_s(self) -> float:
        """Exponentials (and other special functions) per second, all SMs (0 on a CPU)."""
        if self.kind != GPU:
            return 0.0
        return self.xu_ops_per_clock_per_sm * self.sms * self.clock_hz

    @property
    def memory_gb(self) -> float:
        return self.memory_bytes / GB

    @property
    def memory_label(self) -> str:
        """'141 GB': the capacity, decimal."""
        return f"{self.memory_gb:.0f} GB"

    @property
    def label(self) -> str:
        """'H200 SXM, 141 GB' (or the CPU's name)."""
        if self.kind != GPU:
            return self.name
        return f"{self.name.rsplit(' ', 2)[0]}, {self.memory_label}"

    @property
    def compute_peaks(self) -> dict[str, float]:
        """FLOP/s of each matmul unit (keys TENSOR, FP32), where known."""
        peaks = {}
        if self.tensor_flops:
            peaks[TENSOR] = self.tensor_flops
        if self.fp32_peak_flops:
            peaks[FP32] = self.fp32_peak_flops
        return peaks

    def kernel_seconds(self, hbm_bytes: int, flops: int) -> float:
        return max(hbm_bytes / self.bandwidth_bytes_s, flops / self.top_flops)


def with_clock(gpu: GpuSpec, clock_hz: float, source: str, measured: bool = True) -> GpuSpec:
    """`gpu` with its roofs quoted at `clock_hz` (the counters' measured clock)."""
    if not clock_hz or clock_hz <= 0:
        return gpu
    return replace(gpu, clock_hz=float(clock_hz), clock_source=source, clock_measured=measured)


#: Per-clock rates and the clock of the Hopper SXM parts (H100, H200): their roofs.
_HOPPER_SXM = {
    "clock_hz": HOPPER_SXM_BOOST_CLOCK_HZ,
    "clock_source": HOPPER_CLOCK_SOURCE,
    "tensor_flops_per_clock_per_sm": HOPPER_WGMMA_FLOPS_PER_CLOCK_PER_SM,
    "mma_sync_flops_per_clock_per_sm": HOPPER_MMA_SYNC_FLOPS_PER_CLOCK_PER_SM,
    "fp32_flops_per_clock_per_sm": HOPPER_FP32_FLOPS_PER_CLOCK_PER_SM,
}

GPUS: dict[str, GpuSpec] = {
    spec.name: spec
    for spec in (
        # NVIDIA H200 Tensor Core GPU datasheet (2024): 141 GB HBM3e (the device reports
        # 150,109,880,320 B = 150.1 GB usable), 4.8 TB/s, FP16 Tensor Core 1,979 TFLOPS with
        # sparsity (989.5 dense), FP32 67 TFLOPS; Hopper tuning guide: 228 KiB shared/SM
        # (227 KiB usable by one block); 132 SMs on the SXM part; L2 60 MiB
        # (cudaDevAttrL2CacheSize on the H200). L2 bandwidth: not published. Measured with
        # `python3 bench/l2_bandwidth.py` on an H200 (driver 580.159.04, 2026-11-30): 15.42 TB/s
        # is the L2 counters' nominal peak (lts__t_bytes ÷ its pct_of_peak_sustained; the roof
        # Nsight Compute draws), not a rate anything reached; the best streaming read of a
        # 30 MiB buffer reached 8.52 TB/s.
        GpuSpec(
            "H200 SXM 141 GB",
            141 * GB,
            4.8e12,
            228 * KiB,
            989.5e12,
            132,
            "NVIDIA H200 datasheet; Hopper tuning guide",
            l2_bytes=60 * MiB,
            fp32_flops=67e12,
            l2_bandwidth_bytes_s=15.42e12,
            l2_nominal=True,
            l2_source="size: cudaDevAttrL2CacheSize on an H200; bandwidth: nominal, the L2 "
            "counters' peak on an H200 (bench/l2_bandwidth.py; best streaming read 8.52 TB/s)",
            **_HOPPER_SXM,
        ),
        # NVIDIA H100 datasheet (SXM5): 80 GB HBM3, 3.35 TB/s, FP16 Tensor 1,979 TFLOPS sparse,
        # FP32 67 TFLOPS; H100 architecture whitepaper: 50 MB L2 on the SXM5 part.
        GpuSpec(
            "H100 SXM 80 GB",
            80 * GB,
            3.35e12,
            228 * KiB,
            989.5e12,
            132,
            "NVIDIA H100 datasheet; Hopper tuning guide",
            l2_bytes=50 * MiB,
            fp32_flops=67e12,
            **_HOPPER_SXM,
            l2_source="size: NVIDIA H100 whitepaper; bandwidth not published",
        ),
        # NVIDIA A100 datasheet: 40 GB HBM2 at 1,555 GB/s, 80 GB HBM2e at 2,039 GB/s; FP16 Tensor
        # 312 TFLOPS dense, FP32 19.5 TFLOPS, boost 1,410 MHz; Ampere tuning guide: 164 KB
        # shared/SM; 108 SMs. A100 whitepaper: 40 MB L2, 5,120 B/clock L2 read bandwidth
        # (2.3× V100's 2,048 B/clock): 7.2 TB/s at 1,410 MHz.
        GpuSpec(
            "A100 SXM 40 GB",
            40 * GB,
            1.555e12,
            164 * KiB,
            312e12,
            108,
            "NVIDIA A100 datasheet; Ampere tuning guide",
            l2_bytes=40 * MiB,
            l2_bandwidth_bytes_s=5120 * 1.41e9,
            fp32_flops=19.5e12,
            clock_hz=1.41e9,
            clock_source="A100 datasheet boost clock 1,410 MHz",
            l2_source="NVIDIA A100 whitepaper: 5,120 B/clock at 1,410 MHz",
        ),
        GpuSpec(
            "A100 SXM 80 GB",
            80 * GB,
            2.039e12,
            164 * KiB,
            312e12,
            108,
            "NVIDIA A100 datasheet; Ampere tuning guide",
            l2_bytes=40 * MiB,
            l2_bandwidth_bytes_s=5120 * 1.41e9,
            fp32_flops=19.5e12,
            clock_hz=1.41e9,
            clock_source="A100 datasheet boost clock 1,410 MHz",
            l2_source="NVIDIA A100 whitepaper: 5,120 B/clock at 1,410 MHz",
        ),
        # NVIDIA Ada GPU architecture whitepaper (RTX 4090): 24 GB GDDR6X at 1,008 GB/s, FP16
        # Tensor with FP32 accumulate 165.2 TFLOPS dense, FP32 82.6 TFLOPS, boost 2,520 MHz,
        # 72 MB L2; Ada tuning guide: 100 KB shared/SM; 128 SMs.
        GpuSpec(
            "RTX 4090 24 GB",
            24 * GB,
            1.008e12,
            100 * KiB,
            165.2e12,
            128,
            "NVIDIA Ada whitepaper; Ada tuning guide",
            l2_bytes=72 * MiB,
            fp32_flops=82.6e12,
            clock_hz=2.52e9,
            clock_source="Ada whitepaper boost clock 2,520 MHz",
            l2_source="size: NVIDIA Ada whitepaper; bandwidth not published",
        ),
        # RTX 3060 12 GB: 360 GB/s (192-bit GDDR6 at 15 Gbps, NVIDIA spec page), 28 SMs at
        # 1.777 GHz boost, FP32 12.7 TFLOPS; GA10x whitepaper's GeForce rate of 512 dense FP16
        # FLOP/clk/SM with FP32 accumulate gives 25.5 TFLOPS (derived); 3 MB L2 (GA106); Ampere
        # tuning guide: 100 KB shared/SM on GA10x.
        GpuSpec(
            "RTX 3060 12 GB",
            12 * GB,
            360e9,
            100 * KiB,
            25.5e12,
            28,
            "NVIDIA spec page; GA10x whitepaper (derived rate)",
            l2_bytes=3 * MiB,
            fp32_flops=12.7e12,
            clock_hz=1.777e9,
            clock_source="NVIDIA spec page boost clock 1,777 MHz",
            l2_source="size: NVIDIA GA10x whitepaper; bandwidth not published",
        ),
        # NVIDIA T4 datasheet: 16 GB GDDR6, 320 GB/s, 65 TFLOPS mixed precision, 8.1 TFLOPS
        # FP32, boost 1,590 MHz; Turing whitepaper: 4 MB L2 (TU104); Turing tuning guide: 64 KB
        # shared/SM; 40 SMs.
        GpuSpec(
            "T4 16 GB",
            16 * GB,
            320e9,
            64 * KiB,
            65e12,
            40,
            "NVIDIA T4 datasheet; Turing tuning guide",
            l2_bytes=4 * MiB,
            fp32_flops=8.1e12,
            clock_hz=1.59e9,
            clock_source="T4 datasheet boost clock 1,590 MHz",
            l2_source="size: NVIDIA Turing whitepaper; bandwidth not published",
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


def with_measured_l2(
    gpu: GpuSpec, l2_bandwidth_bytes_s: float | None, source: str, nominal: bool = False
) -> GpuSpec:
    """`gpu` with an L2 bandwidth from the device (None: unchanged); `nominal` when the figure
    is the counters' peak rather than a rate measured."""
    if not l2_bandwidth_bytes_s:
        return gpu
    return replace(
        gpu, l2_bandwidth_bytes_s=float(l2_bandwidth_bytes_s), l2_source=source, l2_nominal=nominal
    )
