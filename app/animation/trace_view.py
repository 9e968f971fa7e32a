"""`TraceView`: what the hardware did, block by block, SM by SM.

One lane per SM (132 on the H200) and every thread block as a bar where and when it ran,
coloured by wave (the how-manieth block its SM slot ran), with the block's waits for K/V tiles
darker; above the lanes, the number of blocks running over time shows the waves and the tail.
Kernel-level traces (naive: cuBLAS cannot be instrumented) get one lane per kernel instead.
A warp-specialized kernel's blocks split into one sub-lane per warp role (the producer's copy
issues, each consumer's GEMM turns and softmax), so the real overlap shows where blocks are
tall enough; the selected block's strip (block_strip.py) shows it at full size.

Painting: everything static (lanes, every block and its phases, axes, legend) is drawn once per
(size, trace) into a pixmap; a frame draws that pixmap plus the selection, hover and replay
cursor, so replaying or hovering stays cheap whatever the block count.
"""

from __future__ import annotations

import math
import time
from collections import deque

import numpy as np
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QImage,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
    QPixmap,
    QPolygonF,
)
from PySide6.QtWidgets import (
    QSizePolicy,
    QWidget,
)

from app.state.units import fmt_bytes, fmt_ns
from gpu.files.trace import (
    BLOCK_LEVEL,
    KERNEL_LEVEL,
    Trace,
    TraceLayout,
)
from gpu.model.costmodel import algorithm_cost

from ..kit.plain_text import tooltip
from ..state.animation.warp_roles import (
    GEMM,
    ISSUE,
    SOFTMAX,
)
from ..work.background import LatestOnly
from .colors import DARK, AnimColors
from .trace_image import PreparedTrace, TraceFacts, blocks_image, prepare_trace
from .trace_style import KERNEL_CAPTIONS, nice_step, query_tile_rows

#: A trace of at most this many blocks with no image of its blocks yet is drawn in the paint
#: itself (a few milliseconds); a larger one on a worker thread.
DRAW_HERE_BLOCKS = 20_000


