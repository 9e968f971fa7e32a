"""Results files: atomic, never silently overwritten, and bad files give a message, not a crash."""

from __future__ import annotations

import json
import os
import stat

import pytest

from gpu.algorithms import NAIVE, TILED
from gpu.backend import RunOptions
from gpu.config import AttentionConfig
from gpu.cpu_backend import CpuBackend
from gpu.recording import (
    Recording,
    RecordingError,
    atomic_write_bytes,
    load_recording,
    results_csv,
    save_recording,
)


@pytest.fixture(scope="module")
def recording() -> Recording:
    backend = CpuBackend()
    cfg = AttentionConfig(seq_len=64, heads=2, head_dim=16)
    opts = RunOptions(warmup=0, repeats=1, check=True)
    results = tuple(backend.run(cfg, a, opts) for a in (NAIVE, TILED))
    oom = backend.run(cfg.with_(seq_len=4096), NAIVE, RunOptions(budget_bytes=1000))
    return Recording(backend.device_info(), (*results, oom), {"command": "test"})


def test_a_recording_round_trips_to_equal_results(tmp_path, recording):
    path = tmp_path / "run.json"
    save_recording(recording, path)
    loaded = load_recording(path)
    assert loaded.results == recording.results
    assert loaded.device == recording.device
    assert loaded.results[-1].oom and loaded.results[-1].message


def test_existing_file_is_not_replaced_without_overwrite(tmp_path, recording):
    path = tmp_path / "run.json"
    path.write_text("precious")
    with pytest.raises(FileExistsError):
        save_recording(recording, path)
    assert path.read_text() == "precious"
    save_recording(recording, path, overwrite=True)
    assert load_recording(path).results == recording.results


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only folders")
def test_read_only_folder_gives_a_message_and_no_partial_file(tmp_path, recording):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(RecordingError, match="cannot write"):
            save_recording(recording, folder / "run.json")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(stat.S_IRWXU)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_a_folder_even_root_cannot_write_gives_a_message(recording):
    with pytest.raises(RecordingError, match="cannot write in /proc"):
        save_recording(recording, "/proc/run.json")


def test_missing_folder_gives_a_message(tmp_path, recording):
    with pytest.raises(RecordingError, match="cannot write"):
        save_recording(recording, tmp_path / "nope" / "run.json")


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    def boom(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="No space"):
        atomic_write_bytes(tmp_path / "x.json", b"{}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": "tilescope.results/1", "device": {', "not valid JSON"),
        ("[1, 2, 3]", "not a Tilescope results file"),
        ('{"schema": "tilescope.results/7", "results": []}', "newer Tilescope"),
        (
            '{"schema": "tilescope.results/1", "device": {"backend": "cpu"}, "results": []}',
            "malformed",
        ),
        (
            '{"schema": "tilescope.results/1", "device": {"backend": "cpu", "name": "x", '
            '"memory_total_bytes": 1, "memory_free_bytes": 1}, '
            '"results": [{"config": {"seq_len": -1}}]}',
            "seq_len",
        ),
    ],
)
def test_corrupt_truncated_or_future_files_give_a_message(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(RecordingError, match=message):
        load_recording(path)


def test_truncating_a_real_recording_anywhere_gives_a_message(tmp_path, recording):
    path = tmp_path / "run.json"
    save_recording(recording, path)
    text = path.read_text()
    for cut in range(0, len(text) - 2, max(1, len(text) // 40)):
        path.write_text(text[:cut])
        with pytest.raises(RecordingError):
            load_recording(path)


def test_csv_has_one_row_per_result_with_units(recording):
    lines = results_csv(recording.results).strip().splitlines()
    assert len(lines) == 1 + len(recording.results)
    assert "total_ms [ms]" in lines[0]


def test_json_is_plain_data(tmp_path, recording):
    path = tmp_path / "run.json"
    save_recording(recording, path)
    data = json.loads(path.read_text())
    assert data["schema"] == "tilescope.results/1" and len(data["results"]) == 3
