"""NumPy backend: the same two algorithms, exact, on the CPU, so Tilescope teaches on any laptop.

Every pass runs: the inference forward, the backward (after a forward that saves what it
needs: naive keeps P, tiled O and one logsumexp per row; gpu/backends/cpu_backward.py), the
training step (both, each kernel timed) and the decode pass (naive and split-KV,
gpu/backends/cpu_decode.py).

- naive really allocates S and P (B·h·N² elements each, in the config dtype) and fills them in
  three passes, like the three CUDA kernels.
- tiled never touches an N×N array: it streams key/value tiles and keeps the online-softmax
  statistics m, l and an fp32 O accumulator. One head at a time, it processes a chunk of query
  tiles together (independent thread blocks on a GPU) in fp32 buffers allocated once per run
  and updated in place, so its working set is a few tiles, like a GPU block's SRAM: its peak
  is the model's (Q, K, V, O, m, l) plus these buffers, which the result's message states
  (NumPy has no fast fp16 matrix multiply, so the tiles are fp32 copies).

Both algorithms check `RunOptions.cancel` between tiles (naive: between kernels and row
chunks), so a stale run is abandoned within milliseconds (RunCancelled).

Peak memory is the high-water mark of NumPy array data held during one extra, untimed run
(gpu/backends/array_meter.py counts it through NumPy's allocator hook), so metering never slows the
timed runs.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import time
from collections.abc import Iterator, Sequence

import numpy as np
import psutil

from ..algorithms import ALGORITHMS, NAIVE, SPLIT_KV, TILED, tile_shape
from ..config import STEP, AttentionConfig, ceil_div
from ..files.schema import finite_result
from ..model.costmodel import algorithm_cost
from ..results import DeviceInfo, KernelTime, RunResult
from ..units import fmt_bytes
from . import cpu_backward, cpu_decode, cpu_machine
from .array_meter import measure_peak
from .backend import CancelHook, RunOptions, check_cancel, check_pass
from .numpy_dtypes import numpy_dtype

#: Query rows processed together; bounds every temporary to ROW_CHUNK·N (naive) or ROW_CHUNK·Bc.
ROW_CHUNK = 1024
#: Share of available RAM a run may plan to use; the rest is left for the app and the OS.
RAM_HEADROOM = 0.8
#: The shortest time a kernel may report: the clock's resolution (a time is never 0).
CLOCK_RESOLUTION_S = time.get_clock_info("perf_counter").resolution


def random_inputs(config: AttentionConfig, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Q, K, V with unit-normal entries in the config dtype, shape (B, h, N, d)."""
    rng = np.random.default_rng(seed)
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    dtype = numpy_dtype(config.dtype)
    return tuple(rng.standard_normal(shape, dtype=np.float32).astype(dtype) for _ in range(3))


def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """float64 attention, row chunk by row chunk: the ground truth backends are checked against."""
    b, h, n, d = q.shape
    out = np.empty((b, h, n, d), dtype=np.float64)
    scale = d**-0.5
    for bi in range(b):
        for hi in range(h):
            k64 = k[bi, hi].astype(np.float64)
            v64 = v[bi, hi].astype(np.float64)
            for r0 in range(0, n, ROW_CHUNK):
                r1 = min(r0 + ROW_CHUNK, n)
                s = q[bi, hi, r0:r1].astype(np.float64) @ k64.T * scale
                if causal:
                    s[np.arange(r0, r1)[:, None] < np.arange(n)[None, :]] = -np.inf
                s -= s.max(axis=1, keepdims=True)
                p = np.exp(s)
                p /= p.sum(axis=1, keepdims=True)
                out[bi, hi, r0:r1] = p @ v64
    return out


