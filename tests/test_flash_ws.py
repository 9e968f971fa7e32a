"""The warp-specialized Hopper kernel: offered only where it can run, its variants fit the
hardware, its tiles are the ones the cost model and the schedule use, and a broken copy of its
source reports NVRTC's log while the other kernels keep running.

Its exactness for every shape is tested with the other fused kernels (test_flash_kernels.py).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from gpu.algorithms import ALGORITHMS, TILED_WS, tile_shape
from gpu.config import AttentionConfig
from gpu.launch import flash_launch, flash_ws
from gpu.launch.flash_ws import (
    SUPPORTED_HEAD_DIMS,
    WS_DEFAULTS,
    WsLaunch,
    all_variants,
    check_launch,
    default_launch,
    supports,
)
from gpu.model.costmodel import algorithm_cost
from gpu.model.schedule import build_schedule

HOPPER = (90, 227 * 1024)  # (compute capability, opt-in shared memory) of an H100/H200
#: Raw rows of the d=128 trace build recorded on an H200 (B=1, h=16, N=4096; variant
#: d128-128x2-c2-po-r24, 330 rows a block): blocks 0 and 1 of the full run, blocks 0 (the
#: longest, 32 key tiles) and 511 (one key tile) of the causal one.
TRACE_FIXTURE = Path(__file__).parent / "fixtures" / "ws_trace_h200_rows.npz"


# ---------------------------------------------------------------------------------------------
# Capability checks and variant bookkeeping: no GPU needed.


def test_supports_fp16_and_bf16_at_head_dims_64_128_and_256_on_sm90(monkeypatch) -> None:
    monkeypatch.setattr(flash_launch, "device_limits", lambda: HOPPER)
    for dtype in ("fp16", "bf16"):
        for head_dim in (64, 128, 256):
            assert supports(AttentionConfig(head_dim=head_dim, dtype=dtype)) is None


def test_refuses_other_gpus_machines_without_one_and_other_shapes(monkeypatch) -> None:
    monkeypatch.setattr(flash_launch, "device_limits", lambda: (80, 163 * 1024))
    reason = supports(AttentionConfig())
    assert reason is not None and "9.0" in reason and "8.0" in reason
    monkeypatch.setattr(flash_launch, "device_limits", lambda: None)
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
    assert any(v.block_n != 128 for v in variants) and any(v.producer_regs != 24 for v in variants)
    assert len({v.label for v in variants}) == len(variants)


def test_the_candidate_timing_compares_the_defaults_with_the_baselines_and_new_knobs() -> None:
    timed = flash_ws.candidate_variants()
    labels = {v.label for v in timed}
    assert set(flash_ws.BASELINES) <= labels
    assert set(flash_ws.CANDIDATES) <= labels
    assert {default_launch(d) for d in SUPPORTED_HEAD_DIMS} <= set(timed)
    assert set(timed) <= set(all_variants())
    for d in (64, 128):
        here = [v for v in timed if v.head_dim == d]
        assert any(v.pingpong for v in here) and any(not v.pingpong for v in here), d
        assert any(v.persistent for v in here) and any(not v.persistent for v in here), d


def test_labels_name_every_template_parameter_and_read_back() -> None:
    for v in all_variants():
        assert WsLaunch.from_label(v.label) == v
    v = WsLaunch(64, 128, 3, 2, pingpong=True, overlap=False)
    assert v.label == "d64-128x2-c3-p-r24"
    assert WsLaunch.from_label("d256-64x2-c2-none-r40") == WsLaunch(
        256, 64, 2, 2, pingpong=False, overlap=False, producer_regs=40
    )
    for bad in ("d64-128x2-c3-po", "d64-128x2-c3-xo-r24", "d64-128x2-c3-po-r24-x"):
        with pytest.raises(ValueError):
            WsLaunch.from_label(bad)


def test_the_defaults_are_labels_of_variants_of_their_own_head_dim() -> None:
    assert set(WS_DEFAULTS) == set(SUPPORTED_HEAD_DIMS)
    for d, label in WS_DEFAULTS.items():
        assert default_launch(d).label == label and default_launch(d).head_dim == d


def test_template_name_lists_every_parameter_in_kernel_order() -> None:
    v = WsLaunch(128, 64, 3, 4, pingpong=False, overlap=True, producer_regs=40)
    assert v.template_name(True, False) == (
        "flash_ws_fwd<128, 64, 3, 4, false, true, 40, 0, true, false>"
    )
    assert (v.block_m, v.threads) == (192, 512)
    w = replace(v, pingpong=True, producer_regs=24)
    assert w.template_name(False, True) == (
        "flash_ws_fwd<128, 64, 3, 4, true, true, 24, 0, false, true>"
    )


def test_a_launch_runs_one_block_per_query_tile_of_every_head() -> None:
    config = AttentionConfig(seq_len=4096, heads=16, head_dim=128, batch=4)
    launch = default_launch(128)
    assert launch.grid_blocks(config) == 4096 // launch.block_m * 64
    small = AttentionConfig(seq_len=300, heads=2, head_dim=128)
    assert launch.grid_blocks(small) == 6  # a ragged last query tile is a block too


def test_a_persistent_launch_starts_one_block_per_sm_and_walks_every_tile() -> None:
    config = AttentionConfig(seq_len=4096, heads=16, head_dim=128, batch=4)
    launch = WsLaunch.from_label("d128-128x2-c2-po-r24-persist")
    assert launch.persistent and launch.label == "d128-128x2-c2-po-r24-persist"
    assert launch.grid_blocks(config) == 4096 // 128 * 64  # the tiles it walks
    assert launch.launch_blocks(config, 132) == 132
    tiny = AttentionConfig(seq_len=300, heads=2, head_dim=128)
    assert launch.launch_blocks(tiny, 132) == 6  # never more blocks than tiles
    per_tile = replace(launch, persistent=False)
    assert per_tile.launch_blocks(config, 132) == per_tile.grid_blocks(config)
    assert per_tile.template_name(False, False) == (
        "flash_ws_fwd<128, 128, 2, 2, true, true, 24, 0, false, false>"
    )
    assert launch.template_name(False, False) == (
        "flash_ws_fwd<128, 128, 2, 2, true, true, 24, 2, false, false>"
    )
    one_q = WsLaunch.from_label("d256-64x2-c2-po-r24-persist1")
    assert (one_q.persistent, one_q.q_buffers, one_q.label) == (
        True,
        1,
        "d256-64x2-c2-po-r24-persist1",
    )
    assert one_q.template_name(True, True).endswith(", 24, 1, true, true>")


def test_a_persistent_launch_holds_two_q_tiles_and_two_more_barrier_pairs() -> None:
    per_tile = WsLaunch.from_label("d128-128x2-c2-po-r24")
    persistent = replace(per_tile, persistent=True)
    q_tile = per_tile.block_m * per_tile.head_dim * 2
    assert persistent.smem_bytes - per_tile.smem_bytes == q_tile + 8 * 3 + 8  # + 2 tile ids
    assert (per_tile.barriers, persistent.barriers) == (1 + 4 * 2, 4 + 4 * 2)
    one_q = replace(per_tile, persistent=True, persistent_q_buffers=1)
    assert one_q.smem_bytes - per_tile.smem_bytes == 8 * 1 + 8  # q_empty, 2 tile ids
    assert one_q.barriers == 2 + 4 * 2


def test_a_variant_too_large_for_shared_memory_is_refused() -> None:
    too_big = WsLaunch.from_label("d256-64x2-c2-po-r24-persist")  # two 64 KiB Q tiles + ring
    assert too_big.smem_bytes > 227 * 1024
    with pytest.raises(ValueError, match="shared memory"):
        check_launch(too_big)
    check_launch(WsLaunch.from_label("d256-64x2-c2-po-r24-persist1"))  # one Q tile fits
    with pytest.raises(ValueError, match="1 or 2 Q tiles"):
        check_launch(replace(too_big, persistent_q_buffers=3))


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

    from gpu.launch import flash_mma
    from gpu.launch.cuda_kernels import KERNEL_DIR, KernelCompileError, load_module

    broken = tmp_path / "flash_ws_broken.cu"
    shutil.copy(KERNEL_DIR / flash_ws.SOURCE, broken)
    text = broken.read_text()
    assert "q0 = q_tile * BR;" in text
    broken.write_text(text.replace("q0 = q_tile * BR;", "q0 = q_tile * BR", 1))  # no semicolon
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


PERSISTENT = [v for v in all_variants() if v.persistent]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", PERSISTENT, ids=lambda v: v.label)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_a_persistent_block_computes_every_tile_it_walks(variant: WsLaunch, causal: bool) -> None:
    """More tiles than SMs, a ragged last tile and an odd head count: each block walks 7-11
    query tiles through both Q buffers and many rounds of the K/V ring. Two launches with the
    same arguments: the scheduler's counters must be back at zero for the second."""
    import cupy as cp
    from flash_reference import assert_matches_reference

    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the warp-specialized kernel runs on sm_90 only")
    for dtype in ("fp16", "bf16"):
        config = AttentionConfig(
            seq_len=4097, heads=23, batch=2, head_dim=variant.head_dim, dtype=dtype, causal=causal
        )
        assert variant.grid_blocks(config) > 7 * 132  # 1,012 tiles at d = 64, 1,518 at 128

        def forward(q, k, v, o, m, l, config, variant=variant):
            prepared = flash_ws.prepare(config, variant)
            arguments = prepared.arguments(q, k, v, o, m, l)
            prepared.launch_with(arguments)
            o.view(cp.uint16).fill(0xFFFF)  # NaN in fp16 and bf16: every row must be written again
            m.fill(float("nan"))
            l.fill(float("nan"))
            prepared.launch_with(arguments)  # the same counters, reset by the first launch

        assert_matches_reference(forward, config, seed=variant.head_dim + causal)


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


