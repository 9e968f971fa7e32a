"""Drives the main window on a real X display as a user would and checks, after every action,
that what the X server holds equals a fresh render (tests/real_display.py).

    python -m tests.screen_driver OUT_DIR [--steps a,b,...] [--shots]

Run by tests/test_screen_shows_the_data.py in a child process on Qt's xcb platform (one
QApplication, one platform per process). Each action is followed by a wait for the window to be
idle (no run, no worker, no draw due, nothing painted for IDLE_QUIET_MS); then the check. It
prints one JSON line per step: {"step", "idle", "mismatch": {view: share of pixels}, "where":
{view: [x, y, width, height] of the pixels that differ, for views over the tolerance}}. With
--shots it saves `import -window root` screenshots (the whole X screen, window manager's frame
and all) of the first screen and after a drag in OUT_DIR.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "resources" / "recorded"
#: Every shipped recording, the sweep first (the drags, keys and changes run on it).
RECORDINGS = sorted((p.name for p in RECORDED.glob("*.json")), key=lambda n: n != "h200_sweep.json")
#: The decode recording: the driver also drags, changes what fits and plays its lanes.
DECODE_RECORDING = "h100_decode.json"
#: The window is idle once nothing of it has painted for this long (and nothing is due).
IDLE_QUIET_MS = 500
#: An action's work (a CPU run at the first screen's N, an open) ends well within this.
IDLE_LIMIT_S = 240


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    steps_arg = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--steps=")), "")
    shots = "--shots" in sys.argv

    from PySide6.QtCore import QEvent, QObject, QPoint, QSettings, Qt
    from PySide6.QtGui import QCursor
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QToolTip

    app = QApplication(sys.argv[:1])
    from app.window.main_window import MainWindow
    from tests.real_display import busy_parts, screen_mismatches, window_busy

    class PaintClock(QObject):
        """When anything of the window last painted."""

        last = time.monotonic()
        what = ""

        def eventFilter(self, obj, event):  # type: ignore[no-untyped-def]
            if event.type() == QEvent.Type.Paint:
                PaintClock.last = time.monotonic()
                parent = obj.parent() if obj.objectName() == "" else obj
                PaintClock.what = parent.objectName() if parent is not None else ""
            return False

    clock = PaintClock()
    app.installEventFilter(clock)
    folder = tempfile.mkdtemp(prefix="tilescope-screen-")
    settings = QSettings(os.path.join(folder, "empty.ini"), QSettings.Format.IniFormat)
    window = MainWindow(settings=settings)
    window.show()
    # The pointer off the window: no hover read-out or tooltip over what is checked.
    QCursor.setPos(window.screen().geometry().bottomRight())

    def spin(ms: float) -> None:
        end = time.monotonic() + ms / 1e3
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.002)

    def settle() -> bool:
        """Wait until idle: no work under way and nothing painted, both for IDLE_QUIET_MS
        (work that ends applies its result and paints in the turns after it); True when it
        came within IDLE_LIMIT_S."""
        end = time.monotonic() + IDLE_LIMIT_S
        last_busy = time.monotonic()
        while time.monotonic() < end:
            spin(20)
            now = time.monotonic()
            if window_busy(window):
                last_busy = now
            elif (now - max(PaintClock.last, last_busy)) * 1e3 >= IDLE_QUIET_MS:
                return True
        return False

    def check(step: str) -> None:
        idle = settle()
        QToolTip.hideText()
        spin(50)
        if shots and step in ("first_start", "slider_drag") and shutil.which("import"):
            name = {"first_start": "first", "slider_drag": "drag"}[step]
            shot = out / f"screen-{name}.png"
            subprocess.run(["import", "-window", "root", str(shot)], check=False)
        boxes: dict[str, list[int]] = {}
        mismatch = screen_mismatches(window, out, step, boxes)
        line = {"step": step, "idle": idle, "mismatch": mismatch, "where": boxes}
        line["items"] = {view: items_at(view, box) for view, box in boxes.items()}
        if boxes:  # what the same views show after two more seconds (a late repaint, or none)
            trail = []
            painted = PaintClock.last
            for _ in range(40):
                spin(50)
                parts = [k for k, v in busy_parts(window).items() if v]
                if parts or PaintClock.last != painted:
                    trail.append((round(time.monotonic() % 1000, 2), parts, PaintClock.what))
                    painted = PaintClock.last
            line["trail"] = trail
            line["two_seconds_later"] = screen_mismatches(window)
        print(json.dumps(line), flush=True)

    def items_at(view_name: str, box: list[int]) -> list[str]:
        """The visible scene items of a plot under a box that differs (what to suspect)."""
        from PySide6.QtCore import QRect
        from PySide6.QtWidgets import QGraphicsView

        plot = next((p for p in window.plots.plots if p.objectName() == view_name), None)
        if plot is None:
            return []
        names = {id(item): name for name, item in plot.items.items()}
        found = QGraphicsView.items(plot, QRect(*box))  # MetricPlot.items is its series
        return [
            f"{type(i).__name__}:{names.get(id(i), '')}:cache={i.cacheMode().name}"
            for i in found
            if i.isVisible()
        ]

    slider = window.controls.slider

    def span() -> int:
        return slider.maximum() - slider.minimum()

    def drag_slider(to_value: int) -> None:
        """Press on the slider's handle, move in steps to `to_value`'s place, release."""
        span = slider.maximum() - slider.minimum()

        def x_of(value: int) -> int:
            # Fusion's groove leaves about half a handle at each end.
            margin = 8
            return margin + round((value - slider.minimum()) / span * (slider.width() - 2 * margin))

        y = slider.height() // 2
        start = x_of(slider.value())
        left, none = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
        QTest.mousePress(slider, left, none, QPoint(start, y))
        end = x_of(to_value)
        steps = 12
        for i in range(1, steps + 1):
            QTest.mouseMove(slider, QPoint(start + (end - start) * i // steps, y))
            spin(16)
        QTest.mouseRelease(slider, left, none, QPoint(end, y))

    def keys(widget, key, count: int) -> None:  # type: ignore[no-untyped-def]
        widget.setFocus()
        for _ in range(count):
            QTest.keyClick(widget, key)
            spin(30)

    def choose(combo, data: str) -> None:  # type: ignore[no-untyped-def]
        combo.setCurrentIndex(combo.findData(data))

    def open_recording(name: str) -> None:
        window.file_menu.open_file(str(RECORDED / name))

    def export_plots() -> None:
        from app.window.file_menu import ExportRequest

        window.file_menu.export(
            ExportRequest("plots_png", os.path.join(folder, "plots.png"), size=(1600, 1000))
        )

    c = window.controls

    def decode_lanes_midway() -> None:
        lanes = window.animation.decode_lane
        lanes.flush()
        lanes.seek_time(0.4 * lanes.total_seconds)

    #: After the decode recording opens: its slider, what fits, its Tiles lanes, and back.
    decode_steps: tuple[tuple[str, Callable[[], None]], ...] = (
        ("decode_drag", lambda: drag_slider(slider.minimum() + 2)),
        ("decode_fit_fp8", lambda: choose(c.decode_rows.kv, "fp8")),
        ("decode_tiles", lambda: window.tabs.setCurrentIndex(1)),
        ("decode_tiles_midway", decode_lanes_midway),
        ("decode_measurements", lambda: window.tabs.setCurrentIndex(0)),
    )
    steps: list[tuple[str, Callable[[], None]]] = [
        ("first_start", lambda: None),
        ("arrow_keys", lambda: keys(slider, Qt.Key.Key_Left, 2)),
        ("slider_drag", lambda: drag_slider(slider.minimum() + 1)),
        ("open_recording", lambda: open_recording(RECORDINGS[0])),
        ("replay_drag", lambda: drag_slider(round(slider.minimum() + 0.75 * span()))),
        ("replay_arrow_keys", lambda: keys(slider, Qt.Key.Key_Left, 3)),
        ("sweep", window.sweep),
        ("pass_step", lambda: choose(c.pass_combo, "step")),
        ("pass_forward", lambda: choose(c.pass_combo, "forward")),
        ("dtype", lambda: choose(c.dtype, "bf16")),
        ("heads", lambda: c.heads.setValue(16)),
        ("theme_light", lambda: window.apply_theme("light")),
        ("tab_tiles", lambda: window.tabs.setCurrentIndex(1)),
        ("tab_ring", lambda: window.tabs.setCurrentIndex(2)),
        ("tab_measurements", lambda: window.tabs.setCurrentIndex(0)),
        ("theme_dark", lambda: window.apply_theme("dark")),
        ("resize", lambda: window.resize(window.width() - 120, window.height() - 60)),
        ("export", export_plots),
        *(
            step
            for name in RECORDINGS[1:]
            for step in (
                (f"open_{name.removesuffix('.json')}", lambda n=name: open_recording(n)),
                *(decode_steps if name == DECODE_RECORDING else ()),
            )
        ),
        ("backend_cpu", lambda: choose(c.backend, "cpu")),
    ]
    wanted = set(filter(None, steps_arg.split(",")))
    for name, action in steps:
        if wanted and name not in wanted and name != "first_start":
            continue
        action()
        check(name)
    window.close()
    spin(100)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
