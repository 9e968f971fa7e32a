"""The lesson's plots: peak memory, time, DRAM traffic over N, a hierarchical roofline, and the
measured samples of the current point.

Built from the plotting kit (app/plotting/). One key above the plots names the
algorithms (an algorithm has the same colour and symbol everywhere); each plot's own legend
strip, above its data, names what its line styles and markers mean. The panel follows the app state
(`on_state`): the cursor and the "you are here" markers move with the slider at once; the model
curves of a new family are computed off the GUI thread (app/state/model/curves.py, through a
LatestOnly worker) and drawn in one step when they arrive. Measurements (markers) come from the
result store through `set_measured`:

- memory: the CuPy pool's peak (filled) and the whole device's (hollow: cudaMemGetInfo, which
  also sees the cuBLAS workspace and the context); an out-of-memory run is a red ✕ at the
  memory it would have needed;
- time: the median of the repeats, with a bar from the fastest to the slowest;
- traffic: the model's band per algorithm (compulsory bytes … no reuse, the L2-aware estimate
  as the line) with the DRAM bytes the hardware counters measured as points;
- roofline: HBM and L2 roofs, a roof per compute unit (tensor cores, fp32 CUDA cores, the
  exponential unit); a point sits at measured intensity (filled) where its bytes were
  measured, at the model's (hollow) otherwise."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPixmapCache
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QToolButton, QWidget

from gpu.algorithms import NAIVE
from gpu.config import AttentionConfig
from gpu.model.costmodel import GpuSpec
from gpu.model.roofline import counted_dram_bytes
from gpu.results import RunResult

from ..kit.theme import Palette
from ..plotting.metric_plot import MetricPlot
from ..plotting.plot_items import with_alpha
from ..plotting.series_key import SeriesKey
from ..plotting.staged import StagedBuild
from ..state.app_state import AppState, Change
from ..state.decode_bandwidth import copy_bandwidth
from ..state.family import family
from ..state.model.cache import prime
from ..state.model.curves import ModelCurves
from ..state.seq_scale import SEQ_MAX, SEQ_MIN
from ..state.units import (
    fmt_bytes,
)
from ..work.background import LatestOnly
from ..work.pacing import coalesced
from .decode_plots import DecodePlots
from .model_drawing import GrowthLabel, ModelRequests
from .panel_data import PanelData
from .plot_fit import PlotFit, PlotViews
from .plot_hover import PlotHover
from .plot_markers import PlotMarkers
from .plot_references import PlotReferences
from .plot_series import build_series
from .plot_spec import PLOTS, PlotSpec
from .plot_styles import (
    ALGOS,
    BAND_ALPHA,
    NAIVE_KERNELS,
    timing_spread,
)
from .roof_lines import RoofLines
from .strip_chart import TrafficStripChart

#: The strip chart follows the slider at most this often (ms).
STRIP_MS = 120

#: Qt's pixmap cache (KiB) that the plots' cached items share. Every data item is cached as a
#: pixmap of its extent, so a slider move blits the strips it exposes instead of repainting
#: them; at Qt's default of 10 MiB the four plots' items outgrow the cache, evict each other
#: and repaint on every move (docs/RESPONSIVENESS.md, "The pixmap cache": with this cache the
#: GUI thread's CPU per move is a third of what the plots took before at Qt's default).
PIXMAP_CACHE_KIB = 64 * 1024


class PlotsPanel(QWidget):
    """The plots; follows the app state (`on_state`) and the results (`set_measured`). Its
    parts: what it shows (`data`), the roofs (`roofs`), the markers (`markers`), legends and
    ranges (`fit_part`), the model curves' requests (`models`), the hover read-outs (`hover`)."""

    #: New model curves are drawn, their legends and ranges not yet: results drawn now share
    #: that pass (the window draws results it held for them).
    modelDrawn = Signal()

    def __init__(self, parent: QWidget | None = None, staged: bool = False) -> None:
        """`staged`: build nothing yet; `build_steps()` builds it a piece at a time (an export
        builds its panel between frames, so the window keeps painting)."""
        super().__init__(parent)
        self._staged = StagedBuild(self._construct(), staged)

    def build_steps(self) -> Iterator[None]:
        """The rest of a staged construction, one piece per step."""
        return self._staged.steps

    def _construct(self) -> Iterator[None]:
        if QPixmapCache.cacheLimit() < PIXMAP_CACHE_KIB:
            QPixmapCache.setCacheLimit(PIXMAP_CACHE_KIB)
        self.key = SeriesKey()
        #: Every plot of PLOTS (app/measure/plot_spec.py), by objectName.
        self.by_name: dict[str, MetricPlot] = {}
        for spec in PLOTS.values():
            self.by_name[spec.object_name] = yield from _plot_in_steps(spec)
            yield
        self.strip = TrafficStripChart(staged=True)
        yield
        yield from self.strip.build_steps()
        yield
        p = self.by_name
        self.memory, self.timing, self.traffic = p["memoryPlot"], p["timingPlot"], p["trafficPlot"]
        # The decode pass's figure of merit, in the traffic plot's place while it is shown.
        self.bandwidth, self.roofline = p["bandwidthPlot"], p["rooflinePlot"]
        self.plots = tuple(p.values())
        #: The plots whose x is N: they share the slider's span and cursor.
        self.n_plots = tuple(p[name] for name, spec in PLOTS.items() if spec.follows_n)
        self.decode = DecodePlots(self.memory, self.bandwidth)
        grid = QGridLayout(self)
        grid.setContentsMargins(4, 0, 4, 4)
        grid.setSpacing(6)
        # Row 0: the key, and "Every series" at its right (the default view shows a few).
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.key, 1)
        self.every_button = QToolButton()
        self.every_button.setObjectName("everySeriesButton")
        self.every_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        top.addWidget(self.every_button, 0, Qt.AlignmentFlag.AlignTop)
        grid.addLayout(top, 0, 0, 1, 2)
        for name, spec in PLOTS.items():
            grid.addWidget(p[name], *spec.cell)
        self.bandwidth.setVisible(False)
        self._only: str | None = None  # show_only's plot
        grid.addWidget(self.strip, 3, 0, 1, 2)
        grid.setRowStretch(1, 5)
        grid.setRowStretch(2, 5)
        self._grid = grid
        self.strip.collapsedChanged.connect(self._strip_collapsed)
        self.strip.set_collapsed(True)  # until some result carries samples

        #: What the panel shows: written here, read by the parts.
        self.data = d = PanelData()
        self._seen: AppState | None = None  # the state shown
        self._pending: AppState | None = None  # a newer one, noted while hidden
        self._pending_measured: dict[str, list[RunResult]] | None = None
        self._pending_reference: dict[str, list[RunResult]] | None = None
        self._paced_strip = coalesced(self._show_strip, STRIP_MS, parent=self)
        #: Model curves are computed off the GUI thread; only the newest set is drawn.
        self.models = ModelRequests(d, self)
        self.models.arrived.connect(self._draw_model)
        m, t, h, r = self.memory, self.timing, self.traffic, self.roofline
        items = yield from build_series(m, t, h, r)
        self.budget_line, self.bands = items.budget_line, items.bands
        self.growth = GrowthLabel(m, d)
        self.roofs = RoofLines(r, self)
        views = PlotViews(m, t, h, r)
        self.fit_part = PlotFit(
            d,
            views,
            self.key,
            self.decode,
            self.roofs,
            self.budget_line,
            self.bands,
            self.growth,
            self,
        )
        self.markers = PlotMarkers(d, views, self.decode, self.fit_part, self)
        self.markers.moved.connect(self._strip_follows)
        self.references = PlotReferences(d, views, self.decode, self.fit_part)
        self.hover = PlotHover(d, self.decode, self.roofs)
        yield
        yield from self.decode.build()
        for plot in self.plots:
            plot.set_visible_items([])
            yield
        self.set_n_span(SEQ_MIN, SEQ_MAX)
        m.hover_provider = self.hover.memory
        t.hover_provider = self.hover.timing
        h.hover_provider = self.hover.traffic
        r.hover_provider = self.hover.roofline

    @property
    def model_worker(self) -> LatestOnly:
        """The worker that computes the model curves (tests wait for it)."""
        return self.models.worker

    @property
    def roof_labels(self) -> dict[str, pg.TextItem]:
        return self.roofs.labels

    @property
    def growth_label(self) -> pg.TextItem:
        return self.growth.item

    # ------------------------------------------------------------------ inputs

    def apply_palette(self, p: Palette) -> None:
        for _ in self.palette_steps(p):
            pass

    def palette_steps(self, p: Palette) -> Iterator[None]:
        """`apply_palette` a plot per step (an export's replica)."""
        for plot in self.plots:
            plot.apply_palette(p)
            yield
        self.key.apply_palette(p)
        self.strip.apply_palette(p)
        for a, fill in self.bands.items():
            fill.setBrush(pg.mkBrush(with_alpha(p.color(a), BAND_ALPHA)))
            fill.setPen(pg.mkPen(None))
        self.budget_line.set_style(p.budget, 1.5, Qt.PenStyle.DashLine, background=p.background)
        self.roofs.apply_palette(p)
        self.growth.apply_palette(p)
        self.decode.apply_palette(p)

    def set_legends_visible(self, visible: bool) -> None:
        """Show or hide every plot's legend strip (View ▸ Plot legends): hidden, the data get
        their rows; the key above the plots stays."""
        for plot in self.plots:
            plot.set_legend_visible(visible)

    def on_state(self, change: Change) -> None:
        """Show what changed in the app state (one call per change; see the module docstring).
        While the panel is hidden (the Tiles tab is shown) it only notes the newest state and
        catches up when shown: a hidden panel costs the slider nothing."""
        if self._seen is not None and not self.isVisible():
            self._pending = change.new
            return
        self._apply_state(change)

    def catch_up(self) -> None:
        """Apply a state noted while hidden."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._apply_state(Change.between(self._seen, pending))
        reference, self._pending_reference = self._pending_reference, None
        if reference is not None:
            self._show_reference(reference)
        measured, self._pending_measured = self._pending_measured, None
        if measured is not None:
            self._show_measured(measured)

    def showEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().showEvent(event)
        self.catch_up()

    def _apply_state(self, change: Change) -> None:
        self._seen = change.new
        s = change.new
        if change.changed("seq_scale"):
            lens = s.seq_scale
            if lens:
                self.set_n_span(min(lens[0], SEQ_MIN), max(lens[-1], SEQ_MAX))
            else:
                self.set_n_span(SEQ_MIN, SEQ_MAX)
        if change.changed("backend"):
            self.set_recorded_note(s.backend.backend.label() if s.replay else "")
            self.data.samples_seen = False
        if change.changed("budget", "budget_line_label"):
            self.set_budget(s.budget.line_bytes, s.budget_line_label)
        if change.changed("fit_weights", "fit_kv"):
            self.decode.set_storage(s.fit_weights, s.fit_kv)
            self.fit_part.update(force=True)
        if change.changed("roof_device", "backend") and s.backend is not None:
            self.decode.set_device(s.roof_device, copy_bandwidth(s.backend.info.details))
        # While a backend starts (none ready) the roofs stay those of the last one: its
        # successor names its own GPU a moment later, and drawing a reference GPU's roofs in
        # between would redraw every roof and point twice.
        starting = s.backend is None and self.data.gpu is not None
        if change.changed("roof_device", "roof_device_label", "on_gpu", "backend") and not (
            starting
            or (s.roof_device, s.roof_device_label, s.on_gpu)
            == (self.data.gpu, self.data.gpu_label, self.data.time_model_gpu is not None)
        ):
            self.set_gpu(s.roof_device, s.roof_device_label, time_model=s.on_gpu)
        if change.changed("layers") and s.layers != self.data.layers:
            self.set_layers(s.layers)
        if change.changed("config", "algorithms", "seq_scale"):
            self.set_config(s.config, s.algorithms, warm=s.scale)
        if change.changed("all_series") and s.all_series != self.data.every:
            self.data.every = s.all_series
            self.fit_part.update(force=True)

    def show_state(self, s: AppState) -> None:
        """Everything the state says, at once (a new panel's first look)."""
        self.on_state(Change.initial(s))

    def set_n_span(self, lo: int, hi: int) -> None:
        """The N range every N plot shows: the slider's whole scale."""
        self.data.n_span = (lo, hi)
        for plot in self.n_plots:
            plot.set_x_span(lo, hi)

    def set_config(
        self, config: AttentionConfig, algorithms: Sequence[str], warm: Sequence[int] = ()
    ) -> None:
        """A new config: move the cursors now; new model curves if the family or algorithms
        changed (computed off the GUI thread; `warm`: N whose costs the slider will ask for)."""
        algorithms = tuple(a for a in ALGOS if a in algorithms)
        fam = family(config)
        if fam != self.data.family or algorithms != self.data.algorithms:
            old = self.data.family
            new_pass = old is None or fam.pass_ != old.pass_
            self.data.family = fam
            self.decode.set_family(fam)
            if new_pass:
                self._place_plots()
            if new_pass or fam.new_tokens != old.new_tokens:
                self._show_timing_title()
            self.data.algorithms = algorithms
            self.models.request((*warm, config.seq_len))
            self._draw_roofs()
            self.fit_part.update()
        self.set_seq_len(config)

    def set_layers(self, layers: int) -> None:
        """L of a training pass's saved-activation stack: its lines are redrawn (off the GUI
        thread, with the other model curves) when the family trains."""
        self.data.layers = layers
        self.memory.labels["stack_naive"] = f"naive, {layers} layers' saved activations (model)"
        self.memory.labels["stack_tiled"] = f"tiled, {layers} layers' saved activations (model)"
        if self.data.family is not None and self.data.family.has_backward:
            self.models.request()
        self.fit_part.update(force=True)

    def set_seq_len(self, config: AttentionConfig) -> None:
        """The fast path of a slider move: the cursors (Qt-drawn lines over the cached data
        items) and the "you are here" markers; a burst of moves in one turn of the event loop
        (a fast drag) moves the markers twice, for its first move and its last."""
        self.data.config = config
        n = config.seq_len
        for plot in self.n_plots:
            plot.set_cursor(n)
        self.roofline.cursor_n = n
        self.markers.follow()

    def flush_markers(self) -> None:
        """Move the markers to the N shown now, now (exports, tests)."""
        self.markers.flush()

    def _strip_follows(self) -> None:
        if self.data.any_samples or not self.strip.is_empty():
            self._paced_strip()

    def set_measured(self, series: dict[str, list[RunResult]]) -> None:
        """Measured results of the current family, per algorithm, sorted by N (noted only while
        the panel is hidden, like the state)."""
        if self._seen is not None and not self.isVisible():
            self._pending_measured = series
            return
        self._show_measured(series)

    def _show_measured(self, series: dict[str, list[RunResult]]) -> None:
        changed = set()
        for a in ALGOS:
            results = list(series.get(a, ()))
            if _same_results(results, self.data.measured.get(a)):
                continue  # a result of another algorithm arrived: this one's items stay
            changed.add(a)
            self.data.measured[a] = results
            self.data.by_n[a] = {r.config.seq_len: r for r in results}
            ok = [r for r in results if not r.oom]
            ns = [r.config.seq_len for r in ok]
            self.memory.set_series(f"measured_{a}", ns, [r.peak_bytes for r in ok])
            self.memory.set_series(f"device_{a}", ns, [r.device_peak_bytes for r in ok])
            timed = [r for r in ok if r.total_ms]
            tn = [r.config.seq_len for r in timed]
            self.timing.set_series(f"measured_{a}", tn, [r.total_ms for r in timed])
            spread = [timing_spread(r) for r in timed]
            self.timing.set_error_bars(
                f"spread_{a}",
                tn,
                [r.total_ms for r in timed],
                [lo for lo, _ in spread],
                [hi for _, hi in spread],
            )
            # Measured DRAM bytes with the compulsory writes counted (some are still in L2
            # when the counters' window closes): never below the band's compulsory edge.
            self.traffic.set_series(f"measured_{a}", ns, [counted_dram_bytes(r) for r in ok])
        self.decode.set_measured(self.data.measured)
        self.data.any_samples = any(
            t.strip.t_us for a in ALGOS for r in self.data.measured[a] for t in r.traffic
        )
        self.data.samples_seen |= self.data.any_samples
        self.strip.set_collapsed(not self.data.samples_seen)
        if not changed:  # nothing to redraw; the markers follow the config all the same
            self.markers.measured()
            self._paced_strip()
            return
        self.markers.points(changed)
        naive_timed = [r for r in self.data.measured[NAIVE] if not r.oom and r.kernel_times]
        for k in NAIVE_KERNELS:
            xs, ys = [], []
            for r in naive_timed:
                for kt in r.kernel_times:
                    if kt.name == k:
                        xs.append(r.config.seq_len)
                        ys.append(kt.ms)
            self.timing.set_series(f"kernel_{k}", xs, ys)
        ooms = [r for a in ALGOS for r in self.data.measured[a] if r.oom]
        self.memory.set_series(
            "oom", [r.config.seq_len for r in ooms], [r.model_peak_bytes for r in ooms]
        )
        self.fit_part.update()
        self.markers.measured()
        self.markers.bounds()  # a result with counted bytes puts its bound at measured intensity
        self._paced_strip()

    def set_budget(self, budget_bytes: int | None, label: str) -> None:
        self.data.budget = budget_bytes
        self.data.budget_label = label
        figure = fmt_bytes(budget_bytes)
        text = label if label.endswith(figure) else f"{label}: {figure}"
        self.budget_line.set(budget_bytes, text)
        self.decode.set_budget(budget_bytes)
        self.memory.fit_y(extra=[budget_bytes] if budget_bytes else [])
        self.fit_part.update(force=True)

    def set_gpu(self, gpu: GpuSpec, label: str, time_model: bool) -> None:
        """The GPU whose roofline is drawn; `time_model` also draws its roofline times."""
        changed = gpu != self.data.gpu
        self.data.gpu = gpu
        self.data.gpu_label = label
        self.data.time_model_gpu = gpu if time_model else None
        self._draw_roofs()
        # The GPU's name in the title, the whole label (its memory, "reference") on hover.
        self.roofline.set_title(f"Roofline: {label.split(',')[0]}")
        self.roofline.set_title_tip(f"Roofline: {label}")
        if self.data.family is not None and (
            self.data.model is None
            or self.data.model.time_gpu != self.data.time_model_gpu
            or self.data.model.gpu != gpu
        ):
            self.models.request()
        if changed:
            self.markers.points()
        self.markers.bounds()
        self.fit_part.update(force=True)

    def set_reference(self, series: dict[str, list[RunResult]]) -> None:
        """See `_show_reference`; noted only while the panel is hidden."""
        if self._seen is not None and not self.isVisible():
            self._pending_reference = series
            return
        self._show_reference(series)

    def _show_reference(self, series: dict[str, list[RunResult]]) -> None:
        self.references.show(series)

    def reference_series(self) -> dict[str, list[RunResult]]:
        return {p: list(rs) for p, rs in self.data.references.items()}

    def set_recorded_note(self, note: str) -> None:
        """Say on the timing plot where and when its measurements were recorded
        ("NVIDIA H200, recorded 2025-06-01"); '' for live measurements."""
        self.data.recorded_note = note
        self._show_timing_title()

    def _show_timing_title(self) -> None:
        """'Time per training step · NVIDIA H200, recorded …': the pass, and where measured."""
        fam = self.data.family
        spec = PLOTS["timingPlot"]
        base = spec.title(self.shown_pass())
        if fam is not None and fam.is_decode and fam.new_tokens > 1:
            base = f"Decode step time (q = {fam.new_tokens})"
        note = self.data.recorded_note
        self.timing.set_title(f"{base} · {note}" if note else base)
        self.timing.setAccessibleName(spec.accessible_name(self.shown_pass()))

    def shown_pass(self) -> str:
        """The pass whose measurements the plots show (gpu.config's PASSES)."""
        return self.data.shown_pass()

    def replicate(self, keep_zoom: bool = True) -> PlotsPanel:
        """A new panel showing the same data and style: exports render it offscreen at the size
        asked for, leaving the live panel (and its caches) alone. `keep_zoom`: plots the user
        zoomed show the same ranges (an SVG, which cannot clip, gets the fitted views)."""
        steps = self.replicate_steps(keep_zoom)
        for _ in steps:
            pass
        return steps.panel  # type: ignore[attr-defined]

    def replicate_steps(self, keep_zoom: bool = True) -> _Replication:
        """`replicate` a piece per step (see `build_steps`); the panel is `.panel`."""
        return _Replication(self, keep_zoom)

    def views(self) -> tuple[QWidget, ...]:
        """Every part of the panel, top to bottom: the key, the four plots, the strip chart."""
        return (self.key, *self.plots, self.strip)

    def graphics_views(self) -> tuple[pg.PlotWidget, ...]:
        """The pyqtgraph views (exports switch their caches off and draw them as vectors)."""
        return (*self.plots, self.strip.plot)

    def show_only(self, only: str | None) -> None:
        """Show one plot (by objectName) and the key, or everything (None): the decode pass
        shows the bandwidth plot in the traffic plot's place."""
        self._only = only
        self._place_plots()

    def _place_plots(self) -> None:
        only = self._only
        decode = self.data.family is not None and self.data.family.is_decode
        swapped = {self.traffic: not decode, self.bandwidth: decode}
        for view in (*self.plots, self.strip):
            if only is None:
                view.setVisible(swapped.get(view, True))
            else:
                view.setVisible(view.objectName() == only)

    def shown(self) -> PanelShown:
        """What the panel shows now (`replicate` copies it)."""
        return PanelShown(
            every=self.data.every,
            palette=self.memory.shown_palette,
            n_span=self.data.n_span,
            gpu=self.data.gpu,
            gpu_label=self.data.gpu_label,
            time_model=self.data.time_model_gpu is not None,
            budget=self.data.budget,
            budget_label=self.data.budget_label,
            recorded_note=self.data.recorded_note,
            config=self.data.config,
            family=self.data.family,
            algorithms=self.data.algorithms,
            layers=self.data.layers,
            memory_labels=dict(self.memory.labels),
            model=self.data.model,
            measured=dict(self.data.measured),
            references=dict(self.data.references),
        )

    def show_steps(self, shown: PanelShown, decode: DecodePlots) -> Iterator[None]:
        """Show what another panel showed (`shown`, and its `decode` plots' settings), a piece
        per step: an export's replica, built between the window's frames."""
        self.data.every = shown.every  # the series on screen, no more, no fewer
        if shown.palette is not None:
            yield from self.palette_steps(shown.palette)
        self.set_n_span(*shown.n_span)
        self.decode.copy_settings(decode)
        yield
        if shown.gpu is not None:
            self.set_gpu(shown.gpu, shown.gpu_label, shown.time_model)
            yield
        self.set_budget(shown.budget, shown.budget_label)
        self.set_recorded_note(shown.recorded_note)
        yield
        if shown.config is not None:
            self.data.family, self.data.algorithms = shown.family, shown.algorithms
            self.decode.set_family(shown.family)
            self._place_plots()
            self.data.layers = shown.layers
            self.memory.labels.update(shown.memory_labels)
            self._show_timing_title()
            self._draw_roofs()
            yield
            if shown.model is not None:
                self._draw_model(shown.model)
                yield
            self.set_seq_len(shown.config)
        yield
        self.set_measured(dict(shown.measured))
        yield
        self.set_reference(dict(shown.references))
        self.flush_visibility()
        self._paced_strip.flush()

    def reset_views(self) -> None:
        """Every plot back to its fitted view (View ▸ Reset plots)."""
        for plot in self.plots:
            plot.reset_view()

    # ------------------------------------------------------------------ drawing

    def _strip_collapsed(self, collapsed: bool) -> None:
        self._grid.setRowStretch(3, 0 if collapsed else 2)

    def _show_strip(self) -> None:
        """The counters' samples at the current N, per algorithm (paced)."""
        config = self.data.config
        if config is None:
            return
        self.strip.show_point(config.seq_len, self.current_results())

    def _draw_roofs(self) -> None:
        fam = self.data.family
        self.roofs.draw(self.data.gpu, fam.head_dim if fam is not None else 64)

    def _draw_model(self, curves: ModelCurves) -> None:
        """Draw a finished set of model curves, all in one step."""
        prime(curves.figures)
        self.data.model = curves
        plots = {"memory": self.memory, "traffic": self.traffic, "timing": self.timing}
        for (plot, name), (xs, ys) in curves.series.items():
            plots[plot].set_series(name, xs, ys)
        self.growth.place()
        self.markers.model()  # those of a shape just worked out
        self.markers.points()
        self.markers.measured()
        if self.data.references:
            self._show_reference(self.data.references)
        # Legends and ranges with the curves (and results that waited for them), not a turn
        # later: one repaint shows them all.
        self.fit_part.update()
        self.modelDrawn.emit()
        self.flush_visibility()

    def model_coming(self) -> bool:
        """Whether the model curves of the family shown are being worked out (or wait for
        their turn to be drawn)."""
        return self.models.coming()

    def flush_model(self) -> None:
        """Show the newest state and its model curves now (tests, exports)."""
        self.catch_up()
        self.markers.flush()
        self.models.flush()
        self._paced_strip.flush()
        self.fit_part.flush()
        self.roofs.flush_labels()

    def flush_visibility(self) -> None:
        """The markers, legends and ranges now, if due."""
        self.markers.flush()
        self.fit_part.flush()

    def fit(self) -> None:
        """Re-range every plot to its visible data (after data, not cursor, changes)."""
        self.fit_part.fit()

    def roof_label_rect(self, name: str):  # type: ignore[no-untyped-def]
        """The scene rectangle a roof's label covers now (what the layout test checks)."""
        return self.roofs.label_rect(name)

    def flush_roof_labels(self) -> None:
        """Place the roof labels now if a range change left them due (exports, tests)."""
        self.roofs.flush_labels()

    # ------------------------------------------------------------------ for tests and exports

    def measured_ns(self, plot: MetricPlot, algorithm: str) -> list[float]:
        return list(plot.series.get(f"measured_{algorithm}", ([], []))[0])

    def results_shown(self) -> dict[str, list[RunResult]]:
        """The results drawn now: ours per algorithm shown, and the reference peers."""
        return self.data.results_shown()

    def target_gpu(self) -> GpuSpec | None:
        return self.data.gpu

    def current_results(self) -> Mapping[str, RunResult]:
        """The shown algorithms' results at the current N."""
        return self.data.current_results()


@dataclass(frozen=True)
class PanelShown:
    """What a panel shows, its data and the inputs that do not come with them, for a replica
    (`PlotsPanel.shown`, `PlotsPanel.show_steps`)."""

    every: bool
    palette: Palette | None
    n_span: tuple[int, int]
    gpu: GpuSpec | None
    gpu_label: str
    time_model: bool
    budget: int | None
    budget_label: str
    recorded_note: str
    config: AttentionConfig | None
    family: AttentionConfig | None
    algorithms: tuple[str, ...]
    layers: int
    memory_labels: Mapping[str, str]
    model: ModelCurves | None
    measured: Mapping[str, list[RunResult]]
    references: Mapping[str, list[RunResult]]


class _Replication:
    """Iterates the steps of PlotsPanel.replicate; `panel` is the copy being made."""

    def __init__(self, source: PlotsPanel, keep_zoom: bool = True) -> None:
        self.source = source
        self.keep_zoom = keep_zoom
        self.panel = PlotsPanel(staged=True)
        self._steps = self._run()

    def __iter__(self) -> Iterator[None]:
        return self._steps

    def __next__(self) -> None:
        return next(self._steps)

    def _run(self) -> Iterator[None]:
        src, other = self.source, self.panel
        shown = src.shown()
        yield from other.build_steps()
        other.every_button.setVisible(False)  # a control, not a figure: never exported
        yield from other.show_steps(shown, src.decode)
        for mine, theirs in zip(other.plots, src.plots, strict=True):
            if theirs.user_zoomed and self.keep_zoom:  # the export shows what the user sees
                (x0, x1), (y0, y1) = theirs.plotItem.vb.viewRange()
                mine.user_zoomed = True
                mine.setXRange(x0, x1, padding=0)
                mine.setYRange(y0, y1, padding=0)


def _plot_in_steps(spec: PlotSpec) -> Generator[None, None, MetricPlot]:
    """The plot `spec` describes, made a piece per step (MetricPlot.in_steps)."""
    plot = yield from MetricPlot.in_steps(
        spec.object_name,
        spec.title(),
        spec.y.label,
        spec.y.format,
        x_label=spec.x.label,
        x_format=spec.x.format,
        cursor_label=spec.cursor_label,
    )
    plot.setAccessibleName(spec.accessible_name())
    plot.setAccessibleDescription(spec.description)
    if not spec.follows_n:
        plot.cursor.setVisible(False)  # its x is not N
    if spec.y_start is not None:
        plot.default_y = spec.y_start
    if spec.x_start is not None:
        plot.default_x = spec.x_start
    return plot


def _same_results(new: list[RunResult], old: list[RunResult] | None) -> bool:
    """The same results, object for object (the store hands out the objects it holds)."""
    if old is None or len(new) != len(old):
        return False
    return all(a is b for a, b in zip(new, old, strict=True))
