"""Tilescope's desktop app: all the Qt (PySide6 + pyqtgraph); `gpu/` never imports it."""
