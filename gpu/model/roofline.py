"""The hierarchical roofline and its verdicts: which roof binds each kernel, from measurements
where there are some and from the cost model where there are none.

Roofs (`roofs`): two memory levels, DRAM (HBM) and L2, and three compute units: the dense
fp16/bf16 tensor cores, the fp32 CUDA cores (the readable kernel multiplies there) and the
exponential unit (XU: exp2 and the other special functions; FlashAttention-3 shows it binds at
d = 64). A kernel's time at a roof is its work for that roof over the roof's peak:

- DRAM: DRAM bytes (measured, else the cost model's L2-aware estimate);
- L2: L2 bytes (measured lts__t_bytes, else the no-reuse model: every tile load crosses L2);
- tensor / fp32: the FLOPs the kernel executes on that unit (diagonal tiles in full, naive's
  masked half too);
- XU: exponentials (measured XU lanes = warp instructions × 32, else the model's count).

The binding roof is the one with the longest time: the unit closest to its peak if the kernel
ran at the roofline ("speed of light"). `bound` is that roof's kind: memory (DRAM, L2) or
compute. `roofline_ms` is that longest time, a lower bound on the kernel's time.

Two intensities are named apart: `intensity` = useful FLOPs (4·B·h·N²·d, halved when causal;
what TFLOP/s figures count) per DRAM byte, `executed_intensity` = executed FLOPs per DRAM byte
(what the hardware issued; higher under a causal mask). Points sit at measured intensity where
the run was profiled, at model intensity otherwise, and `bytes_source` says which.

One clock per recording: its compute roofs are quoted at the median clock of every kernel its
counters sampled (`device_gpu` with the recording's results), whichever N is judged, in the app
replaying it and in `main.py explain --open` alike; without counters, at the GPU's boost clock.

Everything here is plain Python: the CLI (`main.py explain`) and the app's views use it alike.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..algorithms import ALGORITHMS, MMA_SYNC, NAIVE
from ..config import AttentionConfig
from ..results import DeviceInfo, KernelTraffic, RunResult
from ..units import fmt_rate, fmt_si
from . import costmodel
from .costmodel import CPU, FP32, SUBPARTITIONS_PER_SM, TENSOR, GpuSpec, KernelCost, TrafficBand
from .decode_cost import compulsory_decode

HBM, L2, XU = "hbm", "l2", "xu"
#: The tensor cores through the warp-level mma.sync (its own, slower, rate on Hopper).
MMA = "mma_sync"
#: A CPU's main memory (its roof stands where a GPU's HBM does).
DRAM = "dram"
MEMORY, COMPUTE = "memory", "compute"
MEASURED, MODEL = "measured", "model"
#: Memory roofs, drawn as diagonals; the rest are compute roofs, drawn flat.
MEMORY_ROOFS = (HBM, DRAM, L2)

#: Threads per warp: XU lanes per warp instruction counted by sm__inst_executed_pipe_xu.
WARP = 32
#: Two roofs whose times differ by less than this share of the longer are a tie.
TIE = 0.05
#: Peers (recorded beside ours, not in the registry) whose matmuls are mma.sync: PyTorch's
#: FlashAttention-2. Our algorithms say theirs in the registry (`AlgorithmInfo.matmul`); the
#: rest, and cuBLAS on Hopper, use wgmma: the counters show it, gpu/model/costmodel.py.
MMA_SYNC_PEERS = frozenset({"sdpa_flash"})
#: Kernels of those algorithms that run on wgmma where the GPU has it (Hopper): the fused
#: backward's main kernel, whose Hopper build (gpu/kernels/flash_bwd_wgmma.cu) replaces the
#: mma.sync one there. Its deterministic dQ pass stays mma.sync.
WGMMA_ON_HOPPER_KERNELS = frozenset({"flash_bwd"})


@dataclass(frozen=True)
class Roof:
    """One roof: its peak in B/s (memory) or operations/s (compute), and where it comes from."""

    name: str  # HBM, DRAM, L2, TENSOR, MMA, FP32, XU
    kind: str  # MEMORY or COMPUTE
    peak: float
    label: str
    source: str = ""
    #: A nominal peak (a counter's own ceiling), not a rate anything was measured at.
    nominal: bool = False
    unit: str = ""  # "B/s", "FLOP/s", "exp/s"
    #: A rate per clock × SMs × the GPU's clock (measured, or the boost clock's ceiling), not a
    #: figure a datasheet prints.
    per_clock: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "peak": self.peak,
            "unit": self.unit,
            "label": self.label,
            "source": self.source,
            "nominal": self.nominal,
            "per_clock": self.per_clock,
        }


@functools.lru_cache(maxsize=64)
def roofs(gpu: GpuSpec) -> dict[str, Roof]:
    """The device's roofs by name; a roof whose peak is not known is left out (worked out once
    per device: the plots ask on every slider move; do not modify the dict).

    GPU: HBM, L2, the tensor cores through wgmma (TENSOR) and through mma.sync (MMA, where its
    rate differs), the fp32 CUDA cores and the exponential unit, the compute roofs at
    `gpu.clock_hz` (the counters' measured clock, or the boost clock, a ceiling the clock does
    not hold under load; the source says which, and `per_clock` marks them). CPU: main memory
    (DRAM) and fp32 SIMD (gpu/model/cpu_roofs.py)."""
    clock = fmt_si(gpu.clock_hz, "Hz") if gpu.clock_hz else ""
    how = "measured clock" if gpu.clock_measured else "boost clock"
    at = f" at the {how} {clock} ({gpu.clock_source})" if clock and gpu.clock_source else ""
    bw = gpu.bandwidth_bytes_s
    if gpu.kind == CPU:
        return {
            DRAM: Roof(DRAM, MEMORY, bw, f"memory {fmt_rate(bw, 'B/s')}", gpu.bandwidth_source,
                       unit="B/s"),
            FP32: Roof(FP32, COMPUTE, gpu.fp32_peak_flops,
                       f"fp32 SIMD {fmt_rate(gpu.fp32_peak_flops, 'FLOP/s')}", gpu.source,
                       unit="FLOP/s"),
        }  # fmt: skip
    out = {HBM: Roof(HBM, MEMORY, bw, f"HBM {fmt_rate(bw, 'B/s')}", gpu.source, unit="B/s")}
    per_clock = bool(gpu.tensor_flops_per_clock_per_sm and gpu.clock_hz)
    if per_clock:
        rate = gpu.tensor_flops_per_clock_per_sm
        # The datasheet's dense figure is the same rate at a lower clock: say which, so the
        # boost clock's ceiling is never taken for the published figure.
        printed = gpu.fp16_tensor_flops
        source = (
            f"{rate:,.0f} FLOP/clk/SM × {gpu.sms} SMs{at}; the datasheet's dense fp16 "
            f"{fmt_si(printed, 'FLOP/s', 4)} is this rate at "
            f"{fmt_si(printed / (rate * gpu.sms), 'Hz')}"
        )
        label = f"tensor cores (wgmma) {fmt_rate(gpu.tensor_flops, 'FLOP/s')}"
    else:
        source, label = gpu.source, f"tensor cores {fmt_rate(gpu.tensor_flops, 'FLOP/s')}"
    out[TENSOR] = Roof(
        TENSOR, COMPUTE, gpu.tensor_flops, label, source, unit="FLOP/s", per_clock=per_clock
    )
    if gpu.mma_sync_flops_per_clock_per_sm and gpu.clock_hz:
        out[MMA] = Roof(
            MMA, COMPUTE, gpu.mma_sync_flops,
            f"tensor cores (mma.sync) {fmt_rate(gpu.mma_sync_flops, 'FLOP/s')}",
            f"{gpu.mma_sync_flops_per_clock_per_sm:,.0f} FLOP/clk/SM (the counters' FLOPs per "
            f"busy tensor-pipe cycle of mma.sync kernels on an H200) × {gpu.sms} SMs{at}",
            unit="FLOP/s", per_clock=True,
        )  # fmt: skip
    if gpu.l2_bandwidth_bytes_s:
        l2 = gpu.l2_bandwidth_bytes_s
        tag = " nominal" if gpu.l2_nominal else ""
        out[L2] = Roof(
            L2, MEMORY, l2, f"L2 {fmt_rate(l2, 'B/s')}{tag}", gpu.l2_source, gpu.l2_nominal, "B/s"
        )
    if gpu.fp32_peak_flops:
        per_clock = bool(gpu.fp32_flops_per_clock_per_sm and gpu.clock_hz)
        if per_clock:
            source = f"{gpu.fp32_flops_per_clock_per_sm:,.0f} FLOP/clk/SM × {gpu.sms} SMs{at}"
        else:
            source = gpu.source
        label = f"fp32 CUDA cores {fmt_rate(gpu.fp32_peak_flops, 'FLOP/s')}"
        out[FP32] = Roof(
            FP32, COMPUTE, gpu.fp32_peak_flops, label, source, unit="FLOP/s", per_clock=per_clock
        )
    if gpu.xu_ops_s:
        label = f"exponential unit {fmt_rate(gpu.xu_ops_s, 'exp/s')}"
        source = (
            f"{gpu.xu_ops_per_clock_per_sm} results/clk/SM (CUDA C++ Programming Guide) × "
            f"{gpu.sms} SMs{at}"
        )
        out[XU] = Roof(XU, COMPUTE, gpu.xu_ops_s, label, source, unit="exp/s", per_clock=True)
    return out


def issues_mma_sync(algorithm: str) -> bool:
    """Whether `algorithm`'s matmuls are the warp-level mma.sync (ours: by the registry)."""
    info = ALGORITHMS.get(algorithm)
    return info.matmul == MMA_SYNC if info is not None else algorithm in MMA_SYNC_PEERS


