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

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFont, QFontMetricsF

from app.state.units import fmt_bytes, fmt_flops, fmt_seconds
from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA, TILED_WS
from gpu.config import AttentionConfig
from gpu.model.costmodel import GpuSpec, attention_matrix_bytes, matrix_bytes, stats_bytes

from ..state.animation.chip import REGISTERS, SMEM, ChipLayout
from ..state.animation.clock import LaneClock
from ..state.animation.player import Counters

#: Fractions of an end value whose formatted strings bound a running value's width.
FRACTIONS = (0.0, 0.001, 0.0099, 0.099, 0.37, 0.999, 1.0)
LEFT = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
CENTER = Qt.AlignmentFlag.AlignCenter

MIN_STRIP_PX = 10.0  # N×d matrices narrower than this are widened (and say so)
MIN_ML_PX = 4.0
#: Register file of one SM (65,536 32-bit registers on every GPU in the table).
REGISTER_FILE_BYTES = 65536 * 4
SMEM_BOX_W, REGS_BOX_W = 40.0, 12.0

LANE_TITLES = {
    NAIVE: "naive: three kernels, S and P round-trip through HBM",
    TILED: "tiled, readable (FlashAttention-style): one fused kernel, S and P never leave the chip",
    TILED_MMA: "tiled on tensor cores (mma.sync): one fused kernel, S and P stay in registers",
    TILED_WGMMA: "tiled, Hopper wgmma: one fused kernel, S of the next tile overlaps the softmax",
    TILED_WS: "tiled, warp-specialized: a producer warp fills a K/V ring, consumer "
    "warpgroups take turns on the tensor cores",
}


def role_labels(consumers: int) -> tuple[str, ...]:
    """The roles strip's row labels: the producer, then each consumer warpgroup."""
    return ("producer (TMA)", *(f"consumer {c}" for c in range(consumers)))


class Fonts:
    """The canvas's fonts and their metrics (one instance per canvas)."""

    def __init__(self) -> None:
        self.small = QFont("DejaVu Sans", 8)
        self.norm = QFont("DejaVu Sans", 9)
        self.bold = QFont("DejaVu Sans", 9, QFont.Weight.Bold)
        self.small_bold = QFont("DejaVu Sans", 8, QFont.Weight.Bold)
        self.title = QFont("DejaVu Sans", 10, QFont.Weight.Bold)
        self.big = QFont("DejaVu Sans", 13, QFont.Weight.Bold)
        self.mono = QFont("DejaVu Sans Mono", 9)
        self.mono_small = QFont("DejaVu Sans Mono", 8)
        self.mono_b = QFont("DejaVu Sans Mono", 9, QFont.Weight.Bold)
        self.mono_small_b = QFont("DejaVu Sans Mono", 8, QFont.Weight.Bold)
        self._metrics: dict[str, QFontMetricsF] = {}

    def metrics(self, font: QFont) -> QFontMetricsF:
        key = font.key()
        fm = self._metrics.get(key)
        if fm is None:
            fm = self._metrics[key] = QFontMetricsF(font)
        return fm

    def width(self, text: str, font: QFont) -> float:
        return self.metrics(font).horizontalAdvance(text)

    def height(self, font: QFont) -> float:
        return self.metrics(font).height()


@dataclass(frozen=True)
class TextItem:
    """One text the canvas draws: where, what, in which font and colour role (an AnimColors
    attribute), and the quantities it must show whole."""

    key: str
    rect: QRectF
    text: str
    font: QFont
    align: Qt.AlignmentFlag = LEFT
    color: str = "text"
    quantities: tuple[str, ...] = ()
    elided: bool = False


Variant = tuple[str, tuple[str, ...]]  # (text, the quantities in it)


def fit(fonts: Fonts, variants: Sequence[Variant], font: QFont, width: float) -> Variant | None:
    """The first phrasing that fits `width` in `font`, or None."""
    for text, quantities in variants:
        if text and fonts.width(text, font) <= width:
            return text, quantities
    return None


