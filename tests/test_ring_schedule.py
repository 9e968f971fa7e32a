"""The ring's schedule: every (query, key) pair scored exactly once, blocks passed one device
along per step, the causal zigzag split balanced, and the GPU's equal-chunk rule refused with a
message that names it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpu.config import AttentionConfig
from gpu.ring.schedule import (
    CONTIGUOUS,
    DIAGONAL,
    FULL,
    SKIPPED,
    ZIGZAG,
    RingConfigError,
    check_equal_chunks,
    ring_schedule,
)

DEVICES = (1, 2, 3, 4)
SEQ_LENS = (1, 5, 7, 64, 101)


def coverage(config: AttentionConfig, devices: int) -> np.ndarray:
    """How many times the schedule scores each (query, key) pair."""
    sched = ring_schedule(config, devices)
    n = config.seq_len
    count = np.zeros((n, n), dtype=int)
    for step in sched.steps:
        for ds in step:
            for pair in ds.computed:
                q0, q1 = sched.chunk_bounds(pair.q_chunk)
                k0, k1 = sched.chunk_bounds(pair.k_chunk)
                block = np.ones((q1 - q0, k1 - k0), dtype=int)
                if pair.kind == DIAGONAL:
                    block = np.tril(block)
                count[q0:q1, k0:k1] += block
    return count


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("devices", DEVICES)
@pytest.mark.parametrize("seq_len", SEQ_LENS)
def test_every_query_key_pair_is_scored_exactly_once(seq_len, devices, causal):
    config = AttentionConfig(seq_len=seq_len, causal=causal)
    want = np.ones((seq_len, seq_len), dtype=int)
    if causal:
        want = np.tril(want)  # key j visible to query i when j <= i
    assert np.array_equal(coverage(config, devices), want)


def test_causal_pairs_are_full_below_the_diagonal_diagonal_on_it_and_skipped_above():
    sched = ring_schedule(AttentionConfig(seq_len=64, causal=True), 4)
    kinds = {FULL: 0, DIAGONAL: 0, SKIPPED: 0}
    for step in sched.steps:
        for ds in step:
            for p in ds.pairs:
                want = (
                    FULL
                    if p.k_chunk < p.q_chunk
                    else DIAGONAL
                    if p.k_chunk == p.q_chunk
                    else SKIPPED
                )
                assert p.kind == want
                kinds[p.kind] += 1
    # 8 chunks: 8 diagonal pairs, 8·7/2 = 28 full ones, and as many skipped as full
    assert kinds == {FULL: 28, DIAGONAL: 8, SKIPPED: 28}


def test_without_a_mask_every_pair_is_full_and_the_split_is_contiguous():
    sched = ring_schedule(AttentionConfig(seq_len=100), 3)
    assert sched.layout == CONTIGUOUS
    assert [sched.device_chunks(d) for d in range(3)] == [(0,), (1,), (2,)]
    assert all(p.kind == FULL for step in sched.steps for ds in step for p in ds.pairs)


def test_zigzag_pairs_an_early_chunk_with_a_late_one():
    sched = ring_schedule(AttentionConfig(seq_len=64, causal=True), 4)
    assert sched.layout == ZIGZAG
    assert [sched.device_chunks(d) for d in range(4)] == [(0, 7), (1, 6), (2, 5), (3, 4)]


def test_blocks_travel_one_device_along_the_ring_each_step():
    devices = 4
    sched = ring_schedule(AttentionConfig(seq_len=64, causal=True), devices)
    for s, step in enumerate(sched.steps):
        for d, ds in enumerate(step):
            assert ds.block_owner == (d - s) % devices
            assert ds.kv_chunks == sched.device_chunks(ds.block_owner)
            last = s == devices - 1
            assert ds.sends_to == (None if last else (d + 1) % devices)
            assert ds.receives_from == (None if last else (d - 1) % devices)
        if s + 1 < devices:  # what a device holds next is what its left neighbour held
            nxt = sched.steps[s + 1]
            assert all(nxt[d].block_owner == step[(d - 1) % devices].block_owner for d in range(4))


def test_each_step_sends_k_and_v_of_the_held_block_except_the_last():
    config = AttentionConfig(seq_len=4096, heads=12, head_dim=64, batch=2, dtype="fp16")
    sched = ring_schedule(config, 4)
    block = 2 * (4096 // 4) * 64 * 12 * 2 * 2  # K and V, N/P rows, d, h, B, 2 bytes
    for step in sched.steps[:-1]:
        assert all(ds.bytes_sent == block for ds in step)
    assert all(ds.bytes_sent == 0 for ds in sched.steps[-1])
    assert sched.bytes_per_device == 3 * block


@pytest.mark.parametrize("devices", (2, 3, 4, 8))
def test_zigzag_gives_every_device_the_same_work_when_chunks_are_equal(devices):
    sched = ring_schedule(AttentionConfig(seq_len=96 * devices, causal=True), devices)
    work = {sched.device_work(d) for d in range(devices)}
    assert len(work) == 1
    # and every step after the first is the same work too: two full chunk pairs
    chunk = sched.chunk_rows[0]
    for s in range(1, devices):
        assert {sched.step_work(s, d) for d in range(devices)} == {2 * chunk * chunk}


@pytest.mark.parametrize("devices", (2, 3, 5, 8))
@pytest.mark.parametrize("seq_len", (17, 101, 1000, 4097))
def test_zigzag_work_differs_by_at_most_two_rows_of_keys_for_any_n(seq_len, devices):
    """Unequal chunks (N not divisible by 2P) differ by one row; the spread of per-device work
    stays within 2·N (query, key) pairs, while a contiguous causal split would hand the last
    device about 2P - 1 times the first device's work."""
    config = AttentionConfig(seq_len=seq_len, causal=True)
    sched = ring_schedule(config, devices)
    work = [sched.device_work(d) for d in range(devices)]
    assert max(work) - min(work) <= 2 * seq_len
    assert sum(work) == seq_len * (seq_len + 1) // 2
    contiguous = [
        sum(r + 1 for r in range(d * seq_len // devices, (d + 1) * seq_len // devices))
        for d in range(devices)
    ]
    assert max(contiguous) - min(contiguous) > 2 * seq_len


def test_gpu_ring_refuses_a_sequence_that_does_not_split_into_equal_chunks():
    with pytest.raises(RingConfigError, match=r"divisible by 2·P = 6 .*causal"):
        check_equal_chunks(AttentionConfig(seq_len=1000, causal=True), 3)
    with pytest.raises(RingConfigError, match=r"divisible by P = 3"):
        check_equal_chunks(AttentionConfig(seq_len=1000), 3)
    check_equal_chunks(AttentionConfig(seq_len=1002, causal=True), 3)  # 6 chunks of 167


@pytest.mark.parametrize("devices", (0, -1, 1025, 2.0, True))
def test_device_counts_outside_one_to_1024_are_refused(devices):
    with pytest.raises(RingConfigError, match="devices"):
        ring_schedule(AttentionConfig(seq_len=64), devices)


def test_the_schedule_is_plain_data_a_view_can_animate():
    sched = ring_schedule(AttentionConfig(seq_len=24, causal=True), 3)
    data = json.loads(json.dumps(sched.to_dict()))
    assert data["layout"] == ZIGZAG and data["devices"] == 3
    assert data["device_chunks"] == [[0, 5], [1, 4], [2, 3]]
    assert len(data["steps"]) == 3 and len(data["steps"][0]) == 3
    first = data["steps"][0][0]
    assert first["kv_chunks"] == [0, 5] and first["sends_to"] == 1
    assert [0, 0, DIAGONAL] in first["pairs"] and [0, 5, SKIPPED] in first["pairs"]
