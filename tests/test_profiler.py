"""Measured traffic without a GPU: a machine that cannot sample says why in one typed reason,
and sampled counters add up per kernel exactly (synthetic samples)."""

from __future__ import annotations

import itertools
import types
from typing import ClassVar

import pytest

from gpu.backends.factory import cuda_available
from gpu.counters import profiler
from gpu.counters.profiler import (
    DRAM_READ,
    DRAM_WRITE,
    ELAPSED_CYCLES,
    L2_BYTES,
    METRICS,
    TENSOR_CYCLES,
    XU_INSTRUCTIONS,
    ProfilerUnavailable,
    Sample,
)
from gpu.results import STRIP_MAX_POINTS


def sample(t0: int, dt: int = 20_000, **values: float) -> Sample:
    names = {
        DRAM_READ: "read",
        DRAM_WRITE: "write",
        L2_BYTES: "l2",
        TENSOR_CYCLES: "tensor",
        XU_INSTRUCTIONS: "xu",
        ELAPSED_CYCLES: "cycles",
    }
    return Sample(t0, t0 + dt, tuple(float(values.get(names[m], 0.0)) for m in METRICS))


def window(busy: int, idle_edges: int = 2, **values: float) -> list[Sample]:
    """`idle_edges` idle samples, `busy` samples with `values`, `idle_edges` idle samples."""
    out, t = [], 1_000_000
    for i in range(busy + 2 * idle_edges):
        active = idle_edges <= i < idle_edges + busy
        out.append(sample(t, cycles=39_600, **(values if active else {})))
        t += 20_000
    return out


# ---------------------------------------------------------------------------------------------
# Unavailable: one typed reason, once


def _cupti_python_installed() -> bool:
    from importlib import metadata

    try:
        metadata.version("cupti-python")
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(cuda_available(), reason="this machine has a GPU")
def test_a_machine_without_a_gpu_or_cupti_gets_one_typed_reason():
    reason = profiler.unavailable_reason()
    assert isinstance(reason, ProfilerUnavailable)
    assert reason.kind in {profiler.NO_DEVICE, profiler.NOT_INSTALLED}
    assert str(reason) and "\n" not in str(reason)
    assert profiler.unavailable_reason() is reason  # checked once, then remembered


@pytest.mark.skipif(_cupti_python_installed(), reason="cupti-python is installed here")
def test_loading_cupti_without_cupti_python_says_what_to_install():
    with pytest.raises(ProfilerUnavailable) as info:
        profiler.load_cupti()
    assert info.value.kind == profiler.NOT_INSTALLED
    assert "cupti-python" in str(info.value)
    with pytest.raises(ProfilerUnavailable) as again:
        profiler.load_cupti()
    assert again.value is info.value


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (PermissionError("Insufficient privileges"), profiler.PERMISSION),
        (ValueError("Requested PM sampling configuration is not supported."), profiler.UNSUPPORTED),
        (RuntimeError("PM sampling is already enabled on this device."), profiler.BUSY),
        (MemoryError("Record overflow in the hardware buffer."), profiler.INCOMPLETE),
        (OSError("something else"), profiler.ERROR),
    ],
)
def test_cupti_failures_become_typed_reasons(error, kind):
    reason = profiler._reason(error, "enabling PM sampling")
    assert reason.kind == kind and str(reason).startswith("enabling PM sampling")


def test_a_cupti_status_code_names_its_reason():
    class CuptiError(Exception):
        def __init__(self, name: str) -> None:
            self.status = types.SimpleNamespace(name=name)

    assert profiler._reason(CuptiError("ERROR_INSUFFICIENT_PRIVILEGES"), "x").kind == "permission"
    assert profiler._reason(CuptiError("ERROR_NOT_SUPPORTED"), "x").kind == "unsupported"
    assert profiler._reason(CuptiError("ERROR_INVALID_DEVICE"), "x").kind == "no_device"


