"""The cost model of the backward pass and the training step, checked against figures worked
out by hand, and the L-layer stack of saved activations."""

from __future__ import annotations

import pytest

from gpu.algorithms import NAIVE, TILED, TILED_MMA, dq_pass_tile_shape
from gpu.config import BACKWARD, FORWARD, STEP, AttentionConfig
from gpu.model.backward_cost import (
    DETERMINISTIC_BACKWARD_KERNELS,
    FUSED_BACKWARD_KERNELS,
    NAIVE_BACKWARD_KERNELS,
    backward_useful_flops,
    fused_backward_kernel_names,
    recompute_flops,
    saved_activation_bytes,
    step_peak_bytes,
)
from gpu.model.costmodel import (
    DEFAULT_GPU,
    GPUS,
    algorithm_cost,
    compulsory_cost,
    l2_aware_cost,
    traffic_band,
)
from gpu.model.layer_stack import PRESETS, layer_stack, training_wall_seq_len

# B=1, h=2, N=256, d=64, fp16: one of Q, K, V, O is 2·256·64·2 = 65,536 B; S or P 262,144 B.
SMALL = AttentionConfig(seq_len=256, heads=2, head_dim=64, block_m=64, block_n=128)
MAT, NN = 65_536, 262_144


def _kernels(config, algorithm):
    return {k.name: k for k in algorithm_cost(config, algorithm).kernels}


def test_the_backward_does_twice_the_forwards_useful_work():
    cfg = SMALL.with_(pass_=BACKWARD)
    assert backward_useful_flops(cfg) == 8 * 2 * 256 * 256 * 64
    assert backward_useful_flops(cfg) == 2 * algorithm_cost(SMALL, NAIVE).flops
    assert backward_useful_flops(cfg.with_(causal=True)) == backward_useful_flops(cfg) // 2


@pytest.mark.parametrize("algorithm", [NAIVE, TILED, TILED_MMA])
def test_the_step_counts_forward_and_backward_useful_flops(algorithm):
    step = algorithm_cost(SMALL.with_(pass_=STEP), algorithm)
    assert step.flops == 12 * 2 * 256 * 256 * 64  # 4 forward + 8 backward · B·h·N²·d
    assert algorithm_cost(SMALL.with_(pass_=BACKWARD), algorithm).flops == 8 * 2 * 256 * 256 * 64


def test_naive_backward_runs_four_gemms_and_our_softmax_backward():
    ks = _kernels(SMALL.with_(pass_=BACKWARD), NAIVE)
    assert tuple(ks) == NAIVE_BACKWARD_KERNELS
    for name in ("bwd_dV_gemm", "bwd_dP_gemm", "bwd_dQ_gemm", "bwd_dK_gemm"):
        assert ks[name].flops == 2 * 2 * 256 * 256 * 64
    assert ks["softmax_bwd"].flops == 0 and ks["softmax_bwd"].exps == 0
    assert recompute_flops(SMALL.with_(pass_=BACKWARD), NAIVE) == 0


def test_naive_backward_bytes_by_hand():
    ks = _kernels(SMALL.with_(pass_=BACKWARD), NAIVE)
    # dV = Pᵀ dO with 128×128 output tiles: one column tile reads all of P, two row tiles
    # read dO twice; writes dV.
    assert ks["bwd_dV_gemm"].bytes_read == NN + 2 * MAT
    assert ks["bwd_dV_gemm"].bytes_written == MAT
    # dP = dO Vᵀ: two row tiles × two column tiles re-read dO and V twice each; dP written.
    assert ks["bwd_dP_gemm"].bytes_read == 2 * MAT + 2 * MAT
    assert ks["bwd_dP_gemm"].bytes_written == NN
    # The softmax backward reads P and dP once (a row of both fits in shared memory).
    assert ks["softmax_bwd"].bytes_read == 2 * NN
    assert ks["softmax_bwd"].bytes_written == NN


def test_the_fused_backward_recomputes_s_a_fifth_product():
    cfg = SMALL.with_(pass_=BACKWARD)
    ks = _kernels(cfg, TILED)
    assert tuple(ks) == FUSED_BACKWARD_KERNELS
    assert ks["flash_bwd"].flops == 10 * 2 * 256 * 256 * 64
    assert recompute_flops(cfg, TILED) == 2 * 2 * 256 * 256 * 64
    assert ks["flash_bwd"].exps == 2 * 256 * 256  # P_ij rebuilt: one exponential per score
    cost = algorithm_cost(cfg, TILED)
    assert cost.executed_flops - cost.flops == recompute_flops(cfg, TILED)


