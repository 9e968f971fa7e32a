"""Peers measured beside ours (PyTorch SDPA in a recording) on the time and roofline plots:
dashed reference series, labelled "PyTorch SDPA flash (recorded)" and so on, never as one of
our algorithms; a peer's roofline x is the model's intensity of our matching algorithm."""

from __future__ import annotations

from gpu.results import RunResult

from ..plotting.plot_items import Style
from ..state.recorded_run import reference_label
from .decode_plots import DecodePlots
from .panel_data import PanelData
from .plot_fit import PlotFit, PlotViews
from .plot_styles import DEFAULT_REFERENCE_STYLE, REFERENCE_STYLES


class PlotReferences:
    """The reference series of what `data` shows (module docstring); a peer's items are made
    when it first comes."""

    def __init__(
        self, data: PanelData, views: PlotViews, decode: DecodePlots, fit: PlotFit
    ) -> None:
        self.data = data
        self.timing, self.roofline = views.timing, views.roofline
        self.decode = decode
        self.fit = fit

    def show(self, series: dict[str, list[RunResult]]) -> None:
        """The peers' results, per peer id, sorted by N; `{}` removes them."""
        d = self.data
        if not series and not d.references:
            return  # the common case (live measurements): nothing to draw, nothing to undo
        for peer in series:
            self._ensure(peer)
        d.references = {p: list(rs) for p, rs in series.items()}
        d.reference_by_n = {p: {r.config.seq_len: r for r in rs} for p, rs in d.references.items()}
        relabel = False
        for peer in d.reference_ids:
            name = f"reference_{peer}"
            timed = [r for r in d.references.get(peer, ()) if not r.oom and r.total_ms]
            label = reference_label(peer, recorded=all(r.recorded for r in timed))
            for plot in (self.timing, self.roofline):
                relabel |= plot.labels[name] != label
                plot.labels[name] = label
            self.timing.set_series(
                name, [r.config.seq_len for r in timed], [r.total_ms for r in timed]
            )
            placed = [(d.reference_intensity(r.config, peer), r) for r in timed]
            self.roofline.set_series(
                name, [x for x, _ in placed], [r.tflops * 1e12 for _, r in placed]
            )
        self.decode.set_reference(d.references)
        self.fit.update(force=relabel)

    def _ensure(self, peer: str) -> None:
        name = f"reference_{peer}"
        if name in self.timing.items:
            return
        self.data.reference_ids.append(peer)
        color, dash, symbol = REFERENCE_STYLES.get(peer, DEFAULT_REFERENCE_STYLE)
        for plot in (self.timing, self.roofline):
            item = plot.add(
                name, reference_label(peer), Style(color, 1.6, dash, symbol=symbol, symbol_size=8)
            )
            item.setVisible(False)
            plot.restyle(name)
