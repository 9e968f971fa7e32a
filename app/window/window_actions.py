"""The window's actions and its menu bar (File, Run, View, Help): each action made once, with
its shortcut and tool tip."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence

from .actions import make_action
from .file_menu import FileMenu
from .help_menu import HelpMenu
from .measuring import CONTINUE_TIP


class WindowActions:
    """The main window's actions, made once in `_build_actions` (a part of MainWindow)."""

    def _action(
        self, text: str, shortcut: QKeySequence | str | None, slot: Callable[[], object], tip: str
    ) -> QAction:
        return make_action(self, text, shortcut, slot, tip)

    def _build_actions(self) -> None:
        self.open_action = self._action(
            "Open…",
            QKeySequence.StandardKey.Open,
            lambda: self.file_menu.open_dialog(),
            "Open a saved session, or replay results recorded with `main.py bench --out FILE`.",
        )
        self.export_action = self._action(
            "Export…", "Ctrl+E", self.export, "Export plots, data and the animation."
        )
        self.quit_action = self._action("Quit", QKeySequence.StandardKey.Quit, self.close, "Quit.")
        self.sweep_action = self._action(
            "Sweep up to N",
            "Ctrl+R",
            self.sweep,
            "Measure every power of two N up to the current one (and the current N).",
        )
        self.cancel_action = self._action(
            "Cancel", "Esc", self.cancel, "Stop the measurement in flight and the sweep."
        )
        self.continue_action = self._action(
            "Continue measuring",
            None,
            self.continue_measuring,
            CONTINUE_TIP,
        )
        self.step_left_action = self._action(
            "Smaller N",
            Qt.Key.Key_Left,
            lambda: self.controls.step_seq(-1),
            "Step N down along the slider's scale.",
        )
        self.step_right_action = self._action(
            "Larger N",
            Qt.Key.Key_Right,
            lambda: self.controls.step_seq(1),
            "Step N up along the slider's scale.",
        )
        self.remeasure_action = self._action(
            "Re-measure this N",
            "Ctrl+Shift+R",
            self.remeasure,
            "Measure the current N again for the selected algorithms (a noisy point, say); the "
            "new result replaces the old one.",
        )
        self.clear_results_action = self._action(
            "Clear results",
            None,
            self.clear_results,
            "Forget every result measured on this backend this session (the plots keep the model).",
        )
        self.reset_plots_action = self._action(
            "Reset plots",
            "Ctrl+0",
            lambda: self.plots.reset_views(),
            "Fit every plot to its data again after zooming or panning (double-click a plot: "
            "that one).",
        )
        self.legends_action = QAction("Plot legends", self)
        self.legends_action.setCheckable(True)
        self.legends_action.setChecked(True)
        self.legends_action.setToolTip("Show the legend above each plot (the key stays).")
        self.legends_action.toggled.connect(self.plots.set_legends_visible)
        self.explain_action = self.explain_dock.toggleViewAction()
        self.explain_action.setText("Explain pane")
        self.explain_action.setShortcut(QKeySequence("F1"))
        self.addAction(self.explain_action)
        self.every_series_action = QAction("Every series", self)
        self.every_series_action.setCheckable(True)
        self.every_series_action.setToolTip(
            "Every fused kernel, every recorded peer and naive's kernel lines; off: naive, the "
            "fastest fused kernel and one peer."
        )
        self.every_series_action.toggled.connect(self.show_every_series)
        self.plots.every_button.setDefaultAction(self.every_series_action)
        self.dark_action = QAction("Dark theme", self)
        self.dark_action.setCheckable(True)
        self.dark_action.setChecked(True)
        self.dark_action.setToolTip("Switch between the dark and the light theme.")
        self.dark_action.toggled.connect(lambda on: self.apply_theme("dark" if on else "light"))

        menu = self.menuBar()
        file_menu = menu.addMenu("&File")
        self.file_menu = FileMenu(self)
        self.file_menu.populate(file_menu, self.open_action, self.export_action)
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
        self.help_menu = HelpMenu(self, lambda: self.backend)
        self.help_menu.populate(help_menu)
        for m in (file_menu, run_menu, view_menu, help_menu):
            m.setToolTipsVisible(True)
