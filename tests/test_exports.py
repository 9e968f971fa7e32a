"""Exports and headless rendering: every export yields a valid file (PNG at the asked size, SVG
with the curves' points, CSV equal to the plotted data, GIF/MP4 with the asked frames), writes
are atomic, overwriting is asked first, and an unwritable path gives a message and no file."""

from __future__ import annotations

import itertools
import os
import re
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QDialog, QPushButton
from test_session import FAKE_DATE, FAKE_DEVICE, synthetic_recording, write_synthetic

import main
from app.export import plot_tables
from app.state.recorded_run import SHIPPED_RECORDING
from app.window import file_menu
from app.window.file_menu import ExportRequest
from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA
from gpu.files.recording import load_recording

imageio = pytest.importorskip("imageio.v3")
UNWRITABLE = "/proc/tilescope_export"  # not even root can create files in /proc
#: The smallest animation whose labels all fit (the canvas's minimum), in 16-pixel blocks.
SMALL_ANIMATION = (864, 448)


@pytest.fixture(autouse=True)
def _start_at_n_4096(window_settings):
    window_settings.setValue("controls/seq_len", 4096)


@pytest.fixture
def window(make_window, tmp_path):
    """A window replaying a synthetic recording: measured points, OOM marks, reference peers."""
    return make_window(open_path=str(write_synthetic(tmp_path / "synthetic.json")))


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------------------------ images


def test_png_export_decodes_at_the_asked_size(qtbot, window, tmp_path):
    fm = window.file_menu
    all_four = tmp_path / "plots.png"
    one = tmp_path / "timing.png"
    for request in (
        ExportRequest("plots_png", str(all_four), size=(1234, 777)),
        ExportRequest("plots_png", str(one), size=(640, 400), only="timingPlot"),
    ):
        with qtbot.waitSignal(fm.exported, timeout=10000):
            assert fm.export(request)  # made between frames, encoded off the GUI thread
    for path, size in ((all_four, (1234, 777)), (one, (640, 400))):
        image = QImage(str(path))
        assert not image.isNull() and (image.width(), image.height()) == size
        colors = {image.pixel(x, y) for x in range(0, size[0], 37) for y in range(0, size[1], 29)}
        assert len(colors) > 5  # drawn, not blank


def _point_counts(svg: bytes) -> tuple[Counter, list[str]]:
    """How many coordinate pairs each <path>/<polyline> holds; every <text>'s text."""
    root = ET.fromstring(svg)  # parses: well-formed XML
    counts: Counter = Counter()
    texts = []
    number = r"-?\d+(?:\.\d+)?(?:e-?\d+)?"
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1]
        if tag == "path":
            counts[len(re.findall(rf"{number},{number}", el.get("d", "")))] += 1
        elif tag == "polyline":
            counts[len(el.get("points", "").split())] += 1
        elif tag == "text":
            texts.append("".join(el.itertext()))
        assert tag != "image", "the SVG must hold vectors, not pictures"
    return counts, texts


def test_svg_export_parses_and_holds_every_curves_points(qtbot, window, tmp_path):
    path = tmp_path / "plots.svg"
    with qtbot.waitSignal(window.file_menu.exported, timeout=10000):
        # made between frames, its coordinates rewritten and written off the GUI thread
        assert window.file_menu.export(ExportRequest("plots_svg", str(path), size=(1600, 1000)))
    counts, texts = _point_counts(path.read_bytes())
    plotted = plot_tables.plotted_series(window.plots)
    lines: Counter = Counter()
    for (plot_name, name), (xs, _) in plotted.items():
        plot = window.findChild(object, plot_name)
        if plot.styles[name].line:  # a curve: one path through all its points
            lines[len(xs)] += 1
    assert lines[41] >= 4  # the model curves over the whole N range (4 points per octave)
    for n, series in lines.items():
        assert counts[n] >= series, f"{series} curves of {n} points, {counts[n]} paths"
    markers = sum(len(xs) for (p, n), (xs, _) in plotted.items() if n.startswith("measured_"))
    assert sum(counts.values()) > markers  # symbols are paths too
    text = " ".join(texts)
    for words in ("Peak memory", "Roofline", "PyTorch SDPA flash (recorded)", FAKE_DEVICE):
        assert words in text


def test_window_screenshot_is_a_png_of_the_window(window, tmp_path):
    path = tmp_path / "window.png"
    assert window.file_menu.export(ExportRequest("screenshot", str(path)))
    image = QImage(str(path))
    assert (image.width(), image.height()) == (window.width(), window.height())


# ------------------------------------------------------------------------------------ CSV


