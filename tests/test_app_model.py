"""The app's Qt-free parts: result cache, slider scale, explain text, recorded runs, units."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.measure.explain import explain_html, s_formula
from app.state.family import cache_config
from app.state.point_inputs import PointInputs
from app.state.recorded_run import NotRecorded, RecordedBackend
from app.state.result_store import ResultStore
from app.state.seq_scale import SEQ_MAX, SEQ_MIN, default_scale, nearest_index, powers_of_two_up_to
from app.state.units import fmt_bytes
from gpu.algorithms import NAIVE, TILED, TILED_MMA
from gpu.backends.model_backend import CostModelBackend
from gpu.config import AttentionConfig
from gpu.files.recording import Recording, RecordingError, save_recording
from gpu.model.costmodel import GPUS

BASE = AttentionConfig(seq_len=1024)
KEY = "fake:Fake GPU"


def result(n: int, algorithm: str = NAIVE, **cfg):
    return CostModelBackend().run(BASE.with_(seq_len=n, **cfg), algorithm)


# ---------------------------------------------------------------------------- result store


def test_store_returns_a_cached_result_for_the_same_config_algorithm_and_backend():
    store = ResultStore()
    r = result(2048)
    store.add(r, KEY)
    assert store.get(BASE.with_(seq_len=2048), NAIVE, KEY) is r
    assert store.get(BASE.with_(seq_len=2048), TILED, KEY) is None
    assert store.get(BASE.with_(seq_len=2048), NAIVE, "cpu:other") is None
    assert store.missing(BASE.with_(seq_len=2048), (NAIVE, TILED), KEY) == [TILED]


def test_store_series_holds_one_family_sorted_by_n():
    store = ResultStore()
    for n in (4096, 512, 2048):
        store.add(result(n), KEY)
    store.add(result(1024, heads=16), KEY)  # another family
    assert [r.config.seq_len for r in store.series(BASE, NAIVE, KEY)] == [512, 2048, 4096]
    assert [r.config.seq_len for r in store.series(BASE.with_(heads=16), NAIVE, KEY)] == [1024]


def test_tile_sizes_do_not_split_the_cache_of_algorithms_that_ignore_them():
    store = ResultStore()
    store.add(result(1024), KEY)
    other_tiles = BASE.with_(block_m=128, block_n=32)
    assert store.get(other_tiles, NAIVE, KEY) is not None
    assert cache_config(other_tiles, TILED_MMA) == cache_config(BASE, TILED_MMA)
    assert cache_config(other_tiles, TILED) == other_tiles  # the readable kernel uses them


def test_a_success_holds_for_larger_budgets_and_an_oom_for_smaller_ones():
    store = ResultStore()
    ok = result(1024)
    store.add(ok, KEY, budget_bytes=10**9)
    assert store.get(BASE, NAIVE, KEY, budget_bytes=10**9) is ok
    assert store.get(BASE, NAIVE, KEY, budget_bytes=2 * 10**9) is ok
    assert store.get(BASE, NAIVE, KEY, budget_bytes=None) is ok
    assert store.get(BASE, NAIVE, KEY, budget_bytes=10**8) is None  # might not fit: re-measure
    oom = CostModelBackend().run(BASE.with_(seq_len=65536), NAIVE)
    assert oom.oom
    store.add(oom, KEY, budget_bytes=24 * 10**9)
    big = BASE.with_(seq_len=65536)
    assert store.get(big, NAIVE, KEY, budget_bytes=12 * 10**9) is oom
    assert store.get(big, NAIVE, KEY, budget_bytes=None) is None


def test_a_source_taken_over_is_held_whole_and_cleared_alone():
    mine, theirs = ResultStore(), ResultStore()
    kept = result(512)
    mine.add(kept, KEY)
    for n in (512, 1024, 2048):
        theirs.add(result(n), "replay:recording")
    mine.take_over(theirs)
    assert len(mine) == 4 and mine.backend_keys() == [KEY, "replay:recording"]
    assert [r.config.seq_len for r in mine.series(BASE, NAIVE, "replay:recording")] == [
        512, 1024, 2048,
    ]  # fmt: skip
    mine.clear("replay:recording")
    assert len(mine) == 1 and mine.results() == [kept] and mine.backend_keys() == [KEY]


def test_taking_over_a_source_already_held_merges_it_newest_first():
    mine, theirs = ResultStore(), ResultStore()
    mine.add(result(512), KEY)
    newer = result(512, batch=1)
    theirs.add(newer, KEY)
    theirs.add(result(1024), KEY)
    mine.take_over(theirs)
    assert len(mine) == 2 and mine.get(BASE.with_(seq_len=512), NAIVE, KEY) is newer


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([128, 256, 512, 1024, 2048, 4096]), min_size=1, max_size=30))
def test_store_series_is_sorted_and_unique_whatever_the_insertion_order(ns):
    store = ResultStore()
    for n in ns:
        store.add(result(n), KEY)
    got = [r.config.seq_len for r in store.series(BASE, NAIVE, KEY)]
    assert got == sorted(set(ns))
    assert len(store) == len(set(ns))


# ---------------------------------------------------------------------------- slider scale


def test_default_scale_spans_128_to_131072_in_quarter_octaves():
    scale = default_scale()
    assert scale[0] == SEQ_MIN == 128 and scale[-1] == SEQ_MAX == 131072
    assert list(scale) == sorted(set(scale))
    assert {1024, 1280, 1536, 1792, 2048} <= set(scale)
    assert len(scale) == 41


@given(st.integers(SEQ_MIN, SEQ_MAX))
def test_nearest_index_finds_the_log_closest_scale_value(n):
    scale = default_scale()
    best = scale[nearest_index(scale, n)]
    assert all(abs(math.log(best / n)) <= abs(math.log(v / n)) + 1e-12 for v in scale)


def test_sweep_grid_is_powers_of_two_up_to_n_plus_n():
    assert powers_of_two_up_to(1024) == [128, 256, 512, 1024]
    assert powers_of_two_up_to(1536) == [128, 256, 512, 1024, 1536]


# ---------------------------------------------------------------------------- explain


def test_explain_states_the_lessons_numbers_for_32k_tokens():
    config = AttentionConfig(seq_len=32768, heads=12, head_dim=64, dtype="fp16")
    rtx = GPUS["RTX 4090 24 GB"]
    html = explain_html(
        PointInputs(config, (NAIVE, TILED), rtx, rtx.name, rtx.memory_bytes, "an RTX 4090")
    )
    assert s_formula(config) == "12 × 32\u2009768² × 2 B"
    assert "25.8 GB" in html
    assert "more than an RTX 4090 has" in html
    assert "memory-bound" in html and "compute-bound" in html


def test_fmt_bytes_matches_the_design_figures():
    assert fmt_bytes(12 * 512 * 512 * 2) == "6.29 MB"
    assert fmt_bytes(12 * 4096 * 4096 * 2) == "403 MB"
    assert fmt_bytes(12 * 32768 * 32768 * 2) == "25.8 GB"


# ---------------------------------------------------------------------------- recorded run


def _recording(tmp_path, ns=(512, 2048, 8192)):
    fake = CostModelBackend(device="NVIDIA H200")
    results = tuple(fake.run(BASE.with_(seq_len=n), a) for n in ns for a in (NAIVE, TILED))
    path = tmp_path / "run.json"
    info = fake.device_info()
    save_recording(Recording(info, results, {"date": "test"}), path)
    return path


def test_recorded_backend_replays_matching_configs_and_refuses_others(tmp_path):
    backend = RecordedBackend.from_file(_recording(tmp_path))
    assert backend.seq_lens() == (512, 2048, 8192)
    assert backend.device_info().backend == "replay"
    r = backend.run(BASE.with_(seq_len=2048), TILED)
    assert r.recorded and r.config.seq_len == 2048
    with pytest.raises(NotRecorded):
        backend.run(BASE.with_(seq_len=3000), TILED)
    assert backend.first_config() == BASE.with_(seq_len=2048)


def test_a_broken_results_file_is_a_recording_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something/else"}')
    with pytest.raises(RecordingError):
        RecordedBackend.from_file(bad)


def test_a_verdict_judges_a_tile_agnostic_result_at_other_tiles_and_no_other_result():
    from profiled_results import profiled_result

    from app.state.model.cache import verdict
    from gpu.model.roofline import MEASURED

    measured = profiled_result(4096, TILED_MMA)  # at the config's default 64 × 64 tiles
    other_tiles = measured.config.with_(block_m=128, block_n=128)
    gpu = GPUS["H200 SXM 141 GB"]
    assert verdict(other_tiles, TILED_MMA, gpu, measured).bytes_source == MEASURED
    # the readable kernel uses the tiles: a result at other tiles is not this config's
    readable = profiled_result(4096, TILED)
    assert verdict(readable.config.with_(block_m=128), TILED, gpu, readable).bytes_source != (
        MEASURED
    )
