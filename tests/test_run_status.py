"""The run status says what the window does now: notes about a config go with it, Cancel is
offered only while something runs, a stale run never delays the current point, and a recording
says what it shows and that it has nothing to measure."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QPushButton

from app.state.model.cost_model_backend import CostModelBackend
from gpu.algorithms import NAIVE, TILED
from gpu.backends.cpu_backend import CpuBackend
from gpu.config import AttentionConfig
from tests.polled_backend import PolledCpuBackend

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "resources" / "recorded" / "h200_sweep.json"


def settle(qtbot, window) -> None:
    """Until the runner is idle (the bound only guards against a hang: CPU runs of N = 2048
    take seconds, more on a loaded machine)."""
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=60_000)
    qtbot.wait(30)  # the runner's idle signal is queued behind its last outcome


def noted(window, *words: str) -> bool:
    return any(w in window.run_status.text() for w in words)


def test_a_note_about_a_huge_batch_goes_when_the_batch_comes_back(qtbot, make_window):
    window = make_window(CpuBackend(), seq_len=512)
    window.controls.set_checked_algorithms((NAIVE, TILED))
    small = window.config.with_(heads=2)
    window.controls.set_config(small)
    settle(qtbot, window)
    window.controls.set_config(small.with_(batch=1024))
    qtbot.waitUntil(lambda: noted(window, "Not run", "out of memory"), timeout=10_000)
    window.controls.set_config(small)  # back to a cached config
    assert not noted(window, "Not run", "out of memory", "N=512 ")
    settle(qtbot, window)
    assert not noted(window, "Not run", "out of memory")
    assert not window.run_status.cancellable  # idle: nothing to cancel
    assert window.run_status.text().startswith(("Idle", "Ready"))


def test_notes_from_n_131072_are_gone_at_n_1024(qtbot, make_window):
    window = make_window(CostModelBackend(name="cpu"))  # the CPU's prior throughput applies
    settle(qtbot, window)
    window.controls.set_seq_len(131072)
    qtbot.waitUntil(lambda: noted(window, "Not run"), timeout=10_000)
    assert window.notes.config.seq_len == 131072  # the note is about the N shown
    window.controls.set_seq_len(1024)
    settle(qtbot, window)
    assert not noted(window, "Not run")
    assert not window.run_status.cancellable


def test_a_note_that_a_dtype_is_not_recorded_goes_back_to_fp16(qtbot, make_window):
    window = make_window(open_path=str(SHIPPED))
    settle(qtbot, window)
    fp16 = window.config.with_(seq_len=16384)  # every checked algorithm recorded there
    window.controls.set_config(fp16)
    settle(qtbot, window)
    window.controls.set_config(fp16.with_(dtype="bf16"))
    qtbot.waitUntil(lambda: noted(window, "not in the recorded run"), timeout=10_000)
    assert "bf16" in window.run_status.text()
    window.controls.set_config(fp16)
    settle(qtbot, window)
    assert not noted(window, "not in the recorded run", "bf16"), window.run_status.text()
    assert window.run_status.text().startswith("Replayed: H200")
    assert not window.run_status.cancellable


def test_a_failed_run_banner_goes_with_its_config_and_backend_banners_stay(qtbot, make_window):
    window = make_window()
    other = window.config.with_(seq_len=2048)
    window.banner.show_message("tiled at N = 2048 failed: boom", about=other)
    window.controls.set_seq_len(512)
    assert window.banner.message == ""
    window.banner.show_message("Could not start the cuda backend: no GPU")  # about no config
    window.controls.set_seq_len(1024)
    assert window.banner.message.startswith("Could not start")


def test_a_fast_drag_down_shows_the_small_n_without_waiting_for_the_stale_run(
    qtbot, make_window, monkeypatch
):
    backend = PolledCpuBackend()
    window = make_window(backend, seq_len=256)
    window.runner.live_time_limit_s = None  # the long run starts instead of being skipped
    window.controls.set_checked_algorithms((TILED,))
    settle(qtbot, window)
    window.controls.set_config(window.config.with_(heads=4))
    settle(qtbot, window)
    big = window.config.with_(seq_len=32768)
    window.controls.set_config(big)
    qtbot.waitUntil(lambda: noted(window, "at N = 32768"), timeout=5000)  # the job started
    backend.into_the_tiles(qtbot, big)  # it takes minutes on a CPU
    told = backend.count_polls_at(window.runner, ("request", "cancel"), monkeypatch)
    mark = len(backend.polls)
    # The drag ends at an N not measured yet (N = 256 was, before the heads change settled).
    drag = [big.with_(seq_len=n) for n in (16384, 4096, 1024, 512)]
    for config in drag:  # the drag: each newer config stops the last
        window.controls.set_config(config)
    small = window.config
    assert small == drag[-1]
    qtbot.waitUntil(
        lambda: window.store.get(small, TILED, window.backend.key) is not None, timeout=60_000
    )
    # The stale runs stopped at their first poll of the cancel hook after the runner heard of a
    # newer point (a key tile at most), whichever of them had started, and none was finished.
    for config in (big, *drag[:-1]):
        polls = backend.polls_of(config, mark)
        stop = backend.told_to_stop(config, told)
        assert not polls or backend.stopped_at_its_next_poll(config, stop), (config, polls)
        assert window.store.get(config, TILED, window.backend.key) is None
    assert backend.polls_of(small) and not any(backend.polls_of(small))  # never told to stop
    assert window.runner.stats.runs_cancelled >= 1


def test_esc_stops_a_run_in_flight(qtbot, make_window):
    backend = PolledCpuBackend()
    window = make_window(backend, seq_len=256)
    window.runner.live_time_limit_s = None
    window.controls.set_checked_algorithms((TILED,))
    settle(qtbot, window)
    big = window.config.with_(seq_len=32768, heads=4)
    window.controls.set_config(big)
    qtbot.waitUntil(lambda: noted(window, "at N = 32768"), timeout=5000)  # the job started
    backend.into_the_tiles(qtbot, big)
    assert window.run_status.cancellable
    before = window.runner.stats.runs_cancelled
    mark = len(backend.polls)
    window.cancel_action.trigger()
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=60_000)
    assert backend.stopped_at_its_next_poll(big, mark), backend.polls_of(big, mark)
    assert window.runner.stats.runs_cancelled == before + 1
    qtbot.waitUntil(
        lambda: not window.run_status.cancellable and not noted(window, "Running"), timeout=5000
    )


# ------------------------------------------------------------------------------ recordings


def test_sweep_on_a_recording_is_off_and_says_why(qtbot, make_window):
    window = make_window(open_path=str(SHIPPED))
    button = window.findChild(QPushButton, "sweepButton")
    assert not button.isEnabled() and not window.sweep_action.isEnabled()
    assert "nothing to measure" in button.toolTip()
    requests = window.runner.stats.requests
    assert window.sweep() == 0  # a script calling it anyway: no queue, no "Sweep done."
    assert "nothing to measure" in window.statusBar().currentMessage()
    assert window.runner.stats.requests == requests
    window.controls.set_backend_choice("auto")
    qtbot.waitUntil(lambda: window.backend is not None and not window.state.value.replay)
    assert button.isEnabled() and window.sweep_action.isEnabled()


def test_a_recording_that_lacks_the_config_says_what_it_shows(qtbot, make_window):
    window = make_window()
    window.controls.set_config(AttentionConfig(seq_len=1024, heads=1))
    with qtbot.waitSignal(window.file_menu.fileOpened, timeout=5000):
        window.file_menu.open_file(str(SHIPPED))
    qtbot.waitUntil(lambda: window.state.value.replay, timeout=5000)
    assert window.config.heads == 12
    text = window.run_status.text()
    assert f"Showing {window.config.label()}" in text and "h=1 " in text
    window.controls.set_seq_len(4096)  # a config of its own now: the note is moot
    assert "Showing" not in window.run_status.text()


def _cpu_session(qtbot, make_window, tmp_path):
    """A session measured on the (fake) CPU backend at N = 512 and 1024."""
    window = make_window(CostModelBackend(name="cpu", device="the test CPU"))
    for n in (512, 1024):
        window.controls.set_seq_len(n)
        settle(qtbot, window)
    path = tmp_path / "cpu_session.json"
    with qtbot.waitSignal(window.file_menu.sessionSaved, timeout=5000):
        window.file_menu.save_session(str(path))
    return window, path


def test_a_reopened_cpu_session_can_continue_measuring_only_what_it_lacks(
    qtbot, make_window, tmp_path
):
    first, path = _cpu_session(qtbot, make_window, tmp_path)
    saved = len(first.store)
    backend = CostModelBackend(name="cpu", device="the test CPU")
    window = make_window(backend, open_path=str(path))
    assert window.state.value.replay
    assert window.continue_action.isEnabled()
    assert window.continue_action.text() == "Continue measuring on cpu"
    assert window.continue_measuring()
    qtbot.waitUntil(
        lambda: window.backend is not None and window.backend.info.backend == "cpu", timeout=5000
    )
    settle(qtbot, window)
    assert backend.calls == []  # N = 1024 is the session's: nothing measured again
    assert "Continuing cpu_session.json" in window.run_status.text()
    kept = window.store.results(window.backend.key)
    assert len(kept) == saved and all(r.recorded for r in kept)  # labelled as from the file
    window.controls.set_seq_len(2048)  # what the session lacks is measured now
    settle(qtbot, window)
    assert {n for n, _, _ in backend.calls} == {2048}
    assert not window.store.get(window.config, NAIVE, window.backend.key).recorded


def test_a_session_from_another_device_is_not_mixed_into_this_ones_series(
    qtbot, make_window, tmp_path
):
    _, path = _cpu_session(qtbot, make_window, tmp_path)
    backend = CostModelBackend(name="cpu", device="another CPU")
    window = make_window(backend, open_path=str(path))
    window.continue_measuring()
    qtbot.waitUntil(
        lambda: window.backend is not None and window.backend.info.backend == "cpu", timeout=5000
    )
    settle(qtbot, window)
    assert "measured on another device" in window.run_status.text()
    assert {n for n, _, _ in backend.calls} == {1024}  # measured here, from scratch
    assert not any(r.recorded for r in window.store.results(window.backend.key))


def test_continue_measuring_is_off_for_a_recording_of_no_live_backend(qtbot, make_window):
    window = make_window(open_path=str(SHIPPED))
    assert window.continue_action.text() == "Continue measuring on cuda"  # an H200 run
    window.controls.set_backend_choice("auto")
    qtbot.waitUntil(lambda: window.backend is not None and not window.state.value.replay)
    assert not window.continue_action.isEnabled()
    assert not window.continue_measuring()


def test_saving_a_session_never_raises_out_of_the_file_menu(qtbot, make_window, tmp_path):
    window = make_window()
    failed = []
    window.file_menu.exportFailed.connect(failed.append)
    window.file_menu.save_session(str(tmp_path / "missing_folder" / "s.json"))
    qtbot.waitUntil(lambda: bool(failed), timeout=5000)
    assert "Could not save the session" in window.banner.message
    window.banner.dismiss()

    def broken() -> None:
        raise ValueError("a result the format refuses")

    window.file_menu.build_session = broken  # making the session fails: a message, no raise
    assert window.file_menu.save_session(str(tmp_path / "s.json")) is False
    assert "a result the format refuses" in window.banner.message
    assert not (tmp_path / "s.json").exists()


def test_render_of_a_substituted_config_shows_the_substitution_in_the_picture(
    tmp_path, monkeypatch, capsys
):
    import app.export.plot_images
    from app.launch import render_window

    seen = []
    real = app.export.plot_images.render_image

    def render_image(widget, size=None):
        seen.append(widget.run_status.text())
        return real(widget, size)

    monkeypatch.setattr(app.export.plot_images, "render_image", render_image)
    out = tmp_path / "shot.png"
    code = render_window(AttentionConfig(seq_len=1, heads=1), backend="replay", out=str(out))
    assert code == 0 and out.exists()
    err = capsys.readouterr().err
    assert "the window shows B=1 h=12 N=256" in err  # the CLI says it on stderr ...
    assert seen and "Showing B=1 h=12 N=256" in seen[0]  # ... and the window in the picture
    assert "no results for B=1 h=1 " in seen[0]
