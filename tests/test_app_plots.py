"""The Measurements tab: measured bytes beside the model's, a hierarchical roofline whose points
say where their bytes come from, verdicts that follow the measurements, the timing spread, both
peak-memory figures, one unit convention, plots that come back from a zoom, and legends and
read-outs that never cover the data."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from profiled_results import NCU, profiled_result, write_profiled
from PySide6.QtCore import QEvent, QObject, QPointF, Qt
from PySide6.QtWidgets import QApplication, QWidget

from app.kit.plain_text import shown_text
from app.measure.explain import ExplainPane, explain_html
from app.state.app_state import AppState
from app.state.point_inputs import PointInputs
from gpu.algorithms import NAIVE, TILED, TILED_MMA
from gpu.backends.backend import RunOptions
from gpu.backends.model_backend import CostModelBackend
from gpu.config import AttentionConfig
from gpu.model.costmodel import DEFAULT_GPU, GPUS, algorithm_cost, compulsory_cost
from gpu.model.roofline import algorithm_verdict, counted_dram_bytes

H200 = GPUS[DEFAULT_GPU]
LOG_4096 = math.log10(4096)


class ProfilingBackend(CostModelBackend):
    """A fake CUDA backend: the cost model's times, and when asked to profile, counters that
    say the DRAM saw `dram_share` of the model's bytes (or a refusal, like CUPTI's)."""

    def __init__(self, refuse: str = "", dram_share: float = 0.5, **kwargs) -> None:
        kwargs.setdefault("device", "NVIDIA H200")
        kwargs.setdefault("memory_bytes", 150_109_880_320)
        super().__init__(name="cuda", algorithms=(NAIVE, TILED, TILED_MMA), **kwargs)
        self.refuse = refuse
        self.dram_share = dram_share
        self.profiled: list[bool] = []

    def run(self, config, algorithm, options=None):  # type: ignore[no-untyped-def]
        options = options or RunOptions()
        result = super().run(config, algorithm, options)
        self.profiled.append(options.profile)
        if not options.profile or result.oom:
            return result
        if self.refuse:
            return replace(result, message=f"traffic not measured: {self.refuse}")
        from profiled_results import traffic

        model = {k.name: k for k in algorithm_cost(config, algorithm).kernels}
        counted = tuple(
            traffic(
                k.name,
                int(model[k.name].bytes_read * self.dram_share),
                int(model[k.name].bytes_written * self.dram_share),
                k.ms,
                model[k.name].hbm_bytes,
                0.4,
            )
            for k in result.kernel_times
        )
        return replace(result, traffic=counted)


@pytest.fixture
def profiled_window(make_window, tmp_path, window_settings):
    """A window replaying profiled results (test data, see tests/profiled_results.py) at N=4096."""
    window_settings.setValue("controls/seq_len", 4096)
    window_settings.setValue("controls/algorithms", f"{NAIVE},{TILED},{TILED_MMA}")
    return make_window(open_path=str(write_profiled(tmp_path / "profiled.json")))


#: How long a GPU test waits for results before calling it a hang (compiles included).
GPU_HANG_MS = 120_000


def _settled(qtbot, window, timeout_ms: int = 5000) -> None:
    """The runner idle and every result of the current point in the store (`timeout_ms` only
    guards against a hang: the wait ends as soon as that holds)."""
    s = window.state.value

    def done() -> bool:
        missing = window.measurements.store.missing(
            s.config, s.algorithms, s.backend.key, s.run_budget
        )
        return not window.runner.busy and not missing

    qtbot.waitUntil(done, timeout=timeout_ms)


def _drawn(qtbot, window) -> None:
    window.plots.flush_model()
    qtbot.waitUntil(lambda: bool(window.plots.memory.series["measured_naive"][0]), timeout=5000)
    window.plots.flush_visibility()
    window.plots.flush_model()


# ------------------------------------------------------------------------- measure bytes


def test_measure_bytes_makes_cuda_runs_sample_the_counters_and_persists(
    qtbot, make_window, window_settings
):
    backend = ProfilingBackend()
    window = make_window(backend)
    check = window.controls.measure_bytes
    _settled(qtbot, window)
    assert check.isEnabled() and not check.isChecked()
    assert backend.profiled and not any(backend.profiled)  # timing runs are not sampled
    store, key = window.measurements.store, window.backend.key
    assert store.get(window.config, NAIVE, key).traffic == ()
    check.click()
    assert window.state.value.measure_bytes
    # The cached, unsampled results count as missing: the current point is measured again.
    qtbot.waitUntil(lambda: store.get(window.config, NAIVE, key).traffic != (), timeout=5000)
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=5000)
    assert backend.profiled[-1] is True
    assert store.missing(window.config, (NAIVE, TILED), key, None, need_traffic=True) == []
    window.save_settings()
    assert str(window_settings.value("controls/measure_bytes")).lower() == "true"
    window.close()
    again = make_window(ProfilingBackend())
    assert again.controls.measure_bytes.isChecked() and again.state.value.profile_runs


def test_measure_bytes_is_off_on_the_cpu_backend_and_says_why(make_window):
    window = make_window(CostModelBackend(name="cpu", device="CPU (fake)"))
    check = window.controls.measure_bytes
    assert not check.isEnabled()
    assert "CUDA" in check.toolTip() and "hardware counters" in check.toolTip()


def test_refused_counters_are_said_once_and_runs_go_on_unsampled(qtbot, make_window):
    backend = ProfilingBackend(refuse="no permission to read the GPU's counters (permission)")
    window = make_window(backend)
    _settled(qtbot, window)
    shown = []
    window.statusBar().messageChanged.connect(lambda text: text and shown.append(text))
    window.controls.measure_bytes.click()
    qtbot.waitUntil(lambda: bool(window.state.value.bytes_refused), timeout=5000)
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=5000)
    said = [t for t in shown if "Measure bytes" in t]
    assert len(said) == 1 and "permission" in said[0] and "model" in said[0]
    assert not window.state.value.profile_runs
    check = window.controls.measure_bytes
    assert not check.isEnabled() and "permission" in check.toolTip()
    runs = len(backend.profiled)
    window.controls.set_seq_len(2048)
    qtbot.waitUntil(lambda: not window.runner.busy and len(backend.profiled) > runs, timeout=5000)
    assert not any(backend.profiled[runs:])  # no more sampling, no more messages
    assert len([t for t in shown if "Measure bytes" in t]) == 1


# ------------------------------------------------------------------------- roofline


def test_a_measured_result_puts_its_roofline_point_at_measured_intensity(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    roofline = profiled_window.plots.roofline
    xs, _ = roofline.series[f"at_measured_{TILED_MMA}"]
    expected = []
    for n in (4096, 16384):
        read, write, _ = NCU[(n, TILED_MMA)]["flash_fwd"]
        config = AttentionConfig(seq_len=n)
        flops = algorithm_cost(config, TILED_MMA).flops
        # O, m and l count as written once, whether or not they left the L2 in the window
        written = max(write, compulsory_cost(config, TILED_MMA).bytes_written)
        expected.append(flops / (read + written))
    assert sorted(xs) == pytest.approx(sorted(expected))
    assert max(xs) > 8000  # thousands of useful FLOP per DRAM byte, measured
    assert roofline.series[f"at_model_{TILED_MMA}"] == ([], [])  # every point was measured
    assert "bytes measured" in roofline.legend_texts()
    plots = profiled_window.plots
    labels = {n: lab.toPlainText() for n, lab in plots.roof_labels.items() if lab.isVisible()}
    assert labels["hbm"].startswith("HBM") and labels["l2"].startswith("L2")
    assert "tensor" in labels["tensor"] and "fp32" in labels["fp32"]
    # the exponential unit's is shown only against its line, where this small plot has no room
    # beside the tensor cores' label on the same line (the hover names it)
    assert "exp" in plots.roof_labels["xu"].toPlainText()


def test_results_drawn_at_the_n_shown_move_its_bound_markers_to_measured_intensity(
    qtbot, profiled_window
):
    _drawn(qtbot, profiled_window)
    plots, roofline = profiled_window.plots, profiled_window.plots.roofline
    assert profiled_window.config.seq_len == 4096
    series = plots.results_shown()
    plots.set_measured({})
    plots.flush_markers()  # no results: the bounds at the model's intensity
    at_model = roofline.series["bounds"][0]
    plots.set_measured(series)  # the results arrive; nothing moves the markers but them
    at_measured = roofline.series["bounds"][0]
    measured_x = roofline.series[f"at_measured_{TILED_MMA}"][0][0]  # its point at N = 4096
    assert measured_x == pytest.approx(at_measured[-1])  # keys in NAIVE, TILED, TILED_MMA order
    assert at_model[-1] != pytest.approx(measured_x)


def test_unmeasured_results_sit_at_model_intensity_and_say_so(qtbot, make_window):
    window = make_window(ProfilingBackend())
    _settled(qtbot, window)
    window.plots.flush_model()
    window.plots.flush_visibility()
    roofline = window.plots.roofline
    qtbot.waitUntil(lambda: bool(roofline.series[f"at_model_{TILED_MMA}"][0]), timeout=5000)
    (x,) = roofline.series[f"at_model_{TILED_MMA}"][0]
    model = algorithm_verdict(window.config, TILED_MMA, window.state.value.target_gpu)
    assert x == pytest.approx(model.intensity)
    assert roofline.series[f"at_measured_{TILED_MMA}"] == ([], [])
    assert "bytes: model" in roofline.legend_texts()
    assert "bytes measured" not in roofline.legend_texts()


# ------------------------------------------------------------------------- explain


def _pane(qtbot, config, results=()):
    pane = ExplainPane()
    qtbot.addWidget(pane)
    state = AppState(
        config=config, checked=(NAIVE, TILED, TILED_MMA), available=(NAIVE, TILED, TILED_MMA)
    )
    pane.follow(state, {r.algorithm: r for r in results})
    return pane, state


def test_the_explain_verdict_flips_when_a_measurement_arrives(qtbot):
    config = AttentionConfig(seq_len=16384)
    pane, state = _pane(qtbot, config)
    before = pane.plain_text()
    line = next(ln for ln in before.splitlines() if ln.startswith("tiled (tensor cores):"))
    assert "compute-bound" in line and "tensor cores bind" in line and "the model's" in line
    # Counters that saw every K/V re-read miss L2: the no-reuse bytes, timed at 2.6 ms.
    no_reuse = algorithm_cost(config, TILED_MMA)
    measured = replace(
        profiled_result(16384, TILED_MMA),
        traffic=(
            replace(
                profiled_result(16384, TILED_MMA).traffic[0],
                dram_read_bytes=no_reuse.bytes_read,
                dram_write_bytes=no_reuse.bytes_written,
            ),
        ),
    )
    pane.follow(state, {TILED_MMA: measured})  # the result at the N shown arrives
    after = pane.plain_text()
    line = next(ln for ln in after.splitlines() if ln.startswith("tiled (tensor cores):"))
    assert "memory-bound" in line and "HBM bandwidth binds" in line
    assert "measured by the hardware counters" in line


def test_explain_gives_the_measured_naive_to_tiled_ratio_beside_the_models(qtbot):
    results = [profiled_result(4096, a) for a in (NAIVE, TILED, TILED_MMA)]
    text = _pane(qtbot, AttentionConfig(seq_len=4096), results)[0].plain_text()
    line = next(ln for ln in text.splitlines() if "naive ÷ tiled (readable)" in ln)
    # compulsory writes counted on both sides: 1.60 GB against 25.7 MB
    ratio = counted_dram_bytes(results[0]) / counted_dram_bytes(results[1])
    assert 60 < ratio < 70
    assert f"{ratio:,.0f}× less, measured" in line and "model" in line and "2.7× without" in line
    rows = [ln for ln in text.splitlines() if "measured" in ln and "MB" in ln]
    assert rows  # bytes say where they come from
    unmeasured = _pane(qtbot, AttentionConfig(seq_len=4096))[0].plain_text()
    assert "not measured here" in unmeasured and f"{ratio:,.0f}×" not in unmeasured


def test_explain_names_useful_and_executed_flops_under_the_causal_mask(qtbot):
    config = AttentionConfig(seq_len=4096, causal=True)
    html = explain_html(
        PointInputs(config, (NAIVE, TILED), H200, H200.label, H200.memory_bytes, "an H200")
    )
    assert "Useful FLOPs" in html and "execute more" in html
    assert "useful FLOP/B (executed " in html
    plain = explain_html(
        PointInputs(config.with_(causal=False), (NAIVE, TILED), H200, H200.label, None, "")
    )
    assert "useful FLOP/B" in plain and "(executed " not in plain  # one where they agree


# ------------------------------------------------------------------------- traffic, strip


def test_the_traffic_plot_shows_the_model_band_and_measured_points(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    plots = profiled_window.plots
    traffic = plots.traffic
    lo = dict(zip(*traffic.series[f"compulsory_{TILED}"], strict=True))
    mid = dict(zip(*traffic.series[f"model_{TILED}"], strict=True))
    hi = dict(zip(*traffic.series[f"noreuse_{TILED}"], strict=True))
    assert lo and all(lo[n] <= mid[n] <= hi[n] for n in lo)
    assert plots.bands[TILED].isVisible()
    ns, measured = traffic.series[f"measured_{NAIVE}"]
    writes = {k.name: k.bytes_written for k in compulsory_cost(AttentionConfig(seq_len=4096),
                                                                 NAIVE).kernels}  # fmt: skip
    counted = sum(
        read + max(write, writes[name]) for name, (read, write, _) in NCU[(4096, NAIVE)].items()
    )
    assert dict(zip(ns, measured, strict=True))[4096] == counted
    legend = traffic.legend_texts()
    assert "measured (hardware counters)" in legend and "model, with the L2 cache" in legend
    text = plots.hover.traffic(LOG_4096, 0)
    assert "measured" in text and "hardware counters" in text
    assert "model (no-reuse bytes ÷ time)" in text and "DRAM" in text


def test_the_strip_chart_shows_the_current_points_samples(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    strip = profiled_window.plots.strip
    qtbot.waitUntil(lambda: not strip.is_empty(), timeout=3000)
    assert strip.shown == NAIVE  # the first algorithm measured at this N
    assert "Hardware counters" in strip.title.text() and "4\u2009096" in strip.title.text()
    xs, ys = strip.dram.getData()
    assert len(xs) and max(y for y in ys if y == y) > 1000  # naive streams GB/s
    strip.choice.setCurrentIndex(strip.choice.findData(TILED_MMA))
    assert strip.shown == TILED_MMA
    profiled_window.controls.set_seq_len(16384)  # the pick is kept at the next N
    profiled_window.plots.flush_model()
    assert strip.shown == TILED_MMA and "16 384" in strip.title.text()


def test_the_strip_chart_says_not_measured_without_samples(qtbot, make_window):
    window = make_window(ProfilingBackend())
    _settled(qtbot, window)
    window.plots.flush_model()
    strip = window.plots.strip
    # Nothing of the run has samples: one line that says so, no empty chart taking room.
    assert strip.is_empty() and strip.plot.isHidden()
    assert "not measured" in strip.title.text() and "Measure bytes" in strip.title.text()
    window.controls.measure_bytes.click()
    store, key = window.measurements.store, window.backend.key
    qtbot.waitUntil(lambda: store.get(window.config, NAIVE, key).traffic != (), timeout=5000)
    _settled(qtbot, window)
    qtbot.waitUntil(lambda: not strip.is_empty(), timeout=3000)
    assert strip.plot.isVisibleTo(window) and not strip.note.isVisible()
    window.controls.measure_bytes.click()  # off: the next point is timed only
    window.controls.set_seq_len(2048)
    _settled(qtbot, window)
    window.plots.flush_model()
    assert strip.is_empty() and strip.note.isVisible() and strip.plot.isVisibleTo(window)
    assert "not measured" in strip.title.text() and "2\u2009048" in strip.title.text()


def test_the_strip_chart_keeps_its_room_for_a_shape_without_samples(qtbot, make_window):
    window = make_window(ProfilingBackend())
    _settled(qtbot, window)
    strip = window.plots.strip
    window.controls.measure_bytes.click()
    qtbot.waitUntil(lambda: not strip.is_empty(), timeout=5000)
    window.controls.measure_bytes.click()  # off: the next shape is timed only
    _settled(qtbot, window)
    placed = [view.geometry() for view in window.plots.views()]
    window.controls.set_config(window.config.with_(heads=window.config.heads * 2))
    _settled(qtbot, window)
    window.plots.flush_model()
    qtbot.wait(50)
    # Nothing of this shape has samples, but some shape shown had: the chart keeps its room,
    # says so, and no plot changed size (a relayout and a full repaint of every plot).
    assert not window.plots.data.any_samples
    assert strip.is_empty() and strip.plot.isVisibleTo(window) and strip.note.isVisible()
    assert [view.geometry() for view in window.plots.views()] == placed


def test_arriving_results_are_drawn_with_their_legends_and_layout_in_one_turn(
    qtbot, make_window, window_settings
):
    window_settings.setValue("controls/seq_len", 4096)
    window = make_window(ProfilingBackend())
    _settled(qtbot, window)
    window.plots.flush_model()
    qtbot.wait(50)
    traffic = window.plots.traffic
    assert "measured (hardware counters)" not in traffic.legend_texts()
    s = window.state.value
    result = profiled_result(4096, NAIVE)
    assert result.config == s.config
    window.measurements.store.add(result, s.backend.key, s.run_budget)
    window.measurements.refresh()  # what a result's arrival runs; no event is processed after it
    # Legends, ranges and the layout they change are settled before the window next paints:
    # one repaint for the results, not a second one for their legends and plot sizes.
    assert window.plots.strip.plot.isVisibleTo(window)
    assert "measured (hardware counters)" in traffic.legend_texts()
    for plot in window.plots.plots:
        legend, data = plot.legend.sceneBoundingRect(), plot.plotItem.vb.sceneBoundingRect()
        assert legend.bottom() <= data.top() + 1, (plot.objectName(), legend, data)
    placed = [view.geometry() for view in window.plots.views()]
    left = _LayoutRequests(window.plots)
    QApplication.instance().installEventFilter(left)
    try:
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)  # only those already due
    finally:
        QApplication.instance().removeEventFilter(left)
    assert left.seen == [], "the plots' layout left for a later turn (and a second repaint)"
    assert [view.geometry() for view in window.plots.views()] == placed


class _LayoutRequests(QObject):
    """Notes the layout requests, while it filters the application, of the plots panel's
    widgets and of the plots' own items (legends, axes: pyqtgraph lays them out by request)."""

    def __init__(self, panel: QWidget) -> None:
        super().__init__()
        self.panel = panel
        self.seen: list[str] = []

    def eventFilter(self, watched, event) -> bool:  # type: ignore[no-untyped-def]
        if event.type() == QEvent.Type.LayoutRequest:
            widget = isinstance(watched, QWidget)
            if not widget or watched is self.panel or self.panel.isAncestorOf(watched):
                self.seen.append(type(watched).__name__)
        return False


