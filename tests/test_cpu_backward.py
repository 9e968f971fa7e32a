"""The NumPy backwards: exact against float64, naive really holding P, dP and dS, tiled holding
no N×N array, and the CPU backend timing the backward and the training step per kernel."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.algorithms import NAIVE, TILED
from gpu.backends.array_meter import measure_peak
from gpu.backends.backend import RunOptions
from gpu.backends.cpu_backend import CpuBackend, random_inputs
from gpu.backends.cpu_backward import flash_backward, random_grad_output, reference_backward
from gpu.config import BACKWARD, STEP, AttentionConfig
from gpu.errors import RunCancelled
from gpu.model.backward_cost import (
    DETERMINISTIC_BACKWARD_KERNELS,
    FUSED_BACKWARD_KERNELS,
    NAIVE_BACKWARD_KERNELS,
    dq_accumulator_bytes,
    step_peak_bytes,
)
from gpu.model.costmodel import attention_matrix_bytes
from gpu.results import ERROR_TOLERANCE


def _dense_backward(q, k, v, do, causal):
    """The textbook formulas on whole float64 matrices, independent of the backend's chunks."""
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    n, d = q.shape[-2:]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    if causal:
        s = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ k / np.sqrt(d)
    dk = np.swapaxes(ds, -1, -2) @ q / np.sqrt(d)
    dv = np.swapaxes(p, -1, -2) @ do
    return p @ v, dq, dk, dv


def test_the_float64_reference_is_the_gradient_of_the_attention_output():
    """Finite differences of loss = Σ O ∘ dO agree with the reference's dQ, dK and dV."""
    rng = np.random.default_rng(3)
    q, k, v, do = (rng.standard_normal((1, 1, 6, 4)) for _ in range(4))
    _, dq, dk, dv = reference_backward(q, k, v, do, causal=True)

    def loss(q, k, v):
        return float((_dense_backward(q, k, v, do, True)[0] * do).sum())

    eps = 1e-6
    for grad, which in ((dq, 0), (dk, 1), (dv, 2)):
        args = [q, k, v]
        for idx in [(0, 0, 1, 2), (0, 0, 5, 3), (0, 0, 3, 0)]:
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[which][idx] += eps
            minus[which][idx] -= eps
            numeric = (loss(*plus) - loss(*minus)) / (2 * eps)
            assert numeric == pytest.approx(grad[idx], abs=1e-6)


@pytest.mark.parametrize("algorithm", [NAIVE, TILED])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq_len", [113, 128, 200])
def test_both_backwards_match_float64_in_fp32(algorithm, causal, seq_len):
    cfg = AttentionConfig(
        seq_len=seq_len, heads=2, head_dim=32, dtype="fp32", causal=causal, pass_=STEP
    )
    backend = CpuBackend()
    result = backend.run(cfg, algorithm, RunOptions(warmup=0, repeats=1, check=True))
    assert result.max_abs_error is not None and result.max_abs_error < 1e-5
    q, k, v = random_inputs(cfg)
    do = random_grad_output(cfg)
    o, dq, dk, dv = _dense_backward(q, k, v, do, causal)
    ref = reference_backward(q, k, v, do, causal)
    for ours, dense in zip(ref, (o, dq, dk, dv), strict=True):
        np.testing.assert_allclose(ours, dense, atol=1e-10)


@pytest.mark.parametrize("algorithm", [NAIVE, TILED])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
def test_both_backwards_agree_with_float64_in_16_bits(algorithm, dtype, causal):
    cfg = AttentionConfig(
        seq_len=160, heads=2, head_dim=64, dtype=dtype, causal=causal, pass_=BACKWARD
    )
    result = CpuBackend().run(cfg, algorithm, RunOptions(warmup=0, repeats=1, check=True))
    assert result.agrees, (result.max_abs_error, ERROR_TOLERANCE[dtype])


def test_an_error_in_the_tiled_backward_would_show():
    """The check compares with float64 for real: a gradient off by one tile's worth fails."""
    cfg = AttentionConfig(seq_len=128, heads=1, head_dim=32, dtype="fp32")
    q, k, v = random_inputs(cfg)
    do = random_grad_output(cfg)
    o_ref, dq_ref, dk_ref, dv_ref = reference_backward(q, k, v, do, False)
    o = o_ref.astype(np.float32)
    m = np.zeros((1, 1, 128), np.float32)  # wrong statistics: P is not normalised
    l_sum = np.ones((1, 1, 128), np.float32)
    (dq, dk, dv), _ = flash_backward(cfg, q, k, v, o, m, l_sum, do)
    for ours, ref in ((dq, dq_ref), (dk, dk_ref), (dv, dv_ref)):
        assert np.max(np.abs(ours - ref)) > 0.1


