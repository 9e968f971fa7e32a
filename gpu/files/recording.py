"""Results on disk: the JSON of `main.py bench --out`, recorded GPU runs, and CSV for spreadsheets.

Writes are atomic and never replace a file unless asked to (gpu/files/fileio.py). Reads go through
the one safe read path (regular files up to `fileio.MAX_READ_BYTES`, UTF-8 JSON) and the
results format of gpu/files/schema.py, checked field by field before any result is built: a bad file
is a RecordingError naming the file and the field. What is written is checked against the same
format first, so this program never writes a file it would refuse to read (no NaN, no Infinity).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import FileReadError, FileWriteError, RecordingError, SchemaError, printable
from ..results import DeviceInfo, RunResult
from .fileio import atomic_write_text, decode_json_members, decode_member, read_bytes
from .schema import (
    RESULTS_SCHEMA,
    RecordingDoc,
    ResultDoc,
    TraceDoc,
    check,
    check_each,
    device_from_checked,
    finite_result,
    result_from_checked,
)
from .trace import Trace

SCHEMA = RESULTS_SCHEMA

__all__ = ["SCHEMA", "Recording", "RecordingError", "load_recording", "save_recording"]


@dataclass(frozen=True)
class Recording:
    """A set of results measured on one device, with when and how they were made, and
    optionally real execution traces (gpu/files/trace.py) recorded on that device. Files without
    a "traces" list (written before traces existed) load with none."""

    device: DeviceInfo
    results: tuple[RunResult, ...]
    meta: dict[str, Any]
    traces: tuple[Trace, ...] = ()
    #: Its ring results and the device counts P it holds (1 for one-device results), found
    #: once where the recording is built, so a viewer never scans every result for them.
    ring_results: tuple[RunResult, ...] = field(init=False, repr=False, compare=False)
    devices: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rings = tuple(r for r in self.results if r.ring is not None)
        counts = {r.ring.devices for r in rings}
        if len(rings) < len(self.results):
            counts.add(1)
        object.__setattr__(self, "ring_results", rings)
        object.__setattr__(self, "devices", tuple(sorted(counts)))

    def to_dict(self) -> dict[str, Any]:
        data = {
            "schema": SCHEMA,
            "meta": self.meta,
            "device": self.device.to_dict(),
            "results": [r.to_dict() for r in self.results],
        }
        if self.traces:
            data["traces"] = [t.to_dict() for t in self.traces]
        return data


def save_recording(
    recording: Recording, path: str | os.PathLike[str], *, overwrite: bool = False
) -> None:
    """Write JSON (or CSV when `path` ends in .csv) atomically. A non-finite error (an output
    holding NaN) is written as the largest float, with a note. FileExistsError when `path`
    exists and not `overwrite`; FileWriteError when it cannot be written or the recording
    holds a value the results format refuses (named by its path)."""
    where = os.fspath(path)
    if where.lower().endswith(".csv"):
        text = results_csv(recording.results)
    else:
        data = replace(recording, results=tuple(map(finite_result, recording.results))).to_dict()
        try:
            check(data, RecordingDoc, where)
        except SchemaError as exc:
            raise FileWriteError(f"cannot write {exc} (refused by the results format)") from exc
        text = _recording_json(data) + "\n"
    atomic_write_text(path, text, overwrite=overwrite)


def _recording_json(data: dict[str, Any]) -> str:
    """Indented JSON, except the traces: one compact line each (thousands of small arrays)."""
    traces = data.pop("traces", None)
    text = json.dumps(data, indent=1, allow_nan=False)
    if not traces:
        return text
    body = ",\n".join(json.dumps(t, separators=(",", ":"), allow_nan=False) for t in traces)
    return f'{text[:-2]},\n "traces": [\n{body}\n]\n}}'


def load_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a results JSON; any problem becomes a RecordingError naming the file and the cause
    (unreadable, not a regular file, too large, not JSON, a field of the wrong type or range)."""
    where = printable(os.fspath(path))
    try:
        members = decode_json_members(read_bytes(path), where)
    except FileReadError as exc:
        raise RecordingError(str(exc)) from exc
    if members is None:
        raise RecordingError(f"{where} is not a Tilescope results file (schema None)")
    return recording_from_members(members, where)


