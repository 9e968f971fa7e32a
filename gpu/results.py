"""What a backend returns for one run: measured times and memory beside the model's figures.

Results are frozen and JSON-serializable, so the same object feeds the plots, the result cache,
`main.py bench --out`, saved sessions and recorded GPU runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .config import AttentionConfig
from .ring_timeline import RingMeasurement

#: Largest max-abs error vs the reference that still counts as agreeing, per input dtype, for
#: unit-normal inputs (the error is dominated by rounding S, P and O to the storage dtype).
ERROR_TOLERANCE: dict[str, float] = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 6e-2}


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
    name: str
    ms: float


@dataclass(frozen=True)
class RunResult:
    """One (config, algorithm) measurement. `oom` results carry no times, only the message."""

    config: AttentionConfig
    algorithm: str
    backend: str
    device: str
    kernel_times: tuple[KernelTime, ...] = ()
    peak_bytes: int | None = None  # measured: memory the run held above its baseline
    model_peak_bytes: int = 0
    hbm_bytes: int = 0  # modeled HBM traffic of the kernels that ran
    flops: int = 0  # useful FLOPs (4·B·h·N²·d, halved when causal)
    max_abs_error: float | None = None  # vs an fp32 (CUDA) or float64 (CPU) reference
    oom: bool = False
    message: str = ""
    repeats: int = 0
    recorded: bool = False  # True when replayed from a file rather than measured now
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
    def bandwidth_gbs(self) -> float | None:
        """Modeled HBM bytes over measured time: the traffic the run must have sustained."""
        ms = self.total_ms
        return None if not ms else self.hbm_bytes / (ms * 1e-3) / 1e9

    @property
    def agrees(self) -> bool | None:
        """Whether the checked error is within the dtype's tolerance (None when not checked)."""
        if self.max_abs_error is None:
            return None
        return self.max_abs_error <= ERROR_TOLERANCE[self.config.dtype]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kernel_times"] = [{"name": k.name, "ms": k.ms} for k in self.kernel_times]
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
        if data.get("ring") is not None:
            data["ring"] = RingMeasurement.from_dict(data["ring"])
        return cls(**data)
