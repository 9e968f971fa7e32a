"""The ring model: one device is the single-GPU kernel, communication hides above the rows per
device the closed form gives, scaling never beats P, and the links are the datasheets'."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pytest

from gpu.config import AttentionConfig
from gpu.model.costmodel import DEFAULT_GPU, GPUS, tiled_cost, useful_flops
from gpu.model.links import (
    DEFAULT_TOPOLOGY,
    IB_NDR,
    LINKS,
    NVLINK4,
    PCIE5,
    link_from_topology_matrix,
)
from gpu.results import KernelTime, RunResult
from gpu.ring.model import (
    DEVICE_COUNTS,
    MODEL_KERNEL,
    MeasuredThroughput,
    RooflineThroughput,
    curve,
    device_peak_bytes,
    hiding_threshold_rows,
    merge_bytes,
    predict,
    ring_cost,
    step_bytes,
    store_bytes,
)

H200 = GPUS[DEFAULT_GPU]
BIG = AttentionConfig(seq_len=1 << 20, heads=12, head_dim=64)


@dataclass(frozen=True)
class ConstantThroughput:
    """A kernel at a fixed FLOP rate, merges free: the closed form's assumptions."""

    flops_s: float
    hbm_bytes_s: float = math.inf
    label: str = "constant"

    def kernel_seconds(self, config: AttentionConfig) -> float:
        return useful_flops(config) / self.flops_s


