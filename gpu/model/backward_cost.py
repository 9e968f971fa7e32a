"""Bytes, FLOPs and peak memory of the attention backward pass and of a training step.

The backward of O = softmax(Q Kᵀ·s) V (s = 1/√d), given dO:

    dV = Pᵀ dO        dP = dO Vᵀ        dS = P ∘ (dP − D),  D = rowsum(dP ∘ P) = rowsum(dO ∘ O)
    dQ = dS K · s     dK = dSᵀ Q · s

Four GEMM-shaped products of 2·N²·d FLOPs each per head are the *useful* backward work (8·N²·d,
twice the forward's 4·N²·d; half of it with a causal mask). The fused kernel does a fifth,
S = Q Kᵀ, again (recompute): it kept no P, so it rebuilds each P_ij from S_ij and the row's
logsumexp. That extra 2·N²·d is the FLOPs FlashAttention trades for the B·h·N² bytes of P.

Kernels, with the names the backends time them under:

- naive: `bwd_dV_gemm`, `bwd_dP_gemm`, `softmax_bwd` (dS from the stored P and dP, D computed
  in the kernel), `bwd_dQ_gemm`, `bwd_dK_gemm`. P was kept from the forward; dP and dS are
  B·h·N² each, really allocated.
- fused: `flash_bwd_preprocess` (D = rowsum(dO ∘ O), the logsumexp of each row from the
  forward's m and l, and the fp32 dQ accumulator cleared),
  `flash_bwd` (one block per K/V tile j: K_j, V_j on chip, the query tiles i streaming with
  dO_i, logsumexp_i and D_i; dK_j, dV_j accumulated on chip, dQ_i added to the fp32 accumulator
  with atomics), `flash_bwd_dq_convert` (the accumulator converted to the input dtype).
- fused, deterministic (`config.deterministic`): `flash_bwd_preprocess` without the
  accumulator, `flash_bwd` without dQ (S, dV, dP, dK: four products), then `flash_bwd_dq`,
  one block per query tile i holding Q_i, dO_i, logsumexp_i and D_i while the key tiles
  stream in a fixed order: it rebuilds S_ij and P_ij and dP_ij = dO_i V_jᵀ once more
  (recompute: 4·N²·d per head, not useful) to get dS_ij, and sums dQ_i = Σ_j dS_ij K_j · s
  (2·N²·d, the useful one) on chip before writing it once. Two more products per tile than
  the atomic backward (14·N²·d executed against 10·N²·d), no fp32 accumulator, and the same
  dQ bits on every run.

Traffic follows gpu.model.costmodel's three figures (no reuse, compulsory, L2-aware) with the same
rules: the no-reuse figure reads every tile a block touches (naive GEMMs as 128×128 output
tiles; the fused kernel's atomics read and write dQ_i once per visit; the dQ pass reads K_j and
V_j once per query tile), the compulsory one every tensor once, and the L2-aware one credits
re-reads that a cohort of resident blocks shares.

A training step is the forward's kernels (gpu.model.costmodel) followed by these; `pass_` "backward"
times the backward kernels alone (the forward that saves P or the logsumexp runs untimed), so
its bytes and FLOPs are the backward's while its peak is the whole step's.
"""

from __future__ import annotations

from dataclasses import replace

from ..algorithms import NAIVE, NAIVE_GEMM_TILE, backward_tile_shape, dq_pass_tile_shape
from ..config import BACKWARD, STAT_BYTES, AttentionConfig, ceil_div
from .gpus import GpuSpec
from .kernel_cost import (
    DEFAULT_SMEM_OPTIN_BYTES,
    L2_SHARED_FRACTION,
    SOFTMAX_STATIC_SMEM,
    AlgorithmCost,
    KernelCost,
    attention_matrix_bytes,
    cached_reads,
    kv_tiles_for_query_tile,
    matmul_unit,
    matrix_bytes,
    stats_bytes,
    tile_rows,
    useful_flops,
)

#: The backward kernels of each kind of algorithm, in launch order.
NAIVE_BACKWARD_KERNELS = ("bwd_dV_gemm", "bwd_dP_gemm", "softmax_bwd", "bwd_dQ_gemm", "bwd_dK_gemm")
FUSED_BACKWARD_KERNELS = ("flash_bwd_preprocess", "flash_bwd", "flash_bwd_dq_convert")
#: The fused backward with `config.deterministic`: the dQ pass in place of the conversion.
DETERMINISTIC_BACKWARD_KERNELS = ("flash_bwd_preprocess", "flash_bwd", "flash_bwd_dq")
#: Bytes of one element of the fused kernel's dQ accumulator (fp32, added to with atomics).
DQ_ACCUM_BYTES = 4


