"""Ring attention on P virtual devices in NumPy: the same split, block order and merge as the
CUDA ring (gpu/ring/cuda_ring.py), exact against a float64 reference, on any machine and any N.

Each virtual device owns real arrays: its query chunks, the K/V block it holds, its running
(O, m, l). At every step of the schedule (gpu/ring/schedule.py) it scores its queries against the
held block the way one fused kernel call would, producing a partial result with O normalised,
m the row max of q·k/√d and l = Σ exp(q·k/√d − m), and merges that into its running result with
the online-softmax rescale:

    m' = max(m, m_p),  a = l·e^(m − m'),  b = l_p·e^(m_p − m'),
    O' = (a·O + b·O_p) / (a + b),  l' = a + b.

Then the blocks move one device along the ring (device d's next block is device d−1's), which
here is a copy between the virtual devices' arrays, counted in bytes.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np
import psutil

from ..algorithms import RING
from ..backends.backend import RunOptions
from ..backends.cpu_backend import RAM_HEADROOM, ROW_CHUNK, random_inputs, reference_attention
from ..config import AttentionConfig
from ..results import KernelTime, RunResult
from ..ring_timeline import RingMeasurement
from ..units import fmt_bytes
from .model import pair_counts, ring_cost
from .schedule import DIAGONAL, RingSchedule, ring_schedule

#: What the simulation costs on a CPU, for an estimate before it starts (a 2-core x86 machine,
#: idle): building the schedule takes about SCHEDULE_PAIR_S per chunk pair, each pair's NumPy
#: calls (score, softmax, merge, copies) PAIR_OVERHEAD_S beyond their arithmetic, which runs at
#: about SIM_FLOPS_PER_S. Past a few hundred devices the pairs (P² of them) dominate: the ring
#: on 1024 simulated devices is hours of Python whatever N is.
SCHEDULE_PAIR_S = 3e-5
PAIR_OVERHEAD_S = 3e-4
SIM_FLOPS_PER_S = 8e9


def estimate_seconds(config: AttentionConfig, devices: int, runs: int = 1) -> float:
    """About how long `runs` simulations of the ring take here, schedule included; worked
    out without building anything (instant for any P)."""
    full, diagonal = pair_counts(devices, config.causal)
    pairs = full + diagonal
    per_run = pairs * PAIR_OVERHEAD_S + ring_cost(config, devices).executed_flops / SIM_FLOPS_PER_S
    return pairs * SCHEDULE_PAIR_S + runs * per_run


#: Compute dtypes the simulation offers: float32 like the GPU's accumulators, float64 to check
#: the algebra to rounding.
SIM_DTYPES = (np.float32, np.float64)


def block_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, diagonal: bool, dtype: type = np.float32
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What one fused kernel call returns for (Q chunk, K/V chunk): O normalised, m, l.

    q is (bh, rows, d), k and v (bh, cols, d). `diagonal` applies the causal triangle of a chunk
    against itself (rows == cols): key j is visible to query i when j <= i. Row blocks bound the
    score temporaries to ROW_CHUNK·cols.
    """
    bh, rows, d = q.shape
    scale = dtype(d**-0.5)
    kt = k.astype(dtype).transpose(0, 2, 1)
    vv = v.astype(dtype)
    o = np.empty((bh, rows, d), dtype=dtype)
    m = np.empty((bh, rows), dtype=dtype)
    l = np.empty((bh, rows), dtype=dtype)
    for r0 in range(0, rows, ROW_CHUNK):
        r1 = min(rows, r0 + ROW_CHUNK)
        s = (q[:, r0:r1].astype(dtype) @ kt) * scale
        if diagonal:
            s[:, np.arange(r0, r1)[:, None] < np.arange(k.shape[1])[None, :]] = -np.inf
        m_blk = s.max(axis=2)
        np.exp(s - m_blk[:, :, None], out=s)
        l_blk = s.sum(axis=2)
        o[:, r0:r1] = (s @ vv) / l_blk[:, :, None]
        m[:, r0:r1] = m_blk
        l[:, r0:r1] = l_blk
    return o, m, l


