"""The decode pass on the Measurements tab: what the plots add for it.

- Memory: the prefill's naive peak of the same shape (N², dotted, left out of the fitted range:
  it leaves the plot steeply where the cache's lines climb by ×2 per doubling), and what fits:
  the model preset's KV cache of all its layers (dashed) and the same with its weights
  (dash-dot), which meets the budget line at the wall, a vertical line at the longest context
  of the batch (app/state/decode_fit.py: the explain pane's formula gives the same number).
- Bandwidth (its own plot, in the traffic plot's place while the pass is decode): the KV cache
  read per step over the measured time, ours and the recorded peers', with the roofline
  model's rate dotted, against the memory roof's figure and, where the recording has it, a
  copy measured on the device (app/state/decode_bandwidth.py).

Items are made once; `PlotsPanel` calls in with the data it has (results, model curves, budget,
device), and asks which items to show."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from PySide6.QtCore import Qt

from gpu.algorithms import NAIVE, SPLIT_KV
from gpu.config import AttentionConfig
from gpu.model.costmodel import GpuSpec
from gpu.model.decode_cost import kv_cache_bytes
from gpu.results import RunResult

from ..kit.theme import Palette
from ..plotting.labelled_line import LabelledLine
from ..plotting.metric_plot import MetricPlot
from ..plotting.plot_items import Style
from ..state.decode_bandwidth import (
    NO_COPY,
    MemoryRoof,
    kv_read_rate,
    memory_roof,
    share_text,
)
from ..state.decode_fit import FitLines, fit_lines, prefill_of
from ..state.model.cache import cost
from ..state.model.curves import MODEL_GRID
from ..state.recorded_run import reference_label
from ..state.units import fmt_bytes, fmt_int, fmt_rate
from .plot_styles import DEFAULT_REFERENCE_STYLE, REFERENCE_STYLES, series_label, series_symbol

#: What fits: a model's weights plus its cache of all layers, against the budget.
FIT_STYLE = Style("fg", 2.0, Qt.PenStyle.DashDotLine)
#: The algorithms written for decode, drawn on the bandwidth plot.
DECODE_ALGOS = (NAIVE, SPLIT_KV)


class DecodePlots:
    """The decode pass's items on the memory plot and the bandwidth plot (module docstring)."""

    def __init__(self, memory: MetricPlot, bandwidth: MetricPlot) -> None:
        self.memory = memory
        self.bandwidth = bandwidth
        self.family: AttentionConfig | None = None
        self.budget: int | None = None
        self.fit_weights, self.fit_kv = "fp16", "fp16"
        self.roof: MemoryRoof | None = None
        self.copy: float | None = None
        self.lines: FitLines | None = None
        self.by_n: dict[str, dict[int, RunResult]] = {}
        self.peers: dict[str, dict[int, RunResult]] = {}
        self._algorithms: tuple[str, ...] = DECODE_ALGOS

    def build(self) -> Iterator[None]:
        """The items, made once (a staged build's steps)."""
        m, b = self.memory, self.bandwidth
        m.add(
            "prefill_naive",
            "prefill of this shape, naive: S and P (N², model)",
            Style(NAIVE, 1.3, Qt.PenStyle.DotLine),
            bounds=False,
        )
        m.add("fit_total", "", FIT_STYLE)
        m.key("k_prefill", "prefill: N²", Style(NAIVE, 1.3, Qt.PenStyle.DotLine))
        m.key("k_fit_total", "what fits: weights + cache", FIT_STYLE)
        #: The wall: the longest context the weights leave room for, at the config's batch.
        # Its label runs up along it: a line across the plot has no room beside it.
        self.wall = LabelledLine(
            m, angle=90, position=0.64, anchors=[(0.5, 1), (0.5, 1)], along=True
        )
        yield
        for a in DECODE_ALGOS:
            b.add(
                f"measured_{a}",
                f"{series_label(a)}: K, V read once ÷ median time",
                Style(a, 2.0, symbol=series_symbol(a), symbol_size=7),
            )
        b.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=13, hollow=True),
            bounds=False,
            moves=True,
        )
        b.key("k_measured", "K, V read once ÷ median time", Style("fg", 2.0, symbol="o"))
        b.key("k_roof", "memory: datasheet", Style("roof", 1.5))
        b.key("k_copy", "copy, measured", Style("muted", 1.5, Qt.PenStyle.DashLine))
        self.roof_line = LabelledLine(b, angle=0, position=0.03, anchors=[(0, 1), (0, 1)])
        self.copy_line = LabelledLine(b, angle=0, position=0.97, anchors=[(1, 0), (1, 0)])
        b.hover_provider = self.hover
        b.cursor_text = self.cursor_text
        yield

    def apply_palette(self, p: Palette) -> None:
        self.wall.set_style(p.budget, 1.5, Qt.PenStyle.DashDotLine, background=p.background)
        self.roof_line.set_style(p.roof, 1.5, Qt.PenStyle.SolidLine, background=p.background)
        self.copy_line.set_style(p.muted, 1.5, Qt.PenStyle.DashLine, background=p.background)

    # ------------------------------------------------------------------ inputs

    @property
    def shown(self) -> bool:
        return self.family is not None and self.family.is_decode

    def set_family(self, family: AttentionConfig | None) -> None:
        self.family = family
        self._draw_fit()

    def set_budget(self, budget: int | None) -> None:
        self.budget = budget
        self._draw_fit()

    def set_storage(self, weights: str, kv: str) -> None:
        """The what-fits storage types (AppState.fit_weights, fit_kv)."""
        self.fit_weights, self.fit_kv = weights, kv
        self._draw_fit()

    def set_device(self, device: GpuSpec | None, copy: float | None) -> None:
        """The device whose memory roof the rates are shares of, and the copy bandwidth
        measured on it (None where the results carry none)."""
        self._show_device(memory_roof(device) if device is not None else None, copy)

    def copy_settings(self, other: DecodePlots) -> None:
        """Take `other`'s inputs that do not come with the data (an export's replica)."""
        self.fit_weights, self.fit_kv = other.fit_weights, other.fit_kv
        self._show_device(other.roof, other.copy)
        self._draw_fit()

    def _show_device(self, roof: MemoryRoof | None, copy: float | None) -> None:
        self.roof, self.copy = roof, copy
        if roof is not None:
            rate = fmt_rate(roof.bytes_s, "B/s")
            self.roof_line.set(roof.bytes_s, f"{roof.name}, {roof.source}: {rate}")
            self.bandwidth.key("k_roof", f"{roof.name}: {roof.source}", Style("roof", 1.5))
        else:
            self.roof_line.set(None, "")
        share = f" ({copy / roof.bytes_s:.0%} of the {roof.source})" if copy and roof else ""
        text = f"copy, measured: {fmt_rate(copy, 'B/s')}{share}" if copy else ""
        self.copy_line.set(copy, text)
        self._fit_bandwidth()

    # ------------------------------------------------------------------ data

    def set_measured(self, measured: Mapping[str, Sequence[RunResult]]) -> None:
        self.by_n = {}
        for a in DECODE_ALGOS:
            results = [r for r in measured.get(a, ()) if kv_read_rate(r)]
            self.by_n[a] = {r.config.seq_len: r for r in results}
            self.bandwidth.set_series(
                f"measured_{a}",
                [r.config.seq_len for r in results],
                [kv_read_rate(r) for r in results],
            )

    def set_reference(self, series: Mapping[str, Sequence[RunResult]]) -> list[str]:
        """The recorded peers' rates; returns the names of their items that have points."""
        b = self.bandwidth
        self.peers = {}
        names = []
        for peer, results in series.items():
            name = f"reference_{peer}"
            if name not in b.items:
                color, dash, symbol = REFERENCE_STYLES.get(peer, DEFAULT_REFERENCE_STYLE)
                style = Style(color, 1.6, dash, symbol=symbol, symbol_size=8)
                b.add(name, reference_label(peer), style).setVisible(False)
                b.restyle(name)
            timed = [r for r in results if kv_read_rate(r)]
            self.peers[peer] = {r.config.seq_len: r for r in timed}
            b.labels[name] = reference_label(peer, recorded=all(r.recorded for r in timed))
            b.set_series(name, [r.config.seq_len for r in timed], [kv_read_rate(r) for r in timed])
            if timed:
                names.append(name)
        for name in b.items:
            if name.startswith("reference_") and name.removeprefix("reference_") not in series:
                b.set_series(name, [], [])
        return names

    def markers(self, n: int, algorithms: Sequence[str]) -> None:
        """The "you are here" markers at N = n, and the cursor's label: the best of ours at
        this N as a share of the memory roof (and of the copy, where measured)."""
        rates = [
            kv_read_rate(r) if (r := self.by_n.get(a, {}).get(n)) is not None else None
            for a in algorithms
            if a in DECODE_ALGOS
        ]
        self.bandwidth.set_series("current", [n] * len(rates), rates)
        self._algorithms = tuple(algorithms)
        self.bandwidth.cursor.set_label(self.cursor_text(n))

    def cursor_text(self, n: int) -> str:
        """The bandwidth plot's cursor label: the faster of ours at N = n as a share of the
        memory roof (and of the copy, where one was measured); '' where none ran."""
        rates = [
            rate
            for a in self._algorithms
            if (r := self.by_n.get(a, {}).get(n)) is not None and (rate := kv_read_rate(r))
        ]
        if not rates or self.roof is None:
            return ""
        best = max(rates)
        text = f"{best / self.roof.bytes_s:.0%} of the {self.roof.source}"
        return text + (f", {best / self.copy:.0%} of the copy" if self.copy else "")

    # ------------------------------------------------------------------ what is shown

    def memory_items(self) -> tuple[list[str], list[str]]:
        """(items, legend entries) the memory plot adds for decode."""
        items = ["prefill_naive"]
        legend = ["k_prefill"]
        if self.lines is not None:
            items.append("fit_total")
            legend.append("k_fit_total")
        return items, legend

    def show(self, algorithms: Sequence[str], force: bool = False) -> None:
        """The bandwidth plot's items and legend for `algorithms` (those written for decode)."""
        b = self.bandwidth
        algos = [a for a in algorithms if a in DECODE_ALGOS]
        items = [f"measured_{a}" for a in algos]
        refs = [n for n in b.items if n.startswith("reference_") and b.series[n][0]]
        legend = ["k_measured", *refs]
        if self.roof is not None:
            legend.append("k_roof")
        if self.copy:
            legend.append("k_copy")
        b.set_visible_items([*items, *refs, "current"], force=force, legend=legend)
        self._fit_bandwidth()

    def _fit_bandwidth(self) -> None:
        extra = [v for v in (self.roof.bytes_s if self.roof else None, self.copy) if v]
        self.bandwidth.fit_y(extra=extra)

    def _draw_fit(self) -> None:
        """The what-fits lines and wall for the family, budget and storage types now."""
        m = self.memory
        family = self.family
        lines = None
        if family is not None and family.is_decode:
            lines = fit_lines(family, MODEL_GRID, self.budget, self.fit_weights, self.fit_kv)
        self.lines = lines
        if lines is None:
            m.set_series("fit_total", [], [])
            self.wall.set(None, "")
            return
        fit, model = lines.fit, lines.fit.model
        m.labels["fit_total"] = (
            f"{model.label}: {fit.weight_dtype} weights ({fmt_bytes(fit.weight_bytes)}) + the "
            f"{fit.kv_dtype} KV cache of {model.layers} layers (model)"
        )
        m.set_series("fit_total", lines.ns, lines.total)
        m.key("k_fit_total", f"{model.label}: weights + cache", FIT_STYLE)
        if lines.wall:
            self.wall.set(lines.wall, f"fits N ≤ {fmt_int(lines.wall)}")
        else:
            self.wall.set(None, "")

    # ------------------------------------------------------------------ hover

    def memory_lines(self, n: int) -> list[str]:
        """The memory plot's read-out at N = n for decode: the cache, the prefill's N², what
        fits."""
        family = self.family
        if family is None or not family.is_decode:
            return []
        config = family.with_(seq_len=n)
        prefill = cost(prefill_of(config), NAIVE).peak_bytes
        lines = [
            f"KV cache, one layer: {fmt_bytes(kv_cache_bytes(config))} (2·B·H_kv·N·d·bytes)",
            f"prefill of this shape, naive: {fmt_bytes(prefill)} (S and P: N²)",
        ]
        if self.lines is not None:
            fit, model = self.lines.fit, self.lines.fit.model
            total = fit.weight_bytes + fit.cache_bytes(n, family.batch)
            wall = (
                f"fits N ≤ {fmt_int(self.lines.wall)}"
                if self.lines.wall
                else "the weights alone do not fit"
            )
            lines.append(
                f"{model.label}: {fit.weight_dtype} weights + {fit.kv_dtype} cache of "
                f"{model.layers} layers: {fmt_bytes(total)}; {wall}"
            )
        return lines

    def hover(self, x: float, y: float) -> str | None:
        """The nearest N's rates, each as shares of the memory roof and the copy."""
        if self.family is None or self.roof is None:
            return None
        ns = sorted({n for by in (*self.by_n.values(), *self.peers.values()) for n in by})
        if not ns:
            return None
        n = min(ns, key=lambda v: abs(v - 10**x))
        cache = kv_cache_bytes(self.family.with_(seq_len=n))
        lines = [f"N = {fmt_int(n)}: K and V read once, {fmt_bytes(cache)} a step"]
        for a, by in self.by_n.items():
            if (r := by.get(n)) is not None and (rate := kv_read_rate(r)):
                lines.append(f"{series_label(a)}: {share_text(rate, self.roof, self.copy)}")
        for peer, by in self.peers.items():
            if (r := by.get(n)) is not None and (rate := kv_read_rate(r)):
                lines.append(f"{reference_label(peer)}: {share_text(rate, self.roof, self.copy)}")
        if not self.copy:
            lines.append(NO_COPY)
        return "\n".join(lines)
