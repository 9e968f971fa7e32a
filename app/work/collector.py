"""The cyclic garbage collector kept off the GUI thread's long-lived objects.

Every full collection walks every tracked object while it holds the interpreter. Once the
window's rooms are built that is over a hundred thousand objects (Qt wrappers, pyqtgraph
items, modules) that live as long as the window: on the 2-core machine a full collection
then took 20-70 ms on whatever event was running, a stall by itself. `freeze_long_lived`
moves the objects alive now out of the collector's reach (`gc.freeze`); later collections
walk only what was made since. It is called when the window's rooms are built, a few times a
session, so the cyclic garbage it may freeze with them stays as small as what is alive then
besides the rooms."""

from __future__ import annotations

import gc


def freeze_long_lived() -> None:
    """Freeze the objects alive now (counting them walks them all: gc.get_freeze_count())."""
    gc.freeze()
