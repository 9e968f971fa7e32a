"""The tile schedule is the same algorithm as the cost model: its steps add up to the model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA, tile_shape
from gpu.config import AttentionConfig
from gpu.model.costmodel import algorithm_cost
from gpu.model.schedule import COMPUTE, READ, STEP_NAMES, WRITE, build_schedule

KERNELS = Path(__file__).resolve().parent.parent / "gpu" / "kernels"

CONFIGS = [
    AttentionConfig(seq_len=1, heads=1, head_dim=8),
    AttentionConfig(seq_len=17, heads=2, head_dim=16, block_m=8, block_n=16),
    AttentionConfig(seq_len=300, heads=3, head_dim=64, batch=2, causal=True),
    AttentionConfig(seq_len=257, heads=1, head_dim=200, dtype="fp32", block_m=32, block_n=16),
    AttentionConfig(seq_len=130, heads=1, head_dim=32, causal=True, block_m=16, block_n=64),
]


def _sum_steps(schedule):
    read = written = flops = 0
    for step in schedule.steps():
        if step.kind == READ:
            read += step.bytes
        elif step.kind == WRITE:
            written += step.bytes
        flops += step.flops
    m = schedule.heads_multiplier
    return read * m, written * m, flops * m


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.label())
@pytest.mark.parametrize("algorithm", [NAIVE, TILED, TILED_MMA])
def test_schedule_steps_add_up_to_the_cost_model(cfg, algorithm):
    schedule = build_schedule(cfg, algorithm)
    cost = algorithm_cost(cfg, algorithm)
    read, written, flops = _sum_steps(schedule)
    assert read == cost.bytes_read
    assert written == cost.bytes_written
    assert flops == cost.executed_flops
    assert schedule.totals() == {
        "bytes_read": cost.bytes_read,
        "bytes_written": cost.bytes_written,
        "flops": cost.executed_flops,
    }
    assert schedule.step_count() == sum(1 for _ in schedule.steps())


def test_per_kernel_tables_match_each_kernels_model_cost():
    cfg = AttentionConfig(seq_len=300, heads=2, causal=True)
    schedule = build_schedule(cfg, NAIVE)
    for ks, kc in zip(schedule.kernels, algorithm_cost(cfg, NAIVE).kernels, strict=True):
        assert ks.name == kc.name
        t = ks.table()
        assert int(t.bytes_read.sum()) * cfg.bh == kc.bytes_read
        assert int(t.bytes_written.sum()) * cfg.bh == kc.bytes_written


def test_naive_writes_s_and_p_to_hbm_and_tiled_never_does():
    cfg = AttentionConfig(seq_len=200, heads=1)
    naive_writes = {s.matrix for s in build_schedule(cfg, NAIVE).steps() if s.kind == WRITE}
    tiled_writes = {s.matrix for s in build_schedule(cfg, TILED).steps() if s.kind == WRITE}
    assert {"S", "P", "O"} <= naive_writes
    assert tiled_writes == {"O", "ml"}


def test_tiled_block_loads_q_once_then_streams_k_and_v():
    cfg = AttentionConfig(seq_len=256, heads=1, block_m=64, block_n=64)
    kernel = build_schedule(cfg, TILED).kernels[0]
    names = [s.name for s in kernel.block_steps(1)]
    assert names[0] == "load_Q_i"
    assert names[1:6] == [
        "load_K_j",
        "load_V_j",
        "compute_S_ij",
        "online_softmax",
        "accumulate_O_i",
    ]
    assert names.count("load_K_j") == 4
    assert names[-2:] == ["store_O_i", "store_ml"]


def test_causal_blocks_stop_at_the_diagonal_and_launch_longest_first():
    """As the kernels launch them: the last query tile (four key tiles) first, the first last."""
    cfg = AttentionConfig(seq_len=256, heads=1, block_m=64, block_n=64, causal=True)
    kernel = build_schedule(cfg, TILED).kernels[0]
    first, last = kernel.block_steps(0), kernel.block_steps(3)
    assert [s.name for s in first].count("load_K_j") == 4 and first[0].region[:2] == (192, 256)
    assert [s.name for s in last].count("load_K_j") == 1 and last[0].region[:2] == (0, 64)
    assert list(kernel.table().steps) == [1 + 5 * v + 2 for v in (4, 3, 2, 1)]
    plain = build_schedule(cfg.with_(causal=False), TILED_MMA).kernels[0]
    assert plain.block_steps(0)[0].region[0] == 0  # the tensor-core kernel, unmasked: in order


@pytest.mark.parametrize("algorithm", [TILED, TILED_MMA, TILED_WGMMA])
@pytest.mark.parametrize("causal", [False, True])
def test_each_fused_kernels_blocks_play_in_the_order_its_source_launches_them(algorithm, causal):
    """The order is read from the kernel's own source: the readable kernel takes its query
    tiles last first with or without a mask (`i = num_q_tiles - 1 - blockIdx.x`), the tensor-core
    kernels only under one (`CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x`)."""
    source = (KERNELS / {TILED: "flash_readable.cu", TILED_MMA: "flash_mma.cu",
                         TILED_WGMMA: "flash_wgmma.cu"}[algorithm]).read_text()  # fmt: skip
    code = " ".join(line.split("//")[0] for line in source.splitlines())
    if re.search(r"=\s*num_q_tiles\s*-\s*1\s*-\s*blockIdx\.x\s*;", code):
        reversed_ = True  # unconditionally
    else:
        assert re.search(r"CAUSAL\s*\?\s*\(int\)\(gridDim\.x\s*-\s*1\s*-\s*blockIdx\.x\)"
                         r"\s*:\s*\(int\)blockIdx\.x", code)  # fmt: skip
        reversed_ = causal
    cfg = AttentionConfig(seq_len=640, heads=1, causal=causal)
    kernel = build_schedule(cfg, algorithm).kernels[0]
    bm = tile_shape(cfg, algorithm)[0]
    tiles = kernel.blocks
    firsts = [kernel.block_steps(b)[0].region[0] // bm for b in range(tiles)]
    assert firsts == (list(range(tiles))[::-1] if reversed_ else list(range(tiles)))
    assert (algorithm == TILED and not causal) <= reversed_  # the case the screen got wrong


def test_step_names_are_the_published_stable_names():
    cfg = AttentionConfig(seq_len=70, heads=1, block_m=32, block_n=32)
    for algorithm in (NAIVE, TILED):
        for step in build_schedule(cfg, algorithm).steps():
            assert step.name in STEP_NAMES[step.kernel]
            assert step.kind in (READ, WRITE, COMPUTE)
            r0, r1, c0, c1 = step.region
            assert 0 <= r0 < r1 and 0 <= c0 < c1


def test_long_sequence_schedule_totals_are_cheap_without_iterating_steps():
    cfg = AttentionConfig(seq_len=131072)
    schedule = build_schedule(cfg, TILED)
    assert schedule.totals()["bytes_read"] == algorithm_cost(cfg, TILED).bytes_read
    assert schedule.step_count() > 10_000_000
