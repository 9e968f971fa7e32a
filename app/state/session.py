"""Saved sessions: what the window showed (config, controls, every result, device, traces) as JSON.

A session file (schema "tilescope.session/1") is written by File ▸ Save session and opened by
File ▸ Open or `main.py --open FILE`. It reuses gpu.files.recording's pieces: the same RunResult,
DeviceInfo and Trace dictionaries, the same atomic write (temporary file, then rename; never a
partial file, never a silent overwrite) and the same rules for bad files (corrupt, truncated or
newer-version JSON is a SessionError naming the file and the cause, before anything is applied).
Every field is checked by one document type, `SessionDoc`, made of gpu/files/schema.py's types (its
envelope first, then each result and trace one at a time, so a reading thread never holds the
interpreter long); a session is checked against it before it is written, too, and holds no NaN
or infinity.

Opening a session replays it: the results of the backend the window was showing become a
recorded run (app/state/recorded_run.py), labelled with their device and date, so a session
saved on a GPU host opens anywhere. Results of other backends are kept too, under their own
cache keys.

No Qt here: the window turns its state into a Session (app/window/file_menu.py) and back.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from gpu.config import AttentionConfig
from gpu.errors import FileReadError, FileWriteError, SchemaError, printable
from gpu.files.fileio import (
    atomic_write_bytes,
    decode_member,
    read_bytes,
    split_json_members,
)
from gpu.files.recording import Recording, RecordingError
from gpu.files.schema import (
    INT64_MAX,
    MAX_NAME,
    ConfigDoc,
    DeviceDoc,
    Name,
    ResultDoc,
    Text,
    TraceDoc,
    check,
    check_config,
    check_each,
    check_free_form,
    device_from_checked,
    finite_result,
    result_from_checked,
)
from gpu.files.trace import Trace
from gpu.results import DeviceInfo, RunResult

from .budget import CUSTOM_GB_RANGE

SESSION_SCHEMA = "tilescope.session/1"
_KIND, _, _VERSION = SESSION_SCHEMA.rpartition("/")

#: Control-state keys a session keeps (others are ignored).
CONTROL_KEYS = ("algorithms", "backend", "recorded_path", "budget", "custom_gb", "theme")


class ControlsDoc(msgspec.Struct):
    """The controls a session keeps, each optional; a value of the wrong type or range refuses
    the file (a later version's extra keys are ignored)."""

    algorithms: Annotated[list[Name], Meta(max_length=256)] | None = None
    backend: Name | None = None
    recorded_path: Text | None = None
    budget: Name | None = None
    custom_gb: Annotated[float, Meta(ge=CUSTOM_GB_RANGE[0], le=CUSTOM_GB_RANGE[1])] | None = None
    theme: Name | None = None


class EntryDoc(ResultDoc):
    """A cached result with the backend it came from and the budget it ran under."""

    backend_key: Annotated[str, Meta(max_length=4 * MAX_NAME)] = ""
    budget_bytes: Annotated[int, Meta(ge=1, le=INT64_MAX)] | None = None


class SessionDoc(msgspec.Struct):
    """A session file as `Session.to_dict` writes it, checked field by field (gpu/files/schema.py's
    types for its config, device, results and traces) before anything is built from it."""

    schema: Name
    config: ConfigDoc
    app_version: Name = "unknown"
    meta: dict[str, Any] = {}
    controls: ControlsDoc = msgspec.field(default_factory=ControlsDoc)
    backend_key: Annotated[str, Meta(max_length=4 * MAX_NAME)] = ""
    device: DeviceDoc | None = None
    results: list[EntryDoc] = []
    traces: list[TraceDoc] = []

    def __post_init__(self) -> None:
        check_free_form("meta", self.meta)


class SessionError(RecordingError):
    """A session file that cannot be read or written; the message says which and why. A kind
    of RecordingError: whoever opens "a results file" handles both alike."""


@cache
def app_version() -> str:
    """The installed package's version, else pyproject.toml's (a source checkout)."""
    from importlib import metadata

    try:
        return metadata.version("tilescope")
    except metadata.PackageNotFoundError:
        pass
    try:
        import tomllib

        data = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
        return str(data["project"]["version"])
    except (ImportError, OSError, KeyError, ValueError):
        return "unknown"


@dataclass(frozen=True)
class StoredEntry:
    """One cached outcome: the result, the backend it came from, the budget it ran under."""

    backend_key: str
    budget_bytes: int | None
    result: RunResult


@dataclass(frozen=True)
class Session:
    """See the module docstring. `backend_key` names the backend the window was showing and
    `device` its device (for a recorded run: the recording's own device, not "replay")."""

    config: AttentionConfig
    controls: dict[str, Any]
    entries: tuple[StoredEntry, ...]
    backend_key: str = ""
    device: DeviceInfo | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    traces: tuple[Trace, ...] = ()
    app_version: str = field(default_factory=app_version)

    @property
    def results(self) -> tuple[RunResult, ...]:
        return tuple(e.result for e in self.entries)

    def shown_results(self) -> tuple[RunResult, ...]:
        """The results of the backend the window was showing (what a reopened session shows)."""
        return tuple(e.result for e in self.entries if e.backend_key == self.backend_key)

    def other_entries(self) -> tuple[StoredEntry, ...]:
        return tuple(e for e in self.entries if e.backend_key != self.backend_key)

    @property
    def date(self) -> str:
        """When the shown results were measured: the source recording's date, else when saved."""
        return str(self.meta.get("date") or self.meta.get("saved") or "")

    def recording(self) -> Recording:
        """The shown results as a Recording, so the replay backend can serve them."""
        device = self.device or DeviceInfo("replay", "unknown device", 0, 0)
        meta = dict(self.meta)
        meta.setdefault("date", self.date)
        meta["session"] = True
        return Recording(device, self.shown_results(), meta, self.traces)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SESSION_SCHEMA,
            "app_version": self.app_version,
            "meta": self.meta,
            "config": self.config.to_dict(),
            "controls": self.controls,
            "backend_key": self.backend_key,
            "device": None if self.device is None else self.device.to_dict(),
            "results": [
                {"backend_key": e.backend_key, "budget_bytes": e.budget_bytes} | e.result.to_dict()
                for e in self.entries
            ],
            "traces": [t.to_dict() for t in self.traces],
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "session") -> Session:
        """Validate and build; any problem is a SessionError naming `where` and the cause."""
        if not isinstance(data, dict):
            raise SessionError(f"{where} is not a Tilescope session (not a JSON object)")
        return cls.from_members(data, where)

    @classmethod
    def from_members(cls, members: Mapping[str, Any], where: str = "session") -> Session:
        """`from_dict` for a session's members, parsed or raw (gpu.files.fileio's
        decode_json_members): the envelope is checked first, then each result and trace, one
        at a time, before anything is built (a large file never holds the interpreter long)."""
        try:
            envelope = {k: decode_member(v, where) for k, v in members.items() if k not in _LISTS}
        except FileReadError as exc:
            raise SessionError(str(exc)) from exc
        found = envelope.get("schema")
        if found != SESSION_SCHEMA:
            kind, _, version = str(found).rpartition("/")
            if kind == _KIND and _version_number(version) > int(_VERSION):
                raise SessionError(
                    f"{where} was written by a newer Tilescope (schema {found}); this version "
                    f"({app_version()}) reads {SESSION_SCHEMA}"
                )
            raise SessionError(f"{where} is not a Tilescope session (schema {found!r:.80})")
        try:
            check(envelope | {key: [] for key in _LISTS}, SessionDoc, where)
            config = check_config(envelope["config"], where)
            entries = check_each(members.get("results", []), EntryDoc, where, "results", _entry)
            traces = check_each(
                members.get("traces", []), TraceDoc, where, "traces", Trace.from_checked
            )
        except SchemaError as exc:
            raise SessionError(f"{where}: malformed session ({exc.where}: {exc.reason})") from exc
        raw_device = envelope.get("device")
        return cls(
            config,
            _controls(envelope.get("controls") or {}),
            tuple(entries),
            envelope.get("backend_key", ""),
            None if raw_device is None else device_from_checked(raw_device),
            dict(envelope.get("meta", {})),
            tuple(traces),
            envelope.get("app_version", "unknown"),
        )


