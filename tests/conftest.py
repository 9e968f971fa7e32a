"""Shared test setup: offscreen Qt, and the `gpu` marker skipped where no CUDA device is present."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


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