def test_the_wheel_matching_cupti_python_is_loaded_first(tmp_path, monkeypatch):
    """Several nvidia-cuda-cupti wheels (PyTorch's older one, ours): the one with
    cupti-python's major.minor wins, newest first among equals."""
    from importlib import metadata

    def wheel(version: str):
        folder = tmp_path / version / "nvidia" / "cu13" / "lib"
        folder.mkdir(parents=True)
        (folder / "libcupti.so.13").write_bytes(b"")
        return types.SimpleNamespace(
            version=version,
            files=["nvidia/cu13/lib/libcupti.so.13"],
            locate_file=lambda f, root=tmp_path / version: root / f,
        )

    dists = [wheel("13.0.85"), wheel("13.5.25"), wheel("13.4.92"), wheel("13.4.58")]

    def distributions(name=None):
        return iter(dists if name == "nvidia-cuda-cupti" else [])

    monkeypatch.setattr(metadata, "distributions", distributions)
    monkeypatch.setattr(metadata, "version", lambda name: "13.4.0")
    ranked = [version for version, _ in profiler.wheel_library_dirs()]
    assert ranked == ["13.4.92", "13.4.58", "13.5.25", "13.0.85"]


# ---------------------------------------------------------------------------------------------
# Samples add up


def test_per_launch_counters_are_the_window_sums_over_the_launches():
    windows = [
        window(5, read=1e6, write=2e5, l2=4e6, tensor=1e4, xu=300),
        window(5, read=3e6, write=2e5, l2=4e6, tensor=1e4, xu=300),
    ]
    t = profiler.summarize("flash_fwd", windows, 20_000, sms=132)
    assert t.launches == 2 and t.sample_interval_ns == 20_000
    assert t.dram_read_bytes == 10_000_000  # (5e6 + 15e6) / 2
    assert t.dram_write_bytes == 1_000_000 and t.l2_bytes == 20_000_000
    assert t.tensor_active_cycles == 50_000 and t.xu_warp_instructions == 1_500
    assert t.elapsed_cycles == 9 * 39_600  # idle edges count as elapsed time
    assert t.window_ns == 9 * 20_000


def test_the_strip_leaves_out_the_idle_edges_and_keeps_exact_means():
    samples = window(4, read=2e6, write=0, l2=1e6, tensor=39_600 * 66)
    strip = profiler.strip_from_samples(samples, sms=132)
    assert len(strip.t_us) == 4
    assert strip.dram_gbs == (100.0,) * 4  # 2e6 B per 20 µs
    assert strip.tensor_active == (0.5,) * 4
    assert strip.t_us[0] == 10.0 and strip.t_us[-1] == 70.0


def test_a_long_kernels_strip_is_thinned_to_the_cap_with_the_same_mean():
    samples = window(1000, read=2e6, l2=1e6, tensor=0)
    strip = profiler.strip_from_samples(samples, sms=132)
    assert len(strip.t_us) <= STRIP_MAX_POINTS
    assert all(v == pytest.approx(100.0) for v in strip.dram_gbs)
    assert list(strip.t_us) == sorted(strip.t_us)


def test_lost_samples_show_up_as_gaps():
    samples = window(3, read=1.0, l2=1.0)
    assert profiler.window_gaps_ns(samples) == 0
    gappy = [*samples[:2], *[Sample(s.start_ns + 50_000, s.end_ns + 50_000, s.values)
                             for s in samples[2:]]]  # fmt: skip
    assert profiler.window_gaps_ns(gappy) == 50_000
    seams = [Sample(s.start_ns + 8 * i, s.end_ns + 8 * i, s.values) for i, s in enumerate(samples)]
    assert profiler.window_gaps_ns(seams, min_gap_ns=10_000) == 0  # a timer's seams are no loss


def test_an_empty_window_is_an_incomplete_measurement():
    with pytest.raises(ProfilerUnavailable) as info:
        profiler.summarize("softmax", [[]], 20_000, 132)
    assert info.value.kind == profiler.INCOMPLETE


