"""The decode pass in the window: the Pass control's inference decode with its KV heads, new
tokens and what-fits controls (each change validated inline), the memory plot's cache against
the prefill's N² and the what-fits wall, the bandwidth plot as shares of the datasheet and of a
measured copy, the Tiles tab's decode lanes, Help, the shipped H100 recording replayed through
File ▸ Open without a GPU, and the CPU backend measuring decode."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.controls.decode_controls import NO_PRESET
from app.measure.explain import explain_html
from app.state.decode_fit import prefill_of
from app.state.model.cost_model_backend import CostModelBackend
from app.state.point_inputs import PointInputs
from app.state.units import fmt_int
from gpu.algorithms import NAIVE, SPLIT_KV, TILED
from gpu.backends.cpu_backend import CpuBackend
from gpu.config import DECODE, FORWARD, PASSES, AttentionConfig
from gpu.model.costmodel import algorithm_cost
from gpu.model.decode_cost import kv_cache_bytes
from gpu.model.kv_fit import what_fits

HANG_MS = 60_000
SHIPPED = Path(__file__).resolve().parents[1] / "resources" / "recorded" / "h100_decode.json"


def _backend() -> CostModelBackend:
    return CostModelBackend(algorithms=(NAIVE, TILED, SPLIT_KV), passes=PASSES)


def _choose(combo, data) -> None:  # type: ignore[no-untyped-def]
    combo.setCurrentIndex(combo.findData(data))


def _decode_window(make_window, backend=None):  # type: ignore[no-untyped-def]
    window = make_window(backend or _backend())
    _choose(window.controls.pass_combo, DECODE)
    return window


def _plot(window, name: str) -> pg.PlotWidget:
    return window.findChild(pg.PlotWidget, name)


def _at(plot, item: str, n: int) -> float | None:
    xs, ys = plot.series[item]
    return ys[list(xs).index(n)] if n in xs else None


def _explain(window) -> str:
    return explain_html(PointInputs.from_state(window.state.value, window._results_at_n()))


# --------------------------------------------------------------------------------------------
# The controls


def test_the_pass_control_offers_inference_decode_with_kv_heads_and_new_tokens(qtbot, make_window):
    window = make_window(_backend())
    c, rows = window.controls, window.controls.decode_rows
    assert not rows.kv_heads.isVisibleTo(c) and not rows.new_tokens.isVisibleTo(c)
    _choose(c.pass_combo, DECODE)
    assert c.pass_combo.currentText() == "inference decode"
    assert rows.kv_heads.isVisibleTo(c) and rows.new_tokens.isVisibleTo(c)
    rows.kv_heads.setValue(4)
    rows.new_tokens.setValue(8)
    assert (window.config.kv_heads, window.config.new_tokens) == (4, 8)
    assert window.config.label() == "B=1 h=12/4 N=1024 d=64 fp16, inference decode q=8"
    # the slider is the cache length N: the pass stays decode as it moves
    c.slider.setValue(c.slider.value() + 4)
    assert window.config.is_decode and window.config.seq_len == 2048
    # only the algorithms written for decode are asked for and drawn; the others say why
    assert window.state.value.algorithms == (NAIVE, SPLIT_KV)
    assert not c.algo_checks[TILED].isEnabled()
    assert "Not written for the inference decode pass" in c.algo_checks[TILED].toolTip()
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=HANG_MS)
    assert not c.error_text("pass") and not c.error_text("algorithms")


def test_a_kv_head_count_that_does_not_divide_the_heads_is_refused_inline(qtbot, make_window):
    window = _decode_window(make_window)
    c, rows = window.controls, window.controls.decode_rows
    rows.kv_heads.setValue(5)
    assert "kv_heads = 5 is not allowed: a divisor of heads = 12 (1, 2, 3, 4, 6, 12)" in (
        c.error_text("kv_heads")
    )
    assert window.config.kv_heads is None  # the last valid config stays
    rows.kv_heads.setValue(3)
    assert not c.error_text("kv_heads") and window.config.kv_heads == 3
    c.heads.setValue(16)  # 3 no longer divides the heads: said by the KV heads field
    assert "a divisor of heads = 16 (1, 2, 4, 8, 16)" in c.error_text("kv_heads")
    assert window.config.heads == 12
    # a typed value past the field's range is refused with the range, the value kept
    edit = rows.new_tokens.lineEdit()
    edit.selectAll()
    QTest.keyClicks(edit, "9")
    QTest.keyClick(edit, Qt.Key.Key_Return)
    assert "new_tokens = 9 is not allowed: an integer from 1 to 8; kept 1" in c.error_text(
        "new_tokens"
    )


def test_leaving_decode_hides_its_rows_and_gives_the_prefill_its_mask_back(qtbot, make_window):
    window = make_window(_backend())
    c = window.controls
    c.causal.setChecked(True)
    _choose(c.pass_combo, DECODE)
    assert window.config.is_decode and not window.config.causal  # decode has no mask
    assert not c.causal.isEnabled() and c.causal.isChecked()  # kept for the prefill
    c.decode_rows.kv_heads.setValue(4)
    _choose(c.pass_combo, FORWARD)
    assert window.config.causal and window.config.kv_heads is None
    assert window.config.new_tokens == 1 and not c.decode_rows.kv_heads.isVisibleTo(c)


def test_picking_a_model_preset_sets_the_shape_of_its_attention(qtbot, make_window):
    window = _decode_window(make_window)
    model = window.controls.decode_rows.model
    _choose(model, "llama-3-70b")
    c = window.config
    assert (c.heads, c.kv_head_count, c.head_dim) == (64, 8, 128)
    _choose(model, "falcon-7b")
    c = window.config
    assert (c.heads, c.kv_head_count, c.head_dim) == (71, 1, 64)
    _choose(model, "llama-2-7b")
    assert window.config.kv_heads is None and window.config.heads == 32  # MHA
    window.controls.head_dim.setValue(64)  # no preset has this shape
    assert model.currentData() == NO_PRESET


def test_the_decode_controls_persist_across_a_restart(qtbot, make_window):
    window = _decode_window(make_window)
    rows = window.controls.decode_rows
    _choose(rows.model, "llama-3-8b")
    rows.new_tokens.setValue(2)
    _choose(rows.weights, "fp8")
    _choose(rows.kv, "fp8")
    window.close()
    again = make_window(_backend())
    c = again.config
    assert c.is_decode and (c.heads, c.kv_heads, c.head_dim, c.new_tokens) == (32, 8, 128, 2)
    assert (again.state.value.fit_weights, again.state.value.fit_kv) == ("fp8", "fp8")
    assert again.controls.decode_rows.kv.currentData() == "fp8"


# --------------------------------------------------------------------------------------------
# The plots


def _llama_on_an_h100(window) -> None:  # type: ignore[no-untyped-def]
    c = window.controls
    _choose(c.decode_rows.model, "llama-3-8b")
    c.batch.setValue(8)
    c.set_budget_preset("H100 SXM 80 GB")
    window.plots.flush_model()
    window.plots.flush_visibility()


def test_the_memory_plot_draws_the_cache_beside_the_prefill_n_squared(qtbot, make_window):
    window = _decode_window(make_window)
    _llama_on_an_h100(window)
    memory, config = _plot(window, "memoryPlot"), window.config
    for n in (4096, 8192):
        prefill = algorithm_cost(prefill_of(config.with_(seq_len=n)), NAIVE).peak_bytes
        assert _at(memory, "prefill_naive", n) == prefill
        cache = _at(memory, "model_tiled", n)  # split-KV's peak: the cache and a little
        assert (
            kv_cache_bytes(config.with_(seq_len=n))
            <= cache
            < 1.01 * kv_cache_bytes(config.with_(seq_len=n))
        )
    grows = _at(memory, "prefill_naive", 8192) / _at(memory, "prefill_naive", 4096)
    assert 3.8 < grows < 4.0  # N² for the prefill (and Q, K, V, O), where the cache doubles
    assert memory.items["prefill_naive"].isVisible()
    assert window.plots.growth_label.textItem.toPlainText() == "×2 per doubling of N"
    assert window.plots.timing.title.startswith("Decode step time")


def test_the_what_fits_wall_stands_where_the_explain_panes_formula_says(qtbot, make_window):
    window = _decode_window(make_window)
    _llama_on_an_h100(window)
    memory, decode = _plot(window, "memoryPlot"), window.plots.decode
    fit = what_fits("llama-3-8b", 80 * 10**9, "fp16", "fp16")
    assert fit.max_context(8) == 60_977  # worked out by hand in tests/test_kv_fit.py
    assert decode.wall.line.isVisible()
    assert decode.wall.line.value() == math.log10(60_977)
    assert fmt_int(60_977) in decode.wall.text
    assert _at(memory, "fit_total", 32768) == fit.weight_bytes + 32768 * 8 * fit.kv_bytes_per_token
    assert memory.items["fit_total"].isVisible()
    html = _explain(window)
    assert f"<b>{fmt_int(60_977)}</b> at batch 8" in html and "the memory plot's wall" in html
    hover = memory.hover_provider(math.log10(32768), 0.0)
    assert f"fits N ≤ {fmt_int(60_977)}" in hover and "KV cache, one layer: 1.07 GB" in hover
    # fp8 weights and an fp8 cache: the wall moves, and the pane says the same number
    _choose(window.controls.decode_rows.weights, "fp8")
    _choose(window.controls.decode_rows.kv, "fp8")
    fp8 = what_fits("llama-3-8b", 80 * 10**9, "fp8", "fp8").max_context(8)
    assert fp8 > 2 * 60_977
    assert decode.wall.line.value() == math.log10(fp8)
    assert f"<b>{fmt_int(fp8)}</b> at batch 8" in _explain(window)
    # Llama-3-70B's fp16 weights exceed 80 GB: no wall, and the pane says nothing fits
    _choose(window.controls.decode_rows.weights, "fp16")
    _choose(window.controls.decode_rows.model, "llama-3-70b")
    assert not decode.wall.line.isVisible()
    assert "nothing fits" in _explain(window)


def test_the_bandwidth_plot_takes_the_traffic_plots_place_for_decode(qtbot, make_window):
    window = make_window(_backend())
    traffic, bandwidth = _plot(window, "trafficPlot"), _plot(window, "bandwidthPlot")
    assert traffic.isVisible() and not bandwidth.isVisible()
    _choose(window.controls.pass_combo, DECODE)
    assert bandwidth.isVisible() and not traffic.isVisible()
    config = window.config

    def measured() -> float | None:
        return _at(bandwidth, "measured_split_kv", config.seq_len)

    qtbot.waitUntil(lambda: measured() is not None, timeout=HANG_MS)
    result = window.store.get(config, SPLIT_KV, window.backend.key, window.state.value.run_budget)
    assert measured() == kv_cache_bytes(config) / (result.total_ms * 1e-3)
    window.plots.flush_visibility()
    roof = window.state.value.roof_device.bandwidth_bytes_s
    best = max(measured(), _at(bandwidth, "measured_naive", config.seq_len) or 0)
    assert f"{best / roof:.0%} of the datasheet" in bandwidth.cursor.text  # ours, the faster
    assert "HBM, datasheet" in window.plots.decode.roof_line.text
    window.plots.show_only(None)  # "all plots" keeps the swap
    assert bandwidth.isVisible() and not traffic.isVisible()
    _choose(window.controls.pass_combo, FORWARD)
    assert traffic.isVisible() and not bandwidth.isVisible()


def test_a_recorded_copy_bandwidth_is_drawn_and_each_run_is_a_share_of_it(
    qtbot, make_window, tmp_path
):
    data = json.loads(SHIPPED.read_text())
    data["device"]["details"]["copy_bandwidth_bytes_s"] = 3.0e12
    path = tmp_path / "with_copy.json"
    path.write_text(json.dumps(data))
    window = make_window(open_path=str(path))
    decode = window.plots.decode
    assert decode.copy == 3.0e12
    assert decode.copy_line.line.isVisible()
    assert decode.copy_line.text == "copy, measured: 3.00 TB/s (90% of the datasheet)"
    window.plots.flush_visibility()
    assert "of the copy" in _plot(window, "bandwidthPlot").cursor.text
    window.settle_texts()
    assert "of the copy measured on this device (3.00 TB/s)" in _explain(window)


def test_the_decode_plots_export_as_a_table_with_their_units(qtbot, make_window):
    from app.export.plot_tables import plots_csv, read_plots_csv

    window = make_window(open_path=str(SHIPPED))
    window.plots.flush_model()
    window.plots.flush_visibility()
    text = plots_csv(window.plots)
    assert "bandwidthPlot/measured_split_kv y: KV cache read per step ÷ time [B/s]" in text
    assert "memoryPlot/fit_total y: peak memory [B]" in text
    xs, ys = window.plots.bandwidth.series["measured_split_kv"]
    assert read_plots_csv(text)[("bandwidthPlot", "measured_split_kv")] == (list(xs), list(ys))


def test_the_shipped_h100_decode_recording_replays_through_file_open(qtbot, make_window):
    window = make_window(_backend())
    assert window.file_menu.open_file(str(SHIPPED))
    qtbot.waitUntil(lambda: window.state.value.replay, timeout=HANG_MS)
    qtbot.waitUntil(lambda: window.results_drawn, timeout=HANG_MS)
    c = window.config
    assert c.is_decode and (c.heads, c.kv_heads, c.head_dim, c.batch) == (32, 8, 128, 8)
    controls = window.controls
    assert controls.pass_combo.currentData() == DECODE
    assert controls.decode_rows.kv_heads.value() == 8
    assert controls.decode_rows.model.currentData() == "llama-3-8b"
    assert window.state.value.algorithms == (NAIVE, SPLIT_KV)
    timing, bandwidth = _plot(window, "timingPlot"), _plot(window, "bandwidthPlot")
    ns = [1024 << k for k in range(8)]
    qtbot.waitUntil(lambda: timing.series["measured_split_kv"][0] == ns, timeout=HANG_MS)
    assert timing.series["measured_naive"][0] == ns
    assert bandwidth.series["measured_split_kv"][0] == ns
    recorded = window.store.get(c.with_(seq_len=131072), SPLIT_KV, window.backend.key, None)
    rate = _at(bandwidth, "measured_split_kv", 131072)
    assert rate == kv_cache_bytes(c.with_(seq_len=131072)) / (recorded.total_ms * 1e-3)
    assert 1e12 < rate < 3.35e12  # a long cache is bandwidth-bound, below the datasheet
    assert _at(bandwidth, "measured_split_kv", 1024) < rate / 1.5  # a short one is not
    assert "reference_sdpa_cudnn" in window.plots.decode.peers or bandwidth.series.get(
        "reference_sdpa_cudnn"
    )
    # the roofline: decode sits far left, about G = 4 FLOP per byte for GQA 32/8
    roofline = _plot(window, "rooflinePlot")
    qtbot.waitUntil(lambda: bool(roofline.series["at_measured_split_kv"][0]), timeout=HANG_MS)
    assert all(2 < x < 6 for x in roofline.series["at_measured_split_kv"][0])
    for field in ("pass", "algorithms", "kv_heads", "new_tokens", "seq_len"):
        assert not controls.error_text(field)


def test_the_cpu_backend_measures_decode_in_the_window(qtbot, make_window):
    window = make_window(CpuBackend(), seq_len=512)
    _choose(window.controls.pass_combo, DECODE)
    window.controls.decode_rows.kv_heads.setValue(4)
    timing = _plot(window, "timingPlot")
    for a in (NAIVE, SPLIT_KV):
        qtbot.waitUntil(lambda a=a: _at(timing, f"measured_{a}", 512) is not None, timeout=HANG_MS)
    result = window.store.get(window.config, SPLIT_KV, window.backend.key, None)
    assert result.backend == "cpu" and result.config.kv_heads == 4 and result.total_ms > 0
    assert [k.name for k in result.kernel_times] == ["decode_split"]
    assert _at(_plot(window, "bandwidthPlot"), "measured_split_kv", 512) is not None


# --------------------------------------------------------------------------------------------
# The Tiles tab and Help


def test_the_tiles_tab_plays_the_decode_lanes_for_a_decode_config(qtbot, make_window):
    window = _decode_window(make_window)
    window.tabs.setCurrentWidget(window.animation)
    animation = window.animation
    qtbot.waitUntil(lambda: animation.mode == animation.DECODE_MODE, timeout=HANG_MS)
    lanes = animation.decode_lane
    lanes.flush()
    assert lanes.lanes is not None and lanes.lanes.config == window.config
    assert [lane.algorithm for lane in lanes.lanes.lanes] == [NAIVE, SPLIT_KV]
    assert "splits" in lanes.title.text() and "resident slots" in lanes.title.text()
    animation.step_forward()
    assert lanes.step == 1 and lanes.t > 0
    animation.toggle_play()
    assert lanes.playing
    animation.toggle_play()
    assert not lanes.playing
    lanes.seek_time(lanes.total_seconds)
    assert "done" in lanes.captions.text()
    _choose(window.controls.pass_combo, FORWARD)
    qtbot.waitUntil(lambda: animation.mode == animation.MODEL_MODE, timeout=HANG_MS)
    assert not animation.mode_tabs.isTabEnabled(animation.DECODE_MODE)


def test_the_decode_lanes_paint_every_shape_from_start_to_end(qtbot):
    from app.animation.decode_lane import DecodeLaneView
    from gpu.model.costmodel import GPUS

    view = DecodeLaneView()
    qtbot.addWidget(view)
    view.resize(900, 600)
    shapes = (
        AttentionConfig(pass_=DECODE, seq_len=1, heads=32, kv_heads=8, head_dim=128),
        AttentionConfig(pass_=DECODE, seq_len=17, heads=12, head_dim=64, batch=1024),  # 1 split
        AttentionConfig(pass_=DECODE, seq_len=1 << 20, heads=8, kv_heads=1, head_dim=128),
    )
    for config in shapes:
        view.set_config(config, GPUS["H100 SXM 80 GB"])
        view.flush()
        for share in (0.0, 0.5, 1.0):
            view.seek_time(share * view.total_seconds)
            before = view.canvas.paints
            view.canvas.grab()
            assert view.canvas.paints == before + 1


def test_help_explains_the_kv_cache_wall(qtbot, make_window):
    window = make_window(_backend())
    text = window.help_menu.show_lesson().text.toPlainText()
    for words in ("KV cache", "what fits", "memory-bound even when fused", "split-KV", "GQA"):
        assert words in text
