"""The pacing policy (app/work/pacing.py) and the off-GUI-thread worker (app/work/background.py)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from app.work.background import LatestOnly, run_once
from app.work.pacing import before_paint, coalesced, own_turn


def test_a_burst_of_calls_runs_once_with_the_newest_arguments(qtbot):
    calls = []
    paced = coalesced(calls.append, 30)
    for i in range(8):
        paced(i)
    assert calls == []  # nothing on the caller's stack
    qtbot.waitUntil(lambda: calls == [7], timeout=1000)
    qtbot.wait(80)
    assert calls == [7]


def test_a_zero_interval_coalesces_what_arrives_within_one_turn_of_the_event_loop(qtbot):
    calls = []
    paced = coalesced(calls.append, 0)
    for i in range(5):
        paced(i)
    qtbot.wait(20)
    assert calls == [4]


def test_a_steady_stream_runs_at_most_once_per_interval_is_never_starved_and_ends_last(qtbot):
    runs = []  # (value, when)
    paced = coalesced(lambda v: runs.append((v, time.monotonic())), 40)
    i = 0
    # A call every 5 ms until the paced function has run five times: a debounce would never
    # run while calls keep coming (the hang guard below would fire), a throttle runs on.
    guard = time.monotonic() + 60
    while len(runs) < 5:
        assert time.monotonic() < guard, "starved: no run while the calls kept coming"
        paced(i)
        i += 1
        qtbot.wait(5)
    last = i - 1
    qtbot.waitUntil(lambda: runs[-1][0] == last, timeout=5000)  # the newest value lands
    values = [v for v, _ in runs]
    assert values == sorted(set(values)) and len(values) < i  # in order, coalesced
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(runs)]
    # Never more often than the interval (load only makes the gaps longer).
    assert min(gaps) >= 0.9 * 0.040, gaps


def test_pieces_of_work_due_together_run_one_per_turn_with_a_timer_between(qtbot):
    from PySide6.QtCore import QTimer

    events = []
    tick = QTimer()
    tick.setInterval(1)
    tick.timeout.connect(lambda: events.append("tick"))

    def piece(name):
        def run(*args):
            time.sleep(0.01)  # a piece takes 10 ms: the 1 ms timer is due after each
            events.append((name, *args))

        return run

    jobs = [own_turn(piece(name)) for name in "abc"]
    tick.start()
    qtbot.wait(5)
    events.clear()
    for job in jobs:
        job(1)
    jobs[0](2)  # called again while waiting: the newest arguments, one run
    assert not any(isinstance(e, tuple) for e in events)  # nothing on the caller's stack
    qtbot.waitUntil(lambda: len([e for e in events if isinstance(e, tuple)]) == 3, timeout=5000)
    tick.stop()
    ran = [e for e in events if isinstance(e, tuple)]
    assert ran == [("a", 2), ("b", 1), ("c", 1)]  # oldest first, each once
    at = [events.index(e) for e in ran]
    assert all("tick" in events[i + 1 : j] for i, j in itertools.pairwise(at)), events


def test_a_pending_own_turn_runs_at_flush_and_not_again_after_cancel(qtbot):
    calls = []
    job = own_turn(calls.append)
    job("a")
    job.flush()
    assert calls == ["a"] and not job.pending
    job("b")
    job.cancel()
    qtbot.wait(20)
    assert calls == ["a"]


def test_before_paint_runs_once_per_turn_however_often_it_is_asked(qtbot):
    calls = []
    placed = before_paint(lambda: calls.append(1))
    for _ in range(5):
        placed()
    assert calls == [] and placed.pending
    qtbot.wait(10)
    assert calls == [1] and not placed.pending


def test_flush_runs_a_pending_call_now_and_cancel_drops_it(qtbot):
    calls = []
    paced = coalesced(calls.append, 1000)
    paced("a")
    paced.flush()
    assert calls == ["a"]
    paced("b")
    paced.cancel()
    qtbot.wait(1100)
    assert calls == ["a"]


def test_work_runs_off_the_gui_thread_and_its_result_is_applied_on_it(qtbot):
    worker = LatestOnly()
    ran_on, applied_on = [], []

    def work():
        ran_on.append(threading.get_ident())
        return 42

    with qtbot.waitSignal(worker.applied, timeout=5000):
        worker.submit(work, lambda r: applied_on.append((r, threading.get_ident())))
    gui = threading.get_ident()
    assert ran_on and ran_on[0] != gui
    assert applied_on == [(42, gui)]


def test_a_newer_request_supersedes_waiting_and_running_ones(qtbot):
    worker = LatestOnly()
    started, applied = [], []

    def work(i):
        started.append(i)
        time.sleep(0.05)
        return i

    for i in range(6):
        worker.submit(lambda i=i: work(i), applied.append)
    qtbot.waitUntil(lambda: not worker.busy, timeout=5000)
    assert started == [0, 5]  # the first was running; 1-4 were replaced while they waited
    assert applied == [5]  # the first one's result was stale: dropped
    assert worker.dropped == 5


def test_flush_gives_the_newest_result_at_once(qtbot):
    worker = LatestOnly()
    applied = []
    worker.submit(lambda: (time.sleep(0.1), "old")[1], applied.append)
    worker.submit(lambda: "new", applied.append)
    worker.flush()
    assert applied == ["new"]
    qtbot.waitUntil(lambda: not worker.busy, timeout=5000)
    qtbot.wait(50)
    assert applied == ["new"]


def test_an_exception_in_the_work_goes_to_its_failed_callback_on_the_gui_thread(qtbot):
    worker = LatestOnly()
    failures = []

    def work():
        raise ValueError("corrupt file")

    worker.submit(work, lambda r: pytest.fail("applied"), failures.append)
    qtbot.waitUntil(lambda: bool(failures), timeout=5000)
    assert isinstance(failures[0], ValueError) and str(failures[0]) == "corrupt file"


def test_run_once_jobs_are_never_superseded(qtbot):
    done = []
    for i in range(3):
        run_once(None, lambda i=i: i, done.append, pytest.fail)
    qtbot.waitUntil(lambda: len(done) == 3, timeout=5000)
    assert sorted(done) == [0, 1, 2]


def test_once_per_turn_runs_the_first_call_at_once_and_the_rest_once_when_the_loop_turns(qtbot):
    from app.work.pacing import once_per_turn

    calls = []
    paced = once_per_turn(lambda: calls.append(len(calls)))
    paced()
    assert calls == [0]  # a single move: at once, with its cursor
    for _ in range(7):  # the rest of a burst in the same turn: noted only
        paced()
    assert calls == [0] and paced.pending
    qtbot.wait(10)
    assert calls == [0, 1] and not paced.pending  # once more, for the burst's last call
    paced()  # a new turn: at once again
    assert calls == [0, 1, 2]
    qtbot.wait(10)
    assert calls == [0, 1, 2]  # nothing was due


def test_settled_runs_once_the_calls_pause_with_the_newest_arguments(qtbot):
    from app.work.pacing import settled

    calls = []
    paced = settled(calls.append, 300)
    for i in range(6):  # a call every 10 ms or so: no pause of 300 ms
        paced(i)
        qtbot.wait(10)
        assert calls == []
    qtbot.waitUntil(lambda: calls == [5], timeout=2000)
    paced(6)
    paced.flush()  # the slider let go: now
    assert calls == [5, 6] and not paced.pending
