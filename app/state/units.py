"""Human-readable numbers for labels, tooltips and the explain pane, in one unit convention.

Every byte figure the app prints is decimal (SI): 1 kB = 10³ B, 1 MB = 10⁶ B, 1 GB = 10⁹ B, like
the bandwidths of datasheets (TB/s) and Nsight Compute's byte counts, so sizes, traffic and
rates compare directly ("S alone: 6.44 GB", "this device: 150 GB", "35 GB/s").

A GPU's capacity is decimal too: the H200's datasheet says 141 GB (GpuSpec.memory_label), the
device reports 150,109,880,320 B = 150 GB usable. Binary units are written as such (KiB, MiB,
GiB = 2¹⁰, 2²⁰, 2³⁰ B) and only where a figure is binary by its own definition (the 60 MiB L2,
a 228 KiB shared memory). "GB" never stands for a binary figure.
"""

from __future__ import annotations

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _si(value: float, unit: str, digits: int = 3) -> str:
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{_sig(value, digits)} {unit}"


def _sig(value: float, digits: int) -> str:
    """`value` with `digits` significant figures, no exponent, no trailing zeros beyond them."""
    if value == 0:
        return "0"
    mag = len(str(int(abs(value)))) if abs(value) >= 1 else 0
    decimals = max(0, digits - mag)
    return f"{value:.{decimals}f}"


def fmt_bytes(n: float | None) -> str:
    """6291456 -> '6.29 MB'; None -> '—'."""
    if n is None:
        return "—"
    if abs(n) < 1000:
        return f"{int(n)} B"
    return _si(float(n), "B")


def fmt_bytes_short(n: float | None) -> str:
    """Fewer digits, for axis-adjacent labels: 25769803776 -> '25.8 GB'."""
    if n is None:
        return "—"
    if abs(n) < 1000:
        return f"{int(n)} B"
    return _si(float(n), "B", digits=3)


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "—"
    if ms >= 1000:
        return f"{ms / 1000:.3g} s"
    if ms >= 1:
        return f"{ms:.3g} ms"
    return f"{ms * 1000:.3g} µs"


def fmt_seconds(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return fmt_ms(s * 1e3)


def fmt_flops(n: float) -> str:
    return _si(float(n), "FLOP")


def fmt_rate(value: float | None, unit: str) -> str:
    """Throughputs: fmt_rate(1.2e12, 'FLOP/s') -> '1.20 TFLOP/s'."""
    if value is None:
        return "—"
    return _si(float(value), unit)


def fmt_intensity(value: float) -> str:
    """FLOP per byte: '2 712' (thin-space thousands), '63.5' below a hundred, '0.52' below one."""
    if value >= 100:
        return fmt_int(round(value))
    return f"{value:.1f}" if value >= 1 else f"{value:.2g}"


def fmt_int(n: int) -> str:
    """Thin-space thousands separators read better than commas in formulas: 32 768."""
    return f"{n:,}".replace(",", "\u2009")
