"""The tensor-core tiled kernel computes exact attention (to fp16/bf16 rounding) for every shape.

GPU tests compare against an fp32 reference computed with CuPy on the upcast inputs, after
poisoning every output with NaN so an element the kernel forgot to write fails the test.
"""

from __future__ import annotations

import zlib

import pytest
from flash_reference import assert_matches_reference, assert_rejects_a_wrong_shape

from gpu.algorithms import TILED_MMA, tile_shape
from gpu.config import AttentionConfig
from gpu.flash_mma import SUPPORTED_HEAD_DIMS, default_launch, supports

SEQ_LENS = (1, 17, 127, 128, 1000, 4096)


# ---------------------------------------------------------------------------------------------
# Capability checks and tile bookkeeping: no GPU needed.


def test_supports_fp16_and_bf16_at_head_dims_64_and_128() -> None:
    for dtype in ("fp16", "bf16"):
        for head_dim in SUPPORTED_HEAD_DIMS:
            assert supports(AttentionConfig(head_dim=head_dim, dtype=dtype)) is None


def test_refuses_other_head_dims_with_a_reason_naming_the_value() -> None:
    reason = supports(AttentionConfig(head_dim=80))
    assert reason is not None and "80" in reason and "64" in reason


def test_refuses_fp32_with_a_reason() -> None:
    reason = supports(AttentionConfig(dtype="fp32"))
    assert reason is not None and "fp32" in reason


def test_launch_tiles_are_the_tiles_the_cost_model_uses() -> None:
    for head_dim in SUPPORTED_HEAD_DIMS:
        config = AttentionConfig(head_dim=head_dim)
        launch = default_launch(head_dim)
        assert (launch.block_m, launch.block_n) == tile_shape(config, TILED_MMA)
        assert launch.block_m == 16 * launch.warps


def test_shared_memory_fits_the_hopper_opt_in_limit() -> None:
    for head_dim in SUPPORTED_HEAD_DIMS:
        assert default_launch(head_dim).smem_bytes <= 227 * 1024


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
    from gpu.flash_mma import flash_forward

    # Several (batch, head) pairs at short N catch head-offset bugs; fewer at long N keep the
    # fp32 reference's N×N matrices small.
    batch, heads = (2, 3) if seq_len <= 1000 else (1, 2)
    config = AttentionConfig(
        seq_len=seq_len, heads=heads, head_dim=head_dim, batch=batch, dtype=dtype, causal=causal
    )
    seed = zlib.crc32(f"{dtype}-{head_dim}-{causal}-{seq_len}".encode())
    assert_matches_reference(flash_forward, config, seed)


@pytest.mark.gpu
def test_rejects_arrays_of_the_wrong_shape() -> None:
    from gpu.flash_mma import flash_forward

    assert_rejects_a_wrong_shape(flash_forward)
