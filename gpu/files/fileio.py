"""Files in and out: atomic writes that never leave half a file, and one safe way to read.

Writing (recordings, sessions, traces, exports): the bytes go to a temporary ``.NAME.<pid>.*.part``
file in the target's own folder, are flushed and fsync'ed, then renamed over the target with
`os.replace`, so a reader sees the old file or the new one, never a mix. A target that exists is
replaced only when asked (`overwrite=True`); a symlink keeps being a link (its target is written),
and a replaced file keeps its permission bits (a 0600 file stays 0600). Any failure removes the
temporary file and raises `FileWriteError` naming the file and the cause.

Temporary files in flight are registered, so `remove_partial_files_on_signals()` (the CLI calls
it; the app may too) can delete them when SIGTERM or SIGINT arrives or the process exits, before
the default action runs. A process killed outright (SIGKILL, the OOM killer, a power cut)
cannot; its temporary files carry its pid, so the next write of the same target removes the
ones whose process is gone.

Reading (recordings, sessions, traces, anything a user points the program at): only regular
files (a FIFO would block forever, /dev/zero would fill memory), at most `MAX_READ_BYTES`, and
UTF-8 JSON; everything else raises `FileReadError` with one clear line.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from .. import exit_status
from ..errors import FileReadError, FileWriteError, printable

#: Largest file the program reads: the shipped recordings and traces are a few MB; a sweep with
#: every trace kept is tens of MB. A bigger file is refused before any of it is read.
MAX_READ_BYTES = 256 * 2**20
MAX_READ_LABEL = "256 MiB"

_PART_SUFFIX = ".part"


# ---------------------------------------------------------------------------------- reading


def read_bytes(path: str | os.PathLike[str], *, limit: int = MAX_READ_BYTES) -> bytes:
    """The bytes of the regular file `path`, refusing FIFOs, devices, folders and files larger
    than `limit` (checked before reading and again while reading, for files that grow)."""
    name = printable(os.fspath(path))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)  # non-blocking: opening a FIFO does not wait for a writer
    except OSError as exc:
        raise FileReadError(f"cannot read {name}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FileReadError(f"cannot read {name}: it is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise FileReadError(
                f"cannot read {name}: not a regular file (a pipe, socket or device)"
            )
        if info.st_size > limit:
            raise FileReadError(_too_large(name, info.st_size, limit))
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise FileReadError(_too_large(name, total, limit))
        return b"".join(chunks)
    except OSError as exc:
        raise FileReadError(f"cannot read {name}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def _too_large(name: str, size: int, limit: int) -> str:
    label = MAX_READ_LABEL if limit == MAX_READ_BYTES else f"{limit:,} bytes"
    return f"cannot read {name}: larger than the {label} limit ({size:,} bytes or more)"


def decode_json(data: bytes, where: str) -> Any:
    """Parse JSON bytes; anything that is not UTF-8 JSON of sane depth raises FileReadError.

    `where` names the source in messages (a path). NaN and Infinity are not JSON and are
    refused; so is nesting deeper than Python's recursion limit."""
    data = _utf8_body(data, where)
    try:
        return msgspec.json.decode(data)
    except RecursionError:
        raise FileReadError(f"{where} is nested too deeply to be a Tilescope file") from None
    except msgspec.DecodeError as exc:
        raise FileReadError(f"{where} is not valid JSON (truncated or corrupt?): {exc}") from None


def decode_json_members(data: bytes, where: str) -> dict[str, msgspec.Raw] | None:
    """The members of a JSON object, each kept as raw JSON for `decode_member`; None when the
    document is JSON but not an object. One quick pass checks the whole document's syntax
    (and the same rules as `decode_json`); the members are decoded when asked for, so a
    reader can decode and check a large file's parts one at a time, and a thread doing so
    never holds the interpreter long (the GUI thread keeps painting)."""
    data = _utf8_body(data, where)
    try:
        return msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except RecursionError:
        raise FileReadError(f"{where} is nested too deeply to be a Tilescope file") from None
    except msgspec.ValidationError:
        return None  # valid JSON, but an array or a scalar
    except msgspec.DecodeError as exc:
        raise FileReadError(f"{where} is not valid JSON (truncated or corrupt?): {exc}") from None


