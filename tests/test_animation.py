"""The tile animation: counters end at the cost model's totals, stepping moves the tile and the
source line, config changes reset, the online-softmax panel ends at softmax(s)·V, LOD is fast."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.state.animation.blockdetail import block_detail, detail_from_steps
from app.state.animation.chip import SMEM, chip_layout
from app.state.animation.kernel_source import KERNEL_DIR, SOURCE_FILES, parse_step_tags
from app.state.animation.lane import cost_model_seconds, sram_slots
from app.state.animation.online_softmax import online_softmax_trace, toy_trace
from app.state.animation.player import Player
from app.state.animation.warp_roles import ws_launch
from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WS
from gpu.config import AttentionConfig
from gpu.launch import flash_readable
from gpu.model.costmodel import GPUS, algorithm_cost
from gpu.model.schedule import STEP_NAMES, build_schedule

CONFIGS = [
    AttentionConfig(seq_len=512),
    AttentionConfig(seq_len=1000, causal=True),  # ragged and causal
    AttentionConfig(seq_len=333, head_dim=40, batch=2, heads=3, block_m=32, block_n=16),
    AttentionConfig(seq_len=777, head_dim=160, dtype="fp32", causal=True, block_m=16, block_n=64),
    AttentionConfig(seq_len=129, heads=1, block_m=128, block_n=8),
]
ALGOS = (NAIVE, TILED, TILED_MMA, TILED_WS)


def _ids(c: AttentionConfig) -> str:
    return c.label().replace(" ", "_")


def _assert_totals(counters, config: AttentionConfig, algorithm: str) -> None:
    cost = algorithm_cost(config, algorithm)
    assert counters.bytes_read == cost.bytes_read
    assert counters.bytes_written == cost.bytes_written
    assert counters.flops == cost.executed_flops


# --------------------------------------------------------------------------------------------
# Pure model


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_counters_at_the_end_of_a_play_equal_the_cost_model_totals(config):
    player = Player(config, algorithms=ALGOS, duration_s=0.5)
    player.play()
    previous = {a: player.counters(a) for a in ALGOS}
    while player.playing:
        player.advance(1 / 60)
        player.frames()
        for a in ALGOS:  # and they only ever grow
            c = player.counters(a)
            p = previous[a]
            assert c.bytes_read >= p.bytes_read and c.bytes_written >= p.bytes_written
            assert c.flops >= p.flops and c.time_s >= p.time_s
            previous[a] = c
    assert player.finished
    for a in ALGOS:
        _assert_totals(player.counters(a), config, a)
        _assert_totals(player.lane(a).totals(), config, a)


@pytest.mark.parametrize("n", [65536, 131072, 1 << 20])
def test_counters_at_the_end_equal_the_cost_model_at_large_n_with_lod(n):
    config = AttentionConfig(seq_len=n, causal=n == 65536)
    player = Player(config)
    player.seek_end()
    for a in (NAIVE, TILED):
        _assert_totals(player.counters(a), config, a)


@pytest.mark.parametrize("config", CONFIGS[:3], ids=_ids)
def test_the_modeled_clock_ends_at_the_cost_models_roofline_time(config):
    for a in ALGOS:
        lane = Player(config, algorithms=(a,)).lane(a)
        expected = cost_model_seconds(lane)
        assert lane.total_time >= expected * (1 - 1e-9)
        assert lane.total_time == pytest.approx(expected, rel=0.05)


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_fast_block_details_equal_the_schedules_block_steps(config):
    for a in ALGOS:
        for kernel in build_schedule(config, a).kernels:
            for b in range(kernel.blocks):
                steps = kernel.block_steps(b)
                fast = block_detail(config, a, kernel, b)
                slow = detail_from_steps(kernel.name, b, steps)
                assert [fast.step_at(s) for s in range(fast.count)] == steps
                for field in ("kinds", "read", "written", "flops"):
                    assert np.array_equal(getattr(fast, field), getattr(slow, field))


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_sram_slots_add_up_to_each_kernels_on_chip_bytes(config):
    """Naive's kernels keep the model's tiles; the fused kernels' shared-memory slots add up to
    their own launch's shared memory (tests/test_animation_model.py checks each layout)."""
    for a in ALGOS:
        for kernel in build_schedule(config, a).kernels:
            slots = sram_slots(config, a, kernel)
            smem = sum(s.bytes for s in slots if s.place == SMEM)
            if a == NAIVE:
                assert sum(s.bytes for s in slots) == kernel.sram_bytes
            elif a == TILED:
                assert smem == flash_readable.smem_bytes(config)
            elif a == TILED_WS:  # Q, the K/V ring and its mbarriers: WsLaunch.smem_bytes
                assert smem == ws_launch(config).smem_bytes
            else:
                assert smem == chip_layout(config, a, kernel, GPUS["H200 SXM 141 GB"]).smem_bytes


