"""The cost model extended to P devices and the links between them: ring attention's time,
bytes and memory per device, and where communication stops hiding behind compute.

Per step each device runs fused kernels on its chunk pairs (compute, c) while it sends its K/V
block on and receives the next (transfer, x = bytes / link bandwidth one way). Both start when
the previous step ends, so a step takes max(c, x); the last step sends nothing:

    T(P) = Σ_{s < P-1} max(c_s, x) + c_{P-1} + (store of O).

Per step a device sends 2·(N/P)·d·h·B·bytes (K and V of its block) and computes
4·B·h·(N/P)²·d FLOPs (half with the causal mask, split zigzag so every device gets the same
half), so c/x grows like N/P: above some rows per device the transfer hides completely. With a
constant kernel throughput F and one-way link bandwidth W that threshold is
N/P = bytes·F / (2·W) without a mask and twice that with it (half the FLOPs per byte sent).

Compute time comes from a `Throughput`: the roofline of a GPU's datasheet (`RooflineThroughput`)
or a fused kernel's measured TFLOP/s at each size, read from recorded runs
(`MeasuredThroughput`), so the prediction at P devices uses the throughput actually measured at
the chunk size each device really runs. The merges and the final store are modelled as HBM passes.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..algorithms import TILED_WGMMA
from ..config import STAT_BYTES, AttentionConfig, ceil_div
from ..model.costmodel import DEFAULT_GPU, GPUS, GpuSpec, tiled_cost, useful_flops
from ..model.links import DEFAULT_TOPOLOGY, LinkSpec, Topology
from ..results import RunResult
from ..units import fmt_si

#: Device counts the model's curves cover: 1, 2, 4, … 1024.
DEVICE_COUNTS: tuple[int, ...] = tuple(2**i for i in range(11))

#: The fused kernel the model assumes each device runs (the Hopper kernel on H100/H200).
MODEL_KERNEL = TILED_WGMMA


# --------------------------------------------------------------------------------------------
# Sizes per device


def rows_per_device(config: AttentionConfig, devices: int) -> int:
    """Query rows (and K/V rows of a block) each device holds: N/P, rounded up."""
    return ceil_div(config.seq_len, devices)


def pair_rows(config: AttentionConfig, devices: int) -> int:
    """Rows of one chunk, the size each fused kernel call runs at: N/P, or N/(2P) when causal."""
    return ceil_div(config.seq_len, 2 * devices if config.causal else devices)


def step_bytes(config: AttentionConfig, devices: int) -> int:
    """K and V of one block: what each device sends (and receives) per step."""
    return 2 * rows_per_device(config, devices) * config.head_dim * config.bh * config.elem_bytes


def kv_work_buffers(devices: int) -> int:
    """Receive buffers besides the device's own block: none alone, one for two devices (one
    transfer), two from three devices on (receive the next block while computing on one)."""
    return min(devices - 1, 2)


def device_peak_bytes(config: AttentionConfig, devices: int) -> int:
    """Device memory the CUDA ring allocates on each device (gpu/ring/cuda_ring.py,
    `RankBuffers`)."""
    bh, d, eb = config.bh, config.head_dim, config.elem_bytes
    rows = rows_per_device(config, devices)
    pair = pair_rows(config, devices)
    block = 2 * rows * d * eb  # K and V
    return bh * (
        rows * d * eb  # local Q
        + block * (1 + kv_work_buffers(devices))  # own K/V block and the receive buffers
        + rows * d * 4  # running O, fp32
        + 2 * rows * STAT_BYTES  # running m, l
        + pair * d * eb  # one kernel call's O
        + 2 * pair * STAT_BYTES  # and its m, l
        + rows * d * eb  # the final O in the input dtype
    )


def merge_bytes(config: AttentionConfig, rows: int) -> int:
    """HBM bytes of one merge over `rows` query rows: read and write the running fp32 O, m, l;
    read the partial O, m, l."""
    d, eb = config.head_dim, config.elem_bytes
    return config.bh * rows * (d * (4 + 4 + eb) + 6 * STAT_BYTES)


def store_bytes(config: AttentionConfig, rows: int) -> int:
    """HBM bytes of the final store: read the fp32 O, write it in the input dtype."""
    return config.bh * rows * config.head_dim * (4 + config.elem_bytes)


def pair_counts(devices: int, causal: bool) -> tuple[int, int]:
    """(full, diagonal) chunk pairs over the whole ring and all devices."""
    if not causal:
        return devices * devices, 0
    return devices * (2 * devices - 1), 2 * devices


@dataclass(frozen=True)
class RingCost:
    """Bytes, FLOPs and memory of the ring for one config on P devices (equal chunks)."""

    config: AttentionConfig
    devices: int
    flops: int  # useful FLOPs of the whole problem, as for one device
    executed_flops: int
    hbm_bytes: int  # all devices: fused kernels, merges, final stores
    peak_bytes_per_device: int
    step_bytes: int
    transfers: int  # steps that send: P - 1


def ring_cost(config: AttentionConfig, devices: int, kernel: str = MODEL_KERNEL) -> RingCost:
    pair = pair_rows(config, devices)
    full, diagonal = pair_counts(devices, config.causal)
    kernels = [(full, tiled_cost(config.with_(seq_len=pair, causal=False), kernel))]
    if diagonal:
        kernels.append((diagonal, tiled_cost(config.with_(seq_len=pair, causal=True), kernel)))
    rows = rows_per_device(config, devices)
    overhead = (full + diagonal) * merge_bytes(config, pair) + devices * store_bytes(config, rows)
    return RingCost(
        config=config,
        devices=devices,
        flops=useful_flops(config),
        executed_flops=sum(n * c.executed_flops for n, c in kernels),
        hbm_bytes=sum(n * c.hbm_bytes for n, c in kernels) + overhead,
        peak_bytes_per_device=device_peak_bytes(config, devices),
        step_bytes=step_bytes(config, devices),
        transfers=devices - 1,
    )


# --------------------------------------------------------------------------------------------
# How fast one fused kernel call runs


class Throughput(Protocol):
    """Seconds one fused kernel call takes on a square (N = seq_len) problem, and the HBM
    bandwidth the merges move their bytes at."""

    label: str
    hbm_bytes_s: float

    def kernel_seconds(self, config: AttentionConfig) -> float: ...


@dataclass(frozen=True)
class RooflineThroughput:
    """A GPU's roofline: max(bytes / its datasheet's bandwidth, FLOPs / its dense tensor
    peak, at the clock the GpuSpec quotes: the boost clock's ceiling on the Hopper parts)."""

    gpu: GpuSpec = GPUS[DEFAULT_GPU]
    kernel: str = MODEL_KERNEL

    @property
    def label(self) -> str:
        return f"roofline of the {self.gpu.name} ({fmt_si(self.gpu.clock_hz, 'Hz')} boost clock)"

    @property
    def hbm_bytes_s(self) -> float:
        return self.gpu.bandwidth_bytes_s

    def kernel_seconds(self, config: AttentionConfig) -> float:
        return tiled_cost(config, self.kernel).modeled_seconds(self.gpu)


