"""The decode pass in NumPy: q new tokens per head against a KV cache of N tokens, both ways.

- naive (`gemm_qk`, `softmax`, `gemm_pv`): the three kernels of the GPU's naive path. The
  scores S (B·H_q·q·N, in the config dtype) are really written, then P = softmax(S), then
  O = P V. Each KV head meets its whole query group at once, so K and V are read once per head.
- split_kv (`decode_split`): the fused kernel's algorithm. The cache of each (batch, KV head)
  is cut into the ranges of gpu.launch.decode_split.split_plan (on the default GPU, so the CPU
  cuts exactly where the GPU kernel would); each range gives a partial (m_s, l_s, O_s) in fp32
  and no score ever leaves the range's working buffers; the partials are then merged with the
  online-softmax algebra: M = max m_s, w_s = l_s · e^(m_s − M), O = Σ w_s O_s / Σ w_s.

Query head h reads KV head h // G (G = H_q / H_kv), so a group's rows are contiguous:
Q viewed as (B·H_kv, G·q, d).
"""

from __future__ import annotations

import time

import numpy as np

from ..config import AttentionConfig
from ..model.decode_cost import plan_for
from .backend import CancelHook, check_cancel
from .numpy_dtypes import numpy_dtype

Timed = tuple[np.ndarray, list[tuple[str, float]]]
#: Query rows the float64 reference scores at once (bounds its N-long temporaries).
REFERENCE_ROWS = 32


