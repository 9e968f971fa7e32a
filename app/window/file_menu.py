"""The File menu: open a session or recorded run, recent files, save the session, and exports.

Everything that asks the user something goes through three replaceable attributes, so tests (and
scripts) can drive the menu without dialogs: `ask_save_path(title, filters, suggested) -> str`,
`ask_open_path(title, filters, folder) -> str` and `confirm_overwrite(path) -> bool` (a
QMessageBox by default). Errors never raise out of here: they go to the window's banner, and the
writes are atomic, so a failed export or save leaves no partial file and the window unchanged.

Files are read, written and encoded off the GUI thread (app/work/background.py): opening a file,
saving a session and exporting a PNG of the plots return at once, and report with a signal
(`fileOpened`/`openFailed`, `sessionSaved`/`exportFailed`, `exported`/`exportFailed`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QMenu,
    QProgressDialog,
    QPushButton,
    QSpinBox,
    QWidget,
)

from gpu.algorithms import ALGORITHMS
from gpu.files.recording import RecordingError

from ..export import animation_export, animation_writers, export_files, plot_images, plot_tables
from ..kit import settings
from ..kit.plain_text import PlainLabel, ask, menu_text, tooltip
from ..kit.settings_store import SettingsStore
from ..kit.theme import THEMES
from ..measure.plot_spec import PLOTS
from ..state.budget import BUDGET_PRESETS, CUSTOM_GB_RANGE
from ..state.recorded_run import RECORDED_DIR, REPLAY, RecordedBackend, shipped_recording
from ..state.session import Session, SessionError, make_session, save_session
from ..work.background import LatestOnly, read_elsewhere, run_once
from .accessibility import name_widgets
from .actions import make_action

RECENT_KEY = "recent/files"
FILES_FOLDER_KEY = "files/folder"  # sessions and recordings, opened or saved
EXPORT_FOLDER_KEY = "export/folder"
MAX_RECENT = 8
OPEN_FILTERS = "Tilescope sessions and recorded runs (*.json);;All files (*)"
SESSION_FILTERS = "Tilescope session (*.json)"
TRACE_FILTERS = "Tilescope traces and recorded runs (*.json);;All files (*)"
TRACES_DIR = RECORDED_DIR.parent / "traces"
RESOURCES_DIR = RECORDED_DIR.parent


#: What the export dialog says about an animation's limits (docs/LIMITS.md's, too).
ANIMATION_LIMITS = (
    "The animation is the tile canvas alone, at least "
    "{0}×{1} pixels so that every label fits. At most {2:,} frames and "
    "{3} in all (frames × width × height: 2000 frames at 1920×1080, 500 at "
    "3840×2160); frames are written as they are painted, so memory holds a few of them, never "
    "the whole animation (a size whose frames would not fit in half the free memory is "
    "refused)."
)


def animation_limits() -> str:
    w, h = animation_export.canvas_minimum_size()
    return ANIMATION_LIMITS.format(
        w, h, animation_export.MAX_FRAMES, animation_export.MAX_ANIMATION_PIXELS_LABEL
    )


#: How the banner's message about a file that could not be opened begins.
OPEN_FAILED = "Could not open"


@dataclass(frozen=True)
class ExportKind:
    key: str
    text: str
    suffix: str
    filters: str
    default_size: tuple[int, int] | None  # None: no size to choose


_ANIMATION_SIZE = animation_export.ANIMATION_SIZE
EXPORT_KINDS: tuple[ExportKind, ...] = (
    ExportKind("plots_png", "Plots as PNG image", ".png", "PNG image (*.png)", (1600, 1000)),
    ExportKind("plots_svg", "Plots as SVG (vector)", ".svg", "SVG image (*.svg)", (1600, 1000)),
    ExportKind(
        "results_csv",
        "Results as CSV (one row per result and kernel)",
        ".csv",
        "CSV table (*.csv)",
        None,
    ),
    ExportKind(
        "plots_csv",
        "Plotted series as CSV (wide: x and y columns per series)",
        ".csv",
        "CSV table (*.csv)",
        None,
    ),
    ExportKind("screenshot", "Window screenshot (PNG)", ".png", "PNG image (*.png)", None),
    ExportKind("gif", "Tile animation as GIF", ".gif", "GIF animation (*.gif)", _ANIMATION_SIZE),
    ExportKind("mp4", "Tile animation as MP4 video", ".mp4", "MP4 video (*.mp4)", _ANIMATION_SIZE),
)
KINDS = {k.key: k for k in EXPORT_KINDS}
#: The export dialog's choice of every plot at once (each plot's own is its spec's name).
ALL_PLOTS = "All four plots"
#: How a file name says what the export holds beyond the config (plot images: nothing). The
#: two CSV kinds differ: results are one row per result and kernel, series the plotted curves.
KIND_STEMS = {
    "results_csv": "_results",
    "plots_csv": "_series",
    "screenshot": "_window",
    "gif": "_tiles",
    "mp4": "_tiles",
}
#: Where a first export goes, before any folder is remembered: tables to the user's documents,
#: pictures and animations to the user's pictures (the home folder where those do not exist).
TABLE_KINDS = frozenset({"results_csv", "plots_csv"})


def first_export_folder(kind: str) -> str:
    """The user's documents folder for a table, pictures folder for an image or animation; the
    home folder when that one does not exist. Never a folder inside the program itself."""
    where = (
        QStandardPaths.StandardLocation.DocumentsLocation
        if kind in TABLE_KINDS
        else QStandardPaths.StandardLocation.PicturesLocation
    )
    folder = QStandardPaths.writableLocation(where)
    return folder if folder and os.path.isdir(folder) else os.path.expanduser("~")


@dataclass(frozen=True)
class ExportRequest:
    """What to export where; `size` for plot images and the animation, `only` one plot."""

    kind: str
    path: str
    size: tuple[int, int] | None = None
    only: str | None = None
    frames: int = 60
    fps: int = 12


class ExportDialog(QDialog):
    """Choose what to export, how big, and where (Ctrl+E)."""

    def __init__(self, menu: FileMenu, kind: str = "plots_png") -> None:
        super().__init__(menu.window)
        self.setObjectName("exportDialog")
        self.setWindowTitle("Export")
        self.menu = menu
        form = QFormLayout(self)
        self.kind = QComboBox()
        self.kind.setObjectName("exportKind")
        for k in EXPORT_KINDS:
            self.kind.addItem(k.text, k.key)
            missing = animation_writers.missing_package(k.key)
            if missing:  # said before anything is filled in, never after
                i = self.kind.count() - 1
                self.kind.setItemText(i, f"{k.text} — {missing}")
                self.kind.model().item(i).setEnabled(False)
        self.kind.setToolTip("What to export.")
        form.addRow("Export", self.kind)
        self.plot = QComboBox()
        self.plot.setObjectName("exportPlot")
        self.plot.addItem(ALL_PLOTS, None)
        pass_ = menu.window.plots.shown_pass()
        for name, spec in PLOTS.items():
            self.plot.addItem(spec.name(pass_), name)
        self.plot.setToolTip("All four plots in one image, or one of them.")
        form.addRow("Plots", self.plot)
        size_row = QHBoxLayout()
        self.width_spin = self._spin(
            "exportWidth", plot_images.MIN_SIZE, plot_images.MAX_SIZE, 1600
        )
        self.height_spin = self._spin(
            "exportHeight", plot_images.MIN_SIZE, plot_images.MAX_SIZE, 1000
        )
        self.width_spin.setSuffix(" px")
        self.height_spin.setSuffix(" px")
        size_row.addWidget(self.width_spin)
        size_row.addWidget(self.height_spin)
        form.addRow("Size (w × h)", size_row)
        anim_row = QHBoxLayout()
        self.frames = self._spin("exportFrames", 2, animation_export.MAX_FRAMES, 60)
        self.frames.setSuffix(" frames")
        self.frames.setToolTip("Frames over one pass of the animation's clock.")
        self.fps = self._spin("exportFps", 1, 60, 12)
        self.fps.setSuffix(" fps")
        anim_row.addWidget(self.frames)
        anim_row.addWidget(self.fps)
        form.addRow("Animation", anim_row)
        self.limits = PlainLabel(animation_limits())
        self.limits.setObjectName("exportLimits")
        self.limits.setWordWrap(True)
        self.limits.setProperty("role", "hint")
        form.addRow("", self.limits)
        path_row = QHBoxLayout()
        self.path = QLineEdit()
        self.path.setObjectName("exportPath")
        self.path.setMinimumWidth(360)
        browse = QPushButton("Browse…")
        browse.setObjectName("exportBrowse")
        browse.clicked.connect(self._browse)
        path_row.addWidget(self.path, 1)
        path_row.addWidget(browse)
        form.addRow("File", path_row)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self._suggested = ""  # the name last suggested, replaced while the user keeps it
        self.kind.currentIndexChanged.connect(self._on_kind)
        self.plot.currentIndexChanged.connect(self._suggest_name)
        wanted = self.kind.findData(kind)
        if wanted < 0 or not self.kind.model().item(wanted).isEnabled():
            wanted = 0
        self.kind.setCurrentIndex(wanted)
        self._on_kind()

    def _spin(self, name: str, lo: int, hi: int, value: int) -> QSpinBox:
        spin = QSpinBox()
        spin.setObjectName(name)
        spin.setRange(lo, hi)
        spin.setValue(value)
        return spin

    def current_kind(self) -> ExportKind:
        return KINDS[self.kind.currentData()]

    def _on_kind(self, *_: object) -> None:
        kind = self.current_kind()
        plots = kind.key.startswith("plots_")
        animation = kind.key in ("gif", "mp4")
        self.plot.setEnabled(plots)
        self.width_spin.setEnabled(kind.default_size is not None)
        self.height_spin.setEnabled(self.width_spin.isEnabled())
        lowest = (
            animation_export.canvas_minimum_size() if animation else (plot_images.MIN_SIZE,) * 2
        )
        self.width_spin.setMinimum(lowest[0])
        self.height_spin.setMinimum(lowest[1])
        self.limits.setVisible(animation)
        if kind.default_size is not None:
            self.width_spin.setValue(kind.default_size[0])
            self.height_spin.setValue(kind.default_size[1])
        self.frames.setEnabled(animation)
        self.fps.setEnabled(animation)
        self._suggest_name()

    def _suggest_name(self, *_: object) -> None:
        """A name that says the config and what is exported; a name the user typed keeps its
        stem and gets the kind's suffix."""
        kind = self.current_kind()
        text = self.path.text().strip()
        if not text or text == self._suggested:
            only = self.plot.currentData() if self.plot.isEnabled() else None
            self._suggested = self.menu.suggested_name(kind, only)
            self.path.setText(self._suggested)
            return
        known = {k.suffix for k in EXPORT_KINDS}
        stem = text[: -len(Path(text).suffix)] if Path(text).suffix.lower() in known else text
        self.path.setText(stem + kind.suffix)

    def _browse(self) -> None:
        kind = self.current_kind()
        path = self.menu.ask_save_path("Export to", kind.filters, self.path.text())
        if path:
            self.path.setText(_with_suffix(path, kind.suffix))

    def request(self) -> ExportRequest:
        kind = self.current_kind()
        size = (self.width_spin.value(), self.height_spin.value())
        return ExportRequest(
            kind=kind.key,
            path=self.path.text().strip(),
            size=size if self.width_spin.isEnabled() else None,
            only=self.plot.currentData() if self.plot.isEnabled() else None,
            frames=self.frames.value(),
            fps=self.fps.value(),
        )

    def _accept(self) -> None:
        if not self.path.text().strip():
            self.path.setFocus()
            self.path.setPlaceholderText("Choose a file first")
            return
        self.accept()


