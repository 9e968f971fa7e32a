"""The `cuda` backend: naive and tiled attention as real kernels on the GPU, measured.

- naive: cuBLAS GEMM S = (Q Kᵀ)/√d into a really allocated (B, h, N, N) buffer, our softmax
  kernel S -> P (gpu/kernels/softmax.cu: one read of S, one write of P), cuBLAS GEMM O = P V.
- tiled: our fused kernel (gpu/kernels/flash_readable.cu); `tiled_mma` dispatches to
  gpu/launch/flash_mma.py when that module exists and accepts the config, `tiled_wgmma` (sm_90 only)
  to gpu/launch/flash_wgmma.py.
- backward and training step (config.pass_): naive keeps P and runs gpu/backends/naive_bwd.py (four
  cuBLAS GEMMs around our softmax backward, dP and dS really allocated; dS takes the memory of
  S, dead once P exists, as a framework's allocator would); `tiled_mma` keeps O, m and l and
  runs our fused backward (gpu/launch/flash_bwd.py: dQ by atomics, or with
  `config.deterministic` by its dQ pass in a fixed order, bit-identical from run to run). The
  other algorithms have no backward here and refuse those passes. "backward" runs the forward
  once, untimed, and times the backward's kernels; "step" times the forward's and the
  backward's.

Times (`time_launches`): CUDA events between the kernels of the sequence, run back to back in
batches, by the policy of gpu/backends/timing.py (a first batch that loads every module, warm-up
until two batches agree, batches of at least 1 ms, samples taken again when their spread is too
wide). A live sweep once drew a 30 µs kernel at 3 ms. Besides lazy module loading on a first
launch and clocks ramping up from idle (both absorbed by the warm-up), the likeliest cause is
the host: the app times on a worker thread, and while the GUI thread holds the GIL (up to the
5 ms switch interval) the GPU sits idle between two events, and the idle time is measured as
kernel time. So each timed batch is queued behind a launch gate (gpu/kernels/measure.cu) that
the host opens only once the whole batch is queued: the kernels then run back to back whatever
the host does meanwhile. Compilation happens before any of this (the launchers compile on
creation).

Memory is the CuPy pool's in-use bytes, sampled at every allocation of the run by a wrapping
allocator; `peak_bytes` is the highest value above the pool's in-use bytes before the run.
`device_peak_bytes` is the device's free memory before the run minus the least free memory seen
during it (cudaMemGetInfo at every allocation and after the launches): it includes what the
libraries allocate on their own (the cuBLAS workspace on its first use, loaded modules) and the
allocator's rounding. A budget becomes the pool's limit for the run, so naive attention hits the
memory wall where the model says it does; an out-of-memory error at any allocation becomes an
`oom` result, every buffer goes back, and the previous limit is restored.

Profile mode (`RunOptions.profile`): after the timing, each kernel of the run is launched again
under CUPTI PM sampling (gpu/profiling/profiler.py), each launch after an L2 flush, and the result
carries the counters (`RunResult.traffic`) beside the unsampled times. Where counters cannot be
read, the result says why in its message and carries none.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import cupy
import numpy as np

from ..algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA, TILED_WS
from ..config import BACKWARD, FORWARD, PASSES, STEP, AttentionConfig, ceil_div
from ..errors import UnsupportedConfig
from ..launch.cuda_kernels import (
    device_attribute,
    element_type,
    get_kernel,
    smem_optin_bytes,
    storage_dtype,
)
from ..model import costmodel
from ..profiling import profiler
from ..results import DeviceInfo, KernelTime, KernelTraffic, RunResult
from . import timing
from .backend import RunOptions, check_pass
from .cublas_gemm import gemm

SOFTMAX_SOURCE = "softmax.cu"
MEASURE_SOURCE = "measure.cu"
#: Static shared memory of the softmax kernels (their 32-float reduction scratch) plus slack.
SOFTMAX_STATIC_SMEM = costmodel.SOFTMAX_STATIC_SMEM
#: Chunks (16-byte or single elements) each softmax thread handles, at least.
SOFTMAX_CHUNKS_PER_THREAD = 4
#: The reference check works on row blocks whose fp32 scores take at most this many bytes.
REFERENCE_CHUNK_BYTES = 256 << 20


OutOfMemoryError = cupy.cuda.memory.OutOfMemoryError


# --------------------------------------------------------------------------------------------
# Device facts


@functools.cache
def _device_name(device_id: int) -> str:
    name = cupy.cuda.runtime.getDeviceProperties(device_id)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def device_name() -> str:
    return _device_name(cupy.cuda.Device().id)


# --------------------------------------------------------------------------------------------
# dtype helpers: bf16 lives in uint16 arrays as raw bit patterns (CuPy has no bfloat16 dtype)


@functools.cache
def _bf16_kernels() -> tuple[cupy.ElementwiseKernel, cupy.ElementwiseKernel]:
    to_bf16 = cupy.ElementwiseKernel(
        "float32 x",
        "uint16 y",
        # round to nearest even on the 16 dropped bits (inputs here are finite)
        "unsigned int u = __float_as_uint(x);"
        "y = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);",
        "tilescope_f32_to_bf16",
    )
    from_bf16 = cupy.ElementwiseKernel(
        "uint16 x",
        "float32 y",
        "y = __uint_as_float(((unsigned int)x) << 16);",
        "tilescope_bf16_to_f32",
    )
    return to_bf16, from_bf16


def from_float32(x: cupy.ndarray, dtype: str) -> cupy.ndarray:
    """fp32 array -> storage array of config dtype `dtype`."""
    if dtype == "fp32":
        return x
    if dtype == "fp16":
        return x.astype(cupy.float16)
    return _bf16_kernels()[0](x)


def to_float32(x: cupy.ndarray, dtype: str) -> cupy.ndarray:
    """Storage array of config dtype `dtype` -> fp32 array (a new array)."""
    if dtype == "bf16":
        return _bf16_kernels()[1](x)
    return x.astype(cupy.float32)


def random_inputs(config: AttentionConfig, seed: int, count: int = 3) -> tuple[cupy.ndarray, ...]:
    """Q, K, V (and, with count=4, the upstream gradient dO) of shape (B, h, N, d): seeded
    standard-normal data (never zeros, which would make every row's softmax uniform and hide
    masking or rescaling bugs)."""
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    rng = cupy.random.RandomState(seed)
    out = []
    for _ in range(count):  # one fp32 temporary at a time
        out.append(from_float32(rng.standard_normal(shape, dtype=cupy.float32), config.dtype))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Naive attention: GEMM, softmax, GEMM


def gemm_qk(q: cupy.ndarray, k: cupy.ndarray, s: cupy.ndarray, config: AttentionConfig) -> None:
    """S = Q Kᵀ / √d for every (batch, head), into `s`.

    cuBLAS is column-major, and a row-major matrix read column-major is its transpose. So the
    row-major S we want is the column-major Sᵀ = K Qᵀ: A = K (column-major d×N, i.e. Kᵀ) used
    transposed, times B = Q (column-major d×N, i.e. Qᵀ)."""
    n, d = config.seq_len, config.head_dim
    gemm(True, n, n, d, config.scale, k, d, n * d, q, d, n * d, s, n, n * n, config.bh,
         config.dtype)  # fmt: skip


def gemm_pv(p: cupy.ndarray, v: cupy.ndarray, o: cupy.ndarray, config: AttentionConfig) -> None:
    """O = P V. Row-major O is column-major Oᵀ = Vᵀ Pᵀ, with A = V (d×N column-major) and
    B = P (N×N column-major, i.e. Pᵀ)."""
    n, d = config.seq_len, config.head_dim
    gemm(False, d, n, n, 1.0, v, d, n * d, p, n, n * n, o, d, n * d, config.bh,
         config.dtype)  # fmt: skip


@dataclass(frozen=True)
class SoftmaxPlan:
    """How the softmax kernel is launched for a config, and whether it reads S once."""

    kernel_name: str
    vec: int
    threads: int
    grid: int
    shared_bytes: int
    single_read: bool


def softmax_plan(config: AttentionConfig, smem_limit: int | None = None) -> SoftmaxPlan:
    """One block per row. A row that fits in shared memory is read once (smem kernel); a longer
    one (fp16/bf16 N > ~116k, fp32 N > ~58k on Hopper) is read twice (two-pass kernel)."""
    n, eb = config.seq_len, config.elem_bytes
    limit = smem_optin_bytes() if smem_limit is None else smem_limit
    vec = 16 // eb if n % (16 // eb) == 0 else 1  # 16-byte accesses when rows stay aligned
    chunks = n // vec
    single = costmodel.softmax_reads_s_once(config, limit)
    if single:
        threads = ceil_div(chunks, SOFTMAX_CHUNKS_PER_THREAD)
        threads = min(1024, max(32, 1 << (threads - 1).bit_length()))
    else:
        threads = 1024
    rows = config.bh * n
    name = "softmax_rows_smem" if single else "softmax_rows_twopass"
    return SoftmaxPlan(
        kernel_name=f"{name}<{element_type(config.dtype)}, {vec}>",
        vec=vec,
        threads=threads,
        grid=min(rows, (1 << 31) - 1),
        shared_bytes=n * eb if single else 0,
        single_read=single,
    )


def softmax_launcher(
    config: AttentionConfig, smem_limit: int | None = None
) -> Callable[[cupy.ndarray, cupy.ndarray], None]:
    """A function p <- softmax(s) for this config, with its kernel compiled and set up now.
    `smem_limit` overrides the device's limit (tests use it to force the two-pass kernel)."""
    plan = softmax_plan(config, smem_limit)
    kernel = get_kernel(SOFTMAX_SOURCE, plan.kernel_name)
    if plan.shared_bytes and kernel.max_dynamic_shared_size_bytes < plan.shared_bytes:
        kernel.max_dynamic_shared_size_bytes = plan.shared_bytes
    rows = np.int64(config.bh * config.seq_len)
    n = np.int32(config.seq_len)
    causal = np.int32(1 if config.causal else 0)

    def launch(s: cupy.ndarray, p: cupy.ndarray) -> None:
        kernel((plan.grid,), (plan.threads,), (s, p, rows, n, causal), shared_mem=plan.shared_bytes)

    return launch


