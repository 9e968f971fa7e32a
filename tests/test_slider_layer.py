"""What moves with the slider (the cursor, its label, the "you are here" markers) is one item
of each plot's scene: a move asks for the repaint of the few pixels it covered and covers, and
what the window holds afterwards is what a fresh render of the plot shows."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QImage, QRegion
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.kit.theme import palette
from app.plotting.metric_plot import MetricPlot
from app.plotting.plot_items import Style

NS = [128 * 2**k for k in range(11)]


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
    p.set_series("line", NS, [n * n for n in NS])
    p.set_series("dots", NS, [3 * n for n in NS])
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


def _pixels(image: QImage) -> np.ndarray:
    image = image.convertToFormat(QImage.Format.Format_RGB32)
    raw = np.frombuffer(image.constBits(), np.uint8, count=image.bytesPerLine() * image.height())
    return raw.reshape(image.height(), -1)[:, : image.width() * 4].astype(int)


def _on_screen(plot: MetricPlot) -> np.ndarray:
    """What the window holds where the plot's viewport is (the platform's picture of the
    window: the offscreen platform's backing store here, the X server's on xcb)."""
    window = plot.window()
    shot = window.screen().grabWindow(window.winId()).toImage()
    viewport = plot.viewport()
    top_left = viewport.mapTo(window, viewport.rect().topLeft())
    return _pixels(shot.copy(top_left.x(), top_left.y(), viewport.width(), viewport.height()))


def _fresh(plot: MetricPlot) -> np.ndarray:
    return _pixels(plot.viewport().grab().toImage())


def _differ(a: np.ndarray, b: np.ndarray) -> float:
    """The share of pixel bytes that differ by more than antialiasing's rounding."""
    return float(np.mean(np.abs(a - b) > 48))


class _Repaints(QObject):
    """The regions the viewport was asked to repaint."""

    def __init__(self, viewport: QWidget) -> None:
        super().__init__()
        self.regions: list[QRegion] = []
        viewport.installEventFilter(self)

    def eventFilter(self, obj, event):  # type: ignore[no-untyped-def]
        if event.type() == QEvent.Type.Paint:
            self.regions.append(QRegion(event.region()))
        return False


def _area(region: QRegion) -> int:
    return sum(r.width() * r.height() for r in region)


def test_a_move_repaints_only_the_pixels_the_cursor_and_markers_leave_and_enter(plot, qtbot):
    _move(plot, 1024)
    qtbot.wait(30)
    seen = _Repaints(plot.viewport())
    _move(plot, 2048)
    qtbot.waitUntil(lambda: bool(seen.regions), timeout=2000)
    qtbot.wait(20)
    viewport = plot.viewport().width() * plot.viewport().height()
    repainted = sum(_area(r) for r in seen.regions)
    assert 0 < repainted < 0.12 * viewport, (repainted, viewport, [list(r) for r in seen.regions])


def test_the_changes_of_one_move_are_repainted_in_one_paint(plot, qtbot):
    _move(plot, 1024)
    qtbot.wait(30)
    seen = _Repaints(plot.viewport())
    _move(plot, 4096)  # the cursor, its label and two marker sets change in one turn
    qtbot.waitUntil(lambda: bool(seen.regions), timeout=2000)
    qtbot.wait(30)
    assert len(seen.regions) == 1


def test_after_moves_the_window_holds_what_a_fresh_render_shows(plot, qtbot):
    for n in (1024, 2048, 8192, 4096, 256):
        _move(plot, n)
        qtbot.wait(20)
    assert _differ(_on_screen(plot), _fresh(plot)) < 0.002


def test_data_changed_in_the_same_turn_as_a_move_reach_the_window(plot, qtbot):
    _move(plot, 4096)
    qtbot.wait(30)
    before = _on_screen(plot)
    _move(plot, 8192)
    plot.set_series("dots", NS, [30 * n for n in NS])
    qtbot.wait(30)
    now = _on_screen(plot)
    assert _differ(now, before) > 0.001
    assert _differ(now, _fresh(plot)) < 0.002


def test_a_move_after_the_view_changed_leaves_nothing_where_the_cursor_was(plot, qtbot):
    _move(plot, 1024)
    qtbot.wait(30)
    plot.set_series("dots", NS, [300 * n for n in NS])
    plot.fit_y()  # a new range: the plot repaints whole, the cursor where it is
    qtbot.wait(30)
    _move(plot, 8192)  # the first move since: the strip at 1024 must go too
    qtbot.wait(30)
    assert _differ(_on_screen(plot), _fresh(plot)) < 0.002


def test_the_cursor_and_markers_leave_nothing_behind_when_hidden(plot, qtbot):
    _move(plot, 1024)
    qtbot.wait(30)
    with_layer = _on_screen(plot)
    plot.cursor.setVisible(False)
    for name in ("here", "l2"):
        plot.items[name].setVisible(False)
    qtbot.wait(30)
    without = _on_screen(plot)
    assert _differ(with_layer, without) > 0.0005  # the cursor and markers were there
    assert _differ(without, _fresh(plot)) < 0.002  # and left nothing behind


def test_a_new_size_or_palette_reaches_the_window(plot, qtbot):
    plot.window().resize(620, 380)
    qtbot.wait(30)
    assert _differ(_on_screen(plot), _fresh(plot)) < 0.002
    plot.apply_palette(palette("light"))
    qtbot.wait(30)
    assert _differ(_on_screen(plot), _fresh(plot)) < 0.002


def test_moving_markers_keep_their_series_visibility_and_legend_rows(plot):
    _move(plot, 2048)
    assert plot.series["here"] == ([2048, 2048], [2048 * 2048, 3 * 2048])
    plot.set_visible_items(["line", "here", "l2"])
    assert plot.legend_texts() == ["a line", "at L2"]  # an unlabelled marker set has no row
    assert plot.items["here"].isVisible() and not plot.items["dots"].isVisible()


def test_a_long_cursor_label_goes_left_of_the_line_where_the_right_has_no_room(plot, qtbot):
    layer = plot.layer
    area = layer.deviceTransform_().mapRect(layer.boundingRect())
    plot.cursor_text = lambda n: "84% of the datasheet, 93% of the copy"
    for n in (1024, 8192, 16384, 65536):
        plot.set_cursor(n)
        x = layer._cursor_x(plot.cursor.value(), layer.deviceTransform_())
        rect = layer._label_rect(plot.cursor.text, x, area)
        assert area.left() <= rect.left() and rect.right() <= area.right(), (n, rect, area)