def test_long_kernels_get_a_longer_interval_so_windows_stay_small():
    assert profiler.interval_for(100_000) == profiler.DEFAULT_INTERVAL_NS
    long = profiler.interval_for(870e6)  # the readable kernel at N = 65536
    assert 870e6 / long <= profiler.MAX_SAMPLES_PER_WINDOW and long % 1000 == 0


# ---------------------------------------------------------------------------------------------
# The sampler's own logic, on a stand-in for cupti.pm_sampling


class CounterData(list):
    """What Collector.decode returns: iterable samples and the metric names."""

    metrics: ClassVar[list] = []


class FakeCollector:
    """Counts what `run` reports as device work between start() and stop(), and decodes it
    into an idle sample, four busy ones and an idle one, as PM sampling would."""

    events: ClassVar[list] = []
    work: ClassVar[dict] = {"read": 0.0}
    fail_enable: Exception | None = None
    fail_decode: Exception | None = None

    def __init__(self, device_index: int = 0) -> None:
        self.device_index = device_index

    def enable(self) -> None:
        if FakeCollector.fail_enable:
            raise FakeCollector.fail_enable
        self.events.append("enable")

    def configure(self, *, metrics, hardware_buffer_size, sampling_interval, trigger_mode):
        self.metrics, self.interval = list(metrics), sampling_interval
        self.events.append(("configure", sampling_interval, trigger_mode))

    def start(self) -> None:
        self.work["read"] = 0.0
        self.events.append("start")

    def stop(self) -> None:
        self.events.append("stop")

    def disable(self) -> None:
        self.events.append("disable")

    def decode(self, max_samples: int) -> CounterData:
        if FakeCollector.fail_decode:
            raise FakeCollector.fail_decode
        # As the hardware does: the first sample of a window starts at timestamp 0 and counts
        # everything since the counters' previous read (here: 250 MB of an L2 flush).
        values = [250e6, 0.0, *[self.work["read"] / 4] * 4, 0.0]
        t0, dt = 5_000_000, self.interval
        data = CounterData(
            types.SimpleNamespace(
                start_timestamp=0 if i == 0 else t0 + i * dt,
                end_timestamp=t0 + (i + 1) * dt,
                metric_values=[v, v / 10, 2 * v, 0.0, 0.0, 39_600.0],
            )
            for i, v in enumerate(values)
        )
        data.metrics = self.metrics
        return data


@pytest.fixture
def fake_cupti(monkeypatch):
    FakeCollector.events = []
    FakeCollector.fail_enable = FakeCollector.fail_decode = None
    module = types.SimpleNamespace(
        Collector=FakeCollector, TriggerMode=types.SimpleNamespace(GPU_TIME_INTERVAL="time")
    )
    monkeypatch.setattr(profiler, "load_cupti", lambda: module)
    return FakeCollector


def test_the_sampler_flushes_outside_the_window_and_averages_per_launch(fake_cupti):
    order = []

    def run():
        order.append("run")
        fake_cupti.work["read"] += 8e6

    with profiler.PmSampler(0, sms=132) as sampler:
        t = sampler.measure("softmax", run, lambda: None, lambda: order.append("flush"), 3)
    assert order == ["flush", "run"] * 3
    assert t.dram_read_bytes == 8_000_000 and t.dram_write_bytes == 800_000
    assert t.l2_bytes == 16_000_000 and t.launches == 3
    events = fake_cupti.events
    assert events[0] == "enable" and events[1] == ("configure", 20_000, "time")
    assert events.count("start") == events.count("stop") == 3 and events[-1] == "disable"


def test_the_first_sample_of_a_window_counts_from_the_previous_read_and_is_dropped():
    stale = sample(0, 5_000_000, read=250e6)  # starts at 0: everything since the last read
    kept = profiler.window_samples([stale, *window(3, read=1e6)])
    assert stale not in kept
    assert sum(s.value(DRAM_READ) for s in kept) == 3e6