def compute_roof(gpu: GpuSpec, algorithm: str, unit: str, kernel: str = "") -> str:
    """The roof a kernel's matmuls run against: fp32 SIMD on a CPU; on a GPU the fp32 CUDA
    cores, or the tensor cores at the rate of the instruction the kernel issues (mma.sync or
    wgmma). "" for a kernel without matmuls."""
    if not unit:
        return ""
    if gpu.kind == CPU or unit == FP32:
        return FP32
    if issues_mma_sync(algorithm) and gpu.mma_sync_flops_per_clock_per_sm:
        return TENSOR if kernel in WGMMA_ON_HOPPER_KERNELS else MMA
    return TENSOR


@functools.lru_cache(maxsize=1024)
def compulsory_writes(config: AttentionConfig, algorithm: str) -> dict[str, int]:
    """Each kernel's compulsory output bytes (every output written once), in closed form (no
    tile walk: the plots ask for every result of a recording): naive writes S, P and O; a
    fused kernel O, m and l; a decode step's are gpu.model.decode_cost's (no tile walk either).
    The cost model's compulsory_cost gives the same (tested)."""
    if config.is_decode:
        try:
            return {k.name: k.bytes_written for k in compulsory_decode(config, algorithm).kernels}
        except KeyError:  # a peer the cost model does not know
            return {}
    if algorithm == NAIVE:
        s = costmodel.attention_matrix_bytes(config)
        return {"gemm_qk": s, "softmax": s, "gemm_pv": costmodel.matrix_bytes(config)}
    info = ALGORITHMS.get(algorithm)
    if info is None or not info.fused:
        return {}  # a peer the cost model does not know
    return {"flash_fwd": costmodel.matrix_bytes(config) + costmodel.stats_bytes(config)}


