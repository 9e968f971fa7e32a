"""The first five minutes on a machine without a GPU: the first start shows the recorded GPU run
(labelled as replayed, with its device and date) and measuring on this CPU is one click away;
the backend is the first control; the status never speaks of a backend that is gone."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QScrollArea

from app.state.model.cost_model_backend import CostModelBackend
from app.state.recorded_run import shipped_recording
from tests.conftest import HANG_MS


@pytest.fixture
def empty_settings(tmp_path):
    """A first start: no settings file yet."""
    return QSettings(str(tmp_path / "first.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def start_window(qtbot, monkeypatch):
    """start(settings, cuda_possible, factory_backends) -> (window, asked): a shown window on
    `settings`; `asked` lists the backends the window asked the factory for."""
    from app.window import main_window

    def start(settings, cuda_possible=False, backend=None):
        monkeypatch.setattr(main_window, "cuda_possible", lambda: cuda_possible, raising=False)
        asked: list[str] = []

        def factory(name):
            asked.append(name)
            return backend if backend is not None else CostModelBackend(name="cpu")

        window = main_window.MainWindow(backend_factory=factory, settings=settings)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        qtbot.waitUntil(lambda: window.backend is not None, timeout=HANG_MS)
        return window, asked

    return start


def test_a_first_start_without_cuda_replays_the_shipped_gpu_recording(
    start_window, empty_settings, qtbot
):
    assert shipped_recording() is not None
    window, asked = start_window(empty_settings, cuda_possible=False)
    s = window.state.value
    assert s.replay and s.recorded_path.endswith("h200_sweep.json")
    assert asked == []  # nothing was measured on the CPU first
    qtbot.waitUntil(lambda: "H200" in window.run_status.text(), timeout=HANG_MS)
    status = window.run_status.text()
    assert status == "Replayed: H200, 2026-12-01", status
    button = window.controls.measure_here
    assert button.isVisible() and button.text() == "Measure on this CPU"


def test_measure_on_this_cpu_is_one_click_from_the_first_screen(
    start_window, empty_settings, qtbot
):
    window, asked = start_window(empty_settings, cuda_possible=False)
    window.controls.measure_here.click()
    qtbot.waitUntil(
        lambda: window.backend is not None and not window.state.value.replay, timeout=HANG_MS
    )
    assert asked == ["cpu"]
    assert window.controls.backend_choice() == "cpu"
    assert not window.controls.measure_here.isVisible()


def test_a_first_start_where_auto_finds_no_gpu_replays_the_recording(
    start_window, empty_settings, qtbot
):
    window, asked = start_window(empty_settings, cuda_possible=True)
    qtbot.waitUntil(lambda: window.state.value.replay, timeout=HANG_MS)
    assert asked == ["auto"]
    assert window.controls.measure_here.text() == "Measure on this CPU"


def test_a_later_start_keeps_the_backend_the_user_chose(start_window, empty_settings, qtbot):
    empty_settings.setValue("controls/backend", "cpu")
    window, asked = start_window(empty_settings, cuda_possible=False)
    assert not window.state.value.replay and asked == ["cpu"]


def test_the_backend_is_the_first_group_of_the_controls(start_window, empty_settings):
    from PySide6.QtWidgets import QGroupBox

    window, _ = start_window(empty_settings)
    panel = window.controls
    groups = [panel.layout().itemAt(i).widget() for i in range(panel.layout().count())]
    groups = [g for g in groups if isinstance(g, QGroupBox)]
    assert groups[0].title() == "Backend"
    assert groups[0].isAncestorOf(panel.backend)


def test_continue_measuring_on_cuda_is_off_where_there_is_no_cuda_device(
    start_window, empty_settings, qtbot
):
    window, _ = start_window(empty_settings, cuda_possible=False)
    assert window.state.value.replay
    action = window.continue_action
    assert not action.isEnabled()
    assert "no CUDA device" in action.toolTip()


def test_switching_to_the_recording_drops_the_cpus_notes_and_last_run(
    start_window, empty_settings, qtbot
):
    empty_settings.setValue("controls/backend", "cpu")
    window, _ = start_window(empty_settings)
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=HANG_MS)
    config = window.config
    window.notes.add(config, "tiled at N=2048 not run: about 51 s")
    window.run_status.set_text(window._status_text())
    qtbot.waitUntil(lambda: window.readouts.last.text() != "last run: —", timeout=HANG_MS)
    window.controls.set_backend_choice("recorded")
    qtbot.waitUntil(lambda: window.state.value.replay, timeout=HANG_MS)
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=HANG_MS)
    assert "not run" not in window.run_status.text()
    assert window.run_status.text().startswith("Replayed: H200")
    assert window.readouts.last.text() == "last run: —"


# ------------------------------------------------------------------ the wheel


def _wheel(widget, steps: int = -1) -> None:
    """One notch of the wheel over `widget`'s middle (negative: towards the user)."""
    from PySide6.QtCore import QPoint, QPointF, Qt
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    pos = QPointF(widget.rect().center())
    event = QWheelEvent(
        pos,
        QPointF(widget.mapToGlobal(pos.toPoint())),
        QPoint(0, 0),
        QPoint(0, 120 * steps),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, event)


