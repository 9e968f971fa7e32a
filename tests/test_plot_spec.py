"""Each plot of the Measurements tab is described once (app/measure/plot_spec.py): the panel
builds exactly the plots of the spec, with their names, titles, axes, places and
descriptions, and the CSV of the plotted series, the export names and the accessible names
read the same entries."""

from __future__ import annotations

import dataclasses

import pytest

from app.measure.plot_spec import N_AXIS, PLOTS, Axis, PerPass, PlotSpec
from gpu.config import BACKWARD, DECODE, FORWARD, PASSES, STEP


def test_a_per_pass_text_falls_back_to_the_forward_pass():
    text = PerPass("time per forward pass", step="time per training step")
    assert text(FORWARD) == text() == text(None) == "time per forward pass"
    assert text(STEP) == "time per training step"
    assert text(BACKWARD) == text(DECODE) == "time per forward pass"


def test_every_plot_has_its_own_name_and_stem_and_a_cell_of_the_tab():
    assert [s.object_name for s in PLOTS.values()] == list(PLOTS)
    assert len({s.stem for s in PLOTS.values()}) == len(PLOTS)
    for pass_ in PASSES:
        assert len({s.accessible_name(pass_) for s in PLOTS.values()}) == len(PLOTS)
    # Only the traffic and bandwidth plots share a cell: the decode pass swaps them.
    cells = [s.cell for s in PLOTS.values()]
    shared = {c for c in cells if cells.count(c) > 1}
    assert shared == {PLOTS["trafficPlot"].cell}
    assert PLOTS["bandwidthPlot"].cell == PLOTS["trafficPlot"].cell


def test_the_time_plot_says_per_what_for_every_pass():
    timing = PLOTS["timingPlot"]
    assert [timing.csv_axes(p)[1][0] for p in PASSES] == [
        "time per forward pass",
        "time per backward pass",
        "time per training step",
        "time per decode step",
    ]
    assert [timing.title(p) for p in PASSES] == [
        "Time",
        "Backward time",
        "Step time",
        "Decode step time",
    ]
    assert timing.accessible_name(STEP) == "Time per training step plot"


def test_the_panel_builds_the_plots_of_the_spec(qtbot):
    from app.measure.plots import PlotsPanel

    panel = PlotsPanel()
    qtbot.addWidget(panel)
    assert [p.objectName() for p in panel.plots] == list(PLOTS)
    grid = panel.layout()
    for plot, spec in zip(panel.plots, PLOTS.values(), strict=True):
        assert plot.title == spec.title()
        assert plot.getAxis("left").labelText == spec.y.label
        assert plot.getAxis("bottom").labelText == spec.x.label
        assert plot.accessibleName() == spec.accessible_name()
        assert plot.accessibleDescription() == spec.description
        row, column, _, _ = grid.getItemPosition(grid.indexOf(plot))
        assert (row, column) == spec.cell
    assert [p.objectName() for p in panel.n_plots] == [
        name for name, spec in PLOTS.items() if spec.follows_n
    ]
    assert not panel.roofline.cursor.isVisible()  # its x is intensity, not N


def test_a_plot_added_to_the_spec_is_built_placed_named_and_exported(qtbot, monkeypatch):
    """A new entry is all the panel, the CSV of the plotted series, the export dialog's names
    and the accessible names need to know the plot: nothing else lists the plots."""
    from app.export.plot_tables import plots_csv
    from app.measure.plots import PlotsPanel
    from app.plotting.plot_items import Style
    from app.state.units import fmt_bytes_axis

    extra = PlotSpec(
        "spillPlot",
        name=PerPass("Register spills", step="Register spills per step"),
        title=PerPass("Spills"),
        description="Bytes spilled from registers to local memory over N.",
        y=Axis("bytes spilled", PerPass("spilled bytes"), "B", fmt_bytes_axis),
        stem="spills",
        cell=(4, 0),
    )
    monkeypatch.setitem(PLOTS, extra.object_name, extra)
    panel = PlotsPanel()
    qtbot.addWidget(panel)
    spill = panel.by_name["spillPlot"]
    assert spill in panel.plots and spill in panel.n_plots
    assert spill.accessibleName() == "Register spills plot"
    grid = panel.layout()
    assert grid.getItemPosition(grid.indexOf(spill))[:2] == (4, 0)
    spill.add("measured_naive", "naive: measured", Style("naive", 2.0))
    spill.set_series("measured_naive", [1024, 2048], [10.0, 20.0])
    spill.set_visible_items(["measured_naive"])
    header = plots_csv(panel, "spillPlot").splitlines()[0]
    assert header.startswith(
        "spillPlot/measured_naive x: sequence length N [tokens] | naive: measured,"
        "spillPlot/measured_naive y: spilled bytes [B]"
    )


def test_a_spec_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PLOTS["memoryPlot"].stem = "mem"  # type: ignore[misc]
    assert PLOTS["memoryPlot"].x is N_AXIS