def counted_dram_bytes(result: RunResult) -> int | None:
    """A measured result's DRAM bytes with the compulsory writes counted in full (see
    kernel_verdict): what the plots draw as measured. None where nothing was measured."""
    if not result.traffic:
        return None
    writes = compulsory_writes(result.config, result.algorithm)
    return sum(
        t.dram_read_bytes + max(t.dram_write_bytes, writes.get(t.name, 0)) for t in result.traffic
    )


def kernel_clock_hz(traffic: KernelTraffic) -> float | None:
    """The GPU clock during a sampled launch: gr__cycles_elapsed.max over the window's time."""
    if traffic.elapsed_cycles and traffic.window_ns:
        return traffic.elapsed_cycles / (traffic.window_ns * 1e-9)
    return None


def measured_clock_hz(results: Iterable[RunResult]) -> tuple[float, int] | None:
    """The median clock of every profiled kernel in `results`, and how many there were."""
    clocks = sorted(
        hz for r in results for t in r.traffic if (hz := kernel_clock_hz(t)) is not None
    )
    if not clocks:
        return None
    return statistics.median(clocks), len(clocks)


def with_measured_clock(gpu: GpuSpec, results: Iterable[RunResult]) -> GpuSpec:
    """`gpu` at the clock its counters measured in `results` (unchanged where none was)."""
    found = measured_clock_hz(results)
    if found is None or gpu.kind == CPU:
        return gpu
    hz, count = found
    source = f"gr__cycles_elapsed.max ÷ sampled time, median of {count} profiled kernels"
    return costmodel.with_clock(gpu, hz, source)


