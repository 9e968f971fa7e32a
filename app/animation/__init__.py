"""The HBM <-> SRAM tile animation's Qt widgets.

`from app.animation import TileAnimationWidget` gives the widget, loaded lazily; its playback
model (player, lanes, block detail, online softmax, trace replay) is Qt-free and lives in
app.state.animation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .widget import TileAnimationWidget

__all__ = ["TileAnimationWidget"]


def __getattr__(name: str) -> Any:
    if name == "TileAnimationWidget":
        from .widget import TileAnimationWidget

        return TileAnimationWidget
    raise AttributeError(name)
