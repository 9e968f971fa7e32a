"""The plots as tables: their results as a tidy CSV (one row per result and kernel) and every
plotted series as a wide CSV, with each column's quantity and unit in its header, and the
wide CSV read back."""

from __future__ import annotations

import csv
import io
import re

from gpu.algorithms import ALGORITHMS
from gpu.model.costmodel import GpuSpec
from gpu.results import RunResult

from ..measure.plots import PlotsPanel
from ..plotting.metric_plot import MetricPlot
from ..state.model.cache import band as model_band
from ..state.recorded_run import reference_label

PLOT_NAMES = (
    "memoryPlot", "timingPlot", "trafficPlot", "bandwidthPlot", "rooflinePlot", "trafficStrip",
)  # fmt: skip


_N_AXIS = ("sequence length N", "tokens")


#: (quantity, unit) of x and y on each plot, for the CSV header.
AXES: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "memoryPlot": (_N_AXIS, ("peak memory", "B")),
    "timingPlot": (_N_AXIS, ("time per forward pass", "ms")),
    "trafficPlot": (_N_AXIS, ("DRAM traffic", "B")),
    "bandwidthPlot": (_N_AXIS, ("KV cache read per step ÷ time", "B/s")),
    "rooflinePlot": (("arithmetic intensity", "FLOP/B"), ("achieved", "FLOP/s")),
}


_HEADER = re.compile(
    r"^(?P<plot>\w+)/(?P<name>\S+) (?P<axis>[xy]): (?P<q>[^\[]*) \[(?P<unit>[^\]]*)\]"
)


def _plots(panel: PlotsPanel, only: str | None) -> list[MetricPlot]:
    return [p for p in panel.plots if only is None or p.objectName() == only]


def plotted_series(
    panel: PlotsPanel, only: str | None = None
) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """Every series drawn now (visible, with points): (plot, item name) -> (x, y), linear."""
    out = {}
    for plot in _plots(panel, only):
        for name, item in plot.items.items():
            xs, ys = plot.series.get(name, ([], []))
            if xs and item.isVisible():
                out[(plot.objectName(), name)] = (list(xs), list(ys))
    return out


#: Columns of the results CSV, in order; the unit is in the name (ms, bytes, FLOP, TFLOP/s).
RESULT_COLUMNS: tuple[str, ...] = (
    "algorithm",
    "label",
    "reference",
    "kernel",
    "seq_len",
    "batch",
    "heads",
    "head_dim",
    "dtype",
    "causal",
    "block_m",
    "block_n",
    "backend",
    "device",
    "recorded",
    "oom",
    "kernel_ms",
    "kernel_min_ms",
    "kernel_max_ms",
    "kernel_samples",
    "kernel_dram_read_measured_bytes",
    "kernel_dram_write_measured_bytes",
    "kernel_l2_measured_bytes",
    "kernel_dram_model_compulsory_bytes",
    "kernel_dram_model_l2_aware_bytes",
    "kernel_dram_model_no_reuse_bytes",
    "total_ms",
    "useful_flops",
    "achieved_tflop_s",
    "peak_pool_bytes",
    "peak_device_bytes",
    "model_peak_bytes",
    "max_abs_error",
    "model_gpu",
    "message",
)