def merge_partial(
    o: np.ndarray, m: np.ndarray, l: np.ndarray, o_p: np.ndarray, m_p: np.ndarray, l_p: np.ndarray
) -> None:
    """Fold a partial (O_p, m_p, l_p) into the running (O, m, l) in place: the rescale above.
    A running row that has seen no key yet has m = −inf and l = 0, and takes the partial as is."""
    m_new = np.maximum(m, m_p)
    seen = np.isfinite(m_new)  # a row no key reached on either side stays as it is
    safe = np.where(seen, m_new, 0)
    a = np.where(seen, l * np.exp(m - safe), 0)
    b = np.where(seen, l_p * np.exp(m_p - safe), 0)
    total = a + b
    inv = np.divide(1, total, out=np.zeros_like(total), where=total > 0)
    o *= (a * inv)[..., None]
    o += (b * inv)[..., None] * o_p
    m[...] = m_new
    l[...] = total


@dataclass
class _VirtualDevice:
    """The arrays one virtual device holds."""

    q: dict[int, np.ndarray]  # chunk -> (bh, rows, d)
    k: dict[int, np.ndarray]  # the held block's chunks
    v: dict[int, np.ndarray]
    o: dict[int, np.ndarray]  # running results per query chunk
    m: dict[int, np.ndarray]
    l: dict[int, np.ndarray]

    def nbytes(self) -> int:
        return sum(a.nbytes for part in vars(self).values() for a in part.values())


def _block_nbytes(k: dict[int, np.ndarray], v: dict[int, np.ndarray]) -> int:
    return sum(a.nbytes for a in (*k.values(), *v.values()))


@dataclass(frozen=True)
class SimulatedRing:
    """The simulation's output and what it moved."""

    schedule: RingSchedule
    o: np.ndarray  # (B, h, N, d) in the compute dtype
    m: np.ndarray  # (B, h, N)
    l: np.ndarray
    bytes_sent: tuple[tuple[int, ...], ...]  # [step][device], counted from the copied arrays
    device_bytes: tuple[int, ...]  # the most each virtual device held at once


def simulate_ring(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    config: AttentionConfig,
    devices: int,
    dtype: type = np.float32,
) -> SimulatedRing:
    """Run the ring of `devices` virtual devices on (B, h, N, d) inputs; any N >= 1."""
    if dtype not in SIM_DTYPES:
        raise ValueError(f"dtype must be float32 or float64, not {dtype}")
    schedule = ring_schedule(config, devices)
    b, h, n, d = q.shape
    flat = [x.reshape(b * h, n, d) for x in (q, k, v)]

    def rows(x: np.ndarray, chunk: int) -> np.ndarray:
        start, stop = schedule.chunk_bounds(chunk)
        return x[:, start:stop].copy()  # each virtual device owns its copy

    vdev = []
    for dev in range(devices):
        mine = schedule.device_chunks(dev)
        vdev.append(
            _VirtualDevice(
                q={c: rows(flat[0], c) for c in mine},
                k={c: rows(flat[1], c) for c in mine},
                v={c: rows(flat[2], c) for c in mine},
                o={c: np.zeros((b * h, schedule.chunk_rows[c], d), dtype) for c in mine},
                m={c: np.full((b * h, schedule.chunk_rows[c]), -np.inf, dtype) for c in mine},
                l={c: np.zeros((b * h, schedule.chunk_rows[c]), dtype) for c in mine},
            )
        )
    held = [vd.nbytes() for vd in vdev]
    sent = []
    for step in schedule.steps:
        for ds in step:
            vd = vdev[ds.device]
            for pair in ds.computed:
                if not vd.q[pair.q_chunk].shape[1] or not vd.k[pair.k_chunk].shape[1]:
                    continue  # an empty chunk (N < 2P): nothing to score
                partial = block_attention(
                    vd.q[pair.q_chunk],
                    vd.k[pair.k_chunk],
                    vd.v[pair.k_chunk],
                    pair.kind == DIAGONAL,
                    dtype,
                )
                c = pair.q_chunk
                merge_partial(vd.o[c], vd.m[c], vd.l[c], *partial)
        if step[0].sends_to is None:
            sent.append(tuple(0 for _ in step))
            continue
        # Pass every block one device along: device d receives device d-1's block (a copy, as
        # a transfer would make; the receiver holds the incoming block beside its current one
        # until the step ends, as the GPU's double buffer does).
        outgoing = [(vd.k, vd.v) for vd in vdev]
        moved = []
        for ds in step:
            src_k, src_v = outgoing[ds.receives_from]
            in_k = {c: a.copy() for c, a in src_k.items()}
            in_v = {c: a.copy() for c, a in src_v.items()}
            incoming = _block_nbytes(in_k, in_v)
            held[ds.device] = max(held[ds.device], vdev[ds.device].nbytes() + incoming)
            moved.append((in_k, in_v))
        for ds, (in_k, in_v) in zip(step, moved, strict=True):
            vdev[ds.device].k, vdev[ds.device].v = in_k, in_v
        sent.append(tuple(_block_nbytes(k_blk, v_blk) for k_blk, v_blk in outgoing))

    o = np.empty((b * h, n, d), dtype)
    m = np.empty((b * h, n), dtype)
    l = np.empty((b * h, n), dtype)
    for dev, vd in enumerate(vdev):
        for c in schedule.device_chunks(dev):
            start, stop = schedule.chunk_bounds(c)
            o[:, start:stop], m[:, start:stop], l[:, start:stop] = vd.o[c], vd.m[c], vd.l[c]
    return SimulatedRing(
        schedule,
        o.reshape(b, h, n, d),
        m.reshape(b, h, n),
        l.reshape(b, h, n),
        tuple(sent),
        tuple(held),
    )