def recording_from_document(data: Any, where: str) -> Recording:
    """A Recording from parsed JSON (`where` names its source in messages), checked in full
    against the results format before anything is built; RecordingError if anything is off."""
    if not isinstance(data, dict):
        raise RecordingError(f"{where} is not a Tilescope results file (schema None)")
    return recording_from_members(data, where)


def recording_from_members(members: Mapping[str, Any], where: str) -> Recording:
    """A Recording from a results document's members, parsed or raw (gpu.files.fileio's
    decode_json_members): the envelope (schema, device, meta) is checked first, then each
    result and trace, one at a time (gpu.files.schema.check_each), before the Recording is built;
    RecordingError if anything is off."""
    try:
        envelope = {k: decode_member(v, where) for k, v in members.items() if k not in _LISTS}
    except FileReadError as exc:
        raise RecordingError(str(exc)) from exc
    found = envelope.get("schema")
    if found != SCHEMA:
        kind, _, version = str(found).rpartition("/")
        newer = version.isascii() and version.isdigit() and len(version) <= 9 and int(version) > 1
        if kind == SCHEMA.rpartition("/")[0] and newer:
            raise RecordingError(
                f"{where} was written by a newer Tilescope (schema {found}); this version reads "
                f"{SCHEMA}"
            )
        raise RecordingError(f"{where} is not a Tilescope results file (schema {found!r:.80})")
    if "results" in members:
        envelope["results"] = []  # checked one by one below
    try:
        check(envelope, RecordingDoc, where)
        results = check_each(members["results"], ResultDoc, where, "results", result_from_checked)
        raw_traces = members.get("traces", [])
        traces = check_each(raw_traces, TraceDoc, where, "traces", Trace.from_checked)
        return Recording(
            device_from_checked(envelope["device"]),
            tuple(results),
            dict(envelope.get("meta", {})),
            tuple(traces),
        )
    except SchemaError as exc:
        raise RecordingError(str(exc)) from exc
    except (TypeError, ValueError, KeyError) as exc:  # a rule the format does not express
        raise RecordingError(f"{where}: malformed results ({exc})") from exc


#: A results document's lists, checked item by item.
_LISTS = ("results", "traces")


CSV_COLUMNS = (
    ("backend", ""),
    ("device", ""),
    ("algorithm", ""),
    ("batch", ""),
    ("heads", ""),
    ("seq_len", ""),
    ("head_dim", ""),
    ("dtype", ""),
    ("causal", ""),
    ("total_ms", "ms"),
    ("kernel_ms", "name=ms;..."),
    ("tflops", "TFLOP/s"),
    ("peak_bytes", "B"),
    ("model_peak_bytes", "B"),
    ("hbm_bytes", "B"),
    ("flops", "FLOP"),
    ("max_abs_error", ""),
    ("oom", ""),
    ("message", ""),
)


def results_csv(results: tuple[RunResult, ...] | list[RunResult]) -> str:
    """One row per result; the header names each column with its unit in brackets."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([f"{c} [{u}]" if u else c for c, u in CSV_COLUMNS])
    for r in results:
        cfg = r.config
        writer.writerow(
            [
                r.backend,
                r.device,
                r.algorithm,
                cfg.batch,
                cfg.heads,
                cfg.seq_len,
                cfg.head_dim,
                cfg.dtype,
                cfg.causal,
                "" if r.total_ms is None else f"{r.total_ms:.6g}",
                ";".join(f"{k.name}={k.ms:.6g}" for k in r.kernel_times),
                "" if r.tflops is None else f"{r.tflops:.6g}",
                "" if r.peak_bytes is None else r.peak_bytes,
                r.model_peak_bytes,
                r.hbm_bytes,
                r.flops,
                "" if r.max_abs_error is None else f"{r.max_abs_error:.3g}",
                r.oom,
                r.message,
            ]
        )
    return buf.getvalue()
