"""No dead code: vulture finds nothing in app/, gpu/ or main.py at 80 % confidence (an unused
import, variable or argument, unreachable code). Qt's virtual methods and pyqtgraph's hooks
are called by name from C++, so they are left to the lower confidences vulture gives them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VULTURE = Path(sys.executable).parent / "vulture"


def _vulture(*paths: str) -> subprocess.CompletedProcess[str]:
    assert VULTURE.exists(), "vulture is missing: install the test extra (.[test])"
    return subprocess.run(
        [str(VULTURE), *paths, "--min-confidence", "80"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_vulture_finds_no_dead_code_at_80_percent_confidence():
    out = _vulture("app", "gpu", "main.py")
    assert out.returncode == 0 and out.stdout == "", out.stdout + out.stderr


def test_vulture_would_report_an_unused_import(tmp_path):
    (tmp_path / "dead.py").write_text("import os\n\n\ndef f(x):\n    return 1\n    print(x)\n")
    out = _vulture(str(tmp_path / "dead.py"))
    assert out.returncode != 0
    assert "unused import 'os'" in out.stdout and "unreachable code" in out.stdout
