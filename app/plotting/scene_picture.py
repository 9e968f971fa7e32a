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

Painting elsewhere than the screen goes the usual way: a view that is not `live` (an export's
replica), and any painter that is not a raster one (SVG), get the scene painted item by item
and the layer drawn over it in the view's foreground, as vectors."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPaintEngine, QPainter, QPaintEvent, QPixmap, QRegion, QTransform
from PySide6.QtWidgets import QGraphicsView, QWidget

from .live_layer import LiveLayer


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
        self._refresh(viewport, (region - self._asked) + (self.stale & region))
        for rect in region:
            painter.drawPixmap(rect, self.pixmap, rect)  # type: ignore[arg-type]
        to_device, area = self._device(self.view.viewportTransform())
        painter.setClipRegion(region)
        self.layer.paint(painter, to_device, area)
        painter.end()
        self._drawn = self.layer.region(to_device, area)
        self._asked = QRegion()
        return True

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