def place(
    fonts: Fonts,
    key: str,
    rect: QRectF,
    variants: Sequence[Variant],
    font: QFont,
    align: Qt.AlignmentFlag = LEFT,
    color: str = "text",
    shrink: bool = True,
) -> TextItem | None:
    """A TextItem of the longest fitting phrasing, its rectangle shrunk to the text (aligned as
    asked) so that neighbours may use the rest; None if no phrasing fits."""
    got = fit(fonts, variants, font, rect.width())
    if got is None:
        return None
    text, quantities = got
    if shrink:
        w = math.ceil(fonts.width(text, font)) + 1
        w = min(w, rect.width())
        if align & Qt.AlignmentFlag.AlignRight:
            rect = QRectF(rect.right() - w, rect.y(), w, rect.height())
        elif align & Qt.AlignmentFlag.AlignHCenter:
            rect = QRectF(rect.center().x() - w / 2, rect.y(), w, rect.height())
        else:
            rect = QRectF(rect.x(), rect.y(), w, rect.height())
    return TextItem(key, rect, text, font, align, color, quantities)


def elided(
    fonts: Fonts,
    key: str,
    rect: QRectF,
    text: str,
    font: QFont,
    align: Qt.AlignmentFlag = LEFT,
    color: str = "text",
) -> TextItem | None:
    """A free text (no quantities) elided to `rect`; None if not even "a…" fits."""
    fm = fonts.metrics(font)
    shown = fm.elidedText(text, Qt.TextElideMode.ElideRight, rect.width())
    if not shown or shown == "…":
        return None
    w = min(rect.width(), math.ceil(fm.horizontalAdvance(shown)) + 1)
    r = QRectF(rect.x(), rect.y(), w, rect.height())
    if align & Qt.AlignmentFlag.AlignRight:
        r.moveRight(rect.right())
    return TextItem(key, r, shown, font, align, color, (), shown != text)


# --------------------------------------------------------------------------------------------
# What the layout needs to know about the lanes


@dataclass(frozen=True)
class LaneScene:
    """Static facts about one lane: enough to lay it out and paint its background."""

    algorithm: str
    label: str
    total_time_s: float
    row_tile: int  # rows per tile of Q (and O)
    kv_tile: int  # rows per tile of K and V
    s_tile: int  # tile of S/P (naive GEMM tile) for the grid
    totals: Counters  # end-of-play counters
    layouts: tuple[ChipLayout, ...]  # per kernel
    clock: LaneClock
    #: The warp-specialized kernel's consumer warpgroups (its launch's): the roles strip draws
    #: the producer and each consumer; 0 for the other kernels (no strip).
    consumers: int = 0


@dataclass(frozen=True)
class Scene:
    config: AttentionConfig
    gpu: GpuSpec
    lanes: tuple[LaneScene, ...]
    total_time_s: float


# --------------------------------------------------------------------------------------------
# Geometry


@dataclass
class CounterRow:
    key: str  # "read", "written", "flops", "sram", "time"
    value: QRectF  # where the running value is drawn (right aligned)
    font: QFont
    color: str


@dataclass
class LegendRow:
    swatch: QRectF
    text: QRectF


@dataclass
class LaneGeo:
    rect: QRectF
    timebar: QRectF
    status: QRectF
    hbm: QRectF
    mats: dict[str, QRectF]
    widen: float
    link: QRectF
    box: QRectF  # the SM's shared memory, to scale
    regs: QRectF | None  # the SM's register file, to scale (tensor-core lanes)
    legend: list[LegendRow]
    legend_font: QFont
    counters: list[CounterRow]
    bar: QRectF  # HBM traffic so far
    roles: QRectF | None  # the warp roles strip
    role_rows: list[QRectF] = field(default_factory=list)
    role_axis: QRectF | None = None


@dataclass
class CanvasLayout:
    width: float
    height: float
    header: QRectF
    lanes: list[LaneGeo]
    texts: list[TextItem]  # static texts (painted into the background)
    swatches: list[tuple[QRectF, str]]  # legend colour squares: (where, AnimColors role key)
    clock_rect: QRectF  # the header's running clock


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


LegendEntry = tuple[str, int, str, str]  # (name, bytes, matrix, SMEM or REGISTERS)
BOOKKEEPING = ("align", "mbarriers", "other", "block")


