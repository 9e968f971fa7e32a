"""The fused backward's launch bookkeeping: what it accepts, and what it asks of the GPU.

No GPU needed; the exactness of the kernels themselves is tests/test_backward_gpu.py.
"""

from __future__ import annotations

from gpu.config import AttentionConfig
from gpu.launch.flash_bwd import (
    STAT_ROW_PAD,
    SUPPORTED_HEAD_DIMS,
    BwdLaunch,
    backward_tile_shape,
    default_dq_launch,
    default_launch,
    padded_rows,
    supports,
)


def test_supports_fp16_and_bf16_at_head_dims_64_and_128() -> None:
    for dtype in ("fp16", "bf16"):
        for head_dim in SUPPORTED_HEAD_DIMS:
            assert supports(AttentionConfig(head_dim=head_dim, dtype=dtype)) is None


def test_refuses_fp32_and_other_head_dims_with_a_reason_naming_the_value() -> None:
    assert "fp32" in (supports(AttentionConfig(dtype="fp32")) or "")
    reason = supports(AttentionConfig(head_dim=80)) or ""
    assert "80" in reason and "64" in reason


def test_one_warp_owns_16_keys_and_the_tiles_are_the_ones_the_model_reads() -> None:
    for head_dim in SUPPORTED_HEAD_DIMS:
        launch = default_launch(head_dim)
        assert launch.block_n == 16 * launch.warps
        assert backward_tile_shape(head_dim) == (launch.block_n, launch.block_m)
        assert STAT_ROW_PAD % launch.block_m == 0
        assert default_dq_launch(head_dim).block_m == 16 * default_dq_launch(head_dim).warps


def test_the_cost_model_and_the_animation_read_the_launch_tiles() -> None:
    from gpu.algorithms import TILED_MMA
    from gpu.algorithms import backward_tile_shape as model_tiles

    for head_dim in SUPPORTED_HEAD_DIMS:
        launch = default_launch(head_dim)
        config = AttentionConfig(head_dim=head_dim, pass_="step")
        assert model_tiles(config, TILED_MMA) == (launch.block_m, launch.block_n)


def test_shared_memory_fits_the_hopper_opt_in_limit() -> None:
    for head_dim in SUPPORTED_HEAD_DIMS:
        assert default_launch(head_dim).smem_bytes <= 227 * 1024
        assert default_dq_launch(head_dim).smem_bytes <= 227 * 1024


def test_shared_memory_counts_kv_two_query_stages_ds_and_the_row_statistics() -> None:
    kv, q_do, ds, stats = 2 * 128 * 64 * 2, 4 * 64 * 64 * 2, 128 * 64 * 2, 4 * 64 * 4
    assert BwdLaunch(64, 128, 64, ds_stages=1).smem_bytes == kv + q_do + ds + stats
    assert BwdLaunch(64, 128, 64, ds_stages=2).smem_bytes == kv + q_do + 2 * ds + stats


def test_statistics_rows_are_padded_to_whole_query_tiles() -> None:
    assert padded_rows(1) == STAT_ROW_PAD
    assert padded_rows(4097) == 33 * STAT_ROW_PAD
    assert padded_rows(4096) == 4096


def test_template_names_carry_the_dq_mode() -> None:
    launch = default_launch(64)
    stages = launch.ds_stages
    assert launch.template_name(True, False, True).endswith(f"true, false, true, {stages}>")
    assert launch.template_name(False, True, False).endswith(f"false, true, false, {stages}>")
