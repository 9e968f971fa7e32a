"""The warp-specialized Hopper kernel: offered only where it can run, its variants fit the
hardware, its tiles are the ones the cost model and the schedule use, and a broken copy of its
source reports NVRTC's log while the other kernels keep running.

Its exactness for every shape is tested with the other fused kernels (test_flash_kernels.py).
"""

from __future__ import annotations

import shutil

import pytest

from gpu import flash_ws
from gpu.algorithms import ALGORITHMS, TILED_WS, tile_shape
from gpu.config import AttentionConfig
from gpu.costmodel import algorithm_cost
from gpu.flash_ws import SUPPORTED_HEAD_DIMS, WsLaunch, all_variants, default_launch, supports
from gpu.schedule import build_schedule

HOPPER = (90, 227 * 1024)  # (compute capability, opt-in shared memory) of an H100/H200


# ---------------------------------------------------------------------------------------------
# Capability checks and variant bookkeeping: no GPU needed.


def test_supports_fp16_and_bf16_at_head_dims_64_128_and_256_on_sm90(monkeypatch) -> None:
    monkeypatch.setattr(flash_ws, "device_limits", lambda: HOPPER)
    for dtype in ("fp16", "bf16"):
        for head_dim in (64, 128, 256):
            assert supports(AttentionConfig(head_dim=head_dim, dtype=dtype)) is None


def test_refuses_other_gpus_machines_without_one_and_other_shapes(monkeypatch) -> None:
    monkeypatch.setattr(flash_ws, "device_limits", lambda: (80, 163 * 1024))
    reason = supports(AttentionConfig())
    assert reason is not None and "9.0" in reason and "8.0" in reason
    monkeypatch.setattr(flash_ws, "device_limits", lambda: None)
    assert "9.0" in (supports(AttentionConfig()) or "")
    assert "96" in (supports(AttentionConfig(head_dim=96)) or "")
    assert "fp32" in (supports(AttentionConfig(dtype="fp32")) or "")


def test_every_variant_fits_shared_memory_and_the_register_file() -> None:
    for v in all_variants():
        flash_ws.check_launch(v)
        assert v.smem_bytes <= HOPPER[1] - 1024, v  # 1 KiB per block is reserved
        # setmaxnreg: the producer's and the consumers' registers fit the SM's 64 Ki.
        assert 128 * (v.producer_regs + v.consumers * v.consumer_regs) <= 65536, v
        assert v.consumer_regs % 8 == 0 and v.consumer_regs <= 240


def test_the_candidates_cover_every_head_dim_and_each_knob() -> None:
    variants = all_variants()
    assert {v.head_dim for v in variants} == set(SUPPORTED_HEAD_DIMS)
    assert variants[: len(SUPPORTED_HEAD_DIMS)] == tuple(
        default_launch(d) for d in SUPPORTED_HEAD_DIMS
    )
    assert any(not v.pingpong for v in variants) and any(not v.overlap for v in variants)
    assert any(v.consumers == 3 for v in variants) and any(v.stages == 3 for v in variants)
    assert len({v.label for v in variants}) == len(variants)


def test_template_name_lists_every_parameter_in_kernel_order() -> None:
    v = WsLaunch(128, 64, 3, 4, pingpong=False, overlap=True, producer_regs=40)
    assert v.template_name(True, False) == (
        "flash_ws_fwd<128, 64, 3, 4, false, true, 40, true, false>"
    )
    assert (v.block_m, v.threads) == (192, 512)


def test_launch_tiles_are_the_tiles_the_cost_model_and_schedule_use() -> None:
    assert TILED_WS in ALGORITHMS and ALGORITHMS[TILED_WS].fused
    for head_dim in SUPPORTED_HEAD_DIMS:
        config = AttentionConfig(head_dim=head_dim, seq_len=4096)
        launch = default_launch(head_dim)
        assert (launch.block_m, launch.block_n) == tile_shape(config, TILED_WS)
        cost = algorithm_cost(config, TILED_WS)
        assert cost.flops > 0 and cost.hbm_bytes > 0
        assert build_schedule(config, TILED_WS).algorithm == TILED_WS


def test_causal_blocks_of_a_few_heads_share_l2_and_full_blocks_go_head_by_head() -> None:
    long = AttentionConfig(seq_len=16384, heads=16, head_dim=128, causal=True)
    short = AttentionConfig(seq_len=512, heads=32, head_dim=64, batch=32, causal=True)
    assert 1 <= flash_ws.group_heads(long) < long.bh
    assert flash_ws.group_heads(short) > 1
    assert flash_ws.group_heads(short.with_(causal=False)) == 1


