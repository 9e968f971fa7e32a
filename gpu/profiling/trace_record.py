"""Recording traces on the GPU: the tiled kernels' trace builds and CUDA events around naive.

The tiled kernels have a trace build (`-DTILESCOPE_TRACE`, see the "Trace build" comment in
gpu/kernels/flash_readable.cu and flash_mma.cu): thread 0 of every block writes
`[block, sm, phase, j, t_ns]` rows (`%smid`, `%globaltimer`) at each phase boundary into an
extra kernel argument. Without the define the kernels compile to the same binary as before, so
tracing costs nothing unless asked for. `record_trace` runs one traced launch and turns the
rows into a `gpu.files.trace.Trace` (`trace_from_rows`); naive attention, whose cuBLAS GEMMs
cannot be instrumented, is recorded at kernel level with CUDA events.

The warp-specialized kernel (flash_ws.cu) writes one row per mark of each warp role (the
producer, each consumer warpgroup), with the role in the phase word; `ws_trace_from_rows`
decodes them (`gpu.launch.flash_ws.decode_trace_rows`) into a Trace whose blocks carry every role's
marks (`BlockTrace.roles`). It needs no GPU, so rows saved on a GPU host convert anywhere.

Recording needs CuPy and a GPU; the trace model (gpu/files/trace.py) does not.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..algorithms import ALGORITHMS, NAIVE, TILED, TILED_MMA, TILED_WS, tile_shape
from ..config import AttentionConfig, ceil_div
from ..files.trace import (
    KERNEL_LEVEL,
    NAIVE_KERNELS,
    ROW_WORDS,
    BlockTrace,
    Trace,
    TraceError,
    rows_per_block,
    trace_from_role_rows,
    trace_from_rows,
)

#: The NVRTC option that compiles a kernel's trace build.
TRACE_DEFINE = "-DTILESCOPE_TRACE"
TRACEABLE = tuple(a for a, info in ALGORITHMS.items() if info.traceable)


class TiledKernel:
    """One tiled kernel for one config, compiled and ready to launch: the trace build
    (`trace=True`, one extra argument: the trace buffer) or the normal build (the very module
    the app uses). Both launch the same way, so timing one against the other compares only the
    kernels, not the Python around them."""

    def __init__(self, config: AttentionConfig, algorithm: str, trace: bool = True) -> None:
        self.config = config
        self.algorithm = algorithm
        self.trace = trace
        n, bh = config.seq_len, config.bh
        if algorithm == TILED:
            from ..launch import flash_readable as fr
            from ..launch.cuda_kernels import get_kernel

            reason = fr.supports(config)
            if reason is not None:
                raise TraceError(reason)
            bm, bn = tile_shape(config, TILED)
            options = (TRACE_DEFINE,) if trace else ()
            self.kernel = get_kernel(fr.SOURCE, fr.kernel_name(config), options=options)
            self.shared = fr.smem_bytes(config)
            if self.kernel.max_dynamic_shared_size_bytes < self.shared:
                self.kernel.max_dynamic_shared_size_bytes = self.shared
            self.grid = (ceil_div(n, bm), min(bh, fr.MAX_GRID_Y))
            self.threads = fr.NUM_THREADS
            d = config.head_dim
            self.args = (
                np.int32(bh), np.int32(n), np.int32(d), np.int32(bm), np.int32(bn),
                np.int32(1 if config.causal else 0), np.float32(config.scale),
            )  # fmt: skip
            self.blocks = ceil_div(n, bm) * bh
        elif algorithm == TILED_MMA:
            from ..launch import flash_mma as fm

            reason = fm.supports(config)
            if reason is not None:
                raise TraceError(reason)
            launch = fm.default_launch(config.head_dim)
            bf16 = config.dtype == "bf16"
            self.shared = launch.smem_bytes
            extra = (TRACE_DEFINE,) if trace else ()
            self.kernel = fm.get_kernel(launch, config.causal, bf16, extra)
            self.grid = (ceil_div(n, launch.block_m), bh)
            self.threads = launch.threads
            scale_log2 = math.log2(math.e) / math.sqrt(config.head_dim)
            self.args = (np.int32(n), np.float32(scale_log2))
            self.blocks = self.grid[0] * bh
        else:
            raise TraceError(f"{algorithm!r} has no trace build (tiled kernels only)")
        self.rows_per_block = rows_per_block(config, algorithm)

    def new_buffer(self) -> Any:
        import cupy

        return cupy.full((self.blocks * self.rows_per_block, ROW_WORDS), -1, dtype=cupy.int64)

    def launch(
        self, q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, buffer: Any | None = None
    ) -> None:
        """Queue one launch on the current stream (arrays as for flash_forward; the trace build
        also takes the buffer from `new_buffer`)."""
        if self.trace and buffer is None:
            raise TraceError("the trace build needs a trace buffer (new_buffer())")
        extra = (buffer,) if self.trace else ()
        self.kernel(
            self.grid,
            (self.threads,),
            (q, k, v, o, m, l, *self.args, *extra),
            shared_mem=self.shared,
        )


def default_forward(algorithm: str):
    """The normal (untraced) build's flash_forward of a tiled algorithm (its launcher's)."""
    info = ALGORITHMS.get(algorithm)
    if info is None or info.launcher is None or not info.fused:
        raise TraceError(f"{algorithm!r} is not a tiled kernel")
    return info.launcher.flash_forward


def record_trace(
    config: AttentionConfig, algorithm: str, *, seed: int = 0, warmup: int = 2, check: bool = True
) -> Trace:
    """Run `algorithm` once on the current CUDA device and record what every block did.

    Tiled kernels: the trace build, after `warmup` untimed launches (module load, clocks up),
    then one traced launch timed with CUDA events. With `check`, the normal build runs on the
    same inputs and the notes say how far the trace build's output is from it (it should be 0:
    the trace build only adds timer reads and stores). Naive: CUDA events around its three
    kernels after warm-up (kernel-level: cuBLAS kernels cannot be instrumented)."""
    import cupy

    from ..backends.cuda_arrays import random_inputs, to_float32
    from ..backends.cuda_backend import device_name
    from ..launch.cuda_kernels import device_attribute, storage_dtype

    if algorithm not in TRACEABLE:
        raise TraceError(f"cannot trace {algorithm!r}: traceable are {', '.join(TRACEABLE)}")
    sm_count = int(device_attribute("MultiProcessorCount"))
    q, k, v = random_inputs(config, seed)
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    o = cupy.empty(shape, dtype=storage_dtype(config.dtype))
    pool = cupy.get_default_memory_pool()
    try:
        if algorithm == NAIVE:
            return _record_naive(config, q, k, v, o, warmup, sm_count, device_name())
        if algorithm == TILED_WS:
            return _record_ws(config, q, k, v, o, warmup, check, sm_count, device_name())
        traced = TiledKernel(config, algorithm, trace=True)
        m = cupy.empty(shape[:3], dtype=cupy.float32)
        l = cupy.empty(shape[:3], dtype=cupy.float32)
        buffer = traced.new_buffer()
        for _ in range(max(0, warmup)):
            traced.launch(q, k, v, o, m, l, buffer)
        buffer.fill(-1)
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        traced.launch(q, k, v, o, m, l, buffer)
        stop.record()
        stop.synchronize()
        kernel_ms = float(cupy.cuda.get_elapsed_time(start, stop))
        rows = cupy.asnumpy(buffer)
        notes = [f"trace build, one launch after {warmup} warm-up launches"]
        if check:
            o_ref = cupy.empty_like(o)
            default_forward(algorithm)(q, k, v, o_ref, m, l, config)
            diff = cupy.abs(to_float32(o, config.dtype) - to_float32(o_ref, config.dtype)).max()
            notes.append(f"max |ΔO| vs the normal build: {float(diff):.3g}")
            del o_ref
        return trace_from_rows(
            rows,
            config=config,
            algorithm=algorithm,
            device=device_name(),
            sm_count=sm_count,
            kernel_ms=kernel_ms,
            notes="; ".join(notes),
        )
    finally:
        del q, k, v, o
        cupy.cuda.get_current_stream().synchronize()
        pool.free_all_blocks()


def _record_naive(config, q, k, v, o, warmup: int, sm_count: int, device: str) -> Trace:
    import cupy

    from ..backends.naive_fwd import gemm_pv, gemm_qk, naive_forward, softmax_launcher

    n = config.seq_len
    s = cupy.empty((config.batch, config.heads, n, n), dtype=o.dtype)
    p = cupy.empty_like(s)
    launch_softmax = softmax_launcher(config)
    for _ in range(max(0, warmup)):
        naive_forward(q, k, v, s, p, o, config, launch_softmax)
    events = [cupy.cuda.Event() for _ in range(4)]
    events[0].record()
    gemm_qk(q, k, s, config)
    events[1].record()
    launch_softmax(s, p)
    events[2].record()
    gemm_pv(p, v, o, config)
    events[3].record()
    events[3].synchronize()
    ts = [round(cupy.cuda.get_elapsed_time(events[0], e) * 1e6) for e in events]
    blocks = tuple(
        BlockTrace(i, -1, ts[i], ts[i + 1], ((name, -1, ts[i]),), kernel=name)
        for i, name in enumerate(NAIVE_KERNELS)
    )
    del s, p
    return Trace(
        config,
        NAIVE,
        device,
        sm_count,
        blocks,
        KERNEL_LEVEL,
        kernel_ms=ts[-1] / 1e6,
        notes=(
            "kernel-level: CUDA events around cuBLAS GEMM, our softmax kernel, cuBLAS GEMM "
            f"(after {warmup} warm-up runs); one lane per kernel, not per SM"
        ),
    )


def ws_roles(config: AttentionConfig) -> tuple[str, ...]:
    """The warp roles of the warp-specialized kernel's default variant for `config`."""
    from ..launch import flash_ws

    consumers = flash_ws.default_launch(config.head_dim).consumers
    return flash_ws.TRACE_ROLES[: 1 + consumers]


