"""The SRAM column of a lane: shared memory and registers of one SM, their legend (what each
region holds, fitted to the rows there are) and the occupancy line."""

from __future__ import annotations

import math

from PySide6.QtCore import QRectF

from app.state.units import fmt_bytes

from ..state.animation.chip import REGISTERS, SMEM, ChipLayout
from .canvas_geometry import REGS_BOX_W, SMEM_BOX_W, LaneScene, LegendRow, Scene
from .canvas_text import LEFT, Fonts, TextItem, Variant, place

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


def _all_legend_rows(ls: LaneScene) -> list[list[LegendEntry]]:
    return [legend_entries(ly) for ly in ls.layouts]


def sram_width(fonts: Fonts, ls: LaneScene) -> float:
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


def lay_out_sram(
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
