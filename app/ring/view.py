"""The ring view: K/V blocks travelling device to device while each device's fused kernel runs,
and the score matrix filling up chunk pair by chunk pair.

It paints a `RingFrame` (app/state/ring/playback.py) and nothing else: the panel hands it a
frame per tick and the view only draws. Devices sit on a circle; each shows the chunks of Q it
keeps, the block it holds, its (query chunk, key chunk) pairs (full, diagonal or skipped) and
the progress of its fused kernel; a token carries each block along the arc to the next device
while it is being sent. Beyond FULL_RING_MAX devices the ring is summarised: both ends are drawn
and the devices between them are one labelled gap. On the right, the score matrix by chunk
(queries down, keys across): each block in the colour of the device that computes it, lit when
done, bright while being computed, dark where the causal mask skips it.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPainterPath, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from gpu.ring.schedule import DIAGONAL, SKIPPED

from ..kit.theme import Palette, palette
from ..state.ring.playback import (
    ACTIVE,
    DONE,
    MASKED,
    SUMMARY_SIDE,
    NodeFrame,
    RingFrame,
    ScoreMatrix,
    shown_devices,
)


def device_color(device: int, devices: int, dark: bool = True) -> QColor:
    """One hue per device round the colour wheel (red to violet, never back to red)."""
    hue = 0.83 * device / max(1, devices - 1) if devices > 1 else 0.55
    return QColor.fromHsvF(hue, 0.55 if dark else 0.75, 0.95 if dark else 0.78)


class RingView(QWidget):
    """See the module docstring. `set_frame(frame, states)` draws; `node_rects` holds where
    each drawn device is (tests, tooltips)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ringView")
        self.setMinimumSize(320, 240)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.frame: RingFrame | None = None
        self.matrix: ScoreMatrix | None = None
        self.states: np.ndarray | None = None
        self.word = "GPU"
        self.node_rects: dict[int, QRectF] = {}
        self._gap: QPointF | None = None
        self._palette: Palette = palette("dark")
        self._image: QImage | None = None
        self._image_key: bytes = b""

    def sizeHint(self) -> QSize:
        return QSize(760, 420)

    def set_palette(self, pal: Palette) -> None:
        self._palette = pal
        self._image_key = b""
        self.update()

    def set_frame(
        self,
        frame: RingFrame,
        matrix: ScoreMatrix | None = None,
        states: np.ndarray | None = None,
        word: str = "GPU",
    ) -> None:
        relayout = self.frame is None or self.frame.devices != frame.devices
        self.frame, self.word = frame, word
        if matrix is not None:
            self.matrix, self.states = matrix, states
        if relayout:
            self._layout()
        self.update()

    # ------------------------------------------------------------------ geometry

    def resizeEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().resizeEvent(event)
        self._layout()

    def _ring_area(self) -> QRectF:
        w, h = self.width(), self.height()
        return QRectF(0, 0, w * 0.6, h)

    def _matrix_area(self) -> QRectF:
        w, h = self.width(), self.height()
        side = min(w * 0.4 - 24, h - 44)
        return QRectF(w * 0.6 + 12, 28, max(side, 10), max(side, 10))

    def _layout(self) -> None:
        self.node_rects = {}
        self._gap = None
        if self.frame is None:
            return
        devices = shown_devices(self.frame.devices)
        area = self._ring_area()
        slots = len(devices) + (1 if self.frame.summarised else 0)
        w, h = self._node_size(slots, area)
        while True:  # shrink the boxes until neighbours on the ellipse no longer overlap
            centres = self._centres(slots, area, w, h)
            if w <= 46 or not _crowded(centres, w + 6, h + 6):
                break
            w, h = w * 0.92, max(34.0, h * 0.92)
        for slot, centre in enumerate(centres):
            if self.frame.summarised and slot == SUMMARY_SIDE:
                self._gap = centre
                continue
            i = slot - (1 if self.frame.summarised and slot > SUMMARY_SIDE else 0)
            self.node_rects[devices[i]] = QRectF(centre.x() - w / 2, centre.y() - h / 2, w, h)

    @staticmethod
    def _centres(slots: int, area: QRectF, w: float, h: float) -> list[QPointF]:
        """Slot centres on an ellipse inside `area`, clockwise from the top (two devices side
        by side: the area is wider than high)."""
        cx, cy = area.center().x(), area.center().y()
        rx, ry = max(area.width() / 2 - w / 2 - 8, 10), max(area.height() / 2 - h / 2 - 8, 10)
        if slots == 1:
            return [QPointF(cx, cy)]
        first = math.pi if slots == 2 else -math.pi / 2
        return [
            QPointF(
                cx + rx * math.cos(first + 2 * math.pi * k / slots),
                cy + ry * math.sin(first + 2 * math.pi * k / slots),
            )
            for k in range(slots)
        ]

    @staticmethod
    def _node_size(slots: int, area: QRectF) -> tuple[float, float]:
        if slots <= 2:
            w = max(150.0, min(210.0, area.width() * 0.34))
            return w, w * 0.5
        around = math.pi * (area.width() + area.height()) / 2 / slots
        w = max(46.0, min(150.0, around * 0.9))
        return w, max(34.0, min(84.0, w * 0.56))

    def describe(self, device: int) -> str:
        """A drawn device's tooltip: what it keeps, holds, computes and sends at this moment."""
        assert self.frame is not None
        node = next(n for n in self.frame.nodes if n.device == device)
        held, w = node.held, self.word
        pairs = ", ".join(f"Q{p.q_chunk}×K{p.k_chunk} {p.kind}" for p in held.pairs)
        lines = [
            f"{w} {device} at step {held.step + 1} of {self.frame.devices}",
            f"keeps the queries of chunks {' · '.join(map(str, _q_chunks(held)))}",
            f"holds the K/V block of {w} {held.block_owner} "
            f"(chunks {' · '.join(map(str, held.kv_chunks))})",
            f"chunk pairs: {pairs}",
        ]
        if node.finished:
            lines.append("finished: its rows of the output are final")
        elif node.compute is None:
            lines.append("waiting for its next block")
        else:
            lines.append(f"fused kernel {node.compute:.0%} done")
        if node.sending is not None:
            lines.append(
                f"sending {w} {node.sending.block_owner}'s block to {w} "
                f"{node.sending.sends_to} ({node.send_progress:.0%})"
            )
        return "\n".join(lines)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and self.frame is not None:
            pos = QPointF(event.pos())
            hit = next((d for d, r in self.node_rects.items() if r.contains(pos)), None)
            if hit is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(event.globalPos(), self.describe(hit), self)
            return True
        return super().event(event)

    # ------------------------------------------------------------------ painting

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self._palette
        p.fillRect(self.rect(), QColor(pal.background))
        if self.frame is None:
            p.setPen(QColor(pal.muted))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "No ring to show yet.")
            p.end()
            return
        frame = self.frame
        self._paint_links(p, frame)
        for node in frame.nodes:
            rect = self.node_rects.get(node.device)
            if rect is not None:
                self._paint_node(p, node, rect, frame.devices)
        self._paint_gap(p, frame)
        self._paint_tokens(p, frame)
        self._paint_matrix(p)
        p.end()

    def _dark(self) -> bool:
        return self._palette.name == "dark"

    def _color(self, device: int) -> QColor:
        assert self.frame is not None
        return device_color(device, self.frame.devices, self._dark())

    def _successor_point(self, device: int) -> QPointF | None:
        """Where a block sent by `device` goes: the next device's box, or the summary gap."""
        assert self.frame is not None
        nxt = (device + 1) % self.frame.devices
        rect = self.node_rects.get(nxt)
        if rect is not None:
            return rect.center()
        return self._gap

    def _link_path(self, device: int) -> QPainterPath | None:
        """The arc from `device`'s box to the next one's, bulging away from the ring's centre
        (two devices: one arc each way, on either side)."""
        rect = self.node_rects.get(device)
        end = self._successor_point(device)
        if rect is None or end is None or self.frame is None or self.frame.devices < 2:
            return None
        start = rect.center()
        mid = (start + end) / 2
        along = end - start
        if self.frame.devices == 2:
            control = mid + QPointF(along.y(), -along.x()) * 0.25
        else:
            out = mid - self._ring_area().center()
            length = math.hypot(out.x(), out.y()) or 1.0
            bulge = 0.18 * math.hypot(along.x(), along.y())
            control = mid + out * (bulge / length)
        nxt = self.node_rects.get((device + 1) % self.frame.devices)
        path = QPainterPath(_edge(rect, control))
        path.quadTo(control, _edge(nxt, control) if nxt is not None else end)
        return path

    def _paint_links(self, p: QPainter, frame: RingFrame) -> None:
        pen = QPen(QColor(self._palette.muted), 1.4)
        for device in self.node_rects:
            path = self._link_path(device)
            if path is None:
                continue
            nxt = (device + 1) % frame.devices
            pen.setStyle(Qt.PenStyle.SolidLine if nxt in self.node_rects else Qt.PenStyle.DashLine)
            p.setPen(pen)
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawPath(path)
            self._arrow_head(p, path)

    def _arrow_head(self, p: QPainter, path: QPainterPath) -> None:
        tip = path.pointAtPercent(0.62)
        angle = math.radians(-path.angleAtPercent(0.62))
        size = 7.0
        head = QPainterPath(tip)
        for da in (2.6, -2.6):
            head.moveTo(tip)
            head.lineTo(tip + QPointF(size * math.cos(angle + da), size * math.sin(angle + da)))
        p.drawPath(head)

    def _paint_node(self, p: QPainter, node: NodeFrame, rect: QRectF, devices: int) -> None:
        pal = self._palette
        color = self._color(node.device)
        busy = node.compute is not None
        fill = QColor(color)
        fill.setAlphaF(0.28 if busy else 0.12)
        p.setPen(QPen(color, 2.2 if busy else 1.2))
        p.setBrush(fill)
        p.drawRoundedRect(rect, 6, 6)
        pad = 5.0
        inner = rect.adjusted(pad, pad - 1, -pad, -pad)
        small = rect.width() < 100
        font = QFont(self.font())
        font.setPointSizeF(8.5 if not small else 7.5)
        font.setBold(True)
        p.setFont(font)
        p.setPen(QColor(pal.foreground))
        title = f"{self.word} {node.device}" if not small else str(node.device)
        p.drawText(inner, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, title)
        font.setBold(False)
        p.setFont(font)
        held = node.held
        if not small:
            q = "Q " + " · ".join(str(c) for c in _q_chunks(held))
            p.drawText(inner, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop, q)
            line = inner.adjusted(0, 15, 0, 0)
            p.setPen(QColor(pal.muted))
            kv = " · ".join(str(c) for c in held.kv_chunks)
            src = "own" if held.block_owner == node.device else f"from {held.block_owner}"
            top_left = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop
            p.drawText(line, top_left, f"K/V {kv} ({src})")
        # The chunk pairs of this step: full, diagonal (the causal triangle) or skipped.
        chip = max(6.0, min(12.0, inner.height() * 0.2))
        y = inner.bottom() - chip - 7
        x = inner.left()
        owner = self._color(held.block_owner)
        for pair in held.pairs:
            r = QRectF(x, y, chip, chip)
            _paint_chip(p, r, pair.kind, owner, QColor(pal.muted))
            x += chip + 3
            if x + chip > inner.right():
                break
        # The fused kernel's progress on this step.
        bar = QRectF(inner.left(), inner.bottom() - 4, inner.width(), 4)
        p.setPen(Qt.PenStyle.NoPen)
        track = QColor(pal.muted)
        track.setAlphaF(0.35)
        p.setBrush(track)
        p.drawRect(bar)
        done = 1.0 if node.finished else (node.compute or 0.0)
        if done > 0:
            p.setBrush(color)
            p.drawRect(QRectF(bar.left(), bar.top(), bar.width() * done, bar.height()))
        if not busy and not node.finished and not small:
            p.setPen(QColor(pal.muted))
            p.drawText(
                inner.adjusted(0, 0, 0, -8),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignBottom,
                "waiting",
            )

    def _paint_gap(self, p: QPainter, frame: RingFrame) -> None:
        if self._gap is None:
            return
        hidden = frame.devices - len(self.node_rects)
        p.setPen(QColor(self._palette.muted))
        font = QFont(self.font())
        font.setPointSizeF(8.5)
        p.setFont(font)
        inward = self._gap + (self._ring_area().center() - self._gap) * 0.3
        box = QRectF(inward.x() - 80, inward.y() - 18, 160, 36)
        p.drawText(
            box,
            Qt.AlignmentFlag.AlignCenter,
            f"⋯ {hidden} more {self.word}s ⋯\n{SUMMARY_SIDE} … {frame.devices - SUMMARY_SIDE - 1}",
        )

    def _paint_tokens(self, p: QPainter, frame: RingFrame) -> None:
        """Each block being sent, as a token along the arc to the next device."""
        font = QFont(self.font())
        font.setPointSizeF(7.5)
        font.setBold(True)
        p.setFont(font)
        for node in frame.nodes:
            if node.sending is None:
                continue
            path = self._link_path(node.device)
            if path is None:
                continue
            at = path.pointAtPercent(min(1.0, max(0.0, node.send_progress)))
            owner = node.sending.block_owner
            color = self._color(owner)
            label = f"K/V {owner}" if self.node_rects[node.device].width() >= 100 else str(owner)
            w = max(22.0, p.fontMetrics().horizontalAdvance(label) + 10)
            r = QRectF(at.x() - w / 2, at.y() - 9, w, 18)
            p.setPen(QPen(QColor(self._palette.background), 1.5))
            p.setBrush(color)
            p.drawRoundedRect(r, 5, 5)
            p.setPen(QColor("#111318"))
            p.drawText(r, Qt.AlignmentFlag.AlignCenter, label)

    def _paint_matrix(self, p: QPainter) -> None:
        matrix, states = self.matrix, self.states
        if matrix is None or states is None:
            return
        pal = self._palette
        area = self._matrix_area()
        font = QFont(self.font())
        font.setPointSizeF(8.5)
        p.setFont(font)
        p.setPen(QColor(pal.foreground))
        title = f"Scores by chunk: {matrix.chunks} × {matrix.chunks}"
        if matrix.sampled:
            title += f" (sampled 1 in {matrix.chunks / matrix.side:.0f})"
        p.drawText(
            QRectF(area.left(), 4, area.width() + 20, 20),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            title,
        )
        image = self._matrix_image(matrix, states)
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
        p.drawImage(area, image)
        if matrix.side <= 32:  # a grid of chunks, and the chunk numbers
            pen = QPen(QColor(pal.background), 1)
            p.setPen(pen)
            cell = area.width() / matrix.side
            for i in range(1, matrix.side):
                x, y = area.left() + i * cell, area.top() + i * cell
                p.drawLine(QPointF(x, area.top()), QPointF(x, area.bottom()))
                p.drawLine(QPointF(area.left(), y), QPointF(area.right(), y))
        p.setPen(QColor(pal.muted))
        p.drawText(
            QRectF(area.left(), area.bottom() + 2, area.width(), 16),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop,
            "keys →   queries ↓   dark: masked",
        )

    def _matrix_image(self, matrix: ScoreMatrix, states: np.ndarray) -> QImage:
        """The matrix as an image, one pixel per chunk pair, rebuilt only when a cell changed."""
        key = states.tobytes() + bytes([self._dark(), matrix.devices % 256])
        if self._image is not None and key == self._image_key:
            return self._image
        side = matrix.side
        colors = np.array(
            [self._color(int(d)).getRgb()[:3] for d in matrix.row_device], dtype=np.float32
        )
        bg = np.array(QColor(self._palette.background).getRgb()[:3], dtype=np.float32)
        rgb = np.empty((side, side, 3), np.float32)
        base = np.broadcast_to(colors[:, None, :], (side, side, 3))
        rgb[:] = bg + (base - bg) * 0.16
        done = states == DONE
        rgb[done] = base[done] * 0.85
        act = states == ACTIVE
        rgb[act] = base[act] + (255 - base[act]) * 0.55
        masked = states == MASKED
        rgb[masked] = bg * 0.55 + 8
        rgba = np.empty((side, side, 4), np.uint8)
        rgba[..., :3] = np.clip(rgb, 0, 255)
        rgba[..., 3] = 255
        image = QImage(rgba.data, side, side, 4 * side, QImage.Format.Format_RGBA8888).copy()
        self._image, self._image_key = image, key
        return image