# --------------------------------------------------------------------------------------------
# FLOPs and memory


def backward_useful_flops(config: AttentionConfig) -> int:
    """The four products backward must do (dV, dP, dQ, dK): 8·B·h·N²·d, halved when causal."""
    return 2 * useful_flops(config.forward())


def fused_backward_kernel_names(config: AttentionConfig) -> tuple[str, ...]:
    """The fused backward's kernels for `config`: with the dQ pass when deterministic."""
    return DETERMINISTIC_BACKWARD_KERNELS if config.deterministic else FUSED_BACKWARD_KERNELS


def recompute_flops(config: AttentionConfig, algorithm: str) -> int:
    """FLOPs the fused backward spends rebuilding what it did not keep: S_ij = Q_i K_jᵀ in
    `flash_bwd`, and S_ij and dP_ij once more in the deterministic dQ pass (0 for naive: it
    kept P)."""
    if algorithm == NAIVE:
        return 0
    return sum(k.recomputed_flops for k in fused_backward_cost(config, algorithm))


def saved_activation_bytes(config: AttentionConfig, algorithm: str) -> int:
    """What one attention layer keeps from its forward until its backward: Q, K, V and O, plus
    P (B·h·N² elements) for naive, or the row statistics m and l (2·B·h·N fp32, which the
    backward folds into one logsumexp per row) for a fused kernel."""
    qkvo = 4 * matrix_bytes(config)
    if algorithm == NAIVE:
        return qkvo + attention_matrix_bytes(config)
    return qkvo + stats_bytes(config)


def backward_working_bytes(config: AttentionConfig, algorithm: str) -> int:
    """What one layer's backward allocates on top of its saved activations: dO, dQ, dK, dV, and
    dP and dS (B·h·N² each) for naive, or the logsumexp and D per row and the fp32 dQ
    accumulator (none when deterministic: the dQ pass writes dQ itself) for a fused kernel."""
    grads = 4 * matrix_bytes(config)
    if algorithm == NAIVE:
        return grads + 2 * attention_matrix_bytes(config)
    rows = config.bh * config.seq_len
    return grads + 2 * rows * STAT_BYTES + dq_accumulator_bytes(config)


def dq_accumulator_bytes(config: AttentionConfig) -> int:
    """The fused backward's fp32 dQ accumulator (B·h·N·d), or 0 when deterministic."""
    return (
        0 if config.deterministic else config.bh * config.seq_len * config.head_dim * DQ_ACCUM_BYTES
    )


def step_peak_bytes(config: AttentionConfig, algorithm: str) -> int:
    """Peak device memory of one layer's training step (or its backward, after the forward that
    saved what it needs): saved activations plus the backward's own buffers. The forward's own
    peak (naive: S and P together) is lower, so the backward's moment is the peak."""
    return saved_activation_bytes(config, algorithm) + backward_working_bytes(config, algorithm)


# --------------------------------------------------------------------------------------------
# The no-reuse model


def _gemm_reads(m: int, k: int, cols: int, tile: int = NAIVE_GEMM_TILE) -> int:
    """Elements a GEMM C (m×cols) = A (m×k) B (k×cols) reads with tile×tile output tiles, no
    reuse: each output tile reads its strip of A (rows×k) and of B (k×cols)."""
    return ceil_div(cols, tile) * m * k + ceil_div(m, tile) * k * cols


def softmax_bwd_reads_once(config: AttentionConfig, smem_limit_bytes: int | None = None) -> bool:
    """Whether a row of P and of dP fit together in one block's shared memory, so the softmax
    backward reads each once (D first, then dS from the same row); else it reads them twice."""
    limit = DEFAULT_SMEM_OPTIN_BYTES if smem_limit_bytes is None else smem_limit_bytes
    return 2 * config.seq_len * config.elem_bytes + SOFTMAX_STATIC_SMEM <= limit