def random_decode_inputs(config: AttentionConfig, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Q (B, H_q, q, d), K and V (B, H_kv, N, d): unit-normal entries in the config dtype."""
    rng = np.random.default_rng(seed)
    dtype = numpy_dtype(config.dtype)
    d = config.head_dim
    q_shape = (config.batch, config.heads, config.new_tokens, d)
    kv_shape = (config.batch, config.kv_head_count, config.seq_len, d)
    return tuple(
        rng.standard_normal(shape, dtype=np.float32).astype(dtype)
        for shape in (q_shape, kv_shape, kv_shape)
    )


def _groups(config: AttentionConfig, q: np.ndarray) -> np.ndarray:
    """Q as (B·H_kv, G·q, d): each KV head's whole query group."""
    return q.reshape(config.kv_bh, config.group_size * config.new_tokens, config.head_dim)


def reference_decode(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, config: AttentionConfig
) -> np.ndarray:
    """float64 decode attention, one (batch, KV head) at a time: the ground truth."""
    n, d = config.seq_len, config.head_dim
    qg = _groups(config, q)
    kf, vf = k.reshape(config.kv_bh, n, d), v.reshape(config.kv_bh, n, d)
    out = np.empty(qg.shape, dtype=np.float64)
    for u in range(config.kv_bh):
        k64, v64 = kf[u].astype(np.float64), vf[u].astype(np.float64)
        for r0 in range(0, qg.shape[1], REFERENCE_ROWS):
            s = qg[u, r0 : r0 + REFERENCE_ROWS].astype(np.float64) @ k64.T * config.scale
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[u, r0 : r0 + REFERENCE_ROWS] = p @ v64
    return out.reshape(q.shape)


def naive_decode(
    config: AttentionConfig,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    cancel: CancelHook | None = None,
) -> Timed:
    """S = Q Kᵀ·scale written whole (the config dtype), P = softmax(S), O = P V."""
    n, d = config.seq_len, config.head_dim
    qg = _groups(config, q)
    kf, vf = k.reshape(config.kv_bh, n, d), v.reshape(config.kv_bh, n, d)
    spent = []

    t0 = time.perf_counter()
    s = np.empty((config.kv_bh, qg.shape[1], n), dtype=q.dtype)  # "HBM": B·H_q·q·N scores
    for u in range(config.kv_bh):
        check_cancel(cancel)
        s[u] = (qg[u].astype(np.float32) @ kf[u].astype(np.float32).T) * config.scale
    spent.append(("gemm_qk", time.perf_counter() - t0))

    t0 = time.perf_counter()
    p = np.empty_like(s)
    for u in range(config.kv_bh):
        check_cancel(cancel)
        rows = s[u].astype(np.float32)
        rows -= rows.max(axis=1, keepdims=True)
        np.exp(rows, out=rows)
        rows /= rows.sum(axis=1, keepdims=True)
        p[u] = rows
    spent.append(("softmax", time.perf_counter() - t0))

    t0 = time.perf_counter()
    o = np.empty(qg.shape, dtype=q.dtype)
    for u in range(config.kv_bh):
        check_cancel(cancel)
        o[u] = p[u].astype(np.float32) @ vf[u].astype(np.float32)
    spent.append(("gemm_pv", time.perf_counter() - t0))
    return o.reshape(q.shape), spent


def split_partials(
    qg: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, keys_per_split: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One (batch, KV head)'s partials: for each range of `keys_per_split` keys, the row max
    m_s and row sum l_s of its scaled scores (natural units) and O_s, its softmax-weighted
    average of V; shapes (splits, rows), (splits, rows), (splits, rows, d), fp32."""
    n = k.shape[0]
    splits = -(-n // keys_per_split)
    rows, d = qg.shape
    q32 = qg.astype(np.float32) * np.float32(scale)
    m = np.empty((splits, rows), np.float32)
    l_sum = np.empty((splits, rows), np.float32)
    o = np.empty((splits, rows, d), np.float32)
    for sp in range(splits):
        k0, k1 = sp * keys_per_split, min(n, (sp + 1) * keys_per_split)
        s = q32 @ k[k0:k1].astype(np.float32).T  # only this range's scores, on "chip"
        m[sp] = s.max(axis=1)
        np.exp(s - m[sp][:, None], out=s)
        l_sum[sp] = s.sum(axis=1)
        o[sp] = (s @ v[k0:k1].astype(np.float32)) / l_sum[sp][:, None]
    return m, l_sum, o


def merge_partials(m: np.ndarray, l_sum: np.ndarray, o: np.ndarray) -> np.ndarray:
    """O = Σ_s w_s O_s / Σ_s w_s with w_s = l_s · e^(m_s − M), M = max_s m_s (per row)."""
    top = m.max(axis=0)
    w = l_sum * np.exp(m - top[None, :])
    return (w[:, :, None] * o).sum(axis=0) / w.sum(axis=0)[:, None]


def split_decode(
    config: AttentionConfig,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    cancel: CancelHook | None = None,
) -> Timed:
    """The split-KV algorithm: partials per key range, merged (module docstring)."""
    n, d = config.seq_len, config.head_dim
    plan = plan_for(config)
    qg = _groups(config, q)
    kf, vf = k.reshape(config.kv_bh, n, d), v.reshape(config.kv_bh, n, d)
    t0 = time.perf_counter()
    o = np.empty(qg.shape, dtype=q.dtype)
    for u in range(config.kv_bh):
        check_cancel(cancel)
        m, l_sum, parts = split_partials(qg[u], kf[u], vf[u], config.scale, plan.keys_per_split)
        o[u] = merge_partials(m, l_sum, parts)
    return o.reshape(q.shape), [("decode_split", time.perf_counter() - t0)]


def decode_temp_bytes(config: AttentionConfig, algorithm: str) -> int:
    """Bytes a CPU decode holds beyond the model's peak: fp32 copies of one KV head's K and V
    and of its query group's scores (naive), or of one key range and one head's partials."""
    n, d = config.seq_len, config.head_dim
    rows = config.group_size * config.new_tokens
    if algorithm == "naive":
        return 4 * (2 * n * d + 2 * rows * n + rows * d)
    plan = plan_for(config)
    keys = min(n, plan.keys_per_split)
    return 4 * (2 * keys * d + rows * keys + plan.splits * rows * (d + 3) + rows * d)