#: A session's lists, checked item by item.
_LISTS = ("results", "traces")


def _version_number(text: str) -> int:
    """A schema's version ("1" of "tilescope.session/1"); -1 for anything but a short number."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else -1


def _entry(data: dict[str, Any]) -> StoredEntry:
    """A checked result entry (EntryDoc) as a StoredEntry."""
    result = {k: v for k, v in data.items() if k not in ("backend_key", "budget_bytes")}
    return StoredEntry(
        data.get("backend_key", ""), data.get("budget_bytes"), result_from_checked(result)
    )


def _controls(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The known keys that hold a value (a checked ControlsDoc, or the window's own)."""
    return {k: raw[k] for k in CONTROL_KEYS if raw.get(k) is not None}


def make_session(
    config: AttentionConfig,
    controls: Mapping[str, Any],
    entries: Iterable[tuple[str, int | None, RunResult]],
    backend_key: str = "",
    device: DeviceInfo | None = None,
    source_meta: Mapping[str, Any] | None = None,
    traces: Iterable[Trace] = (),
) -> Session:
    """A Session stamped with the app version and the time it is saved. `source_meta` is the
    meta of the recording the window was replaying (command, date), if any."""
    saved = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    meta: dict[str, Any] = {"saved": saved}
    if source_meta:
        meta["source"] = {k: v for k, v in source_meta.items() if k != "session"}
        if source_meta.get("date"):
            meta["date"] = source_meta["date"]
    meta.setdefault("date", saved)
    return Session(
        config=config,
        controls=_controls(controls),
        entries=tuple(StoredEntry(k, b, finite_result(r)) for k, b, r in entries),
        backend_key=backend_key,
        device=device,
        meta=meta,
        traces=tuple(traces),
    )


