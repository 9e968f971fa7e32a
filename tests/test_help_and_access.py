"""The Help menu (shortcuts, the lesson, About), File ▸ Open trace…, and an accessible name on
every control a user operates (screen readers; UI tests find them by it)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QDialog, QWidget

from app.state.session import app_version
from app.window.accessibility import is_interactive
from gpu.results import DeviceInfo

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "resources" / "recorded" / "h200_sweep.json"
TRACES = ROOT / "resources" / "traces" / "h200_trace.json"


def menu(window, title: str):
    return next(a.menu() for a in window.menuBar().actions() if a.text() == title)


def texts(qmenu) -> list[str]:
    return [a.text() for a in qmenu.actions() if not a.isSeparator()]


def test_the_help_menu_has_shortcuts_the_lesson_and_about(make_window):
    window = make_window()
    assert texts(menu(window, "&Help")) == [
        "Keyboard shortcuts",
        "The lesson, step by step",
        "The lesson in short",
        "About Tilescope",
    ]
    shortcuts = window.help_menu.show_shortcuts()
    text = shortcuts.text.toPlainText()
    for key, what in (("Ctrl+R", "Sweep up to N"), ("Esc", "Cancel"), ("F1", "Explain pane")):
        assert key in text and what in text
    assert "Space" in text and "Play or pause" in text  # the Tiles tab's keys
    assert shortcuts.isVisible() and not shortcuts.isModal()
    lesson = window.help_menu.show_lesson().text.toPlainText()
    assert "S and P hold B·h·N² elements" in lesson and "online softmax" in lesson


def test_about_names_the_version_backend_and_device(make_window):
    window = make_window()
    about = window.help_menu.show_about().text.toPlainText()
    assert app_version() in about and window.backend.info.name in about
    assert "CuPy" not in about  # the fake backend has no CuPy


def test_about_gives_cupy_and_cuda_versions_when_the_backend_has_them(make_window):
    from gpu.backends.model_backend import CostModelBackend

    class WithCuda(CostModelBackend):
        def device_info(self) -> DeviceInfo:
            details = {"cupy_version": "14.2.0", "cuda_runtime_version": 13020,
                       "driver_version": 13000}  # fmt: skip
            return DeviceInfo("cuda", "NVIDIA H200", 141 * 10**9, 140 * 10**9, details)

    window = make_window(WithCuda(name="cuda"))
    about = window.help_menu.show_about().text.toPlainText()
    assert "CuPy" in about and "14.2.0" in about
    assert "CUDA runtime" in about and "13.2" in about and "13.0" in about
    recorded = make_window(open_path=str(SHIPPED))
    about = recorded.help_menu.show_about().text.toPlainText()
    assert "CuPy (when recorded)" in about and "h200_sweep.json" in about


def test_open_trace_is_in_the_file_menu_and_opens_the_tiles_trace_mode(qtbot, make_window):
    window = make_window()
    assert "Open trace…" in texts(menu(window, "&File"))
    asked = []
    window.file_menu.ask_open_path = lambda title, filters, folder: (
        asked.append(title) or str(TRACES)
    )
    window.file_menu.trace_action.trigger()
    assert asked == ["Open a trace"]
    animation = window.animation
    assert window.tabs.currentWidget() is animation
    assert animation.mode == animation.TRACE_MODE
    # read off the GUI thread; the bound only catches a hang
    qtbot.waitUntil(lambda: bool(animation.trace_panel.traces), timeout=60_000)
    assert "Cannot open" not in animation.trace_panel.info.text()


def _unnamed(root: QWidget) -> list[str]:
    return [
        f"{type(w).__name__} {w.objectName()!r}"
        for w in [root, *root.findChildren(QWidget)]
        if is_interactive(w) and not w.accessibleName()
    ]


def test_every_interactive_control_has_an_accessible_name(qtbot, make_window):
    window = make_window()
    qtbot.waitUntil(lambda: window.animation is not None, timeout=5000)
    window.tabs.setCurrentWidget(window.animation)
    window.animation.set_mode(window.animation.TRACE_MODE)  # its page is made when first shown
    window.help_menu.show_about()
    dialog = window.file_menu.export_dialog("gif")
    assert _unnamed(window) == []
    assert _unnamed(dialog) == []
    for dialog in window.findChildren(QDialog):
        assert _unnamed(dialog) == [], dialog.objectName()
    checked = [w for w in window.findChildren(QWidget) if is_interactive(w)]
    assert len(checked) > 40  # the controls, the plots, the Tiles tab, the trace panel


def test_controls_and_plots_have_names_and_descriptions_that_say_what_they_are(make_window):
    window = make_window()
    named = {
        "seqLenSlider": "Sequence length N",
        "headsSpin": "Heads h",
        "backendCombo": "Backend",
        "memoryPlot": "Peak memory plot",
        "rooflinePlot": "Roofline plot",
        "sweepButton": "Sweep up to N",
    }
    for name, expected in named.items():
        widget = window.findChild(QWidget, name)
        assert widget.accessibleName() == expected, name
    slider = window.findChild(QWidget, "seqLenSlider")
    assert "log scale" in slider.accessibleDescription()
    assert window.findChild(QWidget, "algo_naive").accessibleName() == "naive"
