"""The Hopper wgmma attention kernel computes exact attention (to fp16/bf16 rounding) for every
shape, and is offered only where it can run (sm_90).

GPU tests compare against an fp32 reference computed with CuPy on the upcast inputs, after
poisoning every output with NaN so an element the kernel forgot to write fails the test. They
skip on GPUs other than sm_90, where `supports` refuses the kernel.
"""

from __future__ import annotations

import zlib

import pytest

from gpu import flash_wgmma
from gpu.algorithms import ALGORITHMS, TILED_WGMMA, tile_shape
from gpu.config import AttentionConfig
from gpu.costmodel import algorithm_cost
from gpu.flash_wgmma import SUPPORTED_HEAD_DIMS, default_launch, supports
from gpu.schedule import build_schedule

SEQ_LENS = (1, 17, 127, 128, 1000, 4096)
#: Max abs error allowed vs the fp32 reference with unit-normal inputs (outputs are O(1)).
TOLERANCE = {"fp16": 2e-3, "bf16": 1e-2}
HOPPER = (90, 227 * 1024)  # (compute capability, opt-in shared memory) of an H100/H200


# ---------------------------------------------------------------------------------------------
# Capability checks and tile bookkeeping: no GPU needed.


def test_supports_fp16_and_bf16_at_head_dims_64_and_128_on_sm90(monkeypatch) -> None:
    monkeypatch.setattr(flash_wgmma, "device_limits", lambda: HOPPER)
    for dtype in ("fp16", "bf16"):
        for head_dim in SUPPORTED_HEAD_DIMS:
            assert supports(AttentionConfig(head_dim=head_dim, dtype=dtype)) is None


def test_refuses_other_gpus_and_machines_without_one(monkeypatch) -> None:
    monkeypatch.setattr(flash_wgmma, "device_limits", lambda: (80, 163 * 1024))
    reason = supports(AttentionConfig())
    assert reason is not None and "9.0" in reason and "8.0" in reason
    monkeypatch.setattr(flash_wgmma, "device_limits", lambda: None)
    reason = supports(AttentionConfig())
    assert reason is not None and "9.0" in reason


def test_refuses_other_head_dims_and_fp32_with_a_reason_naming_the_value() -> None:
    reason = supports(AttentionConfig(head_dim=80))
    assert reason is not None and "80" in reason and "64" in reason
    reason = supports(AttentionConfig(dtype="fp32"))
    assert reason is not None and "fp32" in reason


def test_launch_tiles_are_the_tiles_the_cost_model_and_schedule_use() -> None:
    assert TILED_WGMMA in ALGORITHMS
    for head_dim in SUPPORTED_HEAD_DIMS:
        config = AttentionConfig(head_dim=head_dim, seq_len=4096)
        launch = default_launch(head_dim)
        assert (launch.block_m, launch.block_n) == tile_shape(config, TILED_WGMMA)
        cost = algorithm_cost(config, TILED_WGMMA)
        assert cost.flops > 0 and cost.hbm_bytes > 0
        assert build_schedule(config, TILED_WGMMA).algorithm == TILED_WGMMA


def test_shared_memory_fits_the_hopper_opt_in_limit() -> None:
    for head_dim in SUPPORTED_HEAD_DIMS:
        assert default_launch(head_dim).smem_bytes <= HOPPER[1] - 1024  # 1 KiB reserved


# ---------------------------------------------------------------------------------------------
# On the GPU.


def _bf16_bits(x32):  # float32 -> bf16 bit patterns (uint16), round to nearest even
    import cupy as cp

    u = x32.view(cp.uint32)
    return ((u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16).astype(cp.uint16)


def _from_bf16_bits(b):
    import cupy as cp

    return (b.astype(cp.uint32) << 16).view(cp.float32)


def _inputs(config: AttentionConfig, seed: int):
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
            b = _bf16_bits(x)
            stored.append(b)
            upcast.append(_from_bf16_bits(b))
    return stored, upcast


def _reference(q, k, v, causal: bool):
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


@pytest.mark.gpu
@pytest.mark.parametrize("seq_len", SEQ_LENS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", SUPPORTED_HEAD_DIMS)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_matches_fp32_reference_and_writes_every_output(
    dtype: str, head_dim: int, causal: bool, seq_len: int
) -> None:
    import cupy as cp

    from gpu.flash_wgmma import flash_forward

    # Several (batch, head) pairs at short N catch head-offset bugs; fewer at long N keep the
    # fp32 reference's N×N matrices small.
    batch, heads = (2, 3) if seq_len <= 1000 else (1, 2)
    config = AttentionConfig(
        seq_len=seq_len, heads=heads, head_dim=head_dim, batch=batch, dtype=dtype, causal=causal
    )
    reason = supports(config)
    if reason is not None:
        # A skip must never hide a Hopper GPU that the kernel failed to recognise.
        assert cp.cuda.Device().compute_capability != "90", reason
        pytest.skip(reason)
    seed = zlib.crc32(f"wgmma-{dtype}-{head_dim}-{causal}-{seq_len}".encode())
    (q, k, v), (q32, k32, v32) = _inputs(config, seed)

    o = cp.empty_like(q)
    o.fill(cp.nan if dtype == "fp16" else 0x7FC0)  # NaN poison in either storage
    m = cp.full((batch, heads, seq_len), cp.nan, dtype=cp.float32)
    l = cp.full((batch, heads, seq_len), cp.nan, dtype=cp.float32)
    flash_forward(q, k, v, o, m, l, config)
    cp.cuda.Device().synchronize()

    out = o.astype(cp.float32) if dtype == "fp16" else _from_bf16_bits(o)
    o_ref, m_ref, l_ref = _reference(q32, k32, v32, causal)
    assert int(cp.isnan(out).sum()) == 0, "some outputs were never written"
    assert int(cp.isnan(m).sum()) == 0 and int(cp.isnan(l).sum()) == 0, "m or l not written"
    err = float(cp.abs(out - o_ref).max())
    assert err <= TOLERANCE[dtype], f"max |O - O_ref| = {err:.2e}"
    m_err = float(cp.abs(m - m_ref).max())
    assert m_err <= 1e-3, f"max |m - m_ref| = {m_err:.2e}"
    l_rel = float((cp.abs(l - l_ref) / l_ref).max())
    assert l_rel <= 1e-3, f"max relative l error = {l_rel:.2e}"


@pytest.mark.gpu
def test_the_cuda_backend_offers_it_on_sm90_only() -> None:
    from gpu.backend import create_backend

    offered = TILED_WGMMA in create_backend("cuda").algorithms()
    assert offered == (supports(AttentionConfig()) is None)


@pytest.mark.gpu
def test_rejects_arrays_of_the_wrong_shape() -> None:
    import cupy as cp

    from gpu.flash_wgmma import flash_forward

    config = AttentionConfig(seq_len=64, heads=2, head_dim=64)
    if supports(config) is not None:
        pytest.skip(supports(config))
    q = cp.zeros((1, 2, 64, 64), dtype=cp.float16)
    bad = cp.zeros((1, 2, 64, 32), dtype=cp.float16)
    stats = cp.zeros((1, 2, 64), dtype=cp.float32)
    with pytest.raises(ValueError, match="shape"):
        flash_forward(q, q, q, bad, stats, stats, config)