def naive_backward_cost(
    config: AttentionConfig, smem_limit_bytes: int | None = None
) -> tuple[KernelCost, ...]:
    n, d, eb, bh = config.seq_len, config.head_dim, config.elem_bytes, config.bh
    unit = matmul_unit(config, NAIVE)
    nn, nd = n * n, n * d
    gemm = 2 * nn * d
    reads = 1 if softmax_bwd_reads_once(config, smem_limit_bytes) else 2
    return (
        # dV = Pᵀ dO: (N×N)ᵀ times N×d; reads the stored P.
        KernelCost("bwd_dV_gemm", bh * _gemm_reads(n, n, d) * eb, bh * nd * eb, bh * gemm, 0, unit),
        # dP = dO Vᵀ: N×d times d×N, written in full.
        KernelCost("bwd_dP_gemm", bh * _gemm_reads(n, d, n) * eb, bh * nn * eb, bh * gemm, 0, unit),
        # dS = P ∘ (dP − rowsum(dP ∘ P)): reads P and dP, writes dS; no matmul, no exponential.
        KernelCost("softmax_bwd", bh * reads * 2 * nn * eb, bh * nn * eb, 0, 0, ""),
        # dQ = dS K · s and dK = dSᵀ Q · s.
        KernelCost("bwd_dQ_gemm", bh * _gemm_reads(n, n, d) * eb, bh * nd * eb, bh * gemm, 0, unit),
        KernelCost("bwd_dK_gemm", bh * _gemm_reads(n, n, d) * eb, bh * nd * eb, bh * gemm, 0, unit),
    )


def query_rows_for_key_tile(config: AttentionConfig, block_m: int, block_n: int, j: int) -> int:
    """Query rows the block of key tile j streams: all N, or with a causal mask the query tiles
    from the one holding key j·block_n on (earlier queries do not see these keys)."""
    n = config.seq_len
    if not config.causal:
        return n
    first_tile = (j * block_n) // block_m
    return n - first_tile * block_m


def fused_backward_cost(config: AttentionConfig, algorithm: str) -> tuple[KernelCost, ...]:
    n, d, eb, bh = config.seq_len, config.head_dim, config.elem_bytes, config.bh
    bm, bn = backward_tile_shape(config, algorithm)
    atomic = not config.deterministic
    acc = DQ_ACCUM_BYTES if atomic else 0  # the dQ accumulator's bytes per element
    products = 5 if atomic else 4  # S (recompute), dV, dP, dK, and dQ unless deterministic
    read = written = flops = exps = 0
    for j in range(ceil_div(n, bn)):
        cols = tile_rows(n, bn, j)
        rows = query_rows_for_key_tile(config, bm, bn, j)
        read += 2 * cols * d * eb  # K_j, V_j once
        written += 2 * cols * d * eb  # dK_j, dV_j once
        # Each streamed query tile: Q_i, dO_i, logsumexp_i, D_i in; dQ_i += by atomics (read
        # and written in the accumulator once per visit, in this no-reuse count).
        read += rows * (2 * d * eb + 2 * STAT_BYTES + d * acc)
        written += rows * d * acc
        flops += 2 * products * rows * cols * d
        exps += rows * cols  # P_ij = exp(S_ij − logsumexp_i)
    unit = matmul_unit(config, algorithm)
    rows_all = n
    main = KernelCost(
        "flash_bwd", bh * read, bh * written, bh * flops, bh * exps, unit,
        recomputed_flops=bh * flops // products,
    )  # fmt: skip
    preprocess = KernelCost(
        "flash_bwd_preprocess",
        bh * rows_all * (2 * d * eb + 2 * STAT_BYTES),  # dO and O; m and l
        bh * rows_all * (2 * STAT_BYTES + d * acc),  # logsumexp, D; the cleared accumulator
        0,
    )
    if atomic:
        convert = KernelCost(
            "flash_bwd_dq_convert", bh * rows_all * d * acc, bh * rows_all * d * eb, 0, 0, ""
        )
        return preprocess, main, convert
    return preprocess, main, dq_pass_cost(config, algorithm)


