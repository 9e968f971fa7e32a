"""Ring attention on P GPUs with NCCL: each GPU keeps N/P rows of Q, K and V, runs the fused
kernel on its queries against one K/V block per step, merges the partial result with the
online-softmax rescale, and meanwhile passes the block to the next GPU.

One process drives all P devices. CuPy's NCCL binding creates the P communicators in one call
(`NcclCommunicator.initAll(devices)`, no unique id to hand between processes), and NCCL's group
calls (`groupStart`/`groupEnd`) let one thread post every device's send and receive of a step
together, which NCCL requires when one thread drives several devices. One process also keeps in
one place what a measurement needs: the single-GPU run to compare with, every device's CUDA
events, and one result. A process per GPU would add spawning, the unique-id exchange and a way
to gather results, and buys nothing on the GPUs of one host.

Per device (a "rank"), all work runs inside `with cupy.cuda.Device(i)` on two streams of its own:
- compute: the fused kernel calls of the step's chunk pairs (gpu/ring/schedule.py), each followed
  by `ring_merge` (gpu/kernels/ring_merge.cu), and at the end `ring_store`;
- comm (high priority, so the transfer's kernel gets SMs as soon as one frees): the step's grouped
  NCCL send of the held K/V block to the next rank and receive of the previous rank's block.
K and V of a block share one buffer (one send per step). The device's own block stays in place;
blocks from the others arrive in two receive buffers used in turn, so the next block arrives
while the current one is being computed on. CUDA events order the streams: step s computes only
after the receive of step s - 1 finished; the receive of step s goes into the buffer step s - 1
computed on, so it waits for that compute to finish. The same events, read back after the run,
are the per-device timeline.

The fused kernels take one N for queries and keys, so chunks must be equal: N divisible by P
(2P for the causal zigzag split). Kernels compiled through CuPy are loaded per device at their
first launch there; the dynamic shared-memory opt-in is per device too (gpu/launch/flash_launch.py
keys its cache by device), so every device is set up before it launches.

NVLink multicast (NVLS) is kept off for the communicators created here: point-to-point sends do
not use it, and the hosts these runs go to must keep it disabled.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import cupy
import numpy as np

from ..algorithms import ALGORITHMS, FP32_CORES, RING, fastest_fused_first
from ..backends.backend import BackendUnavailable, RunOptions
from ..backends.cuda_arrays import random_inputs
from ..backends.cuda_backend import device_name, flash_module
from ..backends.cuda_reference import max_abs_error
from ..backends.launch_timing import OutOfMemoryError
from ..config import AttentionConfig, ceil_div
from ..errors import UnsupportedConfig
from ..launch.cuda_kernels import get_kernel, storage_dtype
from ..model.links import LinkSpec, link_from_topology_matrix
from ..results import KernelTime, RunResult
from ..ring_timeline import RingMeasurement, timeline_from_intervals
from .model import kv_work_buffers, ring_cost
from .schedule import DIAGONAL, RingConfigError, RingSchedule, check_equal_chunks, ring_schedule

#: Fused kernels in order of preference, the registry's tensor-core kernels fastest first; the
#: first that runs the config here is used.
PREFERRED_KERNELS: tuple[str, ...] = tuple(
    a for a in fastest_fused_first() if ALGORITHMS[a].matmul != FP32_CORES
)

MERGE_SOURCE = "ring_merge.cu"
MERGE_THREADS = 256  # 8 warps, one row each
#: Asked-for priority of the communication streams; CUDA clamps it to the device's highest.
COMM_STREAM_PRIORITY = -(1 << 10)
#: Largest single NCCL send or receive; a block (4.3 GB at N = 1M, h = 16, d = 128) goes as
#: several, which NCCL matches in order between the same two ranks of one group.
NCCL_PIECE_BYTES = 1 << 30


# --------------------------------------------------------------------------------------------
# The fused kernel each rank runs


def fused_kernel(config: AttentionConfig) -> tuple[str, Any]:
    """(algorithm id, module with `flash_forward`) of the best fused kernel that runs both the
    full and the diagonal (causal) chunk calls of `config` on the current device."""
    reasons = []
    for algorithm in PREFERRED_KERNELS:
        try:
            module = flash_module(algorithm)
        except UnsupportedConfig as exc:
            reasons.append(str(exc))
            continue
        why = module.supports(config.with_(causal=False)) or module.supports(
            config.with_(causal=True)
        )
        if why is None:
            return algorithm, module
        reasons.append(why)
    raise UnsupportedConfig("no fused kernel runs the ring here: " + "; ".join(reasons))


_merge_kernels: dict[tuple[str, bool], Any] = {}


def _merge_kernel(name: str, bf16: bool) -> Any:
    key = (name, bf16)
    if key not in _merge_kernels:
        _merge_kernels[key] = get_kernel(MERGE_SOURCE, f"{name}<{str(bf16).lower()}>")
    return _merge_kernels[key]


def merge_partial(o, m, l, o_part, m_part, l_part, bf16: bool) -> None:
    """Fold one kernel call's (O_p, m_p, l_p) into the running fp32 (O, m, l), in place, on the
    current stream: the online-softmax rescale of gpu/kernels/ring_merge.cu."""
    rows = m.size
    d = o.shape[-1]
    grid = ceil_div(rows * 32, MERGE_THREADS)
    _merge_kernel("ring_merge", bf16)(
        (grid,), (MERGE_THREADS,), (o, m, l, o_part, m_part, l_part, np.int64(rows), np.int32(d))
    )


def store_output(o, out, bf16: bool) -> None:
    """The running fp32 O -> `out` in the input's 16-bit dtype, on the current stream."""
    n = o.size
    grid = min(ceil_div(n, MERGE_THREADS), 1 << 16)
    _merge_kernel("ring_store", bf16)((grid,), (MERGE_THREADS,), (o, out, np.int64(n)))


