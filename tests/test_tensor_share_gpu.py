"""On a real GPU the tensor-pipe share is the pipes' real peak: for a cuBLAS GEMM (wgmma on
Hopper) the counters' share equals its achieved TFLOP/s over the wgmma roof at the clock the
counters measured.

Marked `gpu`; skipped where CuPy sees no device or CUPTI cannot sample.
"""

from __future__ import annotations

import statistics

import pytest

from gpu.model import costmodel, roofline

pytestmark = pytest.mark.gpu

N = 8192


@pytest.fixture(scope="module")
def sampling():
    from gpu.counters import profiler

    reason = profiler.unavailable_reason()
    if reason is not None:
        pytest.skip(f"CUPTI cannot sample here ({reason.kind}): {reason}")
    return profiler


def test_a_cublas_gemms_tensor_share_is_its_tflops_over_the_wgmma_roof(sampling):
    import cupy

    from gpu.launch.cuda_kernels import device_attribute

    spec = costmodel.gpu_for_device_name(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
    if spec is None or not spec.tensor_flops_per_clock_per_sm:
        pytest.skip("the wgmma rate per clock is known for Hopper GPUs only")
    a = cupy.random.standard_normal((N, N), dtype=cupy.float32).astype(cupy.float16)
    b = cupy.random.standard_normal((N, N), dtype=cupy.float32).astype(cupy.float16)
    c = cupy.empty((N, N), dtype=cupy.float16)

    def gemm() -> None:
        cupy.matmul(a, b, out=c)

    stream = cupy.cuda.get_current_stream()
    for _ in range(3):
        gemm()
    stream.synchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(10):
        start.record()
        gemm()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    ms = statistics.median(times)
    sms = device_attribute("MultiProcessorCount")
    with sampling.PmSampler(0, sms) as sampler:
        traffic = sampler.measure("gemm", gemm, stream.synchronize, launches=3)
    share = roofline.tensor_share(traffic, ms, sms)
    clock = roofline.kernel_clock_hz(traffic)
    peak = costmodel.with_clock(spec, clock, "measured").tensor_flops
    achieved = 2 * N**3 / (ms * 1e-3)
    print(
        f"GEMM {N}³ fp16: {ms:.3f} ms, {achieved / 1e12:.1f} TFLOP/s; clock {clock / 1e9:.3f} GHz "
        f"(counters), ClockRate attribute {device_attribute('ClockRate') / 1e6:.3f} GHz; wgmma "
        f"roof {peak / 1e12:.1f} TFLOP/s; TFLOP/s ÷ roof {achieved / peak:.3f}; tensor share "
        f"{share:.3f}; FLOPs per busy pipe cycle {2 * N**3 / traffic.tensor_active_cycles:.1f}"
    )
    assert 0 < share <= 1.0
    assert share == pytest.approx(achieved / peak, rel=0.10)
