"""The HBM <-> SRAM tile animation (issue 5).

`from app.animation import TileAnimationWidget` gives the Qt widget; the playback model
(`app.animation.player`) and the online-softmax arithmetic (`app.animation.online_softmax`) are
Qt-free and importable on their own, so the widget is loaded lazily.
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
