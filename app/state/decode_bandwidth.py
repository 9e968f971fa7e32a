"""Decode's figure of merit: the KV cache read per step over the step's time, as a share of the
device's memory bandwidth by its datasheet (the roofs' memory roof: HBM on a GPU; on the CPU,
the copy this machine measured) and of a device-to-device copy measured on the same device,
where the recording has one (`COPY_DETAIL`, written by the decode recordings of
bench/record_run.py).

A decode step must read K and V of the whole cache once, 2·B·H_kv·N·d·bytes, whatever the
kernel does (bench/bench_decode.py counts the same bytes): the rate says how close a kernel
comes to streaming memory. Short caches are latency-bound (a few µs of launch and merge for
a few MB), long ones bandwidth-bound.

Qt-free: the bandwidth plot, its hover read-out and the explain pane read these."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpu.model.costmodel import GpuSpec
from gpu.model.decode_cost import kv_cache_bytes
from gpu.model.roofline import DRAM, HBM, roofs
from gpu.results import RunResult

from .units import fmt_rate

#: The device detail of a recording that holds its measured copy bandwidth (read + write
#: bytes per second of a device-to-device copy).
COPY_DETAIL = "copy_bandwidth_bytes_s"


def copy_bandwidth(details: Mapping[str, Any] | None) -> float | None:
    """The copy bandwidth a device's details carry (B/s), or None."""
    value = (details or {}).get(COPY_DETAIL)
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def kv_read_rate(result: RunResult) -> float | None:
    """K and V read once over the step's median time (B/s); None for a result without a time
    (out of memory) or of another pass."""
    if result.oom or not result.total_ms or not result.config.is_decode:
        return None
    return kv_cache_bytes(result.config) / (result.total_ms * 1e-3)


@dataclass(frozen=True)
class MemoryRoof:
    """The memory bandwidth a rate is compared with: its value (B/s), its name on screen and
    where it comes from ('datasheet', or 'measured' for this CPU's copy)."""

    bytes_s: float
    name: str
    source: str


def memory_roof(device: GpuSpec) -> MemoryRoof:
    """The roofs' memory roof of `device` (HBM on a GPU, this CPU's memory on the CPU)."""
    table = roofs(device)
    roof = table.get(HBM) or table.get(DRAM)
    if roof is None:  # every device has one; a plain figure if a table ever lacks it
        return MemoryRoof(device.bandwidth_bytes_s, "memory", "datasheet")
    measured = "measured" in roof.source
    name = "HBM" if HBM in table else "memory"
    return MemoryRoof(roof.peak, name, "measured" if measured else "datasheet")


def share_text(rate: float, roof: MemoryRoof, copy: float | None) -> str:
    """'2.81 TB/s: 84% of the HBM datasheet figure (3.35 TB/s), 93% of the copy measured on this
    device (3.02 TB/s)' (the copy where one was measured)."""
    text = (
        f"{fmt_rate(rate, 'B/s')}: {rate / roof.bytes_s:.0%} of the {roof.name} "
        f"{roof.source} figure ({fmt_rate(roof.bytes_s, 'B/s')})"
    )
    if copy:
        text += f", {rate / copy:.0%} of the copy measured on this device ({fmt_rate(copy, 'B/s')})"
    return text


#: Said once where the results carry no copy bandwidth.
NO_COPY = (
    "No device-to-device copy was measured with these results: the shares are of the datasheet."
)
