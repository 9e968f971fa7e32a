"""Exact bytes and FLOPs of naive and tiled attention, on the GPUs of gpu/model/gpus.py.

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

Measured DRAM bytes (gpu.counters.profiler) replace these estimates wherever a run was profiled.

`flops` is the useful matmul work, 4·B·h·N²·d (half of it with a causal mask): the number
TFLOP/s figures are quoted against. `executed_flops` is what the kernels really issue (naive
computes the whole N×N product even when causal; tiled computes diagonal tiles in full).
Exponentials are counted separately (`exps`): they run on the special-function unit (XU), whose
throughput is a roof of its own.
"""

from __future__ import annotations

from dataclasses import replace

from ..algorithms import ALGORITHMS, EAGER, NAIVE, NAIVE_GEMM_TILE, RING, TILED, tile_shape
from ..config import STAT_BYTES, AttentionConfig, ceil_div
from .backward_cost import backward_kernels, compulsory_backward, l2_aware_backward, with_forward
from .decode_cost import compulsory_decode, decode_cost
from .gpus import (
    CPU,
    DEFAULT_GPU,
    FP32,
    GPUS,
    SUBPARTITIONS_PER_SM,
    TENSOR,
    GpuSpec,
    gpu_for_device_name,
    with_clock,
    with_measured_l2,
)
from .kernel_cost import (
    DEFAULT_SMEM_OPTIN_BYTES,
    L2_SHARED_FRACTION,
    SOFTMAX_BLOCKS_PER_SM,
    SOFTMAX_STATIC_SMEM,
    AlgorithmCost,
    KernelCost,
    TrafficBand,
    attention_matrix_bytes,
    cached_reads,
    kv_tiles_for_query_tile,
    matmul_unit,
    matrix_bytes,
    naive_peak_bytes,
    pass_useful_flops,
    softmax_reads_s_once,
    stats_bytes,
    tile_rows,
    tiled_peak_bytes,
    useful_flops,
    visible_scores,
)

#: The cost model's whole surface: its own models, and the GPUs and cost terms they are written
#: in (gpu/model/gpus.py, gpu/model/kernel_cost.py), which callers may take from here.
__all__ = [
    "CPU",
    "DEFAULT_GPU",
    "DEFAULT_SMEM_OPTIN_BYTES",
    "FP32",
    "GPUS",
    "L2_SHARED_FRACTION",
    "SOFTMAX_STATIC_SMEM",
    "SUBPARTITIONS_PER_SM",
    "TENSOR",
    "AlgorithmCost",
    "GpuSpec",
    "KernelCost",
    "TrafficBand",
    "algorithm_cost",
    "attention_matrix_bytes",
    "compulsory_cost",
    "gpu_for_device_name",
    "kv_tiles_for_query_tile",
    "l2_aware_cost",
    "matmul_unit",
    "matrix_bytes",
    "naive_cost",
    "naive_oom_seq_len",
    "naive_peak_bytes",
    "pass_useful_flops",
    "resident_blocks_per_sm",
    "softmax_reads_s_once",
    "softmax_row_smem_bytes",
    "stats_bytes",
    "tile_rows",
    "tiled_cost",
    "tiled_peak_bytes",
    "traffic_band",
    "useful_flops",
    "with_clock",
    "with_measured_l2",
]

# --------------------------------------------------------------------------------------------
# The no-reuse model (the upper bound)


def softmax_row_smem_bytes(config: AttentionConfig, smem_limit_bytes: int | None = None) -> int:
    """The shared memory naive's softmax stages a row of S in: the row in the input dtype,
    n · sizeof(T) (softmax.cu's softmax_rows_smem), where it fits; none for the two-pass kernel,
    which streams the row through registers twice. The launch, the schedule and the
    animation's chip read this."""
    if not softmax_reads_s_once(config, smem_limit_bytes):
        return 0
    return config.seq_len * config.elem_bytes


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
    # One exponential per computed score; an eager rescale (the readable kernel) also takes
    # one per row and key tile for the rescale factor (the tensor-core kernels rescale lazily,
    # rarely).
    info = ALGORITHMS.get(algorithm)
    exps = scores + (tile_rows_visited if info is not None and info.rescale == EAGER else 0)
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
    forward's) and the step's peak; a decode config gpu.model.decode_cost's."""
    if config.is_decode:
        return decode_cost(config, algorithm, smem_limit_bytes)
    if config.has_backward:
        if algorithm == RING:
            raise KeyError("ring attention has no backward pass here")
        if algorithm != NAIVE and not getattr(ALGORITHMS.get(algorithm), "fused", False):
            raise KeyError(f"unknown algorithm {algorithm!r}")
        forward = algorithm_cost(config.forward(), algorithm, smem_limit_bytes)
        backward = backward_kernels(config, algorithm, smem_limit_bytes)
        return with_forward(config, algorithm, backward, forward)
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
    if config.is_decode:
        return compulsory_decode(config, algorithm, smem_limit_bytes)
    if config.has_backward:
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
    """The L2-aware estimate (assumptions in the module docstring; decode's in
    gpu.model.decode_cost: its compulsory figure)."""
    if config.is_decode:
        return compulsory_decode(config, algorithm, smem_limit_bytes, gpu)
    if config.has_backward:
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
                reads[k_up.name] = cached_reads(k_low.bytes_read, k_up.bytes_read, 2, 2, ws, usable)
            else:
                ws = heads * 2 * head_matrix  # the two operand matrices a head's tiles share
                p_strips = k_low.bytes_read - matrix_bytes(config) if k_up.name == "gemm_pv" else 0
                reads[k_up.name] = p_strips + cached_reads(
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
    kv = cached_reads(
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