# ------------------------------------------------------------------------- memory, time


def test_the_memory_plot_shows_the_pool_and_the_device_peak(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    plots = profiled_window.plots
    memory = plots.memory
    pool = dict(zip(*memory.series[f"measured_{NAIVE}"], strict=True))
    device = dict(zip(*memory.series[f"device_{NAIVE}"], strict=True))
    assert device[4096] == pool[4096] + (8 << 20)
    legend = memory.legend_texts()
    assert "measured" in legend and "measured, whole GPU" in legend
    text = plots.hover.memory(LOG_4096, 0)
    assert "(CuPy pool)" in text and "(whole device)" in text and "cuBLAS workspace" in text


def test_the_time_plot_shows_the_spread_of_the_repeats(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    plots = profiled_window.plots
    ns, medians = plots.timing.series[f"spread_{TILED}"]
    lows, highs = plots.timing.spreads[f"spread_{TILED}"]
    assert ns == [4096, 16384]
    for lo, mid, hi in zip(lows, medians, highs, strict=True):
        assert lo == pytest.approx(mid * 0.97) and hi == pytest.approx(mid * 1.03)
    assert plots.timing.items[f"spread_{TILED}"].isVisible()
    text = plots.hover.timing(LOG_4096, 0)
    assert "median of 5" in text and "fastest" in text and "slowest" in text


def test_a_result_arriving_redraws_only_its_own_algorithms_series(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    plots = profiled_window.plots
    series = {a: list(rs) for a, rs in plots.data.measured.items()}
    drawn = []
    for plot in (plots.memory, plots.timing, plots.traffic, plots.roofline):
        original = plot.set_series
        plot.set_series = lambda name, *a, _f=original, **k: (drawn.append(name), _f(name, *a, **k))
    plots.set_measured(series)  # the same results again: nothing of theirs is redrawn
    assert not [n for n in drawn if n.endswith((NAIVE, TILED, TILED_MMA))]
    series[TILED] = series[TILED][:1]  # one algorithm's series changes
    plots.set_measured(series)
    redrawn = {n for n in drawn if n.endswith((NAIVE, TILED, TILED_MMA))}
    assert redrawn and all(n.endswith(TILED) for n in redrawn), redrawn
    assert plots.timing.series[f"measured_{TILED}"][0] == [4096]


def test_re_measure_and_clear_results_go_through_the_store(qtbot, make_window):
    backend = ProfilingBackend()
    window = make_window(backend)
    _settled(qtbot, window)
    runs = backend.runs_for(window.config.seq_len)
    assert window.window_actions.remeasure_action.isEnabled()
    window.window_actions.remeasure_action.trigger()
    qtbot.waitUntil(
        lambda: (
            backend.runs_for(window.config.seq_len) == runs + len(window.state.value.algorithms)
        ),
        timeout=5000,
    )
    window.controls.set_seq_len(2048)
    _settled(qtbot, window)
    assert window.measurements.store.get(
        window.config.with_(seq_len=1024), NAIVE, window.backend.key
    )
    window.window_actions.clear_results_action.trigger()
    assert (
        window.measurements.store.get(window.config.with_(seq_len=1024), NAIVE, window.backend.key)
        is None
    )
    store, key = window.measurements.store, window.backend.key
    qtbot.waitUntil(lambda: store.get(window.config, NAIVE, key) is not None, timeout=5000)
    memory = window.plots.memory
    qtbot.waitUntil(lambda: memory.series[f"measured_{NAIVE}"][0] == [2048], timeout=5000)


def test_a_recorded_run_is_not_measured_again(qtbot, profiled_window):
    before = len(profiled_window.measurements.store)
    assert profiled_window.measurements.remeasure() == 0
    profiled_window.measurements.clear_results()
    assert len(profiled_window.measurements.store) == before
    assert "recorded" in profiled_window.statusBar().currentMessage()


# ------------------------------------------------------------------------- units


def test_capacities_and_device_bytes_both_say_decimal_gb(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    plots = profiled_window.plots
    assert plots.roofline.title == "Roofline: H200 SXM"  # short: it fits at 1280×800
    assert shown_text(plots.roofline.toolTip()) == "Roofline: H200 SXM, 141 GB"  # datasheet
    # the capacity every wall is drawn at: the datasheet's, not the 150,109,880,320 B reported
    assert plots.budget_line.text == "this device: 141 GB"
    combo = profiled_window.controls.budget
    texts = [combo.itemText(i) for i in range(combo.count())]
    assert "H200 SXM, 141 GB" in texts and not any("GiB" in t for t in texts)
    spin = profiled_window.controls.custom_gb
    assert spin.suffix().strip() == "GB" and "10⁹" in spin.toolTip()


# ------------------------------------------------------------------------- ranges


def _zoom_like_the_user(plot, factor=0.5) -> None:
    vb = plot.plotItem.vb
    vb.scaleBy((factor, factor))
    vb.sigRangeChangedManually.emit(vb.state["mouseEnabled"])


def test_a_zoomed_plot_keeps_the_users_view_until_a_double_click_resets_it(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    memory = profiled_window.plots.memory
    fitted = memory.plotItem.vb.viewRange()
    _zoom_like_the_user(memory)
    zoomed = memory.plotItem.vb.viewRange()
    assert (
        memory.user_zoomed
        and zoomed != fitted
        and "double-click" in memory.plotItem.titleLabel.text
    )
    profiled_window.plots.fit()  # new data: the user's view stays
    assert memory.plotItem.vb.viewRange() == zoomed
    qtbot.mouseDClick(
        memory.viewport(), Qt.MouseButton.LeftButton, pos=memory.viewport().rect().center()
    )
    assert not memory.user_zoomed
    (x0, x1), (y0, y1) = memory.plotItem.vb.viewRange()
    assert [x0, x1, y0, y1] == pytest.approx([*fitted[0], *fitted[1]])
    _zoom_like_the_user(profiled_window.plots.timing)
    profiled_window.window_actions.reset_plots_action.trigger()
    assert not profiled_window.plots.timing.user_zoomed


def test_the_cursor_pans_a_zoomed_plot_back_into_view(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    memory = profiled_window.plots.memory
    vb = memory.plotItem.vb
    vb.setXRange(3.0, 3.3, padding=0)  # 1k to 2k: N = 4096 is off to the right
    vb.sigRangeChangedManually.emit(vb.state["mouseEnabled"])
    profiled_window.controls.set_seq_len(16384)
    (lo, hi), _ = vb.viewRange()
    assert lo <= math.log10(16384) <= hi and memory.user_zoomed
    assert hi - lo == pytest.approx(0.3)  # the user's zoom level is kept


# ------------------------------------------------------------------------- legends, hover


@pytest.mark.parametrize("size", [(1600, 1000), (1280, 800)])
def test_legends_sit_outside_the_data(qtbot, profiled_window, size):
    profiled_window.resize(*size)
    _drawn(qtbot, profiled_window)
    qtbot.wait(50)
    for plot in profiled_window.plots.plots:
        legend, data = plot.legend.sceneBoundingRect(), plot.plotItem.vb.sceneBoundingRect()
        assert plot.legend_texts(), plot.objectName()
        assert legend.bottom() <= data.top() + 1, (plot.objectName(), legend, data)
    label = profiled_window.plots.budget_line.label
    assert label.fill is not None and profiled_window.plots.budget_line.line.zValue() > 10


def test_a_hover_box_stays_inside_the_plot_and_leaves_with_the_mouse(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    plot = profiled_window.plots.timing
    area = plot.plotItem.vb.sceneBoundingRect()
    for corner in (area.bottomRight(), area.topRight(), area.bottomLeft(), area.center()):
        pos = QPointF(
            min(max(corner.x(), area.left() + 2), area.right() - 2),
            min(max(corner.y(), area.top() + 2), area.bottom() - 2),
        )
        plot.hover_at(pos)
        assert plot.hover.isVisible()
        box = plot.hover.sceneBoundingRect()
        assert area.adjusted(-1, -1, 1, 1).contains(box), (corner, box, area)
    QApplication.sendEvent(plot, QEvent(QEvent.Type.Leave))
    assert not plot.hover.isVisible()


def test_legends_can_be_hidden_and_the_key_names_every_series(qtbot, profiled_window):
    _drawn(qtbot, profiled_window)
    plots = profiled_window.plots
    assert plots.key.texts()[:3] == ["naive", "tiled (readable)", "tiled (tensor cores)"]
    assert "naive: softmax" in plots.key.texts()  # the kernels' colours on the time plot
    memory = plots.memory
    before = memory.plotItem.vb.sceneBoundingRect().height()
    profiled_window.window_actions.legends_action.trigger()  # View ▸ Plot legends: off
    qtbot.waitUntil(lambda: memory.plotItem.vb.sceneBoundingRect().height() > before, timeout=2000)
    assert not memory.legend.isVisible()
    assert plots.key.isVisible()
    profiled_window.window_actions.legends_action.trigger()
    qtbot.waitUntil(lambda: memory.legend.isVisible(), timeout=2000)


@pytest.mark.gpu
def test_measure_bytes_on_the_gpu_puts_measured_points_on_the_roofline(qtbot, make_window):
    """On a CUDA device: the toggle samples the real counters (or says once why it cannot)."""
    from gpu.backend_factory import create_backend

    window = make_window(factory=lambda name: create_backend("cuda"), seq_len=4096)
    assert window.backend.info.backend == "cuda"
    # The first results on a device wait for NVRTC to compile every kernel they run (seconds
    # each on a cold cache, more with other GPU work in the same session): wait for the
    # results, with a bound that only catches a hang.
    _settled(qtbot, window, timeout_ms=GPU_HANG_MS)
    window.controls.measure_bytes.click()
    store, key = window.measurements.store, window.backend.key

    def sampled_or_refused() -> bool:
        result = store.get(window.config, NAIVE, key)
        return bool(window.state.value.bytes_refused) or bool(result and result.traffic)

    qtbot.waitUntil(sampled_or_refused, timeout=GPU_HANG_MS)
    _settled(qtbot, window, timeout_ms=GPU_HANG_MS)
    if window.state.value.bytes_refused:
        pytest.skip(f"counters not readable here: {window.state.value.bytes_refused}")
    window.plots.flush_model()
    window.plots.flush_visibility()
    roofline = window.plots.roofline
    qtbot.waitUntil(lambda: bool(roofline.series[f"at_measured_{NAIVE}"][0]), timeout=10000)
    result = store.get(window.config, NAIVE, key)
    (x,) = roofline.series[f"at_measured_{NAIVE}"][0]
    assert x == pytest.approx(result.flops / counted_dram_bytes(result))
    assert "DRAM bytes measured by the hardware counters" in window.explain.plain_text()


# ------------------------------------------------------------------------- roof labels


def test_the_roof_labels_are_placed_once_per_turn_however_often_the_view_moves(
    qtbot, make_window, monkeypatch
):
    from app.measure.roof_lines import RoofLines

    placed = []
    place = RoofLines.place_labels
    monkeypatch.setattr(RoofLines, "place_labels", lambda self: (placed.append(1), place(self)))
    window = make_window()
    plots = window.plots
    plots.flush_model()
    qtbot.wait(20)
    hbm = plots.roof_labels["hbm"]
    assert hbm.isVisible()
    placed.clear()
    vb = plots.roofline.plotItem.vb
    (x0, x1), (y0, y1) = vb.viewRange()
    for k in range(1, 6):  # a state change re-ranges the roofline several times in one turn
        vb.setRange(xRange=(x0 - 0.1 * k, x1), yRange=(y0 - 0.1 * k, y1), padding=0)
    assert placed == []  # nothing placed on the caller's stack: the view may move again
    before = hbm.pos()
    # What this turn posted, and nothing later turns (timers) bring.
    QApplication.sendPostedEvents()
    assert placed == [1]  # once, before the next paint
    assert hbm.pos() != before  # along the roof as it is drawn now
    rect = plots.roof_label_rect("hbm")  # a test (or an export) asks: placed now
    assert vb.sceneBoundingRect().intersects(rect)


def _gated_model(window, gate):
    """The plots' model curves wait for `gate` before they are worked out (off the GUI
    thread), whatever the machine's speed: the results of a new shape arrive first."""
    worker = window.plots.model_worker
    submit = worker.submit

    def gated(work, apply, failed=None):
        return submit(lambda: (gate.wait(10), work())[1], apply, failed)

    worker.submit = gated


def test_results_arriving_before_their_model_curves_are_drawn_with_them_in_one_pass(
    qtbot, make_window
):
    import threading

    from app.state.model import cache as model_cache

    window = make_window()
    _settled(qtbot, window)
    window.plots.flush_model()
    # the curves come when the gate opens, however late
    window.measurements.model_wait.setInterval(10_000)
    gate = threading.Event()
    _gated_model(window, gate)
    drawn = []  # (results of the new shape shown, its model curves drawn) at each redraw
    set_measured = window.plots.set_measured

    def watch(series):
        set_measured(series)
        drawn.append((bool(series.get(NAIVE)), window.plots.data.model_ready()))

    window.plots.set_measured = watch
    model_cache.clear()
    window.controls.heads.setValue(window.config.heads + 1)  # a shape not seen before
    _settled(qtbot, window)  # its results are in the store: the curves are still to come
    qtbot.wait(50)
    assert not any(results for results, _ in drawn)  # held for the curves
    assert window.plots.memory.series["measured_naive"] == ([], [])
    gate.set()
    qtbot.waitUntil(lambda: window.plots.data.model_ready(), timeout=10_000)
    assert drawn[-1] == (True, True)  # the results with their curves, in one pass
    assert window.plots.memory.series["measured_naive"][0] == [window.config.seq_len]


def test_results_held_for_model_curves_that_do_not_come_are_drawn_all_the_same(qtbot, make_window):
    import threading

    from app.state.model import cache as model_cache

    window = make_window()
    _settled(qtbot, window)
    window.plots.flush_model()
    gate = threading.Event()  # never opened while the results wait
    _gated_model(window, gate)
    model_cache.clear()
    window.controls.heads.setValue(window.config.heads + 1)
    _settled(qtbot, window)
    measured = window.plots.memory.series
    qtbot.waitUntil(lambda: measured["measured_naive"][0] == [window.config.seq_len])
    assert not window.plots.data.model_ready()  # drawn without them, once the wait ran out
    gate.set()


def test_a_shape_change_clears_the_last_shapes_results_with_its_legends_in_one_step(
    qtbot, make_window
):
    window = make_window()
    _settled(qtbot, window)
    _drawn(qtbot, window)
    plots = window.plots
    assert plots.memory.series["measured_naive"][0] == [window.config.seq_len]
    window.controls.heads.setValue(window.config.heads + 1)  # no event is processed after it
    assert plots.memory.series["measured_naive"] == ([], [])  # not the last shape's results
    assert not plots.fit_part.pending  # legends and ranges with them, not a turn later
