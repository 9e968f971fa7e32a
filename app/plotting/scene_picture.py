"""A plot's viewport kept as one picture of its scene, refreshed only where the scene changed,
with the live layer (app/plotting/live_layer.py) painted over it.

QGraphicsView repaints a strip by walking every item of the scene and asking each for its
bounding rect (a Python call for pyqtgraph's items) before it blits the cached ones: about
0.8 ms a plot on 2 cores for the thin strips of a slider move. Here a move blits those strips
from the picture and paints the cursor and markers on them. The scene is painted (into the
picture) wherever a repaint came that the layer did not ask for: Qt asks for those where the
scene changed (with the rects it painted before, so nothing is left behind), or resized or
exposed. A scene change inside the strips the layer asked for in the same frame would be
hidden by them: the plot says when its scene changes (`touched`), and those strips are
painted into the picture too. (`QGraphicsScene.changed` is no way to learn what changed:
connecting it switches Qt to reporting an item's new rect only, and pyqtgraph's items would
leave their old pixels behind.)

Where several plots changed in one turn (a new backend or recording redraws all four), one
plot's scene is painted into its picture per turn of the event loop: on the screen a changed
scene waits for a turn of its own (`_Turns`, one picture per turn, oldest first), the picture
as it was shown meanwhile, so the change's own work, each plot's paint and the timers that
fall due between them are separate events instead of one long one.
Only repaints of the screen wait (the window's backing store); a grab or any other painter
gets every picture up to date at once.

Painting elsewhere than the screen goes the usual way: a view that is not `live` (an export's
replica), and any painter that is not a raster one (SVG), get the scene painted item by item
and the layer drawn over it in the view's foreground, as vectors."""

from __future__ import annotations

from collections.abc import Callable

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, QRectF, Qt, QTimer
from PySide6.QtGui import QPaintEngine, QPainter, QPaintEvent, QPixmap, QRegion, QTransform
from PySide6.QtWidgets import QGraphicsView, QWidget

from .live_layer import LiveLayer


class _Turns(QObject):
    """The pictures whose scene waits to be painted, oldest first: one is let through per
    turn of the event loop, started by a zero-interval timer (timers that fell due while the
    plots painted, an earlier deadline, run first)."""

    def __init__(self) -> None:
        super().__init__(QCoreApplication.instance())
        self.waiting: list[ScenePicture] = []
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._next)

    def wait(self, picture: ScenePicture) -> None:
        if picture not in self.waiting:
            self.waiting.append(picture)
        if not self._timer.isActive():
            self._timer.start()

    def _next(self) -> None:
        while self.waiting:
            picture = self.waiting.pop(0)
            if picture.let_through():
                break
        if self.waiting:
            self._timer.start()


_turns: _Turns | None = None


def _turn() -> _Turns:
    global _turns
    app = QCoreApplication.instance()
    if _turns is None or not shiboken6.isValid(_turns) or _turns.parent() is not app:
        _turns = _Turns()
    return _turns


def _on_screen(painter: QPainter, widget: QWidget) -> bool:
    """Whether `painter` paints into the window's backing store (a repaint of the screen),
    not into a grab's or a render's picture."""
    store = widget.window().backingStore()
    device = painter.paintEngine().paintDevice()
    target = store.paintDevice() if store is not None else None
    key = getattr(device, "cacheKey", None)
    return key is not None and target is not None and key() == getattr(target, "cacheKey", int)()


