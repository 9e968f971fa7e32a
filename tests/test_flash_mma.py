"""The tensor-core tiled kernel computes exact attention (to fp16/bf16 rounding) for every shape.

The GPU tests (exactness against the fp32 reference for every shape) are shared by all fused
kernels: tests/test_flash_kernels.py.
"""

from __future__ import annotations

from gpu.algorithms import TILED_MMA, tile_shape
from gpu.config import AttentionConfig
from gpu.launch.flash_mma import SUPPORTED_HEAD_DIMS, default_launch, supports

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
