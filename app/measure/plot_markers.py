"""The plots' "you are here" markers at the slider's N, and the measured points on the roofline:
the model's (memory, traffic, the roofline's bound), the measurements' (time, achieved FLOP/s
at measured or model intensity). A burst of slider moves in one turn of the event loop (a fast
drag) moves the markers twice, for its first move and its last."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QObject, Signal

from gpu.algorithms import NAIVE
from gpu.model.roofline import L2, MEASURED, roofs

from ..state.model.cache import cost, known
from ..work.pacing import once_per_turn
from .decode_plots import DecodePlots
from .panel_data import PanelData
from .plot_fit import PlotFit, PlotViews
from .plot_styles import ALGOS


class PlotMarkers(QObject):
    """The markers and the roofline's points of what `data` shows (module docstring)."""

    #: The markers moved to the N shown (the strip chart follows).
    moved = Signal()

    def __init__(
        self,
        data: PanelData,
        views: PlotViews,
        decode: DecodePlots,
        fit: PlotFit,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.data = data
        self.memory, self.timing = views.memory, views.timing
        self.traffic, self.roofline = views.traffic, views.roofline
        self.decode = decode
        self.fit = fit
        self._paced = once_per_turn(self.move, parent=self)

    def follow(self) -> None:
        """Move the markers to the N shown: now, or at the end of this turn if they moved in
        it already."""
        self._paced()

    def flush(self) -> None:
        """Move the markers to the N shown now, if due (exports, tests)."""
        self._paced.flush()

    def move(self) -> None:
        """Every marker to the N shown, now."""
        self.model()
        self.measured()
        self.moved.emit()

    def model(self) -> None:
        """The "you are here" markers that show the model (memory, traffic, roofline bound)."""
        d = self.data
        config, algos = d.config, d.algorithms
        if config is None:
            return
        n = config.seq_len
        # Every fused kernel has the same peak (4 matrices + m, l): one marker for all of them.
        fused = [a for a in algos if a != NAIVE]
        model_algos = [a for a in algos if a == NAIVE] + fused[:1]
        # A shape whose model is still being worked out (off the GUI thread) gets its model
        # markers with its curves (the panel's model drawing); the cursor moves now.
        ready = d.model_ready()
        figure = cost if ready else known
        mem = [(c.peak_bytes if (c := figure(config, a)) else None) for a in model_algos]
        self.memory.set_series("current", [n] * len(mem), mem)
        hbm = [(b.l2_aware.hbm_bytes if (b := d.band(config, a, ready)) else None) for a in algos]
        self.traffic.set_series("current", [n] * len(hbm), hbm)
        self.bounds()

    def measured(self) -> None:
        """The "you are here" markers that show measurements (time, achieved FLOP/s)."""
        d = self.data
        config, algos = d.config, d.algorithms
        if config is None:
            return
        n = config.seq_len
        times = [d.by_n[a].get(n) for a in algos]
        self.timing.set_series(
            "current", [n] * len(times), [r.total_ms if r else None for r in times]
        )
        xs, ys, l2x, l2y = [], [], [], []
        has_l2 = d.gpu is not None and L2 in roofs(d.gpu)
        for a in algos:
            res = d.by_n[a].get(n)
            v = d.verdict(res, a) if res is not None else None
            if v is not None and v.intensity and res is not None and res.tflops:
                xs.append(v.intensity)
                ys.append(res.tflops * 1e12)
                if has_l2 and v.l2_intensity:
                    l2x.append(v.l2_intensity)
                    l2y.append(res.tflops * 1e12)
        self.roofline.set_series("current", xs, ys, log_x=True)
        self.decode.markers(n, algos)
        self.fit.keep_markers_in_view()
        self.roofline.set_series("l2_current", l2x, l2y, log_x=True)

    def bounds(self) -> None:
        """Where the roofline puts each algorithm at the current N (hollow markers on the
        roof that binds): its intensity, and its useful FLOPs over its roofline time."""
        d = self.data
        gpu, config = d.gpu, d.config
        if gpu is None or config is None:
            self.roofline.set_series("bounds", [], [])
            return
        xs, ys, keys = [], [], []
        # worked out with the curves (off the GUI thread) unless they are drawn already
        point = d.point(config.seq_len, compute=d.model_ready())
        for a in d.algorithms:
            f = point.algorithms.get(a) if point is not None else None
            if f is None:
                continue
            v = f.verdict
            if not v.intensity or not v.roofline_ms:
                continue
            xs.append(v.intensity)
            ys.append(v.flops / (v.roofline_ms * 1e-3))
            keys.append(a)
        self.roofline.set_colors("bounds", keys)
        self.roofline.set_series("bounds", xs, ys)
        self.fit.keep_markers_in_view()

    def points(self, algorithms: Iterable[str] = ALGOS) -> None:
        """The measured points on the roofline: at measured intensity where the result's bytes
        were counted (filled), at the model's otherwise (hollow), joined in N order. A point
        whose model is still being worked out (off the GUI thread) comes with the curves."""
        d = self.data
        for a in algorithms:
            timed = [r for r in d.measured[a] if not r.oom and r.tflops]
            placed = [(d.verdict(r, a), r) for r in timed] if d.gpu else []
            placed = [(v, r) for v, r in placed if v is not None and v.intensity]
            self.roofline.set_series(
                f"path_{a}", [v.intensity for v, _ in placed], [r.tflops * 1e12 for _, r in placed]
            )
            for source, name in ((True, f"at_measured_{a}"), (False, f"at_model_{a}")):
                pts = [(v, r) for v, r in placed if (v.bytes_source == MEASURED) == source]
                self.roofline.set_series(
                    name, [v.intensity for v, _ in pts], [r.tflops * 1e12 for _, r in pts]
                )
