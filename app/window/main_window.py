"""The main window: controls → app state → runner → result store → plots, explain pane, animation.

Data flow is one way. The controls write to the app state (app/state/app_state.py); the views
follow it: each gets one `on_state(change)` call per change (plots, explain pane, controls, and
the window itself for runner requests, measured series and the animation). Missing measurements
go to the runner, which works on its own thread; results come back as queued signals, land in
the store, and the measured series are redrawn from the store at most once a frame, however
many results arrive (app/work/pacing.py). Model curves, animation lanes, large exports and files are
computed off the GUI thread (app/work/background.py): the GUI thread only applies finished results
and paints. The window never calls a backend itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QCoreApplication, QEvent, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDockWidget,
    QHBoxLayout,
    QMainWindow,
    QPushButton,
    QScrollArea,
    QStyle,
    QTabWidget,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from gpu.algorithms import ALGORITHMS, NAIVE
from gpu.backends.backend import Backend
from gpu.backends.factory import create_backend
from gpu.config import AttentionConfig
from gpu.results import RunResult

from ..controls.panel import ControlsPanel
from ..measure.explain import ExplainPane
from ..measure.plots import ALGOS, PlotsPanel
from ..ring.panel import RingPanel
from ..state.app_state import AppState, Change, StateModel
from ..state.current_point import AlgorithmFigures, figures_for
from ..state.default_view import default_checked, fastest_fused, shown_peers
from ..state.family import family_of
from ..state.recorded_run import REPLAY, RecordedBackend, is_reference, reference_config
from ..state.result_store import ResultStore
from ..state.ring.devices import backend_for, restart_needed
from ..state.runs import BackendFailure, BackendReady, Job, RunOutcome, backend_key
from ..state.seq_scale import powers_of_two_up_to
from ..state.timing_outliers import out_of_line
from ..work.background import (
    LatestOnly,
    read_elsewhere,
    start_compute_process,
    stop_compute_process,
)
from ..work.pacing import RESULTS_MS, coalesced
from ..work.release import free_later
from ..work.runner import Runner
from . import settings
from .accessibility import name_widgets
from .actions import make_action
from .file_menu import FileMenu
from .help_menu import HelpMenu
from .lesson_strip import LessonStrip
from .plain_text import PlainLabel, tooltip
from .state_signal import StateSignal
from .status import (
    ConfigNotes,
    ErrorBanner,
    RunStatus,
    StatusBarReadouts,
    describe_result,
)
from .theme import THEMES, icon_path, palette, qt_palette, style_sheet

BackendFactory = Callable[[str], Backend]
log = logging.getLogger(__name__)

ORGANIZATION = APPLICATION = "Tilescope"
NO_CUDA_MESSAGE = "No CUDA device: using the CPU backend (NumPy)"
SWEEP_TIP = (
    "Measure every power of two N up to the current one, and the current N, for the "
    "selected algorithms (Ctrl+R). Cached results are not measured again."
)
CONTINUE_TIP = (
    "Measure on here what a session or recording made with the cpu or cuda backend lacks: its "
    "results are kept, labelled as recorded, and only the missing points are measured."
)
RECORDED_SWEEP_TIP = (
    "A recorded run has nothing to measure: the plots already show every N it holds. "
    "To measure more, pick a live backend or use Run ▸ Continue measuring."
)


#: How long a thread may hold the GIL while another waits for it. Workers compute in Python
#: (model curves, animation lanes, JSON); at CPython's default of 5 ms the GUI thread could wait
#: that long several times per frame.
GIL_SWITCH_S = 0.001
#: How long a closing window waits, in all, for jobs running off the GUI thread to end: a
#: job still running then finishes on its own, its result dropped (a closed window's jobs
#: must not hold the close; one that waited for a thread or a fresh compute process held it
#: for 5 s).
CLOSE_WAIT_S = 0.5


#: The window's first size, where the screen has room for it (fit_to_screen clamps it).
DEFAULT_SIZE = (1500, 920)


def default_settings() -> QSettings:
    return QSettings(ORGANIZATION, APPLICATION)


class MainWindow(QMainWindow):
    """See the module docstring.

    backend_factory: name ("auto", "cuda", "cpu") -> Backend, called on the runner's thread;
    tests inject fakes here. settings: where geometry and controls persist (tests pass a
    QSettings on a temporary file). open_path: a saved session or recorded run to open.
    restore: apply saved settings. backend: start on this backend ("auto", "cuda", "cpu")
    whatever the settings say.
    """

    def __init__(
        self,
        backend_factory: BackendFactory | None = None,
        settings: QSettings | None = None,
        open_path: str | None = None,
        restore: bool = True,
        backend: str | None = None,
    ) -> None:
        super().__init__()
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))
        start_compute_process()  # from this (the main) thread: see app.work.background
        self.setObjectName("mainWindow")
        self.setWindowTitle("Tilescope — the attention memory wall")
        self.setWindowIcon(QIcon(str(icon_path())))
        self.backend_factory: BackendFactory = backend_factory or create_backend
        self.settings = settings if settings is not None else default_settings()
        #: The app state: controls write to it, every view follows it.
        self.model = StateModel()
        self.state = StateSignal(self.model, self)
        self.store = ResultStore()
        self.runner = Runner(self)
        self.theme = "dark"
        self._backend_generation = 0
        self._started_choice = "auto"  # the backend last started
        self._fallback_choice = "auto"
        self._failed_backend = ""
        self._fell_back_from = ""  # "cuda" after a CUDA error made the window switch to cpu
        #: What the run status says about the config shown (dropped when another is shown).
        self.notes = ConfigNotes()
        self._idle_text = ""  # the run status when nothing runs and nothing is noted
        self._lost_job: Job | None = None  # the run during which a backend failed
        self._closing = False
        #: (config, algorithm) measured again for being out of line (once each).
        self._remeasured: set[tuple[AttentionConfig, str]] = set()
        self._animation_stale = True  # the animation has not seen the latest config
        self.animation = None
        self._preloaded: tuple[str, RecordedBackend] | None = None  # checked by File ▸ Open
        #: (source key, results kept, file) while Continue measuring starts its backend
        self._continuing: tuple[str, int, str] | None = None
        #: Results arriving in a burst are drawn once (at most once a frame).
        self._redraw_measured = coalesced(self._refresh_measured, RESULTS_MS, parent=self)

        self._build_ui()
        self._build_actions()
        if restore:
            self._restore_settings()
        if backend in ("auto", "cuda", "cpu"):
            self.state.update(backend_choice=backend)
        self.apply_theme(self.theme)
        self._connect()
        first = Change.initial(self.state.value)
        self._on_state(first)
        self.plots.on_state(first)
        # Start the backend once the event loop runs: its imports (CuPy, NumPy extras) hold the
        # GIL on the runner thread and would otherwise compete with the first paint.
        self._startup = QTimer(self)  # a child: never fires for a window already gone
        self._startup.setSingleShot(True)
        self._startup.timeout.connect(self._start_usual_backend)
        if open_path:  # a session or recorded run: read off the GUI thread, then replayed
            self.file_menu.openFailed.connect(self._start_usual_backend)
            self.file_menu.open_file(open_path)
        else:
            self._startup.start(0)
        self._deferred = QTimer(self)
        self._deferred.setSingleShot(True)
        self._deferred.timeout.connect(self._install_animation)
        self._deferred.start(30)
        name_widgets(self)  # every control and plot has an accessible name and description

    # ------------------------------------------------------------------ construction

    def _build_ui(self) -> None:
        self.controls = ControlsPanel(self.state)
        scroll = QScrollArea()
        scroll.setObjectName("controlsScroll")
        scroll.setWidget(self.controls)
        scroll.setWidgetResizable(True)
        # As wide as the panel's widest row needs, so nothing in it is cut; narrower only if
        # the user drags the dock so, and then it scrolls sideways instead of clipping.
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        bar = scroll.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        scroll.setMinimumWidth(
            self.controls.minimumSizeHint().width() + bar + 2 * scroll.frameWidth()
        )
        self.controls_dock = QDockWidget("Controls", self)
        self.controls_dock.setObjectName("controlsDock")
        self.controls_dock.setWidget(scroll)
        self.controls_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.controls_dock)

        self.explain = ExplainPane()
        self.explain_dock = QDockWidget("Explain (F1)", self)
        self.explain_dock.setObjectName("explainDock")
        # The lesson strip (the guided first run) heads the explain pane: beside the plots and
        # the animation, it takes no height from either. Dismissed, it stays closed.
        self.lesson = LessonStrip()
        side = QWidget()
        side.setObjectName("explainColumn")
        column = QVBoxLayout(side)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(4)
        column.addWidget(self.lesson)
        column.addWidget(self.explain, 1)
        self.explain_dock.setWidget(side)
        self.explain_dock.setMinimumWidth(340)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.explain_dock)

        central = QWidget()
        v = QVBoxLayout(central)
        v.setContentsMargins(4, 4, 4, 0)
        v.setSpacing(4)
        self.header = QWidget()
        self.header.setObjectName("header")
        hv = QVBoxLayout(self.header)
        hv.setContentsMargins(0, 0, 0, 0)
        hv.setSpacing(4)
        self.banner = ErrorBanner()
        hv.addWidget(self.banner)
        header = QHBoxLayout()
        hv.addLayout(header)
        v.addWidget(self.header)
        self.run_status = RunStatus()
        header.addWidget(self.run_status, 1)
        self.sweep_button = QPushButton("Sweep")
        self.sweep_button.setObjectName("sweepButton")
        self.sweep_button.setToolTip(tooltip(SWEEP_TIP))
        header.addWidget(self.sweep_button)
        self.tabs = QTabWidget()
        self.tabs.setObjectName("mainTabs")
        self.tabs.tabBar().setAccessibleName("Views: measurements or tiles")
        self.plots = PlotsPanel()
        self.tabs.addTab(self.plots, "Measurements")
        self.tabs.setTabToolTip(0, "Peak memory, time, HBM traffic and roofline, live over N.")
        loading = PlainLabel("Loading the tile animation…")
        loading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.tabs.addTab(loading, "Tiles")
        self.tabs.setTabToolTip(1, "The tiles moving between HBM and on-chip SRAM.")
        self.ring_panel = RingPanel(self.state)
        self.tabs.addTab(self.ring_panel, "Ring")
        self.tabs.setTabToolTip(2, "Ring attention: the sequence split over P devices.")
        v.addWidget(self.tabs, 1)
        self.setCentralWidget(central)
        self.readouts = StatusBarReadouts(self.statusBar())
        self.resize(*DEFAULT_SIZE)
        self.fit_to_screen()

    def _install_animation(self) -> None:
        """Build the animation tab after the first paint: its import and construction cost
        ~150 ms that the window's first frame (all on the Measurements tab) does not need."""
        if self._closing or self.tabs.count() < 2 or self.animation is not None:
            return
        current = self.tabs.currentIndex()
        old = self.tabs.widget(1)
        tip = self.tabs.tabToolTip(1)
        widget = self._build_animation()
        self.tabs.blockSignals(True)
        self.tabs.removeTab(1)
        self.tabs.insertTab(1, widget, "Tiles")
        self.tabs.setTabToolTip(1, tip)
        self.tabs.setCurrentIndex(current)
        self.tabs.blockSignals(False)
        old.deleteLater()
        if self.animation is not None:
            self.animation.set_theme(self.theme)
            self.animation.set_result_source(self._animation_result)
            self._default_lanes()
            self.state.changed.connect(self._follow_animation)
            self._animation_stale = True
            self._follow_animation(Change.initial(self.state.value))
            # Its real-trace page is made when first shown: named then.
            self.animation.modeChanged.connect(lambda *_: name_widgets(self.animation))
        name_widgets(widget)

    def _animation_result(self, config: AttentionConfig, algorithm: str) -> RunResult | None:
        """The stored result of `config` for the animation's measured clock (None if none)."""
        s = self.state.value
        if s.backend is None:
            return None
        return self.store.get(config, algorithm, s.backend.key, s.run_budget)

    def _build_animation(self) -> QWidget:
        try:
            from ..animation import TileAnimationWidget  # type: ignore[attr-defined]

            self.animation = TileAnimationWidget()
            if not self.animation.objectName():
                self.animation.setObjectName("tileAnimation")
            return self.animation
        except Exception as exc:  # a fault inside it must not take the window down
            self.animation = None
            label = PlainLabel(
                f"The tile animation is not available in this build.\n({type(exc).__name__}: {exc})"
            )
            label.setObjectName("tileAnimationPlaceholder")
            label.setAlignment(Qt.AlignmentFlag.AlignCenter)
            label.setWordWrap(True)
            return label

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

    def _connect(self) -> None:
        c = self.controls
        c.backendWanted.connect(self._start_backend)
        c.recordedRunWanted.connect(self._ask_recorded_run)
        # The window's own share first: a new N asks the runner (and stops a stale run) before
        # any view draws it. Then the views that follow the app state (the controls connected
        # themselves); the explain pane and the lesson strip follow through `_follow_point`.
        self.state.changed.connect(self._on_state)
        self.state.changed.connect(self.plots.on_state)
        self.lesson.focusWanted.connect(self.show_view)
        self.lesson.dismissed.connect(lambda: self.settings.setValue("lesson/dismissed", True))
        c.slider.sliderReleased.connect(self._point_settled)
        r = self.runner
        r.backendReady.connect(self._on_backend_ready)
        r.backendFailed.connect(self._on_backend_failed)
        r.backendLost.connect(self._on_backend_lost)
        r.outcome.connect(self._on_outcome)
        r.outcome.connect(self.ring_panel.on_outcome)
        self.ring_panel.openWanted.connect(
            lambda path: self.file_menu.open_file(path) if path else self.file_menu.open_dialog()
        )
        r.jobStarted.connect(self._on_job_started)
        r.idle.connect(self._on_idle)
        r.sweepProgress.connect(self.run_status.set_sweep)
        r.sweepFinished.connect(self._on_sweep_finished)
        r.deviceInfo.connect(self.readouts.set_memory)
        self.sweep_button.clicked.connect(self.sweep)
        self.run_status.cancelRequested.connect(self.cancel)
        self.tabs.currentChanged.connect(lambda *_: self._follow_animation(None))

    # ------------------------------------------------------------------ public API

    @property
    def config(self) -> AttentionConfig:
        return self.state.value.config

    @property
    def backend(self) -> BackendReady | None:
        return self.state.value.backend

    def sweep(self) -> int:
        """Queue every power-of-two N up to the current one (and it) that is not cached."""
        s = self.state.value
        if s.backend is None:
            self.statusBar().showMessage("The backend is still starting; try again.", 4000)
            return 0
        if s.replay:
            self.statusBar().showMessage(RECORDED_SWEEP_TIP, 6000)
            return 0
        items = []
        for n in powers_of_two_up_to(s.config.seq_len):
            config = s.config.with_(seq_len=n)
            missing = self.store.missing(
                config, s.algorithms, s.backend.key, s.run_budget, s.profile_runs
            )
            items += [(config, algo) for algo in missing]
        total = self.runner.start_sweep(items, s.run_budget, s.profile_runs)
        if total == 0:
            self.statusBar().showMessage(
                f"Sweep: every N up to {s.config.seq_len} is already measured.", 4000
            )
        return total

    def remeasure(self) -> int:
        """Measure the current N again for the selected algorithms (the newest result replaces
        the stored one); a recorded run cannot be measured again."""
        s = self.state.value
        if s.backend is None or s.replay:
            self.statusBar().showMessage(
                "A recorded run cannot be measured again: switch to a live backend.", 5000
            )
            return 0
        self.runner.request(s.config, list(s.algorithms), s.run_budget, s.profile_runs)
        return len(s.algorithms)

    def clear_results(self) -> None:
        """Forget the live backend's results (a recorded run's are its file's: kept)."""
        s = self.state.value
        if s.backend is None or s.replay:
            self.statusBar().showMessage("A recorded run's results stay: they are the file.", 5000)
            return
        self.runner.cancel_sweep()
        self.runner.cancel()
        self.store.clear(s.backend.key)
        self._refresh_measured()
        self.statusBar().showMessage("Results cleared; the current N is measured again.", 4000)
        self._request()

    def cancel(self) -> None:
        """Stop the sweep and the measurement in flight (Esc)."""
        self.runner.cancel_sweep()
        self.runner.cancel()
        self.run_status.sweep_finished()
        self.run_status.set_idle(self._status_text())

    def _continue_target(self) -> tuple[RecordedBackend | None, str]:
        """The replayed recording and the live backend it was measured with, when there is
        one to continue on; (None, "") otherwise."""
        s = self.state.value
        recorded = s.backend.backend if s.backend is not None and s.replay else None
        if isinstance(recorded, RecordedBackend) and recorded.measured_on:
            return recorded, recorded.measured_on
        return None, ""

    def continue_measuring(self) -> bool:
        """Leave a replayed session or recording for the backend it was measured with: its
        results stay in the store, marked recorded, as that device's, so only what they lack
        is measured (on another machine the device differs, and everything is measured)."""
        recorded, target = self._continue_target()
        if recorded is None:
            self.statusBar().showMessage(CONTINUE_TIP, 6000)
            return False
        source = backend_key(recorded.recording.device)
        session = recorded.session
        if session is not None:
            kept = [
                (replace(e.result, recorded=True), e.budget_bytes)
                for e in session.entries
                if e.backend_key == session.backend_key
            ]
        else:
            kept = [(r, None) for r in recorded.results() if not is_reference(r.algorithm)]
        for result, budget in kept:
            self.store.add(result, source, budget)
        self._continuing = (source, len(kept), os.path.basename(recorded.path) or "the file")
        self._start_backend(target)
        return True

    def show_view(self, name: str) -> None:
        """Bring the view named `name` (an objectName) into sight: the Tiles tab for the
        animation, else the Measurements tab (a lesson step points at its plot)."""
        if name == "tileAnimation":
            self._install_animation()
            if self.animation is not None:
                self.tabs.setCurrentWidget(self.animation)
            return
        self.tabs.setCurrentWidget(self.plots)

    def open_lesson(self) -> None:
        """Help ▸ The lesson, step by step: the strip again, from its first step."""
        self.settings.setValue("lesson/dismissed", False)
        self.explain_dock.show()
        self.lesson.open(0)

    def export(self) -> None:
        """The export dialog (Ctrl+E): plots, data, a screenshot, the animation."""
        self.file_menu.export_dialog()

    def show_trace(self, path: str) -> bool:
        """Show the trace file at `path` in the Tiles tab's real-trace mode (File ▸ Open
        trace…): the trace panel opens it and says there if it cannot. False when the tile
        animation is not available in this build."""
        self._install_animation()
        animation = self.animation
        if animation is None:
            self.banner.show_message("Open trace: the tile animation is not available.")
            return False
        self.tabs.setCurrentWidget(animation)
        animation.set_mode(animation.TRACE_MODE)
        animation.trace_panel.load_file(path)
        return True

    def open_recorded(self, path: str, preloaded: RecordedBackend | None = None) -> None:
        """Replay a results file (main.py bench --out) or session; loading happens on the runner
        thread unless `preloaded` (already read and checked) is given."""
        self._preloaded = (path, preloaded) if preloaded is not None else None
        self._start_backend("recorded", recorded_path=path)

    def apply_theme(self, theme: str) -> None:
        self.theme = theme if theme in THEMES else "dark"
        pal = palette(self.theme)
        qpal = qt_palette(self.theme)
        app = QApplication.instance()
        if app is not None:  # style-sheeted panels resolve colours from the app palette
            app.setPalette(qpal)
        self.setPalette(qpal)
        QToolTip.setPalette(qpal)
        # A palette set on the window does not reach every child (the tab widget below a
        # style-sheeted tab bar kept the old one, and the Tiles tab's toolbars with it): each
        # widget gets it, except those that keep a palette of their own (the explain pane, the
        # kernel source), which their views restyle below.
        for widget in self.findChildren(QWidget):
            if widget.property("themed") or not widget.testAttribute(
                Qt.WidgetAttribute.WA_SetPalette
            ):
                widget.setPalette(qpal)
                widget.setProperty("themed", True)
        qss = style_sheet(self.theme)
        # Panels only: a style sheet on an ancestor of the plots would send every plot repaint
        # through QStyleSheetStyle (measured: ~40% slower slider moves).
        for widget in (
            self.controls_dock,
            self.explain_dock,
            self.header,
            self.statusBar(),
            self.menuBar(),
            self.tabs.tabBar(),
        ):
            widget.setStyleSheet(qss)
        self.plots.apply_palette(pal)
        self.explain.set_palette(pal)
        if self.animation is not None:
            self.animation.set_theme(self.theme)
        self.ring_panel.set_palette(pal)
        self.dark_action.blockSignals(True)
        self.dark_action.setChecked(self.theme == "dark")
        self.dark_action.blockSignals(False)

    def fit_to_screen(self) -> None:
        """Keep the window on its screen's available area: a default or restored size larger
        than a 1280×800 laptop's screen is shrunk to it (and moved inside it), never left to
        hang off the edges."""
        screen = self.screen() or QApplication.primaryScreen()
        if screen is None:
            return
        area = screen.availableGeometry()
        frame = self.frameGeometry()
        extra_w = max(0, frame.width() - self.width())
        extra_h = max(0, frame.height() - self.height())
        w = min(self.width(), area.width() - extra_w)
        h = min(self.height(), area.height() - extra_h)
        if (w, h) != (self.width(), self.height()):
            self.resize(w, h)
        x = min(max(frame.x(), area.x()), area.right() - w - extra_w + 1)
        y = min(max(frame.y(), area.y()), area.bottom() - h - extra_h + 1)
        if (x, y) != (frame.x(), frame.y()):
            self.move(x, y)

    # ------------------------------------------------------------------ backend

    def _start_backend(self, choice: str, **changes: object) -> None:
        """Start `choice` on the runner thread; `changes` go into the same state update."""
        if self._closing:
            return
        self._startup.stop()  # an explicit start (e.g. open_recorded) replaces the initial one
        self._fell_back_from = ""
        if self._started_choice != "recorded":
            self._fallback_choice = self._started_choice
        self._started_choice = choice
        self.state.update(backend_choice=choice, backend=None, bytes_refused="", **changes)
        if choice == "recorded":
            path = self.state.value.recorded_path
            preloaded, self._preloaded = self._preloaded, None

            def factory() -> Backend:
                if preloaded is not None and preloaded[0] == path:
                    return preloaded[1]
                return RecordedBackend.from_file(path, read_elsewhere)

            what = f"Opening {path.rsplit('/', 1)[-1]}…"
        else:
            make, devices = self.backend_factory, self.state.value.devices

            def factory() -> Backend:
                return backend_for(choice, devices, make)  # the ring's backend when P > 1

            what = f"Starting the {choice} backend…"
        self.run_status.set_text(what)
        self.readouts.set_backend(f"backend: {choice} (starting)")
        self._backend_generation = self.runner.set_backend(choice, factory)

    def _start_usual_backend(self, *_: object) -> None:
        """The backend the settings name, unless another was started meanwhile."""
        if self._backend_generation == 0:
            self._start_backend(self.state.value.backend_choice)

    def _on_backend_ready(self, ready: BackendReady) -> None:
        """One state update for everything a new backend changes."""
        if ready.generation != self._backend_generation or self._closing:
            return
        if self._failed_backend == ready.requested:  # it works now: the old failure is moot
            self.banner.dismiss()
            self._failed_backend = ""
        info = ready.info
        name = getattr(ready.backend, "name", info.backend)
        if ready.requested == "auto" and name == "cpu":
            text = NO_CUDA_MESSAGE
        elif name == REPLAY:
            file = info.details.get("file", "")
            text = f"backend: recorded run ({file}) · {ready.backend.label()}"
        elif self._fell_back_from:
            text = f"backend: {name} (after a {self._fell_back_from} error)"
        else:
            text = f"backend: {name}"
        self.readouts.set_backend(text)
        self.readouts.set_device(info)
        s = self.state.value
        wanted, config, scale = s.config, s.config, None
        if name == REPLAY:
            recorded: RecordedBackend = ready.backend  # type: ignore[assignment]
            # A recording is one source: opening one (again, or another) replaces the last
            # one's results, and its own are then taken over whole, in one step.
            for key in self.store.backend_keys():
                if key.startswith(f"{REPLAY}:"):
                    free_later(self.store.detach(key))  # a million objects: not freed here
            if s.replay:
                free_later(s.backend)  # the recording replaced, once the runner lets it go
            self.store.take_over(recorded.store)  # cached before the views ask for them
            scale = recorded.seq_lens() or None
            first = recorded.first_config()
            if first is not None and not recorded.has_family(config):
                config = first.with_(seq_len=config.seq_len)
        config = config.with_(seq_len=AppState(seq_scale=scale).snap(config.seq_len))
        if name == REPLAY:
            self._idle_text = (
                f"Recorded run: {ready.backend.label()} — replayed from the file, not measured now"
            )
            if config != wanted:  # say what is shown instead of what was asked for
                self.notes.add(
                    config,
                    f"Showing {config.label()}: the recorded run ({ready.backend.label()}) "
                    f"holds no results for {wanted.label()}",
                )
        else:
            self._idle_text = f"Ready: {info.name} (started in {ready.seconds:.1f} s)"
            continuing, self._continuing = self._continuing, None
            if continuing is not None:
                source, kept, file = continuing
                self.notes.add(
                    config,
                    f"Continuing {file}: {kept} results kept from it, the missing points are "
                    f"measured on {info.name}"
                    if source == ready.key
                    else f"{file} was measured on another device ({source.partition(':')[2]}): "
                    f"its results stay with it, and every point is measured on {info.name}",
                )
        off = self.runner.unavailable(ready.key)
        available = tuple(a for a in ready.algorithms if a not in off)
        self.state.update(
            backend=ready,
            config=config,
            seq_scale=scale,
            available=available,
            disabled=tuple(off.items()),
            **self._view_choice(available),
        )

    def _on_backend_failed(self, failure: BackendFailure) -> None:
        if failure.generation != self._backend_generation or self._closing:
            return
        fallback = "cpu" if failure.requested in ("auto", "cuda") else self._fallback_choice
        if fallback == failure.requested:
            fallback = "cpu" if failure.requested != "cpu" else ""
        self._failed_backend = failure.requested
        msg = f"Could not start the {failure.requested} backend: {failure.message}"
        if fallback:
            msg += f" — using {fallback} instead."
        self.banner.show_message(msg)
        self.controls.show_error("backend", failure.message)
        self.readouts.set_backend(f"backend: {failure.requested} failed")
        self.run_status.set_text("No backend running.")
        if fallback:
            self._start_backend(fallback)
        else:
            self.controls.show_backend_choice(self.state.value.backend_choice)

    def _on_backend_lost(self, failure: BackendFailure) -> None:
        """A backend that worked failed mid-run (a CUDA error): carry on with the CPU backend."""
        if failure.generation != self._backend_generation or self._closing:
            return
        ready = self.state.value.backend
        lost = ready.info.backend if ready is not None else failure.requested
        job, self._lost_job = self._lost_job, None
        during = f"{job.algorithm} at N = {job.config.seq_len}" if job is not None else "a run"
        self.banner.show_message(
            f"{lost.upper() if lost == 'cuda' else lost} error during {during}: "
            f"{failure.message} — switched to the CPU backend (NumPy); measurements from now on "
            "come from the CPU."
        )
        self._failed_backend = failure.requested  # keeps the banner up when cpu is ready
        self._start_backend("cpu")
        self._fell_back_from = lost
        self.readouts.set_backend(f"backend: cpu (starting, after a {lost} error)")

    def _sync_run_actions(self) -> None:
        """Sweep measures nothing on a recording; Continue measuring offers its backend."""
        s = self.state.value
        replay = s.replay
        self.sweep_action.setEnabled(not replay)
        self.sweep_button.setEnabled(not replay)
        self.sweep_button.setToolTip(tooltip(RECORDED_SWEEP_TIP if replay else SWEEP_TIP))
        self.sweep_action.setToolTip(tooltip(RECORDED_SWEEP_TIP if replay else SWEEP_TIP))
        target = self._continue_target()[1]
        self.continue_action.setEnabled(bool(target))
        self.continue_action.setText(
            f"Continue measuring on {target}" if target else "Continue measuring"
        )

    def _view_choice(self, available: tuple[str, ...]) -> dict[str, object]:
        """The algorithms ticked for `available` until the user ticks others: every one with
        "Every series", else naive and the fastest fused kernel (app/state/default_view.py)."""
        s = self.state.value
        if s.algorithms_chosen:
            return {}
        return {"checked": tuple(ALGORITHMS) if s.all_series else default_checked(available)}

    def show_every_series(self, every: bool) -> None:
        """ "Every series" (View menu, the button by the key): every algorithm the backend has,
        every peer and naive's kernel lines; off, back to the default view's few."""
        s = self.state.value
        checked = tuple(ALGORITHMS) if every else default_checked(s.available)
        self.state.update(all_series=every, checked=checked, algorithms_chosen=False)

    def _apply_available(self) -> None:
        """The backend's algorithms minus those switched off this session (won't compile)."""
        ready = self.state.value.backend
        if ready is None:
            return
        off = self.runner.unavailable(ready.key)
        self.state.update(
            available=tuple(a for a in ready.algorithms if a not in off),
            disabled=tuple(off.items()),
        )

    # ------------------------------------------------------------------ following the state

    def _on_state(self, change: Change) -> None:
        """The window's own share of a state change: measured series and runner requests."""
        redraw = change.changed("family", "algorithms", "backend", "run_budget", "all_series")
        if redraw:
            self._redraw_measured()  # with any results arriving meanwhile, in its own event
        if change.changed("config", "algorithms", "backend", "run_budget", "profile_runs"):
            self._show_run_status(measuring=self._request())
        if change.changed("config"):
            self._animation_stale = True
        if change.changed("backend"):
            self._sync_run_actions()
        if change.changed("available"):
            self._default_lanes()
        if change.changed("all_series"):  # shown, not asked for again
            self.every_series_action.blockSignals(True)
            self.every_series_action.setChecked(change.new.all_series)
            self.every_series_action.blockSignals(False)
        if change.changed("devices") and self._backend_generation and restart_needed(change.new):
            self._start_backend(change.new.backend_choice)
        if not redraw:  # else the redraw, within a frame, takes the point to them
            self._follow_point()

    def _results_at_n(self) -> dict[str, RunResult]:
        """The shown algorithms' results at the N shown: a look-up per algorithm, whatever the
        number of results held."""
        s = self.state.value
        if s.backend is None:
            return {}
        key, budget = s.backend.key, s.run_budget
        return {
            a: r
            for a in ALGOS
            if a in s.algorithms and (r := self.store.get(s.config, a, key, budget)) is not None
        }

    def _follow_point(self) -> None:
        """The explain pane and the lesson strip follow the point on screen: the state and the
        results at its N, worked out once for both (they lay their texts out when it rests)."""
        s, results = self.state.value, self._results_at_n()
        self.explain.follow(s, results)
        self.lesson.follow(s, results)

    def _point_settled(self) -> None:
        """The slider was let go: the texts of the point it rests on, now."""
        self.explain.flush()
        self.lesson.flush()

    def _default_lanes(self) -> None:
        """The Tiles tab compares naive with the fastest fused kernel the backend has (the
        readable kernel is there to be read, one pick away), until the user picks a lane."""
        if self.animation is None or self.animation.lanes_chosen:
            return
        self.animation.set_algorithms((NAIVE, fastest_fused(self.state.value.available)))

    def _follow_animation(self, change: Change | None) -> None:
        """The animation follows the config while its tab is shown, and the roofline GPU
        always (a hidden animation costs the slider nothing)."""
        if self.animation is None:
            return
        s = self.state.value
        try:
            if change is None or change.changed("target_gpu"):
                self.animation.set_gpu(s.target_gpu)
            if change is None or change.changed("algorithms"):
                self.animation.set_shown_algorithms(s.algorithms)
            if change is not None and change.changed("config"):
                self._animation_stale = True
            if self._animation_stale and self.tabs.currentWidget() is self.animation:
                self._animation_stale = False
                self.animation.set_config(s.config)
        except Exception as exc:
            self.banner.show_message(f"The tile animation failed: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ measurements

    def _request(self) -> bool:
        """Ask the runner for whatever the current config lacks (True), else stop stale work."""
        s = self.state.value
        if s.backend is None or self._closing:
            return False
        missing = self.store.missing(
            s.config, s.algorithms, s.backend.key, s.run_budget, s.profile_runs
        )
        if missing:
            self.runner.request(s.config, missing, s.run_budget, s.profile_runs)
            return True
        self.runner.cancel()
        return False

    def _show_run_status(self, measuring: bool) -> None:
        """The run status and banner, derived from the config shown now: notes and errors about
        another config go, and Cancel is offered only while something runs."""
        s = self.state.value
        if s.backend is None:
            return  # "Starting…" / "Opening…" stays until the backend is ready
        self.notes.follow(s.config)
        self.banner.follow(s.config)
        if measuring:
            self.run_status.set_running(f"N = {s.config.seq_len}")
        else:
            self.run_status.set_idle(self._status_text())

    def _status_text(self) -> str:
        """Notes about the config shown, else what the backend is ready for."""
        notes = self.notes.about(self.state.value.config)
        return " · ".join(notes) if notes else self._idle_text

    def _last_figures(self, result: RunResult) -> AlgorithmFigures | None:
        """The current point's figures of a result that arrived (the status bar's last run):
        the ones the explain pane and the plots show for its config. Worked out now only for
        the config on screen (the plots and the pane work it out for it anyway); a sweep's
        other points are read as far as their model is known."""
        s = self.state.value
        if s.backend is None or result.oom or result.algorithm not in s.algorithms:
            return None
        key, budget = s.backend.key, s.run_budget
        results = {
            a: r
            for a in s.algorithms
            if (r := self.store.get(result.config, a, key, budget)) is not None
        }
        results[result.algorithm] = result
        here = family_of(result.config, result.algorithm) == family_of(s.config, result.algorithm)
        return figures_for(
            result.config, result.algorithm, s.algorithms, s.roof_device, results,
            compute=here and result.config.seq_len == s.config.seq_len,
        )  # fmt: skip

    def _refresh_measured(self) -> None:
        if self.animation is not None:
            self.animation.results_changed()
        s = self.state.value
        self.plots.set_reference(self._reference_series(s))
        self._follow_point()
        if s.backend is None:
            self.plots.set_measured({})
            return
        key, budget = s.backend.key, s.run_budget
        series = {
            a: self.store.series(s.config, a, key, budget) for a in ALGOS if a in s.algorithms
        }
        self.plots.set_measured(series)
        # Legends, ranges and the layout they change now, not in a later turn: the window then
        # repaints once for the results, not again for their legends and plot sizes.
        self.plots.flush_visibility()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)

    def _reference_series(self, s: AppState) -> dict[str, list]:
        """Peers recorded beside ours (PyTorch SDPA): reference series, never our algorithms."""
        ready = s.backend
        if ready is None or not s.replay:
            return {}
        config = reference_config(s.config)
        peers = shown_peers([a for a in ready.algorithms if is_reference(a)], s.all_series)
        return {a: self.store.series(config, a, ready.key, None) for a in peers}

    def _on_job_started(self, job: Job) -> None:
        if job.backend_generation != self._backend_generation:
            return
        where = "sweep: " if job.sweep else ""
        self.run_status.set_running(
            f"{where}{ALGORITHMS[job.algorithm].label} at N = {job.config.seq_len}"
            if job.algorithm in ALGORITHMS
            else f"{where}{job.algorithm} at N = {job.config.seq_len}"
        )

    def _on_outcome(self, outcome: RunOutcome) -> None:
        job = outcome.job
        s = self.state.value
        if job.backend_generation != self._backend_generation or s.backend is None:
            return
        if outcome.cancelled:  # stopped for a newer request or Esc: nothing to show
            return
        if outcome.result is not None:
            result = outcome.result
            self.store.add(result, outcome.backend_key, job.budget_bytes, job.profile)
            if job.profile and not result.oom and not result.traffic:
                self._bytes_not_measured(result)
            if family_of(job.config, job.algorithm) == family_of(s.config, job.algorithm):
                self._redraw_measured()
            self.readouts.set_last(result, self._last_figures(result))
            if not s.replay:
                self._idle_text = f"Idle · {len(self.store)} results cached"
            if result.oom:
                self._note(job, f"{describe_result(result)}: {result.message}")
        elif outcome.backend_lost:
            self._lost_job = job  # backendLost follows: it shows the banner, switches backends
        elif outcome.unavailable:
            if not outcome.skipped:  # the first failure; later jobs are skipped quietly
                label = ALGORITHMS[job.algorithm].label if job.algorithm in ALGORITHMS else ""
                self.banner.show_message(
                    f"{label or job.algorithm}: {outcome.error} — unavailable for this session; "
                    "the other algorithms keep working.",
                    details=outcome.details,
                )
                self._apply_available()
        elif outcome.unsupported:
            label = ALGORITHMS[job.algorithm].label if job.algorithm in ALGORITHMS else ""
            text = f"{label or job.algorithm} cannot run this here: {outcome.error}"
            self.controls.show_error(outcome.error_field, text)
            self.statusBar().showMessage(text, 8000)
        elif outcome.error_field:
            self.controls.show_error(outcome.error_field, outcome.error)
        elif outcome.skipped:
            self._note(job, outcome.error)
            self.statusBar().showMessage(outcome.error, 6000)
        elif outcome.error:
            self.banner.show_message(
                f"{job.algorithm} at N = {job.config.seq_len} failed: {outcome.error}",
                about=job.config,
            )

    def _bytes_not_measured(self, result) -> None:  # type: ignore[no-untyped-def]
        """A sampled run came back without counters (no CUPTI, no permission, ...): say why
        once, and measure without sampling from now on (the figures stay the model's)."""
        if self.state.value.bytes_refused:
            return
        why = next(
            (m for m in result.message.split("; ") if "not measured" in m),
            "the counters gave nothing",
        )
        self.statusBar().showMessage(
            f"Measure bytes: {why} — the traffic stays the model's.", 15000
        )
        self.state.update(bytes_refused=why)

    def _note(self, job: Job, text: str) -> None:
        """Note `text` about the job's config. Notes about one config add up (naive's
        out-of-memory message is not wiped by tiled's "too slow" a moment later); they are
        shown while that config is, and a note about a config no longer shown is dropped."""
        config = self.state.value.config
        if job.config != config:
            return  # the window has moved on: the status bar said it, that is enough
        self.notes.add(config, text)
        self.run_status.set_text(self._status_text())

    def _on_idle(self) -> None:
        if self.state.value.backend is None:
            return
        self.run_status.set_idle(self._status_text())

    def _on_sweep_finished(self, cancelled: bool) -> None:
        self.run_status.sweep_finished()
        self.statusBar().showMessage("Sweep cancelled." if cancelled else "Sweep done.", 4000)
        if not cancelled:
            self.remeasure_out_of_line()

    def remeasure_out_of_line(self) -> int:
        """Measure again, once each, the points slower than a larger N of the same algorithm
        (app/state/timing_outliers.py): a live backend's sweep ends without a zigzag left by a
        noisy sample. Returns how many were queued."""
        s = self.state.value
        if s.backend is None or s.replay:
            return 0
        key, budget = s.backend.key, s.run_budget
        items = []
        for a in s.algorithms:
            for r in out_of_line(self.store.series(s.config, a, key, budget)):
                if (r.config, a) not in self._remeasured:
                    self._remeasured.add((r.config, a))
                    items.append((r.config, a))
        if items:
            self.runner.start_sweep(items, budget, s.profile_runs)
            self.statusBar().showMessage(
                f"Measuring {len(items)} point(s) again: slower than a larger N.", 6000
            )
        return len(items)

    def _ask_recorded_run(self) -> None:
        """The "recorded run" choice with no file: the shipped recording, else ask for one."""
        if not self.file_menu.recorded_run_wanted():  # back to what ran before the combo asked
            self.controls.show_backend_choice(self.state.value.backend_choice)

    # ------------------------------------------------------------------ settings, lifecycle

    def _restore_settings(self) -> None:
        """Saved settings, each type-checked (app/window/settings.py): a damaged file costs a log
        line per bad value, never the start."""
        s = self.settings
        self.controls.restore(s)
        self.theme = settings.read_in(s, "view/theme", THEMES, self.theme)
        geometry = settings.read(s, "window/geometry")
        if geometry is not None and not self.restoreGeometry(geometry):
            settings.log.warning("ignored the setting window/geometry: not a window geometry")
        self.fit_to_screen()  # saved on a larger screen than this one
        state = settings.read(s, "window/state")
        if state is not None and not self.restoreState(state):
            settings.log.warning("ignored the setting window/state: not a window layout")
        explain = settings.read(s, "view/explain")
        if explain is not None:
            self.explain_dock.setVisible(explain)
        if settings.read(s, "lesson/dismissed"):
            self.lesson.setVisible(False)
        every = settings.read(s, "view/every_series")
        if every is not None:
            self.state.update(all_series=every)

    def save_settings(self) -> None:
        s = self.settings
        self.controls.save(s)
        s.setValue("view/theme", self.theme)
        s.setValue("view/explain", not self.explain_dock.isHidden())
        s.setValue("view/every_series", self.state.value.all_series)
        s.setValue("lesson/dismissed", self.lesson.isHidden())
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.sync()

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._closing:
            self._closing = True
            with contextlib.suppress(Exception):
                self.save_settings()
            self.file_menu.shutdown()  # an export in flight stops, its partial file goes
            for dialog in self.findChildren(QDialog):  # error details, export progress...
                dialog.close()
            self.runner.shutdown()
            self.state.detach()
            # A large open in flight would hold the close for seconds: its read stops (the
            # compute process) and its result is moot (the reader is left to finish alone).
            stop_compute_process()
            self.file_menu.reader.abandon()
            # Jobs not yet started never start; the rest get one short wait in all, and any
            # still running then is left to finish on its own (its report goes nowhere).
            workers = self.findChildren(LatestOnly)
            for worker in workers:
                worker.cancel()
            for worker in self.wait_for_background(CLOSE_WAIT_S):
                log.info("closing: %s is still running a job, left to finish alone", worker)
                worker.abandon()
        super().closeEvent(event)

    def wait_for_background(self, timeout_s: float = 5.0) -> list[LatestOnly]:
        """Let work running off the GUI thread finish (a closing window, a test's end), for
        `timeout_s` in all; the workers whose job is still running then."""
        deadline = time.monotonic() + timeout_s
        return [
            worker
            for worker in self.findChildren(LatestOnly)
            if not worker.wait(max(0.0, deadline - time.monotonic()))
        ]
