"""Work around a PySide6 6.12 / CPython 3.11 reference-count bug that aborts the process.

Observed here (PySide6-Essentials 6.12.0, abi3 wheel, CPython 3.11.7): every call to a Qt method
that returns void (QPainter.fillRect, setPen, QColor.setAlpha, QSlider.setValue, ...)
*decrements* the reference count of `None`, and every `Signal.emit()` decrements that of `True`,
without having incremented them first, as if they were immortal (they are only from Python 3.12
on, PEP 683). `None` starts near 5 000 references and `True` near 300, so after a few thousand
painter calls or a few hundred signal emissions CPython aborts with "Fatal Python error:
none_dealloc: deallocating None" (or bool_dealloc).

The decrements are harmless in themselves (these singletons are never freed); only reaching zero
is fatal. So on CPython < 3.12 we give None, True and False a huge reference count once (2⁴⁸,
about 10¹⁴ spare decrements), which is what 3.12 does by design. Nothing else is touched; on
3.12+ this does nothing. It protects the whole process, so it belongs at app start-up.
"""

from __future__ import annotations

import ctypes
import sys

_SPARE = 1 << 48


def install() -> bool:
    """Make None, True and False effectively immortal on CPython < 3.12; True if it changed
    anything."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return False
    changed = False
    for obj in (None, True, False):
        if sys.getrefcount(obj) < _SPARE // 2:
            ctypes.c_ssize_t.from_address(id(obj)).value += _SPARE
            changed = True
    return changed