def legend_entries(layout: ChipLayout) -> list[LegendEntry]:
    """Rows of one kernel's legend: shared-memory slots (the small bookkeeping ones merged into
    "other"), then the register slots."""
    rows: list[LegendEntry] = []
    other = 0
    for s in layout.smem_slots:
        if s.name in BOOKKEEPING:
            other += s.bytes
        else:
            rows.append((s.name, s.bytes, s.matrix, SMEM))
    if other:
        rows.append(("other", other, "", SMEM))
    for s in layout.register_slots:
        rows.append((s.name, s.bytes, s.matrix, REGISTERS))
    return rows


def fit_legend(entries: list[LegendEntry], rows: int) -> list[LegendEntry]:
    """At most `rows` entries: the register slots become one "registers" row first, then the
    stages of each ring one row ("K ring ×2"), then the smallest shared-memory slots merge into
    "other"."""
    if len(entries) <= rows:
        return entries
    smem = [e for e in entries if e[3] == SMEM]
    regs = [e for e in entries if e[3] == REGISTERS]
    tail = [("registers", sum(e[1] for e in regs), "", REGISTERS)] if regs else []
    if len(smem) + len(tail) > rows:
        smem = _merge_rings(smem)
    while len(smem) + len(tail) > rows and len(smem) >= 2:
        other = next((e for e in smem if e[0] == "other"), None)
        rest = [e for e in smem if e[0] != "other"]
        folded = 0 if other is None else other[1]
        for _ in range(1 if other is not None else 2):  # one row less each time
            if rest:
                smallest = min(rest, key=lambda e: e[1])
                rest.remove(smallest)
                folded += smallest[1]
        smem = [*rest, ("other", folded, "", SMEM)]
    return (smem + tail)[:rows]


def _merge_rings(smem: list[LegendEntry]) -> list[LegendEntry]:
    """The stages of each ring ("K stage 0", "K stage 1") as one row ("K ring ×2")."""
    out: list[LegendEntry] = []
    rings: dict[str, list[LegendEntry]] = {}
    for e in smem:
        if " stage " in e[0]:
            matrix = e[0].split(" stage ")[0]
            if matrix not in rings:
                rings[matrix] = []
                out.append(("", 0, matrix, SMEM))  # placeholder, keeps the order
            rings[matrix].append(e)
        else:
            out.append(e)
    merged = []
    for e in out:
        if e[0] == "" and e[2] in rings:
            stages = rings[e[2]]
            merged.append((f"{e[2]} ring ×{len(stages)}", sum(x[1] for x in stages), e[2], SMEM))
        else:
            merged.append(e)
    return merged


def legend_text(entry: LegendEntry) -> str:
    name, nbytes, _matrix, where = entry
    suffix = " (regs)" if where == REGISTERS and name != "registers" else ""
    return f"{name}{suffix}  {fmt_bytes(nbytes)}"


