"""The kernel source of the lane being followed, with the current step's lines highlighted.

Files are read by background jobs (app/work/background.py), never on the GUI thread; until a
file exists (the kernels may be written after the app) the panel says so and looks again every
few seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QFont, QPalette, QTextCursor, QTextFormat
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QPlainTextEdit,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from ..kit.plain_text import PlainLabel
from ..state.animation.kernel_source import (
    KERNEL_DIR,
    SOURCE_FILES,
    KernelSource,
    load_kernel_source,
)
from ..state.units import fmt_ms
from ..work.background import run_once
from .colors import DARK, AnimColors

RECHECK_MS = 3000
AUTO = "auto"
#: One `// STEP` name, or several shown together.
Step = str | tuple[str, ...]

#: What to say for a naive step that runs in a library GEMM (no readable source of ours).
LIBRARY_STEPS = {
    "gemm_qk": "cuBLAS GEMM (library kernel, no readable source): S = Q·Kᵀ/√d, "
    "each 128×128 tile of S written to HBM",
    "gemm_pv": "cuBLAS GEMM (library kernel, no readable source): O = P·V, "
    "reading P back from HBM strip by strip",
}


class SourcePanel(QWidget):
    """Shows the source of a lane's kernel (flash_readable.cu for the readable lane, softmax.cu
    for naive's, flash_ws.cu for the warp-specialized one, ...), following the clock.

    `files` maps each lane to its file (the forward lanes' by default) and `labels` names them
    in the lane box; a step may be one `// STEP` name or several (all highlighted)."""

    sourceLoaded = Signal(str)

    def __init__(
        self,
        parent: QWidget | None = None,
        kernel_dir: Path | None = None,
        files: Mapping[str, str] = SOURCE_FILES,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("kernelSourcePanel")
        self.kernel_dir = Path(kernel_dir) if kernel_dir is not None else KERNEL_DIR
        self.files = dict(files)
        self.sources: dict[str, KernelSource | None] = {}
        self._pending: set[str] = set()
        self._steps: dict[str, tuple[str, Step]] = {}  # algorithm -> (kernel, step)
        self._shown: tuple | None = None
        self._lanes: tuple[str, ...] = tuple(self.files)
        self.highlighted: tuple[tuple[int, int], ...] = ()
        self.colors: AnimColors = DARK

        self.lane = QComboBox(self)
        self.lane.setObjectName("sourceLane")
        self.lane.addItem("auto: the lane still running", AUTO)
        for algo, fname in self.files.items():
            text = labels[algo] if labels and algo in labels else f"{algo} lane: {fname}"
            self.lane.addItem(text, algo)
        self.lane.currentIndexChanged.connect(lambda _i: self._render(force=True))
        self.status = PlainLabel(self)
        self.status.setObjectName("sourceStatus")
        self.status.setWordWrap(True)
        self.text = QPlainTextEdit(self)
        self.text.setObjectName("kernelSource")
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        font = QFont("DejaVu Sans Mono", 9)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(font)
        top = QHBoxLayout()
        top.addWidget(PlainLabel("Kernel source:", self))
        top.addWidget(self.lane, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(top)
        lay.addWidget(self.status)
        lay.addWidget(self.text, 1)

        self._recheck = QTimer(self)
        self._recheck.setInterval(RECHECK_MS)
        self._recheck.timeout.connect(self.request_load)
        QTimer.singleShot(0, self, self.request_load)  # dropped if the panel goes first

    # ---- loading (off the GUI thread)

    def path_for(self, algorithm: str) -> Path:
        return self.kernel_dir / self.files[algorithm]

    def request_load(self) -> None:
        """Read any kernel file not loaded yet, on the thread pool."""
        for algo in self.files:
            if self.sources.get(algo) is None and algo not in self._pending:
                self._pending.add(algo)
                path = self.path_for(algo)
                run_once(
                    self,
                    lambda path=path: load_kernel_source(path),
                    lambda source, algo=algo: self._on_loaded(algo, source),
                    lambda _exc, algo=algo: self._on_loaded(algo, None),
                )

    def _on_loaded(self, algorithm: str, source: object) -> None:
        self._pending.discard(algorithm)
        self.sources[algorithm] = source if isinstance(source, KernelSource) else None
        if all(self.sources.get(a) is not None for a in self.files):
            self._recheck.stop()
        elif not self._recheck.isActive():
            self._recheck.start()
        if algorithm == self.followed:
            self._render(force=True)
        self.sourceLoaded.emit(algorithm)

    # ---- following the clock

    def set_colors(self, colors: AnimColors) -> None:
        """Follow the theme: the text's own colours and the highlight of the current step."""
        self.colors = colors
        pal = self.text.palette()
        pal.setColor(QPalette.ColorRole.Base, colors.panel)
        pal.setColor(QPalette.ColorRole.Text, colors.text)
        self.text.setPalette(pal)
        self._render(force=True)

    def set_lanes(self, algorithms: tuple[str, ...]) -> None:
        """The lanes the animation shows: auto mode follows one of them (the fused kernel
        first, then naive), and steps of lanes no longer shown are forgotten."""
        self._lanes = tuple(a for a in algorithms if a in self.files)
        self._steps = {a: v for a, v in self._steps.items() if a in self._lanes}
        self._render(force=True)

    @property
    def followed(self) -> str:
        """The lane whose source is shown: the chosen one, or in auto mode the first lane still
        running (the fused kernel's before naive's)."""
        chosen = str(self.lane.currentData())
        if chosen != AUTO:
            return chosen
        order = sorted(self._lanes, key=lambda a: a == "naive")
        for algo in order:
            if self._steps.get(algo, ("", ""))[1]:
                return algo
        return order[0] if order else next(iter(self.files))

    def follow(self, algorithm: str) -> None:
        idx = self.lane.findData(algorithm)
        if idx >= 0:
            self.lane.setCurrentIndex(idx)

    def show_step(self, algorithm: str, kernel: str, step: Step) -> None:
        self._steps[algorithm] = (kernel, step)
        self._render()

    def _render(self, force: bool = False) -> None:
        algo = self.followed
        src = self.sources.get(algo)
        kernel, step = self._steps.get(algo, ("", ""))
        key = (algo, id(src), kernel, step)
        if key == self._shown and not force:
            return
        self._shown = key
        if src is None:
            self.text.setPlainText("")
            self.highlighted = ()
            self.status.setText(
                f"{self.path_for(algo)} is not there yet; looking again every "
                f"{fmt_ms(RECHECK_MS, 1)}."
            )
            return
        if self.text.property("sourcePath") != str(src.path):
            self.text.setPlainText(src.text)
            self.text.setProperty("sourcePath", str(src.path))
        blocks = src.lines_for(step) if step else ()
        self.highlighted = blocks
        sels = []
        doc = self.text.document()
        for first, last in blocks:
            for line in range(first, last + 1):
                sel = QTextEdit.ExtraSelection()
                sel.format.setBackground(
                    self.colors.highlight_tag if line == first else self.colors.highlight
                )
                sel.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
                cur = QTextCursor(doc.findBlockByNumber(line))
                sel.cursor = cur
                sels.append(sel)
        self.text.setExtraSelections(sels)
        name = src.path.name
        if blocks:
            first, last = blocks[0]
            more = f" (+{len(blocks) - 1} more)" if len(blocks) > 1 else ""
            tags = step if isinstance(step, str) else " / ".join(step)
            self.status.setText(f"{name}: STEP {tags}, lines {first + 1}–{last + 1}{more}")
            cur = QTextCursor(doc.findBlockByNumber(first))
            self.text.setTextCursor(cur)
            self.text.centerCursor()
        elif kernel in LIBRARY_STEPS:
            self.status.setText(f"{step}: {LIBRARY_STEPS[kernel]}")
        elif step:
            tags = step if isinstance(step, str) else " / ".join(step)
            self.status.setText(f"{name}: no `// STEP {tags}` tag in this file")
        else:
            self.status.setText(name)
