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

Everything here is plain Python: the CLI (`main.py explain`) and the app's views use it alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import costmodel
from .algorithms import ALGORITHMS, NAIVE
from .config import AttentionConfig
from .costmodel import FP32, TENSOR, GpuSpec, KernelCost, TrafficBand
from .results import DeviceInfo, RunResult

HBM, L2, XU = "hbm", "l2", "xu"
MEMORY, COMPUTE = "memory", "compute"
MEASURED, MODEL = "measured", "model"

#: Threads per warp: XU lanes per warp instruction counted by sm__inst_executed_pipe_xu.
WARP = 32


@dataclass(frozen=True)
class Roof:
    """One roof: its peak in B/s (memory) or operations/s (compute)."""

    name: str  # HBM, L2, TENSOR, FP32, XU
    kind: str  # MEMORY or COMPUTE
    peak: float
    label: str
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "peak": self.peak,
            "label": self.label,
            "source": self.source,
        }


def roofs(gpu: GpuSpec) -> dict[str, Roof]:
    """The GPU's roofs by name; a roof whose peak the table does not know is left out."""
    hbm = gpu.bandwidth_bytes_s
    tensor = gpu.fp16_tensor_flops
    out = {
        HBM: Roof(HBM, MEMORY, hbm, f"HBM {hbm / 1e12:.2f} TB/s", gpu.source),
        TENSOR: Roof(
            TENSOR, COMPUTE, tensor, f"tensor cores {tensor / 1e12:.0f} TFLOP/s (fp16/bf16 dense)",
            gpu.source,
        ),
    }  # fmt: skip
    if gpu.l2_bandwidth_bytes_s:
        bw = gpu.l2_bandwidth_bytes_s
        out[L2] = Roof(L2, MEMORY, bw, f"L2 {bw / 1e12:.2f} TB/s", gpu.l2_source)
    if gpu.fp32_flops:
        label = f"fp32 CUDA cores {gpu.fp32_flops / 1e12:.1f} TFLOP/s"
        out[FP32] = Roof(FP32, COMPUTE, gpu.fp32_flops, label, gpu.source)
    if gpu.xu_ops_s:
        label = f"exponential unit {gpu.xu_ops_s / 1e12:.2f} Texp/s"
        source = "16 results/clock/SM (CUDA C++ Programming Guide) at the datasheet clock"
        out[XU] = Roof(XU, COMPUTE, gpu.xu_ops_s, label, source)
    return out


@dataclass(frozen=True)
class KernelVerdict:
    """One kernel on the roofline."""

    name: str
    unit: str  # TENSOR, FP32 or "" (no matmul)
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
    tensor_active: float | None = None  # measured fraction of SM cycles with the tensor pipe busy

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
            "bound": self.bound,
            "roofline_ms": self.roofline_ms,
            "measured_ms": self.measured_ms,
            "measured_min_ms": self.measured_min_ms,
            "measured_max_ms": self.measured_max_ms,
            "tensor_active": self.tensor_active,
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
            "roofline_ms": self.roofline_ms,
            "measured_ms": self.measured_ms,
            "model_bytes": dict(self.model_bytes),
            "kernels": [k.to_dict() for k in self.kernels],
        }


@dataclass(frozen=True)
class Explanation:
    """Verdicts for one config on one GPU, and naive's DRAM traffic over each fused kernel's."""

    config: AttentionConfig
    gpu: GpuSpec
    roofs: dict[str, Roof]
    algorithms: tuple[AlgorithmVerdict, ...]
    #: "naive/<algorithm>" -> {"measured": ratio or None, "model_l2_aware": .., "model_no_reuse"}
    naive_ratios: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def algorithm(self, algorithm: str) -> AlgorithmVerdict:
        return next(a for a in self.algorithms if a.algorithm == algorithm)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "gpu": self.gpu.name,
            "gpu_label": self.gpu.label,
            "roofs": {name: roof.to_dict() for name, roof in self.roofs.items()},
            "algorithms": {a.algorithm: a.to_dict() for a in self.algorithms},
            "naive_dram_ratios": self.naive_ratios,
        }


# --------------------------------------------------------------------------------------------


def device_gpu(device: DeviceInfo | None) -> GpuSpec:
    """The table's entry for a recorded device (default GPU when unknown), with the L2
    bandwidth measured on that device when the recording carries one: the peak its L2 counters
    give (a peak, like the datasheet roofs), else the best streaming rate measured."""
    spec = costmodel.gpu_for_device_name(device.name) if device else None
    spec = spec or costmodel.GPUS[costmodel.DEFAULT_GPU]
    if device is None:
        return spec
    for key, how in (
        ("l2_peak_bandwidth_bytes_s", "peak from its L2 counters"),
        ("l2_read_bandwidth_bytes_s", "best streaming read"),
    ):
        if device.details.get(key):
            source = f"{how} on this {device.name} (bench/l2_bandwidth.py)"
            return costmodel.with_measured_l2(spec, device.details[key], source)
    return spec


def _useful_share(cost: KernelCost, total_executed: int, useful: int) -> int:
    """A kernel's share of the algorithm's useful FLOPs, in proportion to what it executes."""
    if not cost.flops or not total_executed:
        return 0
    return round(useful * cost.flops / total_executed)


def kernel_verdict(
    cost: KernelCost,
    useful: int,
    l2_aware: KernelCost,
    no_reuse: KernelCost,
    gpu_roofs: Mapping[str, Roof],
    gpu: GpuSpec,
    result: RunResult | None,
) -> KernelVerdict:
    """Place one kernel: measured traffic from `result` where it has some, the model otherwise."""
    traffic = result.kernel_traffic(cost.name) if result is not None else None
    timing = next((k for k in result.kernel_times if k.name == cost.name), None) if result else None
    if traffic is not None:
        dram, l2, source = traffic.dram_bytes, traffic.l2_bytes, MEASURED
        exps = traffic.xu_warp_instructions * WARP or cost.exps
    else:
        dram, l2, source = l2_aware.hbm_bytes, no_reuse.hbm_bytes, MODEL
        exps = cost.exps
    work = {HBM: dram, L2: l2, XU: exps}
    if cost.unit:
        work[cost.unit] = cost.flops
    times = {
        name: work[name] / roof.peak * 1e3
        for name, roof in gpu_roofs.items()
        if name in work and work[name] and roof.peak
    }
    if not times:  # nothing to move or compute (an empty config): memory, zero time
        times = {HBM: 0.0}
    roof = max(times, key=lambda r: times[r])
    tensor_active = None
    if traffic is not None and timing is not None and traffic.window_ns and timing.ms > 0:
        clock_hz = traffic.elapsed_cycles / (traffic.window_ns * 1e-9)
        busy = gpu.sms * clock_hz * timing.ms * 1e-3
        tensor_active = traffic.tensor_active_cycles / busy if busy else None
    return KernelVerdict(
        name=cost.name,
        unit=cost.unit,
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
    kernels = tuple(
        kernel_verdict(
            k,
            _useful_share(k, no_reuse.executed_flops, no_reuse.flops),
            band.l2_aware.kernel(k.name),
            k,
            gpu_roofs,
            gpu,
            result,
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
    already worked out (see algorithm_verdict)."""
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
            ratios[f"naive/{v.algorithm}"] = {
                "measured": measured,
                "model_l2_aware": naive.model_bytes["l2_aware"] / v.model_bytes["l2_aware"],
                "model_no_reuse": naive.model_bytes["no_reuse"] / v.model_bytes["no_reuse"],
            }
    return Explanation(config, gpu, roofs(gpu), verdicts, ratios)
