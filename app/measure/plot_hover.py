"""The plots' hover read-outs: at the N under the pointer (on the roofline, at the nearest
marker), what each plot shows there, measured and modeled, each figure with its source."""

from __future__ import annotations

import math

from gpu.algorithms import ALGORITHMS
from gpu.model.costmodel import CPU
from gpu.model.roofline import (
    MEASURED,
    MEMORY_ROOFS,
    XU,
    roofs,
)

from ..state.device_memory import device_memory_note
from ..state.model.cache import band, cost
from ..state.recorded_run import reference_label
from ..state.roof_words import binds_text
from ..state.units import (
    fmt_bytes,
    fmt_int,
    fmt_intensity,
    fmt_ms,
    fmt_rate,
)
from .decode_plots import DecodePlots
from .panel_data import PanelData
from .plot_styles import (
    bandwidth_text,
    series_label,
    spread_text,
    xu_explained,
)
from .roof_lines import RoofLines


class PlotHover:
    """The hover texts of the four plots, read from what the panel shows (`data`), the decode
    pass's items and the roofs drawn (each plot's `hover_provider`)."""

    def __init__(self, data: PanelData, decode: DecodePlots, roofs: RoofLines) -> None:
        self.data = data
        self.decode = decode
        self.roofs = roofs

    def memory(self, x: float, _y: float) -> str | None:
        if self.data.family is None:
            return None
        n = self.data.nearest_n(x)
        config = self.data.family.with_(seq_len=n)
        lines = [f"N = {fmt_int(n)}"]
        for a in self.data.algorithms:
            res = self.data.by_n[a].get(n)
            line = f"{series_label(a)}: model {fmt_bytes(cost(config, a).peak_bytes)}"
            f = self.data.figures(n, a, compute=True) if res is not None and not res.oom else None
            if res is not None:
                if res.oom:
                    line += ", OOM"
                else:
                    peak = f.peak_bytes.value if f is not None else res.peak_bytes
                    line += f", measured {fmt_bytes(peak)} (CuPy pool)"
                    if res.device_peak_bytes is not None:
                        line += f", {fmt_bytes(res.device_peak_bytes)} (whole device)"
                        line += f"\n   {device_memory_note(res)}"
            lines.append(line)
        lines += self.decode.memory_lines(n)
        if self.data.budget:
            lines.append(f"budget {fmt_bytes(self.data.budget)}")
        if any(
            r.device_peak_bytes is not None
            for a in self.data.algorithms
            for r in self.data.measured[a]
        ):
            lines.append("pool: the buffers the run allocated")
            lines.append(
                "whole device: the drop in the device's free memory during the run (the pool's "
                "buffers and what CUDA libraries took meanwhile)"
            )
        return "\n".join(lines)

    def timing(self, x: float, _y: float) -> str | None:
        n = self.data.nearest_n(x)
        lines = [f"N = {fmt_int(n)}"]
        for a in self.data.algorithms:
            res = self.data.by_n[a].get(n)
            if res is None:
                lines.append(f"{series_label(a)}: not measured")
            elif res.oom:
                lines.append(f"{series_label(a)}: out of memory")
            else:
                lines.append(f"{series_label(a)}: {fmt_ms(res.total_ms)}{spread_text(res)}")
                if len(res.kernel_times) > 1:
                    parts = ", ".join(f"{k.name} {fmt_ms(k.ms)}" for k in res.kernel_times)
                    lines.append(f"   {parts}")
            if (
                self.data.time_model_gpu is not None
                and (f := self.data.figures(n, a, True)) is not None
            ):
                lines.append(f"   roofline {fmt_ms(f.roofline_ms.value)}")
        for peer, by_n in self.data.reference_by_n.items():
            res = by_n.get(n)
            if res is not None and res.total_ms:
                lines.append(f"{reference_label(peer, res.recorded)}: {fmt_ms(res.total_ms)}")
        return "\n".join(lines)

    def traffic(self, x: float, _y: float) -> str | None:
        if self.data.family is None or self.data.gpu is None:
            return None
        n = self.data.nearest_n(x)
        config = self.data.family.with_(seq_len=n)
        lines = [f"N = {fmt_int(n)}"]
        for a in self.data.algorithms:
            b = band(config, a, self.data.gpu)
            lines.append(
                f"{series_label(a)}: model {fmt_bytes(b.l2_aware.hbm_bytes)} L2-aware "
                f"({fmt_bytes(b.compulsory.hbm_bytes)} … {fmt_bytes(b.no_reuse.hbm_bytes)})"
            )
            res = self.data.by_n[a].get(n)
            f = self.data.figures(n, a, compute=True) if res is not None else None
            if res is not None and f is not None and f.dram_bytes.source == MEASURED:
                # the current point's figure: the counters, compulsory writes counted in full
                dram = int(f.dram_bytes.value or 0)
                read = sum(t.dram_read_bytes for t in res.traffic)
                lines.append(
                    f"   DRAM {f.dram_bytes.text()}: hardware counters, read {fmt_bytes(read)}, "
                    f"written {fmt_bytes(dram - read)} (writes still in L2 counted)"
                )
            if res is not None and res.total_ms:
                lines.append(f"   {bandwidth_text(res, f)}")
        return "\n".join(lines)

    def roofline(self, x: float, y: float) -> str | None:
        best, best_d = None, 0.12  # within ~0.12 decades of a marker
        gpu = self.data.gpu
        if gpu is None:
            return None
        for a in self.data.algorithms:
            for r in self.data.measured[a]:
                if r.oom or not r.tflops:
                    continue
                v = self.data.verdict(r, a)
                if v is None or not v.intensity:
                    continue
                d = math.hypot(math.log10(v.intensity) - x, math.log10(r.tflops * 1e12) - y)
                if d < best_d:
                    best, best_d = (a, r, v.intensity, v.bytes_source, v), d
        for peer, results in self.data.references.items():
            for r in results:
                ai = self.data.reference_intensity(r.config, peer) if r.tflops else None
                if r.oom or not ai:
                    continue
                d = math.hypot(math.log10(ai) - x, math.log10(r.tflops * 1e12) - y)
                if d < best_d:
                    best, best_d = (peer, r, ai, "model", None), d
        if best is None:
            ai = 10.0**x
            peaks = roofs(gpu)
            top = gpu.top_flops
            parts = [
                f"{n.upper()} roof {fmt_rate(min(top, peaks[n].peak * ai), 'FLOP/s')}"
                for n in MEMORY_ROOFS
                if n in peaks
            ]
            text = f"{fmt_intensity(ai)} FLOP/B on {self.data.gpu_label}: " + ", ".join(parts)
            if XU in peaks and XU in self.roofs.flat:
                text += "\n" + xu_explained(peaks[XU].peak, self.roofs.flat[XU])
            return text
        a, r, ai, source, v = best
        name = series_label(a) if a in ALGORITHMS else reference_label(a, r.recorded)
        how = "measured DRAM bytes" if source == MEASURED else "model DRAM bytes (L2-aware)"
        lines = [
            f"{name}, N = {fmt_int(r.config.seq_len)}",
            f"{fmt_intensity(ai)} FLOP/B ({how}) · {fmt_rate(r.tflops * 1e12, 'FLOP/s')} achieved",
            bandwidth_text(r, self.data.figures(r.config.seq_len, a) if v is not None else None),
        ]
        if v is not None:
            roof = roofs(gpu)[v.roof].label if v.roof in roofs(gpu) else v.roof
            # a tie said as the explain pane says it, not as the roof that won by a hair
            binds = binds_text(v.ties, gpu.kind == CPU) if v.tie else f"{roof} binds"
            lines.append(f"{v.bound}-bound: {binds} (roofline {fmt_ms(v.roofline_ms)})")
        return "\n".join(lines)
