"""Saved sessions: they round-trip to equal results, reopen as a recorded run labelled with its
device and date, and a bad file gives a message and changes nothing in the window."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from app.state.model.cost_model_backend import CostModelBackend
from app.state.session import (
    SESSION_SCHEMA,
    Session,
    SessionError,
    app_version,
    load_session,
    make_session,
    save_session,
    without_recorded_flag,
)
from gpu.algorithms import ALGORITHMS, NAIVE, TILED, TILED_MMA, TILED_WGMMA
from gpu.config import AttentionConfig
from gpu.files.recording import Recording, save_recording
from gpu.files.trace import load_traces
from gpu.results import KernelTime

ROOT = Path(__file__).resolve().parents[1]
FAKE_DATE = "2001-02-03T04:05:06+00:00"
FAKE_DEVICE = "FAKE GPU 4 GB (synthetic test data)"
PEERS = ("sdpa_flash", "sdpa_cudnn", "sdpa_math")
#: How long a test waits for a condition before calling it a hang (a loaded machine is slow).
HANG_MS = 60_000


def synthetic_recording(lens=(256, 1024, 4096, 16384, 65536)) -> Recording:
    """A clearly fake recording in the format of bench/record_run.py: our four algorithms from
    the fake backend (a 4 GB device, so naive runs out of memory at large N) and made-up
    "PyTorch SDPA" peers, both causal and not."""
    algos = (NAIVE, TILED, TILED_MMA, TILED_WGMMA)
    fake = CostModelBackend(device=FAKE_DEVICE, algorithms=algos, memory_bytes=4 * 10**9)
    results = []
    for causal in (False, True):
        for n in lens:
            config = AttentionConfig(seq_len=n, causal=causal)
            results += [fake.run(config, a) for a in algos]
            tiled = fake.run(config, TILED)
            for i, peer in enumerate(PEERS):
                ms = tiled.total_ms * (0.5 + 0.4 * i)
                results.append(
                    replace(
                        tiled,
                        algorithm=peer,
                        kernel_times=(KernelTime("sdpa", ms),),
                        message="synthetic peer (test data, not a measurement)",
                    )
                )
    meta = {"command": "synthetic test data, not a measurement", "date": FAKE_DATE}
    return Recording(fake.device_info(), tuple(results), meta)


def write_synthetic(path: Path, **kwargs) -> Path:
    save_recording(synthetic_recording(**kwargs), path)
    return path


@pytest.fixture
def session() -> Session:
    rec = synthetic_recording(lens=(256, 1024))
    other = CostModelBackend(name="cpu", device="CPU (fake)").run(
        AttentionConfig(seq_len=512), TILED
    )
    entries = [("replay:" + FAKE_DEVICE + " (recorded)", None, r) for r in rec.results]
    entries.append(("cpu:CPU (fake)", 2 * 10**9, other))
    traces = load_traces(ROOT / "resources" / "traces" / "h200_trace.json")[:1]
    return make_session(
        AttentionConfig(seq_len=1024, causal=True),
        {"algorithms": [NAIVE, TILED], "backend": "recorded", "budget": "device", "theme": "light"},
        entries,
        "replay:" + FAKE_DEVICE + " (recorded)",
        rec.device,
        rec.meta,
        tuple(t.downsampled(4) for t in traces),
    )


# ------------------------------------------------------------------------------------ data


def test_a_session_round_trips_to_equal_results(tmp_path, session):
    path = tmp_path / "s.json"
    save_session(session, path)
    loaded = load_session(path)
    assert loaded.results == session.results
    assert loaded.entries == session.entries  # backend keys and budgets too
    assert loaded.config == session.config
    assert loaded.device == session.device
    assert loaded.controls == session.controls
    assert loaded.traces == session.traces and loaded.traces
    assert loaded == session


def test_the_json_names_schema_app_version_config_device_and_date(tmp_path, session):
    path = tmp_path / "s.json"
    save_session(session, path)
    data = json.loads(path.read_text())
    assert data["schema"] == SESSION_SCHEMA == "tilescope.session/1"
    assert data["app_version"] == app_version() != "unknown"
    assert data["config"]["causal"] is True
    assert data["device"]["name"] == FAKE_DEVICE
    assert data["meta"]["date"] == FAKE_DATE  # when measured, not when saved
    assert data["meta"]["saved"] and data["meta"]["source"]["command"].startswith("synthetic")
    assert {r["backend_key"] for r in data["results"]} == {e.backend_key for e in session.entries}


def test_saving_never_overwrites_silently_nor_leaves_a_partial_file(tmp_path, session):
    path = tmp_path / "s.json"
    path.write_text("precious")
    with pytest.raises(FileExistsError):
        save_session(session, path)
    assert path.read_text() == "precious"
    with pytest.raises(SessionError, match="cannot write"):
        save_session(session, "/proc/tilescope_session.json")  # even root cannot write there
    assert not os.path.exists("/proc/tilescope_session.json")
    assert os.listdir(tmp_path) == ["s.json"]


def _bad_files(good: str) -> list[tuple[str, str]]:
    data = json.loads(good)
    future = dict(data, schema="tilescope.session/2")
    bad_config = json.loads(good)
    bad_config["config"]["heads"] = -3
    bad_results = dict(data, results={"not": "a list"})
    bad_result = json.loads(good)
    bad_result["results"][0]["kernel_times"] = 7
    bad_trace = dict(data, traces=[{"schema": "nope"}])
    deep_meta = dict(
        data, meta={"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}
    )
    negative_budget = json.loads(good)
    negative_budget["results"][0]["budget_bytes"] = -5
    return [
        ("", "empty"),
        ("{", "not valid JSON"),
        (good[: len(good) // 2], "not valid JSON"),
        (good[:-3], "not valid JSON"),
        ("[1, 2]", "not a Tilescope session"),
        (json.dumps({"schema": "tilescope.results/1"}), "not a Tilescope session"),
        (json.dumps(future), "newer Tilescope"),
        (json.dumps(bad_config), "heads"),
        (json.dumps(bad_results), "results: expected `array`"),
        (json.dumps(dict(data, meta=[1, 2])), "meta: expected `object`"),
        (json.dumps(dict(data, meta=None)), "meta: expected `object`"),
        (json.dumps(deep_meta), "meta: nested deeper than 32 levels"),
        (json.dumps(dict(data, controls={"custom_gb": 10**400})), "controls.custom_gb"),
        (json.dumps(dict(data, controls={"algorithms": "naive"})), "controls.algorithms"),
        (json.dumps(dict(data, device={**data["device"], "name": 7})), "device.name"),
        (json.dumps(negative_budget), r"results\[0\].budget_bytes"),
        (json.dumps(dict(data, schema="tilescope.session/²")), "not a Tilescope session"),
        (json.dumps(bad_result), "malformed"),
        (json.dumps(bad_trace), "trace"),
    ]


def test_corrupt_truncated_future_or_malformed_sessions_give_a_message(tmp_path, session):
    good = tmp_path / "good.json"
    save_session(session, good)
    for i, (content, message) in enumerate(_bad_files(good.read_text())):
        path = tmp_path / f"bad{i}.json"
        path.write_text(content)
        with pytest.raises(SessionError, match=message):
            load_session(path)


# ------------------------------------------------------------------------------------ window


def _measure(qtbot, window, lens=(512, 1024, 2048)):
    for n in lens:
        window.controls.set_seq_len(n)
        qtbot.waitUntil(
            lambda n=n: all(
                window.store.get(window.config.with_(seq_len=n), a, window.backend.key)
                for a in window.controls.algorithms()
            ),
            timeout=HANG_MS,
        )


def test_a_saved_session_reopens_with_equal_results_config_and_controls(
    qtbot, make_window, tmp_path
):
    window = make_window(CostModelBackend(device="NVIDIA H200", memory_bytes=141 * 10**9))
    window.controls.set_checked_algorithms((NAIVE, TILED))
    _measure(qtbot, window)
    window.controls.set_seq_len(1024)
    shown = without_recorded_flag(window.store.results(window.backend.key))
    path = str(tmp_path / "mine.json")
    with qtbot.waitSignal(window.file_menu.sessionSaved, timeout=HANG_MS):
        assert window.file_menu.save_session(path)  # written off the GUI thread
    config = window.config

    again = make_window(CostModelBackend(name="cpu", device="another machine"))
    with qtbot.waitSignal(again.file_menu.fileOpened, timeout=HANG_MS):
        assert again.file_menu.open_file(path)  # read off the GUI thread
    qtbot.waitUntil(
        lambda: again.backend is not None and again.backend.info.backend == "replay",
        timeout=HANG_MS,
    )
    replayed = again.store.results(again.backend.key)
    assert all(r.recorded for r in replayed)
    assert sorted(without_recorded_flag(replayed), key=repr) == sorted(shown, key=repr)
    assert again.config == config
    assert again.controls.algorithms() == (NAIVE, TILED)
    assert again.controls.seq_scale == (512, 1024, 2048)  # the slider snaps to the saved N
    # The plots redraw within a frame of the replay starting: until then they show what the
    # window measured before the file opened.
    qtbot.waitUntil(
        lambda: again.plots.memory.series["measured_naive"][0] == [512, 1024, 2048],
        timeout=HANG_MS,
    )
    assert again.run_status.text().startswith("Replayed: H200, ")
    assert again.readouts.backend.text() == f"backend: replay of {os.path.basename(path)}"
    assert again.file_menu.recent_files()[0] == os.path.abspath(path)


def test_main_open_starts_the_app_on_a_saved_session(qtbot, make_window, tmp_path, session):
    path = tmp_path / "s.json"
    save_session(session, path)
    window = make_window(open_path=str(path))
    assert window.backend.info.backend == "replay"
    assert window.config == session.config  # its own family and N, not the recording's
    assert window.controls.seq_scale == (256, 1024)
    assert window.theme == "light"
    # The other backend's result is cached again under its own key and budget.
    assert (
        window.store.get(AttentionConfig(seq_len=512), TILED, "cpu:CPU (fake)", 2 * 10**9)
        is not None
    )
    assert "2001-02-03" in window.run_status.text()


def _visible_state(window) -> tuple:
    """What opening a file could change: config, results, backend, algorithms, theme, N scale."""
    return (
        window.config,
        len(window.store),
        window.backend.key,
        window.controls.backend_choice(),
        window.controls.recorded_path,
        window.controls.algorithms(),
        window.theme,
        window.controls.seq_scale,
    )


def test_a_bad_session_gives_a_message_and_changes_nothing(qtbot, make_window, tmp_path, session):
    window = make_window()
    _measure(qtbot, window, lens=(512,))
    good = tmp_path / "good.json"
    save_session(session, good)
    before = _visible_state(window)
    for i, (content, _message) in enumerate(_bad_files(good.read_text())):
        path = tmp_path / f"bad{i}.json"
        path.write_text(content)
        window.banner.dismiss()
        with qtbot.waitSignal(window.file_menu.openFailed, timeout=HANG_MS):
            window.file_menu.open_file(str(path))
        assert window.banner.message.startswith(f"Could not open {path.name}: ")
        assert len(window.banner.message) > len(f"Could not open {path.name}: {path}") + 5
        qtbot.wait(20)
        assert _visible_state(window) == before, content[:40]
    assert window.file_menu.recent_files() == []


def test_opening_a_bad_file_at_start_says_so_and_starts_the_usual_backend(make_window, tmp_path):
    bad = tmp_path / "future.json"
    bad.write_text(json.dumps({"schema": "tilescope.session/7"}))
    window = make_window(open_path=str(bad))
    assert "future.json" in window.banner.message and "newer Tilescope" in window.banner.message
    assert window.backend.info.backend == "fake"  # what the settings say, not a replay


def test_saving_asks_before_replacing_a_file(qtbot, make_window, tmp_path):
    window = make_window()
    path = tmp_path / "s.json"
    path.write_text("precious")
    asked = []
    window.file_menu.confirm_overwrite = lambda p: asked.append(p) or False
    assert not window.file_menu.save_session(str(path))
    assert asked == [str(path)] and path.read_text() == "precious"
    window.file_menu.confirm_overwrite = lambda p: True
    with qtbot.waitSignal(window.file_menu.sessionSaved, timeout=HANG_MS):
        assert window.file_menu.save_session(str(path))
    assert load_session(path).config == window.config


def test_save_session_dialog_and_recent_files(qtbot, make_window, tmp_path):
    window = make_window()
    fm = window.file_menu
    fm.ask_save_path = lambda title, filters, suggested: str(tmp_path / "via_dialog")
    with qtbot.waitSignal(fm.sessionSaved, timeout=HANG_MS):
        assert fm.save_session_dialog()
    saved = tmp_path / "via_dialog.json"  # the extension is added
    assert load_session(saved).config == window.config
    other = write_synthetic(tmp_path / "rec.json")
    with qtbot.waitSignal(fm.fileOpened, timeout=HANG_MS):
        assert fm.open_file(str(other))
    assert fm.recent_files()[:2] == [str(other), str(saved)]
    saved.unlink()
    fm.fill_recent_menu()
    actions = [a for a in fm.recent_menu.actions() if not a.isSeparator()]
    assert [a.isEnabled() for a in actions[:2]] == [True, False]  # a missing file is greyed
    assert "(missing)" in actions[1].toolTip()
    actions[-1].trigger()  # "Clear recent files"
    assert fm.recent_files() == []


def test_no_reference_peer_becomes_one_of_our_algorithms(qtbot, make_window, tmp_path):
    path = write_synthetic(tmp_path / "rec.json")
    window = make_window(open_path=str(path))
    assert set(window.controls.algorithms()) <= set(ALGORITHMS)
    labels = window.plots.timing.labels
    # The recorded results reach the plots in the window's next turn after the open.
    qtbot.waitUntil(lambda: "reference_sdpa_flash" in labels, timeout=HANG_MS)
    assert not any(p in window.plots.timing.items for p in (f"measured_{x}" for x in PEERS))
    assert labels["reference_sdpa_flash"] == "PyTorch SDPA flash (recorded)"
    assert labels["reference_sdpa_cudnn"] == "PyTorch SDPA cuDNN (recorded)"
    assert labels["reference_sdpa_math"] == "PyTorch SDPA math (recorded)"
    style = window.plots.timing.styles["reference_sdpa_flash"]
    assert style.dash != style.dash.SolidLine and style.color not in ALGORITHMS
