"""What each plot of the Measurements tab is, said once: its objectName, its titles and names per
pass, its axes (label, tick format, and the quantity and unit its CSV columns carry), its
accessible name and description, where it sits, and how an export names it. The panel builds
its plots from `PLOTS`; the CSV tables, the accessible names and the export dialog read them
from here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpu.config import BACKWARD, DECODE, FORWARD, STEP

from ..state.units import (
    fmt_bandwidth_axis,
    fmt_bytes_axis,
    fmt_flops_axis,
    fmt_ms_axis,
    fmt_plain_axis,
)


@dataclass(frozen=True)
class PerPass:
    """A text that may differ with the pass shown: the forward pass's, and any other pass's
    where it differs (None: the forward pass's)."""

    forward: str
    backward: str | None = None
    step: str | None = None
    decode: str | None = None

    def __call__(self, pass_: str | None = FORWARD) -> str:
        """The text for `pass_` (gpu.config's FORWARD, BACKWARD, STEP, DECODE)."""
        own = {BACKWARD: self.backward, STEP: self.step, DECODE: self.decode}.get(pass_ or FORWARD)
        return own or self.forward


@dataclass(frozen=True)
class Axis:
    """One axis: its label on the plot, how its ticks read (None: the N axis, in powers of
    two), and the quantity and unit of its column in a CSV of the plotted series."""

    label: str
    quantity: PerPass
    unit: str
    format: Callable[[float], str] | None = None


#: The axis of every plot that follows the slider.
N_AXIS = Axis("sequence length N", PerPass("sequence length N"), "tokens")


@dataclass(frozen=True)
class PlotSpec:
    """One plot: see the module docstring. `name` says what it shows, in words (the export
    dialog's choice; with " plot", its accessible name); `title` is the shorter text above the
    plot, which must fit a quarter of a 1280-pixel window. `cell` is its (row, column) in the
    tab (plots that share a cell take turns: the decode pass shows bandwidth for traffic).
    `cursor_label` puts the N of the slider beside the plot's cursor; `y_start`/`x_start` are
    the log10 ranges shown until data arrive."""

    object_name: str
    name: PerPass
    title: PerPass
    description: str
    y: Axis
    stem: str
    cell: tuple[int, int]
    x: Axis = N_AXIS
    cursor_label: bool = False
    y_start: tuple[float, float] | None = None
    x_start: tuple[float, float] | None = None

    @property
    def follows_n(self) -> bool:
        """Whether its x is N: it shares the slider's span and cursor."""
        return self.x is N_AXIS

    def accessible_name(self, pass_: str | None = FORWARD) -> str:
        return f"{self.name(pass_)} plot"

    def csv_axes(self, pass_: str | None = FORWARD) -> tuple[tuple[str, str], tuple[str, str]]:
        """(quantity, unit) of x and of y, for the CSV header of a series of this plot."""
        return (self.x.quantity(pass_), self.x.unit), (self.y.quantity(pass_), self.y.unit)


#: The plots, in the order the panel lists them (exports and tables follow it).
PLOTS: dict[str, PlotSpec] = {
    s.object_name: s
    for s in (
        PlotSpec(
            "memoryPlot",
            name=PerPass("Peak memory"),
            title=PerPass("Peak memory"),
            description=(
                "Peak memory over the sequence length N: the cost model's curves and the "
                "memory each run used, with the memory budget."
            ),
            y=Axis("peak memory", PerPass("peak memory"), "B", fmt_bytes_axis),
            stem="memory",
            cell=(1, 0),
            cursor_label=True,  # one N label is enough: each costs a text layout per move
        ),
        PlotSpec(
            "timingPlot",
            name=PerPass(
                "Time per forward pass",
                backward="Time per backward pass",
                step="Time per training step",
                decode="Time per decode step",
            ),
            title=PerPass(
                "Time", backward="Backward time", step="Step time", decode="Decode step time"
            ),
            description=(
                "Time over the sequence length N: the median of each measured run with its "
                "fastest and slowest, and the roofline model's time."
            ),
            y=Axis(
                "time",
                PerPass(
                    "time per forward pass",
                    backward="time per backward pass",
                    step="time per training step",
                    decode="time per decode step",
                ),
                "ms",
                fmt_ms_axis,
            ),
            stem="time",
            cell=(1, 1),
            y_start=(-1.0, 3.0),  # 0.1 ms to 1 s until something is measured
        ),
        PlotSpec(
            "trafficPlot",
            name=PerPass("HBM traffic"),
            title=PerPass("DRAM (HBM) traffic"),
            description=(
                "Bytes moved between the GPU's memory and its chip over the sequence length "
                "N: the cost model's band and the bytes the hardware counters measured."
            ),
            y=Axis("bytes moved", PerPass("DRAM traffic"), "B", fmt_bytes_axis),
            stem="traffic",
            cell=(2, 0),
        ),
        PlotSpec(
            "rooflinePlot",
            name=PerPass("Roofline"),
            title=PerPass("Roofline"),
            description=(
                "Achieved FLOP per second over arithmetic intensity, under the device's "
                "memory and compute roofs."
            ),
            y=Axis("achieved FLOP/s", PerPass("achieved"), "FLOP/s", fmt_flops_axis),
            x=Axis(
                "useful FLOP per DRAM byte (intensity)",
                PerPass("arithmetic intensity"),
                "FLOP/B",
                fmt_plain_axis,
            ),
            stem="roofline",
            cell=(2, 1),
            cursor_label=True,
            x_start=(0.0, 4.0),  # 1 to 10 000 FLOP/byte until points arrive
        ),
        PlotSpec(
            "bandwidthPlot",
            name=PerPass("Bandwidth (decode)"),
            title=PerPass("KV cache read per step ÷ time"),
            description=(
                "The decode pass's figure of merit over the KV cache's length N: the cache "
                "read per step over the step's time, against the memory's bandwidth."
            ),
            y=Axis(
                "bytes per second",
                PerPass("KV cache read per step ÷ time"),
                "B/s",
                fmt_bandwidth_axis,
            ),
            stem="bandwidth",
            cell=(2, 0),
            cursor_label=True,
        ),
    )
}
