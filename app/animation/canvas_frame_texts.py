"""The texts of the lanes canvas that change with the clock: the status line, each lane's
kernel, step and counters, its SRAM legend and the roles strip's axis, placed in the
rectangles the layout keeps for them (canvas_layout.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from PySide6.QtCore import QRectF, Qt

from app.state.units import fmt_bytes, fmt_flops, fmt_int, fmt_seconds
from gpu.model.schedule import READ, WRITE

from ..state.animation.chip import REGISTERS, SMEM
from ..state.animation.kernel_steps import KERNEL_TITLES
from ..state.animation.snapshots import LaneFrame, SlotState
from .canvas_geometry import REGISTER_FILE_BYTES, CanvasLayout, LaneGeo, Scene
from .canvas_sram import LegendEntry, fit_legend, legend_entries, legend_text
from .canvas_text import CENTER, LEFT, RIGHT, Fonts, TextItem, place

#: Key tiles the roles strip shows around the current one.
ROLE_WINDOW = (1, 3)

SlotKey = tuple[str, str]  # (SMEM or REGISTERS, the buffer's name)


@dataclass(frozen=True)
class LaneParts:
    """What one lane's frame needs for both its painting and its texts, worked out once."""

    slots: dict[SlotKey, SlotState]  # the current kernel's on-chip buffers
    legend: list[LegendEntry]  # the legend rows that fit the lane's legend column
    bands: dict[SlotKey, QRectF]  # where each buffer is drawn (`slot_rects`)


def frame_texts(
    fonts: Fonts,
    lay: CanvasLayout,
    frames: list[LaneFrame],
    scene: Scene,
    header_text: str | None,
    parts: list[LaneParts] | None = None,
) -> list[TextItem]:
    """The frame's own texts: the clock (`header_text` in its place, where given), each
    lane's status, counter values, legend (`parts`: each lane's, where the caller has them
    already)."""
    out: list[TextItem] = []
    clock = frames[0].clock_s if frames else 0.0
    if header_text is not None:
        variants = [(header_text, ())]
    else:
        now, end = fmt_seconds(clock), fmt_seconds(scene.total_time_s)
        variants = [(f"t = {now}  of  {end}", (now, end)), (f"t = {now}", (now,))]
    item = place(fonts, "header.clock", lay.clock_rect, variants, fonts.big, LEFT)
    if item is None and header_text is not None:
        shown = fonts.metrics(fonts.norm).elidedText(
            header_text, Qt.TextElideMode.ElideRight, lay.clock_rect.width()
        )
        item = TextItem(
            "header.clock",
            lay.clock_rect,
            shown,
            fonts.norm,
            LEFT,
            "text",
            (),
            shown != header_text,
        )
    if item is not None:
        out.append(item)
    lanes = list(zip(frames, lay.lanes, strict=False))
    if parts is None:
        parts = [lane_parts(f, g) for f, g in lanes]
    for i, ((f, g), lp) in enumerate(zip(lanes, parts, strict=True)):
        out += _lane_texts(fonts, i, f, g, lp)
    return out


def lane_parts(f: LaneFrame, g: LaneGeo) -> LaneParts:
    """A lane's buffers, the legend rows that fit and where each buffer is drawn."""
    layout = f.layout
    legend = fit_legend(legend_entries(layout), len(g.legend)) if layout is not None else []
    return LaneParts({(s.place, s.name): s for s in f.slots}, legend, slot_rects(f, g))


