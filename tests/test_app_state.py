"""The app state: one snapshot, one update, one notification per subscriber; and in the window,
one user action gives exactly one update to each view that follows the state."""

from __future__ import annotations

from collections import Counter

import pytest

from app.state.app_state import AppState, Change, StateModel
from app.state.budget import CUSTOM_PRESET, DEVICE_PRESET
from app.state.family import cache_config, family, family_of
from app.state.model.cost_model_backend import CostModelBackend
from app.state.runs import BackendReady
from gpu.algorithms import ALGORITHMS, NAIVE, TILED, TILED_MMA
from gpu.config import AttentionConfig
from gpu.model.costmodel import DEFAULT_GPU, GPUS, gpu_for_device_name

BASE = AttentionConfig(seq_len=1024)


def _ready(backend: CostModelBackend) -> BackendReady:
    info = backend.device_info()
    return BackendReady(1, "auto", backend, f"{info.backend}:{info.name}", info, (), 0.0)


# ---------------------------------------------------------------------------- the model


def test_an_update_is_applied_at_once_and_told_to_each_subscriber_once():
    model = StateModel()
    seen_a, seen_b = [], []
    model.subscribe(seen_a.append)
    model.subscribe(seen_b.append)
    model.update(config=BASE.with_(seq_len=2048), budget_preset="RTX 4090 24 GB")
    assert len(seen_a) == len(seen_b) == 1
    change = seen_a[0]
    assert change.fields == {"config", "budget_preset"}
    assert change.old.config == BASE and change.new is model.value
    assert change.changed("target_gpu") and not change.changed("backend")


def test_an_update_that_changes_nothing_tells_nobody():
    model = StateModel()
    seen = []
    model.subscribe(seen.append)
    model.update(config=model.value.config, checked=model.value.checked)
    assert seen == [] and model.updates == 0


def test_unknown_fields_and_wrong_types_are_refused_before_anything_changes():
    model = StateModel()
    with pytest.raises(TypeError, match="no field"):
        model.update(no_such_field=8)
    with pytest.raises(TypeError, match="config"):
        model.update(config=1024, budget_preset="custom")
    assert model.value == AppState()


def test_an_update_made_by_a_subscriber_comes_after_everyone_saw_the_first():
    model = StateModel()
    order = []

    def first(change):
        order.append(("first", change.new.config.seq_len))
        if change.new.config.seq_len == 2048:
            model.update(config=change.new.config.with_(seq_len=4096))

    model.subscribe(first)
    model.subscribe(lambda c: order.append(("second", c.new.config.seq_len)))
    model.update(config=BASE.with_(seq_len=2048))
    assert order == [("first", 2048), ("second", 2048), ("first", 4096), ("second", 4096)]


def test_a_failing_subscriber_does_not_keep_the_others_from_hearing():
    model = StateModel()
    seen = []

    def broken(change):
        raise RuntimeError("a view's bug")

    model.subscribe(broken)
    model.subscribe(seen.append)
    with pytest.raises(RuntimeError):
        model.update(budget_preset=CUSTOM_PRESET)
    assert len(seen) == 1 and model.value.budget_preset == CUSTOM_PRESET


def test_enabled_algorithms_are_ticked_available_and_not_disabled_in_registry_order():
    s = AppState(
        checked=(TILED_MMA, NAIVE, TILED),
        available=(NAIVE, TILED, TILED_MMA),
        disabled=((TILED_MMA, "will not compile"),),
    )
    assert s.algorithms == (NAIVE, TILED)
    assert s.algorithms == tuple(a for a in ALGORITHMS if a in s.algorithms)


def test_the_budget_follows_the_preset_and_the_device():
    gpu = CostModelBackend(name="cuda", device="NVIDIA H200", memory_bytes=141 * 10**9)
    s = AppState(backend=_ready(gpu))
    # a GPU of the table runs within its datasheet's capacity, where its walls are drawn
    assert s.budget.preset == DEVICE_PRESET and s.budget.run_bytes == 141 * 10**9
    assert s.budget.line_bytes == 141 * 10**9
    assert s.target_gpu == gpu_for_device_name("NVIDIA H200") and s.on_gpu
    rtx = AppState(budget_preset="RTX 4090 24 GB", backend=_ready(gpu))
    assert rtx.budget.run_bytes == GPUS["RTX 4090 24 GB"].memory_bytes
    assert rtx.target_gpu == GPUS["RTX 4090 24 GB"] and rtx.budget_name == "an RTX 4090"
    custom = AppState(budget_preset=CUSTOM_PRESET, custom_budget_gb=2.5)
    assert custom.budget.run_bytes == 2_500_000_000
    assert custom.target_gpu == GPUS[DEFAULT_GPU] and "reference" in custom.target_gpu_label


