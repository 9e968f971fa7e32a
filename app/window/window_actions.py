"""The window's actions and its menu bar (File, Run, View, Help): each action made once, with
its shortcut and tool tip, and each triggering a part of the window (`WindowActions`)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow

from .actions import make_action
from .measuring import CONTINUE_TIP


class WindowActions(QObject):
    """The main window's actions and menus (a part of the window), made once. The actions
    live on the window (their shortcuts work wherever its focus is); `everySeriesWanted` and
    `themeWanted` carry what the two toggles ask for."""

    everySeriesWanted = Signal(bool)
    themeWanted = Signal(str)

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        #: The main window (app/window/main_window.py, which imports this part): its views
        #: and its other parts, through their public methods.
        self.window = window
        self._build_actions()
        self._build_menus()

    def _action(
        self, text: str, shortcut: QKeySequence | str | None, slot: Callable[[], object], tip: str
    ) -> QAction:
        return make_action(self.window, text, shortcut, slot, tip)

    def _build_actions(self) -> None:
        w = self.window
        measurements, backends = w.measurements, w.backend_switch
        self.open_action = self._action(
            "Open…",
            QKeySequence.StandardKey.Open,
            lambda: w.file_menu.open_dialog(),
            "Open a saved session, or replay results recorded with `main.py bench --out FILE`.",
        )
        self.export_action = self._action(
            "Export…", "Ctrl+E", w.export, "Export plots, data and the animation."
        )
        self.quit_action = self._action("Quit", QKeySequence.StandardKey.Quit, w.close, "Quit.")
        self.sweep_action = self._action(
            "Sweep up to N",
            "Ctrl+R",
            measurements.sweep,
            "Measure every power of two N up to the current one (and the current N).",
        )
        self.cancel_action = self._action(
            "Cancel", "Esc", measurements.cancel, "Stop the measurement in flight and the sweep."
        )
        self.continue_action = self._action(
            "Continue measuring",
            None,
            backends.continue_measuring,
            CONTINUE_TIP,
        )
        self.step_left_action = self._action(
            "Smaller N",
            Qt.Key.Key_Left,
            lambda: w.controls.step_seq(-1),
            "Step N down along the slider's scale.",
        )
        self.step_right_action = self._action(
            "Larger N",
            Qt.Key.Key_Right,
            lambda: w.controls.step_seq(1),
            "Step N up along the slider's scale.",
        )
        self.remeasure_action = self._action(
            "Re-measure this N",
            "Ctrl+Shift+R",
            measurements.remeasure,
            "Measure the current N again for the selected algorithms (a noisy point, say); the "
            "new result replaces the old one.",
        )
        self.clear_results_action = self._action(
            "Clear results",
            None,
            measurements.clear_results,
            "Forget every result measured on this backend this session (the plots keep the model).",
        )
        self.reset_plots_action = self._action(
            "Reset plots",
            "Ctrl+0",
            lambda: w.plots.reset_views(),
            "Fit every plot to its data again after zooming or panning (double-click a plot: "
            "that one).",
        )
        self.legends_action = QAction("Plot legends", w)
        self.legends_action.setCheckable(True)
        self.legends_action.setChecked(True)
        self.legends_action.setToolTip("Show the legend above each plot (the key stays).")
        self.legends_action.toggled.connect(w.plots.set_legends_visible)
        self.explain_action = w.explain_dock.toggleViewAction()
        self.explain_action.setText("Explain pane")
        self.explain_action.setShortcut(QKeySequence("F1"))
        w.addAction(self.explain_action)
        self.every_series_action = QAction("Every series", w)
        self.every_series_action.setCheckable(True)
        self.every_series_action.setToolTip(
            "Every fused kernel, every recorded peer and naive's kernel lines; off: naive, the "
            "fastest fused kernel and one peer."
        )
        self.every_series_action.toggled.connect(self.everySeriesWanted)
        w.plots.every_button.setDefaultAction(self.every_series_action)
        self.dark_action = QAction("Dark theme", w)
        self.dark_action.setCheckable(True)
        self.dark_action.setChecked(True)
        self.dark_action.setToolTip("Switch between the dark and the light theme.")
        self.dark_action.toggled.connect(
            lambda on: self.themeWanted.emit("dark" if on else "light")
        )

    def _build_menus(self) -> None:
        w = self.window
        menu = w.menuBar()
        file_menu = menu.addMenu("&File")
        w.file_menu.populate(file_menu, self.open_action, self.export_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        run_menu = menu.addMenu("&Run")
        run_menu.addAction(self.sweep_action)
        run_menu.addAction(self.cancel_action)
        run_menu.addAction(self.remeasure_action)
        run_menu.addAction(self.clear_results_action)
        run_menu.addAction(self.continue_action)
        run_menu.addSeparator()
        run_menu.addAction(self.step_left_action)
        run_menu.addAction(self.step_right_action)
        view_menu = menu.addMenu("&View")
        view_menu.addAction(self.explain_action)
        view_menu.addAction(self.reset_plots_action)
        view_menu.addAction(self.legends_action)
        view_menu.addAction(self.every_series_action)
        view_menu.addAction(self.dark_action)
        help_menu = menu.addMenu("&Help")
        w.help_menu.populate(help_menu)
        for m in (file_menu, run_menu, view_menu, help_menu):
            m.setToolTipsVisible(True)

    def show_every_series(self, every: bool) -> None:
        """Tick "Every series" as the state says, without asking for it again."""
        self._show_checked(self.every_series_action, every)

    def show_theme(self, theme: str) -> None:
        """Tick "Dark theme" as the theme shown says, without asking for it again."""
        self._show_checked(self.dark_action, theme == "dark")

    @staticmethod
    def _show_checked(action: QAction, checked: bool) -> None:
        action.blockSignals(True)
        action.setChecked(checked)
        action.blockSignals(False)
