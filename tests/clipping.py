"""What of a window is cut off: every shown text measured against the rectangle it is drawn in.

`clipped(window)` lists one line per problem: a label, button, check box, combo box, spin box,
group or dock title, tab or plot title whose text is wider than its rectangle; a widget that
reaches past its window or past the visible part of the scroll area it sits in; a plot whose
scene is wider than the plot; a plot's axis label or roof label that runs past the plot. A text
shown elided ("…") is not clipped when its tooltip holds the whole of it.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QAbstractSpinBox,
    QComboBox,
    QDockWidget,
    QGroupBox,
    QLabel,
    QScrollArea,
    QStyle,
    QStyleOptionComboBox,
    QTabBar,
    QWidget,
)

from app.kit.elided_label import ElidedLabel
from app.plotting.metric_plot import MetricPlot


def _name(w: QWidget) -> str:
    text = ""
    for getter in ("text", "title", "windowTitle", "currentText"):
        f = getattr(w, getter, None)
        if callable(f):
            try:
                text = f()
            except TypeError:
                continue
            if text:
                break
    return f"{type(w).__name__}#{w.objectName() or '?'} {text[:50]!r}"


def _shown(w: QWidget, top: QWidget) -> bool:
    return (
        w.isVisibleTo(top) and w.width() > 0 and w.height() > 0 and not w.visibleRegion().isEmpty()
    )


def _text_problem(w: QWidget) -> str:
    fm = w.fontMetrics()
    if isinstance(w, ElidedLabel):
        if w.is_elided() and w.text() not in w.toolTip():
            return "elided without its whole text in the tooltip"
        return ""
    if isinstance(w, QLabel):
        if not w.text() or (w.pixmap() is not None and not w.pixmap().isNull()):
            return ""
        if w.wordWrap():
            need = w.heightForWidth(w.width())
            return f"needs {need} px of height, has {w.height()}" if need > w.height() else ""
        need = w.sizeHint().width()
        return f"needs {need} px, has {w.width()}" if need > w.width() + 1 else ""
    if isinstance(w, QAbstractButton):
        if not w.text():
            return ""
        need = w.sizeHint().width()
        return f"needs {need} px, has {w.width()}" if need > w.width() + 1 else ""
    if isinstance(w, QComboBox):
        opt = QStyleOptionComboBox()
        w.initStyleOption(opt)
        field = w.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox, opt, QStyle.SubControl.SC_ComboBoxEditField, w
        )
        need = fm.horizontalAdvance(w.currentText())
        return f"text needs {need} px, field has {field.width()}" if need > field.width() else ""
    if isinstance(w, QAbstractSpinBox):
        edit = w.lineEdit()
        need = fm.horizontalAdvance(edit.text()) + 4
        return f"text needs {need} px, field has {edit.width()}" if need > edit.width() else ""
    if isinstance(w, QGroupBox):
        need = fm.horizontalAdvance(w.title()) + 16
        return f"title needs {need} px, has {w.width()}" if need > w.width() else ""
    if isinstance(w, QDockWidget):
        need = fm.horizontalAdvance(w.windowTitle()) + 24
        return f"title needs {need} px, has {w.width()}" if need > w.width() else ""
    if isinstance(w, QTabBar):
        for i in range(w.count()):
            need = fm.horizontalAdvance(w.tabText(i))
            if need > w.tabRect(i).width():
                return f"tab {w.tabText(i)!r} needs {need} px, has {w.tabRect(i).width()}"
    return ""


def _outside(w: QWidget, top: QWidget) -> str:
    """A widget reaching past its parent (a row squeezed under the next), past its window, or
    past the viewport of the scroll area it is in along a direction that area does not scroll
    now."""
    parent = w.parentWidget()
    if parent is not None and not parent.rect().contains(w.geometry()):
        return f"reaches past its parent: {w.geometry()} in {parent.rect()}"
    while parent is not None and parent is not top:
        if isinstance(parent, QAbstractScrollArea) and not isinstance(parent, QScrollArea):
            return ""  # a text view or list: scrolls its own contents, by design
        if isinstance(parent, QScrollArea):
            view = parent.viewport()
            inner = QRect(w.mapTo(view, QPoint(0, 0)), w.size())
            sideways = inner.left() < 0 or inner.right() >= view.width()
            if sideways and not parent.horizontalScrollBar().isVisible():
                return f"cut by its scroll area ({inner} in a {view.width()} px view)"
            upright = inner.top() < 0 or inner.bottom() >= view.height()
            if upright and not parent.verticalScrollBar().isVisible():
                return f"cut by its scroll area ({inner} in a {view.height()} px view)"
            return ""
        parent = parent.parentWidget()
    rect = QRect(w.mapTo(top, QPoint(0, 0)), w.size())
    if not top.rect().contains(rect):
        return f"reaches past the window: {rect} in {top.rect()}"
    return ""


def _plot_problems(plot: MetricPlot) -> list[str]:
    out = []
    name = plot.objectName()
    scene_w = plot.plotItem.geometry().width()
    if scene_w > plot.width() + 1:
        out.append(f"{name}: the plot's scene is {scene_w:.0f} px wide in a {plot.width()} px plot")
    title = plot.plotItem.titleLabel
    full = plot.title
    shown = title.text
    font = title.item.font()
    need = QFontMetrics(font).horizontalAdvance(_plain(shown))
    room = title.geometry().width()
    if need > room + 1:
        out.append(f"{name}: title {shown!r} needs {need} px, has {room:.0f}")
    if _plain(shown) != full and full not in plot.toolTip():
        out.append(f"{name}: title elided to {shown!r} without the whole title in the tooltip")
    for side in ("bottom", "left"):
        axis = plot.plotItem.getAxis(side)
        if not axis.isVisible() or not axis.labelText:
            continue
        text = axis.label.toPlainText()
        need = axis.label.boundingRect().width()
        room = axis.geometry().width() if side == "bottom" else axis.geometry().height()
        if need > room + 1:
            out.append(f"{name}: {side} axis label {text!r} needs {need:.0f} px, has {room:.0f}")
    vb = plot.plotItem.vb
    box = vb.sceneBoundingRect()
    for item in plot.plotItem.items:
        if type(item).__name__ != "TextItem" or not item.isVisible() or not item.toPlainText():
            continue
        r = item.sceneBoundingRect()
        if r.left() < box.left() - 1 or r.right() > box.right() + 1:
            out.append(f"{name}: label {item.toPlainText()!r} runs past the plot: {r} in {box}")
    return out


def _plain(html: str) -> str:
    from PySide6.QtGui import QTextDocument

    doc = QTextDocument()
    doc.setHtml(html)
    return doc.toPlainText()


def clipped(window: QWidget) -> list[str]:
    """Every clipped text or widget of `window` shown now (see the module docstring)."""
    problems = []
    for w in window.findChildren(QWidget):
        if not _shown(w, window):
            continue
        if why := _text_problem(w):
            problems.append(f"{_name(w)}: {why}")
        if isinstance(w, QLabel | QAbstractButton | QComboBox | QAbstractSpinBox | QGroupBox) and (
            why := _outside(w, window)
        ):
            problems.append(f"{_name(w)}: {why}")
        if isinstance(w, MetricPlot):
            problems += _plot_problems(w)
    return problems


def elided(window: QWidget) -> list[str]:
    """Every shown text cut to fit with "…": elided labels and plot titles (which `clipped`
    accepts when the tooltip holds the whole text). A first screen should need none."""
    out = []
    for w in window.findChildren(ElidedLabel):
        if _shown(w, window) and w.is_elided():
            out.append(f"{_name(w)}: shown as {w.shown_text()!r}")
    for plot in window.findChildren(MetricPlot):
        if _shown(plot, window) and _plain(plot.plotItem.titleLabel.text) != plot.title:
            out.append(f"{plot.objectName()}: title shown as {plot.plotItem.titleLabel.text!r}")
    return out
