"""The fused tensor-core kernels share one launcher (flash_launch.KernelSpec): each says only what
sets it apart, and refuses what it cannot run in its own words. No GPU needed."""

from __future__ import annotations

import pytest

from gpu.config import AttentionConfig, ceil_div
from gpu.launch import flash_bwd, flash_launch, flash_mma, flash_wgmma, flash_ws

MODULES = (flash_mma, flash_wgmma, flash_ws)
HOPPER = (90, 227 * 1024)
AMPERE = (80, 163 * 1024)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_each_launcher_is_its_specs(module):
    assert module.supports == module.SPEC.supports
    assert module.get_kernel == module.SPEC.get_kernel
    assert module.prepare == module.SPEC.prepare
    assert module.kernel_resources == module.SPEC.kernel_resources
    assert module.SPEC.source == module.SOURCE and module.SPEC.options == module.COMPILE_OPTIONS


def test_the_fused_kernels_compile_into_caches_of_their_own():
    caches = {id(m.SPEC.kernels) for m in (*MODULES, flash_bwd)}
    assert len(caches) == 4


REFUSALS = [
    (flash_mma, AMPERE, {"dtype": "fp32"}, "tensor-core kernel supports fp16 and bf16, not fp32"),
    (flash_mma, AMPERE, {"head_dim": 96},
     "tensor-core kernel supports head_dim 64 and 128, not 96"),
    (flash_mma, (75, 64 * 1024), {},
     "tensor-core kernel needs compute capability 8.0 or newer (this GPU: 7.5)"),
    (flash_mma, (86, 40 * 1024), {"head_dim": 128},
     "tensor-core kernel needs 96.0 KiB of shared memory per block, this GPU allows 40.0 KiB"),
    (flash_mma, None, {}, None),
    (flash_mma, AMPERE, {}, None),
    (flash_wgmma, None, {},
     "Hopper wgmma kernel needs a CUDA GPU of compute capability 9.0 (none found)"),
    (flash_wgmma, AMPERE, {},
     "Hopper wgmma kernel needs compute capability 9.0 (sm_90a: H100/H200), this GPU is 8.0"),
    (flash_wgmma, HOPPER, {"head_dim": 256},
     "Hopper wgmma kernel supports head_dim 64 and 128, not 256"),
    (flash_wgmma, HOPPER, {}, None),
    (flash_wgmma, (90, 100 * 1024), {"head_dim": 128},
     "Hopper wgmma kernel needs 161 KiB of shared memory per block, this GPU allows 100 KiB"),
    (flash_ws, HOPPER, {"head_dim": 96},
     "warp-specialized Hopper kernel supports head_dim 64, 128, 256, not 96"),
    (flash_ws, HOPPER, {"dtype": "fp32"},
     "warp-specialized Hopper kernel supports fp16 and bf16, not fp32"),
    (flash_ws, None, {},
     "warp-specialized Hopper kernel needs a CUDA GPU of compute capability 9.0 (none found)"),
    (flash_ws, AMPERE, {},
     "warp-specialized Hopper kernel needs compute capability 9.0 (sm_90a: H100/H200), "
     "this GPU is 8.0"),
    (flash_ws, (90, 120 * 1024), {}, None),
    (flash_ws, (90, 100 * 1024), {"head_dim": 256},
     "warp-specialized Hopper kernel needs 193 KiB of shared memory per block, "
     "this GPU allows 100 KiB"),
    (flash_ws, HOPPER, {"head_dim": 256, "dtype": "bf16"}, None),
    (flash_bwd, AMPERE, {"dtype": "fp32"}, "fused backward supports fp16 and bf16, not fp32"),
    (flash_bwd, AMPERE, {"head_dim": 256}, "fused backward supports head_dim 64 and 128, not 256"),
    (flash_bwd, (75, 64 * 1024), {},
     "fused backward needs compute capability 8.0 or newer (this GPU: 7.5)"),
    (flash_bwd, (86, 100 * 1024), {"head_dim": 128},
     "fused backward needs 161 KiB of shared memory per block, this GPU allows 100 KiB"),
    (flash_bwd, None, {}, None),
    (flash_bwd, HOPPER, {"head_dim": 128, "dtype": "bf16"}, None),
]  # fmt: skip


@pytest.mark.parametrize(("module", "limits", "shape", "reason"), REFUSALS)
def test_a_kernel_refuses_what_it_cannot_run_naming_why(monkeypatch, module, limits, shape, reason):
    monkeypatch.setattr(flash_launch, "device_limits", lambda: limits)
    assert module.supports(AttentionConfig(**shape)) == reason


def test_prepare_refuses_with_the_same_reason_before_compiling_anything(monkeypatch):
    monkeypatch.setattr(flash_launch, "device_limits", lambda: AMPERE)
    with pytest.raises(ValueError, match=r"compute capability 9\.0"):
        flash_ws.prepare(AttentionConfig())
    assert flash_ws.SPEC.kernels == {}


@pytest.mark.parametrize("module", (flash_mma, flash_wgmma), ids=lambda m: m.__name__)
def test_mma_and_wgmma_run_one_block_per_query_tile_of_each_head_on_a_2d_grid(module):
    config = AttentionConfig(seq_len=1000, heads=3, batch=2)
    launch = module.default_launch(64)
    grid, arguments = module.SPEC.layout(config, launch)
    assert grid == (ceil_div(1000, launch.block_m), 6)
    q, k, v, o, m, l = "qkvoml"
    n, scale = arguments(q, k, v, o, m, l)[6:]
    assert arguments(q, k, v, o, m, l)[:6] == tuple("qkvoml") and int(n) == 1000
    assert float(scale) == pytest.approx(flash_launch.scale_log2(config), rel=1e-6)


def test_the_warp_specialized_kernel_runs_a_1d_grid_of_every_query_tile():
    config = AttentionConfig(seq_len=1000, heads=3, batch=2)
    launch = flash_ws.WsLaunch.from_label("d64-128x2-c3-po-r24")
    grid, _ = flash_ws.SPEC.layout(config, launch)
    assert grid == (ceil_div(1000, launch.block_m) * 6,) == (launch.grid_blocks(config),)


def test_a_persistent_warp_specialized_launch_starts_one_block_per_sm(monkeypatch):
    from gpu.launch import cuda_kernels

    monkeypatch.setattr(
        cuda_kernels, "device_attribute", lambda name: {"MultiProcessorCount": 132}[name]
    )
    launch = flash_ws.default_launch(64)
    assert launch.persistent
    big = AttentionConfig(seq_len=4096, heads=16, batch=4)
    assert flash_ws.SPEC.layout(big, launch)[0] == (132,) and launch.grid_blocks(big) > 132
    small = AttentionConfig(seq_len=1000, heads=3, batch=2)  # fewer tiles than SMs
    assert flash_ws.SPEC.layout(small, launch)[0] == (launch.grid_blocks(small),)
