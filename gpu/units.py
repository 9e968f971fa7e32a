"""Numbers and units as Tilescope prints them: the one implementation the command line, the app
and the exports share. Plain Python (no Qt, no NumPy), so `main.py` and `gpu/` can use it.

Conventions
- Byte figures are decimal (SI): 1 kB = 10³ B, 1 MB = 10⁶ B, 1 GB = 10⁹ B, like the bandwidths of
  datasheets (TB/s) and Nsight Compute's byte counts, so sizes, traffic and rates compare
  directly ("S alone: 6.44 GB", "35 GB/s"). "GB" never stands for a binary figure.
- A GPU's capacity is decimal too: the H200's datasheet says 141 GB (GpuSpec.memory_label), the
  device reports 150,109,880,320 B = 150 GB usable. Binary units are written as such (KiB, MiB,
  GiB = 2¹⁰, 2²⁰, 2³⁰ B; `fmt_bytes_binary`) and only where a figure is binary by its own
  definition (the 60 MiB L2, a 228 KiB shared memory, the file-size limits).
- Labels and tooltips give three significant figures and keep trailing zeros ("1.50 ms",
  "6.29 MB"), so a figure says its precision and a running clock keeps its width. A value that
  rounds up to the next prefix takes it (999.7 MB is "1.00 GB"), and nothing is ever printed in
  exponent notation.
- Axis ticks (`fmt_axis`) drop trailing zeros ("1 GB", "20 MB") and use a thin space: ticks are
  round numbers and sit tight.
- Table columns of the command line (`fmt_ms_column`) give four significant figures and whole
  milliseconds with separators from one second up, so a column reads evenly from microsecond
  kernels to a minute-long naive pass.
"""

from __future__ import annotations

import math

#: SI prefixes above one, in steps of 10³.
SI_PREFIXES = "kMGTPE"
_BINARY_PREFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_TIME_UNITS = ((1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1.0, "s"), (60.0, "min"), (3600.0, "h"))
#: Shown for a figure that does not exist (not measured, not applicable).
MISSING = "—"
#: Between a number and its unit on axis ticks.
THIN_SPACE = "\u2009"


