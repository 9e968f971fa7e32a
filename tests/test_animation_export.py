"""GIF and MP4 exports of the tile animation: the canvas alone with every label whole, frames
streamed to the file (memory holds a few, never the whole animation), limits stated, one clear
message for a full disk, and nothing left behind by a closed window or a signal."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QSize, QTimer
from PySide6.QtWidgets import QApplication

from app.export import animation_export, plot_images
from app.export.animation_writers import GifStreamWriter, open_writer
from app.window.file_menu import ExportRequest
from gpu.config import AttentionConfig
from tests.stall_clock import stall_clock

imageio = pytest.importorskip("imageio.v3")
ROOT = Path(__file__).resolve().parents[1]
SMALL = (864, 448)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".part" in p.name)


def exported(qtbot, window, path: Path, frames: int, size=SMALL):
    fm = window.file_menu
    with qtbot.waitSignal(fm.exported, timeout=60_000):
        assert fm.export(ExportRequest(path.suffix[1:], str(path), size=size, frames=frames))


# ------------------------------------------------------------------------------- the picture


def test_the_export_is_the_canvas_alone_not_the_buttons_and_panels(qtbot, make_window, tmp_path):
    window = make_window()
    path = tmp_path / "tiles.gif"
    exported(qtbot, window, path, frames=3)
    first = imageio.imread(path, index=0)[..., :3].astype(int)
    # The same canvas painted directly, at the first instant of the clock.
    from app.animation.widget import TileAnimationWidget

    widget = TileAnimationWidget(config=window.config)
    qtbot.addWidget(widget)
    widget.seek_fraction(0.0)
    canvas = widget.canvas
    canvas.setParent(None)
    qtbot.addWidget(canvas)
    plot_images.lay_out(canvas, SMALL)
    direct = plot_images.frame_array(plot_images.render_image(canvas, SMALL)).astype(int)
    assert first.shape == direct.shape
    assert np.abs(first - direct).mean() < 3  # only the GIF palette's rounding differs
    # The whole widget would start with its mode tabs and buttons on the window's colour.
    bg = canvas.c.bg
    assert tuple(first[2, 2]) == pytest.approx((bg.red(), bg.green(), bg.blue()), abs=4)


@pytest.mark.parametrize(
    "config",
    [
        AttentionConfig(seq_len=256),
        AttentionConfig(seq_len=1024),
        AttentionConfig(seq_len=16384, head_dim=128),
        AttentionConfig(seq_len=131072, heads=32, batch=8),
    ],
    ids=lambda c: c.label(),
)
def test_the_default_size_fits_the_s_and_p_labels(qtbot, config):
    from app.animation.widget import TileAnimationWidget

    widget = TileAnimationWidget(config=config)
    qtbot.addWidget(widget)
    size = QSize(*animation_export.ANIMATION_SIZE)
    assert widget.canvas_problems(size) == []  # no label cut or overlapping
    keys = {item.key for item in widget.canvas.text_items(size)}
    assert {"lane0.name.S", "lane0.name.P"} <= keys  # the N×N matrices keep their names


def test_sizes_below_the_canvas_minimum_are_refused_naming_it(make_window, tmp_path):
    window = make_window()
    fm = window.file_menu
    path = tmp_path / "x.gif"
    assert not fm.export(ExportRequest("gif", str(path), size=(960, 300), frames=2))
    w, h = animation_export.canvas_minimum_size()
    assert f"at least {w}×{h} pixels" in window.banner.message
    assert not path.exists() and leftovers(tmp_path) == []


def test_the_dialog_defaults_to_a_size_that_fits_and_states_the_limits(make_window):
    window = make_window()
    dialog = window.file_menu.export_dialog("gif")
    assert (
        dialog.width_spin.value(),
        dialog.height_spin.value(),
    ) == animation_export.ANIMATION_SIZE
    assert dialog.width_spin.minimum() == animation_export.canvas_minimum_size()[0]
    assert dialog.limits.isVisibleTo(dialog) and "2³² pixels (4.3 billion)" in dialog.limits.text()
    dialog.kind.setCurrentIndex(dialog.kind.findData("plots_png"))
    assert not dialog.limits.isVisibleTo(dialog) and dialog.width_spin.minimum() == 64
    dialog.close()


# ------------------------------------------------------------------------------- limits


def test_frames_times_size_beyond_the_limit_is_refused_with_the_most_frames(make_window, tmp_path):
    window = make_window()
    path = tmp_path / "huge.gif"
    assert not window.file_menu.export(
        ExportRequest("gif", str(path), size=(3840, 2160), frames=2000)
    )
    message = window.banner.message
    assert "more than 2³² pixels (4.3 billion)" in message and "at most 517 frames" in message


def test_a_size_whose_frames_would_not_fit_in_memory_is_refused(make_window, tmp_path, monkeypatch):
    class Little:
        available = 200 * 2**20

    monkeypatch.setattr(animation_export.psutil, "virtual_memory", lambda: Little)
    window = make_window()
    path = tmp_path / "a.gif"
    assert not window.file_menu.export(
        ExportRequest("gif", str(path), size=(3840, 2160), frames=10)
    )
    assert "of memory while it renders, and 210 MB are free" in window.banner.message
    assert not path.exists() and leftovers(tmp_path) == []


def test_memory_holds_a_few_frames_whatever_the_count():
    assert animation_export.frames_in_flight((1280, 720)) == 6
    assert animation_export.frames_in_flight((8192, 8192)) == 1
    big = animation_export.animation_memory_bytes((8192, 8192))
    assert big == 5 * 8192 * 8192 * 4  # one in flight, four being painted or encoded


def test_a_gif_is_written_as_its_frames_come(tmp_path):
    path = tmp_path / "stream.gif"
    path.touch()  # the exporter's partial file
    writer = open_writer(".gif", str(path), (640, 360), 12)
    assert isinstance(writer, GifStreamWriter)
    rng = np.random.default_rng(0)
    sizes = []
    for _ in range(4):
        writer.append(rng.integers(0, 255, (360, 640, 3), dtype=np.uint8))
        sizes.append(path.stat().st_size)
    writer.close()
    assert sizes == sorted(sizes) and sizes[0] > 100_000  # on disk at once, frame by frame
    frames = imageio.imread(path, index=None)
    assert frames.shape[:3] == (4, 360, 640)


def test_an_mp4_whose_partial_file_was_removed_is_not_made_again_by_the_encoder(tmp_path):
    """A signal at the start of an export removes the partial file while the encoder starts:
    an encoder given the name (with -y) created it again and left a .part behind."""
    pytest.importorskip("imageio_ffmpeg")
    from gpu.files.fileio import discard_partial_file, new_partial_file

    for i in range(5):
        tmp = new_partial_file(tmp_path / f"tiles{i}.mp4", ".mp4")
        writer = open_writer(".mp4", tmp, (64, 48), 10.0)
        discard_partial_file(tmp)  # what the signal handler does
        writer.append(np.zeros((48, 64, 3), dtype=np.uint8))
        writer.close() if i % 2 else writer.discard()
    assert leftovers(tmp_path) == [] and list(tmp_path.iterdir()) == []


def test_an_mp4_is_written_into_the_file_it_was_given(tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    path = tmp_path / "given.mp4"
    path.touch()
    writer = open_writer(".mp4", str(path), (64, 48), 10.0)
    for i in range(10):
        writer.append(np.full((48, 64, 3), 20 * i, dtype=np.uint8))
    writer.close()
    frames = imageio.imread(path, index=None)
    assert frames.shape[:3] == (10, 48, 64)
    assert abs(int(frames[9].mean()) - 180) <= 3


def _gaps_exporting(qtbot, window, path: Path, bands: list[int]) -> list[float]:
    """Export a 4K MP4 while a 5 ms timer ticks on the GUI thread: the gaps between ticks,
    longest first, not counting the GUI thread's waits for a CPU that other processes held
    (stall_clock). `bands` collects the pixel count of every band painted."""
    real = animation_export.AnimationExporter._paint_band

    def counted(self):  # type: ignore[no-untyped-def]
        w, _ = self.size
        bands.append(w * max(8, animation_export.BAND_PIXELS // w))
        return real(self)

    clock = stall_clock()
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(clock()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(animation_export.AnimationExporter, "_paint_band", counted)
        timer.start(5)
        exported(qtbot, window, path, frames=4, size=(3840, 2160))
        timer.stop()
    return sorted((b - a for a, b in itertools.pairwise(ticks)), reverse=True)


def test_painting_a_large_frame_never_stalls_the_gui_thread(
    qtbot, make_window, tmp_path, wait_started
):
    window = make_window()
    wait_started(window)  # what follows is the export alone, not the window's start-up
    bands: list[int] = []
    gaps = _gaps_exporting(qtbot, window, tmp_path / "big.mp4", bands)
    # Each 8.3-megapixel frame is painted a band of at most a megapixel at a time, between
    # turns of the event loop (a whole 4K frame in one turn is some 45 ms of CPU here) ...
    assert len(bands) >= 4 * 8 and max(bands) <= animation_export.BAND_PIXELS
    # ... so nothing holds the GUI thread: the canvas's background picture is painted once at
    # full size (one gap may be long), every gap after it is short.
    longest = [round(g * 1e3) for g in gaps[:3]]
    assert gaps[1] < 0.06, f"second-longest GUI-thread gaps: {longest} ms"


# ------------------------------------------------------------------------------- a full disk


@pytest.fixture
def full_disk(monkeypatch):
    """Every partial file the exporter opens is a link to /dev/full: writes fail with ENOSPC,
    as on a full disk. (ffmpeg writes through a descriptor and sees /dev/full as a device it
    cannot seek: the MP4 test uses `small_filesystem` instead.)"""
    real = animation_export.new_partial_file

    def on_full_disk(target, suffix=""):
        tmp = real(target, suffix)
        os.unlink(tmp)
        os.symlink("/dev/full", tmp)
        return tmp

    monkeypatch.setattr(animation_export, "new_partial_file", on_full_disk)


@pytest.fixture
def small_filesystem(tmp_path):
    """A folder on a 64 KiB file system of its own, which an export fills (Linux, as root)."""
    folder = tmp_path / "small"
    folder.mkdir()
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root on Linux")
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a small file system: {mount.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _full_disk_folder(request, suffix: str) -> Path:
    if suffix == ".mp4":
        pytest.importorskip("imageio_ffmpeg")
        return request.getfixturevalue("small_filesystem")
    request.getfixturevalue("full_disk")
    return request.getfixturevalue("tmp_path")


@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_a_full_disk_gives_one_clear_line_and_no_file(qtbot, make_window, request, capfd, suffix):
    tmp_path = _full_disk_folder(request, suffix)
    window = make_window()
    fm = window.file_menu
    path = tmp_path / f"tiles{suffix}"
    with qtbot.waitSignal(fm.exportFailed, timeout=60_000) as failed:
        assert fm.export(ExportRequest(suffix[1:], str(path), size=SMALL, frames=40))
    message = failed.args[0]
    assert message == "Could not export the animation: the disk is full (no space left on device)"
    assert not path.exists() and leftovers(tmp_path) == []
    QApplication.processEvents()
    import gc

    gc.collect()  # an unclosed file would complain here
    err = capfd.readouterr().err
    for noise in ("Exception ignored", "Broken pipe", "FFMPEG COMMAND", "Traceback"):
        assert noise not in err


# ------------------------------------------------------------------------------- endings


def test_closing_the_window_mid_export_stops_it_and_the_event_loop_returns(
    qtbot, make_window, tmp_path
):
    app = QApplication.instance()
    window = make_window()
    fm = window.file_menu
    path = tmp_path / "long.gif"
    assert fm.export(ExportRequest("gif", str(path), size=SMALL, frames=2000))
    exporter = fm.exporter
    qtbot.waitUntil(lambda: exporter.done >= 2, timeout=20_000)
    assert leftovers(tmp_path)  # the partial file exists while it runs
    others = [w for w in app.topLevelWidgets() if w.isVisible() and w.window() is not window]
    assert all(w.parent() is window for w in others)  # only our own dialogs (the progress)
    quit_on_close = app.quitOnLastWindowClosed()
    app.setQuitOnLastWindowClosed(True)
    safety = QTimer()  # a safety net: never hang the suite (stopped before the next test)
    safety.setSingleShot(True)
    safety.timeout.connect(lambda: app.exit(99))
    try:
        QTimer.singleShot(50, window.close)
        safety.start(20_000)
        started = time.monotonic()
        code = app.exec()
    finally:
        safety.stop()
        app.setQuitOnLastWindowClosed(quit_on_close)
    assert code == 0, "the event loop did not return when the window closed"
    assert time.monotonic() - started < 10
    assert exporter.state == "cancelled"
    assert not path.exists() and leftovers(tmp_path) == []
    assert fm.progress_dialog is None


SIGNAL_SCRIPT = textwrap.dedent(
    """
    import sys
    from PySide6.QtCore import QSettings
    from app.launch import _application, quit_on_signals
    from app.window.file_menu import ExportRequest
    from app.window.main_window import MainWindow
    from gpu.backends.model_backend import CostModelBackend

    app = _application()
    assert quit_on_signals(app)  # as run_gui does
    settings = QSettings(sys.argv[2], QSettings.Format.IniFormat)
    window = MainWindow(backend_factory=lambda name: CostModelBackend(), settings=settings)
    window.show()
    fm = window.file_menu
    assert fm.export(ExportRequest("gif", sys.argv[1], size=(864, 448), frames=2000))
    fm.exporter.progress.connect(lambda done, total: print(done, flush=True))
    sys.exit(app.exec())
    """
)


def test_sigterm_mid_export_leaves_no_partial_file(tmp_path):
    """(SIGINT goes through the same handler.)"""
    signum = signal.SIGTERM
    path = tmp_path / "anim.gif"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, "-c", SIGNAL_SCRIPT, str(path), str(tmp_path / "settings.ini")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in process.stdout:  # frames are being written
            if int(line) >= 3:
                break
        assert leftovers(tmp_path)
        process.send_signal(signum)
        code = process.wait(20)
    finally:
        process.kill()
    assert code == 128 + signum, process.stderr.read()
    assert leftovers(tmp_path) == [] and not path.exists()
    assert "Traceback" not in process.stderr.read()


def test_a_gif_shows_the_lane_and_the_measured_clock_on_screen(qtbot, make_window, tmp_path):
    from app.animation.widget import TileAnimationWidget
    from gpu.algorithms import NAIVE, TILED, TILED_WS

    window = make_window(open_path=str(ROOT / "resources" / "recorded" / "h200_sweep.json"))
    window.state.update(config=window.config.with_(seq_len=4096))
    qtbot.waitUntil(lambda: window.animation is not None, timeout=5000)
    window.tabs.setCurrentWidget(window.animation)
    anim = window.animation
    anim.lanes_box.setCurrentIndex(anim.lanes_box.findData(TILED_WS))
    anim.flush()
    qtbot.waitUntil(lambda: all(lane.clock.measured for lane in anim.player.lanes), timeout=10_000)
    assert anim.algorithms == (NAIVE, TILED_WS)
    anim.seek_fraction(0.0)
    on_screen = plot_images.frame_array(anim.canvas_image(QSize(*SMALL))).astype(int)
    path = tmp_path / "ws.gif"
    exported(qtbot, window, path, frames=3)
    first = imageio.imread(path, index=0)[..., :3].astype(int)
    assert np.abs(first - on_screen).mean() < 3  # what the user sees, up to the GIF palette
    # The readable kernel on the modeled clock (what the export drew before) looks otherwise.
    other = TileAnimationWidget(
        config=window.config, gpu=anim.player.gpu, algorithms=(NAIVE, TILED)
    )
    qtbot.addWidget(other)
    other.seek_fraction(0.0)
    readable = plot_images.frame_array(other.canvas_image(QSize(*SMALL))).astype(int)
    assert np.abs(first - readable).mean() > 3 * np.abs(first - on_screen).mean()
