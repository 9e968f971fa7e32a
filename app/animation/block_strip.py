"""`BlockStrip`: the selected block's traced phases on its own time line, with the replay
cursor; for a warp-specialized kernel also one row per warp role (the producer's copy issues,
each consumer's GEMM turns, softmax and waits), where its real overlap is plain to see."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from gpu.files.trace import BlockTrace, Trace

from ..state.animation.warp_roles import (
    EPILOGUE,
    GEMM,
    ISSUE,
    SOFTMAX,
    WAIT,
    WAIT_PV,
    RoleTimeline,
    traced_roles,
)
from ..state.units import fmt_ns
from .colors import DARK, AnimColors

BASE_HEIGHT = 64
ROLE_ROW = 16
ROLE_KEYS = (
    (GEMM, "GEMMs issued, until S_j lands"),
    (SOFTMAX, "softmax"),
    (WAIT_PV, "waits for P·V"),
    (WAIT, "waits for K_j and its turn"),
    (ISSUE, "producer: a TMA copy issued"),
)


class BlockStrip(QWidget):
    """The selected block's phases on its own time line, with the replay cursor."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("traceBlockStrip")
        self.setFixedHeight(BASE_HEIGHT)
        self.trace: Trace | None = None
        self.block: BlockTrace | None = None
        self.roles: RoleTimeline | None = None
        self.cursor_ns: int | None = None
        self.caption = ""
        self.f_small = QFont("DejaVu Sans", 8)
        self.f_norm = QFont("DejaVu Sans", 9)
        self.c: AnimColors = DARK

    def set_colors(self, colors: AnimColors) -> None:
        self.c = colors
        self.update()

    def set_block(self, trace: Trace | None, block: BlockTrace | None, caption: str = "") -> None:
        self.trace, self.block, self.caption = trace, block, caption
        self.roles = traced_roles(block) if block is not None else None
        rows = self.roles.consumers + 1 if self.roles is not None else 0
        self.setFixedHeight(BASE_HEIGHT + (rows * ROLE_ROW + 18 if rows else 0))
        self.cursor_ns = None
        self.update()

    def set_cursor(self, t_ns: int | None, caption: str = "") -> None:
        self.cursor_ns = t_ns
        if caption:
            self.caption = caption
        self.update()

    def role_rows(self) -> list[QRectF]:
        """Where each role's row is drawn (producer first)."""
        if self.roles is None:
            return []
        left = 8 + QFontMetrics(self.f_small).horizontalAdvance("consumer 0") + 10
        top = BASE_HEIGHT - 4
        return [
            QRectF(left, top + k * ROLE_ROW, self.width() - left - 8, ROLE_ROW - 3)
            for k in range(self.roles.consumers + 1)
        ]

    def paintEvent(self, event: QPaintEvent) -> None:
        c = self.c
        p = QPainter(self)
        p.fillRect(self.rect(), c.bg)
        p.setFont(self.f_norm)
        b = self.block
        if b is None:
            p.setPen(c.dim)
            p.drawText(
                self.rect(), Qt.AlignmentFlag.AlignCenter, "click a block to replay its tile steps"
            )
            p.end()
            return
        rows = self.role_rows()
        left = rows[0].x() if rows else 8.0
        bar = QRectF(left, 24, self.width() - left - 8, 20)
        dur = max(1, b.end_ns - b.start_ns)

        def x(t: float) -> float:
            return bar.x() + bar.width() * (t - b.start_ns) / dur

        p.fillRect(bar, c.panel)
        for name, _j, t0, t1 in b.phase_spans():
            color = c.phase.get(name, c.kernel.get(name, c.compute))
            p.fillRect(QRectF(x(t0), bar.y(), max(0.5, x(t1) - x(t0)), bar.height()), color)
        # tile boundaries, thinned to at least 6 px apart
        loads = [t for name, _j, t, _t1 in b.phase_spans() if name == "load_K_j"]
        edge = QColor(c.bg)
        edge.setAlpha(140)
        p.setPen(QPen(edge, 1))
        last = -1e9
        for t in loads:
            xx = x(t)
            if xx - last >= 6:
                p.drawLine(QPointF(xx, bar.y()), QPointF(xx, bar.bottom()))
                last = xx
        if self.roles is not None:
            self._paint_roles(p, rows, lambda t: x(b.start_ns + t))
        bottom = rows[-1].bottom() if rows else bar.bottom()
        if self.cursor_ns is not None:
            cx = x(self.cursor_ns)
            p.fillRect(QRectF(cx - 1, bar.y() - 4, 3, bottom - bar.y() + 8), c.cursor)
        p.setPen(c.text)
        p.drawText(
            QRectF(8, 2, self.width() - 16, 20),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            QFontMetrics(self.f_norm).elidedText(
                self.caption, Qt.TextElideMode.ElideRight, self.width() - 16
            ),
        )
        p.setFont(self.f_small)
        p.setPen(c.dim)
        axis_y = bar.bottom() + 2 if not rows else bottom + 2
        p.drawText(QRectF(left, axis_y, 120, 14), Qt.AlignmentFlag.AlignLeft, "0")
        p.drawText(
            QRectF(bar.right() - 120, axis_y, 120, 14),
            Qt.AlignmentFlag.AlignRight,
            fmt_ns(dur),
        )
        p.end()

    def _paint_roles(self, p: QPainter, rows: list[QRectF], x) -> None:
        tl = self.roles
        assert tl is not None
        c = self.c
        fm = QFontMetrics(self.f_small)
        p.setFont(self.f_small)
        for k, row in enumerate(rows):
            p.fillRect(row, c.panel)
            p.setPen(c.dim)
            p.drawText(
                QRectF(4, row.y(), row.x() - 8, row.height()),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                tl.role_names[k],
            )
        for s in tl.spans(0, tl.tiles):
            row = rows[s.role]
            x0, x1 = x(s.t0), x(s.t1)
            if s.kind == ISSUE:
                p.fillRect(QRectF(x0 - 0.5, row.y(), 1.2, row.height()), c.role[ISSUE])
            elif s.kind in (GEMM, SOFTMAX, WAIT_PV, WAIT, EPILOGUE):
                p.fillRect(
                    QRectF(x0, row.y() + 1, max(0.8, x1 - x0), row.height() - 2), c.role[s.kind]
                )
        # the legend of the role colours, right after the "0" of the axis
        lx = rows[0].x() + 30
        ly = rows[-1].bottom() + 3
        for kind, label in ROLE_KEYS:
            w = fm.horizontalAdvance(label)
            if lx + w + 14 > rows[0].right() - 60:
                break
            p.fillRect(QRectF(lx, ly + 3, 9, 8), c.role[kind])
            p.setPen(c.dim)
            p.drawText(QPointF(lx + 12, ly + 11), label)
            lx += w + 26
