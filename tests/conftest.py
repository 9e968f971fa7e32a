"""Shared test setup: offscreen Qt, and the `gpu` marker skipped where no CUDA device is present."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Applies the PySide6 6.12 / CPython 3.11 reference-count work-around before any Qt call (app's
# __init__ itself imports no Qt, so this is safe on a GPU host without Qt).
import app  # noqa: F401


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any("gpu" in item.keywords for item in items):
        return
    from gpu.backend import cuda_available

    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (CuPy sees none here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
