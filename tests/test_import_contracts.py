"""The package layers hold, as `lint-imports` checks them against the contracts in
pyproject.toml: gpu/ never imports Qt or the app, app/state is Qt-free, and the folders of gpu/
and app/ stack in layers, each importing only those below it. So no two folders import each
other: each can be read, tested and moved with only what lies under it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from test_boundaries import _graph

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    assert LINT_IMPORTS.exists(), "lint-imports is missing: install the test extra (.[test])"
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
    )


def _folder(module: str) -> str:
    """A module's folder: its first subpackage of app/ or gpu/ (app.state's subpackages are
    folders of their own), or the module itself at the top of a package."""
    parts = module.split(".")
    depth = 3 if parts[:2] == ["app", "state"] and len(parts) > 3 else 2
    return ".".join(parts[:depth])


def folder_pairs_importing_each_other() -> list[tuple[str, str]]:
    internal, _ = _graph()
    edges: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for module, imported in internal.items():
        for other in imported:
            a, b = _folder(module), _folder(other)
            if a != b and not a.startswith(b + "."):
                edges[(a, b)].add((module, other))
    return sorted((a, b) for a, b in edges if (b, a) in edges and a < b)


def test_the_import_contracts_hold():
    out = _lint_imports(ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout and "kept" in out.stdout.lower()


def test_no_two_folders_import_each_other():
    assert folder_pairs_importing_each_other() == []


def test_the_contracts_refuse_an_import_up_the_layers(tmp_path):
    """The same contracts on a copy of the sources in which the cost model imports a backend
    (a layer above it) and the engine imports Qt: lint-imports fails and names both."""
    for name in ("app", "gpu"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "gpu" / "model" / "schedule.py").open("a") as f:
        f.write("\nfrom ..backends import backend  # noqa\n")
    with (tmp_path / "gpu" / "units.py").open("a") as f:
        f.write("\nimport PySide6  # noqa\n")
    out = _lint_imports(tmp_path)
    assert out.returncode != 0
    assert "gpu.model.schedule -> gpu.backends.backend" in out.stdout
    assert "gpu.units -> PySide6" in out.stdout
