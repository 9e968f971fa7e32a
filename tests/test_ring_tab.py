"""The Ring tab with pytest-qt: a recorded ring replays in the ring view and the timeline, the
model's curves for P = 1 … 1024 are labelled model, and a 1024-device ring plays summarised."""

from __future__ import annotations

import pytest
from ring_recording import RING_RECORDING, recording, ring_results, widest_ring

import app.ring.panel as ring_panel
import app.state.ring.runs as ring_runs
from app.kit.state_signal import StateSignal
from app.ring.panel import RingPanel, ring_run_to_show
from app.state.app_state import StateModel
from app.state.ring.curves import CURVE_DEVICES
from app.state.ring.playback import FULL_RING_MAX, MEASURED_CLOCK, MODEL_CLOCK
from app.state.ring.runs import RECORDED
from app.state.units import fmt_int
from gpu.algorithms import TILED_WS
from gpu.config import AttentionConfig
from gpu.results import KernelTime, RunResult
from gpu.ring.model import DEVICE_COUNTS, MeasuredThroughput
from gpu.ring_timeline import COMM


@pytest.fixture
def panel(qtbot):
    """make(devices=1, config=None) -> a shown RingPanel on its own state."""

    def make(devices: int = 1, config: AttentionConfig | None = None) -> RingPanel:
        state = StateSignal(StateModel())
        if config is not None:
            state.update(config=config)
        state.update(devices=devices)
        p = RingPanel(state)
        qtbot.addWidget(p)
        p.resize(1400, 900)
        p.show()
        qtbot.waitExposed(p)
        return p

    return make


def replayed(make) -> RingPanel:
    """A panel showing the recording's widest ring, picked in its Run list."""
    p = make()
    p.add_results(recording().results, RING_RECORDING.name)
    wide = widest_ring()
    run = next(
        r for r in p.runs.runs() if r.devices == wide.ring.devices and r.config == wide.config
    )
    p.pin(run)
    return p


def test_the_ring_view_replays_the_recording_step_by_step(qtbot, panel):
    p = replayed(panel)
    wide = widest_ring()
    devices = wide.ring.devices
    assert p.player.clock.source == MEASURED_CLOCK
    assert p.run_combo.count() == 1 + len(p.runs)
    assert len(p.view.node_rects) == min(devices, FULL_RING_MAX)
    p.restart()
    seen_steps, tokens = [], 0
    for _ in range(devices + 1):
        p.step_forward()
        frame = p.view.frame
        seen_steps.append(frame.step)
        assert frame.devices == devices
        assert p.caption.text()
    assert seen_steps == sorted(seen_steps) and seen_steps[-1] == devices
    assert p.caption.text().startswith("Done")
    # Every send of the recording is drawn as a block in flight at its midpoint.
    for e in wide.ring.events(stream=COMM):
        p._seek_ms((e.start_ms + e.end_ms) / 2)
        node = next(n for n in p.view.frame.nodes if n.device == e.device)
        assert node.sending is not None and node.sending.step == e.step
        assert node.sending.block_owner == (e.device - e.step) % devices
        tip = p.view.describe(e.device)
        assert f"sending {p.word} {node.sending.block_owner}'s block" in tip
        tokens += 1
    assert tokens == len(wide.ring.events(stream=COMM)) > 0
    p.view.grab()


def test_the_timeline_draws_every_measured_event_and_what_was_hidden(qtbot, panel):
    p = replayed(panel)
    ring = widest_ring().ring
    assert len(p.timeline.lanes) == 2 * ring.devices
    p.timeline.grab()
    assert p.timeline.bars == len(ring.timeline)
    summary = p.timeline_summary.text()
    assert f"hidden behind compute: {ring.hidden_fraction:.0%}" in summary
    assert f"{ring.achieved_bytes_s / 1e9:.1f} GB/s" in summary
    e = ring.events(stream=COMM)[0]
    assert "hidden behind compute" in p.timeline.describe(e.device, COMM, e.step)
    # A click on the timeline moves the playhead there.
    p._seek_ms(e.end_ms)
    assert p.timeline.cursor_ms == pytest.approx(e.end_ms)
    assert p.player.t == pytest.approx(e.end_ms)


def test_playing_advances_on_the_timer_while_shown(qtbot, panel):
    p = replayed(panel)
    p.restart()
    p.play()
    qtbot.waitUntil(lambda: p.player.t > 0, timeout=3000)
    p.pause()
    t = p.player.t
    qtbot.wait(60)
    assert p.player.t == t


def test_per_gpu_memory_shows_the_recorded_peaks(qtbot, panel):
    p = replayed(panel)
    ring = widest_ring().ring
    memory = p.plots.memory
    assert memory["source"] == RECORDED
    assert memory["bytes"] == tuple(ring.device_peak_bytes[d] for d in memory["devices"])
    assert memory["model"] > 0 and memory["one_device"] >= memory["model"]


