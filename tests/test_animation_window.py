"""The Tiles tab in the main window: every label whole from 1280×800 up (checked on the canvas's
layout model), the play buttons drawn as icons, the light theme, the step keys, measured clocks
from a recorded run, the canvas alone for exports, traces read off the GUI thread."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QPointF, QSize, Qt
from PySide6.QtGui import QColor
from PySide6.QtTest import QTest

from app.animation.canvas_checks import layout_problems
from app.animation.widget import FUSED
from gpu.algorithms import NAIVE, TILED, TILED_WS
from gpu.config import AttentionConfig
from gpu.launch import flash_ws

ROOT = Path(__file__).resolve().parent.parent
SIZES = [(1280, 800), (1500, 920)]
MOMENTS = (0.0, 0.004, 0.2, 0.45, 0.7, 0.95, 1.0)


def _tiles(window, qtbot):
    qtbot.waitUntil(lambda: window.animation is not None, timeout=5000)
    window.tabs.setCurrentWidget(window.animation)
    anim = window.animation
    anim.flush()
    return anim


def _problems_now(anim) -> list[str]:
    canvas = anim.canvas
    items = canvas.text_items()
    return layout_problems(canvas.fonts, items, canvas.width(), canvas.height())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_every_label_of_the_tiles_tab_is_whole_and_apart_at_the_default_sizes(
    make_window, qtbot, size
):
    window = make_window(seq_len=4096)
    window.resize(*size)
    anim = _tiles(window, qtbot)
    qtbot.waitUntil(lambda: window.size() == QSize(*size), timeout=2000)
    assert window.width() == size[0]  # the window really is that small: nothing forces it wider
    assert anim.canvas.width() >= 500
    seen_keys = set()
    for algo in FUSED:
        anim.set_algorithms((NAIVE, algo))
        anim.flush()
        for frac in MOMENTS:
            anim.seek_fraction(frac)
            problems = _problems_now(anim)
            assert problems == [], (algo, frac, problems[:5])
            seen_keys |= {it.key for it in anim.canvas.text_items()}
    # the labels that matter are all there (none dropped for lack of room)
    for key in (
        "header.clock",
        "header.verdict",
        "lane0.hbm.head",
        "lane1.sram.head",
        "lane1.occupancy",
        "lane0.counter.written.value",
        "lane0.counter.written.total",
        "lane1.counter.written.total",
        "lane1.roles.head",
        "lane1.legend0",
        "lane0.name.S",
        "lane0.name.P",
    ):
        assert key in seen_keys, key


def test_counters_always_show_their_units(make_window, qtbot):
    window = make_window(seq_len=4096)
    window.resize(1280, 800)
    anim = _tiles(window, qtbot)
    anim.seek_fraction(0.5)
    items = {it.key: it for it in anim.canvas.text_items()}
    for lane in (0, 1):
        for name in ("read", "written", "sram"):
            total = items[f"lane{lane}.counter.{name}.total"].text
            value = items[f"lane{lane}.counter.{name}.value"].text
            assert re.fullmatch(r"/ [\d.]+ [kMGT]?B", total), total
            assert re.fullmatch(r"[\d.]+ [kMGT]?B", value), value
    # naive writes gigabytes, tiled megabytes: the units say so
    assert items["lane0.counter.written.total"].text.endswith("MB")
    assert items["lane1.counter.written.total"].text.endswith("MB")
    assert "GB" in items["lane0.counter.read.total"].text


def test_the_sram_legend_rows_never_overlap_in_any_kernel(qtbot):
    from app.animation import TileAnimationWidget

    w = TileAnimationWidget(config=AttentionConfig(seq_len=2048), algorithms=(NAIVE, TILED_WS))
    qtbot.addWidget(w)
    w.resize(616, 695)
    w.show()
    for frac in (0.01, 0.2, 0.4, 0.6, 0.8):  # naive's three kernels, each with its own slots
        w.seek_fraction(frac)
        legend = [it for it in w.canvas.text_items() if ".legend" in it.key]
        assert legend
        assert layout_problems(w.canvas.fonts, legend, w.canvas.width(), w.canvas.height()) == []


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_warp_specialized_lane_draws_the_producer_and_each_consumer_of_its_launch(
    qtbot, head_dim
):
    from app.animation import TileAnimationWidget

    config = AttentionConfig(seq_len=4096, head_dim=head_dim)
    consumers = flash_ws.default_launch(head_dim).consumers  # 3 at d = 64, 2 at d = 128
    w = TileAnimationWidget(config=config, algorithms=(NAIVE, TILED_WS))
    qtbot.addWidget(w)
    w.resize(1256, 975)
    w.show()
    w.seek_fraction(0.5)
    frame = w.player.frames()[1]
    assert frame.roles is not None and frame.roles.consumers == consumers
    geo = w.canvas.current_layout().lanes[1]
    assert len(geo.role_rows) == 1 + consumers
    items = {it.key: it.text for it in w.canvas.text_items()}
    labels = [items.get(f"lane1.roles.label{k}") for k in range(1 + consumers + 1)]
    assert labels == ["producer (TMA)", *(f"consumer {c}" for c in range(consumers)), None]
    canvas = w.canvas
    assert layout_problems(canvas.fonts, canvas.text_items(), canvas.width(), canvas.height()) == []


def test_matrices_drawn_wider_say_by_how_much_and_nothing_at_1x(qtbot):
    from app.animation import TileAnimationWidget

    w = TileAnimationWidget(config=AttentionConfig(seq_len=4096))
    qtbot.addWidget(w)
    w.resize(1256, 975)
    w.show()
    items = {it.key: it.text for it in w.canvas.text_items()}
    assert re.search(r"×[\d.]+ wider", items["lane0.widen"])
    assert "×1 " not in items["lane0.widen"] and "×1.0 " not in items["lane0.widen"]
    # N = 256, d = 64: the strips are wide enough to scale (or nearly): no note at ×1
    w.set_config(AttentionConfig(seq_len=256, head_dim=64))
    w.flush()
    geo = w.canvas.current_layout().lanes[0]
    keys = {it.key for it in w.canvas.text_items()}
    assert ("lane0.widen" in keys) == (geo.widen >= 1.05)
    assert all("×1 " not in it.text for it in w.canvas.text_items())


def test_the_play_buttons_use_icons_not_glyphs(qtbot):
    from app.animation import TileAnimationWidget

    w = TileAnimationWidget(config=AttentionConfig(seq_len=512))
    qtbot.addWidget(w)
    for b in (w.play_button, w.back_button, w.fwd_button, w.restart_button):
        assert not b.icon().isNull()
        assert not set(b.text()) & set("⏸▶◀|"), b.text()
    w.play()
    assert w.play_button.text() == "Pause"
    w.pause()
    assert w.play_button.text() == "Play"


def _lightness(color: QColor) -> int:
    return color.lightness()


def test_the_light_theme_reaches_the_canvas_the_traces_and_the_kernel_source(make_window, qtbot):
    window = make_window(seq_len=1024)
    anim = _tiles(window, qtbot)
    window.resize(1500, 920)
    dark = anim.canvas.grab().toImage().pixelColor(3, 3)
    assert _lightness(dark) < 80
    window.apply_theme("light")
    assert _lightness(anim.canvas.c.bg) > 200
    image = anim.canvas.grab().toImage()
    assert _lightness(image.pixelColor(3, 3)) > 200
    source = anim.source_panel.text
    assert _lightness(source.palette().color(source.palette().ColorRole.Base)) > 200
    assert _lightness(anim.source_panel.colors.highlight) > 150  # the step's highlight too
    anim.set_mode(anim.TRACE_MODE)
    panel = anim.trace_panel
    assert _lightness(panel.view.c.bg) > 200 and _lightness(panel.canvas.c.bg) > 200
    window.apply_theme("dark")
    assert _lightness(panel.view.c.bg) < 80 and _lightness(anim.canvas.c.bg) < 80


def test_each_theme_outlines_the_sram_bands_origins_so_they_stand_out_from_its_background():
    from app.kit.theme import ANIMATION_DARK, ANIMATION_LIGHT, ANIMATION_PALETTES

    for palette in ANIMATION_PALETTES.values():
        assert set(palette.slot_edges) == set(palette.slot_fills), palette.name
    # Outlines are drawn away from the background: lighter than the band on dark, darker on
    # light; text on a filled bar takes the background's side.
    for theme, brighter in ((ANIMATION_DARK, True), (ANIMATION_LIGHT, False)):
        for matrix, fill in theme.slot_fills.items():
            edge = _lightness(QColor(theme.slot_edges[matrix]))
            assert (edge > _lightness(QColor(fill))) == brighter, (theme.name, matrix)
        on_bar, bg = QColor(theme.label_on_fill), QColor(theme.background)
        assert (_lightness(on_bar) < 128) == (_lightness(bg) < 128), theme.name


def test_arrows_step_the_animation_on_the_focused_canvas_and_change_n_elsewhere(
    make_window, qtbot, qtlog
):
    window = make_window(seq_len=1024)
    anim = _tiles(window, qtbot)
    anim.canvas.setFocus()
    qtbot.waitUntil(anim.canvas.hasFocus, timeout=2000)
    anim.glide_s = 0.0
    n = window.config.seq_len
    QTest.keyClick(anim.canvas, Qt.Key.Key_Right)
    assert anim.player.t > 0 and window.config.seq_len == n  # stepped, N unchanged
    t = anim.player.t
    QTest.keyClick(anim.canvas, Qt.Key.Key_Right)
    assert anim.player.t > t
    QTest.keyClick(anim.canvas, Qt.Key.Key_Left)
    assert anim.player.t == pytest.approx(t)
    # elsewhere (the Measurements tab), → is the window's larger N
    window.tabs.setCurrentIndex(0)
    window.plots.setFocus()
    qtbot.waitUntil(lambda: not anim.canvas.hasFocus(), timeout=2000)
    QTest.keyClick(window.plots, Qt.Key.Key_Right)
    assert window.config.seq_len > n
    assert not [r for r in qtlog.records if "Ambiguous shortcut" in r.message]


def test_switching_to_the_tiles_tab_gives_the_canvas_the_step_keys(make_window, qtbot):
    window = make_window(seq_len=1024)
    anim = _tiles(window, qtbot)
    window.tabs.setCurrentIndex(0)
    window.tabs.setCurrentIndex(1)
    qtbot.waitUntil(anim.canvas.hasFocus, timeout=2000)


def test_a_recorded_h200_run_puts_the_measured_times_on_the_lanes(make_window, qtbot):
    from app.state.animation.lane import cost_model_seconds

    window = make_window(seq_len=4096)
    anim = _tiles(window, qtbot)
    window.open_recorded(str(ROOT / "resources" / "recorded" / "h200_sweep.json"))
    qtbot.waitUntil(lambda: window.state.value.replay, timeout=10_000)
    window.state.update(config=window.config.with_(seq_len=4096))
    # The readable kernel, picked as a user does (the default lane is the fastest kernel).
    anim.lanes_box.setCurrentIndex(anim.lanes_box.findData(TILED))
    qtbot.waitUntil(
        lambda: (
            all(lane.clock.measured for lane in anim.player.lanes)
            and anim.player.config.seq_len == 4096
        ),
        timeout=10_000,
    )
    naive, tiled = anim.player.lane(NAIVE), anim.player.lane(TILED)
    assert tiled.total_time > 5 * naive.total_time  # 3.6 ms against 0.52 ms, as measured
    assert tiled.total_time > 2 * cost_model_seconds(tiled)  # slower than its roofline
    texts = {it.key: it.text for it in anim.canvas.text_items()}
    assert "measured" in texts["lane1.clock"] and "H200" in texts["lane1.clock"]
    assert texts["lane1.counter.time.caption"] in ("measured time", "time")


def test_the_canvas_alone_renders_at_any_export_size(qtbot):
    from app.animation import TileAnimationWidget

    w = TileAnimationWidget(config=AttentionConfig(seq_len=4096))
    qtbot.addWidget(w)
    w.resize(800, 600)
    w.seek_fraction(0.3)
    before = w.canvas.size()
    for size in (QSize(960, 544), QSize(1280, 720), QSize(640, 400)):
        image = w.canvas_image(size)
        assert image.size() == size
        assert len({image.pixel(x, y) for x in range(0, size.width(), 37)
                    for y in range(0, size.height(), 23)}) > 8  # fmt: skip
        assert w.canvas_problems(size) == []
    assert w.canvas.size() == before  # rendering at another size leaves the canvas as it was
    assert w.canvas_problems(QSize(300, 200))  # too small: it says what would not fit


def test_traces_are_read_off_the_gui_thread_when_the_trace_mode_opens(qtbot, monkeypatch):
    from app.animation import TileAnimationWidget, trace_panel

    seen = []
    original = trace_panel.read_traces

    def spy(*args, **kwargs):
        seen.append(threading.get_ident())
        return original(*args, **kwargs)

    monkeypatch.setattr(trace_panel, "read_traces", spy)
    w = TileAnimationWidget(config=AttentionConfig(seq_len=512))
    qtbot.addWidget(w)
    w.resize(1280, 860)
    w.show()
    with qtbot.waitSignal(w.trace_panel.loaded, timeout=20_000):
        w.set_mode(w.TRACE_MODE)
    panel = w.trace_panel
    assert seen and threading.get_ident() not in seen
    assert {t.algorithm for t in panel.traces} >= {NAIVE, TILED, TILED_WS}
    panel.select_trace(TILED_WS)
    assert panel.strip.roles is not None and panel.strip.roles.consumers == 2
    assert "ping-pong" in panel.info.text()
    panel.replay_at(0.5)
    frame = panel.canvas.frames[0]
    assert frame.roles is panel.strip.roles  # the canvas shows the block's real roles


def test_the_warp_specialized_lane_follows_its_own_kernel_source(qtbot):
    from app.animation import TileAnimationWidget

    w = TileAnimationWidget(
        config=AttentionConfig(seq_len=512, head_dim=128), algorithms=(NAIVE, TILED_WS)
    )
    qtbot.addWidget(w)
    w.resize(1280, 860)
    w.show()
    panel = w.source_panel
    qtbot.waitUntil(lambda: panel.sources.get(TILED_WS) is not None, timeout=5000)
    w.glide_s = 0.0
    while w.frames()[1].step.name != "compute_S_ij":
        w.step_forward()
    assert panel.followed == TILED_WS
    assert panel.status.text().startswith("flash_ws.cu: STEP compute_S_ij")
    first, _last = panel.highlighted[0]
    assert "STEP compute_S_ij" in panel.sources[TILED_WS].text.splitlines()[first]
    frame = w.frames()[1]
    assert frame.roles is not None and frame.tile == 0  # its roles strip plays along


def test_the_sram_box_says_where_its_blocks_per_sm_come_from(qtbot):
    from app.animation import TileAnimationWidget

    w = TileAnimationWidget(config=AttentionConfig(seq_len=4096))
    qtbot.addWidget(w)
    w.resize(1500, 820)
    w.show()
    w.seek_fraction(0.3)
    box = w.canvas.current_layout().lanes[1].box
    tip = w.canvas.tooltip_at(box.center())
    assert "86,016 B of shared memory" in tip and "2 blocks per SM" in tip
    assert "117 registers" in tip and "ptxas" in tip
    assert w.canvas.tooltip_at(box.topLeft() - QPointF(200, 0)) == ""


def test_the_trace_views_split_warp_specialized_blocks_into_role_sub_lanes(qtbot):
    from app.animation.trace_image import ROLE_KIND_CODES
    from app.animation.trace_panel import SHIPPED_DIR, TracePanel
    from app.state.animation.warp_roles import GEMM, ISSUE, SOFTMAX
    from gpu.files.trace import load_traces

    panel = TracePanel(traces=load_traces(SHIPPED_DIR / "h200_ws_trace.json"))
    qtbot.addWidget(panel)
    panel.resize(1400, 900)
    panel.show()
    view = panel.view
    roles = view._roles
    assert roles is not None
    for kind in (GEMM, SOFTMAX):  # both consumers' GEMM turns and softmax
        assert set(roles["role"][roles["kind"] == ROLE_KIND_CODES[kind]]) == {1, 2}
    assert set(roles["role"][roles["kind"] == ROLE_KIND_CODES[ISSUE]]) == {0}  # producer
    assert not view.grab().toImage().isNull() and view.painted_blocks == 512
    assert panel.strip.height() > 64 and len(panel.strip.role_rows()) == 3
    assert not panel.replay_button.icon().isNull() and "▶" not in panel.replay_button.text()