# --------------------------------------------------------------------------------------------
# Ranks and transports


@dataclass
class Rank:
    """One device of the ring and its two streams."""

    index: int
    device: int
    compute: cupy.cuda.Stream
    comm: cupy.cuda.Stream

    @classmethod
    def on(cls, index: int, device: int) -> Rank:
        with cupy.cuda.Device(device):
            return cls(
                index,
                device,
                cupy.cuda.Stream(non_blocking=True),
                cupy.cuda.Stream(non_blocking=True, priority=COMM_STREAM_PRIORITY),
            )


class RingTransport(Protocol):
    """Moves every rank's block one rank along the ring, on each rank's comm stream."""

    name: str

    def shift(
        self, ranks: Sequence[Rank], send: Sequence[cupy.ndarray], recv: Sequence[cupy.ndarray]
    ) -> None:
        """Rank r sends `send[r]` to rank r+1 and receives `recv[r]` from rank r-1 (mod P)."""
        ...

    def close(self) -> None: ...


class NcclTransport:
    """The ring's transport: NCCL point-to-point send/receive, grouped across all devices."""

    name = "nccl"

    def __init__(self, devices: Sequence[int]) -> None:
        os.environ["NCCL_NVLS_ENABLE"] = "0"  # never NVLink multicast (read at communicator init)
        try:
            from cupy.cuda import nccl
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise BackendUnavailable(f"NCCL is not available to CuPy: {exc}") from None
        if not getattr(nccl, "available", False):
            raise BackendUnavailable(
                "NCCL is not available to CuPy: install the cuda12 or cuda13 extra "
                "(nvidia-nccl-cu12 / nvidia-nccl-cu13)"
            )
        self._nccl = nccl
        self.version = nccl.get_version()
        self.comms = nccl.NcclCommunicator.initAll(list(devices))

    def shift(
        self, ranks: Sequence[Rank], send: Sequence[cupy.ndarray], recv: Sequence[cupy.ndarray]
    ) -> None:
        nccl, size = self._nccl, len(ranks)
        nccl.groupStart()  # one thread drives every device: all calls of the step in one group
        try:
            for rank, comm, out, into in zip(ranks, self.comms, send, recv, strict=True):
                nxt, prev = (rank.index + 1) % size, (rank.index - 1) % size
                stream = rank.comm.ptr
                with cupy.cuda.Device(rank.device):  # K and V as raw bytes, in pieces
                    for offset, nbytes in _pieces(out.nbytes):
                        comm.send(out.data.ptr + offset, nbytes, nccl.NCCL_UINT8, nxt, stream)
                    for offset, nbytes in _pieces(into.nbytes):
                        comm.recv(into.data.ptr + offset, nbytes, nccl.NCCL_UINT8, prev, stream)
        finally:
            nccl.groupEnd()

    def close(self) -> None:
        for comm in self.comms:
            comm.destroy()
        self.comms = []


