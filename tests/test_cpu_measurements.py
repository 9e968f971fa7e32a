"""CPU measurements a learner can trust: algorithms timed in interleaved rounds with their spread,
run-time estimates from what this machine measured, and a comparison that says when the spread
cannot tell which is faster."""

from __future__ import annotations

import pytest

from app.state.model.cost_model_backend import CostModelBackend
from app.state.run_estimate import RunRates
from gpu.algorithms import NAIVE, TILED
from gpu.backends import cpu_backend
from gpu.backends.backend import RunOptions
from gpu.backends.cpu_backend import CpuBackend
from gpu.config import AttentionConfig
from gpu.model.costmodel import pass_useful_flops
from gpu.results import KernelTime, RunResult

SMALL = AttentionConfig(seq_len=128, heads=2, head_dim=32)


def test_the_cpu_times_its_algorithms_in_interleaved_rounds_the_order_turning_each_round(
    monkeypatch,
):
    order: list[str] = []

    def recording(name, real):  # type: ignore[no-untyped-def]
        def kernels(config, q, k, v, *, cancel=None):  # type: ignore[no-untyped-def]
            order.append(name)
            return real(config, q, k, v, cancel=cancel)

        return kernels

    monkeypatch.setattr(cpu_backend, "_naive_kernels", recording("n", cpu_backend._naive_kernels))
    monkeypatch.setattr(cpu_backend, "_tiled_kernels", recording("t", cpu_backend._tiled_kernels))
    results = CpuBackend().run_interleaved(SMALL, (NAIVE, TILED), RunOptions(warmup=1, repeats=4))
    # the metered runs, one warm-up round, then four timed rounds turning the order around
    assert "".join(order) == "nt" + "nt" + "nttnnttn"
    assert set(results) == {NAIVE, TILED}
    for r in results.values():
        assert all(k.count == 4 and k.min_ms <= k.ms <= k.max_ms for k in r.kernel_times)


def test_interleaved_results_are_the_same_algorithms_checked_against_the_reference():
    results = CpuBackend().run_interleaved(
        SMALL, (NAIVE, TILED), RunOptions(warmup=0, repeats=1, check=True)
    )
    assert all(r.agrees for r in results.values())
    assert results[NAIVE].peak_bytes > results[TILED].peak_bytes


# ------------------------------------------------------------------ estimates


def _measured(config: AttentionConfig, algorithm: str, ms: float) -> RunResult:
    return RunResult(config, algorithm, "cpu", "CPU", kernel_times=(KernelTime("k", ms),), flops=1)


def test_an_estimate_scales_the_rate_measured_at_the_nearest_n():
    rates = RunRates()
    config = AttentionConfig(seq_len=1024)
    rates.learn("cpu:x", _measured(config.with_(seq_len=256), TILED, 30.0))  # overheads
    rates.learn("cpu:x", _measured(config, TILED, 100.0))
    at_2048 = rates.estimate("cpu:x", "cpu", config.with_(seq_len=2048), TILED, runs=4)
    # four times the work of N = 1024 at its rate, four runs: 4 × 100 ms × 4
    assert at_2048.seconds == pytest.approx(1.6)
    assert at_2048.source == "measured at N = 1024"


def test_a_training_pass_is_estimated_from_its_own_rate_else_the_forwards():
    rates = RunRates()
    forward = AttentionConfig(seq_len=1024)
    step = forward.with_(pass_="step")
    rates.learn("cpu:x", _measured(forward, NAIVE, 100.0))
    from_forward = rates.estimate("cpu:x", "cpu", step, NAIVE, runs=1)
    assert from_forward.seconds == pytest.approx(0.3)  # three times the forward's work
    rates.learn("cpu:x", _measured(step, NAIVE, 600.0))
    assert rates.estimate("cpu:x", "cpu", step, NAIVE, runs=1).seconds == pytest.approx(0.6)


def test_recorded_out_of_memory_and_tiny_results_teach_no_rate():
    rates = RunRates()
    c = AttentionConfig(seq_len=1024)
    rates.learn("k", RunResult(c, TILED, "cpu", "CPU", oom=True))
    rates.learn("k", _measured(c, TILED, 0.01))
    rates.learn("k", RunResult(c, TILED, "cpu", "CPU", (KernelTime("k", 50.0),), recorded=True))
    assert rates.rates == {}
    guess = rates.estimate("k", "cpu", c, TILED, runs=1)
    assert guess.source == "a first guess"
    assert guess.seconds == pytest.approx(pass_useful_flops(c) / 8e9)


