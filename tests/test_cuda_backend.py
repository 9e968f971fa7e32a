"""The CUDA backend on a real GPU: both algorithms agree with an fp32 reference, memory is what the
model says, the memory wall falls where the model puts it, and kernel errors are readable.

All tests are marked `gpu` (tests/conftest.py skips them where CuPy sees no device).
"""

from __future__ import annotations

import itertools
import shutil

import numpy as np
import pytest

from gpu.algorithms import NAIVE, TILED
from gpu.backends.backend import RunOptions
from gpu.config import AttentionConfig
from gpu.model import costmodel

pytestmark = pytest.mark.gpu

DTYPES = ("fp16", "bf16", "fp32")
HEAD_DIMS = (32, 64, 128)
SEQ_LENS = (1, 17, 128, 1000, 4096)
#: Max |O - O_ref| allowed per input dtype. The naive path rounds S and P to the input dtype
#: (as torch's math path does); the tiled kernel keeps them in fp32 and rounds only O.
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 6e-2}
CHECK = RunOptions(warmup=0, repeats=1, check=True)


@pytest.fixture(scope="module")
def cupy():
    import cupy

    return cupy


@pytest.fixture(scope="module")
def backend(cupy):
    from gpu.backends.cuda_backend import CudaBackend

    return CudaBackend()


@pytest.fixture
def clean_pool(cupy):
    """The default pool with nothing cached, and its in-use bytes before the test."""
    pool = cupy.get_default_memory_pool()
    cupy.cuda.get_current_stream().synchronize()
    pool.free_all_blocks()
    return pool


# ---------------------------------------------------------------------------------------------
# Correctness


@pytest.mark.parametrize(
    ("dtype", "head_dim", "seq_len", "causal"),
    list(itertools.product(DTYPES, HEAD_DIMS, SEQ_LENS, (False, True))),
)
def test_naive_and_tiled_match_the_fp32_reference(backend, dtype, head_dim, seq_len, causal):
    config = AttentionConfig(
        seq_len=seq_len, heads=2, head_dim=head_dim, batch=1, dtype=dtype, causal=causal
    )
    for algorithm in (NAIVE, TILED):
        result = backend.run(config, algorithm, CHECK)
        assert not result.oom, result.message
        assert result.max_abs_error is not None, result.message
        assert result.max_abs_error <= TOLERANCE[dtype], (algorithm, result.max_abs_error)
        assert [k.name for k in result.kernel_times] == [
            k.name for k in costmodel.algorithm_cost(config, algorithm).kernels
        ]
        assert all(k.ms >= 0 for k in result.kernel_times)