def test_the_wheel_over_an_unfocused_control_changes_nothing(start_window, empty_settings, qtbot):
    empty_settings.setValue("controls/backend", "cpu")
    window, _ = start_window(empty_settings)
    window.resize(1280, 700)  # the panel scrolls
    c = window.controls
    scroll = window.findChild(QScrollArea, "controlsScroll")
    qtbot.waitUntil(lambda: scroll.verticalScrollBar().maximum() > 0, timeout=HANG_MS)
    before = (c.backend_choice(), c.dtype.currentIndex(), c.heads.value(), c.slider.value())
    for widget in (c.backend, c.dtype, c.heads, c.slider):
        assert not widget.hasFocus()
        _wheel(widget)
    assert (c.backend_choice(), c.dtype.currentIndex(), c.heads.value(), c.slider.value()) == before
    # Left to the parents: a real wheel (spontaneous) then scrolls the panel, which the
    # real-display test checks (tests/test_display_first_minutes.py).


def test_the_wheel_changes_a_control_the_user_clicked_into(start_window, empty_settings, qtbot):
    empty_settings.setValue("controls/backend", "cpu")
    window, _ = start_window(empty_settings)
    heads = window.controls.heads
    window.activateWindow()
    heads.setFocus()
    qtbot.waitUntil(heads.hasFocus, timeout=5000)
    _wheel(heads, steps=1)
    assert heads.value() == 13


# ------------------------------------------------------------------ the window on the screen


def test_before_its_frame_is_known_the_window_keeps_room_for_a_title_bar(qtbot):
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QWidget

    from app.window.screen_fit import FRAME_GUESS, fit_to_screen

    widget = QWidget()
    qtbot.addWidget(widget)
    widget.resize(1500, 920)
    fit_to_screen(widget, QRect(0, 0, 1280, 800))
    assert widget.height() + FRAME_GUESS[1] <= 800 and FRAME_GUESS[1] >= 30
    assert widget.width() + FRAME_GUESS[0] <= 1280


def test_the_real_gpu_trace_scrolls_inside_the_window_instead_of_growing_it(
    start_window, empty_settings, qtbot
):
    window, _ = start_window(empty_settings)
    window.resize(1280, 760)
    qtbot.wait(100)
    window.show_view("tileAnimation")
    size = window.size()
    assert size.width() <= 1280 and size.height() <= 760
    animation = window.animation
    animation.set_mode(animation.TRACE_MODE)
    qtbot.waitUntil(lambda: animation.trace_panel.traces != (), timeout=HANG_MS)
    qtbot.wait(100)
    assert window.size() == size
    hint = window.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 760, hint
    assert animation.mode == animation.TRACE_MODE


def test_the_tiles_modes_are_named_in_full(start_window, empty_settings, qtbot):
    window, _ = start_window(empty_settings)
    window.show_view("tileAnimation")
    tabs = window.animation.mode_tabs
    names = [tabs.tabText(i) for i in range(tabs.count())]
    assert names == ["Modeled schedule", "Real GPU trace", "Backward", "Decode"]


# ------------------------------------------------------------------ the lesson


def _cpu_spec(bandwidth: float):
    from gpu.model.cpu_roofs import cpu_spec_from_details

    return cpu_spec_from_details(
        "CPU: test (2 cores)", 25 * 10**9, {"memory_bandwidth_bytes_s": bandwidth}
    )


@pytest.mark.parametrize("bandwidth", [2.8e9, 5.39e9, 19.3e9], ids=lambda b: f"{b / 1e9:g}GBs")
@pytest.mark.parametrize("n", [256, 1024, 8192])
def test_the_bound_step_says_above_the_ridge_exactly_where_it_says_compute_bound(bandwidth, n):
    import re

    from app.state.lesson import bound_step
    from app.state.point_inputs import PointInputs
    from gpu.algorithms import NAIVE, TILED
    from gpu.config import AttentionConfig

    inp = PointInputs(
        AttentionConfig(seq_len=n), (NAIVE, TILED), _cpu_spec(bandwidth), "this CPU", None, ""
    )
    text = bound_step(inp).text
    claims = re.findall(
        r"(above|below) the ridge of [\d.,  ]+: [^,]+, (memory|compute)-bound", text
    )
    assert len(claims) == 2, text  # one per algorithm
    for side, bound in claims:
        assert (side == "above") == (bound == "compute"), text
    assert "CUDA" not in text and "fp32 SIMD units" in text