class CpuBackend:
    """Runs naive and tiled attention with NumPy; see the module docstring."""

    name = "cpu"

    def device_info(self) -> DeviceInfo:
        vm = psutil.virtual_memory()
        return DeviceInfo(
            backend="cpu",
            name=_cpu_name(),
            memory_total_bytes=int(vm.total),
            memory_free_bytes=int(vm.available),
            # This CPU's roofs: its SIMD rates, clock, and a bandwidth measured once per process.
            details={"numpy": np.__version__, **cpu_machine.device_details()},
        )

    def algorithms(self) -> tuple[str, ...]:
        return (NAIVE, TILED, SPLIT_KV)

    def passes(self, algorithm: str) -> tuple[str, ...]:
        """Every pass each algorithm is written for (gpu.algorithms)."""
        return ALGORITHMS[algorithm].passes if algorithm in self.algorithms() else ()

    def footprint_bytes(self, config: AttentionConfig, algorithm: str) -> int:
        """Bytes a run will hold: the model's peak plus this backend's bounded temporaries."""
        if config.is_decode:
            temps = cpu_decode.decode_temp_bytes(config, algorithm)
            return algorithm_cost(config, algorithm).peak_bytes + temps
        n, d = config.seq_len, config.head_dim
        rows = min(ROW_CHUNK, n)
        if algorithm == NAIVE:
            temps = 3 * rows * n * 4 + 4 * n * d * 4  # fp32 row block of S/P, upcast K/V
            if config.has_backward:
                temps += cpu_backward.naive_backward_temp_bytes(config)
        else:
            temps = tile_buffer_bytes(config)
            if config.has_backward:
                temps += cpu_backward.tiled_backward_buffer_bytes(config)
        return algorithm_cost(config, algorithm).peak_bytes + temps

    def run(
        self, config: AttentionConfig, algorithm: str, options: RunOptions | None = None
    ) -> RunResult:
        return self.run_interleaved(config, (algorithm,), options)[algorithm]

    def run_interleaved(
        self,
        config: AttentionConfig,
        algorithms: Sequence[str],
        options: RunOptions | None = None,
    ) -> dict[str, RunResult]:
        """Measure `algorithms` on `config` in interleaved rounds: every round runs each one
        once (in turn, the order reversed every other round), so whatever else the machine
        does meanwhile slows them alike and a comparison of their times stays fair. Each
        algorithm's kernels report the median of the rounds and their fastest and slowest
        (the spread). Warm-up rounds come first; peak memory comes from one metered run of
        each, apart from the timed ones. An algorithm that would not fit is an out-of-memory
        result and sits the rounds out."""
        options = options or RunOptions()
        for algorithm in algorithms:
            if algorithm not in self.algorithms():
                raise ValueError(
                    f"algorithm = {algorithm!r} is not available on the cpu backend: "
                    + ", ".join(self.algorithms())
                )
            check_pass(self, config, algorithm)
        results: dict[str, RunResult] = {}
        runs: dict[str, _Prepared] = {}
        inputs: tuple[np.ndarray, ...] | None = None
        for algorithm in algorithms:
            refused = self._refusal(config, algorithm, options)
            if refused is not None:
                results[algorithm] = refused
                continue
            if inputs is None:  # one set for all: the same Q, K, V (and dO) for each
                inputs = _inputs(config, options.seed)
            runs[algorithm] = _prepare(config, algorithm, inputs, options.cancel)
        order = list(runs)
        for _ in range(options.warmup):
            for algorithm in order:
                runs[algorithm].run()
        for round_ in range(max(1, options.repeats)):
            for algorithm in order if round_ % 2 == 0 else reversed(order):
                runs[algorithm].time_once()
        for algorithm, prepared in runs.items():
            results[algorithm] = prepared.result(self.name, options)
        return {a: results[a] for a in algorithms}

    def _refusal(
        self, config: AttentionConfig, algorithm: str, options: RunOptions
    ) -> RunResult | None:
        """An out-of-memory result when the run would not fit in free RAM or the budget."""
        need = self.footprint_bytes(config, algorithm)
        available = int(psutil.virtual_memory().available * RAM_HEADROOM)
        limit = min(available, options.budget_bytes or available)
        if need <= limit:
            return None
        what = "the memory budget" if limit != available else "free RAM"
        return RunResult(
            **_result_base(config, algorithm, self.name),
            oom=True,
            message=(
                f"{algorithm} at N={config.seq_len} needs {fmt_bytes(need)} on the CPU; "
                f"{what} allows {fmt_bytes(limit)}"
            ),
        )


