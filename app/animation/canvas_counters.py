"""The counters of a lane (bytes read and written, FLOPs, SRAM, time): which fit, in which
phrasing, with rectangles wide enough for every value the running clock can show."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRectF
from PySide6.QtGui import QFont

from app.state.units import fmt_bytes, fmt_flops, fmt_seconds
from gpu.model.costmodel import GpuSpec

from .canvas_geometry import CounterRow, LaneScene, Scene
from .canvas_text import FRACTIONS, LEFT, Fonts, TextItem, place


def counter_variants(lane: LaneScene, gpu: GpuSpec) -> dict[str, list[str]]:
    """Every string a counter value can show, to size its rectangle: the end value and values
    across the range (a prefix changes with the magnitude: 999 kB, 1.00 MB)."""
    t = lane.totals
    fracs = FRACTIONS
    sram_max = max([ly.smem_bytes for ly in lane.layouts] + [gpu.smem_per_sm_bytes])
    return {
        "read": [fmt_bytes(t.bytes_read * f) for f in fracs] + ["888 kB", "888 MB"],
        "written": [fmt_bytes(t.bytes_written * f) for f in fracs] + ["888 kB"],
        "flops": [fmt_flops(t.flops * f) for f in fracs] + ["888 MFLOP"],
        "sram": [fmt_bytes(sram_max * f) for f in fracs] + ["888 kB"],
        "time": [fmt_seconds(t.time_s * f) for f in fracs] + ["888 µs", "888 ms"],
    }


@dataclass(frozen=True)
class _CounterPlan:
    captions: tuple[str, ...]
    caption_font: QFont
    value_font: QFont
    total_font: QFont
    caption_w: float
    value_w: float
    total_w: float
    two_lines: bool


COUNTER_KEYS = ("read", "written", "flops", "sram", "time")


COUNTER_PRIORITY = ("read", "written", "time", "flops", "sram")


COUNTER_COLORS = ("read", "write", "compute", "text", "text")


def plan_counters(
    fonts: Fonts, scene: Scene, ls: LaneScene, body: QRectF
) -> tuple[float, _CounterPlan]:
    """Fonts, captions and column widths of the counters: the widest phrasing that fits a
    third of the body, else compact ones, else totals on a second line."""
    values = counter_variants(ls, scene.gpu)
    time_caption = "measured time" if ls.clock.measured else "roofline time"
    long_caps = ("tile loads (model)", "tile stores (model)", "FLOPs", "SRAM in use", time_caption)
    short_caps = ("loads", "stores", "FLOPs", "SRAM", "time")
    ends = _counter_ends(scene, ls)
    budget = max(120.0, body.width() * 0.30)
    plans = []
    for caps, cf, vf, tf in (
        (long_caps, fonts.norm, fonts.mono_b, fonts.mono),
        (short_caps, fonts.norm, fonts.mono_b, fonts.mono),
        (short_caps, fonts.small, fonts.mono_small_b, fonts.mono_small),
    ):
        cw = max(fonts.width(c, cf) for c in caps) + 8
        vw = max(fonts.width(v, vf) for vs in values.values() for v in vs) + 4
        tw = max(fonts.width(f"/ {e}", tf) for e in ends) + 2
        plans.append(_CounterPlan(caps, cf, vf, tf, cw, vw, tw, False))
        if cw + vw + tw + 8 <= budget:
            return cw + vw + tw + 8, plans[-1]
    p = plans[-1]
    if p.caption_w + p.value_w + p.total_w + 8 <= body.width() * 0.36:  # a little more room
        return p.caption_w + p.value_w + p.total_w + 8, p
    # two lines: caption and value, then "/ total" under the value
    two = _CounterPlan(
        p.captions,
        p.caption_font,
        p.value_font,
        p.total_font,
        p.caption_w,
        p.value_w,
        p.total_w,
        True,
    )
    return max(p.caption_w + p.value_w, p.total_w) + 4, two


def _counter_ends(scene: Scene, ls: LaneScene) -> tuple[str, ...]:
    t = ls.totals
    return (
        fmt_bytes(t.bytes_read),
        fmt_bytes(t.bytes_written),
        fmt_flops(t.flops),
        fmt_bytes(scene.gpu.smem_per_sm_bytes),
        fmt_seconds(t.time_s),
    )


def place_counters(
    fonts: Fonts,
    scene: Scene,
    ls: LaneScene,
    key: str,
    col: QRectF,
    plan: _CounterPlan,
    texts: list[TextItem],
) -> tuple[list[CounterRow], QRectF]:
    fh = max(fonts.height(plan.caption_font), fonts.height(plan.value_font)) + 2
    th = fonts.height(plan.total_font) + 1
    step = fh + (th if plan.two_lines else 0) + 1
    ends = _counter_ends(scene, ls)
    # as many counters as the height allows, the SRAM one (the box shows it) and the FLOPs
    # going first; the others keep their order
    fit = int((col.height() - 2) // step)
    keep = set(COUNTER_PRIORITY[: max(0, fit)])
    rows = []
    y = col.y() + 2
    for k, (name, caption) in enumerate(zip(COUNTER_KEYS, plan.captions, strict=True)):
        if name not in keep:
            continue
        cap_r = QRectF(col.x(), y, plan.caption_w, fh)
        texts.append(
            TextItem(
                f"{key}.counter.{name}.caption", cap_r, caption, plan.caption_font, LEFT, "dim"
            )
        )
        value_r = QRectF(cap_r.right(), y, plan.value_w, fh)
        end = ends[k]
        if plan.two_lines:
            total_r = QRectF(cap_r.right() + plan.value_w - plan.total_w, y + fh, plan.total_w, th)
        else:
            total_r = QRectF(value_r.right() + 8, y, plan.total_w, fh)
        texts.append(
            TextItem(
                f"{key}.counter.{name}.total",
                total_r,
                f"/ {end}",
                plan.total_font,
                LEFT,
                "dim",
                (end,),
            )
        )
        rows.append(CounterRow(name, value_r, plan.value_font, COUNTER_COLORS[k]))
        y += step
    bar = QRectF(col.x(), y + 4, col.width() - 4, 10)
    fh_small = fonts.height(fonts.small)
    cap_r = QRectF(col.x(), bar.bottom() + 3, col.width(), fh_small)
    if cap_r.bottom() <= col.bottom():
        item = place(
            fonts,
            f"{key}.bar.caption",
            cap_r,
            [
                ("tile loads so far, model (same scale in both lanes)", ()),
                ("tile loads so far (model)", ()),
                ("traffic", ()),
            ],
            fonts.small,
            LEFT,
            "dim",
        )
        if item is not None:
            texts.append(item)
    if bar.bottom() > col.bottom():
        bar = QRectF()
    return rows, bar