def test_stepping_walks_the_tiled_schedule_step_by_step_and_back():
    config = AttentionConfig(seq_len=200, block_m=64, block_n=32)
    player = Player(config, algorithms=(TILED,))
    expected = list(build_schedule(config, TILED).steps())
    seen = []
    while player.step_forward():
        f = player.frames()[0]
        seen.append(f.step)
    assert seen == expected
    assert player.finished
    _assert_totals(player.counters(TILED), config, TILED)
    back = []
    while player.step_back():
        back.append(player.frames()[0].step)
    assert back[:-1] == expected[-2::-1][: len(back) - 1]
    assert player.t == 0.0


def test_a_gliding_step_travels_and_lands_exactly_on_the_boundary():
    config = AttentionConfig(seq_len=256)
    jump, glide = Player(config, algorithms=(TILED,)), Player(config, algorithms=(TILED,))
    for _ in range(3):
        jump.step_forward()
    glide.step_forward()
    glide.step_forward()
    glide.step_forward(glide_s=0.3)
    assert glide.gliding and glide.t < jump.t
    glide.advance(0.15)
    mid = glide.frames()[0]
    assert mid.gliding and mid.step.name == "load_V_j" and 0.0 < mid.step_phase < 1.0
    glide.advance(0.2)
    assert not glide.gliding and glide.t == jump.t
    assert glide.counters(TILED) == jump.counters(TILED)


def test_stepping_counts_each_steps_bytes_exactly():
    config = AttentionConfig(seq_len=256)
    player = Player(config, algorithms=(TILED,))
    before = player.counters(TILED)
    player.step_forward()  # load_Q_i of block 0
    after = player.counters(TILED)
    step = player.frames()[0].step
    assert step.name == "load_Q_i"
    assert after.bytes_read - before.bytes_read == step.bytes * config.bh
    assert after.sram_bytes > 0


def test_a_config_change_resets_the_schedule():
    player = Player(AttentionConfig(seq_len=1024))
    player.play()
    player.advance(3.0)
    assert player.t > 0
    new = AttentionConfig(seq_len=2048, causal=True)
    assert player.set_config(new)
    assert player.t == 0.0 and player.config == new
    assert all(lane.config == new for lane in player.lanes)
    assert player.counters(TILED).bytes_read == 0
    assert not player.set_config(new)  # same config: nothing to do


def test_another_gpu_changes_the_clock_but_not_the_bytes():
    config = AttentionConfig(seq_len=2048)
    player = Player(config)
    player.seek_end()
    h200 = player.total_time
    player.set_gpu(GPUS["T4 16 GB"])
    assert player.total_time > h200
    assert player.finished
    _assert_totals(player.counters(NAIVE), config, NAIVE)


def _animation_lines_run(call) -> tuple[object, int]:
    """(call(), how many lines of app/state/animation/ ran during it): work counted, not timed."""
    import sys

    package = str(Path(sys.modules[Player.__module__].__file__).parent)
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if not frame.f_code.co_filename.startswith(package):
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        result = call()
    finally:
        sys.settrace(None)
    return result, count


def _build_and_play(n: int) -> tuple[Player, int, int]:
    """(the player of N = n, lines its build ran, most lines one of 20 frames ran)."""
    player, build = _animation_lines_run(lambda: Player(AttentionConfig(seq_len=n)))
    player.play()
    most = 0
    for _ in range(20):
        player.advance(1 / 60)
        most = max(most, _animation_lines_run(player.frames)[1])
    return player, build, most


