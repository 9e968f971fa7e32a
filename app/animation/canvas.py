"""QPainter drawing of the lanes: HBM tile grids to scale, one SM's SRAM, the link, counters.

Performance: everything that does not move (panels, matrix outlines, tile grids, labels) is
painted once into a background pixmap per (size, scene); a frame then draws a few dozen
rectangles and lines plus the counter texts, whatever N is. Tile grids are drawn as a single
batch of lines, thinned so that lines are at least a few pixels apart.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import deque
from dataclasses import dataclass

from PySide6.QtCore import QLineF, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QPainter,
    QPaintEvent,
    QPen,
    QPixmap,
    QStaticText,
)
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.state.units import fmt_bytes, fmt_flops, fmt_int, fmt_seconds
from gpu.algorithms import NAIVE, tile_shape
from gpu.config import AttentionConfig
from gpu.costmodel import GpuSpec, attention_matrix_bytes, matrix_bytes, stats_bytes
from gpu.schedule import COMPUTE, READ, WRITE

from ..state.animation.player import KERNEL_TITLES, Counters, LaneFrame

BG = QColor("#15181d")
PANEL = QColor("#1d2128")
PANEL_EDGE = QColor("#3a414c")
TEXT = QColor("#d8dde6")
DIM = QColor("#8a93a3")
FAINT = QColor("#59616e")
READ_C = QColor("#43a6ff")
WRITE_C = QColor("#ff9838")
COMPUTE_C = QColor("#c18cff")
INPUT_C = QColor("#2f5e78")  # Q, K, V: inputs, always in HBM
BIG_C = QColor("#b8405a")  # S, P once materialised: the memory wall
OUT_C = QColor("#3f8f5a")  # O, m, l once written
GRID_C = QColor(255, 255, 255, 26)

MATRIX_FILL = {
    "Q": INPUT_C,
    "K": INPUT_C,
    "V": INPUT_C,
    "O": OUT_C,
    "ml": OUT_C,
    "S": BIG_C,
    "P": BIG_C,
}
SLOT_FILL = {
    "Q": QColor("#3f7ea3"),
    "K": QColor("#4f8fb0"),
    "V": QColor("#5fa0bc"),
    "S": QColor("#c4576f"),
    "P": QColor("#c4576f"),
    "O": QColor("#4fa86c"),
    "ml": QColor("#8fc46a"),
    "": QColor("#7a7f8a"),
}
KIND_COLOR = {READ: READ_C, WRITE: WRITE_C, COMPUTE: COMPUTE_C}

LANE_TITLES = {
    "naive": "naive: three kernels, S and P round-trip through HBM",
    "tiled": "tiled (FlashAttention-style): one fused kernel, S and P never leave the chip",
    "tiled_mma": "tiled on tensor cores: one fused kernel, S and P never leave the chip",
}
MIN_STRIP_PX = 10.0  # N×d matrices narrower than this are widened (and say so)
MIN_ML_PX = 4.0
GRID_MIN_PX = 4.0
CAPTION_W = 88.0  # counters: caption column, then the running value, then "/ total"
TOTAL_X = 176.0


@dataclass(frozen=True)
class LaneScene:
    """Static facts about one lane: enough to paint its background."""

    algorithm: str
    label: str
    total_time_s: float
    row_tile: int  # rows per tile of Q (and O)
    kv_tile: int  # rows per tile of K and V
    s_tile: int  # tile of S/P (naive GEMM tile) for the grid
    totals: Counters  # end-of-play counters (static: painted into the background)


@dataclass(frozen=True)
class Scene:
    config: AttentionConfig
    gpu: GpuSpec
    lanes: tuple[LaneScene, ...]
    total_time_s: float


def scene_for(config: AttentionConfig, gpu: GpuSpec, lanes: list) -> Scene:
    """Build the static scene from the player's lanes."""
    out = []
    for lane in lanes:
        bm, bn = tile_shape(config, lane.algorithm)
        t, _ = tile_shape(config, NAIVE)
        out.append(LaneScene(lane.algorithm, lane.label, lane.total_time, bm, bn, t, lane.totals()))
    total = max((x.total_time_s for x in out), default=0.0)
    return Scene(config, gpu, tuple(out), total)