def test_the_slider_snaps_to_a_recorded_runs_n_and_is_free_otherwise():
    assert AppState().snap(3000) == 3000
    assert AppState().snap(10**7) == 131072
    assert AppState(seq_scale=(512, 2048, 8192)).snap(3000) == 2048


def test_a_family_is_every_field_but_n_and_tile_agnostic_algorithms_ignore_tiles():
    a, b = BASE, BASE.with_(seq_len=65536)
    assert family(a) == family(b) != family(a.with_(heads=16))
    other_tiles = a.with_(block_m=128, block_n=32)
    assert family_of(other_tiles, NAIVE) == family_of(a, NAIVE)
    assert family_of(other_tiles, TILED) != family_of(a, TILED)  # the readable kernel uses them
    assert cache_config(other_tiles, TILED_MMA) == cache_config(a, TILED_MMA)


def test_a_first_look_counts_every_field_as_changed():
    change = Change.initial(AppState())
    assert change.changed("config") and change.changed("target_gpu") and "backend" in change.fields


# ---------------------------------------------------------------------------- the window

#: Every view that follows the app state, by the method the state calls.
VIEWS = {
    "controls": ("app.controls.panel", "ControlsPanel", "on_state"),
    "plots": ("app.measure.plots", "PlotsPanel", "on_state"),
    "explain": ("app.measure.explain", "ExplainPane", "follow"),
    "lesson": ("app.window.lesson_strip", "LessonStrip", "follow"),
    "window": ("app.window.main_window", "MainWindow", "_on_state"),
    "animation": ("app.window.main_window", "MainWindow", "_follow_animation"),
}
#: What those views then do, counted too: nothing may run twice for one action.
WORK = {
    "request": ("app.work.runner", "Runner", "request"),
    "cursor": ("app.measure.plots", "PlotsPanel", "set_seq_len"),
    "measured": ("app.window.main_window", "MainWindow", "_refresh_measured"),
    "explain_html": ("app.measure.explain", "ExplainPane", "_refresh"),
    "animation_config": ("app.animation.widget", "TileAnimationWidget", "set_config"),
    "animation_gpu": ("app.animation.widget", "TileAnimationWidget", "set_gpu"),
}


@pytest.fixture
def counted(monkeypatch):
    """Counter of calls to VIEWS and WORK methods, patched before a window connects them."""
    import importlib

    calls: Counter = Counter()
    for name, (module, cls, method) in {**VIEWS, **WORK}.items():
        klass = getattr(importlib.import_module(module), cls)
        original = getattr(klass, method)

        def counting(self, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(klass, method, counting)
    return calls


#: Measurements take this long, so what an action does is counted before its results arrive.
RUN_S = 0.4


@pytest.fixture
def window(qtbot, make_window, counted):
    backend = CostModelBackend(device="NVIDIA H200", memory_bytes=141 * 10**9, delay_s=RUN_S)
    w = make_window(backend)
    w.tabs.setCurrentIndex(1)  # the Tiles tab: the animation follows the config too
    qtbot.waitUntil(lambda: w.animation is not None, timeout=5000)
    qtbot.waitUntil(lambda: not w.runner.busy, timeout=5000)
    qtbot.wait(150)  # throttled panes catch up
    return w


def _settle(qtbot, window):
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=10000)
    qtbot.wait(150)


def _one_action(qtbot, window, counted, action) -> Counter:
    """What `action` makes the views do, before the measurements it asks for come back (the
    results that follow are drawn once per frame: test_a_burst_of_results_is_drawn_once)."""
    _settle(qtbot, window)
    counted.clear()
    updates = window.model.updates
    action()
    qtbot.wait(round(RUN_S * 1e3 / 2))  # paced panes catch up; no result has arrived yet
    calls = Counter(counted)
    assert window.model.updates == updates + 1, "one user action, one state update"
    _settle(qtbot, window)
    return calls


def _assert_each_view_once(calls: Counter, views=tuple(VIEWS)) -> None:
    for view in views:
        assert calls[view] == 1, (view, dict(calls))
    for work, n in calls.items():
        assert n <= 1, (work, dict(calls))


def test_a_slider_move_updates_each_view_once(qtbot, window, counted):
    s = window.controls.slider
    calls = _one_action(qtbot, window, counted, lambda: s.setValue(s.value() + 1))
    _assert_each_view_once(calls)
    assert calls["request"] == calls["animation_config"] == 1
    assert calls["cursor"] == 0  # the plots are on the hidden tab: they catch up when shown
    window.tabs.setCurrentIndex(0)
    assert window.plots.memory.cursor_n == window.config.seq_len


