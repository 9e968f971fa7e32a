"""What a GPU result's whole-device memory figure holds beyond the run's own buffers, in words.

Why: the memory plot draws two measured peaks per GPU result, the memory pool's (the buffers
the run allocated) and the whole device's (the drop in free memory during the run, through
cudaMemGetInfo). They agree except where CUDA libraries allocate on their own: a recording's
first naive run (N = 256 in the shipped H200 sweep) takes the cuBLAS workspace and loads its
kernel modules, 70.8 MB beside a 4.72 MB pool, and its point sits far above the curve. The
note says so from the result's own fields (`peak_bytes`, `device_peak_bytes`,
`device_used_bytes`), never from a guess.
"""

from __future__ import annotations

from gpu.results import RunResult
from gpu.units import fmt_bytes

#: Below this the two peaks agree (the pool's rounding to its blocks).
AGREE_BYTES = 2 * 1024 * 1024


def device_memory_note(result: RunResult) -> str:
    """One line on the whole-device figure of `result` against its pool peak ("" when the
    result has no whole-device figure)."""
    device, pool = result.device_peak_bytes, result.peak_bytes
    if device is None or pool is None or result.oom:
        return ""
    used = (
        f"; {fmt_bytes(result.device_used_bytes)} were in use on the device then, the CUDA "
        "context and every earlier run's library memory included"
        if result.device_used_bytes
        else ""
    )
    extra = device - pool
    if extra > AGREE_BYTES:
        return (
            f"whole device: {fmt_bytes(extra)} more than the pool's "
            f"{fmt_bytes(pool)}, taken outside the pool during this run by the CUDA libraries "
            "(the cuBLAS workspace and kernel modules, loaded on first use; later runs find "
            f"them in place){used}"
        )
    if extra < -AGREE_BYTES:
        return (
            f"whole device: {fmt_bytes(-extra)} less than the pool's {fmt_bytes(pool)}, which "
            f"reused memory it already held{used}"
        )
    return f"whole device: the pool's buffers{used}"
