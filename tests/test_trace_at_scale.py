"""Traces up to the format's limits (a million blocks on 1,024 SMs): their summaries come from
NumPy over arrays worked out once off the GUI thread, their blocks are drawn into an image as
pixels (not one Qt call per block), the file is read and checked where long calls stall nobody
and handed back in pieces, and showing a prepared trace never walks its blocks on the GUI
thread. The stall figures themselves: bench/bench_gui.py --only trace."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gpu.algorithms import TILED
from gpu.files import trace_pieces
from gpu.files.trace import BLOCK_LEVEL, Trace, layout, load_traces, occupancy

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "resources" / "traces" / "h200_trace.json"
SHIPPED_WS = ROOT / "resources" / "traces" / "h200_ws_trace.json"


@pytest.fixture(scope="module")
def block_traces() -> list[Trace]:
    traces = [*load_traces(SHIPPED), *load_traces(SHIPPED_WS)]
    return [t for t in traces if t.level == BLOCK_LEVEL]


def test_occupancy_per_bin_is_every_blocks_overlap_with_every_bin():
    rng = np.random.default_rng(3)
    start = rng.integers(0, 10_000, 700).astype(float)
    end = start + rng.integers(0, 3_000, 700)
    for bins in (1, 16, 333):
        edges = np.linspace(start.min(), max(end.max(), start.min() + 1), bins + 1)
        lo = np.clip(start[:, None], edges[None, :-1], edges[None, 1:])
        hi = np.clip(end[:, None], edges[None, :-1], edges[None, 1:])
        want = (hi - lo).sum(axis=0) / (edges[1] - edges[0])
        assert np.allclose(occupancy(start, end).per_bin(bins), want, rtol=1e-9, atol=1e-9)


def _pixels(image) -> np.ndarray:  # type: ignore[no-untyped-def]
    from PySide6.QtGui import QImage

    image = image.convertToFormat(QImage.Format.Format_ARGB32)
    count = image.width() * image.height()
    flat = np.frombuffer(image.constBits(), np.uint32, count)
    return flat.reshape(image.height(), image.width()).copy()


def _painted_block_by_block(trace, lay, phases, colors, width, height):  # type: ignore[no-untyped-def]
    """The lanes as QPainter paints them, one rectangle per block and phase (no roles), in the
    order the view drew them before it drew pixels: each wave, then the waits, reads, writes."""
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QImage, QPainter

    image = QImage(width, height, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    p = QPainter(image)
    p.setPen(Qt.PenStyle.NoPen)
    span = float(lay.end.max())
    lane_h = height / lay.lanes
    gap = 1.0 if lane_h >= 4 else 0.0
    slot_h = (lane_h - gap) / lay.slots
    scale = width / span
    y = lay.lane * lane_h + gap / 2 + lay.slot * slot_h
    hh = max(1.0, slot_h)
    wave = lay.wave % len(colors.waves)
    for c in range(len(colors.waves)):  # a wave's blocks at a time, as the lanes were drawn
        p.setBrush(colors.waves[c])
        for k in np.flatnonzero(wave == c):
            w = max(1.0, (lay.end[k] - lay.start[k]) * scale)
            p.drawRect(QRectF(lay.start[k] * scale, y[k], w, hh))
    if slot_h < 1.0:  # lanes too thin for the phases inside the blocks
        p.end()
        return image
    blk, kinds = phases["block"], phases["kind"]
    x0, w = phases["t0"] * scale, (phases["t1"] - phases["t0"]) * scale
    order = [(1, c) for c in range(len(colors.waves))] + [(0, None), (3, None)]
    for kind, c in order:
        for i in np.flatnonzero((kinds == kind) & (w >= 0.25)):
            if c is not None and wave[blk[i]] != c:
                continue
            color = (
                colors.waves[c].darker(185)
                if kind == 1
                else (colors.read if kind == 0 else colors.write)
            )
            p.setBrush(color)
            p.drawRect(QRectF(x0[i], y[blk[i]], w[i], hh))
    p.end()
    return image


def test_the_blocks_image_is_the_picture_qpainter_paints_block_by_block(qapp, block_traces):
    from app.animation.colors import DARK
    from app.animation.trace_image import blocks_image, phase_arrays

    for trace in block_traces:
        if trace.roles:
            continue
        lay, phases = layout(trace), phase_arrays(trace)
        for size in ((1200, 480), (700, 260)):
            ours = _pixels(blocks_image(trace, lay, phases, None, DARK, *size))
            qt = _pixels(_painted_block_by_block(trace, lay, phases, DARK, *size))
            assert (ours != 0).mean() > 0.8  # the lanes are full of blocks
            assert (ours != qt).mean() < 0.02, f"{trace.algorithm} {size}"  # rounding at edges


def test_trace_facts_say_what_walking_the_blocks_says(block_traces):
    from app.animation.trace_image import phase_arrays, trace_facts

    for t in block_traces:
        lay = layout(t)
        facts = trace_facts(t, lay, phase_arrays(t))
        assert facts.sms_used == len({b.sm for b in t.blocks})
        assert facts.span_ns == t.span_ns and facts.end_ns == max(b.end_ns for b in t.blocks)
        for w in range(lay.waves):
            starts = lay.start[lay.wave == w]
            assert facts.wave_sizes[w] == starts.size
            assert facts.wave_starts[w] == pytest.approx(float(np.median(starts)))
        load = comp = 0
        for b in t.blocks:
            for name, _j, t0, t1 in b.phase_spans():
                load += t1 - t0 if name == "load_K_j" else 0
                comp += t1 - t0 if name == "compute_S_ij" else 0
        assert (facts.load_ns, facts.compute_ns) == (load, comp)
        middle = sorted(t.blocks, key=lambda b: (b.start_ns, b.block))[len(t.blocks) // 2]
        assert t.blocks[facts.first_pick] is middle
        for k in (0, 7, len(t.blocks) - 1):
            assert facts.index_of(t.blocks[k].block) == k
        assert facts.index_of(10**9) is None


def test_a_trace_handed_over_in_pieces_is_the_trace_the_file_holds(monkeypatch, block_traces):
    monkeypatch.setattr(trace_pieces, "PIECE_ROWS", 100)  # many pieces, roles included
    for path in (SHIPPED, SHIPPED_WS):
        heads = trace_pieces.keep_trace_pieces(path)
        built = tuple(
            trace_pieces.trace_from_pieces(
                head,
                (trace_pieces.take_trace_piece(k, "blocks", i) for i in range(n)),
                (trace_pieces.take_trace_piece(k, "role_marks", i) for i in range(m)),
            )
            for k, (head, n, m) in enumerate(heads)
        )
        assert built == load_traces(path)
    assert any(m > 1 for _h, _n, m in trace_pieces.keep_trace_pieces(SHIPPED_WS))


def test_the_app_reads_a_traces_file_in_its_compute_process(qapp):
    from app.work.background import read_traces_elsewhere

    assert read_traces_elsewhere(str(SHIPPED_WS)) == load_traces(SHIPPED_WS)


class _CountingBlocks(tuple):
    """A trace's blocks that count every walk over them (iteration or a slice)."""

    walks = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        _CountingBlocks.walks += 1
        return super().__iter__()

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        if isinstance(key, slice):
            _CountingBlocks.walks += 1
        return super().__getitem__(key)


