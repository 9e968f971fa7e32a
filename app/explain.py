"""The explain pane: the lesson's formulas with the current numbers, and the roofline verdict.

`explain_html` is plain Python (testable without a window); `ExplainPane` follows the app state,
redraws at the pace of app/pacing.py, and skips the work while hidden, so the slider pays
nothing for a closed pane.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from PySide6.QtWidgets import QTextBrowser, QWidget

from gpu.algorithms import ALGORITHMS, NAIVE, TILED
from gpu.config import STAT_BYTES, AttentionConfig
from gpu.costmodel import (
    GpuSpec,
    attention_matrix_bytes,
    matrix_bytes,
    naive_oom_seq_len,
    stats_bytes,
)

from .background import LatestOnly
from .pacing import EXPLAIN_MS, coalesced
from .state.app_state import AppState, Change
from .state.model_cache import cost
from .state.units import fmt_bytes, fmt_flops, fmt_int, fmt_ms
from .theme import DARK, Palette


@dataclass(frozen=True)
class ExplainInputs:
    config: AttentionConfig
    algorithms: tuple[str, ...]
    gpu: GpuSpec  # whose ridge point decides memory- vs compute-bound
    gpu_label: str
    budget_bytes: int | None  # the memory the verdicts compare against (None: unknown)
    budget_name: str  # "an RTX 4090", "this H200", "this machine's RAM"

    @classmethod
    def from_state(cls, s: AppState) -> ExplainInputs:
        return cls(
            config=s.config,
            algorithms=s.algorithms,
            gpu=s.target_gpu,
            gpu_label=s.target_gpu_label,
            budget_bytes=s.budget.line_bytes,
            budget_name=s.budget_name,
        )


def compare(nbytes: int, budget_bytes: int | None, budget_name: str) -> str:
    """'— more than an RTX 4090 has (24 GB)' or '— fits in an RTX 4090 (24 GB, 27%)'."""
    if not budget_bytes:
        return ""
    if nbytes > budget_bytes:
        return f" — more than {budget_name} has ({fmt_bytes(budget_bytes)})"
    share = nbytes / budget_bytes
    pct = f"{share:.0%}" if share >= 0.01 else "< 1%"
    return f" — fits in {budget_name} ({fmt_bytes(budget_bytes)}, {pct} of it)"


def s_formula(config: AttentionConfig) -> str:
    """'12 × 32 768² × 2 B' — with B·h only where they are not 1."""
    parts = []
    if config.batch > 1:
        parts.append(fmt_int(config.batch))
    if config.heads > 1 or not parts:
        parts.append(fmt_int(config.heads))
    parts.append(f"{fmt_int(config.seq_len)}²")
    parts.append(f"{config.elem_bytes} B")
    return " × ".join(parts)


def explain_html(inp: ExplainInputs, palette: Palette = DARK) -> str:
    c = inp.config
    col = {a: palette.color(a) for a in ALGORITHMS}
    muted = palette.muted

    def name(a: str) -> str:
        return f'<b style="color:{col[a]}">{escape(ALGORITHMS[a].label)}</b>'

    s_bytes = attention_matrix_bytes(c)
    qkvo = 4 * matrix_bytes(c)
    naive = cost(c, NAIVE)
    tiled = cost(c, TILED)
    bh = f"{fmt_int(c.batch)} × {fmt_int(c.heads)}" if c.batch > 1 else fmt_int(c.heads)
    out = [
        f"<h3 style='margin-bottom:2px'>{escape(c.label())}</h3>",
        f"<p style='color:{muted};margin-top:0'>FLOPs 4·B·h·N²·d"
        f"{' ÷ 2 (causal)' if c.causal else ''} = {fmt_flops(naive.flops)} for every algorithm."
        "</p>",
        f"<h4>{name(NAIVE)}: three kernels, S and P in HBM</h4>",
        "<p><code>S = QKᵀ/√d</code> → HBM, <code>P = softmax(S)</code> → HBM, "
        "<code>O = PV</code>.</p>",
        "<ul>",
        f"<li><b>S alone</b>: {s_formula(c)} = <b>{fmt_bytes(s_bytes)}</b>"
        f"{escape(compare(s_bytes, inp.budget_bytes, inp.budget_name))}</li>",
        f"<li>P is as large again. Peak: S + P + Q, K, V, O ({fmt_bytes(qkvo)}) = "
        f"<b>{fmt_bytes(naive.peak_bytes)}</b>"
        f"{escape(compare(naive.peak_bytes, inp.budget_bytes, inp.budget_name))}</li>",
    ]
    if inp.budget_bytes:
        wall = naive_oom_seq_len(c, inp.budget_bytes)
        where = "you are past it" if wall <= c.seq_len else "still ahead"
        out.append(
            f"<li>The wall: in {fmt_bytes(inp.budget_bytes)} naive runs out of memory "
            f"from N = {fmt_int(wall)} ({where}).</li>"
        )
    out.append("</ul>")

    out += [
        f"<h4>{name(TILED)}: one fused kernel, S and P stay on chip</h4>",
        "<ul>",
        f"<li>Extra memory: row max m and row sum l, 2 × {bh} × {fmt_int(c.seq_len)} × "
        f"{STAT_BYTES} B = <b>{fmt_bytes(stats_bytes(c))}</b> — O(N), not O(N²).</li>",
        f"<li>Peak {fmt_bytes(tiled.peak_bytes)}: "
        f"{naive.peak_bytes / tiled.peak_bytes:,.0f}× less than naive.</li>",
        f"<li>HBM traffic {fmt_bytes(tiled.hbm_bytes)} vs naive {fmt_bytes(naive.hbm_bytes)}: "
        f"{naive.hbm_bytes / tiled.hbm_bytes:,.1f}× less (tiles Br = {c.block_m}, "
        f"Bc = {c.block_n}).</li>",
        "</ul>",
    ]

    g = inp.gpu
    ridge = g.ridge_flops_per_byte
    out.append(
        f"<h4>Memory- or compute-bound on {escape(inp.gpu_label)}</h4>"
        f"<p style='color:{muted};margin-top:0'>Ridge point = {g.fp16_tensor_flops / 1e12:.0f} "
        f"TFLOP/s ÷ {g.bandwidth_bytes_s / 1e12:.2f} TB/s = <b>{ridge:.0f} FLOP/B</b>. "
        "Below it, moving bytes takes longer than the math.</p>"
    )
    rows = []
    shown = [a for a in ALGORITHMS if a in inp.algorithms] or [NAIVE, TILED]
    for a in shown:
        ac = cost(c, a)
        for k in ac.kernels:
            ai = (k.flops / k.hbm_bytes) if k.hbm_bytes else 0.0
            bound = "memory" if ai < ridge else "compute"
            text = escape(ALGORITHMS[a].label) if len(ac.kernels) == 1 else k.name
            label = f'<span style="color:{col[a]}">{text}</span>'
            rows.append(
                f"<tr><td>{label}</td><td align=right>{fmt_bytes(k.hbm_bytes)}</td>"
                f"<td align=right>{ai:,.1f}</td><td>{bound}</td>"
                f"<td align=right>{fmt_ms(g.kernel_seconds(k.hbm_bytes, k.flops) * 1e3)}</td></tr>"
            )
    out.append(
        "<table cellspacing=0 cellpadding=3 width='100%'>"
        f"<tr style='color:{muted}'><td>kernel</td><td align=right>HBM</td>"
        "<td align=right>FLOP/B</td><td>bound</td><td align=right>roofline</td></tr>"
        + "".join(rows)
        + "</table>"
    )
    verdicts = []
    for a in shown:
        ac = cost(c, a)
        ai = ac.arithmetic_intensity
        bound = "memory-bound" if ai < ridge else "compute-bound"
        verdicts.append(
            f"<li>{name(a)}: {ai:,.1f} FLOP/B {'<' if ai < ridge else '≥'} {ridge:.0f} → "
            f"<b>{bound}</b>, roofline time {fmt_ms(ac.modeled_seconds(g) * 1e3)}</li>"
        )
    out.append("<ul>" + "".join(verdicts) + "</ul>")
    if NAIVE in shown:
        out.append(
            f"<p style='color:{muted}'>The softmax kernel does no matmul at all: it reads S and "
            "writes P, pure traffic. For N ≫ d naive's bytes grow as N² with nothing to hide "
            "them behind.</p>"
        )
    return "\n".join(out)


class ExplainPane(QTextBrowser):
    """Shows explain_html; updates only while visible (a hidden pane costs the slider nothing)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("explainPane")
        self.setOpenExternalLinks(False)
        self.setToolTip("The lesson's formulas for the current configuration (F1 shows/hides).")
        self._inputs: ExplainInputs | None = None
        self._palette: Palette = DARK
        self._shown: tuple[ExplainInputs, str] | None = None
        self._paced_refresh = coalesced(self._refresh, EXPLAIN_MS, parent=self)
        self.html_worker = LatestOnly(self)

    def on_state(self, change: Change) -> None:
        inputs = ExplainInputs.from_state(change.new)
        if inputs != self._inputs:
            self.set_inputs(inputs)

    def set_inputs(self, inputs: ExplainInputs, now: bool = False) -> None:
        self._inputs = inputs
        if now:
            self._paced_refresh.cancel()
            self._refresh()
            self.html_worker.flush()
        else:
            self._paced_refresh()

    def set_palette(self, palette: Palette) -> None:
        self._palette = palette
        self._shown = None
        self._refresh()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._refresh()

    def _refresh(self) -> None:
        if self._inputs is None or not self.isVisible():
            return
        key = (self._inputs, self._palette.name)
        if self._shown == key:
            return
        self._shown = key
        inputs, palette = self._inputs, self._palette
        # The text (cost-model figures for a shape perhaps not seen yet) is made off the GUI
        # thread; only laying it out happens here.
        self.html_worker.submit(lambda: explain_html(inputs, palette), self._show_html)

    def _show_html(self, html: str) -> None:
        bar = self.verticalScrollBar().value()
        self.setHtml(html)
        self.verticalScrollBar().setValue(bar)

    def plain_text(self) -> str:
        """The current explanation as text, whether or not the pane is visible (tests)."""
        if self._inputs is None:
            return ""
        doc = QTextBrowser()
        doc.setHtml(explain_html(self._inputs, self._palette))
        return doc.toPlainText()
