"""`main.py render` saves the window as it is for the point it shows: the explain pane, whose
text is made off the GUI thread after a pause, holds the text of that point when the picture
is taken, however long the text takes to make."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import app.export.plot_images as plot_images
import app.measure.explain as explain_module
from app.launch import render_window
from gpu.config import AttentionConfig

ROOT = Path(__file__).resolve().parent.parent
TRAINING = ROOT / "resources" / "recorded" / "h200_training.json"


def test_render_saves_the_explain_pane_of_the_point_the_plots_show(tmp_path, monkeypatch):
    real = explain_module.explain_html
    gui = threading.get_ident()

    def slow(*args, **kwargs):  # a loaded machine: the text comes long after the plots
        if threading.get_ident() != gui:
            time.sleep(1.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(explain_module, "explain_html", slow)
    seen = {}
    render = plot_images.render_image

    def grab(window, size):
        seen["shown"] = window.explain.toPlainText()
        seen["fresh"] = window.explain.plain_text()  # the text of the window's point now
        seen["config"] = window.config
        return render(window, size)

    monkeypatch.setattr(plot_images, "render_image", grab)
    config = AttentionConfig(seq_len=16384, pass_="step")
    out = tmp_path / "shot.png"
    assert render_window(config, out=str(out), open_path=str(TRAINING), timeout_s=300) == 0
    assert seen["config"] == config
    assert seen["shown"] == seen["fresh"]
    # the recorded step's measured figures, not the model's "not measured here"
    assert "measured" in seen["shown"] and "not measured here" not in seen["shown"]