def _expected_phases(role: str, tiles: int) -> list[tuple[str, int]]:
    """(phase, j) of one role's rows for a block that visits `tiles` key tiles, in the order
    the kernel writes them (j of the Q, store and end rows is the query tile, left out: -1)."""
    if role == "producer":
        out = [("load_Q_i", -1), ("load_K_j", 0)]
        for j in range(tiles):
            if j + 1 < tiles:
                out.append(("load_K_j", j + 1))
            out.append(("load_V_j", j))
        return [*out, ("end", -1)]
    out = [("load_Q_i", -1)]
    for j in range(tiles):
        out += [("wait_K_j", j), ("gemm_issue", j), ("online_softmax", j), ("wait_PV", j)]
    return [*out, ("gemm_issue", tiles), ("store_O_i", -1), ("end", -1)]


def _check_block_rows(decoded: list[tuple], consumers: int) -> None:
    """Every role of every block wrote its rows in the kernel's phase order, in time order."""
    roles = ("producer", *(f"consumer {c}" for c in range(consumers)))
    for block in sorted({r[0] for r in decoded}):
        mine = [r for r in decoded if r[0] == block]
        assert {r[2] for r in mine} == set(roles), block
        assert len({r[1] for r in mine}) == 1, block  # one SM ran the whole block
        tiles = sum(1 for r in mine if r[2] == "producer" and r[3] == "load_V_j")
        for role in roles:
            rows = [r for r in mine if r[2] == role]
            got = [(r[3], r[4] if r[3] not in ("load_Q_i", "store_O_i", "end") else -1)
                   for r in rows]  # fmt: skip
            assert got == _expected_phases(role, tiles), (block, role)
            times = [r[5] for r in rows]
            assert times == sorted(times), (block, role)
            query_tiles = {r[4] for r in rows if r[3] in ("load_Q_i", "store_O_i", "end")}
            assert len(query_tiles) == 1, (block, role)