@dataclass(frozen=True, eq=False)  # hashed by identity: its points are a dict
class MeasuredThroughput:
    """A fused kernel's measured TFLOP/s against N, per (head_dim, dtype, causal), from
    recorded runs; interpolated in log N between measured sizes. Above the largest measured N
    the rate holds (the GPU is full); below the smallest, the smallest's TIME holds (a launch
    that small is bound by launch latency, not by its FLOPs). A family with no measurement falls
    back to `fallback`."""

    #: (head_dim, dtype, causal) -> sorted ((N, FLOP/s), ...)
    points: dict[tuple[int, str, bool], tuple[tuple[int, float], ...]]
    source: str
    fallback: Throughput = field(default_factory=RooflineThroughput)
    hbm_bytes_s: float = GPUS[DEFAULT_GPU].bandwidth_bytes_s

    @property
    def label(self) -> str:
        return f"measured throughput ({self.source})"

    @classmethod
    def from_results(
        cls,
        results: Iterable[RunResult],
        algorithm: str,
        source: str,
        fallback: Throughput | None = None,
    ) -> MeasuredThroughput:
        """From the results of one fused algorithm; when several heads were measured at one
        (N, family), the one with the most heads wins (the fullest GPU)."""
        best: dict[tuple[int, str, bool, int], tuple[int, float]] = {}
        for r in results:
            if r.algorithm != algorithm or r.oom or not r.tflops or r.ring is not None:
                continue
            c = r.config
            key = (c.head_dim, c.dtype, c.causal, c.seq_len)
            if key not in best or c.bh > best[key][0]:
                best[key] = (c.bh, r.tflops * 1e12)
        points: dict[tuple[int, str, bool], list[tuple[int, float]]] = {}
        for (d, dtype, causal, n), (_, rate) in best.items():
            points.setdefault((d, dtype, causal), []).append((n, rate))
        frozen = {k: tuple(sorted(v)) for k, v in points.items()}
        return cls(frozen, source, fallback or RooflineThroughput())

    def flops_per_s(self, config: AttentionConfig) -> float | None:
        pts = self.points.get((config.head_dim, config.dtype, config.causal))
        if not pts:
            return None
        ns = [n for n, _ in pts]
        n = config.seq_len
        i = bisect.bisect_left(ns, n)
        if i == 0:
            return pts[0][1]
        if i == len(pts):
            return pts[-1][1]
        (n0, f0), (n1, f1) = pts[i - 1], pts[i]
        t = (math.log(n) - math.log(n0)) / (math.log(n1) - math.log(n0))
        return f0 + t * (f1 - f0)

    def kernel_seconds(self, config: AttentionConfig) -> float:
        rate = self.flops_per_s(config)
        if rate is None:
            return self.fallback.kernel_seconds(config)
        smallest = self.points[(config.head_dim, config.dtype, config.causal)][0][0]
        if config.seq_len < smallest:  # launch-bound: no faster than the smallest measured
            config = config.with_(seq_len=smallest)
        return useful_flops(config) / rate


