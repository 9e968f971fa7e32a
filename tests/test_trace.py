"""Real execution traces: the shipped H200 trace covers every block once with ordered phases and
survives JSON; traces parse, validate, downsample and lay out without a GPU; junk trace files
(empty, mislabelled, beyond the SM and block limits, binary, deeply nested) are refused with one
line and never reach the view; on a GPU `record_trace` gives traces that pass the same checks;
the trace view draws one lane per SM."""

from __future__ import annotations

import itertools
import json
import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gpu.algorithms import NAIVE, TILED, TILED_MMA
from gpu.config import AttentionConfig
from gpu.files.recording import Recording, RecordingError, load_recording, save_recording
from gpu.files.schema import MAX_SM_COUNT, MAX_TRACE_BLOCKS
from gpu.files.trace import (
    BLOCK_LEVEL,
    KERNEL_LEVEL,
    NAIVE_KERNELS,
    PHASE_CODES,
    PHASE_STEPS,
    Trace,
    TraceError,
    active_blocks,
    covers_every_block_once,
    expected_block_count,
    layout,
    load_traces,
    phases_ordered,
    save_traces,
    trace_from_rows,
    trace_problems,
)
from gpu.model.schedule import launch_query_tile
from gpu.results import DeviceInfo
from tests.trace_fakes import fake_rows

SHIPPED = Path(__file__).resolve().parent.parent / "resources" / "traces" / "h200_trace.json"


@pytest.fixture(scope="module")
def shipped() -> tuple[Trace, ...]:
    assert SHIPPED.exists(), f"{SHIPPED} is not there: record it with bench/trace_h200.py"
    return load_traces(SHIPPED)


def _fake(config=None, algorithm=TILED, **kw) -> Trace:
    config = config or AttentionConfig(seq_len=1000, heads=3)
    rows = fake_rows(config, algorithm, **kw)
    return trace_from_rows(rows, config=config, algorithm=algorithm, device="fake", sm_count=132)


def _assert_valid(trace: Trace) -> None:
    assert covers_every_block_once(trace), trace_problems(trace)
    assert phases_ordered(trace), trace_problems(trace)
    assert trace_problems(trace) == []
    if trace.level == BLOCK_LEVEL:
        for b in trace.blocks:
            assert b.phases[0][0] == "load_Q_i" and b.phases[-1][0] == "store_O_i"
            times = [t for _, _, t in b.phases]
            assert times == sorted(times) and b.start_ns <= times[0] and times[-1] <= b.end_ns
            assert b.sm >= 0
        assert len({b.sm for b in trace.blocks}) <= trace.sm_count
    else:
        kernels = sorted(trace.blocks, key=lambda b: b.block)
        assert tuple(b.kernel for b in kernels) == NAIVE_KERNELS
        assert all(a.end_ns <= b.start_ns for a, b in itertools.pairwise(kernels))


# --------------------------------------------------------------------------------------------
# The shipped trace (recorded on the H200 by bench/trace_h200.py)


def test_the_shipped_trace_holds_naive_and_both_tiled_kernels_recorded_on_an_h200(shipped):
    by_algo = {t.algorithm: t for t in shipped}
    assert set(by_algo) >= {NAIVE, TILED, TILED_MMA}
    for t in shipped:
        assert "H200" in t.device
        assert t.sm_count == 132
        assert t.config == AttentionConfig(seq_len=4096, heads=12, head_dim=64, dtype="fp16")
    assert by_algo[NAIVE].level == KERNEL_LEVEL
    assert by_algo[TILED].level == by_algo[TILED_MMA].level == BLOCK_LEVEL


def test_the_shipped_trace_covers_every_block_exactly_once(shipped):
    for t in shipped:
        want = expected_block_count(t.config, t.algorithm, t.level)
        assert len(t.blocks) == want
        assert covers_every_block_once(t), trace_problems(t)


def test_the_shipped_traces_phases_are_ordered(shipped):
    for t in shipped:
        _assert_valid(t)


def test_the_shipped_trace_uses_every_sm_and_fits_in_its_event_time(shipped):
    for t in shipped:
        if t.level != BLOCK_LEVEL:
            continue
        assert len({b.sm for b in t.blocks}) == 132  # 384+ blocks: every SM gets work
        assert t.span_ns <= t.kernel_ms * 1e6 * 1.05 + 5_000  # blocks run inside the launch


def test_the_shipped_trace_round_trips_through_json(shipped, tmp_path):
    for t in shipped:
        assert Trace.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    path = tmp_path / "t.json"
    save_traces(shipped, path)
    assert load_traces(path) == shipped


