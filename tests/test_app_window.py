"""The main window with pytest-qt: slider → plots, coalescing, responsiveness, settings, errors."""

from __future__ import annotations

import math
import random
import time

import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDialog, QSlider

from app.state.model.cost_model_backend import CostModelBackend
from app.window.backend_control import NO_CUDA_MESSAGE
from gpu.algorithms import NAIVE, TILED
from gpu.backends.backend import BackendUnavailable
from gpu.backends.cpu_backend import CpuBackend
from gpu.config import AttentionConfig
from gpu.files.recording import Recording, save_recording
from tests.stall_clock import stall_clock

PLOT_NAMES = ("memoryPlot", "timingPlot", "trafficPlot")


def plots(window):
    return {name: window.findChild(pg.PlotWidget, name) for name in PLOT_NAMES}


def slider(window) -> QSlider:
    return window.findChild(QSlider, "seqLenSlider")


def measured(window, n: int) -> bool:
    """Whether every plot shows a measured point (or its marker) at N = n."""
    p = plots(window)
    return (
        n in p["memoryPlot"].series["measured_naive"][0]
        and n in p["memoryPlot"].series["measured_tiled"][0]
        and n in p["timingPlot"].series["measured_naive"][0]
        and n in p["timingPlot"].series["current"][0]
        and bool(window.plots.roofline.series["current"][0])
    )


def assert_cursor_at(qtbot, window, n: int) -> None:
    """Every cursor at N = n at once; the markers follow in the same turn of the event loop,
    before the window repaints."""
    for name, plot in plots(window).items():
        assert plot.cursor_n == n, name
        assert plot.cursor.value() == pytest.approx(math.log10(n)), name
    traffic = plots(window)["trafficPlot"]
    qtbot.waitUntil(lambda: traffic.series["current"][0] == [n, n], timeout=1000)


def test_window_has_the_named_widgets_and_tooltips_on_every_control(qtbot, make_window):
    window = make_window()
    for name in (*PLOT_NAMES, "seqLenSlider", "runStatus"):
        assert window.findChild(object, name) is not None, name
    # The animation tab is filled right after the first paint (or says why it cannot be).
    qtbot.waitUntil(
        lambda: (
            window.findChild(object, "tileAnimation") is not None
            or window.findChild(object, "tileAnimationPlaceholder") is not None
        ),
        timeout=5000,
    )
    from PySide6.QtWidgets import QAbstractButton, QAbstractSpinBox, QComboBox

    for kind in (QSlider, QAbstractSpinBox, QComboBox, QAbstractButton):
        for w in window.controls.findChildren(kind):
            assert w.toolTip(), w.objectName() or w.text()


def test_dragging_the_slider_moves_every_cursor_and_measures_the_new_n(qtbot, make_window):
    window = make_window()
    s = slider(window)
    target = window.controls.seq_scale.index(4096)
    s.setSliderDown(True)
    for pos in range(s.value(), target + 1):
        s.setSliderPosition(pos)
    s.setSliderDown(False)
    assert window.config.seq_len == 4096
    assert_cursor_at(qtbot, window, 4096)
    qtbot.waitUntil(lambda: measured(window, 4096), timeout=5000)


def test_arrow_keys_on_the_slider_step_n_and_update_the_plots(qtbot, make_window):
    window = make_window()
    s = slider(window)
    s.setFocus()
    scale = window.controls.seq_scale
    i = scale.index(1024)
    qtbot.keyClick(s, Qt.Key.Key_Right)
    assert window.config.seq_len == scale[i + 1]
    qtbot.keyClick(s, Qt.Key.Key_Right)
    assert window.config.seq_len == scale[i + 2]
    assert_cursor_at(qtbot, window, scale[i + 2])
    qtbot.waitUntil(lambda: measured(window, scale[i + 2]), timeout=5000)
    qtbot.keyClick(s, Qt.Key.Key_Left)
    assert window.config.seq_len == scale[i + 1]
    assert_cursor_at(qtbot, window, scale[i + 1])


def test_typing_an_exact_n_moves_the_slider_to_the_nearest_step(qtbot, make_window):
    window = make_window()
    spin = window.controls.seq_spin
    spin.setValue(3000)
    assert window.config.seq_len == 3000
    assert window.controls.seq_scale[slider(window).value()] == 3072
    qtbot.waitUntil(lambda: measured(window, 3000), timeout=5000)


def test_spamming_200_slider_values_ends_on_the_last_with_no_backlog(qtbot, make_window):
    backend = CostModelBackend(delay_s=0.01)
    window = make_window(backend)
    s = slider(window)
    rng = random.Random(7)
    positions = [rng.randrange(s.minimum(), s.maximum() - 8) for _ in range(199)]
    positions.append(window.controls.seq_scale.index(8192))
    calls_before = len(backend.calls)
    for i, pos in enumerate(positions):
        s.setValue(pos)
        if i % 10 == 0:
            qtbot.wait(1)  # let some results land mid-spam, as a real drag would
    assert window.config.seq_len == 8192
    qtbot.waitUntil(lambda: measured(window, 8192), timeout=10000)
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=5000)
    runs = len(backend.calls) - calls_before
    assert runs < 100, f"{runs} runs for 200 slider values: no coalescing"
    settled = len(backend.calls)
    qtbot.wait(150)
    assert len(backend.calls) == settled  # nothing left in a queue
    assert backend.runs_for(8192) == 2  # naive and tiled, once each


