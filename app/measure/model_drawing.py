"""The cost model's curves on the plots: asked for off the GUI thread for the family on screen,
handed over when they arrive (in a turn of their own); and the growth note the memory plot
writes beside naive's curve."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QObject, Signal

from gpu.algorithms import NAIVE

from ..kit.theme import Palette
from ..plotting.metric_plot import MetricPlot
from ..state.model.curves import model_curves
from ..work.background import LatestOnly, in_process
from ..work.pacing import own_turn
from .panel_data import PanelData

#: The memory plot's note on naive's model curve: S and P grow as N², a decode step's as N.
GROWTH_PREFILL = "×4 per doubling of N"
GROWTH_DECODE = "×2 per doubling of N"


class ModelRequests(QObject):
    """The model curves of the family `data` shows, computed off the GUI thread; only the
    newest set arrives (`arrived`), in a turn of the event loop of its own."""

    #: A finished set of model curves (ModelCurves), to be drawn in one step.
    arrived = Signal(object)

    def __init__(self, data: PanelData, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.data = data
        #: Model curves are computed here, off the GUI thread; only the newest set is drawn.
        self.worker = LatestOnly(self)
        self._paced = own_turn(self.arrived.emit, parent=self)

    def request(self, warm: tuple[int, ...] = ()) -> None:
        """Compute the model curves of the current family off the GUI thread (`warm`: N whose
        costs the slider will ask for)."""
        d = self.data
        if d.family is None:
            return
        self.worker.submit(
            in_process(
                model_curves, d.family, d.algorithms, d.time_model_gpu, warm, d.gpu, d.layers
            ),
            self._paced,
            failed=self._failed,
        )

    def _failed(self, exc: BaseException) -> None:
        d = self.data
        fam, algos, gpu, band_gpu, layers = (
            d.family,
            d.algorithms,
            d.time_model_gpu,
            d.gpu,
            d.layers,
        )
        self.worker.submit(lambda: model_curves(fam, algos, gpu, (), band_gpu, layers), self._paced)

    def coming(self) -> bool:
        """Whether the model curves of the family shown are being worked out (or wait for
        their turn to be drawn)."""
        return not self.data.model_ready() and (self.worker.busy or self._paced.pending)

    def flush(self) -> None:
        """Finish the newest request and hand its curves over now (tests, exports)."""
        self.worker.flush()
        self._paced.flush()


class GrowthLabel:
    """The lesson's first point, said on the memory plot: naive's peak ×4 per doubling of N
    (×2 for a decode step), just below naive's model curve while it is in sight."""

    def __init__(self, memory: MetricPlot, data: PanelData) -> None:
        self.memory = memory
        self.data = data
        self.item = pg.TextItem(GROWTH_PREFILL, anchor=(0, 0))
        self.item.setVisible(False)
        memory.addItem(self.item, ignoreBounds=True)
        memory.plotItem.vb.sigRangeChanged.connect(self.place)

    def apply_palette(self, p: Palette) -> None:
        self.item.setColor(p.color(NAIVE))

    def follow_pass(self) -> None:
        """The note of the pass shown, placed again."""
        growth = GROWTH_DECODE if self.data.is_decode() else GROWTH_PREFILL
        if growth != self.item.textItem.toPlainText():
            self.item.setText(growth)
        self.place()

    def place(self, *_: object) -> None:
        """The note just below naive's model curve, from 35 % of the view's width (the curve
        rises to its upper right, the text runs clear of it to the right), where the curve is
        in sight (hidden when naive is not shown)."""
        xs, ys = self.memory.series.get("model_naive", ([], []))
        label = self.item
        shown = bool(xs) and NAIVE in self.data.algorithms
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
