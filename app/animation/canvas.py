"""QPainter drawing of the lanes: HBM tile grids to scale, one SM's SRAM (and register file), the
link, counters, and the warp-specialized kernel's roles.

Where everything goes comes from the layout model (canvas_layout.py, made of the canvas_*.py
parts), computed once per (size, scene): texts never overlap and quantities are never cut, at
any size from a 1280×800 window up. Everything that does not move (panels, matrix outlines, tile
grids, static labels) is painted once into a background pixmap; a frame then draws a few dozen
rectangles and lines plus its own texts, whatever N is. `render_to` paints the same picture into
any QPainter at any size (exports of the canvas alone).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import deque

from PySide6.QtCore import QEvent, QLineF, QPointF, QRectF, QSize, QSizeF, Qt
from PySide6.QtGui import QColor, QHelpEvent, QPainter, QPaintEvent, QPen, QPixmap
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from gpu.algorithms import NAIVE, TILED_WS, tile_shape
from gpu.config import AttentionConfig
from gpu.model.costmodel import GpuSpec
from gpu.model.schedule import READ, WRITE

from ..state.animation.chip import REGISTERS, SMEM, explain_layout
from ..state.animation.snapshots import LaneFrame
from ..state.animation.warp_roles import GEMM, ISSUE, PV, RoleTimeline, ws_launch
from .canvas_frame_texts import LaneParts, frame_texts, lane_parts, role_window
from .canvas_geometry import CanvasLayout, LaneGeo, LaneScene, Scene
from .canvas_layout import lay_out
from .canvas_text import Fonts, TextItem
from .colors import DARK, AnimColors

GRID_MIN_PX = 4.0

__all__ = ["LaneScene", "Scene", "TileCanvas", "scene_for"]


def scene_for(config: AttentionConfig, gpu: GpuSpec, lanes: list) -> Scene:
    """Build the static scene from the player's lanes."""
    out = []
    for lane in lanes:
        bm, bn = tile_shape(config, lane.algorithm)
        t, _ = tile_shape(config, NAIVE)
        out.append(
            LaneScene(
                lane.algorithm,
                lane.label,
                lane.total_time,
                bm,
                bn,
                t,
                lane.totals(),
                lane.layouts,
                lane.clock,
                consumers=ws_launch(config).consumers if lane.algorithm == TILED_WS else 0,
            )
        )
    total = max((x.total_time_s for x in out), default=0.0)
    return Scene(config, gpu, tuple(out), total)


#: See TileCanvas.__init__.
MINIMUM_SIZE = (520, 400)


