"""Robust timing on a real GPU: a host that stalls between launches does not lengthen a kernel's
measured time, results keep their spread, and the device-level peak covers the pool's.

Marked `gpu` (skipped where CuPy sees no device).
"""

from __future__ import annotations

import time

import pytest

from gpu.algorithms import NAIVE, TILED
from gpu.backends.backend import RunOptions
from gpu.config import AttentionConfig

pytestmark = pytest.mark.gpu

STALL_S = 0.003  # about what a GUI thread holding the GIL for one switch interval costs


@pytest.fixture(scope="module")
def backend():
    from gpu.backends.cuda_backend import CudaBackend

    return CudaBackend()


@pytest.fixture
def two_small_kernels():
    import cupy

    x = cupy.zeros(1 << 16, dtype=cupy.float32)
    y = cupy.zeros(1 << 16, dtype=cupy.float32)

    def first() -> None:
        cupy.add(x, 1, out=x)

    def second() -> None:
        time.sleep(STALL_S)  # the host is late with the second launch
        cupy.multiply(y, 2, out=y)

    first()  # compile both elementwise kernels now
    cupy.multiply(y, 2, out=y)
    cupy.cuda.get_current_stream().synchronize()
    return [("first", first), ("second", second)]


def test_a_host_stall_between_launches_is_measured_without_the_gate(two_small_kernels):
    from gpu.backends.launch_timing import run_batch

    ungated = run_batch(two_small_kernels, 5, None)
    assert ungated[1] / 5 >= 0.8 * STALL_S * 1e3  # the idle GPU was timed as kernel time


def test_the_launch_gate_keeps_a_host_stall_out_of_the_kernel_time(backend, two_small_kernels):
    from gpu.backends.launch_timing import run_batch

    gate = backend._launch_gate()
    assert gate is not None, backend._gate_failed
    gated = run_batch(two_small_kernels, 5, gate)
    assert gated[1] / 5 < 0.2 * STALL_S * 1e3
    assert not gate.timed_out()


def test_times_keep_their_spread_and_the_remeasure_count(backend):
    config = AttentionConfig(seq_len=1024, heads=4)
    result = backend.run(config, NAIVE, RunOptions(warmup=1, repeats=5))
    for k in result.kernel_times:
        assert k.count == 5
        assert 0 < k.min_ms <= k.ms <= k.max_ms
    assert 0 <= result.remeasured <= 3


#: The driver maps device memory in 2 MiB pages and serves small allocations from pages it
#: already mapped, so free memory (cudaMemGetInfo) misses up to a page per small buffer.
PAGE = 2 << 20


def test_the_device_level_peak_covers_the_pools_peak(backend):
    config = AttentionConfig(seq_len=4096, heads=12)
    for algorithm in (NAIVE, TILED):
        result = backend.run(config, algorithm, RunOptions(warmup=0, repeats=1))
        # the row statistics m and l (196 KiB each here) may land in already mapped pages
        assert result.device_peak_bytes >= result.peak_bytes - 2 * PAGE, algorithm
        assert result.device_used_bytes >= result.device_peak_bytes
