"""The cost model gives the lesson's numbers, and its parts add up."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA
from gpu.config import AttentionConfig
from gpu.model.costmodel import (
    DEFAULT_GPU,
    FP32,
    GPUS,
    TENSOR,
    algorithm_cost,
    attention_matrix_bytes,
    compulsory_cost,
    gpu_for_device_name,
    l2_aware_cost,
    matrix_bytes,
    naive_oom_seq_len,
    naive_peak_bytes,
    softmax_reads_s_once,
    stats_bytes,
    tiled_peak_bytes,
    traffic_band,
    useful_flops,
    with_measured_l2,
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


# ---------------------------------------------------------------------------------------------
# The traffic band: compulsory ≤ L2-aware ≤ no reuse


@settings(max_examples=60, deadline=None)
@given(
    seq_len=st.integers(1, 140_000),
    heads=st.integers(1, 32),
    head_dim=st.sampled_from([32, 64, 128]),
    dtype=st.sampled_from(["fp16", "bf16", "fp32"]),
    causal=st.booleans(),
    algorithm=st.sampled_from([NAIVE, TILED, TILED_MMA, TILED_WGMMA]),
    gpu=st.sampled_from(sorted(GPUS)),
)
def test_compulsory_le_l2_aware_le_no_reuse_per_kernel(
    seq_len, heads, head_dim, dtype, causal, algorithm, gpu
):
    cfg = AttentionConfig(seq_len=seq_len, heads=heads, head_dim=head_dim, dtype=dtype,
                          causal=causal)  # fmt: skip
    band = traffic_band(cfg, algorithm, GPUS[gpu])
    kernels = zip(band.compulsory.kernels, band.l2_aware.kernels, band.no_reuse.kernels,
                  strict=True)  # fmt: skip
    for low, mid, high in kernels:
        assert low.bytes_read <= mid.bytes_read <= high.bytes_read, (low.name, low, mid, high)
        assert low.bytes_written == mid.bytes_written == high.bytes_written
        assert low.flops == mid.flops == high.flops and low.exps == high.exps


def test_compulsory_traffic_of_a_fused_kernel_is_q_k_v_read_and_o_m_l_written_once():
    cfg = AttentionConfig(seq_len=3000, heads=5, head_dim=64, causal=True)
    (kernel,) = compulsory_cost(cfg, TILED_MMA).kernels
    assert kernel.bytes_read == 3 * matrix_bytes(cfg)
    assert kernel.bytes_written == matrix_bytes(cfg) + stats_bytes(cfg)


def test_compulsory_traffic_of_naive_counts_s_and_p_once_each_way():
    cfg = AttentionConfig(seq_len=1000, heads=3)
    s, qkvo = attention_matrix_bytes(cfg), matrix_bytes(cfg)
    kernels = {k.name: k for k in compulsory_cost(cfg, NAIVE).kernels}
    assert (kernels["gemm_qk"].bytes_read, kernels["gemm_qk"].bytes_written) == (2 * qkvo, s)
    assert (kernels["softmax"].bytes_read, kernels["softmax"].bytes_written) == (s, s)
    assert (kernels["gemm_pv"].bytes_read, kernels["gemm_pv"].bytes_written) == (s + qkvo, qkvo)


@pytest.mark.parametrize("algorithm", [TILED, TILED_MMA, TILED_WGMMA])
@pytest.mark.parametrize("seq_len", [4096, 16384])
def test_on_the_h200_every_k_v_re_read_hits_l2_at_the_lessons_sizes(algorithm, seq_len):
    """One head's K and V (1 MB at 4096, 4 MB at 16384) and the heads a wave touches fit in the
    usable half of the 60 MiB L2: the estimate is the compulsory traffic, as the DRAM counters
    of docs/TRACES.md show (19 MB and 76 MB read)."""
    cfg = AttentionConfig(seq_len=seq_len)
    h200 = GPUS[DEFAULT_GPU]
    assert (
        l2_aware_cost(cfg, algorithm, h200).hbm_bytes == compulsory_cost(cfg, algorithm).hbm_bytes
    )
    assert algorithm_cost(cfg, algorithm).hbm_bytes > 10 * compulsory_cost(cfg, algorithm).hbm_bytes


def test_a_head_that_outgrows_the_l2_pays_for_re_reads_across_waves():
    """At N = 131072 one head's K and V (33.5 MB) exceed the usable L2 and the head spans eight
    waves of blocks: some re-reads go to DRAM, far fewer than with no cache at all."""
    cfg = AttentionConfig(seq_len=131072)
    band = traffic_band(cfg, TILED_MMA, GPUS[DEFAULT_GPU])
    assert band.compulsory.hbm_bytes < band.l2_aware.hbm_bytes < band.no_reuse.hbm_bytes / 10


def test_a_small_l2_leaves_more_traffic_than_a_large_one():
    cfg = AttentionConfig(seq_len=65536, heads=4)
    small = l2_aware_cost(cfg, TILED_MMA, GPUS["RTX 3060 12 GB"]).hbm_bytes
    large = l2_aware_cost(cfg, TILED_MMA, GPUS[DEFAULT_GPU]).hbm_bytes
    assert small > large


def test_softmax_reads_s_twice_when_a_row_outgrows_shared_memory():
    long_rows = AttentionConfig(seq_len=120_000, heads=1)
    short_rows = long_rows.with_(seq_len=100_000)
    assert not softmax_reads_s_once(long_rows) and softmax_reads_s_once(short_rows)
    softmax = algorithm_cost(long_rows, NAIVE).kernel("softmax")
    assert softmax.bytes_read == 2 * attention_matrix_bytes(long_rows)
    # on a device with more shared memory per block the row fits again
    roomy = algorithm_cost(long_rows, NAIVE, smem_limit_bytes=1 << 20).kernel("softmax")
    assert roomy.bytes_read == attention_matrix_bytes(long_rows)


def test_exponentials_are_one_per_score_for_the_tensor_core_kernels_and_two_for_naive():
    cfg = AttentionConfig(seq_len=1024, heads=2)
    scores = 2 * 1024 * 1024
    assert algorithm_cost(cfg, TILED_MMA).exps == scores
    assert algorithm_cost(cfg, NAIVE).kernel("softmax").exps == 2 * scores
    assert algorithm_cost(cfg, TILED).exps > scores  # plus one rescale factor per row and tile


def test_the_readable_kernel_multiplies_on_fp32_cores_and_the_others_on_tensor_cores():
    cfg = AttentionConfig(seq_len=512)
    assert algorithm_cost(cfg, TILED).kernels[0].unit == FP32
    assert algorithm_cost(cfg, TILED_MMA).kernels[0].unit == TENSOR
    assert algorithm_cost(cfg, NAIVE).kernel("gemm_qk").unit == TENSOR
    assert algorithm_cost(cfg.with_(dtype="fp32"), NAIVE).kernel("gemm_qk").unit == FP32


# ---------------------------------------------------------------------------------------------
# The GPU table


def test_gpu_memory_is_the_datasheets_decimal_gb_and_the_labels_say_gb():
    h200 = GPUS[DEFAULT_GPU]
    assert h200.memory_bytes == 141 * 10**9
    # the device itself reports 150,109,880,320 B usable: more than the datasheet's 141 GB
    assert h200.memory_bytes < 150_109_880_320
    assert h200.memory_label == "141 GB" and h200.label == "H200 SXM, 141 GB"
    for name, spec in GPUS.items():
        assert spec.memory_label == name.split()[-2] + " GB"
        assert "GiB" not in spec.label


def test_every_gpu_knows_its_l2_fp32_peak_and_exponential_throughput():
    for spec in GPUS.values():
        assert spec.l2_bytes > 0 and spec.fp32_flops > 0 and spec.clock_hz > 0, spec.name
        assert spec.xu_ops_s == 16 * spec.sms * spec.clock_hz
        assert spec.l2_source
        assert (
            spec.l2_bandwidth_bytes_s is None or spec.l2_bandwidth_bytes_s > spec.bandwidth_bytes_s
        )


def test_hopper_roofs_are_per_clock_rates_at_the_boost_clock():
    """16 exponentials and 4096 wgmma FLOPs per clock per SM at 1.98 GHz (FlashAttention-3's
    3.9 TFLOPS of special functions is the same rate at 1.83 GHz)."""
    h200 = GPUS[DEFAULT_GPU]
    assert h200.clock_hz == 1.98e9 and "1.98 GHz" in h200.clock_source
    assert h200.xu_ops_s == pytest.approx(16 * 132 * 1.98e9)
    assert h200.tensor_flops == pytest.approx(4096 * 132 * 1.98e9)
    assert h200.mma_sync_flops == pytest.approx(h200.tensor_flops * 2 / 3)
    assert h200.fp32_peak_flops == pytest.approx(256 * 132 * 1.98e9)
    assert pytest.approx(3.9e12, rel=0.02) == 16 * 132 * 1.83e9


def test_a_measured_l2_bandwidth_replaces_the_tables():
    h200 = GPUS[DEFAULT_GPU]
    measured = with_measured_l2(h200, 9.5e12, "measured")
    assert measured.l2_bandwidth_bytes_s == 9.5e12 and measured.l2_source == "measured"
    assert with_measured_l2(h200, None, "x") is h200