def tensor_share(traffic: KernelTraffic, ms: float, sms: int) -> float | None:
    """The share of the tensor pipes' peak a kernel used: sm__pipe_tensor_cycles_active
    counts busy sub-partition cycles (four tensor cores per SM), so the peak is
    4 × SMs × clock × time. For wgmma kernels this equals achieved FLOP/s ÷ the wgmma roof."""
    hz = kernel_clock_hz(traffic)
    if hz is None or ms <= 0 or sms <= 0:
        return None
    return traffic.tensor_active_cycles / (SUBPARTITIONS_PER_SM * sms * hz * ms * 1e-3)


def ties(times: Mapping[str, float], binding: str) -> tuple[str, ...]:
    """`binding`, then every other roof whose time is within TIE of its time."""
    top = times.get(binding, 0.0)
    close = sorted(
        (r for r, t in times.items() if r != binding and top > 0 and t >= top * (1 - TIE)),
        key=lambda r: -times[r],
    )
    return (binding, *close)


@dataclass(frozen=True)
class KernelVerdict:
    """One kernel on the roofline."""

    name: str
    unit: str  # the compute roof its matmuls run against: TENSOR, MMA, FP32 or "" (none)
    flops: int  # useful FLOPs of this kernel
    executed_flops: int
    exps: int  # exponentials (measured XU lanes when profiled)
    dram_bytes: int
    bytes_source: str  # MEASURED or MODEL
    l2_bytes: int
    l2_bytes_source: str
    roof_ms: dict[str, float]  # time at each roof that applies
    roof: str
    bound: str
    roofline_ms: float
    measured_ms: float | None = None
    measured_min_ms: float | None = None
    measured_max_ms: float | None = None
    #: Measured share of the tensor pipes' peak (busy sub-partition cycles ÷ 4 × SMs × cycles).
    tensor_active: float | None = None
    #: Compulsory output bytes the counters had not seen written yet (still in L2), counted in
    #: `dram_bytes`.
    deferred_write_bytes: int = 0
    #: The exponentials the cost model counts (one per score); `exps` is what the XU pipe ran.
    model_exps: int = 0

    @property
    def xu_per_exponential(self) -> float | None:
        """Measured XU lanes per exponential the kernel needs (None unless profiled): above 1,
        the XU roof's share is the pipe's occupancy, its exponentials and every other
        instruction it ran, not the exponentials alone."""
        if self.bytes_source != MEASURED or not self.model_exps:
            return None
        return self.exps / self.model_exps

    @property
    def ties(self) -> tuple[str, ...]:
        """The roofs whose time is within TIE of the binding one's, binding roof first: more
        than one means no single unit binds."""
        return ties(self.roof_ms, self.roof)

    @property
    def tie(self) -> bool:
        return len(self.ties) > 1

    @property
    def roof_share(self) -> dict[str, float]:
        """Per roof, the share of its peak the kernel ran at (its time at that roof over the
        measured time): how far from every roof it is. Empty until measured."""
        if not self.measured_ms:
            return {}
        return {name: ms / self.measured_ms for name, ms in self.roof_ms.items()}

    @property
    def intensity(self) -> float | None:
        """Useful FLOPs per DRAM byte (None for a kernel without matmul work or bytes)."""
        return self.flops / self.dram_bytes if self.flops and self.dram_bytes else None

    @property
    def executed_intensity(self) -> float | None:
        return self.executed_flops / self.dram_bytes if self.flops and self.dram_bytes else None

    @property
    def l2_intensity(self) -> float | None:
        return self.flops / self.l2_bytes if self.flops and self.l2_bytes else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "flops": self.flops,
            "executed_flops": self.executed_flops,
            "exps": self.exps,
            "bytes": self.dram_bytes,
            "bytes_source": self.bytes_source,
            "l2_bytes": self.l2_bytes,
            "l2_bytes_source": self.l2_bytes_source,
            "intensity": self.intensity,
            "executed_intensity": self.executed_intensity,
            "l2_intensity": self.l2_intensity,
            "roof_ms": dict(self.roof_ms),
            "roof": self.roof,
            "ties": list(self.ties),
            "tie": self.tie,
            "bound": self.bound,
            "roofline_ms": self.roofline_ms,
            "roof_share": self.roof_share,
            "measured_ms": self.measured_ms,
            "measured_min_ms": self.measured_min_ms,
            "measured_max_ms": self.measured_max_ms,
            "tensor_active": self.tensor_active,
            "deferred_write_bytes": self.deferred_write_bytes,
            "model_exps": self.model_exps,
            "xu_per_exponential": self.xu_per_exponential,
        }


