"""One GPU spec: each GPU of the table carries its compute capability and the per-SM limits
that decide how many blocks of a kernel an SM holds, so no second table keyed by GPU name can
miss one (a GPU missing from it used to lose its occupancy silently)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.state.animation.chip import chip_layout
from gpu.algorithms import TILED, TILED_MMA
from gpu.config import AttentionConfig
from gpu.launch import decode_split
from gpu.launch.occupancy import HOPPER, blocks_per_sm
from gpu.model.cpu_roofs import cpu_spec_from_details
from gpu.model.gpus import GPU, GPUS
from gpu.model.schedule import build_schedule


def _occupancy(config, algorithm, gpu):
    kernel = build_schedule(config, algorithm).kernels[0]
    return chip_layout(config, algorithm, kernel, gpu).occupancy


@pytest.mark.parametrize("name", sorted(GPUS))
def test_every_gpu_of_the_table_carries_its_compute_capability_and_sm_limits(name):
    gpu = GPUS[name]
    assert gpu.kind == GPU and gpu.sm_limits is not None
    major, minor = gpu.compute_capability.split(".")
    assert 7 <= int(major) <= 9 and minor.isdigit()
    assert _occupancy(AttentionConfig(seq_len=1024), TILED, gpu) is not None


def test_a_gpu_under_another_name_keeps_its_occupancy():
    renamed = replace(GPUS["H200 SXM 141 GB"], name="H200 NVL 141 GB")
    config = AttentionConfig(seq_len=4096)
    occ = _occupancy(config, TILED, renamed)
    assert occ is not None and occ.blocks == 2 and occ.capability == "9.0"
    assert _occupancy(config, TILED_MMA, renamed).blocks == 1


def test_the_cpu_has_no_sm_limits_and_no_occupancy():
    details = {"cores": 4, "simd_lanes_fp32": 8, "simd": "AVX2", "fma_pipes": 2}
    details |= {"clock_hz": 3e9, "clock_source": "test", "memory_bandwidth_bytes_s": 2e10}
    cpu = cpu_spec_from_details("a CPU", 16 * 10**9, details)
    assert cpu.sm_limits is None and cpu.compute_capability == ""
    assert _occupancy(AttentionConfig(seq_len=1024), TILED, cpu) is None


def test_one_occupancy_rule_serves_the_tiles_tab_and_the_decode_planner():
    """The split-KV planner counts resident blocks with the same rule as the chip layouts, on
    Hopper's limits: 247 registers × 128 threads allow 2 blocks, 72 allow 7."""
    for registers, blocks in ((247, 2), (167, 3), (96, 5), (72, 7)):
        by = blocks_per_sm(0, decode_split.THREADS, registers, HOPPER, 0)
        assert decode_split.blocks_per_sm(registers) == min(by.values()) == blocks
