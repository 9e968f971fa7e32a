"""The explain pane: the lesson's formulas with the current numbers, and the roofline verdicts.

The verdicts are gpu.roofline's (`explain`): per kernel, the roof that binds (HBM, L2, tensor
cores, fp32 CUDA cores or the exponential unit) and so whether it is memory- or compute-bound,
from the bytes the hardware counters measured where the current point was profiled and from
the cost model's L2-aware estimate otherwise; every byte figure says which. When a measurement
arrives, the verdict is the measured one. FLOPs are named: useful (4·B·h·N²·d, halved under a
causal mask: what TFLOP/s figures count) or executed (what the kernels issue).

`explain_html` is plain Python (testable without a window); `ExplainPane` follows the app state
and the results, redraws at the pace of app/pacing.py, makes its text off the GUI thread, and
skips the work while hidden, so the slider pays nothing for a closed pane.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
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
from gpu.results import RunResult
from gpu.roofline import MEASURED, AlgorithmVerdict, Explanation, KernelVerdict, explain

from .background import LatestOnly
from .pacing import EXPLAIN_MS, coalesced
from .state.app_state import AppState, Change
from .state.family import cache_config
from .state.model_cache import band, cost
from .state.units import fmt_bytes, fmt_flops, fmt_int, fmt_intensity, fmt_ms
from .theme import DARK, Palette

#: How the pane says which roof binds.
ROOF_BINDS = {
    "hbm": "HBM bandwidth binds",
    "l2": "L2 bandwidth binds",
    "tensor": "the tensor cores bind",
    "fp32": "the fp32 CUDA cores bind",
    "xu": "the exponential unit binds",
}


@dataclass(frozen=True)
class ExplainInputs:
    config: AttentionConfig
    algorithms: tuple[str, ...]
    gpu: GpuSpec  # whose roofs decide memory- vs compute-bound
    gpu_label: str
    budget_bytes: int | None  # the memory the verdicts compare against (None: unknown)
    budget_name: str  # "an RTX 4090", "this H200", "this machine's RAM"
    #: Results at this config, per algorithm (measured or recorded; profiled ones carry bytes).
    results: tuple[tuple[str, RunResult], ...] = ()
    #: Devices P (Device ▸ Devices): past one, only the ring runs.
    devices: int = 1

    @classmethod
    def from_state(
        cls, s: AppState, results: Mapping[str, RunResult] | None = None
    ) -> ExplainInputs:
        return cls(
            config=s.config,
            algorithms=s.algorithms,
            gpu=s.target_gpu,
            gpu_label=s.target_gpu_label,
            budget_bytes=s.budget.line_bytes,
            budget_name=s.budget_name,
            results=tuple((results or {}).items()),
            devices=s.devices,
        )


def compare(nbytes: int, budget_bytes: int | None, budget_name: str) -> str:
    """'— more than an RTX 4090 has (25.8 GB)' or '— fits in an RTX 4090 (25.8 GB, 27%)'."""
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


def _shown(inp: ExplainInputs) -> list[str]:
    """The algorithms explained, in the app's order (naive and tiled when none is ticked)."""
    return [a for a in ALGORITHMS if a in inp.algorithms] or [NAIVE, TILED]


def explanation(inp: ExplainInputs) -> Explanation:
    """gpu.roofline's verdicts for the shown algorithms (naive always, for the DRAM ratios),
    from the results given for this config. A result of an algorithm that ignores the tile
    sizes holds for every tile size: it is judged at this config."""
    shown = _shown(inp)
    algos = [NAIVE, *(a for a in shown if a != NAIVE)]
    results = {
        a: r if r.config == inp.config else replace(r, config=inp.config)
        for a, r in inp.results
        if cache_config(r.config, a) == cache_config(inp.config, a)
    }
    bands = {a: band(inp.config, a, inp.gpu) for a in algos}  # memoized: a slider stop's
    return explain(inp.config, algos, inp.gpu, results, bands=bands)