def sig(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant figures, trailing zeros kept, never in exponent notation:
    sig(6.2915) -> '6.29', sig(0.5) -> '0.500', sig(123456) -> '123000'."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    magnitude = math.floor(math.log10(abs(value)))
    rounded = round(value, digits - 1 - magnitude)
    if rounded != 0:
        magnitude = math.floor(math.log10(abs(rounded)))  # 9.996 rounds to 10.0: one more digit
    decimals = max(0, digits - 1 - magnitude)
    return f"{rounded:.{decimals}f}"


def _with_unit(value: float, units: tuple[tuple[float, str], ...], digits: int) -> str:
    """`value` in the first of `units` ((scale, name), smallest first) whose rounded figure is
    below the next unit, so 999.7 kB is '1.00 MB' and 59.97 s is '1.00 min'; zero in scale 1."""
    if value == 0:
        return f"0 {next((name for scale, name in units if scale == 1.0), units[0][1])}"
    i = 0
    while i + 1 < len(units) and abs(value) >= units[i + 1][0]:
        i += 1
    text = sig(value / units[i][0], digits)
    if i + 1 < len(units) and abs(float(text)) >= units[i + 1][0] / units[i][0]:
        i += 1  # rounding reached the next unit: show that rounded figure in it
        text = sig(float(text) * units[i - 1][0] / units[i][0], digits)
    return f"{text} {units[i][1]}"


def fmt_si(value: float, unit: str, digits: int = 3) -> str:
    """`value` with an SI prefix: fmt_si(1.2e12, 'FLOP/s') -> '1.20 TFLOP/s'."""
    steps = ((1000.0**i, p + unit) for i, p in enumerate(("", *SI_PREFIXES)))
    return _with_unit(float(value), tuple(steps), digits)


def fmt_bytes(n: float | None, digits: int = 3) -> str:
    """Decimal bytes: 6291456 -> '6.29 MB', 999 -> '999 B'; None -> '—'."""
    if n is None:
        return MISSING
    if abs(round(n)) < 1000:
        return f"{round(n)} B"
    return fmt_si(float(n), "B", digits)


def fmt_bytes_binary(n: float | None, digits: int = 3) -> str:
    """Binary bytes, for a figure named in them: 150_109_880_320 -> '140 GiB'."""
    if n is None:
        return MISSING
    if abs(round(n)) < 1024:
        return f"{round(n)} B"
    steps = ((1024.0**i, p + "B") for i, p in enumerate(("", *_BINARY_PREFIXES)))
    return _with_unit(float(n), tuple(steps), digits)


def fmt_seconds(s: float | None, digits: int = 3) -> str:
    """A duration: ns, µs, ms and s to `digits` significant figures, then min and h:
    1.5e-3 -> '1.50 ms', 90 -> '1.50 min'; None -> '—'."""
    if s is None:
        return MISSING
    if not math.isfinite(s):
        return f"{s} s"
    return _with_unit(float(s), _TIME_UNITS, digits)


def fmt_ms(ms: float | None, digits: int = 3) -> str:
    """A time given in milliseconds: 0.104 -> '104 µs', 1530 -> '1.53 s'; None -> '—'."""
    return MISSING if ms is None else fmt_seconds(ms / 1e3, digits)


def fmt_ns(ns: float | None, digits: int = 3) -> str:
    """A time given in nanoseconds (traces): 1500 -> '1.50 µs'."""
    return MISSING if ns is None else fmt_seconds(ns * 1e-9, digits)


def fmt_ms_column(ms: float | None) -> str:
    """A command-line table's milliseconds: four significant figures with trailing zeros
    (1.530), whole milliseconds with separators from one second up (91,882); None -> ''."""
    if ms is None:
        return ""
    if abs(ms) >= 999.95:  # 999.96 would print as "1000." at four figures
        return f"{ms:,.0f}"
    return sig(ms, 4)


def fmt_flops(n: float) -> str:
    """A FLOP count: 6.87e10 -> '68.7 GFLOP'."""
    return fmt_si(float(n), "FLOP")


def fmt_rate(value: float | None, unit: str) -> str:
    """A throughput: fmt_rate(1.2e12, 'FLOP/s') -> '1.20 TFLOP/s'; None -> '—'."""
    return MISSING if value is None else fmt_si(float(value), unit)


def fmt_int(n: int) -> str:
    """Thin-space thousands separators read better than commas in formulas: 32768 -> '32 768'."""
    return f"{int(n):,}".replace(",", THIN_SPACE)


def fmt_intensity(value: float) -> str:
    """FLOP per byte: '2 712' (thin-space thousands) from a hundred up, '63.5' below, '0.520'
    below one."""
    if value >= 99.95:
        return fmt_int(round(value))
    return sig(value, 3)


def short_n(n: float) -> str:
    """A sequence length as the N axis and the slider's ends print it: 131072 -> '128k',
    1000 -> '1000' (only whole multiples of 1024 take the k)."""
    n = round(n)
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return str(n)


def fmt_axis(value: float, unit: str, prefixes: str = SI_PREFIXES) -> str:
    """An axis tick: '1 GB', '20 MB', '500 ms' — at most three significant figures, no padding
    zeros, a thin space before the unit."""
    scale, prefix = 1.0, ""
    for i, p in enumerate(prefixes):
        if abs(value) >= 1000.0 ** (i + 1) * 0.9995:
            scale, prefix = 1000.0 ** (i + 1), p
    return f"{float(f'{value / scale:.3g}'):g}{THIN_SPACE}{prefix}{unit}"


def fmt_bytes_axis(value: float) -> str:
    """A byte axis tick: 2e7 -> '20 MB'."""
    return fmt_axis(value, "B")


def fmt_bandwidth_axis(value: float) -> str:
    """A bandwidth axis tick, bytes per second: 3e12 -> '3 TB/s'."""
    return fmt_axis(value, "B/s")


def fmt_ms_axis(value: float) -> str:
    """A time axis tick, from milliseconds: 0.5 -> '500 µs', 2000 -> '2 s'."""
    if value >= 1000:
        return fmt_axis(value / 1000, "s", prefixes="")
    if value >= 1:
        return fmt_axis(value, "ms", prefixes="")
    return fmt_axis(value * 1000, "µs", prefixes="")


def fmt_flops_axis(value: float) -> str:
    """A FLOP axis tick (the unit is the axis title's): 1e12 -> '1 T'."""
    return fmt_axis(value, "")


def fmt_plain_axis(value: float) -> str:
    """A unitless axis tick (FLOP per byte): 0.5 -> '0.5', 2000 -> '2k'."""
    if value < 1000:
        return f"{float(f'{value:.3g}'):g}"
    return f"{float(f'{value / 1000:.3g}'):g}k"
