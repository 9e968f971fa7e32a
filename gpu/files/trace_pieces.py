"""A large traces file read and checked in one process and shown in another, a piece at a time.

Reading a traces file and checking it against the format are a few long calls over the whole
file: at the format's limits (a million blocks, 75 MB) they held the interpreter, and so the
window's GUI thread, for seconds. `keep_trace_pieces` does them where they stall nobody (the
app's compute process) and keeps each trace's rows there as JSON pieces of about a megabyte;
`take_trace_piece` hands them back one at a time, and `trace_from_pieces` decodes and builds
each trace from them, one short call per piece, on the thread that shows it.

No Qt here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import msgspec

from ..errors import FileReadError, TraceError
from .fileio import read_json
from .read_stop import check_stop
from .trace import Trace, checked_traces

#: Rows of a trace's blocks (and role marks) per piece handed from the process that read and
#: checked a traces file to the one that shows it: about a megabyte of JSON.
PIECE_ROWS = 16_384
#: Row lists a piece names: the blocks' and the role marks'.
_ROW_LISTS = ("blocks", "role_marks")

#: A checked file's traces, kept by `keep_trace_pieces` for `take_trace_piece`.
_kept: list[dict[str, list[bytes]]] = []


def keep_trace_pieces(path: str | os.PathLike[str]) -> list[tuple[dict[str, Any], int, int]]:
    """Read and check the traces file (or recording) at `path` as `load_traces` does, and keep
    each trace's blocks and role marks here as JSON pieces of PIECE_ROWS rows; returns each
    trace's head (every field but those two) and its number of block and mark pieces.

    The reading and the check are a few long calls over the whole file (a 75 MB file held the
    interpreter for seconds), so they belong where they stall nobody (the app's compute
    process); `take_trace_piece` then hands the pieces back one at a time and
    `trace_from_pieces` decodes and builds them there, one short call each."""
    where = os.fspath(path)
    try:
        data = read_json(path)
    except FileReadError as exc:
        raise TraceError(str(exc)) from exc
    _kept.clear()
    heads = []
    for t in checked_traces(data, where):
        pieces = {
            key: [
                msgspec.json.encode(rows[i : i + PIECE_ROWS])
                for i in range(0, len(rows), PIECE_ROWS)
            ]
            for key in _ROW_LISTS
            if (rows := t.get(key))
        }
        _kept.append(pieces)
        head = {k: v for k, v in t.items() if k not in _ROW_LISTS}
        heads.append((head, len(pieces.get("blocks", ())), len(pieces.get("role_marks", ()))))
    return heads


def take_trace_piece(trace: int, key: str, index: int) -> bytes:
    """Piece `index` of the kept trace `trace`'s rows `key` ("blocks" or "role_marks"); each is
    handed back once."""
    pieces = _kept[trace][key]
    piece, pieces[index] = pieces[index], b""
    return piece


def trace_from_pieces(
    head: dict[str, Any], blocks: Iterable[bytes], role_marks: Iterable[bytes] = ()
) -> Trace:
    """The trace whose head and row pieces `keep_trace_pieces` checked and kept."""
    rows: dict[str, list[Any]] = {"blocks": [], "role_marks": []}
    for key, pieces in (("blocks", blocks), ("role_marks", role_marks)):
        for piece in pieces:
            check_stop()
            rows[key] += msgspec.json.decode(piece)
    try:
        return Trace.from_checked({**head, **rows})
    except (TypeError, ValueError, KeyError) as exc:  # a rule the format does not express
        raise TraceError(f"malformed trace ({exc})") from exc
