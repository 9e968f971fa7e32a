"""Files in and out: writes land whole or not at all, keep links and modes, leave no temporary
file behind (not even on SIGTERM or SIGINT); reads take regular UTF-8 JSON files of bounded size
and refuse everything else at once, with one line."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from gpu.errors import FileReadError, FileWriteError
from gpu.files import fileio
from gpu.files.fileio import (
    MAX_READ_BYTES,
    atomic_write_bytes,
    check_writable,
    commit_partial_file,
    new_partial_file,
    partial_files,
    read_bytes,
    read_json,
)

ROOT = Path(__file__).resolve().parents[1]


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".part" in p.name]


# ------------------------------------------------------------------------------------ writing


def test_a_write_lands_whole_and_leaves_no_temporary_file(tmp_path):
    atomic_write_bytes(tmp_path / "a.json", b'{"x": 1}')
    assert (tmp_path / "a.json").read_bytes() == b'{"x": 1}'
    assert _leftovers(tmp_path) == [] and partial_files() == ()


def test_an_existing_file_is_replaced_only_when_asked(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("precious")
    with pytest.raises(FileExistsError, match="--force"):
        atomic_write_bytes(path, b"new")
    assert path.read_text() == "precious"
    atomic_write_bytes(path, b"new", overwrite=True)
    assert path.read_text() == "new"


def test_saving_over_a_symlink_keeps_the_link_and_writes_its_target(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    atomic_write_bytes(link, b"new", overwrite=True)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"
    assert _leftovers(tmp_path) == []


def test_overwriting_a_private_file_keeps_its_mode(tmp_path):
    path = tmp_path / "secret.json"
    path.write_text("old")
    path.chmod(0o600)
    atomic_write_bytes(path, b"new", overwrite=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == "new"


def test_a_new_file_gets_the_usual_mode_not_the_temporary_files(tmp_path):
    atomic_write_bytes(tmp_path / "a.json", b"x")
    umask = os.umask(0o22)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o666 & ~umask


def test_a_failed_write_removes_the_temporary_file_and_says_why(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(FileWriteError, match=r"cannot write .*x.json: No space left on device"):
        atomic_write_bytes(tmp_path / "x.json", b"{}")
    assert list(tmp_path.iterdir()) == [] and partial_files() == ()


def test_a_failed_rename_removes_the_temporary_file(tmp_path, monkeypatch):
    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(FileWriteError, match="Permission denied"):
        atomic_write_bytes(tmp_path / "x.json", b"{}")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_or_a_device_in_the_way_is_refused(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(FileWriteError, match="it is a folder"):
        atomic_write_bytes(tmp_path / "dir.json", b"x", overwrite=True)
    with pytest.raises(FileWriteError, match="not a regular file"):
        atomic_write_bytes("/dev/null", b"x", overwrite=True)


def test_check_writable_finds_every_problem_before_anything_is_written(tmp_path):
    assert check_writable(tmp_path / "new.json") == tmp_path / "new.json"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileWriteError, match="No such file or directory"):
        check_writable(tmp_path / "missing" / "x.json")
    (tmp_path / "folder").mkdir()
    with pytest.raises(FileWriteError, match="folder"):
        check_writable(tmp_path / "folder", overwrite=True)
    (tmp_path / "old.json").write_text("x")
    with pytest.raises(FileExistsError):
        check_writable(tmp_path / "old.json")
    check_writable(tmp_path / "old.json", overwrite=True)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only folders")
def test_check_writable_refuses_a_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(FileWriteError, match="Permission denied"):
            check_writable(folder / "x.json")
    finally:
        folder.chmod(stat.S_IRWXU)


def test_a_streamed_file_is_registered_until_committed(tmp_path):
    tmp = new_partial_file(tmp_path / "anim.gif", ".gif")
    assert tmp in partial_files() and tmp.endswith(".part.gif")
    Path(tmp).write_bytes(b"GIF89a")
    commit_partial_file(tmp, tmp_path / "anim.gif")
    assert partial_files() == () and (tmp_path / "anim.gif").read_bytes() == b"GIF89a"


_WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from gpu.files import fileio
    fileio.remove_partial_files_on_signals()
    tmp = fileio.new_partial_file({target!r})
    try:
        print(tmp, flush=True)
        while True:
            time.sleep(0.05)
    except KeyboardInterrupt:
        sys.exit(130)
    """
)


def _writer_holding_a_partial_file(tmp_path: Path, target: Path) -> tuple[subprocess.Popen, Path]:
    script = _WRITER.format(root=str(ROOT), target=str(target))
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    return proc, Path(proc.stdout.readline().strip())


def test_a_sigkilled_writers_partial_file_goes_with_the_next_write_of_its_target(tmp_path):
    target = tmp_path / "out.json"
    proc, tmp = _writer_holding_a_partial_file(tmp_path, target)
    assert f".out.json.{proc.pid}." in tmp.name  # tagged with its writer's pid
    proc.send_signal(signal.SIGKILL)  # nothing in the writer can clean up
    proc.wait(timeout=30)
    assert tmp.exists()
    atomic_write_bytes(target, b"{}")
    assert target.read_bytes() == b"{}" and _leftovers(tmp_path) == []


def test_a_living_writers_partial_file_is_left_alone(tmp_path):
    target = tmp_path / "out.json"
    proc, tmp = _writer_holding_a_partial_file(tmp_path, target)
    try:
        atomic_write_bytes(target, b"{}")
        assert tmp.exists()  # another process is still writing it
        assert fileio.remove_leftovers(target) == []
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert fileio.remove_leftovers(target) == [str(tmp)]


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_a_write_leaves_no_partial_file(tmp_path, signum, status):
    script = _WRITER.format(root=str(ROOT), target=str(tmp_path / "out.json"))
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    tmp = proc.stdout.readline().strip()
    assert Path(tmp).exists()
    proc.send_signal(signum)
    assert proc.wait(timeout=30) == status
    assert not Path(tmp).exists() and _leftovers(tmp_path) == []


