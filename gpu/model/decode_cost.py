"""Bytes, FLOPs and peak memory of the decode pass: q new tokens against a KV cache of N tokens.

Per head, decode is the prefill with q query rows instead of N: S = Q Kᵀ is q × N, O = P V is
q × d. Every cached key and value is used for q dot products (G·q with a KV head shared by G
query heads) and then never again, so the cache must cross the DRAM interface once per step:

    KV cache of one layer = 2 · B · H_kv · N · d · bytes          (K and V)
    useful FLOPs          = 4 · B · H_q · q · N · d               (Q Kᵀ and P V)
    intensity             ≈ 4 · H_q · q / (2 · H_kv · bytes) = 2 · G · q / bytes FLOP/B

about 1 FLOP/B for MHA in fp16 (G = 1, q = 1) and G for GQA groups of G: far left of any GPU's
ridge (~200-300 FLOP/B), memory-bound fused or not.

Kernels, with the names the backends time them under:

- naive (`gemm_qk`, `softmax`, `gemm_pv`): the prefill's three kernels on q rows per head. S and
  P are B·H_q·q·N elements each, written to and read from HBM. The GEMMs take a whole query
  group per KV head (Q as B·H_kv matrices of G·q rows), so K and V are read once.
- split_kv (`decode_split`): one fused kernel (gpu/kernels/decode_split.cu). Q, K and V read
  once; with more than one split (gpu.launch.decode_split.split_plan) each block writes a
  partial (O_s in fp32, m_s, l_s) and the last block of each unit reads its unit's partials
  back to merge them.

Traffic figures, as gpu.model.costmodel's three:
- compulsory: every tensor once (K and V once, S and P once each, the partials once each way);
- no reuse: naive's GEMMs as 128×128 output tiles (K re-read per 128 rows of a query group,
  V per 128 rows, P per 128 columns of d); the fused kernel's row chunks each read the keys
  (a group of more than 8 rows runs as several blocks over the same keys) and its splits each
  read the rows of Q (gpu/model/decode_schedule.py plays these steps);
- L2-aware: the compulsory figure. The re-reads above come from blocks launched side by side
  over the same keys (adjacent row chunks, a GEMM's adjacent output tiles), which meet in L2.
"""

from __future__ import annotations

from ..algorithms import NAIVE, NAIVE_GEMM_TILE, SPLIT_KV
from ..config import AttentionConfig, ceil_div
from ..launch import decode_split
from .gpus import DEFAULT_GPU, GPUS, GpuSpec
from .kernel_cost import (
    AlgorithmCost,
    KernelCost,
    decode_useful_flops,
    matmul_unit,
    softmax_reads_s_once,
)

DECODE_ALGORITHMS = (NAIVE, SPLIT_KV)


def kv_cache_bytes(config: AttentionConfig) -> int:
    """K and V of one layer's cache: 2 · B · H_kv · N · d elements."""
    return 2 * config.kv_bh * config.seq_len * config.head_dim * config.elem_bytes


def query_bytes(config: AttentionConfig) -> int:
    """Q (or O) of a decode step: B · H_q · q · d elements."""
    return config.bh * config.new_tokens * config.head_dim * config.elem_bytes


def score_bytes(config: AttentionConfig) -> int:
    """One of naive's S or P: B · H_q · q · N elements."""
    return config.bh * config.new_tokens * config.seq_len * config.elem_bytes


def decode_scores(config: AttentionConfig) -> int:
    """Scores of a step, B · H_q · q · N: one exponential each in a fused kernel."""
    return config.bh * config.new_tokens * config.seq_len


def plan_for(config: AttentionConfig, gpu: GpuSpec | None = None) -> decode_split.SplitPlan:
    """The split-KV kernel's split of `config` on `gpu` (default: the default GPU's SMs)."""
    gpu = gpu or GPUS[DEFAULT_GPU]
    return decode_split.split_plan(config, gpu.sms)