class MedianBackend(CostModelBackend):
    """Answers at once, with the median a run of `ms_at_1024` at N = 1024 scales to."""

    def __init__(self, ms_at_1024: float) -> None:
        super().__init__(name="cpu")
        self.ms_at_1024 = ms_at_1024

    def run(self, config, algorithm, options=None):  # type: ignore[no-untyped-def]
        from dataclasses import replace

        result = super().run(config, algorithm, options)
        ms = self.ms_at_1024 * (config.seq_len / 1024) ** 2
        return replace(result, kernel_times=(KernelTime("k", ms, ms, ms, 3),))


def test_the_runner_refuses_only_what_this_machines_measured_rate_puts_past_the_limit(
    qtbot, runner, start_backend, outcomes
):
    # Measured: 1 s a run at N = 1024; a job is 4 runs (3 timed + the metered one). The
    # first guess (8 GFLOP/s) would have run N = 3072 (about 14 s).
    start_backend(MedianBackend(ms_at_1024=1000.0))
    runner.live_time_limit_s = 20.0
    base = AttentionConfig(seq_len=1024)
    runner.request(base, [TILED], None)
    qtbot.waitUntil(lambda: len(outcomes) == 1, timeout=5000)
    runner.request(base.with_(seq_len=2048), [TILED], None)  # about 16 s: runs
    qtbot.waitUntil(lambda: len(outcomes) == 2, timeout=5000)
    runner.request(base.with_(seq_len=3072), [TILED], None)  # about 36 s: refused
    qtbot.waitUntil(lambda: len(outcomes) == 3, timeout=5000)
    ran, refused = outcomes[1], outcomes[2]
    assert ran.result is not None and not ran.skipped
    assert refused.skipped and "about 36 s" in refused.error, refused.error


def test_the_runner_hands_a_backend_that_interleaves_a_requests_algorithms_together(
    qtbot, runner, start_backend, outcomes
):
    calls = []

    class Interleaving(CostModelBackend):
        def run_interleaved(self, config, algorithms, options=None):  # type: ignore[no-untyped-def]
            calls.append(tuple(algorithms))
            return {a: self.run(config, a, options) for a in algorithms}

    start_backend(Interleaving(name="cpu"))
    runner.request(AttentionConfig(seq_len=512), [NAIVE, TILED], None)
    qtbot.waitUntil(lambda: len(outcomes) == 2, timeout=5000)
    assert calls == [(NAIVE, TILED)]
    assert [(o.job.algorithm, o.more_to_come) for o in outcomes] == [(NAIVE, 1), (TILED, 0)]


# ------------------------------------------------------------------ the comparison


def _timed(algorithm: str, ms: float, lo: float, hi: float) -> RunResult:
    return RunResult(
        AttentionConfig(seq_len=1024), algorithm, "cpu", "CPU",
        kernel_times=(KernelTime("k", ms, lo, hi, 3),),
    )  # fmt: skip


def test_spreads_that_overlap_name_no_winner():
    from app.state.time_comparison import compare_times

    # the busy machine's first screen: naive 971 ms, tiled 2.80 s, the rounds all over
    results = {NAIVE: _timed(NAIVE, 971, 900, 3100), TILED: _timed(TILED, 2800, 950, 3160)}
    verdict = compare_times(results, TILED, "cpu")
    assert not verdict.decided
    assert "cannot say which is faster" in verdict.text and "× faster" not in verdict.text


def test_spreads_apart_name_the_faster_and_by_how_much():
    from app.state.time_comparison import compare_times

    results = {NAIVE: _timed(NAIVE, 392, 380, 420), TILED: _timed(TILED, 102, 97, 110)}
    verdict = compare_times(results, TILED, "cpu")
    assert verdict.decided and verdict.faster == TILED
    assert "tiled (readable) is 3.8× faster" in verdict.text


def test_where_the_cpus_tiled_path_is_slower_the_app_says_why():
    from app.state.time_comparison import CPU_TILED_SLOWER, compare_times

    results = {NAIVE: _timed(NAIVE, 100, 95, 105), TILED: _timed(TILED, 300, 290, 310)}
    verdict = compare_times(results, TILED, "cpu")
    assert verdict.decided and verdict.faster == NAIVE
    assert CPU_TILED_SLOWER in verdict.text


