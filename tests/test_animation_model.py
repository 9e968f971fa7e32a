"""The animation's model of the hardware: each kernel's real on-chip layout and blocks per SM,
clocks from measurements, and the warp-specialized kernel's roles (modeled and traced)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.state.animation.chip import REGISTERS, SMEM, chip_layout
from app.state.animation.clock import MEASURED, MODELED, clock_for
from app.state.animation.lane import build_lanes
from app.state.animation.player import Player
from app.state.animation.warp_roles import (
    GEMM,
    PV,
    SOFTMAX,
    modeled_roles,
    overlap_share,
    traced_roles,
    ws_launch,
)
from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA, TILED_WS
from gpu.config import AttentionConfig
from gpu.files.recording import load_recording
from gpu.launch import flash_mma, flash_readable, flash_wgmma, flash_ws
from gpu.model.costmodel import GPUS, algorithm_cost
from gpu.model.schedule import build_schedule
from gpu.results import KernelTime, RunResult

H200 = GPUS["H200 SXM 141 GB"]
RTX4090 = GPUS["RTX 4090 24 GB"]
ROOT = Path(__file__).resolve().parents[1]


def _flash(config: AttentionConfig, algorithm: str):
    return build_schedule(config, algorithm).kernels[0]


def _layout(config: AttentionConfig, algorithm: str, gpu=H200):
    return chip_layout(config, algorithm, _flash(config, algorithm), gpu)


# --------------------------------------------------------------------------------------------
# On-chip layouts and occupancy


def test_the_readable_kernels_sram_box_is_its_fp32_padded_carve_up_86016_bytes_at_64x64():
    config = AttentionConfig(seq_len=4096, head_dim=64, block_m=64, block_n=64)
    lay = _layout(config, TILED)
    assert lay.smem_bytes == flash_readable.smem_bytes(config) == 86_016
    assert sum(s.bytes for s in lay.smem_slots) == 86_016
    sizes = {s.name: s.bytes for s in lay.smem_slots}
    assert sizes["Q_i"] == 64 * 68 * 4  # fp32, rows padded by 4 floats
    assert sizes["S_ij"] == 64 * 65 * 4  # +1 float per row


@pytest.mark.parametrize(
    "config",
    [
        AttentionConfig(seq_len=1000, head_dim=40, block_m=32, block_n=16),
        AttentionConfig(seq_len=512, head_dim=128, block_m=16, block_n=64, dtype="fp32"),
        AttentionConfig(seq_len=777, head_dim=160, block_m=128, block_n=8),
    ],
    ids=lambda c: c.label(),
)
def test_every_readable_layout_adds_up_to_the_kernels_shared_memory(config):
    assert sum(s.bytes for s in _layout(config, TILED).smem_slots) == flash_readable.smem_bytes(
        config
    )


def test_the_readable_kernel_gets_two_blocks_per_sm_on_the_h200_from_smem_and_registers():
    occ = _layout(AttentionConfig(seq_len=4096), TILED).occupancy
    assert occ is not None
    assert occ.blocks == 2 and set(occ.binding) == {"shared memory", "registers"}
    assert occ.registers == 117 and "ptxas" in occ.register_source
    # d = 128 with the same 64×64 tiles: 151,552 B each, one block
    occ128 = _layout(AttentionConfig(seq_len=4096, head_dim=128), TILED).occupancy
    assert occ128.blocks == 1 and occ128.binding == ("shared memory",)
    # on a GPU with 100 KiB per SM only one 86,016 B block fits; registers are only capped there
    occ_ada = _layout(AttentionConfig(seq_len=4096), TILED, RTX4090).occupancy
    assert occ_ada.blocks == 1 and "launch_bounds" in occ_ada.register_source


@pytest.mark.parametrize("head_dim", [64, 128])
def test_tensor_core_kernels_keep_a_two_stage_ring_in_smem_and_s_o_in_registers(head_dim):
    config = AttentionConfig(seq_len=4096, head_dim=head_dim)
    for algo, launch in (
        (TILED_MMA, flash_mma.default_launch(head_dim)),
        (TILED_WGMMA, flash_wgmma.default_launch(head_dim)),
    ):
        lay = _layout(config, algo)
        assert sum(s.bytes for s in lay.smem_slots) == launch.smem_bytes == lay.smem_bytes
        ring = [s for s in lay.smem_slots if s.stages > 1]
        assert sorted((s.matrix, s.stage) for s in ring) == [("K", 0), ("K", 1), ("V", 0), ("V", 1)]
        regs = {s.name for s in lay.register_slots}
        assert {"S_ij", "O_i", "P_ij"} <= regs
        assert all(s.place == REGISTERS for s in lay.register_slots)
        assert lay.occupancy.blocks == 1 and "registers" in lay.occupancy.binding


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_the_warp_specialized_layout_is_its_launchs_shared_memory(head_dim):
    config = AttentionConfig(seq_len=4096, head_dim=head_dim)
    lay = _layout(config, TILED_WS)
    launch = flash_ws.default_launch(head_dim)
    assert ws_launch(config) == launch
    assert lay.smem_bytes == launch.smem_bytes
    assert sum(s.bytes for s in lay.smem_slots) == launch.smem_bytes  # Q, the ring, mbarriers
    assert sum(1 for s in lay.smem_slots if s.stages > 1) == 2 * launch.stages
    assert lay.threads == launch.threads and lay.occupancy.blocks == 1
    # 384 threads at d = 128 and 256, 512 at d = 64 (three consumer warpgroups)
    assert f"__launch_bounds__({launch.threads}, 1)" in lay.occupancy.register_source
    assert lay.occupancy.registers * launch.threads <= 65536  # one block fills the register file


def test_naive_kernels_keep_the_models_tiles_and_claim_no_occupancy():
    config = AttentionConfig(seq_len=1024)
    for kernel in build_schedule(config, NAIVE).kernels:
        lay = chip_layout(config, NAIVE, kernel, H200)
        assert sum(s.bytes for s in lay.slots) == kernel.sram_bytes
        assert lay.occupancy is None


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_naives_softmax_stages_its_row_in_the_input_dtype_as_the_kernel_does(dtype):
    """softmax.cu stages a row of S in n · sizeof(T) bytes of shared memory (8.19 kB at
    N = 4096 fp16, not fp32's 16.4 kB), and a row too long for one block goes through the
    two-pass kernel, which stages nothing: the chip never overflows where the kernel does not."""
    eb = {"fp16": 2, "bf16": 2, "fp32": 4}[dtype]
    for n in (4096, 60_000, 115_712, 131_072):
        config = AttentionConfig(seq_len=n, dtype=dtype, heads=1)
        softmax = next(k for k in build_schedule(config, NAIVE).kernels if k.name == "softmax")
        lay = chip_layout(config, NAIVE, softmax, H200)
        # the one-read kernel while the row and 1 KiB fit the H200's 232,448 B opt-in
        one_read = n * eb + 1024 <= 232_448
        assert lay.smem_bytes == softmax.sram_bytes == (n * eb if one_read else 0)
        row = [s.bytes for s in lay.slots if s.name == "row"]
        assert row == ([n * eb] if one_read else [])
        assert lay.smem_bytes <= H200.smem_per_sm_bytes  # no overflow the kernel lacks
    config = AttentionConfig(seq_len=4096)
    softmax = build_schedule(config, NAIVE).kernels[1]
    assert chip_layout(config, NAIVE, softmax, H200).smem_bytes == 8192


def test_stepping_the_tensor_core_lane_fills_the_ring_stages_in_turn():
    config = AttentionConfig(seq_len=640, head_dim=64)  # 5 blocks of 5 key tiles of 128
    player = Player(config, algorithms=(TILED_MMA,))
    seen = []
    while player.step_forward():
        f = player.frames()[0]
        if f.step.name in ("load_K_j", "load_V_j") and f.step_phase > 0:
            j = f.step.region[0] // 128
            matrix = "K" if f.step.name == "load_K_j" else "V"
            active = [s for s in f.slots if s.active and s.matrix == matrix]
            assert [s.name for s in active] == [f"{matrix} stage {j % 2}"]
            assert active[0].tile == j
            other = next(s for s in f.slots if s.name == f"{matrix} stage {1 - j % 2}")
            assert other.tile == (j - 1 if j else -1)
            seen.append((matrix, j))
    assert seen == [(m, j) for _block in range(5) for j in range(5) for m in ("K", "V")]


def test_the_sram_counter_counts_shared_memory_not_registers():
    config = AttentionConfig(seq_len=512, head_dim=64)
    player = Player(config, algorithms=(TILED_MMA,))
    player.seek_fraction(0.5)
    f = player.frames()[0]
    assert f.counters.sram_bytes == sum(s.bytes for s in f.slots if s.resident and s.place == SMEM)
    assert any(s.resident and s.place == REGISTERS for s in f.slots)


# --------------------------------------------------------------------------------------------
# Clocks


def _result(config, algorithm, times, device="NVIDIA H200", recorded=True):
    return RunResult(
        config,
        algorithm,
        "replay" if recorded else "cuda",
        device,
        kernel_times=tuple(KernelTime(n, ms) for n, ms in times),
        recorded=recorded,
    )


def test_a_measured_result_on_the_same_gpu_times_each_kernel_of_the_lane():
    config = AttentionConfig(seq_len=2048)
    times = (("gemm_qk", 0.05), ("softmax", 0.2), ("gemm_pv", 0.03))
    clock = clock_for(_result(config, NAIVE, times), H200)
    assert clock.source == MEASURED and "H200" in clock.label()
    lane = build_lanes(config, H200, (NAIVE,), {NAIVE: clock})[0]
    assert lane.total_time == pytest.approx(0.28e-3)
    starts = lane.kernel_unit_start
    for k, (_name, ms) in enumerate(times):
        assert lane.cum_time[starts[k + 1]] - lane.cum_time[starts[k]] == pytest.approx(ms * 1e-3)
    totals = lane.totals()  # the bytes and FLOPs do not change with the clock
    cost = algorithm_cost(config, NAIVE)
    assert (totals.bytes_read, totals.flops) == (cost.bytes_read, cost.executed_flops)


@pytest.mark.parametrize("device", ["CPU (NumPy)", "NVIDIA GeForce RTX 4090", ""])
def test_a_result_from_another_device_leaves_the_lane_modeled(device):
    config = AttentionConfig(seq_len=2048)
    result = _result(config, TILED, (("flash_fwd", 5.0),), device=device)
    assert clock_for(result, H200).source == MODELED


def test_an_out_of_memory_result_leaves_the_lane_modeled():
    config = AttentionConfig(seq_len=2048)
    result = replace(_result(config, NAIVE, ()), oom=True)
    assert clock_for(result, H200).source == MODELED


def test_on_the_recorded_h200_the_readable_lane_is_as_slow_as_it_measured():
    recording = load_recording(ROOT / "resources" / "recorded" / "h200_sweep.json")
    config = AttentionConfig(seq_len=4096)
    by_algo = {
        r.algorithm: replace(r, recorded=True)
        for r in recording.results
        if r.config == config and r.algorithm in (NAIVE, TILED)
    }
    clocks = {a: clock_for(r, H200) for a, r in by_algo.items()}
    player = Player(config, H200, algorithms=(NAIVE, TILED))
    assert not any(f.clock.measured for f in player.frames())
    player.set_clocks(clocks)
    naive, tiled = player.lane(NAIVE).total_time, player.lane(TILED).total_time
    assert naive == pytest.approx(by_algo[NAIVE].total_ms * 1e-3)
    assert tiled == pytest.approx(by_algo[TILED].total_ms * 1e-3)
    assert tiled > 5 * naive  # 3.6 ms against 0.52 ms on the H200
    assert all(f.clock.measured for f in player.frames())


def test_the_readable_lanes_modeled_clock_uses_the_fp32_peak():
    config = AttentionConfig(seq_len=4096)
    lane = build_lanes(config, H200, (TILED,))[0]
    flops = algorithm_cost(config, TILED).executed_flops
    assert lane.total_time >= flops / H200.fp32_flops * (1 - 1e-9)


def test_the_readable_lanes_steps_share_a_block_at_the_fp32_peak():
    config = AttentionConfig(seq_len=4096, head_dim=64)
    lane = build_lanes(config, H200, (TILED,))[0]
    timing = lane.timing(0, 0)
    det = timing.detail
    names = np.array(det.names)[det.name_ids]
    loads = np.isin(names, ["load_K_j", "load_V_j"])
    memory_s = (det.read + det.written) / H200.bandwidth_bytes_s
    compute_s = det.flops / H200.fp32_flops
    assert compute_s.sum() > memory_s.sum()  # the block is bound by the fp32 CUDA cores
    load_share = float(np.diff(timing.cum_share)[loads].sum())
    assert load_share < 0.5  # the K/V loads overlap the math; they do not take most of the block
    # each step's share is its serial cost at the fp32 peak; the zero-cost online_softmax steps
    # get a small share besides, so the loads' share is just under their part of the cost
    expected = memory_s[loads].sum() / (memory_s.sum() + compute_s.sum())
    assert 0.99 * expected < load_share <= expected


# --------------------------------------------------------------------------------------------
# Warp roles


def _gemm_and_softmax(tl, role):
    spans = tl.spans(0, tl.tiles)
    gemm = [(s.t0, s.t1) for s in spans if s.role == role and s.kind == GEMM]
    soft = [(s.t0, s.t1) for s in spans if s.role == role and s.kind == SOFTMAX]
    return gemm, soft


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_modeled_consumers_take_turns_on_the_tensor_cores(head_dim):
    config = AttentionConfig(seq_len=4096, head_dim=head_dim)
    tl = modeled_roles(config, H200, 0)
    launch = flash_ws.default_launch(head_dim)
    assert tl.consumers == launch.consumers and tl.tiles == 4096 // launch.block_n
    if launch.pingpong:  # turn j of consumer 0, 1, ..., then turn j + 1 of consumer 0, ...
        turns = tl.issue[:, : tl.tiles].T.ravel()
        assert np.all(np.diff(turns) >= 0)
    # the tensor cores run one GEMM at a time: S GEMMs and P·Vs of both never overlap
    busy = sorted(
        (s.t0, s.t1) for s in tl.spans(0, tl.tiles) if s.kind in (GEMM, PV) and s.role > 0
    )
    assert all(b0 >= a1 - 1e-15 for (_a0, a1), (b0, _b1) in itertools.pairwise(busy))
    assert overlap_share(tl) > 0.9  # the softmax runs while the tensor cores are busy


def test_the_modeled_producer_refills_a_stage_only_after_both_consumers_freed_it():
    config = AttentionConfig(seq_len=4096, head_dim=128)
    tl = modeled_roles(config, H200, 0)
    ns = tl.stages
    for t in range(ns, tl.tiles):
        assert tl.k_issue[t] >= tl.s_done[:, t - ns].max() - 1e-15
        assert tl.k_land[t] > tl.k_issue[t]
        assert tl.issue[:, t].min() >= tl.k_land[t] - 1e-15  # nobody computes on a missing K


def test_the_warp_specialized_lanes_steps_follow_its_consumer_and_keep_the_models_bytes():
    config = AttentionConfig(seq_len=1000, causal=True, head_dim=128)
    player = Player(config, algorithms=(TILED_WS,), duration_s=0.5)
    bounds = player.lane(TILED_WS).roles_for_block(3).step_bounds()
    assert np.all(np.diff(bounds) >= 0) and bounds[0] == 0
    player.play()
    saw_roles = False
    while player.playing:
        player.advance(1 / 60)
        f = player.frames()[0]
        saw_roles |= f.roles is not None and 0 <= f.role_t <= f.roles.end
    assert saw_roles
    cost = algorithm_cost(config, TILED_WS)
    c = player.counters(TILED_WS)
    assert (c.bytes_read, c.bytes_written, c.flops) == (
        cost.bytes_read,
        cost.bytes_written,
        cost.executed_flops,
    )


def _lines_run_in(module, call) -> tuple[object, int]:
    """(call(), how many lines of `module`'s source ran during it): work counted, not timed."""
    import sys

    source = module.__file__
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if frame.f_code.co_filename != source:
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        result = call()
    finally:
        sys.settrace(None)
    return result, count


def test_a_long_warp_specialized_block_is_modeled_in_bounded_work_and_alike():
    """Past SIM_TILES key tiles the steady state repeats: modeling a block of 128 tiles runs
    no more of the model's code than one of 64, and gives what stepping every tile gives."""
    import app.state.animation.warp_roles as roles

    long = AttentionConfig(seq_len=16384, head_dim=128)  # 128 key tiles
    half = long.with_(seq_len=8192)  # 64
    fast, lines_long = _lines_run_in(roles, lambda: modeled_roles(long, H200, 0))
    _, lines_half = _lines_run_in(roles, lambda: modeled_roles(half, H200, 0))
    assert lines_long <= lines_half * 1.05, (lines_half, lines_long)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(roles, "SIM_TILES", 10**6)
        full, lines_stepped = _lines_run_in(roles, lambda: modeled_roles(long, H200, 0))
    assert lines_stepped > 3 * lines_long  # stepping every tile is what the bound saves
    assert fast.tiles == full.tiles == 128
    assert np.allclose(fast.wait[:, :-1], full.wait[:, :-1], rtol=1e-9)


def test_the_shipped_warp_specialized_trace_shows_the_consumers_taking_turns():
    from gpu.files.trace import load_traces

    (trace,) = load_traces(ROOT / "resources" / "traces" / "h200_ws_trace.json")
    assert trace.algorithm == TILED_WS and trace.roles[:3] == (
        "producer",
        "consumer 0",
        "consumer 1",
    )
    block = sorted(trace.blocks, key=lambda b: b.start_ns)[len(trace.blocks) // 2]
    tl = traced_roles(block)
    assert tl is not None and tl.consumers == 2
    kept = np.flatnonzero(
        np.isfinite(tl.issue[0, : tl.tiles]) & np.isfinite(tl.issue[1, : tl.tiles])
    )
    assert kept.size >= 8
    # the hardware alternated them too: consumer 0's GEMMs of tile j, then consumer 1's
    order = np.mean(tl.issue[0, kept] <= tl.issue[1, kept])
    assert order > 0.9
    assert overlap_share(tl) > 0.2
    gemm0, soft0 = _gemm_and_softmax(tl, 1)
    assert gemm0 and soft0


def test_the_tensor_core_kernels_rescale_lazily_and_agree_with_the_eager_softmax():
    """The reference max moves only past 2⁸ (8 in base 2): the toy row's last tile grows the
    max a little and is rescaled eagerly, skipped lazily; both end at softmax(s)·V."""
    from app.state.animation.online_softmax import LAZY_SLACK, toy_trace

    eager, lazy = toy_trace(lazy=False), toy_trace(lazy=True)
    assert [u.rescaled for u in eager.updates] == [True, True, True]
    assert [u.rescaled for u in lazy.updates] == [True, True, False]
    grown = lazy.updates[2].m - lazy.updates[1].m
    assert 0 < grown < LAZY_SLACK and lazy.updates[2].rescale == 1.0
    assert lazy.updates[1].m - lazy.updates[0].m > LAZY_SLACK
    assert max(float(np.exp(u.scores - u.ref).max()) for u in lazy.updates) < 256
    assert lazy.max_abs_diff < 1e-12 and eager.max_abs_diff < 1e-12
