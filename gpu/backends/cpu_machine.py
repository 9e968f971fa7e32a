"""This machine's memory bandwidth for the CPU backend's roofs: the best copy ever measured on
it, kept with its date in the user's cache folder, beside what this process measures
(gpu/model/cpu_roofs.py says why one measurement is not enough). Here, not in gpu/model, because
it keeps a file (gpu/files)."""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import os
import platform
from pathlib import Path
from typing import Any

from ..files.fileio import atomic_write_text, read_json
from ..model.cpu_roofs import (
    BANDWIDTH_FILE,
    CACHE_DIR_ENV,
    Bandwidth,
    _cpuinfo,
    features,
    measure_copy_bandwidth,
)


def stored_bandwidth_file() -> Path:
    """The file that keeps each machine's best bandwidth."""
    folder = os.environ.get(CACHE_DIR_ENV)
    if not folder:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        folder = str(Path(base) / "tilescope")
    return Path(folder) / BANDWIDTH_FILE


def machine_key() -> str:
    """This machine: its id (systemd's machine-id, else the host name) and its CPU model."""
    ident = ""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        with contextlib.suppress(OSError):
            ident = Path(path).read_text().strip()
            if ident:
                break
    model = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in _cpuinfo().splitlines()
            if ln.startswith("model name")
        ),
        platform.machine(),
    )
    return f"{ident or platform.node()} · {model}"


def best_bandwidth(measured: float, path: Path, key: str, today: str) -> Bandwidth:
    """The better of `measured` and what `path` keeps for `key`; a better measurement
    replaces the kept one (written whole or not at all). A missing or damaged file keeps
    nothing; one that cannot be written costs only the keeping."""
    kept: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        data = read_json(path)
        if isinstance(data, dict):
            kept = data
    entry = kept.get(key)
    if isinstance(entry, dict):
        try:
            best, date = float(entry["bytes_s"]), str(entry["date"])
        except (KeyError, TypeError, ValueError):
            best, date = 0.0, ""
        if best >= measured and date and 1e6 <= best <= 1e16:
            return Bandwidth(best, date, measured)
    kept[key] = {"bytes_s": measured, "date": today}
    with contextlib.suppress(Exception):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(kept, indent=1, sort_keys=True), overwrite=True)
    return Bandwidth(measured, today, measured)


@functools.cache
def machine_bandwidth() -> Bandwidth:
    """This machine's memory bandwidth: this process measures it once (COPY_RUNS copies) and
    keeps the better of that and the best kept for this machine."""
    today = datetime.date.today().isoformat()
    return best_bandwidth(measure_copy_bandwidth(), stored_bandwidth_file(), machine_key(), today)


def memory_bandwidth() -> float:
    """Bytes per second of memory, as `machine_bandwidth` has it."""
    return machine_bandwidth().bytes_s


def device_details() -> dict[str, Any]:
    """What the CPU backend's DeviceInfo carries for its roofs (measures the bandwidth once)."""
    f = features()
    return {
        "cores": f.cores,
        "simd_lanes_fp32": f.simd_lanes_fp32,
        "simd": f.simd_name,
        "fma_pipes": f.fma_pipes,
        "clock_hz": f.clock_hz,
        "clock_source": f.clock_source,
        "memory_bandwidth_bytes_s": memory_bandwidth(),
        "memory_bandwidth_source": machine_bandwidth().source,
    }