def test_lod_at_n_131072_builds_and_plays_with_the_work_of_a_small_n():
    """At N = 131072 the lanes aggregate blocks (levels of detail), so building the player and
    making a frame run no more of the animation's code than at N = 4096, and the arrays behind
    them stay far below the million blocks the kernels launch."""
    big, big_build, big_frame = _build_and_play(131072)
    _, small_build, small_frame = _build_and_play(4096)
    assert all(not lane.step_level for lane in big.lanes)
    assert max(lane.units for lane in big.lanes) < 200_000  # aggregated, not 1M+ blocks
    assert big_build <= 1.3 * small_build, (small_build, big_build)
    assert big_frame <= 1.3 * small_frame, (small_frame, big_frame)
    # and a full pass takes the chosen duration: 20 s at 1× by default
    assert big.duration_s * big.rate() == pytest.approx(big.total_time)


def test_a_pass_lasts_the_chosen_duration_whatever_n():
    for n in (256, 32768):
        player = Player(AttentionConfig(seq_len=n), duration_s=20.0)
        player.play()
        frames = 0
        while player.playing:
            player.advance(0.5)
            frames += 1
        assert frames == 40


def test_parse_step_tags_blocks_run_to_the_next_tag_or_a_blank_line():
    text = "\n".join(
        [
            "// header mentions `// STEP name` in backticks: not a tag",  # 0
            "void k() {",  # 1
            "    // STEP load_Q_i",  # 2
            "    a();",  # 3
            "    // STEP load_K_j",  # 4
            "    b();",  # 5
            "",  # 6
            "    c();",  # 7
            "    // STEP load_V_j / STEP store_ml",  # 8
            "    d();",  # 9
            "}",  # 10
        ]
    )
    blocks = parse_step_tags(text)
    assert blocks["load_Q_i"] == ((2, 3),)
    assert blocks["load_K_j"] == ((4, 5),)
    assert blocks["load_V_j"] == ((8, 10),)
    assert blocks["store_ml"] == ((8, 10),)
    assert "name" not in blocks


def test_online_softmax_ends_at_the_exact_softmax_times_v():
    trace = toy_trace()
    assert np.allclose(trace.final, trace.exact)
    assert any(u.rescale < 1.0 for u in trace.updates[1:])  # m grows: rescaling is visible
    rng = np.random.default_rng(3)
    for tile in (1, 3, 5, 64):
        q, k, v = (
            rng.standard_normal(16),
            rng.standard_normal((50, 16)),
            rng.standard_normal((50, 8)),
        )
        t = online_softmax_trace(q * 4, k, v, tile)
        s = k @ (q * 4) / 4.0
        p = np.exp(s - s.max())
        assert np.allclose(t.final, (p / p.sum()) @ v)


# --------------------------------------------------------------------------------------------
# Widget (pytest-qt)

FAKE_FLASH = """\
// a fake readable kernel for the tests
__global__ void flash() {
    // STEP load_Q_i
    load(Q);

    for (int j = 0; j < t; ++j) {
        // STEP load_K_j
        load(K);
        // STEP load_V_j
        load(V);
        // STEP compute_S_ij
        s = q * k;
        // STEP online_softmax
        m = max(m, s);
        // STEP accumulate_O_i
        o += p * v;
    }
    // STEP store_O_i
    store(O);
    // STEP store_ml
    store(ml);
}
"""


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    (tmp_path / "flash_readable.cu").write_text(FAKE_FLASH)
    return tmp_path


@pytest.fixture
def widget(qtbot, kernel_dir):
    from app.animation import TileAnimationWidget

    w = TileAnimationWidget(config=AttentionConfig(seq_len=512), kernel_dir=kernel_dir)
    qtbot.addWidget(w)
    w.resize(1280, 860)
    w.show()
    qtbot.waitUntil(lambda: w.source_panel.sources.get("tiled") is not None, timeout=5000)
    return w


def test_the_widget_has_the_object_name_the_main_window_looks_for(widget):
    assert widget.objectName() == "tileAnimation"
    assert widget.findChild(type(widget.timeline), "animTimeline") is widget.timeline


