"""Mutation testing of the modules that compute the figures on screen: does a plausible wrong
formula make a test fail?

A small AST mutation runner (no dependency): each mutant changes one operator or constant in
one of MODULES (+ ↔ −, × ↔ ÷, ** → ×, < ↔ <=, > ↔ >=, == ↔ !=, and ↔ or, an integer n → n + 1,
a float x → 2x,
`not x` → `x`), is written into a scratch copy of the repository, and the tests that cover that
module run against it (`-x`, a time limit per mutant). A mutant is killed when they fail,
survives when they pass, and times out otherwise (reported apart: on a busy machine a time-out
says nothing about the tests).
Surviving mutants are printed with their line, to be judged: some are equivalent (a change no
figure can show, such as a bound that the data never reaches), the rest are missing tests.

    python bench/mutation_figures.py [--max 60] [--seed 1] [--module gpu/model/roofline.py ...]
                                     [--timeout 120] [--out docs/bench/mutation_figures.json]

Each mutant costs one pytest start (a few seconds to a minute on a busy machine), so runs are
sampled: `--max` mutants, spread over the modules by a seeded shuffle. Not part of CI.

Besides the sampled one-operator mutants, NAMED mutants are plausible wrong formulas written out
(a figure's numerator or denominator swapped for its wrong neighbour) that once survived the
whole suite. They always run, first, each against the tests that now cover it, and must be
killed: the run exits 1 if one survives (`--named-only` runs them alone).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Module -> the tests that cover it (Qt-free ones, so a mutant runs in seconds).
MODULES: dict[str, tuple[str, ...]] = {
    "gpu/model/roofline.py": (
        "tests/test_figure_formulas.py",
        "tests/test_figures.py",
        "tests/test_roofline.py",
    ),
    "gpu/model/costmodel.py": (
        "tests/test_figure_formulas.py",
        "tests/test_costmodel.py",
        "tests/test_figures.py",
    ),
    "gpu/model/kernel_cost.py": (
        "tests/test_figure_formulas.py",
        "tests/test_costmodel.py",
        "tests/test_figures.py",
    ),
    "gpu/model/gpus.py": (
        "tests/test_figure_formulas.py",
        "tests/test_costmodel.py",
        "tests/test_figures.py",
    ),
    "gpu/counters/profiler.py": ("tests/test_profiler.py",),
    "app/state/current_point.py": ("tests/test_figure_formulas.py", "tests/test_figures.py"),
    "app/state/training_figures.py": ("tests/test_figure_formulas.py",),
}
#: Tests left out of mutant runs: they need a window (seconds each, no figure module of
#: their own).
DESELECT = "not banner and not strip_chart_draws"


@dataclass(frozen=True)
class NamedMutant:
    """A plausible wrong formula: `old` (found exactly once in `module`) replaced by `new`."""

    module: str
    what: str
    old: str
    new: str
    tests: tuple[str, ...]
    keyword: str = ""  # a pytest -k expression narrowing `tests` to the ones that cover it


NAMED: tuple[NamedMutant, ...] = (
    NamedMutant(
        "app/state/current_point.py",
        "achieved FLOP/s from the executed FLOPs (a causal point's mask work counted as useful)",
        'Figure(v.flops / (v.measured_ms * 1e-3), "FLOP/s"',
        'Figure(v.executed_flops / (v.measured_ms * 1e-3), "FLOP/s"',
        ("tests/test_figure_formulas.py",),
    ),
    NamedMutant(
        "app/state/current_point.py",
        "intensity from the executed FLOPs",
        'intensity=Figure(v.intensity, "FLOP/B"',
        'intensity=Figure(v.executed_intensity, "FLOP/B"',
        ("tests/test_figure_formulas.py",),
    ),
    NamedMutant(
        "app/measure/explain.py",
        "the fused backward's recompute as a share of useful + recompute",
        "(extra.value or 0) / (useful.value or 1)",
        "(extra.value or 0) / ((useful.value or 0) + (extra.value or 0) or 1)",
        ("tests/test_one_point_alike.py",),
        "recompute_is_a_share",
    ),
    NamedMutant(
        "app/state/animation/chip.py",
        "naive's softmax row on chip at n·4 B (fp32) whatever the dtype",
        "row = softmax_row_smem_bytes(config)",
        "row = config.seq_len * 4",
        ("tests/test_animation_model.py",),
        "softmax",
    ),
)

_BINOPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
           ast.Pow: ast.Mult, ast.FloorDiv: ast.Mult}  # fmt: skip
_CMPOPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
           ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    module: str
    index: int  # the index-th mutation point of the module
    line: int
    what: str
    code: str = ""  # the mutated expression, as it reads after the change


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # "killed", "survived", "timeout", "error"
    seconds: float


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of docstring constants (mutating them changes nothing)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def mutation_points(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """Every (node, description) this runner can mutate, in a stable order."""
    docs = _docstring_nodes(tree)
    points: list[tuple[ast.AST, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            new = _BINOPS[type(node.op)].__name__
            points.append((node, f"{type(node.op).__name__} -> {new}"))
        elif isinstance(node, ast.Compare) and type(node.ops[0]) in _CMPOPS:
            new = _CMPOPS[type(node.ops[0])].__name__
            points.append((node, f"{type(node.ops[0]).__name__} -> {new}"))
        elif isinstance(node, ast.BoolOp):
            other = "Or" if isinstance(node.op, ast.And) else "And"
            points.append((node, f"{type(node.op).__name__} -> {other}"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            points.append((node, "not x -> x"))
        elif (
            isinstance(node, ast.Constant)
            and id(node) not in docs
            and type(node.value) in (int, float)  # bool is neither
            and not (type(node.value) is float and node.value == 0.0)  # 0.0 × 2: equivalent
        ):
            change = "× 2" if isinstance(node.value, float) else "+ 1"
            points.append((node, f"{node.value!r} -> {node.value!r} {change}"))
    points.sort(key=lambda p: (getattr(p[0], "lineno", 0), getattr(p[0], "col_offset", 0)))
    return points


class _Apply(ast.NodeTransformer):
    def __init__(self, target: ast.AST) -> None:
        self.target = target

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return _mutated(node)
        return super().visit(node)


def _mutated(node: ast.AST) -> ast.AST:
    if isinstance(node, ast.BinOp):
        return ast.copy_location(ast.BinOp(node.left, _BINOPS[type(node.op)](), node.right), node)
    if isinstance(node, ast.Compare):
        ops = [_CMPOPS[type(node.ops[0])](), *node.ops[1:]]
        return ast.copy_location(ast.Compare(node.left, ops, node.comparators), node)
    if isinstance(node, ast.BoolOp):
        op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return ast.copy_location(ast.BoolOp(op, node.values), node)
    if isinstance(node, ast.UnaryOp):
        return node.operand
    if isinstance(node, ast.Constant):  # a float doubled (+1 would vanish in 1.6e12), an int + 1
        value = node.value * 2 if isinstance(node.value, float) else node.value + 1
        return ast.copy_location(ast.Constant(value), node)
    raise TypeError(node)


def mutant_source(source: str, index: int) -> str:
    tree = ast.parse(source)
    node, _ = mutation_points(tree)[index]
    new = _Apply(node).visit(tree)
    ast.fix_missing_locations(new)
    return ast.unparse(new)


def all_mutants(modules: list[str]) -> list[Mutant]:
    out = []
    for module in modules:
        tree = ast.parse((ROOT / module).read_text())
        for i, (node, what) in enumerate(mutation_points(tree)):
            code = ast.unparse(_mutated(node))
            code = code if len(code) <= 90 else code[:87] + "..."
            out.append(Mutant(module, i, getattr(node, "lineno", 0), what, code))
    return out


def _pytest(
    scratch: Path, tests: tuple[str, ...], timeout: float, keyword: str = ""
) -> subprocess.CompletedProcess:
    select = f"({DESELECT}) and ({keyword})" if keyword else DESELECT
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
           "-k", select, *tests]  # fmt: skip
    return subprocess.run(
        cmd, cwd=scratch, capture_output=True, text=True, timeout=timeout,
        env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )  # fmt: skip


def run_mutant(scratch: Path, mutant: Mutant, timeout: float) -> Outcome:
    path = scratch / mutant.module
    original = (ROOT / mutant.module).read_text()
    path.write_text(mutant_source(original, mutant.index))
    t0 = time.perf_counter()
    try:
        status = _judged(_pytest(scratch, MODULES[mutant.module], timeout))
    except subprocess.TimeoutExpired:
        status = "timeout"
    finally:
        path.write_text(original)
    return Outcome(mutant, status, time.perf_counter() - t0)


def _judged(proc: subprocess.CompletedProcess) -> str:
    if proc.returncode == 0:
        return "survived"
    if proc.returncode not in (0, 1):
        return "error" if "error" in proc.stdout[-400:].lower() else "killed"
    return "killed"


def run_named(scratch: Path, mutant: NamedMutant, timeout: float) -> tuple[str, float]:
    """Apply `mutant` in the scratch copy, run its tests, put the module back."""
    path = scratch / mutant.module
    original = (ROOT / mutant.module).read_text()
    if original.count(mutant.old) != 1:
        return f"error: {mutant.old!r} is not in {mutant.module} exactly once", 0.0
    path.write_text(original.replace(mutant.old, mutant.new))
    t0 = time.perf_counter()
    try:
        status = _judged(_pytest(scratch, mutant.tests, timeout, mutant.keyword))
    except subprocess.TimeoutExpired:
        status = "timeout"
    finally:
        path.write_text(original)
    return status, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", choices=tuple(MODULES))
    parser.add_argument("--max", type=int, default=60, help="mutants to run (sampled)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per mutant")
    parser.add_argument("--out", type=Path, help="write the outcomes as JSON")
    parser.add_argument("--named-only", action="store_true", help="run the named mutants alone")
    args = parser.parse_args(argv)
    modules = args.module or list(MODULES)
    mutants = all_mutants(modules)
    random.Random(args.seed).shuffle(mutants)
    chosen = [] if args.named_only else mutants[: args.max]
    print(f"{len(mutants)} mutation points in {', '.join(modules)}; running {len(chosen)}, "
          f"and {len(NAMED)} named mutants")  # fmt: skip
    outcomes = []
    named: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="tilescope-mutants-") as tmp:
        scratch = Path(tmp) / "repo"
        shutil.copytree(
            ROOT, scratch,
            ignore=shutil.ignore_patterns(".git", ".venv", "docs", "__pycache__", "*.pyc",
                                          ".devtree-*", ".gpu-bundle"),
        )  # fmt: skip
        # The control: unmutated, the same tests must pass, or every mutant would look killed.
        tests = tuple(dict.fromkeys(t for m in modules for t in MODULES[m])) if chosen else ()
        controls = [(tests, "")] if tests else []
        controls += [(m.tests, m.keyword) for m in NAMED]
        for files, keyword in controls:
            control = _pytest(scratch, files, args.timeout * max(1, len(modules)), keyword)
            if control.returncode != 0:
                print("the unmutated tests fail; no mutant can be judged:\n"
                      + control.stdout[-2000:])  # fmt: skip
                return 1
            print(f"control: {', '.join(files)}{f' -k {keyword}' if keyword else ''} pass "
                  "unmutated")  # fmt: skip
        for m in NAMED:
            status, seconds = run_named(scratch, m, args.timeout)
            named.append({**asdict(m), "status": status, "seconds": round(seconds, 1)})
            print(f"[named] {status:<8} {m.module}: {m.what} ({seconds:.0f} s)", flush=True)
        for i, m in enumerate(chosen, 1):
            o = run_mutant(scratch, m, args.timeout)
            outcomes.append(o)
            print(f"[{i}/{len(chosen)}] {o.status:<8} {m.module}:{m.line} {m.what} "
                  f"({o.seconds:.0f} s)", flush=True)  # fmt: skip
    named_killed = sum(n["status"] == "killed" for n in named)
    print(f"named mutants: killed {named_killed} of {len(named)}")
    for n in named:
        if n["status"] != "killed":
            print(f"  named {n['status']}: {n['module']}: {n['what']}: {n['old']} -> {n['new']}")
    killed = sum(o.status == "killed" for o in outcomes)
    timeouts = sum(o.status == "timeout" for o in outcomes)
    survived = [o for o in outcomes if o.status == "survived"]
    errors = sum(o.status == "error" for o in outcomes)
    ran = len(outcomes) - errors - timeouts
    print(f"killed {killed} of {ran} judged ({killed / max(1, ran):.0%}); timed out {timeouts}; "
          f"errors {errors}")  # fmt: skip
    for o in survived:
        line = (ROOT / o.mutant.module).read_text().splitlines()[o.mutant.line - 1].strip()
        print(f"  survived: {o.mutant.module}:{o.mutant.line} {o.mutant.what}: {line}")
        print(f"            mutated: {o.mutant.code}")
    if args.out:
        args.out.write_text(
            json.dumps(
                {"killed": killed, "ran": ran, "timeouts": timeouts, "errors": errors,
                 "named": named,
                 "outcomes": [{**asdict(o.mutant), "status": o.status,
                               "seconds": round(o.seconds, 1)} for o in outcomes]},
                indent=1,
            )
        )  # fmt: skip
    return 0 if named_killed == len(named) else 1


if __name__ == "__main__":
    sys.exit(main())