@dataclass(frozen=True)
class AlgorithmVerdict:
    """One algorithm on the roofline: its kernels and their sum."""

    algorithm: str
    label: str
    kernels: tuple[KernelVerdict, ...]
    flops: int  # useful
    executed_flops: int
    model_bytes: dict[str, int]  # "compulsory", "l2_aware", "no_reuse" DRAM bytes
    roofs_ms: dict[str, float]  # per roof: the time of the kernels it binds
    measured_ms: float | None

    @property
    def bytes(self) -> int:
        return sum(k.dram_bytes for k in self.kernels)

    @property
    def l2_bytes(self) -> int:
        return sum(k.l2_bytes for k in self.kernels)

    @property
    def model_over_measured(self) -> float | None:
        """The L2-aware model's DRAM bytes over the counters' (None unless measured): the
        model checked against the hardware (0.45 says it counts under half the bytes)."""
        if self.bytes_source != MEASURED or not self.bytes:
            return None
        return self.model_bytes["l2_aware"] / self.bytes

    @property
    def l2_intensity(self) -> float | None:
        """Useful FLOPs per L2 byte: the x the L2 roof is read against."""
        return self.flops / self.l2_bytes if self.flops and self.l2_bytes else None

    @property
    def bytes_source(self) -> str:
        """MEASURED only when every kernel's bytes were measured."""
        return MEASURED if all(k.bytes_source == MEASURED for k in self.kernels) else MODEL

    @property
    def intensity(self) -> float | None:
        """Useful FLOPs per DRAM byte (None without bytes)."""
        return self.flops / self.bytes if self.bytes else None

    @property
    def executed_intensity(self) -> float | None:
        return self.executed_flops / self.bytes if self.bytes else None

    @property
    def roofline_ms(self) -> float:
        return sum(k.roofline_ms for k in self.kernels)

    @property
    def roof(self) -> str:
        """The roof that binds the largest share of the roofline time."""
        return max(self.roofs_ms, key=lambda r: self.roofs_ms[r])

    @property
    def bound(self) -> str:
        return next(k.bound for k in self.kernels if k.roof == self.roof)

    @property
    def ties(self) -> tuple[str, ...]:
        """Roofs tied with the binding one (TIE), binding first: for one kernel, its own;
        for several, the roofs whose kernels' shares of the time are that close."""
        if len(self.kernels) == 1:
            return self.kernels[0].ties
        return ties(self.roofs_ms, self.roof)

    @property
    def tie(self) -> bool:
        return len(self.ties) > 1

    @property
    def roof_share(self) -> dict[str, float]:
        """The share of each roof's peak the algorithm ran at: for one kernel, its own; for
        several, the roofline time over the measured time (the speed of light's share)."""
        if len(self.kernels) == 1:
            return self.kernels[0].roof_share
        if not self.measured_ms:
            return {}
        return {"roofline": self.roofline_ms / self.measured_ms}

    def kernel(self, name: str) -> KernelVerdict:
        return next(k for k in self.kernels if k.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "label": self.label,
            "flops": self.flops,
            "executed_flops": self.executed_flops,
            "bytes": self.bytes,
            "bytes_source": self.bytes_source,
            "intensity": self.intensity,
            "executed_intensity": self.executed_intensity,
            "bound": self.bound,
            "roof": self.roof,
            "ties": list(self.ties),
            "tie": self.tie,
            "roofline_ms": self.roofline_ms,
            "roof_share": self.roof_share,
            "measured_ms": self.measured_ms,
            "model_bytes": dict(self.model_bytes),
            "model_over_measured": self.model_over_measured,
            "kernels": [k.to_dict() for k in self.kernels],
        }


