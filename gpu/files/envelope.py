"""The envelope a Tilescope document opens with: a `schema` of "tilescope.<kind>/<version>",
checked before anything else in the file is, so that a file from a newer Tilescope says so
and any other file says what it is not. Results recordings (gpu/files/recording.py) and saved
sessions (app/state/session.py) both read theirs here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import FileReadError
from .fileio import decode_member

#: The members of a document that hold its many items (checked one at a time, after the rest).
LISTS = ("results", "traces")


def version_number(text: str) -> int:
    """A schema's version ("1" of "tilescope.session/1"); -1 for anything but a short number."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else -1


def read_envelope(
    members: Mapping[str, Any],
    where: str,
    schema: str,
    what: str,
    error: Callable[[str], Exception],
    reader: str = "",
) -> dict[str, Any]:
    """A document's members other than its `LISTS`, decoded (parsed or raw: see
    gpu.files.fileio's decode_json_members), once its schema is found to be `schema`. Otherwise
    `error` says that `where` was written by a newer Tilescope (the same kind at a higher
    version; `reader` names this program's version in the message) or is not a Tilescope
    `what` at all."""
    try:
        envelope = {k: decode_member(v, where) for k, v in members.items() if k not in LISTS}
    except FileReadError as exc:
        raise error(str(exc)) from exc
    found = envelope.get("schema")
    if found != schema:
        kind, _, version = str(found).rpartition("/")
        own_kind, _, own_version = schema.rpartition("/")
        if kind == own_kind and version_number(version) > int(own_version):
            this = f"this version ({reader})" if reader else "this version"
            raise error(
                f"{where} was written by a newer Tilescope (schema {found}); {this} reads {schema}"
            )
        raise error(f"{where} is not a Tilescope {what} (schema {found!r:.80})")
    return envelope
