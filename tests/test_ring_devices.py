"""The Devices control and the Ring tab in the main window with pytest-qt: P up to what runs
here is measured (the CPU backend simulates it through the runner), larger P is model only, a
recorded ring opens with File ▸ Open, and P is saved with the other controls."""

from __future__ import annotations

from ring_recording import RING_RECORDING

from app.state.ring.devices import MODEL, SIMULATED, SIMULATED_MAX
from app.state.ring.playback import MEASURED_CLOCK
from app.state.ring.runs import RECORDED
from app.state.ring.runs import SIMULATED as RUN_SIMULATED
from gpu.backends.cpu_backend import CpuBackend
from gpu.ring.backend import RingBackend


def devices_choice(window, p: int):
    return next(c for c in window.controls.devices.choices if c.devices == p)


def test_opening_the_recording_with_file_open_shows_its_ring(qtbot, make_window):
    window = make_window()
    with qtbot.waitSignal(window.file_menu.fileOpened, timeout=5000):
        window.file_menu.open_file(str(RING_RECORDING))
    qtbot.waitUntil(lambda: window.state.value.replay, timeout=5000)
    window.tabs.setCurrentWidget(window.ring_panel)
    s = window.state.value
    panel = window.ring_panel
    qtbot.waitUntil(lambda: panel.run is not None, timeout=5000)
    assert panel.run.devices == s.devices and panel.run.kind == RECORDED
    assert panel.run.config == s.config.with_(block_m=64, block_n=64)
    assert devices_choice(window, s.devices).mode == RECORDED
    assert window.controls.devices.combo.currentText().endswith("recorded")
    assert panel.player.clock.source == MEASURED_CLOCK


def test_devices_offers_simulated_p_up_to_its_limit_and_model_only_beyond(qtbot, make_window):
    window = make_window(factory=lambda name: CpuBackend())
    combo = window.controls.devices.combo
    assert combo.objectName() == "devicesCombo" and combo.toolTip()
    labels = [combo.itemText(i) for i in range(combo.count())]
    modes = {c.devices: c.mode for c in window.controls.devices.choices}
    assert all(modes[p] == SIMULATED for p in range(2, SIMULATED_MAX + 1))
    assert all(modes[p] == MODEL for p in modes if p > SIMULATED_MAX)
    assert max(modes) == 1024
    assert "1024 · model only" in labels and f"{SIMULATED_MAX} · simulated" in labels
    window.controls.devices.set_devices(256)
    assert "model only" in window.controls.devices.hint.text()


def test_p_above_one_on_the_cpu_backend_runs_the_simulated_ring(qtbot, make_window):
    window = make_window(factory=lambda name: CpuBackend())
    window.controls.devices.set_devices(3)
    qtbot.waitUntil(
        lambda: window.backend is not None and isinstance(window.backend.backend, RingBackend),
        timeout=20000,
    )
    assert window.backend.backend.devices == 3
    assert window.state.value.algorithms == ("ring",)
    panel = window.ring_panel
    config = window.state.value.config
    qtbot.waitUntil(lambda: panel.runs.find(config, 3) is not None, timeout=60000)
    run = panel.runs.find(config, 3)
    assert run.kind == RUN_SIMULATED and run.measurement.transport == "simulated"
    assert len(run.measurement.device_peak_bytes) == 3
    window.tabs.setCurrentWidget(panel)
    qtbot.waitUntil(lambda: panel.run is run, timeout=5000)
    assert panel.plots.memory["source"] == RUN_SIMULATED
    # Back to one device: the single-device algorithms run again.
    window.controls.devices.set_devices(1)
    qtbot.waitUntil(
        lambda: window.backend is not None and not isinstance(window.backend.backend, RingBackend),
        timeout=5000,
    )
    assert "naive" in window.state.value.algorithms


def test_a_model_only_p_keeps_measuring_on_one_device(qtbot, make_window):
    window = make_window(factory=lambda name: CpuBackend())
    before = window.backend
    window.controls.devices.set_devices(512)
    qtbot.wait(50)
    assert window.backend is before  # no restart: one device measures, the model predicts
    assert window.state.value.devices == 512


def test_devices_is_saved_and_restored(qtbot, make_window, window_settings):
    window = make_window(factory=lambda name: CpuBackend())
    window.controls.devices.set_devices(128)
    window.save_settings()
    window.close()
    again = make_window(factory=lambda name: CpuBackend())
    assert again.state.value.devices == 128
    assert again.controls.devices.combo.currentData() == 128


def test_a_shipped_two_gpu_ring_recording_is_offered_and_replays(qtbot, make_window, monkeypatch):
    import app.state.ring.runs as ring_runs

    monkeypatch.setattr(ring_runs, "SHIPPED_RING_RECORDING", RING_RECORDING)
    window = make_window()
    button = window.ring_panel.shipped_button
    assert not button.isHidden() and button.toolTip()
    with qtbot.waitSignal(window.file_menu.fileOpened, timeout=5000):
        button.click()  # through File ▸ Open, like any recording
    qtbot.waitUntil(lambda: window.state.value.replay, timeout=5000)
    assert window.state.value.recorded_path == str(RING_RECORDING)
    assert len(window.ring_panel.runs) > 0


def test_without_a_shipped_ring_recording_nothing_is_offered(make_window, monkeypatch, tmp_path):
    import app.state.ring.runs as ring_runs

    monkeypatch.setattr(ring_runs, "SHIPPED_RING_RECORDING", tmp_path / "absent.json")
    window = make_window()
    assert window.ring_panel.shipped_button.isHidden()