def test_a_slow_backend_leaves_the_gui_thread_responsive(qtbot, make_window, wait_started):
    backend = CostModelBackend(delay_s=0.25)
    window = make_window(backend)
    wait_started(window)  # what follows is not the window's own start-up
    gaps = []  # ms, not counting the GUI thread's waits for a CPU other processes held
    clock = stall_clock()
    last = [clock()]

    def tick():
        now = clock()
        gaps.append((now - last[0]) * 1e3)
        last[0] = now

    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(tick)
    timer.start()
    s = slider(window)
    start = time.monotonic()
    step = 0
    while time.monotonic() - start < 1.5:  # keep the runner busy with fresh requests
        s.setValue(s.minimum() + step % 12)
        step += 1
        qtbot.wait(40)
    window.sweep()
    qtbot.wait(400)
    timer.stop()
    assert len(backend.calls) >= 4  # measurements really were running meanwhile
    assert max(gaps) < 100, f"GUI thread stalled for {max(gaps)} ms"


def test_settings_persist_across_a_restart(qtbot, make_window):
    window = make_window()
    c = window.controls
    c.set_seq_len(8192)
    c.heads.setValue(16)
    c.head_dim.setValue(128)
    c.batch.setValue(2)
    c.dtype.setCurrentIndex(c.dtype.findData("bf16"))
    c.causal.setChecked(True)
    c.block_m.setCurrentIndex(c.block_m.findData(128))
    c.block_n.setCurrentIndex(c.block_n.findData(32))
    c.algo_checks[NAIVE].setChecked(False)
    c.set_budget_preset("RTX 4090 24 GB")
    window.apply_theme("light")
    window.explain_dock.hide()
    window.close()

    again = make_window()
    assert again.config == AttentionConfig(
        seq_len=8192,
        heads=16,
        head_dim=128,
        batch=2,
        dtype="bf16",
        causal=True,
        block_m=128,
        block_n=32,
    )
    assert again.controls.algorithms() == (TILED,)
    assert again.controls.budget_state().preset == "RTX 4090 24 GB"
    assert again.theme == "light"
    assert again.explain_dock.isHidden()
    assert slider(again).value() == again.controls.seq_scale.index(8192)


def test_a_config_error_from_the_backend_shows_next_to_its_field(qtbot, make_window):
    window = make_window(CostModelBackend(bad_head_dims=(48,)))
    window.controls.head_dim.setValue(48)
    qtbot.waitUntil(lambda: bool(window.controls.error_text("head_dim")), timeout=5000)
    assert "head_dim" in window.controls.error_text("head_dim")
    assert window.banner.isHidden()
    window.controls.head_dim.setValue(64)
    assert window.controls.error_text("head_dim") == ""


def test_an_oom_is_a_marked_point_not_an_error(qtbot, make_window):
    window = make_window()
    window.controls.set_budget_preset("RTX 3060 12 GB")
    window.controls.set_seq_len(32768)
    memory = plots(window)["memoryPlot"]
    qtbot.waitUntil(lambda: 32768 in memory.series["oom"][0], timeout=5000)
    assert 32768 in memory.series["measured_tiled"][0]
    assert window.banner.isHidden()


def test_auto_without_cuda_says_it_uses_the_cpu_backend(make_window):
    window = make_window(CostModelBackend(name="cpu"))
    assert window.readouts.backend.text() == NO_CUDA_MESSAGE


def test_a_backend_that_cannot_start_shows_one_banner_and_falls_back_to_cpu(qtbot, make_window):
    cpu = CostModelBackend(name="cpu")

    def factory(name):
        if name == "cuda":
            raise BackendUnavailable("cuda backend unavailable: no device")
        return cpu

    window = make_window(factory=factory)
    window.controls.set_backend_choice("cuda")
    qtbot.waitUntil(lambda: not window.banner.isHidden(), timeout=5000)
    assert "no device" in window.banner.message
    qtbot.waitUntil(lambda: window.backend is not None and window.backend.info.backend == "cpu")
    assert window.controls.backend_choice() == "cpu"
    window.banner.dismiss()
    assert window.banner.isHidden()


def test_shortcuts_export_dialog_and_explain_toggle(qtbot, make_window):
    window = make_window()
    qtbot.keyClick(window, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    dialog = window.findChild(QDialog, "exportDialog")  # what it exports: tests/test_exports.py
    assert dialog is not None and dialog.isVisible()
    dialog.reject()
    shown = not window.explain_dock.isHidden()
    qtbot.keyClick(window, Qt.Key.Key_F1)
    assert window.explain_dock.isHidden() == shown
    n = window.config.seq_len
    window.plots.setFocus()
    qtbot.keyClick(window.plots, Qt.Key.Key_Right)
    assert window.config.seq_len > n
    with qtbot.waitSignal(window.runner.sweepFinished, timeout=5000):
        qtbot.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)