def dq_pass_cost(config: AttentionConfig, algorithm: str) -> KernelCost:
    """The deterministic backward's `flash_bwd_dq`, no reuse: per query tile i, Q_i, dO_i,
    logsumexp_i and D_i read once and dQ_i written once; every visited K_j and V_j read. Three
    products per (i, j): S_ij and dP_ij rebuilt (recomputed), dQ_i += dS_ij K_j (useful);
    one exponential per score for P_ij."""
    n, d, eb, bh = config.seq_len, config.head_dim, config.elem_bytes, config.bh
    bm, bn = dq_pass_tile_shape(config, algorithm)
    read = written = flops = exps = 0
    for i in range(ceil_div(n, bm)):
        rows = tile_rows(n, bm, i)
        kv_rows = min(kv_tiles_for_query_tile(config, bm, bn, i) * bn, n)
        read += rows * (2 * d * eb + 2 * STAT_BYTES) + 2 * kv_rows * d * eb
        written += rows * d * eb
        flops += 6 * rows * kv_rows * d
        exps += rows * kv_rows
    return KernelCost(
        "flash_bwd_dq", bh * read, bh * written, bh * flops, bh * exps,
        matmul_unit(config, algorithm), recomputed_flops=bh * flops * 2 // 3,
    )  # fmt: skip


def backward_kernels(
    config: AttentionConfig, algorithm: str, smem_limit_bytes: int | None = None
) -> tuple[KernelCost, ...]:
    if algorithm == NAIVE:
        return naive_backward_cost(config, smem_limit_bytes)
    return fused_backward_cost(config, algorithm)


# --------------------------------------------------------------------------------------------
# Compulsory and L2-aware traffic


def _compulsory_backward_reads(config: AttentionConfig, algorithm: str) -> dict[str, int]:
    qkvo, s = matrix_bytes(config), attention_matrix_bytes(config)
    if algorithm == NAIVE:
        return {
            "bwd_dV_gemm": s + qkvo,
            "bwd_dP_gemm": 2 * qkvo,
            "softmax_bwd": 2 * s,
            "bwd_dQ_gemm": s + qkvo,
            "bwd_dK_gemm": s + qkvo,
        }
    rows = config.bh * config.seq_len
    acc = dq_accumulator_bytes(config)
    return {
        "flash_bwd_preprocess": 2 * qkvo + 2 * rows * STAT_BYTES,
        # Q, K, V, dO, logsumexp and D once; the accumulator's lines once.
        "flash_bwd": 4 * qkvo + 2 * rows * STAT_BYTES + acc,
        "flash_bwd_dq_convert": acc,
        # The dQ pass: Q, K, V, dO, logsumexp and D once.
        "flash_bwd_dq": 4 * qkvo + 2 * rows * STAT_BYTES,
    }


def _compulsory_backward_writes(config: AttentionConfig, algorithm: str) -> dict[str, int]:
    if algorithm == NAIVE:
        return {}  # every naive backward kernel writes its output once already
    # dK, dV (and the accumulator's lines once); the dQ pass writes dQ once already.
    return {"flash_bwd": 2 * matrix_bytes(config) + dq_accumulator_bytes(config)}


def compulsory_backward(
    config: AttentionConfig, algorithm: str, smem_limit_bytes: int | None = None
) -> tuple[KernelCost, ...]:
    reads = _compulsory_backward_reads(config, algorithm)
    writes = _compulsory_backward_writes(config, algorithm)
    return tuple(
        replace(k, bytes_read=reads[k.name], bytes_written=writes.get(k.name, k.bytes_written))
        for k in backward_kernels(config, algorithm, smem_limit_bytes)
    )


