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
import sys
import time
from collections.abc import Callable

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QIcon
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
from gpu.config import AttentionConfig

from ..controls.panel import ControlsPanel
from ..kit import settings
from ..kit.plain_text import PlainLabel, tooltip
from ..kit.settings import KEYS as SETTINGS_KEYS
from ..kit.settings_store import SettingsStore
from ..kit.state_signal import StateSignal
from ..kit.theme import THEMES, icon_path, palette, qt_palette, style_sheet
from ..measure.explain import ExplainPane
from ..measure.plots import PlotsPanel
from ..ring.panel import RingPanel
from ..state.app_state import Change, StateModel
from ..state.default_view import default_checked, tiles_fused
from ..state.ring.devices import restart_needed
from ..state.runs import BackendReady
from ..work.background import (
    LatestOnly,
    start_compute_process,
    stop_compute_process,
)
from ..work.collector import IdleCollector, freeze_long_lived
from ..work.pacing import own_turn
from ..work.runner import Runner
from .accessibility import name_widgets
from .backend_control import BackendSwitch
from .file_menu import FileMenu
from .help_menu import HelpMenu
from .lesson_strip import LessonStrip
from .measuring import SWEEP_TIP, Measurements
from .screen_fit import ScreenFit, fit_to_screen
from .status import (
    ErrorBanner,
    RunStatus,
    StatusBarReadouts,
)
from .wheel_guard import WheelGuard, guard_wheel
from .window_actions import WindowActions

#: Makes a backend of one device by name ("auto", "cuda", "cpu"): tests' fakes.
OneDeviceMaker = Callable[[str], Backend]
log = logging.getLogger(__name__)