def test_the_shipped_trace_file_is_small():
    assert SHIPPED.stat().st_size < 2 * 2**20


# --------------------------------------------------------------------------------------------
# Parsing, validation and layout (no GPU)


def test_rows_the_kernel_never_wrote_are_skipped_and_each_blocks_rows_keep_their_order():
    config = AttentionConfig(seq_len=1000, heads=3, causal=True)  # causal: unused rows
    rows = fake_rows(config, TILED)
    assert (rows[:, 2] == -1).any()
    t = trace_from_rows(rows, config=config, algorithm=TILED, device="fake", sm_count=132)
    _assert_valid(t)
    assert min(b.start_ns for b in t.blocks) == 0  # times count from the earliest block start
    # blocks' row groups in another order (as if written elsewhere in the buffer): same trace
    groups = np.split(rows, len(t.blocks))  # R rows per block, blocks in launch order
    perm = np.random.default_rng(1).permutation(len(groups))
    again = trace_from_rows(
        np.concatenate([groups[k] for k in perm]),
        config=config, algorithm=TILED, device="fake", sm_count=132,
    )  # fmt: skip
    assert again == t
    b = t.block(5)
    assert b.query_tile == 5 % 16
    assert [p[0] for p in b.phases[:3]] == ["load_Q_i", "load_K_j", "compute_S_ij"]
    spans = b.phase_spans()
    assert spans[-1][3] == b.end_ns and all(s[2] <= s[3] for s in spans)


def test_validation_names_a_missing_block_a_repeat_and_time_going_backwards():
    t = _fake()
    assert trace_problems(t) == []
    missing = replace(t, blocks=t.blocks[1:])
    assert not covers_every_block_once(missing) and phases_ordered(missing)
    assert "1 missing [0]" in trace_problems(missing)[0]
    repeated = replace(t, blocks=(*t.blocks, t.blocks[0]))
    assert not covers_every_block_once(repeated)
    b = t.blocks[3]
    swapped = replace(b, phases=(b.phases[0], b.phases[2], b.phases[1], *b.phases[3:]))
    bad = replace(t, blocks=(*t.blocks[:3], swapped, *t.blocks[4:]))
    assert covers_every_block_once(bad) and not phases_ordered(bad)
    assert any("backwards" in p for p in trace_problems(bad))


def test_downsampling_keeps_every_block_and_the_first_and_last_tile():
    t = _fake(AttentionConfig(seq_len=4096, heads=2))
    small = t.downsampled(8)
    assert small.tiles_kept == 8 and len(small.blocks) == len(t.blocks)
    _assert_valid(small)
    for full, thin in zip(t.blocks, small.blocks, strict=True):
        tiles = sorted({j for n, j, _ in thin.phases if n == "load_K_j"})
        assert len(tiles) == 8 and tiles[0] == 0 and tiles[-1] == 63
        assert (thin.sm, thin.start_ns, thin.end_ns) == (full.sm, full.start_ns, full.end_ns)
    assert len(json.dumps(small.to_dict())) < len(json.dumps(t.to_dict())) / 4


def test_layout_gives_blocks_resident_together_on_one_sm_different_slots():
    t = _fake(AttentionConfig(seq_len=4096, heads=12), slots=2)
    lay = layout(t)
    assert lay.lanes == 132 and lay.slots == 2 and lay.waves >= 2
    for sm in range(132):
        for s in range(lay.slots):
            idx = np.flatnonzero((lay.lane == sm) & (lay.slot == s))
            order = idx[np.argsort(lay.start[idx])]
            assert np.all(lay.end[order[:-1]] <= lay.start[order[1:]])  # never overlap
            assert list(lay.wave[order]) == list(range(len(order)))
    busy = active_blocks(t, 40)
    assert busy.max() <= 264 + 1e-6 and busy[:10].mean() > 200


def test_malformed_trace_json_is_a_trace_error_not_a_crash(tmp_path):
    good = _fake().to_dict()
    for broken in (
        [],
        {**good, "schema": "other/1"},
        {**good, "blocks": [[0, 1, 2]]},
        {**good, "blocks": [[0, 1, 0, 5, 0, [0, 1]]]},
        {**good, "config": {"seq_len": -1}},
        {**good, "level": "warp"},
    ):
        with pytest.raises(TraceError):
            Trace.from_dict(broken)
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(TraceError, match="not valid JSON"):
        load_traces(path)


def _small() -> dict:
    """A small valid trace document (12 blocks on 132 SMs) to break in one way at a time."""
    return _fake(AttentionConfig(seq_len=256, heads=3), sm_count=132).to_dict()