def test_showing_a_prepared_trace_never_walks_its_blocks_on_the_gui_thread(qtbot, block_traces):
    """Describing a million-block trace walked its blocks in Python (14 s), its occupancy made
    a blocks × bins array (62 s), and picking and finding a block sorted and searched them."""
    from app.animation.trace_image import prepare_trace
    from app.animation.trace_panel import TracePanel

    trace = next(t for t in block_traces if t.algorithm == TILED)
    counted = replace(trace, blocks=_CountingBlocks(trace.blocks))
    prepared = prepare_trace(counted, (1000, 400))
    panel = TracePanel()
    qtbot.addWidget(panel)
    panel.resize(1200, 800)
    panel.show()
    qtbot.waitExposed(panel)
    _CountingBlocks.walks = 0
    panel.show_prepared((prepared,))
    panel.view.grab()
    panel.select_block(counted.blocks[5].block, play=False)
    panel.view.grab()
    assert panel.trace is counted and "waves" in panel.info.text()
    assert _CountingBlocks.walks == 0


def test_a_large_traces_blocks_are_drawn_off_the_gui_thread(qtbot, monkeypatch, block_traces):
    from app.animation import trace_view
    from app.animation.trace_image import prepare_trace
    from app.animation.trace_panel import TracePanel

    monkeypatch.setattr(trace_view, "DRAW_HERE_BLOCKS", 10)  # every trace counts as large
    trace = block_traces[0]
    panel = TracePanel()
    qtbot.addWidget(panel)
    panel.resize(1200, 800)
    panel.show()
    qtbot.waitExposed(panel)
    panel.show_prepared((prepare_trace(trace),))  # no image of its blocks yet
    view = panel.view
    view.grab()
    assert view.painted_blocks == 0 and view.renderer.busy  # asked for, being drawn elsewhere
    qtbot.waitUntil(lambda: not view.renderer.busy, timeout=30_000)
    view.grab()
    assert view.painted_blocks == len(trace.blocks)