def _lane_texts(fonts: Fonts, i: int, f: LaneFrame, g: LaneGeo, lp: LaneParts) -> list[TextItem]:
    key = f"lane{i}"
    out: list[TextItem] = []
    # status line: what runs now (left), the level of detail (right) where there is room
    if f.done:
        took = fmt_seconds(f.totals.time_s)
        variants = [(f"done after {took}", (took,)), (took, (took,))]
        color = "done"
    else:
        title = KERNEL_TITLES.get(f.kernel, f.kernel)
        k = f"kernel {f.kernel_index + 1}/{f.kernel_count}"
        b = f"block {fmt_int(f.block + 1)}/{fmt_int(f.blocks)}"
        step = f.step.name + (f" (j={f.tile})" if f.tile >= 0 else "")
        variants = [
            (f"{k}  {title}  ·  {b}  ·  {step}", ()),
            (f"{k}  ·  {b}  ·  {step}", ()),
            (f"{b}  ·  {step}", ()),
            (step, ()),
        ]
        color = "text"
    status = place(fonts, f"{key}.status", g.status, variants, fonts.small, LEFT, color)
    if status is not None:
        out.append(status)
        room = QRectF(
            status.rect.right() + 16,
            g.status.y(),
            g.status.right() - status.rect.right() - 16,
            g.status.height(),
        )
        lod = place(
            fonts,
            f"{key}.lod",
            room,
            [(f"level of detail: {f.lod}", ()), (f.lod, ())],
            fonts.small,
            RIGHT,
            "faint",
        )
        if lod is not None:
            out.append(lod)
    # counter values
    cn = f.counters
    values = {
        "read": fmt_bytes(cn.bytes_read),
        "written": fmt_bytes(cn.bytes_written),
        "flops": fmt_flops(cn.flops),
        "sram": fmt_bytes(cn.sram_bytes),
        "time": fmt_seconds(cn.time_s),
    }
    for row in g.counters:
        value = values[row.key]
        out.append(
            TextItem(
                f"{key}.counter.{row.key}.value",
                row.value,
                value,
                row.font,
                RIGHT,
                row.color,
                (value,),
            )
        )
    # legend of the current kernel's on-chip buffers
    for k, (row, entry) in enumerate(zip(g.legend, lp.legend, strict=False)):
        s = lp.slots.get((entry[3], entry[0]))
        if s is not None and s.active and not f.done:
            color = {READ: "read", WRITE: "write"}.get(f.step.kind, "compute")
        elif s is None or s.resident:
            color = "text"
        else:
            color = "faint"
        text = legend_text(entry)
        size = fmt_bytes(entry[1])
        out.append(
            TextItem(f"{key}.legend{k}", row.text, text, g.legend_font, LEFT, color, (size,))
        )
    # which tile each ring stage holds, inside its band
    for (where, name), rect in lp.bands.items():
        s = lp.slots.get((where, name))
        if s is None or s.tile < 0 or not s.resident:
            continue
        label = place(
            fonts,
            f"{key}.band.{name}",
            rect.adjusted(3, 0, -2, 0),
            [(f"j={s.tile}", ())],
            fonts.small,
            LEFT,
            "text",
            shrink=True,
        )
        if label is not None and rect.height() >= fonts.height(fonts.small):
            out.append(label)
    # roles strip: the tiles on its axis
    if g.roles is not None and f.roles is not None and g.role_axis is not None:
        out += _role_axis_texts(fonts, key, f, g)
    return out


def role_window(f: LaneFrame) -> tuple[int, int, float, float]:
    """The key tiles the roles strip shows around the current one (first, last) and the time
    span they take."""
    tl = f.roles
    assert tl is not None
    j = tl.tile_at(f.role_t)
    j0, j1 = max(0, j - ROLE_WINDOW[0]), min(tl.tiles, j + ROLE_WINDOW[1])
    t0 = float(tl.wait[0, j0]) if j0 > 0 else 0.0
    t1 = float(tl.wait[0, j1]) if j1 < tl.tiles else tl.end
    if not math.isfinite(t0):
        t0 = 0.0
    if not math.isfinite(t1) or t1 <= t0:
        t1 = tl.end
    return j0, j1, t0, max(t1, t0 + 1e-30)


def _role_axis_texts(fonts: Fonts, key: str, f: LaneFrame, g: LaneGeo) -> list[TextItem]:
    tl = f.roles
    axis = g.role_axis
    assert tl is not None and axis is not None
    j0, j1, t0, t1 = role_window(f)
    out = []
    last_right = axis.x() - 1e9
    for j in range(j0, min(j1, tl.tiles - 1) + 1):
        t = tl.issue[0, j]
        if not math.isfinite(t) or not t0 <= t <= t1:
            continue
        x = axis.x() + axis.width() * (t - t0) / (t1 - t0)
        text = f"j={j}"
        w = fonts.width(text, fonts.small) + 2
        r = QRectF(x - w / 2, axis.y(), w, axis.height())
        if r.x() < last_right + 6 or r.right() > axis.right() or r.x() < axis.x():
            continue
        out.append(TextItem(f"{key}.roles.tile{j}", r, text, fonts.small, CENTER, "dim"))
        last_right = r.right()
    return out


def slot_rects(f: LaneFrame, g: LaneGeo) -> dict[SlotKey, QRectF]:
    """Each on-chip buffer's band: shared memory in the SRAM box (top down, height ∝ bytes
    of the SM's capacity), registers in the register file box."""
    out: dict[SlotKey, QRectF] = {}
    for place_, box, cap in (
        (SMEM, g.box, max(1, f.sram_capacity)),
        (REGISTERS, g.regs, REGISTER_FILE_BYTES),
    ):
        if box is None:
            continue
        y = box.y() + 1
        for s in f.slots:
            if s.place != place_:
                continue
            h = max(2.0, (box.height() - 2) * s.bytes / cap)
            h = min(h, max(2.0, box.bottom() - 1 - y))
            out[(s.place, s.name)] = QRectF(box.x() + 1, y, box.width() - 2, h)
            y += h
    return out
