"""The cost-model memo: figures worked out in the model process are kept pickled, out of the
garbage collector's walks, and made into objects once, when first asked for."""

from __future__ import annotations

import gc
import pickle

import pytest

from app.state.family import family
from app.state.model import cache
from app.state.model.curves import model_curves
from gpu.algorithms import ALGORITHMS, NAIVE, TILED
from gpu.config import AttentionConfig
from gpu.model.costmodel import algorithm_cost, traffic_band
from gpu.model.gpus import GPUS

GPU = next(iter(GPUS.values()))
CONFIG = AttentionConfig(seq_len=4096, heads=7)


@pytest.fixture(autouse=True)
def empty_memo():
    cache.clear()
    yield
    cache.clear()


def _curves(config=CONFIG, warm=(CONFIG.seq_len,)):
    """Model curves worked out here as the model process does, its memo then emptied: what
    the tests read comes from the packed figures only."""
    curves = model_curves(family(config), tuple(ALGORITHMS), GPU, warm, GPU)
    cache.clear()
    return curves


def test_primed_figures_read_back_equal_to_those_computed_here():
    cache.prime(_curves().figures)
    for algorithm in (NAIVE, TILED):
        assert cache.known(CONFIG, algorithm) == algorithm_cost(CONFIG, algorithm)
        assert cache.known_band(CONFIG, algorithm, GPU) == traffic_band(CONFIG, algorithm, GPU)


def test_a_primed_figure_becomes_one_object_when_first_asked_for():
    cache.prime(_curves().figures)
    first = cache.known(CONFIG, TILED)
    assert first is not None and cache.known(CONFIG, TILED) is first
    assert cache.cost(CONFIG, TILED) is first
    band = cache.known_band(CONFIG, TILED, GPU)
    assert band is not None and cache.band(CONFIG, TILED, GPU) is band


def test_a_shapes_figures_arriving_from_the_model_process_leave_the_collector_nothing_to_walk():
    curves = _curves()
    primed = len(curves.figures.costs) + sum(len(b) for b in curves.figures.bands.values())
    assert primed > 400  # every grid point and slider stop of every algorithm
    message = pickle.dumps(curves)  # what the model process sends
    gc.collect()
    before = len(gc.get_objects())
    received = pickle.loads(message)
    cache.prime(received.figures)
    del received
    gc.collect()
    # kept: bytes under tuples of plain values, none of which the collector tracks (held as
    # objects, one shape's figures were some 8,000 tracked objects)
    assert len(gc.get_objects()) - before < 10


def test_figures_never_primed_are_computed_and_those_of_another_gpu_are_not_taken():
    other = next(g for g in GPUS.values() if g != GPU)
    cache.prime(_curves().figures)
    assert cache.known(AttentionConfig(seq_len=4096, heads=9), TILED) is None
    assert cache.known_band(CONFIG, TILED, other) is None
    assert cache.band(CONFIG, TILED, other) == traffic_band(CONFIG, TILED, other)


def test_a_store_past_its_bound_starts_afresh_rather_than_grow(monkeypatch):
    first = _curves().figures
    other = AttentionConfig(seq_len=4096, heads=9)
    second = _curves(other, ()).figures
    monkeypatch.setattr(cache, "MAX_PACKED", len(first.costs) + 10)
    cache.prime(first)
    cache.prime(second)
    assert len(cache._packed_costs) == len(second.costs)
    assert cache.known(CONFIG, TILED) is None and cache.known(other, TILED) is not None
