"""The Tiles tab's colours as QColors, for the current theme (AnimationPalette in
app/kit/theme.py).

Every painter of the tab (the lanes canvas, the trace views, the block strip, the source panel)
holds one `AnimColors` and repaints with a new one when the theme changes
(`TileAnimationWidget.set_theme`)."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor

from gpu.model.schedule import COMPUTE, READ, WRITE

from ..kit.theme import AnimationPalette, animation_palette
from ..state.animation.warp_roles import (
    COPY_K,
    COPY_V,
    EPILOGUE,
    GEMM,
    ISSUE,
    PV,
    SOFTMAX,
    WAIT,
    WAIT_PV,
)


def _q(hex_color: str) -> QColor:
    """'#rrggbb' or '#rrggbbaa' (alpha last, unlike Qt's own '#aarrggbb')."""
    if len(hex_color) == 9:
        c = QColor(hex_color[:7])
        c.setAlpha(int(hex_color[7:], 16))
        return c
    return QColor(hex_color)


@dataclass(frozen=True)
class AnimColors:
    """QColors of one theme; see the module docstring."""

    name: str
    bg: QColor
    label_on_fill: QColor
    panel: QColor
    panel_edge: QColor
    hbm_panel: QColor
    empty: QColor
    text: QColor
    dim: QColor
    faint: QColor
    read: QColor
    write: QColor
    compute: QColor
    grid: QColor
    slot: dict[str, QColor]
    slot_edge: dict[str, QColor]
    slot_empty: QColor
    box: QColor
    box_edge: QColor
    timebar: QColor
    timebar_lane: QColor
    progress: QColor
    done: QColor
    warn: QColor
    error: QColor
    waves: tuple[QColor, ...]
    matrix: dict[str, QColor]  # HBM fill of each matrix
    kind: dict[str, QColor]  # READ / WRITE / COMPUTE
    phase: dict[str, QColor]  # traced phases
    kernel: dict[str, QColor]  # naive's kernels in kernel-level traces
    role: dict[str, QColor]  # warp-role activities (warp_roles.py kinds)
    highlight: QColor
    highlight_tag: QColor
    select: QColor
    cursor: QColor

    @classmethod
    def of(cls, palette: AnimationPalette) -> AnimColors:
        p = palette
        read, write, compute = _q(p.read), _q(p.write), _q(p.compute)
        inp, big, out = _q(p.input_matrix), _q(p.big_matrix), _q(p.out_matrix)
        wait = _q(p.faint)
        wait.setAlpha(110)
        return cls(
            name=p.name,
            bg=_q(p.background),
            label_on_fill=_q(p.label_on_fill),
            panel=_q(p.panel),
            panel_edge=_q(p.panel_edge),
            hbm_panel=_q(p.hbm_panel),
            empty=_q(p.empty_matrix),
            text=_q(p.text),
            dim=_q(p.dim),
            faint=_q(p.faint),
            read=read,
            write=write,
            compute=compute,
            grid=_q(p.grid),
            slot={k: _q(v) for k, v in p.slot_fills.items()},
            slot_edge={k: _q(v) for k, v in p.slot_edges.items()},
            slot_empty=_q(p.slot_empty),
            box=_q(p.box),
            box_edge=_q(p.box_edge),
            timebar=_q(p.timebar),
            timebar_lane=_q(p.timebar_lane),
            progress=_q(p.progress),
            done=_q(p.done),
            warn=_q(p.warn),
            error=_q(p.error),
            waves=tuple(_q(c) for c in p.waves),
            matrix={"Q": inp, "K": inp, "V": inp, "O": out, "ml": out, "S": big, "P": big},
            kind={READ: read, WRITE: write, COMPUTE: compute},
            phase={
                "load_Q_i": read,
                "load_K_j": _q(p.read_second),
                "compute_S_ij": compute,
                "store_O_i": write,
            },
            kernel={"gemm_qk": compute, "softmax": big, "gemm_pv": compute},
            role={
                WAIT: wait,
                GEMM: compute,
                SOFTMAX: _q(p.softmax),
                WAIT_PV: _q(p.dim),
                EPILOGUE: write,
                PV: compute,
                COPY_K: read,
                COPY_V: _q(p.read_third),
                ISSUE: _q(p.text),
            },
            highlight=_q(p.source_highlight),
            highlight_tag=_q(p.source_highlight_tag),
            select=_q(p.text),
            cursor=_q(p.cursor),
        )

    def wave(self, k: int) -> QColor:
        return self.waves[k % len(self.waves)]


def colors_for(theme: str) -> AnimColors:
    return AnimColors.of(animation_palette(theme))


DARK = colors_for("dark")