@pytest.mark.parametrize(
    ("dtype", "seq_len", "causal"),
    [("fp16", 1000, True), ("bf16", 777, False), ("fp32", 129, True), ("fp16", 1, False)],
)
def test_tiled_kernel_writes_row_max_and_row_sum(cupy, dtype, seq_len, causal):
    from gpu.backends.cuda_arrays import random_inputs, to_float32
    from gpu.backends.cuda_reference import reference_attention
    from gpu.launch.flash_readable import flash_forward

    config = AttentionConfig(seq_len=seq_len, heads=3, head_dim=64, batch=2, dtype=dtype,
                             causal=causal)  # fmt: skip
    q, k, v = random_inputs(config, seed=1)
    o = cupy.empty_like(q)
    m = cupy.full((2, 3, seq_len), cupy.nan, dtype=cupy.float32)
    l = cupy.full((2, 3, seq_len), cupy.nan, dtype=cupy.float32)
    flash_forward(q, k, v, o, m, l, config)
    o_ref, m_ref, l_ref = reference_attention(q, k, v, config)
    assert float(cupy.abs(to_float32(o, dtype) - o_ref).max()) <= TOLERANCE[dtype]
    np.testing.assert_allclose(cupy.asnumpy(m), cupy.asnumpy(m_ref), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(cupy.asnumpy(l), cupy.asnumpy(l_ref), rtol=1e-3)


@pytest.mark.parametrize(
    ("block_m", "block_n", "head_dim", "causal"),
    [(8, 256, 64, True), (256, 8, 64, True), (128, 16, 32, False), (16, 128, 96, True),
     (32, 32, 256, True), (64, 32, 200, False)],
)  # fmt: skip
def test_tiled_kernel_is_exact_for_any_tile_shape(backend, block_m, block_n, head_dim, causal):
    config = AttentionConfig(seq_len=333, heads=2, head_dim=head_dim, dtype="fp32",
                             causal=causal, block_m=block_m, block_n=block_n)  # fmt: skip
    result = backend.run(config, TILED, CHECK)
    assert result.max_abs_error is not None and result.max_abs_error <= TOLERANCE["fp32"]


def test_tiled_refuses_tiles_that_exceed_shared_memory_and_names_the_limit(backend):
    from gpu.backends.cuda_backend import UnsupportedConfig
    from gpu.launch.cuda_kernels import smem_optin_bytes
    from gpu.launch.flash_readable import supports

    config = AttentionConfig(head_dim=256, block_m=128, block_n=128, seq_len=256)
    reason = supports(config)
    assert reason is not None
    assert f"{smem_optin_bytes():,}" in reason and "shared memory" in reason
    with pytest.raises(UnsupportedConfig, match="shared memory"):
        backend.run(config, TILED, CHECK)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq_len", [999, 1024])
def test_two_pass_softmax_for_long_rows_matches_the_single_read_kernel(
    cupy, dtype, causal, seq_len
):
    from gpu.backends.cuda_arrays import from_float32, to_float32
    from gpu.backends.naive_fwd import softmax_launcher, softmax_plan

    config = AttentionConfig(seq_len=seq_len, heads=3, head_dim=64, dtype=dtype, causal=causal)
    assert softmax_plan(config).single_read
    assert not softmax_plan(config, smem_limit=1024).single_read
    n = seq_len
    s = from_float32(
        cupy.random.RandomState(3).standard_normal((1, 3, n, n), dtype=cupy.float32) * 3,
        dtype,
    )
    p_one, p_two = cupy.empty_like(s), cupy.empty_like(s)
    softmax_launcher(config)(s, p_one)
    softmax_launcher(config, smem_limit=1024)(s, p_two)
    sf = to_float32(s, dtype)
    if causal:
        sf = cupy.where(cupy.arange(n)[None, :] > cupy.arange(n)[:, None], -cupy.inf, sf)
    ref = cupy.exp(sf - sf.max(axis=-1, keepdims=True))
    ref /= ref.sum(axis=-1, keepdims=True)
    tol = {"fp32": 1e-6, "fp16": 1e-3, "bf16": 8e-3}[dtype]
    for p in (p_one, p_two):
        pf = to_float32(p, dtype)
        assert float(cupy.abs(pf - ref).max()) <= tol
        if causal:  # masked probabilities are exact zeros
            assert not bool(cupy.triu(pf[0, 0], k=1).any())


# ---------------------------------------------------------------------------------------------
# Memory


def test_measured_peak_memory_is_within_2_percent_of_the_model(backend, clean_pool):
    config = AttentionConfig(seq_len=4096, heads=12, head_dim=64, dtype="fp16")
    baseline = clean_pool.used_bytes()
    for algorithm in (NAIVE, TILED):
        result = backend.run(config, algorithm, RunOptions(warmup=1, repeats=2))
        model = costmodel.algorithm_cost(config, algorithm).peak_bytes
        assert result.model_peak_bytes == model
        assert abs(result.peak_bytes - model) <= 0.02 * model, (algorithm, result.peak_bytes)
        assert clean_pool.used_bytes() == baseline
    assert costmodel.naive_peak_bytes(config) > 20 * costmodel.tiled_peak_bytes(config)


def test_under_a_budget_naive_hits_the_wall_where_the_model_says_and_tiled_does_not(
    backend, clean_pool
):
    base = AttentionConfig(seq_len=3000, heads=12, head_dim=64, dtype="fp16")
    # A budget just above naive's need at N=3000 (64 KiB covers the pool's 512-byte rounding).
    budget = costmodel.naive_peak_bytes(base) + 64 * 1024
    wall = costmodel.naive_oom_seq_len(base, budget)
    assert wall == 3001
    options = RunOptions(warmup=0, repeats=1, budget_bytes=budget)
    baseline = clean_pool.used_bytes()
    limit_before = clean_pool.get_limit()

    fits = backend.run(base.with_(seq_len=wall - 1), NAIVE, options)
    assert not fits.oom, fits.message
    assert fits.peak_bytes <= budget
    for n in (wall, wall + 500):
        result = backend.run(base.with_(seq_len=n), NAIVE, options)
        assert result.oom and "out of memory" in result.message
        assert result.kernel_times == () and result.total_ms is None
        # every buffer went back to the pool, and the pool's limit is what it was
        assert clean_pool.used_bytes() == baseline
        assert clean_pool.get_limit() == limit_before
    for n in (wall, 4 * wall):
        tiled = backend.run(base.with_(seq_len=n), TILED, options)
        assert not tiled.oom, tiled.message
        assert tiled.peak_bytes <= budget
    assert clean_pool.used_bytes() == baseline


# ---------------------------------------------------------------------------------------------
# Device and kernels


def test_device_info_describes_the_gpu(backend):
    info = backend.device_info()
    assert info.backend == "cuda" and info.name
    assert 0 < info.memory_free_bytes <= info.memory_total_bytes
    assert info.details["sm_count"] > 0
    assert info.details["smem_per_block_optin_bytes"] >= 48 * 1024
    assert {NAIVE, TILED} <= set(backend.algorithms())


def test_a_broken_kernel_reports_the_compiler_log(tmp_path):
    from gpu.launch.cuda_kernels import KERNEL_DIR, KernelCompileError, load_module

    broken = tmp_path / "softmax_broken.cu"
    shutil.copy(KERNEL_DIR / "softmax.cu", broken)
    text = broken.read_text().replace("float mx = NEG_INF;", "float mx = NEG_INF", 1)
    broken.write_text(text)
    with pytest.raises(KernelCompileError) as info:
        load_module(broken, ("softmax_rows_smem<float, 1>",))
    assert "softmax_broken.cu" in str(info.value)
    assert "error" in info.value.log.lower()
    assert info.value.log in str(info.value)
