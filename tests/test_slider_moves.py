"""What a slider move costs the window: a move repaints each plot once with its cursor and
markers and redraws no data item; a burst of moves in one turn of the event loop moves the
markers twice (its first move and its last); the explain pane and the lesson strip lay their
texts out when the slider rests, not on every move."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject

from app.plotting.metric_plot import MetricPlot
from app.state.runs import Job, RunOutcome
from gpu.algorithms import NAIVE

#: The items a move may change on a plot: the "you are here" markers.
MARKERS = {"current", "bounds", "l2_current"}


class PaintCounter(QObject):
    def __init__(self, widgets) -> None:
        super().__init__()
        self.counts = {w: 0 for w in widgets}
        for w in widgets:
            w.installEventFilter(self)

    def eventFilter(self, obj, event):  # type: ignore[no-untyped-def]
        if event.type() == QEvent.Type.Paint:
            self.counts[obj] += 1
        return False


def _ready(qtbot, wait_started, make_window):
    window = make_window(seq_len=1024)
    wait_started(window)
    window.tabs.setCurrentIndex(0)
    window.plots.flush_model()
    qtbot.wait(50)
    return window


def _watch(plots, monkeypatch):
    """(marker moves, (plot, item) set_series calls, paint counter) from now on."""
    moved = []
    plots.markers.moved.connect(lambda: moved.append(1))
    set_series = []
    real = MetricPlot.set_series

    def recording(self, name, *args, **kwargs):  # type: ignore[no-untyped-def]
        set_series.append((self.objectName(), name))
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(MetricPlot, "set_series", recording)
    # the plots on screen (the bandwidth plot, decode's, stands hidden in the traffic plot's
    # place and paints nothing)
    shown = [p.viewport() for p in plots.plots if p.isVisible()]
    return moved, set_series, PaintCounter(shown)


def _measured_around(qtbot, window, steps) -> int:
    """Measure the slider's next `steps` stops (no result arrives during the moves), come back."""
    slider = window.controls.slider
    start = slider.value()
    for step in (*range(1, steps + 1), 0):
        slider.setValue(start + step)
        qtbot.waitUntil(lambda: not window.runner.busy, timeout=5000)
    qtbot.wait(50)
    return start


def test_a_move_repaints_each_plot_once_and_a_burst_moves_the_markers_only_twice(
    qtbot, make_window, wait_started, monkeypatch
):
    window = _ready(qtbot, wait_started, make_window)
    slider = window.controls.slider
    start = _measured_around(qtbot, window, 7)
    moved, set_series, paints = _watch(window.plots, monkeypatch)
    slider.setValue(start + 1)  # one move
    n = window.config.seq_len
    assert all(p.cursor_n == n for p in window.plots.plots)
    assert moved == [1] and window.plots.traffic.series["current"][0] == [n, n]  # at once
    qtbot.wait(60)
    assert moved == [1]
    assert {name for _, name in set_series} <= MARKERS, set_series  # no data item redrawn
    assert all(count == 1 for count in paints.counts.values()), paints.counts

    moved.clear()
    paints.counts = dict.fromkeys(paints.counts, 0)
    for step in range(2, 8):  # six moves before the loop runs: a fast drag's frame
        slider.setValue(start + step)
    n = window.config.seq_len
    assert all(p.cursor_n == n for p in window.plots.plots)  # the cursors at once
    assert moved == [1]
    qtbot.waitUntil(lambda: window.plots.traffic.series["current"][0] == [n, n], timeout=2000)
    qtbot.wait(60)
    assert moved == [1, 1]  # its first move and its last
    assert {name for _, name in set_series} <= MARKERS, set_series
    assert all(count <= 2 for count in paints.counts.values()), paints.counts


def test_the_explain_pane_and_the_lesson_lay_out_once_when_the_slider_rests_or_is_let_go(
    qtbot, make_window, wait_started
):
    window = _ready(qtbot, wait_started, make_window)
    pane, strip = window.explain, window.lesson
    made = []
    strip.worker.applied.connect(lambda *_: made.append(1))
    layouts = pane.layouts
    slider = window.controls.slider
    start = slider.value()
    for step in range(1, 5):  # a drag: a move a frame or so, no pause
        slider.setValue(start + step)
        qtbot.wait(15)
    assert pane.layouts == layouts and made == []  # nothing laid out while it moves
    qtbot.waitUntil(lambda: not pane.busy and not strip.busy, timeout=5000)
    qtbot.wait(50)
    assert pane.layouts == layouts + 1 and made == [1]
    assert pane._shown[0].config == window.config

    slider.setSliderDown(True)
    slider.setSliderPosition(start)
    assert pane.busy and pane._settled_refresh.pending
    slider.setSliderDown(False)  # let go: the text is made now, without waiting for a pause
    assert not pane._settled_refresh.pending and not strip._paced.pending
    qtbot.waitUntil(lambda: pane.layouts == layouts + 2, timeout=5000)


def test_a_result_of_another_family_leaves_the_plots_alone(qtbot, make_window, wait_started):
    window = _ready(qtbot, wait_started, make_window)
    draws = []
    window.plots.set_measured = lambda series: draws.append(series)
    other = window.config.with_(heads=window.config.heads + 3)
    result = window.backend.backend.run(other, NAIVE)
    job = Job(0, window.backend_switch.generation, other, NAIVE, None)
    window.runner.outcome.emit(RunOutcome(job, window.backend.key, result=result))
    qtbot.wait(60)
    assert window.measurements.store.get(other, NAIVE, window.backend.key) is not None  # kept
    assert draws == []