def ws_trace_from_rows(
    rows: Any,
    *,
    config: AttentionConfig,
    device: str,
    sm_count: int,
    kernel_ms: float = 0.0,
    notes: str = "",
) -> Trace:
    """A Trace from the warp-specialized kernel's trace buffer (host int64 rows, as
    `gpu.launch.flash_ws.trace_buffer` holds them after one launch): decoded with
    `gpu.launch.flash_ws.decode_trace_rows`, every role's marks kept. Needs no GPU."""
    from ..launch.flash_ws import decode_trace_rows

    rows = np.asarray(rows, dtype=np.int64).reshape(-1, ROW_WORDS)
    if config.head_dim not in (64, 128, 256):
        raise TraceError(f"the warp-specialized kernel has no head dim {config.head_dim}")
    try:
        decoded = decode_trace_rows(rows)
    except (IndexError, KeyError) as exc:  # a role or code the kernel does not write
        raise TraceError(f"trace rows the warp-specialized kernel does not write: {exc}") from exc
    return trace_from_role_rows(
        decoded,
        config=config,
        algorithm=TILED_WS,
        device=device,
        sm_count=sm_count,
        roles=ws_roles(config),
        kernel_ms=kernel_ms,
        notes=notes,
    )


def _record_ws(config, q, k, v, o, warmup: int, check: bool, sm_count: int, device: str) -> Trace:
    """One traced launch of the warp-specialized kernel (its trace build, `TRACE_OPTION`).
    The tensor maps are encoded before the start event, so the CUDA events time the launch
    alone."""
    import cupy

    from ..backends.cuda_arrays import to_float32
    from ..launch import flash_ws

    shape = (config.batch, config.heads, config.seq_len)
    m = cupy.empty(shape, dtype=cupy.float32)
    l = cupy.empty(shape, dtype=cupy.float32)
    prepared = flash_ws.prepare(config, extra_options=(flash_ws.TRACE_OPTION,))
    buffer = flash_ws.trace_buffer(config, prepared)
    arguments = prepared.arguments(q, k, v, o, m, l)
    for _ in range(max(0, warmup)):
        prepared.launch_with(arguments, buffer)
    buffer.fill(-1)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    prepared.launch_with(arguments, buffer)
    stop.record()
    stop.synchronize()
    kernel_ms = float(cupy.cuda.get_elapsed_time(start, stop))
    rows = cupy.asnumpy(buffer)
    notes = [
        f"trace build ({flash_ws.default_launch(config.head_dim).label}), one launch after "
        f"{warmup} warm-up launches"
    ]
    if check:
        o_ref = cupy.empty_like(o)
        flash_ws.flash_forward(q, k, v, o_ref, m, l, config)
        diff = cupy.abs(to_float32(o, config.dtype) - to_float32(o_ref, config.dtype)).max()
        notes.append(f"max |ΔO| vs the normal build: {float(diff):.3g}")
        del o_ref
    return ws_trace_from_rows(
        rows,
        config=config,
        device=device,
        sm_count=sm_count,
        kernel_ms=kernel_ms,
        notes="; ".join(notes),
    )
