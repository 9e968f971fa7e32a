"""The timing policy, on a simulated device: lazy loading and clock ramps stay out of the
figures, every batch lasts long enough, outliers are measured again and counted."""

from __future__ import annotations

import pytest

from gpu.backends import timing


class Device:
    """Simulated batches: per-sequence kernel times, a slow first launch, a clock that ramps
    up over the first batches, and outliers on chosen timed batches."""

    def __init__(self, kernel_ms, first_ms=5.0, ramp=(3.0, 1.5), outliers=()):
        self.kernel_ms = kernel_ms
        self.first_ms = first_ms
        self.ramp = list(ramp)
        self.outliers = set(outliers)
        self.calls: list[tuple[int, bool]] = []

    def __call__(self, sequences: int, first: bool) -> list[float]:
        self.calls.append((sequences, first))
        if first:
            return [self.first_ms] + [0.0] * (len(self.kernel_ms) - 1)
        slow = self.ramp.pop(0) if self.ramp else 1.0
        if len(self.calls) - 1 in self.outliers:
            slow *= 20
        return [ms * sequences * slow for ms in self.kernel_ms]


def test_a_slow_first_launch_and_a_clock_ramp_stay_out_of_the_times():
    device = Device([0.010, 0.020])
    times, remeasured = timing.time_batches(device, ["a", "b"], warmup=1, repeats=5)
    assert [k.ms for k in times] == pytest.approx([0.010, 0.020])
    assert remeasured == 0
    assert device.calls[0] == (1, True)  # only the loading batch runs as a first batch
    assert all(not first for _, first in device.calls[1:])


def test_every_timed_batch_lasts_at_least_the_minimum():
    """The first batch (5 ms: a module loading) sizes the first warm-up batch to one sequence;
    the warm-up then resizes the batches, and every timed one lasts MIN_BATCH_MS or more."""
    device = Device([0.004], ramp=())
    timing.time_batches(device, ["k"], warmup=1, repeats=3)
    timed = device.calls[-3:]
    assert all(sequences * 0.004 >= timing.MIN_BATCH_MS * 0.999 for sequences, _ in timed)


def test_long_kernels_run_one_sequence_per_batch_and_warm_up_briefly():
    device = Device([50.0], first_ms=50.0, ramp=())
    times, _ = timing.time_batches(device, ["k"], warmup=1, repeats=5)
    assert times[0].ms == 50.0
    assert len(device.calls) == 1 + 1 + 5  # first, one warm-up batch that agrees, five samples


def test_warm_up_runs_at_least_the_asked_batches():
    device = Device([1.0], first_ms=1.0, ramp=())
    timing.time_batches(device, ["k"], warmup=4, repeats=1)
    assert len(device.calls) == 1 + 4 + 1


def test_an_outlier_batch_is_measured_again_and_counted():
    device = Device([0.5], first_ms=0.5, ramp=(), outliers={3})  # the second timed batch
    times, remeasured = timing.time_batches(device, ["k"], warmup=1, repeats=5)
    assert remeasured == 1
    assert times[0].ms == 0.5 and times[0].max_ms == 0.5 and times[0].count == 5


def test_a_device_that_never_settles_is_measured_again_at_most_so_often():
    class Noisy(Device):
        def __call__(self, sequences, first):
            values = super().__call__(sequences, first)
            return [v * (30 if len(self.calls) % 5 == 0 else 1) for v in values]

    times, remeasured = timing.time_batches(Noisy([0.5], first_ms=0.5, ramp=()), ["k"], 1, 5)
    assert remeasured == timing.MAX_REMEASURE
    assert times[0].max_ms > timing.SPREAD_LIMIT * times[0].ms  # the spread is kept, not hidden
