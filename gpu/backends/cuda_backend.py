"""The `cuda` backend: naive and tiled attention as real kernels on the GPU, measured.

- naive (gpu/backends/naive_fwd.py): cuBLAS GEMM S = (Q Kᵀ)/√d into a really allocated
  (B, h, N, N) buffer, our softmax kernel S -> P (gpu/kernels/softmax.cu: one read of S, one
  write of P), cuBLAS GEMM O = P V.
- tiled: our fused kernel (gpu/kernels/flash_readable.cu); `tiled_mma` dispatches to
  gpu/launch/flash_mma.py when that module exists and accepts the config, `tiled_wgmma` (sm_90 only)
  to gpu/launch/flash_wgmma.py.
- backward and training step (config.pass_): naive keeps P and runs gpu/backends/naive_bwd.py
  (four cuBLAS GEMMs around our softmax backward, dP and dS really allocated; dS takes the
  memory of S, dead once P exists, as a framework's allocator would); `tiled_mma` keeps O, m and
  l and runs our fused backward (gpu/launch/flash_bwd.py, its main kernel the wgmma one on an
  H100/H200: dQ by atomics, or with `config.deterministic` by its dQ pass in a fixed order,
  bit-identical from run to run). The other algorithms have no backward here and refuse those
  passes. "backward" runs the forward once, untimed, and times the backward's kernels; "step"
  times the forward's and the backward's.
- decode (gpu/backends/cuda_decode.py): naive's three kernels on q rows per head (cuBLAS +
  our softmax, the scores really allocated), and split_kv, our fused split-KV kernel
  (gpu/kernels/decode_split.cu).

Times (`time_launches`, gpu/backends/launch_timing.py): CUDA events between the kernels of the
sequence, run back to back in batches, by the policy of gpu/backends/timing.py (a first batch
that loads every module, warm-up until two batches agree, batches of at least 1 ms, samples
taken again when their spread is too wide). A live sweep once drew a 30 µs kernel at 3 ms.
Besides lazy module loading on a first launch and clocks ramping up from idle (both absorbed by
the warm-up), the likeliest cause is the host: the app times on a worker thread, and while the
GUI thread holds the GIL (up to the 5 ms switch interval) the GPU sits idle between two events,
and the idle time is measured as kernel time. So each timed batch is queued behind a launch gate
(gpu/kernels/measure.cu) that the host opens only once the whole batch is queued: the kernels
then run back to back whatever the host does meanwhile. Compilation happens before any of this
(the launchers compile on creation).

The reference checks are gpu/backends/cuda_reference.py's, the storage dtypes
gpu/backends/cuda_arrays.py's. Memory is the CuPy pool's in-use bytes, sampled at every
allocation of the run by a wrapping allocator; `peak_bytes` is the highest value above the
pool's in-use bytes before the run. `device_peak_bytes` is the device's free memory before the
run minus the least free memory seen during it (cudaMemGetInfo at every allocation and after the
launches): it includes what the libraries allocate on their own (the cuBLAS workspace on its
first use, loaded modules) and the allocator's rounding. A budget becomes the pool's limit for
the run, so naive attention hits the memory wall where the model says it does; an out-of-memory
error at any allocation becomes an `oom` result, every buffer goes back, and the previous limit
is restored.

Profile mode (`RunOptions.profile`): after the timing, each kernel of the run is launched again
under CUPTI PM sampling (gpu/counters/profiler.py, through `profile_launches`), each launch
after an L2 flush, and the result carries the counters (`RunResult.traffic`) beside the
unsampled times. Where counters cannot be read, the result says why in its message and carries
none."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cupy

from ..algorithms import ALGORITHMS, NAIVE, AlgorithmInfo
from ..config import BACKWARD, FORWARD, STEP, AttentionConfig
from ..errors import UnsupportedConfig
from ..launch.cuda_kernels import device_attribute, smem_optin_bytes, storage_dtype
from ..model import costmodel
from ..results import DeviceInfo, KernelTime, KernelTraffic, RunResult
from .backend import RunOptions, check_pass
from .cuda_arrays import random_inputs
from .cuda_decode import (
    decode_launches,
    decode_reference_bytes,
    max_abs_decode_error,
    random_decode_inputs,
)
from .cuda_reference import max_abs_error, max_abs_grad_error, reference_bytes, reference_grad_bytes
from .launch_timing import (
    GateTimedOut,
    LaunchGate,
    OutOfMemoryError,
    profile_launches,
    time_launches,
)
from .naive_fwd import gemm_pv, gemm_qk, softmax_launcher, softmax_plan

# --------------------------------------------------------------------------------------------
# Device facts


@functools.cache
def _device_name(device_id: int) -> str:
    name = cupy.cuda.runtime.getDeviceProperties(device_id)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def device_name() -> str:
    return _device_name(cupy.cuda.Device().id)


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
# The kernels of a run


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
    The timing, the profiler and bench/ncu_driver.py all launch these. A decode config's are
    gpu/backends/cuda_decode.py's."""
    if config.is_decode:
        return decode_launches(config, algorithm, arrays)
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
    if not ALGORITHMS[algorithm].has_backward:
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
    impl = flash_module(algorithm)
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


