"""The package boundaries hold: gpu/ and app/state/ run without Qt, gpu/ never reaches into the
app, and no modules of app/ or gpu/ import each other in a circle.

The import graph is read from the sources (every import statement, also those inside functions
and under TYPE_CHECKING, as import-linter counts them), and the Qt-free packages are also
imported for real in a fresh interpreter, which catches what an import pulls in transitively.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "gpu")
#: Top-level names of the GUI stack: none of them may load with gpu/ or app/state/.
QT = ("PySide6", "shiboken6", "pyqtgraph", "superqt", "qtpy")
#: Packages that must run without Qt (the engine, and the app's testable state).
QT_FREE = ("gpu", "app.state")
#: Optional GPU libraries: a module that needs them cannot be imported on a CPU-only machine.
GPU_ONLY = ("cupy", "cupy_backends", "torch", "cupti", "cuda")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(p): p
        for package in PACKAGES
        for p in sorted((ROOT / package).rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def _imported_names(module: str, path: Path) -> list[str]:
    """Every absolute module name an import statement of `module` names, in any scope."""
    is_package = path.name == "__init__.py"
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names.append(prefix)
            names += [f"{prefix}.{alias.name}" for alias in node.names]  # `from . import x`
    return names


@functools.cache
def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> the modules of app/ and gpu/ it imports, module -> the top-level names of
    everything else it imports)."""
    modules = _modules()
    internal: dict[str, set[str]] = {m: set() for m in modules}
    external: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for name in _imported_names(module, path):
            if name.split(".")[0] not in PACKAGES:
                external[module].add(name.split(".")[0])
                continue
            while name not in modules and "." in name:
                name = name.rsplit(".", 1)[0]  # `from .x import function` names module x
            if name in modules and name != module:
                internal[module].add(name)
    return internal, external


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_graph_sees_relative_lazy_and_type_checking_imports():
    internal, external = _graph()
    assert (
        "gpu.launch.flash_launch" in internal["gpu.launch.flash_mma"]
    )  # `from . import flash_launch`
    assert "gpu.units" in internal["app.state.units"]
    assert "PySide6" in external["app.qt_compat"]  # imported inside a function only
    assert {"app.state.app_state", "app.state.runs"} <= internal["app.window.main_window"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_modules_of_app_or_gpu_import_each_other_in_a_circle():
    """Lazy imports (inside a function) count too: a circle closed by one still means neither
    module can be read, tested or moved without the other."""
    internal, _ = _graph()
    assert _cycles(internal) == []


def test_gpu_never_imports_the_app():
    internal, _ = _graph()
    reaching = {m: sorted(d for d in deps if _in(d, ("app",))) for m, deps in internal.items()}
    assert {m: d for m, d in reaching.items() if _in(m, ("gpu",)) and d} == {}


def test_the_app_state_imports_nothing_of_the_app_outside_it():
    internal, _ = _graph()
    outside = {
        m: sorted(d for d in deps if _in(d, ("app",)) and not _in(d, ("app.state",)))
        for m, deps in internal.items()
        if _in(m, ("app.state",))
    }
    assert {m: d for m, d in outside.items() if d} == {}


def test_gpu_and_the_app_state_name_no_qt_package_in_any_import():
    _, external = _graph()
    named = {m: sorted(set(names) & set(QT)) for m, names in external.items() if _in(m, QT_FREE)}
    assert {m: q for m, q in named.items() if q} == {}


def test_importing_all_of_gpu_and_the_app_state_loads_no_qt():
    """In a fresh interpreter: every module of gpu/ and app/state/ imported, then no Qt module
    may be loaded. Modules that need an optional GPU library are skipped where it is missing."""
    modules = sorted(m for m in _modules() if _in(m, QT_FREE))
    script = f"""
import importlib, json, sys
skipped = []
for name in {modules!r}:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in {GPU_ONLY!r}:
            raise
        skipped.append(name)
qt = sorted({{m.split(".")[0] for m in sys.modules}} & set({QT!r}))
print(json.dumps({{"qt": qt, "skipped": skipped, "loaded": len(sys.modules)}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["qt"] == [], f"Qt loaded with gpu/ and app/state/: {report['qt']}"
    assert len(report["skipped"]) < len(modules) // 4, report["skipped"]  # most were imported


def test_the_app_is_rooms_each_a_folder_with_one_job():
    """app/'s top level holds only its entry points (the app, `render`): every other module sits
    in the room (the folder) of the part of the window it serves, or in the kit every room
    builds on, so a newcomer finds it by where it shows."""
    app_dir = Path(__file__).resolve().parent.parent / "app"
    top = sorted(p.name for p in app_dir.glob("*.py"))
    assert top == ["__init__.py", "launch.py", "qt_compat.py", "render_command.py"]
    rooms = sorted(p.name for p in app_dir.iterdir() if (p / "__init__.py").exists())
    assert rooms == [
        "animation", "controls", "export", "kit", "measure", "plotting", "ring", "state", "window",
        "work",
    ]  # fmt: skip
    for room in rooms:
        doc = (app_dir / room / "__init__.py").read_text().lstrip()
        assert doc.startswith('"""'), f"app/{room}/ says nothing of its job"


def test_the_window_finds_its_icon_and_both_style_sheets_wherever_its_room_sits():
    """A room moved one folder deeper once looked for resources/ inside app/: the window then
    started with no icon and no style sheet, and said so only in a Qt warning."""
    from app.kit.theme import RESOURCES, icon_path, style_sheet

    assert Path(__file__).resolve().parent.parent / "resources" == RESOURCES
    assert icon_path().is_file()
    assert style_sheet("dark").strip() and style_sheet("light").strip()


#: The engine's top level: its entry (__init__) and the vocabulary every room shares.
ENGINE_TOP = [
    "__init__.py", "algorithms.py", "config.py", "errors.py", "exit_status.py", "results.py",
    "ring_timeline.py", "units.py",
]  # fmt: skip


def test_the_engine_is_rooms_each_a_folder_with_one_job():
    """gpu/'s top level holds only the shared vocabulary (configs, the algorithm registry,
    results and the ring's, errors, units, exit status): every other module sits in the room of
    its job (model, backends, launch, counters, ring, profiling, files), and each room's
    __init__ says what that job is."""
    gpu_dir = ROOT / "gpu"
    assert sorted(p.name for p in gpu_dir.glob("*.py")) == ENGINE_TOP
    rooms = sorted(p.parent.name for p in gpu_dir.glob("*/__init__.py"))
    assert {"backends", "counters", "files", "launch", "model", "profiling", "ring"} <= set(rooms)
    for room in rooms:
        doc = (gpu_dir / room / "__init__.py").read_text().lstrip()
        assert doc.startswith('"""'), f"gpu/{room}/ says nothing of its job"
    assert not (gpu_dir / "kernels" / "__init__.py").exists()  # CUDA sources, found by path
