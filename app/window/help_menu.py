"""The Help menu: keyboard shortcuts, the lesson in short, and About (version, backend, device,
CuPy and CUDA versions when the backend has them).

Each opens one non-modal window (the app keeps working while it is open), made once and shown
again; the texts are built when shown, so they say what the window does now (its actions'
shortcuts, the backend running).
"""

from __future__ import annotations

import html
import platform
import sys
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QMenu, QTextBrowser, QVBoxLayout, QWidget

from ..state.runs import BackendReady
from ..state.session import app_version
from ..state.units import fmt_bytes
from .accessibility import name_widgets
from .actions import make_action

#: Keys of the Tiles tab (its own shortcuts, active while it has the focus).
TILES_KEYS = (
    ("Space", "Play or pause the animation"),
    ("→ / ←", "One step forward or back (the real-trace mode: one phase)"),
    ("Home", "Back to the start"),
)

#: The decode pass in short (Pass ▸ inference decode), appended to LESSON.
DECODE_LESSON = """
<h3>Past the prefill: the KV-cache wall (Pass: inference decode)</h3>
<p>FlashAttention removed the N×N matrix. What limits context at inference is the <b>KV
cache</b>: every layer keeps K and V of every token, 2·L·H_kv·d·bytes per token, and every
generated token reads all of it. The slider is then the cache length N; q new tokens per head
(1 to 8) meet it. The memory plot draws the cache growing linearly in N, beside the prefill's
N² for contrast, and <b>what fits</b>: a model preset's weights plus its cache of all layers,
against the memory budget, with a wall at the longest context (the explain pane gives the
formula with its numbers).</p>
<p><b>Decode is memory-bound even when fused.</b> Each cached byte meets G·q query rows and is
never used again: about 2·G·q / bytes FLOP per byte, 1 for MHA in fp16, G for GQA groups of G,
far left of any GPU's ridge on the roofline. The time per token is the cache's bytes over the
memory's bandwidth: the bandwidth plot gives each run's rate as a share of the datasheet's
figure (and of a measured copy where the recording has one); short caches are
latency-bound, long ones bandwidth-bound.</p>
<p><b>What GQA saves.</b> H_q query heads sharing H_kv KV heads cache H_q / H_kv times fewer
bytes, and each token reads that much less. Naive decode writes its q×N scores to memory (a
sliver of the cache: the wall is the cache, not S); the <b>split-KV</b> kernel cuts the cache
over enough blocks to fill the SMs, reads each KV head once for its whole query group, and
merges the partial (m, l, O) of the splits with the online softmax. The Tiles tab's decode
lane plays both.</p>
"""

LESSON = (
    """
<h3>Why FlashAttention exists: the memory wall</h3>
<p><b>Naive attention</b> is three steps, each its own kernel: S = Q Kᵀ/√d is written to the
GPU's memory (HBM), P = softmax(S) reads S and writes P, and O = P V reads P. S and P hold
B·h·N² elements each: with 12 heads in fp16 that is 6.3 MB at N = 512, 403 MB at N = 4096 and
25.8 GB at N = 32768. The memory plot shows them filling a GPU; their reads and writes grow as
N² while the useful work grows as N²·d, so for N much larger than d the naive kernels wait on
memory.</p>
<p><b>Tiled attention</b> (FlashAttention) computes exactly the same O in one kernel that never
writes S or P: each thread block keeps a tile of Q on chip, streams tiles of K and V through
its fast on-chip memory (SRAM), and keeps a running row maximum and sum (the online softmax)
to rescale what it has added so far. Its extra memory is O(N), and the Tiles tab shows the
tiles moving.</p>
<p><b>On a modern GPU</b> the story goes one step further: the fused kernel's re-reads of K and
V mostly hit the L2 cache (60 MB on an H200), so its DRAM traffic is close to reading Q, K, V
and writing O once, and it is bound by tensor-core math and the exponential unit rather than
by memory. Measured bytes (hardware counters, where a recording has them) decide what the
explain pane calls memory- or compute-bound.</p>
<p>Drag N and watch the memory and time plots part ways; open the recorded H200 run (backend
"recorded run") to see real GPU numbers on any machine.</p>
"""
    + DECODE_LESSON
)


class HelpWindow(QDialog):
    """One non-modal window of rich text (objectName given by the caller)."""

    def __init__(self, parent: QWidget, name: str, title: str) -> None:
        super().__init__(parent)
        self.setObjectName(name)
        self.setWindowTitle(title)
        self.setModal(False)
        self.setWindowModality(Qt.WindowModality.NonModal)
        layout = QVBoxLayout(self)
        self.text = QTextBrowser()
        self.text.setObjectName(f"{name}Text")
        self.text.setOpenExternalLinks(True)
        self.text.setAccessibleName(title)
        layout.addWidget(self.text, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)
        self.resize(640, 520)
        name_widgets(self)

    def show_html(self, body: str) -> HelpWindow:
        self.text.setHtml(body)
        self.show()
        self.raise_()
        return self