@functools.cache
def _blas_threads():  # type: ignore[no-untyped-def]
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # an install without it: BLAS keeps its own threads
        return None
    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """The tiled path's matrix products on one core, like a GPU block on one SM. Its tiles are
    small (a chunk of query rows by 64 keys): split over BLAS's threads they cost more in
    hand-offs than they gain, and on a busy machine each product waited for a thread that was
    not running (N = 1024 on a loaded 2-core machine: 1.07 s with two threads, 137 ms with
    one). Naive's large products keep every thread."""
    controller = _blas_threads()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


def _result_base(config: AttentionConfig, algorithm: str, backend: str) -> dict:
    cost = algorithm_cost(config, algorithm)
    return dict(
        config=config,
        algorithm=algorithm,
        backend=backend,
        device=_cpu_name(),
        model_peak_bytes=cost.peak_bytes,
        hbm_bytes=cost.hbm_bytes,
        flops=cost.flops,
    )


def _inputs(config: AttentionConfig, seed: int) -> tuple[np.ndarray, ...]:
    """Q, K, V (a decode step's new queries and its cache), and dO for a pass with a
    backward."""
    inputs_of = cpu_decode.random_decode_inputs if config.is_decode else random_inputs
    q, k, v = inputs_of(config, seed)
    if config.has_backward:
        return q, k, v, cpu_backward.random_grad_output(config, seed)
    return q, k, v


class _Prepared:
    """One algorithm of an interleaved measurement: its kernels on the shared inputs, its
    metered peak and output (taken at once), and its timed samples as the rounds add them."""

    def __init__(
        self,
        config: AttentionConfig,
        algorithm: str,
        inputs: tuple[np.ndarray, ...],
        kernels,  # type: ignore[no-untyped-def]
        cancel: CancelHook | None,
    ) -> None:
        self.config, self.algorithm, self.inputs = config, algorithm, inputs
        self._kernels, self._cancel = kernels, cancel
        self.times: dict[str, list[float]] = {}
        # One metered run for peak memory, apart from the timed runs.
        peak, self.out = measure_peak(lambda: self.run()[0])
        self.peak = peak + sum(x.nbytes for x in inputs)  # the inputs are held throughout

    def run(self):  # type: ignore[no-untyped-def]
        q, k, v = self.inputs[:3]
        if self.algorithm == NAIVE:
            return self._kernels(self.config, q, k, v, cancel=self._cancel)
        with one_blas_thread():
            return self._kernels(self.config, q, k, v, cancel=self._cancel)

    def time_once(self) -> None:
        _, spent = self.run()
        for name, seconds in spent:
            self.times.setdefault(name, []).append(max(seconds, CLOCK_RESOLUTION_S))

    def result(self, backend: str, options: RunOptions) -> RunResult:
        config, out = self.config, self.out
        error = None
        if options.check and config.is_decode:
            ref = cpu_decode.reference_decode(*self.inputs[:3], config)
            error = float(np.max(np.abs(out.astype(np.float64) - ref)))
        elif options.check and config.has_backward:
            error = _training_error(config, out, *self.inputs)
        elif options.check:
            ref = reference_attention(*self.inputs[:3], config.causal)
            error = float(np.max(np.abs(out.astype(np.float64) - ref)))
        base = _result_base(config, self.algorithm, backend)
        result = RunResult(
            **base,
            # Each kernel's median with its fastest and slowest round: the time plot's bars
            # show how much the rounds disagreed (other work on the cores meanwhile).
            kernel_times=tuple(
                KernelTime.from_samples(name, [t * 1e3 for t in ts])
                for name, ts in self.times.items()
            ),
            peak_bytes=self.peak,
            max_abs_error=error,
            repeats=max(1, options.repeats),
            message=_peak_note(config, self.algorithm, self.peak, base["model_peak_bytes"]),
        )
        return finite_result(result)  # JSON has no NaN: the largest float still disagrees


