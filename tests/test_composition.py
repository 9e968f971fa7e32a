"""Classes are composed, not assembled: the main window is a shell that owns its parts, no class
of app/ or gpu/ passes 600 lines, and no module reads another object's private attributes
(what a part needs from another is a public method, attribute or signal)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_CLASS_LINES = 600

#: Private names read on purpose, each with its reason: the standard library's and NumPy's
#: internals where no public way exists, and a class reading another instance of itself.
PRIVATE_READS = {
    "os._exit": "a forked child or a process that must end now, without the exit handlers",
    "results._writer": "closing our copy of a process pool's result pipe unblocks a pool whose "
    "process was killed mid-message (app/work/background.py)",
    "multiarray._ARRAY_API": "NumPy's C API table: the allocator hook has no Python API",
    "other._data": "ResultStore.take_over reads the other store, of its own class",
}


def _trees(*folders: str):  # type: ignore[no-untyped-def]
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT), ast.parse(path.read_text(encoding="utf-8"))


def _private_reads(tree: ast.AST) -> list[str]:
    """`x._name` where `x` is not `self` or `cls` (dunders aside)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append(ast.unparse(node))
    return found


def test_the_main_window_is_a_shell_that_owns_its_parts_not_a_sum_of_mixins():
    tree = ast.parse((ROOT / "app/window/main_window.py").read_text(encoding="utf-8"))
    (window,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MainWindow"]
    assert [ast.unparse(b) for b in window.bases] == ["QMainWindow"]
    assigned = {
        t.attr
        for n in ast.walk(window)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Attribute)
    }
    assert {"measurements", "backend_switch", "window_actions", "file_menu", "help_menu"} <= (
        assigned
    )


def test_no_class_of_app_or_gpu_passes_600_lines():
    too_long = [
        f"{path}: {node.name} has {node.end_lineno - node.lineno + 1} lines"
        for path, tree in _trees("app", "gpu")
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
    ]
    assert too_long == []


def test_no_module_of_app_or_gpu_reads_another_objects_private_attributes():
    reads = {
        f"{path}: {read}"
        for path, tree in _trees("app", "gpu")
        for read in _private_reads(tree)
        if read not in PRIVATE_READS
    }
    assert reads == set()


def test_no_test_or_bench_reaches_into_the_window_or_its_parts():
    parts = ("measurements", "backend_switch", "window_actions", "file_menu", "help_menu")
    reaches = set()
    for path, tree in _trees("tests", "bench"):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__"):
                continue
            owner = ast.unparse(node.value)
            if owner == "window" or owner.endswith(tuple(f".{p}" for p in parts)):
                reaches.add(f"{path}: {ast.unparse(node)}")
    assert reaches == set()


def test_the_private_reads_allowed_are_still_made():
    """An entry no longer needed goes from the list (it would let the next one in unseen)."""
    made = {read for _, tree in _trees("app", "gpu") for read in _private_reads(tree)}
    assert set(PRIVATE_READS) <= made
