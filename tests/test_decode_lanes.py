"""The decode lanes of the Tiles tab: the schedule they play (gpu/model/decode_schedule.py) adds up
to the cost model and cuts the cache as the split-KV kernel's own plan does, and the lanes'
clock and frames (app/state/animation/decode_order.py) end on the cost model's counters."""

from __future__ import annotations

import numpy as np
import pytest

from app.state.animation.clock import MEASURED
from app.state.animation.decode_order import DecodeLanes
from gpu.algorithms import NAIVE, NAIVE_GEMM_TILE, SPLIT_KV
from gpu.config import DECODE, AttentionConfig, ceil_div
from gpu.launch import decode_split
from gpu.model.costmodel import GPUS, algorithm_cost
from gpu.model.decode_cost import kv_cache_bytes, score_bytes
from gpu.model.decode_schedule import STEP_NAMES, decode_schedule, keys_per_step
from gpu.model.roofline import algorithm_verdict
from gpu.results import KernelTime, RunResult

H100 = GPUS["H100 SXM 80 GB"]
H200 = GPUS["H200 SXM 141 GB"]

SHAPES = [
    dict(seq_len=1, heads=32, kv_heads=8, head_dim=128),
    dict(seq_len=17, heads=12, head_dim=64),
    dict(seq_len=4097, heads=32, kv_heads=1, new_tokens=8, head_dim=128),
    dict(seq_len=131071, heads=32, kv_heads=8, head_dim=128, batch=8),
    dict(seq_len=1000, heads=71, kv_heads=1, new_tokens=3, head_dim=64, batch=2),
    dict(seq_len=5000, heads=64, kv_heads=8, head_dim=256, new_tokens=2),
]


def decode(**kw) -> AttentionConfig:
    return AttentionConfig(pass_=DECODE, **kw)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: AttentionConfig(pass_=DECODE, **s).label())
@pytest.mark.parametrize("algorithm", [NAIVE, SPLIT_KV])
def test_the_decode_lanes_steps_add_up_to_the_no_reuse_cost_model(shape, algorithm):
    config = decode(**shape)
    schedule = decode_schedule(config, algorithm, H100)
    model = algorithm_cost(config, algorithm)
    totals = schedule.totals()
    assert list(totals) == [k.name for k in model.kernels]
    for kernel in model.kernels:
        assert totals[kernel.name] == {
            "bytes_read": kernel.bytes_read,
            "bytes_written": kernel.bytes_written,
            "flops": kernel.flops,
        }


@pytest.mark.parametrize("gpu", [H100, H200, GPUS["RTX 4090 24 GB"]], ids=lambda g: g.name)
def test_the_split_lane_cuts_the_cache_exactly_as_the_kernels_split_plan(gpu):
    config = decode(seq_len=131072, heads=32, kv_heads=8, head_dim=128, batch=1)
    schedule = decode_schedule(config, SPLIT_KV, gpu)
    assert schedule.plan == decode_split.split_plan(config, gpu.sms)
    plan = schedule.plan
    stream = schedule.name == STEP_NAMES.index("stream_kv")
    # the splits stream side by side: one step per KEYS_PER_STEP keys of the longest split
    assert int(stream.sum()) == ceil_div(plan.keys_per_split, keys_per_step(config))
    assert int(schedule.keys[stream].sum()) == config.seq_len  # every key once, all splits
    # the kernel's KEYS_PER_STEP: (128 threads / (d / 8) lanes per key) × KPT keys each
    assert keys_per_step(config) == 8 * decode_split.keys_per_thread(config)


def test_one_split_writes_o_itself_and_has_no_merge():
    config = decode(seq_len=17, heads=12, head_dim=64, batch=1024)  # many units: one split
    schedule = decode_schedule(config, SPLIT_KV, H100)
    assert schedule.plan.splits == 1
    names = {STEP_NAMES[int(c)] for c in schedule.name}
    assert "write_partial" in names and not names & {"merge_splits", "store_o"}
    assert schedule.totals()["decode_split"]["bytes_written"] == config.bh * 1 * 64 * 2  # O


