"""Traces of the warp-specialized kernel: every warp role's marks per block, decoded from the
kernel's rows, kept through JSON and downsampling, checked against the file format's limits;
older traces without roles still load; the shipped H200 trace; recording on a GPU."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gpu.algorithms import TILED_WS
from gpu.config import AttentionConfig
from gpu.files.schema import MAX_ROLES, ROLE_NAMES, ROLE_PHASES
from gpu.files.trace import (
    Trace,
    TraceError,
    covers_every_block_once,
    load_traces,
    save_traces,
    trace_problems,
    traces_from_document,
    traces_json,
)
from gpu.launch import flash_ws
from gpu.profiling.trace_record import ws_trace_from_rows
from tests.trace_fakes import fake_ws_rows

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_WS = ROOT / "resources" / "traces" / "h200_ws_trace.json"
CONFIGS = [
    AttentionConfig(seq_len=1000, heads=3, head_dim=128),
    AttentionConfig(seq_len=1000, heads=2, head_dim=64, causal=True),
    AttentionConfig(seq_len=300, heads=1, head_dim=256),
]


def _ws(config: AttentionConfig) -> Trace:
    return ws_trace_from_rows(fake_ws_rows(config), config=config, device="fake", sm_count=132)


def test_role_phases_are_the_kernels_trace_codes_in_order():
    assert tuple(flash_ws.TRACE_CODES[k][0] for k in sorted(flash_ws.TRACE_CODES)) == ROLE_PHASES
    assert set(flash_ws.TRACE_ROLES) <= set(ROLE_NAMES)
    assert len(ROLE_NAMES) == MAX_ROLES


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.label().replace(" ", "_"))
def test_decoded_rows_give_every_block_its_roles_in_time_order(config):
    trace = _ws(config)
    assert trace_problems(trace) == [] and covers_every_block_once(trace)
    consumers = flash_ws.default_launch(config.head_dim).consumers
    assert trace.roles == ("producer", *(f"consumer {c}" for c in range(consumers)))
    for b in trace.blocks:
        assert [r.role for r in b.roles] == list(trace.roles)
        tiles = max(j for name, j, _ in b.roles[1].phases if name == "wait_K_j") + 1
        for r in b.roles:
            times = [t for _, _, t in r.phases]
            assert times == sorted(times) and b.start_ns <= times[0] and times[-1] <= b.end_ns
            assert r.phases[-1][0] == "end"
        for r in b.roles[1:]:  # each consumer waited for, and took its turn on, every tile
            assert {j for n, j, _ in r.phases if n == "wait_K_j"} == set(range(tiles))
            assert {j for n, j, _ in r.phases if n == "gemm_issue"} == set(range(tiles + 1))
        # the block-level summary follows consumer 0
        assert b.phases[0][0] == "load_Q_i" and b.phases[-1][0] == "store_O_i"
        assert [j for n, j, _ in b.phases if n == "load_K_j"] == list(range(tiles))


def test_role_traces_round_trip_through_json_and_downsample_in_a_row(tmp_path):
    trace = _ws(AttentionConfig(seq_len=4096, heads=1, head_dim=128))
    save_traces((trace,), tmp_path / "ws.json")
    assert load_traces(tmp_path / "ws.json") == (trace,)
    small = trace.downsampled(6, contiguous=True)
    assert trace_problems(small) == []
    for b in small.blocks:
        c0 = b.roles[1]
        waited = sorted({j for n, j, _ in c0.phases if n == "wait_K_j"})
        assert waited == [0, 1, 2, 3, 30, 31]  # the first four in a row, the last two
        assert ("gemm_issue", 32) in {(n, j) for n, j, _ in c0.phases}  # the last P·V's turn
    again = traces_from_document(json.loads(traces_json((small,))), "x")
    assert again == (small,)


def test_a_trace_without_roles_still_loads_and_has_none():
    trace = _ws(CONFIGS[0])
    data = trace.to_dict()
    for key in ("roles", "role_phase_names", "role_fields", "role_marks"):
        data.pop(key)
    (back,) = traces_from_document({"schema": "tilescope.traces/1", "traces": [data]}, "x")
    assert back.roles == () and all(b.roles == () for b in back.blocks)
    assert back.blocks == tuple(replace(b, roles=()) for b in trace.blocks)


def _bad(mutate) -> str:
    data = _ws(AttentionConfig(seq_len=300, heads=1, head_dim=128)).to_dict()
    mutate(data)
    with pytest.raises(TraceError) as err:
        traces_from_document({"schema": "tilescope.traces/1", "traces": [data]}, "bad.json")
    message = str(err.value)
    assert "\n" not in message and "bad.json" in message
    return message


def _as_kernel_level_with_roles(d: dict) -> None:
    """A valid kernel-level trace (one record per kernel) that still carries warp roles."""
    kernels = range(len(d["kernels"]))
    start, end = d["blocks"][0][2:4]
    d["blocks"] = [[k, -1, start, end, k, [0, 0, 0]] for k in kernels]
    d["role_marks"] = [[[] for _ in d["roles"]] for _ in kernels]
    d["level"] = "kernel"


@pytest.mark.parametrize(
    ("mutate", "says"),
    [
        (lambda d: d["role_marks"].pop(), "one per block"),
        (lambda d: d["role_marks"][0].pop(), "lists for 3 roles"),
        (lambda d: d.update(roles=["producer", "consumer 0", "boss"]), "distinct names"),
        (lambda d: d.update(roles=["producer"] * 3), "distinct names"),
        (lambda d: d.update(role_phase_names=["load_Q_i", "nap"]), "'nap' is not one of"),
        (lambda d: d["role_marks"][0][1].extend([99, 0, 0]), "phase code outside"),
        (lambda d: d["role_marks"][0][1].extend([5, 9999, 0]), "tile index outside"),
        (lambda d: d["role_marks"][0][1].extend([5, 0, 10**12]), "after its block's end"),
        (lambda d: d["role_marks"][0][1].append(5), "triples"),
        (lambda d: d["role_marks"][0][1].extend([5, -1, 0]), ">= 0"),
        (lambda d: d.update(level="kernel"), "a block trace labelled kernel-level"),
        (_as_kernel_level_with_roles, "only block-level traces have warp roles"),
        (lambda d: d.update(roles=[f"consumer {c}" for c in range(9)]), "length <= 8"),
    ],
)
def test_broken_role_fields_are_refused_with_one_line(mutate, says):
    assert says in _bad(mutate)


def test_rows_the_kernel_does_not_write_are_refused():
    config = CONFIGS[0]
    rows = fake_ws_rows(config)
    rows[0, 2] = 9 * 256  # a role the kernel does not have
    with pytest.raises(TraceError, match="does not write"):
        ws_trace_from_rows(rows, config=config, device="fake", sm_count=132)
    with pytest.raises(TraceError, match="no rows"):
        ws_trace_from_rows(np.full((10, 5), -1), config=config, device="fake", sm_count=132)


def test_the_shipped_warp_specialized_trace_is_small_valid_and_says_how_it_was_made():
    assert SHIPPED_WS.stat().st_size < 1_000_000
    (trace,) = load_traces(SHIPPED_WS)
    assert trace.algorithm == TILED_WS and trace.device == "NVIDIA H200"
    assert trace.config == AttentionConfig(seq_len=4096, heads=16, head_dim=128)
    assert trace_problems(trace) == [] and covers_every_block_once(trace)
    # recorded with the d=128 variant of two consumer warpgroups that ping-pong
    assert trace.roles == ("producer", "consumer 0", "consumer 1")
    assert "python3 bench/ws_check.py --quick" in trace.notes and "2026-11-30" in trace.notes
    assert trace.tiles_kept == 12 and len({b.sm for b in trace.blocks}) == 132


# --------------------------------------------------------------------------------------------
# On the GPU


@pytest.mark.gpu
@pytest.mark.parametrize(
    "config",
    [
        AttentionConfig(seq_len=1000, heads=3, head_dim=128),
        AttentionConfig(seq_len=1000, heads=3, head_dim=64, causal=True),
        AttentionConfig(seq_len=4096, heads=16, head_dim=128, dtype="bf16"),
    ],
    ids=lambda c: c.label().replace(" ", "_"),
)
def test_record_trace_of_the_warp_specialized_kernel_gives_every_role(config, tmp_path):
    from gpu.profiling.trace_record import record_trace

    if flash_ws.supports(config) is not None:
        pytest.skip(flash_ws.supports(config))
    trace = record_trace(config, TILED_WS)
    assert trace_problems(trace) == [] and covers_every_block_once(trace)
    consumers = flash_ws.default_launch(config.head_dim).consumers
    assert trace.roles == ("producer", *(f"consumer {c}" for c in range(consumers)))
    assert all(len(b.roles) == 1 + consumers for b in trace.blocks)
    assert trace.kernel_ms > 0
    assert trace.span_ns <= trace.kernel_ms * 1e6 * 1.05 + 5_000  # the events time the launch
    m = re.search(r"max \|ΔO\| vs the normal build: (\S+)", trace.notes)
    assert m and float(m.group(1)) <= 1e-3, trace.notes
    save_traces((trace,), tmp_path / "ws.json")
    assert load_traces(tmp_path / "ws.json") == (trace,)
