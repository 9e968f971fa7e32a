"""The backward lane: FlashAttention's backward tile order, played step by step.

Three columns of tiles in HBM (K/V, Q/dO, the dQ accumulator) and the chip between them: the
K/V tile of the current block sits on chip for the whole block, the query tiles stream past it,
P_ij is recomputed on chip (the tile lights up as it happens, with a running count of tiles and
FLOPs spent again), and each dQ_i fills as the blocks add their share with atomics (with
deterministic dQ it stays empty: the dQ pass sums it after this kernel). Below, the kernel's
source (flash_bwd.cu, or its Hopper build flash_bwd_wgmma.cu) with the `// STEP` lines of the
current phase highlighted. The model is app/state/animation/backward_order.py; this view only
draws its frames.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QHBoxLayout,
    QPushButton,
    QSizePolicy,
    QSlider,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from gpu.algorithms import ALGORITHMS, TILED_MMA
from gpu.config import AttentionConfig

from ..kit.plain_text import PlainLabel
from ..state.animation.backward_order import BackwardFrame, BackwardTileOrder
from ..state.animation.kernel_source import (
    BACKWARD_PHASE_STEPS,
    BACKWARD_SOURCE_FILES,
    BACKWARD_SOURCE_LABELS,
)
from ..state.units import fmt_bytes, fmt_flops, fmt_int
from .colors import DARK, AnimColors
from .source_panel import SourcePanel

#: A pass plays in about this many seconds at most (long passes step several tiles a frame).
PASS_SECONDS = 20.0
FRAME_MS = 33
#: Most tiles a column draws one by one; beyond that each drawn row stands for several tiles.
MAX_DRAWN_TILES = 64


class BackwardCanvas(QWidget):
    """Paints one BackwardFrame (see the module docstring)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("backwardCanvas")
        self.setMinimumSize(520, 300)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.order: BackwardTileOrder | None = None
        self.frame: BackwardFrame | None = None
        self.colors: AnimColors = DARK
        self.paints = 0

    def show_frame(self, order: BackwardTileOrder, frame: BackwardFrame) -> None:
        self.order, self.frame = order, frame
        self.update()

    def paintEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        self.paints += 1
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        c = self.colors
        p.fillRect(self.rect(), c.bg)
        order, f = self.order, self.frame
        if order is None or f is None:
            return
        w, h = self.width(), self.height()
        top, bottom = 28.0, h - 12.0
        col_w = max(40.0, w * 0.12)
        xs = {"kv": 12.0, "q": w * 0.30, "dq": w - col_w - 12.0}
        chip = QRectF(w * 0.50, top + 20, w * 0.26, (bottom - top) * 0.6)
        p.setPen(c.text)
        p.drawText(QRectF(xs["kv"], 4, col_w + 40, 20), "K, V (HBM)")
        p.drawText(QRectF(xs["q"], 4, col_w + 60, 20), "Q, dO (HBM)")
        dq_title = "dQ: dQ pass" if order.config.deterministic else "dQ acc. (HBM)"
        p.drawText(QRectF(xs["dq"] - 20, 4, col_w + 40, 20), dq_title)
        p.drawText(QRectF(chip.left(), chip.top() - 20, chip.width(), 18), "on chip (SRAM)")

        def rows(count: int) -> tuple[int, float]:
            drawn = min(count, MAX_DRAWN_TILES)
            return drawn, (bottom - top) / drawn

        kv_drawn, kv_h = rows(order.kv_tiles)
        q_drawn, q_h = rows(order.q_tiles)

        def kv_row(j: int) -> int:
            return j * kv_drawn // order.kv_tiles

        def q_row(i: int) -> int:
            return i * q_drawn // order.q_tiles

        # K/V: stored blocks muted, the resident one in the K/V colour.
        for r in range(kv_drawn):
            rect = QRectF(xs["kv"], top + r * kv_h, col_w, max(1.0, kv_h - 1))
            j_last = ((r + 1) * order.kv_tiles - 1) // kv_drawn
            done = j_last < f.kv_stored
            p.fillRect(rect, c.dim if done else c.empty)
        resident = QRectF(xs["kv"], top + kv_row(f.kv_tile) * kv_h, col_w, max(2.0, kv_h - 1))
        p.fillRect(resident, c.read)
        # Q/dO: the streamed tile highlighted.
        for r in range(q_drawn):
            rect = QRectF(xs["q"], top + r * q_h, col_w, max(1.0, q_h - 1))
            p.fillRect(rect, c.empty)
        if f.q_tile is not None:
            cur = QRectF(xs["q"], top + q_row(f.q_tile) * q_h, col_w, max(2.0, q_h - 1))
            p.fillRect(cur, c.compute)
            p.setPen(QPen(c.compute, 2))
            p.drawLine(cur.right(), cur.center().y(), chip.left(), chip.center().y())
        p.setPen(QPen(c.read, 2))
        p.drawLine(resident.right(), resident.center().y(), chip.left(), chip.top() + 12)
        # dQ accumulator: each tile filled by the share of blocks that have added to it.
        for r in range(q_drawn):
            i = min(order.q_tiles - 1, (r * order.q_tiles) // q_drawn)
            rect = QRectF(xs["dq"], top + r * q_h, col_w, max(1.0, q_h - 1))
            p.fillRect(rect, c.empty)
            need = int(f.dq_needed[i])
            share = float(f.dq_added[i]) / need if need else 0.0
            p.fillRect(QRectF(rect.left(), rect.top(), rect.width() * share, rect.height()),
                       c.write)  # fmt: skip
        if f.phase == "dQ_atomic" and f.q_tile is not None:
            cur = QRectF(xs["dq"], top + q_row(f.q_tile) * q_h, col_w, max(2.0, q_h - 1))
            p.setPen(QPen(c.write, 2))
            p.drawRect(cur)
            p.drawLine(chip.right(), chip.center().y(), cur.left(), cur.center().y())
        # The chip: K_j, V_j resident; Q_i, dO_i streaming; P_ij (recomputed) and dS_ij.
        p.setPen(QPen(c.text, 1))
        p.drawRect(chip)
        cells = [
            ("K_j V_j", c.read, True),
            ("Q_i dO_i", c.compute, f.q_tile is not None),
            ("P_ij", c.matrix["P"], f.phase in ("recompute_P", "dV", "dP_dS")),
            ("dS_ij", c.matrix["S"], f.phase in ("dP_dS", "dK", "dQ_atomic")),
            ("dK_j dV_j", c.write, True),
        ]
        ch = chip.height() / len(cells)
        for k, (label, color, on) in enumerate(cells):
            cell = QRectF(chip.left() + 6, chip.top() + k * ch + 3, chip.width() - 12, ch - 6)
            fill = QColor(color)
            if not on:
                fill.setAlpha(50)
            p.fillRect(cell, fill)
            p.setPen(c.label_on_fill)
            text = label + ("  ← recomputed now" if label == "P_ij" and f.recomputing else "")
            p.drawText(cell, Qt.AlignmentFlag.AlignCenter, text)
        if f.recomputing:
            p.setPen(QPen(c.matrix["P"], 3))
            p.drawRect(chip.adjusted(-3, -3, 3, 3))


class BackwardLane(QWidget):
    """The backward lane with its controls (play, scrub) and counters; see the module
    docstring. `set_config` follows the app's config (any pass: the lane always shows the
    backward of that shape)."""

    def __init__(
        self,
        parent: QWidget | None = None,
        algorithm: str = TILED_MMA,
        kernel_dir: Path | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("backwardLane")
        self.algorithm = algorithm
        self.order: BackwardTileOrder | None = None
        self.step = 0
        self._stride = 1
        self.play_button = QPushButton("Play", self)
        self.play_button.setObjectName("backwardPlay")
        self.play_button.setToolTip("Play the backward's tile order (Space)")
        self.play_button.clicked.connect(self.toggle)
        self.timeline = QSlider(Qt.Orientation.Horizontal, self)
        self.timeline.setObjectName("backwardTimeline")
        self.timeline.setToolTip("Scrub through the backward's steps, in launch order")
        self.timeline.valueChanged.connect(self.seek)
        self.title = PlainLabel(self)
        self.title.setObjectName("backwardTitle")
        self.title.setWordWrap(True)
        self.caption = PlainLabel(self)
        self.caption.setObjectName("backwardCaption")
        self.caption.setWordWrap(True)
        self.counters = PlainLabel(self)
        self.counters.setObjectName("backwardCounters")
        self.counters.setWordWrap(True)
        self.canvas = BackwardCanvas(self)
        self.source_panel = SourcePanel(
            self, kernel_dir, files=BACKWARD_SOURCE_FILES, labels=BACKWARD_SOURCE_LABELS
        )
        self.source_panel.setObjectName("backwardSourcePanel")
        row = QHBoxLayout()
        row.addWidget(self.play_button)
        row.addWidget(self.timeline, 1)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.canvas)
        split.addWidget(self.source_panel)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay = QVBoxLayout(self)
        lay.addWidget(self.title)
        lay.addLayout(row)
        lay.addWidget(split, 1)
        lay.addWidget(self.caption)
        lay.addWidget(self.counters)
        self._timer = QTimer(self)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self._tick)

    def set_colors(self, colors: AnimColors) -> None:
        self.canvas.colors = colors
        self.canvas.update()
        self.source_panel.set_colors(colors)

    def set_config(self, config: AttentionConfig) -> None:
        order = BackwardTileOrder(config, self.algorithm)
        if self.order is not None and self.order.config == config:
            return
        self.order = order
        frames = PASS_SECONDS * 1000 / FRAME_MS
        self._stride = max(1, round(order.total_steps / frames))
        self.timeline.blockSignals(True)
        self.timeline.setRange(0, order.total_steps - 1)
        self.timeline.setValue(0)
        self.timeline.blockSignals(False)
        label = ALGORITHMS[self.algorithm].label
        self.title.setText(
            f"Backward of {config.forward().label()} ({label} tiles: "
            f"{order.block_m} query rows stream past {order.block_n} keys held per block) — "
            f"{fmt_int(order.kv_tiles)} blocks, {fmt_int(order.total_steps)} steps for one "
            "(batch, head), in launch order (not to time scale)"
            + (
                "; deterministic dQ: this kernel adds no dQ, the dQ pass (flash_bwd_dq, not "
                "played) sums it afterwards, one block per query tile"
                if config.deterministic
                else ""
            )
        )
        self.seek(0)

    def seek(self, step: int) -> None:
        if self.order is None:
            return
        self.step = max(0, min(self.order.total_steps - 1, int(step)))
        if self.timeline.value() != self.step:
            self.timeline.blockSignals(True)
            self.timeline.setValue(self.step)
            self.timeline.blockSignals(False)
        f = self.order.frame(self.step)
        self.canvas.show_frame(self.order, f)
        steps = BACKWARD_PHASE_STEPS.get(f.phase, ())
        for kernel in BACKWARD_SOURCE_FILES:
            self.source_panel.show_step(kernel, kernel, steps)
        self.caption.setText(f.text)
        self.counters.setText(
            f"step {fmt_int(f.step + 1)} of {fmt_int(f.total_steps)} · one head: "
            f"{fmt_bytes(f.bytes_read)} read, {fmt_bytes(f.bytes_written)} written, "
            f"{fmt_flops(f.flops)} · P recomputed: {fmt_int(f.recomputed_tiles)} tiles, "
            f"{fmt_flops(f.recompute_flops)} spent again · dK/dV stored: "
            f"{fmt_int(f.kv_stored)} of {fmt_int(self.order.kv_tiles)} blocks"
        )

    @property
    def playing(self) -> bool:
        return self._timer.isActive()

    def toggle(self) -> None:
        if self.playing:
            self.pause()
        else:
            self.play()

    def play(self) -> None:
        if self.order is not None and self.step >= self.order.total_steps - 1:
            self.seek(0)
        self._timer.start()
        self.play_button.setText("Pause")

    def pause(self) -> None:
        self._timer.stop()
        self.play_button.setText("Play")

    def _tick(self) -> None:
        if self.order is None:
            return self.pause()
        self.seek(self.step + self._stride)
        if self.step >= self.order.total_steps - 1:
            self.pause()
        return None
