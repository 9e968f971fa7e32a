"""`BlockStrip`: the selected block's traced phases on its own time line, with the replay
cursor."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QPainter,
    QPaintEvent,
    QPen,
)
from PySide6.QtWidgets import (
    QWidget,
)

from gpu.trace import (
    BlockTrace,
    Trace,
)

from .canvas import (
    BG,
    COMPUTE_C,
    DIM,
    PANEL,
    TEXT,
)
from .trace_style import CURSOR_C, KERNEL_COLORS, PHASE_COLORS, fmt_ns


class BlockStrip(QWidget):
    """The selected block's phases on its own time line, with the replay cursor."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("traceBlockStrip")
        self.setFixedHeight(64)
        self.trace: Trace | None = None
        self.block: BlockTrace | None = None
        self.cursor_ns: int | None = None
        self.caption = ""
        self.f_small = QFont("DejaVu Sans", 8)
        self.f_norm = QFont("DejaVu Sans", 9)

    def set_block(self, trace: Trace | None, block: BlockTrace | None, caption: str = "") -> None:
        self.trace, self.block, self.caption = trace, block, caption
        self.cursor_ns = None
        self.update()

    def set_cursor(self, t_ns: int | None, caption: str = "") -> None:
        self.cursor_ns = t_ns
        if caption:
            self.caption = caption
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), BG)
        p.setFont(self.f_norm)
        b = self.block
        if b is None:
            p.setPen(DIM)
            p.drawText(
                self.rect(), Qt.AlignmentFlag.AlignCenter, "click a block to replay its tile steps"
            )
            p.end()
            return
        bar = QRectF(8, 24, self.width() - 16, 20)
        dur = max(1, b.end_ns - b.start_ns)

        def x(t: float) -> float:
            return bar.x() + bar.width() * (t - b.start_ns) / dur

        p.fillRect(bar, PANEL)
        for name, _j, t0, t1 in b.phase_spans():
            color = PHASE_COLORS.get(name, KERNEL_COLORS.get(name, COMPUTE_C))
            p.fillRect(QRectF(x(t0), bar.y(), max(0.5, x(t1) - x(t0)), bar.height()), color)
        # tile boundaries, thinned to at least 6 px apart
        loads = [t for name, _j, t, _t1 in b.phase_spans() if name == "load_K_j"]
        p.setPen(QPen(QColor(0, 0, 0, 140), 1))
        last = -1e9
        for t in loads:
            xx = x(t)
            if xx - last >= 6:
                p.drawLine(QPointF(xx, bar.y()), QPointF(xx, bar.bottom()))
                last = xx
        if self.cursor_ns is not None:
            cx = x(self.cursor_ns)
            p.fillRect(QRectF(cx - 1, bar.y() - 4, 3, bar.height() + 8), CURSOR_C)
        p.setPen(TEXT)
        p.drawText(
            QRectF(8, 2, self.width() - 16, 20),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            QFontMetrics(self.f_norm).elidedText(
                self.caption, Qt.TextElideMode.ElideRight, self.width() - 16
            ),
        )
        p.setFont(self.f_small)
        p.setPen(DIM)
        p.drawText(QRectF(8, bar.bottom() + 2, 120, 14), Qt.AlignmentFlag.AlignLeft, "0")
        p.drawText(
            QRectF(bar.right() - 120, bar.bottom() + 2, 120, 14),
            Qt.AlignmentFlag.AlignRight,
            fmt_ns(dur),
        )
        p.end()
