"""The series each of the four plots holds, created once, a plot per step of a staged build:
measured points and spreads, model curves and bands, roofs and their labels, peers, markers;
the views then only update them (setData)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import Qt

from gpu.algorithms import NAIVE, TILED

from ..plotting.labelled_line import LabelledLine
from ..plotting.metric_plot import MetricPlot
from ..plotting.plot_items import Style
from .plot_styles import (
    ALGOS,
    NAIVE_KERNELS,
    ROOF_STYLES,
    series_label,
    series_symbol,
)


@dataclass(frozen=True)
class SeriesItems:
    """The items made with the series that the panel styles and shows by hand."""

    #: The memory plot's budget, a horizontal line with its figure.
    budget_line: LabelledLine
    #: The traffic plot's band per algorithm, between its compulsory and no-reuse lines.
    bands: dict[str, pg.FillBetweenItem]


def build_series(
    m: MetricPlot, t: MetricPlot, h: MetricPlot, r: MetricPlot
) -> Generator[None, None, SeriesItems]:
    """The series of the memory (`m`), time (`t`), traffic (`h`) and roofline (`r`) plots,
    a piece per step of a staged build."""
    m.add("model_naive", "naive (model)", Style(NAIVE, 2.0))
    m.add("model_tiled", "tiled, every kernel (model)", Style(TILED, 2.0))
    # A training step's saved activations for L layers (gpu/model/layer_stack.py), dashed.
    m.add("stack_naive", "naive, L layers (model)", Style(NAIVE, 1.6, Qt.PenStyle.DashLine))
    m.add("stack_tiled", "tiled, L layers (model)", Style(TILED, 1.6, Qt.PenStyle.DashLine))
    for a in ALGOS:
        m.add(
            f"measured_{a}",
            f"{series_label(a)}: measured, CuPy pool",
            Style(a, symbol=series_symbol(a), line=False, symbol_size=9),
        )
        m.add(
            f"device_{a}",
            f"{series_label(a)}: measured, whole device",
            Style(a, symbol=series_symbol(a), line=False, symbol_size=11, hollow=True),
        )
    yield
    m.add("oom", "out of memory", Style("oom", symbol="x", line=False, symbol_size=15))
    m.add(
        "current",
        "",
        Style("fg", symbol="o", line=False, symbol_size=15, hollow=True),
        bounds=False,
        moves=True,
    )
    m.key("k_model", "model", Style("fg", 2.0))
    m.key("k_stack", "model: L layers' saved activations", Style("fg", 1.6, Qt.PenStyle.DashLine))
    m.key("k_pool", "measured", Style("fg", symbol="o", line=False))
    m.key(
        "k_device",
        "measured, whole GPU",
        Style("fg", symbol="o", line=False, symbol_size=10, hollow=True),
    )
    m.key("k_budget", "budget", Style("budget", 1.5, Qt.PenStyle.DashLine))
    # Left end: the small-N corner stays clear of the markers that meet the budget.
    budget_line = LabelledLine(m, angle=0, position=0.03, anchors=[(0, 1), (0, 1)])
    yield

    for a in ALGOS:
        t.add(
            f"measured_{a}",
            f"{series_label(a)}: measured (median)",
            Style(a, 2.0, symbol=series_symbol(a), symbol_size=7),
        )
        t.add_error_bars(f"spread_{a}", f"{series_label(a)}: fastest … slowest", Style(a, 1.2))
    yield
    for k in NAIVE_KERNELS:
        t.add(f"kernel_{k}", f"naive: {k}", Style(k, 1.5, Qt.PenStyle.DashLine))
    yield
    for a in ALGOS:
        t.add(
            f"roofline_{a}",
            f"{series_label(a)}: roofline model",
            Style(a, 1.2, Qt.PenStyle.DotLine),
        )
    t.add(
        "current",
        "",
        Style("fg", symbol="o", line=False, symbol_size=15, hollow=True),
        bounds=False,
        moves=True,
    )
    t.key("k_measured", "median, bar: min…max", Style("fg", 2.0, symbol="o"))
    t.key("k_roofline", "roofline model", Style("fg", 1.2, Qt.PenStyle.DotLine))

    yield
    bands: dict[str, pg.FillBetweenItem] = {}
    for a in ALGOS:
        thin = Style(a, 0.8)
        lower = h.add(f"compulsory_{a}", f"{series_label(a)}: each byte once (model)", thin)
        upper = h.add(f"noreuse_{a}", f"{series_label(a)}: no cache reuse (model)", thin)
        fill = pg.FillBetweenItem(lower, upper)
        fill.setZValue(-10)
        fill.setCacheMode(fill.CacheMode.DeviceCoordinateCache)
        h.addItem(fill)
        bands[a] = fill
        h.add(f"model_{a}", f"{series_label(a)}: with the L2 cache (model)", Style(a, 2.0))
        h.add(
            f"measured_{a}",
            f"{series_label(a)}: measured (hardware counters)",
            Style(a, symbol=series_symbol(a), line=False, symbol_size=10),
        )
        yield
    h.add(
        "current",
        "",
        Style("fg", symbol="o", line=False, symbol_size=13, hollow=True),
        bounds=False,
        moves=True,
    )
    h.key("k_l2", "model, with the L2 cache", Style("fg", 2.0))
    h.key("k_band", "model: each byte once … no reuse", Style("fg", 0.8, fill=90))
    h.key(
        "k_measured",
        "measured (hardware counters)",
        Style("fg", symbol="o", line=False, symbol_size=9),
    )

    yield
    for name, style in ROOF_STYLES.items():
        r.add(f"roof_{name}", name, style, bounds=False)
    yield
    for a in ALGOS:
        r.add(f"path_{a}", "", Style(a, 1.0, Qt.PenStyle.DotLine))
        r.add(
            f"at_measured_{a}",
            f"{series_label(a)}: at measured intensity",
            Style(a, symbol=series_symbol(a), line=False, symbol_size=9),
        )
        r.add(
            f"at_model_{a}",
            f"{series_label(a)}: at model intensity",
            Style(a, symbol=series_symbol(a), line=False, symbol_size=9, hollow=True),
        )
    yield
    # Where the roofline puts each algorithm at the current N: one item, a colour per point.
    r.add(
        "bounds",
        "bound at this N",
        Style("muted", symbol="o", line=False, symbol_size=13, hollow=True),
        bounds=False,
        moves=True,
    )
    r.add(
        "current",
        "",
        Style("fg", symbol="o", line=False, symbol_size=16, hollow=True),
        bounds=False,
        moves=True,
    )
    # The L2 roof judges L2 bytes: each algorithm at its L2 intensity at this N (Nsight
    # Compute's hierarchical roofline draws one point per memory level the same way).
    r.add(
        "l2_current",
        "at L2 intensity (against the L2 roof)",
        Style("muted", symbol="d", line=False, symbol_size=11, hollow=True),
        moves=True,
    )
    r.key("k_l2", "◇ at L2 intensity (L2 roof)", Style("muted", symbol="d", line=False))
    r.key("k_measured", "bytes measured", Style("fg", symbol="o", line=False))
    r.key("k_model", "bytes: model", Style("fg", symbol="o", line=False, hollow=True))
    return SeriesItems(budget_line, bands)