@dataclass(frozen=True)
class Explanation:
    """Verdicts for one config on one GPU, and naive's DRAM traffic over each fused kernel's."""

    config: AttentionConfig
    gpu: GpuSpec
    roofs: dict[str, Roof]
    algorithms: tuple[AlgorithmVerdict, ...]
    #: "naive/<algorithm>" -> {"measured": ratio or None, "model_over_measured": naive's model
    #: over the fused kernel's measured bytes or None, "model_l2_aware": .., "model_no_reuse"}
    naive_ratios: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def algorithm(self, algorithm: str) -> AlgorithmVerdict:
        return next(a for a in self.algorithms if a.algorithm == algorithm)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "gpu": self.gpu.name,
            "gpu_label": self.gpu.label,
            "clock_hz": self.gpu.clock_hz,
            "clock_source": self.gpu.clock_source,
            "clock_measured": self.gpu.clock_measured,
            "roofs": {name: roof.to_dict() for name, roof in self.roofs.items()},
            "algorithms": {a.algorithm: a.to_dict() for a in self.algorithms},
            "naive_dram_ratios": self.naive_ratios,
        }


# --------------------------------------------------------------------------------------------


def device_gpu(device: DeviceInfo | None, results: Iterable[RunResult] = ()) -> GpuSpec:
    """The roofs' device for a run's `device`: this CPU's own (gpu/model/cpu_roofs.py) for the CPU
    backend; for a GPU, the table's entry (the default GPU when unknown) with what the device
    carries: the L2 bandwidth bench/l2_bandwidth.py measured (the counters' nominal peak, else
    the best streaming read) and the clock its counters measured (the median over `results`'
    profiled kernels: pass every result of the recording, not one N's, so that each point of
    it is judged at the same clock; else a replayed recording's `measured_clock_hz`, worked out
    over the whole recording the same way)."""
    if device is not None and device.backend == CPU:
        from .cpu_roofs import cpu_spec_from_details

        return cpu_spec_from_details(device.name, device.memory_total_bytes, device.details)
    spec = costmodel.gpu_for_device_name(device.name) if device else None
    spec = spec or costmodel.GPUS[costmodel.DEFAULT_GPU]
    if device is None:
        return spec
    for key, how, nominal in (
        ("l2_peak_bandwidth_bytes_s", "nominal: the L2 counters' peak", True),
        ("l2_read_bandwidth_bytes_s", "best streaming read", False),
    ):
        if device.details.get(key):
            source = f"{how} on this {device.name} (bench/l2_bandwidth.py)"
            read = device.details.get("l2_read_bandwidth_bytes_s")
            if nominal and read:
                source += f"; best streaming read {fmt_rate(read, 'B/s')}"
            spec = costmodel.with_measured_l2(spec, device.details[key], source, nominal)
            break
    measured = with_measured_clock(spec, results)
    if measured is not spec:
        return measured
    hz = device.details.get("measured_clock_hz")
    if hz:
        count = device.details.get("measured_clock_kernels", 0)
        source = f"gr__cycles_elapsed.max ÷ sampled time, median of {count} profiled kernels"
        return costmodel.with_clock(spec, float(hz), source)
    return spec