def naive_forward(
    q, k, v, s, p, o, config: AttentionConfig, launch_softmax: Callable | None = None
) -> None:
    """The three naive kernels, unmeasured (benchmarks time the whole sequence). Pass a
    `softmax_launcher(config)` made once to keep its set-up out of a timed loop."""
    launch_softmax = launch_softmax or softmax_launcher(config)
    gemm_qk(q, k, s, config)
    launch_softmax(s, p)
    gemm_pv(p, v, o, config)


# --------------------------------------------------------------------------------------------
# Reference


def reference_attention(q, k, v, config: AttentionConfig):
    """(O, m, l) in fp32 computed with plain CuPy ops, the whole N×N at once (small sizes)."""
    n = config.seq_len
    qf, kf, vf = (to_float32(x, config.dtype) for x in (q, k, v))
    s = cupy.matmul(qf, kf.swapaxes(-1, -2)) * np.float32(config.scale)
    if config.causal:
        mask = cupy.arange(n)[None, :] > cupy.arange(n)[:, None]
        s = cupy.where(mask, -cupy.inf, s)
    m = s.max(axis=-1)
    e = cupy.exp(s - m[..., None])
    l = e.sum(axis=-1)
    o = cupy.matmul(e, vf) / l[..., None]
    return o.astype(cupy.float32), m.astype(cupy.float32), l.astype(cupy.float32)


