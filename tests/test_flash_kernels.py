"""Every fused tensor-core kernel computes exact attention (to fp16/bf16 rounding) for every
shape it accepts, and writes every output.

One test, parametrized over the kernels (mma.sync, wgmma, warp-specialized), dtypes, head dims,
masks and sequence lengths, against an fp32 reference computed with CuPy on the upcast inputs
(gpu.launch.attention_reference), after poisoning O, m and l with NaN. A kernel that does not accept
a config here is skipped with its reason, except that a Hopper GPU must run the Hopper kernels.
"""

from __future__ import annotations

import importlib
import zlib

import pytest
from flash_reference import assert_matches_reference, assert_rejects_a_wrong_shape

from gpu.algorithms import TILED_WGMMA, TILED_WS
from gpu.config import AttentionConfig

pytestmark = pytest.mark.gpu

KERNELS = {
    "mma": "gpu.launch.flash_mma",
    "wgmma": "gpu.launch.flash_wgmma",
    "ws": "gpu.launch.flash_ws",
}
HOPPER_ONLY = {"wgmma", "ws"}
SEQ_LENS = (1, 17, 113, 128, 1000, 1023, 4096)


def _module(kernel: str):
    return importlib.import_module(KERNELS[kernel])


def _skip_unless_supported(kernel: str, config: AttentionConfig) -> None:
    import cupy as cp

    module = _module(kernel)
    reason = module.supports(config)
    if reason is None:
        return
    on_hopper = cp.cuda.Device().compute_capability == "90"
    if kernel in HOPPER_ONLY and on_hopper and config.head_dim in module.SUPPORTED_HEAD_DIMS:
        pytest.fail(f"a Hopper GPU must run {kernel}: {reason}")
    pytest.skip(reason)


@pytest.mark.parametrize("seq_len", SEQ_LENS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_matches_fp32_reference_and_writes_every_output(
    kernel: str, dtype: str, head_dim: int, causal: bool, seq_len: int
) -> None:
    # Several (batch, head) pairs at short N catch head-offset bugs; fewer at long N keep the
    # fp32 reference's N×N matrices small.
    batch, heads = (2, 3) if seq_len <= 1023 else (1, 2)
    config = AttentionConfig(
        seq_len=seq_len, heads=heads, head_dim=head_dim, batch=batch, dtype=dtype, causal=causal
    )
    _skip_unless_supported(kernel, config)
    seed = zlib.crc32(f"{kernel}-{dtype}-{head_dim}-{causal}-{seq_len}".encode())
    assert_matches_reference(_module(kernel).flash_forward, config, seed)


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_rejects_arrays_of_the_wrong_shape(kernel: str) -> None:
    config = AttentionConfig(seq_len=64, heads=2, head_dim=64)
    _skip_unless_supported(kernel, config)
    assert_rejects_a_wrong_shape(_module(kernel).flash_forward)


@pytest.mark.parametrize(("kernel", "algorithm"), [("wgmma", TILED_WGMMA), ("ws", TILED_WS)])
def test_the_cuda_backend_offers_the_hopper_kernels_on_sm90_only(kernel: str, algorithm: str):
    from gpu.backend_factory import create_backend

    offered = algorithm in create_backend("cuda").algorithms()
    assert offered == (_module(kernel).supports(AttentionConfig()) is None)
