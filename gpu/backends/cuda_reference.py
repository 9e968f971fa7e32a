"""The reference checks of a CUDA run: O, and a step's or backward's dQ, dK, dV, against fp32
computed with plain CuPy ops on the upcast inputs, one head and one block of rows at a time so
that a long sequence's check fits beside the run.
"""

from __future__ import annotations

import cupy
import numpy as np

from ..config import STEP, AttentionConfig
from .cuda_arrays import to_float32

#: The reference check works on row blocks whose fp32 scores take at most this many bytes.
REFERENCE_CHUNK_BYTES = 256 << 20


def reference_attention(q, k, v, config: AttentionConfig):
    """(O, m, l) in fp32 computed with plain CuPy ops, the whole N×N at once (small sizes)."""
    n = config.seq_len
    qf, kf, vf = (to_float32(x, config.dtype) for x in (q, k, v))
    s = cupy.matmul(qf, kf.swapaxes(-1, -2)) * np.float32(config.scale)
    if config.causal:
        mask = cupy.arange(n)[None, :] > cupy.arange(n)[:, None]
        s = cupy.where(mask, -cupy.inf, s)
    m = s.max(axis=-1)
    e = cupy.exp(s - m[..., None])
    l = e.sum(axis=-1)
    o = cupy.matmul(e, vf) / l[..., None]
    return o.astype(cupy.float32), m.astype(cupy.float32), l.astype(cupy.float32)


def reference_bytes(config: AttentionConfig) -> int:
    """Device memory the chunked reference check needs at once."""
    n, d = config.seq_len, config.head_dim
    rows = _reference_rows(n)
    return 4 * (4 * n * d + 4 * rows * n + 2 * rows * d)


def _reference_rows(n: int) -> int:
    return max(1, min(n, REFERENCE_CHUNK_BYTES // (4 * n)))


def max_abs_error(q, k, v, o, config: AttentionConfig) -> float:
    """max |O - O_ref| with O_ref computed in fp32, one head and one block of rows at a time."""
    n, d = config.seq_len, config.head_dim
    shape = (config.bh, n, d)
    q3, k3, v3, o3 = (x.reshape(shape) for x in (q, k, v, o))
    rows = _reference_rows(n)
    scale = np.float32(config.scale)
    worst = 0.0
    for bh in range(config.bh):
        qf = to_float32(q3[bh], config.dtype)
        kf_t = to_float32(k3[bh], config.dtype).T
        vf = to_float32(v3[bh], config.dtype)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            s = cupy.matmul(qf[r0:r1], kf_t) * scale
            if config.causal:
                mask = cupy.arange(n)[None, :] > cupy.arange(r0, r1)[:, None]
                s = cupy.where(mask, -cupy.inf, s)
            s -= s.max(axis=1, keepdims=True)
            cupy.exp(s, out=s)
            ref = cupy.matmul(s, vf) / s.sum(axis=1, keepdims=True)
            got = to_float32(o3[bh, r0:r1], config.dtype)
            worst = max(worst, float(cupy.abs(ref - got).max()))
            del s, ref, got
    return worst


def reference_grad_bytes(config: AttentionConfig) -> int:
    """Device memory the gradient check needs at once (one head's fp32 N×N matrices)."""
    n, d = config.seq_len, config.head_dim
    return 4 * (3 * n * n + 12 * n * d)


def max_abs_grad_error(a: dict[str, cupy.ndarray], config: AttentionConfig) -> float:
    """max |ours − fp32 reference| over dQ, dK, dV (and O for a step, whose forward is timed),
    one (batch, head) at a time: the backward of softmax(QKᵀ/√d)V on the upcast inputs."""
    n, d = config.seq_len, config.head_dim
    shape = (config.bh, n, d)
    names = ("q", "k", "v", "do", "o", "dq", "dk", "dv")
    x = {name: a[name].reshape(shape) for name in names}
    scale = np.float32(config.scale)
    worst = 0.0
    for bh in range(config.bh):
        qf, kf, vf, dof = (to_float32(x[name][bh], config.dtype) for name in ("q", "k", "v", "do"))
        s = cupy.matmul(qf, kf.T) * scale
        if config.causal:
            s = cupy.where(cupy.arange(n)[None, :] > cupy.arange(n)[:, None], -cupy.inf, s)
        s -= s.max(axis=1, keepdims=True)
        cupy.exp(s, out=s)
        s /= s.sum(axis=1, keepdims=True)  # s now holds P
        refs = {"dv": cupy.matmul(s.T, dof)}
        if config.pass_ == STEP:
            refs["o"] = cupy.matmul(s, vf)
        dp = cupy.matmul(dof, vf.T)
        dp -= (s * dp).sum(axis=1, keepdims=True)
        dp *= s  # dp now holds dS
        refs["dq"] = cupy.matmul(dp, kf) * scale
        refs["dk"] = cupy.matmul(dp.T, qf) * scale
        del s, dp
        for name, ref in refs.items():
            got = to_float32(x[name][bh], config.dtype)
            worst = max(worst, float(cupy.abs(ref - got).max()))
    return worst
