"""The NumPy ring of P virtual devices computes exact attention (against the float64 reference)
for any N, with the same split, block order and merge as the GPU ring; its results carry the
ring's measurement and survive JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpu.algorithms import RING
from gpu.backends.backend import RunOptions
from gpu.backends.cpu_backend import random_inputs, reference_attention
from gpu.config import AttentionConfig
from gpu.results import KernelTime, RunResult
from gpu.ring.sim import block_attention, merge_partial, run_ring_cpu, simulate_ring
from gpu.ring_timeline import COMM, COMPUTE, RingEvent, RingMeasurement


def reference_stats(q, k, causal):
    """float64 row max m and row sum l of exp(s - m), s = q·k/√d."""
    _b, _h, n, d = q.shape
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k.astype(np.float64)) * d**-0.5
    if causal:
        s = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, s)
    m = s.max(axis=-1)
    return m, np.exp(s - m[..., None]).sum(axis=-1)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("devices", (1, 2, 3, 4))
@pytest.mark.parametrize("seq_len", (1, 7, 50, 257))  # none of 7, 50, 257 divides by 2P for all P
def test_simulated_ring_matches_the_float64_reference(seq_len, devices, causal):
    config = AttentionConfig(seq_len=seq_len, heads=2, head_dim=16, batch=2, causal=causal)
    q, k, v = random_inputs(config, seed=seq_len + devices)
    ref = reference_attention(q, k, v, causal)
    sim64 = simulate_ring(q, k, v, config, devices, np.float64)
    assert np.max(np.abs(sim64.o - ref)) <= 1e-12
    m, l = reference_stats(q, k, causal)
    assert np.allclose(sim64.m, m, rtol=0, atol=1e-12)
    assert np.allclose(sim64.l, l, rtol=1e-12)
    sim32 = simulate_ring(q, k, v, config, devices, np.float32)
    assert sim32.o.dtype == np.float32
    assert np.max(np.abs(sim32.o - ref)) <= 2e-6


def test_merging_two_partials_equals_attention_over_both_key_sets():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 5, 8))
    k = rng.standard_normal((3, 11, 8))
    v = rng.standard_normal((3, 11, 8))
    whole = block_attention(q, k, v, False, np.float64)
    o, m, l = (x.copy() for x in block_attention(q, k[:, :4], v[:, :4], False, np.float64))
    merge_partial(o, m, l, *block_attention(q, k[:, 4:], v[:, 4:], False, np.float64))
    for got, want in zip((o, m, l), whole, strict=True):
        assert np.allclose(got, want, rtol=1e-13, atol=1e-13)


def test_a_row_that_has_seen_no_key_takes_the_partial_as_it_is():
    o = np.zeros((1, 2, 3))
    m = np.full((1, 2), -np.inf)
    l = np.zeros((1, 2))
    o_p = np.arange(6.0).reshape(1, 2, 3)
    m_p, l_p = np.array([[0.5, -1.0]]), np.array([[2.0, 3.0]])
    merge_partial(o, m, l, o_p, m_p, l_p)
    assert np.array_equal(o, o_p) and np.array_equal(m, m_p) and np.array_equal(l, l_p)


def test_the_diagonal_block_hides_keys_after_each_query():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 4, 8)) for _ in range(3))
    o, _m, l = block_attention(q, k, v, True, np.float64)
    assert np.allclose(o[0, 0], v[0, 0])  # the first query sees only the first key
    assert l[0, 0] == pytest.approx(1.0)


def test_blocks_moved_are_the_bytes_the_schedule_says_in_the_simulations_dtype():
    config = AttentionConfig(seq_len=64, heads=2, head_dim=16, causal=True, dtype="fp32")
    q, k, v = random_inputs(config, 0)
    sim = simulate_ring(q, k, v, config, 4, np.float32)
    for step_sent, step in zip(sim.bytes_sent, sim.schedule.steps, strict=True):
        assert list(step_sent) == [ds.bytes_sent for ds in step]  # fp32 both: same bytes


def test_cpu_run_gives_a_checked_ring_result_that_survives_json():
    config = AttentionConfig(seq_len=300, heads=2, head_dim=16, causal=True)
    r = run_ring_cpu(config, 3, RunOptions(warmup=0, repeats=1, check=True))
    assert r.algorithm == RING and r.backend == "cpu" and not r.oom
    assert r.agrees and r.max_abs_error < 1e-5
    assert r.total_ms > 0 and r.flops == 4 * 2 * 300 * 300 * 16 // 2
    assert r.ring is not None and r.ring.devices == 3 and r.ring.layout == "zigzag"
    assert r.ring.transport == "simulated" and len(r.ring.device_peak_bytes) == 3
    back = RunResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r


def test_a_ring_refuses_what_would_not_fit_in_ram_as_an_out_of_memory_result():
    config = AttentionConfig(seq_len=4096, heads=12)
    r = run_ring_cpu(config, 2, RunOptions(budget_bytes=1000))
    assert r.oom and "RAM" in r.message and r.ring is None


def test_single_device_results_keep_their_old_json_shape_and_old_files_load():
    r = RunResult(AttentionConfig(), "tiled", "cpu", "x", (KernelTime("flash_fwd", 1.0),))
    data = r.to_dict()
    assert "ring" not in data
    assert RunResult.from_dict(data).ring is None


# --------------------------------------------------------------------------------------------
# The measurement's derived figures, on timelines whose answers are known


def measurement(*events: RingEvent, peak: float | None = 100e9) -> RingMeasurement:
    return RingMeasurement(
        devices=2, layout="contiguous", transport="nccl", kernel="tiled_wgmma",
        timeline=events, link_peak_bytes_s=peak,
    )  # fmt: skip


def test_communication_inside_compute_is_fully_hidden():
    m = measurement(
        RingEvent(0, 0, COMPUTE, 0.0, 10.0), RingEvent(0, 0, COMM, 1.0, 3.0, 10**8),
        RingEvent(1, 0, COMPUTE, 0.0, 10.0), RingEvent(1, 0, COMM, 1.0, 5.0, 10**8),
    )  # fmt: skip
    assert m.hidden_fraction == 1.0
    assert [f for _, _, f in m.hidden_fractions()] == [1.0, 1.0]
    assert m.achieved_bytes_s == pytest.approx(2e8 / 6e-3)
    assert m.link_utilisation == pytest.approx(2e8 / 6e-3 / 100e9)


def test_communication_that_outlasts_compute_is_only_partly_hidden():
    m = measurement(
        RingEvent(0, 0, COMPUTE, 0.0, 4.0), RingEvent(0, 0, COMM, 0.0, 8.0, 1),
        RingEvent(0, 1, COMPUTE, 8.0, 9.0),
    )  # fmt: skip
    assert m.hidden_fraction == pytest.approx(0.5)
    one = measurement(RingEvent(0, 0, COMPUTE, 0.0, 4.0))
    assert one.hidden_fraction is None and one.achieved_bytes_s is None


def test_the_measurement_round_trips_through_json_with_its_derived_figures():
    m = measurement(RingEvent(0, 0, COMPUTE, 0.0, 4.0), RingEvent(0, 0, COMM, 0.0, 8.0, 16))
    data = json.loads(json.dumps(m.to_dict()))
    assert data["hidden_fraction"] == pytest.approx(0.5)
    assert RingMeasurement.from_dict(data) == m
