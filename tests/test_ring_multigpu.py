"""The CUDA ring over NCCL on two GPUs: the same output as one GPU's fused kernel, a timeline
with both streams of both devices, the model's memory per GPU, and the fused kernels usable on
the second GPU (their shared-memory opt-in is per device). Skipped with fewer than 2 GPUs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ring_checks import TOLERANCE, assert_ring_matches_one_gpu, one_gpu_output

from gpu.config import AttentionConfig

pytestmark = pytest.mark.multigpu

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ring():
    from gpu.ring.cuda_ring import CudaRing

    with CudaRing([0, 1]) as r:
        yield r


@pytest.mark.parametrize("seq_len", (256, 4096, 12288))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", (64, 128))
def test_two_gpu_ring_agrees_with_one_gpu(ring, seq_len, causal, head_dim):
    config = AttentionConfig(seq_len=seq_len, heads=4, head_dim=head_dim, causal=causal)
    r = assert_ring_matches_one_gpu(ring, config, seed=seq_len)
    assert r.device.startswith("2×")


def test_timeline_has_both_streams_of_both_gpus_and_the_link_is_measured(ring):
    config = AttentionConfig(seq_len=32768, heads=12, head_dim=64, causal=True)
    r = assert_ring_matches_one_gpu(ring, config)
    m = r.ring
    for device in (0, 1):
        assert len(m.events(device, "compute")) == 2
        (comm,) = m.events(device, "comm")
        assert comm.ms > 0 and comm.bytes == 2 * 16384 * 64 * 12 * 2
    assert 0.0 <= m.hidden_fraction <= 1.0
    assert m.achieved_bytes_s > 1e9  # a real transfer happened between the GPUs


def test_fused_kernel_runs_on_the_second_gpu_by_itself():
    """The >48 KiB shared-memory opt-in is set on each device the kernel is loaded on."""
    import cupy

    config = AttentionConfig(seq_len=2048, heads=2, head_dim=128, causal=True)
    _, on_first = one_gpu_output(config, seed=3, device=0)
    _, on_second = one_gpu_output(config, seed=3, device=1)
    with cupy.cuda.Device(0):
        second = cupy.asarray(on_second.get())
        diff = float(cupy.abs(second.astype(cupy.float32) - on_first.astype(cupy.float32)).max())
    assert diff <= TOLERANCE["fp16"]


def test_cli_benches_the_two_gpu_ring_with_check():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "bench", "--backend", "cuda", "--algo", "ring",
         "--devices", "2", "--seq", "4096,8192", "--causal", "--check", "--repeats", "2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "2 devices (zigzag, nccl" in proc.stdout
