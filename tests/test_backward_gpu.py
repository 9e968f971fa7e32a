"""Both GPU backwards compute dQ, dK and dV within FlashAttention's own test criterion.

For every kernel (the fused backward with atomic dQ and its deterministic variant, each with
the main kernel this GPU runs by default — the wgmma one on an H100/H200 — and with the
mma.sync one, and the naive cuBLAS + softmax-backward path), fp16 and bf16, d ∈ {64, 128},
causal or not and N ∈ {113, 128, 1023, 1024, 2048, 4097}:

    max |ours − ref_fp32| ≤ 2 × max |torch's low-precision autograd − ref_fp32|

for each of dQ, dK and dV. ref_fp32 is the backward in fp32 with CuPy on the upcast inputs;
the torch peer runs plain attention in the inputs' precision under autograd (torch is only a
peer: without it that comparison is skipped and a relative bound against ref_fp32 remains).
The forward that feeds the fused backward is our own tensor-core kernel (O, m, l); the naive
backward gets the P of our naive forward.

The naive backward is also held to the criterion against torch's math SDPA at N ∈ {17, 113, 1023}
with the peer computing in the inputs' dtype: by default torch's math SDPA upcasts fp16/bf16 to
fp32 and rounds its gradients once, a peer that no path storing S and P in fp16 can come within
2× of (tests/test_naive_backward_rounding.py shows why on the CPU).
"""

from __future__ import annotations

import zlib

import pytest

from gpu.config import AttentionConfig

pytestmark = pytest.mark.gpu

SEQ_LENS = (113, 128, 1023, 1024, 2048, 4097)
KERNELS = ("fused", "fused_deterministic", "fused_mma", "fused_mma_deterministic", "naive")
#: Relative bound (max error / max |ref|) used where torch is absent.
REL_BOUND = {"fp16": 1e-2, "bf16": 5e-2}


def _inputs(config: AttentionConfig, seed: int):
    import cupy as cp

    from gpu.backends.cuda_arrays import from_float32

    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    rng = cp.random.RandomState(seed)
    return tuple(
        from_float32(rng.standard_normal(shape, dtype=cp.float32), config.dtype) for _ in range(4)
    )


def _reference_fp32(q, k, v, do, config: AttentionConfig):
    """dQ, dK, dV of softmax(QKᵀ/√d)V in fp32 (CuPy, upcast inputs, the whole N×N)."""
    import cupy as cp

    from gpu.backends.cuda_arrays import to_float32

    qf, kf, vf, dof = (to_float32(x, config.dtype) for x in (q, k, v, do))
    n = config.seq_len
    s = cp.matmul(qf, kf.swapaxes(-1, -2)) * cp.float32(config.scale)
    if config.causal:
        s = cp.where(cp.arange(n)[None, :] > cp.arange(n)[:, None], -cp.inf, s)
    s -= s.max(axis=-1, keepdims=True)
    p = cp.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    del s
    dv = cp.matmul(p.swapaxes(-1, -2), dof)
    dp = cp.matmul(dof, vf.swapaxes(-1, -2))
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    del p, dp
    dq = cp.matmul(ds, kf) * cp.float32(config.scale)
    dk = cp.matmul(ds.swapaxes(-1, -2), qf) * cp.float32(config.scale)
    return dq, dk, dv


def _torch_low_precision(q, k, v, do, config: AttentionConfig):
    """dQ, dK, dV from torch autograd on plain attention in fp16/bf16, as fp32 CuPy arrays."""
    torch = pytest.importorskip("torch")
    import cupy as cp

    def t(x):
        x = torch.from_dlpack(x)
        return x.view(torch.bfloat16) if config.dtype == "bf16" else x

    qt, kt, vt = (t(x).clone().requires_grad_(True) for x in (q, k, v))
    s = torch.matmul(qt, kt.transpose(-1, -2)) * config.scale
    if config.causal:
        n = config.seq_len
        mask = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, dim=-1).to(vt.dtype)
    o = torch.matmul(p, vt)
    o.backward(t(do))
    return tuple(cp.from_dlpack(x.grad.float().contiguous()) for x in (qt, kt, vt))


