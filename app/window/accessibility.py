"""Accessible names and descriptions for every interactive widget: what a screen reader says,
and a stable handle for UI tests.

The window names its own controls explicitly (`NAMES`, by objectName). Everything else that a
user can operate (a button, a list, a field, a plot) and has no name yet gets one from what it
shows: its text, the label its form gives it, its tooltip's first sentence, else its
objectName in words. Its tooltip becomes its description. `name_widgets(root)` does this for a
widget tree (the window after it is built, the Tiles tab when it arrives, each dialog).
"""

from __future__ import annotations

import re

from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QFormLayout,
    QGraphicsView,
    QLabel,
    QLineEdit,
    QScrollBar,
    QTabBar,
    QWidget,
)

from ..kit.plain_text import shown_text

#: Names for the window's own controls and views, by objectName.
NAMES: dict[str, str] = {
    "seqLenSlider": "Sequence length N",
    "seqLenSpin": "Sequence length N, exact value",
    "headsSpin": "Heads h",
    "headDimSpin": "Head dimension d",
    "batchSpin": "Batch size B",
    "dtypeCombo": "Element type",
    "causalCheck": "Causal mask",
    "blockMCombo": "Query tile rows Br",
    "blockNCombo": "Key tile rows Bc",
    "backendCombo": "Backend",
    "budgetCombo": "Memory budget",
    "customBudgetSpin": "Custom memory budget in GB",
    "memoryPlot": "Peak memory plot",
    "timingPlot": "Time per forward pass plot",
    "trafficPlot": "HBM traffic plot",
    "rooflinePlot": "Roofline plot",
    "runStatus": "Run status",
    "runStatusLabel": "Run status",
    "sweepProgress": "Sweep progress",
    "cancelRun": "Cancel the measurement",
    "sweepButton": "Sweep up to N",
    "errorBannerText": "Message",
    "errorBannerDetails": "Message details",
    "errorBannerClose": "Dismiss the message",
    "mainTabs": "Views",
    "tileAnimation": "Tile animation",
    "explainPane": "Explanation",
    "exportKind": "What to export",
    "exportPlot": "Which plots",
    "exportWidth": "Width in pixels",
    "exportHeight": "Height in pixels",
    "exportFrames": "Frames",
    "exportFps": "Frames per second",
    "exportPath": "File to export to",
    "exportBrowse": "Browse for the file",
    "controlsScroll": "Controls",
    # Parts Qt makes (a tab widget's bar, the menu bar's overflow button)
    "qt_tabwidget_tabbar": "Tabs",
    "qt_menubar_ext_button": "More menus",
    # The Tiles tab
    "tileCanvas": "Tiles moving between HBM and on-chip SRAM",
    "animMode": "Animation mode",
    "animPlay": "Play or pause",
    "animStepBack": "Step back",
    "animStepForward": "Step forward",
    "animRestart": "Back to the start",
    "animSpeed": "Playback speed",
    "animDuration": "Length of one pass",
    "animTimeline": "Animation time",
    "onlineSoftmaxText": "Online softmax, step by step",
    "kernelSource": "Kernel source",
    "sourceLane": "Kernel source shown",
    "traceChooser": "Trace shown",
    "traceReplay": "Replay the trace",
    "traceSpeed": "Trace replay speed",
    "traceOpen": "Open a trace",
    "traceView": "GPU trace: thread blocks on each SM",
    "traceBlockStrip": "Phases of the selected thread block",
}

#: Widgets a user operates (checked with `is_interactive`).
INTERACTIVE = (
    QAbstractButton,
    QComboBox,
    QAbstractSpinBox,
    QAbstractSlider,
    QLineEdit,
    QTabBar,
    QAbstractScrollArea,
)


def is_interactive(widget: QWidget) -> bool:
    """Whether a user operates `widget` itself (not a part Qt builds inside another control:
    a spin box's line edit, a combo box's list, a scroll area's scroll bars and viewport)."""
    if isinstance(widget, QScrollBar):
        return False
    if not isinstance(widget, INTERACTIVE) and not isinstance(widget, QGraphicsView):
        return False
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, (QAbstractSpinBox, QComboBox)):
            return False
        parent = parent.parentWidget()
    return widget.objectName() != "qt_scrollarea_viewport"


def name_widgets(root: QWidget) -> int:
    """Give every interactive widget under `root` (and `root`) without an accessible name one,
    and its tooltip as its description; returns how many were named."""
    named = 0
    for widget in [root, *root.findChildren(QWidget)]:
        if not is_interactive(widget) and widget.objectName() not in NAMES:
            continue
        explicit = NAMES.get(widget.objectName(), "")
        if explicit and widget.accessibleName() != explicit:  # the window's own names win
            widget.setAccessibleName(explicit)
            named += 1
        elif not widget.accessibleName():
            name = accessible_name(widget)
            if name:
                widget.setAccessibleName(name)
                named += 1
        tip = widget.toolTip()
        if tip and not widget.accessibleDescription():
            widget.setAccessibleDescription(_tip_text(tip))
    return named


def accessible_name(widget: QWidget) -> str:
    """The name `widget` shows a sighted user: see the module docstring."""
    name = NAMES.get(widget.objectName(), "")
    if name:
        return name
    if isinstance(widget, QAbstractButton):
        text = _plain(widget.text())
        if text and _WORDS.fullmatch(text):  # "tiled (readable)", not "Step ▶" (its tip says)
            return text
    label = _form_label(widget)
    if label:
        return label
    tip = _tip_text(widget.toolTip())
    if tip:
        first = re.split(r"(?<=[.:])\s", tip, maxsplit=1)[0].rstrip(".:")
        return re.sub(r"\s*\([^)]*\)$", "", first)  # without "(Space)", "(Ctrl+R)"
    if widget.objectName() and not widget.objectName().startswith("qt_"):
        return _words(widget.objectName())
    return ""


#: Button text that reads as words (not glyphs standing for a word).
_WORDS = re.compile(r"[\w\s().,+/×-]*\w[\w\s().,+/×-]*")


def _form_label(widget: QWidget) -> str:
    parent = widget.parentWidget()
    layout = parent.layout() if parent is not None else None
    if isinstance(layout, QFormLayout):
        label = layout.labelForField(widget)
        if isinstance(label, QLabel) and _plain(label.text()):
            return _plain(label.text())
    return ""


def _plain(text: str) -> str:
    """Text without markup, mnemonics and decorations ("&Open…" -> "Open")."""
    text = re.sub(r"<[^>]+>", "", text or "").replace("&&", "\0").replace("&", "")
    text = text.replace("\0", "&").replace("…", "").strip()
    text = re.sub(r"^[^\w(]+\s*", "", text)  # a leading glyph ("▶ Play", "✕")
    return " ".join(text.split())


def _tip_text(tip: str) -> str:
    """A tooltip as the reader sees it (tooltips may be HTML), without decorations."""
    return _plain(shown_text(tip).replace("&", "&&")) if tip else ""


def _words(name: str) -> str:
    """ "animStepBack" -> "anim step back"."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").lower()