def test_a_refused_enable_is_a_typed_reason(fake_cupti):
    fake_cupti.fail_enable = PermissionError("Insufficient privileges")
    with pytest.raises(ProfilerUnavailable) as info, profiler.PmSampler(0):
        pass
    assert info.value.kind == profiler.PERMISSION


def test_a_record_overflow_is_an_incomplete_measurement_and_gives_the_counters_back(fake_cupti):
    fake_cupti.fail_decode = MemoryError("Record overflow in the hardware buffer.")
    with profiler.PmSampler(0) as sampler, pytest.raises(ProfilerUnavailable) as info:
        sampler.measure("flash_fwd", lambda: None, lambda: None)
    assert info.value.kind == profiler.INCOMPLETE
    assert fake_cupti.events[-1] == "disable"


# ---------------------------------------------------------------------------------------------
# Each sampled figure, by hand


def test_only_the_first_sample_and_any_that_start_at_zero_are_dropped():
    a, b, c = sample(0), sample(40_000), sample(60_000)
    assert profiler.window_samples([a, b, c]) == [b, c]
    assert profiler.window_samples([b, c]) == [c]  # the first decoded always counts from before
    assert profiler.window_samples([a, b, sample(0), c]) == [b, c]


def test_a_gap_counts_as_lost_only_when_longer_than_the_allowed_seam():
    s = [sample(0, 20_000), sample(30_000, 20_000), sample(50_000, 20_000)]
    assert profiler.window_gaps_ns(s) == 10_000
    assert profiler.window_gaps_ns(s, min_gap_ns=9_999) == 10_000
    assert profiler.window_gaps_ns(s, min_gap_ns=10_000) == 0
    assert profiler.window_gaps_ns([sample(0, 20_000), sample(20_001, 20_000)]) == 1  # every ns


def test_the_kernels_span_leaves_out_edges_at_or_below_five_percent_of_the_busiest_sample():
    edges = [sample(20_000, read=4e4), sample(40_000, l2=5e4)]  # 4 % and exactly 5 %
    busy = [sample(60_000, read=1e6), sample(80_000, l2=5.1e4), sample(100_000, read=1e6)]
    tail = [sample(120_000, write=3e4)]
    span = profiler.active_span([*edges, *busy, *tail])
    assert list(span) == busy  # 5.1 % is the kernel's; its L2 bytes count as its traffic
    quiet = [sample(0), sample(20_000)]
    assert list(profiler.active_span(quiet)) == quiet  # nothing busy: every sample
    assert list(profiler.active_span([])) == []


def test_a_thinned_strip_point_is_the_exact_mean_of_the_samples_it_merges():
    samples = [
        sample(1_000_000 + 20_000 * i, read=r, write=w, cycles=40_000, tensor=t)
        for i, (r, w, t) in enumerate(
            [(1e6, 0, 0), (2e6, 1e6, 80_000), (3e6, 0, 0), (4e6, 2e6, 40_000), (5e6, 0, 0)]
        )
    ]
    strip = profiler.strip_from_samples(samples, sms=2, max_points=2)
    # ceil(5 / 2) = 3 samples per point: [0..2] and [3..4]
    assert strip.t_us == (30.0, 80.0)  # mid-points, µs from the first sample's start
    assert strip.dram_gbs == (round(7e6 / 60_000, 3), round(11e6 / 40_000, 3))
    assert strip.tensor_active == (round(80_000 / (120_000 * 2), 4), round(40_000 / 160_000, 4))
    assert profiler.strip_from_samples([], sms=2).t_us == ()
    zero = profiler.strip_from_samples([sample(0, read=1e6, cycles=0)], sms=2)
    assert zero.tensor_active == (0.0,)