def _prepare(
    config: AttentionConfig,
    algorithm: str,
    inputs: tuple[np.ndarray, ...],
    cancel: CancelHook | None,
) -> _Prepared:
    if config.is_decode:
        kernels = cpu_decode.naive_decode if algorithm == NAIVE else cpu_decode.split_decode
    elif config.has_backward:
        do = inputs[3]

        def kernels(config, q, k, v, *, cancel):  # type: ignore[no-untyped-def]
            return _training_kernels(config, algorithm, q, k, v, do, cancel=cancel)
    else:
        kernels = _naive_kernels if algorithm == NAIVE else _tiled_kernels
    return _Prepared(config, algorithm, inputs, kernels, cancel)


def _peak_note(config: AttentionConfig, algorithm: str, peak: int, model: int) -> str:
    """Why the measured peak exceeds the model's, for the UI to show beside the number."""
    extra = peak - model
    if extra <= 0:
        return ""
    if algorithm == SPLIT_KV:
        where = "fp32 copies of one key range and of one KV head's partials"
    elif config.is_decode:
        where = "fp32 copies of one KV head and of its group's scores"
    elif algorithm != NAIVE:
        where = "fp32 tile buffers (on a GPU the tiles live in on-chip SRAM)"
    else:
        where = "fp32 row chunks of the N×N matrices and fp32 copies of K and V"
    return (
        f"CPU peak is {fmt_bytes(extra)} above the model: {where}; "
        "NumPy has no fast fp16 matrix multiply"
    )


# --------------------------------------------------------------------------------------------
# The algorithms. Each returns (O, [(kernel name, seconds), ...]).

Timed = tuple[np.ndarray, list[tuple[str, float]]]


def _naive_kernels(
    config: AttentionConfig,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    cancel: CancelHook | None = None,
) -> Timed:
    o, _, spent = _naive_forward(config, q, k, v, cancel=cancel)
    return o, spent


def _naive_forward(
    config: AttentionConfig,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    cancel: CancelHook | None = None,
    keep_s: bool = True,
) -> tuple[np.ndarray, np.ndarray, list[tuple[str, float]]]:
    """O, P and the kernels' times. `keep_s=False` (a forward that saves for the backward)
    frees S once P is written: the backward needs P only."""
    b, h, n, _ = q.shape
    dtype = q.dtype
    scale = config.scale
    spent = []

    # Kernel 1: S = Q Kᵀ · scale, written in full to "HBM" (a B·h·N² array in the input dtype).
    t0 = time.perf_counter()
    s = np.empty((b, h, n, n), dtype=dtype)
    for bi in range(b):
        for hi in range(h):
            check_cancel(cancel)
            kt = k[bi, hi].astype(np.float32).T
            for r0 in range(0, n, ROW_CHUNK):
                r1 = min(r0 + ROW_CHUNK, n)
                s[bi, hi, r0:r1] = (q[bi, hi, r0:r1].astype(np.float32) @ kt) * scale
    spent.append(("gemm_qk", time.perf_counter() - t0))

    # Kernel 2: P = softmax(S), row by row: read S once, write P once.
    t0 = time.perf_counter()
    p = np.empty_like(s)
    cols = np.arange(n)[None, :]
    for bi in range(b):
        for hi in range(h):
            check_cancel(cancel)
            for r0 in range(0, n, ROW_CHUNK):
                r1 = min(r0 + ROW_CHUNK, n)
                rows = s[bi, hi, r0:r1].astype(np.float32)
                if config.causal:
                    rows[np.arange(r0, r1)[:, None] < cols] = -np.inf
                rows -= rows.max(axis=1, keepdims=True)
                np.exp(rows, out=rows)
                rows /= rows.sum(axis=1, keepdims=True)
                p[bi, hi, r0:r1] = rows
    spent.append(("softmax", time.perf_counter() - t0))
    if not keep_s:
        del s

    # Kernel 3: O = P V.
    t0 = time.perf_counter()
    o = np.empty_like(q)
    for bi in range(b):
        for hi in range(h):
            check_cancel(cancel)
            v32 = v[bi, hi].astype(np.float32)
            for r0 in range(0, n, ROW_CHUNK):
                r1 = min(r0 + ROW_CHUNK, n)
                o[bi, hi, r0:r1] = p[bi, hi, r0:r1].astype(np.float32) @ v32
    spent.append(("gemm_pv", time.perf_counter() - t0))
    return o, p, spent


