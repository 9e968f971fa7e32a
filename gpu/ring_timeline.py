"""What a ring run measured beyond its total time: the per-device timeline of compute and
communication, the share of communication hidden behind compute, the link bandwidth achieved,
and each device's memory. Carried by `RunResult.ring`; plain data, JSON both ways.

Timeline times are milliseconds from an origin event recorded on each device right after all
devices were synchronised, so the devices' clocks agree to within the few microseconds the host
takes to record the origins one after the other. A "compute" event spans one step's fused
kernels and merges on a device's compute stream; a "comm" event spans that step's send of the
held K/V block and receive of the next, on the device's communication stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .units import fmt_bytes, fmt_rate

COMPUTE, COMM = "compute", "comm"
STREAMS = (COMPUTE, COMM)


@dataclass(frozen=True)
class RingEvent:
    """One interval on one device's stream during one ring step."""

    device: int  # rank in the ring, 0 … P-1
    step: int  # 0 … P-1
    stream: str  # COMPUTE or COMM
    start_ms: float
    end_ms: float
    bytes: int = 0  # bytes this device sent in the interval (comm only)

    @property
    def ms(self) -> float:
        return self.end_ms - self.start_ms


def _covered_ms(interval: tuple[float, float], busy: Iterable[tuple[float, float]]) -> float:
    """Length of `interval` covered by the union of the `busy` intervals."""
    lo, hi = interval
    covered, reach = 0.0, lo
    for start, end in sorted(busy):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            covered += end - start
            reach = end
    return covered


@dataclass(frozen=True)
class RingMeasurement:
    """A ring run over `devices` devices: how it ran, and its timeline."""

    devices: int
    layout: str  # "contiguous" or "zigzag"
    #: "nccl"; "simulated" (the NumPy ring); or the same-device test double's name.
    transport: str
    #: The fused algorithm each device ran at each step (e.g. "tiled_wgmma"), "numpy" on the CPU.
    kernel: str
    device_names: tuple[str, ...] = ()
    #: Memory each device held for the ring above its baseline (pool peak), bytes, rank order.
    device_peak_bytes: tuple[int, ...] = ()
    #: Bytes of K and V each device sends per step (the block it holds).
    step_bytes: int = 0
    link: str = ""  # e.g. "NVLink 4 (NV18)"; "" when unknown
    link_peak_bytes_s: float | None = None  # the link's peak, per direction
    timeline: tuple[RingEvent, ...] = field(default_factory=tuple)
    #: max |O_ring - O_single| against the single-device fused kernel's output, when compared.
    max_abs_diff_vs_single: float | None = None

    # -- derived figures -----------------------------------------------------------------------

    def events(self, device: int | None = None, stream: str | None = None) -> list[RingEvent]:
        return [
            e
            for e in self.timeline
            if (device is None or e.device == device) and (stream is None or e.stream == stream)
        ]

    def hidden_fractions(self) -> list[tuple[int, int, float]]:
        """(device, step, share of that step's communication time during which the device's
        compute stream was busy), for every step that communicated. 1.0 means fully hidden."""
        out = []
        for e in self.events(stream=COMM):
            if e.ms <= 0:
                continue
            busy = [(c.start_ms, c.end_ms) for c in self.events(e.device, COMPUTE)]
            out.append((e.device, e.step, _covered_ms((e.start_ms, e.end_ms), busy) / e.ms))
        return out

    @property
    def hidden_fraction(self) -> float | None:
        """Communication time hidden behind compute over all devices and steps (time-weighted);
        None when nothing was sent (one device) or no timeline was measured."""
        comm = [e for e in self.events(stream=COMM) if e.ms > 0]
        total = sum(e.ms for e in comm)
        if not total:
            return None
        hidden = sum(
            _covered_ms(
                (e.start_ms, e.end_ms),
                [(c.start_ms, c.end_ms) for c in self.events(e.device, COMPUTE)],
            )
            for e in comm
        )
        return hidden / total

    @property
    def achieved_bytes_s(self) -> float | None:
        """Bytes sent per second of communication, per device and direction, over all steps.
        A lower bound on the link's speed: each interval also holds the transport's launch and
        the wait for the receiving device to be ready."""
        comm = [e for e in self.events(stream=COMM) if e.ms > 0 and e.bytes > 0]
        seconds = sum(e.ms for e in comm) * 1e-3
        return sum(e.bytes for e in comm) / seconds if seconds else None

    @property
    def link_utilisation(self) -> float | None:
        achieved = self.achieved_bytes_s
        if achieved is None or not self.link_peak_bytes_s:
            return None
        return achieved / self.link_peak_bytes_s

    @property
    def span_ms(self) -> float | None:
        """From the earliest origin-relative start to the latest end over all devices."""
        if not self.timeline:
            return None
        return max(e.end_ms for e in self.timeline) - min(e.start_ms for e in self.timeline)

    def summary(self) -> str:
        """One line: devices and split, kernel, hidden communication, link speed, memory."""
        parts = [f"{self.devices} devices ({self.layout}, {self.transport}, {self.kernel})"]
        hidden = self.hidden_fraction
        if hidden is not None:
            parts.append(f"comm hidden {hidden:.0%}")
        achieved = self.achieved_bytes_s
        if achieved is not None:
            util = self.link_utilisation
            peak = (
                "" if util is None else f", {util:.0%} of {fmt_rate(self.link_peak_bytes_s, 'B/s')}"
            )
            parts.append(f"link {fmt_rate(achieved, 'B/s')}{peak}")
        if self.device_peak_bytes:
            parts.append(f"{fmt_bytes(max(self.device_peak_bytes))} per device")
        if self.max_abs_diff_vs_single is not None:
            parts.append(f"|ΔO| vs one device {self.max_abs_diff_vs_single:.2e}")
        return "; ".join(parts)

    # -- JSON ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["timeline"] = [asdict(e) for e in self.timeline]
        # derived, for people reading the file; dropped again on load
        data["hidden_fraction"] = self.hidden_fraction
        data["achieved_bytes_s"] = self.achieved_bytes_s
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RingMeasurement:
        if not isinstance(data, dict):
            raise ValueError("ring: expected an object")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["device_names"] = tuple(values.get("device_names", ()))
        values["device_peak_bytes"] = tuple(int(b) for b in values.get("device_peak_bytes", ()))
        values["timeline"] = tuple(RingEvent(**e) for e in values.get("timeline", ()))
        return cls(**values)


def timeline_from_intervals(
    compute: Sequence[Sequence[tuple[float, float]]],
    comm: Sequence[Sequence[tuple[float, float] | None]],
    step_bytes: Sequence[Sequence[int]],
) -> tuple[RingEvent, ...]:
    """Events from per-device lists of per-step (start, end) intervals (comm None where a step
    sent nothing), in device then step order."""
    events = []
    for device, steps in enumerate(compute):
        for step, (start, end) in enumerate(steps):
            events.append(RingEvent(device, step, COMPUTE, start, end))
            span = comm[device][step]
            if span is not None:
                events.append(
                    RingEvent(device, step, COMM, span[0], span[1], step_bytes[device][step])
                )
    return tuple(events)
