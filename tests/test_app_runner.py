"""The background runner: backend creation and runs off the GUI thread, coalescing, sweeps."""

from __future__ import annotations

import threading

from app.state.model.cost_model_backend import CostModelBackend
from gpu.algorithms import NAIVE, TILED, TILED_MMA
from gpu.config import AttentionConfig
from tests.polled_backend import PolledCpuBackend

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


def test_each_outcome_says_how_many_runs_of_its_config_are_still_to_come(
    qtbot, runner, start_backend, outcomes
):
    start_backend(CostModelBackend(algorithms=(NAIVE, TILED, TILED_MMA)))
    runner.request(BASE, [NAIVE, TILED, TILED_MMA], None)
    qtbot.waitUntil(lambda: len(outcomes) == 3, timeout=5000)
    assert [(o.job.algorithm, o.more_to_come) for o in outcomes] == [
        (NAIVE, 2),
        (TILED, 1),
        (TILED_MMA, 0),
    ]


def test_a_run_whose_config_was_replaced_has_nothing_more_to_come(
    qtbot, runner, start_backend, outcomes
):
    backend = CostModelBackend(delay_s=0.15)
    start_backend(backend)
    runner.request(BASE, [NAIVE, TILED], None)
    qtbot.waitUntil(lambda: bool(backend.calls), timeout=5000)  # naive is in flight now
    other = BASE.with_(seq_len=2 * BASE.seq_len)
    runner.request(other, [NAIVE, TILED], None)
    qtbot.waitUntil(lambda: len(outcomes) == 3, timeout=5000)
    first = outcomes[0]
    assert first.job.config == BASE and first.stale and first.more_to_come == 0
    assert [(o.job.config, o.more_to_come) for o in outcomes[1:]] == [(other, 1), (other, 0)]


def test_a_stream_of_requests_starts_one_run_when_it_rests(qtbot, runner, start_backend):
    backend = CostModelBackend()
    start_backend(backend)
    runner.request_settle_s = 0.2  # longer than the whole stream below takes on any machine
    for n in (256, 512, 768, 1024, 1280, 1536):  # a drag: a request every few microseconds
        runner.request(BASE.with_(seq_len=n), [NAIVE], None)
    assert runner.busy
    qtbot.waitUntil(lambda: not runner.busy, timeout=5000)
    assert [n for n, _, _ in backend.calls] == [1536]  # the N it rests on, once


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


# ------------------------------------------------------------------ cancelling a run in flight

#: A CPU run of half a minute or more (tiled, so it checks its cancel hook between key tiles).
LONG = AttentionConfig(seq_len=16384, heads=4)
SHORT = AttentionConfig(seq_len=256, heads=1)


def _cpu_runner(qtbot, runner, start_backend) -> tuple[list, PolledCpuBackend]:
    backend = PolledCpuBackend()
    runner.live_time_limit_s = runner.sweep_time_limit_s = None  # never skipped as too slow
    start_backend(backend, requested="cpu")
    started = []
    runner.jobStarted.connect(started.append)
    return started, backend


def test_a_newer_request_abandons_a_long_cpu_run_at_once_and_runs_promptly(
    qtbot, runner, start_backend, outcomes
):
    started, backend = _cpu_runner(qtbot, runner, start_backend)
    runner.request(LONG, [TILED], None)
    backend.into_the_tiles(qtbot, LONG)
    mark = len(backend.polls)
    runner.request(SHORT, [TILED], None)
    qtbot.waitUntil(lambda: any(o.job.config == SHORT for o in outcomes), timeout=30_000)
    long = next(o for o in outcomes if o.job.config == LONG)
    short = next(o for o in outcomes if o.job.config == SHORT)
    assert long.cancelled and long.result is None and not long.backend_lost and long.stale
    # At once: the long run's next poll of its hook stopped it, out of the hundreds of key
    # tiles it had left.
    assert backend.stopped_at_its_next_poll(LONG, mark), backend.polls_of(LONG, mark)
    assert short.result is not None and not short.cancelled
    # Promptly: nothing stale in its way, the short run started next and was never stopped.
    assert [j.config for j in started] == [LONG, SHORT]
    assert not any(backend.polls_of(SHORT))
    assert runner.stats.runs_cancelled == 1


def test_cancel_stops_the_run_in_flight_and_a_sweep_item_resumes_after_live_work(
    qtbot, runner, start_backend, outcomes
):
    started, backend = _cpu_runner(qtbot, runner, start_backend)
    runner.request(LONG, [TILED], None)
    backend.into_the_tiles(qtbot, LONG)
    mark = len(backend.polls)
    runner.cancel()  # Esc
    qtbot.waitUntil(lambda: bool(outcomes), timeout=30_000)
    assert outcomes[0].cancelled
    assert backend.stopped_at_its_next_poll(LONG, mark), backend.polls_of(LONG, mark)
    qtbot.waitUntil(lambda: not runner.busy, timeout=5000)

    # A live request overtakes a sweep item in flight; the item runs again afterwards.
    finished = []
    runner.sweepFinished.connect(finished.append)
    del outcomes[:]
    runner.start_sweep([(SHORT.with_(seq_len=4096, heads=2), TILED)], None)
    qtbot.waitUntil(lambda: len(started) >= 2, timeout=5000)
    runner.request(SHORT, [TILED], None)
    qtbot.waitUntil(lambda: bool(finished), timeout=120_000)  # a hang guard, not a speed
    assert finished == [False]
    done = [(o.job.config.seq_len, o.job.sweep, o.cancelled) for o in outcomes]
    assert done[-1] == (4096, True, False), done
    assert (4096, True, True) in done  # stopped for the live request, then run again
    assert (256, False, False) in done


