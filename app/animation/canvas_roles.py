"""The warp roles strip of the warp-specialized lane: the producer and each consumer warpgroup,
one row each."""

from __future__ import annotations

from PySide6.QtCore import QRectF

from .canvas_geometry import LaneGeo
from .canvas_text import LEFT, RIGHT, Fonts, TextItem, place


def role_labels(consumers: int) -> tuple[str, ...]:
    """The roles strip's row labels: the producer, then each consumer warpgroup."""
    return ("producer (TMA)", *(f"consumer {c}" for c in range(consumers)))


def lay_out_roles(
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
