"""docs/ARCHITECTURE.md, the map of where things are and how to add a kernel, a plot or a GPU,
matches the tree: every path it names exists, every folder and top-level module of gpu/ and
app/ is on it, every layer of the import contracts is, and the README links to it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
#: A path in backticks: a folder (trailing /) or a file with a suffix, not a pattern (<name>).
PATH = re.compile(r"`((?:app|gpu|tests|docs|bench|resources)/[\w/.]*|main\.py|pyproject\.toml)`")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_path_the_page_names_exists():
    named = set(PATH.findall(_text()))
    assert len(named) > 40
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_every_folder_and_top_level_module_of_the_packages_is_on_the_page():
    named = set(PATH.findall(_text()))
    folders = {
        f"{p.parent.relative_to(ROOT).as_posix()}/"
        for package in ("app", "gpu")
        for p in (ROOT / package).glob("*/__init__.py")
    }
    folders |= {f"app/state/{p.parent.name}/" for p in (ROOT / "app/state").glob("*/__init__.py")}
    modules = {
        p.relative_to(ROOT).as_posix()
        for package in ("app", "gpu")
        for p in (ROOT / package).glob("*.py")
        if p.name != "__init__.py"
    }
    assert sorted((folders | modules) - named) == []


def _layer_contracts() -> list[tuple[str, list[str]]]:
    """(container, layers) of each `layers` contract in pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.findall(r'containers = \["([\w.]+)"\]\s*layers = \[(.*?)\]', text, re.DOTALL)
    return [(container, re.findall(r'"([^"]+)"', layers)) for container, layers in found]


def test_every_layer_of_the_import_contracts_is_on_the_page():
    named = set(PATH.findall(_text()))
    contracts = _layer_contracts()
    assert {c for c, _ in contracts} == {"gpu", "app", "app.state"}
    for container, layers in contracts:
        for layer in layers:
            for name in re.split(r"[|:]", layer):
                rel = f"{container.replace('.', '/')}/{name.strip()}"
                assert f"{rel}/" in named or f"{rel}.py" in named, rel


def test_the_readme_links_to_the_page():
    assert "docs/ARCHITECTURE.md" in (ROOT / "README.md").read_text(encoding="utf-8")
