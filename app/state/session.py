"""Saved sessions: what the window showed (config, controls, every result, device, traces) as JSON.

A session file (schema "tilescope.session/1") is written by File ▸ Save session and opened by
File ▸ Open or `main.py --open FILE`. It reuses gpu.recording's pieces: the same RunResult,
DeviceInfo and Trace dictionaries, the same atomic write (temporary file, then rename; never a
partial file, never a silent overwrite) and the same rules for bad files (corrupt, truncated or
newer-version JSON is a SessionError naming the file and the cause, before anything is applied).

Opening a session replays it: the results of the backend the window was showing become a
recorded run (app/recorded_run.py), labelled with their device and date, so a session saved on a
GPU host opens anywhere. Results of other backends are kept too, under their own cache keys.

No Qt here: the window turns its state into a Session (app/file_menu.py) and back.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from gpu.config import AttentionConfig
from gpu.errors import FileReadError, FileWriteError, SchemaError
from gpu.fileio import atomic_write_bytes, read_json
from gpu.recording import Recording, RecordingError
from gpu.results import DeviceInfo, RunResult
from gpu.schema import check_config, check_device, check_result
from gpu.trace import Trace, TraceError

SESSION_SCHEMA = "tilescope.session/1"
_KIND, _, _VERSION = SESSION_SCHEMA.rpartition("/")

#: Control-state keys a session keeps, with the type each must have (others are ignored).
CONTROL_TYPES: dict[str, type | tuple[type, ...]] = {
    "algorithms": list,
    "backend": str,
    "recorded_path": str,
    "budget": str,
    "custom_gb": (int, float),
    "theme": str,
}


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


def is_session_file(data: Any) -> bool:
    """Whether parsed JSON claims to be a session (of any version)."""
    return isinstance(data, dict) and str(data.get("schema", "")).startswith(_KIND + "/")


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
        found = data.get("schema")
        if found != SESSION_SCHEMA:
            kind, _, version = str(found).rpartition("/")
            if kind == _KIND and version.isdigit() and int(version) > int(_VERSION):
                raise SessionError(
                    f"{where} was written by a newer Tilescope (schema {found}); this version "
                    f"({app_version()}) reads {SESSION_SCHEMA}"
                )
            raise SessionError(f"{where} is not a Tilescope session (schema {found!r})")
        try:
            config = check_config(data["config"], where)
            results = _list(data.get("results", []), "results")
            entries = tuple(_entry(r, where, f"results[{i}]") for i, r in enumerate(results))
            raw_device = data.get("device")
            device = None if raw_device is None else check_device(raw_device, where)
            backend_key = data.get("backend_key", "")
            if not isinstance(backend_key, str):
                raise TypeError("backend_key is not a string")
            meta = dict(_mapping(data.get("meta", {}), "meta"))
            controls = _controls(_mapping(data.get("controls", {}), "controls"))
            version = str(data.get("app_version", "unknown"))
        except SchemaError as exc:
            raise SessionError(f"{where}: malformed session ({exc.where}: {exc.reason})") from exc
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SessionError(f"{where}: malformed session ({_why(exc)})") from exc
        try:
            raw_traces = _list(data.get("traces", []), "traces")
            traces = tuple(
                Trace.from_dict(t, where, f"traces[{i}]") for i, t in enumerate(raw_traces)
            )
        except (TraceError, TypeError) as exc:
            raise SessionError(f"{where}: {exc}") from exc
        return cls(config, controls, entries, backend_key, device, meta, traces, version)


def _why(exc: BaseException) -> str:
    return f"missing {exc}" if isinstance(exc, KeyError) else str(exc) or type(exc).__name__


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} is not an object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{what} is not a list")
    return value


def _entry(raw: Any, where: str, path: str) -> StoredEntry:
    data = dict(_mapping(raw, path))
    key = data.pop("backend_key", "")
    budget = data.pop("budget_bytes", None)
    if not isinstance(key, str):
        raise TypeError("a result's backend_key is not a string")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
        raise TypeError("a result's budget_bytes is not an integer")
    return StoredEntry(key, budget, check_result(data, where, path))


def _controls(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Known keys with the right types; unknown keys are dropped (a later 1.x may add some)."""
    out: dict[str, Any] = {}
    for key, kind in CONTROL_TYPES.items():
        value = raw.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, kind):
            continue
        if key == "algorithms":
            value = [a for a in value if isinstance(a, str)]
        out[key] = value
    return out


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
        entries=tuple(StoredEntry(k, b, r) for k, b, r in entries),
        backend_key=backend_key,
        device=device,
        meta=meta,
        traces=tuple(traces),
    )


def session_json(session: Session) -> str:
    """Indented JSON, except the traces: one compact line each (thousands of small arrays)."""
    data = session.to_dict()
    traces = data.pop("traces")
    text = json.dumps(data, indent=1)
    body = ",\n".join(json.dumps(t, separators=(",", ":")) for t in traces)
    return f'{text[:-2]},\n "traces": [{chr(10) + body + chr(10) if body else ""}]\n}}\n'


def save_session(
    session: Session, path: str | os.PathLike[str], *, overwrite: bool = False
) -> None:
    """Atomic write; FileExistsError if `path` exists and not `overwrite`; SessionError when
    the folder cannot be written."""
    try:
        atomic_write_bytes(path, session_json(session).encode(), overwrite=overwrite)
    except FileWriteError as exc:
        raise SessionError(str(exc)) from exc


def parse_json_file(path: str | os.PathLike[str]) -> Any:
    """Read and parse a JSON file through gpu.fileio's safe read path; a SessionError for an
    unreadable, empty, oversized, non-regular or corrupt one."""
    try:
        return read_json(path)
    except FileReadError as exc:
        raise SessionError(str(exc)) from exc


def load_session(path: str | os.PathLike[str]) -> Session:
    """Read a session file; any problem becomes a SessionError naming the file and the cause."""
    return Session.from_dict(parse_json_file(path), os.fspath(path))


def without_recorded_flag(results: Iterable[RunResult]) -> list[RunResult]:
    """Results as measured (replay marks them recorded=True): for comparing round trips."""
    return [replace(r, recorded=False) for r in results]