def test_csv_round_trips_to_the_plotted_data_with_units_in_the_header(window, tmp_path):
    path = tmp_path / "plots.csv"
    assert window.file_menu.export(ExportRequest("plots_csv", str(path)))
    text = path.read_text()
    plotted = plot_tables.plotted_series(window.plots)
    assert plot_tables.read_plots_csv(text) == plotted  # exact, every series
    header = text.splitlines()[0]
    for unit in ("[tokens]", "[B]", "[ms]", "[FLOP/B]", "[FLOP/s]"):
        assert unit in header
    assert "timingPlot/reference_sdpa_flash y: time per forward pass [ms]" in header
    assert "PyTorch SDPA flash (recorded)" in header
    assert ("memoryPlot", "oom") in plotted  # naive's out-of-memory marks are data too
    assert ("timingPlot", f"measured_{TILED_WGMMA}") in plotted


# ------------------------------------------------------------------------------------ animation


def _export_animation(qtbot, window, path, frames, size=SMALL_ANIMATION):
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    fm = window.file_menu
    with qtbot.waitSignal(fm.exported, timeout=60000) as done:
        assert fm.export(
            ExportRequest(path.suffix[1:], str(path), size=size, frames=frames, fps=10)
        )
        assert fm.progress_dialog is not None and fm.progress_dialog.isVisible()
        timer.start(10)
    timer.stop()
    assert done.args == [str(path)]
    assert fm.progress_dialog is None
    return ticks


def test_gif_export_has_the_expected_frames_and_keeps_the_gui_responsive(qtbot, window, tmp_path):
    path = tmp_path / "tiles.gif"
    ticks = _export_animation(qtbot, window, path, frames=12)
    frames = imageio.imread(path, index=None)
    assert frames.shape[:3] == (12, SMALL_ANIMATION[1], SMALL_ANIMATION[0])
    assert len({f.tobytes() for f in frames}) == 12  # the clock moved every frame
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) > 3 and max(gaps) < 0.25  # painted in bands: the GUI kept running
    assert _files(tmp_path) == sorted(["synthetic.json", "tilescope.ini", "tiles.gif"])