def _tiled_chunk(config: AttentionConfig) -> int:
    """Query rows processed together: whole query tiles, at most ROW_CHUNK (or N) rows."""
    bm, _ = tile_shape(config, TILED)
    return min(max(bm, ROW_CHUNK // bm * bm), ceil_div(config.seq_len, bm) * bm)


def tile_buffer_bytes(config: AttentionConfig) -> int:
    """Bytes of the tiled path's fp32 working buffers (allocated once per run): a chunk of
    query rows' Q_i, S_ij/P_ij, O_i accumulator and P_ij V_j, one K_j and V_j, and the
    chunk's row statistics. This is all the tiled CPU run holds beyond the model's peak."""
    _, bn = tile_shape(config, TILED)
    rows, d = _tiled_chunk(config), config.head_dim
    return 4 * (rows * (3 * d + bn) + 2 * bn * d + 5 * rows)


class _TileBuffers:
    """The fp32 working set of the tiled path, allocated once and reused for every head and
    chunk (views of the right shape are cut from it), like the SRAM of one GPU block."""

    def __init__(self, rows: int, bn: int, d: int) -> None:
        f32 = np.float32
        self.q = np.empty((rows, d), f32)
        self.acc = np.empty((rows, d), f32)
        self.pv = np.empty((rows, d), f32)
        self.s = np.empty(rows * bn, f32)  # flat: (r, c) views of it stay contiguous
        self.k = np.empty((bn, d), f32)
        self.v = np.empty((bn, d), f32)
        self.m, self.l, self.m_new, self.alpha, self.rowsum = np.empty((5, rows), f32)

    def scores(self, r: int, c: int) -> np.ndarray:
        return self.s[: r * c].reshape(r, c)


def _tiled_kernels(
    config: AttentionConfig,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    cancel: CancelHook | None = None,
) -> Timed:
    o, _, _, spent = _tiled_forward(config, q, k, v, cancel=cancel)
    return o, spent


def _tiled_forward(
    config: AttentionConfig,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    cancel: CancelHook | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[str, float]]]:
    """FlashAttention-2 forward: per head, for each chunk of query tiles, stream K_j, V_j and
    update the online softmax (m, l) and the O accumulator in place; O_i = acc / l at the end."""
    b, h, n, d = q.shape
    bm, bn = tile_shape(config, TILED)
    scale = config.scale
    t0 = time.perf_counter()
    bh = b * h
    qf, kf, vf = (x.reshape(bh, n, d) for x in (q, k, v))
    o = np.empty((bh, n, d), dtype=q.dtype)
    m_out = np.empty((bh, n), dtype=np.float32)
    l_out = np.empty((bh, n), dtype=np.float32)
    chunk = _tiled_chunk(config)
    buf = _TileBuffers(chunk, bn, d)
    for head in range(bh):
        for r0 in range(0, n, chunk):
            r1 = min(r0 + chunk, n)
            rows = r1 - r0
            q_i, acc, m, l_sum = buf.q[:rows], buf.acc[:rows], buf.m[:rows], buf.l[:rows]
            q_i[...] = qf[head, r0:r1]  # load Q_i (fp32 copy)
            q_i *= scale  # the scale folded in once
            acc.fill(0.0)
            m.fill(-np.inf)
            l_sum.fill(0.0)
            # A causal query tile visits key tiles up to the one holding its last row.
            last_kv = n if not config.causal else r1
            for j0 in range(0, last_kv, bn):
                check_cancel(cancel)
                j1 = min(j0 + bn, n)
                cols = j1 - j0
                k_j, v_j = buf.k[:cols], buf.v[:cols]
                k_j[...] = kf[head, j0:j1]  # load K_j
                v_j[...] = vf[head, j0:j1]  # load V_j
                # With a causal mask, query tiles that end before j0 skip this key tile.
                a0 = max(0, (j0 - r0) // bm * bm) if config.causal else 0
                r = rows - a0
                s = buf.scores(r, cols)
                np.matmul(q_i[a0:], k_j.T, out=s)  # S_ij on chip
                if config.causal and j1 - 1 > r0 + a0:
                    s[np.arange(r0 + a0, r1)[:, None] < np.arange(j0, j1)[None, :]] = -np.inf
                # Online softmax: new row max, rescale the old sum and accumulator, add the tile.
                m_a, l_a, acc_a = m[a0:], l_sum[a0:], acc[a0:]
                m_new, alpha, rowsum = buf.m_new[:r], buf.alpha[:r], buf.rowsum[:r]
                np.max(s, axis=1, out=m_new)
                np.maximum(m_new, m_a, out=m_new)
                np.subtract(m_a, m_new, out=alpha)
                np.exp(alpha, out=alpha)
                s -= m_new[:, None]
                np.exp(s, out=s)  # P_ij, in place of S_ij
                np.sum(s, axis=1, out=rowsum)
                l_a *= alpha
                l_a += rowsum
                acc_a *= alpha[:, None]
                pv = buf.pv[a0:rows]
                np.matmul(s, v_j, out=pv)
                acc_a += pv
                m_a[...] = m_new
            acc /= l_sum[:, None]
            o[head, r0:r1] = acc  # store O_i
            m_out[head, r0:r1] = m  # store m_i, l_i
            l_out[head, r0:r1] = l_sum
    spent = [("flash_fwd", time.perf_counter() - t0)]
    return o.reshape(b, h, n, d), m_out.reshape(b, h, n), l_out.reshape(b, h, n), spent


def _training_kernels(
    config: AttentionConfig,
    algorithm: str,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    do: np.ndarray,
    *,
    cancel: CancelHook | None = None,
) -> tuple[tuple[np.ndarray, ...], list[tuple[str, float]]]:
    """The forward that saves what the backward needs, then the backward: ((O, dQ, dK, dV),
    the times of the timed kernels: the forward's too for a training step, else the
    backward's alone)."""
    if algorithm == NAIVE:
        o, p, forward = _naive_forward(config, q, k, v, cancel=cancel, keep_s=False)
        grads, backward = cpu_backward.naive_backward(config, q, k, v, p, do, cancel=cancel)
        del p
    else:
        o, m, l_sum, forward = _tiled_forward(config, q, k, v, cancel=cancel)
        grads, backward = cpu_backward.flash_backward(
            config, q, k, v, o, m, l_sum, do, cancel=cancel
        )
    spent = forward + backward if config.pass_ == STEP else backward
    return (o, *grads), spent


def _training_error(
    config: AttentionConfig,
    out: tuple[np.ndarray, ...],
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    do: np.ndarray,
) -> float:
    """Largest |ours − float64| over dQ, dK, dV (and O for a step, whose forward is timed)."""
    refs = cpu_backward.reference_backward(q, k, v, do, config.causal)
    pairs = list(zip(out, refs, strict=True))
    if config.pass_ != STEP:
        pairs = pairs[1:]
    return max(float(np.max(np.abs(ours.astype(np.float64) - ref))) for ours, ref in pairs)


# --------------------------------------------------------------------------------------------


def _cpu_name() -> str:
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"CPU: {name} ({os.cpu_count() or 1} cores)"