def test_a_cpus_verdicts_are_said_in_cpu_words():
    from app.state.roof_words import binds_text

    assert binds_text(("fp32",), cpu=True) == "the fp32 SIMD units bind"
    assert binds_text(("fp32",)) == "the fp32 CUDA cores bind"
    assert "CUDA" not in binds_text(("dram", "fp32"), cpu=True)


def test_each_lesson_step_moves_the_slider_to_the_point_it_describes(
    start_window, empty_settings, qtbot
):
    from app.state.lesson import CPU_POINT_N
    from app.state.units import fmt_int

    empty_settings.setValue("controls/backend", "cpu")
    empty_settings.setValue("controls/seq_len", 256)
    window, _ = start_window(empty_settings)
    strip = window.lesson
    window.lesson.open(0)
    qtbot.waitUntil(lambda: bool(strip.steps), timeout=HANG_MS)
    strip.go_to(0)
    qtbot.waitUntil(lambda: window.config.seq_len == CPU_POINT_N, timeout=5000)
    qtbot.waitUntil(lambda: f"N = {fmt_int(CPU_POINT_N)}" in strip.text.text(), timeout=HANG_MS)
    strip.go_next()  # the wall: the slider goes where naive no longer fits in this RAM
    from gpu.model.costmodel import naive_oom_seq_len

    wall = naive_oom_seq_len(window.config, window.state.value.budget.line_bytes)
    qtbot.waitUntil(lambda: window.config.seq_len == wall, timeout=5000)


def test_next_stays_where_it_is_when_it_turns_to_done(start_window, empty_settings, qtbot):
    empty_settings.setValue("controls/backend", "cpu")
    window, _ = start_window(empty_settings)
    strip = window.lesson
    qtbot.waitUntil(lambda: bool(strip.steps), timeout=HANG_MS)
    where = []
    for step in range(4):
        strip.go_to(step)
        qtbot.wait(20)
        where.append((strip.next.geometry(), strip.back.geometry()))
    assert len(set((n.x(), n.width(), b.x()) for n, b in where)) == 1, where


def test_on_the_cpu_the_tiles_tabs_fused_lane_finishes_before_naives(
    start_window, empty_settings, qtbot
):
    from gpu.algorithms import NAIVE

    empty_settings.setValue("controls/backend", "cpu")
    window, _ = start_window(empty_settings)
    window.show_view("tileAnimation")
    animation = window.animation
    qtbot.waitUntil(lambda: animation.algorithms[0] == NAIVE, timeout=HANG_MS)
    animation.flush()
    naive, fused = (animation.player.lane(a) for a in animation.algorithms)
    assert fused.total_time < naive.total_time, (animation.algorithms, fused.total_time)


def test_runs_refused_as_too_long_share_one_short_note():
    from app.window.status import ConfigNotes
    from gpu.config import AttentionConfig

    notes = ConfigNotes()
    config = AttentionConfig(seq_len=8192)
    notes.too_long(config, "naive", 102.0, 20.0)
    notes.too_long(config, "tiled", 48.0, 20.0)
    (text,) = notes.about(config)
    assert text == "Not run, over 20 s here: naive ~1.7 min, tiled ~48 s"
    assert notes.about(config.with_(seq_len=4096)) == []


# ------------------------------------------------------------------ nothing cut at 1280×800


def test_the_first_screen_at_1280x800_shows_every_text_whole(start_window, empty_settings, qtbot):
    from tests.clipping import clipped, elided

    window, _ = start_window(empty_settings)  # the recording, as on a first start
    window.resize(1276, 760)  # 1280×800 less a window manager's frame
    qtbot.wait(100)
    window.plots.flush_model()
    window.lesson.flush()
    qtbot.wait(50)
    assert clipped(window) == [] and elided(window) == [], clipped(window) + elided(window)
    for step in range(4):  # every lesson title whole
        window.lesson.go_to(step)
        window.lesson.flush()
        qtbot.wait(20)
        assert not window.lesson.title.is_elided(), window.lesson.title.text()