def test_trace_rows_per_block_cover_the_producer_and_every_consumer() -> None:
    config = AttentionConfig(seq_len=1000, head_dim=128)
    launch = default_launch(128)
    tiles = -(-1000 // launch.block_n)
    segments = flash_ws.trace_segments(config, launch)
    assert segments == (2 * tiles + 2, *([4 * tiles + 4] * launch.consumers))
    assert flash_ws.trace_rows_per_block(config, launch) == sum(segments)


# ---------------------------------------------------------------------------------------------
# On the GPU.


@pytest.mark.gpu
def test_a_broken_copy_reports_nvrtc_s_log_and_the_other_kernels_keep_running(tmp_path):
    import cupy as cp
    from flash_reference import assert_matches_reference

    from gpu import flash_mma
    from gpu.cuda_kernels import KERNEL_DIR, KernelCompileError, load_module

    broken = tmp_path / "flash_ws_broken.cu"
    shutil.copy(KERNEL_DIR / flash_ws.SOURCE, broken)
    text = broken.read_text()
    assert "const int q0 = q_tile * BR;" in text
    broken.write_text(text.replace("const int q0 = q_tile * BR;", "const int q0 = q_tile * BR", 1))
    name = default_launch(64).template_name(False, False)
    with pytest.raises(KernelCompileError) as info:
        load_module(broken, (name,), flash_ws.COMPILE_OPTIONS)
    assert "flash_ws_broken.cu" in str(info.value)
    assert "error" in info.value.log.lower() and info.value.log in str(info.value)
    # The shipped kernels still compile and compute (the ws one too, where it runs).
    config = AttentionConfig(seq_len=300, heads=2, head_dim=64)
    assert_matches_reference(flash_mma.flash_forward, config, seed=7)
    if cp.cuda.Device().compute_capability == "90":
        assert_matches_reference(flash_ws.flash_forward, config, seed=8)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", all_variants(), ids=lambda v: v.label)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_every_variant_matches_the_fp32_reference(variant: WsLaunch, causal: bool) -> None:
    import cupy as cp
    from flash_reference import assert_matches_reference

    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the warp-specialized kernel runs on sm_90 only")
    for seq_len, dtype in ((1000, "fp16"), (1537, "bf16")):
        config = AttentionConfig(
            seq_len=seq_len, heads=3, head_dim=variant.head_dim, dtype=dtype, causal=causal
        )

        def forward(q, k, v, o, m, l, config, variant=variant):
            flash_ws.launch_forward(q, k, v, o, m, l, config, variant)

        assert_matches_reference(forward, config, seed=seq_len + variant.head_dim)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [128, 256])
def test_causal_blocks_cover_every_head_when_the_last_l2_group_is_short(head_dim: int) -> None:
    import cupy as cp
    from flash_reference import assert_matches_reference

    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the warp-specialized kernel runs on sm_90 only")
    config = AttentionConfig(seq_len=4096, heads=23, head_dim=head_dim, causal=True)
    assert config.bh % flash_ws.group_heads(config) != 0  # a short last group
    assert_matches_reference(flash_ws.flash_forward, config, seed=head_dim)


def test_trace_rows_decode_to_roles_and_phases() -> None:
    import numpy as np

    rows = np.full((6, 5), -1, dtype=np.int64)
    rows[0] = (3, 7, 0 * 256 + 1, 2, 1000)  # producer: K_2 issued
    rows[1] = (3, 7, 2 * 256 + 7, 2, 1500)  # consumer 1: softmax of S_2 starts
    decoded = flash_ws.decode_trace_rows(rows)
    assert decoded == [
        (3, 7, "producer", "load_K_j", 2, 1000),
        (3, 7, "consumer 1", "online_softmax", 2, 1500),
    ]


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_trace_build_records_every_role_in_order_and_computes_the_same_output(causal):
    import cupy as cp

    from gpu.attention_reference import random_inputs

    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the warp-specialized kernel runs on sm_90 only")
    config = AttentionConfig(seq_len=1000, heads=3, head_dim=128, causal=causal)
    (q, k, v), _ = random_inputs(config, seed=5)
    stats = (config.batch, config.heads, config.seq_len)
    outs = []
    for options in ((), (flash_ws.TRACE_OPTION,)):
        prepared = flash_ws.prepare(config, extra_options=options)
        o = cp.empty_like(q)
        m, l = cp.empty(stats, cp.float32), cp.empty(stats, cp.float32)
        if options:
            buffer = flash_ws.trace_buffer(config, prepared)
            prepared(q, k, v, o, m, l, buffer)
        else:
            prepared(q, k, v, o, m, l)
        outs.append(o)
    assert bool((outs[0].view(cp.uint16) == outs[1].view(cp.uint16)).all())
    rows = flash_ws.decode_trace_rows(cp.asnumpy(buffer))
    launch = flash_ws.default_launch(128)
    roles = {"producer", *(f"consumer {c}" for c in range(launch.consumers))}
    for block in range(prepared.blocks):
        mine = [r for r in rows if r[0] == block]
        assert {r[2] for r in mine} == roles, block
        for role in roles:
            phases = [r[3] for r in mine if r[2] == role]
            times = [r[5] for r in mine if r[2] == role]
            assert phases[0] == "load_Q_i" and phases[-1] == "end", (block, role)
            assert times == sorted(times), (block, role)
