"""The naive backward's accuracy, judged on the CPU through a model of where its CUDA kernels
round (tests/attention_rounding.py), by FlashAttention's criterion: its max error against a
float64 reference at most twice that of a PyTorch implementation in the same dtype.

The peer matters. torch's math SDPA on fp16/bf16 inputs computes in fp32 unless told not to
(allow_fp16_bf16_reduction_math_sdp), so its gradients carry one rounding each; naive attention
stores S, P, dP and dS in the inputs' dtype and cannot come within 2× of that, and neither can
torch's own attention in that dtype. Against torch computing in the inputs' dtype the naive
backward meets the criterion at every shape here, unchanged.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from attention_rounding import (
    NaiveArithmetic,
    criterion_ratios,
    max_errors,
    naive_backward,
    naive_forward,
    random_inputs,
    reference,
    softmax_bwd_row_term,
    torch_math_sdpa,
)

from gpu.backends import cpu_backward
from gpu.config import AttentionConfig


def _seed(*parts) -> int:
    return zlib.crc32("-".join(map(str, parts)).encode())


def _batch_heads(n: int) -> tuple[int, int]:
    """Enough rows that a max error is a steady statistic, few enough to stay quick."""
    return {17: (4, 16), 113: (2, 8)}.get(n, (1, 2))


@pytest.mark.parametrize("seq_len", [17, 113, 1023])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_naive_backward_meets_the_criterion_against_torch_in_the_same_dtype(
    head_dim: int, causal: bool, seq_len: int
) -> None:
    batch, heads = _batch_heads(seq_len)
    seed = _seed("fp16", head_dim, causal, seq_len)
    ratios = criterion_ratios(batch, heads, seq_len, head_dim, "fp16", causal, seed)
    assert (ratios.same_dtype <= 2).all(), ratios.same_dtype


@pytest.mark.parametrize(("head_dim", "seq_len", "causal"), [(64, 113, True), (128, 1023, False)])
def test_in_bf16_too(head_dim: int, seq_len: int, causal: bool) -> None:
    batch, heads = _batch_heads(seq_len)
    seed = _seed("bf16", head_dim, causal, seq_len)
    ratios = criterion_ratios(batch, heads, seq_len, head_dim, "bf16", causal, seed)
    assert (ratios.same_dtype <= 2).all(), ratios.same_dtype


def test_against_torchs_default_fp32_math_it_misses_the_criterion_as_torchs_fp16_attention_does():
    """The reported failure (d = 64, causal, N = 113, fp16, dQ 2.8e-3 against 1.2e-3): torch's
    math SDPA by default is fp32 math rounded once, and against that peer torch's own attention
    in fp16 misses the criterion as well, by as much as ours."""
    q, k, v, do = random_inputs(4, 16, 113, 64, "fp16", seed=0)
    ref = reference(q, k, v, do, causal=True)
    p, o = naive_forward(q, k, v, causal=True)
    ours = max_errors(naive_backward(q, k, v, p, o, do), ref)
    fp32_math = max_errors(torch_math_sdpa(q, k, v, do, True, same_dtype=False, ref=ref), ref)
    torch_fp16 = max_errors(torch_math_sdpa(q, k, v, do, True, same_dtype=True), ref)
    assert (ours / fp32_math).max() > 2
    assert (torch_fp16 / fp32_math).max() > 2
    assert 1.5e-3 < ours[0] < 4e-3 and 8e-4 < fp32_math[0] < 1.3e-3  # the report's scale


@pytest.mark.parametrize(
    "arithmetic",
    [
        NaiveArithmetic(row_term="do_o"),
        NaiveArithmetic(dp_fp32=True),
        NaiveArithmetic(ds_fp32=True),
        NaiveArithmetic(row_term="do_o", dp_fp32=True, ds_fp32=True),
    ],
    ids=["D=rowsum(dO∘O)", "dP in fp32", "dS in fp32", "all three"],
)
def test_no_change_to_the_softmax_backward_would_meet_fp32_math(arithmetic) -> None:
    """The gap to fp32 math starts upstream, in the S and P the forward stored in fp16: dV,
    which only P feeds, already misses it; no row term and no fp32 dP or dS closes it."""
    ratios = criterion_ratios(1, 2, 1023, 64, "fp16", False, seed=1, arithmetic=arithmetic)
    assert ratios.fp32_math[2] > 2  # dV = Pᵀ dO
    assert ratios.fp32_math.max() > 2


def test_flashattentions_row_term_would_make_the_naive_backward_less_exact() -> None:
    """FlashAttention computes D = rowsum(dO ∘ O) in fp32. Here O was rounded to fp16 from the
    stored P, so that D no longer matches the P that dS multiplies: the kernel's rowsum(P ∘ dP)
    over the stored P and dP gives smaller dK errors with a causal mask."""
    kernel, flash = np.zeros(3), np.zeros(3)
    for seed in range(4):
        q, k, v, do = random_inputs(2, 8, 113, 64, "fp16", seed)
        ref = reference(q, k, v, do, causal=True)
        p, o = naive_forward(q, k, v, causal=True)
        kernel += max_errors(naive_backward(q, k, v, p, o, do), ref)
        flash += max_errors(naive_backward(q, k, v, p, o, do, NaiveArithmetic("do_o")), ref)
    assert flash[1] > 1.1 * kernel[1]


@pytest.mark.parametrize("n", [17, 1023, 1024, 5000])
def test_the_row_term_is_the_rows_dot_product_to_fp32_precision(n: int) -> None:
    """The model sums as softmax_bwd_rows does (chunks per thread, warps, the block), rows past
    CACHE chunks per thread included; the sum is the dot product within fp32 rounding."""
    rng = np.random.default_rng(n)
    p = rng.random((6, n), dtype=np.float32).astype(np.float16)
    dp = rng.standard_normal((6, n), dtype=np.float32).astype(np.float16)
    exact = (p.astype(np.float64) * dp.astype(np.float64)).sum(-1)
    scale = (np.abs(p.astype(np.float64) * dp)).sum(-1)
    got = softmax_bwd_row_term(p, dp)
    assert got.dtype == np.float32
    assert (np.abs(got - exact) <= 4e-7 * scale).all()


def test_the_cpu_backends_naive_backward_rounds_where_the_kernels_do() -> None:
    """gpu/backends/cpu_backward.py mirrors the CUDA path: given the same P, its dQ, dK, dV are
    the model's up to the order of fp32 sums (equal, or one unit in the last place apart)."""
    config = AttentionConfig(seq_len=113, heads=4, head_dim=64, batch=2, causal=True)
    q, k, v, do = random_inputs(2, 4, 113, 64, "fp16", seed=5)
    p, o = naive_forward(q, k, v, causal=True)
    (dq, dk, dv), _ = cpu_backward.naive_backward(config, q, k, v, p, do)
    for cpu, model in zip((dq, dk, dv), naive_backward(q, k, v, p, o, do), strict=True):
        assert cpu.dtype == model.dtype == np.float16
        ulps = np.abs(cpu.view(np.int16).astype(np.int32) - model.view(np.int16).astype(np.int32))
        assert ulps.max() <= 1 and (ulps == 0).mean() > 0.99


@pytest.mark.parametrize("same_dtype", [True, False], ids=["same-dtype", "fp32-math"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_the_model_of_torchs_math_sdpa_is_torchs(dtype: str, same_dtype: bool) -> None:
    """Where torch is installed: the model's gradients are torch's math SDPA's, max errors and
    nearly every element alike, with and without allow_fp16_bf16_reduction_math_sdp."""
    torch = pytest.importorskip("torch")
    q, k, v, do = random_inputs(2, 3, 113, 64, dtype, seed=9)
    tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]

    def t(x):
        return torch.from_numpy(x.astype(np.float32)).to(tdtype)

    before = torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()
    torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(same_dtype)
    try:
        qt, kt, vt = (t(x).requires_grad_(True) for x in (q, k, v))
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
        out.backward(t(do))
    finally:
        torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(before)
    ref = reference(q, k, v, do, causal=True)
    real = tuple(x.grad.float().numpy() for x in (qt, kt, vt))
    model = torch_math_sdpa(q, k, v, do, True, same_dtype)
    np.testing.assert_allclose(max_errors(real, ref), max_errors(model, ref), rtol=0.1)
    for a, b in zip(real, model, strict=True):
        assert (a == b.astype(np.float32)).mean() > 0.9
