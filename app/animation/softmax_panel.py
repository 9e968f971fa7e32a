"""The online softmax of one query row, tile by tile, with the real numbers (NumPy)."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QTextBrowser, QVBoxLayout, QWidget

from ..state.animation.online_softmax import (
    TOY_DIM,
    TOY_KEYS,
    TOY_TILE,
    OnlineSoftmaxTrace,
    toy_trace,
)
from .colors import DARK, AnimColors


def _vec(v: np.ndarray, digits: int = 3) -> str:
    return " ".join(f"{x:+.{digits}f}" for x in v)


class OnlineSoftmaxPanel(QWidget):
    """m, l and the rescaled O after each key tile, ending at the exact softmax(s)·V."""

    def __init__(
        self, parent: QWidget | None = None, trace: OnlineSoftmaxTrace | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("onlineSoftmaxPanel")
        self.view = QTextBrowser(self)
        self.view.setObjectName("onlineSoftmaxText")
        self.view.setOpenLinks(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.active_tile = -1
        self.highlight, self.border = DARK.highlight.name(), DARK.panel_edge.name()
        self.set_trace(trace or toy_trace())

    @property
    def final_row(self) -> np.ndarray:
        """The panel's last O row (after the final tile)."""
        return self.trace.final

    @property
    def exact_row(self) -> np.ndarray:
        return self.trace.exact

    def set_colors(self, colors: AnimColors) -> None:
        """Follow the theme (the text itself takes the widget palette's colours)."""
        self.highlight = colors.highlight.name()
        self.border = colors.panel_edge.name()
        self._render()

    def set_trace(self, trace: OnlineSoftmaxTrace) -> None:
        self.trace = trace
        self._render()

    def set_lazy(self, lazy: bool) -> None:
        """Rescale as the lane's kernel does: lazily (the tensor-core kernels) or on every
        growth of the max (the readable kernel)."""
        if lazy != self.trace.lazy:
            self.set_trace(toy_trace(lazy))

    def set_active_tile(self, tile: int) -> None:
        """Highlight the row of key tile `tile`; -1 for none."""
        if tile != self.active_tile:
            self.active_tile = tile
            self._render()

    def _render(self) -> None:
        t = self.trace
        rows = []
        for u in t.updates:
            bg = f' style="background:{self.highlight}"' if u.tile == self.active_tile else ""
            if u.tile == 0:
                rescale = "—"
            elif u.rescaled:
                rescale = f"{u.rescale:.4f}"
            else:
                rescale = "skipped (lazy)"
            previous = t.updates[u.tile - 1].m if u.tile > 0 else u.m
            grew = " ↑" if u.m > previous else ""
            rows.append(
                f"<tr{bg}><td nowrap>{u.tile} <small>(k {u.keys[0]}–{u.keys[1] - 1})</small></td>"
                f"<td nowrap><tt>{_vec(u.scores, 2)}</tt></td>"
                f"<td nowrap><tt>{u.m:+.4f}{grew}</tt></td>"
                f"<td nowrap><tt>{u.l:.4f}</tt></td><td nowrap><tt>{rescale}</tt></td>"
                f"<td nowrap><tt>{_vec(u.out)}</tt></td></tr>"
            )
        diff = t.max_abs_diff
        ok = "equal" if np.allclose(t.final, t.exact) else "DIFFERENT"
        mode = (
            "<br><b>Lazy rescaling</b>, as the tensor-core kernels do it: the exponentials stay "
            "relative to a reference max that moves (and rescales l and O) only when a tile's "
            "max exceeds it by more than 2<sup>8</sup>; P stays below 256, O/l is unchanged."
            if t.lazy
            else "<br>Rescaled on every growth of m, as the readable kernel does it."
        )
        html = f"""
<div style="font-size:9pt">
<p style="margin:2px"><b>Online softmax of one query row</b>, tile by tile, real numbers
(NumPy float64; toy sizes: {TOY_KEYS} keys in tiles of {TOY_TILE}, d = {TOY_DIM}).<br>
Per key tile j: m = max(m, max s<sub>j</sub>); α = e<sup>m<sub>old</sub>−m</sup>;
l = α·l + Σ e<sup>s<sub>j</sub>−m</sup>; O = α·O + e<sup>s<sub>j</sub>−m</sup>·V<sub>j</sub>.
The last column is O/l so far. {mode}</p>
<table cellspacing="0" cellpadding="2" border="1" style="border-color:{self.border}">
<tr><th>tile j</th><th>scores s = q·k/√d</th><th>m</th><th>l</th><th>α (rescale)</th>
<th>O / l so far</th></tr>
{"".join(rows)}
<tr><td colspan="5"><b>exact softmax(s)·V</b>, all keys at once</td>
<td nowrap><tt>{_vec(t.exact)}</tt></td></tr>
<tr><td colspan="5"><b>difference</b> max |online − exact| ({ok})</td>
<td nowrap><tt>{diff:.1e}</tt></td></tr>
</table></div>"""
        self.view.setHtml(html)
