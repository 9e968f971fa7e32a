"""The Ring tab's Qt-free model: the schedule on demand, the clocks, the score matrix, the
Devices choices, the ring runs and the model's curves."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from ring_recording import recording, ring_results, widest_ring

from app.state.app_state import AppState
from app.state.family import cache_config, family
from app.state.recorded_run import REPLAY
from app.state.ring.curves import ring_curves
from app.state.ring.devices import (
    MEASURED,
    MODEL,
    RECORDED,
    SIMULATED,
    SIMULATED_MAX,
    backend_for,
    device_choices,
    mode_for,
    parse_devices,
    restart_needed,
)
from app.state.ring.playback import (
    ACTIVE,
    DONE,
    FULL_RING_MAX,
    MASKED,
    MATRIX_MAX,
    MEASURED_CLOCK,
    PENDING,
    RingPlayer,
    cell_states,
    device_step,
    measured_clock,
    model_clock,
    ring_frame,
    schedule_clock,
    score_matrix,
    shown_devices,
)
from app.state.ring.runs import FUSED_KERNELS, RingRun, RingRuns
from app.state.ring.runs import RECORDED as RUN_RECORDED
from app.state.ring.runs import SIMULATED as RUN_SIMULATED
from app.state.ring.story import device_word, step_caption, timeline_summary
from app.state.runs import BackendReady
from gpu.algorithms import NAIVE, RING, TILED, TILED_WGMMA, TILED_WS
from gpu.backend_factory import BACKENDS
from gpu.backends.backend import RunOptions
from gpu.backends.cpu_backend import CpuBackend
from gpu.config import AttentionConfig
from gpu.model.links import DEFAULT_TOPOLOGY
from gpu.results import DeviceInfo, KernelTime, RunResult
from gpu.ring.backend import RingBackend
from gpu.ring.model import DEVICE_COUNTS, MeasuredThroughput, RooflineThroughput, predict
from gpu.ring.schedule import SKIPPED, ring_schedule

# --------------------------------------------------------------------------------------------
# The schedule on demand


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq_len", [1000, 3072])
def test_each_device_step_is_the_engine_schedules_entry(causal, seq_len):
    for devices in range(1, 7):
        config = AttentionConfig(seq_len=seq_len, causal=causal)
        schedule = ring_schedule(config, devices)
        for s, step in enumerate(schedule.steps):
            for d, entry in enumerate(step):
                assert device_step(config, devices, d, s) == entry


def test_a_ring_beyond_sixteen_devices_is_drawn_by_its_two_ends():
    assert shown_devices(FULL_RING_MAX) == tuple(range(FULL_RING_MAX))
    ends = shown_devices(1024)
    assert len(ends) <= FULL_RING_MAX
    assert ends[0] == 0 and ends[-1] == 1023
    assert list(ends) == sorted(set(ends))


def test_a_frame_of_1024_devices_builds_only_the_drawn_devices_steps(monkeypatch):
    import gpu.ring.schedule

    def whole_schedule(*_a, **_k):
        raise AssertionError("a frame must not build the whole schedule")

    monkeypatch.setattr(gpu.ring.schedule, "ring_schedule", whole_schedule)
    config = AttentionConfig(seq_len=1 << 20, causal=True)
    clock = model_clock(predict(config, 1024))
    frame = ring_frame(config, clock, clock.span_ms / 3)
    assert frame.summarised and len(frame.nodes) == len(shown_devices(1024))
    assert 0 < frame.step < 1024
    matrix = score_matrix(1024, True)
    assert matrix.side == MATRIX_MAX and matrix.sampled
    states = cell_states(matrix, clock, clock.span_ms / 3)
    assert {DONE, PENDING, MASKED} <= set(np.unique(states))


# --------------------------------------------------------------------------------------------
# Clocks


def test_the_measured_clock_replays_every_recorded_event():
    result = widest_ring()
    ring = result.ring
    clock = measured_clock(ring)
    assert clock is not None and clock.source == MEASURED_CLOCK
    assert clock.span_ms == pytest.approx(max(e.end_ms for e in ring.timeline))
    for e in ring.timeline:
        mid = (e.start_ms + e.end_ms) / 2
        step, fraction = clock.progress(e.stream, e.device, mid)
        assert step == e.step
        assert fraction == pytest.approx(0.5, abs=1e-6)
    assert (clock.done_steps(clock.span_ms) == ring.devices).all()


def test_a_simulated_run_has_no_clock_of_its_own():
    result = RingBackend("cpu", 2).run(AttentionConfig(seq_len=64), "ring", RunOptions(repeats=1))
    assert result.ring is not None and not result.ring.timeline
    assert measured_clock(result.ring) is None


def test_the_model_clock_starts_each_step_when_the_slower_of_compute_and_transfer_ends():
    config = AttentionConfig(seq_len=1 << 16, causal=True)
    prediction = predict(config, 8)
    clock = model_clock(prediction)
    c0 = prediction.first_step_compute_s * 1e3
    c = prediction.step_compute_s * 1e3
    x = prediction.step_transfer_s * 1e3
    starts = clock.compute[0, :, 0]
    assert starts[1] == pytest.approx(max(c0, x))
    assert np.diff(starts[1:]) == pytest.approx(np.full(6, max(c, x)))
    assert np.isnan(clock.comm[0, -1]).all()  # the last step sends nothing


@pytest.mark.parametrize("causal", [False, True])
def test_after_each_step_the_matrix_shows_exactly_the_pairs_computed_so_far(causal):
    config = AttentionConfig(seq_len=96, causal=causal)
    devices = 4
    schedule = ring_schedule(config, devices)
    matrix = score_matrix(devices, causal)
    clock = schedule_clock(devices)
    marks = clock.boundaries()
    for s in range(devices + 1):
        t = marks[s] if s < devices else clock.span_ms
        states = cell_states(matrix, clock, t)
        done = {(int(a), int(b)) for a, b in zip(*np.nonzero(states == DONE), strict=True)}
        expected = {
            (p.q_chunk, p.k_chunk)
            for step in schedule.steps[:s]
            for entry in step
            for p in entry.computed
        }
        assert done == expected
        masked = {(int(a), int(b)) for a, b in zip(*np.nonzero(states == MASKED), strict=True)}
        skipped = {
            (p.q_chunk, p.k_chunk)
            for step in schedule.steps
            for entry in step
            for p in entry.pairs
            if p.kind == SKIPPED
        }
        assert masked == skipped
        if s < devices:
            active = states == ACTIVE
            assert active.sum() == sum(len(e.computed) for e in schedule.steps[s])


def test_the_player_steps_through_every_step_and_stops_at_the_end():
    wide = widest_ring()
    player = RingPlayer(wide.config, measured_clock(wide.ring))
    steps = []
    while not player.at_end:
        player.step_forward()
        steps.append(player.frame().step)
    assert steps == sorted(steps) and steps[-1] == player.clock.devices
    player.step_back()
    assert player.t < player.span
    player.play()
    assert player.advance(1.0)
    while player.playing:
        player.advance(1.0)
    assert player.at_end
    player.play()  # playing again starts over
    assert player.t == 0.0


# --------------------------------------------------------------------------------------------
# Devices


def _ready(kind: str, backend=None) -> BackendReady:
    info = DeviceInfo(kind, f"a {kind} device", 1 << 30, 1 << 29)
    return BackendReady(1, kind, backend or object(), f"{kind}:x", info, ("naive",), 0.0)


def test_on_two_gpus_one_and_two_are_measured_and_larger_p_is_model_only(monkeypatch):
    import app.state.ring.devices as rd

    monkeypatch.setitem(rd._gpus_present, "cuda", 2)
    choices = device_choices("cuda")
    modes = {c.devices: c.mode for c in choices}
    assert modes[1] == modes[2] == MEASURED
    assert all(modes[p] == MODEL for p in modes if p > 2)
    assert max(modes) == 1024
    assert [c.label for c in choices if c.devices == 64] == ["64 · model only"]


def test_the_cpu_backend_simulates_up_to_its_limit_and_models_beyond():
    modes = {c.devices: c.mode for c in device_choices("cpu")}
    assert all(modes[p] == SIMULATED for p in range(2, SIMULATED_MAX + 1))
    assert all(modes[p] == MODEL for p in modes if p > SIMULATED_MAX)
    assert mode_for(SIMULATED_MAX + 1, "cpu") == MODEL


def test_a_recorded_run_offers_its_p_as_recorded():
    modes = {c.devices: c.mode for c in device_choices(REPLAY, recorded=(1, 2, 4), current=3)}
    assert modes[2] == modes[4] == RECORDED
    assert modes[3] == modes[8] == MODEL


def test_the_runner_gets_the_ring_backend_for_a_p_that_runs_here_and_one_device_otherwise():
    singles = []

    def single(request):
        singles.append(request.name)
        return CpuBackend()

    make = BACKENDS.with_makers({"cpu": single})
    ring = backend_for("cpu", 4, make)
    assert isinstance(ring, RingBackend) and ring.devices == 4 and ring.name == "cpu"
    assert not singles
    assert not isinstance(backend_for("cpu", 1, make), RingBackend)
    assert not isinstance(backend_for("cpu", SIMULATED_MAX * 2, make), RingBackend)
    assert singles == ["cpu", "cpu"]


def test_a_new_p_restarts_the_backend_only_when_the_span_changes():
    ring = RingBackend("cpu", 2)
    s = AppState(backend=_ready("cpu", ring), devices=2)
    assert not restart_needed(s)
    assert restart_needed(AppState(backend=_ready("cpu", ring), devices=3))
    assert restart_needed(AppState(backend=_ready("cpu", ring), devices=1))
    single = _ready("cpu", CpuBackend())
    assert not restart_needed(AppState(backend=single, devices=512))  # model only
    assert not restart_needed(AppState(backend=_ready(REPLAY), devices=2))
    assert restart_needed(AppState(backend=None, devices=2))


def test_saved_devices_are_read_back_only_when_valid():
    assert parse_devices("8") == 8
    assert parse_devices(1024) == 1024
    for bad in (None, "", "0", "2000", "two"):
        assert parse_devices(bad) is None


# --------------------------------------------------------------------------------------------
# Ring runs, words, curves


def test_a_recording_gives_its_ring_runs_and_the_one_gpu_results_beside_them():
    runs = RingRuns()
    rec = recording()
    runs.add_recording(rec, "ring.json")
    rings = ring_results()
    assert len(runs) == len({(r.config, r.ring.devices) for r in rings})
    assert all(run.kind == RUN_RECORDED and run.source == "ring.json" for run in runs.runs())
    wide = widest_ring()
    found = runs.find(wide.config.with_(block_m=128), wide.ring.devices)  # tiles do not matter
    assert found is not None and found.result.total_ms == wide.total_ms
    assert runs.kernel() == wide.ring.kernel
    throughput = runs.throughput(RooflineThroughput())
    assert throughput is not None and wide.ring.kernel in throughput.label


def one_gpu(
    algorithm: str,
    n: int,
    heads: int = 12,
    head_dim: int = 64,
    causal: bool = False,
    tiles: int = 64,
    ms: float = 1.0,
    backend: str = "cuda",
    batch: int = 1,
) -> RunResult:
    config = AttentionConfig(
        seq_len=n,
        heads=heads,
        head_dim=head_dim,
        batch=batch,
        causal=causal,
        block_m=tiles,
        block_n=tiles,
    )
    return RunResult(
        config, algorithm, backend, "gpu", kernel_times=(KernelTime("k", ms),), flops=10**12
    )


class LinearSingles:
    """The one-GPU results kept as one list scanned in full at each question (what the ring
    runs must answer alike, however they file them)."""

    def __init__(self) -> None:
        self.kept: dict[tuple[AttentionConfig, str], tuple[RunResult, bool]] = {}

    def add(self, result: RunResult, recorded: bool = False) -> None:
        if result.oom or result.total_ms is None or result.ring is not None:
            return
        if result.backend != "cuda" or result.algorithm not in FUSED_KERNELS:
            return
        key = (cache_config(result.config, result.algorithm), result.algorithm)
        self.kept[key] = (result, recorded or result.recorded)

    def kernel(self, runs: RingRuns) -> str | None:
        measured = {a for _, a in self.kept}
        for run in reversed(runs.runs()):
            if run.measurement.kernel in measured:
                return run.measurement.kernel
        return next((k for k in FUSED_KERNELS if k in measured), None)

    def singles(self, kernel: str | None, config: AttentionConfig) -> list[RunResult]:
        fam = family(cache_config(config, RING))
        out = [
            r
            for (c, a), (r, _) in self.kept.items()
            if a == kernel and family(cache_config(c, RING)) == fam
        ]
        return sorted(out, key=lambda r: r.config.seq_len)

    def throughput(self, kernel: str | None) -> MeasuredThroughput | None:
        if kernel is None:
            return None
        mine = [(r, rec) for (_, a), (r, rec) in self.kept.items() if a == kernel]
        how = "recorded" if any(rec for _, rec in mine) else "measured"
        return MeasuredThroughput.from_results(
            [r for r, _ in mine], kernel, f"{kernel} on one GPU, {how}"
        )


def test_one_gpu_results_filed_by_family_answer_as_a_full_scan_does():
    runs, linear, rec = RingRuns(), LinearSingles(), recording()
    runs.add_recording(rec, "ring.json")
    runs.kernel()  # sorts the recording's one-GPU results in
    for r in rec.results:
        linear.add(r, recorded=True)
    families = [
        {"heads": 12, "head_dim": 64, "causal": False},
        {"heads": 12, "head_dim": 64, "causal": True},
        {"heads": 6, "head_dim": 128, "causal": False},
        {"heads": 24, "head_dim": 64, "causal": True, "batch": 2},
    ]
    made = []
    for i, fam in enumerate(families):
        for algorithm in (TILED_WS, TILED_WGMMA, TILED):
            for n in (1024, 3072, 2048, 8192):
                made.append((one_gpu(algorithm, n, **fam, ms=1.0 + i), i % 2 == 0))
        made.append((one_gpu(TILED, 2048, **fam, tiles=128, ms=0.5), False))  # other tiles
    made.append((one_gpu(NAIVE, 1024), False))  # not fused
    made.append((one_gpu(TILED_WS, 1024, backend="cpu"), False))  # not a GPU
    for result, recorded in made:
        kept = result.backend == "cuda" and result.algorithm != NAIVE
        assert runs.add(result, recorded=recorded) == kept
        linear.add(result, recorded)
    asked = [AttentionConfig(seq_len=n, **fam) for fam in families for n in (1024, 2048)]
    asked += [c.with_(block_m=128, block_n=128) for c in asked]
    asked.append(AttentionConfig(heads=3))  # a family with nothing measured

    def same() -> None:
        kernel = linear.kernel(runs)
        assert runs.kernel() == kernel
        for config in asked:
            singles = runs.singles(config)
            assert [id(r) for r in singles] == [id(r) for r in linear.singles(kernel, config)]
        got, want = runs.throughput(RooflineThroughput()), linear.throughput(kernel)
        assert (got is None) == (want is None)
        if got is not None:
            assert (got.points, got.label) == (want.points, want.label)

    same()
    assert runs.kernel() == TILED_WS
    wide = widest_ring()
    for kernel in (TILED_WGMMA, TILED):  # the newest ring's kernel calibrates
        runs.add(replace(wide, ring=replace(wide.ring, kernel=kernel)))
        same()
        assert runs.kernel() == kernel
    assert "recorded" in runs.throughput(RooflineThroughput()).label
    for result, _ in made:  # measured again here: the newest of each is kept, not recorded
        again = replace(result, kernel_times=(KernelTime("k", 0.25),))
        runs.add(again)
        linear.add(again)
    same()
    assert "measured" in runs.throughput(RooflineThroughput()).label


def test_cpu_results_of_single_device_algorithms_never_calibrate_the_gpu_model():
    runs = RingRuns()
    cpu = CpuBackend().run(AttentionConfig(seq_len=128), "tiled", RunOptions(repeats=1))
    assert not runs.add(cpu)
    assert runs.throughput(RooflineThroughput()) is None
    sim = RingBackend("cpu", 2).run(AttentionConfig(seq_len=128), "ring", RunOptions(repeats=1))
    assert runs.add(sim)
    assert runs.runs()[0].kind == RUN_SIMULATED


def test_the_words_say_what_was_measured_and_what_is_model():
    wide = widest_ring()
    clock = measured_clock(wide.ring)
    word = device_word(RingRun(wide))
    text = timeline_summary(wide.ring, clock, None, word)
    assert f"on each {word}'s compute and communication streams" in text
    assert f"{wide.ring.hidden_fraction:.0%}" in text
    assert f"{wide.ring.achieved_bytes_s / 1e9:.1f} GB/s" in text
    config = AttentionConfig(seq_len=1 << 20, causal=True)
    prediction = predict(config, 64)
    text = timeline_summary(None, model_clock(prediction), prediction, "GPU")
    assert text.startswith("Model")
    frame = ring_frame(config, model_clock(prediction), 0.0)
    assert step_caption(frame, config, "GPU").startswith("Step 1 of 64")


def test_model_curves_cover_one_to_1024_devices_and_every_p_asked_for():
    config = AttentionConfig(seq_len=1 << 20, causal=True)
    curves = ring_curves(config, 6, RooflineThroughput(), DEFAULT_TOPOLOGY, (3,))
    assert [p.devices for p in curves.over_p] == sorted({*DEVICE_COUNTS, 6})
    assert {1, 2, 3, 6, 1024} <= set(curves.over_n)
    assert curves.current is not None and curves.current.devices == 6
    assert "roofline" in curves.throughput
    for p, predictions in curves.over_n.items():
        # every N leaves each device at least a row per chunk
        assert all(m.config.seq_len >= 2 * p for m in predictions)
    short = ring_curves(config.with_(seq_len=1024), 1024, RooflineThroughput(), DEFAULT_TOPOLOGY)
    assert short.current is None and max(p.devices for p in short.over_p) == 512


def test_model_curves_from_recorded_one_gpu_results_say_so():
    runs = RingRuns()
    runs.add_recording(recording())
    wide = widest_ring()
    throughput = runs.throughput(RooflineThroughput())
    curves = ring_curves(wide.config, wide.ring.devices, throughput, DEFAULT_TOPOLOGY)
    assert "measured throughput" in curves.throughput
    assert curves.current is not None and math.isfinite(curves.current.total_s)


def test_a_sequence_too_short_for_p_devices_is_said_so_instead_of_modelled():
    from app.state.ring.story import too_short_text

    config = AttentionConfig(seq_len=1024, causal=True)
    assert too_short_text(config, 512) == ""
    text = too_short_text(config, 1024)
    assert "2048 chunks" in text
    assert timeline_summary(None, schedule_clock(1024), None, "GPU", text) == text