@pytest.mark.parametrize("config", CONFIGS[:4], ids=_ids)
def test_widget_counters_at_the_end_of_a_play_equal_the_cost_model(widget, qtbot, config):
    widget.set_config(config)
    widget.set_duration(0.3)
    widget.play()
    qtbot.waitUntil(lambda: not widget.playing, timeout=10_000)
    for a in (NAIVE, TILED):
        _assert_totals(widget.counters(a), config, a)
        frame = next(f for f in widget.frames() if f.algorithm == a)
        _assert_totals(frame.counters, config, a)
        assert frame.done
    assert widget.timeline.value() == widget.timeline.maximum()


def test_stepping_moves_the_highlighted_tile_and_the_source_line(qtbot, kernel_dir):
    from app.animation import TileAnimationWidget

    w = TileAnimationWidget(
        config=AttentionConfig(seq_len=256, block_m=64, block_n=64),
        kernel_dir=kernel_dir,
        algorithms=(TILED,),
    )
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    qtbot.waitUntil(lambda: w.source_panel.sources.get("tiled") is not None, timeout=5000)
    w.glide_s = 0.05  # the clock glides to each boundary (the tile travels); keep it short

    def forward():
        w.fwd_button.click()
        qtbot.waitUntil(lambda: not w.player.gliding, timeout=2000)

    seen = []
    for _ in range(4):
        forward()
        f = w.frames()[0]
        rect = w.canvas.region_rect(0, f.step.matrix, f.step.region)
        seen.append((f.step.name, rect, w.source_panel.highlighted))
    names = [s[0] for s in seen]
    assert names == ["load_Q_i", "load_K_j", "load_V_j", "compute_S_ij"]
    q_rect, k_rect = seen[0][1], seen[1][1]
    assert q_rect != k_rect and k_rect.x() > q_rect.x()  # from the Q strip to the K strip
    assert seen[0][2] == ((2, 3),) and seen[1][2] == ((6, 7),)  # the source line follows
    assert w.source_panel.text.textCursor().blockNumber() == 10  # compute_S_ij's tag line
    # and back
    w.back_button.click()
    assert w.frames()[0].step.name == "load_V_j"
    assert w.source_panel.highlighted == ((8, 9),)
    # walking on moves K_j down the K strip
    while w.frames()[0].step.name != "load_K_j" or w.frames()[0].step.region[0] == 0:
        forward()
    f = w.frames()[0]
    assert w.canvas.region_rect(0, "K", f.step.region).y() > k_rect.y()


def test_a_config_change_resets_the_widgets_schedule(widget, qtbot):
    widget.set_duration(5.0)
    widget.play()
    qtbot.wait(200)
    assert widget.player.t > 0
    widget.pause()
    new = AttentionConfig(seq_len=4096, causal=True)
    with qtbot.waitSignal(widget.configApplied, timeout=2000):
        widget.set_config(new)
    assert widget.player.t == 0.0
    assert widget.timeline.value() == 0
    assert all(f.config == new and not f.started for f in widget.frames())
    assert widget.counters(NAIVE).bytes_read == 0
    assert widget.canvas.scene.config == new


def test_slider_bursts_build_only_the_newest_config_off_the_gui_thread(widget, qtbot):
    import threading

    from app.animation import widget as widget_module

    built_on = []
    original = widget_module.build_lanes

    def build(config, gpu, algorithms, clocks=None):
        built_on.append((config.seq_len, threading.get_ident()))
        return original(config, gpu, algorithms, clocks)

    applied = []
    widget.configApplied.connect(lambda: applied.append(widget.player.config))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("app.animation.widget.build_lanes", build)
        with qtbot.waitSignal(widget.configApplied, timeout=5000):
            for n in (1024, 1536, 2048, 2560, 3000):  # a burst, as a slider drag sends
                widget.set_config(AttentionConfig(seq_len=n))
            assert widget.config == AttentionConfig(seq_len=3000)
        qtbot.waitUntil(lambda: not widget.lanes_worker.busy, timeout=5000)
    # Paced (app/work/pacing.py) and superseded: only the newest config was built.
    assert [n for n, _ in built_on] == [3000]
    assert threading.get_ident() not in {t for _, t in built_on}
    assert applied == [AttentionConfig(seq_len=3000)]  # a superseded build is never shown
    assert widget.frames()[0].config == AttentionConfig(seq_len=3000)


