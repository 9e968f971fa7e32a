"""What the plot exports hold: an SVG that a second renderer (cairo, as librsvg) draws like Qt
does, the budget line's label and legend entry in PNG and SVG, and a tidy CSV of the results
(one row per result and kernel, named columns with units, config and device on every row)."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from profiled_results import NCU, write_profiled
from PySide6.QtCore import QByteArray, QRectF
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QApplication

from app.export import plot_images, plot_tables
from app.plotting.svg_coordinates import output_space, parse_matrix, transform_path
from app.window.file_menu import ExportRequest
from gpu.algorithms import NAIVE, TILED, TILED_MMA

SIZE = (1200, 760)


@pytest.fixture
def window(make_window, tmp_path, window_settings):
    """A window replaying profiled results (test data: tests/profiled_results.py) at N=4096."""
    window_settings.setValue("controls/seq_len", 4096)
    window_settings.setValue("controls/algorithms", f"{NAIVE},{TILED},{TILED_MMA}")
    w = make_window(open_path=str(write_profiled(tmp_path / "profiled.json")))
    w.plots.flush_model()
    return w


# ------------------------------------------------------------------------------------ SVG


def test_output_space_applies_a_groups_transform_to_its_non_scaling_strokes():
    m = parse_matrix("matrix(200,0,0,-50,10,400)")
    assert transform_path("M1,2 L3,4 Z", m) == "M 210,300 L 610,200 Z"
    svg = (
        b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 800 600">'
        b'<g transform="matrix(200,0,0,-50,10,400)" stroke="#fff" stroke-width="1">'
        b'<path vector-effect="non-scaling-stroke" d="M1,2 L3,4"/>'
        b'<circle vector-effect="non-scaling-stroke" cx="1" cy="1" r="0.5"/>'
        b"</g>"
        b'<g transform="matrix(2,0,0,2,5,5)"><text x="0" y="0">kept</text>'
        b'<polyline vector-effect="non-scaling-stroke" points="1,1 2,2"/></g>'
        b"</svg>"
    )
    out = output_space(svg).decode()
    assert "non-scaling-stroke" not in out
    root = ET.fromstring(out)
    ns = {"s": "http://www.w3.org/2000/svg"}
    first = root.find("s:g", ns)
    assert first.get("transform") == "matrix(1,0,0,1,0,0)"
    assert first.find("s:path", ns).get("d") == "M 210,300 L 610,200"
    circle = first.findall("s:path", ns)[1].get("d")  # the circle: now an ellipse of Béziers
    assert circle.startswith("M 310,350 C") and "110,350" in circle  # cx ± r·200
    text_group = root.findall("s:g", ns)[1]
    assert text_group.get("transform") == "matrix(2,0,0,2,5,5)"  # the text keeps its group
    assert text_group.find("s:text", ns).text == "kept"
    moved = root.findall("s:g", ns)[2]
    assert moved.find("s:polyline", ns).get("points").split() == ["7,7", "9,9"]


def _qt_raster(svg: bytes, size: tuple[int, int]) -> np.ndarray:
    renderer = QSvgRenderer(QByteArray(svg))
    assert renderer.isValid()
    image = QImage(*size, QImage.Format.Format_RGB888)
    image.fill(0)
    painter = QPainter(image)
    renderer.render(painter, QRectF(0, 0, *size))
    painter.end()
    stride = image.bytesPerLine()
    raw = np.frombuffer(image.constBits(), np.uint8, count=stride * size[1])
    return raw.reshape(size[1], stride)[:, : size[0] * 3].reshape(size[1], size[0], 3).copy()


def _cairo_raster(svg: bytes, size: tuple[int, int]) -> np.ndarray:
    try:
        import cairosvg  # the test extra; it loads the system's libcairo (README's apt list)
    except (ImportError, OSError) as exc:
        pytest.skip(f"cairosvg cannot run here: {exc}")
    png = cairosvg.svg2png(bytestring=svg, output_width=size[0], output_height=size[1])
    image = QImage.fromData(png).convertToFormat(QImage.Format.Format_RGB888)
    stride = image.bytesPerLine()
    raw = np.frombuffer(image.constBits(), np.uint8, count=stride * size[1])
    return raw.reshape(size[1], stride)[:, : size[0] * 3].reshape(size[1], size[0], 3).copy()


def _ink(image: np.ndarray, background: np.ndarray, cell: int = 20) -> np.ndarray:
    """Share of pixels that differ from the background, per cell of the image."""
    differs = np.abs(image.astype(int) - background).sum(axis=2) > 60
    h, w = differs.shape
    cells = differs[: h // cell * cell, : w // cell * cell]
    return cells.reshape(h // cell, cell, w // cell, cell).mean(axis=(1, 3))


def test_the_svg_renders_alike_in_cairo_and_in_qt(window):
    svg = plot_images.plots_svg(window.plots, SIZE)
    assert b"non-scaling-stroke" not in svg
    qt, cairo = _qt_raster(svg, SIZE), _cairo_raster(svg, SIZE)
    background = qt[5, SIZE[0] // 2].astype(int)  # the window colour behind the plots
    ink_qt, ink_cairo = _ink(qt, background), _ink(cairo, background)
    # Both drawn where the curves are; no renderer fills bands the other leaves empty.
    assert ink_qt.mean() > 0.04 and ink_cairo.mean() > 0.04
    assert abs(ink_qt.mean() - ink_cairo.mean()) < 0.25 * ink_qt.mean()
    cells_apart = np.abs(ink_qt - ink_cairo) > 0.35  # fonts differ a little; shapes may not
    assert cells_apart.mean() < 0.03, cells_apart.mean()
    # The series colours cover about as many pixels in both.
    for color in ((0xFF, 0x8A, 0x5B), (0x56, 0xB4, 0xE9)):  # naive, tiled (dark theme)
        near_qt = (np.abs(qt.astype(int) - color).sum(axis=2) < 60).mean()
        near_cairo = (np.abs(cairo.astype(int) - color).sum(axis=2) < 60).mean()
        assert near_qt > 0.001 and near_cairo == pytest.approx(near_qt, rel=0.35)


def test_png_and_svg_exports_keep_the_budget_line_its_label_and_legend_entry(
    qtbot, window, tmp_path
):
    svg = plot_images.plots_svg(window.plots, SIZE)
    texts = " ".join(
        "".join(t.itertext()) for t in ET.fromstring(svg).iter() if t.tag.endswith("text")
    )
    # The recording's H200 at its datasheet's capacity (gpu/model/gpus.py: one capacity rule).
    assert "this device: 141 GB" in texts and "budget" in texts
    replica = window.plots.replicate()
    assert replica.budget_line.text == "this device: 141 GB"
    assert replica.budget_line.label.toPlainText() == "this device: 141 GB"
    assert "budget" in replica.memory.legend_texts()
    replica.deleteLater()
    path = tmp_path / "plots.png"
    with qtbot.waitSignal(window.file_menu.exported, timeout=10000):
        assert window.file_menu.export(ExportRequest("plots_png", str(path), size=SIZE))
    image = QImage(str(path))
    assert (image.width(), image.height()) == SIZE


def test_an_exports_replica_is_built_a_plot_item_at_a_time_and_shows_what_the_panel_does(
    window, monkeypatch
):
    """Each step of the replica's build (a turn of the event loop in an export) makes at most
    one of pyqtgraph's plots, the largest piece there is, and the replica holds the panel's
    series, legends and data."""
    import pyqtgraph as pg

    made = []
    plot_init = pg.PlotItem.__init__

    def counted(self, *args, **kwargs):
        made.append(self)
        plot_init(self, *args, **kwargs)

    monkeypatch.setattr(pg.PlotItem, "__init__", counted)
    per_step = []
    replication = window.plots.replicate_steps()
    for _ in replication:
        per_step.append(len(made))
        made.clear()
        QApplication.sendPostedEvents()  # what an export's event loop delivers between steps
    replica = replication.panel
    try:
        # five plots (the traffic plot, or decode's bandwidth plot in its place), the strip
        assert sum(per_step) == len(replica.graphics_views()) == 6
        assert max(per_step) == 1
        for mine, theirs in zip(replica.plots, window.plots.plots, strict=True):
            assert mine.objectName() == theirs.objectName()
            assert mine.series == theirs.series
            assert mine.legend_texts() == theirs.legend_texts()
    finally:
        replica.deleteLater()


def test_an_export_of_the_plots_counts_as_work_under_way_until_it_ends(
    qtbot, window, tmp_path, monkeypatch
):
    """The window's idle collector waits for it (app/work/collector.py)."""
    menu = window.file_menu
    assert not menu.exporting
    with qtbot.waitSignal(menu.exported, timeout=10000):
        assert menu.export(ExportRequest("plots_png", str(tmp_path / "plots.png"), size=SIZE))
        assert menu.exporting and window.collector._busy()
    assert not menu.exporting

    def full_disk(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(plot_images, "write_file", full_disk)
    with qtbot.waitSignal(menu.exportFailed, timeout=10000):
        assert menu.export(ExportRequest("plots_png", str(tmp_path / "full.png"), size=SIZE))
        assert menu.exporting
    assert not menu.exporting


# ------------------------------------------------------------------------------------ CSV


def test_results_csv_is_one_row_per_result_and_kernel_with_units_config_and_device(
    window, tmp_path
):
    path = tmp_path / "results.csv"
    assert window.file_menu.export(ExportRequest("results_csv", str(path)))
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert tuple(rows[0]) == plot_tables.RESULT_COLUMNS
    # naive: 3 kernels, the tiled kernels: 1, at each of N = 4096 and 16384.
    assert len(rows) == 2 * (3 + 1 + 1)
    naive_4096 = [r for r in rows if r["algorithm"] == NAIVE and r["seq_len"] == "4096"]
    assert [r["kernel"] for r in naive_4096] == ["gemm_qk", "softmax", "gemm_pv"]
    for row in naive_4096:
        read, write, ms = NCU[(4096, NAIVE)][row["kernel"]]
        assert int(row["kernel_dram_read_measured_bytes"]) == read
        assert int(row["kernel_dram_write_measured_bytes"]) == write
        assert float(row["kernel_ms"]) == pytest.approx(ms)
        assert float(row["kernel_min_ms"]) < float(row["kernel_ms"]) < float(row["kernel_max_ms"])
        lo, mid, hi = (
            int(row[f"kernel_dram_model_{k}_bytes"]) for k in ("compulsory", "l2_aware", "no_reuse")
        )
        assert lo <= mid <= hi
        assert row["heads"] == "12" and row["head_dim"] == "64" and row["dtype"] == "fp16"
        assert "H200" in row["device"] and row["backend"] == "cuda" and row["recorded"] == "True"
        assert row["model_gpu"].startswith("H200")
    assert all(
        name.endswith(("_ms", "_bytes", "_flops", "_tflop_s", "_samples"))
        for name in (
            c
            for c in plot_tables.RESULT_COLUMNS
            if c.startswith(("kernel_", "peak", "total", "useful"))
        )
    )


def test_the_wide_series_csv_labels_each_series_and_reads_back(window, tmp_path):
    path = tmp_path / "series.csv"
    assert window.file_menu.export(ExportRequest("plots_csv", str(path)))
    header = path.read_text().splitlines()[0]
    assert "trafficPlot/measured_naive y: DRAM traffic [B]" in header
    assert "rooflinePlot/at_measured_tiled_mma x: arithmetic intensity [FLOP/B]" in header
    assert plot_tables.read_plots_csv(path.read_text()) == plot_tables.plotted_series(window.plots)