def _with(change) -> dict:
    data = _small()
    change(data)
    return data


def _block(k: int, field: int, value) -> callable:
    def change(data):
        data["blocks"][k][field] = value

    return change


# Each is a traces file a user might open; every one must be refused with a message naming why.
JUNK_TRACES = {
    "empty_blocks": (lambda: _with(lambda d: d.update(blocks=[])), "blocks"),
    "block_trace_labelled_kernel_level": (
        lambda: _with(lambda d: d.update(level="kernel")),
        "a block trace labelled kernel-level",
    ),
    "blocks_without_phases": (lambda: _with(_block(3, 5, [])), r"blocks\[3\]: phases must"),
    "int64_time_overflow": (lambda: _with(_block(0, 3, 2**63 + 7)), r"blocks\[0\]\[3\]"),
    "time_beyond_2_53_ns": (lambda: _with(_block(0, 2, 2**53 + 1)), r"blocks\[0\]\[2\]"),
    "sm_count_1e8": (lambda: _with(lambda d: d.update(sm_count=10**8)), "sm_count.*<= 1024"),
    "sm_count_1e8_float": (lambda: _with(lambda d: d.update(sm_count=1e8)), "sm_count"),
    "sm_count_0": (lambda: _with(lambda d: d.update(sm_count=0)), "sm_count"),
    "sm_id_minus_5": (lambda: _with(_block(2, 1, -5)), r"blocks\[2\]\[1\]"),
    "sm_id_1e6": (lambda: _with(_block(2, 1, 10**6)), r"blocks\[2\]\[1\]"),
    "sm_id_beyond_sm_count": (lambda: _with(_block(2, 1, 500)), "outside 0..131"),
    "phase_code_out_of_range": (lambda: _with(_block(1, 5, [9, 0, 0])), "phase code outside"),
    "kernel_index_out_of_range": (lambda: _with(_block(1, 4, 5)), "kernel index 5"),
    "phases_not_triples": (lambda: _with(_block(1, 5, [0, 0])), "triples"),
    "block_id_out_of_range": (lambda: _with(_block(1, 0, 10_000)), "launches 12 blocks"),
    "time_as_string": (lambda: _with(_block(1, 2, "12")), "expected `int`, got `str`"),
    "negative_phase_offset": (
        lambda: _with(_block(1, 5, [0, 1, -40])),
        r"blocks\[1\]\[5\]\[2\]",
    ),
    "first_phase_not_load_q": (lambda: _with(_block(1, 5, [1, 0, 0])), "first phase"),
    "query_tile_out_of_range": (lambda: _with(_block(1, 5, [0, 99, 0])), "query tile 99"),
    "unknown_phase_name": (
        lambda: _with(lambda d: d["phase_names"].append("warp_shuffle")),
        "warp_shuffle",
    ),
    "unknown_level": (lambda: _with(lambda d: d.update(level="warp")), "level"),
    "algorithm_without_tiles": (lambda: _with(lambda d: d.update(algorithm="magic")), "magic"),
    "blocks_not_a_list": (lambda: _with(lambda d: d.update(blocks={"a": 1})), "blocks"),
    "kernel_level_record_on_an_sm": (
        lambda: _with(
            lambda d: d.update(
                level="kernel",
                kernels=list(NAIVE_KERNELS),
                blocks=[[i, 5, 0, 10, i, [0, -1, 0]] for i in range(3)],
            )
        ),
        "SM -1",
    ),
}


def _file(tmp_path, data) -> Path:
    path = tmp_path / "junk.json"
    path.write_text(json.dumps({"schema": "tilescope.traces/1", "meta": {}, "traces": [data]}))
    return path


@pytest.mark.parametrize("name", list(JUNK_TRACES))
def test_a_junk_trace_file_is_refused_with_one_line(tmp_path, name):
    make, message = JUNK_TRACES[name]
    path = _file(tmp_path, make())
    with pytest.raises(TraceError, match=message) as info:
        load_traces(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01\x02binary\xff", "UTF-16 or UTF-32|not UTF-8"),
        (json.dumps({"schema": "tilescope.traces/1", "traces": []}).encode("utf-16"), "UTF-16"),
        (
            b'{"schema": "tilescope.traces/1", "traces": ' + b"[" * 5000 + b"]" * 5000 + b"}",
            "nested too deeply",
        ),
    ],
    ids=["binary", "utf16", "deep_nesting"],
)
def test_binary_utf16_and_deeply_nested_trace_files_are_refused(tmp_path, content, message):
    path = tmp_path / "junk.json"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        load_traces(path)


