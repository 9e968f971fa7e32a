"""The Ring tab's plots: time against N for each P, time and efficiency against P = 1 … 1024,
and memory per device.

Measured points (recorded, measured on GPUs, or simulated in NumPy: the legend says which) are
markers; everything the cost model predicts is a dashed line labelled "model". The plots are
drawn from finished data (`RingCurves`, computed off the GUI thread, and the ring runs) with
`setData`, on the plotting kit of the Measurements tab (app/plotting/).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHBoxLayout, QTabWidget, QVBoxLayout, QWidget

from gpu.config import AttentionConfig
from gpu.model.links import Topology
from gpu.results import RunResult
from gpu.ring.model import device_peak_bytes

from ..kit.theme import Palette, palette
from ..plotting.axes import Log2NAxis, QuietAxis
from ..plotting.labelled_line import LabelledLine
from ..plotting.metric_plot import MetricPlot
from ..plotting.plot_items import Style, with_alpha
from ..state.ring.curves import CURVE_DEVICES, RingCurves
from ..state.ring.playback import shown_devices
from ..state.ring.runs import RingRun
from ..state.units import fmt_bytes_axis, fmt_int, fmt_ms_axis

MEASURED_SYMBOL = "o"


def p_key(devices: int) -> str:
    return f"ring_p{devices}"


def p_color(devices: int, dark: bool) -> str:
    """One hue per P on a log scale: blue for one device, through green and orange, to red at
    1024."""
    t = min(1.0, math.log2(max(devices, 1)) / 10)
    return QColor.fromHsvF(0.6 * (1 - t), 0.6 if dark else 0.8, 0.95 if dark else 0.75).name()


class BytesAxis(QuietAxis):
    """A linear axis printed in bytes (memory per device)."""

    def tickStrings(self, values, scale, spacing):  # type: ignore[no-untyped-def]
        return [fmt_bytes_axis(v) if v > 0 else "0" for v in values]


class PercentAxis(QuietAxis):
    """A linear axis of fractions printed as percentages (efficiency)."""

    def tickStrings(self, values, scale, spacing):  # type: ignore[no-untyped-def]
        return [f"{v * 100:.0f}%" for v in values]


def _plain_plot(name: str, left: pg.AxisItem, bottom: pg.AxisItem | None = None) -> pg.PlotWidget:
    axes = {"left": left} if bottom is None else {"left": left, "bottom": bottom}
    plot = pg.PlotWidget(axisItems=axes, enableMenu=False)
    plot.setObjectName(name)
    plot.plotItem.setMenuEnabled(False)
    plot.plotItem.hideButtons()
    plot.setMouseEnabled(False, False)
    plot.getAxis("left").setWidth(52)
    # Device numbers and P stay whole numbers: no "(x0.001)" scale on a narrow range.
    plot.getAxis("bottom").enableAutoSIPrefix(False)
    return plot


def _label(line: pg.InfiniteLine, position: float, anchor: tuple[float, float]) -> pg.InfLineLabel:
    return pg.InfLineLabel(line, text="", position=position, anchors=[anchor, anchor])


class RingPlots(QWidget):
    """See the module docstring. Plots: `time_plot` (ringTimePlot), `scaling_plot`
    (ringScalingPlot), `efficiency_plot` (ringEfficiencyPlot), `memory_plot` (ringMemoryPlot).
    What each shows is kept in plain data for tests and exports: `time_plot.series`,
    `scaling_plot.series`, `efficiency` and `memory`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.time_plot = MetricPlot(
            "ringTimePlot",
            "Time against N for each P",
            "time",
            fmt_ms_axis,
        )
        self.scaling_plot = MetricPlot(
            "ringScalingPlot",
            "Time against P at this N",
            "time",
            fmt_ms_axis,
            x_label="devices P",
            cursor_label=False,
        )
        self.scaling_plot.add("model", "", Style("fg", 2.0, Qt.PenStyle.DashLine))
        self.scaling_plot.add("measured", "", Style("fg", 0, symbol=MEASURED_SYMBOL, line=False))
        self.scaling_plot.add(
            "ideal", "one GPU ÷ P (model)", Style("muted", 1.2, Qt.PenStyle.DotLine)
        )
        self.node_line = LabelledLine(self.scaling_plot, 90, 0.06, [(0, 1), (0, 1)])

        self.efficiency_plot = _plain_plot(
            "ringEfficiencyPlot", PercentAxis("left"), Log2NAxis("bottom")
        )
        self.efficiency_plot.setLabel("bottom", "devices P")
        self.efficiency_plot.setLabel("left", "efficiency")
        self.efficiency_legend = self.efficiency_plot.plotItem.addLegend(
            offset=(-6, 4), labelTextSize="8pt", verSpacing=-6
        )
        self.efficiency_model = pg.PlotDataItem(name="model")
        self.efficiency_measured = pg.ScatterPlotItem(size=8, name="measured")
        self.efficiency_plot.addItem(self.efficiency_model)
        self.efficiency_plot.addItem(self.efficiency_measured)
        self.efficiency_cursor = pg.InfiniteLine(angle=90, movable=False)
        self.exposed = pg.InfiniteLine(angle=90, movable=False)
        self.exposed_label = _label(self.exposed, 0.5, (0, 1))
        for line in (self.efficiency_cursor, self.exposed):
            self.efficiency_plot.addItem(line, ignoreBounds=True)
        #: Efficiency series as drawn: name -> (P, fraction).
        self.efficiency: dict[str, tuple[list[int], list[float]]] = {}

        self.memory_plot = _plain_plot("ringMemoryPlot", BytesAxis("left"))
        self.memory_plot.setLabel("bottom", "device")
        self.memory_bars = pg.BarGraphItem(x=[], height=[], width=0.7)
        self.memory_plot.addItem(self.memory_bars)
        self.memory_model = pg.InfiniteLine(angle=0, movable=False)
        self.memory_model_label = _label(self.memory_model, 0.98, (1, 1))
        self.memory_single = pg.InfiniteLine(angle=0, movable=False)
        self.memory_single_label = _label(self.memory_single, 0.02, (0, 1))
        for line in (self.memory_model, self.memory_single):
            self.memory_plot.addItem(line)
        #: What the memory plot shows: per-device bytes (measured, else model) and the lines.
        self.memory: dict[str, object] = {}

        # Two pages: N at the chosen P (and the memory it takes), then P from 1 to 1024.
        self.pages = QTabWidget()
        self.pages.setObjectName("ringPlotPages")
        self.pages.setDocumentMode(True)
        for title, tip, plots in (
            (
                "Time against N · memory",
                "Time against N for each P (measured where measured, else the model) and the "
                "memory each device holds.",
                ((self.time_plot, 3), (self.memory_plot, 2)),
            ),
            (
                "P = 1 … 1024 (model)",
                "The model's time and efficiency from one device to 1024 at this N, with the "
                "runs measured at this N.",
                ((self.scaling_plot, 1), (self.efficiency_plot, 1)),
            ),
        ):
            page = QWidget()
            row = QHBoxLayout(page)
            row.setContentsMargins(0, 2, 0, 0)
            row.setSpacing(4)
            for plot, stretch in plots:
                row.addWidget(plot, stretch)
            self.pages.addTab(page, title)
            self.pages.setTabToolTip(self.pages.count() - 1, tip)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.pages)
        self._base = palette("dark")
        self._palette = self._base
        self._keys: set[int] = set()

    # ------------------------------------------------------------------ palette

    def apply_palette(self, pal: Palette) -> None:
        self._base = pal
        self._restyle()

    def _restyle(self) -> None:
        dark = self._base.name == "dark"
        extra = {p_key(p): p_color(p, dark) for p in self._keys}
        self._palette = replace(self._base, series={**self._base.series, **extra})
        pal = self._palette
        for plot in (self.time_plot, self.scaling_plot):
            plot.apply_palette(pal)
        fill = pg.mkBrush(with_alpha(pal.background, 210))
        for plot in (self.efficiency_plot, self.memory_plot):
            plot.setBackground(pal.background)
            for axis in ("left", "bottom"):
                plot.getAxis(axis).setPen(pg.mkPen(pal.muted))
                plot.getAxis(axis).setTextPen(pg.mkPen(pal.foreground))
        self.efficiency_plot.plotItem.setTitle(
            "Efficiency against P (speed-up ÷ P)", color=pal.foreground, size="10pt"
        )
        self.memory_plot.plotItem.setTitle("Memory per device", color=pal.foreground, size="10pt")
        self.efficiency_model.setPen(pg.mkPen(pal.foreground, width=2, style=Qt.PenStyle.DashLine))
        self.efficiency_measured.setBrush(pg.mkBrush(pal.foreground))
        self.efficiency_measured.setPen(pg.mkPen(pal.background))
        self.efficiency_cursor.setPen(pg.mkPen(pal.cursor, width=1.2, style=Qt.PenStyle.DashLine))
        self.efficiency_legend.setLabelTextColor(pal.foreground)
        self.efficiency_legend.setBrush(fill)
        self.exposed.setPen(pg.mkPen(pal.budget, width=1.2, style=Qt.PenStyle.DashLine))
        self.exposed_label.setColor(pal.budget)
        self.memory_model.setPen(pg.mkPen(pal.foreground, width=1.5, style=Qt.PenStyle.DashLine))
        self.memory_single.setPen(pg.mkPen(pal.muted, width=1.2, style=Qt.PenStyle.DotLine))
        for label, color in (
            (self.memory_model_label, pal.foreground),
            (self.memory_single_label, pal.muted),
            (self.exposed_label, pal.budget),
        ):
            label.setColor(color)
            label.fill = fill
        self.node_line.set_style(pal.muted, 1.0, Qt.PenStyle.DotLine)

    def prepare(self) -> None:
        """The time plot's items of the P that every set of curves draws, ahead of them."""
        self._ensure(CURVE_DEVICES)

    def _ensure(self, devices: Iterable[int]) -> None:
        """The time plot's items for each P in `devices`, made on first use and styled in one
        pass (a restyle goes over every item of both plots)."""
        new = sorted(set(devices) - self._keys)
        for p in new:
            self._keys.add(p)
            key = p_key(p)
            self.time_plot.add(f"model_p{p}", "", Style(key, 1.6, Qt.PenStyle.DashLine))
            self.time_plot.add(
                f"measured_p{p}", "", Style(key, 0, symbol=MEASURED_SYMBOL, line=False)
            )
        if new:
            self._restyle()

    # ------------------------------------------------------------------ data

    def set_data(
        self,
        config: AttentionConfig,
        devices: int,
        curves: RingCurves | None,
        family_runs: dict[int, list[RingRun]],
        singles: list[RunResult],
        runs_here: dict[int, RingRun],
        single_here: RunResult | None,
        topology: Topology,
    ) -> None:
        """Draw everything for the shown (config, P): `family_runs` (ring runs of the family by
        P), `singles` (one-GPU results of the family), `runs_here` (runs at this N by P)."""
        self._show_time(config, curves, family_runs, singles)
        self._show_scaling(config, devices, curves, runs_here, single_here, topology)

    def _show_time(
        self,
        config: AttentionConfig,
        curves: RingCurves | None,
        family_runs: dict[int, list[RingRun]],
        singles: list[RunResult],
    ) -> None:
        """One colour per P: its model as a dashed line (in the legend), its measured points
        as dots (what they are is in the title)."""
        plot = self.time_plot
        ps = set(family_runs) | (set(curves.over_n) if curves is not None else set())
        if singles:
            ps.add(1)
        self._ensure(ps)
        visible: list[str] = []
        kinds: set[str] = set()
        for p in sorted(self._keys):
            model = curves.over_n.get(p, ()) if curves is not None else ()
            plot.set_series(
                f"model_p{p}", [m.config.seq_len for m in model], [m.total_s * 1e3 for m in model]
            )
            plot.labels[f"model_p{p}"] = f"P = {p}"
            points = [(r.config.seq_len, r.total_ms, r.kind) for r in family_runs.get(p, [])]
            if p == 1:
                points += [(s.config.seq_len, s.total_ms, "one GPU") for s in singles]
            plot.set_series(f"measured_p{p}", [x[0] for x in points], [x[1] for x in points])
            plot.labels[f"measured_p{p}"] = ""
            kinds |= {x[2] for x in points}
            if model:
                visible.append(f"model_p{p}")
            if points:
                visible.append(f"measured_p{p}")
        dots = f" · dots: {', '.join(sorted(kinds))}" if kinds else ""
        plot.title = f"Time against N · dashed: model{dots}"
        plot.plotItem.titleLabel.setText(plot.title, color=self._palette.foreground, size="10pt")
        plot.set_visible_items(visible, force=True)
        ns = [n for name in visible for n in plot.series[name][0]]
        plot.set_x_span(min([1024, *ns]), max([1 << 20, *ns]))
        plot.fit_y()
        plot.set_cursor(config.seq_len)

    def _show_scaling(
        self,
        config: AttentionConfig,
        devices: int,
        curves: RingCurves | None,
        runs_here: dict[int, RingRun],
        single_here: RunResult | None,
        topology: Topology,
    ) -> None:
        over_p = curves.over_p if curves is not None else ()
        ps = [m.devices for m in over_p]
        sp = self.scaling_plot
        sp.title = f"Time against P at N = {fmt_int(config.seq_len)}"
        sp.plotItem.titleLabel.setText(sp.title, color=self._palette.foreground, size="10pt")
        sp.set_series("model", ps, [m.total_s * 1e3 for m in over_p])
        sp.labels["model"] = "predicted (model)"
        single = over_p[0].single_s * 1e3 if over_p else None
        sp.set_series("ideal", ps, [single / p for p in ps] if single else [])
        measured = sorted(runs_here.items())
        kinds = ", ".join(sorted({r.kind for _, r in measured}))
        sp.set_series("measured", [p for p, _ in measured], [r.total_ms for _, r in measured])
        sp.labels["measured"] = kinds
        sp.set_visible_items([n for n in ("model", "measured", "ideal") if sp.series[n][0]], True)
        sp.set_x_span(1, 1024)
        sp.cursor.setValue(math.log10(devices))
        sp.fit_y()
        gpn = topology.gpus_per_node
        self.node_line.set(gpn * math.sqrt(2), f"{gpn} per node | {topology.inter.name}")

        base = single_here.total_ms if single_here is not None else None
        eff = [(p, base / (r.total_ms * p)) for p, r in measured if base and r.total_ms]
        self.efficiency = {
            "model": (ps, [m.efficiency for m in over_p]),
            "measured": ([p for p, _ in eff], [e for _, e in eff]),
        }
        xs = [math.log10(p) for p in ps]
        self.efficiency_model.setData(xs, self.efficiency["model"][1])
        self.efficiency_measured.setData([math.log10(p) for p, _ in eff], [e for _, e in eff])
        legend = self.efficiency_legend
        legend.clear()
        if over_p:
            legend.addItem(self.efficiency_model, "model")
        if eff:
            legend.addItem(self.efficiency_measured, f"{kinds} vs one GPU")
        self.efficiency_cursor.setValue(math.log10(devices))
        exposed = curves.exposed_from if curves is not None else None
        self.exposed.setVisible(exposed is not None)
        if exposed is not None:
            self.exposed.setValue(math.log10(exposed))
            self.exposed_label.setFormat(f"transfers exposed from P = {exposed}")
        top = max([1.05, *(e * 1.05 for _, e in eff)])
        self.efficiency_plot.setXRange(0, math.log10(1024), padding=0.06)
        self.efficiency_plot.setYRange(0, top, padding=0)

    def show_memory(self, config: AttentionConfig, devices: int, run: RingRun | None) -> None:
        """Bars per device: measured when the run has them, else the model's, for the drawn
        devices of a summarised ring."""
        model = device_peak_bytes(config, devices)
        one = device_peak_bytes(config, 1)
        measured = run.measurement.device_peak_bytes if run is not None else ()
        if measured:
            drawn = shown_devices(len(measured))
            heights = [measured[d] for d in drawn]
            source = run.kind if run is not None else ""
        else:
            drawn = shown_devices(devices)
            heights = [model] * len(drawn)
            source = "model"
        xs = list(range(len(drawn)))
        pal = self._palette
        color = pal.foreground if source == "model" else p_color(devices, pal.name == "dark")
        self.memory_bars.setOpts(
            x=xs,
            height=heights,
            width=0.7,
            brush=pg.mkBrush(with_alpha(color, 110 if source == "model" else 220)),
            pen=pg.mkPen(color),
        )
        ticks = [(x, str(d)) for x, d in zip(xs, drawn, strict=True)]
        self.memory_plot.getAxis("bottom").setTicks([ticks])
        self.memory_plot.setLabel("bottom", f"device ({source})")
        self.memory_model.setValue(model)
        self.memory_model_label.setFormat(f"model {fmt_bytes_axis(model)}")
        self.memory_single.setValue(one)
        self.memory_single_label.setFormat(f"P = 1: {fmt_bytes_axis(one)}")
        top = max([model, one, *heights])
        self.memory_plot.setXRange(-0.6, len(drawn) - 0.4, padding=0)
        self.memory_plot.setYRange(0, top * 1.12, padding=0)
        self.memory = {
            "devices": tuple(drawn),
            "bytes": tuple(heights),
            "source": source,
            "model": model,
            "one_device": one,
        }