def l2_aware_backward(
    config: AttentionConfig, algorithm: str, gpu: GpuSpec, smem_limit_bytes: int | None = None
) -> tuple[KernelCost, ...]:
    """The L2-aware estimate (gpu.model.costmodel's assumptions): writes compulsory; re-reads shared
    by a cohort of resident blocks hit L2, across cohorts with the working set's odds."""
    upper = backward_kernels(config, algorithm, smem_limit_bytes)
    lower = {k.name: k for k in compulsory_backward(config, algorithm, smem_limit_bytes)}
    n, d, eb, bh = config.seq_len, config.head_dim, config.elem_bytes, config.bh
    usable = gpu.l2_bytes * L2_SHARED_FRACTION
    head_matrix = n * d * eb
    out = []
    if algorithm == NAIVE:
        t = NAIVE_GEMM_TILE
        row_tiles = ceil_div(n, t)
        tiles_per_head = row_tiles**2
        cohorts = ceil_div(tiles_per_head, min(tiles_per_head, gpu.sms))
        heads = min(bh, ceil_div(gpu.sms, tiles_per_head))
        big = attention_matrix_bytes(config)
        for k in upper:
            low = lower[k.name]
            if k.name == "softmax_bwd":
                ws = gpu.sms * 2 * 2 * n * eb  # rows of P and dP of the resident blocks
                reads = cached_reads(low.bytes_read, k.bytes_read, 2, 2, ws, usable)
            else:
                # An N×N operand (P or dS) streams its strips; the N×d one is shared and cached.
                strips = big if k.name != "bwd_dP_gemm" else 0
                ws = heads * 2 * head_matrix
                reads = strips + cached_reads(
                    low.bytes_read - strips, k.bytes_read - strips, cohorts, row_tiles, ws, usable
                )
            out.append(replace(k, bytes_read=reads, bytes_written=low.bytes_written))
        return tuple(out)
    _, bn = backward_tile_shape(config, algorithm)
    kv_tiles = ceil_div(n, bn)
    resident = gpu.sms  # one backward block per SM (registers and shared memory)
    cohorts = ceil_div(kv_tiles, min(kv_tiles, resident))
    heads = min(bh, ceil_div(resident, kv_tiles))
    # What a head's blocks share: Q, dO and the dQ accumulator, plus each block's K_j, V_j.
    acc_per_head = dq_accumulator_bytes(config) // bh
    ws = heads * (2 * head_matrix + acc_per_head) + resident * 2 * bn * d * eb
    kv = 2 * matrix_bytes(config)
    for k in upper:
        low = lower[k.name]
        if k.name == "flash_bwd":
            reads = kv + cached_reads(
                low.bytes_read - kv, k.bytes_read - kv, cohorts, kv_tiles, ws, usable
            )
        elif k.name == "flash_bwd_dq":
            reads = _l2_aware_dq_pass_reads(config, algorithm, gpu, k, low)
        else:
            reads = low.bytes_read
        out.append(replace(k, bytes_read=reads, bytes_written=low.bytes_written))
    return tuple(out)


def _l2_aware_dq_pass_reads(
    config: AttentionConfig, algorithm: str, gpu: GpuSpec, upper: KernelCost, lower: KernelCost
) -> int:
    """The dQ pass's DRAM reads by the forward kernel's rule (gpu.model.costmodel): its blocks
    own query tiles and stream K and V, so Q, dO and the row statistics are read once, and the
    K/V re-reads that a cohort of resident blocks (one per SM) shares hit L2."""
    n, d, eb, bh = config.seq_len, config.head_dim, config.elem_bytes, config.bh
    bm, _ = dq_pass_tile_shape(config, algorithm)
    q_tiles = ceil_div(n, bm)
    resident = gpu.sms
    cohorts = ceil_div(q_tiles, min(q_tiles, resident))
    heads = min(bh, ceil_div(resident, q_tiles))
    ws = heads * 2 * n * d * eb + resident * 2 * bm * d * eb  # K, V per head; Q_i, dO_i per block
    own = 2 * matrix_bytes(config) + 2 * bh * n * STAT_BYTES  # Q, dO, logsumexp and D once
    usable = gpu.l2_bytes * L2_SHARED_FRACTION
    kv = cached_reads(lower.bytes_read - own, upper.bytes_read - own, cohorts, q_tiles, ws, usable)
    return own + kv


def with_forward(
    config: AttentionConfig,
    algorithm: str,
    backward: tuple[KernelCost, ...],
    forward: AlgorithmCost,
) -> AlgorithmCost:
    """A training cost from backward kernels and the matching forward figure (the step times
    both; the backward pass its own kernels only)."""
    kernels = backward if config.pass_ == BACKWARD else forward.kernels + backward
    flops = backward_useful_flops(config) + (0 if config.pass_ == BACKWARD else forward.flops)
    return AlgorithmCost(algorithm, config, kernels, step_peak_bytes(config, algorithm), flops)


__all__ = [
    "DETERMINISTIC_BACKWARD_KERNELS",
    "DQ_ACCUM_BYTES",
    "FUSED_BACKWARD_KERNELS",
    "NAIVE_BACKWARD_KERNELS",
    "backward_kernels",
    "backward_useful_flops",
    "backward_working_bytes",
    "compulsory_backward",
    "dq_accumulator_bytes",
    "dq_pass_cost",
    "fused_backward_cost",
    "fused_backward_kernel_names",
    "l2_aware_backward",
    "naive_backward_cost",
    "recompute_flops",
    "saved_activation_bytes",
    "step_peak_bytes",
    "with_forward",
]