def test_a_config_asked_for_while_an_older_build_lands_is_still_built(widget, qtbot):
    """The older build can land before the newer config's paced build starts: the newer
    config must not be forgotten (the Tiles tab stayed on the old N)."""
    older, newer = AttentionConfig(seq_len=1024), AttentionConfig(seq_len=4096)
    widget.set_config(older)
    widget._paced_build.flush()  # the older build starts off the GUI thread
    widget.set_config(newer)  # its build waits for the next paced turn
    widget.lanes_worker.flush()  # the older build lands first
    qtbot.waitUntil(lambda: widget.player.config == newer, timeout=5000)
    assert widget.frames()[0].config == newer


def test_lanes_picked_while_an_older_build_lands_are_still_built(widget, qtbot):
    """The same for a lane picked while the build of the same config lands: the new lanes
    must not be forgotten."""
    widget.set_algorithms((NAIVE, TILED_WS))
    widget._paced_build.flush()  # the build of these lanes starts off the GUI thread
    widget.set_algorithms((NAIVE, TILED_MMA))  # same config, other lanes: the next paced turn
    widget.lanes_worker.flush()  # the older build lands first
    qtbot.waitUntil(
        lambda: [lane.algorithm for lane in widget.player.lanes] == [NAIVE, TILED_MMA],
        timeout=5000,
    )


def test_the_online_softmax_panels_final_row_equals_softmax_times_v(widget):
    panel = widget.softmax_panel
    t = panel.trace
    e = np.exp(t.scores - t.scores.max())
    assert np.allclose(panel.final_row, (e / e.sum()) @ t.v)
    assert np.allclose(panel.final_row, panel.exact_row)
    html = panel.view.toHtml()
    assert "exact softmax(s)·V" in html and "difference" in html


def test_a_missing_kernel_file_is_reported_not_fatal(qtbot, tmp_path):
    from app.animation.source_panel import SourcePanel

    panel = SourcePanel(kernel_dir=tmp_path)
    qtbot.addWidget(panel)
    assert panel.sources == {}  # nothing read on the GUI thread during construction
    qtbot.waitUntil(lambda: "tiled" in panel.sources, timeout=5000)
    assert panel.sources["tiled"] is None
    assert "not there yet" in panel.status.text()
    (tmp_path / "flash_readable.cu").write_text(FAKE_FLASH)
    panel.request_load()
    qtbot.waitUntil(lambda: panel.sources.get("tiled") is not None, timeout=5000)
    panel.show_step("tiled", "flash_fwd", "store_O_i")
    assert panel.highlighted == ((17, 18),)


def test_a_source_read_that_ends_after_its_panel_is_gone_is_dropped_quietly(qtbot, tmp_path, capfd):
    """The window closing (or Ctrl+C) while a kernel source is read: the read ends with
    nobody to tell, and says nothing (a read on a bare pool thread printed a traceback)."""
    import shiboken6
    from PySide6.QtCore import QThreadPool
    from PySide6.QtWidgets import QApplication

    from app.animation.source_panel import SourcePanel

    (tmp_path / "flash_readable.cu").write_text(FAKE_FLASH)
    panel = SourcePanel(kernel_dir=tmp_path)  # its first reads wait for a turn of the loop
    panel.request_load()  # and these start now
    shiboken6.delete(panel)
    assert QThreadPool.globalInstance().waitForDone(5000)
    for _ in range(5):  # deliveries queued to the GUI thread, if any
        QApplication.processEvents()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Signal source has been deleted" not in err, err


def test_naive_gemm_steps_say_they_run_in_a_library_kernel(qtbot, tmp_path):
    from app.animation.source_panel import SourcePanel

    (tmp_path / "softmax.cu").write_text("// STEP softmax_read_S\nread();\n")
    panel = SourcePanel(kernel_dir=tmp_path)
    qtbot.addWidget(panel)
    panel.follow("naive")
    qtbot.waitUntil(lambda: panel.sources.get("naive") is not None, timeout=5000)
    panel.show_step("naive", "gemm_qk", "qk_store_S_ij")
    assert "cuBLAS" in panel.status.text() and panel.highlighted == ()
    panel.show_step("naive", "softmax", "softmax_read_S")
    assert panel.highlighted == ((0, 1),)


