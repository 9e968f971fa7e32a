"""The lesson's four plots: peak memory, time, HBM traffic over N, and a roofline.

Built from the plotting kit (app/plot_kit.py). The panel follows the app state (`on_state`):
the cursor and the "you are here" markers move with the slider at once; the model curves of a
new family are computed off the GUI thread (app/state/model_curves.py, through a LatestOnly
worker) and drawn in one step when they arrive. Measurements (markers) come from the result
store through `set_measured`; an out-of-memory run is a red ✕ at the memory it would have
needed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QWidget

from gpu.algorithms import ALGORITHMS, NAIVE, TILED, TILED_MMA, TILED_WGMMA
from gpu.config import AttentionConfig
from gpu.costmodel import GpuSpec
from gpu.results import RunResult

from .background import LatestOnly, in_process
from .pacing import coalesced
from .plot_kit import (
    LabelledLine,
    MetricPlot,
    Style,
    fmt_bytes_axis,
    fmt_flops_axis,
    fmt_ms_axis,
    fmt_plain,
)
from .state.app_state import AppState, Change
from .state.family import family
from .state.model_cache import cost, known, prime
from .state.model_curves import MODEL_GRID, ModelCurves, model_curves
from .state.recorded_run import reference_label
from .state.seq_scale import SEQ_MAX, SEQ_MIN
from .state.units import fmt_bytes, fmt_int, fmt_ms, fmt_rate
from .theme import Palette

ALGOS = tuple(ALGORITHMS)  # naive first, then the fused (tiled) kernels
NAIVE_KERNELS = ("gemm_qk", "softmax", "gemm_pv")
SYMBOLS = {NAIVE: "o", TILED: "s", TILED_MMA: "t", TILED_WGMMA: "d"}
#: How a reference series (a peer such as PyTorch SDPA, recorded beside ours) is drawn: muted,
#: dashed, small crosses; never in an algorithm's colour, so it cannot pass for one of ours.
REFERENCE_STYLES: dict[str, tuple[str, Qt.PenStyle, str]] = {
    "sdpa_flash": ("fg", Qt.PenStyle.DashLine, "+"),
    "sdpa_cudnn": ("muted", Qt.PenStyle.DashDotLine, "x"),
    "sdpa_math": ("muted", Qt.PenStyle.DashDotDotLine, "+"),
}
_DEFAULT_REFERENCE_STYLE = ("muted", Qt.PenStyle.DashLine, "+")


def _reference_intensity(config: AttentionConfig, peer: str) -> float:
    """Roofline x of a peer: its FLOPs over the HBM bytes our model gives the same algorithm
    (our tensor-core tiled kernel for the fused SDPA backends, naive for the math backend,
    which writes S and P); the peer's own traffic is not measured."""
    return cost(config, NAIVE if peer == "sdpa_math" else TILED_MMA).arithmetic_intensity


