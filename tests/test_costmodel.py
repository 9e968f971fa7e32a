"""The cost model gives the lesson's numbers, and its parts add up."""

from __future__ import annotations

import pytest

from gpu.algorithms import NAIVE, TILED, TILED_MMA
from gpu.config import AttentionConfig
from gpu.costmodel import (
    GPUS,
    algorithm_cost,
    attention_matrix_bytes,
    gpu_for_device_name,
    naive_oom_seq_len,
    naive_peak_bytes,
    tiled_peak_bytes,
    useful_flops,
)


@pytest.mark.parametrize(
    ("n", "expected"),
    [(512, 6_291_456), (4096, 402_653_184), (32768, 25_769_803_776)],
)
def test_one_attention_matrix_for_12_fp16_heads_is_the_lessons_figure(n, expected):
    assert attention_matrix_bytes(AttentionConfig(seq_len=n, heads=12, dtype="fp16")) == expected


def test_naive_peak_holds_q_k_v_o_and_two_n_squared_matrices():
    cfg = AttentionConfig(seq_len=1000, heads=3, head_dim=32, batch=2, dtype="fp32")
    qkvo = 4 * 2 * 3 * 1000 * 32 * 4
    assert naive_peak_bytes(cfg) == qkvo + 2 * (2 * 3 * 1000 * 1000 * 4)


def test_tiled_peak_is_linear_in_n_with_fp32_row_stats():
    cfg = AttentionConfig(seq_len=1000, heads=3, head_dim=32, batch=2, dtype="fp16")
    assert tiled_peak_bytes(cfg) == 4 * 2 * 3 * 1000 * 32 * 2 + 2 * 2 * 3 * 1000 * 4
    doubled = tiled_peak_bytes(cfg.with_(seq_len=2000))
    assert doubled == 2 * tiled_peak_bytes(cfg)


def test_flops_are_four_b_h_n_squared_d_and_half_when_causal():
    cfg = AttentionConfig(seq_len=256, heads=2, head_dim=64, batch=3)
    assert useful_flops(cfg) == 4 * 3 * 2 * 256 * 256 * 64
    assert useful_flops(cfg.with_(causal=True)) == useful_flops(cfg) // 2


def test_naive_softmax_reads_s_once_and_writes_p_once():
    cfg = AttentionConfig(seq_len=777, heads=5)
    softmax = algorithm_cost(cfg, NAIVE).kernels[1]
    assert softmax.name == "softmax"
    assert softmax.bytes_read == softmax.bytes_written == attention_matrix_bytes(cfg)


def test_naive_traffic_grows_as_n_squared_and_tiled_traffic_far_slower_at_long_n():
    small, large = AttentionConfig(seq_len=4096), AttentionConfig(seq_len=16384)
    naive_ratio = algorithm_cost(large, NAIVE).hbm_bytes / algorithm_cost(small, NAIVE).hbm_bytes
    assert 15 < naive_ratio <= 16.5
    assert algorithm_cost(large, TILED).hbm_bytes < algorithm_cost(large, NAIVE).hbm_bytes / 2


def test_causal_tiled_skips_tiles_above_the_diagonal():
    cfg = AttentionConfig(seq_len=4096)
    full = algorithm_cost(cfg, TILED)
    causal = algorithm_cost(cfg.with_(causal=True), TILED)
    assert causal.bytes_read < 0.6 * full.bytes_read
    assert causal.executed_flops < 0.6 * full.executed_flops


def test_tiled_traffic_shrinks_with_a_larger_query_tile():
    cfg = AttentionConfig(seq_len=8192, block_m=32)
    assert (
        algorithm_cost(cfg.with_(block_m=128), TILED).hbm_bytes
        < algorithm_cost(cfg, TILED).hbm_bytes
    )


def test_tensor_core_kernel_is_modeled_with_its_own_tiles():
    cfg = AttentionConfig(seq_len=4096, block_m=16, block_n=16)
    assert algorithm_cost(cfg, TILED_MMA).hbm_bytes != algorithm_cost(cfg, TILED).hbm_bytes


def test_naive_is_memory_bound_and_tiled_has_higher_intensity_on_h200():
    cfg = AttentionConfig(seq_len=16384)
    h200 = GPUS["H200 SXM 141 GB"]
    naive, tiled = algorithm_cost(cfg, NAIVE), algorithm_cost(cfg, TILED)
    assert naive.arithmetic_intensity < h200.ridge_flops_per_byte
    assert tiled.arithmetic_intensity > naive.arithmetic_intensity


def test_oom_sequence_length_is_where_the_peak_first_exceeds_the_budget():
    cfg = AttentionConfig(heads=12)
    budget = 24 * 10**9
    n = naive_oom_seq_len(cfg, budget)
    assert naive_peak_bytes(cfg.with_(seq_len=n)) > budget
    assert naive_peak_bytes(cfg.with_(seq_len=n - 1)) <= budget


def test_every_gpu_in_the_table_has_positive_figures_and_a_source():
    for spec in GPUS.values():
        assert spec.memory_bytes > 0 and spec.bandwidth_bytes_s > 0
        assert spec.fp16_tensor_flops > 0 and spec.smem_per_sm_bytes > 0 and spec.source


def test_device_names_map_to_table_entries():
    assert gpu_for_device_name("NVIDIA H200").name.startswith("H200")
    assert gpu_for_device_name("NVIDIA A100-SXM4-80GB").name == "A100 SXM 80 GB"
    assert gpu_for_device_name("Some Laptop GPU") is None
