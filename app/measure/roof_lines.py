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

#: The roofline shows this many decades below its top roof (the slow kernels' points and the
#: low intensities sit there).
BELOW_TOP_DECADES = 3
#: Pixels kept between a roof's label and its line, above and below the label.
GAP_PX = 2.0
#: Where each roof's label hangs from its point (pyqtgraph anchors). Roofs a short way apart
#: (L2 and HBM, a third of a decade; wgmma and mma.sync, a fifth) would stack their labels
#: over each other's line: the upper one's label sits above its line, the lower one's below
#: its own, where no point of theirs is (HBM's at the low intensities left of every kernel,
#: mma.sync's left of the fused kernels' points). The exponential unit's is placed in pixels.
ROOF_LABEL_ANCHORS = {L2: (0, 1.25), HBM: (0, -0.25), MMA: (1, 0), XU: (0, 0)}
#: The order the roofs' labels are placed in, each clear of those before it: what the lesson
#: needs most first (the tensor cores' and HBM's, the two that judge the lesson's kernels).
ROOF_LABEL_ORDER = ("tensor", HBM, "fp32", L2, MMA, XU)
#: Where along a memory roof (share of its drawn length from its lower end) its label is tried.
DIAGONAL_PLACES = (0.12, 0.04, 0.22, 0.32, 0.45, 0.6)


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
                anchor=ROOF_LABEL_ANCHORS.get(name, (1, 1)), rotateAxis=(1, 1) if diagonal else None
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
        """Every roof's label against its own line, inside the data area and clear of the labels
        placed before it, in order of what the lesson needs most: the
        memory roofs along their lines near their lower end (above the line, else below it,
        a few places along it), then the flat roofs above or below their right end, moved
        left past what they would cover (app/plotting/label_placement.py); the exponential
        unit's, last, clear of the points too. Roofs a short way
        apart (L2 and HBM, wgmma and mma.sync) would otherwise stack their labels over each
        other. A label with no free place is left out: the roofline's hover read-out names
        its roof."""
        r = self.plot
        self._show_labels()
        box = r.plotItem.vb.sceneBoundingRect()
        placed: list[QPolygonF] = []
        points = self._point_boxes()
        for name in ROOF_LABEL_ORDER:
            label = self.labels.get(name)
            if label is None:
                continue
            xs, ys = r.series.get(f"roof_{name}", ([], []))
            if not xs or not label.toPlainText():
                label.setVisible(False)
                continue
            # The roofs' labels sit on their lines, where points may touch them from below;
            # the exponential unit's, placed last, keeps clear of the points too.
            obstacles = placed + points if name == XU else placed
            if name in MEMORY_ROOFS:  # clear of the points where it can be, else over them
                shape = self._place_diagonal(label, xs, ys, box, (placed + points, placed))
            else:
                shape = self._place_flat(label, xs, ys, box, obstacles)
            label.setVisible(shape is not None)
            if shape is not None:
                placed.append(shape)

    def _resized(self, *_: object) -> None:
        """The label room above the roofs is in pixels: fit again (unless zoomed), and place
        the labels again."""
        if XU in self._flat_roofs and not self.plot.user_zoomed:
            self.fitNeeded.emit()
        self._paced_labels()

    def _point_boxes(self) -> list[QPolygonF]:
        """A 14-pixel square around every point of the roofline (a label never covers one)."""
        r = self.plot
        points = QPolygonF(  # mapped in one call
            [
                QPointF(math.log10(x), math.log10(y))
                for name, (mx, my) in r.series.items()
                if not name.startswith("roof_")
                for x, y in zip(mx, my, strict=True)
                if x > 0 and y > 0
            ]
        )
        return [
            QPolygonF(QRectF(p.x() - 7, p.y() - 7, 14, 14))
            for p in r.plotItem.vb.mapViewToScene(points)
        ]

    def _place_diagonal(self, label, xs, ys, box: QRectF, obstacle_sets):  # type: ignore[no-untyped-def]
        """A memory roof's label along its line: the first of a few places near its lower end,
        on one side of the line, then on the other, that is inside `box` and clear of the
        first of `obstacle_sets`, else of the next; None where none is. The label keeps its
        size and angle in pixels wherever it sits, so its shape is laid out once per side and
        moved to each place (one transform per side, not one per place tried)."""
        vb = self.plot.plotItem.vb
        lx, hx = math.log10(xs[0]), math.log10(xs[-1])
        ly = math.log10(ys[0])
        places = [lx + share * (hx - lx) for share in DIAGONAL_PLACES]
        scene = [vb.mapViewToScene(pg.Point(x, ly + (x - lx))) for x in places]
        # HBM's lies below L2's, a third of a decade apart: HBM's label below its line first,
        # L2's above its own, so the two never stack.
        above, below = (0, 1.25), (0, -0.25)
        sides = (below, above) if label is self.labels.get(HBM) else (above, below)
        shapes = {}
        for anchor in sides:
            label.setAnchor(anchor)
            label.setPos(places[0], ly + (places[0] - lx))
            label.updateTransform(force=True)
            first = label.mapToScene(label.boundingRect())
            shapes[anchor] = [first.translated(p - scene[0]) for p in scene]
        for placed in obstacle_sets:
            for anchor in sides:
                for x, shape in zip(places, shapes[anchor], strict=True):
                    if not box.contains(shape.boundingRect()):
                        continue
                    if not any(shape.intersects(other) for other in placed):
                        label.setAnchor(anchor)
                        label.setPos(x, ly + (x - lx))
                        label.updateTransform(force=True)
                        return shape
        return None

    def _place_flat(self, label, xs, ys, box: QRectF, placed: list[QPolygonF]):  # type: ignore[no-untyped-def]
        """A compute roof's label against its line at its right end, above it or below it,
        moved left past what it would cover; None where no such place is free."""
        r = self.plot
        vb = r.plotItem.vb
        end = vb.mapViewToScene(pg.Point(math.log10(xs[-1]), math.log10(ys[0])))
        lines = []
        for name in MEMORY_ROOFS:
            mx, my = r.series.get(f"roof_{name}", ([], []))
            if len(mx) == 2:
                a, b = (
                    vb.mapViewToScene(pg.Point(math.log10(x), math.log10(y)))
                    for x, y in zip(mx, my, strict=True)
                )
                lines.append((a, b))
        size = label.textItem.boundingRect()
        candidates = stacked_candidates(end, (size.width(), size.height()), placed)
        # Only places against the line (above or below it, moved along it): a label stacked
        # above another reads as floating, or as the other's.
        candidates = [c for c in candidates if _touches(c, end.y())]
        rect = first_free(candidates, box, placed, lines)
        if rect is None:
            return None
        label.setAnchor((1, 1))
        label.setPos(vb.mapSceneToView(rect.bottomRight()))
        label.updateTransform(force=True)
        return QPolygonF(rect)

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
        """How far above the top roof (a factor) the roofline's range reaches: at least 1.5 and
        a row of label text (the top roof's label sits above its line), or two rows where the
        exponential unit's roof ties with the top one (at d = 64 on Hopper), its label above
        the tensor cores' (`place_labels`). Worked out for the range the fit will give
        (BELOW_TOP_DECADES below the top roof, and the fit's own padding)."""
        xu = self._flat_roofs.get(XU)
        height = self.plot.plotItem.vb.height()
        if height <= 0:
            return 1.5
        row = self.labels[XU].boundingRect().height() + 2 * GAP_PX
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