def test_per_launch_counters_round_the_mean_and_the_window_is_the_mean_span():
    one = [sample(0, 20_000, read=1.0, cycles=10), sample(20_000, 20_000, read=2.0, cycles=10)]
    two = [sample(0, 20_000, read=2.0, cycles=11)]
    t = profiler.summarize("k", [one, two], 20_000, sms=1)
    assert t.dram_read_bytes == round(5 / 2) and t.elapsed_cycles == round(31 / 2)
    assert t.window_ns == 30_000 and t.launches == 2
    assert t.strip.t_us == (10.0, 30.0)  # the first window's strip


def test_the_interval_grows_in_whole_microseconds_past_a_thousand_samples():
    assert profiler.interval_for(20e6) == 20_000
    assert profiler.interval_for(20.5e6) == 21_000
    assert profiler.interval_for(870e6) == 870_000
    assert profiler.interval_for(1000.5e6) == 1_001_000  # 1000.5 µs per sample: 1001 µs
    assert profiler.interval_for(10e6, base_ns=5_000) == 10_000
    assert profiler.interval_for(1e6, base_ns=5_000) == 5_000


def test_versions_compare_by_their_numbers():
    assert profiler._version_key("13.0.85") == (13, 0, 85)
    assert profiler._version_key("12.4rc1") == (12, 41)
    assert profiler._version_key("x.2") == (0, 2)


class ScriptedCollector:
    """A stand-in for cupti's Collector that decodes the samples a test gives it."""

    samples: ClassVar[list] = []
    metrics_decoded: ClassVar[list | None] = None
    asked: ClassVar[list] = []

    def __init__(self, device_index: int = 0) -> None:
        pass

    def enable(self) -> None: ...
    def disable(self) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...

    def configure(self, *, metrics, hardware_buffer_size, sampling_interval, trigger_mode):
        self.metrics = list(metrics)
        ScriptedCollector.asked.append(("buffer", hardware_buffer_size))

    def decode(self, max_samples: int) -> CounterData:
        ScriptedCollector.asked.append(("max_samples", max_samples))
        data = CounterData(
            types.SimpleNamespace(start_timestamp=a, end_timestamp=b, metric_values=list(v))
            for a, b, v in self.samples
        )
        data.metrics = self.metrics_decoded or self.metrics
        return data


@pytest.fixture
def scripted(monkeypatch):
    ScriptedCollector.asked = []
    ScriptedCollector.metrics_decoded = None
    module = types.SimpleNamespace(
        Collector=ScriptedCollector, TriggerMode=types.SimpleNamespace(GPU_TIME_INTERVAL="t")
    )
    monkeypatch.setattr(profiler, "load_cupti", lambda: module)
    clock = itertools.cycle([0.0, 0.001])  # each window takes 1 ms of host time
    slept = []
    monkeypatch.setattr(
        profiler, "time",
        types.SimpleNamespace(perf_counter=lambda: next(clock), sleep=slept.append),
    )  # fmt: skip
    return ScriptedCollector, slept


def _run(samples, **kw):
    ScriptedCollector.samples = samples
    with profiler.PmSampler(0, sms=1, interval_ns=20_000, **kw) as sampler:
        return sampler.sample_window(lambda: None, lambda: None)


def test_a_window_waits_two_intervals_each_side_and_decodes_half_as_many_again_plus_64(scripted):
    collector, slept = scripted
    values = (1.0, 0.0, 0.0, 0.0, 0.0, 10.0)
    got = _run([(0, 20_000, values), (20_000, 40_000, values), (40_000, 60_000, values)])
    assert [s.start_ns for s in got] == [20_000, 40_000]
    assert slept == [2 * 20_000 * 1e-9] * 2
    # 1 ms of host time at 20 µs: 50 samples, × 1.5, + 64
    assert ("max_samples", 139) in collector.asked and ("buffer", 256 << 20) in collector.asked