def _useful_share(cost: KernelCost, total_executed: int, useful: int) -> int:
    """A kernel's share of the algorithm's useful FLOPs, in proportion to the products it
    executes that are not recomputed (`total_executed`: the algorithm's such FLOPs). A fused
    backward's rebuilt S, and the deterministic dQ pass's rebuilt S and dP, are no one's
    useful work: the dQ pass's share is its dQ product alone."""
    done = cost.flops - cost.recomputed_flops
    if not done or not total_executed:
        return 0
    return round(useful * done / total_executed)


def kernel_verdict(
    algorithm: str,
    cost: KernelCost,
    useful: int,
    l2_aware: KernelCost,
    no_reuse: KernelCost,
    gpu_roofs: Mapping[str, Roof],
    gpu: GpuSpec,
    result: RunResult | None,
    compulsory_written: int = 0,
) -> KernelVerdict:
    """Place one kernel: measured traffic from `result` where it has some, the model otherwise.

    Measured DRAM bytes count the compulsory writes in full (`compulsory_written`: every
    output written once): a write-back L2 still holds part of the output when the sampled
    window closes (tiled_ws at N = 4096 shows 0 B written), and those bytes reach DRAM later.
    `deferred_write_bytes` says how many were added."""
    traffic = result.kernel_traffic(cost.name) if result is not None else None
    timing = next((k for k in result.kernel_times if k.name == cost.name), None) if result else None
    deferred = 0
    if traffic is not None:
        deferred = max(0, compulsory_written - traffic.dram_write_bytes)
        dram, l2, source = traffic.dram_bytes + deferred, traffic.l2_bytes, MEASURED
        exps = traffic.xu_warp_instructions * WARP or cost.exps
    else:
        dram, l2, source = l2_aware.hbm_bytes, no_reuse.hbm_bytes, MODEL
        exps = cost.exps
    memory = DRAM if gpu.kind == CPU else HBM
    work = {memory: dram, L2: l2, XU: exps}
    unit_roof = compute_roof(gpu, algorithm, cost.unit, cost.name)
    if unit_roof:
        work[unit_roof] = cost.flops
    times = {
        name: work[name] / roof.peak * 1e3
        for name, roof in gpu_roofs.items()
        if name in work and work[name] and roof.peak
    }
    if not times:  # nothing to move or compute (an empty config): memory, zero time
        times = {memory: 0.0}
    roof = max(times, key=lambda r: times[r])
    tensor_active = None
    if traffic is not None and timing is not None:
        tensor_active = tensor_share(traffic, timing.ms, gpu.sms)
    return KernelVerdict(
        name=cost.name,
        unit=unit_roof,
        flops=useful,
        executed_flops=cost.flops,
        exps=exps,
        dram_bytes=dram,
        bytes_source=source,
        l2_bytes=l2,
        l2_bytes_source=source,
        roof_ms=times,
        roof=roof,
        bound=gpu_roofs[roof].kind if roof in gpu_roofs else MEMORY,
        roofline_ms=times[roof],
        measured_ms=timing.ms if timing else None,
        measured_min_ms=timing.min_ms if timing else None,
        measured_max_ms=timing.max_ms if timing else None,
        tensor_active=tensor_active,
        deferred_write_bytes=deferred,
        model_exps=cost.exps,
    )