def test_a_trace_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        load_traces(fifo)


def test_the_trace_panel_shows_a_message_for_every_junk_trace(qtbot, tmp_path):
    from app.animation.trace_panel import TracePanel

    panel = TracePanel(traces=(_fake(),))
    qtbot.addWidget(panel)
    for name, (make, _) in JUNK_TRACES.items():
        with qtbot.waitSignal(panel.loaded, timeout=5000):  # read off the GUI thread
            panel.load_file(_file(tmp_path, make()))
        assert panel.message, name
        assert [t.device for t in panel.traces] == ["fake"]  # nothing applied


# Odd but valid: the panel must draw, select and replay them without an error.
ODD_TRACES = {
    "one_block": lambda d: d.update(blocks=d["blocks"][:1]),
    "phases_out_of_time_order": _block(0, 5, [0, 0, 50, 1, 0, 10, 2, 0, 20, 3, 0, 30]),
    "most_sms_allowed": lambda d: d.update(sm_count=MAX_SM_COUNT),
    "kernel_level_with_two_kernels": lambda d: d.update(
        level="kernel",
        algorithm="naive",
        kernels=["gemm_qk", "softmax"],
        phase_names=["gemm_qk", "softmax"],
        blocks=[[0, -1, 0, 100, 0, [0, -1, 0]], [1, -1, 100, 250, 1, [1, -1, 0]]],
    ),
}


@pytest.mark.parametrize("name", list(ODD_TRACES))
def test_odd_but_valid_traces_draw_select_and_replay(qtbot, tmp_path, name):
    from PySide6.QtCore import Qt

    from app.animation.trace_panel import TracePanel

    panel = TracePanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 700)
    panel.show()
    with qtbot.waitSignal(panel.loaded, timeout=5000):
        panel.load_file(_file(tmp_path, _with(ODD_TRACES[name])))
    assert not panel.message and len(panel.traces) == 1
    view = panel.view
    assert not view.grab().toImage().isNull()
    b = panel.trace.blocks[0]
    qtbot.mouseClick(
        view, Qt.MouseButton.LeftButton, pos=view.block_rect(b.block).center().toPoint()
    )
    for f in (0.0, 0.5, 1.0):
        panel.replay_at(f)
    view.grab()


def test_the_trace_limits_are_the_stated_ones():
    assert MAX_SM_COUNT == 1024 and MAX_TRACE_BLOCKS == 1 << 20


def test_recordings_carry_traces_and_old_files_without_them_still_load(tmp_path):
    device = DeviceInfo("cuda", "NVIDIA H200", 1, 1)
    t = _fake()
    rec = Recording(device, (), {"note": "x"}, (t,))
    path = tmp_path / "run.json"
    save_recording(rec, path)
    assert load_recording(path).traces == (t,)
    assert load_traces(path) == (t,)  # the trace loader reads recordings too
    old = Recording(device, (), {})
    assert "traces" not in old.to_dict()
    save_recording(old, tmp_path / "old.json")
    assert load_recording(tmp_path / "old.json").traces == ()
    data = json.loads(path.read_text())
    data["traces"] = [{"schema": "tilescope.trace/1"}]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(RecordingError, match=r"traces\[0\]: object missing required field"):
        load_recording(tmp_path / "bad.json")


def test_phase_codes_match_the_kernels_trace_comment():
    kernels = Path(__file__).resolve().parent.parent / "gpu" / "kernels"
    assert "#ifdef TILESCOPE_TRACE" in (kernels / "trace.cuh").read_text()
    for name in ("flash_readable.cu", "flash_mma.cu"):
        text = (kernels / name).read_text()
        assert '#include "trace.cuh"' in text
        for code, phase in enumerate(PHASE_CODES):
            assert re.search(rf"{code} {phase}", text), (name, code, phase)


# --------------------------------------------------------------------------------------------
# On the GPU


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("algorithm", "config"),
    [
        (NAIVE, AttentionConfig(seq_len=1000, heads=3)),
        (TILED, AttentionConfig(seq_len=1000, heads=3)),
        (TILED, AttentionConfig(seq_len=1000, heads=3, causal=True)),
        (TILED_MMA, AttentionConfig(seq_len=1000, heads=3)),
    ],
    ids=lambda x: x if isinstance(x, str) else x.label().replace(" ", "_"),
)
def test_record_trace_on_the_gpu_gives_a_valid_trace(algorithm, config, tmp_path):
    from gpu.profiling.trace_record import record_trace

    t = record_trace(config, algorithm)
    _assert_valid(t)
    assert t.kernel_ms > 0 and t.sm_count > 0
    if t.level == BLOCK_LEVEL:
        assert t.span_ns <= t.kernel_ms * 1e6 * 1.05 + 5_000
        m = re.search(r"max \|ΔO\| vs the normal build: (\S+)", t.notes)
        assert m and float(m.group(1)) <= 1e-3, t.notes  # the trace build computes the same O
    save_traces((t,), tmp_path / "t.json")
    assert load_traces(tmp_path / "t.json") == (t,)