@dataclass(frozen=True)
class RawArray:
    """A large JSON array kept raw, as consecutive pieces that are each a JSON array of some of
    its items, or one item too large for a piece, a RawObject: decoding one piece is a short
    call, whatever the size of the whole."""

    pieces: tuple[Any, ...]  # msgspec.Raw (an array of items) or RawObject (one item)


@dataclass(frozen=True)
class RawObject:
    """A large JSON object kept raw a member at a time, each member raw or split itself (a
    RawArray, a RawObject): a result whose ring run holds 200,000 events is many short decodes,
    not one of 19 MB that held the interpreter for 390 ms."""

    members: tuple[tuple[str, Any], ...]


def split_json_members(
    data: bytes, where: str, piece_bytes: int = 1 << 20
) -> dict[str, msgspec.Raw | RawArray] | None:
    """`decode_json_members`, with every array member larger than `piece_bytes` split into a
    RawArray. It makes a few long calls over the whole document: run it where a long call
    stalls nobody (a process of its own), and send what it returns back to be decoded piece by
    piece."""
    members = decode_json_members(data, where)
    if members is None:
        return None
    return {key: _split(raw, piece_bytes) for key, raw in members.items()}


def _split(raw: msgspec.Raw, piece_bytes: int) -> Any:
    """`raw` as it is when at most `piece_bytes`; larger, an array as a RawArray and an object
    as a RawObject of its members, each split the same way (a long string stays raw)."""
    if len(raw) <= piece_bytes:
        return raw
    items = _array_items(raw)
    if items is not None:
        return RawArray(_pieces(items, piece_bytes))
    try:
        members = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    except msgspec.ValidationError:
        return raw  # a scalar
    return RawObject(tuple((k, _split(v, piece_bytes)) for k, v in members.items()))


def _array_items(raw: msgspec.Raw) -> list[msgspec.Raw] | None:
    try:
        return msgspec.json.decode(raw, type=list[msgspec.Raw])
    except msgspec.ValidationError:
        return None  # not an array


def _pieces(items: list[msgspec.Raw], piece_bytes: int) -> tuple[Any, ...]:
    pieces: list[Any] = []
    group: list[msgspec.Raw] = []
    size = 0

    def flush() -> None:
        nonlocal group, size
        pieces.append(msgspec.Raw(b"[" + b",".join(group) + b"]"))
        group, size = [], 0

    for item in items:
        if len(item) > piece_bytes:  # an object too large for a piece is split and alone
            split = _split(item, piece_bytes)
            if isinstance(split, RawObject):
                if group:
                    flush()
                pieces.append(split)
                continue
        group.append(item)
        size += len(item) + 1
        if size >= piece_bytes:
            flush()
    if group or not pieces:
        flush()
    return tuple(pieces)


def decode_member(value: Any, where: str) -> Any:
    """A member from `decode_json_members` or `split_json_members` decoded (any other value is
    already parsed)."""
    if isinstance(value, RawArray):
        return [item for piece in value.pieces for item in _decoded_items(piece, where)]
    if isinstance(value, RawObject):
        return {key: decode_member(member, where) for key, member in value.members}
    if not isinstance(value, msgspec.Raw):
        return value
    try:
        return msgspec.json.decode(value)
    except msgspec.DecodeError as exc:  # a number beyond any float, say
        raise FileReadError(f"{where} is not valid JSON (truncated or corrupt?): {exc}") from None


def _decoded_items(piece: Any, where: str) -> list[Any]:
    if isinstance(piece, RawObject):
        return [decode_member(piece, where)]
    return decode_member(piece, where)


def read_json(path: str | os.PathLike[str], *, limit: int = MAX_READ_BYTES) -> Any:
    """`read_bytes` then `decode_json`: the one way the program opens a JSON file."""
    return decode_json(read_bytes(path, limit=limit), printable(os.fspath(path)))


_UTF16_32_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")


