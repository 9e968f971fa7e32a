"""The first screen a newcomer sees: whole at every window size from 1280×800 up."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QSize
from PySide6.QtGui import QColor, QPalette

from app.kit.theme import LIGHT, QT_COLORS
from app.state.model.cache import cost
from app.state.units import fmt_bytes, fmt_int
from gpu.algorithms import (
    ALGORITHMS,
    NAIVE,
    RING,
    SPLIT_KV,
    TILED,
    TILED_MMA,
    TILED_WGMMA,
    TILED_WS,
)
from gpu.backends.cpu_backend import CpuBackend
from gpu.backends.model_backend import CostModelBackend
from gpu.model.costmodel import naive_oom_seq_len
from tests.clipping import clipped

ROOT = Path(__file__).resolve().parent.parent


class SlowBackend(CostModelBackend):
    """Answers nothing until released: the first screen before any result."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def run(self, config, algorithm, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.release.wait(10)
        return super().run(config, algorithm, *args, **kwargs)


SIZES = [(1280, 800), (1920, 1080)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_control_title_or_status_text_is_clipped_from_1280x800_up(
    make_window, qtbot, wait_started, size
):
    window = make_window()
    window.resize(*size)
    qtbot.waitUntil(lambda: window.size() == QSize(*size), timeout=2000)
    wait_started(window)
    window.plots.flush_model()
    qtbot.wait(50)
    problems = clipped(window)
    assert problems == [], "\n".join(problems)


class _SmallScreen:
    """A 1280×800 laptop's screen, less a 32 px panel at the top: smaller than the default
    window size."""

    def availableGeometry(self):
        from PySide6.QtCore import QRect

        return QRect(0, 32, 1280, 768)


def test_the_window_is_clamped_to_a_screen_smaller_than_its_default_size(
    make_window, qtbot, monkeypatch
):
    from PySide6.QtCore import QRect

    from app.window.main_window import DEFAULT_SIZE, MainWindow

    monkeypatch.setattr(MainWindow, "screen", lambda self: _SmallScreen())
    assert DEFAULT_SIZE[0] > 1280 and DEFAULT_SIZE[1] > 768  # the default would hang off it
    window = make_window()
    area = QRect(0, 32, 1280, 768)
    assert window.width() <= area.width() and window.height() <= area.height()
    assert area.contains(window.frameGeometry()), window.frameGeometry()
    window.move(900, 600)  # a restored position off to the lower right: moved back inside
    window.fit_to_screen()
    assert area.contains(window.frameGeometry()), window.frameGeometry()


# ------------------------------------------------------------------ the default view

SHIPPED = ROOT / "resources" / "recorded" / "h200_sweep.json"


@pytest.fixture
def first_run(window_settings):
    """Settings of a first launch: nothing ticked by the user, "Every series" never touched."""
    window_settings.remove("controls/algorithms")
    window_settings.remove("view/every_series")
    return window_settings


def test_a_first_run_on_the_cpu_shows_naive_and_the_fused_kernel_it_has(
    make_window, first_run, qtbot
):
    window = make_window(CpuBackend(), seq_len=256)
    assert window.state.value.algorithms == (NAIVE, TILED)  # the CPU's only fused kernel
    assert window.plots.key.texts() == ["naive", "tiled (readable)"]  # one row, no kernels


def test_a_first_replay_shows_naive_the_fastest_fused_kernel_and_one_peer(
    make_window, first_run, qtbot
):
    window = make_window(open_path=str(SHIPPED))
    qtbot.waitUntil(lambda: bool(window.plots.reference_series()), timeout=5000)
    assert window.state.value.algorithms == (NAIVE, TILED_WS)
    assert list(window.plots.reference_series()) == ["sdpa_cudnn"]
    key = window.plots.key.texts()
    assert len(key) == 3 and not any("gemm" in k for k in key), key


def test_every_series_is_one_click_away_and_back(make_window, first_run, qtbot):
    window = make_window(open_path=str(SHIPPED))
    qtbot.waitUntil(lambda: bool(window.plots.reference_series()), timeout=5000)
    window.plots.every_button.click()
    qtbot.waitUntil(lambda: len(window.plots.reference_series()) == 3, timeout=5000)
    assert set(window.state.value.algorithms) >= {NAIVE, TILED, TILED_MMA, TILED_WGMMA, TILED_WS}
    window.plots.flush_visibility()
    assert "naive: softmax" in window.plots.key.texts()
    window.plots.every_button.click()
    qtbot.waitUntil(lambda: len(window.plots.reference_series()) == 1, timeout=5000)
    assert window.state.value.algorithms == (NAIVE, TILED_WS)


def test_the_default_choice_is_not_saved_so_it_follows_the_next_backend(
    make_window, first_run, qtbot
):
    window = make_window(CpuBackend(), seq_len=256)
    window.save_settings()
    assert first_run.value("controls/algorithms") is None
    window.controls.algo_checks[NAIVE].click()  # the user's own pick is kept
    window.save_settings()
    # (the split-KV kernel, the decode pass's, is in the default view too)
    assert first_run.value("controls/algorithms") == f"{TILED},{RING},{SPLIT_KV}"


def test_the_tiles_tab_plays_naive_against_the_fastest_fused_kernel(make_window, first_run, qtbot):
    window = make_window(open_path=str(SHIPPED))
    qtbot.waitUntil(lambda: window.animation is not None, timeout=5000)
    assert window.animation.algorithms == (NAIVE, TILED_WS)
    assert window.animation.lanes_box.currentData() == TILED_WS
    # The lanes run on a GPU's clock: on the CPU (whose fused path is the readable algorithm,
    # slower than naive on a GPU), the fastest kernel the animation models there.
    cpu = make_window(CpuBackend(), seq_len=256)
    qtbot.waitUntil(lambda: cpu.animation is not None, timeout=5000)
    assert cpu.animation.algorithms == (NAIVE, TILED_WS)


def test_a_lane_the_user_picks_stays_when_the_backend_changes(make_window, qtbot):
    window = make_window(seq_len=1024)
    qtbot.waitUntil(lambda: window.animation is not None, timeout=5000)
    box = window.animation.lanes_box
    box.setCurrentIndex(box.findData(TILED_MMA))
    window.state.update(available=(NAIVE, TILED, TILED_WS))
    assert window.animation.algorithms == (NAIVE, TILED_MMA)


# ------------------------------------------------------------------ the roofline's ranges


def _view(plot):
    (x0, x1), (y0, y1) = plot.plotItem.vb.viewRange()
    return x0, x1, y0, y1


def test_before_any_result_the_roofline_shows_the_ridge_and_three_decades(make_window, qtbot):
    slow = SlowBackend()
    window = make_window(backend=slow, seq_len=1024)  # nothing measured yet
    window.plots.flush_model()
    assert not window.plots.roofline.series["current"][0]
    r = window.plots.roofline
    x0, x1, y0, y1 = _view(r)
    gpu = window.state.value.target_gpu
    assert x0 < math.log10(gpu.ridge_flops_per_byte) < x1
    assert y1 - y0 >= 3  # the roofs slope, not stand upright
    assert y0 < math.log10(gpu.fp16_tensor_flops) < y1
    slow.release.set()


def test_the_roofline_follows_the_slider_to_keep_every_marker_in_sight(make_window, qtbot):
    window = make_window(seq_len=1024)
    window.plots.flush_model()
    r = window.plots.roofline
    for n in (128, 57344, 131072, 256):
        window.controls.set_seq_len(n)
        window.plots.flush_model()
        x0, x1, y0, y1 = _view(r)
        for name in ("bounds", "current"):
            xs, ys = r.series[name]
            for x, y in zip(xs, ys, strict=True):
                assert x0 <= math.log10(x) <= x1 and y0 <= math.log10(y) <= y1, (n, name, x, y)
        assert r.series["bounds"][0], n  # there were markers to keep in sight


# ------------------------------------------------------------------ the guided first run


def _lesson(window):
    strip = window.lesson
    strip.flush()
    return strip


def test_a_first_run_opens_the_lesson_on_naives_n_squared_memory(make_window, first_run, qtbot):
    window = make_window(CpuBackend(), seq_len=1024)
    strip = _lesson(window)
    assert strip.isVisible()
    qtbot.waitUntil(lambda: bool(strip.steps), timeout=5000)
    assert strip.title.text() == "1/4 · Naive's memory grows as N²"
    config = window.config
    at_n, at_2n = (cost(config.with_(seq_len=n), NAIVE).peak_bytes for n in (1024, 2048))
    text = strip.text.text()
    assert fmt_bytes(at_n) in text and fmt_bytes(at_2n) in text
    assert f"×{at_2n / at_n:.1f} for one doubling" in text


def test_the_memory_plot_says_four_times_per_doubling_beside_naives_curve(make_window, qtbot):
    window = make_window(seq_len=1024)
    window.plots.flush_model()
    label = window.plots.growth_label
    assert label.isVisible() and label.toPlainText() == "×4 per doubling of N"
    peak = {n: cost(window.config.with_(seq_len=n), NAIVE).peak_bytes for n in (32768, 65536)}
    assert 3.95 < peak[65536] / peak[32768] <= 4.0  # what the note says, once S and P dominate
    window.controls.set_checked_algorithms((TILED,))
    window.plots.flush_model()
    window.plots.flush_visibility()
    assert not label.isVisible()  # no naive curve, no note about it


def test_next_walks_the_four_points_each_with_its_view(make_window, first_run, qtbot):
    window = make_window(open_path=str(SHIPPED), seq_len=16384)
    qtbot.waitUntil(lambda: window.state.value.replay and window.config.seq_len == 16384)
    strip = _lesson(window)
    qtbot.waitUntil(lambda: bool(strip.steps) and "16" in strip.text.text(), timeout=5000)
    strip.next.click()  # 2: the wall
    wall = naive_oom_seq_len(window.config, window.state.value.budget.line_bytes)
    # The steps follow the state within a pause of the slider: the recording's budget may
    # reach them just after the first texts did.
    qtbot.waitUntil(lambda: strip.title.text().endswith("Where naive hits the wall"), timeout=5000)
    assert f"N = {fmt_int(wall)}" in strip.text.text()
    assert window.tabs.currentWidget() is window.plots
    # the slider went to the first recorded N past the wall: naive's out-of-memory point
    assert window.config.seq_len == min(n for n in window.state.value.scale if n >= wall)
    strip.next.click()  # 3: memory- against compute-bound, from the recording's counters
    qtbot.waitUntil(lambda: window.config.seq_len == 16384, timeout=5000)
    # The step says "(model)" until the recorded results at this N reach the strip (the
    # window hands results on in its next turn), then "(measured)".
    qtbot.waitUntil(lambda: "(measured)" in strip.text.text(), timeout=10_000)
    text = strip.text.text()
    assert "(measured)" in text and "memory-bound" in text and "compute-bound" in text
    naive, fused = text.split("Naive: ")[1].split("warp-specialized")[:2]
    assert "memory-bound" in naive and "compute-bound" in fused
    strip.next.click()  # 4: the animation
    assert strip.title.text().endswith("What the animation shows")
    assert window.tabs.currentWidget() is window.animation
    strip.back.click()
    assert window.tabs.currentWidget() is window.plots
    strip.next.click()
    strip.next.click()  # "Done"
    assert not strip.isVisible()


def test_a_dismissed_lesson_stays_closed_and_help_opens_it_again(make_window, first_run, qtbot):
    window = make_window(CpuBackend(), seq_len=256)
    _lesson(window).close_button.click()
    assert not window.lesson.isVisible()
    window.close()
    again = make_window(CpuBackend(), seq_len=256)
    assert not again.lesson.isVisible()
    again.help_menu.tour_action.trigger()
    assert again.lesson.isVisible() and again.lesson.step == 0


# ------------------------------------------------------------------ a live theme switch


def _lightness(image, rect) -> float:
    values = [
        image.pixelColor(x, y).lightnessF()
        for x in range(rect.left(), rect.right(), 3)
        for y in range(rect.top(), rect.bottom(), 3)
    ]
    return sum(values) / len(values)


def test_a_live_switch_to_light_restyles_the_key_and_the_tiles_toolbars(make_window, qtbot):
    window = make_window(seq_len=1024)
    qtbot.waitUntil(lambda: window.animation is not None, timeout=5000)
    anim = window.animation
    window.tabs.setCurrentWidget(anim)
    window.apply_theme("light")
    qtbot.wait(50)
    light = QColor(QT_COLORS["light"][0])
    for widget in (anim.lanes_box, anim.mode_tabs, anim.play_button, anim.softmax_panel):
        assert widget.palette().color(QPalette.ColorRole.Window) == light, widget.objectName()
    toolbar = anim.play_button.parentWidget()
    image = toolbar.grab().toImage()
    assert _lightness(image, image.rect()) > 0.6  # painted light, not the dark it started in
    window.tabs.setCurrentWidget(window.plots)
    qtbot.wait(50)
    key = window.plots.key
    assert key.palette().color(QPalette.ColorRole.Window) == light
    assert _lightness(key.grab().toImage(), key.rect()) > 0.6
    for plot in window.plots.plots:  # every legend row in the light theme's text colour
        for _, label in plot.legend.items:
            assert label.opts["color"] in (LIGHT.foreground, QColor(LIGHT.foreground)), plot


# ------------------------------------------------------------------ smaller things


def test_every_lane_fits_at_the_canvas_minimum_that_readme_and_dialog_state(qtbot):
    from app.animation.widget import FUSED, TileAnimationWidget
    from app.export.animation_export import canvas_minimum_size
    from app.window.file_menu import animation_limits
    from gpu.config import AttentionConfig

    w, h = canvas_minimum_size()
    for algo in FUSED:
        widget = TileAnimationWidget(config=AttentionConfig(seq_len=4096), algorithms=(NAIVE, algo))
        qtbot.addWidget(widget)
        widget.flush()
        for frac in (0.0, 0.004, 0.3, 0.7, 1.0):
            widget.seek_fraction(frac)
            assert widget.canvas_problems(QSize(w, h)) == [], (algo, frac)
    said = f"{w}×{h}"
    assert said in animation_limits()
    assert f"never smaller than the canvas's {said}" in (ROOT / "docs" / "LIMITS.md").read_text()


@pytest.mark.parametrize("size", [*SIZES, (1600, 1000)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_exponential_roof_is_named_in_plain_words_clear_of_the_hbm_roof(
    make_window, qtbot, size
):
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QPolygonF

    from app.plotting.label_placement import segment_hits_rect
    from gpu.model.roofline import HBM, L2, XU, roofs

    window = make_window(open_path=str(SHIPPED), seq_len=16384)
    window.resize(*size)
    qtbot.waitUntil(
        lambda: window.state.value.replay and XU in window.plots.roofs.flat, timeout=10000
    )
    window.plots.flush_model()
    qtbot.wait(50)
    plots = window.plots
    r, label, hbm = plots.roofline, plots.roof_labels[XU], plots.roof_labels[HBM]
    exp_per_s = roofs(plots.data.gpu)[XU].peak
    assert label.toPlainText() == f"exponentials {exp_per_s / 1e12:.3g} trillion/s"
    assert "Texp" not in label.toPlainText() and "4d" not in label.toPlainText()
    vb = r.plotItem.vb
    corner = vb.mapSceneToView(vb.sceneBoundingRect().bottomRight())  # no marker there
    hover = plots.hover.roofline(corner.x(), corner.y())
    assert "one exponential per score" in hover and "256 FLOPs" in hover  # d = 64: 4·d
    if size == (1920, 1080):
        assert label.isVisible()  # room beside the tensor cores' label at this size
    # the L2 roof's label is words: no marker symbol a reader would take for a data point
    l2 = plots.roof_labels[L2].toPlainText()
    assert l2.startswith("L2 ") and l2.endswith(" nominal") and "◇" not in l2
    if not label.isVisible():
        return  # a plot too small for it says it on hover instead of covering another label
    rect = plots.roof_label_rect(XU)
    assert vb.sceneBoundingRect().contains(rect)
    # against its own line (just above or just below), never stacked away from it
    xs, ys = r.series[f"roof_{XU}"]
    line_y = vb.mapViewToScene(QPointF(math.log10(xs[-1]), math.log10(ys[0]))).y()
    assert min(abs(rect.bottom() - line_y), abs(rect.top() - line_y)) <= 3, (rect, line_y)
    hbm.updateTransform(force=True)
    assert not hbm.mapToScene(hbm.boundingRect()).intersects(QPolygonF(rect))
    for other in (n for n, item in plots.roof_labels.items() if n != XU and item.isVisible()):
        shape = plots.roof_labels[other].mapToScene(plots.roof_labels[other].boundingRect())
        assert not shape.intersects(QPolygonF(rect)), other
    xs, ys = r.series[f"roof_{HBM}"]
    ends = [
        vb.mapViewToScene(QPointF(math.log10(x), math.log10(y)))
        for x, y in zip(xs, ys, strict=True)
    ]
    assert not segment_hits_rect(*ends, rect)  # nor does it lie on the HBM line


# ------------------------------------------------------------------ Devices = 4


def test_devices_four_says_only_the_ring_runs_and_draws_no_unlabelled_curve(make_window, qtbot):
    from gpu.ring.backend import RingBackend

    window = make_window(factory=lambda name: CpuBackend(), seq_len=1024)
    window.controls.devices.set_devices(4)
    qtbot.waitUntil(
        lambda: window.backend is not None and isinstance(window.backend.backend, RingBackend),
        timeout=20000,
    )
    assert window.state.value.algorithms == (RING,)
    window.explain.set_inputs(window.explain._inputs, now=True)
    qtbot.waitUntil(lambda: "only the ring runs" in window.explain.plain_text(), timeout=5000)
    assert "Devices = 4: only the ring runs" in window.explain.plain_text()
    window.plots.flush_model()
    window.plots.flush_visibility()
    memory = window.plots.memory
    drawn = [n for n, item in memory.items.items() if item.isVisible() and memory.series[n][0]]
    assert "model_tiled" not in drawn and "model_naive" not in drawn, drawn
    assert window.plots.key.texts() == [ALGORITHMS[RING].label]  # every curve under its key


def test_the_ring_tab_at_one_device_says_each_thing_once_and_counts_devices_whole(
    make_window, qtbot
):
    window = make_window(seq_len=1024)
    panel = window.ring_panel
    window.tabs.setCurrentWidget(panel)
    qtbot.wait(100)
    assert panel.split_label.text() and panel.caption.text()
    assert panel.split_label.text() != panel.caption.text()
    axis = panel.plots.memory_plot.getAxis("bottom")
    assert axis.autoSIPrefix is False
    axis.setRange(0, 0.004)  # a narrow range: still no "(x0.001)" beside the name
    assert "x0.001" not in axis.labelString() and "×" not in axis.labelString()


def test_the_replayed_naive_n256_device_peak_says_what_it_holds_beyond_the_pool(make_window, qtbot):
    window = make_window(open_path=str(SHIPPED), seq_len=16384)
    qtbot.waitUntil(lambda: bool(window.plots.data.by_n[NAIVE].get(256)), timeout=10000)
    window.plots.flush_model()
    recorded = window.plots.data.by_n[NAIVE][256]
    assert recorded.device_peak_bytes > 10 * recorded.peak_bytes  # the point above the curve
    text = window.plots.hover.memory(math.log10(256), 0)
    extra = recorded.device_peak_bytes - recorded.peak_bytes
    assert f"{fmt_bytes(recorded.device_peak_bytes)} (whole device)" in text
    assert f"whole device: {fmt_bytes(extra)} more than the pool's" in text
    assert "cuBLAS workspace and kernel modules, loaded on first use" in text
    assert f"{fmt_bytes(recorded.device_used_bytes)} were in use" in text  # the context too
    later = window.plots.hover.memory(math.log10(4096), 0)
    assert "more than the pool" not in later  # where the two peaks agree, no such note


def test_explain_gives_no_roofline_row_to_a_run_that_ran_out_of_memory(capsys):
    import json

    import main

    assert main.main(["explain", "--open", str(SHIPPED), "--seq", "65536", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert NAIVE not in out["algorithms"] and TILED_WS in out["algorithms"]
    assert [o["algorithm"] for o in out["out_of_memory"]] == [NAIVE]
    assert main.main(["explain", "--open", str(SHIPPED), "--seq", "65536"]) == 0
    text = capsys.readouterr().out
    assert "naive: out of memory at N = 65536" in text
    assert not any(line.split()[:1] == [NAIVE] for line in text.splitlines())


def test_render_says_nothing_of_the_offscreen_platforms_size_hints(tmp_path):
    import os
    import subprocess
    import sys

    out = tmp_path / "shot.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "render", "--backend", "replay", "--seq", "4096",
         "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.exists()
    assert "propagateSizeHints" not in done.stderr


def test_render_filters_only_that_one_offscreen_line_every_other_qt_message_shows(capfd):
    from PySide6.QtCore import qInstallMessageHandler, qWarning

    from app.launch import OFFSCREEN_CHATTER, quiet_offscreen_chatter

    previous = quiet_offscreen_chatter()
    try:
        qWarning(OFFSCREEN_CHATTER)
        qWarning("QPainter::begin: Paint device returned engine == 0")
        qWarning(OFFSCREEN_CHATTER + " (and something else)")
    finally:
        qInstallMessageHandler(previous)
    err = capfd.readouterr().err.splitlines()
    assert err == [
        "QPainter::begin: Paint device returned engine == 0",
        OFFSCREEN_CHATTER + " (and something else)",
    ]


# ------------------------------------------------------------------ CPU timings


def test_cpu_times_keep_each_kernels_spread_for_the_time_plots_bars():
    from gpu.backends.backend import RunOptions
    from gpu.config import AttentionConfig

    result = CpuBackend().run(AttentionConfig(seq_len=128, heads=2), NAIVE, RunOptions(repeats=5))
    for k in result.kernel_times:
        assert k.count == 5 and k.min_ms is not None and k.min_ms <= k.ms <= k.max_ms


def test_a_time_slower_than_a_larger_ns_is_out_of_line():
    from app.state.timing_outliers import out_of_line
    from gpu.config import AttentionConfig
    from gpu.results import KernelTime, RunResult

    def at(n, ms):
        return RunResult(
            config=AttentionConfig(seq_len=n), algorithm=NAIVE, backend="cpu", device="CPU",
            kernel_times=(KernelTime("gemm_qk", ms),),
        )  # fmt: skip

    series = [at(256, 20.0), at(384, 146.0), at(512, 30.0), at(1024, 710.0), at(2048, 400.0)]
    assert [r.config.seq_len for r in out_of_line(series)] == [384, 1024]
    assert out_of_line([at(256, 10.0), at(512, 10.2), at(1024, 40.0)]) == []  # within 5 %


def test_a_sweep_measures_its_out_of_line_points_once_more(make_window, qtbot, monkeypatch):
    from dataclasses import replace

    from gpu.results import KernelTime

    window = make_window(seq_len=256)
    s = window.state.value
    fake = CostModelBackend()
    small, large = (fake.run(s.config.with_(seq_len=n), NAIVE) for n in (128, 256))
    for r, ms in ((small, 50.0), (large, 1.0)):  # 128 slower than 256: out of line
        window.measurements.store.add(
            replace(r, kernel_times=(KernelTime("gemm_qk", ms),)), s.backend.key
        )
    queued = []
    monkeypatch.setattr(window.runner, "start_sweep", lambda items, *a: queued.extend(items))
    window.measurements.on_sweep_finished(False)
    assert queued == [(s.config.with_(seq_len=128), NAIVE)]
    window.measurements.on_sweep_finished(False)
    assert len(queued) == 1  # once: a point still out of line is left as measured


def test_the_first_paint_on_the_cpu_shows_its_own_roofs_and_the_first_results(
    make_window, first_run, qtbot
):
    window = make_window(CpuBackend(), seq_len=256)
    s = window.state.value
    qtbot.waitUntil(
        lambda: all(
            window.measurements.store.get(s.config, a, s.backend.key, s.run_budget)
            for a in (NAIVE, TILED)
        ),
        timeout=60_000,
    )
    window.measurements.refresh()
    window.plots.flush_model()
    r = window.plots.roofline
    assert "this CPU" in r.toolTip() and r.title == "Roofline: this CPU"
    cpu = window.state.value.roof_device
    assert window.plots.data.gpu == cpu  # the roofs drawn are this CPU's
    xs, ys = r.series["current"]
    assert len(xs) == 2  # naive's and the fused kernel's first results
    x0, x1, y0, y1 = _view(r)
    for x, y in zip(xs, ys, strict=True):
        assert x0 <= math.log10(x) <= x1 and y0 <= math.log10(y) <= y1
    assert x0 < math.log10(cpu.ridge_flops_per_byte) < x1  # the ridge in sight
    assert y1 - y0 >= 3
    assert clipped(window) == []


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_two_roof_labels_of_the_recorded_h200_cover_each_other(make_window, qtbot, size):
    from PySide6.QtGui import QPolygonF

    from gpu.model.roofline import XU

    window = make_window(open_path=str(SHIPPED), seq_len=16384)
    window.resize(*size)
    qtbot.waitUntil(
        lambda: window.state.value.replay and XU in window.plots.roofs.flat, timeout=10000
    )
    window.plots.flush_model()
    qtbot.wait(50)
    plots = window.plots
    shown = {n: item for n, item in plots.roof_labels.items() if item.isVisible()}
    # A small plot leaves some out (its hover names them), never the two that judge the lesson.
    needed = {"hbm", "tensor"} if size == (1280, 800) else {"hbm", "l2", "tensor", "mma_sync"}
    assert needed <= set(shown), sorted(shown)
    shapes = {}
    for name, item in shown.items():
        item.updateTransform(force=True)
        shapes[name] = QPolygonF(item.mapToScene(item.boundingRect()))
    names = sorted(shapes)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    overlaps = [(a, b) for a, b in pairs if shapes[a].intersects(shapes[b])]
    assert overlaps == []