def test_a_heads_change_updates_each_view_once(qtbot, window, counted):
    calls = _one_action(qtbot, window, counted, lambda: window.controls.heads.setValue(16))
    _assert_each_view_once(calls)
    assert calls["measured"] == calls["request"] == calls["explain_html"] == 1


def test_an_algorithm_toggle_updates_each_view_once(qtbot, window, counted):
    check = window.controls.algo_checks[TILED]
    calls = _one_action(qtbot, window, counted, check.click)
    _assert_each_view_once(calls)
    assert TILED not in window.state.value.algorithms


def test_a_budget_preset_updates_each_view_once(qtbot, window, counted):
    combo = window.controls.budget
    calls = _one_action(
        qtbot, window, counted, lambda: combo.setCurrentIndex(combo.findData(CUSTOM_PRESET))
    )
    _assert_each_view_once(calls)
    assert calls["animation_gpu"] == 0  # the custom budget keeps the device's GPU


def test_a_roofline_gpu_change_moves_the_animations_clock_once(qtbot, window, counted):
    combo = window.controls.budget
    rtx = GPUS["RTX 4090 24 GB"]
    calls = _one_action(
        qtbot, window, counted, lambda: combo.setCurrentIndex(combo.findData("RTX 4090 24 GB"))
    )
    _assert_each_view_once(calls)
    assert calls["animation_gpu"] == 1 and window.animation.player.gpu == rtx


def test_a_backend_becoming_ready_updates_each_view_once(qtbot, window, counted):
    cpu = CostModelBackend(name="cpu", device="CPU (fake)", delay_s=RUN_S)
    window.backend_factory = lambda name: cpu
    _settle(qtbot, window)
    window.controls.set_backend_choice("cpu")  # the start: the backend goes away (one update)
    counted.clear()
    updates = window.model.updates
    qtbot.waitUntil(lambda: window.backend is not None, timeout=5000)
    qtbot.wait(round(RUN_S * 1e3 / 2))
    assert window.model.updates == updates + 1
    _assert_each_view_once(Counter(counted))


def _arrive(window, algorithm: str, more_to_come: int) -> None:
    """The runner hands the window a result of the config shown, `more_to_come` runs of that
    config still to come."""
    from app.state.runs import Job, RunOutcome

    job = Job(0, window._backend_generation, window.config, algorithm, None)
    result = window.backend.backend.run(window.config, algorithm)
    outcome = RunOutcome(job, window.backend.key, result=result, more_to_come=more_to_come)
    window.runner.outcome.emit(outcome)


def test_the_results_of_a_config_measured_one_after_another_are_drawn_together(
    qtbot, window, monkeypatch
):
    draws = []
    original = window.plots.set_measured
    monkeypatch.setattr(window.plots, "set_measured", lambda s: (draws.append(s), original(s)))
    window.store.clear()
    _arrive(window, NAIVE, more_to_come=1)
    qtbot.wait(60)  # several frames: drawn apart, it would be drawn by now
    assert draws == []
    _arrive(window, TILED, more_to_come=0)
    qtbot.waitUntil(lambda: bool(draws), timeout=5000)
    qtbot.wait(60)
    assert len(draws) == 1
    assert {a for a, results in draws[0].items() if results} == {NAIVE, TILED}


def test_results_whose_config_never_finishes_are_drawn_after_the_hold(qtbot, window, monkeypatch):
    from app.work.pacing import ARRIVALS_HOLD_MS

    draws = []
    original = window.plots.set_measured
    monkeypatch.setattr(window.plots, "set_measured", lambda s: (draws.append(s), original(s)))
    window.store.clear()
    _arrive(window, NAIVE, more_to_come=1)  # the rest is never measured (a backend hangs)
    qtbot.wait(60)
    assert draws == []
    qtbot.waitUntil(lambda: bool(draws), timeout=ARRIVALS_HOLD_MS + 5000)
    assert [r.algorithm for r in draws[-1][NAIVE]] == [NAIVE]


def test_a_burst_of_results_is_drawn_once(qtbot, window, monkeypatch):
    from app.state.runs import Job, RunOutcome

    draws = []
    original = window.plots.set_measured
    monkeypatch.setattr(window.plots, "set_measured", lambda s: (draws.append(s), original(s)))
    key = window.backend.key
    config = window.config
    for n in (128, 256, 512, 768, 1536, 2048, 3072, 4096):  # 8 results, one turn of the loop
        c = config.with_(seq_len=n)
        job = Job(0, window._backend_generation, c, NAIVE, None)
        result = window.backend.backend.run(c, NAIVE)
        window.runner.outcome.emit(RunOutcome(job, key, result=result))
    qtbot.wait(100)
    assert len(draws) == 1
    assert 4096 in [r.config.seq_len for r in draws[0][NAIVE]]
