"""The NumPy backend: naive and tiled agree with a float64 reference; naive really holds S and P."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu.algorithms import NAIVE, TILED
from gpu.backend_factory import create_backend
from gpu.backends.backend import RunOptions
from gpu.backends.cpu_backend import (
    CpuBackend,
    _naive_kernels,
    _tiled_kernels,
    random_inputs,
    reference_attention,
    tile_buffer_bytes,
)
from gpu.config import AttentionConfig
from gpu.errors import RunCancelled
from gpu.files.schema import MAX_FLOAT
from gpu.model.costmodel import attention_matrix_bytes
from gpu.results import ERROR_TOLERANCE


def _max_error(cfg, kernels):
    q, k, v = random_inputs(cfg, seed=cfg.seq_len)
    out, _ = kernels(cfg, q, k, v)
    return float(np.max(np.abs(out.astype(np.float64) - reference_attention(q, k, v, cfg.causal))))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 300),
    heads=st.integers(1, 3),
    d=st.sampled_from([8, 16, 40, 64]),
    causal=st.booleans(),
    dtype=st.sampled_from(["fp32", "fp16", "bf16"]),
    bm=st.sampled_from([8, 16, 64]),
    bn=st.sampled_from([8, 32, 64]),
)
def test_naive_and_tiled_agree_with_the_float64_reference(n, heads, d, causal, dtype, bm, bn):
    cfg = AttentionConfig(
        seq_len=n, heads=heads, head_dim=d, causal=causal, dtype=dtype, block_m=bm, block_n=bn
    )
    tol = ERROR_TOLERANCE[dtype]
    assert _max_error(cfg, _naive_kernels) <= tol
    assert _max_error(cfg, _tiled_kernels) <= tol


@pytest.mark.parametrize("causal", [False, True])
def test_single_token_attends_to_itself(causal):
    cfg = AttentionConfig(seq_len=1, heads=2, head_dim=16, dtype="fp32", causal=causal)
    q, k, v = random_inputs(cfg)
    for kernels in (_naive_kernels, _tiled_kernels):
        out, _ = kernels(cfg, q, k, v)
        np.testing.assert_allclose(out, v, rtol=1e-6)


def test_causal_first_row_sees_only_the_first_key():
    cfg = AttentionConfig(seq_len=130, heads=1, head_dim=16, dtype="fp32", causal=True, block_m=16)
    q, k, v = random_inputs(cfg)
    out, _ = _tiled_kernels(cfg, q, k, v)
    np.testing.assert_allclose(out[0, 0, 0], v[0, 0, 0], rtol=1e-6)


def test_naive_materializes_two_n_squared_matrices():
    cfg = AttentionConfig(seq_len=512, heads=2, head_dim=32, dtype="fp16")
    result = CpuBackend().run(cfg, NAIVE, RunOptions(warmup=0, repeats=1))
    assert result.peak_bytes >= result.model_peak_bytes
    assert result.peak_bytes >= 2 * attention_matrix_bytes(cfg)


def test_tiled_never_holds_an_n_squared_matrix():
    cfg = AttentionConfig(seq_len=4096, heads=2, head_dim=32, dtype="fp16")
    result = CpuBackend().run(cfg, TILED, RunOptions(warmup=0, repeats=1))
    assert result.peak_bytes < attention_matrix_bytes(cfg) / 4


def test_run_result_reports_times_model_figures_and_error():
    cfg = AttentionConfig(seq_len=100, heads=2, head_dim=16)
    r = CpuBackend().run(cfg, NAIVE, RunOptions(warmup=0, repeats=2, check=True))
    assert [k.name for k in r.kernel_times] == ["gemm_qk", "softmax", "gemm_pv"]
    assert r.total_ms > 0 and r.flops == 4 * 2 * 100 * 100 * 16
    assert r.agrees is True and not r.oom and r.backend == "cpu"


def test_refuses_a_config_beyond_free_ram_with_a_message():
    cfg = AttentionConfig(seq_len=1 << 20, heads=256, head_dim=256)
    r = CpuBackend().run(cfg, NAIVE)
    assert r.oom and "needs" in r.message and "free RAM" in r.message


def test_budget_turns_naive_into_an_oom_result_but_tiled_runs():
    cfg = AttentionConfig(seq_len=2048, heads=4, head_dim=32)
    options = RunOptions(warmup=0, repeats=1, budget_bytes=20 * 10**6)
    backend = CpuBackend()
    assert backend.run(cfg, NAIVE, options).oom
    assert not backend.run(cfg, TILED, options).oom


def test_auto_backend_without_a_gpu_is_the_cpu_backend(monkeypatch):
    import gpu.backend_factory as backends_module

    monkeypatch.setattr(backends_module, "cuda_available", lambda: False)
    assert create_backend("auto").name == "cpu"


def test_tiled_peak_is_below_naive_and_within_twice_the_model_at_small_n():
    cfg = AttentionConfig(seq_len=128, heads=4, head_dim=64, dtype="fp16")
    backend = CpuBackend()
    naive = backend.run(cfg, NAIVE, RunOptions(warmup=0, repeats=1))
    tiled = backend.run(cfg, TILED, RunOptions(warmup=0, repeats=1))
    assert tiled.peak_bytes <= naive.peak_bytes
    assert tiled.peak_bytes <= 2 * tiled.model_peak_bytes
    # what remains above the model is the fp32 tile buffers, and the result says so
    assert tiled.peak_bytes - tiled.model_peak_bytes <= tile_buffer_bytes(cfg) + 4096
    assert "fp32 tile buffers" in tiled.message and "above the model" in tiled.message


def test_tiled_peak_above_the_model_stays_constant_as_n_grows():
    extras = []
    for n in (1024, 4096):
        cfg = AttentionConfig(seq_len=n, heads=1, head_dim=32, dtype="fp16")
        r = CpuBackend().run(cfg, TILED, RunOptions(warmup=0, repeats=1))
        extras.append(r.peak_bytes - r.model_peak_bytes)
        assert extras[-1] <= tile_buffer_bytes(cfg) + 4096
    assert extras[1] <= extras[0] + 4096  # O(1) in N: a few tiles, never a row of S


@pytest.mark.parametrize("algorithm", [NAIVE, TILED])
def test_a_cancel_hook_stops_a_run_between_tiles(algorithm):
    cfg = AttentionConfig(seq_len=512, heads=4, head_dim=32)
    asked = []

    def cancel() -> bool:
        asked.append(1)
        return len(asked) > 3  # let a few tiles (or heads) run, then stop

    with pytest.raises(RunCancelled):
        CpuBackend().run(cfg, algorithm, RunOptions(warmup=0, repeats=1, cancel=cancel))
    assert len(asked) == 4


def test_a_cancel_hook_that_never_fires_changes_nothing():
    cfg = AttentionConfig(seq_len=100, heads=2, head_dim=16)
    event = threading.Event()
    r = CpuBackend().run(
        cfg, TILED, RunOptions(warmup=0, repeats=1, check=True, cancel=event.is_set)
    )
    assert r.agrees and not r.oom


def test_a_set_event_abandons_a_long_run_at_its_next_tile():
    """Set while the run is in its tiles (here by the third poll itself), the event stops the
    run at the very next poll between tiles: three tiles of the thousands it would compute."""
    cfg = AttentionConfig(seq_len=16384, heads=8, head_dim=64)  # seconds of work on a CPU
    event = threading.Event()
    polls: list[bool] = []

    def hook() -> bool:
        answer = event.is_set()
        polls.append(answer)
        if len(polls) == 2:
            event.set()  # between the second and the third tile
        return answer

    with pytest.raises(RunCancelled):
        CpuBackend().run(cfg, TILED, RunOptions(warmup=0, repeats=1, cancel=hook))
    assert polls == [False, False, True]
    tiles = cfg.bh * (cfg.seq_len // cfg.block_m) * (cfg.seq_len // cfg.block_n)
    assert tiles > 1000 * len(polls)


def test_times_are_never_zero_and_a_non_finite_output_is_a_finite_disagreement(monkeypatch):
    import gpu.backends.cpu_backend as cpu

    real = cpu._tiled_kernels

    def nan_out(config, q, k, v, **kw):
        out, _ = real(config, q, k, v, **kw)
        return out * np.nan, [("flash_fwd", 0.0)]

    monkeypatch.setattr(cpu, "_tiled_kernels", nan_out)
    cfg = AttentionConfig(seq_len=32, heads=1, head_dim=8)
    r = CpuBackend().run(cfg, TILED, RunOptions(warmup=0, repeats=1, check=True))
    assert r.kernel_times[0].ms > 0
    assert r.max_abs_error == MAX_FLOAT and r.agrees is False
    assert "NaN or infinity" in r.message


def test_an_fp16_run_does_not_import_ml_dtypes():
    """ml_dtypes's import holds the interpreter for more than a second (no other thread runs,
    no signal is handled): only a bf16 run needs it."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import sys
        from gpu.backends.backend import RunOptions
        from gpu.backends.cpu_backend import CpuBackend
        from gpu.config import AttentionConfig
        CpuBackend().run(AttentionConfig(seq_len=64, heads=1), "tiled", RunOptions(repeats=1))
        print("ml_dtypes" in sys.modules)
    """)
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=root, timeout=120
    )
    assert out.stdout.strip() == "False", out.stderr