class TraceView(QWidget):
    """SM lanes (or kernel lanes) with every block where and when it ran."""

    blockSelected = Signal(int)  # a BlockTrace.block

    GUTTER = 58.0
    HEADER = 22.0
    OCC = 40.0
    AXIS = 22.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("traceView")
        self.setMouseTracking(True)
        self.setMinimumSize(480, 320)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent, True)
        self.trace: Trace | None = None
        self.lay: TraceLayout | None = None
        self.facts: TraceFacts | None = None
        self._span_ns = 1.0
        self._phases: dict[str, np.ndarray] | None = None
        self.selected: int | None = None  # index into trace.blocks
        self.hovered: int | None = None
        self.cursor_ns: int | None = None
        #: (label, t_ns): other traces' end times drawn on this one's axis, for comparison
        self.references: list[tuple[str, int]] = []
        self._bg: QPixmap | None = None
        self._bg_key: tuple | None = None
        self.painted_blocks = 0
        self.paint_ms: deque[float] = deque(maxlen=1024)
        self.f_small = QFont("DejaVu Sans", 8)
        self.f_norm = QFont("DejaVu Sans", 9)
        self.f_bold = QFont("DejaVu Sans", 9, QFont.Weight.Bold)
        self.c: AnimColors = DARK
        self._roles: dict[str, np.ndarray] | None = None
        #: ((trace id, colours, width, height), image) of the lanes' blocks (blocks_image)
        self._blocks: tuple[tuple, QImage] | None = None
        self._blocks_wanted: tuple | None = None
        self.renderer = LatestOnly(self)

    def sizeHint(self) -> QSize:
        return QSize(1200, 560)

    def set_colors(self, colors: AnimColors) -> None:
        if colors != self.c:
            self.c = colors
            self._bg_key = None
            self.update()

    def _stripe(self) -> QColor:
        c = QColor(self.c.text)
        c.setAlpha(10)
        return c

    def _veil(self) -> QColor:
        c = QColor(self.c.bg)
        c.setAlpha(220)
        return c

    def _hover(self) -> QColor:
        c = QColor(self.c.text)
        c.setAlpha(160)
        return c

    # ---- inputs

    def set_trace(self, trace: Trace | None, prepared: PreparedTrace | None = None) -> None:
        """Show `trace`, as `prepared` (prepare_trace, made off the GUI thread: a large trace
        must come prepared; a small one is prepared here if not)."""
        if prepared is not None and prepared.trace is not trace:
            prepared = None
        if prepared is None and trace is not None:
            prepared = prepare_trace(trace)
        self.trace = trace
        self.lay = prepared.lay if prepared is not None else None
        self.facts = prepared.facts if prepared is not None else None
        self._span_ns = self.facts.end_ns if self.facts is not None else 1.0
        self._blocks = self._blocks_wanted = None
        self._phases = prepared.phases if prepared is not None else None
        self._roles = prepared.roles if prepared is not None else None
        if prepared is not None and prepared.image is not None:
            self._blocks = ((id(trace), *prepared.image_key), prepared.image)
        self.selected = self.hovered = None
        self.cursor_ns = None
        self.painted_blocks = 0
        self._bg_key = None
        self.update()

    def set_references(self, refs: list[tuple[str, int]]) -> None:
        self.references = list(refs)
        self._bg_key = None
        self.update()

    def select(self, block: int | None) -> None:
        facts = self.facts
        self.selected = None if block is None or facts is None else facts.index_of(block)
        self.update()

    def set_cursor(self, t_ns: int | None) -> None:
        self.cursor_ns = t_ns
        self.update()

    # ---- geometry (public for tests and tooltips)

    def lane_count(self) -> int:
        return 0 if self.lay is None else self.lay.lanes

    def lanes_rect(self) -> QRectF:
        top = self.HEADER + self.OCC + 8
        return QRectF(
            self.GUTTER, top, self.width() - self.GUTTER - 12, self.height() - top - self.AXIS
        )

    def _lane_h(self) -> float:
        return self.lanes_rect().height() / max(1, self.lane_count())

    def lane_rect(self, lane: int) -> QRectF:
        r = self.lanes_rect()
        h = self._lane_h()
        return QRectF(r.x(), r.y() + lane * h, r.width(), h)

    def _span(self) -> float:
        return self._span_ns

    def x_of(self, t_ns: float) -> float:
        r = self.lanes_rect()
        return r.x() + r.width() * t_ns / self._span()

    def t_of(self, x: float) -> float:
        r = self.lanes_rect()
        return (x - r.x()) / max(1.0, r.width()) * self._span()

    def _bar_geometry(self) -> tuple[float, float, float]:
        """(lane height, slot height, inset) for the current size."""
        lay = self.lay
        assert lay is not None
        h = self._lane_h()
        if self.trace is not None and self.trace.level == KERNEL_LEVEL:
            bar = min(h * 0.7, 46.0)
            return h, bar, (h - bar) / 2
        gap = 1.0 if h >= 4 else 0.0
        return h, (h - gap) / max(1, lay.slots), gap / 2

    def block_rect(self, block: int) -> QRectF:
        k = self.facts.index_of(block) if self.facts is not None else None
        if k is None:
            raise KeyError(block)
        return self._rect_of(k)

    def _rect_of(self, k: int) -> QRectF:
        lay = self.lay
        assert lay is not None
        _h, slot_h, inset = self._bar_geometry()
        lane = self.lane_rect(int(lay.lane[k]))
        y = lane.y() + inset + int(lay.slot[k]) * slot_h
        x0, x1 = self.x_of(float(lay.start[k])), self.x_of(float(lay.end[k]))
        return QRectF(x0, y, max(1.0, x1 - x0), max(1.0, slot_h))

    def block_at(self, pos: QPointF) -> int | None:
        """Index into trace.blocks of the block drawn at `pos` (a few pixels of slack)."""
        lay = self.lay
        if lay is None or not self.lanes_rect().contains(pos):
            return None
        h, slot_h, inset = self._bar_geometry()
        r = self.lanes_rect()
        lane = int((pos.y() - r.y()) // h)
        slot = int((pos.y() - r.y() - lane * h - inset) // max(1e-9, slot_h))
        slot = min(max(slot, 0), lay.slots - 1)
        t = self.t_of(pos.x())
        slack = 3 * self._span() / max(1.0, r.width())
        cand = np.flatnonzero(
            (lay.lane == lane)
            & (lay.slot == slot)
            & (lay.start - slack <= t)
            & (lay.end + slack >= t)
        )
        if cand.size == 0:
            return None
        mid = (lay.start[cand] + lay.end[cand]) / 2
        return int(cand[np.argmin(np.abs(mid - t))])

    # ---- mouse

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        k = self.block_at(event.position())
        if k != self.hovered:
            self.hovered = k
            self.setToolTip(tooltip(self._tooltip(k) if k is not None else ""))
            self.update()
        super().mouseMoveEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.trace is not None:
            k = self.block_at(event.position())
            if k is not None:
                self.selected = k
                self.update()
                self.blockSelected.emit(self.trace.blocks[k].block)
        super().mousePressEvent(event)

    def leaveEvent(self, event) -> None:
        self.hovered = None
        self.update()
        super().leaveEvent(event)

    def _tooltip(self, k: int) -> str:
        assert self.trace is not None and self.lay is not None
        b = self.trace.blocks[k]
        if self.trace.level == KERNEL_LEVEL:
            return (
                f"{b.kernel}: {fmt_ns(b.start_ns)} → {fmt_ns(b.end_ns)} ({fmt_ns(b.duration_ns)})"
            )
        q_tiles = max(1, math.ceil(self.trace.config.seq_len / query_tile_rows(self.trace)))
        tiles = sum(1 for p in b.phases if p[0] == "load_K_j")
        return (
            f"block {b.block}: query tile {b.query_tile}, head {b.block // q_tiles}\n"
            f"SM {b.sm}, slot {int(self.lay.slot[k])}, wave {int(self.lay.wave[k]) + 1}\n"
            f"{fmt_ns(b.start_ns)} → {fmt_ns(b.end_ns)} ({fmt_ns(b.duration_ns)}), "
            f"{tiles} K/V tiles traced\nclick to replay its steps"
        )

    # ---- painting

    def paintEvent(self, event: QPaintEvent) -> None:
        t0 = time.perf_counter()
        p = QPainter(self)
        if self.trace is None or self.lay is None:
            p.fillRect(self.rect(), self.c.bg)
            p.setPen(self.c.dim)
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "no trace loaded")
            p.end()
            return
        key = (self.width(), self.height(), self.devicePixelRatioF(), id(self.trace), self.c)
        if key != self._bg_key or self._bg is None:
            self._bg_key = key
            self._bg = self._paint_background()
        p.drawPixmap(0, 0, self._bg)
        self._paint_overlay(p)
        p.end()
        self.paint_ms.append((time.perf_counter() - t0) * 1e3)

    def _paint_background(self) -> QPixmap:
        trace, lay = self.trace, self.lay
        assert trace is not None and lay is not None
        dpr = self.devicePixelRatioF()
        pm = QPixmap(int(self.width() * dpr), int(self.height() * dpr))
        pm.setDevicePixelRatio(dpr)
        pm.fill(self.c.bg)
        p = QPainter(pm)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        lanes = self.lanes_rect()
        p.fillRect(lanes, self.c.panel)
        self._paint_lane_labels(p)
        if trace.level == KERNEL_LEVEL:
            self._paint_kernels(p)
        else:
            self._paint_blocks(p)
            self._paint_occupancy(p)
        self._paint_axis(p)
        self._paint_references(p)
        self._paint_legend(p)
        p.setPen(QPen(self.c.panel_edge, 1))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(lanes)
        p.end()
        return pm

    def _paint_lane_labels(self, p: QPainter) -> None:
        assert self.trace is not None
        p.setFont(self.f_small)
        n = self.lane_count()
        h = self._lane_h()
        if self.trace.level == KERNEL_LEVEL:
            p.setFont(self.f_bold)
            for i, name in enumerate(self.trace.lane_names):
                r = self.lane_rect(i)
                if i % 2:
                    p.fillRect(r, self._stripe())
                p.setPen(self.c.text)
                p.drawText(
                    QRectF(r.x() + 6, r.y() + 3, r.width() - 12, 16),
                    Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                    f"kernel {i + 1}: {name}",
                )
            return
        every = max(1, math.ceil(12 / max(h, 1e-3)))  # a label at least every 12 px
        every = next(s for s in (1, 2, 5, 10, 11, 12, 20, 22, 33, 44, 66, n) if s >= every)
        stripe = self._stripe()
        for i in range(n):
            r = self.lane_rect(i)
            if i % 2:
                p.fillRect(r, stripe)
            if i % every == 0:
                p.setPen(self.c.dim)
                p.drawText(
                    QRectF(2, r.y() - 5 + h / 2, self.GUTTER - 6, 10),
                    Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                    f"SM {i}",
                )

    def _paint_blocks(self, p: QPainter) -> None:
        """Every block (and its phases or roles) from an image of the lanes: rendered once per
        size and colours on a worker thread (the trace panel's loader, or this view's own on a
        resize; a stale image is stretched meanwhile). Only a small trace with no image at all
        is rendered here; a large one says it is being drawn until its image comes."""
        trace, lay = self.trace, self.lay
        assert trace is not None and lay is not None
        lanes = self.lanes_rect()
        w, h = max(1, round(lanes.width())), max(1, round(lanes.height()))
        key = (id(trace), self.c, w, h)
        mine = self._blocks is not None and self._blocks[0][:2] == (id(trace), self.c)
        if not mine and len(trace.blocks) <= DRAW_HERE_BLOCKS:
            self._blocks = (key, self._render_blocks(w, h))  # no image of this trace yet
        elif self._blocks is None or self._blocks[0] != key:
            self._request_blocks(w, h)
        if self._blocks is not None and self._blocks[0][0] == id(trace):
            p.drawImage(lanes, self._blocks[1])
            self.painted_blocks = len(trace.blocks)
        else:
            p.setPen(self.c.dim)
            p.setFont(self.f_norm)
            p.drawText(
                lanes, Qt.AlignmentFlag.AlignCenter, f"drawing {len(trace.blocks):,} blocks…"
            )

    def _render_blocks(self, w: int, h: int) -> QImage:
        assert self.trace is not None and self.lay is not None and self._phases is not None
        return blocks_image(self.trace, self.lay, self._phases, self._roles, self.c, w, h)

    def _request_blocks(self, w: int, h: int) -> None:
        trace, lay, phases, roles, colors = self.trace, self.lay, self._phases, self._roles, self.c
        assert trace is not None and lay is not None and phases is not None
        key = (id(trace), colors, w, h)
        if self._blocks_wanted == key:
            return
        self._blocks_wanted = key

        def apply(image: QImage) -> None:
            if self.trace is trace and self.c == colors:
                self._blocks = (key, image)
                self._bg_key = None
                self.update()

        self.renderer.submit(lambda: blocks_image(trace, lay, phases, roles, colors, w, h), apply)

    def _paint_occupancy(self, p: QPainter) -> None:
        trace, lay = self.trace, self.lay
        assert trace is not None and lay is not None
        lanes = self.lanes_rect()
        box = QRectF(lanes.x(), self.HEADER + 4, lanes.width(), self.OCC - 4)
        p.fillRect(box, self.c.hbm_panel)
        bins = max(16, int(box.width() / 2))
        facts = self.facts
        assert facts is not None
        busy = facts.occupancy.per_bin(bins)
        cap = float(lay.lanes * lay.slots)
        pts = [QPointF(box.x(), box.bottom())]
        for i, v in enumerate(busy):
            x = box.x() + box.width() * (i + 0.5) / bins
            pts.append(QPointF(x, box.bottom() - box.height() * min(1.0, v / cap)))
        pts.append(QPointF(box.right(), box.bottom()))
        fill = QColor(self.c.waves[0])
        fill.setAlpha(120)
        p.setPen(QPen(self.c.waves[0].lighter(130), 1))
        p.setBrush(fill)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.drawPolygon(QPolygonF(pts))
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        # wave starts: the median start of each wave's blocks; a wave whose mark would touch the
        # last one drawn is left out (hundreds of waves cannot each have a line and a label)
        p.setFont(self.f_small)
        fm = QFontMetrics(self.f_small)
        next_x = -math.inf
        for w, (size, start) in enumerate(zip(facts.wave_sizes, facts.wave_starts, strict=True)):
            x = self.x_of(float(start))
            if size == 0 or x < next_x:
                continue
            text = f"wave {w + 1}: {int(size)} blocks"
            next_x = x + fm.horizontalAdvance(text) + 12
            p.setPen(QPen(QColor(self.c.wave(w)).lighter(120), 1, Qt.PenStyle.DashLine))
            p.drawLine(QPointF(x, box.y()), QPointF(x, box.bottom()))
            p.setPen(self.c.text)
            p.drawText(QPointF(x + 4, box.y() + 11), text)
        p.setPen(self.c.dim)
        p.drawText(
            QRectF(2, box.y(), self.GUTTER - 6, box.height()),
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
            f"running\n(max {int(cap)})",
        )

    def _paint_kernels(self, p: QPainter) -> None:
        trace = self.trace
        assert trace is not None
        cost = {k.name: k for k in algorithm_cost(trace.config, trace.algorithm).kernels}
        self.painted_blocks = 0
        for k, b in enumerate(trace.blocks):
            r = self._rect_of(k)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(self.c.kernel.get(b.kernel, self.c.compute))
            p.drawRect(r)
            self.painted_blocks += 1
            kc = cost.get(b.kernel)
            moved = (
                f" · model: reads {fmt_bytes(kc.bytes_read)}, writes {fmt_bytes(kc.bytes_written)}"
                if kc
                else ""
            )
            text = f"{KERNEL_CAPTIONS.get(b.kernel, b.kernel)} · {fmt_ns(b.duration_ns)}{moved}"
            p.setFont(self.f_norm)
            fm = QFontMetrics(self.f_norm)
            lane = self.lane_rect(int(self.lay.lane[k])) if self.lay is not None else r
            if fm.horizontalAdvance(text) + 12 < r.width():
                p.setPen(self.c.label_on_fill)
                p.drawText(r.adjusted(6, 0, -4, 0), Qt.AlignmentFlag.AlignVCenter, text)
            else:
                p.setPen(self.c.text)
                below = QRectF(lane.x() + 4, r.bottom() + 2, lane.width() - 8, 16)
                p.drawText(below, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, text)
        lanes = self.lanes_rect()
        p.setFont(self.f_small)
        p.setPen(self.c.dim)
        p.drawText(
            QRectF(lanes.x() + 6, self.HEADER + 4, lanes.width() - 12, self.OCC),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter | Qt.TextFlag.TextWordWrap,
            "kernel-level trace: CUDA events around each of naive's three kernels. cuBLAS's "
            "GEMMs cannot be instrumented, so naive gets one lane per kernel, not one per SM; "
            "every kernel spreads over all SMs. S and P (N×N each) make the middle kernel the "
            "longest although it does no matrix math.",
        )

    def _paint_references(self, p: QPainter) -> None:
        """Other traces' end times (same config, other algorithm) on this time axis."""
        lanes = self.lanes_rect()
        span = self._span()
        p.setFont(self.f_bold)
        fm = QFontMetrics(self.f_bold)
        y = lanes.bottom() - 6
        for k, (label, t) in enumerate(sorted(self.references, key=lambda r: r[1])):
            yy = y - 16 * k
            if t <= span:
                x = self.x_of(t)
                p.setPen(QPen(self.c.warn, 1.5, Qt.PenStyle.DashLine))
                p.drawLine(QPointF(x, lanes.y()), QPointF(x, lanes.bottom()))
                text = f"{label} ends: {fmt_ns(t)}"
                w = fm.horizontalAdvance(text) + 8
                box = QRectF(x + 4, yy - 13, w, 15)
                if box.right() > lanes.right():
                    box.moveRight(x - 4)
            else:
                text = f"{label}: {fmt_ns(t)} →"
                w = fm.horizontalAdvance(text) + 8
                box = QRectF(lanes.right() - w - 4, yy - 13, w, 15)
            p.fillRect(box, self._veil())
            p.setPen(self.c.warn)
            p.drawText(box, Qt.AlignmentFlag.AlignCenter, text)

    def _paint_axis(self, p: QPainter) -> None:
        lanes = self.lanes_rect()
        span = self._span()
        step = nice_step(span, max(2, int(lanes.width() / 110)))
        p.setFont(self.f_small)
        y = lanes.bottom()
        t = 0.0
        grid = self.c.grid
        while t <= span + 1e-9:
            x = self.x_of(t)
            p.setPen(QPen(grid, 1))
            p.drawLine(QPointF(x, lanes.y()), QPointF(x, y))
            p.setPen(self.c.dim)
            p.drawLine(QPointF(x, y), QPointF(x, y + 4))
            p.drawText(QRectF(x - 40, y + 4, 80, 14), Qt.AlignmentFlag.AlignHCenter, fmt_ns(t))
            t += step

    def _paint_legend(self, p: QPainter) -> None:
        trace, lay = self.trace, self.lay
        assert trace is not None and lay is not None
        p.setFont(self.f_small)
        x = self.GUTTER
        y = 4.0
        items: list[tuple[QColor, str]] = []
        if trace.level == BLOCK_LEVEL and trace.roles:
            for w in range(min(lay.waves, len(self.c.waves))):
                items.append((self.c.waves[w], f"wave {w + 1}"))
            items += [
                (self.c.role[GEMM], "a consumer's GEMMs"),
                (self.c.role[SOFTMAX], "its softmax"),
                (self.c.role[ISSUE], "producer: copy issued"),
                (self.c.dim, f"sub-lanes: {', '.join(trace.roles)}"),
            ]
        elif trace.level == BLOCK_LEVEL:
            for w in range(min(lay.waves, len(self.c.waves))):
                items.append((self.c.waves[w], f"wave {w + 1}"))
            items += [
                (self.c.waves[0].darker(185), "waiting for K_j, V_j (load_K_j)"),
                (self.c.read, "load Q_i"),
                (self.c.write, "store O_i"),
            ]
        fm = QFontMetrics(self.f_small)
        for color, text in items:
            p.fillRect(QRectF(x, y + 3, 10, 10), color)
            p.setPen(self.c.dim)
            p.drawText(QPointF(x + 14, y + 12), text)
            x += 14 + fm.horizontalAdvance(text) + 14
        p.setPen(self.c.faint)
        right = (
            f"{trace.device} · {trace.config.label()} · %globaltimer"
            if trace.level == BLOCK_LEVEL
            else f"{trace.device} · {trace.config.label()} · CUDA events"
        )
        p.drawText(
            QRectF(x, y, self.width() - x - 12, 16),
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
            right,
        )

    def _paint_overlay(self, p: QPainter) -> None:
        trace = self.trace
        assert trace is not None
        lanes = self.lanes_rect()
        if self.hovered is not None and self.hovered != self.selected:
            p.setPen(QPen(self._hover(), 1))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(self._rect_of(self.hovered).adjusted(-1, -1, 1, 1))
        if self.selected is not None:
            k = self.selected
            r = self._rect_of(k)
            b = trace.blocks[k]
            lane = self.lane_rect(int(self.lay.lane[k])) if self.lay is not None else r
            band = QColor(self.c.select)
            band.setAlpha(28)
            p.fillRect(QRectF(lanes.x(), lane.y(), lanes.width(), lane.height()), band)
            if self.cursor_ns is not None and trace.level == BLOCK_LEVEL:
                for name, _j, t0, t1 in b.phase_spans():
                    if t0 <= self.cursor_ns < t1 or (t1 == b.end_ns and self.cursor_ns >= t1):
                        x0, x1 = self.x_of(t0), self.x_of(t1)
                        p.fillRect(
                            QRectF(x0, r.y() - 2, max(2.0, x1 - x0), r.height() + 4),
                            self.c.phase.get(name, self.c.cursor),
                        )
                        break
            p.setPen(QPen(self.c.select, 2))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(r.adjusted(-2, -2, 2, 2))
            # a marker in the gutter so a 2-px lane can be found
            p.fillRect(QRectF(self.GUTTER - 5, lane.y(), 4, max(2.0, lane.height())), self.c.select)
        if self.cursor_ns is not None:
            x = self.x_of(self.cursor_ns)
            p.setPen(QPen(self.c.cursor, 1))
            p.drawLine(QPointF(x, self.HEADER + 4), QPointF(x, lanes.bottom()))
