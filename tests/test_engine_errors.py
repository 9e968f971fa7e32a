"""The engine's error types: each says what to do about it, and an unsupported config names the
field to change from the kernel's declared limits, not from the words of its message."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import gpu.backend_factory as backends
from gpu import errors
from gpu.backends import backend
from gpu.config import AttentionConfig

TENSOR_CORE_KERNEL = SimpleNamespace(SUPPORTED_DTYPES=("fp16", "bf16"), SUPPORTED_HEAD_DIMS=(64,))
READABLE_KERNEL = SimpleNamespace()  # tiles from the config, any dtype and head dim


@pytest.mark.parametrize(
    ("kernel", "config", "tiles_from_config", "field"),
    [
        (TENSOR_CORE_KERNEL, AttentionConfig(dtype="fp32"), False, "dtype"),
        (TENSOR_CORE_KERNEL, AttentionConfig(head_dim=96), False, "head_dim"),
        (TENSOR_CORE_KERNEL, AttentionConfig(), False, "algorithm"),  # the device lacks it
        (READABLE_KERNEL, AttentionConfig(block_m=256, block_n=256), True, "block_m"),
    ],
)
def test_an_unsupported_config_names_the_field_from_the_kernels_limits(
    kernel, config, tiles_from_config, field
):
    exc = errors.UnsupportedConfig.from_kernel(
        "whatever the words", config, kernel, tiles_from_config=tiles_from_config
    )
    assert exc.field == field and str(exc) == "whatever the words"
    assert isinstance(exc, ValueError)


def test_error_kinds_are_what_callers_catch():
    assert issubclass(errors.RecordingError, ValueError)
    assert issubclass(errors.TraceError, errors.FileReadError)
    assert issubclass(errors.SchemaError, errors.FileReadError)
    assert issubclass(errors.FileWriteError, OSError)
    assert not issubclass(errors.RunCancelled, ValueError)  # never mistaken for a bad config
    assert backend.BackendUnavailable is errors.BackendUnavailable
    exc = errors.SchemaError("run.json", "results[3].ms", "expected `float`")
    assert str(exc) == "run.json: results[3].ms: expected `float`" and exc.where == "results[3].ms"


def test_the_factory_lives_apart_from_the_interface(monkeypatch):
    assert not hasattr(backend, "create_backend")
    monkeypatch.setattr(backends, "cuda_available", lambda: False)
    assert backends.create_backend("auto").name == "cpu"
    with pytest.raises(errors.BackendUnavailable, match="cuda backend unavailable"):
        backends.create_backend("cuda")
    with pytest.raises(ValueError, match="backend = 'tpu'"):
        backends.create_backend("tpu")


def test_check_cancel_raises_only_when_the_hook_says_so():
    backend.check_cancel(None)
    backend.check_cancel(lambda: False)
    with pytest.raises(errors.RunCancelled):
        backend.check_cancel(lambda: True)


def test_an_escaped_memory_error_becomes_an_oom_result_with_the_models_figures():
    cfg = AttentionConfig(seq_len=1024)
    r = backend.oom_result(cfg, "naive", "cpu", "CPU", MemoryError("4 GiB"))
    assert r.oom and r.message == "out of memory: 4 GiB" and r.model_peak_bytes > 0
    peer = backend.oom_result(cfg, "sdpa_flash", "cuda", "GPU", MemoryError())
    assert peer.oom and peer.model_peak_bytes == 0 and "MemoryError" in peer.message


@pytest.mark.gpu
def test_the_cuda_backend_names_the_field_of_each_refused_config():
    from gpu.algorithms import TILED, TILED_MMA
    from gpu.backends.backend import RunOptions

    cuda = backends.create_backend("cuda")
    quick = RunOptions(warmup=0, repeats=1)
    too_big = AttentionConfig(seq_len=256, head_dim=256, block_m=256, block_n=256, dtype="fp32")
    with pytest.raises(errors.UnsupportedConfig, match="shared memory") as info:
        cuda.run(too_big, TILED, quick)
    assert info.value.field == "block_m"
    if TILED_MMA in cuda.algorithms():
        for config, field in (
            (AttentionConfig(seq_len=256, dtype="fp32"), "dtype"),
            (AttentionConfig(seq_len=256, head_dim=96), "head_dim"),
        ):
            with pytest.raises(errors.UnsupportedConfig) as info:
                cuda.run(config, TILED_MMA, quick)
            assert info.value.field == field, str(info.value)


@pytest.mark.gpu
def test_the_cuda_backend_accepts_a_cancel_hook():
    from gpu.algorithms import NAIVE, TILED
    from gpu.backends.backend import RunOptions

    cuda = backends.create_backend("cuda")
    options = RunOptions(warmup=0, repeats=1, check=True, cancel=lambda: False)
    for algorithm in (NAIVE, TILED):
        assert cuda.run(AttentionConfig(seq_len=512), algorithm, options).agrees
