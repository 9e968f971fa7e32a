"""Results on disk: the JSON of `main.py bench --out`, recorded GPU runs, and CSV for spreadsheets.

Writes are atomic (a temporary file in the same folder, then a rename), so a crash or a full disk
never leaves a half-written file, and they refuse to replace an existing file unless asked to.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .results import DeviceInfo, RunResult
from .trace import Trace, TraceError

SCHEMA = "tilescope.results/1"


class RecordingError(ValueError):
    """A results file that cannot be read or written; the message says which and why."""


@dataclass(frozen=True)
class Recording:
    """A set of results measured on one device, with when and how they were made, and
    optionally real execution traces (gpu/trace.py) recorded on that device. Files without a
    "traces" list (written before traces existed) load with none."""

    device: DeviceInfo
    results: tuple[RunResult, ...]
    meta: dict[str, Any]
    traces: tuple[Trace, ...] = ()

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


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, overwrite: bool = False
) -> None:
    """Write `data` to `path` via a temporary file and a rename; never a partial file."""
    target = Path(path)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists (use --force to replace it)")
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=folder)
    except OSError as exc:
        raise RecordingError(f"cannot write in {folder}: {exc.strerror or exc}") from exc
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def save_recording(
    recording: Recording, path: str | os.PathLike[str], *, overwrite: bool = False
) -> None:
    if str(path).lower().endswith(".csv"):
        data = results_csv(recording.results).encode()
    else:
        data = (_recording_json(recording) + "\n").encode()
    atomic_write_bytes(path, data, overwrite=overwrite)


def _recording_json(recording: Recording) -> str:
    """Indented JSON, except the traces: one compact line each (thousands of small arrays)."""
    data = recording.to_dict()
    traces = data.pop("traces", None)
    text = json.dumps(data, indent=1)
    if not traces:
        return text
    body = ",\n".join(json.dumps(t, separators=(",", ":")) for t in traces)
    return f'{text[:-2]},\n "traces": [\n{body}\n]\n}}'


def load_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a results JSON; any problem becomes a RecordingError naming the file and the cause."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise RecordingError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordingError(f"{path} is not valid JSON: {exc}") from exc
    found = data.get("schema") if isinstance(data, dict) else None
    if found != SCHEMA:
        kind, _, version = str(found).rpartition("/")
        if kind == SCHEMA.rpartition("/")[0] and version.isdigit() and int(version) > 1:
            raise RecordingError(
                f"{path} was written by a newer Tilescope (schema {found}); this version reads "
                f"{SCHEMA}"
            )
        raise RecordingError(f"{path} is not a Tilescope results file (schema {found!r})")
    try:
        device = DeviceInfo.from_dict(data["device"])
        results = tuple(RunResult.from_dict(r) for r in data["results"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordingError(f"{path}: malformed results ({exc})") from exc
    raw_traces = data.get("traces", [])
    if not isinstance(raw_traces, list):
        raise RecordingError(f"{path}: malformed traces (not a list)")
    try:
        traces = tuple(Trace.from_dict(t) for t in raw_traces)
    except TraceError as exc:
        raise RecordingError(f"{path}: {exc}") from exc
    return Recording(device, results, dict(data.get("meta", {})), traces)


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
