"""Text from outside is shown as text: markup in any string field of a recording, a session, a
trace or a setting reaches the window and `render` as the characters it is, is never rendered
bold, and never makes Qt read a file (an `<img src=...>` of a FIFO or /dev/zero)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QGraphicsTextItem, QGraphicsView, QLabel, QTextEdit

from app.kit.plain_text import PlainLabel, ask, html_text, shown_text, tooltip
from tests.document_mutations import BASE, SESSION
from tests.test_open_files import open_and_wait

ROOT = Path(__file__).resolve().parent.parent


def _string_paths(node, prefix=()) -> list[tuple]:
    """Where a document holds a string (the first two items of each list)."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _string_paths(v, (*prefix, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node[:2]) for p in _string_paths(v, (*prefix, i))]
    return [prefix] if isinstance(node, str) else []


def _with(doc: dict, path: tuple, value: str) -> dict:
    doc = json.loads(json.dumps(doc))
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


class FifoWatch:
    """A FIFO that records whether anything opened it for reading (and lets it go at once)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "watched.fifo"
        os.mkfifo(self.path)
        self.opened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:  # succeeds only while a reader has it open; closing gives the reader EOF
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.002)
                continue
            os.close(fd)
            self.opened += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


@pytest.fixture
def fifo(tmp_path):
    watch = FifoWatch(tmp_path)
    yield watch
    watch.stop()


def payload(fifo: FifoWatch) -> str:
    return f"<b>BOLD</b> &amp;AMP <img src='{fifo.path}'>"


def shown_texts(window) -> list[tuple[str, str]]:
    """(where, what a reader sees) for every text the window shows: labels as their format
    reads them, tooltips (rich when they look rich), text views, every text item of every
    plot, every action's tooltip."""
    out = []
    for w in [window, *window.findChildren(QLabel)]:
        if isinstance(w, QLabel):
            out.append((f"label {w.objectName()}", shown_text(w.text(), w.textFormat())))
    for w in [window, *window.findChildren(object)]:
        if hasattr(w, "toolTip") and callable(w.toolTip):
            with_tip = w.toolTip()
            if with_tip:
                out.append((f"tooltip {type(w).__name__} {w.objectName()}", shown_text(with_tip)))
    for w in window.findChildren(QTextEdit):
        out.append((f"text {w.objectName()}", w.toPlainText()))
    for view in window.findChildren(QGraphicsView):
        for item in view.scene().items() if view.scene() else ():
            if isinstance(item, QGraphicsTextItem):
                out.append((f"plot text in {view.objectName()}", item.toPlainText()))
    for action in window.findChildren(QAction):
        if action.toolTip():
            out.append((f"action {action.text()}", shown_text(action.toolTip())))
    return out


def assert_plain(window) -> None:
    texts = shown_texts(window)
    bold = [(w, t) for w, t in texts if re.search(r"(?<!<b>)BOLD", t)]
    assert not bold, f"markup read as HTML: {bold[:3]}"
    entity = [(w, t) for w, t in texts if re.search(r"(?<!&amp;)AMP", t)]
    assert not entity, f"an entity read as HTML: {entity[:3]}"


def _visit_tabs(qtbot, window) -> None:
    for i in range(window.tabs.count()):  # each view makes its widgets when first shown
        window.tabs.setCurrentIndex(i)
        qtbot.wait(30)
    window.tabs.setCurrentIndex(0)


RECORDING_PATHS = _string_paths(BASE)
SESSION_ONLY_PATHS = [p for p in _string_paths(SESSION) if p[:1] not in (("results",),)]


def _open_each(qtbot, window, tmp_path, base: dict, paths: list[tuple], fifo) -> int:
    shown = 0
    for k, path in enumerate(paths):
        file = tmp_path / f"doc{k}.json"
        file.write_text(json.dumps(_with(base, path, payload(fifo))))
        opened = open_and_wait(qtbot, window, file, timeout_s=20.0)
        qtbot.wait(30)
        if not opened:  # refused: the message that quotes the value is on the banner
            assert window.banner.message, path
        shown += opened
        assert_plain(window)
    return shown


def test_markup_in_any_string_of_a_recording_is_shown_as_text_and_reads_nothing(
    qtbot, make_window, tmp_path, fifo
):
    window = make_window()
    _visit_tabs(qtbot, window)
    shown = _open_each(qtbot, window, tmp_path, BASE, RECORDING_PATHS, fifo)
    _visit_tabs(qtbot, window)
    assert_plain(window)
    assert shown >= 10  # free-text fields load and are shown; enum fields are refused
    assert fifo.opened == 0


def test_markup_in_any_string_of_a_session_is_shown_as_text_and_reads_nothing(
    qtbot, make_window, tmp_path, fifo
):
    window = make_window()
    _visit_tabs(qtbot, window)
    _open_each(qtbot, window, tmp_path, SESSION, SESSION_ONLY_PATHS, fifo)
    assert_plain(window)
    assert fifo.opened == 0


