"""The roofline plot's roofs: one line per roof of the device that judges the results, clipped
to the view, each with its label placed clear of the others and of the data (the exponential
unit's where it has room), once per turn however often the view moved."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QPolygonF

from gpu.model.costmodel import TENSOR, GpuSpec
from gpu.model.roofline import (
    HBM,
    L2,
    MEMORY_ROOFS,
    MMA,
    XU,
    roofs,
)

from ..kit.theme import Palette
from ..plotting.axes import drawable
from ..plotting.label_placement import GAP, first_free, stacked_candidates
from ..plotting.labelled_line import LabelledLine
from ..plotting.metric_plot import MetricPlot
from ..state.units import (
    fmt_rate,
)
from ..work.pacing import before_paint
from .plot_styles import (
    ROOF_LABELS,
    ROOF_STYLES,
    xu_label,
)


def _touches(rect: QRectF, line_y: float) -> bool:
    """Whether `rect` sits against a flat line at scene height `line_y` (GAP above or below)."""
    return abs(rect.bottom() + GAP - line_y) < 0.5 or abs(rect.top() - GAP - line_y) < 0.5


class RoofLines(QObject):
    """The roofs, their labels and the ridge on the roofline plot (module docstring): made
    after the plot's roof series, which they clip and label."""

    #: The plot's size changed while the exponential unit's roof is drawn: the room its label
    #: takes above the roofs is in pixels, so the roofline's range must fit again.
    fitNeeded = Signal()

    def __init__(self, roofline: MetricPlot, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.plot = r = roofline
        #: The ridge point, a vertical line with its intensity.
        self.ridge_line = LabelledLine(r, angle=90, position=0.04, anchors=[(0, 1), (0, 1)])
        self._roofs: dict[str, float] = {}  # memory roofs: B/s
        self._flat_roofs: dict[str, float] = {}  # compute roofs: FLOP/s
        #: The view and roofs the roofs were last clipped to (`clip`).
        self._clipped: tuple | None = None
        #: Each roof's name and peak, written along it (Nsight Compute's way): a roof is the
        #: upper edge of where points can be, so its label never covers one.
        self.labels: dict[str, pg.TextItem] = {}
        for name in ROOF_STYLES:
            diagonal = name in MEMORY_ROOFS
            label = pg.TextItem(
                anchor=(0, 1.25) if diagonal else (0, 0) if name == XU else (1, 1),
                rotateAxis=(1, 1) if diagonal else None,
            )
            label.setVisible(False)
            r.addItem(label, ignoreBounds=True)
            self.labels[name] = label
        #: The labels follow the roofline's view once per turn, however often it moved.
        self._paced_labels = before_paint(self.place_labels, parent=self)
        r.plotItem.vb.sigRangeChanged.connect(self.clip)
        # the exponential unit's label is placed in pixels: again when the plot's size changes
        r.plotItem.vb.sigResized.connect(self._resized)

    @property
    def memory(self) -> dict[str, float]:
        """The memory roofs drawn: bandwidth (B/s) per roof."""
        return dict(self._roofs)

    @property
    def flat(self) -> dict[str, float]:
        """The compute roofs drawn: FLOP/s per roof (the exponential unit's at this shape)."""
        return dict(self._flat_roofs)

    def apply_palette(self, p: Palette) -> None:
        self.ridge_line.set_style(p.muted, 1.0, Qt.PenStyle.DotLine, background=p.background)
        for name, label in self.labels.items():
            label.setColor(p.roof if name in (HBM, L2, TENSOR) else p.muted)

    def draw(self, gpu: GpuSpec | None, head_dim: int) -> None:
        """HBM and L2 roofs up to the tensor cores' peak, and a flat roof per compute unit
        (the exponential unit's in FLOP/s at this shape's 4·d FLOPs per exponential)."""
        if gpu is None:
            return
        r = self.plot
        # the backend's own: a GPU's per instruction family, or this CPU's; a roof a log axis
        # cannot draw is left out (the check refuses such files; this is the point of use)
        peaks = {n: roof for n, roof in roofs(gpu).items() if drawable(roof.peak)}
        if not peaks:
            self._roofs, self._flat_roofs = {}, {}
            return
        d = head_dim
        self._roofs = {n: peaks[n].peak for n in MEMORY_ROOFS if n in peaks}
        self._flat_roofs = {n: p.peak for n, p in peaks.items() if n not in MEMORY_ROOFS}
        for name, roof in peaks.items():
            r.labels[f"roof_{name}"] = ROOF_LABELS.get(name, roof.label.split(" ")[0]) + (
                f" {fmt_rate(roof.peak, roof.unit)}"
            )
        if XU in peaks:
            # one exponential per score, whose two matmuls cost 4·d FLOPs: the roof in FLOP/s
            self._flat_roofs[XU] = peaks[XU].peak * 4 * d
            r.labels[f"roof_{XU}"] = xu_label(peaks[XU].peak)
        if L2 in peaks and peaks[L2].nominal:
            r.labels[f"roof_{L2}"] += " nominal"  # its points' symbol is the key's, not the line's
        self._clipped = None  # the labels may have changed with the same roofs
        self.clip()
        ridge = gpu.ridge_flops_per_byte
        self.ridge_line.set(ridge, f"ridge {ridge:.0f}")

    def clip(self, *_: object) -> None:
        """The roofs drawn within the roofline's view only (an SVG export has no clipping):
        again whenever the view's range changes."""
        if not self._flat_roofs:
            return
        r = self.plot
        (x0, x1), (y0, y1) = r.plotItem.vb.viewRange()
        # A change sets the x and y ranges one after the other, and often to where they were:
        # the roofs are clipped again only where the view or the roofs moved.
        key = (x0, x1, y0, y1, tuple(self._roofs.items()), tuple(self._flat_roofs.items()))
        if key == self._clipped:
            return
        self._clipped = key
        top = math.log10(max(self._flat_roofs.values()))
        for name in MEMORY_ROOFS:
            bandwidth = self._roofs.get(name)
            if bandwidth is None:
                r.set_series(f"roof_{name}", [], [])
                continue
            b = math.log10(bandwidth)  # log y = b + log x
            lo, hi = max(x0, y0 - b), min(x1, top - b, y1 - b)
            xs = [10**lo, 10**hi] if lo < hi else []
            r.set_series(f"roof_{name}", xs, [10 ** (b + x) for x in (lo, hi)][: len(xs)])
        fastest = max(self._roofs.values(), default=0.0)
        for name in ROOF_STYLES:
            value = self._flat_roofs.get(name)
            if value is None or name in MEMORY_ROOFS:
                continue
            v = math.log10(value)
            start = max(x0, v - math.log10(fastest)) if fastest else x0
            inside = y0 <= v <= y1 and start < x1
            r.set_series(
                f"roof_{name}", [10**start, 10**x1] if inside else [], [value] * 2 if inside else []
            )
        self._show_labels()
        self._paced_labels()  # placed once this turn's range changes are over

    def _show_labels(self) -> None:
        """Each roof label's text, shown where its roof is drawn (now: the roofline's fit
        reads the labels' size; their places follow before the next paint)."""
        r = self.plot
        for name, label in self.labels.items():
            text = r.labels.get(f"roof_{name}", "")
            if text != label.toPlainText():
                label.setText(text)
            drawn = bool(r.series.get(f"roof_{name}", ([], []))[0])
            if name != XU or not drawn:  # the exponential unit's is shown where it has room
                label.setVisible(drawn)

    def place_labels(self) -> None:
        """Diagonal roofs: the label along the line near its lower end; flat roofs: above the
        line at its right end (mma.sync's mid-line, just below the wgmma roof). The exponential
        unit's goes last, to the first place free of the other labels and the memory roofs
        (at d = 64 its roof coincides with the tensor cores')."""
        r = self.plot
        self._show_labels()
        for name, label in self.labels.items():
            xs, ys = r.series.get(f"roof_{name}", ([], []))
            if not xs or name == XU:
                continue
            lx, hx = math.log10(xs[0]), math.log10(xs[-1])
            ly = math.log10(ys[0])
            if name in MEMORY_ROOFS:
                x = lx + 0.15 * (hx - lx)
                label.setPos(x, ly + (x - lx))
            elif name == MMA:  # just below the wgmma roof: its label sits mid-line
                label.setPos(lx + 0.8 * (hx - lx), ly)
            else:
                label.setPos(hx, ly)
        self._place_xu_label()

    def _resized(self, *_: object) -> None:
        """The label room above the roofs is in pixels: fit again (unless zoomed), and place
        the exponential unit's label again."""
        if XU in self._flat_roofs and not self.plot.user_zoomed:
            self.fitNeeded.emit()
        self._paced_labels()

    def _place_xu_label(self) -> None:
        """The exponential unit's label at its roof's right end, above the line, else moved
        left past what it would cover, else below the line (and moved left): the first such
        place inside the plot, against its line, that covers no other roof label, no point and
        no memory roof
        (app/plotting/label_placement.py).
        Where a small plot has no such place the label is left out; the roofline's hover
        read-out names the roof."""
        r, label = self.plot, self.labels[XU]
        xs, ys = r.series.get(f"roof_{XU}", ([], []))
        if not xs:
            return
        vb = r.plotItem.vb
        end = vb.mapViewToScene(pg.Point(math.log10(xs[-1]), math.log10(ys[0])))
        others = []
        for name, other in self.labels.items():
            if name != XU and other.isVisible():
                other.updateTransform(force=True)  # the view moved: its shape follows now
                others.append(other.mapToScene(other.boundingRect()))
        lines = []
        for name in MEMORY_ROOFS:
            mx, my = r.series.get(f"roof_{name}", ([], []))
            if len(mx) == 2:
                a, b = (
                    vb.mapViewToScene(pg.Point(math.log10(x), math.log10(y)))
                    for x, y in zip(mx, my, strict=True)
                )
                lines.append((a, b))
        points = QPolygonF(  # the points, mapped in one call: a label never covers one
            [
                QPointF(math.log10(x), math.log10(y))
                for name, (mx, my) in r.series.items()
                if not name.startswith("roof_")
                for x, y in zip(mx, my, strict=True)
                if x > 0 and y > 0
            ]
        )
        for p in vb.mapViewToScene(points):
            others.append(QPolygonF(QRectF(p.x() - 7, p.y() - 7, 14, 14)))
        size = label.textItem.boundingRect()
        candidates = stacked_candidates(end, (size.width(), size.height()), others)
        # Only places against the line (above or below it, moved along it): a label stacked
        # above another reads as floating, or as the other's.
        candidates = [c for c in candidates if _touches(c, end.y())]
        rect = first_free(candidates, vb.sceneBoundingRect(), others, lines)
        label.setVisible(rect is not None)
        if rect is None:
            return
        label.setAnchor((1, 1))
        label.setPos(vb.mapSceneToView(rect.bottomRight()))
        label.updateTransform(force=True)

    def label_rect(self, name: str):  # type: ignore[no-untyped-def]
        """The scene rectangle a roof's label covers now (what the layout test checks)."""
        self.flush_labels()
        label = self.labels[name]
        label.updateTransform(force=True)
        return label.sceneBoundingRect()

    def flush_labels(self) -> None:
        """Place the roof labels now if a range change left them due (exports, tests)."""
        self._paced_labels.flush()

    def headroom(self, top: float) -> float:
        """How far above the top roof (a factor) the roofline's range reaches: 1.5, or room
        for two rows of labels where the exponential unit's roof ties with the top one (at
        d = 64 on Hopper), its label above the tensor cores' (see `_place_xu_label`)."""
        xu = self._flat_roofs.get(XU)
        vb = self.plot.plotItem.vb
        if xu is None or xu < top / 1.5 or vb.height() <= 0:
            return 1.5
        rows = 2 * (self.labels[XU].textItem.boundingRect().height() + 4) + 4
        if rows * 3 > vb.height():
            return 1.5  # too small a plot to give up that much: the hover names the roof
        (_, _), (y0, y1) = vb.viewRange()
        return max(1.5, 10 ** (rows * (y1 - y0) / vb.height()))
