"""What the user sees is what the app drew: on a real X display (Xvfb at 1280×800 and at
1920×1080, a window manager on it, the window on Qt's xcb platform, empty settings, no GPU),
after each user action and once the window is idle, the X server's image of every plot, the
Tiles canvas and the explain pane equals a fresh render of it.

The rest of the suite paints through `grab()`, which repaints a widget from scratch: a view that
left stale pixels on the screen passes there. This test reads the screen first
(tests/real_display.py). It needs Xvfb (README's test command installs it) and is skipped where
there is none or this Qt has no xcb plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_display import PIXEL_SHARE_TOLERANCE, tools_present, x_display

ROOT = Path(__file__).resolve().parents[1]


def _xcb_plugin_present() -> bool:
    import PySide6

    plugins = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms"
    return any(plugins.glob("libqxcb*"))


def drive(tmp_path: Path, size: tuple[int, int], *args: str) -> list[dict]:
    """Run tests/screen_driver.py on a fresh display of `size`; its JSON lines. The pictures
    of a view that differs go to $TILESCOPE_SCREEN_PICTURES where set, else under tmp_path."""
    out = Path(os.environ.get("TILESCOPE_SCREEN_PICTURES") or tmp_path / "out")
    with x_display(*size) as env:
        env = {**env, "QT_QPA_PLATFORM": "xcb", "HOME": str(tmp_path / "home")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        proc = subprocess.run(
            [sys.executable, "-m", "tests.screen_driver", str(out), *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


needs_display = pytest.mark.skipif(
    not tools_present() or not _xcb_plugin_present(), reason="no Xvfb or no xcb plugin here"
)


#: At the larger size, the actions whose views lay out anew there (the whole run is the
#: smaller size's: each step costs a second or two of the suite).
LARGE_SCREEN_STEPS = (
    "slider_drag,open_recording,replay_drag,pass_step,tab_tiles,tab_ring,tab_measurements,"
    "resize,open_h100_decode,decode_tiles,decode_measurements"
)


@needs_display
@pytest.mark.parametrize(
    ("size", "steps"),
    [((1280, 800), ""), ((1920, 1080), LARGE_SCREEN_STEPS)],
    ids=["1280x800", "1920x1080"],
)
def test_the_screen_shows_what_a_fresh_render_shows_after_every_user_action(tmp_path, size, steps):
    steps = drive(tmp_path, size, *([f"--steps={steps}"] if steps else []))
    assert [s["step"] for s in steps][:1] == ["first_start"]
    assert len(steps) >= (12 if size == (1920, 1080) else 25), [s["step"] for s in steps]
    never_idle = [s["step"] for s in steps if not s["idle"]]
    assert never_idle == [], f"the window never came to rest after: {never_idle}"
    stale = {
        s["step"]: {
            view: round(share, 4)
            for view, share in s["mismatch"].items()
            if share > PIXEL_SHARE_TOLERANCE
        }
        for s in steps
    }
    stale = {step: views for step, views in stale.items() if views}
    where = {s["step"]: (s["where"], s["items"]) for s in steps if s["where"]}
    assert stale == {}, (
        f"the screen differs from a fresh render (share of pixels): {stale}; where, and the "
        f"scene items there: {where}"
    )
    checked = {view for s in steps for view in s["mismatch"]}
    for view in (
        "memoryPlot",
        "timingPlot",
        "trafficPlot",
        "rooflinePlot",
        "bandwidthPlot",
        "tileAnimation",
        "decodeCanvas",
        "explainPane",
    ):
        assert view in checked, f"{view} was never on the screen to check"