def _naive(config: AttentionConfig, smem_limit_bytes: int | None, reuse: bool) -> AlgorithmCost:
    d, n = config.head_dim, config.seq_len
    rows = config.group_size * config.new_tokens  # query rows per KV head
    q_bytes, kv_half, s_bytes = (
        query_bytes(config),
        kv_cache_bytes(config) // 2,
        score_bytes(config),
    )
    t = NAIVE_GEMM_TILE
    k_reads = 1 if reuse else ceil_div(rows, t)  # K per 128 query rows of the group
    q_reads = 1 if reuse else ceil_div(n, t)  # Q per 128 keys
    p_reads = 1 if reuse else ceil_div(d, t)  # P per 128 columns of O
    unit = matmul_unit(config, NAIVE)
    half = 2 * config.bh * config.new_tokens * n * d  # one GEMM's FLOPs
    gemm_qk = KernelCost("gemm_qk", q_reads * q_bytes + k_reads * kv_half, s_bytes, half, 0, unit)
    s_reads = 1 if reuse or softmax_reads_s_once(config, smem_limit_bytes) else 2
    softmax = KernelCost(
        "softmax", s_reads * s_bytes, s_bytes, 0, 2 * decode_scores(config)
    )  # two exponentials per score: one for the row sum, one for P
    gemm_pv = KernelCost("gemm_pv", p_reads * s_bytes + k_reads * kv_half, q_bytes, half, 0, unit)
    peak = 2 * q_bytes + kv_cache_bytes(config) + 2 * s_bytes  # Q, O, K, V, S, P
    return AlgorithmCost(
        NAIVE, config, (gemm_qk, softmax, gemm_pv), peak, decode_useful_flops(config)
    )


def _split(config: AttentionConfig, gpu: GpuSpec | None, reuse: bool) -> AlgorithmCost:
    plan = plan_for(config, gpu)
    partials = decode_split.partial_bytes(config, plan)
    kv_reads = 1 if reuse else plan.row_chunks
    q_reads = 1 if reuse else plan.splits  # every split's block loads its rows of Q
    q_bytes = query_bytes(config)
    # One exponential per score, and one rescale factor per row for every step of every key
    # group (the merges' few are left out).
    groups = _key_groups(config)
    steps = ceil_div(plan.keys_per_split, groups * decode_split.keys_per_thread(config))
    rows = config.bh * config.new_tokens
    exps = decode_scores(config) + rows * plan.splits * groups * steps
    kernel = KernelCost(
        "decode_split",
        q_reads * q_bytes + kv_reads * kv_cache_bytes(config) + partials,
        q_bytes + partials,
        decode_useful_flops(config),
        exps,
        matmul_unit(config, SPLIT_KV),  # the CUDA cores (gpu/algorithms.py says why)
    )
    peak = 2 * q_bytes + kv_cache_bytes(config) + partials + decode_split.counter_bytes(plan)
    return AlgorithmCost(SPLIT_KV, config, (kernel,), peak, decode_useful_flops(config))


def _key_groups(config: AttentionConfig) -> int:
    """Key groups per block: d / 8 threads read one key row (16 bytes each)."""
    return max(1, decode_split.THREADS // max(1, config.head_dim // 8))


def decode_cost(
    config: AttentionConfig,
    algorithm: str,
    smem_limit_bytes: int | None = None,
    gpu: GpuSpec | None = None,
) -> AlgorithmCost:
    """The no-reuse figure of `algorithm`'s decode (module docstring)."""
    if algorithm == NAIVE:
        return _naive(config, smem_limit_bytes, reuse=False)
    if algorithm == SPLIT_KV:
        return _split(config, gpu, reuse=False)
    known = ", ".join(DECODE_ALGORITHMS)
    raise KeyError(f"{algorithm!r} has no decode pass: the decode algorithms are {known}")


def compulsory_decode(
    config: AttentionConfig,
    algorithm: str,
    smem_limit_bytes: int | None = None,
    gpu: GpuSpec | None = None,
) -> AlgorithmCost:
    """Every tensor once (module docstring); also the L2-aware figure."""
    if algorithm == NAIVE:
        return _naive(config, smem_limit_bytes, reuse=True)
    if algorithm == SPLIT_KV:
        return _split(config, gpu, reuse=True)
    return decode_cost(config, algorithm, smem_limit_bytes, gpu)  # raises the KeyError


def decode_intensity(config: AttentionConfig) -> float:
    """Useful FLOPs per compulsory byte of the fused kernel: ≈ 2 · G · q / bytes."""
    return compulsory_decode(config, SPLIT_KV).arithmetic_intensity


__all__ = [
    "DECODE_ALGORITHMS",
    "compulsory_decode",
    "decode_cost",
    "decode_intensity",
    "decode_scores",
    "decode_useful_flops",
    "kv_cache_bytes",
    "plan_for",
    "query_bytes",
    "score_bytes",
]
