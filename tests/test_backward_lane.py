"""The backward lane: FlashAttention's backward in tile order (K/V resident, Q/dO streaming,
P recomputed, dQ accumulated), its counters exact against the cost model, and its view in the
Tiles tab."""

from __future__ import annotations

import numpy as np
import pytest

from app.state.animation.backward_order import VISIT_PHASES, BackwardTileOrder
from app.state.animation.kernel_source import BACKWARD_PHASE_STEPS
from gpu.algorithms import TILED, TILED_MMA
from gpu.config import BACKWARD, STEP, AttentionConfig
from gpu.model.costmodel import algorithm_cost


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq_len", [1000, 1024, 4097])
@pytest.mark.parametrize("algorithm", [TILED, TILED_MMA])
def test_the_lanes_counters_end_on_the_cost_models_backward_kernel(causal, seq_len, algorithm):
    cfg = AttentionConfig(seq_len=seq_len, causal=causal, pass_=BACKWARD, block_n=128)
    order = BackwardTileOrder(cfg, algorithm)
    kernel = algorithm_cost(cfg, algorithm).kernel("flash_bwd")
    per_head = (kernel.bytes_read // cfg.bh, kernel.bytes_written // cfg.bh, kernel.flops // cfg.bh)
    assert order.totals() == per_head
    last = order.frame(order.total_steps - 1)
    assert (last.bytes_read, last.bytes_written, last.flops) == per_head
    assert (last.dq_added == last.dq_needed).all() and last.kv_stored == order.kv_tiles
    assert last.recompute_flops * 5 == last.flops  # S rebuilt: one product of five


def test_each_block_holds_its_kv_tile_while_every_query_tile_streams_past():
    cfg = AttentionConfig(seq_len=512, pass_=BACKWARD)  # 4 blocks of 128 keys, 4 query tiles
    order = BackwardTileOrder(cfg, TILED_MMA)
    frames = [order.frame(s) for s in range(order.total_steps)]
    phases = [f.phase for f in frames]
    assert phases[0] == "load_KV" and phases[-1] == "store_dK_dV"
    block0 = [f for f in frames if f.kv_tile == 0]
    assert [f.q_tile for f in block0 if f.phase == "load_Q_dO"] == [0, 1, 2, 3]
    assert [f.phase for f in block0[1:7]] == list(VISIT_PHASES)
    assert {f.kv_tile for f in frames} == {0, 1, 2, 3}
    assert [f.kv_tile for f in frames] == sorted(f.kv_tile for f in frames)  # launch order


def test_a_causal_block_skips_the_query_tiles_before_its_keys():
    cfg = AttentionConfig(seq_len=512, causal=True, pass_=BACKWARD)
    order = BackwardTileOrder(cfg, TILED_MMA)
    streamed = {
        j: [order.frame(s).q_tile for s in range(order.total_steps)
            if order.frame(s).kv_tile == j and order.frame(s).phase == "load_Q_dO"]
        for j in range(order.kv_tiles)
    }  # fmt: skip
    assert streamed == {0: [0, 1, 2, 3], 1: [1, 2, 3], 2: [2, 3], 3: [3]}
    assert list(order.dq_needed) == [1, 2, 3, 4]


def test_dq_accumulates_block_by_block_and_p_is_recomputed_as_it_happens():
    cfg = AttentionConfig(seq_len=512, pass_=STEP)
    order = BackwardTileOrder(cfg, TILED_MMA)
    previous = None
    for s in range(order.total_steps):
        f = order.frame(s)
        if previous is not None:  # counters never go back
            assert f.bytes_read >= previous.bytes_read and f.flops >= previous.flops
            assert (f.dq_added >= previous.dq_added).all()
            assert f.recomputed_tiles >= previous.recomputed_tiles
        if f.recomputing:
            assert f.recomputed_tiles == (previous.recomputed_tiles + 1)
            assert "recompute" in f.text and "P was not kept" in f.text
        if f.phase == "dQ_atomic":
            assert f.dq_added[f.q_tile] == previous.dq_added[f.q_tile] + 1
        previous = f
    mid = order.frame(order.first_step_of(2))  # block 2 starting: two blocks have added
    assert np.array_equal(mid.dq_added, [2, 2, 2, 2])


def test_the_backward_lane_plays_in_the_tiles_tab(qtbot, make_window):
    window = make_window()
    window.controls.pass_combo.setCurrentIndex(window.controls.pass_combo.findData(STEP))
    window.tabs.setCurrentIndex(1)
    qtbot.waitUntil(lambda: window.animation is not None, timeout=10_000)
    anim = window.animation
    anim.set_mode(anim.BACKWARD_MODE)
    lane = anim.backward_lane
    assert lane.objectName() == "backwardLane" and lane.isVisible()
    assert anim.mode == anim.BACKWARD_MODE
    assert lane.order is not None and lane.order.config.seq_len == window.config.seq_len
    assert lane.order.config.pass_ == STEP
    assert "launch order" in lane.title.text()
    assert "load K_j, V_j" in lane.caption.text()
    lane.seek(2)  # block 0, query tile 0: P_00 recomputed now
    assert lane.canvas.frame.recomputing and "P was not kept" in lane.caption.text()
    assert "P recomputed: 1 tiles" in lane.counters.text()
    painted = lane.canvas.paints
    qtbot.waitUntil(lambda: lane.canvas.paints > painted, timeout=5000)
    lane.seek(0)
    lane.play()
    assert lane.playing
    qtbot.waitUntil(lambda: lane.step > 0, timeout=5000)
    anim.set_mode(anim.MODEL_MODE)
    assert not lane.playing
    # The lane follows the config: a new N rebuilds its order.
    window.controls.set_seq_len(2048)
    qtbot.waitUntil(lambda: lane.order.config.seq_len == 2048, timeout=5000)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("algorithm", [TILED, TILED_MMA])
def test_a_deterministic_lane_adds_no_dq_and_ends_on_the_models_deterministic_kernel(
    causal, algorithm
):
    cfg = AttentionConfig(seq_len=1000, causal=causal, pass_=STEP, block_n=128, deterministic=True)
    order = BackwardTileOrder(cfg, algorithm)
    kernel = algorithm_cost(cfg, algorithm).kernel("flash_bwd")
    per_head = (kernel.bytes_read // cfg.bh, kernel.bytes_written // cfg.bh, kernel.flops // cfg.bh)
    assert order.totals() == per_head
    assert order.phases == VISIT_PHASES[:-1] and "dQ_atomic" not in order.phases
    frames = [order.frame(s) for s in range(order.total_steps)]
    assert all(f.phase != "dQ_atomic" and not f.dq_added.any() for f in frames)
    last = frames[-1]
    assert (last.bytes_read, last.bytes_written, last.flops) == per_head
    assert last.recompute_flops * 4 == last.flops  # S rebuilt: one product of four
    # Fewer steps than the atomic lane: one fewer per visit.
    atomic = BackwardTileOrder(cfg.with_(deterministic=False), algorithm)
    assert atomic.total_steps - order.total_steps == int(order.visits.sum())


def test_the_lane_of_a_deterministic_step_says_the_dq_pass_sums_dq(qtbot, make_window):
    window = make_window()
    window.controls.pass_combo.setCurrentIndex(window.controls.pass_combo.findData(STEP))
    window.controls.deterministic.setChecked(True)
    window.tabs.setCurrentIndex(1)
    qtbot.waitUntil(lambda: window.animation is not None, timeout=10_000)
    anim = window.animation
    anim.set_mode(anim.BACKWARD_MODE)
    lane = anim.backward_lane
    qtbot.waitUntil(
        lambda: lane.order is not None and lane.order.config.deterministic, timeout=5000
    )
    assert "flash_bwd_dq" in lane.title.text() and "adds no dQ" in lane.title.text()


def test_the_lane_shows_the_backward_kernels_source_at_the_current_phase(qtbot):
    from app.animation.backward_lane import BackwardLane

    lane = BackwardLane()
    qtbot.addWidget(lane)
    lane.set_config(AttentionConfig(seq_len=1024, pass_=STEP))
    panel = lane.source_panel
    qtbot.waitUntil(lambda: panel.sources.get("flash_bwd") is not None, timeout=10_000)
    qtbot.waitUntil(lambda: panel.sources.get("flash_bwd_wgmma") is not None, timeout=10_000)
    lane.seek(2)  # block 0, query tile 0: S and P recomputed
    src = panel.sources["flash_bwd"]
    assert panel.text.property("sourcePath").endswith("flash_bwd.cu")
    lines = src.text.splitlines()
    tagged = [lines[first] for first, _ in panel.highlighted]
    assert any("STEP recompute_S" in t for t in tagged)
    assert any("STEP recompute_P" in t for t in tagged)
    assert all("STEP recompute_" in t for t in tagged)
    assert "STEP recompute_S / recompute_P" in panel.status.text()
    # The Hopper build tags the same steps: picking it keeps the phase's lines in view.
    panel.follow("flash_bwd_wgmma")
    assert panel.text.property("sourcePath").endswith("flash_bwd_wgmma.cu")
    wgmma_lines = panel.sources["flash_bwd_wgmma"].text.splitlines()
    assert panel.highlighted and all(
        "STEP recompute_" in wgmma_lines[first] for first, _ in panel.highlighted
    )
    # Every phase the lane plays has its tags in both files.
    for phase in lane.order.phases:
        for kernel in ("flash_bwd", "flash_bwd_wgmma"):
            assert panel.sources[kernel].lines_for(BACKWARD_PHASE_STEPS[phase]), (kernel, phase)
