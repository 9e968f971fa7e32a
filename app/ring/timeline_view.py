"""The per-device timeline of a ring run: compute and communication on their two streams.

Measured runs draw their CUDA events (RingMeasurement.timeline), two lanes per device: the
compute stream (one bar per step: fused kernels and merges) and the communication stream (one
bar per step that sends: the K/V block out, the next one in), with the share of each transfer
hidden behind compute. Modelled rings draw the model's step times once, for every device alike.
A cursor follows the ring view's playhead. Painted from plain arrays; nothing is computed here.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
    QPixmap,
)
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from gpu.ring_timeline import COMM, COMPUTE, RingMeasurement

from ..kit.theme import Palette, palette
from ..state.ring.playback import MODEL_CLOCK, RingClock, shown_devices
from ..state.units import fmt_bytes, fmt_ms
from .view import device_color

LANE_H = 15.0
LANE_GAP = 3.0
DEVICE_GAP = 7.0
AXIS_H = 22.0


def nice_step(span: float, target: int = 6) -> float:
    """A 1-2-5 tick step giving about `target` ticks over `span`."""
    if span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


class RingTimelineView(QWidget):
    """See the module docstring. `lanes` lists the drawn (device, stream) rows (device -1: every
    device, modelled); `bars` counts the drawn intervals."""

    seekRequested = Signal(float)  # a click on the timeline: go to this time (ms)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ringTimeline")
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.clock: RingClock | None = None
        self.measurement: RingMeasurement | None = None
        self.word = "GPU"
        self.cursor_ms = 0.0
        self.lanes: list[tuple[int, str]] = []
        self.bars = 0
        self._hidden: dict[tuple[int, int], float] = {}
        self._palette: Palette = palette("dark")
        self._font = QFont(self.font())
        self._font.setPointSizeF(8.0)
        self.label_w = 120.0
        self._cache: QPixmap | None = None

    def sizeHint(self) -> QSize:
        return QSize(600, int(AXIS_H + 4 * (LANE_H + LANE_GAP) + 2 * DEVICE_GAP + 8))

    def minimumSizeHint(self) -> QSize:
        return QSize(320, 90)

    def set_palette(self, pal: Palette) -> None:
        self._palette = pal
        self._cache = None
        self.update()

    def set_run(
        self, clock: RingClock | None, measurement: RingMeasurement | None, word: str = "GPU"
    ) -> None:
        """Draw `clock` (measured or modelled; None: nothing to draw)."""
        self.clock, self.measurement, self.word = clock, measurement, word
        self._cache = None
        self._hidden = (
            {(d, s): f for d, s, f in measurement.hidden_fractions()}
            if measurement is not None and clock is not None and clock.rows > 1
            else {}
        )
        self.lanes = []
        if clock is not None and clock.timed:
            devices = shown_devices(clock.devices) if clock.rows > 1 else (-1,)
            for d in devices:
                self.lanes.append((d, COMPUTE))
                if clock.devices > 1:
                    self.lanes.append((d, COMM))
        metrics = QFontMetricsF(self._font)
        widest = max(
            (metrics.horizontalAdvance(self._lane_label(d, k)) for d, k in self.lanes), default=0
        )
        self.label_w = max(96.0, widest + 14)
        rows = len(self.lanes)
        groups = len({d for d, _ in self.lanes})
        height = AXIS_H + rows * (LANE_H + LANE_GAP) + groups * DEVICE_GAP + 8
        self.setMinimumHeight(int(max(90, min(height, 520))))
        self.updateGeometry()
        self.update()

    def set_cursor(self, t_ms: float) -> None:
        if t_ms != self.cursor_ms:
            self.cursor_ms = t_ms
            self.update()

    # ------------------------------------------------------------------ geometry

    def _x(self, t: float) -> float:
        span = self.clock.span_ms if self.clock is not None else 1.0
        width = max(self.width() - self.label_w - 12, 10)
        return self.label_w + width * t / span if span > 0 else self.label_w

    def _t(self, x: float) -> float:
        span = self.clock.span_ms if self.clock is not None else 1.0
        width = max(self.width() - self.label_w - 12, 10)
        return min(span, max(0.0, (x - self.label_w) / width * span))

    def _lane_tops(self) -> list[float]:
        tops, y, last = [], 4.0, None
        for d, _ in self.lanes:
            if last is not None and d != last:
                y += DEVICE_GAP
            tops.append(y)
            y += LANE_H + LANE_GAP
            last = d
        return tops

    def _spans(self, device: int, stream: str) -> np.ndarray:
        assert self.clock is not None
        row = self.clock.row(max(device, 0))
        return (self.clock.compute if stream == COMPUTE else self.clock.comm)[row]

    # ------------------------------------------------------------------ painting

    def paintEvent(self, event: QPaintEvent) -> None:
        """The lanes come from a cached image (a 1024-step ring has two thousand bars); only
        the cursor is drawn every frame."""
        p = QPainter(self)
        ratio = self.devicePixelRatioF()
        if self._cache is None or self._cache.size() != self.size() * ratio:
            self._cache = self._render(ratio)
        p.drawPixmap(0, 0, self._cache)
        if self.lanes and self.clock is not None:
            x = self._x(self.cursor_ms)
            bottom = self._lane_tops()[-1] + LANE_H + 4
            p.setPen(QPen(QColor(self._palette.cursor), 1.2, Qt.PenStyle.DashLine))
            p.drawLine(QPointF(x, 2), QPointF(x, bottom))
        p.end()

    def _render(self, ratio: float) -> QPixmap:
        pixmap = QPixmap(self.size() * ratio)
        pixmap.setDevicePixelRatio(ratio)
        pal = self._palette
        pixmap.fill(QColor(pal.background))
        p = QPainter(pixmap)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setFont(self._font)
        self.bars = 0
        if not self.lanes or self.clock is None:
            p.setPen(QColor(pal.muted))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "No timeline to show.")
        else:
            tops = self._lane_tops()
            for (device, stream), top in zip(self.lanes, tops, strict=True):
                self._paint_lane(p, device, stream, top, self.clock)
            self._paint_axis(p, tops[-1] + LANE_H + 6)
        p.end()
        return pixmap

    def resizeEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().resizeEvent(event)
        self._cache = None

    def _paint_lane(
        self, p: QPainter, device: int, stream: str, top: float, clock: RingClock
    ) -> None:
        pal = self._palette
        dark = pal.name == "dark"
        everyone = device < 0
        label = self._lane_label(device, stream)
        p.setPen(QColor(pal.foreground if stream == COMPUTE else pal.muted))
        p.drawText(
            QRectF(4, top, self.label_w - 8, LANE_H),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            label,
        )
        spans = self._spans(device, stream)
        width = max(self.width() - self.label_w - 12, 10)
        scale = width / clock.span_ms if clock.span_ms > 0 else 0.0
        xs = self.label_w + spans * scale  # (steps, 2): every bar's ends at once
        metrics = p.fontMetrics()
        for step in np.nonzero(np.isfinite(spans).all(axis=1))[0]:
            x0, x1 = xs[step]
            rect = QRectF(x0, top, max(x1 - x0, 1.5), LANE_H)
            if stream == COMPUTE:
                color = device_color(max(device, 0), clock.devices, dark)
                if everyone:
                    color = QColor(pal.foreground)
                    color.setAlphaF(0.55)
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(color)
            else:
                owner = (max(device, 0) - int(step)) % clock.devices
                color = QColor(pal.muted) if everyone else device_color(owner, clock.devices, dark)
                fill = QColor(color)
                fill.setAlphaF(0.35)
                p.setPen(QPen(color, 1.2))
                p.setBrush(fill)
            p.drawRect(rect)
            self.bars += 1
            if rect.width() < 30:
                continue  # no room for words
            text = self._bar_text(device, stream, int(step))
            if rect.width() > metrics.horizontalAdvance(text) + 6:
                p.setPen(QColor("#111318") if stream == COMPUTE else QColor(pal.foreground))
                p.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)

    def _lane_label(self, device: int, stream: str) -> str:
        who = f"every {self.word}" if device < 0 else f"{self.word} {device}"
        return f"{who} · {'compute' if stream == COMPUTE else 'send/recv'}"

    def _bar_text(self, device: int, stream: str, step: int) -> str:
        if stream == COMPUTE:
            return f"step {step}"
        hidden = self._hidden.get((device, step))
        return f"{hidden:.0%} hidden" if hidden is not None else f"step {step}"

    def _paint_axis(self, p: QPainter, y: float) -> None:
        assert self.clock is not None
        pal = self._palette
        span = self.clock.span_ms
        p.setPen(QPen(QColor(pal.muted), 1))
        p.drawLine(QPointF(self.label_w, y), QPointF(self._x(span), y))
        step = nice_step(span)
        t = 0.0
        while t <= span * 1.0001:
            x = self._x(t)
            p.drawLine(QPointF(x, y), QPointF(x, y + 4))
            p.drawText(QRectF(x - 40, y + 4, 80, 14), Qt.AlignmentFlag.AlignCenter, fmt_ms(t))
            t += step
        kind = "model" if self.clock.source == MODEL_CLOCK else "CUDA events"
        p.drawText(
            QRectF(4, y + 2, self.label_w - 8, 16),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            f"time ({kind})",
        )

    # ------------------------------------------------------------------ mouse

    def _hit(self, pos: QPointF) -> tuple[int, str, int] | None:
        if self.clock is None:
            return None
        t = self._t(pos.x())
        for (device, stream), top in zip(self.lanes, self._lane_tops(), strict=True):
            if top <= pos.y() <= top + LANE_H:
                for step, (start, end) in enumerate(self._spans(device, stream)):
                    if np.isfinite(start) and start <= t <= end:
                        return device, stream, step
        return None

    def describe(self, device: int, stream: str, step: int) -> str:
        """The tooltip of one bar."""
        assert self.clock is not None
        start, end = self._spans(device, stream)[step]
        p = self.clock.devices
        who = f"every {self.word}" if device < 0 else f"{self.word} {device}"
        d = max(device, 0)
        if stream == COMPUTE:
            what = "fused kernels on its queries against the block it holds, then the merge"
        else:
            owner = (d - step) % p
            nbytes = ""
            if self.measurement is not None:
                e = next((x for x in self.measurement.events(d, COMM) if x.step == step), None)
                nbytes = f" ({fmt_bytes(e.bytes)})" if e is not None and e.bytes else ""
            what = (
                f"sends the K/V block of {self.word} {owner}{nbytes} to {self.word} "
                f"{(d + 1) % p}, receives the next from {self.word} {(d - 1) % p}"
            )
            hidden = self._hidden.get((device, step))
            if hidden is not None:
                what += f"; {hidden:.0%} of it hidden behind compute"
        return f"{who} · step {step}: {what} · {fmt_ms(end - start)}"

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        hit = self._hit(event.position())
        if hit is None:
            QToolTip.hideText()
        else:
            QToolTip.showText(event.globalPosition().toPoint(), self.describe(*hit), self)
        super().mouseMoveEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if self.clock is not None and event.position().x() >= self.label_w:
            self.seekRequested.emit(self._t(event.position().x()))
        super().mousePressEvent(event)