def algorithm_verdict(
    config: AttentionConfig,
    algorithm: str,
    gpu: GpuSpec,
    result: RunResult | None = None,
    smem_limit_bytes: int | None = None,
    band: TrafficBand | None = None,
) -> AlgorithmVerdict:
    """One algorithm's kernels on `gpu`'s roofline; `result` (same config) supplies measured
    times and, when profiled, measured bytes. `band`: the model's traffic_band for this config,
    algorithm and GPU when the caller has it already (it is the costly part)."""
    if result is not None and (result.oom or result.config != config):
        result = None  # another config's figures, or no figures at all
    if band is None:
        band = costmodel.traffic_band(config, algorithm, gpu, smem_limit_bytes)
    gpu_roofs = roofs(gpu)
    no_reuse = band.no_reuse
    not_recomputed = sum(k.flops - k.recomputed_flops for k in no_reuse.kernels)
    kernels = tuple(
        kernel_verdict(
            algorithm,
            k,
            _useful_share(k, not_recomputed, no_reuse.flops),
            band.l2_aware.kernel(k.name),
            k,
            gpu_roofs,
            gpu,
            result,
            band.compulsory.kernel(k.name).bytes_written,
        )
        for k in no_reuse.kernels
    )
    roofs_ms: dict[str, float] = {}
    for k in kernels:
        roofs_ms[k.roof] = roofs_ms.get(k.roof, 0.0) + k.roofline_ms
    measured = None if result is None else result.total_ms
    return AlgorithmVerdict(
        algorithm=algorithm,
        label=ALGORITHMS[algorithm].label if algorithm in ALGORITHMS else algorithm,
        kernels=kernels,
        flops=no_reuse.flops,
        executed_flops=no_reuse.executed_flops,
        model_bytes={
            "compulsory": band.compulsory.hbm_bytes,
            "l2_aware": band.l2_aware.hbm_bytes,
            "no_reuse": no_reuse.hbm_bytes,
        },
        roofs_ms=roofs_ms,
        measured_ms=measured,
    )


def explain(
    config: AttentionConfig,
    algorithms: Sequence[str],
    gpu: GpuSpec,
    results: Mapping[str, RunResult] | None = None,
    smem_limit_bytes: int | None = None,
    bands: Mapping[str, TrafficBand] | None = None,
) -> Explanation:
    """Verdicts for `algorithms` at `config`; `results` maps an algorithm to its result for this
    config (measured or recorded), when there is one; `bands` the traffic bands the caller has
    already worked out (see algorithm_verdict). The roofs are `gpu`'s at its own clock: a
    point is never judged at a clock of its own (see device_gpu)."""
    results = results or {}
    bands = bands or {}
    verdicts = tuple(
        algorithm_verdict(config, a, gpu, results.get(a), smem_limit_bytes, bands.get(a))
        for a in algorithms
    )
    ratios: dict[str, dict[str, float | None]] = {}
    naive = next((v for v in verdicts if v.algorithm == NAIVE), None)
    if naive is not None:
        for v in verdicts:
            if v.algorithm == NAIVE:
                continue
            measured = (
                naive.bytes / v.bytes
                if naive.bytes_source == MEASURED and v.bytes_source == MEASURED and v.bytes
                else None
            )
            # Naive out of memory (never measured) against a measured fused kernel: the model's
            # naive bytes over the counters' fused ones, rather than two model figures.
            mixed = (
                naive.bytes / v.bytes
                if naive.bytes_source != MEASURED and v.bytes_source == MEASURED and v.bytes
                else None
            )
            ratios[f"naive/{v.algorithm}"] = {
                "measured": measured,
                "model_over_measured": mixed,
                "model_l2_aware": naive.model_bytes["l2_aware"] / v.model_bytes["l2_aware"],
                "model_no_reuse": naive.model_bytes["no_reuse"] / v.model_bytes["no_reuse"],
            }
    return Explanation(config, gpu, roofs(gpu), verdicts, ratios)
