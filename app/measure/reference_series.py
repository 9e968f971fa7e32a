"""Peers measured beside ours (PyTorch SDPA in a recording) as reference series on the timing
and roofline plots: dashed, labelled "PyTorch SDPA flash (recorded)" and so on, never as one
of our algorithms. One object owns them, so the panel, its hover read-outs and its legends
read the same results."""

from __future__ import annotations

from gpu.algorithms import NAIVE, TILED_MMA
from gpu.config import AttentionConfig
from gpu.model.costmodel import GpuSpec
from gpu.results import RunResult

from ..plotting.metric_plot import MetricPlot
from ..plotting.plot_items import Style
from ..state.model.cache import known_verdict
from ..state.recorded_run import reference_label
from .plot_styles import DEFAULT_REFERENCE_STYLE, REFERENCE_STYLES


class ReferenceSeries:
    """The reference peers shown on `timing` and `roofline`: `by_peer` (results sorted by N),
    `by_n` (the same by N) and `ids` (every peer shown so far, in order: their items stay)."""

    def __init__(self, timing: MetricPlot, roofline: MetricPlot) -> None:
        self.timing, self.roofline = timing, roofline
        self.by_peer: dict[str, list[RunResult]] = {}
        self.by_n: dict[str, dict[int, RunResult]] = {}
        self.ids: list[str] = []

    def show(self, series: dict[str, list[RunResult]], gpu: GpuSpec | None) -> bool:
        """Draw `series` (per peer id, sorted by N; `{}` removes them) with roofline x from
        `gpu`'s model. True when a legend label changed."""
        for peer in series:
            self._ensure(peer)
        self.by_peer = {p: list(rs) for p, rs in series.items()}
        self.by_n = {p: {r.config.seq_len: r for r in rs} for p, rs in self.by_peer.items()}
        relabel = False
        for peer in self.ids:
            name = f"reference_{peer}"
            timed = [r for r in self.by_peer.get(peer, ()) if not r.oom and r.total_ms]
            label = reference_label(peer, recorded=all(r.recorded for r in timed))
            for plot in (self.timing, self.roofline):
                relabel |= plot.labels[name] != label
                plot.labels[name] = label
            self.timing.set_series(
                name, [r.config.seq_len for r in timed], [r.total_ms for r in timed]
            )
            placed = [(self.intensity(r.config, peer, gpu), r) for r in timed]
            self.roofline.set_series(
                name, [x for x, _ in placed], [r.tflops * 1e12 for _, r in placed]
            )
        return relabel

    def drawn(self) -> list[str]:
        """The names of the reference items that hold data (their legend rows)."""
        return [f"reference_{p}" for p in self.ids if self.timing.series[f"reference_{p}"][0]]

    @staticmethod
    def intensity(config: AttentionConfig, peer: str, gpu: GpuSpec | None) -> float | None:
        """Roofline x of a peer: its FLOPs over the DRAM bytes our model gives the same
        algorithm (our tensor-core tiled kernel for the fused SDPA backends, naive for the math
        backend, which writes S and P); the peer's own traffic is not measured."""
        if gpu is None:
            return None
        ours = NAIVE if peer == "sdpa_math" else TILED_MMA
        v = known_verdict(config, ours, gpu)
        return v.intensity if v is not None else None

    def _ensure(self, peer: str) -> None:
        name = f"reference_{peer}"
        if name in self.timing.items:
            return
        self.ids.append(peer)
        color, dash, symbol = REFERENCE_STYLES.get(peer, DEFAULT_REFERENCE_STYLE)
        for plot in (self.timing, self.roofline):
            item = plot.add(
                name, reference_label(peer), Style(color, 1.6, dash, symbol=symbol, symbol_size=8)
            )
            item.setVisible(False)
            plot.restyle(name)