def explain_html(inp: ExplainInputs, palette: Palette = DARK) -> str:
    c = inp.config
    col = {a: palette.color(a) for a in ALGORITHMS}
    muted = palette.muted

    def name(a: str) -> str:
        return f'<b style="color:{col[a]}">{escape(ALGORITHMS[a].label)}</b>'

    def note(text: str) -> str:
        return f"<span style='color:{muted}'>{text}</span>"

    e = explanation(inp)
    shown = _shown(inp)
    s_bytes = attention_matrix_bytes(c)
    qkvo = 4 * matrix_bytes(c)
    naive = cost(c, NAIVE)
    tiled = cost(c, TILED)
    bh = f"{fmt_int(c.batch)} × {fmt_int(c.heads)}" if c.batch > 1 else fmt_int(c.heads)
    useful = naive.flops
    out = [
        f"<h3 style='margin-bottom:2px'>{escape(c.label())}</h3>",
        f"<p style='color:{muted};margin-top:0'>Useful FLOPs 4·B·h·N²·d"
        f"{' ÷ 2 (causal)' if c.causal else ''} = {fmt_flops(useful)} for every algorithm: "
        "what TFLOP/s and the roofline's intensity count.",
    ]
    if c.causal:
        executed = {a: e.algorithm(a).executed_flops for a in shown}
        parts = ", ".join(
            f"{escape(ALGORITHMS[a].label)} {fmt_flops(f)}" for a, f in executed.items()
        )
        out.append(
            f" The kernels execute more ({parts}): naive computes all of S, the fused kernels "
            "compute the tiles on the diagonal in full."
        )
    out.append("</p>")
    if inp.devices > 1:
        out.append(
            f"<p><b>Devices = {inp.devices}: only the ring runs</b> (the Ring tab plays and "
            "measures it); naive and the fused kernels run on one device and are off. What "
            "follows is one device holding the whole sequence, the case the ring divides.</p>"
        )
    out += [
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
    ]
    out += [f"<li>{_ratio_line(e, a, name)}</li>" for a in shown if f"naive/{a}" in e.naive_ratios]
    out.append("</ul>")
    out += _roofline_section(e, inp, shown, name, note, palette)
    if NAIVE in shown:
        out.append(
            f"<p style='color:{muted}'>The softmax kernel does no matmul at all: it reads S and "
            "writes P, pure traffic. For N ≫ d naive's bytes grow as N² with nothing to hide "
            "them behind.</p>"
        )
    return "\n".join(out)


def _ratio_line(e: Explanation, a: str, name) -> str:  # type: ignore[no-untyped-def]
    """Naive's DRAM bytes over a fused kernel's: measured (counters) beside the model's."""
    r = e.naive_ratios[f"naive/{a}"]
    model = f"{r['model_l2_aware']:,.1f}× with the L2 cache, {r['model_no_reuse']:,.1f}× without"
    if r["measured"] is not None:
        v, n = e.algorithm(a), e.algorithm(NAIVE)
        return (
            f"DRAM traffic, naive ÷ {name(a)}: <b>{r['measured']:,.0f}× less, measured</b> "
            f"({fmt_bytes(n.bytes)} vs {fmt_bytes(v.bytes)}, hardware counters; model: {model})"
        )
    return f"DRAM traffic, naive ÷ {name(a)}: {model} (model; not measured here)"


