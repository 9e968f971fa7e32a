"""NumPy backward passes: naive (stored P, dP and dS materialized) and tiled with recompute.

Both take the forward's inputs and what it saved, and dO, all in the config dtype with shape
(B, h, N, d), and return dQ, dK, dV in the config dtype with the time of each kernel under the
names gpu.model.backward_cost gives them.

- naive reads the P its forward kept (B·h·N² elements) and really allocates dP = dO Vᵀ and
  dS = P ∘ (dP − rowsum(dP ∘ P)), B·h·N² each, then runs dQ = dS K/√d and dK = dSᵀ Q/√d,
  like cuBLAS GEMMs around our softmax backward on a GPU.
- tiled keeps only O and the row statistics m and l from its forward (its preprocess folds
  them into one logsumexp per row, beside D_i = rowsum(dO_i ∘ O_i)). One (batch, head) at a time,
  each K/V tile j is loaded once and held (a thread block's shared memory on a GPU) while the
  query tiles i stream past it with their dO_i, logsumexp_i and D_i = rowsum(dO_i ∘ O_i): S_ij
  and P_ij are recomputed, dV_j and dK_j accumulate in the block, and dQ_i is added to an fp32
  accumulator (a GPU's atomics). No N×N array exists; the working set is a few tiles, in fp32
  buffers allocated once per run (NumPy has no fast fp16 matrix multiply).
- tiled with `config.deterministic` runs what the GPU's deterministic backward runs: the K/V
  pass without dQ and no accumulator, then a dQ pass (`flash_bwd_dq`) that holds one query
  tile's Q_i, dO_i and dQ_i while the key tiles stream in a fixed order, rebuilding S_ij, P_ij
  and dP_ij once more for dS_ij. The same kernel list and the same extra work as on the GPU.

Both check the cancel hook between tiles or row chunks. `reference_backward` is the float64
ground truth the CPU backend's check compares with.
"""

from __future__ import annotations

import time

import numpy as np

from ..algorithms import TILED, backward_tile_shape, dq_pass_tile_shape
from ..config import AttentionConfig, ceil_div
from .backend import CancelHook, check_cancel
from .numpy_dtypes import numpy_dtype

#: Query rows per row chunk of the naive kernels and the reference (bounds their temporaries).
ROW_CHUNK = 1024

Grads = tuple[np.ndarray, np.ndarray, np.ndarray]
Timed = tuple[Grads, list[tuple[str, float]]]


def random_grad_output(config: AttentionConfig, seed: int = 0) -> np.ndarray:
    """dO: unit-normal entries in the config dtype (a loss's gradient), shape (B, h, N, d)."""
    rng = np.random.default_rng(seed + 7919)  # apart from Q, K, V's stream
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    return rng.standard_normal(shape, dtype=np.float32).astype(numpy_dtype(config.dtype))