def flash_module(algorithm: str) -> Any:
    """The launcher of `algorithm`'s fused kernel (the registry's, gpu/algorithms.py)."""
    info = ALGORITHMS.get(algorithm)
    if info is None or info.launcher is None:
        raise UnsupportedConfig(f"unknown algorithm {algorithm!r}", field="algorithm")
    return info.launcher


def _runs_here(info: AlgorithmInfo) -> bool:
    """Whether `info`'s kernels run on this device: naive always; a fused kernel when its
    launcher accepts a default config of a pass it is written for."""
    if info.id == NAIVE:
        return True
    if info.launcher is None:
        return False  # the ring runs through gpu/ring, not this backend
    pass_ = FORWARD if FORWARD in info.passes else info.passes[0]
    try:
        return info.launcher.supports(AttentionConfig(pass_=pass_)) is None
    except Exception:  # it cannot run here
        return False


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
        """Naive, and every registered kernel whose launcher runs here: the readable and
        decode kernels always, a tensor-core kernel where this GPU has its instructions (a
        Hopper kernel on sm_90 only), judged at the default config of the prefill it runs."""
        return tuple(a for a, info in ALGORITHMS.items() if _runs_here(info))

    def passes(self, algorithm: str) -> tuple[str, ...]:
        """The passes the algorithm is written for (gpu/algorithms.py), backward and step
        only where backward kernels of ours follow its forward (`has_backward`: naive and
        tiled_mma)."""
        if algorithm not in self.algorithms():
            return ()
        info = ALGORITHMS[algorithm]
        if info.has_backward:
            return info.passes
        return tuple(p for p in info.passes if p not in (BACKWARD, STEP))

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
        if config.has_backward and algorithm != NAIVE:  # the fused backward (has_backward)
            from ..launch import flash_bwd

            reason = flash_bwd.supports(config)
            if reason is not None:
                raise UnsupportedConfig.from_kernel(reason, config, flash_bwd)
        if algorithm != NAIVE:
            reason = flash_module(algorithm).supports(config)
            if reason is not None:
                raise UnsupportedConfig.from_kernel(
                    reason,
                    config,
                    flash_module(algorithm),
                    tiles_from_config=ALGORITHMS[algorithm].uses_config_tiles,
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
        rows = config.bh * config.new_tokens if config.is_decode else None
        if algorithm == NAIVE and not softmax_plan(config, rows=rows).single_read:
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
        if config.is_decode:
            inputs = random_decode_inputs(config, options.seed)
        else:
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
        if config.is_decode:
            need = decode_reference_bytes(config)
        elif config.has_backward:
            need = reference_grad_bytes(config)
        else:
            need = reference_bytes(config)
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
            if config.is_decode:
                return max_abs_decode_error(a["q"], a["k"], a["v"], a["o"], config), ""
            if config.has_backward:
                return max_abs_grad_error(a, config), ""
            return max_abs_error(a["q"], a["k"], a["v"], a["o"], config), ""
        except OutOfMemoryError as exc:
            return None, f"reference check skipped: out of memory ({exc})"