def test_one_device_is_the_single_gpu_kernel_plus_one_merge_and_the_store():
    for causal in (False, True):
        config = BIG.with_(causal=causal)
        p = predict(config, 1)
        kernel = tiled_cost(config, MODEL_KERNEL).modeled_seconds(H200)
        assert p.single_s == pytest.approx(kernel)
        if causal:  # two diagonal calls and one full call on N/2-row chunks, three merges
            half = config.with_(seq_len=config.seq_len // 2)
            calls = 2 * tiled_cost(half, MODEL_KERNEL).modeled_seconds(H200) + tiled_cost(
                half.with_(causal=False), MODEL_KERNEL
            ).modeled_seconds(H200)
            merges = 3 * merge_bytes(config, config.seq_len // 2)
        else:
            calls, merges = kernel, merge_bytes(config, config.seq_len)
        overhead = (merges + store_bytes(config, config.seq_len)) / H200.bandwidth_bytes_s
        assert p.total_s == pytest.approx(calls + overhead)
        assert p.step_transfer_s == 0 and p.hidden and p.exposed_s == 0
        assert overhead < 0.01 * p.total_s  # the ring's own passes are a rounding error here


def test_each_step_moves_k_and_v_of_one_block_over_the_link():
    config = AttentionConfig(seq_len=1 << 20, heads=16, head_dim=128)
    assert step_bytes(config, 2) == 2 * (1 << 19) * 128 * 16 * 2
    p = predict(config, 2, link=NVLINK4)
    assert p.step_transfer_s == pytest.approx(step_bytes(config, 2) / 450e9)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_hiding_threshold_is_the_closed_form_for_a_constant_throughput(causal):
    """c = 4·B·h·R²·d/F (half with the mask) against x = 2·R·d·B·h·bytes/W: communication hides
    from R = bytes·F/(2W) rows per device, twice that with the mask."""
    rate = ConstantThroughput(400e12)
    config = AttentionConfig(seq_len=4096, heads=12, head_dim=64, causal=causal)
    closed = config.elem_bytes * rate.flops_s / (2 * NVLINK4.bytes_per_s) * (2 if causal else 1)
    rows = hiding_threshold_rows(config, NVLINK4, rate)
    assert abs(rows - closed) <= 2  # whole rows; zigzag chunks are whole halves
    over = config.with_(seq_len=2 * (rows + 8))
    under = config.with_(seq_len=2 * (rows // 2))
    assert predict(over, 2, throughput=rate, link=NVLINK4).hidden
    assert not predict(under, 2, throughput=rate, link=NVLINK4).hidden
    assert predict(under, 2, throughput=rate, link=NVLINK4).exposed_s > 0


def test_slower_links_need_more_rows_per_device_to_hide():
    rows = [hiding_threshold_rows(BIG, link) for link in (NVLINK4, PCIE5, IB_NDR)]
    assert rows[0] < rows[1] < rows[2]


@pytest.mark.parametrize("throughput", [RooflineThroughput(), ConstantThroughput(400e12)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_efficiency_never_rises_with_more_devices_and_speedup_never_beats_p(causal, throughput):
    points = curve(BIG.with_(causal=causal), throughput=throughput)
    assert [p.devices for p in points] == list(DEVICE_COUNTS)
    for a, b in itertools.pairwise(points):
        assert b.efficiency <= a.efficiency * (1 + 1e-9)
        assert b.total_s <= a.total_s * (1 + 1e-9) or not b.hidden
    assert all(p.speedup <= p.devices * (1 + 1e-9) for p in points)
    assert points[1].efficiency > 0.95  # two GPUs on NVLink at 1M tokens: nearly perfect


def test_past_one_node_the_ring_runs_at_the_inter_node_link():
    assert predict(BIG, 8).link == NVLINK4.name
    far = predict(BIG, 16)
    assert far.link == IB_NDR.name == DEFAULT_TOPOLOGY.inter.name
    assert far.step_transfer_s == pytest.approx(step_bytes(BIG, 16) / 50e9)


def test_memory_per_device_shrinks_with_the_devices():
    peaks = [device_peak_bytes(BIG, p) for p in (1, 2, 4, 8, 64)]
    assert all(b < a for a, b in itertools.pairwise(peaks))
    assert peaks[-1] * 64 < 2 * peaks[0] * 3  # roughly 1/P, plus the receive buffers
    assert ring_cost(BIG, 8).peak_bytes_per_device == peaks[3]


def test_ring_cost_counts_the_whole_problem_once():
    for causal in (False, True):
        config = BIG.with_(causal=causal)
        cost = ring_cost(config, 4)
        assert cost.flops == useful_flops(config)
        assert cost.transfers == 3 and cost.step_bytes == step_bytes(config, 4)
        assert cost.executed_flops >= cost.flops


def result(n: int, tflops: float, causal: bool = False, heads: int = 12) -> RunResult:
    config = AttentionConfig(seq_len=n, heads=heads, head_dim=64, causal=causal)
    flops = useful_flops(config)
    ms = flops / (tflops * 1e12) * 1e3
    return RunResult(
        config, "tiled_wgmma", "cuda", "H200", (KernelTime("flash_fwd", ms),), flops=flops
    )


def test_measured_throughput_interpolates_in_log_n_and_is_launch_bound_below_its_range():
    runs = [result(1024, 100), result(4096, 300), result(4096, 10, heads=1), result(2048, 50, True)]
    tp = MeasuredThroughput.from_results(runs, "tiled_wgmma", "test")
    cfg = AttentionConfig(seq_len=2048, heads=12, head_dim=64)
    assert tp.flops_per_s(cfg) == pytest.approx(200e12)  # halfway in log N
    small = cfg.with_(seq_len=512)  # below the smallest N: its time holds (launch-bound)
    assert tp.kernel_seconds(small) == pytest.approx(tp.kernel_seconds(cfg.with_(seq_len=1024)))
    assert tp.flops_per_s(cfg.with_(seq_len=1 << 20)) == pytest.approx(300e12)  # the most heads
    assert tp.kernel_seconds(cfg.with_(causal=True)) == pytest.approx(
        useful_flops(cfg.with_(causal=True)) / 50e12
    )
    other = cfg.with_(head_dim=128)  # never measured: the datasheet roofline stands in
    assert tp.kernel_seconds(other) == pytest.approx(RooflineThroughput().kernel_seconds(other))


def test_links_are_per_direction_with_their_sources():
    assert NVLINK4.bytes_per_s == 450e9  # 900 GB/s both ways per GPU
    assert PCIE5.bytes_per_s == 64e9
    assert IB_NDR.bytes_per_s == 50e9  # 400 Gb/s
    assert all(link.source for link in LINKS.values())
    assert link_from_topology_matrix("NV18") is NVLINK4
    assert link_from_topology_matrix("SYS") is PCIE5
    assert link_from_topology_matrix("NV4") is None