def test_two_runs_refused_at_1280x800_fit_the_run_status(start_window, empty_settings, qtbot):
    empty_settings.setValue("controls/backend", "cpu")
    window, _ = start_window(empty_settings)
    window.resize(1276, 760)
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=HANG_MS)
    config = window.config
    window.notes.too_long(config, "naive", 102.0, 20.0)
    window.notes.too_long(config, "tiled", 48.0, 20.0)
    window.run_status.set_text(window._status_text())
    qtbot.wait(50)
    assert not window.run_status.label.is_elided(), window.run_status.label.shown_text()


# ------------------------------------------------------------------ smaller ones


def test_render_on_the_cpu_says_its_progress_and_pictures_the_finished_sweep(
    tmp_path, capsys, monkeypatch
):
    import main
    from app.export import plot_images

    seen = {}
    real = plot_images.render_image

    def render_image(window, size):  # type: ignore[no-untyped-def]
        seen["sweep shown"] = window.run_status.progress.isVisible()
        seen["busy"] = window.runner.busy
        seen["status"] = window.run_status.text()
        return real(window, size)

    monkeypatch.setattr(plot_images, "render_image", render_image)
    out = tmp_path / "cpu.png"
    argv = ["render", "--backend", "cpu", "--seq", "256", "--heads", "1", "--out", str(out)]
    assert main.main(argv) == 0
    err = capsys.readouterr().err
    assert "tilescope: measuring N = 256…" in err and "tilescope: sweep 4/4" in err, err
    assert seen == {"sweep shown": False, "busy": False, "status": seen["status"]}
    assert "sweep" not in seen["status"].lower()


def test_a_message_in_the_status_bar_is_seen_over_the_readouts(start_window, empty_settings, qtbot):
    window, _ = start_window(empty_settings)
    window.file_menu._status("Exported the plots to /tmp/x.png")
    bar = window.statusBar()
    assert bar.currentMessage() == "Exported the plots to /tmp/x.png"
    assert not window.readouts.backend.isVisible()  # the message has the bar to itself
    bar.clearMessage()
    assert window.readouts.backend.isVisible()


def test_save_session_never_starts_in_the_apps_own_recordings_folder(
    start_window, empty_settings, qtbot
):
    from app.state.recorded_run import shipped_recording

    window, _ = start_window(empty_settings)  # a first start opened the shipped recording
    qtbot.waitUntil(lambda: window.state.value.replay, timeout=HANG_MS)
    asked = []
    window.file_menu.ask_save_path = lambda title, filters, suggested: asked.append(suggested)
    window.file_menu.save_session_dialog()
    assert asked and not asked[0].startswith(str(shipped_recording().parent))


def test_the_window_title_names_the_app_once():
    from app.window.main_window import APPLICATION, WINDOW_TITLE

    # Qt adds the application's display name unless the title ends with it.
    shown = (
        WINDOW_TITLE if WINDOW_TITLE.endswith(APPLICATION) else f"{WINDOW_TITLE} — {APPLICATION}"
    )
    assert shown.count("Tilescope") == 1


def test_the_ring_tabs_buttons_use_no_glyph_the_font_may_lack(qtbot):
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtWidgets import QToolButton

    from app.kit.state_signal import StateSignal
    from app.ring.panel import RingPanel

    panel = RingPanel(StateSignal())
    qtbot.addWidget(panel)
    for playing in (False, True):
        panel.play() if playing else panel.pause()
        for button in panel.findChildren(QToolButton):
            metrics = QFontMetrics(button.font())
            missing = [ch for ch in button.text() if not metrics.inFontUcs4(ord(ch))]
            assert not missing, (button.objectName(), button.text())
    assert not panel.play_button.icon().isNull()


def test_an_animation_format_whose_package_is_missing_is_said_before_the_dialog_asks(
    start_window, empty_settings, monkeypatch
):
    from app.export import animation_writers

    monkeypatch.setitem(animation_writers.FORMAT_PACKAGES, "gif", ("no_such_pillow", "Pillow"))
    window, _ = start_window(empty_settings)
    dialog = window.file_menu.export_dialog("gif")
    i = dialog.kind.findData("gif")
    assert not dialog.kind.model().item(i).isEnabled()
    assert "needs Pillow (pip install pillow)" in dialog.kind.itemText(i)
    assert dialog.kind.currentData() != "gif"
    dialog.close()


def test_the_apps_command_installs_what_gif_and_mp4_exports_need():
    import re
    from pathlib import Path

    text = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    deps = text.split("\ndependencies = [", 1)[1].split("]", 1)[0]
    names = set(re.findall(r'"([A-Za-z0-9_.-]+)[><=]', deps))
    assert {"pillow", "imageio-ffmpeg"} <= {n.lower() for n in names}
