"""The app's saved settings, read with every value's type checked.

A settings file is the user's to edit and can be damaged (cut short inside an `@ByteArray(`
value, hand-edited, written by another version): a stored value of the wrong type or range is
ignored with one line in the log ("tilescope.settings") and the default is used, so a bad file
never stops the app from starting. Every key the app writes is listed in `KEYS` with its kind;
`read(settings, key)` is the one way to read one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QByteArray

from .settings_store import SettingsStore

log = logging.getLogger("tilescope.settings")

#: What an absent or refused value reads as.
MISSING: Any = None


class _Refused(Exception):
    """A stored value that is not of its key's kind; the message says why."""


def _text(raw: Any) -> str:
    if not isinstance(raw, str):
        raise _Refused(f"not text ({type(raw).__name__})")
    if not raw.isprintable() or len(raw) > 4096:
        raise _Refused("not a line of printable text")
    return raw


def _int(raw: Any) -> int:
    """Ini files store numbers as text: "1024" is an int, "10.5", "ten" and "1e999" are not."""
    if isinstance(raw, bool):
        raise _Refused("not a whole number")
    if isinstance(raw, int):
        return raw
    text = _text(raw).strip()
    if not (text.lstrip("+-").isascii() and text.lstrip("+-").isdigit()) or len(text) > 18:
        raise _Refused(f"{text[:40]!r} is not a whole number")
    return int(text)


def _float(raw: Any) -> float:
    if isinstance(raw, bool):
        raise _Refused("not a number")
    try:
        value = float(raw if isinstance(raw, (int, float)) else _text(raw).strip())
    except (ValueError, OverflowError):
        raise _Refused(f"{str(raw)[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise _Refused("not a finite number")
    return value


def _bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = _text(raw).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise _Refused(f"{text[:40]!r} is not true or false")


def _bytes(raw: Any) -> QByteArray:
    """A saved window geometry or layout: only a byte array (text means the file was cut or
    edited inside its @ByteArray(...))."""
    if isinstance(raw, QByteArray):
        return raw
    if isinstance(raw, (bytes, bytearray)):
        return QByteArray(bytes(raw))
    raise _Refused(f"not saved window data ({type(raw).__name__})")


def _paths(raw: Any) -> list[str]:
    """A list of file paths (an ini file stores one alone as text)."""
    if isinstance(raw, str):
        return [_text(raw)] if raw else []
    if not isinstance(raw, (list, tuple)):
        raise _Refused(f"not a list of files ({type(raw).__name__})")
    return [_text(v) for v in raw]


Kind = Callable[[Any], Any]

#: Every key the app writes, with the kind its value must have.
KEYS: dict[str, Kind] = {
    "controls/seq_len": _int,
    "controls/heads": _int,
    "controls/head_dim": _int,
    "controls/batch": _int,
    "controls/dtype": _text,
    "controls/causal": _bool,
    "controls/block_m": _int,
    "controls/block_n": _int,
    "controls/pass": _text,
    "controls/deterministic": _bool,
    "controls/kv_heads": _int,
    "controls/new_tokens": _int,
    "controls/fit_weights": _text,
    "controls/fit_kv": _text,
    "controls/layers": _int,
    "controls/algorithms": _text,
    "controls/backend": _text,
    "controls/recorded_path": _text,
    "controls/budget": _text,
    "controls/custom_gb": _float,
    "controls/devices": _int,
    "controls/measure_bytes": _bool,
    "view/theme": _text,
    "view/explain": _bool,
    "view/every_series": _bool,
    "lesson/dismissed": _bool,
    "window/geometry": _bytes,
    "window/state": _bytes,
    "recent/files": _paths,
    "files/folder": _text,
    "export/folder": _text,
}


def read(settings: SettingsStore, key: str, default: Any = MISSING) -> Any:
    """The value stored under `key` (one of KEYS), converted to its kind; `default` when it is
    absent or refused (a refusal is logged once per read, naming the key and why)."""
    kind = KEYS[key]
    try:
        raw = settings.value(key)
    except Exception as exc:  # a value Qt stored but cannot hand to Python
        log.warning("ignored the setting %s: unreadable (%s)", key, type(exc).__name__)
        return default
    if raw is None:
        if settings.contains(key):  # present, but Qt could not decode it (a damaged @Variant)
            log.warning("ignored the setting %s: unreadable", key)
        return default
    try:
        return kind(raw)
    except _Refused as exc:
        log.warning("ignored the setting %s: %s", key, exc)
        return default


def read_in(settings: SettingsStore, key: str, allowed: Any, default: Any = MISSING) -> Any:
    """`read`, and the value must also be one of `allowed` (a theme, a preset name)."""
    value = read(settings, key, default)
    if value is default or value in allowed:
        return value
    log.warning("ignored the setting %s: %r is not one of the choices", key, value)
    return default