@pytest.mark.skipif(
    not all((KERNEL_DIR / f).exists() for f in SOURCE_FILES.values()),
    reason="the readable kernels are not written yet",
)
def test_the_real_kernels_tag_every_step_the_panel_highlights():
    for algo, fname in SOURCE_FILES.items():
        blocks = parse_step_tags((KERNEL_DIR / fname).read_text())
        names = STEP_NAMES["softmax"] if algo == NAIVE else STEP_NAMES["flash_fwd"]
        missing = [n for n in names if n not in blocks]
        assert not missing, f"{fname} lacks // STEP tags for {missing}"


def test_set_gpu_changes_the_clock_and_keeps_the_bytes(widget):
    widget.set_config(AttentionConfig(seq_len=2048))
    widget.flush()
    widget.player.seek_end()
    h200 = widget.player.total_time
    widget.set_gpu(GPUS["RTX 4090 24 GB"])
    assert widget.player.total_time > h200
    frames = widget.frames()
    assert all(f.sram_capacity == GPUS["RTX 4090 24 GB"].smem_per_sm_bytes for f in frames)
    _assert_totals(widget.counters(TILED), widget.config, TILED)


def _play_and_record_frames(widget, n: int, frames: int = 30) -> tuple[int, int]:
    """Play `frames` frames of N = n from 30 % in, repainting each: (the most a frame drew, in
    bytes of recorded painter commands; how often the static background was painted again
    after the first frame)."""
    from PySide6.QtGui import QPainter, QPicture

    canvas = widget.canvas
    widget.set_config(AttentionConfig(seq_len=n))
    widget.seek_fraction(0.3)  # applies the new config's lanes first
    backgrounds = []
    real = canvas._paint_static
    canvas._paint_static = lambda p, lay: (backgrounds.append(1), real(p, lay))[1]
    most = 0
    widget.player.playing = True
    try:
        for i in range(frames):
            widget.player.advance(1 / 60)
            widget.refresh()
            canvas.repaint()
            if i == 0:
                del backgrounds[:]  # the new config's background, once
            picture = QPicture()
            painter = QPainter(picture)
            canvas._paint_frame(painter, canvas.current_layout())
            painter.end()
            most = max(most, picture.size())
    finally:
        widget.player.playing = False
        del canvas._paint_static
    return most, len(backgrounds)


def test_large_n_plays_over_a_cached_background_drawing_no_more_than_small_n(widget, qtbot):
    """N = 131072 has 65 536 times the tiles of N = 512: a frame still draws a few dozen
    shapes over the background painted once, so its paint does not grow with N."""
    small, small_backgrounds = _play_and_record_frames(widget, 4096)
    large, large_backgrounds = _play_and_record_frames(widget, 131072)
    assert small_backgrounds == large_backgrounds == 0
    assert large <= 1.5 * small, (small, large)
    assert len(widget.canvas.paint_ms) >= 60
    image = widget.grab().toImage()
    assert image.width() > 0 and not image.isNull()


def test_canvas_fonts_measure_each_text_of_a_held_font_once_and_others_exactly(qtbot):
    from PySide6.QtGui import QFont, QFontMetricsF

    from app.animation.canvas_text import WIDTHS_KEPT, Fonts

    fonts = Fonts()
    texts = ["Q tile", "SRAM 228 KiB", "HBM → SRAM", "Q tile"]
    widths = [fonts.width(t, fonts.norm) for t in texts]
    assert widths == [QFontMetricsF(fonts.norm).horizontalAdvance(t) for t in texts]
    assert len(fonts._widths) == 3  # the repeated text was measured once
    other = QFont("DejaVu Sans Mono", 14)  # another font: its own metrics, never the last one's
    assert fonts.width("K", other) == QFontMetricsF(other).horizontalAdvance("K")
    for i in range(WIDTHS_KEPT + 10):  # figures of many scenes: the kept set stays bounded
        fonts.width(f"{i} GB/s", fonts.small)
    assert len(fonts._widths) <= WIDTHS_KEPT
