"""What a backend returns for one run: measured times and memory beside the model's figures.

Results are frozen and JSON-serializable, so the same object feeds the plots, the result cache,
`main.py bench --out`, saved sessions and recorded GPU runs. Fields added later are optional with
defaults, so files written before them still load.

Two kinds of bytes live here and are never mixed up:
- `hbm_bytes` is the cost model's DRAM traffic (no credit for the L2 cache: an upper bound);
- `traffic` holds what the hardware counters saw (CUPTI PM sampling, `RunOptions.profile`),
  per kernel, when the run was profiled. `measured_dram_bytes` sums it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .config import AttentionConfig
from .ring_timeline import RingMeasurement

#: Largest max-abs error vs the reference that still counts as agreeing, per input dtype, for
#: unit-normal inputs (the error is dominated by rounding S, P and O to the storage dtype).
ERROR_TOLERANCE: dict[str, float] = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 6e-2}

#: Most points of a kernel's sampled strip kept in a result (recordings stay small).
STRIP_MAX_POINTS = 256


@dataclass(frozen=True)
class DeviceInfo:
    """Where a run happened: enough to label a recorded run honestly."""

    backend: str  # "cuda", "cpu" or "replay"
    name: str  # "NVIDIA H200", "CPU (x86_64, 2 cores)"
    memory_total_bytes: int
    memory_free_bytes: int
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeviceInfo:
        return cls(**data)


@dataclass(frozen=True)
class KernelTime:
    """One kernel's time per launch: the median of `count` timed samples, and their spread.

    Each sample is itself the mean of a batch of back-to-back launches (see the backend), so
    `min_ms` and `max_ms` show how much the batches disagreed. Results recorded before the
    spread was kept have `min_ms = max_ms = None` and `count = 0`.
    """

    name: str
    ms: float
    min_ms: float | None = None
    max_ms: float | None = None
    count: int = 0

    @classmethod
    def from_samples(cls, name: str, samples_ms: Sequence[float]) -> KernelTime:
        """Median, min, max and count of per-launch times in milliseconds."""
        if not samples_ms:
            raise ValueError(f"no timing samples for {name}")
        return cls(
            name,
            statistics.median(samples_ms),
            min(samples_ms),
            max(samples_ms),
            len(samples_ms),
        )

    @property
    def spread(self) -> float | None:
        """max / median: 1.0 for perfectly repeatable samples (None without a spread)."""
        if self.max_ms is None or self.ms <= 0:
            return None
        return self.max_ms / self.ms


#: Tensor pipes per SM (one per sub-partition): what sm__pipe_tensor_cycles_active sums over.
TENSOR_PIPES_PER_SM = 4
#: A strip point belongs to the kernel when it shows more than this share of the strip's peak.
STRIP_ACTIVE_SHARE = 0.05


@dataclass(frozen=True)
class TrafficStrip:
    """A kernel's sampled counters over one launch, thinned to at most STRIP_MAX_POINTS points:
    time from the first sample (µs, the middle of each interval), DRAM bandwidth (read + write,
    GB/s) and `tensor_active`: sm__pipe_tensor_cycles_active over SMs × elapsed cycles, i.e.
    busy sub-partition cycles per SM cycle, 0..4 (each SM has four tensor pipes);
    `tensor_share` is the share of the pipes' peak, 0..1."""

    t_us: tuple[float, ...] = ()
    dram_gbs: tuple[float, ...] = ()
    tensor_active: tuple[float, ...] = ()

    @property
    def tensor_share(self) -> tuple[float, ...]:
        """The share of the tensor pipes' peak at each point (tensor_active ÷ 4)."""
        return tuple(x / TENSOR_PIPES_PER_SM for x in self.tensor_active)

    def kernel_part(self, threshold: float = STRIP_ACTIVE_SHARE) -> TrafficStrip:
        """The points from the first to the last where the kernel shows: DRAM bandwidth or
        tensor activity above `threshold` of its own peak (an idle window's counters are not
        quite zero: refreshes and the driver's own traffic), so the axis spans the kernel."""
        top_d = max(self.dram_gbs, default=0.0)
        top_t = max(self.tensor_active, default=0.0)
        busy = [
            i
            for i, (d, t) in enumerate(zip(self.dram_gbs, self.tensor_active, strict=True))
            if (top_d and d > threshold * top_d) or (top_t and t > threshold * top_t)
        ]
        if not busy:
            return self
        lo, hi = busy[0], busy[-1] + 1
        return TrafficStrip(self.t_us[lo:hi], self.dram_gbs[lo:hi], self.tensor_active[lo:hi])

    def to_dict(self) -> dict[str, Any]:
        return {
            "t_us": list(self.t_us),
            "dram_gbs": list(self.dram_gbs),
            "tensor_active": list(self.tensor_active),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrafficStrip:
        strip = cls(
            tuple(float(x) for x in data.get("t_us", ())),
            tuple(float(x) for x in data.get("dram_gbs", ())),
            tuple(float(x) for x in data.get("tensor_active", ())),
        )
        if not len(strip.t_us) == len(strip.dram_gbs) == len(strip.tensor_active):
            raise ValueError("a traffic strip's series differ in length")
        return strip


@dataclass(frozen=True)
class KernelTraffic:
    """What the hardware counters saw for one kernel, per launch (the mean of `launches`
    sampled launches, each started with a cold L2, as Nsight Compute does by default).

    Counters (CUPTI metric names): dram__bytes_read.sum, dram__bytes_write.sum,
    lts__t_bytes.sum (all L2 traffic), sm__pipe_tensor_cycles_active.sum (summed over SMs),
    sm__inst_executed_pipe_xu.sum (warp instructions on the exponential/special-function
    unit), gr__cycles_elapsed.max (GPU cycles of the sampled window). DRAM writes still dirty in
    L2 when the kernel ends are written back later and are not counted (as in Nsight Compute).
    """

    name: str
    dram_read_bytes: int
    dram_write_bytes: int
    l2_bytes: int
    # A file may leave the rest out (gpu.files.schema.KernelTrafficDoc): the same defaults here.
    tensor_active_cycles: int = 0
    xu_warp_instructions: int = 0
    elapsed_cycles: int = 0
    window_ns: int = 0  # sampled time per launch, idle edges of the window included
    sample_interval_ns: int = 20_000
    launches: int = 1
    strip: TrafficStrip = field(default_factory=TrafficStrip)

    @property
    def dram_bytes(self) -> int:
        return self.dram_read_bytes + self.dram_write_bytes

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["strip"] = self.strip.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelTraffic:
        data = dict(data)
        data["strip"] = TrafficStrip.from_dict(data.get("strip") or {})
        return cls(**data)


@dataclass(frozen=True)
class RunResult:
    """One (config, algorithm) measurement. `oom` results carry no times, only the message."""

    config: AttentionConfig
    algorithm: str
    backend: str
    device: str
    kernel_times: tuple[KernelTime, ...] = ()
    peak_bytes: int | None = None  # measured: pool memory the run held above its baseline
    model_peak_bytes: int = 0
    hbm_bytes: int = 0  # modeled DRAM traffic of the kernels that ran (no L2 credit)
    flops: int = 0  # useful FLOPs (4·B·h·N²·d, halved when causal)
    max_abs_error: float | None = None  # vs an fp32 (CUDA) or float64 (CPU) reference
    oom: bool = False
    message: str = ""
    repeats: int = 0
    recorded: bool = False  # True when replayed from a file rather than measured now
    #: Device memory the run took from the device (free before minus least free during, via
    #: cudaMemGetInfo): the pool's buffers plus whatever the libraries allocated meanwhile
    #: (a cuBLAS workspace created in this run, loaded modules, allocator rounding).
    device_peak_bytes: int | None = None
    #: Device memory in use at that moment, everything included (context, library workspaces
    #: from earlier runs, other processes): total minus least free.
    device_used_bytes: int | None = None
    #: Timing batches thrown away and taken again because their spread was too wide.
    remeasured: int = 0
    #: Per-kernel counters when the run was profiled (`RunOptions.profile`), else empty.
    traffic: tuple[KernelTraffic, ...] = ()
    #: Ring attention over `ring.devices` devices: timeline, hidden communication, per-device
    #: memory (gpu/ring_timeline.py). None for single-device algorithms.
    ring: RingMeasurement | None = None

    @property
    def total_ms(self) -> float | None:
        if self.oom or not self.kernel_times:
            return None
        return sum(k.ms for k in self.kernel_times)

    @property
    def tflops(self) -> float | None:
        ms = self.total_ms
        return None if not ms else self.flops / (ms * 1e-3) / 1e12

    @property
    def measured_dram_bytes(self) -> int | None:
        """DRAM bytes read plus written that the counters saw, all kernels (None: not measured)."""
        if not self.traffic:
            return None
        return sum(t.dram_bytes for t in self.traffic)

    @property
    def measured_bandwidth_gbs(self) -> float | None:
        """Measured DRAM bytes over the (unsampled) measured time, GB/s; None if not measured."""
        ms = self.total_ms
        dram = self.measured_dram_bytes
        return None if not ms or dram is None else dram / (ms * 1e-3) / 1e9

    @property
    def model_bandwidth_gbs(self) -> float | None:
        """The cost model's DRAM bytes (no L2 credit) over the measured time, GB/s: what the run
        would have had to sustain if every modeled byte went to DRAM. Not a measurement of
        traffic; on GPUs with a large L2 it can exceed the memory's peak."""
        ms = self.total_ms
        return None if not ms else self.hbm_bytes / (ms * 1e-3) / 1e9

    @property
    def bandwidth_gbs(self) -> float | None:
        """Older name of `model_bandwidth_gbs`, kept for callers written before measured traffic."""
        return self.model_bandwidth_gbs

    @property
    def agrees(self) -> bool | None:
        """Whether the checked error is within the dtype's tolerance (None when not checked)."""
        if self.max_abs_error is None:
            return None
        return self.max_abs_error <= ERROR_TOLERANCE[self.config.dtype]

    def kernel_traffic(self, name: str) -> KernelTraffic | None:
        return next((t for t in self.traffic if t.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["config"] = self.config.to_dict()  # the pass under its file key, "pass"
        data["kernel_times"] = [asdict(k) for k in self.kernel_times]
        data["traffic"] = [t.to_dict() for t in self.traffic]
        data["total_ms"] = self.total_ms
        data["tflops"] = self.tflops
        if self.ring is None:
            del data["ring"]  # single-device results keep their old shape
        else:
            data["ring"] = self.ring.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        data = dict(data)
        data.pop("total_ms", None)
        data.pop("tflops", None)
        data["config"] = AttentionConfig.from_dict(data["config"])
        data["kernel_times"] = tuple(KernelTime(**k) for k in data.get("kernel_times", ()))
        data["traffic"] = tuple(KernelTraffic.from_dict(t) for t in data.get("traffic") or ())
        if data.get("ring") is not None:
            data["ring"] = RingMeasurement.from_dict(data["ring"])
        return cls(**data)
