"""The window's settings: the GUI thread reads and writes memory, a thread of their own writes
the file, and a close waits until it is written."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QByteArray, QSettings

from app.kit import settings_store
from app.kit.settings_store import SettingsStore


def _file(tmp_path, **values) -> QSettings:
    s = QSettings(str(tmp_path / "t.ini"), QSettings.Format.IniFormat)
    for key, value in values.items():
        s.setValue(key.replace("__", "/"), value)
    s.sync()
    return s


def _on_disk(tmp_path) -> QSettings:
    return QSettings(str(tmp_path / "t.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def slow_disk(monkeypatch):
    """Writers whose sync waits until `release` is set; `inside` is set while one waits."""
    inside, release = threading.Event(), threading.Event()

    class SlowSettings(QSettings):
        def sync(self) -> None:
            inside.set()
            release.wait(30)  # a bound for a broken test only
            inside.clear()
            super().sync()

    monkeypatch.setattr(settings_store, "QSettings", SlowSettings)
    yield inside, release
    release.set()


def test_the_store_reads_what_the_file_held_when_it_was_made(tmp_path):
    store = SettingsStore(_file(tmp_path, view__theme="light", controls__heads=12))
    assert store.value("view/theme") == "light"
    assert store.value("controls/heads") in (12, "12")
    assert store.contains("controls/heads") and not store.contains("controls/dtype")
    assert store.value("controls/dtype", "fp16") == "fp16"
    assert store.allKeys() == ["controls/heads", "view/theme"]


def test_a_write_on_a_slow_disk_never_waits_on_the_gui_thread(tmp_path, slow_disk):
    inside, release = slow_disk
    store = SettingsStore(_file(tmp_path))
    store.setValue("export/folder", "/first")
    assert inside.wait(10)  # the writer is inside its sync, held there
    store.setValue("export/folder", "/second")
    store.setValue("recent/files", ["/a.json", "/b.json"])
    assert store.value("export/folder") == "/second"
    assert store.value("recent/files") == ["/a.json", "/b.json"]
    assert inside.is_set()  # all of that returned while the file was still being written
    release.set()
    assert store.sync()
    disk = _on_disk(tmp_path)
    assert disk.value("export/folder") == "/second"
    assert disk.value("recent/files") == ["/a.json", "/b.json"]


def test_sync_gives_up_after_its_timeout_on_a_disk_that_hangs(tmp_path, slow_disk, caplog):
    inside, release = slow_disk
    store = SettingsStore(_file(tmp_path))
    store.setValue("view/theme", "light")
    assert inside.wait(10)
    assert not store.sync(timeout=0.05)
    assert "was not written" in caplog.text
    release.set()
    assert store.sync()
    assert _on_disk(tmp_path).value("view/theme") == "light"


def test_groups_removals_and_byte_arrays_reach_the_file_as_qsettings_writes_them(tmp_path):
    store = SettingsStore(_file(tmp_path, recent__files=["/a"], view__theme="dark"))
    store.beginGroup("controls")
    store.setValue("heads", 16)
    store.endGroup()
    store.setValue("window/geometry", QByteArray(b"\x01\x02\xff"))
    store.remove("recent")
    assert store.value("controls/heads") == 16 and not store.contains("recent/files")
    assert store.sync()
    disk = _on_disk(tmp_path)
    assert disk.value("controls/heads") in (16, "16")
    assert disk.value("window/geometry") == QByteArray(b"\x01\x02\xff")
    assert not disk.contains("recent/files") and disk.value("view/theme") == "dark"


def test_a_file_that_cannot_be_written_is_logged_and_the_values_stay_in_memory(tmp_path, caplog):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the settings' folder would be")
    store = SettingsStore(QSettings(str(blocker / "t.ini"), QSettings.Format.IniFormat))
    store.setValue("view/theme", "light")
    assert store.sync()
    assert store.value("view/theme") == "light"
    assert "could not write the settings file" in caplog.text


def test_an_idle_writer_thread_ends_and_a_later_write_starts_another(tmp_path, monkeypatch):
    monkeypatch.setattr(settings_store, "IDLE_S", 0.05)
    store = SettingsStore(_file(tmp_path))
    store.setValue("view/theme", "light")
    assert store.sync()
    first = store._thread
    if first is not None:
        first.join(10)
    assert store._thread is None
    store.setValue("view/theme", "dark")
    assert store.sync()
    assert _on_disk(tmp_path).value("view/theme") == "dark"


def test_the_window_saves_its_settings_through_the_store_and_they_are_on_disk_when_it_closes(
    qtbot, tmp_path
):
    from app.window.main_window import MainWindow
    from gpu.backends.model_backend import CostModelBackend

    window = MainWindow(backend_factory=lambda name: CostModelBackend(), settings=_file(tmp_path))
    qtbot.addWidget(window)
    assert isinstance(window.settings, SettingsStore)
    window.file_menu.add_recent(str(tmp_path / "run.json"))
    window.close()
    disk = _on_disk(tmp_path)
    assert disk.value("recent/files") in ([str(tmp_path / "run.json")], str(tmp_path / "run.json"))
    assert disk.contains("window/geometry") and disk.contains("controls/seq_len")


def _swollen_file(tmp_path, junk: int) -> QSettings:
    """The app's settings plus `junk` keys it never wrote, in a group of their own and inside
    one of its groups, and a value of the wrong kind (written as text, as an editor would)."""
    lines = ["[controls]", "seq_len=2048", "heads=ten", "stray=1", "[view]", "theme=light"]
    lines += ["[junk]", *(f"k{i:07d}={'x' * 60}" for i in range(junk))]
    (tmp_path / "t.ini").write_text("\n".join(lines) + "\n")
    return _on_disk(tmp_path)


def test_a_file_swollen_with_keys_the_app_never_wrote_is_rewritten_with_its_keys_alone(
    tmp_path, caplog
):
    """600,000 junk keys (50 MB) made every write of the file take seconds: a close waited
    for it and gave up ("was not written within 2.0 s"), and the program ended 10 s later."""
    from app.kit.settings import KEYS, read

    store = SettingsStore(_swollen_file(tmp_path, junk=100_000), KEYS)
    assert (tmp_path / "t.ini").stat().st_size > 5_000_000
    assert store.sync()
    assert read(store, "controls/seq_len") == 2048 and read(store, "view/theme") == "light"
    assert read(store, "controls/heads") is None and "ignored the setting controls/heads" in (
        caplog.text
    )  # refused as before, and left out of the file
    disk = _on_disk(tmp_path)
    assert sorted(disk.allKeys()) == ["controls/seq_len", "view/theme"]
    assert (tmp_path / "t.ini").stat().st_size < 1000
    store.setValue("controls/heads", 16)
    assert store.sync(timeout=1.0) and "was not written" not in caplog.text


def test_a_tidy_file_is_left_as_it_is(tmp_path):
    from app.kit.settings import KEYS

    _file(tmp_path, view__theme="light", controls__heads=12)
    before = (tmp_path / "t.ini").stat().st_mtime_ns
    store = SettingsStore(_on_disk(tmp_path), KEYS)
    assert store.sync()
    assert (tmp_path / "t.ini").stat().st_mtime_ns == before  # nothing was written


def test_the_window_keeps_its_settings_file_to_its_own_keys(qtbot, tmp_path):
    from app.kit.settings import KEYS
    from app.window.main_window import MainWindow
    from gpu.backends.model_backend import CostModelBackend

    settings = _swollen_file(tmp_path, junk=20_000)
    window = MainWindow(backend_factory=lambda name: CostModelBackend(), settings=settings)
    qtbot.addWidget(window)
    window.close()
    keys = _on_disk(tmp_path).allKeys()
    assert set(keys) <= set(KEYS) and "controls/seq_len" in keys
    assert (tmp_path / "t.ini").stat().st_size < 20_000