def _torch_math_sdpa_same_dtype(q, k, v, do, config: AttentionConfig):
    """dQ, dK, dV from torch's math SDPA computing in fp16/bf16, as fp32 CuPy arrays. Without
    allow_fp16_bf16_reduction_math_sdp(True) (torch ≥ 2.5) it would upcast to fp32 and round
    once at the end; older torch has no such flag and computes in the dtype anyway."""
    torch = pytest.importorskip("torch")
    import cupy as cp
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def t(x):
        x = torch.from_dlpack(x)
        return x.view(torch.bfloat16) if config.dtype == "bf16" else x

    flags = torch.backends.cuda
    allow = getattr(flags, "allow_fp16_bf16_reduction_math_sdp", None)
    before = flags.fp16_bf16_reduction_math_sdp_allowed() if allow else None
    if allow:
        allow(True)
    try:
        qt, kt, vt = (t(x).clone().requires_grad_(True) for x in (q, k, v))
        with sdpa_kernel(SDPBackend.MATH):
            o = torch.nn.functional.scaled_dot_product_attention(
                qt, kt, vt, is_causal=config.causal
            )
        o.backward(t(do))
    finally:
        if allow:
            allow(before)
    return tuple(cp.from_dlpack(x.grad.float().contiguous()) for x in (qt, kt, vt))


def _ours(kernel: str, q, k, v, do, config: AttentionConfig):
    import cupy as cp

    from gpu.backends import cuda_arrays, naive_fwd
    from gpu.launch import flash_mma

    if kernel == "naive":
        from gpu.backends.naive_bwd import naive_backward

        n = config.seq_len
        s = cp.empty((config.batch, config.heads, n, n), dtype=q.dtype)
        p = cp.empty_like(s)
        o = cp.empty_like(q)
        naive_fwd.naive_forward(q, k, v, s, p, o, config)
        del s
        grads = naive_backward(q, k, v, p, do, config)
    else:
        from gpu.launch.flash_bwd import default_launch, flash_backward

        stats = (config.batch, config.heads, config.seq_len)
        o = cp.empty_like(q)
        m = cp.empty(stats, dtype=cp.float32)
        l = cp.empty(stats, dtype=cp.float32)
        flash_mma.flash_forward(q, k, v, o, m, l, config)
        launch = default_launch(config.head_dim) if kernel.startswith("fused_mma") else None
        grads = flash_backward(
            q, k, v, o, m, l, do, config,
            deterministic=kernel.endswith("deterministic"), launch=launch,
        )  # fmt: skip
    return tuple(cuda_arrays.to_float32(g, config.dtype) for g in grads)