# --------------------------------------------------------------------------------------------
# As a benchmark run: `main.py bench --backend cpu --algo ring --devices P`


def footprint_bytes(config: AttentionConfig, devices: int) -> int:
    """RAM a simulated run holds: inputs, every device's arrays (fp32 copies, two K/V blocks
    while one moves), the assembled output and one row block of scores."""
    rows_total = config.bh * config.seq_len
    per_row = config.head_dim * 4
    chunk = -(-config.seq_len // devices)
    return (
        3 * rows_total * config.head_dim * config.elem_bytes  # Q, K, V
        + rows_total * per_row * 7  # device copies of Q, K, V, incoming K/V, O; assembled O
        + 3 * config.bh * min(ROW_CHUNK, config.seq_len) * chunk * 4  # scores and exp
    )


def run_ring_cpu(config: AttentionConfig, devices: int, options: RunOptions) -> RunResult:
    """The simulated ring as a RunResult: wall time of the whole simulation, peak RAM of its
    arrays, error against the float64 reference when `options.check`."""
    schedule = ring_schedule(config, devices)
    cost = ring_cost(config, devices)
    base = dict(
        config=config,
        algorithm=RING,
        backend="cpu",
        device=f"{devices} simulated devices (NumPy)",
        model_peak_bytes=cost.peak_bytes_per_device,
        hbm_bytes=cost.hbm_bytes,
        flops=cost.flops,
    )
    need = footprint_bytes(config, devices)
    available = int(psutil.virtual_memory().available * RAM_HEADROOM)
    limit = min(available, options.budget_bytes or available)
    if need > limit:
        return RunResult(
            **base,
            oom=True,
            message=f"the simulated ring at N={config.seq_len} needs {fmt_bytes(need)} of RAM, "
            f"{fmt_bytes(limit)} are available",
        )
    q, k, v = random_inputs(config, options.seed)

    def once() -> SimulatedRing:
        return simulate_ring(q, k, v, config, devices)

    sim = once()
    for _ in range(options.warmup):
        once()
    times = []
    for _ in range(max(1, options.repeats)):
        t0 = time.perf_counter()
        once()
        times.append((time.perf_counter() - t0) * 1e3)
    error = None
    if options.check:
        ref = reference_attention(q, k, v, config.causal)
        error = float(np.max(np.abs(sim.o.astype(np.float64) - ref)))
    ring = RingMeasurement(
        devices=devices,
        layout=schedule.layout,
        transport="simulated",
        kernel="numpy",
        device_names=tuple(f"virtual device {d}" for d in range(devices)),
        device_peak_bytes=sim.device_bytes,
        step_bytes=max((b for step in sim.bytes_sent for b in step), default=0),
    )
    return RunResult(
        **base,
        kernel_times=(KernelTime("ring", statistics.median(times)),),
        peak_bytes=max(sim.device_bytes),  # what the fullest virtual device held
        max_abs_error=error,
        repeats=max(1, options.repeats),
        message=f"{devices} virtual devices, {schedule.layout} split, simulated in NumPy",
        ring=ring,
    )
