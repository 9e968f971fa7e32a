"""Where every box and text of the lanes canvas goes at one size: the layout model the canvas
paints from and tests inspect.

Rules the layout keeps at every size from a 1280×800 window up (tests/test_animation_window.py
checks them on this model, not on pixels):
- no two texts overlap, and every text fits the rectangle it is drawn in;
- a text that carries quantities ("1.08 GB", "233 kB", "2.7×") is never cut: the layout picks
  the longest of its phrasings that fits, each of which shows its quantities whole, or drops
  the label; only texts without quantities (titles) are elided with "…".

Texts that change with the clock (counter values, the status line, the SRAM legend of the
current kernel) get rectangles wide enough for any value they can take, measured with the
same fonts the canvas paints with.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QRectF

from app.state.units import fmt_bytes, fmt_seconds
from gpu.algorithms import ALGORITHMS, NAIVE

from .canvas_counters import place_counters, plan_counters
from .canvas_geometry import CanvasLayout, LaneGeo, LaneScene, Scene
from .canvas_hbm import lay_out_hbm, link_labels
from .canvas_roles import lay_out_roles, role_labels
from .canvas_sram import lay_out_sram, sram_width
from .canvas_text import FRACTIONS, RIGHT, Fonts, TextItem, Variant, elided, place


def _lane_title(algorithm: str, label: str) -> str:
    """The registry's caption of the lane's algorithm, else its label."""
    info = ALGORITHMS.get(algorithm)
    return info.lane_title if info is not None and info.lane_title else label


def lay_out(fonts: Fonts, scene: Scene, width: float, height: float) -> CanvasLayout:
    """The whole canvas at `width` × `height` (see the module docstring)."""
    texts: list[TextItem] = []
    swatches: list[tuple[QRectF, str]] = []
    header = QRectF(0, 0, width, 30)
    clock_rect = _header(fonts, scene, header, texts, swatches)
    weights = [1.35 if ls.consumers else 1.0 for ls in scene.lanes] or [1.0]
    total_w = sum(weights)
    y = header.bottom()
    avail = height - y - 4
    lanes = []
    for i, ls in enumerate(scene.lanes):
        h = avail * weights[i] / total_w
        rect = QRectF(4, y, width - 8, h - 4)
        lanes.append(_lane(fonts, scene, ls, i, rect, texts, swatches))
        y += h
    return CanvasLayout(width, height, header, lanes, texts, swatches, clock_rect)


def _header(
    fonts: Fonts,
    scene: Scene,
    header: QRectF,
    texts: list[TextItem],
    swatches: list[tuple[QRectF, str]],
) -> QRectF:
    """Legend swatches (right), the traffic verdict (middle) and room for the clock (left)."""
    total = fmt_seconds(scene.total_time_s)
    # the running clock takes the widest it can show: "t = <any time up to the total> of <total>"
    nows = [fmt_seconds(scene.total_time_s * f) for f in FRACTIONS] + ["888 µs", "888 ms"]
    clock_w = max(fonts.width(f"t = {now}  of  {total}", fonts.big) for now in nows) + 8
    clock_w = min(clock_w, header.width() * 0.45)
    clock_rect = QRectF(12, header.y() + 2, clock_w, header.height() - 4)
    traffic = {ls.algorithm: ls.totals.bytes_read + ls.totals.bytes_written for ls in scene.lanes}
    dram = {ls.algorithm: ls.clock.dram_bytes for ls in scene.lanes}
    gpu_name = scene.gpu.name.rsplit(" ", 2)[0]
    variants: list[Variant] = []
    if NAIVE in traffic and len(traffic) > 1:
        other = next(a for a in traffic if a != NAIVE)
        label = next(ls.label for ls in scene.lanes if ls.algorithm == other)
        nb, ob = fmt_bytes(traffic[NAIVE]), fmt_bytes(traffic[other])
        ratio = f"{traffic[NAIVE] / max(1, traffic[other]):.1f}×"
        q = (nb, ob, ratio)
        # The lanes move the no-reuse model's tile loads; DRAM serves far fewer bytes (the L2
        # catches the re-reads). Where the counters measured both runs, their figure goes
        # beside the model's, each labelled.
        dn, do = dram.get(NAIVE), dram.get(other)
        if dn and do:
            mn, mo = fmt_bytes(dn), fmt_bytes(do)
            mr = f"{dn / do:,.0f}×"
            q = (nb, ob, ratio, mn, mo, mr)
            variants = [
                (f"tile loads (model): naive {nb}, {label} {ob} ({ratio} fewer) · DRAM "
                 f"(measured): {mn} vs {mo} ({mr} fewer) · on {gpu_name}", q),
                (f"tile loads (model): naive {nb}, {label} {ob} ({ratio} fewer) · DRAM "
                 f"(measured): {mn} vs {mo} ({mr} fewer)", q),
                (f"tile loads (model) {nb} vs {ob} ({ratio}) · DRAM (measured) {mn} vs {mo} "
                 f"({mr})", q),
                (f"loads (model) {ratio} fewer · DRAM (measured) {mr} fewer", (ratio, mr)),
            ]  # fmt: skip
        else:
            variants = [
                (f"tile loads (model): naive {nb}, {label} {ob} ({ratio} fewer) · on {gpu_name}",
                 q),
                (f"tile loads (model): naive {nb}, {label} {ob} ({ratio} fewer)", q),
                (f"tile loads (model): naive {nb}, {other} {ob} ({ratio} fewer)", q),
                (f"naive {nb} vs {ob} of tile loads (model, {ratio} fewer)", q),
                (f"{ratio} fewer tile loads (model)", (ratio,)),
            ]  # fmt: skip
    else:
        variants = [(f"on {gpu_name}", ())]
    right = header.right() - 12
    legend = (("compute", "compute"), ("write", "write"), ("read", "read"))
    legend_w = sum(math.ceil(fonts.width(t, fonts.norm)) + 1 + 26 for t, _ in legend)

    def verdict(room_right: float) -> TextItem | None:
        room = QRectF(
            clock_rect.right() + 16, header.y() + 2, room_right - clock_rect.right() - 20, 26
        )
        return place(fonts, "header.verdict", room, variants, fonts.norm, RIGHT)

    # the colour legend only where it costs the verdict none of its detail
    with_legend, without = verdict(right - legend_w), verdict(right)
    show_legend = with_legend is not None and (without is None or with_legend.text == without.text)
    if show_legend:
        for text, color in legend:
            tw = math.ceil(fonts.width(text, fonts.norm)) + 1
            r = QRectF(right - tw, header.y() + 2, tw, header.height() - 4)
            texts.append(TextItem(f"header.legend.{text}", r, text, fonts.norm, RIGHT, "dim"))
            swatches.append((QRectF(right - tw - 14, header.y() + 10, 10, 10), color))
            right -= tw + 26
    item = with_legend if show_legend else without
    if item is not None:
        texts.append(item)
    return clock_rect


def _lane(
    fonts: Fonts,
    scene: Scene,
    ls: LaneScene,
    i: int,
    rect: QRectF,
    texts: list[TextItem],
    swatches: list[tuple[QRectF, str]],
) -> LaneGeo:
    key = f"lane{i}"
    fh_title = fonts.height(fonts.title)
    fh_small = fonts.height(fonts.small)
    title_row = QRectF(rect.x() + 10, rect.y() + 3, rect.width() - 20, fh_title)
    # the clock badge (right), then the title elided into what is left
    badge = place(
        fonts,
        f"{key}.clock",
        title_row,
        [
            (f"clock: {ls.clock.label()}", ()),
            (f"clock: {ls.clock.source}", ()),
            (ls.clock.source, ()),
        ],
        fonts.small_bold if ls.clock.measured else fonts.small,
        RIGHT,
        "done" if ls.clock.measured else "dim",
    )
    title_right = title_row.right() if badge is None else badge.rect.left() - 14
    if badge is not None:
        texts.append(badge)
    title = elided(
        fonts,
        f"{key}.title",
        QRectF(title_row.x(), title_row.y(), title_right - title_row.x(), title_row.height()),
        _lane_title(ls.algorithm, ls.label),
        fonts.title,
    )
    if title is not None:
        texts.append(title)
    timebar = QRectF(rect.x() + 10, title_row.bottom() + 2, rect.width() - 20, 6)
    status = QRectF(rect.x() + 10, timebar.bottom() + 2, rect.width() - 20, fh_small)
    body = QRectF(
        rect.x() + 8, status.bottom() + 4, rect.width() - 16, rect.bottom() - status.bottom() - 8
    )
    roles = None
    if ls.consumers:
        rows = 1 + ls.consumers  # the producer and each consumer, a text line each at least
        need = (rows + 2) * fh_small + 4  # with the heading and the tiles' axis
        rh = min(max(need, body.height() * 0.36), max(need, 28.0 * rows))
        roles = QRectF(body.x(), body.bottom() - rh, body.width(), rh)
        body.setBottom(roles.top() - 6)
    # columns: counters and SRAM take what their texts need, the link a little, HBM the rest
    counters_w, counter_plan = plan_counters(fonts, scene, ls, body)
    sram_w = sram_width(fonts, ls)
    link_w = min(60.0, max(28.0, body.width() * 0.05))
    hbm_w = body.width() - counters_w - sram_w - link_w - 18
    hbm = QRectF(body.x(), body.y(), hbm_w, body.height())
    link = QRectF(hbm.right(), body.y(), link_w, body.height())
    sram_col = QRectF(link.right() + 4, body.y(), sram_w, body.height())
    counters_rect = QRectF(sram_col.right() + 14, body.y(), counters_w, body.height())
    mats, widen = lay_out_hbm(fonts, scene, ls, key, hbm, texts)
    link_labels(fonts, key, link, texts)
    box, regs, legend = lay_out_sram(fonts, scene, ls, key, sram_col, texts)
    counters, bar = place_counters(fonts, scene, ls, key, counters_rect, counter_plan, texts)
    geo = LaneGeo(
        rect,
        timebar,
        status,
        hbm,
        mats,
        widen,
        link,
        box,
        regs,
        legend,
        fonts.small,
        counters,
        bar,
        roles,
    )
    if roles is not None:
        lay_out_roles(fonts, key, geo, roles, role_labels(ls.consumers), texts, swatches)
    return geo