# ------------------------------------------------------------------------------------ reading


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(FileReadError, match="not a regular file"):
        read_json(fifo)
    assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_refused_without_reading_them(device):
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    with pytest.raises(FileReadError, match="not a regular file"):
        read_bytes(device)


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(FileReadError, match="folder"):
        read_json(tmp_path)


def test_a_missing_file_names_itself(tmp_path):
    with pytest.raises(FileReadError, match=r"cannot read .*nope.json: No such file"):
        read_json(tmp_path / "nope.json")


def test_a_file_over_the_limit_is_refused_before_reading_naming_the_limit(tmp_path):
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(MAX_READ_BYTES + 1)  # sparse: no disk used
    with pytest.raises(FileReadError, match="larger than the 256 MiB limit"):
        read_bytes(big)
    small = tmp_path / "small.json"
    small.write_bytes(b"x" * 100)
    with pytest.raises(FileReadError, match="larger than the 10 bytes limit"):
        read_bytes(small, limit=10)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "is empty"),
        (b"  \n", "is empty"),
        ('{"a": 1}'.encode("utf-16"), "UTF-16 or UTF-32"),
        ('{"a": 1}'.encode("utf-16-le"), "UTF-16 or UTF-32"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not UTF-8 text"),
        (b"\xff\xd8\xff\xe0 binary", "UTF-16 or UTF-32|not UTF-8"),
        (b'{"a": NaN}', "not valid JSON"),
        (b'{"a": 1e400}', "not valid JSON"),
        (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
        (b'{"a": ' * 5000 + b"1" + b"}" * 5000, "nested too deeply"),
        (b'{"a": [1, 2', "not valid JSON"),
    ],
    ids=[
        "empty",
        "blank",
        "utf16_bom",
        "utf16_no_bom",
        "png",
        "jpeg",
        "nan",
        "huge_float",
        "deep_list",
        "deep_object",
        "truncated",
    ],
)
def test_files_that_are_not_utf8_json_get_one_clear_line(tmp_path, data, message):
    path = tmp_path / "x.json"
    path.write_bytes(data)
    with pytest.raises(FileReadError, match=message) as info:
        read_json(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "x.json"
    path.write_bytes(b'\xef\xbb\xbf{"a": [1, 2.5, "t"]}')
    assert read_json(path) == {"a": [1, 2.5, "t"]}


def test_the_stated_limit_is_the_enforced_one():
    assert fileio.MAX_READ_LABEL == "256 MiB" and MAX_READ_BYTES == 256 * 2**20


def test_a_large_array_member_is_split_into_pieces_that_hold_every_item_in_order():
    items = [{"i": i, "pad": "x" * 50} for i in range(2000)]
    data = json.dumps({"schema": "s", "results": items, "small": [1, 2]}).encode()
    members = fileio.split_json_members(data, "f.json", piece_bytes=10_000)
    assert isinstance(members["results"], fileio.RawArray)
    assert len(members["results"].pieces) > 10
    assert all(len(p) < 10_000 + 200 for p in members["results"].pieces)
    assert fileio.decode_member(members["results"], "f.json") == items
    assert fileio.decode_member(members["small"], "f.json") == [1, 2]  # small: kept whole


def _raw_leaves(value):  # type: ignore[no-untyped-def]
    if isinstance(value, fileio.RawArray):
        for piece in value.pieces:
            yield from _raw_leaves(piece)
    elif isinstance(value, fileio.RawObject):
        for _key, member in value.members:
            yield from _raw_leaves(member)
    else:
        yield value


def test_an_item_too_large_for_a_piece_is_split_member_by_member_down_to_its_arrays():
    """A result whose ring run holds 200,000 events was one piece of 19 MB: decoding it held
    the interpreter (and the window's GUI thread) for 390 ms."""
    events = [{"device": d, "step": s, "start_ms": s + 0.5} for d in range(40) for s in range(40)]
    big = {"algorithm": "ring", "ring": {"devices": 40, "timeline": events}, "x": [1] * 5}
    items = [{"i": 0}, big, {"i": 2}]
    data = json.dumps({"schema": "s", "results": items}).encode()
    members = fileio.split_json_members(data, "f.json", piece_bytes=2_000)
    pieces = members["results"].pieces
    assert isinstance(pieces[1], fileio.RawObject)  # the large item alone, split
    assert all(len(leaf) < 2_000 + 200 for leaf in _raw_leaves(members["results"]))
    assert fileio.decode_member(members["results"], "f.json") == items

    from gpu.files.schema import check_each

    class Item(msgspec.Struct):
        algorithm: str = ""
        i: int = 0
        ring: dict | None = None
        x: list | None = None

    built = check_each(members["results"], Item, "f.json", "results", lambda d: d)
    assert built == items


def test_a_bad_item_of_a_split_array_is_named_by_its_index_in_the_whole_array():
    from gpu.files.schema import SchemaError, check_each

    items = [{"n": i} for i in range(3000)]
    items[2500] = {"n": "two thousand five hundred"}
    data = json.dumps({"results": items}).encode()
    members = fileio.split_json_members(data, "f.json", piece_bytes=4_000)
    assert len(members["results"].pieces) > 3

    class Item(msgspec.Struct):
        n: int

    with pytest.raises(SchemaError, match=r"results\[2500\]"):
        check_each(members["results"], Item, "f.json", "results", lambda d: d)
