"""The measured samples of the current point: DRAM bandwidth and tensor-pipe activity over a
kernel's time, as the hardware counters saw them (RunResult.traffic[i].strip).

One algorithm at a time (picked in the header; the first one measured at this N by default),
its kernels one after the other on a common time axis (naive's three kernels in launch order,
each strip trimmed to the kernel's own samples). DRAM GB/s on the left axis, the share of the
tensor pipes' peak on the right (sm__pipe_tensor_cycles_active counts four pipes per SM).
Where nothing was measured the chart is empty and says so. The panel feeds it at the slider's
pace only while some result of the family carries samples, so an unmeasured session costs the
slider nothing here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QSizePolicy, QVBoxLayout, QWidget

from gpu.algorithms import ALGORITHMS
from gpu.results import RunResult

from ..kit.elided_label import ElidedLabel
from ..kit.theme import Palette
from ..plotting.plot_items import with_alpha
from ..plotting.staged import StagedBuild
from ..state.units import fmt_int

#: Gap between two kernels' strips on the time axis, as a share of the total time.
KERNEL_GAP = 0.02
NOT_MEASURED = "not measured"
#: Said in the title when nothing is measured: how to get samples.
HOW_TO_MEASURE = "Measure bytes (CUDA) or a recording made with bench --profile has them"


def strip_series(result: RunResult) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """(t µs, DRAM GB/s, share of the tensor pipes' peak 0..1, [(kernel, t start, t end)]) of
    a result's kernels placed one after the other, in the order they ran. Each kernel's strip
    is trimmed to the kernel (TrafficStrip.kernel_part: not the idle edges of its sampled
    window), and each sample is drawn as a step over its own interval, so a kernel shorter
    than one interval is one step of that interval's width."""
    order = [k.name for k in result.kernel_times] or [t.name for t in result.traffic]
    traffic = [t for name in order if (t := result.kernel_traffic(name)) and t.strip.t_us]
    parts = [(t, t.strip.kernel_part()) for t in traffic]
    widths = [
        (s.t_us[-1] - s.t_us[0]) + t.sample_interval_ns / 1e3 for t, s in parts
    ]  # the span the kept samples cover
    total = sum(widths) or 1.0
    gap = KERNEL_GAP * total if len(parts) > 1 else 0.0
    ts, gbs, active, spans = [], [], [], []
    start = 0.0
    for (t, strip), width in zip(parts, widths, strict=True):
        half = t.sample_interval_ns / 2e3
        t0 = strip.t_us[0] - half
        share = strip.tensor_share
        for x, g, a in zip(strip.t_us, strip.dram_gbs, share, strict=True):
            ts += [start + x - half - t0, start + x + half - t0]
            gbs += [g, g]
            active += [a, a]
        ts.append(np.nan)  # NaN: the curve breaks between kernels
        gbs.append(np.nan)
        active.append(np.nan)
        spans.append((t.name, start, start + width))
        start += width + gap
    return np.asarray(ts), np.asarray(gbs), np.asarray(active), spans


#: The strip chart's objectName (an export of one view may name it).
STRIP_NAME = "trafficStrip"


class TrafficStripChart(QWidget):
    """objectName trafficStrip; `show_point(n, results)` shows the results at N (per algorithm)."""

    collapsedChanged = Signal(bool)

    def __init__(self, parent: QWidget | None = None, staged: bool = False) -> None:
        """`staged`: build nothing yet; `build_steps()` builds it a piece at a time."""
        super().__init__(parent)
        self._staged = StagedBuild(self._construct(), staged)

    def build_steps(self) -> Iterator[None]:
        """The rest of a staged construction, one piece per step."""
        return self._staged.steps

    def _construct(self) -> Iterator[None]:
        self.setObjectName(STRIP_NAME)
        self.setAccessibleName("Measured samples: DRAM bandwidth and tensor-pipe activity")
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        head = QHBoxLayout()
        head.setContentsMargins(8, 0, 8, 0)
        # Its text changes with N: it must never widen (and relayout) the window; a text
        # longer than the strip ends in "…", whole in the tooltip.
        self.title = ElidedLabel()
        self.title.setObjectName("trafficStripTitle")
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        head.addWidget(self.title, 1)
        self.choice = QComboBox()
        self.choice.setObjectName("trafficStripAlgorithm")
        self.choice.setToolTip("Which algorithm's samples to show (those measured at this N).")
        self.choice.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.choice.currentIndexChanged.connect(self._picked)
        head.addWidget(self.choice)
        box.addLayout(head)
        item = pg.PlotItem(enableMenu=False)
        yield
        self.plot = pg.PlotWidget(plotItem=item)
        self.plot.setObjectName("trafficStripPlot")
        pi = self.plot.plotItem
        pi.setMenuEnabled(False)
        pi.hideButtons()
        pi.setMouseEnabled(x=False, y=False)
        pi.setLabel("bottom", "time in the kernel (µs)")
        pi.setLabel("left", "DRAM GB/s")
        pi.showAxis("right")
        pi.setLabel("right", "tensor pipes busy, % of peak")
        pi.getAxis("left").setWidth(62)
        yield
        self.active_vb = pg.ViewBox(enableMenu=False)
        self.active_vb.setMouseEnabled(x=False, y=False)
        pi.scene().addItem(self.active_vb)
        pi.getAxis("right").linkToView(self.active_vb)
        self.active_vb.setXLink(pi.vb)
        pi.vb.sigResized.connect(self._sync_views)
        self.dram = pg.PlotCurveItem()
        self.active = pg.PlotCurveItem()
        pi.addItem(self.dram)
        self.active_vb.addItem(self.active)
        self.note = pg.TextItem(NOT_MEASURED, anchor=(0.5, 0.5))
        pi.vb.addItem(self.note, ignoreBounds=True)
        self.kernel_labels: list[pg.TextItem] = []
        box.addWidget(self.plot, 1)
        self._palette: Palette | None = None
        self._results: dict[str, RunResult] = {}
        self._n: int | None = None
        self._wanted = ""  # the user's pick, kept while it is measured
        self.shown = ""  # the algorithm drawn ('' when none)
        self._show_empty()

    def _sync_views(self) -> None:
        self.active_vb.setGeometry(self.plot.plotItem.vb.sceneBoundingRect())

    def apply_palette(self, p: Palette) -> None:
        self._palette = p
        self.plot.setBackground(p.background)
        pi = self.plot.plotItem
        for axis in ("left", "bottom", "right"):
            ax = pi.getAxis(axis)
            ax.setPen(pg.mkPen(p.muted))
            ax.setTextPen(pg.mkPen(p.foreground))
            pi.setLabel(axis, ax.labelText, color=p.muted)
        self.note.setColor(p.muted)
        for label in self.kernel_labels:
            label.setColor(p.muted)
        self._draw()

    def set_collapsed(self, collapsed: bool) -> None:
        """Only the title line (nothing of the run has samples: the chart would stay empty)."""
        if collapsed == self.plot.isHidden():
            return
        self.plot.setVisible(not collapsed)
        self.collapsedChanged.emit(collapsed)
        self._draw()

    def show_point(self, n: int, results: Mapping[str, RunResult]) -> None:
        """The results at N = `n`, per algorithm (any; those without samples are skipped)."""
        measured = {a: r for a, r in results.items() if any(t.strip.t_us for t in r.traffic)}
        if n == self._n and measured == self._results:
            return
        self._n, self._results = n, measured
        self.choice.blockSignals(True)
        self.choice.clear()
        for a in measured:
            self.choice.addItem(ALGORITHMS[a].label if a in ALGORITHMS else a, a)
        pick = self._wanted if self._wanted in measured else next(iter(measured), "")
        if pick:
            self.choice.setCurrentIndex(self.choice.findData(pick))
        self.choice.blockSignals(False)
        self.choice.setVisible(bool(measured))
        self._draw()

    def _picked(self, *_: object) -> None:
        self._wanted = self.choice.currentData() or ""
        self._draw()

    def _draw(self) -> None:
        a = self.choice.currentData() or ""
        result = self._results.get(a)
        n = f"N = {fmt_int(self._n)}" if self._n else "this point"
        if result is None or self._palette is None:
            where = "this run" if self.plot.isHidden() else n
            self.title.setText(f"Counters at {where}: not measured ({HOW_TO_MEASURE})")
            self._show_empty()
            return
        self.shown = a
        self.title.setText(f"Hardware counters at {n}, over the kernel's time")
        p = self._palette
        color = p.color(a)
        t, gbs, active, spans = strip_series(result)
        self.dram.setData(t, gbs, connect="finite")
        self.dram.setPen(pg.mkPen(color, width=1.8))
        self.dram.setBrush(pg.mkBrush(with_alpha(color, 60)))
        self.dram.setFillLevel(0)
        self.active.setData(t, active * 100, connect="finite")
        self.active.setPen(pg.mkPen(p.foreground, width=1.2, style=Qt.PenStyle.DashLine))
        self.note.setVisible(False)
        top = float(np.nanmax(gbs)) if np.isfinite(gbs).any() else 1.0
        end = float(np.nanmax(t)) if np.isfinite(t).any() else 1.0
        self.plot.plotItem.vb.setRange(xRange=(0, end), yRange=(0, top * 1.1 or 1), padding=0.02)
        self.active_vb.setRange(yRange=(0, 105), padding=0)
        self._label_kernels(spans, top)

    def _label_kernels(self, spans: list, top: float) -> None:
        while len(self.kernel_labels) < len(spans):
            label = pg.TextItem(anchor=(0, 0))
            self.plot.plotItem.vb.addItem(label, ignoreBounds=True)
            self.kernel_labels.append(label)
        # A name is shown where it fits before the next kernel starts (a training step's
        # short kernels would print over each other); every name is in the tooltip.
        px = self.plot.plotItem.vb.viewPixelSize()[0] or 0.0
        starts = [t0 for _, t0, _ in spans[1:]] + [float("inf")]
        for label, (name, t0, _), nxt in zip(self.kernel_labels, spans, starts, strict=False):
            label.setText(name)
            label.setColor(self._palette.muted if self._palette else "#888")
            label.setPos(t0, top * 1.08)
            room = (nxt - t0) / px if px > 0 else float("inf")
            fits = room >= label.boundingRect().width() + 2
            label.setVisible(len(spans) > 1 and fits)
        self.plot.setToolTip(
            "Kernels, in order: " + ", ".join(name for name, _, _ in spans) if spans else ""
        )
        for label in self.kernel_labels[len(spans) :]:
            label.setVisible(False)

    def _show_empty(self) -> None:
        self.shown = ""
        self.dram.setData([], [])
        self.active.setData([], [])
        for label in self.kernel_labels:
            label.setVisible(False)
        self.plot.plotItem.vb.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
        self.active_vb.setRange(yRange=(0, 100), padding=0)
        self.note.setPos(0.5, 0.5)
        self.note.setVisible(True)

    def is_empty(self) -> bool:
        return not self.shown