# --------------------------------------------------------------------------------------------
# The view (pytest-qt)


def test_the_trace_view_loads_the_shipped_trace_and_draws_one_lane_per_sm(qtbot, shipped):
    from app.animation.trace_panel import TracePanel

    panel = TracePanel(traces=shipped)
    qtbot.addWidget(panel)
    panel.resize(1400, 900)
    panel.show()
    qtbot.waitExposed(panel)
    panel.select_trace(TILED)
    view = panel.view
    assert view.lane_count() == 132
    rects = [view.lane_rect(i) for i in range(132)]
    assert all(r.height() > 0 for r in rects)
    assert all(a.bottom() <= b.top() + 1e-6 for a, b in itertools.pairwise(rects))
    image = view.grab().toImage()  # paints: every block once, into the cached background
    assert not image.isNull() and view.painted_blocks == len(panel.trace.blocks) == 768
    # clicking a block selects it and replays its phases as the schedule's steps
    b = panel.trace.blocks[len(panel.trace.blocks) // 2]
    from PySide6.QtCore import Qt

    qtbot.mouseClick(
        view, Qt.MouseButton.LeftButton, pos=view.block_rect(b.block).center().toPoint()
    )
    assert panel.selected is not None and panel.selected.block == b.block
    assert panel.replaying
    panel.stop_replay()
    for name, j, t0, t1 in b.phase_spans()[:12]:
        panel.replay_at((0.5 * (t0 + t1) - b.start_ns) / b.duration_ns)
        frame = panel.canvas.frames[0]
        # the same query tile, in the HBM/SRAM view: the readable kernel launches its query
        # tiles last first (the trace's block 0 of a head does tile 63), as the lane plays them
        assert launch_query_tile(frame.config, 64, frame.block, TILED) == b.query_tile
        assert frame.step.name in PHASE_STEPS[name]  # ... at the steps the phase covers
        if name != "load_Q_i":
            assert frame.step.region[2 if name == "compute_S_ij" else 0] == j * 64  # tile j
    # repainting a frame uses the cached background, whatever the block count: the blocks are
    # drawn once, never again per frame
    view.grab()
    backgrounds = []
    real = view._paint_background
    view._paint_background = lambda: (backgrounds.append(1), real())[1]
    for _ in range(5):
        view.grab()
    del view._paint_background
    assert len(view.paint_ms) >= 6 and backgrounds == []
    panel.select_trace(NAIVE)
    view.grab()
    assert view.lane_count() == 3 and view.painted_blocks == 3


def test_the_animation_widget_switches_to_the_real_trace_mode(qtbot):
    from app.animation import TileAnimationWidget

    w = TileAnimationWidget(config=AttentionConfig(seq_len=512))
    qtbot.addWidget(w)
    w.resize(1280, 860)
    w.show()
    assert w.mode == w.MODEL_MODE and w._trace_panel is None  # nothing loaded until asked
    w.mode_tabs.setCurrentIndex(1)
    assert w.mode == w.TRACE_MODE
    panel = w.trace_panel
    qtbot.waitUntil(lambda: bool(panel.traces), timeout=20_000)  # read off the GUI thread
    assert {t.algorithm for t in panel.traces} >= {NAIVE, TILED, TILED_MMA}
    assert panel.view.lane_count() == 132 and panel.selected is not None
    w.toggle_play()  # Space: replays the selected block in this mode
    assert panel.replaying and not w.player.playing
    segs = panel.replay.segments
    w.step_back()  # ← / →: one traced phase back or on (and pause)
    assert not panel.replaying
    k = segs.index(panel.replay.segment_at(panel.replay.time_at(panel.fraction)))
    w.step_forward()
    assert panel.replay.segment_at(panel.replay.time_at(panel.fraction)) == segs[k + 1]
    assert panel.canvas.frames[0].step.name in segs[k + 1].steps
    w.set_mode(w.MODEL_MODE)
    assert not panel.replaying and w.mode_tabs.currentIndex() == 0
    w.set_traces((_fake(),))
    assert [t.device for t in panel.traces] == ["fake"]