def test_the_h200_trace_rows_decode_to_every_role_in_the_kernel_s_phase_order() -> None:
    import numpy as np

    data = np.load(TRACE_FIXTURE)
    for name, blocks, tiles in (("full", (0, 1), (32, 32)), ("causal", (0, 511), (32, 1))):
        rows = data[name]
        assert rows.shape == (2 * 330, 5)
        decoded = flash_ws.decode_trace_rows(rows)
        assert sorted({r[0] for r in decoded}) == list(blocks)
        _check_block_rows(decoded, consumers=2)
        for block, t in zip(blocks, tiles, strict=True):
            loads = [r for r in decoded if r[0] == block and r[3] == "load_V_j"]
            assert len(loads) == t, (name, block)
        # Causal block 0 does the last query tile (longest first); block 511 the first one.
        if name == "causal":
            q_rows = {r[0]: r[4] for r in decoded if r[2] == "producer" and r[3] == "load_Q_i"}
            assert q_rows == {0: 31, 511: 0}
        # Ping-pong: the consumers' turns on the tensor cores alternate, 0, 1, 0, 1, ...
        turns = sorted(
            (r[5], r[2] == "consumer 1")
            for r in decoded
            if r[0] == blocks[0] and r[3] == "gemm_issue"
        )
        assert [who for _, who in turns] == [False, True] * (len(turns) // 2), name


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
@pytest.mark.parametrize(
    "label", [WS_DEFAULTS[128], "d128-128x2-c2-po-r24-persist"], ids=["default", "persistent"]
)
def test_the_trace_build_records_every_role_in_order_and_computes_the_same_output(
    causal: bool, label: str
) -> None:
    import cupy as cp

    from gpu.launch.attention_reference import random_inputs

    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the warp-specialized kernel runs on sm_90 only")
    # 8 query tiles × 80 heads: more blocks than SMs, so every SM runs several in turn.
    config = AttentionConfig(seq_len=1000, heads=40, batch=2, head_dim=128, causal=causal)
    launch = WsLaunch.from_label(label)
    (q, k, v), _ = random_inputs(config, seed=5)
    stats = (config.batch, config.heads, config.seq_len)
    outs = []
    for options in ((), (flash_ws.TRACE_OPTION,)):
        prepared = flash_ws.prepare(config, launch, extra_options=options)
        o = cp.empty_like(q)
        m, l = cp.empty(stats, cp.float32), cp.empty(stats, cp.float32)
        if options:
            buffer = flash_ws.trace_buffer(config, prepared, launch)
            prepared(q, k, v, o, m, l, buffer)
        else:
            prepared(q, k, v, o, m, l)
        outs.append(o)
    assert bool((outs[0].view(cp.uint16) == outs[1].view(cp.uint16)).all())
    rows = flash_ws.decode_trace_rows(cp.asnumpy(buffer))
    assert {r[0] for r in rows} == set(range(launch.grid_blocks(config)))
    _check_block_rows(rows, launch.consumers)