ORGANIZATION = APPLICATION = "Tilescope"
WINDOW_TITLE = "The attention memory wall"

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
    """See the module docstring. The shell: it builds the views and owns the parts that do the
    work, each an object of its own: `measurements` (app/window/measuring.py),
    `backend_switch` (backend_control.py), `window_actions` (window_actions.py), and the File
    and Help menus.

    backend_factory: name ("auto", "cuda", "cpu") -> Backend, called on the runner's thread;
    tests inject fakes here (the ring's, the model's and recorded runs come from
    gpu/backend_factory.py all the same). settings: where geometry and controls persist (tests
    pass a QSettings on a temporary file). open_path: a saved session or recorded run to open.
    restore: apply saved settings. backend: start on this backend ("auto", "cuda", "cpu")
    whatever the settings say.
    """

    def __init__(
        self,
        backend_factory: OneDeviceMaker | None = None,
        settings: QSettings | None = None,
        open_path: str | None = None,
        restore: bool = True,
        backend: str | None = None,
    ) -> None:
        super().__init__()
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))
        start_compute_process()  # from this (the main) thread: see app.work.background
        self.setObjectName("mainWindow")
        # The platform adds the application's name: "The attention memory wall — Tilescope".
        self.setWindowTitle(WINDOW_TITLE)
        self.setWindowIcon(QIcon(str(icon_path())))
        #: Read once, written off the GUI thread (app/kit/settings_store.py).
        self.settings = SettingsStore(
            settings if settings is not None else default_settings(), SETTINGS_KEYS
        )
        #: The app state: controls write to it, every view follows it.
        self.model = StateModel()
        self.state = StateSignal(self.model, self)
        self.runner = Runner(self)
        self.theme = "dark"
        self._closing = False
        self._animation_stale = True  # the animation has not seen the latest config
        self.animation = None
        #: A first start (empty settings, nothing asked for) on a machine without a CUDA device
        #: opens the shipped GPU recording instead of measuring on the CPU.
        first_start = restore and not open_path and backend is None and not self.settings.allKeys()
        self._build_ui()
        # The window's parts, each an object of its own: the measurements (store, requests,
        # arrivals), the backend switch, the menus and their actions.
        self.measurements = Measurements(self)
        self.backend_switch = BackendSwitch(self, backend_factory, first_start=first_start)
        self.backend_switch.starting.connect(self.measurements.forget_backend)
        self.file_menu = FileMenu(self)
        self.help_menu = HelpMenu(self, lambda: self.backend)
        self.window_actions = WindowActions(self)
        self.window_actions.everySeriesWanted.connect(self.show_every_series)
        self.window_actions.themeWanted.connect(self.apply_theme)
        if restore:
            self._restore_settings()
        if backend in ("auto", "cuda", "cpu"):
            self.state.update(backend_choice=backend)
        self.apply_theme(self.theme)
        self._connect()
        first = Change.initial(self.state.value)
        self._on_state(first)
        self.plots.on_state(first)
        if open_path:  # a session or recorded run: read off the GUI thread, then replayed
            self.file_menu.openFailed.connect(self.backend_switch.start_usual)
            self.file_menu.open_file(open_path)
        else:
            self.backend_switch.start_usual_soon()
        self._deferred = QTimer(self)
        self._deferred.setSingleShot(True)
        self._deferred.timeout.connect(self._install_animation)
        self._deferred.start(30)
        self._prepare_rooms = own_turn(self._build_ring_plots, parent=self)
        #: Full garbage collections at rest, not in the middle of a change or an export.
        self.collector = IdleCollector(
            lambda: self.runner.busy or self.file_menu.exporting, parent=self
        )
        self.state.changed.connect(self.collector.active)
        self.runner.outcome.connect(self.collector.active)
        name_widgets(self)  # every control and plot has an accessible name and description
        self.wheel_guard = WheelGuard(self)
        guard_wheel(self, self.wheel_guard)  # the wheel changes only a focused control

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
        self.screen_fit = ScreenFit(self)  # again once the window manager's frame is known

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
            self.animation.set_result_source(self.measurements.result_for)
            self._default_lanes()
            self.state.changed.connect(self._follow_animation)
            self._animation_stale = True
            self._follow_animation(Change.initial(self.state.value))
            # Its real-trace page is made when first shown: named then.
            self.animation.modeChanged.connect(lambda *_: self._name_and_guard(self.animation))
        self._name_and_guard(widget)
        # The Ring tab's plots in a turn of their own (built on its first show they would be
        # one 60 ms event), then the rooms' objects out of the garbage collector's walks.
        self._prepare_rooms()

    def _build_ring_plots(self) -> None:
        if not self._closing:
            self.ring_panel.prepare()
            self._name_and_guard(self.ring_panel)
            freeze_long_lived()

    def _name_and_guard(self, widget: QWidget) -> None:
        """A room built after the window: its widgets named, its controls wheel-guarded."""
        name_widgets(widget)
        guard_wheel(widget, self.wheel_guard)

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

    def _connect(self) -> None:
        c, b, m = self.controls, self.backend_switch, self.measurements
        c.backendWanted.connect(b.start)
        c.recordedRunWanted.connect(b.ask_recorded_run)
        # The window's own share first: a new N asks the runner (and stops a stale run) before
        # any view draws it. Then the views that follow the app state (the controls connected
        # themselves); the explain pane and the lesson strip follow through `follow_point`.
        self.state.changed.connect(self._on_state)
        self.state.changed.connect(self.plots.on_state)
        self.state.changed.connect(m.draw_shown)
        self.lesson.focusWanted.connect(self.show_view)
        self.lesson.pointWanted.connect(self._lesson_point)
        self.lesson.dismissed.connect(lambda: self.settings.setValue("lesson/dismissed", True))
        c.slider.sliderReleased.connect(self.settle_texts)
        r = self.runner
        r.outcome.connect(self.ring_panel.on_outcome)
        self.ring_panel.openWanted.connect(
            lambda path: self.file_menu.open_file(path) if path else self.file_menu.open_dialog()
        )
        r.deviceInfo.connect(self.readouts.set_memory)
        self.sweep_button.clicked.connect(m.sweep)
        c.measure_here.clicked.connect(b.measure_here)
        self.run_status.cancelRequested.connect(m.cancel)
        self.tabs.currentChanged.connect(lambda *_: self._follow_animation(None))

    # ------------------------------------------------------------------ public API

    @property
    def config(self) -> AttentionConfig:
        return self.state.value.config

    @property
    def backend(self) -> BackendReady | None:
        return self.state.value.backend

    @property
    def closing(self) -> bool:
        """The window is closing: nothing new starts."""
        return self._closing

    def show_view(self, name: str) -> None:
        """Bring the view named `name` (an objectName) into sight: the Tiles tab for the
        animation, else the Measurements tab (a lesson step points at its plot)."""
        if name == "tileAnimation":
            self._install_animation()
            if self.animation is not None:
                self.tabs.setCurrentWidget(self.animation)
            return
        self.tabs.setCurrentWidget(self.plots)

    def _lesson_point(self, n: int) -> None:
        """A lesson step's N: on a recording's scale, the first recorded N from it on."""
        s = self.state.value
        if s.seq_scale is not None:
            n = next((m for m in s.scale if m >= n), s.scale[-1])
        self.controls.set_seq_len(n)

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

    def show_every_series(self, every: bool) -> None:
        """ "Every series" (View menu, the button by the key): every algorithm the backend has,
        every peer and naive's kernel lines; off, back to the default view's few."""
        s = self.state.value
        checked = tuple(ALGORITHMS) if every else default_checked(s.available)
        self.state.update(all_series=every, checked=checked, algorithms_chosen=False)

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
        self.window_actions.show_theme(self.theme)

    def fit_to_screen(self) -> None:
        """Keep the window and its frame on its screen (app/window/screen_fit.py)."""
        fit_to_screen(self)

    # ------------------------------------------------------------------ following the state

    def _on_state(self, change: Change) -> None:
        """The window's own share of a state change: measured series and runner requests (the
        measurements'), the run actions, the animation's lanes, a restart for a new P."""
        redraw = self.measurements.follow_state(change)
        if change.changed("config"):
            self._animation_stale = True
        if change.changed("backend"):
            self.backend_switch.sync_run_actions()
        if change.changed("available", "backend"):
            self._default_lanes()
        if change.changed("all_series"):  # shown, not asked for again
            self.window_actions.show_every_series(change.new.all_series)
        switch = self.backend_switch
        if change.changed("devices") and switch.generation and restart_needed(change.new):
            switch.start(change.new.backend_choice)
        if not redraw:  # else the redraw, within a frame, takes the point to them
            self.follow_point()

    def follow_point(self) -> None:
        """The explain pane and the lesson strip follow the point on screen: the state and the
        results at its N, worked out once for both (they lay their texts out when it rests)."""
        s, results = self.state.value, self.measurements.results_at_n()
        self.explain.follow(s, results)
        self.lesson.follow(s, results)

    def settle_texts(self) -> None:
        """The texts of the point shown, now: the slider was let go, or a picture of the window
        is about to be taken (the texts are made off the GUI thread after a pause)."""
        self.follow_point()
        self.explain.flush()
        self.lesson.flush()

    def _default_lanes(self) -> None:
        """The Tiles tab compares naive with the fastest fused kernel (app/state/default_view.py
        `tiles_fused`; the readable kernel is there to be read, one pick away), until the user
        picks a lane."""
        if self.animation is None or self.animation.lanes_chosen:
            return
        s = self.state.value
        cpu = s.backend_name == "cpu"
        self.animation.set_algorithms((NAIVE, tiles_fused(s.available, cpu)))

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

    # ------------------------------------------------------------------ settings, lifecycle

    def _restore_settings(self) -> None:
        """Saved settings, each type-checked (app/kit/settings.py): a damaged file costs a log
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
        s.sync()  # waits for the writer thread (SYNC_WAIT_S at most)

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._closing:
            self._closing = True
            with contextlib.suppress(Exception):
                self.save_settings()
            self.file_menu.shutdown()  # an export in flight stops, its partial file goes
            for dialog in self.findChildren(QDialog):  # error details, export progress...
                dialog.close()
            self.runner.shutdown()
            self.collector.stop()
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