def result_rows(
    results: dict[str, list[RunResult]], gpu: GpuSpec | None
) -> list[dict[str, object]]:
    """One row per result and kernel (a result without kernel times, such as an out-of-memory
    one, gets one row with an empty kernel): the tidy form of what the plots show. Model
    columns are the cost model's DRAM bytes on `gpu` (empty for a reference peer)."""
    rows = []
    for algorithm, series in results.items():
        ours = algorithm in ALGORITHMS
        for r in series:
            c = r.config
            band = model_band(c, algorithm, gpu) if ours and gpu is not None else None
            base = {
                "algorithm": algorithm,
                "label": ALGORITHMS[algorithm].label if ours else reference_label(algorithm),
                "reference": not ours,
                "seq_len": c.seq_len,
                "batch": c.batch,
                "heads": c.heads,
                "head_dim": c.head_dim,
                "dtype": c.dtype,
                "causal": c.causal,
                "block_m": c.block_m,
                "block_n": c.block_n,
                "backend": r.backend,
                "device": r.device,
                "recorded": r.recorded,
                "oom": r.oom,
                "total_ms": r.total_ms,
                "useful_flops": r.flops,
                "achieved_tflop_s": r.tflops,
                "peak_pool_bytes": r.peak_bytes,
                "peak_device_bytes": r.device_peak_bytes,
                "model_peak_bytes": r.model_peak_bytes,
                "max_abs_error": r.max_abs_error,
                "model_gpu": gpu.name if band is not None and gpu is not None else "",
                "message": r.message,
            }
            kernels = r.kernel_times or ((None),)
            for k in kernels:
                row = dict(base, kernel=k.name if k is not None else "")
                if k is not None:
                    row.update(
                        kernel_ms=k.ms,
                        kernel_min_ms=k.min_ms,
                        kernel_max_ms=k.max_ms,
                        kernel_samples=k.count,
                    )
                    t = r.kernel_traffic(k.name)
                    if t is not None:
                        row.update(
                            kernel_dram_read_measured_bytes=t.dram_read_bytes,
                            kernel_dram_write_measured_bytes=t.dram_write_bytes,
                            kernel_l2_measured_bytes=t.l2_bytes,
                        )
                    if band is not None:
                        for key, cost in (
                            ("compulsory", band.compulsory),
                            ("l2_aware", band.l2_aware),
                            ("no_reuse", band.no_reuse),
                        ):
                            kc = next((x for x in cost.kernels if x.name == k.name), None)
                            if kc is not None:
                                row[f"kernel_dram_model_{key}_bytes"] = kc.hbm_bytes
                rows.append(row)
    return rows


def results_csv(panel: PlotsPanel) -> str:
    """The results the plots show as a tidy CSV: one row per result and kernel, named columns
    with their unit in the name (RESULT_COLUMNS), config and device on every row (every plot
    shows the same results)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=RESULT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in result_rows(panel.results_shown(), panel.target_gpu()):
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buf.getvalue()


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return value


def plots_csv(panel: PlotsPanel, only: str | None = None) -> str:
    """Every plotted series as two columns (x, y), side by side (a wide table of the plots'
    series, not of results: `results_csv` is the tidy one); the header names the plot, the
    series, the quantity and its unit in brackets, then the legend label:
    `timingPlot/measured_naive y: time per forward pass [ms] | naive`. Shorter series leave
    their cells empty below their last point. Numbers are written exactly (repr)."""
    series = plotted_series(panel, only)
    labels = {p.objectName(): p.labels for p in panel.plots}
    header, columns = [], []
    for (plot, name), (xs, ys) in series.items():
        label = labels.get(plot, {}).get(name, "")
        for axis, values, (quantity, unit) in zip("xy", (xs, ys), AXES[plot], strict=True):
            text = f"{plot}/{name} {axis}: {quantity} [{unit}]"
            header.append(f"{text} | {label}" if label else text)
            columns.append(values)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    rows = max((len(c) for c in columns), default=0)
    for i in range(rows):
        writer.writerow([repr(float(c[i])) if i < len(c) else "" for c in columns])
    return buf.getvalue()


def read_plots_csv(text: str) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """The series of a CSV written by plots_csv, as plotted_series returns them."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return {}
    keys = []
    for cell in rows[0]:
        m = _HEADER.match(cell)
        if m is None:
            raise ValueError(f"not a Tilescope plot column: {cell!r}")
        keys.append((m["plot"], m["name"], m["axis"]))
    out: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for col, (plot, name, axis) in enumerate(keys):
        values = [float(r[col]) for r in rows[1:] if col < len(r) and r[col] != ""]
        xs, ys = out.setdefault((plot, name), ([], []))
        (xs if axis == "x" else ys).extend(values)
    return out
