"""The window's settings: read from the file once, then kept in memory; written by a thread of
their own.

QSettings writes its file on the thread that owns it, in a turn of that thread's event loop
after a change. On the GUI thread that write waits for the disk: a few milliseconds at best,
and a stall of hundreds where the disk is busy (an export that remembers its folder was seen
holding the GUI thread 276 ms). Here the GUI thread reads and writes a dict; a writer thread
with a QSettings of its own on the same file applies the writes and syncs them, and a close
waits (a bounded time) until they are on disk. Two QSettings on one file, in two threads, is
what Qt documents as safe.

The file stays small. QSettings rewrites the whole file at every sync, so a file swollen with
keys the app never wrote (600,000 of them, 50 MB) made every write take seconds and a close
wait for it (10 s). Given the app's keys (`keys`: each with its kind's check), the store reads
only those, and a file that holds anything else, or is larger than TIDY_BYTES, is rewritten
once at the start with the app's keys alone, their refused values left out.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from PySide6.QtCore import QSettings

from ..state.units import fmt_seconds

log = logging.getLogger("tilescope.settings")

#: How long an idle writer thread waits for more writes before it ends (the next write starts
#: another): a window that is never closed leaves no thread behind for long.
IDLE_S = 2.0

#: How long `sync` (a close) waits for the writes to reach the disk.
SYNC_WAIT_S = 2.0

#: A settings file larger than this is rewritten at the start with the app's keys alone (the
#: app's own file, with the window's saved geometry and layout, is a few kilobytes).
TIDY_BYTES = 64 * 1024


class _Unreadable:
    """A stored value that Qt could not hand to Python when the file was read."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class SettingsStore:
    """The settings of `settings`'s file, as QSettings's reading and writing calls see them
    (value, contains, setValue, remove, groups, allKeys), served from memory; `sync` waits for
    the writes to reach the disk."""

    def __init__(
        self, settings: QSettings, keys: Mapping[str, Callable[[Any], Any]] | None = None
    ) -> None:
        """`keys`: the app's keys, each with the check its value must pass (one that raises
        refuses it); None reads every key of the file and keeps the file as it is."""
        self._file = settings.fileName()
        self._format = settings.format()
        self._values: dict[str, Any] = {}
        names = settings.allKeys() if keys is None else [k for k in keys if settings.contains(k)]
        for key in names:
            try:
                self._values[key] = settings.value(key)
            except Exception as exc:  # read() logs it when the key is asked for
                self._values[key] = _Unreadable(exc)
        self._groups: list[str] = []
        self._cond = threading.Condition()
        self._ops: list[tuple[str, str, Any]] = []
        self._submitted = 0
        self._written = 0
        self._thread: threading.Thread | None = None
        if keys is not None and _untidy(settings, keys):
            kept = {k: v for k, v in self._values.items() if _passes(keys[k], v)}
            log.info("the settings file %s holds more than the app's keys: rewritten", self._file)
            self._submit("rewrite", "", kept)

    # ------------------------------------------------------------------ what QSettings offers

    def fileName(self) -> str:
        return self._file

    def beginGroup(self, prefix: str) -> None:
        self._groups.append(prefix.strip("/"))

    def endGroup(self) -> None:
        self._groups.pop()

    def _key(self, key: str) -> str:
        return "/".join([*self._groups, key.strip("/")]).strip("/")

    def value(self, key: str, default: Any = None) -> Any:
        raw = self._values.get(self._key(key), default)
        if isinstance(raw, _Unreadable):
            raise raw.exc
        return raw

    def contains(self, key: str) -> bool:
        return self._key(key) in self._values

    def allKeys(self) -> list[str]:
        return sorted(self._values)

    def setValue(self, key: str, value: Any) -> None:
        key = self._key(key)
        self._values[key] = value
        self._submit("set", key, value)

    def remove(self, key: str) -> None:
        key = self._key(key)
        for k in [k for k in self._values if k == key or k.startswith(f"{key}/") or not key]:
            del self._values[k]
        self._submit("remove", key, None)

    def sync(self, timeout: float = SYNC_WAIT_S) -> bool:
        """Wait until every write so far is on disk, `timeout` seconds at most (a close holds
        for it; a disk that takes longer keeps the writes it has not taken, logged)."""
        with self._cond:
            target = self._submitted
            done = self._cond.wait_for(lambda: self._written >= target, timeout)
        if not done:
            log.warning(
                "the settings file %s was not written within %s", self._file, fmt_seconds(timeout)
            )
        return done

    # ------------------------------------------------------------------ the writer thread

    def _submit(self, op: str, key: str, value: Any) -> None:
        with self._cond:
            self._ops.append((op, key, value))
            self._submitted += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._write, name="settings-writer", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def _write(self) -> None:
        settings = QSettings(self._file, self._format)  # this thread's own
        while True:
            with self._cond:
                if not self._ops:
                    self._cond.wait(IDLE_S)
                if not self._ops:
                    self._thread = None  # the next write starts another
                    break
                ops, self._ops = self._ops, []
            for op, key, value in ops:
                if op == "set":
                    settings.setValue(key, value)
                elif op == "rewrite":  # the file holds these values alone from now on
                    settings.clear()
                    for k, v in value.items():
                        settings.setValue(k, v)
                else:
                    settings.remove(key)
            settings.sync()
            if settings.status() != QSettings.Status.NoError:
                log.warning(
                    "could not write the settings file %s (%s)",
                    self._file,
                    settings.status().name,
                )
            with self._cond:
                self._written += len(ops)
                self._cond.notify_all()
        del settings  # destroyed on the thread that made it


def _passes(check: Callable[[Any], Any], raw: Any) -> bool:
    if isinstance(raw, _Unreadable):
        return False
    try:
        check(raw)
    except Exception:  # refused: damaged, left out of the rewritten file
        return False
    return True


def _untidy(settings: QSettings, keys: Mapping[str, Any]) -> bool:
    """The file holds keys besides `keys`, or is larger than TIDY_BYTES. Looks group by group
    (a file of 600,000 keys in a group of its own is found without listing them)."""
    try:
        if os.path.getsize(settings.fileName()) > TIDY_BYTES:
            return True
    except OSError:
        return False  # no file yet
    groups: dict[str, set[str]] = {}
    for key in keys:
        group, _, name = key.rpartition("/")
        groups.setdefault(group, set()).add(name)
    if set(settings.childKeys()) - groups.get("", set()):
        return True
    for group in settings.childGroups():
        if group not in groups:
            return True
        settings.beginGroup(group)
        try:
            if set(settings.allKeys()) - groups[group]:
                return True
        finally:
            settings.endGroup()
    return False