def test_causal_fused_backward_skips_queries_before_each_key_tile():
    cfg = SMALL.with_(pass_=BACKWARD, causal=True)
    # Key tile 0 (keys 0..127) sees all 256 queries; key tile 1 (128..255) the query tiles
    # from row 128 on: 128 queries.
    pairs = 256 * 128 + 128 * 128
    assert _kernels(cfg, TILED)["flash_bwd"].flops == 2 * 10 * pairs * 64


def test_fused_backward_bytes_by_hand():
    ks = _kernels(SMALL.with_(pass_=BACKWARD), TILED)
    rows, acc = 2 * 256, 2 * 256 * 64 * 4  # rows of all heads; the fp32 dQ accumulator
    assert ks["flash_bwd_preprocess"].bytes_read == 2 * MAT + 2 * rows * 4  # dO, O; m, l
    # The logsumexp and D per row, and the zeroed dQ accumulator.
    assert ks["flash_bwd_preprocess"].bytes_written == 2 * rows * 4 + acc
    # Two key tiles: each reads its K_j, V_j once and streams all queries: Q, dO, the
    # logsumexp and D, and reads and writes the dQ accumulator once per visit.
    assert ks["flash_bwd"].bytes_read == 2 * MAT + 2 * (2 * MAT + 2 * rows * 4 + acc)
    assert ks["flash_bwd"].bytes_written == 2 * MAT + 2 * acc
    assert ks["flash_bwd_dq_convert"].bytes_read == acc
    assert ks["flash_bwd_dq_convert"].bytes_written == MAT


def test_naive_keeps_p_and_materializes_dp_and_ds_at_its_peak():
    # Q, K, V, O, dO, dQ, dK, dV and three N×N matrices: P, dP, dS.
    assert step_peak_bytes(SMALL, NAIVE) == 8 * MAT + 3 * NN
    assert algorithm_cost(SMALL.with_(pass_=STEP), NAIVE).peak_bytes == 8 * MAT + 3 * NN
    assert algorithm_cost(SMALL.with_(pass_=BACKWARD), NAIVE).peak_bytes == 8 * MAT + 3 * NN


def test_the_fused_step_keeps_row_statistics_and_no_n_squared_matrix():
    rows = 2 * 256
    # Q, K, V, O, dO, dQ, dK, dV; m and l; the logsumexp and D; the fp32 dQ accumulator.
    assert step_peak_bytes(SMALL, TILED) == 8 * MAT + 4 * rows * 4 + rows * 64 * 4
    assert saved_activation_bytes(SMALL, TILED) == 4 * MAT + 2 * rows * 4
    assert saved_activation_bytes(SMALL, NAIVE) == 4 * MAT + NN


@pytest.mark.parametrize("algorithm", [NAIVE, TILED_MMA])
def test_a_step_is_the_forward_then_the_backward(algorithm):
    fwd = algorithm_cost(SMALL, algorithm)
    bwd = algorithm_cost(SMALL.with_(pass_=BACKWARD), algorithm)
    step = algorithm_cost(SMALL.with_(pass_=STEP), algorithm)
    assert step.kernels == fwd.kernels + bwd.kernels
    assert step.hbm_bytes == fwd.hbm_bytes + bwd.hbm_bytes
    assert step.config.pass_ == STEP and fwd.config.pass_ == FORWARD


@pytest.mark.parametrize("algorithm", [NAIVE, TILED, TILED_MMA])
@pytest.mark.parametrize("seq_len", [256, 4096, 32768])
@pytest.mark.parametrize("causal", [False, True])
def test_backward_traffic_compulsory_le_l2_aware_le_no_reuse(algorithm, seq_len, causal):
    cfg = AttentionConfig(seq_len=seq_len, causal=causal, pass_=STEP)
    band = traffic_band(cfg, algorithm, GPUS[DEFAULT_GPU])
    for low, mid, high in zip(
        band.compulsory.kernels, band.l2_aware.kernels, band.no_reuse.kernels, strict=True
    ):
        assert low.name == mid.name == high.name
        assert low.hbm_bytes <= mid.hbm_bytes <= high.hbm_bytes, low.name
        assert low.flops == mid.flops == high.flops


def test_compulsory_backward_moves_every_tensor_once():
    cfg = SMALL.with_(pass_=BACKWARD)
    ks = {k.name: k for k in compulsory_cost(cfg, TILED).kernels}
    rows, acc = 2 * 256, 2 * 256 * 64 * 4
    assert ks["flash_bwd"].bytes_read == 4 * MAT + 2 * rows * 4 + acc  # Q, K, V, dO, lse, D
    assert ks["flash_bwd"].bytes_written == 2 * MAT + acc  # dK, dV, dQ accumulated once
    naive = {k.name: k for k in compulsory_cost(cfg, NAIVE).kernels}
    assert naive["bwd_dV_gemm"].bytes_read == NN + MAT
    assert naive["softmax_bwd"].bytes_read == 2 * NN