def test_model_curves_for_1_to_1024_devices_appear_labelled_model(qtbot, panel):
    p = panel(devices=64, config=AttentionConfig(seq_len=1 << 20, causal=True))
    p.refresh()
    p.flush_curves()
    assert p.curves is not None and p.curves.devices == 64
    scaling = p.plots.scaling_plot
    assert scaling.series["model"][0] == list(DEVICE_COUNTS)
    assert "model" in scaling.labels["model"]
    assert p.plots.efficiency["model"][0] == list(DEVICE_COUNTS)
    time_plot = p.plots.time_plot
    for devices in (1, 2, 64, 1024):
        assert time_plot.series[f"model_p{devices}"][0], devices
    assert "model" in time_plot.title
    # No run at this P: the ring view plays the model's timeline, and says so.
    assert p.player.clock.source == MODEL_CLOCK
    assert p.timeline_summary.text().startswith("Model")
    assert p.plots.memory["source"] == "model"


def test_a_prepared_panel_holds_the_items_of_every_set_of_curves_before_any_arrives(qtbot):
    p = RingPanel(StateSignal(StateModel()))
    qtbot.addWidget(p)
    assert p.plots is None  # built on first show, or by prepare ahead of it
    p.prepare()
    qtbot.waitUntil(lambda: not p._prepare_items.pending, timeout=2000)
    assert p.curves is None  # nothing drawn yet
    for devices in CURVE_DEVICES:  # each P that ring_curves always draws
        assert f"model_p{devices}" in p.plots.time_plot.items, devices
        assert f"measured_p{devices}" in p.plots.time_plot.items, devices


def test_a_1024_device_ring_is_drawn_summarised_and_plays(qtbot, panel):
    p = panel(devices=1024, config=AttentionConfig(seq_len=1 << 20, causal=True))
    p.refresh()
    p.flush_curves()
    assert len(p.view.node_rects) < FULL_RING_MAX
    assert p.view.frame.summarised and p.view._gap is not None
    assert p.matrix.sampled
    p.play()
    qtbot.waitUntil(lambda: p.view.frame.t_ms > 0, timeout=3000)
    p.pause()
    p.view.grab()


def test_a_just_opened_recording_moves_the_controls_to_one_of_its_rings():
    rings = ring_results()
    elsewhere = AttentionConfig(seq_len=1 << 16, heads=3, head_dim=32)
    target = ring_run_to_show(recording().results, elsewhere, 1)
    assert target is not None and target.ring is not None
    assert ring_run_to_show(recording().results, target.config, target.ring.devices) is None
    assert target in rings


def test_a_refresh_looks_up_the_shown_family_without_touching_the_others(qtbot, panel, monkeypatch):
    def single(config: AttentionConfig) -> RunResult:
        times = (KernelTime("k", 1.0),)
        return RunResult(config, TILED_WS, "cuda", "gpu", kernel_times=times, flops=10**12)

    shown = AttentionConfig(seq_len=4096)
    others = [
        single(AttentionConfig(seq_len=1024 + 64 * k, heads=h, head_dim=d, batch=2, causal=c))
        for h in range(1, 51)
        for d in (32, 64, 128)
        for c in (False, True)
        for k in range(67)
    ]
    mine = [single(shown.with_(seq_len=n)) for n in (2048, 4096, 8192)]
    p = panel(config=shown)
    assert p.add_results([*others, *mine]) == len(others) + len(mine) > 20_000
    p.refresh()
    p.flush_curves()
    calls = {"family": 0, "from_results": 0}

    def counted(name, fn):
        def call(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return call

    for name in ("family", "family_of", "cache_config"):
        monkeypatch.setattr(ring_runs, name, counted("family", getattr(ring_runs, name)))
    from_results = counted("from_results", MeasuredThroughput.from_results)
    monkeypatch.setattr(MeasuredThroughput, "from_results", from_results)
    for _ in range(3):
        p.refresh()
        p.flush_curves()
    # A handful of look-ups per refresh, however many results the other families hold.
    assert calls["family"] <= 3 * 20 and calls["from_results"] == 0, calls
    assert p.plots.time_plot.series["measured_p1"][0] == [2048, 4096, 8192]


def test_the_plots_wait_for_the_curves_of_what_is_shown(qtbot, panel, monkeypatch):
    p = panel(devices=8, config=AttentionConfig(seq_len=1 << 16))
    p.refresh()
    p.flush_curves()
    scaling = p.plots.scaling_plot

    def drawn_for(n: int) -> bool:
        return scaling.title == f"Time against P at N = {fmt_int(n)}"

    assert drawn_for(1 << 16) and scaling.series["model"][0]
    p.state.update(config=AttentionConfig(seq_len=1 << 18))
    p.refresh()
    assert drawn_for(1 << 16)  # nothing drawn with the old N's model under the new N
    p.flush_curves()
    assert drawn_for(1 << 18) and p.curves.config.seq_len == 1 << 18
    assert scaling.series["model"][1] == [m.total_s * 1e3 for m in p.curves.over_p]

    def fails():
        raise ValueError("no model here")

    monkeypatch.setattr(ring_panel, "in_process", lambda *args: fails)
    p.state.update(config=AttentionConfig(seq_len=1 << 19))
    p.refresh()
    p.flush_curves()
    assert "could not be computed: no model here" in p.timeline_summary.text()
    assert drawn_for(1 << 19) and not scaling.series["model"][0]