def test_the_explain_pane_says_the_comparison_of_the_point_on_screen():
    from app.measure.explain import explain_html
    from app.state.point_inputs import PointInputs
    from gpu.model.costmodel import DEFAULT_GPU, GPUS

    results = {NAIVE: _timed(NAIVE, 971, 900, 3100), TILED: _timed(TILED, 2800, 950, 3160)}
    inp = PointInputs(
        AttentionConfig(seq_len=1024), (NAIVE, TILED), GPUS[DEFAULT_GPU], "H200", None, "",
        tuple(results.items()),
    )  # fmt: skip
    assert "cannot say which is faster" in explain_html(inp)


# ------------------------------------------------------------------ the CPU's bandwidth


def test_the_best_bandwidth_is_kept_per_machine_with_its_date(tmp_path):
    from gpu.backends.cpu_machine import best_bandwidth

    path = tmp_path / "bw.json"
    first = best_bandwidth(19.3e9, path, "machine A", "2026-01-02")
    assert (first.bytes_s, first.date) == (19.3e9, "2026-01-02")
    # a busy launch measures 2.8 GB/s: the roofs keep the best, and say from when
    busy = best_bandwidth(2.8e9, path, "machine A", "2026-01-05")
    assert (busy.bytes_s, busy.date, busy.measured_now) == (19.3e9, "2026-01-02", 2.8e9)
    assert "2026-01-02" in busy.source and "best of" in busy.source
    better = best_bandwidth(21e9, path, "machine A", "2026-01-07")
    assert (better.bytes_s, better.date) == (21e9, "2026-01-07")
    other = best_bandwidth(5e9, path, "machine B", "2026-01-08")  # another machine: its own
    assert other.bytes_s == 5e9
    assert best_bandwidth(1e9, path, "machine A", "2026-01-09").bytes_s == 21e9


def test_a_damaged_bandwidth_file_keeps_nothing_and_is_replaced(tmp_path):
    from gpu.backends.cpu_machine import best_bandwidth

    path = tmp_path / "bw.json"
    path.write_text('{"machine A": {"bytes_s": "fast", "date": 3}')  # not even whole JSON
    assert best_bandwidth(4e9, path, "machine A", "2026-01-02").bytes_s == 4e9
    assert best_bandwidth(3e9, path, "machine A", "2026-01-03").bytes_s == 4e9


def test_the_cpu_roofline_reads_the_kept_bandwidth_and_says_so():
    from gpu.backends import cpu_machine as cpu_roofs

    details = cpu_roofs.device_details()
    kept = cpu_roofs.machine_bandwidth()
    assert details["memory_bandwidth_bytes_s"] == kept.bytes_s >= kept.measured_now
    assert kept.date in details["memory_bandwidth_source"]


def test_the_tiled_paths_small_products_run_on_one_blas_thread_and_naives_on_all(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    controller = threadpoolctl.ThreadpoolController()
    if not controller.select(user_api="blas").lib_controllers:
        pytest.skip("NumPy's BLAS is not one threadpoolctl knows")
    seen: dict[str, set[int]] = {}

    def watching(name, real):  # type: ignore[no-untyped-def]
        def kernels(config, q, k, v, *, cancel=None):  # type: ignore[no-untyped-def]
            info = controller.select(user_api="blas").info()
            seen.setdefault(name, set()).update(i["num_threads"] for i in info)
            return real(config, q, k, v, cancel=cancel)

        return kernels

    monkeypatch.setattr(cpu_backend, "_naive_kernels", watching(NAIVE, cpu_backend._naive_kernels))
    monkeypatch.setattr(cpu_backend, "_tiled_kernels", watching(TILED, cpu_backend._tiled_kernels))
    before = {i["num_threads"] for i in controller.select(user_api="blas").info()}
    CpuBackend().run_interleaved(SMALL, (NAIVE, TILED), RunOptions(warmup=0, repeats=2))
    assert seen[TILED] == {1}
    assert seen[NAIVE] == before  # and the setting is put back afterwards
    assert {i["num_threads"] for i in controller.select(user_api="blas").info()} == before