def test_a_recording_of_free_text_everywhere_shows_every_field_as_text(
    qtbot, make_window, tmp_path, fifo
):
    """All the fields a recording may fill freely, at once (the window shows many together)."""
    doc = BASE
    for path in (("meta", "date"), ("meta", "command"), ("meta", "note"), ("device", "name"),
                 ("results", 0, "message"), ("results", 0, "device"), ("traces", 0, "notes"),
                 ("traces", 0, "device")):  # fmt: skip
        doc = _with(doc, path, payload(fifo) + " " + "/".join(map(str, path)))
    file = tmp_path / "all.json"
    file.write_text(json.dumps(doc))
    window = make_window()
    assert open_and_wait(qtbot, window, file, timeout_s=20.0)
    _visit_tabs(qtbot, window)
    qtbot.wait(100)
    texts = shown_texts(window)
    assert any("<b>BOLD</b>" in t for _, t in texts)  # the name is on screen, as text
    assert_plain(window)
    assert fifo.opened == 0


SETTINGS_TEXT = ("controls/dtype", "controls/algorithms", "controls/backend",
                 "controls/recorded_path", "controls/budget", "view/theme", "files/folder",
                 "export/folder")  # fmt: skip


def test_markup_in_the_settings_is_shown_as_text_and_reads_nothing(
    qtbot, make_window, window_settings, tmp_path, fifo
):
    for key in SETTINGS_TEXT:
        window_settings.setValue(key, payload(fifo))
    window_settings.setValue("recent/files", [payload(fifo), str(tmp_path / payload(fifo))])
    window = make_window()
    _visit_tabs(qtbot, window)
    window.file_menu.fill_recent_menu()
    qtbot.wait(100)
    assert_plain(window)
    recent = [a.text() for a in window.file_menu.recent_menu.actions()]
    assert all("BOLD" not in t or "&&amp;AMP" in t for t in recent)  # "&" is not a mnemonic
    assert fifo.opened == 0


def test_an_error_message_quoting_a_refused_value_is_shown_as_text(
    qtbot, make_window, tmp_path, fifo
):
    file = tmp_path / "bad.json"
    file.write_text(json.dumps(_with(BASE, ("results", 0, "config", "dtype"), payload(fifo))))
    window = make_window()
    assert not open_and_wait(qtbot, window, file)
    assert "BOLD" in window.banner.message
    assert_plain(window)
    assert fifo.opened == 0


def test_labels_tooltips_html_and_questions_show_markup_as_the_characters_it_is(qtbot):
    label = PlainLabel("<b>x</b>")
    assert label.textFormat().name == "PlainText"
    assert shown_text(tooltip("<b>x</b> &amp; y\nz")) == "<b>x</b> &amp; y\nz"
    assert shown_text(html_text("<i>a</i> & b"), label.textFormat().RichText) == "<i>a</i> & b"
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QMessageBox

    def answer() -> None:
        box = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox))
        assert box.textFormat().name == "PlainText" and "<b>" in box.text()
        box.button(QMessageBox.StandardButton.Yes).click()

    QTimer.singleShot(50, answer)
    assert ask(None, "t", "<b>replace</b>?")


def test_render_shows_an_img_of_dev_zero_as_text_at_normal_memory(tmp_path):
    doc = json.loads((ROOT / "resources" / "recorded" / "h200_sweep.json").read_text())
    doc["device"]["name"] = "<img src='/dev/zero'>"
    doc["meta"]["date"] = "<img src='/dev/zero'><b>BOLD</b>"
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(doc))
    out = tmp_path / "e.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    args = [sys.executable, str(ROOT / "main.py"), "render", "--seq", "16384", "--open"]
    proc = subprocess.Popen([*args, str(evil), "--out", str(out)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    watched = psutil.Process(proc.pid)
    peak = 0
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        if peak > 1.5e9:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    _, stderr = proc.communicate(timeout=30)
    assert peak < 1.5e9, f"RSS reached {peak / 1e9:.1f} GB"
    assert proc.returncode == 0, stderr.decode()
    assert out.stat().st_size > 0 and b"Traceback" not in stderr


def test_render_in_process_shows_markup_as_text(qtbot, tmp_path, fifo, monkeypatch):
    from app import launch
    from gpu.config import AttentionConfig

    doc = _with(BASE, ("device", "name"), payload(fifo))
    doc = _with(doc, ("meta", "date"), payload(fifo))
    file = tmp_path / "r.json"
    file.write_text(json.dumps(doc))
    seen = []
    from app.export import plot_images

    original = plot_images.render_image

    def capture(window, size):  # what the window shows when its picture is taken
        seen.append(shown_texts(window))
        assert_plain(window)
        return original(window, size)

    monkeypatch.setattr("app.export.plot_images.render_image", capture)
    code = launch.render_window(
        AttentionConfig(seq_len=4096), open_path=str(file), out=str(tmp_path / "r.png")
    )
    assert code == 0 and seen
    assert any("<b>BOLD</b>" in t for _, t in seen[0])
    assert fifo.opened == 0