class TileCanvas(QWidget):
    """Draws `LaneFrame`s; knows nothing about the clock."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("tileCanvas")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        # The smallest size at which every label of every lane fits apart (the
        # warp-specialized lane, with its roles strip, is the tallest; the test
        # tests/test_first_screen.py checks it): exports are never made smaller.
        self.setMinimumSize(*MINIMUM_SIZE)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent, True)
        self._scene: Scene | None = None
        self._frames: list[LaneFrame] = []
        self._layout: CanvasLayout | None = None
        self._layout_key: tuple | None = None
        self._bg: QPixmap | None = None
        self._bg_key: tuple | None = None
        self.paint_ms: deque[float] = deque(maxlen=4096)
        self.fonts = Fonts()
        self.c: AnimColors = DARK
        #: Replaces the clock in the header when set (the trace replay shows real time).
        self.header_text: str | None = None

    def sizeHint(self) -> QSize:
        return QSize(1200, 620)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            assert isinstance(event, QHelpEvent)
            tip = self.tooltip_at(QPointF(event.pos()))
            if tip:
                QToolTip.showText(event.globalPos(), tip, self)
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().event(event)

    def tooltip_at(self, pos: QPointF) -> str:
        """What the SRAM box at `pos` holds and why so many blocks share an SM (else '')."""
        lay = self.current_layout()
        if lay is None:
            return ""
        for f, g in zip(self._frames, lay.lanes, strict=False):
            column = g.box.united(g.regs) if g.regs is not None else g.box
            if column.adjusted(-4, -20, 4, 20).contains(pos) and f.layout is not None:
                return explain_layout(f.layout)
        return ""

    # ---- inputs

    def set_scene(self, scene: Scene) -> None:
        self._scene = scene
        self._layout_key = self._bg_key = None
        self.update()

    def set_frames(self, frames: list[LaneFrame]) -> None:
        self._frames = frames
        self.update()

    def set_colors(self, colors: AnimColors) -> None:
        """Repaint in another theme's colours."""
        if colors != self.c:
            self.c = colors
            self._bg_key = None
            self.update()

    @property
    def frames(self) -> list[LaneFrame]:
        return self._frames

    @property
    def scene(self) -> Scene | None:
        return self._scene

    # ---- the layout model (public for tests, tooltips and exports)

    def layout_for(self, width: float, height: float) -> CanvasLayout | None:
        if self._scene is None:
            return None
        key = (round(width), round(height), self._scene)
        if key != self._layout_key or self._layout is None:
            self._layout_key = key
            self._layout = lay_out(self.fonts, self._scene, float(width), float(height))
        return self._layout

    def current_layout(self) -> CanvasLayout | None:
        return self.layout_for(self.width(), self.height())

    def text_items(self, size: QSizeF | QSize | None = None) -> list[TextItem]:
        """Every text the canvas draws at `size` (its own size by default) for the current
        frames: the static ones and the frame's own."""
        w, h = (self.width(), self.height()) if size is None else (size.width(), size.height())
        lay = self.layout_for(w, h)
        if lay is None:
            return []
        return [*lay.texts, *self._frame_texts(lay)]

    def _frame_texts(
        self, lay: CanvasLayout, parts: list[LaneParts] | None = None
    ) -> list[TextItem]:
        """The texts of the frames shown (canvas_frame_texts.py)."""
        assert self._scene is not None
        return frame_texts(self.fonts, lay, self._frames, self._scene, self.header_text, parts)

    def matrix_rect(self, lane: int, matrix: str) -> QRectF | None:
        """Where `matrix` of lane `lane` is drawn (for tests and tooltips)."""
        lay = self.current_layout()
        if lay is None or lane >= len(lay.lanes):
            return None
        return lay.lanes[lane].mats.get(matrix)

    def region_rect(
        self, lane: int, matrix: str, region: tuple[int, int, int, int]
    ) -> QRectF | None:
        """Pixel rectangle of a region (elements) of a matrix, at least 2 px each way."""
        r = self.matrix_rect(lane, matrix)
        if r is None or self._scene is None:
            return None
        return _region(r, matrix, region, self._scene.config)

    # ---- painting

    def paintEvent(self, event: QPaintEvent) -> None:
        t0 = time.perf_counter()
        p = QPainter(self)
        lay = self.current_layout()
        if lay is None:
            p.fillRect(self.rect(), self.c.bg)
            p.end()
            return
        key = (self.width(), self.height(), self._scene, self.devicePixelRatioF(), self.c)
        if key != self._bg_key or self._bg is None:
            self._bg_key = key
            dpr = self.devicePixelRatioF()
            pm = QPixmap(int(self.width() * dpr), int(self.height() * dpr))
            pm.setDevicePixelRatio(dpr)
            bp = QPainter(pm)
            self._paint_static(bp, lay)
            bp.end()
            self._bg = pm
        p.drawPixmap(0, 0, self._bg)
        self._paint_frame(p, lay)
        p.end()
        self.paint_ms.append((time.perf_counter() - t0) * 1e3)

    def render_to(self, painter: QPainter, size: QSize | QSizeF) -> None:
        """Paint the canvas alone (background, lanes, current frames) into `painter` at `size`,
        whatever the widget's own size: for exports (GIF/MP4 frames, images)."""
        lay = self.layout_for(size.width(), size.height())
        painter.save()
        if lay is None:
            painter.fillRect(QRectF(0, 0, size.width(), size.height()), self.c.bg)
        else:
            self._paint_static(painter, lay)
            self._paint_frame(painter, lay)
        painter.restore()

    def _text(self, p: QPainter, item: TextItem, color: QColor | None = None) -> None:
        p.setFont(item.font)
        p.setPen(color if color is not None else self._color(item.color))
        p.drawText(item.rect, item.align, item.text)

    def _color(self, role: str) -> QColor:
        if role.startswith("role."):
            return self.c.role.get(role[5:], self.c.dim)
        return getattr(self.c, role, self.c.text)

    # ---- static

    def _paint_static(self, p: QPainter, lay: CanvasLayout) -> None:
        scene = self._scene
        assert scene is not None
        c = self.c
        p.fillRect(QRectF(0, 0, lay.width, lay.height), c.bg)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        for ls, g in zip(scene.lanes, lay.lanes, strict=True):
            self._paint_lane_static(p, scene, ls, g)
        for rect, role in lay.swatches:
            p.fillRect(rect, self._color(role))
        for item in lay.texts:
            self._text(p, item)

    def _paint_lane_static(self, p: QPainter, scene: Scene, ls: LaneScene, g: LaneGeo) -> None:
        c = self.c
        cfg = scene.config
        naive = ls.algorithm == NAIVE
        p.setPen(QPen(c.panel_edge, 1))
        p.setBrush(c.panel)
        p.drawRoundedRect(g.rect, 6, 6)
        # shared time axis: this lane's extent on the common clock
        tb = g.timebar
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(c.timebar)
        p.drawRoundedRect(tb, 3, 3)
        frac = ls.total_time_s / scene.total_time_s if scene.total_time_s > 0 else 1.0
        ext = QRectF(tb.x(), tb.y(), tb.width() * frac, tb.height())
        p.setBrush(c.timebar_lane)
        p.drawRoundedRect(ext, 3, 3)
        p.fillRect(QRectF(ext.right() - 2, tb.y() - 3, 2, tb.height() + 6), c.done)
        # HBM panel and matrices
        p.setPen(QPen(c.panel_edge, 1))
        p.setBrush(c.hbm_panel)
        p.drawRoundedRect(g.hbm, 5, 5)
        grid_tiles = {
            "Q": ls.s_tile if naive else ls.row_tile,
            "O": ls.s_tile if naive else ls.row_tile,
            "K": ls.s_tile if naive else ls.kv_tile,
            "V": ls.s_tile if naive else ls.kv_tile,
            "S": ls.s_tile,
            "P": ls.s_tile,
            "ml": ls.row_tile,
        }
        for name in ("Q", "K", "V", "O", "S", "P") + (() if naive else ("ml",)):
            r = g.mats[name]
            if not naive and name in ("S", "P"):
                p.setPen(QPen(c.faint, 1, Qt.PenStyle.DashLine))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(r)
                continue
            p.setBrush(c.matrix[name] if name in ("Q", "K", "V") else c.empty)
            p.setPen(QPen(c.panel_edge, 1))
            p.drawRect(r)
            square = name in ("S", "P")
            self._grid(
                p,
                r,
                cfg.seq_len,
                grid_tiles[name],
                cfg.seq_len if square else 0,
                ls.s_tile if square else 0,
            )
        # link channels
        lk = g.link
        cy = lk.center().y()
        for dy, color in ((-14, c.read), (14, c.write)):
            faint = QColor(color)
            faint.setAlpha(70)
            p.setPen(QPen(faint, 6, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
            p.drawLine(QPointF(lk.x() + 4, cy + dy), QPointF(lk.right() - 4, cy + dy))
        # the SM's shared memory (and register file) to scale
        p.setPen(QPen(c.box_edge, 1.5))
        p.setBrush(c.box)
        p.drawRect(g.box)
        if g.regs is not None:
            p.drawRect(g.regs)
        if g.roles is not None:
            p.setPen(QPen(c.panel_edge, 1))
            p.setBrush(c.hbm_panel)
            p.drawRoundedRect(g.roles.adjusted(-2, -2, 2, 2), 4, 4)
            for r in g.role_rows:
                p.fillRect(r, c.box)

    def _grid(self, p: QPainter, r: QRectF, rows: int, rtile: int, cols: int, ctile: int) -> None:
        lines: list[QLineF] = []
        if rtile and rows > rtile:
            step_px = r.height() * rtile / rows
            every = max(1, math.ceil(GRID_MIN_PX / step_px))
            k = every
            while k * rtile < rows:
                y = r.y() + r.height() * k * rtile / rows
                lines.append(QLineF(r.x(), y, r.right(), y))
                k += every
        if ctile and cols > ctile:
            step_px = r.width() * ctile / cols
            every = max(1, math.ceil(GRID_MIN_PX / step_px))
            k = every
            while k * ctile < cols:
                x = r.x() + r.width() * k * ctile / cols
                lines.append(QLineF(x, r.y(), x, r.bottom()))
                k += every
        if lines:
            p.setPen(QPen(self.c.grid, 1))
            p.drawLines(lines)

    # ---- per frame

    def _paint_frame(self, p: QPainter, lay: CanvasLayout) -> None:
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        lanes = list(zip(self._frames, lay.lanes, strict=False))
        parts = [lane_parts(f, g) for f, g in lanes]
        for (f, g), lp in zip(lanes, parts, strict=True):
            self._paint_lane(p, f, g, lp)
        for item in self._frame_texts(lay, parts):
            self._text(p, item)

    def _paint_lane(self, p: QPainter, f: LaneFrame, g: LaneGeo, lp: LaneParts) -> None:
        scene = self._scene
        assert scene is not None
        c = self.c
        cfg = scene.config
        naive = f.algorithm == NAIVE
        # time cursor
        tb = g.timebar
        frac = f.clock_s / f.clock_total_s if f.clock_total_s > 0 else 0.0
        lane_frac = f.totals.time_s / f.clock_total_s if f.clock_total_s > 0 else 1.0
        p.fillRect(
            QRectF(tb.x(), tb.y() + 1, tb.width() * min(frac, lane_frac), tb.height() - 2),
            c.progress if not f.done else c.done,
        )
        cx = tb.x() + tb.width() * min(1.0, frac)
        p.fillRect(QRectF(cx - 1, tb.y() - 2, 2, tb.height() + 4), c.text)
        mats = g.mats
        # HBM: what has been materialised so far (row-major fill), and read-back sweeps
        for m, frac_w in f.written.items():
            if frac_w <= 0 or m not in mats:
                continue
            r = mats[m]
            h = r.height() * frac_w
            p.fillRect(QRectF(r.x() + 1, r.y() + 1, r.width() - 1, max(1.0, h - 1)), c.matrix[m])
        for m, frac_r in f.readback.items():
            if m not in mats or frac_r <= 0:
                continue
            r = mats[m]
            sweep = QColor(c.read)
            sweep.setAlpha(70)
            h = r.height() * frac_r
            p.fillRect(QRectF(r.x() + 1, r.y() + 1, r.width() - 1, h), sweep)
            p.fillRect(QRectF(r.x(), r.y() + h - 1, r.width(), 2), c.read)
        for mark in f.trail:
            if mark.matrix not in mats or (not naive and mark.matrix in ("S", "P")):
                continue
            col = QColor(c.kind.get(mark.kind, c.compute))
            col.setAlpha(int(40 + 150 * (1.0 - mark.age)))
            p.fillRect(_region(mats[mark.matrix], mark.matrix, mark.region, cfg, 3.0), col)
        p.setBrush(Qt.BrushStyle.NoBrush)
        for mark in f.origins:
            if mark.matrix not in mats:
                continue
            p.setPen(QPen(c.slot_edge.get(mark.matrix, c.text), 2))
            p.drawRect(_region(mats[mark.matrix], mark.matrix, mark.region, cfg, 3.0))
        st = f.step
        hbm_rect = None
        if not f.done and st.kind in (READ, WRITE) and st.matrix in mats:
            hbm_rect = _region(mats[st.matrix], st.matrix, st.region, cfg, 4.0)
            fill = QColor(c.kind[st.kind])
            fill.setAlpha(200)
            p.fillRect(hbm_rect, fill)
            p.setPen(QPen(c.text, 1))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(hbm_rect.adjusted(-1, -1, 1, 1))
        # link particles: density = share of bandwidth spent reading / writing
        lk = g.link
        cy = lk.center().y()
        phase = (f.clock_s / f.clock_total_s * 40.0) % 1.0 if f.clock_total_s > 0 else 0.0
        for util, dy, color, direction in (
            (f.read_util, -14, c.read, 1),
            (f.write_util, 14, c.write, -1),
        ):
            if util <= 0.01:
                continue
            col = QColor(color)
            col.setAlpha(int(90 + 165 * min(1.0, util)))
            span = lk.width() - 16
            for k in range(6):
                u = (phase * direction + k / 6) % 1.0
                x = lk.x() + 8 + span * u
                p.fillRect(QRectF(x - 4, cy + dy - 4, 8, 8), col)
        # SRAM and registers, to scale
        slot_rects = lp.bands
        self._paint_sram(p, f, g, lp)
        kind_c = c.kind.get(st.kind, c.compute)
        active = [s for s in f.slots if s.active and (s.place, s.name) in slot_rects]
        if not f.done:
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.setPen(QPen(kind_c, 2))
            for s in active:
                p.drawRect(slot_rects[(s.place, s.name)].adjusted(1, 0, -1, 0))
        # flying tile: HBM region -> its SRAM slot (read) or back (write)
        target = next((s for s in active if s.place == SMEM and s.matrix == st.matrix), None)
        if target is None and active:
            target = active[0]
        if (
            not f.done
            and hbm_rect is not None
            and target is not None
            and (f.step_wall_s >= 0.03 or f.gliding)
            and 0.0 < f.step_phase < 1.0
        ):
            ch_y = cy + (-14 if st.kind == READ else 14)
            path = [
                QPointF(hbm_rect.right(), hbm_rect.center().y()),
                QPointF(lk.x() + 4, ch_y),
                QPointF(lk.right() - 4, ch_y),
                QPointF(g.box.x(), slot_rects[(target.place, target.name)].center().y()),
            ]
            if st.kind == WRITE:
                path.reverse()
            pos = _along(path, f.step_phase)
            line_c = QColor(kind_c)
            line_c.setAlpha(110)
            p.setPen(QPen(line_c, 1, Qt.PenStyle.DashLine))
            p.drawPolyline(path)
            p.fillRect(QRectF(pos.x() - 7, pos.y() - 7, 14, 14), kind_c)
            p.setPen(QPen(c.text, 1))
            p.drawRect(QRectF(pos.x() - 7, pos.y() - 7, 14, 14))
        # legend swatches
        for row, entry in zip(g.legend, lp.legend, strict=False):
            fill = c.slot.get(entry[2], c.slot[""])
            s = lp.slots.get((entry[3], entry[0]))
            if entry[3] == REGISTERS:
                p.setPen(QPen(fill, 2))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(row.swatch.adjusted(1, 1, -1, -1))
            else:
                p.fillRect(row.swatch, fill if s is None or s.resident else c.slot_empty)
        # counter bar: read and written so far, to one scale across lanes
        if not g.bar.isEmpty():
            tot = f.totals
            scale_max = max(fr.totals.bytes_read + fr.totals.bytes_written for fr in self._frames)
            bw = g.bar.width()
            rw = bw * f.counters.bytes_read / scale_max if scale_max else 0
            ww = bw * f.counters.bytes_written / scale_max if scale_max else 0
            full = bw * (tot.bytes_read + tot.bytes_written) / scale_max if scale_max else 0
            p.setPen(QPen(c.panel_edge, 1))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(QRectF(g.bar.x(), g.bar.y(), full, g.bar.height()))
            p.fillRect(QRectF(g.bar.x(), g.bar.y(), rw, g.bar.height()), c.read)
            p.fillRect(QRectF(g.bar.x() + rw, g.bar.y(), ww, g.bar.height()), c.write)
        if g.roles is not None and f.roles is not None:
            self._paint_roles(p, f, g)

    def _paint_sram(self, p: QPainter, f: LaneFrame, g: LaneGeo, lp: LaneParts) -> None:
        c = self.c
        for key, r in lp.bands.items():
            s = lp.slots[key]
            fill = c.slot.get(s.matrix, c.slot[""]) if s.resident else c.slot_empty
            p.fillRect(r, fill)
            p.setPen(QPen(c.box, 1))
            p.drawLine(QPointF(r.x(), r.bottom()), QPointF(r.right(), r.bottom()))
        # the other blocks resident on the same SM (same carve-up), and what is left
        box = g.box
        used = sum(s.bytes for s in f.slots if s.place == SMEM)
        cap = max(1, f.sram_capacity)
        y = box.y() + 1 + (box.height() - 2) * min(1.0, used / cap)
        occ = f.layout.occupancy if f.layout is not None else None
        if occ is not None and not f.done:
            per = (box.height() - 2) * (f.layout.smem_bytes + occ.reserved_smem) / cap
            ghost = QColor(c.slot[""])
            ghost.setAlpha(70)
            for _ in range(occ.blocks - 1):
                r = QRectF(box.x() + 1, y + 1, box.width() - 2, min(per, box.bottom() - 1 - y) - 1)
                if r.height() <= 1:
                    break
                p.fillRect(r, ghost)
                p.setPen(QPen(c.dim, 1, Qt.PenStyle.DotLine))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(r)
                y += per
        if used > cap:
            p.fillRect(QRectF(box.x(), box.bottom() - 4, box.width(), 4), c.error)

    # ---- warp roles

    def _paint_roles(self, p: QPainter, f: LaneFrame, g: LaneGeo) -> None:
        tl: RoleTimeline | None = f.roles
        if tl is None or not g.role_rows:
            return
        c = self.c
        j0, j1, t0, t1 = role_window(f)
        rows = g.role_rows
        width = rows[0].width()

        def x_of(t: float) -> float:
            return rows[0].x() + width * (t - t0) / (t1 - t0)

        for s in tl.spans(j0, j1):
            if s.role >= len(rows):
                continue
            row = rows[s.role]
            a, b = max(s.t0, t0), min(s.t1, t1)
            if b < a:
                continue
            x0, x1 = x_of(a), x_of(b)
            if s.kind == ISSUE:
                p.fillRect(QRectF(x0 - 1, row.y(), 2, row.height()), c.role[ISSUE])
                continue
            if s.role == 0:  # copies overlap: K on the upper half, V on the lower
                half = row.height() / 2
                y = row.y() + (0 if s.kind == "copy_k" else half)
                p.fillRect(QRectF(x0, y + 1, max(1.0, x1 - x0), half - 2), c.role[s.kind])
            elif s.kind == PV:  # its P·V on the tensor cores, under its own softmax
                h = max(2.0, row.height() / 4)
                p.fillRect(QRectF(x0, row.bottom() - h - 1, max(1.0, x1 - x0), h), c.role[GEMM])
            else:
                p.fillRect(
                    QRectF(x0, row.y() + 1, max(1.0, x1 - x0), row.height() - 2),
                    c.role.get(s.kind, c.dim),
                )
        # now
        x = x_of(min(max(f.role_t, t0), t1))
        p.fillRect(QRectF(x - 1, rows[0].y() - 2, 2, rows[-1].bottom() - rows[0].y() + 4), c.cursor)


def _shape(matrix: str, cfg: AttentionConfig) -> tuple[int, int]:
    n, d = cfg.seq_len, cfg.head_dim
    return {"S": (n, n), "P": (n, n), "ml": (n, 2)}.get(matrix, (n, d))


def _region(
    r: QRectF,
    matrix: str,
    region: tuple[int, int, int, int],
    cfg: AttentionConfig,
    min_px: float = 2.0,
) -> QRectF:
    rows, cols = _shape(matrix, cfg)
    r0, r1, c0, c1 = region
    x0 = r.x() + r.width() * c0 / cols
    x1 = r.x() + r.width() * min(c1, cols) / cols
    y0 = r.y() + r.height() * r0 / rows
    y1 = r.y() + r.height() * min(r1, rows) / rows
    if x1 - x0 < min_px:
        cx = (x0 + x1) / 2
        x0, x1 = cx - min_px / 2, cx + min_px / 2
    if y1 - y0 < min_px:
        cy = (y0 + y1) / 2
        y0, y1 = cy - min_px / 2, cy + min_px / 2
    return QRectF(x0, y0, x1 - x0, y1 - y0)


def _along(points: list[QPointF], u: float) -> QPointF:
    """The point a fraction `u` of the way along a polyline (by length)."""
    segments = list(itertools.pairwise(points))
    lengths = [math.dist((a.x(), a.y()), (b.x(), b.y())) for a, b in segments]
    target = u * sum(lengths)
    for (a, b), seg in zip(segments, lengths, strict=True):
        if target <= seg and seg > 0:
            k = target / seg
            return QPointF(a.x() + (b.x() - a.x()) * k, a.y() + (b.y() - a.y()) * k)
        target -= seg
    return points[-1]
