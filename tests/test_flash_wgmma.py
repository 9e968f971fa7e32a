"""The Hopper wgmma attention kernel computes exact attention (to fp16/bf16 rounding) for every
shape, and is offered only where it can run (sm_90).

The GPU tests (exactness against the fp32 reference for every shape, the backend offering it
on sm_90 only) are shared by all fused kernels: tests/test_flash_kernels.py.
"""

from __future__ import annotations

from gpu.algorithms import ALGORITHMS, TILED_WGMMA, tile_shape
from gpu.config import AttentionConfig
from gpu.launch import flash_launch
from gpu.launch.flash_wgmma import SUPPORTED_HEAD_DIMS, default_launch, supports
from gpu.model.costmodel import algorithm_cost
from gpu.model.schedule import build_schedule

HOPPER = (90, 227 * 1024)  # (compute capability, opt-in shared memory) of an H100/H200


# ---------------------------------------------------------------------------------------------
# Capability checks and tile bookkeeping: no GPU needed.


def test_supports_fp16_and_bf16_at_head_dims_64_and_128_on_sm90(monkeypatch) -> None:
    monkeypatch.setattr(flash_launch, "device_limits", lambda: HOPPER)
    for dtype in ("fp16", "bf16"):
        for head_dim in SUPPORTED_HEAD_DIMS:
            assert supports(AttentionConfig(head_dim=head_dim, dtype=dtype)) is None


def test_refuses_other_gpus_and_machines_without_one(monkeypatch) -> None:
    monkeypatch.setattr(flash_launch, "device_limits", lambda: (80, 163 * 1024))
    reason = supports(AttentionConfig())
    assert reason is not None and "9.0" in reason and "8.0" in reason
    monkeypatch.setattr(flash_launch, "device_limits", lambda: None)
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
