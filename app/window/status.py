"""Run status, the status bar's device read-outs, and the one error banner.

Errors never open modal dialogs: a banner at the top shows the newest one (repeats are counted,
not stacked) until dismissed, so an error storm cannot bury the window under modal boxes. A
message with more to say than one line (a compiler log) gets a "Details…" button that opens one
non-modal window with the full text; the app keeps working while it is open.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QProgressBar,
    QStatusBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpu.config import AttentionConfig
from gpu.results import DeviceInfo, RunResult

from ..kit.elided_label import ElidedLabel
from ..kit.plain_text import PlainLabel, tooltip
from ..state.current_point import AlgorithmFigures
from ..state.roof_words import binds_text
from ..state.units import fmt_bytes, fmt_ms, fmt_seconds

#: The status bar's last run before any on the backend in use.
LAST_NONE = "last run: —"


class RunStatus(QWidget):
    """objectName runStatus: what the runner does now, and sweep progress with a cancel button."""

    cancelRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("runStatus")
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 0, 6, 0)
        row.setSpacing(6)
        # Elided, never clipped: a long note ends in "…" and the whole of it is the tooltip.
        self.label = ElidedLabel("Starting…", "What the background runner is doing.")
        self.label.setObjectName("runStatusLabel")
        # Nothing here may change size with its text or with the sweep: a header that grows by
        # a pixel resizes all four plots below it, and a full plot relayout takes ~100 ms.
        self.label.setMinimumWidth(260)
        row.addWidget(self.label, 1)
        self.progress = QProgressBar()
        self.progress.setObjectName("sweepProgress")
        self.progress.setFixedWidth(150)
        self.progress.setToolTip("Sweep progress: measurements done of those queued.")
        # Hidden between sweeps, it leaves its width to the text (the row's height is fixed,
        # so the plots below never move).
        self.progress.setVisible(False)
        row.addWidget(self.progress)
        self.cancel = QToolButton()
        self.cancel.setObjectName("cancelRun")
        self.cancel.setText("Cancel")
        self.cancel.setToolTip("Cancel the sweep and any waiting measurement (Esc).")
        _retain_size(self.cancel)
        self.cancel.setVisible(False)
        self.cancel.clicked.connect(self.cancelRequested)
        row.addWidget(self.cancel)
        self.setFixedHeight(max(self.cancel.sizeHint().height(), self.label.sizeHint().height()))

    def text(self) -> str:
        return self.label.text()

    def set_text(self, text: str) -> None:
        self.label.setText(text)

    def set_running(self, what: str) -> None:
        self.set_text(f"Running {what}…")
        self.cancel.setVisible(True)

    def set_idle(self, text: str) -> None:
        """Nothing runs: `text`, and Cancel only while a sweep is still under way."""
        self.set_text(text)
        self.cancel.setVisible(self.progress.isVisible())

    @property
    def cancellable(self) -> bool:
        """Whether the Cancel button is offered."""
        return not self.cancel.isHidden()

    def set_sweep(self, done: int, total: int) -> None:
        self.progress.setVisible(True)
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        self.progress.setFormat(f"sweep {done}/{total}")
        self.cancel.setVisible(True)

    def sweep_finished(self) -> None:
        self.progress.setVisible(False)
        self.cancel.setVisible(False)


class ConfigNotes:
    """What the run status says about one config (a run skipped as too slow, an out-of-memory,
    a recording that lacks it): kept while that config is shown, dropped as soon as another is,
    so a note never outlives the config it was about."""

    def __init__(self) -> None:
        self.config: AttentionConfig | None = None
        self._notes: list[str] = []
        #: Runs skipped as too long: algorithm -> (estimate, limit) seconds, said as one note.
        self._too_long: dict[str, tuple[float, float]] = {}

    def add(self, config: AttentionConfig, text: str) -> None:
        self._about(config)
        if text not in self._notes:
            self._notes.append(text)

    def too_long(
        self, config: AttentionConfig, algorithm: str, estimate_s: float, limit_s: float
    ) -> None:
        """`algorithm` was not run for `config`: about `estimate_s`, past `limit_s`."""
        self._about(config)
        self._too_long[algorithm] = (estimate_s, limit_s)

    def _about(self, config: AttentionConfig) -> None:
        if config != self.config:
            self.config, self._notes, self._too_long = config, [], {}

    def about(self, config: AttentionConfig) -> list[str]:
        """The notes about `config` (none once another config was noted or shown): skipped
        runs in one short note ('Not run, over 20 s here: naive ~1.7 min, tiled ~48 s'),
        then the rest."""
        if config != self.config:
            return []
        notes = list(self._notes)
        if self._too_long:
            limit = max(limit for _, limit in self._too_long.values())
            runs = ", ".join(
                f"{a} ~{fmt_seconds(t, digits=2)}" for a, (t, _) in self._too_long.items()
            )
            notes.insert(0, f"Not run, over {fmt_seconds(limit, digits=2)} here: {runs}")
        return notes

    def follow(self, config: AttentionConfig) -> None:
        """The window shows `config` now: notes about any other are dropped."""
        if config != self.config:
            self.config, self._notes, self._too_long = None, [], {}

    def clear(self) -> None:
        """Another backend: what was noted (a refusal, an out-of-memory) was about the last."""
        self.config, self._notes, self._too_long = None, [], {}


def _retain_size(widget: QWidget) -> None:
    policy = widget.sizePolicy()
    policy.setRetainSizeWhenHidden(True)
    widget.setSizePolicy(policy)


class ErrorDetails(QDialog):
    """objectName errorDetailsDialog: the full text behind a banner message, non-modal."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorDetailsDialog")
        self.setWindowTitle("Error details")
        self.setModal(False)
        self.setWindowModality(Qt.WindowModality.NonModal)
        v = QVBoxLayout(self)
        self.summary = PlainLabel()
        self.summary.setObjectName("errorDetailsSummary")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        v.addWidget(self.summary)
        self.text = QPlainTextEdit()
        self.text.setObjectName("errorDetailsText")
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        v.addWidget(self.text, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        v.addWidget(buttons)
        self.resize(820, 420)

    def set_details(self, summary: str, details: str) -> None:
        self.summary.setText(summary)
        if details != self.text.toPlainText():
            self.text.setPlainText(details)


class ErrorBanner(QFrame):
    """One dismissable message at a time; the same message again bumps a counter.

    `details` (a compiler log, say) adds a "Details…" button opening a non-modal ErrorDetails."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 4, 4, 4)
        self.label = PlainLabel()
        self.label.setObjectName("errorBannerText")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row.addWidget(self.label, 1)
        self.details_button = QToolButton()
        self.details_button.setObjectName("errorBannerDetails")
        self.details_button.setText("Details…")
        self.details_button.setToolTip("The full text (a compiler log, say), in its own window.")
        self.details_button.setVisible(False)
        self.details_button.clicked.connect(self.open_details)
        row.addWidget(self.details_button)
        self.close_button = QToolButton()
        self.close_button.setObjectName("errorBannerClose")
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss this message.")
        self.close_button.clicked.connect(self.dismiss)
        row.addWidget(self.close_button)
        self._message = ""
        self._details = ""
        self._count = 0
        self._about: AttentionConfig | None = None
        self.details_dialog: ErrorDetails | None = None
        self.setVisible(False)

    @property
    def message(self) -> str:
        """The message shown (empty once dismissed)."""
        return self._message

    @property
    def details(self) -> str:
        """The full text behind the message ("" when there is none)."""
        return self._details

    def show_message(
        self, message: str, details: str = "", about: AttentionConfig | None = None
    ) -> None:
        """Show `message`; `about`: the config it concerns (a run that failed), so that it goes
        when the window shows another (`follow`). Messages about no config stay until
        dismissed."""
        if message == self._message and not self.isHidden():
            self._count += 1
        else:
            self._message, self._count = message, 1
        self._details = details
        self._about = about
        suffix = f"  (×{self._count})" if self._count > 1 else ""
        self.label.setText(message + suffix)
        self.setToolTip(tooltip(message))
        self.details_button.setVisible(bool(details))
        if self.details_dialog is not None and self.details_dialog.isVisible() and details:
            self.details_dialog.set_details(message, details)  # an open window follows along
        self.setVisible(True)

    def open_details(self) -> ErrorDetails | None:
        """Show the details window (non-modal, one per banner); None when there are none."""
        if not self._details:
            return None
        if self.details_dialog is None:
            self.details_dialog = ErrorDetails(self.window())
        self.details_dialog.set_details(self._message, self._details)
        self.details_dialog.show()
        self.details_dialog.raise_()
        return self.details_dialog

    def follow(self, config: AttentionConfig) -> None:
        """The window shows `config` now: a message about another config is moot."""
        if self._about is not None and self._about != config and self._message:
            self.dismiss()

    def dismiss(self) -> None:
        self.setVisible(False)
        self._message, self._details, self._count = "", "", 0
        self._about = None
        self.details_button.setVisible(False)


class StatusBarReadouts:
    """Permanent labels in the status bar: backend, device, memory free/total, last run."""

    def __init__(self, bar: QStatusBar) -> None:
        self.bar = bar
        # Elided labels that share the bar by their stretch: a long recorded-run name or an
        # out-of-memory note ends in "…" (the whole text on hover), never cut mid-word.
        self.backend = ElidedLabel("backend: —", "The backend in use, and why.")
        self.backend.setObjectName("statusBackend")
        self.device = ElidedLabel("device: —", "The device the measurements run on.")
        self.device.setObjectName("statusDevice")
        self.memory = ElidedLabel("memory: —", "Device memory free / total, after the last run.")
        self.memory.setObjectName("statusMemory")
        self.last = ElidedLabel(LAST_NONE, "The most recent measurement.")
        self.last.setObjectName("statusLastRun")
        # Normal, not permanent, widgets: a message (an export done, a run refused) shows
        # across the whole bar for its few seconds, then the read-outs come back. As permanent
        # widgets they filled the bar and left the message no room: it was never seen.
        for w, stretch, least in (
            (self.backend, 3, 120),
            (self.device, 2, 90),
            (self.memory, 2, 120),
            (self.last, 3, 120),
        ):
            w.setMinimumWidth(least)
            bar.addWidget(w, stretch)

    def set_backend(self, text: str) -> None:
        self.backend.setText(text)
        self.backend.set_tip(text)

    def set_device(self, info: DeviceInfo) -> None:
        self.device.setText(info.name)
        self.device.set_tip(f"{info.backend}: {info.name}")
        self.set_memory(info)

    def set_memory(self, info: DeviceInfo) -> None:
        what = "RAM" if info.backend == "cpu" else "memory"
        free, total = fmt_bytes(info.memory_free_bytes), fmt_bytes(info.memory_total_bytes)
        self.memory.setText(f"{what} {free} free / {total}")

    def clear_last(self) -> None:
        """Another backend: the last run was the previous backend's."""
        self.last.setText(LAST_NONE)
        self.last.set_tip("The most recent measurement.")

    def set_last(self, result: RunResult, figures: AlgorithmFigures | None = None) -> None:
        """The most recent measurement, with the current point's figures of it where they
        are worked out (`figures`: its DRAM bytes and source, the verdict)."""
        text = f"last: {describe_result(result, figures)}"
        self.last.setText(text)
        # An out-of-memory result's why (needs X, the budget or free RAM allows Y) on hover.
        self.last.set_tip(result.message or (text if figures else "The most recent measurement."))


def describe_result(r: RunResult, figures: AlgorithmFigures | None = None) -> str:
    """'naive N=16384 8.21 ms, peak 12.99 GB, DRAM 25.91 GB (measured), memory-bound: HBM
    bandwidth binds (recorded)': the figures and the verdict in the explain pane's words."""
    head = f"{r.algorithm} N={r.config.seq_len}"
    if r.oom:
        return f"{head} out of memory"
    tag = " (recorded)" if r.recorded else ""
    if figures is None:
        return f"{head} {fmt_ms(r.total_ms)}, peak {fmt_bytes(r.peak_bytes)}{tag}"
    v = figures.verdict
    binds = binds_text(v.ties, r.backend == "cpu")
    ms = figures.measured_ms.value if figures.measured_ms is not None else r.total_ms
    return (
        f"{head} {fmt_ms(ms)}, peak {fmt_bytes(figures.peak_bytes.value)}, "
        f"DRAM {figures.dram_bytes.text()}, {v.bound}-bound: {binds}{tag}"
    )
