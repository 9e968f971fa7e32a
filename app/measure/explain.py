"""The explain pane: the lesson's formulas with the current numbers, and the roofline verdicts.

The verdicts are the current point's (app/state/current_point.py, gpu.model.roofline inside): per
kernel, the roof that binds (HBM, L2, tensor cores at the rate of the instruction the kernel
issues, fp32 CUDA cores or the exponential unit, or a tie of two within 5 %), each roof's share
of its peak, and so whether it is memory- or compute-bound,
from the bytes the hardware counters measured where the current point was profiled and from
the cost model's L2-aware estimate otherwise; every byte figure says which. When a measurement
arrives, the verdict is the measured one. FLOPs are named: useful (4·B·h·N²·d, halved under a
causal mask: what TFLOP/s figures count) or executed (what the kernels issue). A training pass
adds what the backward keeps and makes (naive: P kept, dP and dS materialized; fused: O and the
row statistics kept, S and P recomputed), the saved activations of L layers and their wall.

`explain_html` is plain Python (testable without a window); `ExplainPane` follows the point on
screen (the app state and the results at its N, which the window works out once for the pane
and the lesson strip), lays its text out when the slider rests (`settled`,
app/work/pacing.py), makes the text off the GUI thread, and skips the work while hidden, so a
drag pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTextBrowser, QWidget

from gpu.algorithms import ALGORITHMS, NAIVE, SPLIT_KV, TILED, runs_pass
from gpu.config import DETERMINISTIC_LABEL, PASS_LABELS, STAT_BYTES, STEP, AttentionConfig
from gpu.model.costmodel import (
    CPU,
    attention_matrix_bytes,
    matrix_bytes,
    naive_oom_seq_len,
    stats_bytes,
)
from gpu.model.layer_stack import layer_stack, training_wall_seq_len
from gpu.model.roofline import MEASURED, AlgorithmVerdict, Explanation, KernelVerdict
from gpu.results import RunResult

from ..kit.theme import DARK, Palette
from ..state.app_state import AppState
from ..state.current_point import point_for
from ..state.default_view import fastest_fused
from ..state.model.cache import cost
from ..state.point_inputs import PointInputs
from ..state.roof_words import binds_text, shares_text
from ..state.time_comparison import compare_times
from ..state.training_figures import FUSED, training_figures
from ..state.units import fmt_bytes, fmt_flops, fmt_int, fmt_intensity, fmt_ms
from ..work.background import LatestOnly
from ..work.pacing import PAUSE_MS, settled
from .decode_explain import decode_header, decode_section


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


def _shown(inp: PointInputs) -> list[str]:
    """The algorithms explained, in the app's order, those written for the config's pass
    (naive and tiled, or naive and split-KV for decode, when none is ticked)."""
    shown = [a for a in ALGORITHMS if a in inp.algorithms and runs_pass(a, inp.config.pass_)]
    return shown or ([NAIVE, SPLIT_KV] if inp.config.is_decode else [NAIVE, TILED])


def _fused_shown(shown: list[str]) -> list[str]:
    """The fused kernels among `shown` (the readable one when none is): the ones the fused
    section speaks of. They keep the same bytes; each is named, not the readable one for all."""
    return [a for a in shown if ALGORITHMS[a].fused] or [TILED]


def explanation(inp: PointInputs) -> Explanation:
    """gpu.model.roofline's verdicts for the shown algorithms (naive always, for the DRAM ratios),
    from the results given for this config: the current point's (point_for), the one the
    plots, the Tiles banner and the status bar read."""
    point = point_for(inp.config, _shown(inp), inp.gpu, dict(inp.results))
    assert point is not None  # computed when missing
    return point.explanation


def explain_html(inp: PointInputs, palette: Palette = DARK) -> str:
    c = inp.config
    col = {a: palette.color(a) for a in ALGORITHMS}
    muted = palette.muted

    def name(a: str) -> str:
        return f'<b style="color:{col[a]}">{escape(ALGORITHMS[a].label)}</b>'

    def note(text: str) -> str:
        return f"<span style='color:{muted}'>{text}</span>"

    e = explanation(inp)
    shown = _shown(inp)
    if c.is_decode:
        out = decode_header(inp, muted) + decode_section(inp, name)
        out += _roofline_section(e, inp, shown, name, note, palette)
        return "\n".join(out)
    s_bytes = attention_matrix_bytes(c)
    qkvo = 4 * matrix_bytes(c)
    naive = cost(c, NAIVE)
    tiled = cost(c, TILED)
    bh = f"{fmt_int(c.batch)} × {fmt_int(c.heads)}" if c.batch > 1 else fmt_int(c.heads)
    useful = naive.flops
    factor = {"forward": "4", "backward": "8", "step": "12 (forward 4, backward 8)"}[c.pass_]
    out = [
        f"<h3 style='margin-bottom:2px'>{escape(c.label())}</h3>",
        f"<p style='color:{muted};margin-top:0'>Useful FLOPs {factor}·B·h·N²·d"
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
    timing = compare_times(
        dict(inp.results), fastest_fused(shown), "cpu" if inp.gpu.kind == CPU else ""
    )
    if timing is not None:
        out.append(f"<p><b>Time</b>: {escape(timing.text)}</p>")
    if inp.devices > 1:
        out.append(
            f"<p><b>Devices = {inp.devices}: only the ring runs</b> (the Ring tab plays and "
            "measures it); naive and the fused kernels run on one device and are off. What "
            "follows is one device holding the whole sequence, the case the ring divides.</p>"
        )
    out += [
        f"<h4>{name(NAIVE)}: three kernels, S and P in HBM"
        + (" (five more for the backward)" if c.has_backward else "")
        + "</h4>",
        "<p><code>S = QKᵀ/√d</code> → HBM, <code>P = softmax(S)</code> → HBM, "
        "<code>O = PV</code>.</p>",
        "<ul>",
        f"<li><b>S alone</b>: {s_formula(c)} = <b>{fmt_bytes(s_bytes)}</b>"
        f"{escape(compare(s_bytes, inp.budget_bytes, inp.budget_name))}</li>",
    ]
    if c.has_backward:
        out.append(
            f"<li>Its {PASS_LABELS[c.pass_]} keeps P from the forward and makes dP and dS, as "
            f"large again each. Peak: P + dP + dS + Q, K, V, O, dO, dQ, dK, dV "
            f"({fmt_bytes(2 * qkvo)}) = <b>{fmt_bytes(naive.peak_bytes)}</b>"
            f"{escape(compare(naive.peak_bytes, inp.budget_bytes, inp.budget_name))}</li>"
        )
    else:
        out.append(
            f"<li>P is as large again. Peak: S + P + Q, K, V, O ({fmt_bytes(qkvo)}) = "
            f"<b>{fmt_bytes(naive.peak_bytes)}</b>"
            f"{escape(compare(naive.peak_bytes, inp.budget_bytes, inp.budget_name))}</li>"
        )
    if inp.budget_bytes:
        wall = (
            training_wall_seq_len(c, NAIVE, 1, inp.budget_bytes)
            if c.has_backward
            else naive_oom_seq_len(c, inp.budget_bytes)
        )
        if wall is None:
            out.append(f"<li>In {fmt_bytes(inp.budget_bytes)} naive fits at every N.</li>")
        else:
            where = "you are past it" if wall <= c.seq_len else "still ahead"
            out.append(
                f"<li>The wall: in {fmt_bytes(inp.budget_bytes)} naive runs out of memory "
                f"from N = {fmt_int(wall)} ({where}).</li>"
            )
    out.append("</ul>")

    fused = _fused_shown(shown)
    each = "one fused kernel" if len(fused) == 1 else "one fused kernel each"
    out += [
        f"<h4>{', '.join(name(a) for a in fused)}: {each}, S and P stay on chip</h4>",
        "<ul>",
        f"<li>Extra memory: row max m and row sum l, 2 × {bh} × {fmt_int(c.seq_len)} × "
        f"{STAT_BYTES} B = <b>{fmt_bytes(stats_bytes(c))}</b> — O(N), not O(N²).</li>",
        f"<li>Peak {fmt_bytes(tiled.peak_bytes)}: "
        f"{naive.peak_bytes / tiled.peak_bytes:,.0f}× less than naive.</li>",
    ]
    out += [f"<li>{_ratio_line(e, a, name)}</li>" for a in shown if f"naive/{a}" in e.naive_ratios]
    out.append("</ul>")
    if c.has_backward:
        out += _training_section(inp, name, fused)
    out += _roofline_section(e, inp, shown, name, note, palette)
    if NAIVE in shown:
        out.append(
            f"<p style='color:{muted}'>The softmax kernel does no matmul at all: it reads S and "
            "writes P, pure traffic. For N ≫ d naive's bytes grow as N² with nothing to hide "
            "them behind.</p>"
        )
    return "\n".join(out)


def _recompute_line(c, name, useful, extra, fused: str) -> str:  # type: ignore[no-untyped-def]
    """What the fused backward does again for want of P: S (a fifth product), and with
    deterministic dQ, S and dP once more in the dQ pass."""
    share = f"{(extra.value or 0) / (useful.value or 1):.0%} more than the useful work"
    if c.deterministic:
        what = (
            "it recomputes S and P tile by tile, and its dQ pass rebuilds S, P and dP once "
            f"more: three products of {extra.text()} ({share})"
        )
    else:
        what = f"it recomputes S and P tile by tile, a fifth product of {extra.text()} ({share})"
    return (
        f"<li>{name(fused)} kept no P: {what} in exchange for the "
        f"{fmt_bytes(attention_matrix_bytes(c))} of P per layer.</li>"
    )


def _training_section(inp: PointInputs, name, shown_fused: list[str]) -> list[str]:  # type: ignore[no-untyped-def]
    """What the backward keeps and makes (naive: P kept; fused: O and the row statistics, S
    and P recomputed) and L layers' saved activations against the budget (attention's own
    tensors only): the current point's training figures (app/state/training_figures.py),
    each with its source. The fused figures are named after the fused kernel that ran the
    step where one did, else the first one shown."""
    c, layers = inp.config, inp.layers
    t = training_figures(c, layers, inp.budget_bytes, dict(inp.results))
    naive, fused = t.algorithm(NAIVE), t.algorithm(FUSED)
    kernel = fused.measured_by or shown_fused[0]
    useful, extra = t.backward_useful_flops, fused.recompute_flops
    out = [
        f"<h4>The {PASS_LABELS[c.pass_]}: bytes kept or FLOPs spent again</h4>",
        "<ul>",
        f"<li>The backward's useful work: dV = PᵀdO, dP = dO·Vᵀ, dQ = dS·K/√d, dK = dSᵀQ/√d, "
        f"8·B·h·N²·d = {useful.text()}"
        + (", after the forward's" if c.pass_ == STEP else "")
        + ".</li>",
        _recompute_line(c, name, useful, extra, kernel),
    ]
    if c.deterministic:
        out.append(
            f"<li><b>{DETERMINISTIC_LABEL}</b>: the fused backward's dQ is summed by a pass of "
            "its own (flash_bwd_dq), one block per query tile, the key tiles in a fixed order: "
            "the same bits on every run, no fp32 dQ accumulator, and two more products per "
            "tile than fp32 atomics in whatever order the blocks finish. Naive's backward "
            "has no atomics: it runs the same either way.</li>"
        )
    both = ((NAIVE, naive), (kernel, fused))
    per = ", ".join(f"{name(a)} {f.saved_per_layer.text()}" for a, f in both)
    out.append(
        f"<li>Saved activations per layer (Q, K, V, O and P, or m and l): {per}. For "
        f"<b>{fmt_int(layers)} layers</b> all of them are held at the first backward: "
        + ", ".join(
            f"{name(a)} <b>{f.layers_peak.text()}</b> with one layer's backward"
            f"{escape(compare(int(f.layers_peak.value or 0), inp.budget_bytes, inp.budget_name))}"
            for a, f in both
        )
        + " (attention's own tensors: no weights, optimizer state or MLP activations).</li>"
    )
    measured = [(a, f) for a, f in both if f.step_peak.source == MEASURED]
    if measured:
        out.append(
            f"<li>One layer's {PASS_LABELS[c.pass_]} peak: "
            + ", ".join(
                f"{name(a)} {f.step_peak.text()} (the model's "
                f"{fmt_bytes(layer_stack(c, a, 1).peak_bytes)})"
                for a, f in measured
            )
            + ": the one measured layer the L-layer totals are checked against.</li>"
        )
    if inp.budget_bytes:
        walls = []
        for a, f in both:
            wall = f.wall_seq_len.value if f.wall_seq_len is not None else None
            walls.append(
                f"{name(a)} fits at every N"
                if wall is None
                else f"{name(a)} from N = {fmt_int(int(wall))} (model)"
                + (" (you are past it)" if wall <= c.seq_len else "")
            )
        out.append(
            f"<li>The wall for {fmt_int(layers)} layers in {fmt_bytes(inp.budget_bytes)}: "
            + "; ".join(walls)
            + ".</li>"
        )
    out.append("</ul>")
    return out


def _ratio_line(e: Explanation, a: str, name) -> str:  # type: ignore[no-untyped-def]
    """Naive's DRAM bytes over a fused kernel's: measured (counters) beside the model's."""
    r = e.naive_ratios[f"naive/{a}"]
    model = f"{r['model_l2_aware']:,.1f}× with the L2 cache, {r['model_no_reuse']:,.1f}× without"
    v, n = e.algorithm(a), e.algorithm(NAIVE)
    if r["measured"] is not None:
        return (
            f"DRAM traffic, naive ÷ {name(a)}: <b>{r['measured']:,.0f}× less, measured</b> "
            f"({fmt_bytes(n.bytes)} vs {fmt_bytes(v.bytes)}, hardware counters, compulsory "
            f"writes counted; model: {model})"
        )
    if r.get("model_over_measured") is not None:
        check = v.model_over_measured
        return (
            f"DRAM traffic, naive (model: not measured) ÷ {name(a)} (measured): "
            f"<b>{r['model_over_measured']:,.0f}× less</b> ({fmt_bytes(n.bytes)} vs "
            f"{fmt_bytes(v.bytes)}). The L2-aware model says {fmt_bytes(v.model_bytes['l2_aware'])}"
            f" for {name(a)}, {check:.2f}× what the counters measured, so its {model} "
            "overstates the gain here"
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
    causal, cpu = inp.config.causal, inp.gpu.kind == CPU
    for a in shown:
        v = e.algorithm(a)
        item = f"<li>{_verdict_line(v, name, note, cpu)}"
        if len(v.kernels) > 1:
            parts = "".join(f"<li>{_kernel_line(k, causal, note, cpu)}</li>" for k in v.kernels)
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


def _kernel_line(k: KernelVerdict, causal: bool, note, cpu: bool) -> str:  # type: ignore[no-untyped-def]
    timing = f"roofline {fmt_ms(k.roofline_ms)}"
    if k.measured_ms:
        timing += f", measured {fmt_ms(k.measured_ms)}"
    shares = shares_text(k.roof_share, k.xu_per_exponential)
    share = f" Share of each roof's peak: {shares}." if k.roof_share else ""
    return (
        f"{escape(k.name)}: {binds_text(k.ties, cpu)} ({k.bound}); {timing}.{share} "
        f"{note(_figures(k, causal))}"
    )


def _verdict_line(v: AlgorithmVerdict, name, note, cpu: bool) -> str:  # type: ignore[no-untyped-def]
    source = "measured by the hardware counters" if v.bytes_source == MEASURED else "the model's"
    line = (
        f"{name(v.algorithm)}: <b>{v.bound}-bound</b> — {binds_text(v.ties, cpu)}; "
        f"roofline {fmt_ms(v.roofline_ms)}"
    )
    if v.measured_ms:
        line += f", measured {fmt_ms(v.measured_ms)}"
        line += f" ({v.roofline_ms / v.measured_ms:.0%} of the roofline's speed)"
        if len(v.kernels) == 1 and v.roof_share:
            shares = shares_text(v.roof_share, v.kernels[0].xu_per_exponential)
            line += f"; share of each roof's peak: {shares}"
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
        # The explanation is longer than the pane: with a scroll bar shown only as needed, each
        # new text would be laid out twice (at the full width, then beside the bar it needs).
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        self.setToolTip("The lesson's formulas for the current configuration (F1 shows/hides).")
        self._inputs: PointInputs | None = None
        self._palette: Palette = DARK
        self._shown: tuple[PointInputs, str] | None = None
        self._settled_refresh = settled(self._refresh, PAUSE_MS, parent=self)
        self.html_worker = LatestOnly(self)
        #: How many times a text was laid out (setHtml), for tests of the pacing.
        self.layouts = 0
        self._html = ""

    def follow(self, s: AppState, results: Mapping[str, RunResult]) -> None:
        """The point on screen: the state and the shown algorithms' results at its N."""
        inputs = PointInputs.from_state(s, results)
        if inputs != self._inputs:
            self.set_inputs(inputs)

    @property
    def busy(self) -> bool:
        """A text is waiting for the slider to rest, or being made."""
        return self._settled_refresh.pending or self.html_worker.busy

    def flush(self) -> None:
        """Lay out the text of the point shown now, now (the slider released; tests)."""
        self._settled_refresh.flush()
        self.html_worker.flush()

    def set_inputs(self, inputs: PointInputs, now: bool = False) -> None:
        self._inputs = inputs
        if now:
            self._settled_refresh.cancel()
            self._refresh()
            self.html_worker.flush()
        else:
            self._settled_refresh()

    def set_palette(self, palette: Palette) -> None:
        self._palette = palette
        self._shown = None
        self._html = ""
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
        if html == self._html:
            return  # a result that changed no figure: nothing to lay out again
        self._html = html
        bar = self.verticalScrollBar().value()
        self.layouts += 1
        self.setHtml(html)
        self.verticalScrollBar().setValue(bar)

    def plain_text(self) -> str:
        """The current explanation as text, whether or not the pane is visible (tests)."""
        if self._inputs is None:
            return ""
        doc = QTextBrowser()
        doc.setHtml(explain_html(self._inputs, self._palette))
        return doc.toPlainText()
