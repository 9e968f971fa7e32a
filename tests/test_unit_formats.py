"""Every number printed with a unit goes through the one unit formatter (gpu/units.py, named for
the app in app/state/units.py): a figure scaled by hand (`f"{x / 1e9:.1f} GB"`) or rounded by a
format spec before its unit (`f"{ms:.3f} ms"`, `"%.1f s"`) is written nowhere else in app/,
gpu/ or main.py. The few formats that look like one but print no unit the formatter knows are
listed below, each with its reason."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Unit words the formatter writes (with any SI or binary prefix), at the start of the text
#: after a formatted value.
_UNIT = r"[\s\u2009\u202f]?(?:[kMGTPE]i?)?(?:B|B/s|bytes|FLOP|FLOPs|FLOP/s|Hz|s|ms|µs|ns|min|exp/s)"
UNIT_AFTER = re.compile(rf"^{_UNIT}(?![\w/])|^{_UNIT}/s(?!\w)")
#: A printf-style or str.format float spec directly before a unit.
PRINTF = re.compile(rf"%[-+ #0]*\d*(?:\.\d+)?[fgeG]{_UNIT}(?![\w/])")
FORMAT_TEMPLATE = re.compile(rf"\{{[^{{}}]*:[^{{}}]*\.\d+[fgeG]\}}{_UNIT}(?![\w/])")
FLOAT_SPEC = re.compile(r"\.\d+[fgeG]")
SCALE_NAMES = {"KB", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB"}

#: (file, a fragment of the flagged source, why it is not a hand-rolled unit).
ALLOWED: tuple[tuple[str, str, str], ...] = (
    (
        "gpu/model/gpus.py",
        'f"{self.memory_gb:.0f} GB"',
        "a GPU's capacity as its maker sells it ('80 GB'), part of the product's name",
    ),
    (
        "app/measure/plot_styles.py",
        "trillion/s",
        "the exponential unit's roof in plain words for the hover, beside the formatter's "
        "'Texp/s' of its label",
    ),
    (
        "app/window/help_menu.py",
        "{value // 1000}.{value % 1000 // 10}",
        "a CUDA version number (12080 is 12.8), not a quantity",
    ),
)


def _is_scale(node: ast.expr) -> bool:
    """A constant that changes a unit's prefix: ±10^(3k) or 2^(10k), k ≥ 1 (also `2**30`,
    `1 << 20` and the named byte sizes)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        if isinstance(node.value, bool) or not node.value:
            return False
        l10, l2 = math.log10(abs(node.value)), math.log2(abs(node.value))
        power10 = abs(l10 - round(l10)) < 1e-9 and abs(round(l10)) >= 3
        power2 = abs(l2 - round(l2)) < 1e-9 and round(l2) >= 10
        return power10 or power2
    if isinstance(node, ast.Name):
        return node.id in SCALE_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in SCALE_NAMES
    return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Pow, ast.LShift))


def _scaled(expr: ast.expr) -> bool:
    """Whether `expr` rescales a figure by hand (not inside a call: `fmt_ms(s * 1e3)` hands
    the unit to the formatter)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            continue
        if isinstance(node, ast.BinOp):
            shift = node.right.value if isinstance(node.right, ast.Constant) else 0
            if isinstance(node.op, ast.RShift) and isinstance(shift, int) and shift >= 10:
                return True
            ops = (ast.Div, ast.Mult, ast.FloorDiv, ast.Mod)
            if isinstance(node.op, ops) and (_is_scale(node.left) or _is_scale(node.right)):
                return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def hand_rolled(source: str) -> list[tuple[int, str]]:
    """(line, source) of every hand-rolled unit format in a module's source."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    inside_fstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            values = node.values
            for i, value in enumerate(values):
                if not isinstance(value, ast.FormattedValue):
                    continue
                after = values[i + 1] if i + 1 < len(values) else None
                text = after.value if isinstance(after, ast.Constant) else ""
                spec = ast.unparse(value.format_spec) if value.format_spec else ""
                unit_after = isinstance(text, str) and UNIT_AFTER.match(text)
                rounded = unit_after and FLOAT_SPEC.search(spec)
                if _scaled(value.value) or rounded:
                    found.append((value.lineno, ast.get_source_segment(source, node) or ""))
            inside_fstrings.update(id(v) for v in values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in inside_fstrings:
                continue
            if PRINTF.search(node.value) or FORMAT_TEMPLATE.search(node.value):
                found.append((node.lineno, node.value))
    return found


def _sources() -> list[Path]:
    files = [ROOT / "main.py", *(ROOT / "app").rglob("*.py"), *(ROOT / "gpu").rglob("*.py")]
    return [p for p in files if p != ROOT / "gpu" / "units.py"]


def _allowed(path: str, text: str) -> bool:
    return any(path == where and fragment in text for where, fragment, _ in ALLOWED)


def test_no_unit_is_formatted_by_hand_outside_the_formatter():
    offenders = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for line, text in hand_rolled(path.read_text(encoding="utf-8")):
            if not _allowed(rel, text):
                offenders.append(f"{rel}:{line}: {text[:90]}")
    assert offenders == []


def test_every_allowed_format_is_still_there():
    """An allowance whose format is gone is removed with it, so the list stays short."""
    for where, fragment, reason in ALLOWED:
        found = hand_rolled((ROOT / where).read_text(encoding="utf-8"))
        assert any(fragment in text for _, text in found), (where, fragment, reason)


def test_the_scan_sees_each_way_of_rolling_a_unit_by_hand():
    cases = {
        'f"{x / 1e9:.1f} GB"': 1,
        'f"{n // 1024} KiB"': 1,
        'f"{ms:.3f} ms"': 1,
        'f"{hz / 1e9:.2f} GHz boost"': 1,
        'f"{b >> 20} MiB"': 1,
        'f"{x * 1e3:.1f}"': 1,
        'log.info("took %.1f s", t)': 1,
        '"{:.2f} GB".format(x)': 1,
        'f"{fmt_bytes(x)} of memory"': 0,
        'f"{fmt_ms(s * 1e3)}"': 0,
        'f"{n:,} B of shared memory"': 0,  # an exact count, not rounded or rescaled
        'f"{share:.0%} of the peak"': 0,
        'f"{ratio:.1f}×"': 0,
        'f"{d} ({size} B)"': 0,
    }
    for code, count in cases.items():
        assert len(hand_rolled(code)) == count, code
