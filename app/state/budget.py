"""The memory budget: presets, and what a preset means on the device the app runs on.

A budget is picked from presets ("this device", every GPU in the cost model's table, or a custom
size). It does two things: it caps what a run may allocate (the backend emulates a smaller GPU),
and it names the GPU whose roofline and ridge point the verdicts use.

A GPU's capacity is its GpuSpec's `memory_bytes` (gpu/model/gpus.py says why): "this device" on
a GPU of the table is that capacity, for the budget line, the walls and the runs alike, and what
the device reports is only said beside it; a device the table does not know, and this CPU, are
what they report.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu.model.costmodel import GPUS, GpuSpec

from .units import fmt_bytes

#: The custom memory budget's range, GB (the control's, and what a session may hold).
CUSTOM_GB_RANGE = (0.1, 4096.0)

DEVICE_PRESET = "device"
CUSTOM_PRESET = "custom"

#: Presets of the memory budget, largest first: this device, the GPUS table, custom.
BUDGET_PRESETS: tuple[str, ...] = (
    DEVICE_PRESET,
    *sorted(GPUS, key=lambda k: (-GPUS[k].memory_bytes, k)),
    CUSTOM_PRESET,
)


@dataclass(frozen=True)
class Device:
    """What "this device" is: its memory, a label for it, its GPUS entry if known, and on the
    CPU backend this CPU's roofs (gpu/model/cpu_roofs.py)."""

    memory_bytes: int | None = None  # its capacity (see the module's docstring)
    label: str = "this device"
    gpu: GpuSpec | None = None
    cpu: GpuSpec | None = None
    reported_bytes: int | None = None  # what the device reports (cudaMemGetInfo's total)


@dataclass(frozen=True)
class Budget:
    """The memory budget as the rest of the app needs it."""

    preset: str
    #: Passed to the backend (RunOptions.budget_bytes); None = the device's own memory (a
    #: device the table does not know).
    run_bytes: int | None
    #: Where to draw the line: the budget, or the device's memory for "this device".
    line_bytes: int | None
    label: str  # "RTX 4090, 24 GiB", "this device (23.4 GB RAM)"
    gpu: GpuSpec | None  # the GPU whose roofline and ridge point the verdicts use


def budget_for(preset: str, custom_gb: float, device: Device) -> Budget:
    """What `preset` means on `device` (an unknown preset falls back to the device's own)."""
    if preset == CUSTOM_PRESET:
        b = round(custom_gb * 1e9)
        return Budget(preset, b, b, f"custom {fmt_bytes(b)}", device.gpu)
    spec = GPUS.get(preset)
    if spec is not None:
        return Budget(preset, spec.memory_bytes, spec.memory_bytes, spec.label, spec)
    label = f"this device ({device.label})"
    # A GPU of the table runs within the capacity its walls are drawn at; another device
    # within its own memory.
    run = device.memory_bytes if device.gpu is not None else None
    return Budget(DEVICE_PRESET, run, device.memory_bytes, label, device.gpu)