class ScenePicture:
    """The picture of `view`'s scene and the live layer over it. `to_data`: the view box's
    data-to-scene transform and its data area in scene coordinates, now."""

    def __init__(
        self,
        view: QGraphicsView,
        layer: LiveLayer,
        to_data: Callable[[], tuple[QTransform, QRectF]],
    ) -> None:
        self.view = view
        self.layer = layer
        self._to_data = to_data
        #: False: paint the scene item by item on every repaint (export replicas).
        self.live = True
        self.pixmap: QPixmap | None = None
        self.stale = QRegion()  # viewport pixels the picture does not hold yet
        self._asked = QRegion()  # repaints the layer asked for since the last paint
        self._drawn = QRegion()  # what the layer covered when last painted
        self.rendering = False
        self._let_through = False  # this picture's turn to paint its scene has come
        #: Times the scene was painted into the picture (tests, benchmarks).
        self.renders = 0

    def invalidate(self) -> None:
        """The whole picture again at the next repaint (a new size, background or style)."""
        self.pixmap = None

    def touched(self) -> None:
        """The scene changed (data, visibility, a read-out): the strips the layer asked for
        since the last paint may hold some of it, so they are painted into the picture too."""
        self.stale += self._asked

    def _device(self, world: QTransform) -> tuple[QTransform, QRectF]:
        data, area = self._to_data()
        return data * world, world.mapRect(area)

    def layer_moved(self) -> None:
        """Repaint what the layer covered and what it covers now, and nothing else."""
        viewport = self.view.viewport()
        if not viewport.isVisible():
            return
        if not self.live:
            viewport.update()
            return
        to_device, area = self._device(self.view.viewportTransform())
        region = self._drawn + self.layer.region(to_device, area)
        self._asked += region
        viewport.update(region)

    def paint(self, event: QPaintEvent) -> bool:
        """Serve a repaint of the viewport from the picture; False: paint it the usual way."""
        if self.rendering or not self.live:
            return False
        viewport = self.view.viewport()
        self.view.scene().prepareForPaint()
        painter = QPainter(viewport)
        if painter.paintEngine().type() != QPaintEngine.Type.Raster:
            painter.end()
            return False
        region = event.region()
        scene = (region - self._asked) + (self.stale & region)
        if not self._wait_turn(viewport, painter, scene):
            self._refresh(viewport, scene)
        for rect in region:
            painter.drawPixmap(rect, self.pixmap, rect)  # type: ignore[arg-type]
        to_device, area = self._device(self.view.viewportTransform())
        painter.setClipRegion(region)
        self.layer.paint(painter, to_device, area)
        painter.end()
        self._drawn = self.layer.region(to_device, area)
        self._asked = QRegion()
        return True

    def _wait_turn(self, viewport: QWidget, painter: QPainter, region: QRegion) -> bool:
        """On the screen, the scene is painted into the picture in a turn of its own, one
        picture per turn: True when this one waits (its strips stay stale, the picture as it
        was is shown meanwhile)."""
        region = region & QRegion(viewport.rect())
        if region.isEmpty() or self.pixmap is None or not _on_screen(painter, viewport):
            return False
        if self._let_through:
            self._let_through = False
            return False
        if self.pixmap.deviceIndependentSize().toSize() != viewport.size():
            # A new size (a layout change moved the plots): the old picture stretched to it
            # meanwhile, all of it painted again in its turn.
            self.pixmap = self._stretched(viewport)
            region = QRegion(viewport.rect())
        self.stale += region
        _turn().wait(self)
        return True

    def let_through(self) -> bool:
        """This picture's turn: its next repaint paints the scene where it is stale. False
        when there is nothing to repaint (the next picture's turn, then)."""
        viewport = self.view.viewport()
        if not shiboken6.isValid(viewport) or not viewport.isVisible() or self.stale.isEmpty():
            return False
        self._let_through = True
        viewport.update(self.stale)
        return True

    def _stretched(self, viewport: QWidget) -> QPixmap:
        ratio = viewport.devicePixelRatioF()
        pixmap = QPixmap(viewport.size() * ratio)
        pixmap.setDevicePixelRatio(ratio)
        painter = QPainter(pixmap)
        painter.drawPixmap(QRectF(viewport.rect()), self.pixmap, QRectF(self.pixmap.rect()))
        painter.end()
        return pixmap

    def _refresh(self, viewport: QWidget, region: QRegion) -> None:
        """Paint the scene into the picture where `region` says (all of it for a new one)."""
        ratio = viewport.devicePixelRatioF()
        size = viewport.size()
        if self.pixmap is None or self.pixmap.deviceIndependentSize().toSize() != size:
            self.pixmap = QPixmap(size * ratio)
            self.pixmap.setDevicePixelRatio(ratio)
            region = QRegion(viewport.rect())
        region &= QRegion(viewport.rect())
        self.stale -= region
        if region.isEmpty():
            return
        rect = region.boundingRect()
        painter = QPainter(self.pixmap)
        painter.setClipRegion(region)
        self.rendering = True
        try:
            self.view.render(painter, QRectF(rect), rect, Qt.AspectRatioMode.IgnoreAspectRatio)
        finally:
            self.rendering = False
            painter.end()
        self.renders += 1

    def foreground(self, painter: QPainter) -> None:
        """The layer over a scene painted the usual way (not while painting the picture)."""
        if not self.rendering:
            to_device, area = self._device(painter.worldTransform())
            self.layer.paint(painter, to_device, area)