def test_a_recorded_run_replays_and_the_slider_snaps_to_its_n(qtbot, make_window, tmp_path):
    fake = CostModelBackend(device="NVIDIA H200")
    base = AttentionConfig(seq_len=512)
    results = tuple(
        fake.run(base.with_(seq_len=n), a) for n in (512, 2048, 8192) for a in (NAIVE, TILED)
    )
    path = tmp_path / "h200.json"
    save_recording(Recording(fake.device_info(), results, {}), path)
    window = make_window(open_path=str(path))
    assert window.backend.info.backend == "replay"
    assert window.controls.seq_scale == (512, 2048, 8192)
    memory = plots(window)["memoryPlot"]
    # The recorded results reach the plots in the window's next turn after the open.
    qtbot.waitUntil(lambda: memory.series["measured_naive"][0] == [512, 2048, 8192], timeout=10_000)
    window.controls.seq_spin.setValue(3000)
    assert window.config.seq_len == 2048
    assert window.readouts.backend.text().startswith("backend: replay of ")


def test_the_cpu_backend_sweeps_small_n_end_to_end(qtbot, make_window):
    window = make_window(CpuBackend(), seq_len=256)
    with qtbot.waitSignal(window.runner.sweepFinished, timeout=20000):
        window.sweep()
    memory = plots(window)["memoryPlot"]
    qtbot.waitUntil(lambda: memory.series["measured_tiled"][0] == [128, 256], timeout=10000)
    assert memory.series["measured_naive"][0] == [128, 256]
    assert all(y > 0 for y in plots(window)["timingPlot"].series["measured_tiled"][1])


def test_hovering_a_plot_shows_the_values_at_the_nearest_n(qtbot, make_window):
    window = make_window()
    memory = plots(window)["memoryPlot"]
    qtbot.waitUntil(lambda: measured(window, 1024), timeout=5000)
    vb = memory.plotItem.vb
    y = sum(vb.viewRange()[1]) / 2
    scene_pos = vb.mapViewToScene(pg.Point(math.log10(1024), y))
    memory.scene().sigMouseMoved.emit(scene_pos)
    qtbot.waitUntil(memory.hover.isVisible, timeout=2000)
    text = memory.hover.toPlainText()
    assert "N = 1\u2009024" in text
    assert "naive: model 56.6 MB, measured" in text


def test_switching_theme_restyles_the_plots_in_place(make_window):
    window = make_window()
    memory = plots(window)["memoryPlot"]
    item = memory.items["model_naive"]
    window.dark_action.setChecked(False)
    assert window.theme == "light"
    assert memory.items["model_naive"] is item  # updated, not rebuilt
    assert item.opts["pen"].color().name() == "#d55e00"
    window.dark_action.setChecked(True)
    assert item.opts["pen"].color().name() == "#ff8a5b"


def test_the_tiles_tab_shows_the_animation_for_the_current_config(qtbot, make_window):
    window = make_window()
    placeholder = lambda: window.findChild(object, "tileAnimationPlaceholder")  # noqa: E731
    qtbot.waitUntil(lambda: window.animation is not None or placeholder() is not None)
    if window.animation is None:
        pytest.skip(placeholder().text())
    calls = []
    original = window.animation.set_config
    window.animation.set_config = lambda config: (calls.append(config), original(config))
    window.controls.set_seq_len(2048)
    assert calls == []  # hidden tab: not updated on every slider move
    window.tabs.setCurrentIndex(1)
    assert calls and calls[-1].seq_len == 2048


def test_every_algorithm_a_backend_lists_gets_a_checkbox_and_a_series(qtbot, make_window):
    from gpu.algorithms import ALGORITHMS, runs_pass

    window = make_window(CostModelBackend(algorithms=tuple(ALGORITHMS)))
    assert tuple(window.controls.algo_checks) == tuple(ALGORITHMS)
    forward = [a for a in ALGORITHMS if runs_pass(a, "forward")]  # the pass shown
    assert window.controls.algorithms() == tuple(forward)  # those written for it are asked
    window.controls.set_seq_len(2048)
    memory = plots(window)["memoryPlot"]
    qtbot.waitUntil(
        lambda: all(2048 in memory.series[f"measured_{a}"][0] for a in forward), timeout=5000
    )
    assert all(memory.items[f"measured_{a}"].isVisible() for a in forward)


def test_the_ring_tabs_plots_are_built_before_its_first_show_and_the_rooms_frozen(
    qtbot, make_window
):
    import gc

    gc.unfreeze()  # whatever an earlier window froze
    window = make_window()
    qtbot.waitUntil(lambda: window.ring_panel.plots is not None, timeout=10_000)
    assert not window.ring_panel.isVisible()  # built ahead of the first show
    assert gc.get_freeze_count() > 10_000  # the rooms' objects are out of the collector's walks
    window.tabs.setCurrentWidget(window.ring_panel)
    assert window.ring_panel.plots.isVisible()
