"""What the tensor-core kernel tests share: 16-bit inputs, an fp32 reference, and the check that
a kernel wrote every output (NaN-poisoned first) within tolerance of that reference."""

from __future__ import annotations

from collections.abc import Callable

from gpu.config import AttentionConfig

#: Max abs error allowed vs the fp32 reference with unit-normal inputs (outputs are O(1)).
TOLERANCE = {"fp16": 2e-3, "bf16": 1e-2}


def bf16_bits(x32):  # float32 -> bf16 bit patterns (uint16), round to nearest even
    import cupy as cp

    u = x32.view(cp.uint32)
    return ((u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16).astype(cp.uint16)


def from_bf16_bits(b):
    import cupy as cp

    return (b.astype(cp.uint32) << 16).view(cp.float32)


def random_inputs(config: AttentionConfig, seed: int):
    """Fresh unit-normal q, k, v in the config's dtype, and their exact float32 upcasts."""
    import cupy as cp

    rng = cp.random.default_rng(seed)
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    stored, upcast = [], []
    for _ in range(3):
        x = rng.standard_normal(shape, dtype=cp.float32)
        if config.dtype == "fp16":
            h = x.astype(cp.float16)
            stored.append(h)
            upcast.append(h.astype(cp.float32))
        else:
            b = bf16_bits(x)
            stored.append(b)
            upcast.append(from_bf16_bits(b))
    return stored, upcast


def fp32_reference(q, k, v, causal: bool):
    """fp32 attention: O, row max m (natural units of scaled scores) and row sum l."""
    import cupy as cp

    n, d = q.shape[-2], q.shape[-1]
    s = cp.matmul(q, k.transpose(0, 1, 3, 2)) * cp.float32(d**-0.5)
    if causal:
        s = cp.where(cp.triu(cp.ones((n, n), dtype=bool), 1), cp.float32(-cp.inf), s)
    m = s.max(axis=-1)
    p = cp.exp(s - m[..., None])
    l = p.sum(axis=-1)
    return cp.matmul(p, v) / l[..., None], m, l


def assert_matches_reference(flash_forward: Callable, config: AttentionConfig, seed: int) -> None:
    """Run `flash_forward` on NaN-poisoned outputs and compare O, m and l with the reference."""
    import cupy as cp

    (q, k, v), (q32, k32, v32) = random_inputs(config, seed)
    stats_shape = (config.batch, config.heads, config.seq_len)
    o = cp.empty_like(q)
    o.fill(cp.nan if config.dtype == "fp16" else 0x7FC0)  # NaN poison in either storage
    m = cp.full(stats_shape, cp.nan, dtype=cp.float32)
    l = cp.full(stats_shape, cp.nan, dtype=cp.float32)
    flash_forward(q, k, v, o, m, l, config)
    cp.cuda.Device().synchronize()

    out = o.astype(cp.float32) if config.dtype == "fp16" else from_bf16_bits(o)
    o_ref, m_ref, l_ref = fp32_reference(q32, k32, v32, config.causal)
    assert int(cp.isnan(out).sum()) == 0, "some outputs were never written"
    assert int(cp.isnan(m).sum()) == 0 and int(cp.isnan(l).sum()) == 0, "m or l not written"
    err = float(cp.abs(out - o_ref).max())
    assert err <= TOLERANCE[config.dtype], f"max |O - O_ref| = {err:.2e}"
    m_err = float(cp.abs(m - m_ref).max())
    assert m_err <= 1e-3, f"max |m - m_ref| = {m_err:.2e}"
    l_rel = float((cp.abs(l - l_ref) / l_ref).max())
    assert l_rel <= 1e-3, f"max relative l error = {l_rel:.2e}"


def assert_rejects_a_wrong_shape(flash_forward: Callable) -> None:
    import cupy as cp
    import pytest

    config = AttentionConfig(seq_len=64, heads=2, head_dim=64)
    q = cp.zeros((1, 2, 64, 64), dtype=cp.float16)
    bad = cp.zeros((1, 2, 64, 32), dtype=cp.float16)
    stats = cp.zeros((1, 2, 64), dtype=cp.float32)
    with pytest.raises(ValueError, match="shape"):
        flash_forward(q, q, q, bad, stats, stats, config)