def test_a_head_whose_key_tiles_fit_one_wave_reads_q_and_do_from_dram_once():
    cfg = AttentionConfig(seq_len=4096, pass_=BACKWARD)  # 32 key tiles per head, 132 SMs
    gpu = GPUS[DEFAULT_GPU]
    mid = {k.name: k for k in l2_aware_cost(cfg, TILED_MMA, gpu).kernels}
    low = {k.name: k for k in compulsory_cost(cfg, TILED_MMA).kernels}
    assert mid["flash_bwd"].bytes_read == low["flash_bwd"].bytes_read


def test_saved_activations_stack_over_layers_and_the_last_layers_backward_comes_on_top():
    cfg = AttentionConfig(seq_len=2048, pass_=STEP)
    one = layer_stack(cfg, NAIVE, 1)
    twelve = layer_stack(cfg, NAIVE, 12)
    assert one.peak_bytes == step_peak_bytes(cfg, NAIVE)
    assert twelve.saved_total == 12 * one.saved_per_layer
    assert twelve.peak_bytes == 12 * one.saved_per_layer + one.working
    p = cfg.bh * 2048 * 2048 * 2
    assert twelve.saved_total - layer_stack(cfg, TILED_MMA, 12).saved_total == 12 * (
        p - 2 * cfg.bh * 2048 * 4
    )


def test_the_wall_for_l_layers_is_the_first_n_that_does_not_fit():
    cfg = PRESETS["gpt2-small"].config()
    budget = GPUS[DEFAULT_GPU].memory_bytes
    wall = training_wall_seq_len(cfg, NAIVE, 12, budget)
    assert layer_stack(cfg.with_(seq_len=wall), NAIVE, 12).peak_bytes > budget
    assert layer_stack(cfg.with_(seq_len=wall - 1), NAIVE, 12).peak_bytes <= budget
    # More layers, the wall comes sooner; the fused kernel's wall is far beyond naive's.
    assert training_wall_seq_len(cfg, NAIVE, 48, budget) < wall
    fused = training_wall_seq_len(cfg, TILED_MMA, 12, budget)
    assert fused is None or fused > 10 * wall


def test_presets_have_the_models_shapes():
    gpt2, llama = PRESETS["gpt2-small"], PRESETS["llama-7b"]
    assert (gpt2.layers, gpt2.heads, gpt2.head_dim) == (12, 12, 64)
    assert (llama.layers, llama.heads, llama.head_dim) == (32, 32, 128)
    assert llama.config().pass_ == STEP


@pytest.mark.parametrize("layers", [0, -1, 1.5, True, 5000])
def test_a_bad_layer_count_names_the_range(layers):
    with pytest.raises(ValueError, match="layers"):
        layer_stack(SMALL, NAIVE, layers)


@pytest.mark.parametrize("pass_", [FORWARD, BACKWARD, STEP])
@pytest.mark.parametrize("causal", [False, True])
def test_the_useful_flops_of_a_pass_are_the_models(pass_, causal):
    from gpu.model.costmodel import pass_useful_flops

    cfg = SMALL.with_(pass_=pass_, causal=causal)
    assert pass_useful_flops(cfg) == algorithm_cost(cfg, NAIVE).flops
    assert pass_useful_flops(cfg) == algorithm_cost(cfg, TILED).flops


# --------------------------------------------------------------------------------------------
# Deterministic dQ: flash_bwd without dQ, then the dQ pass

DET = SMALL.with_(pass_=BACKWARD, deterministic=True)
UNIT = 2 * 2 * 256 * 256 * 64  # one product over every (query, key) pair of both heads


def test_the_deterministic_backward_runs_the_dq_pass_in_place_of_the_conversion():
    assert tuple(_kernels(DET, TILED)) == DETERMINISTIC_BACKWARD_KERNELS
    assert tuple(_kernels(DET, TILED_MMA)) == DETERMINISTIC_BACKWARD_KERNELS
    assert fused_backward_kernel_names(DET) == DETERMINISTIC_BACKWARD_KERNELS
    assert fused_backward_kernel_names(SMALL.with_(pass_=BACKWARD)) == FUSED_BACKWARD_KERNELS
    # Naive's backward has no atomics: the mode changes none of its kernels.
    assert _kernels(DET, NAIVE) == _kernels(SMALL.with_(pass_=BACKWARD), NAIVE)


