"""The CUDA ring on one GPU: NCCL with one rank, and P = 2, 3, 4 ranks sharing the GPU through
the same-device test double, against the fused kernel's own output (gpu marker)."""

from __future__ import annotations

import pytest
from ring_checks import assert_ring_matches_one_gpu

from gpu.config import AttentionConfig

pytestmark = pytest.mark.gpu

CASES = [
    pytest.param(64, "fp16", False, id="d64-full"),
    pytest.param(64, "fp16", True, id="d64-causal"),
    pytest.param(128, "fp16", True, id="d128-causal"),
    pytest.param(128, "bf16", False, id="d128-bf16"),
]


def test_nccl_with_one_rank_moves_a_block_to_itself_byte_for_byte():
    import cupy

    from gpu.ring.cuda_ring import CudaRing

    with CudaRing([0]) as ring:
        a = cupy.arange(1 << 16, dtype=cupy.uint8)
        b = cupy.zeros_like(a)
        ring.synchronize()
        ring.transport.shift(ring.ranks, [a], [b])
        ring.synchronize()
        assert bool((a == b).all())


@pytest.mark.parametrize(("head_dim", "dtype", "causal"), CASES)
def test_ring_of_one_gpu_over_nccl_is_the_fused_kernel(head_dim, dtype, causal):
    from gpu.ring.cuda_ring import CudaRing

    config = AttentionConfig(seq_len=1000, heads=3, head_dim=head_dim, dtype=dtype, causal=causal)
    with CudaRing([0]) as ring:
        r = assert_ring_matches_one_gpu(ring, config)
    assert r.ring.transport == "nccl" and r.ring.hidden_fraction is None


@pytest.mark.parametrize("devices", (2, 3, 4))
@pytest.mark.parametrize(("head_dim", "dtype", "causal"), CASES)
def test_ring_of_virtual_ranks_on_one_gpu_matches_the_fused_kernel(
    devices, head_dim, dtype, causal
):
    from gpu.ring.cuda_ring import CudaRing
    from tests.ring_test_double import SameDeviceCopyTransport

    config = AttentionConfig(
        seq_len=768, heads=2, batch=2, head_dim=head_dim, dtype=dtype, causal=causal
    )  # 768 splits into 2P equal chunks for P = 2, 3, 4
    ring = CudaRing([0] * devices, SameDeviceCopyTransport())
    assert_ring_matches_one_gpu(ring, config, seed=devices)


def test_ring_on_one_gpu_refuses_a_sequence_without_equal_chunks():
    from gpu.backends.backend import RunOptions
    from gpu.ring.cuda_ring import CudaRing
    from gpu.ring.schedule import RingConfigError
    from tests.ring_test_double import SameDeviceCopyTransport

    ring = CudaRing([0, 0, 0], SameDeviceCopyTransport())
    with pytest.raises(RingConfigError, match="2·P = 6"):
        ring.measure(AttentionConfig(seq_len=1000, causal=True), RunOptions())