@pytest.mark.parametrize(("pass_", "timed"), [(BACKWARD, 0), (STEP, 1)])
def test_the_backward_times_its_kernels_and_the_step_the_forwards_too(pass_, timed):
    cfg = AttentionConfig(seq_len=128, heads=2, head_dim=32, pass_=pass_)
    backend = CpuBackend()
    opts = RunOptions(warmup=0, repeats=2)
    naive = [k.name for k in backend.run(cfg, NAIVE, opts).kernel_times]
    tiled = [k.name for k in backend.run(cfg, TILED, opts).kernel_times]
    assert naive == ["gemm_qk", "softmax", "gemm_pv"][: 3 * timed] + list(NAIVE_BACKWARD_KERNELS)
    assert tiled == ["flash_fwd"][:timed] + list(FUSED_BACKWARD_KERNELS)


def test_naive_training_really_holds_p_dp_and_ds():
    cfg = AttentionConfig(seq_len=1024, heads=1, head_dim=32, pass_=STEP)
    result = CpuBackend().run(cfg, NAIVE, RunOptions(warmup=0, repeats=1))
    assert result.model_peak_bytes == step_peak_bytes(cfg, NAIVE)
    assert result.peak_bytes >= 3 * attention_matrix_bytes(cfg)
    assert result.peak_bytes >= result.model_peak_bytes


def test_the_tiled_backward_holds_no_n_by_n_matrix():
    cfg = AttentionConfig(seq_len=2048, heads=1, head_dim=32, pass_=STEP)
    result = CpuBackend().run(cfg, TILED, RunOptions(warmup=0, repeats=1))
    assert result.peak_bytes < attention_matrix_bytes(cfg) / 2
    assert result.peak_bytes >= result.model_peak_bytes


def test_the_tiled_backward_alone_allocates_only_its_gradients_and_tiles():
    cfg = AttentionConfig(seq_len=2048, heads=1, head_dim=32, dtype="fp32")
    q, k, v = random_inputs(cfg)
    do = random_grad_output(cfg)
    o = np.zeros_like(q)
    m = np.zeros((1, 1, 2048), np.float32)
    l_sum = np.ones((1, 1, 2048), np.float32)
    peak, _ = measure_peak(lambda: flash_backward(cfg, q, k, v, o, m, l_sum, do))
    one_matrix = q.nbytes
    # dQ, dK, dV, the fp32 dQ accumulator, the logsumexp and D, a few tiles, one head's upcasts.
    assert peak < 4 * one_matrix + 2 * 2048 * 4 + 3 * one_matrix


def test_a_training_step_over_the_budget_is_an_out_of_memory_result():
    cfg = AttentionConfig(seq_len=4096, heads=4, pass_=STEP)
    result = CpuBackend().run(cfg, NAIVE, RunOptions(budget_bytes=10**6))
    assert result.oom and "needs" in result.message
    assert result.model_peak_bytes == step_peak_bytes(cfg, NAIVE)


@pytest.mark.parametrize("algorithm", [NAIVE, TILED])
def test_a_cancelled_backward_stops(algorithm):
    calls = []

    def cancel() -> bool:
        calls.append(1)
        return len(calls) > 5

    cfg = AttentionConfig(seq_len=512, heads=4, head_dim=32, pass_=BACKWARD)
    with pytest.raises(RunCancelled):
        CpuBackend().run(cfg, algorithm, RunOptions(warmup=0, repeats=1, cancel=cancel))


def test_the_cpu_backend_runs_the_prefill_passes_of_both_algorithms_and_naive_decode():
    backend = CpuBackend()
    assert backend.passes(TILED) == ("forward", "backward", "step")
    assert backend.passes(NAIVE) == ("forward", "backward", "step", "decode")


# --------------------------------------------------------------------------------------------
# Deterministic dQ: the dQ pass in place of the accumulator


def _saved_forward(cfg):
    """Q, K, V, dO and what the tiled forward saves (O, m, l), from the float64 reference."""
    q, k, v = random_inputs(cfg)
    do = random_grad_output(cfg)
    n = q.shape[-2]
    s = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2) * cfg.scale
    if cfg.causal:
        s = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, s)
    m = s.max(-1)
    l_sum = np.exp(s - m[..., None]).sum(-1)
    o = reference_backward(q, k, v, do, cfg.causal)[0].astype(q.dtype)
    return q, k, v, do, o, m.astype(np.float32), l_sum.astype(np.float32)


