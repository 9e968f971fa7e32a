"""The decode lanes: naive decode and the split-KV kernel, played on one clock.

Two bands, one per lane. Naive's: the cache's K and V in HBM, the score row S (q×N per head)
that gemm_qk writes to HBM tile by tile, softmax reads back and turns into P, and gemm_pv reads
again with V. The split-KV kernel's: the same cache cut into its splits (the kernel's own plan,
gpu.launch.decode_split), every split streaming its range into its block's SRAM at once, a
block per split on the SMs holding its running (m, l, O), the partials written to HBM and the
last block merging them into O. Below, the split kernel's source (decode_split.cu) with the
`// STEP` lines of the current step highlighted, and naive's softmax kernel. The model is
app/state/animation/decode_order.py; this view only draws its frames.
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

from gpu.algorithms import NAIVE, SPLIT_KV
from gpu.config import AttentionConfig
from gpu.model.costmodel import GpuSpec
from gpu.results import RunResult

from ..kit.plain_text import PlainLabel
from ..state.animation.decode_order import DecodeFrame, DecodeLane, DecodeLanes
from ..state.units import fmt_bytes, fmt_flops, fmt_int, fmt_seconds
from ..work.background import LatestOnly
from .colors import DARK, AnimColors
from .source_panel import SourcePanel

#: A pass plays in about this many seconds at speed 1×.
PASS_SECONDS = 12.0
FRAME_MS = 33
#: Positions of the timeline (the clock is continuous; the slider is its share).
TIMELINE_STEPS = 1000
#: Most split blocks drawn one by one; beyond that each drawn block stands for several.
MAX_DRAWN_SPLITS = 24

SOURCE_FILES = {SPLIT_KV: "decode_split.cu", NAIVE: "softmax.cu"}
SOURCE_LABELS = {
    SPLIT_KV: "split-KV lane: decode_split.cu",
    NAIVE: "naive lane: softmax.cu (its GEMMs are cuBLAS)",
}
#: The `// STEP` tags of each lane step (naive's GEMMs have no source of ours).
SOURCE_STEPS: dict[str, tuple[str, ...]] = {
    "load_q": ("load_q",),
    "stream_kv": ("stream_kv", "scores", "online_softmax", "accumulate_o"),
    "combine_groups": ("combine_groups",),
    "write_partial": ("write_partial",),
    "merge_splits": ("count_split", "merge_splits"),
    "store_o": ("store_o",),
    "softmax_write_P": ("softmax_read_S", "softmax_write_P"),
}


class DecodeCanvas(QWidget):
    """Paints the two lanes' frames (see the module docstring)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("decodeCanvas")
        self.setMinimumSize(520, 320)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.lanes: DecodeLanes | None = None
        self.frames: tuple[DecodeFrame, ...] = ()
        self.colors: AnimColors = DARK
        self.paints = 0

    def show_frames(self, lanes: DecodeLanes, frames: tuple[DecodeFrame, ...]) -> None:
        self.lanes, self.frames = lanes, frames
        self.update()

    def paintEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        self.paints += 1
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.fillRect(self.rect(), self.colors.bg)
        if self.lanes is None or not self.frames:
            return
        h = self.height() / 2
        for k, (lane, frame) in enumerate(zip(self.lanes.lanes, self.frames, strict=True)):
            band = QRectF(8, k * h + 4, self.width() - 16, h - 8)
            if lane.algorithm == NAIVE:
                self._naive(p, band, lane, frame)
            else:
                self._split(p, band, lane, frame)

    # ------------------------------------------------------------------ pieces

    def _title(self, p: QPainter, band: QRectF, text: str, frame: DecodeFrame) -> None:
        c = self.colors
        p.setPen(c.text)
        p.drawText(QRectF(band.left(), band.top(), band.width(), 18), text)
        bar = QRectF(band.left(), band.top() + 20, band.width(), 3)
        p.fillRect(bar, c.empty)
        share = (frame.step + frame.phase) / max(1, frame.total_steps)
        p.fillRect(QRectF(bar.left(), bar.top(), bar.width() * share, 3), c.progress)

    def _bar(
        self,
        p: QPainter,
        rect: QRectF,
        label: str,
        fill: float,
        color: QColor,
        lit: tuple[float, float] | None = None,
        lit_color: QColor | None = None,
    ) -> None:
        """A matrix in HBM as a bar: `fill` of it drawn in `color` (written so far), and the
        span `lit` (shares of its length) that the current step touches."""
        c = self.colors
        p.fillRect(rect, c.empty)
        if fill > 0:
            p.fillRect(QRectF(rect.left(), rect.top(), rect.width() * fill, rect.height()), color)
        if lit is not None:
            a, b = lit
            span = QRectF(
                rect.left() + rect.width() * a,
                rect.top() - 2,
                max(2.0, rect.width() * (b - a)),
                rect.height() + 4,
            )
            p.fillRect(span, lit_color or c.read)
        p.setPen(c.label_on_fill if fill > 0.5 else c.text)
        p.drawText(rect.adjusted(6, 0, -6, 0), Qt.AlignmentFlag.AlignVCenter, label)

    def _naive(self, p: QPainter, band: QRectF, lane: DecodeLane, f: DecodeFrame) -> None:
        c = self.colors
        cfg = lane.config
        self._title(
            p,
            band,
            f"naive ({f.kernel}): three kernels, the scores (q×N per head) through HBM",
            f,
        )
        left = band.left() + 70
        width = band.width() * 0.70 - 70
        row_h = min(22.0, (band.height() - 40) / 6)
        y = band.top() + 30
        n = cfg.seq_len
        tile = None
        if f.tile >= 0 and f.kernel in ("gemm_qk", "gemm_pv"):
            start = int(lane.schedule.key_start[f.step])
            tile = (start / n, (start + int(lane.schedule.keys[f.step])) / n)
        rows = (
            ("K", 0.0, c.matrix.get("K", c.read), tile if f.kernel == "gemm_qk" else None),
            ("S", f.s_written, c.matrix.get("S", c.write), self._s_lit(f, tile)),
            ("P", f.p_written, c.matrix.get("P", c.write), self._p_lit(f, tile)),
            ("V", 0.0, c.matrix.get("V", c.read), tile if f.kernel == "gemm_pv" else None),
        )
        for k, (name, fill, color, lit) in enumerate(rows):
            rect = QRectF(left, y + k * (row_h + 6), width, row_h)
            p.setPen(c.text)
            p.drawText(QRectF(band.left(), rect.top(), 66, row_h), Qt.AlignmentFlag.AlignVCenter,
                       f"{name} (HBM)")  # fmt: skip
            text = f"{fmt_int(n)} keys" if name in "KV" else "q×N scores of each query head"
            lit_color = c.write if name in "SP" and lit is not None and self._writing(f) else c.read
            self._bar(p, rect, text, fill, color, lit, lit_color)
        chip = QRectF(left + width + 16, y, band.right() - left - width - 16, 4 * (row_h + 6) - 6)
        self._chip(p, chip, self._naive_chip_text(f), not f.done)
        o = QRectF(chip.left(), chip.bottom() + 8, chip.width(), row_h)
        self._bar(p, o, "O (HBM)", f.o_written, c.matrix.get("O", c.write))

    @staticmethod
    def _writing(f: DecodeFrame) -> bool:
        return f.kernel in ("gemm_qk", "softmax")

    @staticmethod
    def _s_lit(f: DecodeFrame, tile: tuple[float, float] | None) -> tuple[float, float] | None:
        if f.kernel == "gemm_qk":
            return tile
        if f.kernel == "softmax":
            return (0.0, 1.0)  # the row is read whole, then P written
        return None

    @staticmethod
    def _p_lit(f: DecodeFrame, tile: tuple[float, float] | None) -> tuple[float, float] | None:
        if f.kernel == "softmax":
            return (0.0, 1.0)
        if f.kernel == "gemm_pv":
            return tile
        return None

    @staticmethod
    def _naive_chip_text(f: DecodeFrame) -> str:
        return {
            "gemm_qk": "SRAM: Q rows, K tile\n→ S tile (to HBM)",
            "softmax": "SRAM: a row of S\n→ P row (to HBM)",
            "gemm_pv": "SRAM: P tile, V tile\n→ O accumulating",
        }.get(f.kernel, "")

    def _chip(self, p: QPainter, rect: QRectF, text: str, lit: bool) -> None:
        c = self.colors
        p.setPen(QPen(c.box_edge, 1))
        fill = QColor(c.compute)
        fill.setAlpha(170 if lit else 50)
        p.fillRect(rect, fill)
        p.drawRect(rect)
        p.setPen(c.label_on_fill)
        p.drawText(rect.adjusted(4, 2, -4, -2), Qt.AlignmentFlag.AlignCenter, text)

    def _split(self, p: QPainter, band: QRectF, lane: DecodeLane, f: DecodeFrame) -> None:
        c = self.colors
        plan = lane.schedule.plan
        assert plan is not None
        self._title(
            p,
            band,
            f"split-KV: {plan.splits} splits of {fmt_int(plan.keys_per_split)} keys streaming "
            "at once, partial (m, l, O) merged",
            f,
        )
        n = lane.config.seq_len
        left, width = band.left() + 70, band.width() - 78
        row_h = min(22.0, (band.height() - 40) / 6)
        y = band.top() + 30
        cache = QRectF(left, y, width, row_h)
        p.setPen(c.text)
        p.drawText(QRectF(band.left(), y, 66, row_h), Qt.AlignmentFlag.AlignVCenter, "K, V (HBM)")
        p.fillRect(cache, c.empty)
        drawn = min(plan.splits, MAX_DRAWN_SPLITS)
        per = plan.keys_per_split
        streaming = f.name == "stream_kv" and not f.done
        for s, keys in enumerate(f.keys_streamed):
            x0 = left + width * (s * per) / n
            length = min(per, n - s * per)
            x1 = left + width * (s * per + length) / n
            done = QRectF(x0, cache.top(), (x1 - x0) * keys / max(1, length), row_h)
            p.fillRect(done, c.matrix.get("K", c.read))
            if streaming and keys < length:  # the chunk in flight
                w = max(2.0, (x1 - x0) * lane.keys_per_step / max(1, length))
                p.fillRect(QRectF(done.right(), cache.top() - 2, w, row_h + 4), c.read)
        p.setPen(QPen(c.bg, 1))
        for s in range(1, plan.splits):
            if plan.splits <= MAX_DRAWN_SPLITS or s % (plan.splits // drawn) == 0:
                x = left + width * (s * per) / n
                p.drawLine(int(x), int(cache.top()), int(x), int(cache.bottom()))
        p.setPen(c.text)
        p.drawText(cache.adjusted(6, 0, -6, 0), Qt.AlignmentFlag.AlignVCenter,
                   f"{fmt_int(n)} keys")  # fmt: skip
        # One block per split on the SMs, under its range: its SRAM chunk and its (m, l, O).
        blocks_y = cache.bottom() + 10
        box_h = row_h * 1.8
        p.drawText(QRectF(band.left(), blocks_y, 66, box_h), Qt.AlignmentFlag.AlignVCenter,
                   "SMs")  # fmt: skip
        for k in range(drawn):
            s = k * plan.splits // drawn
            x0 = left + width * k / drawn
            box = QRectF(x0 + 2, blocks_y, width / drawn - 4, box_h)
            length = min(per, n - s * per)
            active = streaming and f.keys_streamed[s] < length
            text = "m l O" if box.width() > 34 else ""
            self._chip(p, box, text, active or f.name in ("load_q", "combine_groups"))
        # The partials in HBM, then the merge into O.
        part_y = blocks_y + box_h + 10
        p.setPen(c.text)
        label = "partials" if plan.splits > 1 else "O (HBM)"
        p.drawText(QRectF(band.left(), part_y, 66, row_h), Qt.AlignmentFlag.AlignVCenter, label)
        if plan.splits > 1:
            parts = QRectF(left, part_y, width * 0.62, row_h)
            lit = (0.0, 1.0) if f.name in ("merge_splits", "store_o") and not f.done else None
            self._bar(
                p,
                parts,
                f"(m, l, O) × {plan.splits} splits, fp32",
                1.0 if f.partials_written else 0.0,
                c.write,
                lit,
                c.read,
            )
            merge = QRectF(parts.right() + 10, part_y, width * 0.38 - 10, row_h)
            self._bar(p, merge, "merge → O (HBM)", f.merged, c.matrix.get("O", c.write))
        else:
            o = QRectF(left, part_y, width, row_h)
            self._bar(p, o, "O written by each block", 1.0 if f.partials_written else 0.0,
                      c.matrix.get("O", c.write))  # fmt: skip


class DecodeLaneView(QWidget):
    """The decode lanes with their controls (play, scrub), captions and counters; see the
    module docstring. `set_config` follows a decode config (built off the GUI thread)."""

    def __init__(self, parent: QWidget | None = None, kernel_dir: Path | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("decodeLane")
        self.lanes: DecodeLanes | None = None
        self.t = 0.0
        self.step = 0
        self._bounds: list[float] = []
        self._asked: tuple | None = None
        self.worker = LatestOnly(self)
        self.play_button = QPushButton("Play", self)
        self.play_button.setObjectName("decodePlay")
        self.play_button.setToolTip("Play both decode lanes on one clock (Space)")
        self.play_button.clicked.connect(self.toggle)
        self.timeline = QSlider(Qt.Orientation.Horizontal, self)
        self.timeline.setObjectName("decodeTimeline")
        self.timeline.setRange(0, TIMELINE_STEPS)
        self.timeline.setToolTip("Scrub through the decode step: both lanes on one clock")
        self.timeline.valueChanged.connect(
            lambda v: self.seek_time(v / TIMELINE_STEPS * self.total_seconds)
        )
        self.time_label = PlainLabel(self)
        self.time_label.setObjectName("decodeTime")
        self.title = PlainLabel(self)
        self.title.setObjectName("decodeTitle")
        self.title.setWordWrap(True)
        self.captions = PlainLabel(self)
        self.captions.setObjectName("decodeCaptions")
        self.captions.setWordWrap(True)
        self.canvas = DecodeCanvas(self)
        self.source_panel = SourcePanel(self, kernel_dir, files=SOURCE_FILES, labels=SOURCE_LABELS)
        self.source_panel.setObjectName("decodeSourcePanel")
        row = QHBoxLayout()
        row.addWidget(self.play_button)
        row.addWidget(self.timeline, 1)
        row.addWidget(self.time_label)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.canvas)
        split.addWidget(self.source_panel)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        lay = QVBoxLayout(self)
        lay.addWidget(self.title)
        lay.addLayout(row)
        lay.addWidget(split, 1)
        lay.addWidget(self.captions)
        self._timer = QTimer(self)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self._tick)

    @property
    def total_seconds(self) -> float:
        return self.lanes.total_seconds if self.lanes is not None else 0.0

    @property
    def busy(self) -> bool:
        return self.worker.busy

    def set_colors(self, colors: AnimColors) -> None:
        self.canvas.colors = colors
        self.canvas.update()
        self.source_panel.set_colors(colors)

    def set_config(
        self, config: AttentionConfig, gpu: GpuSpec, results: dict[str, RunResult] | None = None
    ) -> None:
        """Show the decode of `config` on `gpu` (each lane on its measured clock where
        `results` timed it there); the lanes are built off the GUI thread."""
        results = dict(results or {})
        key = (config, gpu, tuple(sorted((a, id(r)) for a, r in results.items())))
        if key == self._asked:
            return
        self._asked = key
        self.worker.submit(lambda: DecodeLanes(config, gpu, results), self._adopt)

    def flush(self) -> None:
        """Build and show the lanes asked for now (tests, exports)."""
        self.worker.flush()

    def _adopt(self, lanes: DecodeLanes) -> None:
        self.lanes = lanes
        self._bounds = [0.0, *lanes.boundaries().tolist()]
        cfg, split = lanes.config, lanes.lanes[1]
        plan = split.schedule.plan
        assert plan is not None
        clocks = "; ".join(f"{lane.label} {lane.clock.label()}" for lane in lanes.lanes)
        self.title.setText(
            f"Decode of {cfg.label()} on {lanes.gpu.label.split(',')[0]}: one (batch, KV head) "
            f"of {fmt_int(cfg.kv_bh)}, all side by side. Split-KV: {fmt_int(plan.units)} units "
            f"× {plan.splits} splits = {fmt_int(plan.blocks)} blocks on {fmt_int(plan.slots)} "
            f"resident slots ({plan.wave_efficiency:.0%} filled, {plan.waves} "
            f"wave{'s' if plan.waves > 1 else ''}). Clock: {clocks}."
        )
        self.seek_time(0.0)

    def seek_time(self, t: float) -> None:
        if self.lanes is None:
            return
        self.t = min(max(0.0, t), self.total_seconds)
        self.step = max(0, sum(1 for b in self._bounds if b <= self.t) - 1)
        value = round(self.t / self.total_seconds * TIMELINE_STEPS) if self.total_seconds else 0
        if self.timeline.value() != value:
            self.timeline.blockSignals(True)
            self.timeline.setValue(value)
            self.timeline.blockSignals(False)
        frames = self.lanes.frames(self.t)
        self.canvas.show_frames(self.lanes, frames)
        for frame in frames:
            self.source_panel.show_step(frame.algorithm, frame.kernel,
                                        SOURCE_STEPS.get(frame.name, ()))  # fmt: skip
        self.time_label.setText(f"t = {fmt_seconds(self.t)} of {fmt_seconds(self.total_seconds)}")
        lines = []
        for lane, f in zip(self.lanes.lanes, frames, strict=True):
            lines.append(
                f"{lane.label}: {f.text} · all pairs: {fmt_bytes(f.bytes_read)} read, "
                f"{fmt_bytes(f.bytes_written)} written, {fmt_flops(f.flops)}"
                + (f" · done in {fmt_seconds(lane.total_seconds)}" if f.done else "")
            )
        self.captions.setText("\n".join(lines))

    def seek(self, step: int) -> None:
        """To the start of step `step` of the merged step ends (→ / ← in the Tiles tab)."""
        if not self._bounds:
            return
        step = max(0, min(len(self._bounds) - 1, int(step)))
        self.seek_time(self._bounds[step])
        self.step = step

    @property
    def playing(self) -> bool:
        return self._timer.isActive()

    def toggle(self) -> None:
        if self.playing:
            self.pause()
        else:
            self.play()

    def play(self) -> None:
        if self.lanes is None:
            return
        if self.t >= self.total_seconds:
            self.seek_time(0.0)
        self._timer.start()
        self.play_button.setText("Pause")

    def pause(self) -> None:
        self._timer.stop()
        self.play_button.setText("Play")

    def _tick(self) -> None:
        if self.lanes is None:
            return self.pause()
        self.seek_time(self.t + self.total_seconds * FRAME_MS / 1000 / PASS_SECONDS)
        if self.t >= self.total_seconds:
            self.pause()
        return None
