"""What the GPU ring tests share: the one-GPU fused kernel's output on the same inputs, and the
check that a ring's output, timeline and memory are what they should be."""

from __future__ import annotations

from gpu.backends.backend import RunOptions
from gpu.config import AttentionConfig
from gpu.ring.model import device_peak_bytes

#: The fused kernels' tolerance against an fp32 reference (tests/flash_reference.py).
TOLERANCE = {"fp16": 2e-3, "bf16": 1e-2}
#: CuPy's pool rounds every allocation up to 512 bytes; a rank makes at most this many.
POOL_SLACK = 512 * 32


def one_gpu_output(config: AttentionConfig, seed: int, device: int = 0):
    """(q, k, v) on `device` and the fused kernel's O over the whole sequence there."""
    import cupy

    from gpu.backends.cuda_arrays import random_inputs
    from gpu.ring.cuda_ring import fused_kernel

    with cupy.cuda.Device(device):
        q, k, v = random_inputs(config, seed)
        _, module = fused_kernel(config)
        o = cupy.empty_like(q)
        stats = (config.batch, config.heads, config.seq_len)
        m, l = cupy.empty(stats, cupy.float32), cupy.empty(stats, cupy.float32)
        module.flash_forward(q, k, v, o, m, l, config)
        cupy.cuda.Device().synchronize()
    return (q, k, v), o


def assert_ring_matches_one_gpu(ring, config: AttentionConfig, seed: int = 0):
    """Run `ring` on `config`: its O agrees with the one-GPU kernel and with the fp32
    reference, its timeline has a compute event per (device, step) and a comm event per
    sending step, and each rank holds the model's memory. Returns the result."""
    inputs, o = one_gpu_output(config, seed, ring.devices[0])
    options = RunOptions(warmup=1, repeats=2, check=True, seed=seed)
    r = ring.measure(config, options, inputs=inputs, compare_with=o)
    assert not r.oom, r.message
    tol = TOLERANCE[config.dtype]
    m = r.ring
    assert m is not None and m.devices == ring.size
    assert m.max_abs_diff_vs_single is not None and m.max_abs_diff_vs_single <= tol
    assert r.max_abs_error is not None and r.max_abs_error <= tol
    p = ring.size
    for d in range(p):
        assert sorted(e.step for e in m.events(d, "compute")) == list(range(p))
        comm = m.events(d, "comm")
        assert sorted(e.step for e in comm) == list(range(p - 1))
        assert all(e.bytes == m.step_bytes and e.end_ms >= e.start_ms for e in comm)
    if len(set(ring.devices)) == p:  # one rank per device: its pool peak is its own
        model = device_peak_bytes(config, p)
        assert all(model <= b <= model + POOL_SLACK for b in m.device_peak_bytes)
    return r