def test_naive_lane_writes_its_score_row_to_hbm_tile_by_tile():
    config = decode(seq_len=4097, heads=32, kv_heads=8, head_dim=128, batch=2)
    schedule = decode_schedule(config, NAIVE, H100)
    qk = schedule.name == STEP_NAMES.index("qk_store_S_ij")
    assert int(qk.sum()) == ceil_div(4097, NAIVE_GEMM_TILE)  # 4 rows of the group: one row tile
    assert int(schedule.bytes_written[qk].sum()) * schedule.pairs == score_bytes(config)
    softmax = schedule.name == STEP_NAMES.index("softmax_write_P")
    assert int(softmax.sum()) == 4  # one step per query row of the group (G·q = 4)
    assert int(schedule.bytes_written[softmax].sum()) * schedule.pairs == score_bytes(config)


def test_the_decode_lanes_end_on_the_cost_models_counters():
    config = decode(seq_len=65536, heads=32, kv_heads=8, head_dim=128, batch=8)
    lanes = DecodeLanes(config, H100)
    for lane, frame in zip(lanes.lanes, lanes.frames(lanes.total_seconds), strict=True):
        model = algorithm_cost(config, lane.algorithm)
        assert frame.done
        assert frame.bytes_read == model.bytes_read
        assert frame.bytes_written == model.bytes_written
        assert frame.flops == model.flops
    start = lanes.frames(0.0)
    assert all(f.bytes_read == 0 and not f.done for f in start)


def test_both_decode_lanes_run_on_one_clock_each_kernel_its_roofline_time():
    config = decode(seq_len=131072, heads=32, kv_heads=8, head_dim=128, batch=8)
    lanes = DecodeLanes(config, H100)
    for lane in lanes.lanes:
        verdict = algorithm_verdict(config, lane.algorithm, H100)
        assert lane.total_seconds == pytest.approx(verdict.roofline_ms * 1e-3, rel=1e-9)
    assert lanes.total_seconds == max(lane.total_seconds for lane in lanes.lanes)
    # the cache alone is about 4.3 GB: both lanes are memory-bound at 3.35 TB/s
    assert lanes.lanes[1].total_seconds == pytest.approx(
        kv_cache_bytes(config) / H100.bandwidth_bytes_s, rel=0.01
    )


def test_a_decode_result_timed_on_this_gpu_puts_its_lane_on_the_measured_clock():
    config = decode(seq_len=8192, heads=32, kv_heads=8, head_dim=128, batch=8)
    timed = RunResult(
        config=config, algorithm=SPLIT_KV, backend="cuda", device="NVIDIA H100 80GB HBM3",
        kernel_times=(KernelTime.from_samples("decode_split", [0.125]),),
    )  # fmt: skip
    lanes = DecodeLanes(config, H100, {SPLIT_KV: timed})
    split = lanes.lanes[1]
    assert split.clock.source == MEASURED
    assert split.total_seconds == pytest.approx(0.125e-3)
    elsewhere = DecodeLanes(config, H200, {SPLIT_KV: timed})  # timed on another GPU
    assert elsewhere.lanes[1].clock.source != MEASURED


def test_the_split_lane_streams_every_split_at_once_then_writes_partials_then_merges():
    config = decode(seq_len=16384, heads=32, kv_heads=8, head_dim=128, batch=1)
    lanes = DecodeLanes(config, H100)
    split = lanes.lanes[1]
    plan = split.schedule.plan
    assert plan.splits > 1
    stream = np.flatnonzero(split.schedule.name == STEP_NAMES.index("stream_kv"))
    middle = split.frame(float(split.cum_time[stream[len(stream) // 2]]))
    assert middle.name == "stream_kv" and not middle.partials_written
    full = [k for k in middle.keys_streamed[:-1]]
    assert len(set(full)) == 1 and 0 < full[0] < plan.keys_per_split  # side by side
    merging = split.frame(float(split.cum_time[-2]) + 1e-12)
    assert merging.name == "store_o" and merging.partials_written
    end = split.frame(split.total_seconds)
    assert end.merged == 1.0
    assert sum(end.keys_streamed) == config.seq_len