@pytest.mark.parametrize("seq_len", SEQ_LENS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_every_backward_meets_flash_attentions_criterion(
    dtype: str, head_dim: int, causal: bool, seq_len: int
) -> None:
    import cupy as cp

    batch, heads = (2, 3) if seq_len <= 1024 else (1, 2)
    config = AttentionConfig(
        seq_len=seq_len, heads=heads, head_dim=head_dim, batch=batch, dtype=dtype, causal=causal
    )
    q, k, v, do = _inputs(config, zlib.crc32(f"bwd-{dtype}-{head_dim}-{causal}-{seq_len}".encode()))
    ref = _reference_fp32(q, k, v, do, config)
    try:
        peer = _torch_low_precision(q, k, v, do, config)
    except pytest.skip.Exception:
        peer = None
    failures = []
    for kernel in KERNELS:
        ours = _ours(kernel, q, k, v, do, config)
        for name, got, want, low in zip(
            ("dQ", "dK", "dV"), ours, ref, peer or (None,) * 3, strict=True
        ):
            assert bool(cp.isfinite(got).all()), f"{kernel} {name} has non-finite values"
            err = float(cp.abs(got - want).max())
            if low is not None:
                bound = 2 * float(cp.abs(low - want).max())
            else:
                bound = REL_BOUND[dtype] * float(cp.abs(want).max())
            if not err <= bound:
                failures.append(f"{kernel} {name}: max error {err:.3g} > bound {bound:.3g}")
    assert not failures, "; ".join(failures)


@pytest.mark.parametrize("seq_len", [17, 113, 1023])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_naive_backward_meets_the_criterion_against_torch_math_sdpa_in_its_dtype(
    dtype: str, head_dim: int, causal: bool, seq_len: int
) -> None:
    import cupy as cp

    config = AttentionConfig(
        seq_len=seq_len, heads=16, head_dim=head_dim, batch=4, dtype=dtype, causal=causal
    )
    seed = zlib.crc32(f"naive-sdpa-{dtype}-{head_dim}-{causal}-{seq_len}".encode())
    q, k, v, do = _inputs(config, seed)
    peer = _torch_math_sdpa_same_dtype(q, k, v, do, config)
    ref = _reference_fp32(q, k, v, do, config)
    ours = _ours("naive", q, k, v, do, config)
    failures = []
    for name, got, want, low in zip(("dQ", "dK", "dV"), ours, ref, peer, strict=True):
        assert bool(cp.isfinite(got).all()), f"naive {name} has non-finite values"
        err = float(cp.abs(got - want).max())
        bound = 2 * float(cp.abs(low - want).max())
        if not err <= bound:
            failures.append(f"naive {name}: max error {err:.3g} > bound {bound:.3g}")
    assert not failures, "; ".join(failures)


def test_the_cpu_rounding_model_launches_softmax_bwd_as_the_backend_does() -> None:
    """tests/attention_rounding.py sums the row term in softmax_bwd_rows's order: its VEC and
    threads per row are the launcher's."""
    from attention_rounding import softmax_bwd_launch

    from gpu.backends.naive_bwd import softmax_bwd_plan

    for dtype in ("fp16", "bf16"):
        for n in (17, 113, 1023, 1024, 4096, 40000):
            plan = softmax_bwd_plan(AttentionConfig(seq_len=n, heads=1, dtype=dtype))
            assert softmax_bwd_launch(n) == (plan.vec, plan.threads), (dtype, n)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("kernel", ["fused_deterministic", "fused_mma_deterministic"])
def test_deterministic_dq_is_bit_identical_across_two_runs(
    kernel: str, head_dim: int, causal: bool
) -> None:
    import cupy as cp

    config = AttentionConfig(seq_len=2048, heads=4, head_dim=head_dim, causal=causal)
    q, k, v, do = _inputs(config, 11 + head_dim)
    first = _ours(kernel, q, k, v, do, config)
    second = _ours(kernel, q, k, v, do, config)
    for a, b in zip(first, second, strict=True):
        assert bool((a.view(cp.uint32) == b.view(cp.uint32)).all())


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_hopper_backward_is_the_default_on_sm_90a_and_barely_spills(head_dim: int) -> None:
    from gpu.launch import flash_bwd

    launch = flash_bwd.main_launch(head_dim)
    if not flash_bwd.wgmma_here():
        assert launch == flash_bwd.default_launch(head_dim)
        return
    assert isinstance(launch, flash_bwd.WgmmaBwdLaunch)
    for causal in (False, True):
        resources = flash_bwd.kernel_resources(launch, causal, False)
        assert resources["local_bytes"] <= 64, resources


def test_fused_backward_refuses_arrays_of_the_wrong_shape() -> None:
    import cupy as cp

    from gpu.launch.flash_bwd import flash_backward

    config = AttentionConfig(seq_len=128, heads=2, head_dim=64)
    q, k, v, do = _inputs(config, 3)
    m = cp.zeros((1, 2, 128), dtype=cp.float32)
    with pytest.raises(ValueError, match="do has shape"):
        flash_backward(q, k, v, q, m, m, do[:, :, :64], config)


# ---------------------------------------------------------------------------------------------
# The CUDA backend's backward and training step


@pytest.mark.parametrize("pass_", ["backward", "step"])
@pytest.mark.parametrize("algorithm", ["naive", "tiled_mma"])
def test_the_backend_times_the_backward_kernels_and_checks_the_gradients(
    algorithm: str, pass_: str
) -> None:
    from gpu.backends.backend import RunOptions
    from gpu.backends.factory import create_backend
    from gpu.model.backward_cost import FUSED_BACKWARD_KERNELS, NAIVE_BACKWARD_KERNELS

    backend = create_backend("cuda")
    assert pass_ in backend.passes(algorithm)
    config = AttentionConfig(seq_len=1000, heads=3, head_dim=64, causal=True, pass_=pass_)
    r = backend.run(config, algorithm, RunOptions(warmup=1, repeats=3, check=True))
    names = [k.name for k in r.kernel_times]
    backward = NAIVE_BACKWARD_KERNELS if algorithm == "naive" else FUSED_BACKWARD_KERNELS
    assert names[-len(backward) :] == list(backward)
    forward = ["gemm_qk", "softmax", "gemm_pv"] if algorithm == "naive" else ["flash_fwd"]
    assert names[: -len(backward)] == (forward if pass_ == "step" else [])
    assert r.max_abs_error is not None and r.max_abs_error > 0
    assert r.agrees, r.max_abs_error


@pytest.mark.parametrize("algorithm", ["naive", "tiled_mma"])
def test_one_measured_training_layer_holds_what_the_model_says(algorithm: str) -> None:
    """Naive: inputs, O, P, dP, dS (in S's memory) and the gradients; fused: no N×N at all. The
    measured peak is the model's (gpu.model.backward_cost) to within a few row statistics and the
    allocator's rounding (on the H200 the two agreed to the byte)."""
    from gpu.backends.backend import RunOptions
    from gpu.backends.factory import create_backend

    config = AttentionConfig(seq_len=4096, heads=4, head_dim=64, pass_="step")
    r = create_backend("cuda").run(config, algorithm, RunOptions(warmup=1, repeats=2))
    nn = config.bh * config.seq_len**2 * config.elem_bytes
    rows = config.bh * config.seq_len
    assert abs(r.peak_bytes - r.model_peak_bytes) <= 4 * rows * 4 + (1 << 20)
    if algorithm == "naive":
        assert r.peak_bytes >= 3 * nn
    else:
        assert r.peak_bytes < nn / 2  # not even one N×N matrix


def test_a_profiled_training_step_still_checks_the_gradients_of_one_whole_step() -> None:
    """The profiler launches each kernel alone several times (the fused dQ accumulator then
    holds several sums); the check must see the outputs of one whole step."""
    from gpu.backends.backend import RunOptions
    from gpu.backends.factory import create_backend

    config = AttentionConfig(seq_len=512, heads=2, head_dim=64, pass_="step")
    options = RunOptions(warmup=1, repeats=2, check=True, profile=True)
    r = create_backend("cuda").run(config, "tiled_mma", options)
    assert r.agrees, (r.max_abs_error, r.message)


def test_an_algorithm_without_a_backward_refuses_the_training_step_by_name() -> None:
    from gpu.backends.factory import create_backend
    from gpu.errors import UnsupportedConfig

    backend = create_backend("cuda")
    for algorithm in ("tiled", "tiled_wgmma", "tiled_ws"):
        if algorithm not in backend.algorithms():
            continue
        assert backend.passes(algorithm) == ("forward",)
        with pytest.raises(UnsupportedConfig, match=algorithm):
            backend.run(AttentionConfig(pass_="step"), algorithm)


# ---------------------------------------------------------------------------------------------
# Deterministic dQ through the backend (config.deterministic)


@pytest.mark.parametrize("pass_", ["backward", "step"])
def test_the_backend_times_the_deterministic_dq_pass_and_checks_the_gradients(pass_: str) -> None:
    from gpu.backends.backend import RunOptions
    from gpu.backends.factory import create_backend
    from gpu.model.backward_cost import DETERMINISTIC_BACKWARD_KERNELS

    config = AttentionConfig(
        seq_len=1000, heads=3, head_dim=64, causal=True, pass_=pass_, deterministic=True
    )
    r = create_backend("cuda").run(config, "tiled_mma", RunOptions(warmup=1, repeats=3, check=True))
    names = [k.name for k in r.kernel_times]
    assert names == ["flash_fwd"][: int(pass_ == "step")] + list(DETERMINISTIC_BACKWARD_KERNELS)
    assert r.config.deterministic
    assert r.agrees, r.max_abs_error
    # No fp32 dQ accumulator: the measured peak is the model's, which has none.
    rows = config.bh * config.seq_len
    assert abs(r.peak_bytes - r.model_peak_bytes) <= 4 * rows * 4 + (1 << 20)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_two_deterministic_backend_runs_give_bit_identical_dq(
    head_dim: int, causal: bool, dtype: str
) -> None:
    """The backend's own launches (what it times and profiles) for a deterministic config,
    run twice on the same inputs: the same dQ, bit for bit, and the dQ pass among them."""
    import cupy as cp

    from gpu.backends import cuda_arrays, cuda_backend
    from gpu.model.backward_cost import DETERMINISTIC_BACKWARD_KERNELS

    config = AttentionConfig(
        seq_len=2048, heads=4, head_dim=head_dim, dtype=dtype, causal=causal,
        pass_="backward", deterministic=True,
    )  # fmt: skip
    q, k, v, do = _inputs(config, 29 + head_dim)
    runs = []
    for _ in range(2):
        arrays = {"q": q, "k": k, "v": v, "do": do}
        launches = cuda_backend.algorithm_launches(config, "tiled_mma", arrays)
        assert [name for name, _ in launches] == list(DETERMINISTIC_BACKWARD_KERNELS)
        assert "dq_acc" not in arrays
        for _, launch in launches:
            launch()
        cp.cuda.get_current_stream().synchronize()
        runs.append(arrays["dq"].view(cp.uint16).copy())
    assert bool(cp.isfinite(cuda_arrays.to_float32(arrays["dq"], dtype)).all())
    assert bool((runs[0] == runs[1]).all())