def session_json(session: Session, data: dict[str, Any] | None = None) -> str:
    """Indented JSON, except the traces: one compact line each (thousands of small arrays).
    NaN and infinity are refused (a session holds finite numbers only: `finite_result`).
    `data`: the session's `to_dict()` when the caller has it already."""
    data = dict(data) if data is not None else session.to_dict()
    traces = data.pop("traces")
    text = json.dumps(data, indent=1, allow_nan=False)
    body = ",\n".join(json.dumps(t, separators=(",", ":"), allow_nan=False) for t in traces)
    return f'{text[:-2]},\n "traces": [{chr(10) + body + chr(10) if body else ""}]\n}}\n'


def save_session(
    session: Session, path: str | os.PathLike[str], *, overwrite: bool = False
) -> None:
    """Atomic write; FileExistsError if `path` exists and not `overwrite`; SessionError when
    the folder cannot be written or the session holds what the format refuses (checked against
    it first, so the app never writes a session it would not open)."""
    where = os.fspath(path)
    try:
        data = session.to_dict()
        check(data, SessionDoc, where)
        text = session_json(session, data)
    except (SchemaError, ValueError, RecursionError) as exc:
        raise SessionError(f"cannot write {where}: {exc}") from exc
    try:
        atomic_write_bytes(path, text.encode(), overwrite=overwrite)
    except FileWriteError as exc:
        raise SessionError(str(exc)) from exc


def parse_json_members(data: bytes, where: str) -> dict[str, Any]:
    """The members of the JSON object in `data`, each still raw (see Session.from_members); a
    SessionError for bytes that are not a JSON object (the message says what they are)."""
    try:
        members = split_json_members(data, where)
    except FileReadError as exc:
        raise SessionError(str(exc)) from exc
    if members is None:
        raise SessionError(f"{where} is not a Tilescope session or recorded run (not an object)")
    return members


def read_file_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a file to open, through gpu.files.fileio's safe read (regular files up to its
    size limit); a SessionError for anything else."""
    try:
        return read_bytes(path)
    except FileReadError as exc:
        raise SessionError(str(exc)) from exc


def load_session(path: str | os.PathLike[str]) -> Session:
    """Read a session file; any problem becomes a SessionError naming the file and the cause."""
    where = printable(os.fspath(path))
    members = parse_json_members(read_file_bytes(path), where)
    return Session.from_members(members, where)


def without_recorded_flag(results: Iterable[RunResult]) -> list[RunResult]:
    """Results as measured (replay marks them recorded=True): for comparing round trips."""
    return [replace(r, recorded=False) for r in results]