def _crowded(centres: list[QPointF], w: float, h: float) -> bool:
    """Whether two boxes of w × h at these centres overlap."""
    return any(
        abs(a.x() - b.x()) < w and abs(a.y() - b.y()) < h
        for i, a in enumerate(centres)
        for b in centres[i + 1 :]
    )


def _edge(rect: QRectF, toward: QPointF) -> QPointF:
    """Where the ray from `rect`'s centre toward `toward` leaves the rectangle."""
    c = rect.center()
    dx, dy = toward.x() - c.x(), toward.y() - c.y()
    if dx == 0 and dy == 0:
        return c
    t = min(
        rect.width() / 2 / abs(dx) if dx else math.inf,
        rect.height() / 2 / abs(dy) if dy else math.inf,
    )
    return QPointF(c.x() + dx * t, c.y() + dy * t)


def _q_chunks(step) -> tuple[int, ...]:  # type: ignore[no-untyped-def]
    seen: list[int] = []
    for pair in step.pairs:
        if pair.q_chunk not in seen:
            seen.append(pair.q_chunk)
    return tuple(seen)


def _paint_chip(p: QPainter, r: QRectF, kind: str, color: QColor, muted: QColor) -> None:
    """A chunk pair: full square, causal triangle, or a crossed-out outline when skipped."""
    if kind == SKIPPED:
        p.setPen(QPen(muted, 1))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(r)
        p.drawLine(r.topLeft(), r.bottomRight())
        return
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(color)
    if kind == DIAGONAL:
        tri = QPainterPath(r.topLeft())
        tri.lineTo(r.bottomLeft())
        tri.lineTo(r.bottomRight())
        tri.closeSubpath()
        p.drawPath(tri)
        p.setPen(QPen(color, 1))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(r)
    else:
        p.drawRect(r)
