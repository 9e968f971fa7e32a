"""The ring model's curves for the Ring tab: time against N for each P, and time and efficiency
against P = 1 … 1024 at one N, from gpu/ring/model.py. No Qt; computed off the GUI thread.

Throughput: a fused kernel's one-GPU results when there are any (recorded or measured here:
`MeasuredThroughput`, at the chunk size each device really runs), else the roofline of the
target GPU's datasheet. Every figure here is a prediction and is labelled so by the views.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpu.config import AttentionConfig
from gpu.model.links import Topology
from gpu.ring.model import DEVICE_COUNTS, RingPrediction, Throughput, curve, predict
from gpu.ring.schedule import chunk_count

#: Sequence lengths of the time-against-N curves: 1,024 … 1,048,576, two points per octave.
CURVE_SEQ: tuple[int, ...] = tuple(
    sorted({2**k for k in range(10, 21)} | {round(2**k * 2**0.5) for k in range(10, 20)})
)
#: The P whose time-against-N curve is always drawn (plus every P measured and the current one).
CURVE_DEVICES: tuple[int, ...] = (1, 2, 8, 64, 1024)


@dataclass(frozen=True)
class RingCurves:
    """Predictions for one config family, one N and one P."""

    config: AttentionConfig
    devices: int
    throughput: str
    #: P -> the predictions at each N of CURVE_SEQ that gives every device a row per chunk.
    over_n: dict[int, tuple[RingPrediction, ...]]
    #: P = 1, 2, 4 … 1024 (and `devices`) at `config`'s N.
    over_p: tuple[RingPrediction, ...]
    #: The prediction for `devices` at `config`; None when N is too short for P devices.
    current: RingPrediction | None

    @property
    def exposed_from(self) -> int | None:
        """The smallest P of `over_p` whose transfers no longer hide behind compute."""
        return next((p.devices for p in self.over_p if not p.hidden), None)


def fits(config: AttentionConfig, devices: int) -> bool:
    """Whether N gives every device at least one row per chunk."""
    return config.seq_len >= chunk_count(devices, config.causal)


def ring_curves(
    config: AttentionConfig,
    devices: int,
    throughput: Throughput,
    topology: Topology,
    measured_devices: Iterable[int] = (),
) -> RingCurves:
    def at(c: AttentionConfig, p: int) -> RingPrediction:
        return predict(c, p, throughput=throughput, topology=topology)

    curve_ps = sorted({*CURVE_DEVICES, *measured_devices, devices})
    over_n = {
        p: tuple(
            at(config.with_(seq_len=n), p) for n in CURVE_SEQ if fits(config.with_(seq_len=n), p)
        )
        for p in curve_ps
    }
    scaling_ps = sorted({*DEVICE_COUNTS, devices})
    over_p = curve(config, scaling_ps, throughput=throughput, topology=topology)
    current = at(config, devices) if fits(config, devices) else None
    return RingCurves(
        config=config,
        devices=devices,
        throughput=throughput.label,
        over_n=over_n,
        over_p=over_p,
        current=current,
    )
