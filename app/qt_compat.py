"""Work-around for a reference-count bug of the Qt bindings this app runs on.

PySide6 6.12.0 on CPython 3.11: `SignalInstance.emit()` returns `True` without taking a reference
to it, and Qt methods returning void release a reference to `None` they never took. Every signal
emitted from Python, every slider `setValue`, every painter call moves those counts down by one;
bools and None are not immortal before Python 3.12, so after a few thousand calls CPython aborts
("Fatal Python error: bool_dealloc" / "none_dealloc") — at the latest when the interpreter exits,
and pyqtgraph emits several signals per redraw. Measured here: -1 `True` reference per `emit()`.

The lost references are harmless as long as the counts never reach zero, so on CPython < 3.12
the singletons get 2⁴⁸ spare references once — what Python 3.12 does for them by design (PEP 683).
It is applied by app/__init__.py, before any other app module runs.
"""

from __future__ import annotations

import ctypes
import sys

_SPARE = 1 << 48


def emit_leaks_true() -> bool:
    """Whether emitting a Python-side signal drops a reference to True (diagnostics, tests)."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    before = sys.getrefcount(True)
    for _ in range(64):
        probe.ping.emit()
    return before - sys.getrefcount(True) >= 32  # other threads may move it a little


def ensure() -> bool:
    """Give None, True and False spare references on CPython < 3.12; True if it changed any."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return False
    changed = False
    for obj in (None, True, False):
        if sys.getrefcount(obj) < _SPARE // 2:
            # ob_refcnt is the first field of every CPython object (a Py_ssize_t).
            ctypes.c_ssize_t.from_address(id(obj)).value += _SPARE
            changed = True
    return changed