# --------------------------------------------------------------------------------------------
# Buffers


@dataclass
class RankBuffers:
    """Everything one rank holds for a config (sizes: `ring_model.device_peak_bytes`)."""

    q: list[cupy.ndarray]  # per local chunk, (B, h, C, d)
    kv: list[cupy.ndarray]  # [own block, receive buffers...], each (2, chunks, B, h, C, d)
    o: list[cupy.ndarray]  # running O per local chunk, fp32
    m: list[cupy.ndarray]  # running m, l per local chunk, fp32 (B, h, C)
    l: list[cupy.ndarray]
    o_part: cupy.ndarray  # one kernel call's O, m, l
    m_part: cupy.ndarray
    l_part: cupy.ndarray
    out: list[cupy.ndarray]  # the final O per local chunk, input dtype


def block_buffer(step: int) -> int:
    """Which of a rank's K/V buffers holds its block at `step`: its own (0) at step 0, then the
    two receive buffers in turn."""
    return 0 if step == 0 else 1 + (step - 1) % 2


@dataclass
class RingRun:
    """Timings of one run, read back from the CUDA events (ms from each rank's origin)."""

    total_ms: float
    compute: list[list[tuple[float, float]]]  # [rank][step] (start, end)
    comm: list[list[tuple[float, float] | None]]  # [rank][step], None where nothing was sent


@dataclass
class RingState:
    """A config set up on every rank: the schedule and the buffers."""

    config: AttentionConfig
    schedule: RingSchedule
    kernel: str
    module: Any
    buffers: list[RankBuffers]
    peak_bytes: list[int] = field(default_factory=list)

    @property
    def chunk_rows(self) -> int:
        return self.schedule.chunk_rows[0]


class _DevicePeaks:
    """A CuPy allocator that forwards to the pool and keeps each device's highest in-use bytes."""

    def __init__(self, pool: cupy.cuda.MemoryPool, devices: Sequence[int]) -> None:
        self.pool = pool
        self.base: dict[int, int] = {}
        for d in set(devices):
            with cupy.cuda.Device(d):
                self.base[d] = pool.used_bytes()
        self.peak = dict(self.base)

    def malloc(self, size: int):
        mem = self.pool.malloc(size)
        d = cupy.cuda.runtime.getDevice()
        self.peak[d] = max(self.peak.get(d, 0), self.pool.used_bytes())
        return mem

    def above_base(self, device: int) -> int:
        return self.peak[device] - self.base[device]


# --------------------------------------------------------------------------------------------
# The ring


