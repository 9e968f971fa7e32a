"""A plot's picture of its scene and the live layer over it: a slider move paints the cursor and
markers over the picture without painting the scene again, and what the plot shows is what
painting its whole scene again shows, after moves and after the data change under them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.plotting.metric_plot import MetricPlot
from app.plotting.plot_items import Style
from app.window.theme import palette


@pytest.fixture
def plot(qtbot):  # type: ignore[no-untyped-def]
    holder = QWidget()  # closed at the end (pyqtgraph's own close would drop the plot item)
    qtbot.addWidget(holder)
    p = MetricPlot("testPlot", "Test", "bytes", str)
    QVBoxLayout(holder).addWidget(p)
    p.add("line", "a line", Style("naive", 2.0))
    p.add("dots", "dots", Style("tiled", symbol="s", line=False, symbol_size=9))
    ring = Style("fg", symbol="o", line=False, symbol_size=15, hollow=True)
    p.add("here", "", ring, bounds=False, moves=True)
    p.add("l2", "at L2", Style("muted", symbol="d", symbol_size=11, hollow=True), moves=True)
    p.apply_palette(palette("dark"))
    p.set_x_span(128, 131072)
    ns = [128 * 2**k for k in range(11)]
    p.set_series("line", ns, [n * n for n in ns])
    p.set_series("dots", ns, [3 * n for n in ns])
    p.fit_y()
    holder.resize(500, 400)
    holder.show()
    qtbot.waitExposed(holder)
    qtbot.wait(30)
    yield p


def _move(plot: MetricPlot, n: int) -> None:
    plot.set_cursor(n)
    plot.set_series("here", [n, n], [n * n, 3 * n])
    plot.set_series("l2", [n], [10 * n])


def _shown(plot: MetricPlot) -> np.ndarray:
    """The viewport's pixels as the plot paints them (from its picture when live)."""
    image = plot.viewport().grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), -1).copy()


def _afresh(plot: MetricPlot) -> np.ndarray:
    """The same pixels with the whole scene painted again into a new picture."""
    plot.picture.invalidate()
    return _shown(plot)


def _differ(a: np.ndarray, b: np.ndarray) -> float:
    """The share of pixel bytes that differ by more than antialiasing's rounding."""
    return float(np.mean(np.abs(a.astype(int) - b.astype(int)) > 24))


def test_a_move_paints_the_layer_over_the_picture_without_painting_the_scene(plot, qtbot):
    _move(plot, 1024)
    qtbot.wait(30)
    renders = plot.picture.renders
    for n in (2048, 4096, 8192, 4096):
        _move(plot, n)
        qtbot.wait(20)
    assert plot.picture.renders == renders  # the scene was not painted again
    assert _differ(_shown(plot), _afresh(plot)) < 0.002


def test_the_layer_is_drawn_where_it_is_and_nowhere_else(plot, qtbot):
    _move(plot, 1024)
    qtbot.wait(30)
    with_layer = _shown(plot)
    plot.cursor.setVisible(False)
    for name in ("here", "l2"):
        plot.items[name].setVisible(False)
    qtbot.wait(30)
    without = _shown(plot)
    assert _differ(with_layer, without) > 0.0005  # the cursor and markers were there
    assert _differ(without, _afresh(plot)) < 0.002  # and left nothing behind


def test_data_changed_under_the_layer_reach_the_picture(plot, qtbot):
    _move(plot, 4096)
    qtbot.wait(30)
    before = _shown(plot)
    renders = plot.picture.renders
    ns = [128 * 2**k for k in range(11)]
    _move(plot, 8192)  # in the same turn as new data: the layer and the scene both change
    plot.set_series("dots", ns, [30 * n for n in ns])
    qtbot.wait(30)
    assert plot.picture.renders > renders
    now = _shown(plot)
    assert _differ(now, before) > 0.001
    assert _differ(now, _afresh(plot)) < 0.002


def test_a_new_size_or_palette_paints_the_picture_again(plot, qtbot):
    plot.window().resize(620, 380)
    qtbot.wait(30)
    assert _differ(_shown(plot), _afresh(plot)) < 0.002
    plot.apply_palette(palette("light"))
    qtbot.wait(30)
    assert _differ(_shown(plot), _afresh(plot)) < 0.002


def test_moving_markers_keep_their_series_visibility_and_legend_rows(plot):
    _move(plot, 2048)
    assert plot.series["here"] == ([2048, 2048], [2048 * 2048, 3 * 2048])
    plot.set_visible_items(["line", "here", "l2"])
    assert plot.legend_texts() == ["a line", "at L2"]  # an unlabelled marker set has no row
    assert plot.items["here"].isVisible() and not plot.items["dots"].isVisible()


def test_plots_changed_together_paint_their_scenes_one_per_turn_on_the_screen(qtbot):
    from PySide6.QtCore import QTimer

    holder = QWidget()
    qtbot.addWidget(holder)
    lay = QVBoxLayout(holder)
    plots = []
    ns = [128 * 2**k for k in range(11)]
    for name in ("first", "second", "third"):
        p = MetricPlot(f"{name}Plot", name, "bytes", str)
        p.add("line", "a line", Style("naive", 2.0))
        p.apply_palette(palette("dark"))
        p.set_x_span(128, 131072)
        p.set_series("line", ns, [n * n for n in ns])
        p.fit_y()
        lay.addWidget(p)
        plots.append(p)
    holder.resize(500, 700)
    holder.show()
    qtbot.waitExposed(holder)
    qtbot.wait(50)
    events: list[str] = []
    for p in plots:
        refresh = p.picture._refresh

        def recorded(viewport, region, p=p, refresh=refresh):  # type: ignore[no-untyped-def]
            events.append(p.objectName())
            refresh(viewport, region)

        p.picture._refresh = recorded
    tick = QTimer()
    tick.setInterval(0)  # due at every turn of the event loop
    tick.timeout.connect(lambda: events.append("tick"))
    tick.start()
    for k, p in enumerate(plots):  # one change redraws all three
        p.set_series("line", ns, [(k + 2) * n * n for n in ns])
        p.viewport().update()  # the repaint of its scene that the change asks for
    qtbot.waitUntil(lambda: all(p.objectName() in events for p in plots), timeout=5000)
    tick.stop()
    painted = [e for e in events if e != "tick"]
    assert painted == ["firstPlot", "secondPlot", "thirdPlot"]  # once each, oldest first
    at = [events.index(name) for name in painted]
    assert all("tick" in events[i + 1 : j] for i, j in itertools.pairwise(at)), events
    # A grab (not the screen) still gets every picture up to date at once.
    for k, p in enumerate(plots):
        p.set_series("line", ns, [(k + 5) * n * n for n in ns])
    events.clear()
    holder.grab()
    assert sorted(events) == ["firstPlot", "secondPlot", "thirdPlot"]