def _utf8_body(data: bytes, where: str) -> bytes:
    """The JSON text of `data` without a UTF-8 byte-order mark; refuses empty and non-UTF-8."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise FileReadError(f"{where} is empty")
    if data.startswith(_UTF16_32_BOMS) or _utf16_without_bom(data[:2]):
        raise FileReadError(f"{where} is UTF-16 or UTF-32 text, not UTF-8 JSON")
    # Checked a slice at a time: one call over a large file would hold the interpreter for
    # tens of milliseconds (a reading thread would stall the GUI thread as long).
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    for start in range(0, len(data), _UTF8_SLICE):
        pending = len(decoder.getstate()[0])  # bytes of a character cut by the last slice
        end = start + _UTF8_SLICE
        try:
            decoder.decode(view[start:end], final=end >= len(data))
        except UnicodeDecodeError as exc:
            at = start - pending + exc.start
            raise FileReadError(
                f"{where} is not UTF-8 text (a binary file?): byte {at} is 0x{data[at]:02x}"
            ) from None
    return data


#: Bytes of UTF-8 checked per step (about a millisecond each).
_UTF8_SLICE = 1 << 20


def _utf16_without_bom(head: bytes) -> bool:
    """JSON's first character (ASCII) beside a zero byte: UTF-16 text without its mark."""
    starts = b'{["- \t\r\n0123456789tfn'
    return len(head) == 2 and (
        (head[1] == 0 and head[0] in starts) or (head[0] == 0 and head[1] in starts)
    )


# ---------------------------------------------------------------------------------- writing

_in_flight: set[str] = set()
#: Reentrant: a signal's handler removes the partial files on the main thread, which may be
#: inside one of the short sections below at that moment (a plain lock deadlocked there).
_in_flight_lock = threading.RLock()


def write_target(path: str | os.PathLike[str]) -> Path:
    """Where a write to `path` lands: the final target of a symlink, else `path` itself.
    FileWriteError when the system cannot even look at it (a name too long)."""
    target = Path(path)
    try:
        if target.is_symlink():
            return Path(os.path.realpath(target))
    except OSError as exc:
        raise FileWriteError(f"cannot write {target}: {exc.strerror or exc}") from exc
    return target


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _partial_prefix(target: Path, pid: int | None = None) -> str:
    """The temporary files' prefix for `target`, tagged with the writing process's pid."""
    return f".{target.name}.{os.getpid() if pid is None else pid}."


def check_name(target: Path, suffix: str = "") -> None:
    """FileWriteError when `target`'s name is too long for its folder once the temporary file
    beside it adds its own characters (".<name>.<pid>.XXXXXXXX.part<suffix>")."""
    folder = target.parent if str(target.parent) else Path(".")
    extra = len(f"{_partial_prefix(Path(''))}XXXXXXXX{_PART_SUFFIX}{suffix}".encode())
    longest = _name_max(folder) - extra
    size = len(os.fsencode(target.name))
    if size > longest:
        raise FileWriteError(
            f"cannot write {target.name[:40]}…: the file name is {size} bytes, at most "
            f"{longest} fit here"
        )