class PlotsPanel(QWidget):
    """The four plots; follows the app state (`on_state`) and the results (`set_measured`)."""

    def __init__(self, parent: QWidget | None = None, staged: bool = False) -> None:
        """`staged`: build nothing yet; `build_steps()` builds it a piece at a time (an export
        builds its panel between frames, so the window keeps painting)."""
        super().__init__(parent)
        self._steps = self._construct()
        if not staged:
            for _ in self._steps:
                pass

    def build_steps(self) -> Iterator[None]:
        """The rest of a staged construction, one piece (~a plot) per step."""
        return self._steps

    def _construct(self) -> Iterator[None]:
        self.memory = MetricPlot("memoryPlot", "Peak memory", "peak memory", fmt_bytes_axis)
        yield
        # One N label (on the memory plot) is enough; each costs a text layout per move.
        self.timing = MetricPlot(
            "timingPlot",
            "Time per forward pass",
            "time",
            fmt_ms_axis,
            cursor_label=False,
            legend_at=(-6, -4),  # nothing is ever fast at large N: the bottom right stays empty
        )
        yield
        self.traffic = MetricPlot(
            "trafficPlot",
            "HBM traffic (model)",
            "bytes moved",
            fmt_bytes_axis,
            cursor_label=False,
        )
        yield
        self.roofline = MetricPlot(
            "rooflinePlot",
            "Roofline",
            "achieved FLOP/s",
            fmt_flops_axis,
            x_label="arithmetic intensity (FLOP/byte)",
            x_format=fmt_plain,
            legend_at=(-6, -4),  # under the flat roof, right of the points: stays empty
        )
        yield
        self.roofline.cursor.setVisible(False)  # x is FLOP/byte here, not N
        self.roofline.setXRange(0.0, 4.0, padding=0.02)  # 1 to 10 000 FLOP/byte
        self.timing.default_y = (-1.0, 3.0)  # 0.1 ms to 1 s until something is measured
        self.plots = (self.memory, self.timing, self.traffic, self.roofline)
        grid = QGridLayout(self)
        grid.setContentsMargins(4, 4, 4, 4)
        grid.setSpacing(6)
        grid.addWidget(self.memory, 0, 0)
        grid.addWidget(self.timing, 0, 1)
        grid.addWidget(self.traffic, 1, 0)
        grid.addWidget(self.roofline, 1, 1)

        self._config: AttentionConfig | None = None
        self._family: AttentionConfig | None = None
        self._algorithms: tuple[str, ...] = (NAIVE, TILED)
        self._measured: dict[str, list[RunResult]] = {a: [] for a in ALGOS}
        self._by_n: dict[str, dict[int, RunResult]] = {a: {} for a in ALGOS}
        self._gpu: GpuSpec | None = None
        self._gpu_label = ""
        self._time_model_gpu: GpuSpec | None = None
        self._budget: int | None = None
        self._budget_label = ""
        self._n_span: tuple[int, int] = (SEQ_MIN, SEQ_MAX)
        self._references: dict[str, list[RunResult]] = {}
        self._reference_by_n: dict[str, dict[int, RunResult]] = {}
        self._reference_ids: list[str] = []
        self._recorded_note = ""
        self._model: ModelCurves | None = None
        self._seen: AppState | None = None  # the state shown
        self._pending: AppState | None = None  # a newer one, noted while hidden
        self._pending_measured: dict[str, list[RunResult]] | None = None
        self._pending_reference: dict[str, list[RunResult]] | None = None
        self._relabel = False
        self._paced_visibility = coalesced(self._apply_visibility, 0, parent=self)
        #: Model curves are computed here, off the GUI thread; only the newest set is drawn.
        self.model_worker = LatestOnly(self)
        yield from self._build_items()
        for plot in self.plots:
            plot.set_visible_items([])
        self.set_n_span(SEQ_MIN, SEQ_MAX)
        self.memory.hover_provider = self._hover_memory
        self.timing.hover_provider = self._hover_timing
        self.traffic.hover_provider = self._hover_traffic
        self.roofline.hover_provider = self._hover_roofline

    def _build_items(self) -> Iterator[None]:
        m, t, h, r = self.memory, self.timing, self.traffic, self.roofline
        m.add("model_naive", "naive (model)", Style(NAIVE, 2.0))
        m.add("model_tiled", "tiled, every kernel (model)", Style(TILED, 2.0))
        for a in ALGOS:
            m.add(
                f"measured_{a}",
                f"{ALGORITHMS[a].label}",
                Style(a, symbol=SYMBOLS.get(a, "h"), line=False, symbol_size=9),
            )
        m.add("oom", "out of memory", Style("oom", symbol="x", line=False, symbol_size=15))
        m.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=15, hollow=True),
            bounds=False,
        )
        self.budget_line = LabelledLine(m, angle=0, position=0.97, anchors=[(1, 1), (1, 1)])
        yield

        for a in ALGOS:
            t.add(
                f"measured_{a}",
                ALGORITHMS[a].label,
                Style(a, 2.0, symbol=SYMBOLS.get(a, "h"), symbol_size=7),
            )
        for k in NAIVE_KERNELS:
            t.add(
                f"kernel_{k}",
                f"naive: {k}",
                Style(k, 1.5, Qt.PenStyle.DashLine),
            )
        for a in ALGOS:
            t.add(f"roofline_{a}", "", Style(a, 1.2, Qt.PenStyle.DotLine))
        t.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=15, hollow=True),
            bounds=False,
        )

        yield
        for a in ALGOS:
            h.add(f"model_{a}", f"{ALGORITHMS[a].label}", Style(a, 2.0))
        h.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=13, hollow=True),
            bounds=False,
        )

        yield
        r.add("roof", "roofline", Style("roof", 2.0))
        # Where the roofline puts each algorithm at the current N: one item, a colour per point.
        r.add(
            "bounds",
            "roofline bound",
            Style("muted", symbol="o", line=False, symbol_size=13, hollow=True),
            bounds=False,
        )
        for a in ALGOS:
            r.add(
                f"measured_{a}",
                f"{ALGORITHMS[a].label}",
                Style(a, 1.0, Qt.PenStyle.DotLine, symbol=SYMBOLS.get(a, "h"), symbol_size=8),
            )
        r.add(
            "current",
            "",
            Style("fg", symbol="o", line=False, symbol_size=16, hollow=True),
            bounds=False,
        )
        self.ridge_line = LabelledLine(r, angle=90, position=0.55, anchors=[(0, 0.5), (0, 0.5)])

    # ------------------------------------------------------------------ inputs

    def apply_palette(self, p: Palette) -> None:
        for plot in self.plots:
            plot.apply_palette(p)
        self.budget_line.set_style(p.budget, 1.5, Qt.PenStyle.DashLine)
        self.ridge_line.set_style(p.muted, 1.0, Qt.PenStyle.DotLine)

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
        if change.changed("budget"):
            self.set_budget(s.budget.line_bytes, s.budget_line_label)
        if change.changed("target_gpu", "target_gpu_label", "on_gpu"):
            self.set_gpu(s.target_gpu, s.target_gpu_label, time_model=s.on_gpu)
        if change.changed("config", "algorithms", "seq_scale"):
            self.set_config(s.config, s.algorithms, warm=s.scale)

    def show_state(self, s: AppState) -> None:
        """Everything the state says, at once (a new panel's first look)."""
        self.on_state(Change.initial(s))

    def set_n_span(self, lo: int, hi: int) -> None:
        """The N range every N plot shows: the slider's whole scale."""
        self._n_span = (lo, hi)
        for plot in self.plots[:3]:
            plot.set_x_span(lo, hi)

    def set_config(
        self, config: AttentionConfig, algorithms: Sequence[str], warm: Sequence[int] = ()
    ) -> None:
        """A new config: move the cursors now; new model curves if the family or algorithms
        changed (computed off the GUI thread; `warm`: N whose costs the slider will ask for)."""
        algorithms = tuple(a for a in ALGOS if a in algorithms)
        fam = family(config)
        if fam != self._family or algorithms != self._algorithms:
            self._family = fam
            self._algorithms = algorithms
            self._request_model((*warm, config.seq_len))
            self._update_visibility()
        self.set_seq_len(config)

    def set_seq_len(self, config: AttentionConfig) -> None:
        """The fast path of a slider move: cursors and "you are here" markers only."""
        self._config = config
        n = config.seq_len
        for plot in self.plots[:3]:
            plot.set_cursor(n)
        self.roofline.cursor_n = n
        self._model_markers()
        self._measured_markers()

    def _model_markers(self) -> None:
        """The "you are here" markers that show the model (memory, traffic, roofline bound)."""
        config, algos = self._config, self._algorithms
        if config is None:
            return
        n = config.seq_len
        # Every fused kernel has the same peak (4 matrices + m, l): one marker for all of them.
        fused = [a for a in algos if a != NAIVE]
        model_algos = [a for a in algos if a == NAIVE] + fused[:1]
        # A shape whose model is still being worked out (off the GUI thread) gets its model
        # markers with its curves (_draw_model); the cursor moves now.
        figure = cost if self._model_ready() else known
        mem = [(c.peak_bytes if (c := figure(config, a)) else None) for a in model_algos]
        self.memory.set_series("current", [n] * len(mem), mem)
        hbm = [(c.hbm_bytes if (c := figure(config, a)) else None) for a in algos]
        self.traffic.set_series("current", [n] * len(hbm), hbm)
        self._draw_bounds()

    def _model_ready(self) -> bool:
        """Whether the model curves drawn are the current family's."""
        m = self._model
        return m is not None and m.family == self._family and m.algorithms == self._algorithms

    def _measured_markers(self) -> None:
        """The "you are here" markers that show measurements (time, achieved FLOP/s)."""
        config, algos = self._config, self._algorithms
        if config is None:
            return
        n = config.seq_len
        times = [self._by_n[a].get(n) for a in algos]
        self.timing.set_series(
            "current", [n] * len(times), [r.total_ms if r else None for r in times]
        )
        xs, ys = [], []
        for a in algos:
            res = self._by_n[a].get(n)
            if res is not None and res.tflops:
                xs.append(cost(config, a).arithmetic_intensity)
                ys.append(res.tflops * 1e12)
        self.roofline.set_series("current", xs, ys, log_x=True)

    def set_measured(self, series: dict[str, list[RunResult]]) -> None:
        """Measured results of the current family, per algorithm, sorted by N (noted only while
        the panel is hidden, like the state)."""
        if self._seen is not None and not self.isVisible():
            self._pending_measured = series
            return
        self._show_measured(series)

    def _show_measured(self, series: dict[str, list[RunResult]]) -> None:
        for a in ALGOS:
            results = list(series.get(a, ()))
            self._measured[a] = results
            self._by_n[a] = {r.config.seq_len: r for r in results}
            ok = [r for r in results if not r.oom]
            self.memory.set_series(
                f"measured_{a}", [r.config.seq_len for r in ok], [r.peak_bytes for r in ok]
            )
            timed = [r for r in ok if r.total_ms]
            self.timing.set_series(
                f"measured_{a}", [r.config.seq_len for r in timed], [r.total_ms for r in timed]
            )
            self.roofline.set_series(
                f"measured_{a}",
                [cost(r.config, a).arithmetic_intensity for r in timed],
                [r.tflops * 1e12 for r in timed],
            )
        naive_timed = [r for r in self._measured[NAIVE] if not r.oom and r.kernel_times]
        for k in NAIVE_KERNELS:
            xs, ys = [], []
            for r in naive_timed:
                for kt in r.kernel_times:
                    if kt.name == k:
                        xs.append(r.config.seq_len)
                        ys.append(kt.ms)
            self.timing.set_series(f"kernel_{k}", xs, ys)
        ooms = [r for a in ALGOS for r in self._measured[a] if r.oom]
        self.memory.set_series(
            "oom", [r.config.seq_len for r in ooms], [r.model_peak_bytes for r in ooms]
        )
        self._update_visibility()
        self._measured_markers()

    def set_budget(self, budget_bytes: int | None, label: str) -> None:
        self._budget = budget_bytes
        self._budget_label = label
        text = label if "GB" in label else f"{label}: {fmt_bytes(budget_bytes)}"
        self.budget_line.set(budget_bytes, text)
        self.memory.fit_y(extra=[budget_bytes] if budget_bytes else [])

    def set_gpu(self, gpu: GpuSpec, label: str, time_model: bool) -> None:
        """The GPU whose roofline is drawn; `time_model` also draws its roofline times."""
        self._gpu = gpu
        self._gpu_label = label
        self._time_model_gpu = gpu if time_model else None
        ai = np.logspace(0, 4, 60)
        roof = np.minimum(gpu.fp16_tensor_flops, gpu.bandwidth_bytes_s * ai)
        self.roofline.set_series("roof", ai, roof)
        ridge = gpu.ridge_flops_per_byte
        self.ridge_line.set(ridge, f"ridge {ridge:.0f} FLOP/B")
        self.roofline.title = f"Roofline: {label}"
        self.roofline.plotItem.titleLabel.setText(
            self.roofline.title,
            color=self.roofline._palette.foreground if self.roofline._palette else None,
            size="10pt",
        )
        if self._family is not None and (
            self._model is None or self._model.time_gpu != self._time_model_gpu
        ):
            self._request_model()
        self._draw_bounds()
        self._update_visibility()

    def set_reference(self, series: dict[str, list[RunResult]]) -> None:
        """See `_show_reference`; noted only while the panel is hidden."""
        if self._seen is not None and not self.isVisible():
            self._pending_reference = series
            return
        self._show_reference(series)

    def _show_reference(self, series: dict[str, list[RunResult]]) -> None:
        """Peers measured beside ours (PyTorch SDPA in a recording), per peer id, sorted by N:
        dashed reference series on the timing and roofline plots, labelled "PyTorch SDPA flash
        (recorded)" and so on, never as one of our algorithms. `{}` removes them."""
        if not series and not self._references:
            return  # the common case (live measurements): nothing to draw, nothing to undo
        for peer in series:
            self._ensure_reference(peer)
        self._references = {p: list(rs) for p, rs in series.items()}
        self._reference_by_n = {
            p: {r.config.seq_len: r for r in rs} for p, rs in self._references.items()
        }
        relabel = False
        for peer in self._reference_ids:
            name = f"reference_{peer}"
            timed = [r for r in self._references.get(peer, ()) if not r.oom and r.total_ms]
            label = reference_label(peer, recorded=all(r.recorded for r in timed))
            for plot in (self.timing, self.roofline):
                relabel |= plot.labels[name] != label
                plot.labels[name] = label
            self.timing.set_series(
                name, [r.config.seq_len for r in timed], [r.total_ms for r in timed]
            )
            self.roofline.set_series(
                name,
                [_reference_intensity(r.config, peer) for r in timed],
                [r.tflops * 1e12 for r in timed],
            )
        self._update_visibility(force=relabel)

    def _ensure_reference(self, peer: str) -> None:
        name = f"reference_{peer}"
        if name in self.timing.items:
            return
        self._reference_ids.append(peer)
        color, dash, symbol = REFERENCE_STYLES.get(peer, _DEFAULT_REFERENCE_STYLE)
        for plot in (self.timing, self.roofline):
            item = plot.add(
                name, reference_label(peer), Style(color, 1.6, dash, symbol=symbol, symbol_size=8)
            )
            item.setVisible(False)
            if plot._palette is not None:
                plot._restyle(item, plot.styles[name], plot._palette)

    def reference_series(self) -> dict[str, list[RunResult]]:
        return {p: list(rs) for p, rs in self._references.items()}

    def set_recorded_note(self, note: str) -> None:
        """Say on the timing plot where and when its measurements were recorded
        ("NVIDIA H200, recorded 2025-06-01"); '' for live measurements."""
        self._recorded_note = note
        base = "Time per forward pass"
        self.timing.title = f"{base} · {note}" if note else base
        pal = self.timing._palette
        self.timing.plotItem.titleLabel.setText(
            self.timing.title, color=pal.foreground if pal else None, size="10pt"
        )

    def replicate(self) -> PlotsPanel:
        """A new panel showing the same data and style: exports render it offscreen at the size
        asked for, leaving the live panel (and its caches) alone."""
        steps = self.replicate_steps()
        for _ in steps:
            pass
        return steps.panel  # type: ignore[attr-defined]

    def replicate_steps(self) -> _Replication:
        """`replicate` a piece per step (see `build_steps`); the panel is `.panel`."""
        return _Replication(self)

    # ------------------------------------------------------------------ drawing

    def _request_model(self, warm: Sequence[int] = ()) -> None:
        """Compute the model curves of the current family off the GUI thread."""
        fam, algos, gpu = self._family, self._algorithms, self._time_model_gpu
        if fam is None:
            return
        warm = tuple(warm)
        self.model_worker.submit(
            in_process(model_curves, fam, algos, gpu, warm),
            self._draw_model,
            failed=self._model_failed,
        )

    def _model_failed(self, exc: BaseException) -> None:
        self.model_worker.submit(
            lambda: model_curves(self._family, self._algorithms, self._time_model_gpu),
            self._draw_model,
        )

    def _draw_model(self, curves: ModelCurves) -> None:
        """Draw a finished set of model curves, all in one step."""
        prime(curves.costs)
        self._model = curves
        plots = {"memory": self.memory, "traffic": self.traffic, "timing": self.timing}
        for (plot, name), (xs, ys) in curves.series.items():
            plots[plot].set_series(name, xs, ys)
        self._model_markers()  # those of a shape just worked out
        self._update_visibility()

    def flush_model(self) -> None:
        """Show the newest state and its model curves now (tests, exports)."""
        self.catch_up()
        self.model_worker.flush()

    def _draw_bounds(self) -> None:
        """Where the roofline puts each algorithm at the current N (hollow markers on the roof)."""
        gpu, config = self._gpu, self._config
        if gpu is None or config is None:
            self.roofline.set_series("bounds", [], [])
            return
        xs, ys, keys = [], [], []
        figure = cost if self._model_ready() else known
        for a in self._algorithms:
            c = figure(config, a)
            if c is None:
                continue
            ai = c.arithmetic_intensity
            xs.append(ai)
            ys.append(min(gpu.fp16_tensor_flops, gpu.bandwidth_bytes_s * ai))
            keys.append(a)
        self.roofline.set_colors("bounds", keys)
        self.roofline.set_series("bounds", xs, ys)

    def _update_visibility(self, force: bool = False) -> None:
        """Legends and y ranges follow at the end of this turn of the event loop: a state
        change, cleared series and new markers arriving together relayout them once."""
        self._relabel = self._relabel or force
        self._paced_visibility()

    def flush_visibility(self) -> None:
        self._paced_visibility.flush()

    def _apply_visibility(self) -> None:
        force, self._relabel = self._relabel, False
        algos = self._algorithms
        refs = [
            f"reference_{p}" for p in self._reference_ids if self.timing.series[f"reference_{p}"][0]
        ]
        tiled_any = any(a != NAIVE for a in algos)
        mem = []
        if NAIVE in algos:
            mem.append("model_naive")
        if tiled_any:
            mem.append("model_tiled")
        mem += [f"measured_{a}" for a in algos]
        if self.memory.series["oom"][0]:
            mem.append("oom")
        mem.append("current")
        self.memory.set_visible_items(mem)
        tim = [f"measured_{a}" for a in algos]
        if NAIVE in algos:  # listed whether or not measured yet: the legend stays put
            tim += [f"kernel_{k}" for k in NAIVE_KERNELS]
        relabel = False
        if self._time_model_gpu is not None:
            tim += [f"roofline_{a}" for a in algos]
            for i, a in enumerate(algos):
                label = f"roofline model ({self._gpu_label})" if i == 0 else ""
                relabel |= self.timing.labels[f"roofline_{a}"] != label
                self.timing.labels[f"roofline_{a}"] = label
        tim += refs
        tim.append("current")
        self.timing.set_visible_items(tim, force=relabel or force)
        self.traffic.set_visible_items([f"model_{a}" for a in algos] + ["current"])
        roof = ["roof", *[f"measured_{a}" for a in algos], *refs, "bounds", "current"]
        self.roofline.set_visible_items(roof, force=force)
        self.fit()

    def fit(self) -> None:
        """Re-range every plot's y axis to its visible data (after data, not cursor, changes)."""
        self.memory.fit_y(extra=[self._budget] if self._budget else [])
        self.timing.fit_y()
        self.traffic.fit_y()
        self.roofline.fit_y()

    # ------------------------------------------------------------------ hover read-outs

    def _nearest_n(self, x: float) -> int:
        n = 10.0**x
        candidates = set(MODEL_GRID)
        for a in self._algorithms:
            candidates.update(self._by_n[a])
        for by_n in self._reference_by_n.values():
            candidates.update(by_n)
        if self._config is not None:
            candidates.add(self._config.seq_len)
        return min(candidates, key=lambda c: abs(math.log10(c) - math.log10(n)))

    def _hover_memory(self, x: float, _y: float) -> str | None:
        if self._family is None:
            return None
        n = self._nearest_n(x)
        config = self._family.with_(seq_len=n)
        lines = [f"N = {fmt_int(n)}"]
        for a in self._algorithms:
            res = self._by_n[a].get(n)
            line = f"{ALGORITHMS[a].label}: model {fmt_bytes(cost(config, a).peak_bytes)}"
            if res is not None:
                line += ", OOM" if res.oom else f", measured {fmt_bytes(res.peak_bytes)}"
            lines.append(line)
        if self._budget:
            lines.append(f"budget {fmt_bytes(self._budget)}")
        return "\n".join(lines)

    def _hover_timing(self, x: float, _y: float) -> str | None:
        n = self._nearest_n(x)
        lines = [f"N = {fmt_int(n)}"]
        for a in self._algorithms:
            res = self._by_n[a].get(n)
            if res is None:
                lines.append(f"{ALGORITHMS[a].label}: not measured")
            elif res.oom:
                lines.append(f"{ALGORITHMS[a].label}: out of memory")
            else:
                parts = ", ".join(f"{k.name} {fmt_ms(k.ms)}" for k in res.kernel_times)
                extra = f" ({parts})" if len(res.kernel_times) > 1 else ""
                lines.append(f"{ALGORITHMS[a].label}: {fmt_ms(res.total_ms)}{extra}")
            if self._time_model_gpu is not None and self._family is not None:
                s = cost(self._family.with_(seq_len=n), a).modeled_seconds(self._time_model_gpu)
                lines.append(f"   roofline {fmt_ms(s * 1e3)}")
        for peer, by_n in self._reference_by_n.items():
            res = by_n.get(n)
            if res is not None and res.total_ms:
                lines.append(f"{reference_label(peer, res.recorded)}: {fmt_ms(res.total_ms)}")
        return "\n".join(lines)

    def _hover_traffic(self, x: float, _y: float) -> str | None:
        if self._family is None:
            return None
        n = self._nearest_n(x)
        config = self._family.with_(seq_len=n)
        lines = [f"N = {fmt_int(n)}"]
        for a in self._algorithms:
            c = cost(config, a)
            lines.append(
                f"{ALGORITHMS[a].label}: {fmt_bytes(c.hbm_bytes)} "
                f"({c.arithmetic_intensity:.3g} FLOP/B)"
            )
        return "\n".join(lines)

    def _hover_roofline(self, x: float, y: float) -> str | None:
        best, best_d = None, 0.12  # within ~0.12 decades of a marker
        for a in self._algorithms:
            for r in self._measured[a]:
                if r.oom or not r.tflops:
                    continue
                ai = cost(r.config, a).arithmetic_intensity
                d = math.hypot(math.log10(ai) - x, math.log10(r.tflops * 1e12) - y)
                if d < best_d:
                    best, best_d = (a, r, ai), d
        for peer, results in self._references.items():
            for r in results:
                if r.oom or not r.tflops:
                    continue
                ai = _reference_intensity(r.config, peer)
                d = math.hypot(math.log10(ai) - x, math.log10(r.tflops * 1e12) - y)
                if d < best_d:
                    best, best_d = (peer, r, ai), d
        if best is None:
            if self._gpu is None:
                return None
            ai = 10.0**x
            roof = min(self._gpu.fp16_tensor_flops, self._gpu.bandwidth_bytes_s * ai)
            return f"{ai:.3g} FLOP/B: roof {fmt_rate(roof, 'FLOP/s')} on {self._gpu_label}"
        a, r, ai = best
        name = ALGORITHMS[a].label if a in ALGORITHMS else reference_label(a, r.recorded)
        return (
            f"{name}, N = {fmt_int(r.config.seq_len)}\n"
            f"{ai:.3g} FLOP/B · {fmt_rate(r.tflops * 1e12, 'FLOP/s')} · "
            f"{fmt_rate((r.bandwidth_gbs or 0) * 1e9, 'B/s')}"
        )

    # ------------------------------------------------------------------ for tests and exports

    def measured_ns(self, plot: MetricPlot, algorithm: str) -> list[float]:
        return list(plot.series.get(f"measured_{algorithm}", ([], []))[0])


class _Replication:
    """Iterates the steps of PlotsPanel.replicate; `panel` is the copy being made."""

    def __init__(self, source: PlotsPanel) -> None:
        self.source = source
        self.panel = PlotsPanel(staged=True)
        self._steps = self._run()

    def __iter__(self) -> Iterator[None]:
        return self._steps

    def __next__(self) -> None:
        return next(self._steps)

    def _run(self) -> Iterator[None]:
        src, other = self.source, self.panel
        yield from other.build_steps()
        if src.memory._palette is not None:
            other.apply_palette(src.memory._palette)
        other.set_n_span(*src._n_span)
        if src._gpu is not None:
            other.set_gpu(src._gpu, src._gpu_label, src._time_model_gpu is not None)
        other.set_budget(src._budget, src._budget_label)
        other.set_recorded_note(src._recorded_note)
        yield
        if src._config is not None:
            other._family, other._algorithms = src._family, src._algorithms
            if src._model is not None:
                other._draw_model(src._model)
            other.set_seq_len(src._config)
        yield
        other.set_measured(src._measured)
        other.set_reference(src._references)
        other.flush_visibility()