def test_the_dq_pass_rebuilds_s_and_dp_and_does_one_useful_product():
    ks = _kernels(DET, TILED)
    assert ks["flash_bwd"].flops == 4 * UNIT  # S (recompute), dV, dP, dK: no dQ
    assert ks["flash_bwd"].recomputed_flops == UNIT
    assert ks["flash_bwd_dq"].flops == 3 * UNIT  # S and dP again, then dQ
    assert ks["flash_bwd_dq"].recomputed_flops == 2 * UNIT
    assert ks["flash_bwd_dq"].exps == 2 * 256 * 256  # P_ij rebuilt once more
    # Two more products than the atomic backward's five, the same useful eight·B·h·N²·d.
    det, atomic = algorithm_cost(DET, TILED), algorithm_cost(SMALL.with_(pass_=BACKWARD), TILED)
    assert det.executed_flops == 7 * UNIT and atomic.executed_flops == 5 * UNIT
    assert det.flops == atomic.flops == 4 * UNIT
    assert recompute_flops(DET, TILED) == 3 * UNIT == det.executed_flops - det.flops


def test_deterministic_backward_bytes_by_hand():
    ks = _kernels(DET, TILED)
    rows = 2 * 256
    # No accumulator to clear, read or write.
    assert ks["flash_bwd_preprocess"].bytes_written == 2 * rows * 4
    assert ks["flash_bwd"].bytes_read == 2 * MAT + 2 * (2 * MAT + 2 * rows * 4)
    assert ks["flash_bwd"].bytes_written == 2 * MAT
    # The dQ pass (64-row query tiles here: four per head) reads Q_i, dO_i, lse_i and D_i once
    # and every K_j, V_j once per query tile; it writes dQ once.
    assert ks["flash_bwd_dq"].bytes_read == 2 * MAT + 2 * rows * 4 + 4 * 2 * MAT
    assert ks["flash_bwd_dq"].bytes_written == MAT
    low = {k.name: k for k in compulsory_cost(DET, TILED).kernels}
    assert low["flash_bwd_dq"].bytes_read == 4 * MAT + 2 * rows * 4
    assert low["flash_bwd"].bytes_written == 2 * MAT


def test_causal_dq_pass_visits_key_tiles_up_to_the_diagonal():
    ks = _kernels(DET.with_(causal=True), TILED)
    # Query tiles of 64 rows, key tiles of 128: tiles 0 and 1 see key tile 0 (128 keys),
    # tiles 2 and 3 both key tiles (256 keys).
    pairs = 64 * (128 + 128 + 256 + 256)
    assert ks["flash_bwd_dq"].flops == 2 * 6 * pairs * 64
    assert ks["flash_bwd_dq"].exps == 2 * pairs


def test_the_deterministic_step_holds_no_dq_accumulator():
    rows = 2 * 256
    atomic = step_peak_bytes(SMALL.with_(pass_=STEP), TILED)
    det = step_peak_bytes(SMALL.with_(pass_=STEP, deterministic=True), TILED)
    assert atomic - det == rows * 64 * 4
    assert algorithm_cost(DET, TILED).peak_bytes == det


@pytest.mark.parametrize("seq_len", [256, 4096, 32768])
@pytest.mark.parametrize("causal", [False, True])
def test_deterministic_traffic_compulsory_le_l2_aware_le_no_reuse(seq_len, causal):
    cfg = AttentionConfig(seq_len=seq_len, causal=causal, pass_=STEP, deterministic=True)
    band = traffic_band(cfg, TILED_MMA, GPUS[DEFAULT_GPU])
    names = [k.name for k in band.l2_aware.kernels]
    assert names == ["flash_fwd", *DETERMINISTIC_BACKWARD_KERNELS]
    for low, mid, high in zip(
        band.compulsory.kernels, band.l2_aware.kernels, band.no_reuse.kernels, strict=True
    ):
        assert low.hbm_bytes <= mid.hbm_bytes <= high.hbm_bytes, low.name


def test_a_head_whose_query_tiles_fit_one_wave_reads_k_and_v_for_the_dq_pass_once():
    cfg = AttentionConfig(seq_len=4096, pass_=BACKWARD, deterministic=True)  # 32 query tiles
    gpu = GPUS[DEFAULT_GPU]
    mid = {k.name: k for k in l2_aware_cost(cfg, TILED_MMA, gpu).kernels}
    low = {k.name: k for k in compulsory_cost(cfg, TILED_MMA).kernels}
    assert mid["flash_bwd_dq"].bytes_read == low["flash_bwd_dq"].bytes_read
    assert dq_pass_tile_shape(cfg, TILED_MMA) == (128, 64)


def test_on_the_roofline_the_dq_pass_is_useful_for_its_dq_product_alone():
    from gpu.model.roofline import explain

    verdict = explain(DET, [TILED_MMA], GPUS[DEFAULT_GPU]).algorithm(TILED_MMA)
    assert verdict.kernel("flash_bwd_dq").flops == UNIT
    assert verdict.kernel("flash_bwd_dq").executed_flops == 3 * UNIT
    assert verdict.kernel("flash_bwd").flops == 3 * UNIT  # dV, dP, dK
    assert sum(k.flops for k in verdict.kernels) == verdict.flops == 4 * UNIT
