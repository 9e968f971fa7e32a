"""What the texts about the point on screen are made from: the explain pane and the lesson
strip read the same inputs, taken from the app state and the shown algorithms' results at its
N, so the two never judge the same point with different roofs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpu.config import AttentionConfig
from gpu.model.costmodel import GpuSpec
from gpu.results import RunResult

from .app_state import AppState
from .decode_bandwidth import copy_bandwidth


@dataclass(frozen=True)
class PointInputs:
    config: AttentionConfig
    algorithms: tuple[str, ...]
    gpu: GpuSpec  # whose roofs decide memory- vs compute-bound
    gpu_label: str  # whose roofs: "H200 SXM (reference)", "… (this CPU's roofs)", ...
    budget_bytes: int | None  # the memory the verdicts compare against (None: unknown)
    budget_name: str  # "an RTX 4090", "this H200", "this machine's RAM"
    #: Results at this config, per algorithm (measured or recorded; profiled ones carry bytes).
    results: tuple[tuple[str, RunResult], ...] = ()
    #: Devices P (Device ▸ Devices): past one, only the ring runs.
    devices: int = 1
    #: Attention layers whose saved activations a training pass stacks (AppState.layers).
    layers: int = 1
    #: What fits (the decode pass): the storage types of the weights and of the KV cache.
    fit_weights: str = "fp16"
    fit_kv: str = "fp16"
    #: A device-to-device copy's bandwidth measured with the results (B/s; None: not measured).
    copy_bytes_s: float | None = None

    @classmethod
    def from_state(cls, s: AppState, results: Mapping[str, RunResult] | None = None) -> PointInputs:
        """The point on screen, judged by the roofs of the device that ran it
        (AppState.roof_device: this CPU's own on the CPU backend)."""
        return cls(
            config=s.config,
            algorithms=s.algorithms,
            gpu=s.roof_device,
            gpu_label=s.roof_device_label,
            budget_bytes=s.budget.line_bytes,
            budget_name=s.budget_name,
            results=tuple((results or {}).items()),
            devices=s.devices,
            layers=s.layers,
            fit_weights=s.fit_weights,
            fit_kv=s.fit_kv,
            copy_bytes_s=copy_bandwidth(s.backend.info.details) if s.backend else None,
        )