def _roofline_section(e, inp, shown, name, note, palette) -> list[str]:  # type: ignore[no-untyped-def]
    """The roofs, then per algorithm its verdict and, for naive, each kernel's: the bytes and
    their source, useful (and under a causal mask executed) FLOP per byte, the roof that binds,
    the roofline's time and the measured one."""
    roofs, muted = e.roofs, palette.muted
    out = [
        f"<h4>Memory- or compute-bound on {escape(inp.gpu_label)}</h4>",
        f"<p style='color:{muted};margin-top:0'>Roofs: "
        + " · ".join(escape(r.label) for r in roofs.values())
        + ". A kernel's time at a roof is its work there over the roof's peak; the longest "
        "binds. Bytes are what the hardware counters measured where the point was profiled, "
        "else the model's L2-aware estimate.</p>",
        "<ul>",
    ]
    causal = inp.config.causal
    for a in shown:
        v = e.algorithm(a)
        item = f"<li>{_verdict_line(v, name, note)}"
        if len(v.kernels) > 1:
            parts = "".join(f"<li>{_kernel_line(k, causal, note)}</li>" for k in v.kernels)
            item += f"<ul style='margin-top:0'>{parts}</ul>"
        elif v.kernels:
            item += f"<br>{note(_figures(v.kernels[0], causal))}"
        out.append(item + "</li>")
    out.append("</ul>")
    return out


def _figures(k: KernelVerdict, causal: bool) -> str:
    """'102 MB DRAM (measured), 8 066 useful FLOP/B (executed 9 100)'."""
    source = "measured" if k.bytes_source == MEASURED else "model"
    text = f"{fmt_bytes(k.dram_bytes)} DRAM ({source})"
    if k.intensity:
        text += f", {fmt_intensity(k.intensity)} useful FLOP/B"
        if causal and k.executed_intensity:
            text += f" (executed {fmt_intensity(k.executed_intensity)})"
    return text


def _kernel_line(k: KernelVerdict, causal: bool, note) -> str:  # type: ignore[no-untyped-def]
    timing = f"roofline {fmt_ms(k.roofline_ms)}"
    if k.measured_ms:
        timing += f", measured {fmt_ms(k.measured_ms)}"
    return (
        f"{escape(k.name)}: {k.roof.upper() if k.roof in ('hbm', 'l2') else k.roof} binds "
        f"({k.bound}); {timing}. {note(_figures(k, causal))}"
    )


def _verdict_line(v: AlgorithmVerdict, name, note) -> str:  # type: ignore[no-untyped-def]
    source = "measured by the hardware counters" if v.bytes_source == MEASURED else "the model's"
    line = (
        f"{name(v.algorithm)}: <b>{v.bound}-bound</b> — {ROOF_BINDS.get(v.roof, v.roof)}; "
        f"roofline {fmt_ms(v.roofline_ms)}"
    )
    if v.measured_ms:
        line += f", measured {fmt_ms(v.measured_ms)}"
        line += f" ({v.roofline_ms / v.measured_ms:.0%} of the roofline's speed)"
    whole = ""
    if len(v.kernels) > 1 and v.intensity:
        whole = f"{fmt_intensity(v.intensity)} useful FLOP per DRAM byte in all; "
    return f"{line}. {note(f'{whole}DRAM bytes {source}.')}"


class ExplainPane(QTextBrowser):
    """Shows explain_html; updates only while visible (a hidden pane costs the slider nothing)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("explainPane")
        self.setAccessibleName("Explain")
        self.setOpenExternalLinks(False)
        self.setToolTip("The lesson's formulas for the current configuration (F1 shows/hides).")
        self._inputs: ExplainInputs | None = None
        self._state: AppState | None = None
        self._series: dict[str, dict[int, RunResult]] = {}
        self._palette: Palette = DARK
        self._shown: tuple[ExplainInputs, str] | None = None
        self._paced_refresh = coalesced(self._refresh, EXPLAIN_MS, parent=self)
        self.html_worker = LatestOnly(self)

    def on_state(self, change: Change) -> None:
        self._state = change.new
        self._follow()

    def set_measured(self, series: Mapping[str, list[RunResult]]) -> None:
        """The results of the current family, per algorithm (the window's measured series)."""
        self._series = {a: {r.config.seq_len: r for r in rs} for a, rs in series.items()}
        self._follow()

    def _follow(self) -> None:
        s = self._state
        if s is None:
            return
        n = s.config.seq_len
        results = {a: r for a, by_n in self._series.items() if (r := by_n.get(n)) is not None}
        inputs = ExplainInputs.from_state(s, results)
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
