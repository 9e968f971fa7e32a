"""The Hopper wgmma attention kernel computes exact attention (to fp16/bf16 rounding) for every
shape, and is offered only where it can run (sm_90).

GPU tests compare against an fp32 reference computed with CuPy on the upcast inputs, after
poisoning every output with NaN so an element the kernel forgot to write fails the test. They
skip on GPUs other than sm_90, where `supports` refuses the kernel.
"""

from __future__ import annotations

import zlib

import pytest
from flash_reference import assert_matches_reference, assert_rejects_a_wrong_shape

from gpu import flash_wgmma
from gpu.algorithms import ALGORITHMS, TILED_WGMMA, tile_shape
from gpu.config import AttentionConfig
from gpu.costmodel import algorithm_cost
from gpu.flash_wgmma import SUPPORTED_HEAD_DIMS, default_launch, supports
from gpu.schedule import build_schedule

SEQ_LENS = (1, 17, 127, 128, 1000, 4096)
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
    assert_matches_reference(flash_forward, config, seed)


@pytest.mark.gpu
def test_the_cuda_backend_offers_it_on_sm90_only() -> None:
    from gpu.backends import create_backend

    offered = TILED_WGMMA in create_backend("cuda").algorithms()
    assert offered == (supports(AttentionConfig()) is None)


@pytest.mark.gpu
def test_rejects_arrays_of_the_wrong_shape() -> None:
    from gpu.flash_wgmma import flash_forward

    config = AttentionConfig(seq_len=64, heads=2, head_dim=64)
    if supports(config) is not None:
        pytest.skip(supports(config))
    assert_rejects_a_wrong_shape(flash_forward)