def test_a_window_with_a_gap_over_half_an_interval_is_incomplete(scripted):
    v = (1.0, 0.0, 0.0, 0.0, 0.0, 10.0)
    seam = [(0, 1, v), (20_000, 40_000, v), (50_000, 70_000, v)]  # a 10 µs gap: half, allowed
    assert len(_run(seam)) == 2
    with pytest.raises(ProfilerUnavailable) as info:
        _run([(0, 1, v), (20_000, 40_000, v), (50_001, 70_000, v)])
    assert info.value.kind == profiler.INCOMPLETE and "10001 ns of 50000 ns" in str(info.value)


def test_a_decode_of_other_metrics_or_no_samples_is_refused(scripted):
    collector, _ = scripted
    v = (1.0, 0.0, 0.0, 0.0, 0.0, 10.0)
    with pytest.raises(ProfilerUnavailable) as info:
        _run([(0, 1, v)])  # only the stale first sample
    assert info.value.kind == profiler.INCOMPLETE
    collector.metrics_decoded = ["other"]
    with pytest.raises(ProfilerUnavailable) as info:
        _run([(0, 1, v), (20_000, 40_000, v)])
    assert info.value.kind == profiler.ERROR
    with pytest.raises(ValueError), profiler.PmSampler(0, metrics=("x",)) as s:
        s.measure("k", lambda: None, lambda: None)


def test_measuring_no_launches_still_samples_one(scripted):
    v = (5.0, 0.0, 0.0, 0.0, 0.0, 10.0)
    ScriptedCollector.samples = [(0, 1, v), (20_000, 40_000, v)]
    with profiler.PmSampler(0, sms=1) as sampler:
        t = sampler.measure("k", lambda: None, lambda: None, launches=0)
    assert t.launches == 1 and t.dram_read_bytes == 5


def test_a_machine_whose_cupy_sees_no_device_is_told_so(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setattr(profiler, "_checked", {})
    reason = profiler.unavailable_reason(3)
    assert reason.kind == profiler.NO_DEVICE and "no CUDA device" in str(reason)


def test_cupti_python_without_a_cupti_wheel_or_preload_says_which_wheel_to_install(monkeypatch):
    from importlib import metadata

    monkeypatch.setattr(metadata, "version", lambda name: "13.4.0")
    monkeypatch.setattr(profiler, "wheel_library_dirs", lambda: [])
    monkeypatch.setenv("LD_PRELOAD", "")
    with pytest.raises(ProfilerUnavailable) as info:
        profiler._load()
    assert info.value.kind == profiler.NOT_INSTALLED
    assert "no nvidia-cuda-cupti wheel with libcupti was found" in str(info.value)


def test_a_kernel_is_measured_over_three_launches_by_default(scripted):
    v = (6.0, 0.0, 0.0, 0.0, 0.0, 10.0)
    ScriptedCollector.samples = [(0, 1, v), (20_000, 40_000, v)]
    with profiler.PmSampler(0, sms=1) as sampler:
        t = sampler.measure("k", lambda: None, lambda: None)
    assert t.launches == 3 and t.dram_read_bytes == 6


def test_another_libcupti_already_loaded_is_named(tmp_path, monkeypatch):
    from importlib import metadata

    (tmp_path / "libcupti.so.13").write_bytes(b"")
    monkeypatch.setattr(metadata, "version", lambda name: "13.4.0")
    monkeypatch.setattr(profiler, "wheel_library_dirs", lambda: [("13.4.92", tmp_path)])
    monkeypatch.setattr(profiler, "loaded_libcupti", lambda: ["/opt/torch/lib/libcupti.so.12"])
    monkeypatch.setenv("LD_PRELOAD", "")
    with pytest.raises(ProfilerUnavailable) as info:
        profiler._load()
    assert info.value.kind == profiler.LIBRARY
    assert "(/opt/torch/lib/libcupti.so.12)" in str(info.value) and "13.4.92" in str(info.value)
