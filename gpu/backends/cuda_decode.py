"""The decode pass on the GPU: its inputs, its two algorithms' launches and its reference check.

- naive (`gemm_qk`, `softmax`, `gemm_pv`): the prefill's three kernels on q rows per head:
  cuBLAS S = Q Kᵀ/√d into a really allocated (B, H_q, q, N) buffer, our softmax kernel
  (gpu/kernels/softmax.cu) S -> P, cuBLAS O = P V. Each GEMM takes a KV head's whole query
  group as one matrix (Q viewed as B·H_kv matrices of G·q rows), so K and V are read once.
- split_kv (`decode_split`): our fused kernel, gpu/kernels/decode_split.cu
  (gpu/launch/decode_split.py plans its split on this device).

Query head h reads KV head h // G (G = H_q / H_kv): a group's rows are contiguous in Q and O.
"""

from __future__ import annotations

from collections.abc import Callable

import cupy
import numpy as np

from ..algorithms import NAIVE, SPLIT_KV
from ..config import AttentionConfig
from ..errors import UnsupportedConfig
from .cublas_gemm import gemm
from .cuda_arrays import from_float32, to_float32
from .naive_fwd import softmax_launcher


def random_decode_inputs(config: AttentionConfig, seed: int) -> tuple[cupy.ndarray, ...]:
    """Q (B, H_q, q, d), K and V (B, H_kv, N, d): seeded standard-normal data, never zeros."""
    d = config.head_dim
    q_shape = (config.batch, config.heads, config.new_tokens, d)
    kv_shape = (config.batch, config.kv_head_count, config.seq_len, d)
    rng = cupy.random.RandomState(seed)
    return tuple(
        from_float32(rng.standard_normal(shape, dtype=cupy.float32), config.dtype)
        for shape in (q_shape, kv_shape, kv_shape)
    )


def gemm_scores(q: cupy.ndarray, k: cupy.ndarray, s: cupy.ndarray, config: AttentionConfig) -> None:
    """S = Q Kᵀ / √d per KV head and its whole group: row-major S (G·q × N) is column-major
    Sᵀ = K Qᵀ, A = K (d×N column-major) transposed, B = Q (d × G·q column-major)."""
    n, d, rows = config.seq_len, config.head_dim, config.group_size * config.new_tokens
    gemm(True, n, rows, d, config.scale, k, d, n * d, q, d, rows * d, s, n, rows * n,
         config.kv_bh, config.dtype)  # fmt: skip


def gemm_output(p: cupy.ndarray, v: cupy.ndarray, o: cupy.ndarray, config: AttentionConfig) -> None:
    """O = P V per KV head: row-major O (G·q × d) is column-major Oᵀ = Vᵀ Pᵀ, A = V (d×N
    column-major), B = P (N × G·q column-major)."""
    n, d, rows = config.seq_len, config.head_dim, config.group_size * config.new_tokens
    gemm(False, d, rows, n, 1.0, v, d, n * d, p, n, rows * n, o, d, rows * d,
         config.kv_bh, config.dtype)  # fmt: skip


def decode_launches(
    config: AttentionConfig, algorithm: str, a: dict[str, cupy.ndarray]
) -> list[tuple[str, Callable[[], None]]]:
    """Allocate `algorithm`'s buffers into `a` (which holds q, k, v) and return its kernels as
    (name, launch), compiled now."""
    a["o"] = cupy.empty_like(a["q"])
    if algorithm == NAIVE:
        score_shape = (config.batch, config.heads, config.new_tokens, config.seq_len)
        a["s"] = cupy.empty(score_shape, dtype=a["q"].dtype)
        a["p"] = cupy.empty(score_shape, dtype=a["q"].dtype)
        rows = config.bh * config.new_tokens
        launch_softmax = softmax_launcher(config, rows=rows)  # compiled before any timing
        return [
            ("gemm_qk", lambda: gemm_scores(a["q"], a["k"], a["s"], config)),
            ("softmax", lambda: launch_softmax(a["s"], a["p"])),
            ("gemm_pv", lambda: gemm_output(a["p"], a["v"], a["o"], config)),
        ]
    if algorithm != SPLIT_KV:
        raise UnsupportedConfig(f"{algorithm} has no decode pass on the cuda backend", "pass")
    from ..launch import decode_split

    prepared = decode_split.prepare(config)
    a.update(prepared.workspace())
    names = ("q", "k", "v", "o", "part_o", "part_ml", "counters")
    return [("decode_split", lambda: prepared(*(a[x] for x in names)))]


def decode_reference_bytes(config: AttentionConfig) -> int:
    """Device memory the check needs at once: one KV head's fp32 K, V and group scores."""
    n, d, rows = config.seq_len, config.head_dim, config.group_size * config.new_tokens
    return 4 * (2 * n * d + 2 * rows * n + 3 * rows * d)


def max_abs_decode_error(q, k, v, o, config: AttentionConfig) -> float:
    """max |O − O_ref| with O_ref in fp32 from the upcast inputs, one KV head at a time."""
    n, d, rows = config.seq_len, config.head_dim, config.group_size * config.new_tokens
    q3, o3 = (x.reshape(config.kv_bh, rows, d) for x in (q, o))
    k3, v3 = (x.reshape(config.kv_bh, n, d) for x in (k, v))
    scale = np.float32(config.scale)
    worst = 0.0
    for u in range(config.kv_bh):
        s = cupy.matmul(to_float32(q3[u], config.dtype), to_float32(k3[u], config.dtype).T)
        s *= scale
        s -= s.max(axis=1, keepdims=True)
        cupy.exp(s, out=s)
        ref = cupy.matmul(s, to_float32(v3[u], config.dtype)) / s.sum(axis=1, keepdims=True)
        got = to_float32(o3[u], config.dtype)
        worst = max(worst, float(cupy.abs(ref - got).max()))
        del s, ref, got
    return worst
