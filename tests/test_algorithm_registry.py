"""The algorithm registry (gpu/algorithms.py) is the one place an algorithm is described: its
launcher, source, tiles, roof, rescale, speed, trace and backward facts and its style. Every
other part of the code reads it, so a new entry is enough for the cost model, the schedule, the
roofline, the speed orders and the plots to know a new kernel."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from app.kit.theme import PALETTES
from app.measure.plot_styles import NAIVE_KERNELS, SYMBOLS, series_symbol
from app.state.animation.kernel_source import KERNEL_DIR, SOURCE_FILES
from app.state.default_view import default_checked, fastest_fused
from app.state.ring.runs import FUSED_KERNELS
from gpu.algorithms import (
    ALGORITHMS,
    EAGER,
    FP32_CORES,
    LAZY,
    MMA_SYNC,
    NAIVE,
    RING,
    SPLIT_KV,
    TILED,
    TILED_MMA,
    TILED_WGMMA,
    TILED_WS,
    WGMMA,
    fastest_fused_first,
    single_kernel_fused,
    tile_shape,
)
from gpu.config import AttentionConfig
from gpu.launch import flash_mma, flash_wgmma, flash_ws
from gpu.model.costmodel import GPUS, algorithm_cost, matmul_unit
from gpu.model.gpus import FP32, TENSOR
from gpu.model.roofline import MMA, compute_roof, issues_mma_sync
from gpu.model.schedule import build_schedule
from gpu.profiling.trace_record import TRACEABLE

H200 = GPUS["H200 SXM 141 GB"]
#: pyqtgraph's symbols (ScatterPlotItem.Symbols).
PYQTGRAPH_SYMBOLS = {"o", "s", "t", "t1", "t2", "t3", "d", "+", "x", "p", "h", "star"}
HEX = re.compile(r"^#[0-9a-f]{6}$")


def test_the_style_keys_equal_the_registry():
    """Every algorithm has a colour on each theme and a symbol, and nothing else is styled as
    an algorithm: the plot colours are the registry's algorithms plus naive's kernels."""
    assert set(SYMBOLS) == set(ALGORITHMS)
    for palette in PALETTES.values():
        assert set(palette.series) == set(ALGORITHMS) | set(NAIVE_KERNELS), palette.name


@pytest.mark.parametrize("theme", sorted(PALETTES))
def test_every_algorithm_has_its_own_colour_and_symbol(theme):
    """The warp-specialized and split-KV kernels once fell back to the foreground colour and
    the fallback symbol; each series now has a colour of its own on both themes."""
    palette = PALETTES[theme]
    colours = [palette.color(a) for a in ALGORITHMS]
    assert all(HEX.match(c) for c in colours), colours
    assert len(set(colours)) == len(colours)
    assert palette.foreground not in colours
    assert not set(colours) & {palette.series[k] for k in NAIVE_KERNELS}
    for a in (TILED_WS, SPLIT_KV):
        assert palette.color(a) == ALGORITHMS[a].style.color(theme)
    symbols = [series_symbol(a) for a in ALGORITHMS]
    assert len(set(symbols)) == len(symbols) and set(symbols) <= PYQTGRAPH_SYMBOLS


def test_each_fused_kernels_source_and_tiles_are_its_launchers():
    for a, info in ALGORITHMS.items():
        if info.launcher is not None:
            assert info.source == info.launcher.SOURCE
        if info.source:
            assert (KERNEL_DIR / info.source).is_file(), a
    assert ALGORITHMS[NAIVE].source == "softmax.cu"  # naive's one kernel of ours
    for d in (64, 128):
        config = AttentionConfig(head_dim=d)
        for algorithm, launcher in ((TILED_MMA, flash_mma), (TILED_WGMMA, flash_wgmma)):
            launch = launcher.default_launch(d)
            assert tile_shape(config, algorithm) == (launch.block_m, launch.block_n)
    for d in flash_ws.SUPPORTED_HEAD_DIMS:
        launch = flash_ws.default_launch(d)
        assert tile_shape(AttentionConfig(head_dim=d), TILED_WS) == (launch.block_m, launch.block_n)
    config = AttentionConfig(block_m=32, block_n=128)
    assert tile_shape(config, TILED) == (32, 128)


def test_the_lanes_show_the_registrys_sources():
    assert {a: ALGORITHMS[a].source for a in (*single_kernel_fused(), NAIVE)} == SOURCE_FILES


def test_the_speed_order_is_the_registrys_everywhere():
    assert fastest_fused_first() == (TILED_WS, TILED_WGMMA, TILED_MMA, TILED)
    assert fastest_fused_first() == FUSED_KERNELS
    assert fastest_fused([TILED, TILED_MMA, TILED_WGMMA]) == TILED_WGMMA
    # split-KV runs only the decode pass: ticked for it, drawn only there
    assert default_checked([NAIVE, TILED, TILED_MMA, TILED_WS]) == (NAIVE, TILED_WS, RING, SPLIT_KV)


def test_the_roof_and_the_rescale_are_the_registrys():
    config = AttentionConfig(seq_len=1024)
    assert [a for a in ALGORITHMS if issues_mma_sync(a)] == [TILED_MMA]
    assert issues_mma_sync("sdpa_flash") and not issues_mma_sync("sdpa_cudnn")
    assert compute_roof(H200, TILED_MMA, TENSOR) == MMA
    assert compute_roof(H200, TILED_WS, TENSOR) == TENSOR
    assert matmul_unit(config, TILED) == FP32 and matmul_unit(config, TILED_WS) == TENSOR
    assert ALGORITHMS[TILED].matmul == FP32_CORES and ALGORITHMS[TILED_WGMMA].matmul == WGMMA
    eager = algorithm_cost(config, TILED).kernels[0].exps
    lazy = algorithm_cost(config.with_(block_m=128, block_n=128), TILED_MMA).kernels[0].exps
    assert ALGORITHMS[TILED].rescale == EAGER and ALGORITHMS[TILED_MMA].rescale == LAZY
    assert eager > lazy == config.bh * 1024 * 1024  # one exponential per score, no rescales


def test_traces_and_backward_kernels_are_the_registrys():
    assert TRACEABLE == (NAIVE, TILED, TILED_MMA, TILED_WS)
    assert [a for a, i in ALGORITHMS.items() if i.has_backward] == [NAIVE, TILED_MMA]


def test_a_new_registry_entry_is_scheduled_costed_and_ranked(monkeypatch):
    """What once took an edit in the schedule (KeyError for an unknown id), the roofline and
    the speed orders takes the entry alone."""
    demo = replace(ALGORITHMS[TILED_MMA], id="tiled_demo", label="demo", speed_rank=-1)
    monkeypatch.setitem(ALGORITHMS, "tiled_demo", demo)
    config = AttentionConfig(seq_len=512)
    schedule = build_schedule(config, "tiled_demo")
    assert schedule.totals() == build_schedule(config, TILED_MMA).totals()
    assert algorithm_cost(config, "tiled_demo").flops == algorithm_cost(config, TILED_MMA).flops
    assert compute_roof(H200, "tiled_demo", TENSOR) == MMA
    assert fastest_fused_first()[0] == "tiled_demo"
    assert "tiled_demo" in single_kernel_fused()
    assert ALGORITHMS["tiled_demo"].matmul == MMA_SYNC