def test_mp4_export_has_the_expected_frames(qtbot, window, tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    import imageio.v2 as iio2

    path = tmp_path / "tiles.mp4"
    _export_animation(qtbot, window, path, frames=9, size=(870, 450))
    assert path.read_bytes()[4:8] == b"ftyp"
    reader = iio2.get_reader(str(path), format="FFMPEG")
    try:
        assert reader.count_frames() == 9
        assert reader.get_data(0).shape == (448, 864, 3)  # rounded to 16-pixel blocks
    finally:
        reader.close()


def test_cancelling_an_animation_export_leaves_no_file(qtbot, window, tmp_path):
    fm = window.file_menu
    path = tmp_path / "long.gif"
    assert fm.export(ExportRequest("gif", str(path), size=SMALL_ANIMATION, frames=400, fps=10))
    exporter = fm.exporter
    qtbot.waitUntil(lambda: exporter.done >= 2, timeout=20000)
    with qtbot.waitSignal(exporter.cancelled, timeout=20000):
        fm.progress_dialog.findChild(QPushButton).click()  # the dialog's Cancel button
    assert exporter.state == "cancelled"
    assert _files(tmp_path) == ["synthetic.json", "tilescope.ini"]  # no target, no .part file


# ------------------------------------------------------------------------------------ safety


@pytest.mark.parametrize("kind", ["plots_png", "plots_svg", "plots_csv", "screenshot", "gif"])
def test_an_unwritable_path_gives_a_message_and_leaves_no_file(window, kind):
    suffix = {"plots_svg": ".svg", "plots_csv": ".csv", "gif": ".gif"}.get(kind, ".png")
    path = UNWRITABLE + suffix
    window.banner.dismiss()
    assert not window.file_menu.export(ExportRequest(kind, path, size=SMALL_ANIMATION, frames=3))
    assert "cannot write in /proc" in window.banner.message
    assert not os.path.exists(path)
    assert not [p for p in os.listdir("/proc") if p.startswith(".tilescope_export")]


def test_overwriting_asks_first_through_a_replaceable_question(window, tmp_path, monkeypatch):
    path = tmp_path / "plots.csv"
    path.write_text("precious")
    fm = window.file_menu
    asked = []
    # The default question is a modal plain-text yes/no box: answer it "No".
    monkeypatch.setattr(file_menu, "ask", lambda *a: asked.append(a) or False)
    assert not fm.export(ExportRequest("plots_csv", str(path)))
    assert len(asked) == 1 and str(path) in asked[0][2] and path.read_text() == "precious"
    fm.confirm_overwrite = lambda p: True
    assert fm.export(ExportRequest("plots_csv", str(path)))
    assert plot_tables.read_plots_csv(path.read_text()) == plot_tables.plotted_series(window.plots)


def test_the_export_dialog_exports_what_it_is_set_to(qtbot, window, tmp_path):
    window.export_action.trigger()  # Ctrl+E
    dialog = window.findChild(QDialog, "exportDialog")
    assert dialog.isVisible()
    for kind, suffix in (("gif", ".gif"), ("plots_csv", ".csv"), ("mp4", ".mp4")):
        dialog.kind.setCurrentIndex(dialog.kind.findData(kind))
        assert dialog.path.text().endswith(suffix) and suffix * 2 not in dialog.path.text()
        assert dialog.frames.isEnabled() == (kind != "plots_csv")
    dialog.kind.setCurrentIndex(dialog.kind.findData("plots_png"))
    dialog.plot.setCurrentIndex(dialog.plot.findData("rooflinePlot"))
    dialog.width_spin.setValue(500)
    dialog.height_spin.setValue(300)
    target = tmp_path / "roof"
    window.file_menu.ask_save_path = lambda title, filters, suggested: str(target)
    dialog.findChild(object, "exportBrowse").click()
    assert dialog.path.text() == str(target) + ".png"
    with qtbot.waitSignal(window.file_menu.exported, timeout=10000):
        dialog.accept()
    image = QImage(str(target) + ".png")
    assert (image.width(), image.height()) == (500, 300)


# ------------------------------------------------------------------------------------ render


def test_render_writes_a_1600x1000_png_of_a_recorded_run_and_refuses_to_overwrite(
    qtbot, tmp_path, capsys
):
    rec = write_synthetic(tmp_path / "synthetic.json")
    out = tmp_path / "shot.png"
    assert main.main(["render", "--seq", "4096", "--open", str(rec), "--out", str(out)]) == 0
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1600, 1000)
    before = out.read_bytes()
    assert main.main(["render", "--seq", "4096", "--open", str(rec), "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err and out.read_bytes() == before
    args = ["render", "--seq", "1024", "--causal", "--backend", "replay", "--open", str(rec)]
    assert main.main([*args, "--out", str(out), "--force"]) == 0
    assert QImage(str(out)).size().toTuple() == (1600, 1000)


def test_render_replay_without_a_recording_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("app.state.recorded_run.shipped_recording", lambda: None)
    out = tmp_path / "shot.png"
    assert main.main(["render", "--seq", "1024", "--backend", "replay", "--out", str(out)]) == 2
    assert "--open" in capsys.readouterr().err and not out.exists()
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "tilescope.session/9"}')
    assert main.main(["render", "--seq", "1024", "--open", str(bad), "--out", str(out)]) == 2
    assert "newer Tilescope" in capsys.readouterr().err and not out.exists()


def test_render_measures_on_the_cpu_backend(tmp_path):
    out = tmp_path / "cpu.png"
    args = ["render", "--seq", "256", "--backend", "cpu", "--heads", "2", "--out", str(out)]
    assert main.main(args) == 0
    assert QImage(str(out)).size().toTuple() == (1600, 1000)


# ------------------------------------------------------------------------------------ shipped


def test_picking_recorded_run_opens_the_shipped_recording(
    qtbot, make_window, tmp_path, monkeypatch
):
    rec = write_synthetic(tmp_path / "synthetic.json")
    monkeypatch.setattr("app.window.file_menu.shipped_recording", lambda: rec)
    window = make_window()
    assert window.controls.recorded_path == ""
    with qtbot.waitSignal(window.file_menu.fileOpened, timeout=5000):
        window.controls.set_backend_choice("recorded")  # as if picked in the list
    assert window.controls.recorded_path == str(rec)


@pytest.mark.skipif(not SHIPPED_RECORDING.is_file(), reason="no shipped H200 recording yet")
def test_the_shipped_h200_recording_opens_on_a_cpu_only_machine(qtbot, make_window):
    recording = load_recording(SHIPPED_RECORDING)
    assert "H200" in recording.device.name and recording.meta.get("date")
    ours = {r.algorithm for r in recording.results}
    assert {NAIVE, TILED, TILED_MMA, TILED_WGMMA} <= ours and any(r.oom for r in recording.results)
    window = make_window(open_path=str(SHIPPED_RECORDING))
    assert window.backend.info.backend == "replay"
    assert window.controls.seq_scale == tuple(sorted({r.config.seq_len for r in recording.results}))
    plots = window.plots
    qtbot.waitUntil(lambda: bool(plots.memory.series["measured_tiled"][0]), timeout=5000)
    for a in (NAIVE, TILED, TILED_MMA):
        assert plots.timing.series[f"measured_{a}"][0], a
    assert plots.memory.series["oom"][0]  # naive's out-of-memory points
    assert plots.timing.series["reference_sdpa_flash"][0]
    assert window.run_status.text().startswith("Replayed: H200")
    assert recording.meta["date"][:10] in plots.timing.title


def test_synthetic_recording_is_labelled_fake():
    rec = synthetic_recording(lens=(256,))
    assert "synthetic" in rec.device.name and rec.meta["date"] == FAKE_DATE