@pytest.mark.parametrize("pass_", [BACKWARD, STEP])
def test_deterministic_backward_runs_the_dq_pass_instead_of_atomics(pass_):
    cfg = AttentionConfig(seq_len=128, heads=2, head_dim=32, pass_=pass_, deterministic=True)
    result = CpuBackend().run(cfg, TILED, RunOptions(warmup=0, repeats=1))
    names = [k.name for k in result.kernel_times]
    assert names == ["flash_fwd"][: int(pass_ == STEP)] + list(DETERMINISTIC_BACKWARD_KERNELS)
    assert "flash_bwd_dq_convert" not in names
    assert result.config.deterministic  # the result says which mode produced it


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("seq_len", "block_m", "block_n"), [(113, 64, 64), (200, 32, 64), (200, 64, 16)]
)
def test_the_deterministic_tiled_backward_matches_float64_in_fp32(
    causal, seq_len, block_m, block_n
):
    cfg = AttentionConfig(
        seq_len=seq_len, heads=2, head_dim=32, dtype="fp32", causal=causal, block_m=block_m,
        block_n=block_n, pass_=STEP, deterministic=True,
    )  # fmt: skip
    result = CpuBackend().run(cfg, TILED, RunOptions(warmup=0, repeats=1, check=True))
    assert result.max_abs_error is not None and result.max_abs_error < 1e-5


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_deterministic_tiled_backward_agrees_with_float64_in_16_bits(dtype, causal):
    cfg = AttentionConfig(
        seq_len=160, heads=2, head_dim=64, dtype=dtype, causal=causal, pass_=BACKWARD,
        deterministic=True,
    )  # fmt: skip
    result = CpuBackend().run(cfg, TILED, RunOptions(warmup=0, repeats=1, check=True))
    assert result.agrees, (result.max_abs_error, ERROR_TOLERANCE[dtype])


@pytest.mark.parametrize("causal", [False, True])
def test_only_dq_changes_with_the_deterministic_mode(causal):
    """dK and dV come from the same K/V pass, bit for bit; dQ from another summation order,
    equal to rounding."""
    atomic = AttentionConfig(
        seq_len=200, heads=2, head_dim=32, dtype="fp32", causal=causal, pass_=BACKWARD
    )
    det = atomic.with_(deterministic=True)
    saved = _saved_forward(atomic)
    (dq_a, dk_a, dv_a), _ = flash_backward(atomic, *saved[:3], *saved[4:], saved[3])
    (dq_d, dk_d, dv_d), _ = flash_backward(det, *saved[:3], *saved[4:], saved[3])
    assert np.array_equal(dk_a, dk_d) and np.array_equal(dv_a, dv_d)
    np.testing.assert_allclose(dq_d, dq_a, atol=1e-5)
    dq_ref = reference_backward(*saved[:4], causal)[1]
    assert np.max(np.abs(dq_d - dq_ref)) < 1e-5


def test_a_wrong_dq_pass_would_show():
    """The dQ pass's own statistics feed its dS: wrong ones make dQ wrong, not only dK, dV."""
    cfg = AttentionConfig(seq_len=128, heads=1, head_dim=32, dtype="fp32", deterministic=True,
                          pass_=BACKWARD)  # fmt: skip
    q, k, v, do, o, m, l_sum = _saved_forward(cfg)
    (dq, _, _), _ = flash_backward(cfg, q, k, v, o, m, l_sum, do)
    (bad, _, _), _ = flash_backward(cfg, q, k, v, o, m, l_sum * 2, do)
    dq_ref = reference_backward(q, k, v, do, False)[1]
    assert np.max(np.abs(dq - dq_ref)) < 1e-5
    assert np.max(np.abs(bad - dq_ref)) > 1e-3


def test_the_deterministic_backward_allocates_no_dq_accumulator():
    atomic = AttentionConfig(seq_len=2048, heads=1, head_dim=32, dtype="fp32", pass_=BACKWARD)
    det = atomic.with_(deterministic=True)
    saved = _saved_forward(atomic)
    args = (*saved[:3], *saved[4:], saved[3])
    peak_atomic, _ = measure_peak(lambda: flash_backward(atomic, *args))
    peak_det, _ = measure_peak(lambda: flash_backward(det, *args))
    accumulator = dq_accumulator_bytes(atomic)
    assert accumulator == 2048 * 32 * 4 and dq_accumulator_bytes(det) == 0
    assert peak_det <= peak_atomic - accumulator // 2
