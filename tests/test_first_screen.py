"""The first screen a newcomer sees: whole at every window size from 1280×800 up."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSize

from tests.clipping import clipped

SIZES = [(1280, 800), (1920, 1080)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_control_title_or_status_text_is_clipped_from_1280x800_up(
    make_window, qtbot, wait_started, size
):
    window = make_window()
    window.resize(*size)
    qtbot.waitUntil(lambda: window.size() == QSize(*size), timeout=2000)
    wait_started(window)
    window.plots.flush_model()
    qtbot.wait(50)
    problems = clipped(window)
    assert problems == [], "\n".join(problems)