@dataclass
class _LaneGeo:
    rect: QRectF
    title: QRectF
    timebar: QRectF
    hbm: QRectF
    mats: dict[str, QRectF]
    widen: float
    link: QRectF
    sram: QRectF
    legend: QRectF
    counters: QRectF
    status_w: float = 0.0  # room left of the lane title for the per-frame status line


class TileCanvas(QWidget):
    """Draws `LaneFrame`s; knows nothing about the clock."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("tileCanvas")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(860, 440)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent, True)
        self._scene: Scene | None = None
        self._frames: list[LaneFrame] = []
        self._geo: list[_LaneGeo] = []
        self._bg: QPixmap | None = None
        self._bg_key: tuple | None = None
        self.paint_ms: deque[float] = deque(maxlen=4096)
        self.f_small = QFont("DejaVu Sans", 8)
        self.f_norm = QFont("DejaVu Sans", 9)
        self.f_bold = QFont("DejaVu Sans", 9, QFont.Weight.Bold)
        self.f_title = QFont("DejaVu Sans", 10, QFont.Weight.Bold)
        self.f_big = QFont("DejaVu Sans", 13, QFont.Weight.Bold)
        self.f_mono = QFont("DejaVu Sans Mono", 9)
        self.f_mono_b = QFont("DejaVu Sans Mono", 9, QFont.Weight.Bold)
        self._fm_norm = QFontMetrics(self.f_norm)
        self._texts: dict[tuple[str, str], QStaticText] = {}
        #: Replaces the modeled clock in the header when set (the trace replay shows real time).
        self.header_text: str | None = None

    def sizeHint(self) -> QSize:
        return QSize(1200, 620)

    # ---- inputs

    def set_scene(self, scene: Scene) -> None:
        self._scene = scene
        self._bg_key = None
        self.update()

    def set_frames(self, frames: list[LaneFrame]) -> None:
        self._frames = frames
        self.update()

    @property
    def frames(self) -> list[LaneFrame]:
        return self._frames

    def matrix_rect(self, lane: int, matrix: str) -> QRectF | None:
        """Where `matrix` of lane `lane` is drawn (for tests and tooltips)."""
        self._ensure_geometry()
        if lane >= len(self._geo):
            return None
        return self._geo[lane].mats.get(matrix)

    def region_rect(
        self, lane: int, matrix: str, region: tuple[int, int, int, int]
    ) -> QRectF | None:
        """Pixel rectangle of a region (elements) of a matrix, at least 2 px each way."""
        r = self.matrix_rect(lane, matrix)
        if r is None or self._scene is None:
            return None
        return self._region(r, matrix, region, self._scene.config)

    # ---- geometry

    def _ensure_geometry(self) -> None:
        key = (self.width(), self.height(), self._scene, self.devicePixelRatioF())
        if key == self._bg_key or self._scene is None:
            return
        self._bg_key = key
        self._geo = self._layout(self._scene)
        self._bg = self._paint_background(self._scene)

    def _layout(self, scene: Scene) -> list[_LaneGeo]:
        w, h = float(self.width()), float(self.height())
        header = 30.0
        n_l = max(1, len(scene.lanes))
        lane_h = (h - header - 4) / n_l
        cfg = scene.config
        n, d = cfg.seq_len, cfg.head_dim
        geos = []
        for i, _ls in enumerate(scene.lanes):
            rect = QRectF(4, header + i * lane_h, w - 8, lane_h - 4)
            title = QRectF(rect.x() + 10, rect.y() + 4, rect.width() - 20, 18)
            timebar = QRectF(rect.x() + 10, title.bottom() + 3, rect.width() - 20, 8)
            body = QRectF(
                rect.x() + 8,
                timebar.bottom() + 6,
                rect.width() - 16,
                rect.bottom() - timebar.bottom() - 10,
            )
            hbm = QRectF(body.x(), body.y(), body.width() * 0.50, body.height())
            link = QRectF(hbm.right(), body.y(), body.width() * 0.07, body.height())
            sram_col = QRectF(link.right(), body.y(), body.width() * 0.15, body.height())
            counters = QRectF(
                sram_col.right() + 12, body.y(), body.right() - sram_col.right() - 12, body.height()
            )
            # HBM matrices, to one scale: N rows ↦ `side` pixels.
            inner = hbm.adjusted(10, 22, -10, -44)
            gap = 10.0
            gaps = 6 * gap
            natural = (inner.width() - gaps) / (2 + 4 * d / n + 2 / n)
            side = min(inner.height(), natural)
            strip = side * d / n
            widen = 1.0
            if strip < MIN_STRIP_PX:
                widen = MIN_STRIP_PX / strip
                strip = MIN_STRIP_PX
                ml_w = max(MIN_ML_PX, side * 2 / n)
                side = min(inner.height(), (inner.width() - gaps - 4 * strip - ml_w) / 2)
            ml_w = max(MIN_ML_PX, side * 2 / n * widen)
            x = inner.x()
            top = inner.y() + (inner.height() - side) / 2
            mats: dict[str, QRectF] = {}
            for name in ("Q", "K", "V", "O"):
                mats[name] = QRectF(x, top, strip, side)
                x += strip + gap
            x += gap
            for name in ("S", "P"):
                mats[name] = QRectF(x, top, side, side)
                x += side + gap
            mats["ml"] = QRectF(x, top, ml_w, side)
            box_h = min(body.height() * 0.56, sram_col.width() * 1.1)
            sram = QRectF(sram_col.x() + 6, body.y() + 22, sram_col.width() - 12, box_h)
            legend = QRectF(
                sram.x(),
                sram.bottom() + 6,
                sram_col.width() + 4,
                body.bottom() - sram.bottom() - 6,
            )
            geos.append(
                _LaneGeo(rect, title, timebar, hbm, mats, widen, link, sram, legend, counters)
            )
        return geos

    @staticmethod
    def _shape(matrix: str, cfg: AttentionConfig) -> tuple[int, int]:
        n, d = cfg.seq_len, cfg.head_dim
        return {"S": (n, n), "P": (n, n), "ml": (n, 2)}.get(matrix, (n, d))

    def _region(
        self,
        r: QRectF,
        matrix: str,
        region: tuple[int, int, int, int],
        cfg: AttentionConfig,
        min_px: float = 2.0,
    ) -> QRectF:
        rows, cols = self._shape(matrix, cfg)
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

    # ---- background (static)

    def _paint_background(self, scene: Scene) -> QPixmap:
        dpr = self.devicePixelRatioF()
        pm = QPixmap(int(self.width() * dpr), int(self.height() * dpr))
        pm.setDevicePixelRatio(dpr)
        pm.fill(BG)
        p = QPainter(pm)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        cfg = scene.config
        self._paint_header_background(p, scene)
        for ls, g in zip(scene.lanes, self._geo, strict=True):
            self._paint_lane_background(p, scene, ls, g, cfg)
        p.end()
        return pm

    def _paint_lane_background(
        self, p: QPainter, scene: Scene, ls: LaneScene, g: _LaneGeo, cfg: AttentionConfig
    ) -> None:
        naive = ls.algorithm == NAIVE
        p.setPen(QPen(PANEL_EDGE, 1))
        p.setBrush(PANEL)
        p.drawRoundedRect(g.rect, 6, 6)
        p.setPen(TEXT)
        p.setFont(self.f_title)
        title = LANE_TITLES.get(ls.algorithm, ls.label)
        fm_title = QFontMetrics(self.f_title)
        title = fm_title.elidedText(title, Qt.TextElideMode.ElideRight, int(g.title.width() * 0.6))
        g.status_w = g.title.width() - fm_title.horizontalAdvance(title) - 24
        p.drawText(g.title, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, title)
        # Shared time axis: this lane's extent on the common clock.
        tb = g.timebar
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor("#2a2f38"))
        p.drawRoundedRect(tb, 3, 3)
        frac = ls.total_time_s / scene.total_time_s if scene.total_time_s > 0 else 1.0
        ext = QRectF(tb.x(), tb.y(), tb.width() * frac, tb.height())
        p.setBrush(QColor("#46546a"))
        p.drawRoundedRect(ext, 3, 3)
        p.fillRect(QRectF(ext.right() - 2, tb.y() - 3, 2, tb.height() + 6), QColor("#7fd18f"))
        # HBM panel
        p.setPen(QPen(PANEL_EDGE, 1))
        p.setBrush(QColor("#191c22"))
        p.drawRoundedRect(g.hbm, 5, 5)
        p.setPen(TEXT)
        p.setFont(self.f_bold)
        foot = 4 * matrix_bytes(cfg) + (
            2 * attention_matrix_bytes(cfg) if naive else stats_bytes(cfg)
        )
        fits = foot <= scene.gpu.memory_bytes
        p.setPen(TEXT if fits else QColor("#ff6b6b"))
        verdict = "" if fits else "  DOES NOT FIT: out of memory"
        head = f"HBM  holds {fmt_bytes(foot)} of {fmt_bytes(scene.gpu.memory_bytes)}{verdict}"
        p.drawText(
            QRectF(g.hbm.x() + 10, g.hbm.y() + 3, g.hbm.width() - 20, 16),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            head,
        )
        room = g.hbm.width() - 36 - QFontMetrics(self.f_bold).horizontalAdvance(head)
        label = QFontMetrics(self.f_small).elidedText(
            f"{cfg.label()}: 1 of {cfg.bh} heads drawn, sizes for all",
            Qt.TextElideMode.ElideLeft,
            int(room),
        )
        if room > 60:
            p.setFont(self.f_small)
            p.setPen(DIM)
            p.drawText(
                QRectF(g.hbm.x() + 10, g.hbm.y() + 3, g.hbm.width() - 20, 16),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                label,
            )
        mats = g.mats
        sizes = {
            "Q": matrix_bytes(cfg),
            "K": matrix_bytes(cfg),
            "V": matrix_bytes(cfg),
            "O": matrix_bytes(cfg),
            "S": attention_matrix_bytes(cfg),
            "P": attention_matrix_bytes(cfg),
            "ml": stats_bytes(cfg),
        }
        names = ["Q", "K", "V", "O", "S", "P"] + ([] if naive else ["ml"])
        for name in names:
            r = mats[name]
            ghost = not naive and name in ("S", "P")
            if ghost:
                pen = QPen(FAINT, 1, Qt.PenStyle.DashLine)
                p.setPen(pen)
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(r)
                continue
            if name in ("Q", "K", "V"):
                p.setBrush(MATRIX_FILL[name])
            else:
                p.setBrush(QColor("#20242b"))
            p.setPen(QPen(PANEL_EDGE, 1))
            p.drawRect(r)
            # tile grid
            rows_tile = {
                "Q": ls.row_tile,
                "O": ls.row_tile,
                "K": ls.kv_tile,
                "V": ls.kv_tile,
                "S": ls.s_tile,
                "P": ls.s_tile,
                "ml": ls.row_tile,
            }[name]
            if naive and name in ("Q", "K", "V", "O"):
                rows_tile = ls.s_tile
            cols_tile = ls.s_tile if name in ("S", "P") else None
            self._grid(
                p, r, cfg.seq_len, rows_tile, cfg.seq_len if cols_tile else 0, cols_tile or 0
            )
        # Labels under the matrices.
        p.setFont(self.f_small)
        for name in names:
            r = mats[name]
            label_rect = QRectF(r.x() - 20, r.bottom() + 3, r.width() + 40, 12)
            ghost = not naive and name in ("S", "P")
            p.setPen(FAINT if ghost else TEXT)
            p.setFont(self.f_bold if name in ("S", "P") else self.f_small)
            if name in ("S", "P"):
                text = f"{name}  N×N   {fmt_bytes(sizes[name])}"
                if ghost:
                    text = f"{name}: never stored (0 B)"
                    if QFontMetrics(self.f_bold).horizontalAdvance(text) > r.width():
                        text = f"{name}: not stored"
                p.drawText(
                    QRectF(r.x(), r.bottom() + 3, r.width(), 14),
                    Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop,
                    text,
                )
            elif name == "ml":
                p.drawText(
                    QRectF(r.x() - 20, r.bottom() + 3, r.width() + 40, 12),
                    Qt.AlignmentFlag.AlignHCenter,
                    "m,l",
                )
            else:
                p.drawText(
                    label_rect, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop, name
                )
        p.setFont(self.f_small)
        p.setPen(DIM)
        qo = mats["Q"].united(mats["O"])
        nd = f"N×d each: {fmt_bytes(sizes['Q'])}"
        p.drawText(
            QRectF(qo.x() - 4, qo.bottom() + 15, qo.width() + 60, 12),
            Qt.AlignmentFlag.AlignLeft,
            nd,
        )
        if g.widen > 1.0:
            p.setPen(QColor("#e0b84a"))
            p.drawText(
                QRectF(qo.x() - 4, qo.bottom() + 27, 300, 12),
                Qt.AlignmentFlag.AlignLeft,
                f"Q K V O drawn ×{g.widen:,.0f} wider (not to scale)",
            )
        if not naive:
            sp = mats["S"].united(mats["P"])
            p.setFont(self.f_norm)
            p.setPen(FAINT)
            p.drawText(
                sp,
                Qt.AlignmentFlag.AlignCenter,
                "where naive keeps S and P:\nnothing here, they stay in SRAM tiles",
            )
            p.setFont(self.f_small)
            p.setPen(DIM)
            p.drawText(
                QRectF(mats["ml"].x() - 35, mats["ml"].bottom() + 15, 80, 12),
                Qt.AlignmentFlag.AlignHCenter,
                fmt_bytes(sizes["ml"]),
            )
        # Link: two channels.
        lk = g.link
        cy = lk.center().y()
        for dy, color, text in ((-14, READ_C, "read →"), (14, WRITE_C, "← write")):
            y = cy + dy
            c = QColor(color)
            c.setAlpha(70)
            p.setPen(QPen(c, 6, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
            p.drawLine(QPointF(lk.x() + 4, y), QPointF(lk.right() - 4, y))
            p.setPen(color)
            p.setFont(self.f_small)
            ty = y - 18 if dy < 0 else y + 6
            p.drawText(QRectF(lk.x(), ty, lk.width(), 12), Qt.AlignmentFlag.AlignHCenter, text)
        # SRAM box.
        p.setPen(TEXT)
        p.setFont(self.f_bold)
        p.drawText(
            QRectF(g.sram.x() - 4, g.sram.y() - 20, g.sram.width() + 40, 16),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            "SRAM of 1 SM",
        )
        p.setPen(QPen(QColor("#aab3c2"), 1.5))
        p.setBrush(QColor("#101317"))
        p.drawRect(g.sram)
        p.setFont(self.f_small)
        p.setPen(DIM)
        p.drawText(
            QRectF(g.sram.x(), g.sram.bottom() - 13, g.sram.width() - 3, 12),
            Qt.AlignmentFlag.AlignRight,
            f"capacity {fmt_bytes(scene.gpu.smem_per_sm_bytes)}",
        )
        # Counter captions and end values (the running values are painted per frame).
        tot = ls.totals
        ends = (
            fmt_bytes(tot.bytes_read),
            fmt_bytes(tot.bytes_written),
            fmt_flops(tot.flops),
            fmt_bytes(scene.gpu.smem_per_sm_bytes),
            fmt_seconds(tot.time_s),
        )
        cr = g.counters
        for k, (caption, end) in enumerate(zip(self._COUNTER_CAPTIONS, ends, strict=True)):
            yy = cr.y() + 22 + k * 19
            p.setFont(self.f_norm)
            p.setPen(DIM)
            p.drawText(
                QRectF(cr.x(), yy, CAPTION_W, 17),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                caption,
            )
            p.setFont(self.f_mono)
            p.drawText(
                QRectF(cr.x() + TOTAL_X, yy, cr.right() - cr.x() - TOTAL_X, 17),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                f"/ {end}",
            )
        p.setFont(self.f_small)
        p.drawText(
            QRectF(cr.x(), cr.y() + 22 + 5 * 19 + 22, cr.width(), 12),
            Qt.AlignmentFlag.AlignLeft,
            "HBM traffic so far (same scale in both lanes)",
        )

    def _static_text(
        self, p: QPainter, at: QPointF, text: str, color: QColor | None, font: QFont
    ) -> None:
        """Draw a recurring string from a layout cache (much cheaper than drawText)."""
        key = (text, font.key())
        st = self._texts.get(key)
        if st is None:
            if len(self._texts) > 512:
                self._texts.clear()
            st = QStaticText(text)
            st.setTextFormat(Qt.TextFormat.PlainText)
            st.prepare(font=font)
            self._texts[key] = st
        if color is not None:
            p.setPen(color)
        p.setFont(font)
        p.drawStaticText(at, st)

    _COUNTER_CAPTIONS = ("HBM read", "HBM written", "FLOPs", "SRAM in use", "modeled time")

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
            p.setPen(QPen(GRID_C, 1))
            p.drawLines(lines)

    # ---- per frame

    def paintEvent(self, event: QPaintEvent) -> None:
        t0 = time.perf_counter()
        p = QPainter(self)
        if self._scene is None:
            p.fillRect(self.rect(), BG)
            p.end()
            return
        self._ensure_geometry()
        assert self._bg is not None
        p.drawPixmap(0, 0, self._bg)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        self._paint_header(p)
        for i, (f, g) in enumerate(zip(self._frames, self._geo, strict=False)):
            self._paint_lane(p, i, f, g)
        p.end()
        self.paint_ms.append((time.perf_counter() - t0) * 1e3)

    def _paint_header(self, p: QPainter) -> None:
        scene = self._scene
        assert scene is not None
        clock = self._frames[0].clock_s if self._frames else 0.0
        p.setPen(TEXT)
        p.setFont(self.f_big)
        text = self.header_text
        if text is None:
            text = f"t = {fmt_seconds(clock)}  of  {fmt_seconds(scene.total_time_s)}"
        p.drawText(
            QRectF(12, 2, 300 if self.header_text is None else 520, 26),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            text,
        )

    def _paint_header_background(self, p: QPainter, scene: Scene) -> None:
        """Legend, GPU and the one-line verdict: how much traffic each lane moves in total."""
        p.setFont(self.f_norm)
        right = self.width() - 12.0
        for text, color in (("compute", COMPUTE_C), ("write", WRITE_C), ("read", READ_C)):
            tw = self._fm_norm.horizontalAdvance(text)
            p.setPen(DIM)
            p.drawText(
                QRectF(right - tw, 2, tw, 26),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                text,
            )
            p.fillRect(QRectF(right - tw - 14, 11, 10, 10), color)
            right -= tw + 26
        traffic = {
            ls.algorithm: ls.totals.bytes_read + ls.totals.bytes_written for ls in scene.lanes
        }
        parts = [f"modeled on {scene.gpu.name}"]
        if NAIVE in traffic and len(traffic) > 1:
            other = next(a for a in traffic if a != NAIVE)
            ratio = traffic[NAIVE] / max(1, traffic[other])
            parts.append(
                f"HBM traffic: naive {fmt_bytes(traffic[NAIVE])}, {other} "
                f"{fmt_bytes(traffic[other])} ({ratio:.1f}× less)"
            )
        p.setPen(TEXT)
        p.drawText(
            QRectF(300, 2, right - 310, 26),
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
            "   ·   ".join(parts),
        )

    def _paint_lane(self, p: QPainter, i: int, f: LaneFrame, g: _LaneGeo) -> None:
        scene = self._scene
        assert scene is not None
        cfg = scene.config
        naive = f.algorithm == NAIVE
        # time cursor
        tb = g.timebar
        frac = f.clock_s / f.clock_total_s if f.clock_total_s > 0 else 0.0
        lane_frac = f.totals.time_s / f.clock_total_s if f.clock_total_s > 0 else 1.0
        done_w = tb.width() * min(frac, lane_frac)
        p.fillRect(
            QRectF(tb.x(), tb.y() + 1, done_w, tb.height() - 2),
            QColor("#5b8def") if not f.done else QColor("#4fa86c"),
        )
        cx = tb.x() + tb.width() * min(1.0, frac)
        p.fillRect(QRectF(cx - 1, tb.y() - 2, 2, tb.height() + 4), TEXT)
        # status line, right aligned in the title row
        p.setFont(self.f_norm)
        if f.done:
            status = f"done after {fmt_seconds(f.totals.time_s)}"
            p.setPen(QColor("#7fd18f"))
        else:
            title = KERNEL_TITLES.get(f.kernel, f.kernel)
            status = (
                f"kernel {f.kernel_index + 1}/{f.kernel_count}  {title}   ·   block "
                f"{fmt_int(f.block + 1)}/{fmt_int(f.blocks)}   ·   {f.step.name}"
            )
            p.setPen(TEXT)
        status = self._fm_norm.elidedText(status, Qt.TextElideMode.ElideMiddle, int(g.status_w))
        p.drawText(g.title, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, status)
        mats = g.mats
        # HBM: what has been materialised so far (row-major fill), and read-back sweeps.
        for m, frac_w in f.written.items():
            if frac_w <= 0 or m not in mats:
                continue
            r = mats[m]
            c = QColor(MATRIX_FILL.get(m, OUT_C))
            h = r.height() * frac_w
            p.fillRect(QRectF(r.x() + 1, r.y() + 1, r.width() - 1, max(1.0, h - 1)), c)
        for m, frac_r in f.readback.items():
            if m not in mats or frac_r <= 0:
                continue
            r = mats[m]
            c = QColor(READ_C)
            c.setAlpha(70)
            h = r.height() * frac_r
            p.fillRect(QRectF(r.x() + 1, r.y() + 1, r.width() - 1, h), c)
            p.fillRect(QRectF(r.x(), r.y() + h - 1, r.width(), 2), READ_C)
        # Trail of recently moved tiles.
        for mark in f.trail:
            if mark.matrix not in mats or (not naive and mark.matrix in ("S", "P")):
                continue
            c = QColor(KIND_COLOR.get(mark.kind, COMPUTE_C))
            c.setAlpha(int(40 + 150 * (1.0 - mark.age)))
            p.fillRect(self._region(mats[mark.matrix], mark.matrix, mark.region, cfg, 3.0), c)
        # Where the tiles now in SRAM came from (Q_i band, current K_j/V_j, ...).
        p.setBrush(Qt.BrushStyle.NoBrush)
        for mark in f.origins:
            if mark.matrix not in mats:
                continue
            c = QColor(SLOT_FILL.get(mark.matrix, TEXT)).lighter(150)
            p.setPen(QPen(c, 2))
            p.drawRect(self._region(mats[mark.matrix], mark.matrix, mark.region, cfg, 3.0))
        # Current step.
        st = f.step
        hbm_rect = None
        if not f.done and st.kind in (READ, WRITE) and st.matrix in mats:
            hbm_rect = self._region(mats[st.matrix], st.matrix, st.region, cfg, 4.0)
            c = QColor(KIND_COLOR[st.kind])
            fill = QColor(c)
            fill.setAlpha(200)
            p.fillRect(hbm_rect, fill)
            p.setPen(QPen(QColor("#ffffff"), 1))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(hbm_rect.adjusted(-1, -1, 1, 1))
        # Link particles: density = share of bandwidth spent reading / writing.
        lk = g.link
        cy = lk.center().y()
        phase = (f.clock_s / f.clock_total_s * 40.0) % 1.0 if f.clock_total_s > 0 else 0.0
        for util, dy, color, direction in (
            (f.read_util, -14, READ_C, 1),
            (f.write_util, 14, WRITE_C, -1),
        ):
            if util <= 0.01:
                continue
            c = QColor(color)
            c.setAlpha(int(90 + 165 * min(1.0, util)))
            count = 6
            span = lk.width() - 16
            for k in range(count):
                u = (phase * direction + k / count) % 1.0
                x = lk.x() + 8 + span * u
                p.fillRect(QRectF(x - 4, cy + dy - 4, 8, 8), c)
        # SRAM slots: bands, top-down, height ∝ bytes (the box is the SM's capacity).
        box = g.sram
        cap = max(1, f.sram_capacity)
        y = box.y() + 1
        slot_rects: dict[str, QRectF] = {}
        overflow = False
        for s in f.slots:
            h = max(2.0, (box.height() - 2) * s.bytes / cap)
            if y + h > box.bottom() - 1:
                h = max(2.0, box.bottom() - 1 - y)
                overflow = True
            r = QRectF(box.x() + 1, y, box.width() - 2, h)
            slot_rects[s.name] = r
            if s.resident:
                p.fillRect(r, SLOT_FILL.get(s.matrix, SLOT_FILL[""]))
            else:
                p.fillRect(r, QColor(255, 255, 255, 14))
            p.setPen(QPen(QColor("#101317"), 1))
            p.drawLine(QPointF(r.x(), r.bottom()), QPointF(r.right(), r.bottom()))
            if h >= 12:
                p.setPen(TEXT if s.resident else FAINT)
                p.setFont(self.f_small)
                p.drawText(
                    r.adjusted(4, 0, -2, 0),
                    Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                    s.name,
                )
            y += h
        if overflow:
            p.fillRect(QRectF(box.x(), box.bottom() - 4, box.width(), 4), QColor("#ff4d4d"))
            self._static_text(
                p,
                QPointF(box.x() + 4, box.bottom() - 18),
                "> capacity",
                QColor("#ff6b6b"),
                self.f_small,
            )
        elif box.bottom() - y > 34:
            self._static_text(p, QPointF(box.x() + 4, y + 4), "free", FAINT, self.f_small)
        active = [s for s in f.slots if s.active]
        kind_c = KIND_COLOR.get(st.kind, COMPUTE_C)
        if not f.done:
            for s in active:
                r = slot_rects[s.name]
                p.setPen(QPen(kind_c, 2))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(r.adjusted(1, 0, -1, 0))
        # Flying tile: HBM region -> SRAM slot (read) or back (write).
        if (
            not f.done
            and hbm_rect is not None
            and active
            and (f.step_wall_s >= 0.03 or f.gliding)
            and 0.0 < f.step_phase < 1.0
        ):
            ch_y = cy + (-14 if st.kind == READ else 14)  # through the link's channel
            path = [
                QPointF(hbm_rect.right(), hbm_rect.center().y()),
                QPointF(lk.x() + 4, ch_y),
                QPointF(lk.right() - 4, ch_y),
                QPointF(box.x(), slot_rects[active[0].name].center().y()),
            ]
            if st.kind == WRITE:
                path.reverse()
            pos = _along(path, f.step_phase)
            line_c = QColor(kind_c)
            line_c.setAlpha(110)
            p.setPen(QPen(line_c, 1, Qt.PenStyle.DashLine))
            p.drawPolyline(path)
            p.fillRect(QRectF(pos.x() - 7, pos.y() - 7, 14, 14), kind_c)
            p.setPen(QPen(QColor("#ffffff"), 1))
            p.drawRect(QRectF(pos.x() - 7, pos.y() - 7, 14, 14))
        # Legend under the SRAM box.
        p.setFont(self.f_small)
        lg = g.legend
        p.save()
        p.setClipRect(lg.adjusted(0, 0, 0, 2))
        row_h = 13
        cols = 1 if lg.height() >= row_h * len(f.slots) else 2
        col_w = lg.width() / cols
        per_col = math.ceil(len(f.slots) / cols)
        for k, s in enumerate(f.slots):
            cx0 = lg.x() + (k // per_col) * col_w
            cy0 = lg.y() + (k % per_col) * row_h
            if cy0 + row_h > lg.bottom() + 2:
                break
            sw = SLOT_FILL.get(s.matrix, SLOT_FILL[""])
            p.fillRect(QRectF(cx0, cy0 + 3, 8, 8), sw if s.resident else QColor(255, 255, 255, 30))
            if s.active and not f.done:
                p.setPen(kind_c)
            else:
                p.setPen(TEXT if s.resident else FAINT)
            self._static_text(
                p, QPointF(cx0 + 12, cy0), f"{s.name}  {fmt_bytes(s.bytes)}", None, self.f_small
            )
        p.restore()
        # Counters (their end values are in the background).
        c, tot = f.counters, f.totals
        values = (
            fmt_bytes(c.bytes_read),
            fmt_bytes(c.bytes_written),
            fmt_flops(c.flops),
            fmt_bytes(c.sram_bytes),
            fmt_seconds(c.time_s),
        )
        cr = g.counters
        vx = cr.x() + CAPTION_W
        p.setFont(self.f_mono_b)
        for k, now in enumerate(values):
            yy = cr.y() + 22 + k * 19
            p.setPen((READ_C, WRITE_C, COMPUTE_C, TEXT, TEXT)[k])
            p.drawText(
                QRectF(vx, yy, TOTAL_X - CAPTION_W - 4, 17),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                now,
            )
        # Counter bars: read and written so far, to one scale across lanes.
        yy = cr.y() + 22 + 5 * 19 + 8
        p.setFont(self.f_small)
        scale_max = max((fr.totals.bytes_read + fr.totals.bytes_written) for fr in self._frames)
        bar_w = cr.width() - 8
        rw = bar_w * c.bytes_read / scale_max if scale_max else 0
        ww = bar_w * c.bytes_written / scale_max if scale_max else 0
        full = bar_w * (tot.bytes_read + tot.bytes_written) / scale_max if scale_max else 0
        p.setPen(QPen(PANEL_EDGE, 1))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(QRectF(cr.x(), yy, full, 12))
        p.fillRect(QRectF(cr.x(), yy, rw, 12), READ_C)
        p.fillRect(QRectF(cr.x() + rw, yy, ww, 12), WRITE_C)
        self._static_text(
            p, QPointF(cr.x(), yy + 28), f"level of detail: {f.lod}", DIM, self.f_small
        )


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
