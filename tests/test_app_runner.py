"""The background runner: backend creation and runs off the GUI thread, coalescing, sweeps."""

from __future__ import annotations

import threading

from app.state.cost_model_backend import CostModelBackend
from gpu.algorithms import NAIVE, TILED
from gpu.config import AttentionConfig

BASE = AttentionConfig(seq_len=1024)


def test_backend_is_created_and_run_on_the_worker_thread_never_the_gui_thread(qtbot, runner):
    made_on = []
    backend = CostModelBackend()

    def factory():
        made_on.append(threading.get_ident())
        return backend

    with qtbot.waitSignal(runner.backendReady, timeout=5000):
        runner.set_backend("fake", factory)
    with qtbot.waitSignal(runner.outcome, timeout=5000) as blocker:
        runner.request(BASE, [NAIVE], None)
    assert blocker.args[0].result.config == BASE
    gui = threading.get_ident()
    assert made_on and made_on[0] != gui
    assert backend.threads and gui not in backend.threads


def test_a_new_request_replaces_waiting_work_and_flags_the_one_in_flight_stale(
    qtbot, runner, start_backend
):
    backend = CostModelBackend(delay_s=0.15)
    start_backend(backend)
    outcomes = []
    runner.outcome.connect(outcomes.append)
    runner.request(BASE.with_(seq_len=256), [NAIVE, TILED], None)
    qtbot.waitUntil(lambda: bool(backend.calls), timeout=5000)  # 256 naive is in flight now
    for n in (512, 768, 1024, 1280, 1536):
        runner.request(BASE.with_(seq_len=n), [NAIVE, TILED], None)
    qtbot.waitUntil(lambda: any(o.job.config.seq_len == 1536 for o in outcomes), timeout=5000)
    qtbot.waitUntil(lambda: not runner.busy, timeout=5000)
    ran = [(n, a) for n, a, _ in backend.calls]
    # 256 naive finished (it was inside a "kernel"); its tiled half and the middle four dropped.
    assert ran == [(256, NAIVE), (1536, NAIVE), (1536, TILED)]
    stale = [o for o in outcomes if o.job.config.seq_len == 256]
    assert stale and all(o.stale for o in stale)
    assert not any(o.stale for o in outcomes if o.job.config.seq_len == 1536)


def test_sweep_reports_progress_and_can_be_cancelled(qtbot, runner, start_backend):
    backend = CostModelBackend(delay_s=0.05)
    start_backend(backend)
    progress = []
    runner.sweepProgress.connect(lambda done, total: progress.append((done, total)))
    items = [(BASE.with_(seq_len=n), NAIVE) for n in (128, 256, 512, 1024, 2048, 4096)]
    with qtbot.waitSignal(runner.sweepProgress, timeout=5000, check_params_cb=lambda d, t: d >= 2):
        runner.start_sweep(items, None)
    with qtbot.waitSignal(runner.sweepFinished, timeout=5000) as blocker:
        runner.cancel_sweep()
    assert blocker.args == [True]
    qtbot.waitUntil(lambda: not runner.busy, timeout=5000)
    assert 2 <= len(backend.calls) < len(items)
    assert progress[0] == (0, 6)


def test_a_sweep_runs_to_the_end_behind_live_requests(qtbot, runner, start_backend):
    backend = CostModelBackend()
    start_backend(backend)
    items = [(BASE.with_(seq_len=n), TILED) for n in (128, 256, 512)]
    with qtbot.waitSignal(runner.sweepFinished, timeout=5000) as blocker:
        runner.start_sweep(items, None)
        runner.request(BASE.with_(seq_len=4096), [NAIVE], None)
    assert blocker.args == [False]
    qtbot.waitUntil(lambda: not runner.busy, timeout=5000)
    assert sorted(n for n, _, _ in backend.calls) == [128, 256, 512, 4096]


def test_runs_estimated_beyond_the_time_limit_are_skipped_with_a_message(
    qtbot, runner, start_backend
):
    backend = CostModelBackend(name="cpu")  # the CPU prior throughput applies
    start_backend(backend)
    runner.live_time_limit_s = 5.0
    with qtbot.waitSignal(runner.outcome, timeout=5000) as blocker:
        runner.request(BASE.with_(seq_len=131072), [TILED], None)
    outcome = blocker.args[0]
    assert outcome.skipped and outcome.result is None
    assert "not run" in outcome.error and "limit" in outcome.error
    assert backend.calls == []


def test_a_failing_backend_factory_reports_instead_of_raising(qtbot, runner):
    def factory():
        raise RuntimeError("no device here")

    with qtbot.waitSignal(runner.backendFailed, timeout=5000) as blocker:
        runner.set_backend("cuda", factory)
    assert "no device here" in blocker.args[0].message
