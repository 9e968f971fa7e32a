"""The decode kernels on a GPU: the split-KV kernel (gpu/kernels/decode_split.cu) is exact by
FlashAttention's criterion (its error against an fp32 reference at most twice that of naive's
fp16 scores) over odd cache lengths, GQA ratios 1/4/8/32 and 1 or 8 new tokens; it writes every
output, merges the same way launch after launch, and its registers are the design's, so the
cost model and the CPU backend cut the cache where the kernel does."""

from __future__ import annotations

import pytest

from gpu.algorithms import NAIVE, SPLIT_KV, TILED
from gpu.config import DECODE, AttentionConfig

pytestmark = pytest.mark.gpu


def _decode(**kw) -> AttentionConfig:
    return AttentionConfig(pass_=DECODE, **kw)


def _run(config: AttentionConfig, algorithm: str, seed: int = 0):
    """(O, the inputs) after one launch of `algorithm`'s kernels on seeded inputs, O poisoned
    with NaN beforehand so an unwritten element shows."""
    import cupy as cp

    from gpu.backends.cuda_decode import decode_launches, random_decode_inputs

    a = dict(zip(("q", "k", "v"), random_decode_inputs(config, seed), strict=True))
    launches = decode_launches(config, algorithm, a)
    _poison(a["o"], config)
    for _, launch in launches:
        launch()
    cp.cuda.get_current_stream().synchronize()
    return a, launches


def _poison(o, config: AttentionConfig) -> None:
    import cupy as cp

    nan = 0x7E00 if config.dtype == "fp16" else 0x7FC0
    o.view(cp.uint16).fill(nan)


def _error(a, config: AttentionConfig) -> float:
    import cupy as cp

    from gpu.backends.cuda_decode import max_abs_decode_error

    assert not bool(cp.isnan(_as_float(a["o"], config)).any()), "an output was never written"
    return max_abs_decode_error(a["q"], a["k"], a["v"], a["o"], config)


def _as_float(x, config: AttentionConfig):
    from gpu.backends.cuda_arrays import to_float32

    return to_float32(x, config.dtype)


@pytest.mark.parametrize("new_tokens", [1, 8])
@pytest.mark.parametrize("group", [1, 4, 8, 32])
@pytest.mark.parametrize("n", [1, 17, 4097, 131071])
def test_split_kv_kernel_is_exact_by_flashattentions_criterion(n, group, new_tokens):
    config = _decode(
        seq_len=n, heads=2 * group, kv_heads=2, new_tokens=new_tokens, head_dim=128, batch=2
    )
    naive = _error(_run(config, NAIVE, seed=n)[0], config)
    split = _error(_run(config, SPLIT_KV, seed=n)[0], config)
    assert naive <= 1e-2
    assert split <= 2 * naive + 1e-3, (split, naive)


@pytest.mark.parametrize(
    ("head_dim", "dtype", "heads", "kv_heads", "n"),
    [(64, "fp16", 8, 8, 5000), (256, "fp16", 8, 2, 3001), (128, "bf16", 32, 8, 70000),
     (64, "bf16", 12, 3, 999), (128, "fp16", 6, 2, 257)],
)  # fmt: skip
def test_split_kv_kernel_head_dims_dtypes_and_ragged_groups(head_dim, dtype, heads, kv_heads, n):
    config = _decode(
        seq_len=n, heads=heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype, batch=3
    )
    naive = _error(_run(config, NAIVE, seed=7)[0], config)
    split = _error(_run(config, SPLIT_KV, seed=7)[0], config)
    assert split <= 2 * naive + (1e-2 if dtype == "bf16" else 1e-3), (split, naive)


def test_every_launch_merges_again_and_gives_the_same_bits():
    """The last block of a unit resets its counter: a second launch merges again (an unreset
    counter would leave O unwritten), in the same order (the same bits)."""
    import cupy as cp

    config = _decode(seq_len=65536, heads=32, kv_heads=8, head_dim=128)
    a, launches = _run(config, SPLIT_KV)
    first = a["o"].copy()
    assert int(a["counters"].size) > 0 and not bool(a["counters"].any())
    for _ in range(3):
        _poison(a["o"], config)
        launches[0][1]()
        cp.cuda.get_current_stream().synchronize()
        assert bool((a["o"].view(cp.uint16) == first.view(cp.uint16)).all())


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("group_rows", [1, 2, 4, 8])
def test_the_compiled_kernels_registers_are_the_designs(head_dim, group_rows):
    """The cost model and the CPU backend plan the split with DESIGN_REGISTERS; the kernel the
    device compiles must have those registers, or its split would differ from theirs."""
    from gpu.launch import decode_split
    from gpu.launch.cuda_kernels import device_attribute, get_kernel

    config = _decode(seq_len=4096, heads=group_rows, kv_heads=1, head_dim=head_dim)
    kernel = get_kernel(decode_split.SOURCE, decode_split.kernel_name(config))
    registers = decode_split.compiled_registers(kernel)
    design = decode_split.DESIGN_REGISTERS[(head_dim, decode_split.rows_per_block(config))]
    assert decode_split.blocks_per_sm(registers) == decode_split.blocks_per_sm(design), registers
    sms = device_attribute("MultiProcessorCount")
    assert decode_split.prepare(config).plan == decode_split.split_plan(config, sms)


def test_the_cuda_backend_runs_decode_and_checks_it():
    from gpu.backends.backend import RunOptions
    from gpu.backends.cuda_backend import CudaBackend
    from gpu.errors import UnsupportedConfig

    backend = CudaBackend()
    config = _decode(seq_len=16384, heads=32, kv_heads=8, head_dim=128, batch=2)
    options = RunOptions(warmup=1, repeats=3, check=True)
    naive, split = backend.run(config, NAIVE, options), backend.run(config, SPLIT_KV, options)
    assert naive.agrees and split.agrees
    assert [k.name for k in naive.kernel_times] == ["gemm_qk", "softmax", "gemm_pv"]
    assert [k.name for k in split.kernel_times] == ["decode_split"]
    with pytest.raises(UnsupportedConfig):
        backend.run(config, TILED, options)
    with pytest.raises(UnsupportedConfig):
        backend.run(AttentionConfig(seq_len=256), SPLIT_KV, options)


def test_bench_checks_decode_on_the_gpu(capsys):
    from main import main

    argv = ["bench", "--backend", "cuda", "--pass", "decode", "--seq", "4097,32768",
            "--heads", "32", "--kv-heads", "8", "--head-dim", "128", "--check"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "split_kv" in out and "naive" in out