# --------------------------------------------------------------------------------------------
# Predictions


@dataclass(frozen=True)
class RingPrediction:
    """The model's figures for one config on `devices` devices."""

    config: AttentionConfig
    devices: int
    link: str
    link_bytes_s: float
    rows_per_device: int
    step_bytes: int
    #: Compute of the first step (the causal zigzag's diagonal step) and of every later step.
    first_step_compute_s: float
    step_compute_s: float
    step_transfer_s: float
    total_s: float
    single_s: float  # the same fused kernel on one device, whole sequence
    peak_bytes_per_device: int
    throughput: str

    @property
    def hidden(self) -> bool:
        """Whether each step's transfer fits inside that step's compute."""
        return self.devices == 1 or self.step_transfer_s <= self.step_compute_s

    @property
    def exposed_s(self) -> float:
        """Communication time that adds to the total (not hidden behind compute)."""
        first = max(0.0, self.step_transfer_s - self.first_step_compute_s)
        later = max(0.0, self.step_transfer_s - self.step_compute_s)
        return 0.0 if self.devices == 1 else first + (self.devices - 2) * later

    @property
    def speedup(self) -> float:
        return self.single_s / self.total_s

    @property
    def efficiency(self) -> float:
        """Speed-up per device: 1.0 is perfect scaling."""
        return self.speedup / self.devices

    def to_dict(self) -> dict:
        return {
            "devices": self.devices,
            "seq_len": self.config.seq_len,
            "link": self.link,
            "link_bytes_s": self.link_bytes_s,
            "rows_per_device": self.rows_per_device,
            "step_bytes": self.step_bytes,
            "first_step_compute_s": self.first_step_compute_s,
            "step_compute_s": self.step_compute_s,
            "step_transfer_s": self.step_transfer_s,
            "hidden": self.hidden,
            "exposed_s": self.exposed_s,
            "total_s": self.total_s,
            "single_s": self.single_s,
            "speedup": self.speedup,
            "efficiency": self.efficiency,
            "peak_bytes_per_device": self.peak_bytes_per_device,
            "throughput": self.throughput,
        }


@functools.lru_cache(maxsize=4096)
def _kernel_seconds(throughput: Throughput, config: AttentionConfig) -> float:
    return throughput.kernel_seconds(config)