def _legend_candidates(layout: ChipLayout) -> list[LegendEntry]:
    """Every legend row `fit_legend` can make of this kernel (to size the column)."""
    entries = legend_entries(layout)
    regs = sum(e[1] for e in entries if e[3] == REGISTERS)
    smem = [e for e in entries if e[3] == SMEM]
    extra = [("other", sum(e[1] for e in smem), "", SMEM), *_merge_rings(smem)]
    if regs:
        extra.append(("registers", regs, "", REGISTERS))
    return entries + extra


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
                (f"tile loads (model): naive {nb}, {label} {ob} ({ratio} less) · DRAM "
                 f"(measured): {mn} vs {mo} ({mr} less) · on {gpu_name}", q),
                (f"tile loads (model): naive {nb}, {label} {ob} ({ratio} less) · DRAM "
                 f"(measured): {mn} vs {mo} ({mr} less)", q),
                (f"tile loads (model) {nb} vs {ob} ({ratio}) · DRAM (measured) {mn} vs {mo} "
                 f"({mr})", q),
                (f"loads (model) {ratio} less · DRAM (measured) {mr} less", (ratio, mr)),
            ]  # fmt: skip
        else:
            variants = [
                (f"tile loads (model): naive {nb}, {label} {ob} ({ratio} less) · on {gpu_name}",
                 q),
                (f"tile loads (model): naive {nb}, {label} {ob} ({ratio} less)", q),
                (f"tile loads (model): naive {nb}, {other} {ob} ({ratio} less)", q),
                (f"naive {nb} vs {ob} of tile loads (model, {ratio} less)", q),
                (f"{ratio} less tile loads (model)", (ratio,)),
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
        LANE_TITLES.get(ls.algorithm, ls.label),
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
    counters_w, counter_plan = _counter_plan(fonts, scene, ls, body)
    sram_w = _sram_width(fonts, ls)
    link_w = min(60.0, max(28.0, body.width() * 0.05))
    hbm_w = body.width() - counters_w - sram_w - link_w - 18
    hbm = QRectF(body.x(), body.y(), hbm_w, body.height())
    link = QRectF(hbm.right(), body.y(), link_w, body.height())
    sram_col = QRectF(link.right() + 4, body.y(), sram_w, body.height())
    counters_rect = QRectF(sram_col.right() + 14, body.y(), counters_w, body.height())
    mats, widen = _hbm(fonts, scene, ls, key, hbm, texts)
    _link_labels(fonts, key, link, texts)
    box, regs, legend = _sram(fonts, scene, ls, key, sram_col, texts)
    counters, bar = _counters(fonts, scene, ls, key, counters_rect, counter_plan, texts)
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
        _roles(fonts, key, geo, roles, role_labels(ls.consumers), texts, swatches)
    return geo


# ---- HBM panel


def _hbm(
    fonts: Fonts, scene: Scene, ls: LaneScene, key: str, hbm: QRectF, texts: list[TextItem]
) -> tuple[dict[str, QRectF], float]:
    cfg = scene.config
    naive = ls.algorithm == NAIVE
    n, d = cfg.seq_len, cfg.head_dim
    fh_bold, fh_small = fonts.height(fonts.bold), fonts.height(fonts.small)
    head_row = QRectF(hbm.x() + 8, hbm.y() + 3, hbm.width() - 16, fh_bold)
    foot = 4 * matrix_bytes(cfg) + (2 * attention_matrix_bytes(cfg) if naive else stats_bytes(cfg))
    fits = foot <= scene.gpu.memory_bytes
    have, cap = fmt_bytes(foot), scene.gpu.memory_label
    q = (have, cap)
    variants: list[Variant] = [
        (f"HBM holds {have} of {cap}", q),
        (f"HBM {have} of {cap}", q),
        (f"HBM {have}", (have,)),
    ]
    if not fits:
        variants = [
            (f"HBM needs {have} of {cap}: DOES NOT FIT", q),
            (f"HBM {have} > {cap}: out of memory", q),
            (f"{have} > {cap}", q),
        ]
    head = place(
        fonts, f"{key}.hbm.head", head_row, variants, fonts.bold, LEFT, "text" if fits else "error"
    )
    if head is not None:
        texts.append(head)
        room = QRectF(
            head.rect.right() + 12,
            head_row.y(),
            head_row.right() - head.rect.right() - 12,
            head_row.height(),
        )
        note = place(
            fonts,
            f"{key}.hbm.note",
            room,
            [
                (f"{cfg.label()}: 1 of {cfg.bh} heads drawn, sizes for all", ()),
                (f"1 of {cfg.bh} heads drawn, sizes for all", ()),
                (f"1 of {cfg.bh} heads drawn", ()),
            ],
            fonts.small,
            RIGHT,
            "dim",
        )
        if note is not None:
            texts.append(note)
    # three label lines under the matrices: names; N×d and m,l sizes; the widening note
    label_h = fh_small + 1
    inner = QRectF(hbm.x() + 10, head_row.bottom() + 6, hbm.width() - 20, 0)
    inner.setBottom(hbm.bottom() - 3 * label_h - 4)
    gap = 8.0
    natural = (inner.width() - 7 * gap) / (2 + 4 * d / n + 2 / n)
    side = max(8.0, min(inner.height(), natural))
    strip = side * d / n
    widen = 1.0
    if strip < MIN_STRIP_PX:
        widen = MIN_STRIP_PX / strip
        strip = MIN_STRIP_PX
        ml_w = max(MIN_ML_PX, side * 2 / n)
        side = max(8.0, min(inner.height(), (inner.width() - 7 * gap - 4 * strip - ml_w) / 2))
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
    # line 1: the names
    line1 = top + side + 2
    for name in ("Q", "K", "V", "O"):
        r = mats[name]
        item = place(
            fonts,
            f"{key}.name.{name}",
            QRectF(r.x() - 2, line1, r.width() + 4, label_h),
            [(name, ())],
            fonts.small,
            CENTER,
        )
        if item is not None:
            texts.append(item)
    sizes = fmt_bytes(attention_matrix_bytes(cfg))
    for name in ("S", "P"):
        r = mats[name]
        if naive:
            variants = [
                (f"{name}  N×N   {sizes}", (sizes,)),
                (f"{name} {sizes}", (sizes,)),
                (name, ()),
            ]
        else:
            variants = [
                (f"{name}: never stored (0 B)", ("0 B",)),
                (f"{name}: not stored", ()),
                (name, ()),
            ]
        item = place(
            fonts,
            f"{key}.name.{name}",
            QRectF(r.x(), line1, r.width(), label_h),
            variants,
            fonts.small_bold,
            CENTER,
            "text" if naive else "faint",
        )
        if item is not None:
            texts.append(item)
    # line 2: N×d size (left, under Q..O) and m,l (right, ending at the m,l strip) for tiled
    line2 = line1 + label_h
    qo = mats["Q"].united(mats["O"])
    nd = fmt_bytes(matrix_bytes(cfg))
    ml_item = None
    if not naive:
        ml_bytes = fmt_bytes(stats_bytes(cfg))
        ml_room = QRectF(mats["S"].x(), line2, mats["ml"].right() - mats["S"].x() + 4, label_h)
        ml_item = place(
            fonts,
            f"{key}.ml",
            ml_room,
            [(f"m,l  {ml_bytes}", (ml_bytes,))],
            fonts.small,
            RIGHT,
            "dim",
        )
        if ml_item is not None:
            texts.append(ml_item)
    nd_right = ml_item.rect.left() - 8 if ml_item is not None else hbm.right() - 8
    nd_item = place(
        fonts,
        f"{key}.nd",
        QRectF(qo.x() - 2, line2, nd_right - qo.x() + 2, label_h),
        [(f"N×d each: {nd}", (nd,)), (f"N×d: {nd}", (nd,)), (nd, (nd,))],
        fonts.small,
        LEFT,
        "dim",
    )
    if nd_item is not None:
        texts.append(nd_item)
    # line 3: widened strips say so (not at ×1: a widening that rounds to 1 is not mentioned)
    if widen >= 1.05:
        factor = f"×{widen:.1f}" if widen < 10 else f"×{widen:,.0f}"
        line3 = QRectF(qo.x() - 2, line2 + label_h, hbm.right() - qo.x() - 6, label_h)
        item = place(
            fonts,
            f"{key}.widen",
            line3,
            [
                (f"Q K V O drawn {factor} wider (not to scale)", (factor,)),
                (f"Q K V O {factor} wider", (factor,)),
                (f"{factor} wider", (factor,)),
            ],
            fonts.small,
            LEFT,
            "warn",
        )
        if item is not None:
            texts.append(item)
    if not naive:  # the ghost of S and P
        sp = mats["S"].united(mats["P"]).adjusted(4, 4, -4, -4)
        lines = [
            ("where naive keeps S and P:", "nothing: they stay on chip"),
            ("naive's S and P:", "never in HBM"),
        ]
        lh = fonts.height(fonts.norm)
        for a, b in lines:
            if max(fonts.width(a, fonts.norm), fonts.width(b, fonts.norm)) <= sp.width() and (
                2 * lh <= sp.height()
            ):
                cy = sp.center().y()
                for k, t in enumerate((a, b)):
                    r = QRectF(sp.x(), cy - lh + k * lh, sp.width(), lh)
                    item = place(
                        fonts, f"{key}.ghost{k}", r, [(t, ())], fonts.norm, CENTER, "faint"
                    )
                    if item is not None:
                        texts.append(item)
                break
    return mats, widen


def _link_labels(fonts: Fonts, key: str, link: QRectF, texts: list[TextItem]) -> None:
    cy = link.center().y()
    fh = fonts.height(fonts.small)
    for dy, color, variants in (
        (-14 - fh - 4, "read", [("read →", ()), ("→", ())]),
        (14 + 6, "write", [("← write", ()), ("←", ())]),
    ):
        r = QRectF(link.x(), cy + dy, link.width(), fh)
        item = place(fonts, f"{key}.link.{color}", r, variants, fonts.small, CENTER, color)
        if item is not None:
            texts.append(item)


# ---- SRAM column


def _all_legend_rows(ls: LaneScene) -> list[list[LegendEntry]]:
    return [legend_entries(ly) for ly in ls.layouts]


def _sram_width(fonts: Fonts, ls: LaneScene) -> float:
    """Width of the SRAM column: the box(es) and the widest legend row of any kernel."""
    rows = [r for ly in ls.layouts for r in _legend_candidates(ly)]
    legend_w = max((fonts.width(legend_text(r), fonts.small) for r in rows), default=40)
    has_regs = any(ly.register_slots for ly in ls.layouts)
    box_w = SMEM_BOX_W + 1 + (REGS_BOX_W + 4 if has_regs else 0.0)
    header_w = fonts.width("SRAM of 1 SM", fonts.bold)
    return max(box_w + 8 + 12 + math.ceil(legend_w) + 2, header_w + 4)


def _occupancy_variants(layout: ChipLayout) -> list[Variant]:
    occ = layout.occupancy
    if occ is None:
        return [("cuBLAS: its own tiles", ()), ("cuBLAS", ())] if layout.threads == 0 else []
    n = str(occ.blocks)
    unit = "block" if occ.blocks == 1 else "blocks"
    why = ", ".join(occ.binding)
    short = why.replace("shared memory", "smem")
    source = occ.register_source.split(" (")[0].split(":")[0]
    return [
        (f"{n} {unit}/SM ({why}; {occ.registers} regs/thread, {source})", ()),
        (f"{n} {unit}/SM ({why}; {occ.registers} regs/thread)", ()),
        (f"{n} {unit}/SM ({why})", ()),
        (f"{n} {unit}/SM ({short})", ()),
        (f"{n} {unit}/SM", ()),
    ]


def _sram(
    fonts: Fonts,
    scene: Scene,
    ls: LaneScene,
    key: str,
    col: QRectF,
    texts: list[TextItem],
) -> tuple[QRectF, QRectF | None, list[LegendRow]]:
    fh_bold, fh_small = fonts.height(fonts.bold), fonts.height(fonts.small)
    cap = fmt_bytes(scene.gpu.smem_per_sm_bytes)
    head = place(
        fonts,
        f"{key}.sram.head",
        QRectF(col.x(), col.y(), col.width(), fh_bold),
        [(f"SRAM of 1 SM: {cap}", (cap,)), ("SRAM of 1 SM", ()), ("SRAM", ())],
        fonts.bold,
        LEFT,
    )
    if head is not None:
        texts.append(head)
    # the occupancy line under the box (the first kernel's: one fused kernel per lane)
    occ_row = QRectF(col.x(), col.bottom() - fh_small, col.width(), fh_small)
    occ_variants = _occupancy_variants(ls.layouts[0]) if ls.layouts else []
    occ = place(fonts, f"{key}.occupancy", occ_row, occ_variants, fonts.small, LEFT, "dim")
    if occ is not None:
        texts.append(occ)
    bottom = occ_row.y() - 3 if occ is not None else col.bottom()
    has_regs = any(ly.register_slots for ly in ls.layouts)
    box = QRectF(
        col.x() + 1, col.y() + fh_bold + 4, SMEM_BOX_W, max(10.0, bottom - col.y() - fh_bold - 4)
    )
    regs = None
    if has_regs:
        regs = QRectF(box.right() + 4, box.y(), REGS_BOX_W, box.height())
    legend_x = (regs or box).right() + 8
    # legend rows: as many as the busiest kernel has, one per line; squeezed to fit the box
    rows_needed = max((len(r) for r in _all_legend_rows(ls)), default=0)
    row_h = fh_small
    fits = int(box.height() // row_h)
    legend = []
    for k in range(min(rows_needed, fits)):
        y = box.y() + k * row_h
        legend.append(
            LegendRow(
                QRectF(legend_x, y + row_h / 2 - 4, 8, 8),
                QRectF(legend_x + 12, y, col.right() - legend_x - 12, row_h),
            )
        )
    return box, regs, legend


# ---- counters


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


def _counter_plan(
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


def _counters(
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


# ---- warp roles strip


def _roles(
    fonts: Fonts,
    key: str,
    geo: LaneGeo,
    rect: QRectF,
    labels: tuple[str, ...],
    texts: list[TextItem],
    swatches: list[tuple[QRectF, str]],
) -> None:
    """The roles strip: one row per role (`labels`, producer first), the tiles' axis under
    them and the colours' legend beside the heading."""
    fh = fonts.height(fonts.small)
    head = place(
        fonts,
        f"{key}.roles.head",
        QRectF(rect.x(), rect.y(), rect.width() * 0.5, fh),
        [("inside one SM: the warp roles of this block", ()), ("warp roles", ())],
        fonts.small_bold,
        LEFT,
    )
    if head is not None:
        texts.append(head)
    label_w = max(fonts.width(t, fonts.small) for t in labels) + 8
    axis_h = fh
    rows_top = rect.y() + fh + 2
    row_h = max(8.0, (rect.bottom() - axis_h - rows_top) / len(labels))
    geo.role_rows = []
    for k, label in enumerate(labels):
        r = QRectF(rect.x() + label_w, rows_top + k * row_h, rect.width() - label_w, row_h - 2)
        geo.role_rows.append(r)
        lab = QRectF(rect.x(), r.y() - 1, label_w - 4, row_h)
        item = place(
            fonts,
            f"{key}.roles.label{k}",
            lab,
            [(label, ()), (label.split(" ")[0], ())],
            fonts.small,
            RIGHT,
            "dim",
        )
        if item is not None:
            texts.append(item)
    geo.role_axis = QRectF(
        rect.x() + label_w, rows_top + len(labels) * row_h, rect.width() - label_w, axis_h
    )
    x = (head.rect.right() + 16) if head is not None else rect.x()
    for name, variants in (
        ("gemm", ("GEMMs on the tensor cores", "GEMMs")),
        ("softmax", ("softmax",)),
        ("wait", ("waits for K_j / its turn", "waits")),
        ("wait_pv", ("waits for P·V",)),
        ("copy_k", ("TMA copy in flight", "TMA copy")),
    ):
        r = QRectF(x + 13, rect.y(), rect.right() - x - 13, fh)
        item = place(
            fonts,
            f"{key}.roles.legend.{name}",
            r,
            [(v, ()) for v in variants],
            fonts.small,
            LEFT,
            "dim",
        )
        if item is None:
            break
        texts.append(item)
        swatches.append((QRectF(x, rect.y() + fh / 2 - 4, 9, 8), f"role.{name}"))
        x = item.rect.right() + 12


# --------------------------------------------------------------------------------------------
# Checking a layout


_BARE_TOTAL = re.compile(r"/ [\d.,\u2009]+$")


def layout_problems(
    fonts: Fonts, items: Sequence[TextItem], width: float, height: float
) -> list[str]:
    """What breaks the rules of the module docstring in `items` drawn on a `width` × `height`
    canvas (empty when nothing): a text wider or taller than its rectangle or off the canvas, two
    texts overlapping, a quantity missing or cut, an elided text that carries a quantity."""
    out: list[str] = []
    for it in items:
        w, h = fonts.width(it.text, it.font), fonts.height(it.font)
        if w > it.rect.width() + 0.75:
            out.append(f"{it.key}: {it.text!r} needs {w:.1f} px, has {it.rect.width():.1f}")
        if h > it.rect.height() + 1.5:
            out.append(
                f"{it.key}: {it.text!r} needs {h:.1f} px of height, has {it.rect.height():.1f}"
            )
        r = it.rect
        if (
            r.left() < -0.5
            or r.top() < -0.5
            or r.right() > width + 0.5
            or r.bottom() > height + 0.5
        ):
            out.append(f"{it.key}: {it.text!r} lies outside the canvas")
        missing = [q for q in it.quantities if q not in it.text]
        if missing:
            out.append(f"{it.key}: {it.text!r} lost {missing}")
        if it.elided and it.quantities:
            out.append(f"{it.key}: {it.text!r} is elided but carries quantities")
        if _BARE_TOTAL.search(it.text):
            out.append(f"{it.key}: {it.text!r} ends in a number without its unit")
    for a, b in itertools.combinations(items, 2):
        inter = a.rect.intersected(b.rect)
        if inter.width() > 0.5 and inter.height() > 0.5:
            out.append(f"{a.key} {a.text!r} overlaps {b.key} {b.text!r}")
    return out
