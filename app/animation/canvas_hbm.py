"""The HBM panel of a lane: the matrices in device memory, drawn to scale (narrow ones widened,
and saying so), and the labels of the link to the chip."""

from __future__ import annotations

from PySide6.QtCore import QRectF

from app.state.units import fmt_bytes
from gpu.algorithms import NAIVE
from gpu.model.costmodel import attention_matrix_bytes, matrix_bytes, stats_bytes

from .canvas_geometry import MIN_ML_PX, MIN_STRIP_PX, LaneScene, Scene
from .canvas_text import CENTER, LEFT, RIGHT, Fonts, TextItem, Variant, place


def lay_out_hbm(
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


def link_labels(fonts: Fonts, key: str, link: QRectF, texts: list[TextItem]) -> None:
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
