"""What each plot shows and the range it fits: the series and legends of the algorithms on screen
(naive's kernels, those of the pass shown, under "Every series"), and ranges that fit the data,
the roofline's labels and the markers until the user zooms."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QObject

from gpu.algorithms import NAIVE, RING

from ..plotting.labelled_line import LabelledLine
from ..plotting.metric_plot import MetricPlot
from ..plotting.plot_items import Style
from ..plotting.series_key import SeriesKey
from ..work.pacing import own_turn
from .decode_plots import DecodePlots
from .model_drawing import GrowthLabel
from .panel_data import PanelData
from .plot_styles import (
    ROOF_STYLES,
    series_label,
    series_symbol,
)
from .roof_lines import BELOW_TOP_DECADES, RoofLines


@dataclass(frozen=True)
class PlotViews:
    """The four plots whose items and ranges follow what the panel shows."""

    memory: MetricPlot
    timing: MetricPlot
    traffic: MetricPlot
    roofline: MetricPlot


class PlotFit(QObject):
    """Which items each plot shows, its legend and its range (module docstring), for what
    `data` shows; legends and ranges follow in a turn of their own (`update`)."""

    def __init__(
        self,
        data: PanelData,
        views: PlotViews,
        key: SeriesKey,
        decode: DecodePlots,
        roofs: RoofLines,
        budget_line: LabelledLine,
        bands: dict[str, pg.FillBetweenItem],
        growth: GrowthLabel,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.data = data
        self.memory, self.timing = views.memory, views.timing
        self.traffic, self.roofline = views.traffic, views.roofline
        self.key = key
        self.decode = decode
        self.roofs = roofs
        self.budget_line = budget_line
        self.bands = bands
        self.growth = growth
        self._relabel = False
        # Legends and ranges: in a turn of their own (app/work/pacing.py)
        self._paced = own_turn(self.apply, parent=self)
        roofs.fitNeeded.connect(self.fit_roofline)

    def update(self, force: bool = False) -> None:
        """Legends and y ranges follow at the end of this turn of the event loop: a state
        change, cleared series and new markers arriving together relayout them once
        (`force`: the labels changed, the legends are laid out again)."""
        self._relabel = self._relabel or force
        self._paced()

    @property
    def pending(self) -> bool:
        """Whether legends and ranges wait for their turn."""
        return self._paced.pending

    def flush(self) -> None:
        """Legends and ranges now, if due."""
        self._paced.flush()

    def _has(self, plot: MetricPlot, name: str) -> bool:
        return bool(plot.series.get(name, ((), ()))[0])

    def apply(self) -> None:
        """Legends, visible items and ranges of every plot, now."""
        force, self._relabel = self._relabel, False
        d = self.data
        algos = d.algorithms
        refs = [
            f"reference_{p}" for p in d.reference_ids if self.timing.series[f"reference_{p}"][0]
        ]
        key = [
            (series_label(a), Style(a, 2.0, symbol=series_symbol(a), symbol_size=8)) for a in algos
        ]
        kernels_shown = NAIVE in algos and d.every  # "Every series" only
        if kernels_shown:  # naive's kernels on the time plot: in their colours, so named here
            key += [(f"naive: {k}", self.timing.styles[f"kernel_{k}"]) for k in d.naive_kernels()]
        for name in refs:
            style = self.timing.styles[name]
            key.append((self.timing.labels[name], style))
        self.key.set_entries(key)

        m = self.memory
        # The fused kernels' model curve, only under their key entries (not under the ring's:
        # its per-device memory is the Ring tab's).
        tiled_any = any(a not in (NAIVE, RING) for a in algos)
        mem = (["model_naive"] if NAIVE in algos else []) + (["model_tiled"] if tiled_any else [])
        stacks = [n for n in ("stack_naive", "stack_tiled") if self._has(m, n)]
        mem += stacks
        decode = d.is_decode()
        decode_items, decode_legend = self.decode.memory_items() if decode else ([], [])
        mem += decode_items
        mem += [f"measured_{a}" for a in algos] + [f"device_{a}" for a in algos]
        if self._has(m, "oom"):
            mem.append("oom")
        mem.append("current")
        legend = ["k_model", *(["k_stack"] if stacks else []), *decode_legend, "k_pool"]
        if any(self._has(m, f"device_{a}") for a in algos):
            legend.append("k_device")
        if self._has(m, "oom"):
            legend.append("oom")
        if self.budget_line.text:
            legend.append("k_budget")
        m.set_visible_items(mem, force=force, legend=legend)

        t = self.timing
        tim = [f"measured_{a}" for a in algos] + [f"spread_{a}" for a in algos]
        kernels = [f"kernel_{k}" for k in d.naive_kernels()] if kernels_shown else []
        tim += kernels  # listed whether or not measured yet: the legend stays put
        legend = ["k_measured"]
        if d.time_model_gpu is not None:
            tim += [f"roofline_{a}" for a in algos]
            legend.append("k_roofline")
        tim += [*refs, "current"]
        t.set_visible_items(tim, force=force, legend=legend)

        h = self.traffic
        traffic = []
        for a in algos:
            traffic += [f"compulsory_{a}", f"noreuse_{a}", f"model_{a}", f"measured_{a}"]
        for a, fill in self.bands.items():
            fill.setVisible(a in algos and self._has(h, f"noreuse_{a}"))
        legend = ["k_l2"] + (["k_band"] if any(f.isVisible() for f in self.bands.values()) else [])
        if any(self._has(h, f"measured_{a}") for a in algos):
            legend.append("k_measured")
        h.set_visible_items([*traffic, "current"], force=force, legend=legend)
        self.decode.show(algos, force)

        r = self.roofline
        known = {**self.roofs.memory, **self.roofs.flat}
        roof_items = [f"roof_{n}" for n in ROOF_STYLES if n in known]
        points = []
        for a in algos:
            points += [f"path_{a}", f"at_measured_{a}", f"at_model_{a}"]
        legend = []  # the roofs are labelled along their lines
        if any(self._has(r, f"at_measured_{a}") for a in algos):
            legend.append("k_measured")
        if any(self._has(r, f"at_model_{a}") for a in algos):
            legend.append("k_model")
        legend.append("bounds")
        if self._has(r, "l2_current"):
            legend.append("k_l2")
        r.set_visible_items(
            [*roof_items, *points, *refs, "bounds", "l2_current", "current"], force, legend
        )
        self.fit()
        self.growth.follow_pass()

    def fit(self) -> None:
        """Re-range every plot to its visible data (after data, not cursor, changes)."""
        d = self.data
        self.memory.fit_y(extra=[d.budget] if d.budget else [])
        self.timing.fit_y()
        self.traffic.fit_y()
        self.fit_roofline()

    def _roofline_extent(self) -> tuple[list[float], list[float]]:
        """What the roofline's axes must hold besides its data: the ridge with the roofs that
        meet there (a decade each side along x, three decades below the top roof), and the
        markers of the current N (where the roofline puts each algorithm, and where its
        measurement landed), wherever they are."""
        xs: list[float] = []
        ys: list[float] = []
        gpu = self.data.gpu
        if gpu is not None:
            ridge = gpu.ridge_flops_per_byte
            top = max(self.roofs.flat.values(), default=0.0) or gpu.top_flops
            xs += [ridge / 30, ridge * 10]
            ys += [top * self.roofs.headroom(top), top / 10**BELOW_TOP_DECADES]
        for name in ("bounds", "current"):
            mx, my = self.roofline.series.get(name, ((), ()))
            xs += mx
            ys += my
        return xs, ys

    def fit_roofline(self) -> None:
        xs, ys = self._roofline_extent()
        self.roofline.fit_xy(xs, ys)

    def keep_markers_in_view(self) -> None:
        """After a slider move: refit the roofline only when a marker of the new N would fall
        outside its view (a moved marker costs no relayout otherwise)."""
        r = self.roofline
        if r.user_zoomed:
            return
        (x0, x1), (y0, y1) = r.plotItem.vb.viewRange()
        for name in ("bounds", "current"):
            mx, my = r.series.get(name, ((), ()))
            for x, y in zip(mx, my, strict=True):
                lx, ly = math.log10(x), math.log10(y)
                if not (x0 <= lx <= x1 and y0 <= ly <= y1):
                    self.fit_roofline()
                    return
