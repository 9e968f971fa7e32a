"""The one formatter of numbers and units: the outputs the CLI, the app and the exports share."""

import ast
from pathlib import Path

import pytest

from gpu import units
from gpu.units import (
    fmt_bytes,
    fmt_bytes_axis,
    fmt_bytes_binary,
    fmt_flops,
    fmt_flops_axis,
    fmt_int,
    fmt_intensity,
    fmt_ms,
    fmt_ms_axis,
    fmt_ms_column,
    fmt_ns,
    fmt_plain_axis,
    fmt_rate,
    fmt_seconds,
    short_n,
    sig,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (6.2915, 3, "6.29"),
        (0.5, 3, "0.500"),
        (0.00012345, 3, "0.000123"),
        (9.996, 3, "10.0"),
        (999.7, 3, "1000"),
        (123456, 3, "123000"),
        (-1.234, 3, "-1.23"),
        (0, 3, "0"),
        (1.53, 4, "1.530"),
    ],
)
def test_significant_figures_keep_trailing_zeros_and_never_use_an_exponent(value, digits, text):
    assert sig(value, digits) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (1000, "1.00 kB"),
        (12 * 512 * 512 * 2, "6.29 MB"),
        (12 * 4096 * 4096 * 2, "403 MB"),
        (12 * 32768 * 32768 * 2, "25.8 GB"),
        (999_700_000, "1.00 GB"),
        (441.03e12, "441 TB"),
        (2.5e15, "2.50 PB"),
        (None, "—"),
    ],
)
def test_bytes_are_decimal_with_three_significant_figures(n, text):
    assert fmt_bytes(n) == text


def test_bytes_carry_to_the_next_prefix_instead_of_printing_a_thousand():
    assert fmt_bytes(999_499) == "999 kB" and fmt_bytes(999_500) == "1.00 MB"


def test_binary_bytes_name_their_unit():
    assert fmt_bytes_binary(141 * 2**30) == "141 GiB"
    assert fmt_bytes_binary(150_109_880_320) == "140 GiB"
    assert fmt_bytes_binary(256 * 2**20) == "256 MiB"
    assert fmt_bytes_binary(1023) == "1023 B"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (1.5e-9, "1.50 ns"),
        (104e-6, "104 µs"),
        (1.53e-3, "1.53 ms"),
        (0.9997, "1.00 s"),
        (45.3, "45.3 s"),
        (59.97, "1.00 min"),
        (90, "1.50 min"),
        (7200, "2.00 h"),
        (None, "—"),
    ],
)
def test_durations_step_from_nanoseconds_to_hours(seconds, text):
    assert fmt_seconds(seconds) == text


def test_a_rough_estimate_takes_two_figures():
    assert fmt_seconds(740, digits=2) == "12 min" and fmt_seconds(1800, digits=2) == "30 min"


def test_milliseconds_and_nanoseconds_are_durations_in_their_own_units():
    assert fmt_ms(0.104) == "104 µs" and fmt_ms(1530) == "1.53 s" and fmt_ms(None) == "—"
    assert fmt_ms(999.96) == "1.00 s"  # never "1e+03 ms"
    assert fmt_ns(1500) == "1.50 µs"


def test_the_command_line_column_reads_evenly_from_microseconds_to_minutes():
    assert fmt_ms_column(1.53) == "1.530"
    assert fmt_ms_column(0.000123) == "0.0001230"
    assert fmt_ms_column(999.94) == "999.9"
    assert fmt_ms_column(999.96) == "1,000"
    assert fmt_ms_column(91_882.4) == "91,882"
    assert fmt_ms_column(None) == ""


def test_rates_flops_and_intensities():
    assert fmt_rate(1.2e12, "FLOP/s") == "1.20 TFLOP/s" and fmt_rate(None, "B/s") == "—"
    assert fmt_flops(6.87e10) == "68.7 GFLOP"
    assert fmt_intensity(2712.4) == "2\u2009712"
    assert fmt_intensity(63.46) == "63.5"
    assert fmt_intensity(0.52) == "0.520"
    assert fmt_int(32768) == "32\u2009768"


def test_an_estimate_keeps_two_figures_from_seconds_to_hours():
    # what `bench` and the window's runner both say before a long run
    assert fmt_seconds(30.2, digits=2) == "30 s" and fmt_seconds(45.6, digits=2) == "46 s"
    assert fmt_seconds(130, digits=2) == "2.2 min" and fmt_seconds(7.3 * 3600, digits=2) == "7.3 h"
    assert fmt_seconds(59.97, digits=2) == "1.0 min"  # never "60 s"


def test_the_command_line_prints_flop_counts_in_units_never_in_exponents(capsys):
    import main

    # a training step of Llama-7B's shape at N = 4096: 12·h·N²·d = 12·32·4096²·128 FLOPs,
    # the backward's 8·h·N²·d of them useful and the fused kernel's recompute 2·h·N²·d
    assert main.main(["model", "--seq", "4096", "--pass", "step", "--preset", "llama-7b"]) == 0
    out = capsys.readouterr().out
    assert "FLOPs: 825 GFLOP" in out
    assert "backward 550 GFLOP useful, recompute 137 GFLOP" in out
    assert "e+" not in out


def test_sequence_lengths_take_k_only_for_whole_multiples_of_1024():
    assert short_n(131072) == "128k" and short_n(1000) == "1000" and short_n(512) == "512"


def test_axis_ticks_drop_padding_zeros_and_sit_tight():
    assert fmt_bytes_axis(1e9) == "1\u2009GB" and fmt_bytes_axis(2e7) == "20\u2009MB"
    assert fmt_ms_axis(0.5) == "500\u2009µs" and fmt_ms_axis(2000) == "2\u2009s"
    assert fmt_ms_axis(250) == "250\u2009ms"
    assert fmt_flops_axis(1e12) == "1\u2009T"
    assert fmt_plain_axis(0.5) == "0.5" and fmt_plain_axis(2000) == "2k"


def test_the_app_reads_the_same_functions_not_copies():
    from app.state import units as app_units

    for name in app_units.__all__:
        assert getattr(app_units, name) is getattr(units, name), name


def _formatters_defined_outside_units() -> list[str]:
    """Module-level functions elsewhere in app/, gpu/ and main.py that format bytes, times or
    N the way gpu/units.py does (their names give them away)."""
    found = []
    suspects = ("fmt_bytes", "fmt_ms", "fmt_s", "fmt_seconds", "short_n", "fmt_ns", "compact")
    suspects += ("fmt_duration", "fmt_flops", "fmt_rate", "gb", "mb")
    files = [ROOT / "main.py", *(ROOT / "app").rglob("*.py"), *(ROOT / "gpu").rglob("*.py")]
    for path in files:
        if path.name == "units.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") in suspects:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    return found


def test_numbers_and_units_have_one_implementation():
    assert _formatters_defined_outside_units() == []