def _with_suffix(path: str, suffix: str) -> str:
    return path if path.lower().endswith(suffix) else path + suffix


class FileMenu(QObject):
    """Builds the File menu's actions on `window` (a MainWindow) and carries them out."""

    exported = Signal(str)  # path, after any export succeeded
    exportFailed = Signal(str)  # the message shown
    sessionSaved = Signal(str)
    fileOpened = Signal(str)
    openFailed = Signal(str)  # the message shown

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.window = window
        self.ask_save_path = self._ask_save_path
        self.ask_open_path = self._ask_open_path
        self.confirm_overwrite = self._confirm_overwrite
        #: Show a progress dialog for animation exports (tests may turn it off).
        self.show_progress = True
        self.dialog: ExportDialog | None = None
        self.exporter: animation_export.AnimationExporter | None = None
        self.progress_dialog: QProgressDialog | None = None
        self.plot_export: plot_images.PlotImageExport | plot_images.PlotSvgExport | None = None
        #: Files are read here, off the GUI thread; opening another supersedes a slow read.
        self.reader = LatestOnly(self)

        self.save_action = self._action(
            "Save session…",
            QKeySequence.StandardKey.Save,
            self.save_session_dialog,
            "Save the configuration, controls, every result and the device to a JSON file.",
        )
        self.export_actions = {
            k.key: self._action(
                f"{k.text}…", None, lambda k=k.key: self.export_dialog(k), f"Export: {k.text}."
            )
            for k in EXPORT_KINDS
        }
        self.trace_action = self._action(
            "Open trace…",
            None,
            self.open_trace_dialog,
            "Open an execution trace recorded on a GPU (bench/trace_h200.py, or a recorded run "
            "with traces) in the Tiles tab's real-trace mode.",
        )
        self.recent_menu = QMenu("Open recent")
        self.recent_menu.setObjectName("recentMenu")
        self.recent_menu.setToolTipsVisible(True)
        self.recent_menu.aboutToShow.connect(self.fill_recent_menu)

    def _action(self, text, shortcut, slot, tip) -> QAction:  # type: ignore[no-untyped-def]
        return make_action(self.window, text, shortcut, slot, tip)

    def populate(self, menu: QMenu, open_action: QAction, export_action: QAction) -> None:
        """Fill the File menu (the window owns Open…, Export… and Quit and their shortcuts)."""
        menu.addAction(open_action)
        menu.addAction(self.trace_action)
        menu.addMenu(self.recent_menu)
        menu.addAction(self.save_action)
        menu.addSeparator()
        menu.addAction(export_action)
        sub = menu.addMenu("Export as")
        sub.setToolTipsVisible(True)
        for action in self.export_actions.values():
            sub.addAction(action)
        self.fill_recent_menu()

    # ------------------------------------------------------------------ asking

    def _ask_save_path(self, title: str, filters: str, suggested: str) -> str:
        path, _ = QFileDialog.getSaveFileName(
            self.window,
            title,
            suggested,
            filters,
            options=QFileDialog.Option.DontConfirmOverwrite,  # we ask, below, every time
        )
        return path

    def _ask_open_path(self, title: str, filters: str, folder: str) -> str:
        path, _ = QFileDialog.getOpenFileName(self.window, title, folder, filters)
        return path

    def _confirm_overwrite(self, path: str) -> bool:
        return ask(self.window, "Replace the file?", f"{path} exists. Replace it?")

    def _may_write(self, path: str) -> bool:
        """True to go on: the file is new, or the user agreed to replace it."""
        exists = os.path.lexists(path) and not os.path.isdir(path)
        if exists and not self.confirm_overwrite(path):
            self._status(f"Not saved: {path} was left as it was.")
            return False
        return True

    def _status(self, text: str, ms: int = 6000) -> None:
        self.window.statusBar().showMessage(text, ms)

    def _error(self, text: str) -> None:
        self.window.banner.show_message(text)
        self.exportFailed.emit(text)

    # ------------------------------------------------------------------ folders and names

    def _folder(self, key: str) -> str:
        """The folder remembered under `key` (files/folder, export/folder) if it still exists."""
        folder = settings.read(self.settings, key, "")
        return folder if folder and os.path.isdir(folder) else ""

    def remember_folder(self, key: str, path: str) -> None:
        """The folder of `path`, for the next dialog; never the app's own resources (the
        shipped recording opened on a first start): a session saved next would land there."""
        folder = os.path.dirname(os.path.abspath(path))
        if Path(folder).resolve().is_relative_to(RESOURCES_DIR.resolve()):
            return
        self.settings.setValue(key, folder)

    @property
    def files_folder(self) -> str:
        """Where sessions and recordings were last opened or saved ('' if never)."""
        return self._folder(FILES_FOLDER_KEY)

    def export_folder(self, kind: str = "plots_png") -> str:
        """Where the last export went; before the first one, the user's documents (tables) or
        pictures folder (first_export_folder)."""
        return self._folder(EXPORT_FOLDER_KEY) or first_export_folder(kind)

    def config_stem(self) -> str:
        """The config in a file name: tilescope_h12_d64_fp16_N16384 (batch and mask when not
        the defaults, e.g. _B4_causal)."""
        c = self.window.config
        stem = f"tilescope_h{c.heads}_d{c.head_dim}_{c.dtype}_N{c.seq_len}"
        if c.batch != 1:
            stem += f"_B{c.batch}"
        if c.causal:
            stem += "_causal"
        return stem

    def suggested_name(self, kind: ExportKind, only: str | None = None) -> str:
        """A path in the last export folder whose name says the config and what it holds
        (`only`: the one plot a plot export holds)."""
        stem = self.config_stem() + KIND_STEMS.get(kind.key, "")
        if kind.key.startswith("plots_") and only in PLOTS:
            stem += f"_{PLOTS[only].stem}"
        return os.path.join(self.export_folder(kind.key), stem + kind.suffix)

    # ------------------------------------------------------------------ exports

    def export_dialog(self, kind: str = "plots_png") -> ExportDialog:
        """Open the export dialog (not blocking: the export runs when it is accepted)."""
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
        dialog = ExportDialog(self, kind)
        name_widgets(dialog)
        dialog.accepted.connect(lambda: self.export(dialog.request()))
        self.dialog = dialog
        dialog.open()
        return dialog

    def export(self, request: ExportRequest) -> bool:
        """Carry out `request`; True when the file was written (plot images and animations:
        when started; `exported` or `exportFailed` follows)."""
        path = request.path
        kind = KINDS.get(request.kind)
        if kind is None or not path:
            self._error("Export: choose what to export and a file.")
            return False
        if not self._may_write(path):
            return False
        self.remember_folder(EXPORT_FOLDER_KEY, path)
        if request.kind in ("gif", "mp4"):
            return self._export_animation(request)
        panel = self.window.plots
        if request.kind in ("plots_png", "plots_svg"):
            return self._export_plot_image(request)
        try:
            if request.kind == "plots_csv":
                data = plot_tables.plots_csv(panel, request.only).encode()
            elif request.kind == "results_csv":
                data = plot_tables.results_csv(panel).encode()
            else:
                data = plot_images.window_png(self.window)
            export_files.write_file(path, data, overwrite=True)
        except (export_files.ExportError, OSError) as exc:
            self._error(f"Could not export {kind.text.lower()}: {exc}")
            return False
        self._status(f"Exported {kind.text.lower()} to {path}")
        self.exported.emit(path)
        return True

    def _export_plot_image(self, request: ExportRequest) -> bool:
        what = KINDS[request.kind].text.lower()
        try:
            export_files.check_writable(request.path)
            args = (self.window.plots, request.size or (1600, 1000), request.only, request.path)
            job: plot_images.PlotImageExport | plot_images.PlotSvgExport
            if request.kind == "plots_svg":
                job = plot_images.PlotSvgExport(
                    *args, overwrite=True, description=self._description(), parent=self
                )
            else:
                job = plot_images.PlotImageExport(*args, overwrite=True, parent=self)
        except export_files.ExportError as exc:
            self._error(f"Could not export {what}: {exc}")
            return False

        def done(path: str) -> None:
            self._plot_export_ended(job)
            self._status(f"Exported {what} to {path}")
            self.exported.emit(path)

        def failed(message: str) -> None:
            self._plot_export_ended(job)
            self._error(f"Could not export {what}: {message}")

        job.finished.connect(done)
        job.failed.connect(failed)
        self.plot_export = job
        job.start()
        self._status(f"Exporting {what} to {request.path}…", 0)
        return True

    def _plot_export_ended(self, job: QObject) -> None:
        job.deleteLater()
        if self.plot_export is job:
            self.plot_export = None

    @property
    def exporting(self) -> bool:
        """An export of the plots or of the animation is under way."""
        animation = self.exporter is not None and self.exporter.state == "running"
        return animation or self.plot_export is not None

    def _description(self) -> str:
        backend = self.window.backend
        where = backend.info.name if backend is not None else "no backend"
        return f"Tilescope: {self.window.config.label()} on {where}"

    def _export_animation(self, request: ExportRequest) -> bool:
        if self.exporter is not None and self.exporter.state == "running":
            self._error("An animation export is already running; cancel it first.")
            return False
        animation = getattr(self.window, "animation", None)
        player = getattr(animation, "player", None)
        try:
            exporter = animation_export.AnimationExporter(
                self.window.config,
                request.path,
                frames=request.frames,
                fps=request.fps,
                size=request.size
                or KINDS[request.kind].default_size
                or animation_export.ANIMATION_SIZE,
                overwrite=True,
                gpu=getattr(player, "gpu", None),
                duration_s=getattr(player, "duration_s", None),
                # What the Tiles tab shows: its lanes, their measured clocks, its theme.
                algorithms=getattr(player, "algorithms", None),
                results=getattr(getattr(animation, "measured", None), "lookup", None),
                theme=getattr(self.window, "theme", "dark"),
                parent=self,
            )
            exporter.start()
        except (export_files.ExportError, OSError) as exc:
            self._error(f"Could not export the animation: {exc}")
            return False
        self.exporter = exporter
        exporter.finished.connect(self._animation_done)
        exporter.failed.connect(lambda msg: self._animation_ended(msg, failed=True))
        exporter.cancelled.connect(lambda: self._animation_ended("Animation export cancelled."))
        if self.show_progress:
            dialog = QProgressDialog(
                f"Rendering {exporter.frames} frames to {Path(request.path).name}…",
                "Cancel",
                0,
                exporter.frames,
                self.window,
            )
            dialog.setObjectName("exportProgress")
            dialog.setWindowTitle("Exporting the animation")
            dialog.setWindowModality(Qt.WindowModality.NonModal)  # the app stays usable
            dialog.setMinimumDuration(0)
            dialog.setAutoClose(False)
            dialog.setAutoReset(False)
            dialog.canceled.connect(exporter.cancel)
            exporter.progress.connect(lambda done, _total: dialog.setValue(done))
            dialog.show()
            self.progress_dialog = dialog
        self._status(f"Rendering the animation to {request.path}…", 0)
        return True

    def shutdown(self) -> None:
        """The window is closing: an animation export stops at once (its partial file
        removed) and the dialogs close, so nothing keeps the app running after its window."""
        if self.exporter is not None:
            self.exporter.abort()
        self._close_progress()
        if self.dialog is not None:
            self.dialog.close()

    def _close_progress(self) -> None:
        if self.progress_dialog is not None:
            with contextlib.suppress(RuntimeError):
                self.progress_dialog.canceled.disconnect()
            self.progress_dialog.close()
            self.progress_dialog.deleteLater()
            self.progress_dialog = None

    def _animation_done(self, path: str) -> None:
        self._close_progress()
        self._status(f"Exported the tile animation to {path}")
        self.exported.emit(path)

    def _animation_ended(self, message: str, failed: bool = False) -> None:
        self._close_progress()
        if failed:
            self._error(f"Could not export the animation: {message}")
        else:
            self._status(message)

    # ------------------------------------------------------------------ sessions

    def build_session(self) -> Session:
        """The window's state as a Session (Qt-free data from here on)."""
        w = self.window
        s = w.state.value
        controls = {
            "algorithms": list(s.checked),
            "backend": s.backend_choice,
            "recorded_path": s.recorded_path,
            "budget": s.budget_preset,
            "custom_gb": float(s.custom_budget_gb),
            "theme": w.theme,
        }
        ready = w.backend
        device, key, meta, traces = None, "", None, ()
        if ready is not None:
            key, device = ready.key, ready.info
            if ready.info.backend == REPLAY and isinstance(ready.backend, RecordedBackend):
                rec = ready.backend.recording  # the recording's own device, not "replay"
                device, meta, traces = rec.device, rec.meta, rec.traces
        return make_session(
            w.config, controls, w.measurements.store.entries(), key, device, meta, traces
        )

    def save_session_dialog(self) -> bool:
        folder = self.files_folder or first_export_folder("results_csv")  # documents, or home
        suggested = os.path.join(folder, f"{self.config_stem()}_session.json")
        path = self.ask_save_path("Save session", SESSION_FILTERS, suggested)
        if not path:
            return False
        return self.save_session(_with_suffix(path, ".json"))

    def save_session(self, path: str) -> bool:
        """Save the session to `path` (asking before replacing a file); the JSON is made and
        written off the GUI thread. True when the save started; `sessionSaved` follows."""
        if not self._may_write(path):
            return False
        try:
            session = self.build_session()
        except Exception as exc:  # never out of the File menu: a message instead
            self._save_failed(exc)
            return False

        def write() -> str:
            save_session(session, path, overwrite=True)
            return path

        run_once(self, write, self._saved, self._save_failed)
        self._status(f"Saving the session to {path}…", 0)
        return True

    def _saved(self, path: str) -> None:
        self.remember_folder(FILES_FOLDER_KEY, path)
        self.add_recent(path)
        self._status(f"Saved the session to {path}")
        self.sessionSaved.emit(path)

    def _save_failed(self, exc: BaseException) -> None:
        self._error(f"Could not save the session: {exc}")

    def open_dialog(self) -> bool:
        folder = self.files_folder or (str(RECORDED_DIR) if RECORDED_DIR.is_dir() else "")
        path = self.ask_open_path("Open a session or recorded run", OPEN_FILTERS, folder)
        return self.open_file(path) if path else False

    def open_trace_dialog(self) -> bool:
        """File ▸ Open trace…: ask for a file, then the Tiles tab's trace panel opens it."""
        folder = self.files_folder or (str(TRACES_DIR) if TRACES_DIR.is_dir() else "")
        path = self.ask_open_path("Open a trace", TRACE_FILTERS, folder)
        if not path:
            return False
        self.remember_folder(FILES_FOLDER_KEY, path)
        return self.window.show_trace(path)

    def recorded_run_wanted(self) -> bool:
        """The backend list's "recorded run" with no file yet: the shipped H200 sweep if this
        install has it, else ask for a file."""
        shipped = shipped_recording()
        if shipped is not None:
            return self.open_file(str(shipped))
        return self.open_dialog()

    def open_file(self, path: str) -> bool:
        """Open a saved session or a recorded run. The file is read and checked off the GUI
        thread first: a corrupt, truncated or newer-version file gives a message and changes
        nothing. True when the read started; `fileOpened` or `openFailed` follows."""
        self.reader.submit(
            lambda: RecordedBackend.from_file(path, read_elsewhere),
            lambda backend: self._opened(path, backend),
            lambda exc: self._open_failed(path, exc),
        )
        self._status(f"Opening {os.path.basename(path) or path}…", 0)
        return True

    def _open_failed(self, path: str, exc: BaseException) -> None:
        name = os.path.basename(path) or path
        if isinstance(exc, (SessionError, RecordingError)):
            message = f"{OPEN_FAILED} {name}: {exc}"
        else:  # anything else a hostile file provokes: still a message
            message = f"{OPEN_FAILED} {name}: {type(exc).__name__}: {exc}"
        w = self.window
        w.banner.show_message(message)
        w.controls.show_backend_choice(w.state.value.backend_choice)
        self._status(message)
        self.openFailed.emit(message)

    def _opened(self, path: str, backend: RecordedBackend) -> None:
        name = os.path.basename(path) or path
        # Whatever the banner said (an earlier file's refusal, a backend that would not start,
        # a run or an export that failed) concerned what was shown before this file: moot now.
        # A message that opening this file raises comes after and stays.
        self.window.banner.dismiss()
        self.window.backend_switch.open_recorded(path, preloaded=backend)
        if backend.session is not None:
            self._apply_session(backend.session)
        self.remember_folder(FILES_FOLDER_KEY, path)
        self.add_recent(path)
        what = "session" if backend.session is not None else "recorded run"
        self._status(f"Opened the {what} {name} ({backend.label()})")
        self.fileOpened.emit(path)

    def _apply_session(self, session: Session) -> None:
        w = self.window
        changes: dict[str, object] = {"config": session.config}
        algos = tuple(a for a in ALGORITHMS if a in session.controls.get("algorithms", ()))
        if algos:
            changes["checked"] = algos
        custom = session.controls.get("custom_gb")
        if custom is not None and CUSTOM_GB_RANGE[0] <= float(custom) <= CUSTOM_GB_RANGE[1]:
            changes["custom_budget_gb"] = float(custom)
        budget = session.controls.get("budget")
        if budget in BUDGET_PRESETS:
            changes["budget_preset"] = budget
        w.state.update(**changes)  # the whole session's view of things in one change
        theme = session.controls.get("theme")
        if theme in THEMES and theme != w.theme:
            w.apply_theme(theme)
        for entry in session.other_entries():  # other backends' results: cached as they were
            w.measurements.store.add(entry.result, entry.backend_key, entry.budget_bytes)

    # ------------------------------------------------------------------ recent files

    @property
    def settings(self) -> SettingsStore:
        return self.window.settings

    def recent_files(self) -> list[str]:
        return [p for p in settings.read(self.settings, RECENT_KEY, []) if p][:MAX_RECENT]

    def add_recent(self, path: str) -> None:
        path = os.path.abspath(path)
        files = [path, *(p for p in self.recent_files() if p != path)][:MAX_RECENT]
        self.settings.setValue(RECENT_KEY, files)

    def clear_recent(self) -> None:
        self.settings.remove(RECENT_KEY)  # the menu is rebuilt when next shown

    def fill_recent_menu(self) -> None:
        menu = self.recent_menu
        menu.clear()
        files = self.recent_files()
        for i, path in enumerate(files, 1):
            action = menu.addAction(f"&{i} {menu_text(os.path.basename(path))}")
            exists = os.path.isfile(path)
            action.setToolTip(tooltip(path if exists else f"{path} (missing)"))
            action.setEnabled(exists)
            action.triggered.connect(lambda *_, p=path: self.open_file(p))
        if files:
            menu.addSeparator()
        clear = menu.addAction("Clear recent files")
        clear.setEnabled(bool(files))
        clear.triggered.connect(lambda *_: self.clear_recent())
