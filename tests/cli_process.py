"""`main.py` run as a user runs it: a child process with its output captured (the CLI tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`python main.py ARGS` from the repository root; `timeout` only guards against a hang."""
    return subprocess.run(
        [sys.executable, str(ROOT / "main.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
