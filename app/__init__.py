"""Tilescope's desktop app: all the Qt (PySide6 + pyqtgraph); `gpu/` never imports it.

Importing any part of the app first applies the PySide6 6.12 / CPython 3.11 reference-count
work-around (see app/qt_compat.py), so no Qt call can run before it.
"""

import os

from . import qt_compat

qt_compat.ensure()
# superqt reaches Qt through qtpy: make it use our binding whatever else is installed.
os.environ.setdefault("QT_API", "pyside6")