def step_compute_seconds(
    config: AttentionConfig, devices: int, throughput: Throughput
) -> tuple[float, float]:
    """(first step, every later step) compute time of one device, merges included.

    Without a mask each step is one N/P × N/P kernel call. With it (zigzag, chunks of N/(2P))
    the first step holds the device's own block: two diagonal (causal) calls and one full one;
    every later step two full calls, the same work as the first."""
    pair = pair_rows(config, devices)
    merge = merge_bytes(config, pair) / throughput.hbm_bytes_s
    full = _kernel_seconds(throughput, config.with_(seq_len=pair, causal=False)) + merge
    if not config.causal:
        return full, full
    diagonal = _kernel_seconds(throughput, config.with_(seq_len=pair, causal=True)) + merge
    return 2 * diagonal + full, 2 * full


def predict(
    config: AttentionConfig,
    devices: int,
    *,
    throughput: Throughput | None = None,
    topology: Topology = DEFAULT_TOPOLOGY,
    link: LinkSpec | None = None,
) -> RingPrediction:
    """The ring of `devices` devices on `config`; `link` overrides the topology's choice."""
    throughput = throughput or RooflineThroughput()
    link = link or topology.link_for(devices)
    first, later = step_compute_seconds(config, devices, throughput)
    nbytes = step_bytes(config, devices)
    transfer = link.seconds(nbytes) if devices > 1 else 0.0
    total = first if devices == 1 else max(first, transfer)
    total += sum(max(later, transfer) for _ in range(devices - 2))
    if devices > 1:
        total += later
    rows = rows_per_device(config, devices)
    total += store_bytes(config, rows) / throughput.hbm_bytes_s
    return RingPrediction(
        config=config,
        devices=devices,
        link=link.name,
        link_bytes_s=link.bytes_per_s,
        rows_per_device=rows,
        step_bytes=nbytes,
        first_step_compute_s=first,
        step_compute_s=later,
        step_transfer_s=transfer,
        total_s=total,
        single_s=_kernel_seconds(throughput, config),
        peak_bytes_per_device=device_peak_bytes(config, devices),
        throughput=throughput.label,
    )


def curve(
    config: AttentionConfig,
    devices: Sequence[int] = DEVICE_COUNTS,
    *,
    throughput: Throughput | None = None,
    topology: Topology = DEFAULT_TOPOLOGY,
) -> tuple[RingPrediction, ...]:
    """Predictions for each device count that leaves every device at least one chunk row."""
    chunks = 2 if config.causal else 1
    return tuple(
        predict(config, p, throughput=throughput, topology=topology)
        for p in devices
        if config.seq_len >= chunks * p
    )


def hiding_threshold_rows(
    config: AttentionConfig,
    link: LinkSpec,
    throughput: Throughput | None = None,
    max_rows: int = 1 << 20,
) -> int | None:
    """The rows per device (N/P) from which a step's transfer always fits inside its compute:
    above it communication hides completely. None if it does not hide even at `max_rows`.

    Compute per step grows like (N/P)² and the transfer like N/P, so with a constant throughput
    the comparison flips once. A measured throughput also makes tiny steps launch-bound (their
    compute time stops shrinking), where the transfer hides again; the threshold is the upper
    crossing: halve N/P from `max_rows` while it hides, then bisect the last halving. The step
    is a later one (every step but the first): the shape that repeats P - 1 times."""
    throughput = throughput or RooflineThroughput()

    def hides(rows: int) -> bool:
        # One device's step at `rows` rows: chunk sizes and block bytes depend on N/P only.
        probe = config.with_(seq_len=rows)
        _, compute = step_compute_seconds(probe, 1, throughput)
        return link.seconds(step_bytes(probe, 1)) <= compute

    if not hides(max_rows):
        return None
    hi = max_rows
    while hi > 1 and hides(hi // 2):
        hi //= 2
    if hi == 1:
        return 1
    lo = hi // 2 + 1  # hides(hi // 2) is False
    while lo < hi:  # the smallest rows in (hi // 2, hi] from which it hides
        mid = (lo + hi) // 2
        if hides(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