def check_writable(path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Check, without writing the target, that an atomic write to `path` can succeed now:
    the folder exists and takes a new file, the target is not a folder or a device, and it is
    replaced only with `overwrite`. Returns the target (a symlink's target). Raises
    FileExistsError or FileWriteError."""
    target = write_target(path)
    if not target.name:
        raise FileWriteError(f"cannot write {os.fspath(path)!r}: no file name")
    _check_existing(target, overwrite)
    tmp = new_partial_file(target)
    discard_partial_file(tmp)
    return target


def _check_existing(target: Path, overwrite: bool) -> os.stat_result | None:
    try:
        info = target.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileWriteError(f"cannot write {target}: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(info.st_mode):
        raise FileWriteError(f"cannot write {target}: it is a folder")
    if not stat.S_ISREG(info.st_mode):
        raise FileWriteError(f"cannot write {target}: not a regular file")
    if not overwrite:
        raise FileExistsError(f"{target} exists (use --force to replace it)")
    return info


def new_partial_file(target: str | os.PathLike[str], suffix: str = "") -> str:
    """Create an empty temporary file beside `target` (same folder, so the final rename is
    atomic), registered for removal on signals and exit; returns its path. For writers that
    stream into a file over time (animation exports); `commit_partial_file` or
    `discard_partial_file` ends it."""
    target = Path(target)
    folder = target.parent if str(target.parent) else Path(".")
    check_name(target, suffix)
    remove_leftovers(target)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=_partial_prefix(target), suffix=_PART_SUFFIX + suffix, dir=folder
        )
    except OSError as exc:
        raise FileWriteError(f"cannot write in {folder}: {exc.strerror or exc}") from exc
    os.close(fd)
    with _in_flight_lock:
        _in_flight.add(tmp)
    return tmp


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists but is not ours (EPERM): alive
        return True
    return True


def remove_leftovers(target: str | os.PathLike[str]) -> list[str]:
    """Remove the temporary files of `target` that a process killed outright left beside it:
    those whose pid names no living process (a living one may still be writing its own).
    Returns their paths. Never raises: a file that cannot be removed stays."""
    target = Path(target)
    folder = target.parent if str(target.parent) else Path(".")
    head = f".{target.name}."
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(head) or _PART_SUFFIX not in name:
            continue
        pid_text = name[len(head) :].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _pid_alive(int(pid_text)):
            continue
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
                removed.append(path)
    return removed


def discard_partial_file(tmp: str) -> None:
    """Remove a temporary file from `new_partial_file` (no error if it is already gone)."""
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    with _in_flight_lock:
        _in_flight.discard(tmp)


@contextlib.contextmanager
def _discarded_on_failure(tmp: str, target: Path) -> Iterator[None]:
    """Remove `tmp` when the block fails (even on KeyboardInterrupt); any other OSError than
    our own becomes a FileWriteError naming `target`."""
    try:
        yield
    except (FileExistsError, FileWriteError):
        discard_partial_file(tmp)
        raise
    except OSError as exc:
        discard_partial_file(tmp)
        raise FileWriteError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        discard_partial_file(tmp)
        raise


def commit_partial_file(tmp: str, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
    """Give the finished temporary file `tmp` the target's permissions (its existing mode, else
    the usual mode for a new file) and rename it over `path` (a symlink's target). On failure
    `tmp` is removed and FileWriteError (or FileExistsError) is raised."""
    target = write_target(path)
    with _discarded_on_failure(tmp, target):
        existing = _check_existing(target, overwrite)
        mode = stat.S_IMODE(existing.st_mode) if existing else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    with _in_flight_lock:
        _in_flight.discard(tmp)
    _fsync_folder(target.parent)


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, overwrite: bool = False
) -> None:
    """Write `data` to `path` all at once or not at all (see the module docstring).

    Raises FileExistsError when `path` exists and `overwrite` is False, FileWriteError for any
    failure (nothing is left behind either way)."""
    target = write_target(path)
    _check_existing(target, overwrite)
    tmp = new_partial_file(target)
    with _discarded_on_failure(tmp, target), open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    commit_partial_file(tmp, target, overwrite=overwrite)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, overwrite: bool = False) -> None:
    """`atomic_write_bytes` of `text` as UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"), overwrite=overwrite)


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX); harmless where folders cannot be opened."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder if str(folder) else ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _umask() -> int:
    """The process umask, read without changing it where /proc says it (threads may be
    creating files meanwhile), else by setting and restoring it."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


# ----------------------------------------------------------------- cleanup on signals, exit


def partial_files() -> tuple[str, ...]:
    """Temporary files currently being written (for tests and diagnostics)."""
    with _in_flight_lock:
        return tuple(sorted(_in_flight))


def remove_partial_files() -> None:
    """Delete every temporary file in flight (a signal or exit is ending the process). Called
    from a signal's handler and from the thread that ends the process, it never waits long
    for the registry's lock: after 0.2 s it takes the registry as it is (a copy of a set is
    one step for the interpreter)."""
    locked = _in_flight_lock.acquire(timeout=0.2)
    try:
        paths = list(_in_flight)
        _in_flight.clear()
    finally:
        if locked:
            _in_flight_lock.release()
    for tmp in paths:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def remove_partial_files_on_signals() -> bool:
    """Have SIGTERM, SIGHUP and SIGINT delete temporary files in flight (and the exit too), then
    end the process as gpu.exit_status says: SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP
    (the terminal closed) end it with status 143 and 129, and a process that has not ended
    within exit_status.GRACE_S is ended. Call from the main thread; returns False where signal
    handlers cannot be installed (another thread, an embedding host)."""
    if not exit_status.install(remove_partial_files):
        return False
    atexit.unregister(remove_partial_files)
    atexit.register(remove_partial_files)
    return True