class CudaRing:
    """P ranks on `devices` joined by a transport (NCCL unless a test passes its double).

    Reusable across configs: `prepare` allocates a config's buffers, `load` places the inputs,
    `run` runs the ring once and returns its event timings, `max_abs_diff` and `gather` read the
    output. `measure` does all of it as a `RunResult`.
    """

    def __init__(self, devices: Sequence[int], transport: RingTransport | None = None) -> None:
        devices = [int(d) for d in devices]
        if not devices:
            raise RingConfigError("a ring needs at least one device")
        present = cupy.cuda.runtime.getDeviceCount()
        missing = [d for d in devices if not 0 <= d < present]
        if missing:
            raise BackendUnavailable(
                f"the ring asks for CUDA device(s) {missing}, this machine has {present} "
                f"(devices 0 to {present - 1})"
            )
        if transport is None and len(set(devices)) != len(devices):
            raise RingConfigError("each rank of an NCCL ring needs a device of its own")
        self.devices = devices
        self.ranks = [Rank.on(i, d) for i, d in enumerate(devices)]
        self.transport = transport if transport is not None else NcclTransport(devices)
        self.pool = cupy.get_default_memory_pool()

    @property
    def size(self) -> int:
        return len(self.ranks)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> CudaRing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- set-up -------------------------------------------------------------------------------

    def prepare(self, config: AttentionConfig) -> RingState:
        """Check the config, pick the fused kernel, compile it on every device and allocate
        every rank's buffers (their peak per device is recorded)."""
        check_equal_chunks(config, self.size)
        schedule = ring_schedule(config, self.size)
        chunk = schedule.chunk_rows[0]
        pair_config = config.with_(seq_len=chunk)
        with cupy.cuda.Device(self.devices[0]):
            kernel, module = fused_kernel(pair_config)
        dtype = storage_dtype(config.dtype)
        b, h, d = config.batch, config.heads, config.head_dim
        chunks = len(schedule.device_chunks(0))
        kv_shape = (2, chunks, b, h, chunk, d)  # K and V of a block in one buffer: one send
        tracker = _DevicePeaks(self.pool, self.devices)
        buffers = []
        with cupy.cuda.using_allocator(tracker.malloc):
            for rank in self.ranks:
                with cupy.cuda.Device(rank.device):
                    blocks = 1 + kv_work_buffers(self.size)
                    buffers.append(
                        RankBuffers(
                            q=[cupy.empty((b, h, chunk, d), dtype) for _ in range(chunks)],
                            kv=[cupy.empty(kv_shape, dtype) for _ in range(blocks)],
                            o=[cupy.empty((b, h, chunk, d), cupy.float32) for _ in range(chunks)],
                            m=[cupy.empty((b, h, chunk), cupy.float32) for _ in range(chunks)],
                            l=[cupy.empty((b, h, chunk), cupy.float32) for _ in range(chunks)],
                            o_part=cupy.empty((b, h, chunk, d), dtype),
                            m_part=cupy.empty((b, h, chunk), cupy.float32),
                            l_part=cupy.empty((b, h, chunk), cupy.float32),
                            out=[cupy.empty((b, h, chunk, d), dtype) for _ in range(chunks)],
                        )
                    )
        state = RingState(config, schedule, kernel, module, buffers)
        state.peak_bytes = [tracker.above_base(r.device) for r in self.ranks]
        for rank in self.ranks:  # load the merge kernels on every device now; the fused kernel
            with cupy.cuda.Device(rank.device):  # compiles and loads at its first (warm-up) call
                for name in ("ring_merge", "ring_store"):
                    _ = _merge_kernel(name, config.dtype == "bf16").kernel
        return state

    def load(self, state: RingState, q, k, v) -> None:
        """Copy each rank's rows of the whole (B, h, N, d) inputs (on any device) into its
        buffers: its query chunks and its own K/V block."""
        sched = state.schedule
        for rank, buf in zip(self.ranks, state.buffers, strict=True):
            for i, c in enumerate(sched.device_chunks(rank.index)):
                start, stop = sched.chunk_bounds(c)
                for dst, src in ((buf.q[i], q), (buf.kv[0][0, i], k), (buf.kv[0][1, i], v)):
                    _copy_rows(dst, src, start, stop, rank)
        self.synchronize()

    def synchronize(self) -> None:
        for d in sorted(set(self.devices)):
            cupy.cuda.Device(d).synchronize()

    # -- one run --------------------------------------------------------------------------------

    def run(self, state: RingState) -> RingRun:
        """Run the ring once on the loaded inputs; returns the event timings."""
        size, sched, ranks, bufs = self.size, state.schedule, self.ranks, state.buffers
        bf16 = state.config.dtype == "bf16"
        full_cfg = state.config.with_(seq_len=state.chunk_rows, causal=False)
        diag_cfg = full_cfg.with_(causal=True)
        self.synchronize()
        ev = [_RankEvents.on(r.device, size) for r in ranks]
        for rank, e, buf in zip(ranks, ev, bufs, strict=True):
            with cupy.cuda.Device(rank.device), rank.compute:
                e.origin.record(rank.compute)
                rank.comm.wait_event(e.origin)
                for o, m, l in zip(buf.o, buf.m, buf.l, strict=True):
                    o.fill(0)
                    m.fill(-np.inf)
                    l.fill(0)
        for s in range(size):
            if s < size - 1:  # pass the block on while this step computes
                for rank, e in zip(ranks, ev, strict=True):
                    with cupy.cuda.Device(rank.device):
                        if s >= 2:  # the receive buffer is the one step s-1 computed on
                            rank.comm.wait_event(e.compute_end[s - 1])
                        e.comm_start[s].record(rank.comm)
                self.transport.shift(
                    ranks,
                    [buf.kv[block_buffer(s)] for buf in bufs],
                    [buf.kv[block_buffer(s + 1)] for buf in bufs],
                )
                for rank, e in zip(ranks, ev, strict=True):
                    with cupy.cuda.Device(rank.device):
                        e.comm_end[s].record(rank.comm)
            for rank, e, buf in zip(ranks, ev, bufs, strict=True):
                step = sched.steps[s][rank.index]
                local = sched.device_chunks(rank.index)
                kv = buf.kv[block_buffer(s)]
                with cupy.cuda.Device(rank.device), rank.compute:
                    if s >= 1:  # this step's block has arrived
                        rank.compute.wait_event(e.comm_end[s - 1])
                    e.compute_start[s].record(rank.compute)
                    for pair in step.computed:
                        qi, ki = local.index(pair.q_chunk), step.kv_chunks.index(pair.k_chunk)
                        cfg = diag_cfg if pair.kind == DIAGONAL else full_cfg
                        state.module.flash_forward(
                            buf.q[qi], kv[0, ki], kv[1, ki], buf.o_part, buf.m_part, buf.l_part, cfg
                        )
                        partial = (buf.o_part, buf.m_part, buf.l_part)
                        merge_partial(buf.o[qi], buf.m[qi], buf.l[qi], *partial, bf16)
                    e.compute_end[s].record(rank.compute)
        for rank, e, buf in zip(ranks, ev, bufs, strict=True):
            with cupy.cuda.Device(rank.device), rank.compute:
                for o, out in zip(buf.o, buf.out, strict=True):
                    store_output(o, out, bf16)
                e.end.record(rank.compute)
        self.synchronize()
        return RingRun(
            total_ms=max(e.total_ms() for e in ev),
            compute=[e.compute_spans() for e in ev],
            comm=[e.comm_spans() for e in ev],
        )

    # -- reading the output ---------------------------------------------------------------------

    def output_chunks(self, state: RingState):
        """(rank, [start, stop) rows of the sequence, (B, h, C, d) output chunk) per chunk."""
        sched = state.schedule
        for rank, buf in zip(self.ranks, state.buffers, strict=True):
            for i, c in enumerate(sched.device_chunks(rank.index)):
                yield rank, sched.chunk_bounds(c), buf.out[i]

    def max_abs_diff(self, state: RingState, reference) -> float:
        """max |O_ring - reference| with `reference` a (B, h, N, d) array on any device, compared
        chunk by chunk and head by head on the reference's device (no N×N anything)."""
        worst = 0.0
        dev = reference.device.id
        with cupy.cuda.Device(dev):
            for _, (start, stop), chunk in self.output_chunks(state):
                local = _to_device(chunk, dev)
                ref = reference[:, :, start:stop]
                for bi in range(chunk.shape[0]):
                    for hi in range(chunk.shape[1]):
                        a = _as_float32(local[bi, hi], state.config.dtype)
                        b = _as_float32(ref[bi, hi], state.config.dtype)
                        worst = max(worst, float(cupy.abs(a - b).max()))
            cupy.cuda.Device(dev).synchronize()
        return worst

    def gather(self, state: RingState, device: int) -> cupy.ndarray:
        """The whole (B, h, N, d) output on `device`."""
        c = state.config
        with cupy.cuda.Device(device):
            out = cupy.empty((c.batch, c.heads, c.seq_len, c.head_dim), storage_dtype(c.dtype))
            for _, (start, stop), chunk in self.output_chunks(state):
                out[:, :, start:stop] = _to_device(chunk, device)
            cupy.cuda.Device(device).synchronize()
        return out

    # -- a whole measurement --------------------------------------------------------------------

    def measure(
        self,
        config: AttentionConfig,
        options: RunOptions,
        *,
        inputs: tuple | None = None,
        compare_with: cupy.ndarray | None = None,
        link: tuple[str, LinkSpec | None] | None = None,
    ) -> RunResult:
        """Set up, load, run `warmup` + `repeats` times; the median run's time and timeline.

        `inputs` (q, k, v on any device) default to `cuda_arrays.random_inputs` on the first
        rank's device. `compare_with` is a single-device output to compare against (max |ΔO|);
        `options.check` compares with an fp32 reference as the other backends do."""
        cost = ring_cost(config, self.size)
        names = [_device_name(d) for d in self.devices]
        base = dict(
            config=config,
            algorithm=RING,
            backend="cuda",
            device=_ring_label(names, self.transport.name),
            model_peak_bytes=cost.peak_bytes_per_device,
            hbm_bytes=cost.hbm_bytes,
            flops=cost.flops,
        )
        state = None
        try:
            state = self.prepare(config)
            if inputs is None:
                with cupy.cuda.Device(self.devices[0]):
                    inputs = random_inputs(config, options.seed)
            self.load(state, *inputs)
            for _ in range(options.warmup):
                self.run(state)
            runs = [self.run(state) for _ in range(max(1, options.repeats))]
            median = sorted(runs, key=lambda r: r.total_ms)[(len(runs) - 1) // 2]
            diff = None if compare_with is None else self.max_abs_diff(state, compare_with)
            error, note = None, ""
            if options.check:
                error, note = self._check(state, inputs)
        except OutOfMemoryError as exc:
            state = None
            self._free()
            return RunResult(**base, oom=True, message=f"out of memory on a ring device: {exc}")
        link_name, link_spec = link if link is not None else self.link()
        sched = state.schedule
        steps = range(self.size)
        step_bytes = [[sched.steps[s][r].bytes_sent for s in steps] for r in steps]
        ring = RingMeasurement(
            devices=self.size,
            layout=sched.layout,
            transport=self.transport.name,
            kernel=state.kernel,
            device_names=tuple(names),
            device_peak_bytes=tuple(state.peak_bytes),
            step_bytes=max((b for row in step_bytes for b in row), default=0),
            link=link_name,
            link_peak_bytes_s=None if link_spec is None else link_spec.bytes_per_s,
            timeline=timeline_from_intervals(median.compute, median.comm, step_bytes),
            max_abs_diff_vs_single=diff,
        )
        peaks = state.peak_bytes
        state = inputs = None
        self._free()
        return RunResult(
            **base,
            kernel_times=(KernelTime("ring", median.total_ms),),
            peak_bytes=max(peaks),
            max_abs_error=error,
            repeats=len(runs),
            message=note,
            ring=ring,
        )

    def _check(self, state: RingState, inputs) -> tuple[float | None, str]:
        """max |O - O_ref| against the fp32 reference (cuda_reference.max_abs_error) on the inputs'
        device; its cost grows like N², which the caller asked for."""
        q, k, v = inputs
        dev = q.device.id
        try:
            o = self.gather(state, dev)
            with cupy.cuda.Device(dev):
                return max_abs_error(q, k, v, o, state.config), ""
        except OutOfMemoryError as exc:
            return None, f"reference check skipped: out of memory ({exc})"

    def _free(self) -> None:
        self.synchronize()
        for d in sorted(set(self.devices)):
            with cupy.cuda.Device(d):
                self.pool.free_all_blocks()

    def link(self) -> tuple[str, LinkSpec | None]:
        """The link between ring neighbours, as `nvidia-smi topo -m` names it; the slowest hop
        counts. ("", None) when unknown, or for one device."""
        if self.size == 1:
            return "", None
        if getattr(self.transport, "name", "") != NcclTransport.name:
            return self.transport.name, None
        return detect_link(self.devices)


@dataclass
class _RankEvents:
    device: int
    origin: cupy.cuda.Event
    end: cupy.cuda.Event
    compute_start: list[cupy.cuda.Event]
    compute_end: list[cupy.cuda.Event]
    comm_start: list[cupy.cuda.Event]
    comm_end: list[cupy.cuda.Event]

    @classmethod
    def on(cls, device: int, steps: int) -> _RankEvents:
        with cupy.cuda.Device(device):
            make = cupy.cuda.Event
            return cls(
                device,
                make(),
                make(),
                [make() for _ in range(steps)],
                [make() for _ in range(steps)],
                [make() for _ in range(steps - 1)],
                [make() for _ in range(steps - 1)],
            )

    def _ms(self, event: cupy.cuda.Event) -> float:
        with cupy.cuda.Device(self.device):
            return cupy.cuda.get_elapsed_time(self.origin, event)

    def total_ms(self) -> float:
        return self._ms(self.end)

    def compute_spans(self) -> list[tuple[float, float]]:
        return [
            (self._ms(a), self._ms(b))
            for a, b in zip(self.compute_start, self.compute_end, strict=True)
        ]

    def comm_spans(self) -> list[tuple[float, float] | None]:
        spans: list[tuple[float, float] | None] = [
            (self._ms(a), self._ms(b)) for a, b in zip(self.comm_start, self.comm_end, strict=True)
        ]
        return [*spans, None]  # the last step sends nothing


# --------------------------------------------------------------------------------------------
# Helpers


def _pieces(nbytes: int) -> list[tuple[int, int]]:
    """(offset, bytes) pieces of at most NCCL_PIECE_BYTES covering `nbytes`."""
    return [
        (offset, min(NCCL_PIECE_BYTES, nbytes - offset))
        for offset in range(0, nbytes, NCCL_PIECE_BYTES)
    ]


def _copy_rows(dst: cupy.ndarray, src: cupy.ndarray, start: int, stop: int, rank: Rank) -> None:
    """dst (B, h, C, d) on the rank's device <- src[:, :, start:stop] (any device)."""
    with cupy.cuda.Device(src.device.id):
        part = cupy.ascontiguousarray(src[:, :, start:stop])
        cupy.cuda.Device().synchronize()
    with cupy.cuda.Device(rank.device):
        dst.data.copy_from_device_async(part.data, part.nbytes, rank.compute)
        rank.compute.synchronize()


def _to_device(a: cupy.ndarray, device: int) -> cupy.ndarray:
    if a.device.id == device:
        return a
    with cupy.cuda.Device(device):
        out = cupy.empty(a.shape, a.dtype)
        stream = cupy.cuda.get_current_stream()
        out.data.copy_from_device_async(a.data, a.nbytes, stream)
        stream.synchronize()
        return out


def _as_float32(x: cupy.ndarray, dtype: str) -> cupy.ndarray:
    if dtype == "bf16":
        return (x.astype(cupy.uint32) << 16).view(cupy.float32)
    return x.astype(cupy.float32)


def _device_name(device: int) -> str:
    with cupy.cuda.Device(device):
        return device_name()


def _ring_label(names: Sequence[str], transport: str) -> str:
    if transport != NcclTransport.name:
        return f"{len(names)} ranks on {' + '.join(sorted(set(names)))} ({transport})"
    if len(set(names)) == 1:
        return f"{len(names)}× {names[0]}"
    return " + ".join(names)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def detect_link(devices: Sequence[int]) -> tuple[str, LinkSpec | None]:
    """The slowest link between ring neighbours from `nvidia-smi topo -m` (e.g. 'NV18': 18
    NVLink 4 links on H100/H200). Best effort: ("", None) when it cannot tell."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "", None
    try:
        text = subprocess.run(
            [exe, "topo", "-m"], capture_output=True, text=True, timeout=20, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "", None
    rows = [_ANSI.sub("", line).split() for line in text.splitlines() if line.strip()]
    if not rows:
        return "", None
    header = rows[0]
    matrix = {r[0]: r[1:] for r in rows[1:] if r and r[0].startswith("GPU")}
    entries = []
    for i, d in enumerate(devices):
        nxt = devices[(i + 1) % len(devices)]
        if nxt == d:
            continue
        row = matrix.get(f"GPU{d}")
        col = f"GPU{nxt}"
        if row is None or col not in header:
            return "", None
        entries.append(row[header.index(col)])
    specs = [link_from_topology_matrix(e) for e in entries]
    if not entries or any(s is None for s in specs):
        return " ".join(sorted(set(entries))), None
    slowest = min(specs, key=lambda s: s.bytes_per_s)
    return f"{slowest.name} ({', '.join(sorted(set(entries)))} in nvidia-smi topo -m)", slowest
