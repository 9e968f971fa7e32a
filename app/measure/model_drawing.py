"""The cost model's curves on the plots: asked for off the GUI thread for the family on screen,
drawn when they arrive (in a turn of their own), with the growth label and, on the roofline,
where each algorithm sits at the current N."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpu.algorithms import NAIVE

from ..state.model.cache import prime
from ..state.model.curves import ModelCurves, model_curves
from ..work.background import in_process


class ModelDrawing:
    """The model curves of the plots (a part of PlotsPanel)."""

    def _request_model(self, warm: Sequence[int] = ()) -> None:
        """Compute the model curves of the current family off the GUI thread."""
        fam, algos, gpu = self._family, self._algorithms, self._time_model_gpu
        if fam is None:
            return
        warm = tuple(warm)
        self.model_worker.submit(
            in_process(model_curves, fam, algos, gpu, warm, self._gpu, self._layers),
            self._paced_model,
            failed=self._model_failed,
        )

    def _model_failed(self, exc: BaseException) -> None:
        fam, algos, gpu, band_gpu = self._family, self._algorithms, self._time_model_gpu, self._gpu
        layers = self._layers
        self.model_worker.submit(
            lambda: model_curves(fam, algos, gpu, (), band_gpu, layers), self._paced_model
        )

    def _draw_model(self, curves: ModelCurves) -> None:
        """Draw a finished set of model curves, all in one step."""
        prime(curves.figures)
        self._model = curves
        plots = {"memory": self.memory, "traffic": self.traffic, "timing": self.timing}
        for (plot, name), (xs, ys) in curves.series.items():
            plots[plot].set_series(name, xs, ys)
        self._place_growth_label()
        self._model_markers()  # those of a shape just worked out
        self._draw_points()
        self._measured_markers()
        if self._references:
            self._show_reference(self._references)
        # Legends and ranges with the curves (and results that waited for them), not a turn
        # later: one repaint shows them all.
        self._update_visibility()
        self.modelDrawn.emit()
        self.flush_visibility()

    def model_coming(self) -> bool:
        """Whether the model curves of the family shown are being worked out (or wait for
        their turn to be drawn)."""
        return not self._model_ready() and (self.model_worker.busy or self._paced_model.pending)

    def _place_growth_label(self, *_: object) -> None:
        """The "×4 per doubling" note just below naive's model curve, from 35 % of the view's
        width (the curve rises to its upper right, the text runs clear of it to the right),
        where the curve is in sight (hidden when naive is not shown)."""
        xs, ys = self.memory.series.get("model_naive", ([], []))
        label = self.growth_label
        shown = bool(xs) and NAIVE in self._algorithms
        if shown:
            (x0, x1), (y0, y1) = self.memory.plotItem.vb.viewRange()
            x = x0 + 0.35 * (x1 - x0)
            lx = [math.log10(v) for v in xs]
            ly = [math.log10(v) for v in ys]
            i = next((k for k in range(1, len(lx)) if lx[k] >= x), None)
            if i is None:
                shown = False
            else:
                t = (x - lx[i - 1]) / ((lx[i] - lx[i - 1]) or 1.0)
                y = ly[i - 1] + t * (ly[i] - ly[i - 1])
                shown = y0 <= y <= y1
                label.setPos(x + 0.03 * (x1 - x0), y)
        label.setVisible(shown)

    def flush_model(self) -> None:
        """Show the newest state and its model curves now (tests, exports)."""
        self.catch_up()
        self._paced_markers.flush()
        self.model_worker.flush()
        self._paced_model.flush()
        self._paced_strip.flush()
        self._paced_visibility.flush()
        self.flush_roof_labels()

    def _draw_bounds(self) -> None:
        """Where the roofline puts each algorithm at the current N (hollow markers on the
        roof that binds): its intensity, and its useful FLOPs over its roofline time."""
        gpu, config = self._gpu, self._config
        if gpu is None or config is None:
            self.roofline.set_series("bounds", [], [])
            return
        xs, ys, keys = [], [], []
        # worked out with the curves (off the GUI thread) unless they are drawn already
        point = self._point(config.seq_len, compute=self._model_ready())
        for a in self._algorithms:
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
        self._keep_markers_in_view()
