"""Text from outside the program is shown as text, never read as rich text.

Qt reads a string as HTML wherever it "might be rich text" (labels and message boxes in their
default AutoText mode, every tooltip) and always in pyqtgraph's titles, legends and axis labels.
A device name, a date, a file path or an error message quoting a refused value comes from a
file, a setting or the system: read as HTML, `<img src='/dev/zero'>` makes Qt read a device
without end and `<b>` changes how it looks. So:

- `PlainLabel` is the window's label: plain text unless a caller asks for rich text itself;
- `tooltip` turns any text into the rich text that shows exactly that text;
- `html_text` escapes text for a place that is always HTML (pyqtgraph, the explain pane);
- `menu_text` keeps a "&" in a menu item's text from becoming a keyboard mnemonic;
- `ask` asks a yes/no question whose text is plain;
- `shown_text` is what a reader sees of a text Qt may read as HTML (tests, accessibility).
"""

from __future__ import annotations

import html

from PySide6.QtGui import Qt, QTextDocument  # QtGui's Qt adds mightBeRichText, convertFromPlainText
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget


class PlainLabel(QLabel):
    """A QLabel whose text is always shown as typed (Qt.PlainText), whatever it holds."""

    def __init__(self, text: str | QWidget | None = "", parent: QWidget | None = None) -> None:
        if isinstance(text, QWidget) or text is None:  # PlainLabel(parent), as QLabel(parent)
            text, parent = "", text
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)  # before the text: AutoText would parse it
        if text:
            self.setText(text)


def tooltip(text: str) -> str:
    """Rich text that shows `text` as it is, line breaks kept (a tooltip is read as HTML as soon
    as it looks like HTML, and then "&amp;" would show as "&"); long lines wrap."""
    if not text:
        return ""
    return Qt.convertFromPlainText(str(text), Qt.WhiteSpaceMode.WhiteSpaceNormal)


def html_text(text: object) -> str:
    """`text` escaped for a place that reads HTML, line breaks as <br>."""
    return html.escape(str(text), quote=True).replace("\n", "<br>")


def menu_text(text: str) -> str:
    """`text` for a menu item, button or tab: "&" doubled so it shows as itself."""
    return str(text).replace("&", "&&")


def ask(parent: QWidget | None, title: str, text: str) -> bool:
    """A modal yes/no question (No by default) whose text is shown as plain text."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle(title)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(text)
    box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
    box.setDefaultButton(QMessageBox.StandardButton.No)
    return box.exec() == QMessageBox.StandardButton.Yes


def shown_text(text: str, text_format: Qt.TextFormat = Qt.TextFormat.AutoText) -> str:
    """What Qt shows of `text` in a place of `text_format` (a tooltip is AutoText): the text
    itself when it is read as plain text, else the text of the HTML it is read as."""
    rich = text_format == Qt.TextFormat.RichText or (
        text_format == Qt.TextFormat.AutoText and Qt.mightBeRichText(text)
    )
    if not rich:
        return text
    doc = QTextDocument()
    doc.setHtml(text)
    return doc.toPlainText().replace("\xa0", " ")