def test_a_request_for_the_config_in_flight_keeps_that_run(qtbot, runner, start_backend, outcomes):
    backend = CostModelBackend(delay_s=0.3)
    start_backend(backend)
    runner.request(BASE, [NAIVE], None)
    qtbot.waitUntil(lambda: bool(backend.calls), timeout=5000)
    runner.request(BASE, [NAIVE, TILED], None)  # another algorithm ticked meanwhile
    qtbot.waitUntil(lambda: not runner.busy, timeout=5000)
    assert [a for _, a, _ in backend.calls] == [NAIVE, TILED]  # naive was not run twice
    assert runner.stats.runs_cancelled == 0


def test_an_unsampled_run_in_flight_does_not_stand_in_for_a_sampled_request(
    qtbot, runner, start_backend, outcomes
):
    backend = CostModelBackend(delay_s=0.3)
    start_backend(backend)
    runner.request(BASE, [NAIVE], None)
    qtbot.waitUntil(lambda: bool(backend.calls), timeout=5000)
    runner.request(BASE, [NAIVE], None, profile=True)  # Measure bytes switched on meanwhile
    qtbot.waitUntil(lambda: not runner.busy and len(backend.calls) >= 2, timeout=5000)
    assert [a for _, a, _ in backend.calls] == [NAIVE, NAIVE]


# ------------------------------------------------------------------ settling before measuring


class _CountedCpuBackend:
    """Makes a real CPU backend that records the N of every run, in order."""

    @staticmethod
    def make():
        from gpu.backends.cpu_backend import CpuBackend

        class Counted(CpuBackend):
            def __init__(self) -> None:
                super().__init__()
                self.ran: list[tuple[int, str]] = []

            def run(self, config, algorithm, options):  # type: ignore[no-untyped-def]
                self.ran.append((config.seq_len, algorithm))
                return super().run(config, algorithm, options)

        return Counted()


def test_a_fresh_cpu_backend_warms_up_until_its_times_agree_before_measuring(
    qtbot, runner, start_backend, outcomes
):
    from app.state.settle import SETTLE_CONFIG
    from gpu.algorithms import runs_pass

    backend = _CountedCpuBackend.make()
    start_backend(backend, "cpu")
    asked = AttentionConfig(seq_len=128, heads=2)
    runner.request(asked, [NAIVE], None)
    qtbot.waitUntil(lambda: bool(outcomes), timeout=30_000)
    first = backend.ran.index((128, NAIVE))
    warm = backend.ran[:first]
    # whole rounds of the small run, every algorithm the backend has for its pass, before the
    # first measure
    forward = [a for a in backend.algorithms() if runs_pass(a, SETTLE_CONFIG.pass_)]
    assert len(forward) < len(backend.algorithms())  # the decode kernel is left out
    assert len(warm) >= 2 * len(forward)
    assert set(warm) == {(SETTLE_CONFIG.seq_len, a) for a in forward}
    settling = runner.stats.settling
    assert len(settling.rounds_s) == len(warm) // len(forward)
    assert [o.job.config for o in outcomes] == [asked]  # the warm-up's results are not shown


def test_only_the_numpy_backend_warms_up(qtbot, runner, start_backend, outcomes):
    backend = CostModelBackend(name="cpu")  # GPUs time with their own warm-up; fakes need none
    start_backend(backend, "cpu")
    runner.request(BASE, [NAIVE], None)
    qtbot.waitUntil(lambda: bool(outcomes), timeout=5000)
    assert [c[:2] for c in backend.calls] == [(1024, NAIVE)]
    assert runner.stats.settling is None


def test_settling_stops_when_two_rounds_agree_or_its_time_is_up():
    from app.state.settle import settle

    now = [0.0]

    def rounds(seconds):
        it = iter(seconds)

        def run_round():
            now[0] += next(it)

        return run_round

    clock = lambda: now[0]  # noqa: E731
    done = settle(rounds([1.0, 0.5, 0.25, 0.3125, 0.25]), agree=0.25, budget_s=10, clock=clock)
    assert done.settled and done.rounds_s == (1.0, 0.5, 0.25, 0.3125)  # 0.3125 is 0.25 + 25 %
    now[0] = 0.0
    late = settle(rounds([0.5, 1.0] * 10), agree=0.25, budget_s=2.5, clock=clock)
    assert not late.settled and late.rounds_s == (0.5, 1.0, 0.5, 1.0)  # 3 s ≥ 2.5 s: stopped
    stopped = settle(rounds([1.0]), stop=lambda: True, clock=clock)
    assert stopped.rounds_s == () and not stopped.settled


def test_a_decode_kernel_asked_for_on_a_prefill_point_leaves_the_others_measured_together(
    qtbot, runner, start_backend, outcomes
):
    from gpu.algorithms import SPLIT_KV
    from gpu.backends.cpu_backend import CpuBackend

    runner.settle_budget_s = 0  # no warm-up: the point's own runs only
    start_backend(CpuBackend(), "cpu")
    asked = AttentionConfig(seq_len=128, heads=2)
    runner.request(asked, [NAIVE, SPLIT_KV, TILED], None)
    qtbot.waitUntil(lambda: len(outcomes) == 3, timeout=30_000)
    by_algorithm = {o.job.algorithm: o for o in outcomes}
    assert by_algorithm[NAIVE].result is not None and by_algorithm[TILED].result is not None
    assert by_algorithm[SPLIT_KV].result is None and by_algorithm[SPLIT_KV].unsupported
