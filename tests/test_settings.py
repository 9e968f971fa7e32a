"""Saved settings: a damaged settings file never stops the app from starting, and the dialogs
remember their folders and suggest names that say the config."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings

from app.kit import settings as stored
from app.state.model.cost_model_backend import CostModelBackend
from app.window.file_menu import KINDS, ExportRequest
from app.window.main_window import MainWindow
from gpu.config import AttentionConfig

#: What a damaged value can look like in the file: text where bytes were, a byte array cut
#: short, a variant Qt cannot decode, a list, nothing, numbers out of any range.
CORRUPTIONS = (
    "hello",
    r"@ByteArray(\x1\xd9\xd0",
    r"@Variant(\0\0\0\x7f\0\0\0\x1)",
    "1, 2, 3",
    "",
    "1e999",
    "-99999999999999999999999",
)


#: How long a start waits for its backend before calling it a hang.
HANG_MS = 60_000


def _start(qtbot, path: Path) -> MainWindow:
    """A window started from the settings file at `path`, its backend ready."""
    window = MainWindow(
        backend_factory=lambda name: CostModelBackend(),
        settings=QSettings(str(path), QSettings.Format.IniFormat),
    )
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.backend is not None, timeout=HANG_MS)  # a hang guard only
    return window


@pytest.fixture(scope="module")
def saved(qapp, tmp_path_factory) -> Path:
    """A settings file as the app writes it, every key used (recent files, both folders)."""
    folder = tmp_path_factory.mktemp("settings")
    path = folder / "saved.ini"
    settings = QSettings(str(path), QSettings.Format.IniFormat)
    window = MainWindow(backend_factory=lambda name: CostModelBackend(), settings=settings)
    window.controls.set_checked_algorithms(("naive",))  # the user's own pick is saved
    window.file_menu.add_recent(str(folder / "a, b.json"))
    window.file_menu.add_recent(str(folder / "c.json"))
    window.file_menu._remember_folder("files/folder", str(folder / "s.json"))
    window.file_menu._remember_folder("export/folder", str(folder / "x.png"))
    window.close()
    window.deleteLater()
    return path


def _keys(path: Path) -> list[str]:
    return QSettings(str(path), QSettings.Format.IniFormat).allKeys()


def _with_value(text: str, key: str, value: str) -> str:
    group, name = key.split("/")
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("["):
            inside = line == f"[{group}]"
        elif inside and line.split("=", 1)[0] == name:
            line = f"{name}={value}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_every_key_the_app_writes_is_type_checked_when_read(saved):
    assert sorted(_keys(saved)) == sorted(stored.KEYS)


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_every_key_corrupted_at_once_still_starts_the_app(qtbot, saved, tmp_path, corruption):
    text = saved.read_text()
    for key in _keys(saved):
        text = _with_value(text, key, corruption)
    path = tmp_path / "all.ini"
    path.write_text(text)
    window = _start(qtbot, path)  # started, backend ready, no exception in any slot
    fresh = _start(qtbot, tmp_path / "none.ini")
    assert window.config == fresh.config  # every corrupted value fell back to its default


def test_each_key_corrupted_alone_is_ignored_with_one_log_line_and_the_rest_restored(
    qtbot, saved, tmp_path, caplog
):
    text = saved.read_text()
    for key in _keys(saved):
        # Text where bytes were, a cut byte array where text was: each key its wrong kind.
        corruption = "hello" if key.startswith("window/") else CORRUPTIONS[1]
        path = tmp_path / "one.ini"
        path.write_text(_with_value(text, key, corruption))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tilescope.settings"):
            window = _start(qtbot, path)
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) <= 1, lines
        if lines:
            assert lines[0].startswith(f"ignored the setting {key}: ")
        elif key.startswith("window/") or key in ("view/explain", "controls/causal"):
            pytest.fail(f"{key}={corruption} was taken")  # not its kind: must be refused
        if key != "controls/heads":  # the other values still apply
            assert window.config.heads == 12
        window.close()


def test_a_settings_file_cut_inside_its_byte_arrays_still_starts_the_app(qtbot, saved, tmp_path):
    text = saved.read_text()
    starts = [m.end() for m in re.finditer(r"@ByteArray\(", text)]
    assert len(starts) == 2  # the window's geometry and its dock layout
    cuts = [s + k for s in starts for k in (0, 1, 5, 20)]
    cuts += [text.index(")", s) for s in starts]  # just before the closing parenthesis
    for cut in cuts:
        path = tmp_path / "cut.ini"
        path.write_text(text[:cut])
        _start(qtbot, path).close()


def test_a_bad_window_geometry_is_logged_once(qtbot, saved, tmp_path, caplog):
    path = tmp_path / "geometry.ini"
    path.write_text("[window]\ngeometry=hello\n")
    with caplog.at_level(logging.WARNING, logger="tilescope.settings"):
        _start(qtbot, path)
    assert [r.getMessage() for r in caplog.records] == [
        "ignored the setting window/geometry: not saved window data (str)"
    ]


# ------------------------------------------------------------------------ folders and names


def test_exports_suggest_the_config_and_remember_the_last_folder(qtbot, make_window, tmp_path):
    window = make_window()
    window.controls.set_config(AttentionConfig(seq_len=16384, heads=12, head_dim=64))
    fm = window.file_menu
    dialog = fm.export_dialog("plots_png")
    name = Path(dialog.path.text()).name
    assert name == "tilescope_h12_d64_fp16_N16384.png"
    dialog.plot.setCurrentIndex(dialog.plot.findData("timingPlot"))
    assert Path(dialog.path.text()).name == "tilescope_h12_d64_fp16_N16384_time.png"
    dialog.kind.setCurrentIndex(dialog.kind.findData("gif"))
    assert Path(dialog.path.text()).name == "tilescope_h12_d64_fp16_N16384_tiles.gif"
    dialog.close()

    out = tmp_path / "exports"
    out.mkdir()
    with qtbot.waitSignal(fm.exported, timeout=5000):
        fm.export(fm_request("plots_csv", out / "mine.csv"))
    window.controls.set_config(AttentionConfig(seq_len=2048, batch=4, causal=True))
    again = fm.export_dialog("plots_svg")
    assert again.path.text() == str(out / "tilescope_h12_d64_fp16_N2048_B4_causal.svg")
    again.close()
    # The folder outlives the window: it is a setting.
    later = make_window()
    assert Path(later.file_menu.suggested_name(KINDS["plots_png"])).parent == out


def fm_request(kind: str, path: Path) -> ExportRequest:
    return ExportRequest(kind=kind, path=str(path))


def test_the_two_csv_kinds_suggest_names_of_their_own(qtbot, make_window):
    window = make_window()
    window.controls.set_config(AttentionConfig(seq_len=16384, heads=12, head_dim=64))
    dialog = window.file_menu.export_dialog("results_csv")
    results = Path(dialog.path.text()).name
    dialog.kind.setCurrentIndex(dialog.kind.findData("plots_csv"))
    series = Path(dialog.path.text()).name
    dialog.close()
    assert results == "tilescope_h12_d64_fp16_N16384_results.csv"
    assert series == "tilescope_h12_d64_fp16_N16384_series.csv"


def test_a_first_export_goes_to_the_users_pictures_or_documents_not_the_program(
    qtbot, make_window, tmp_path, monkeypatch
):
    home = tmp_path / "home"
    for sub in ("Pictures", "Documents"):
        (home / sub).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))  # no user-dirs.dirs there
    window = make_window()
    fm = window.file_menu
    recorded = Path(__file__).parent.parent / "resources" / "recorded"
    fm._remember_folder("files/folder", str(recorded / "h200_sweep.json"))  # opened from there
    kinds = ("plots_png", "gif", "plots_csv")
    folders = {k: Path(fm.suggested_name(KINDS[k])).parent for k in kinds}
    assert folders == {
        "plots_png": home / "Pictures", "gif": home / "Pictures", "plots_csv": home / "Documents"
    }  # fmt: skip
    (home / "Pictures").rmdir()
    assert Path(fm.suggested_name(KINDS["plots_png"])).parent == home  # no Pictures: home
    out = tmp_path / "mine"
    out.mkdir()
    with qtbot.waitSignal(fm.exported, timeout=5000):
        fm.export(fm_request("plots_csv", out / "series.csv"))
    assert Path(fm.suggested_name(KINDS["gif"])).parent == out  # then the last folder, any kind


def test_sessions_are_suggested_by_config_in_the_last_files_folder(qtbot, make_window, tmp_path):
    window = make_window()
    fm = window.file_menu
    asked = []
    fm.ask_save_path = lambda title, filters, suggested: asked.append(suggested) or ""
    fm.save_session_dialog()
    assert Path(asked[-1]).name == "tilescope_h12_d64_fp16_N1024_session.json"
    fm.ask_save_path = lambda title, filters, suggested: str(tmp_path / "kept.json")
    with qtbot.waitSignal(fm.sessionSaved, timeout=5000):
        fm.save_session_dialog()
    fm.ask_save_path = lambda title, filters, suggested: asked.append(suggested) or ""
    fm.save_session_dialog()
    assert Path(asked[-1]).parent == tmp_path
    opened = []
    fm.ask_open_path = lambda title, filters, folder: opened.append(folder) or ""
    fm.open_dialog()
    assert opened == [str(tmp_path)]