class HelpMenu:
    """Builds the Help menu on `window` and its three windows; `backend()` is the backend the
    About window describes (None while one starts)."""

    def __init__(self, window: QWidget, backend: Callable[[], BackendReady | None]) -> None:
        self.window = window
        self.backend = backend
        self._windows: dict[str, HelpWindow] = {}
        self.shortcuts_action = self._action(
            "Keyboard shortcuts", "Ctrl+/", self.show_shortcuts, "Every key the app answers to."
        )
        self.tour_action = self._action(
            "The lesson, step by step",
            None,
            window.open_lesson,
            "The guided first run above the plots: naive's N² memory, the wall on this device, "
            "memory- against compute-bound, what the animation shows.",
        )
        self.lesson_action = self._action(
            "The lesson in short",
            None,
            self.show_lesson,
            "What the plots and the animation teach: the memory wall, tiling, the L2 cache, "
            "and decode's KV-cache wall.",
        )
        self.about_action = self._action(
            "About Tilescope",
            None,
            self.show_about,
            "Version, backend, device, CuPy and CUDA versions.",
        )
        self.about_action.setMenuRole(QAction.MenuRole.AboutRole)

    def _action(self, text, shortcut, slot, tip) -> QAction:  # type: ignore[no-untyped-def]
        return make_action(self.window, text, shortcut, slot, tip)

    def populate(self, menu: QMenu) -> None:
        menu.addAction(self.shortcuts_action)
        menu.addAction(self.tour_action)
        menu.addAction(self.lesson_action)
        menu.addSeparator()
        menu.addAction(self.about_action)

    def _show(self, name: str, title: str, body: str) -> HelpWindow:
        window = self._windows.get(name)
        if window is None:
            window = self._windows[name] = HelpWindow(self.window, name, title)
        return window.show_html(body)

    # ------------------------------------------------------------------ the three windows

    def show_shortcuts(self) -> HelpWindow:
        return self._show("shortcutsDialog", "Keyboard shortcuts", shortcuts_html(self.window))

    def show_lesson(self) -> HelpWindow:
        return self._show("lessonDialog", "The lesson in short", LESSON)

    def show_about(self) -> HelpWindow:
        return self._show("aboutDialog", "About Tilescope", about_html(self.backend()))


def shortcuts_html(window: QWidget) -> str:
    """Every action of the window that has a key, in menu order, then the Tiles tab's keys."""
    rows = []
    seen: set[str] = set()
    for action in _menu_actions(window) + window.actions():
        key = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        label = action.text().replace("&", "").rstrip("…")
        if key and (label, key) not in seen:
            seen.add((label, key))  # type: ignore[arg-type]
            rows.append((key, label))
    body = "".join(
        f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(t)}</td></tr>" for k, t in rows
    )
    tiles = "".join(
        f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(t)}</td></tr>" for k, t in TILES_KEYS
    )
    return (
        "<h3>The window</h3><table cellspacing=6>" + body + "</table>"
        "<h3>The Tiles tab (while it has the focus)</h3><table cellspacing=6>"
        + tiles
        + "</table><p>On the N slider: the arrow keys, Page Up/Down and Home/End move N.</p>"
    )


def _menu_actions(window: QWidget) -> list[QAction]:
    out: list[QAction] = []
    bar = getattr(window, "menuBar", None)
    if bar is None:
        return out

    def walk(menu: QMenu) -> None:
        for action in menu.actions():
            if action.menu() is not None:
                walk(action.menu())
            elif not action.isSeparator():
                out.append(action)

    for action in bar().actions():
        if action.menu() is not None:
            walk(action.menu())
    return out


def about_html(ready: BackendReady | None) -> str:
    """Version, backend, device and, when the backend says, CuPy, CUDA runtime and driver."""
    from PySide6 import __version__ as pyside_version

    rows = [("Version", app_version())]
    if ready is None:
        rows.append(("Backend", "starting…"))
    else:
        info = ready.info
        details = info.details if isinstance(info.details, dict) else {}
        recorded = info.backend == "replay"
        rows.append(("Backend", _backend_words(info.backend, details)))
        rows.append(("Device", info.name))
        if info.memory_total_bytes:
            rows.append(("Device memory", fmt_bytes(info.memory_total_bytes)))
        where = " (when recorded)" if recorded else ""
        if details.get("cupy_version"):
            rows.append((f"CuPy{where}", str(details["cupy_version"])))
        if details.get("cuda_runtime_version"):
            rows.append((f"CUDA runtime{where}", _cuda_version(details["cuda_runtime_version"])))
        if details.get("driver_version"):
            rows.append((f"CUDA driver{where}", _cuda_version(details["driver_version"])))
    rows += [
        ("Python", platform.python_version()),
        ("Qt (PySide6)", pyside_version),
        ("NumPy", sys.modules["numpy"].__version__ if "numpy" in sys.modules else "—"),
    ]
    table = "".join(
        f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(str(v))}</td></tr>" for k, v in rows
    )
    return (
        "<h3>Tilescope</h3><p>See the attention memory wall: naive and tiled attention as "
        "real CUDA kernels, measured, plotted and animated.</p>"
        f"<table cellspacing=6>{table}</table>"
    )


def _backend_words(backend: str, details: dict) -> str:
    if backend == "replay":
        made = details.get("recorded_backend") or "a GPU"
        file = details.get("file") or "a file"
        return f"recorded run ({file}, measured with the {made} backend)"
    return {"cpu": "cpu (NumPy)", "cuda": "cuda (CuPy)"}.get(backend, backend)


def _cuda_version(value: object) -> str:
    """CUDA's integer versions (13020) as 13.2; anything else as it is."""
    if isinstance(value, int) and value >= 1000:
        return f"{value // 1000}.{value % 1000 // 10}"
    return str(value)