def reference_bytes(config: AttentionConfig) -> int:
    """Device memory the chunked reference check needs at once."""
    n, d = config.seq_len, config.head_dim
    rows = _reference_rows(n)
    return 4 * (4 * n * d + 4 * rows * n + 2 * rows * d)


def _reference_rows(n: int) -> int:
    return max(1, min(n, REFERENCE_CHUNK_BYTES // (4 * n)))


def max_abs_error(q, k, v, o, config: AttentionConfig) -> float:
    """max |O - O_ref| with O_ref computed in fp32, one head and one block of rows at a time."""
    n, d = config.seq_len, config.head_dim
    shape = (config.bh, n, d)
    q3, k3, v3, o3 = (x.reshape(shape) for x in (q, k, v, o))
    rows = _reference_rows(n)
    scale = np.float32(config.scale)
    worst = 0.0
    for bh in range(config.bh):
        qf = to_float32(q3[bh], config.dtype)
        kf_t = to_float32(k3[bh], config.dtype).T
        vf = to_float32(v3[bh], config.dtype)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            s = cupy.matmul(qf[r0:r1], kf_t) * scale
            if config.causal:
                mask = cupy.arange(n)[None, :] > cupy.arange(r0, r1)[:, None]
                s = cupy.where(mask, -cupy.inf, s)
            s -= s.max(axis=1, keepdims=True)
            cupy.exp(s, out=s)
            ref = cupy.matmul(s, vf) / s.sum(axis=1, keepdims=True)
            got = to_float32(o3[bh, r0:r1], config.dtype)
            worst = max(worst, float(cupy.abs(ref - got).max()))
            del s, ref, got
    return worst


def reference_grad_bytes(config: AttentionConfig) -> int:
    """Device memory the gradient check needs at once (one head's fp32 N×N matrices)."""
    n, d = config.seq_len, config.head_dim
    return 4 * (3 * n * n + 12 * n * d)


def max_abs_grad_error(a: dict[str, cupy.ndarray], config: AttentionConfig) -> float:
    """max |ours − fp32 reference| over dQ, dK, dV (and O for a step, whose forward is timed),
    one (batch, head) at a time: the backward of softmax(QKᵀ/√d)V on the upcast inputs."""
    n, d = config.seq_len, config.head_dim
    shape = (config.bh, n, d)
    names = ("q", "k", "v", "do", "o", "dq", "dk", "dv")
    x = {name: a[name].reshape(shape) for name in names}
    scale = np.float32(config.scale)
    worst = 0.0
    for bh in range(config.bh):
        qf, kf, vf, dof = (to_float32(x[name][bh], config.dtype) for name in ("q", "k", "v", "do"))
        s = cupy.matmul(qf, kf.T) * scale
        if config.causal:
            s = cupy.where(cupy.arange(n)[None, :] > cupy.arange(n)[:, None], -cupy.inf, s)
        s -= s.max(axis=1, keepdims=True)
        cupy.exp(s, out=s)
        s /= s.sum(axis=1, keepdims=True)  # s now holds P
        refs = {"dv": cupy.matmul(s.T, dof)}
        if config.pass_ == STEP:
            refs["o"] = cupy.matmul(s, vf)
        dp = cupy.matmul(dof, vf.T)
        dp -= (s * dp).sum(axis=1, keepdims=True)
        dp *= s  # dp now holds dS
        refs["dq"] = cupy.matmul(dp, kf) * scale
        refs["dk"] = cupy.matmul(dp.T, qf) * scale
        del s, dp
        for name, ref in refs.items():
            got = to_float32(x[name][bh], config.dtype)
            worst = max(worst, float(cupy.abs(ref - got).max()))
    return worst


# --------------------------------------------------------------------------------------------
# Memory


class _PeakTracker:
    """A CuPy allocator that forwards to the pool and remembers the highest in-use bytes, and
    the least free device memory seen (cudaMemGetInfo after every allocation)."""

    def __init__(self, pool: cupy.cuda.MemoryPool) -> None:
        self.pool = pool
        self.peak = pool.used_bytes()
        self.min_free: int | None = None

    def reset(self) -> None:
        """Count from now on (the inputs are made; their temporaries went back to the device)."""
        self.peak = self.pool.used_bytes()
        self.min_free = None
        self.note_device()

    def note_device(self) -> None:
        free, _ = cupy.cuda.runtime.memGetInfo()
        if self.min_free is None or free < self.min_free:
            self.min_free = int(free)

    def malloc(self, size: int):
        mem = self.pool.malloc(size)
        used = self.pool.used_bytes()
        if used > self.peak:
            self.peak = used
        self.note_device()
        return mem


# --------------------------------------------------------------------------------------------
# Timing

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
    """Counters of each kernel of the sequence (gpu.profiling.profiler), or () and the reason why
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


# --------------------------------------------------------------------------------------------
# The kernels of a run


#: Algorithms with a backward pass on this backend (gpu/backends/naive_bwd.py,
#: gpu/launch/flash_bwd.py).
BACKWARD_ALGORITHMS = (NAIVE, TILED_MMA)


def algorithm_launches(
    config: AttentionConfig, algorithm: str, arrays: dict[str, cupy.ndarray]
) -> list[tuple[str, Callable[[], None]]]:
    """Allocate `algorithm`'s buffers into `arrays` (which holds q, k, v, and do for a
    backward) and return the kernels `config.pass_` times as (name, launch) in order, compiled
    now: naive's gemm_qk, softmax, gemm_pv, or a fused kernel's flash_fwd; for a step these
    followed by the backward's (naive: bwd_dV_gemm, bwd_dP_gemm, softmax_bwd, bwd_dQ_gemm,
    bwd_dK_gemm; fused: flash_bwd_preprocess, flash_bwd, flash_bwd_dq_convert, or with
    `config.deterministic` flash_bwd_dq in place of the conversion); for "backward" the
    backward's alone, after the forward has run here once (untimed) to save what they read.
    The timing, the profiler and bench/ncu_driver.py all launch these."""
    forward = _forward_launches(config, algorithm, arrays)
    if not config.has_backward:
        return forward
    backward = _backward_launches(config, algorithm, arrays)
    if config.pass_ == BACKWARD:
        for _, launch in forward:
            launch()
        return backward
    return forward + backward


def _backward_launches(
    config: AttentionConfig, algorithm: str, a: dict[str, cupy.ndarray]
) -> list[tuple[str, Callable[[], None]]]:
    if algorithm == NAIVE:
        from . import naive_bwd

        a["ds"] = a["s"]  # S is dead once P exists: dS takes its memory
        return naive_bwd.backward_launches(config, a)
    if algorithm != TILED_MMA:
        raise UnsupportedConfig(f"{algorithm} has no backward pass on the cuda backend")
    from ..launch import flash_bwd

    plan = flash_bwd.prepare_backward(config, deterministic=config.deterministic)
    a.update(plan.workspace())
    for name in ("dq", "dk", "dv"):
        a[name] = cupy.empty_like(a["q"])
    return plan.launches(a)


def _forward_launches(
    config: AttentionConfig, algorithm: str, arrays: dict[str, cupy.ndarray]
) -> list[tuple[str, Callable[[], None]]]:
    a = arrays
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    dtype = storage_dtype(config.dtype)
    a["o"] = cupy.empty(shape, dtype=dtype)
    if algorithm == NAIVE:
        n = config.seq_len
        a["s"] = cupy.empty((config.batch, config.heads, n, n), dtype=dtype)
        a["p"] = cupy.empty((config.batch, config.heads, n, n), dtype=dtype)
        launch_softmax = softmax_launcher(config)  # compiled before any timing
        return [
            ("gemm_qk", lambda: gemm_qk(a["q"], a["k"], a["s"], config)),
            ("softmax", lambda: launch_softmax(a["s"], a["p"])),
            ("gemm_pv", lambda: gemm_pv(a["p"], a["v"], a["o"], config)),
        ]
    impl = _flash_module(algorithm)
    stats_shape = (config.batch, config.heads, config.seq_len)
    a["m"] = cupy.empty(stats_shape, dtype=cupy.float32)
    a["l"] = cupy.empty(stats_shape, dtype=cupy.float32)
    return [
        (
            "flash_fwd",
            lambda: impl.flash_forward(a["q"], a["k"], a["v"], a["o"], a["m"], a["l"], config),
        )
    ]


# --------------------------------------------------------------------------------------------
# The backend


@dataclass
class _Buffers:
    """Everything a run allocates, so one `clear()` drops all references before freeing."""

    arrays: dict[str, cupy.ndarray] = field(default_factory=dict)

    def clear(self) -> None:
        self.arrays.clear()


def _flash_module(algorithm: str):
    if algorithm == TILED:
        from ..launch import flash_readable

        return flash_readable
    if algorithm == TILED_MMA:
        try:
            from ..launch import flash_mma
        except ImportError as exc:
            raise UnsupportedConfig(f"{TILED_MMA} is not available: {exc}") from None
        return flash_mma
    if algorithm == TILED_WGMMA:
        try:
            from ..launch import flash_wgmma
        except ImportError as exc:
            raise UnsupportedConfig(f"{TILED_WGMMA} is not available: {exc}") from None
        return flash_wgmma
    if algorithm == TILED_WS:
        from ..launch import flash_ws

        return flash_ws
    raise UnsupportedConfig(f"unknown algorithm {algorithm!r}", field="algorithm")


class CudaBackend:
    """Runs attention on the current CUDA device through CuPy."""

    name = "cuda"

    def __init__(self) -> None:
        if not cupy.is_available():
            from ..errors import BackendUnavailable

            raise BackendUnavailable("CuPy sees no CUDA device")
        self.pool = cupy.get_default_memory_pool()
        self._gate: LaunchGate | None = None
        self._gate_failed = ""

    # -- facts --------------------------------------------------------------------------------

    def device_info(self) -> DeviceInfo:
        dev = cupy.cuda.Device()
        free, total = cupy.cuda.runtime.memGetInfo()
        return DeviceInfo(
            backend=self.name,
            name=device_name(),
            memory_total_bytes=int(total),
            memory_free_bytes=int(free),
            details={
                "device_id": dev.id,
                "compute_capability": dev.compute_capability,
                "sm_count": device_attribute("MultiProcessorCount"),
                "smem_per_block_optin_bytes": smem_optin_bytes(),
                "smem_per_sm_bytes": device_attribute("MaxSharedMemoryPerMultiprocessor"),
                "l2_cache_bytes": device_attribute("L2CacheSize"),
                "cupy_version": cupy.__version__,
                "cuda_runtime_version": cupy.cuda.runtime.runtimeGetVersion(),
                "driver_version": cupy.cuda.runtime.driverGetVersion(),
            },
        )

    def algorithms(self) -> tuple[str, ...]:
        algos = [NAIVE, TILED]
        try:
            from ..launch import flash_mma

            if flash_mma.supports(AttentionConfig()) is None:
                algos.append(TILED_MMA)
        except Exception:  # not written yet, or it cannot run here
            pass
        try:
            from ..launch import flash_wgmma

            if flash_wgmma.supports(AttentionConfig()) is None:  # sm_90 only
                algos.append(TILED_WGMMA)
        except Exception:
            pass
        try:
            from ..launch import flash_ws

            if flash_ws.supports(AttentionConfig()) is None:  # sm_90 only
                algos.append(TILED_WS)
        except Exception:
            pass
        return tuple(algos)

    def passes(self, algorithm: str) -> tuple[str, ...]:
        """Forward for every algorithm; backward and step for naive and tiled_mma, the ones
        with backward kernels here."""
        if algorithm not in self.algorithms():
            return ()
        return PASSES if algorithm in BACKWARD_ALGORITHMS else (FORWARD,)

    def _launch_gate(self) -> LaunchGate | None:
        """The gate for timed batches (made once; None after it has failed once)."""
        if self._gate is None and not self._gate_failed:
            try:
                self._gate = LaunchGate()
            except Exception as exc:  # no pinned memory, compile error: time without it
                self._gate_failed = f"launch gate unavailable ({exc})"
        return self._gate

    # -- running ------------------------------------------------------------------------------

    def run(
        self, config: AttentionConfig, algorithm: str, options: RunOptions | None = None
    ) -> RunResult:
        options = options or RunOptions()
        check_pass(self, config, algorithm)
        if config.has_backward and algorithm == TILED_MMA:
            from ..launch import flash_bwd

            reason = flash_bwd.supports(config)
            if reason is not None:
                raise UnsupportedConfig.from_kernel(reason, config, flash_bwd)
        if algorithm != NAIVE:
            reason = _flash_module(algorithm).supports(config)
            if reason is not None:
                raise UnsupportedConfig.from_kernel(
                    reason, config, _flash_module(algorithm), tiles_from_config=algorithm == TILED
                )
        cost = costmodel.algorithm_cost(config, algorithm, smem_optin_bytes())
        base = {
            "config": config,
            "algorithm": algorithm,
            "backend": self.name,
            "device": device_name(),
            "model_peak_bytes": cost.peak_bytes,
            "hbm_bytes": cost.hbm_bytes,
            "flops": cost.flops,
        }
        notes: list[str] = []
        if algorithm == NAIVE and config.has_backward:
            notes.append("dS is written into the memory of S, which is dead once P exists")
        if algorithm == NAIVE and not softmax_plan(config).single_read:
            notes.append(
                f"softmax rows of {config.seq_len * config.elem_bytes:,} B exceed shared memory "
                f"({smem_optin_bytes():,} B): S is read twice (counted in hbm_bytes)"
            )
        gate = self._launch_gate()  # before the baseline: its pinned flag is not device memory
        if gate is None:
            notes.append(f"timed without the launch gate: {self._gate_failed}")

        pool = self.pool
        buffers = _Buffers()
        previous_limit = pool.get_limit()
        pool.free_all_blocks()
        cupy.cuda.get_current_stream().synchronize()
        baseline = pool.used_bytes()
        free_before, total = (int(x) for x in cupy.cuda.runtime.memGetInfo())
        if options.budget_bytes is not None:
            pool.set_limit(size=baseline + int(options.budget_bytes))
        tracker = _PeakTracker(pool)
        oom_message = ""
        try:
            try:
                with cupy.cuda.using_allocator(tracker.malloc):
                    launches = self._prepare(config, algorithm, options, buffers, tracker)
                    times, remeasured, note = self._time(launches, options, gate)
                    tracker.note_device()
            except OutOfMemoryError as exc:
                oom_message = str(exc)
            if oom_message:
                budget = (
                    f"a budget of {options.budget_bytes:,} B"
                    if options.budget_bytes is not None
                    else "the device's free memory"
                )
                return RunResult(
                    **base,
                    peak_bytes=None,
                    oom=True,
                    message=(
                        f"out of memory: {algorithm} needs {cost.peak_bytes:,} B by the model, "
                        f"more than {budget} ({oom_message})"
                    ),
                )
            if note:
                notes.append(note)
            peak = tracker.peak - baseline
            min_free = tracker.min_free if tracker.min_free is not None else free_before
            pool.set_limit(size=previous_limit)  # the check is not part of the emulated GPU
            traffic: tuple[KernelTraffic, ...] = ()
            if options.profile:
                traffic, note = profile_launches(launches, times)
                if note:
                    notes.append(note)
            error = None
            if options.check:
                if options.profile:
                    # The profiler launched each kernel alone, several times: the fused
                    # backward's dQ accumulator then holds several sums. One whole sequence
                    # leaves every output as a single run of the pass writes it.
                    for _, launch in launches:
                        launch()
                launches = []  # the launchers hold naive's S and P
                error, note = self._check(config, buffers)
                if note:
                    notes.append(note)
            return RunResult(
                **base,
                kernel_times=times,
                peak_bytes=peak,
                max_abs_error=error,
                message="; ".join(notes),
                repeats=max(1, options.repeats),
                device_peak_bytes=max(0, free_before - min_free),
                device_used_bytes=total - min_free,
                remeasured=remeasured,
                traffic=traffic,
            )
        finally:
            launches = []
            buffers.clear()
            pool.set_limit(size=previous_limit)
            cupy.cuda.get_current_stream().synchronize()
            pool.free_all_blocks()

    def _time(
        self, launches: list[tuple[str, Callable[[], None]]], options: RunOptions, gate
    ) -> tuple[tuple[KernelTime, ...], int, str]:
        """Times of the launches; the gate is dropped (and the batch timed again without it)
        if it ever times out."""
        try:
            times, remeasured = time_launches(launches, options.warmup, options.repeats, gate)
            return times, remeasured, ""
        except GateTimedOut as exc:
            self._gate, self._gate_failed = None, str(exc)
            times, remeasured = time_launches(launches, options.warmup, options.repeats, None)
            return times, remeasured, f"{exc}: timed without it"

    def _prepare(
        self,
        config: AttentionConfig,
        algorithm: str,
        options: RunOptions,
        buffers: _Buffers,
        tracker: _PeakTracker,
    ) -> list[tuple[str, Callable[[], None]]]:
        """Allocate the run's buffers and return its kernels as (name, launch) in order."""
        arrays = buffers.arrays
        inputs = random_inputs(config, options.seed, 4 if config.has_backward else 3)
        arrays.update(zip(("q", "k", "v", "do"), inputs, strict=False))
        del inputs
        # Give the generation temporaries back to the device: a cached block that a later,
        # smaller buffer splits can never be freed, and would count against a budget.
        tracker.pool.free_all_blocks()
        tracker.reset()  # peak counts from here: inputs, then the algorithm's own buffers
        return algorithm_launches(config, algorithm, arrays)

    def _check(self, config: AttentionConfig, buffers: _Buffers) -> tuple[float | None, str]:
        a = buffers.arrays
        for name in ("s", "p", "dp", "ds"):  # naive's big buffers are not needed by the check
            a.pop(name, None)
        self.pool.free_all_blocks()
        need = reference_grad_bytes(config) if config.has_backward else reference_bytes(config)
        free, _ = cupy.cuda.runtime.memGetInfo()
        available = free + self.pool.total_bytes() - self.pool.used_bytes()
        limit = self.pool.get_limit()
        if limit:
            available = min(available, limit - self.pool.used_bytes())
        if need > available:
            return None, (
                f"reference check skipped: it needs {need:,} B of device memory, "
                f"{available:,} B are free"
            )
        try:
            if config.has_backward:
                return max_abs_grad_error(a, config), ""
            return max_abs_error(a["q"], a["k"], a["v"], a["o"], config), ""
        except OutOfMemoryError as exc:
            return None, f"reference check skipped: out of memory ({exc})"