def reference_backward(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, do: np.ndarray, causal: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """float64 O, dQ, dK, dV, row chunk by row chunk (dK, dV summed over the chunks)."""
    b, h, n, d = q.shape
    scale = d**-0.5
    out = [np.empty((b, h, n, d), dtype=np.float64) for _ in range(4)]
    o_ref, dq_ref, dk_ref, dv_ref = out
    cols = np.arange(n)[None, :]
    for bi in range(b):
        for hi in range(h):
            q64, k64, v64, do64 = (x[bi, hi].astype(np.float64) for x in (q, k, v, do))
            dk = np.zeros((n, d))
            dv = np.zeros((n, d))
            for r0 in range(0, n, ROW_CHUNK):
                r1 = min(r0 + ROW_CHUNK, n)
                s = q64[r0:r1] @ k64.T * scale
                if causal:
                    s[np.arange(r0, r1)[:, None] < cols] = -np.inf
                s -= s.max(axis=1, keepdims=True)
                p = np.exp(s)
                p /= p.sum(axis=1, keepdims=True)
                o_ref[bi, hi, r0:r1] = p @ v64
                dv += p.T @ do64[r0:r1]
                dp = do64[r0:r1] @ v64.T
                ds = p * (dp - (dp * p).sum(axis=1, keepdims=True))
                dq_ref[bi, hi, r0:r1] = ds @ k64 * scale
                dk += ds.T @ q64[r0:r1] * scale
            dk_ref[bi, hi] = dk
            dv_ref[bi, hi] = dv
    return o_ref, dq_ref, dk_ref, dv_ref


# --------------------------------------------------------------------------------------------
# Naive: five kernels over stored N×N matrices


def naive_backward(
    config: AttentionConfig,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    p: np.ndarray,
    do: np.ndarray,
    *,
    cancel: CancelHook | None = None,
) -> Timed:
    """dQ, dK, dV from the stored P (B, h, N, N) and dO; dP and dS are allocated in full."""
    b, h, n, d = q.shape
    dtype = q.dtype
    scale = config.scale
    spent: list[tuple[str, float]] = []
    chunks = [(r0, min(r0 + ROW_CHUNK, n)) for r0 in range(0, n, ROW_CHUNK)]

    # Kernel 1: dV = Pᵀ dO, summed over row chunks of P in fp32.
    t0 = time.perf_counter()
    dv = np.empty_like(q)
    for bi in range(b):
        for hi in range(h):
            check_cancel(cancel)
            acc = np.zeros((n, d), np.float32)
            for r0, r1 in chunks:
                acc += p[bi, hi, r0:r1].astype(np.float32).T @ do[bi, hi, r0:r1].astype(np.float32)
            dv[bi, hi] = acc
    spent.append(("bwd_dV_gemm", time.perf_counter() - t0))

    # Kernel 2: dP = dO Vᵀ, written in full (B·h·N² elements).
    t0 = time.perf_counter()
    dp = np.empty((b, h, n, n), dtype=dtype)
    for bi in range(b):
        for hi in range(h):
            check_cancel(cancel)
            vt = v[bi, hi].astype(np.float32).T
            for r0, r1 in chunks:
                dp[bi, hi, r0:r1] = do[bi, hi, r0:r1].astype(np.float32) @ vt
    spent.append(("bwd_dP_gemm", time.perf_counter() - t0))

    # Kernel 3 (softmax backward): dS = P ∘ (dP − rowsum(dP ∘ P)), row by row.
    t0 = time.perf_counter()
    ds = np.empty((b, h, n, n), dtype=dtype)
    for bi in range(b):
        for hi in range(h):
            check_cancel(cancel)
            for r0, r1 in chunks:
                p_rows = p[bi, hi, r0:r1].astype(np.float32)
                dp_rows = dp[bi, hi, r0:r1].astype(np.float32)
                row_dot = np.einsum("ij,ij->i", dp_rows, p_rows)
                dp_rows -= row_dot[:, None]
                dp_rows *= p_rows
                ds[bi, hi, r0:r1] = dp_rows
    spent.append(("softmax_bwd", time.perf_counter() - t0))

    # Kernel 4: dQ = dS K / √d.
    t0 = time.perf_counter()
    dq = np.empty_like(q)
    for bi in range(b):
        for hi in range(h):
            check_cancel(cancel)
            k32 = k[bi, hi].astype(np.float32)
            for r0, r1 in chunks:
                dq[bi, hi, r0:r1] = (ds[bi, hi, r0:r1].astype(np.float32) @ k32) * scale
    spent.append(("bwd_dQ_gemm", time.perf_counter() - t0))

    # Kernel 5: dK = dSᵀ Q / √d, summed over row chunks of dS in fp32.
    t0 = time.perf_counter()
    dk = np.empty_like(q)
    for bi in range(b):
        for hi in range(h):
            check_cancel(cancel)
            acc = np.zeros((n, d), np.float32)
            for r0, r1 in chunks:
                acc += ds[bi, hi, r0:r1].astype(np.float32).T @ q[bi, hi, r0:r1].astype(np.float32)
            acc *= scale
            dk[bi, hi] = acc
    spent.append(("bwd_dK_gemm", time.perf_counter() - t0))
    return (dq, dk, dv), spent


def naive_backward_temp_bytes(config: AttentionConfig) -> int:
    """The naive backward's fp32 temporaries beyond the model: two row chunks of P/dP/dS
    (ROW_CHUNK × N), a row chunk of dO or Q, an fp32 upcast of K or V and the N×d accumulator."""
    n, d = config.seq_len, config.head_dim
    rows = min(ROW_CHUNK, n)
    return 4 * (2 * rows * n + rows * d + 2 * n * d)


# --------------------------------------------------------------------------------------------
# Tiled: K/V tile resident, Q/dO tiles streaming, S and P recomputed, dQ accumulated


class _BackwardTiles:
    """The fp32 working set of one K/V block, allocated once per run and reused: K_j, V_j and
    their gradients, one streamed Q_i, dO_i, and the S/P, dP/dS tiles between them."""

    def __init__(self, bm: int, bn: int, d: int) -> None:
        f32 = np.float32
        self.k, self.v, self.dk, self.dv = np.empty((4, bn, d), f32)
        self.q, self.do, self.dq = np.empty((3, bm, d), f32)
        self.p, self.dp = np.empty((2, bm, bn), f32)
        self.kv_grad = np.empty((bn, d), f32)  # one product before it is added to dK_j or dV_j


def tiled_backward_buffer_bytes(config: AttentionConfig, algorithm: str = TILED) -> int:
    """Bytes of `_BackwardTiles` and of one head's fp32 upcasts of dO and O in the preprocess
    (and the dQ pass's one product tile when deterministic): all the tiled backward holds
    beyond the model's peak."""
    bm, bn = backward_tile_shape(config, algorithm)
    n, d = config.seq_len, config.head_dim
    dq_pass = bm * d if config.deterministic else 0
    return 4 * (5 * bn * d + 3 * bm * d + 2 * bm * bn + 2 * n * d + dq_pass)


def flash_backward(
    config: AttentionConfig,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    o: np.ndarray,
    m: np.ndarray,
    l_sum: np.ndarray,
    do: np.ndarray,
    *,
    cancel: CancelHook | None = None,
) -> Timed:
    """FlashAttention-2's backward, tile by tile. `m`, `l_sum` (B, h, N) fp32: the forward's
    row max and row sum of exp of the scaled scores."""
    b, h, n, d = q.shape
    bm, bn = backward_tile_shape(config, TILED)
    scale = np.float32(config.scale)
    bh = b * h
    qf, kf, vf, of, dof = (x.reshape(bh, n, d) for x in (q, k, v, o, do))
    spent: list[tuple[str, float]] = []

    # Kernel 1 (preprocess): logsumexp_i = m_i + log l_i, D_i = rowsum(dO_i ∘ O_i), and the
    # fp32 dQ accumulator cleared (none when deterministic: the dQ pass owns dQ_i).
    atomic = not config.deterministic
    t0 = time.perf_counter()
    lsef = np.log(l_sum.reshape(bh, n))
    lsef += m.reshape(bh, n)
    big_d = np.empty((bh, n), np.float32)
    for head in range(bh):
        check_cancel(cancel)
        np.einsum(
            "ij,ij->i", dof[head].astype(np.float32), of[head].astype(np.float32), out=big_d[head]
        )
    dq_acc = np.zeros((bh, n, d), np.float32) if atomic else None
    spent.append(("flash_bwd_preprocess", time.perf_counter() - t0))

    # Kernel 2: one block per K/V tile j; the query tiles stream past it.
    t0 = time.perf_counter()
    dk_out = np.empty((bh, n, d), dtype=q.dtype)
    dv_out = np.empty((bh, n, d), dtype=q.dtype)
    t = _BackwardTiles(bm, bn, d)
    for head in range(bh):
        for j0 in range(0, n, bn):
            check_cancel(cancel)
            j1 = min(j0 + bn, n)
            c = j1 - j0
            k_j, v_j, dk_j, dv_j = t.k[:c], t.v[:c], t.dk[:c], t.dv[:c]
            k_j[...] = kf[head, j0:j1]  # load K_j, V_j once: they stay for the whole loop
            v_j[...] = vf[head, j0:j1]
            dk_j.fill(0.0)
            dv_j.fill(0.0)
            # With a causal mask, query tiles that end before key j0 never see this tile.
            first = (j0 // bm) * bm if config.causal else 0
            for i0 in range(first, n, bm):
                i1 = min(i0 + bm, n)
                r = i1 - i0
                q_i, do_i, dq_i = t.q[:r], t.do[:r], t.dq[:r]
                p, dp = t.p[:r, :c], t.dp[:r, :c]
                q_i[...] = qf[head, i0:i1]  # stream Q_i, dO_i (and lse_i, D_i below)
                do_i[...] = dof[head, i0:i1]
                # Recompute S_ij = Q_i K_jᵀ / √d and P_ij = exp(S_ij − lse_i): no P was kept.
                np.matmul(q_i, k_j.T, out=p)
                p *= scale
                p -= lsef[head, i0:i1, None]
                if config.causal and j1 - 1 > i0:
                    p[np.arange(i0, i1)[:, None] < np.arange(j0, j1)[None, :]] = -np.inf
                np.exp(p, out=p)
                grad = t.kv_grad[:c]
                np.matmul(p.T, do_i, out=grad)
                dv_j += grad  # dV_j += P_ijᵀ dO_i
                np.matmul(do_i, v_j.T, out=dp)  # dP_ij = dO_i V_jᵀ
                dp -= big_d[head, i0:i1, None]
                dp *= p  # dS_ij = P_ij ∘ (dP_ij − D_i), in place of dP_ij
                np.matmul(dp.T, q_i, out=grad)
                dk_j += grad  # dK_j += dS_ijᵀ Q_i (the 1/√d applied once at the end)
                if dq_acc is not None:
                    np.matmul(dp, k_j, out=dq_i)
                    dq_i *= scale
                    dq_acc[head, i0:i1] += dq_i  # dQ_i += dS_ij K_j / √d (atomics on a GPU)
            dk_j *= scale
            dk_out[head, j0:j1] = dk_j  # store dK_j, dV_j: written once
            dv_out[head, j0:j1] = dv_j
    spent.append(("flash_bwd", time.perf_counter() - t0))

    t0 = time.perf_counter()
    if dq_acc is not None:
        # Kernel 3: the fp32 accumulator converted to the input dtype.
        dq_out = dq_acc.astype(q.dtype)
        spent.append(("flash_bwd_dq_convert", time.perf_counter() - t0))
    else:
        # Kernel 3, deterministic: the dQ pass.
        dq_out = _dq_pass(config, t, qf, kf, vf, dof, lsef, big_d, cancel)
        spent.append(("flash_bwd_dq", time.perf_counter() - t0))
    shape = (b, h, n, d)
    return (dq_out.reshape(shape), dk_out.reshape(shape), dv_out.reshape(shape)), spent


def _dq_pass(
    config: AttentionConfig,
    t: _BackwardTiles,
    qf: np.ndarray,
    kf: np.ndarray,
    vf: np.ndarray,
    dof: np.ndarray,
    lsef: np.ndarray,
    big_d: np.ndarray,
    cancel: CancelHook | None,
) -> np.ndarray:
    """The deterministic dQ (B·h, N, d) in the input dtype: one block per query tile i holds
    Q_i, dO_i, logsumexp_i, D_i and dQ_i while the key tiles j stream in order; S_ij, P_ij and
    dP_ij are rebuilt (no one kept them) for dS_ij, and dQ_i = Σ_j dS_ij K_j / √d is summed on
    chip and written once."""
    bh, n, d = qf.shape
    bm, bn = dq_pass_tile_shape(config, TILED)  # the K/V pass's tiles: `t` fits them
    scale = np.float32(config.scale)
    dq_out = np.empty((bh, n, d), dtype=qf.dtype)
    product = np.empty((bm, d), np.float32)  # dS_ij K_j before it is added to dQ_i
    for head in range(bh):
        for i0 in range(0, n, bm):
            check_cancel(cancel)
            i1 = min(i0 + bm, n)
            r = i1 - i0
            q_i, do_i, dq_i = t.q[:r], t.do[:r], t.dq[:r]
            q_i[...] = qf[head, i0:i1]  # load Q_i, dO_i (and lse_i, D_i) once
            do_i[...] = dof[head, i0:i1]
            dq_i.fill(0.0)
            # With a causal mask, key tiles that start after the tile's last query are skipped.
            last = i1 if config.causal else n
            for j0 in range(0, last, bn):
                j1 = min(j0 + bn, n)
                c = j1 - j0
                k_j, v_j = t.k[:c], t.v[:c]
                p, dp, grad = t.p[:r, :c], t.dp[:r, :c], product[:r]
                k_j[...] = kf[head, j0:j1]  # stream K_j, V_j
                v_j[...] = vf[head, j0:j1]
                np.matmul(q_i, k_j.T, out=p)  # S_ij again
                p *= scale
                p -= lsef[head, i0:i1, None]
                if config.causal and j1 - 1 > i0:
                    p[np.arange(i0, i1)[:, None] < np.arange(j0, j1)[None, :]] = -np.inf
                np.exp(p, out=p)  # P_ij again
                np.matmul(do_i, v_j.T, out=dp)  # dP_ij again
                dp -= big_d[head, i0:i1, None]
                dp *= p  # dS_ij
                np.matmul(dp, k_j, out=grad)
                dq_i += grad  # dQ_i += dS_ij K_j, key tiles in order: the same sum every run
            dq_i *= scale
            dq_out[head, i0:i1] = dq_i  # store dQ_i: written once
    return dq_out


def key_tiles(config: AttentionConfig) -> int:
    """K/V blocks per (batch, head) of the tiled backward."""
    return ceil_div(config.seq_len, backward_tile_shape(config, TILED)[1])
