"""The Ring tab on two real GPUs: Devices = 2 on the CUDA backend measures the ring over NCCL
through the runner, and the tab plays its CUDA events. Needs Qt on the GPU host."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

pytestmark = pytest.mark.multigpu


def test_two_gpus_measure_the_ring_and_the_tab_plays_its_events(qtbot, window_settings):
    from app.state.ring.devices import MEASURED
    from app.state.ring.playback import MEASURED_CLOCK
    from app.window.main_window import MainWindow
    from gpu.backend_factory import create_backend
    from gpu.ring.backend import RingBackend

    window_settings.setValue("controls/seq_len", 65536)
    window = MainWindow(backend_factory=create_backend, settings=window_settings, backend="cuda")
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.backend is not None, timeout=120000)  # CuPy, compiles
    window.controls.causal.setChecked(True)
    devices = window.controls.devices
    assert next(c for c in devices.choices if c.devices == 2).mode == MEASURED
    devices.set_devices(2)
    qtbot.waitUntil(
        lambda: window.backend is not None and isinstance(window.backend.backend, RingBackend),
        timeout=60000,
    )
    config = window.state.value.config
    panel = window.ring_panel
    qtbot.waitUntil(lambda: panel.runs.find(config, 2) is not None, timeout=120000)
    run = panel.runs.find(config, 2)
    assert run.measurement.transport == "nccl"
    window.tabs.setCurrentWidget(panel)
    qtbot.waitUntil(lambda: panel.run is run, timeout=5000)
    assert panel.player.clock.source == MEASURED_CLOCK
    assert len(panel.timeline.lanes) == 4  # compute and communication of each GPU
    assert "hidden behind compute" in panel.timeline_summary.text()
    assert panel.plots.memory["bytes"] == run.measurement.device_peak_bytes
