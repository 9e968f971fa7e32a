"""What each plot shows and the range it fits: the series and legends of the algorithms on screen
(naive's kernels, those of the pass shown, under "Every series"), and ranges that fit the data,
the roofline's labels and the markers until the user zooms."""

from __future__ import annotations

import math

from gpu.algorithms import NAIVE, RING
from gpu.config import BACKWARD, STEP
from gpu.model.backward_cost import NAIVE_BACKWARD_KERNELS
from gpu.model.roofline import (
    XU,
)

from ..plotting.metric_plot import MetricPlot
from ..plotting.plot_items import Style
from .plot_styles import (
    NAIVE_FORWARD_KERNELS,
    NAIVE_KERNELS,
    ROOF_STYLES,
    series_label,
    series_symbol,
)

#: The memory plot's note on naive's model curve: S and P grow as N², a decode step's as N.
#: The roofline shows this many decades below its top roof (the slow kernels' points and the
#: low intensities sit there).
BELOW_TOP_DECADES = 3
#: Pixels kept between a roof's label and its line, above and below the label.
GAP_PX = 2.0
GROWTH_PREFILL = "×4 per doubling of N"
GROWTH_DECODE = "×2 per doubling of N"


class PlotFit:
    """Visibility and ranges of the plots (a part of PlotsPanel)."""

    def _update_visibility(self, force: bool = False) -> None:
        """Legends and y ranges follow at the end of this turn of the event loop: a state
        change, cleared series and new markers arriving together relayout them once."""
        self._relabel = self._relabel or force
        self._paced_visibility()

    def flush_visibility(self) -> None:
        self._paced_markers.flush()
        self._paced_visibility.flush()

    def _naive_kernels(self) -> tuple[str, ...]:
        """Naive's kernels the current pass times, in launch order."""
        pass_ = self._family.pass_ if self._family is not None else "forward"
        if pass_ == STEP:
            return NAIVE_KERNELS
        return NAIVE_BACKWARD_KERNELS if pass_ == BACKWARD else NAIVE_FORWARD_KERNELS

    def _has(self, plot: MetricPlot, name: str) -> bool:
        return bool(plot.series.get(name, ((), ()))[0])

    def _apply_visibility(self) -> None:
        force, self._relabel = self._relabel, False
        algos = self._algorithms
        refs = [
            f"reference_{p}" for p in self._reference_ids if self.timing.series[f"reference_{p}"][0]
        ]
        key = [
            (series_label(a), Style(a, 2.0, symbol=series_symbol(a), symbol_size=8)) for a in algos
        ]
        kernels_shown = NAIVE in algos and self._every  # "Every series" only
        if kernels_shown:  # naive's kernels on the time plot: in their colours, so named here
            key += [
                (f"naive: {k}", self.timing.styles[f"kernel_{k}"]) for k in self._naive_kernels()
            ]
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
        decode = self._family is not None and self._family.is_decode
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
        kernels = [f"kernel_{k}" for k in self._naive_kernels()] if kernels_shown else []
        tim += kernels  # listed whether or not measured yet: the legend stays put
        legend = ["k_measured"]
        if self._time_model_gpu is not None:
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
        known = {**self._roofs, **self._flat_roofs}
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
        growth = GROWTH_DECODE if decode else GROWTH_PREFILL
        if growth != self.growth_label.textItem.toPlainText():
            self.growth_label.setText(growth)
        self._place_growth_label()

    def fit(self) -> None:
        """Re-range every plot to its visible data (after data, not cursor, changes)."""
        self.memory.fit_y(extra=[self._budget] if self._budget else [])
        self.timing.fit_y()
        self.traffic.fit_y()
        self._fit_roofline()

    def _roofline_extent(self) -> tuple[list[float], list[float]]:
        """What the roofline's axes must hold besides its data: the ridge with the roofs that
        meet there (a decade each side along x, three decades below the top roof), and the
        markers of the current N (where the roofline puts each algorithm, and where its
        measurement landed), wherever they are."""
        xs: list[float] = []
        ys: list[float] = []
        gpu = self._gpu
        if gpu is not None:
            ridge = gpu.ridge_flops_per_byte
            top = max(self._flat_roofs.values(), default=0.0) or gpu.top_flops
            xs += [ridge / 30, ridge * 10]
            ys += [top * self._label_headroom(top), top / 10**BELOW_TOP_DECADES]
        for name in ("bounds", "current"):
            mx, my = self.roofline.series.get(name, ((), ()))
            xs += mx
            ys += my
        return xs, ys

    def _label_headroom(self, top: float) -> float:
        """How far above the top roof (a factor) the roofline's range reaches: at least 1.5 and
        a row of label text (the top roof's label sits above its line), or two rows where the
        exponential unit's roof ties with the top one (at d = 64 on Hopper), its label above
        the tensor cores' (RoofLines._place_roof_labels). Worked out for the range the fit
        will give (three decades below the top roof, and the fit's own padding)."""
        xu = self._flat_roofs.get(XU)
        height = self.roofline.plotItem.vb.height()
        if height <= 0:
            return 1.5
        row = self.roof_labels[XU].boundingRect().height() + 2 * GAP_PX
        rows = row if xu is None or xu < top / 1.5 else 2 * row
        if rows * 3 > height:  # too small a plot for two rows: the hover names the second roof
            rows = row
        if rows * 3 > height:
            return 1.5  # too small a plot to give up even that much

        def room_px(decades_above: float) -> float:
            span = BELOW_TOP_DECADES + decades_above
            pad = max(0.08 * span, 0.3)  # MetricPlot's fit pads each end so
            return height * (decades_above + pad) / (span + 2 * pad)

        lo, hi = math.log10(1.5), 3.0
        if room_px(lo) >= rows:
            return 1.5
        for _ in range(30):  # the least headroom that leaves `rows` pixels above the roof
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if room_px(mid) >= rows else (mid, hi)
        return 10**hi

    def _fit_roofline(self) -> None:
        xs, ys = self._roofline_extent()
        self.roofline.fit_xy(xs, ys)

    def _keep_markers_in_view(self) -> None:
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
                    self._fit_roofline()
                    return
