"""Timing and sampling a sequence of CUDA launches: CUDA events between the kernels, batches
queued behind a launch gate (gpu/kernels/measure.cu) so the host's pauses never land inside a
measurement, and each kernel's counters under CUPTI after an L2 flush (gpu/counters/profiler.py).

The policy (warm-up, batch sizes, when to measure again) is gpu/backends/timing.py's; this
module runs the batches it asks for.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import cupy
import numpy as np

from ..counters import profiler
from ..launch.cuda_kernels import device_attribute, get_kernel
from ..results import KernelTime, KernelTraffic
from . import timing

MEASURE_SOURCE = "measure.cu"
OutOfMemoryError = cupy.cuda.memory.OutOfMemoryError

#: Launches queued behind one gate (the launch queue holds about a thousand entries; a host
#: that fills it would block with the gate closed until the gate times out).
GATE_LAUNCHES = 96
GATE_TIMEOUT_NS = 2_000_000_000


#: cudaDevAttrUnifiedAddressing, cudaDevAttrCanMapHostMemory (driver_types.h: 41, 19).
_MAPPED_HOST_MEMORY_ATTRIBUTES = (41, 19)


class LaunchGate:
    """Holds the current stream until the host has queued a batch (kernel in measure.cu).

    `hold()` queues the gate kernel, `release()` opens it; `timed_out()` after the batch has
    run says whether the gate gave up waiting (then the batch's times cannot be trusted)."""

    def __init__(self) -> None:
        # Unified addressing makes the host pointer of mapped pinned memory valid on the device.
        runtime, dev = cupy.cuda.runtime, cupy.cuda.Device().id
        if not all(runtime.deviceGetAttribute(a, dev) for a in _MAPPED_HOST_MEMORY_ATTRIBUTES):
            raise RuntimeError("the device cannot read mapped host memory")
        self._kernel = get_kernel(MEASURE_SOURCE, "launch_gate")
        # cudaHostAllocPortable | cudaHostAllocMapped
        self._ptr = cupy.cuda.runtime.hostAlloc(8, 3)
        self._status = (ctypes.c_uint32 * 2).from_address(self._ptr)
        self._status[0], self._status[1] = 1, 0
        self._launch()  # load the module now: never lazily behind a closed gate
        cupy.cuda.get_current_stream().synchronize()

    def _launch(self) -> None:
        self._kernel((1,), (1,), (np.uint64(self._ptr), np.uint64(GATE_TIMEOUT_NS)))

    def hold(self) -> None:
        self._status[0], self._status[1] = 0, 0
        self._launch()

    def release(self) -> None:
        self._status[0] = 1

    def timed_out(self) -> bool:
        return bool(self._status[1])

    def __del__(self) -> None:
        ptr, self._ptr = getattr(self, "_ptr", 0), 0
        if ptr:
            try:
                self._status[0] = 1
                cupy.cuda.runtime.freeHost(ptr)
            except Exception:
                pass


class GateTimedOut(RuntimeError):
    """A gated batch did not start within GATE_TIMEOUT_NS: its times mean nothing."""


class _EventPool(threading.local):
    """CUDA events reused from batch to batch (one set per thread)."""

    def __init__(self) -> None:
        self.events: list = []

    def take(self, count: int) -> list:
        while len(self.events) < count:
            self.events.append(cupy.cuda.Event())
        return self.events[:count]


_event_pool = _EventPool()


def run_batch(
    launches: list[tuple[str, Callable[[], None]]],
    sequences: int,
    gate: LaunchGate | None,
) -> list[float]:
    """Per-kernel milliseconds summed over `sequences` back-to-back runs of the sequence,
    measured by CUDA events between consecutive kernels, in chunks of GATE_LAUNCHES launches,
    each queued behind `gate` when there is one."""
    nk = len(launches)
    per_chunk = max(1, GATE_LAUNCHES // nk)
    sums = [0.0] * nk
    done = 0
    while done < sequences:
        m = min(per_chunk, sequences - done)
        events = _event_pool.take(m * nk + 1)
        if gate is not None:
            gate.hold()
        try:
            events[0].record()
            i = 0
            for _ in range(m):
                for _, launch in launches:
                    launch()
                    i += 1
                    events[i].record()
        finally:
            if gate is not None:
                gate.release()
        events[m * nk].synchronize()
        if gate is not None and gate.timed_out():
            raise GateTimedOut("the launch gate timed out before the batch was queued")
        for i in range(m * nk):
            sums[i % nk] += cupy.cuda.get_elapsed_time(events[i], events[i + 1])
        done += m
    return sums


def time_launches(
    launches: list[tuple[str, Callable[[], None]]],
    warmup: int,
    repeats: int,
    gate: LaunchGate | None = None,
) -> tuple[tuple[KernelTime, ...], int]:
    """(per-kernel times, re-measurements) by the policy of gpu/backends/timing.py; the first batch
    (one sequence, which loads every module) runs ungated, the others behind `gate`."""
    names = [name for name, _ in launches]

    def batch(sequences: int, first: bool) -> list[float]:
        return run_batch(launches, sequences, None if first else gate)

    return timing.time_batches(batch, names, warmup, repeats)


# --------------------------------------------------------------------------------------------
# Profiling

#: Sampled launches per kernel (each after an L2 flush); long kernels get one.
PROFILE_LAUNCHES = 3
PROFILE_ONE_LAUNCH_MS = 50.0
#: The L2 flush reads a buffer this many times the L2's size.
FLUSH_L2_MULTIPLE = 4


class L2Flush:
    """Evicts the L2 cache by reading a buffer several times its size (read_sweep in
    measure.cu); the buffer comes straight from cudaMalloc, outside CuPy's pool, so it never
    counts against a run's budget or peak, and goes back when this object does."""

    def __init__(self, l2_bytes: int) -> None:
        self.nbytes = max(1 << 24, FLUSH_L2_MULTIPLE * l2_bytes) // 16 * 16
        self._memory = cupy.cuda.memory.Memory(self.nbytes)
        self._kernel = get_kernel(MEASURE_SOURCE, "read_sweep<false>")
        self._blocks = 4 * device_attribute("MultiProcessorCount")

    def __call__(self) -> None:
        ptr = np.uint64(self._memory.ptr)
        n16 = np.uint64(self.nbytes // 16)
        self._kernel((self._blocks,), (512,), (ptr, n16, np.int32(1), ptr))
        cupy.cuda.get_current_stream().synchronize()


def profile_launches(
    launches: list[tuple[str, Callable[[], None]]],
    times: tuple[KernelTime, ...],
    synchronize: Callable[[], None] | None = None,
) -> tuple[tuple[KernelTraffic, ...], str]:
    """Counters of each kernel of the sequence (gpu.counters.profiler), or () and the reason why
    not. `times` (the unsampled timing) picks the sampling interval and how many launches to
    sample; `synchronize` waits for the launches (default: CuPy's current stream)."""
    device_id = cupy.cuda.Device().id
    reason = profiler.unavailable_reason(device_id)
    if reason is not None:
        return (), f"traffic not measured: {reason}"
    longest_ms = max(k.ms for k in times)
    interval = profiler.interval_for(longest_ms * 1e6)
    notes = []
    try:
        flush: L2Flush | None = L2Flush(device_attribute("L2CacheSize"))
    except (OutOfMemoryError, cupy.cuda.runtime.CUDARuntimeError):  # cudaMalloc refused
        flush = None
        notes.append("L2 not flushed before sampling (no memory for the flush buffer)")
    sync = synchronize or cupy.cuda.get_current_stream().synchronize
    by_name = {k.name: k.ms for k in times}
    try:
        with profiler.PmSampler(
            device_id, device_attribute("MultiProcessorCount"), interval
        ) as sampler:
            traffic = tuple(
                sampler.measure(
                    name,
                    launch,
                    sync,
                    flush,
                    1 if by_name.get(name, 0.0) > PROFILE_ONE_LAUNCH_MS else PROFILE_LAUNCHES,
                )
                for name, launch in launches
            )
    except profiler.ProfilerUnavailable as exc:
        return (), f"traffic not measured: {exc}"
    return traffic, "; ".join(notes)
