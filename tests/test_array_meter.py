"""The CPU backend's peak-memory meter: NumPy array data, this thread, no per-run residue."""

import threading
import tracemalloc

import numpy as np
import pytest

from gpu.backends import array_meter
from gpu.backends.array_meter import measure_peak

MB = 1 << 20


def _handler_name() -> str:
    return array_meter._multiarray().get_handler_name()


def test_meter_hooks_numpys_allocator_on_this_numpy():
    assert array_meter.method() == "numpy-allocator"


def test_peak_counts_arrays_held_at_the_same_time():
    def two_then_one():
        a = np.ones(4 * MB, dtype=np.uint8)
        b = np.ones(8 * MB, dtype=np.uint8)
        del a, b
        c = np.ones(2 * MB, dtype=np.uint8)
        return c.nbytes

    peak, result = measure_peak(two_then_one)
    assert result == 2 * MB
    assert 12 * MB <= peak < 12 * MB + 64 * 1024


def test_peak_excludes_arrays_alive_before_the_run():
    held = np.ones(16 * MB, dtype=np.uint8)
    peak, _ = measure_peak(lambda: (held + 1).nbytes)
    assert 16 * MB <= peak < 17 * MB  # the sum's result, not `held`


def test_grown_arrays_count_their_new_size():
    def grow():
        a = np.zeros(1024, dtype=np.uint8)
        a.resize(8 * MB, refcheck=False)  # realloc through the handler
        return a.nbytes

    peak, _ = measure_peak(grow)
    assert peak >= 8 * MB


def test_another_threads_arrays_do_not_blur_the_figure():
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            np.ones(32 * MB, dtype=np.uint8).sum()

    gui = threading.Thread(target=churn)
    gui.start()
    try:
        peak, _ = measure_peak(lambda: [np.ones(MB, dtype=np.uint8).sum() for _ in range(200)])
    finally:
        stop.set()
        gui.join()
    assert MB <= peak < 2 * MB


def test_the_previous_allocator_is_back_after_the_run_even_if_it_raises():
    before = _handler_name()
    with pytest.raises(ZeroDivisionError):
        measure_peak(lambda: 1 / 0)
    assert _handler_name() == before
    seen = []
    measure_peak(lambda: seen.append(_handler_name()))
    assert seen == ["tilescope_array_meter"]
    assert _handler_name() == before


def test_arrays_that_outlive_the_run_are_freed_through_the_meter_later():
    tally = array_meter._numpy_handler().tally
    live_before = tally.live
    _, kept = measure_peak(lambda: [np.ones(3 * MB, dtype=np.uint8)])
    assert tally.live == live_before + 3 * MB
    other = threading.Thread(target=kept.clear)  # freed later, on another thread
    other.start()
    other.join()
    assert tally.live == live_before


def test_thousands_of_runs_leave_nothing_behind():
    tally = array_meter._numpy_handler().tally
    live_before, tracked_before = tally.live, len(tally.sizes)
    for _ in range(5000):
        measure_peak(lambda: (np.ones(1000) * 3).sum())
    assert (tally.live, len(tally.sizes)) == (live_before, tracked_before)
    assert not tracemalloc.is_tracing()  # the old meter started and stopped it every run


def test_without_the_hook_it_falls_back_to_tracemalloc(monkeypatch):
    monkeypatch.setattr(array_meter, "_numpy_handler", lambda: None)
    assert array_meter.method() == "tracemalloc"
    peak, _ = measure_peak(lambda: np.ones(4 * MB, dtype=np.uint8).nbytes)
    assert peak >= 4 * MB
    assert not tracemalloc.is_tracing()
