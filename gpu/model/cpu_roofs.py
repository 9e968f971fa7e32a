"""This CPU's own roofs, so the CPU backend's results are judged against the machine that ran
them, not against a GPU.

- Compute: cores × fp32 SIMD lanes × 2 (an FMA is two FLOPs) × FMA pipes per core × clock. The
  lanes come from the instruction sets the kernel reports (/proc/cpuinfo flags: AVX-512 16,
  AVX2 8, else SSE 4), the clock from cpufreq's maximum where the kernel exposes it, else
  /proc/cpuinfo's "cpu MHz"; two FMA pipes per core is what x86 cores with AVX2 have had since
  Haswell and Zen 2 (one before). NumPy multiplies the CPU backend's matrices in fp32/fp64
  through BLAS, so this is the roof its matmuls run against.
- Memory: the bandwidth of a large NumPy copy (read + write bytes over the best of
  COPY_RUNS copies), measured once per process (`memory_bandwidth`, a fraction of a second)
  the first time the CPU backend describes its device: on the app's runner thread, never the
  GUI's. One measurement on a busy machine can come out several times too low (2.8 to
  19.3 GB/s over seven launches of one 2-core machine), which moves the ridge and flips
  verdicts; so the best ever measured on this machine is kept, with its date, in the user's
  cache folder (`stored_bandwidth_file`), and each process keeps the better of it and its own.

Each figure keeps its source, and the roofline labels say them.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .costmodel import CPU, GpuSpec

#: Bytes of each buffer a bandwidth sample copies: past the last-level cache of the CPUs
#: this runs on (up to 96 MiB of L3 per die), so the copy streams from memory.
COPY_BYTES = 128 << 20
#: Copies per measurement; the fastest counts (the others met other work on the machine).
COPY_RUNS = 5
#: Where the best bandwidth of each machine is kept (TILESCOPE_CACHE_DIR overrides the
#: folder; tests point it at a temporary one).
CACHE_DIR_ENV = "TILESCOPE_CACHE_DIR"
BANDWIDTH_FILE = "cpu_bandwidth.json"


@dataclass(frozen=True)
class Bandwidth:
    """A machine's memory bandwidth: the best copy measured on it, and when."""

    bytes_s: float
    date: str  # ISO date of the measurement that gave the best
    measured_now: float  # this process's own best, for the record

    @property
    def source(self) -> str:
        return (
            f"measured: a {COPY_BYTES >> 20} MiB NumPy copy, read + write bytes, the best of "
            f"{COPY_RUNS} copies; the best on this machine, from {self.date}"
        )


@dataclass(frozen=True)
class CpuFeatures:
    cores: int
    simd_lanes_fp32: int
    simd_name: str
    fma_pipes: int
    clock_hz: float
    clock_source: str

    @property
    def fp32_flops(self) -> float:
        return self.cores * self.simd_lanes_fp32 * 2 * self.fma_pipes * self.clock_hz

    @property
    def source(self) -> str:
        return (
            f"{self.cores} cores × {self.simd_lanes_fp32} fp32 lanes ({self.simd_name}) × 2 FLOP "
            f"per FMA × {self.fma_pipes} FMA pipes × {self.clock_hz / 1e9:.2f} GHz "
            f"({self.clock_source})"
        )


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def features(cpuinfo: str | None = None, max_freq_khz: str | None = None) -> CpuFeatures:
    """What this CPU can do per clock, and its clock (arguments: for tests)."""
    text = _cpuinfo() if cpuinfo is None else cpuinfo
    flags: set[str] = set()
    mhz = 0.0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "cpu MHz" and not mhz:
            with contextlib.suppress(ValueError):
                mhz = float(value)
    if "avx512f" in flags:
        lanes, simd = 16, "AVX-512"
    elif "avx2" in flags or "avx" in flags:
        lanes, simd = 8, "AVX2" if "avx2" in flags else "AVX"
    elif "asimd" in flags:
        lanes, simd = 4, "NEON"
    else:
        lanes, simd = 4, "SSE"
    fma = 2 if "fma" in flags and "avx2" in flags else 1
    if max_freq_khz is None:
        try:
            path = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
            max_freq_khz = Path(path).read_text()
        except OSError:
            max_freq_khz = ""
    try:
        hz, how = float(max_freq_khz) * 1e3, "cpufreq maximum"
    except ValueError:
        hz, how = mhz * 1e6, "/proc/cpuinfo cpu MHz"
    if hz <= 0:
        hz, how = 2.0e9, "assumed 2 GHz: the kernel reports no clock"
    return CpuFeatures(_cores(), lanes, simd, fma, hz, how)


def measure_copy_bandwidth(nbytes: int = COPY_BYTES, runs: int = COPY_RUNS) -> float:
    """Bytes per second of the fastest of `runs` copies of `nbytes` (read + write)."""
    import numpy as np

    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best


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
    from ..files.fileio import atomic_write_text, read_json

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


def cpu_spec_from_details(name: str, memory_bytes: int, details: dict[str, Any]) -> GpuSpec:
    """The CPU's roofs as a spec: measured bandwidth and the per-clock rates `details` hold;
    any missing figure is worked out here (the bandwidth measured once per process)."""
    f = features()
    cores = int(details.get("cores") or f.cores)
    lanes = int(details.get("simd_lanes_fp32") or f.simd_lanes_fp32)
    simd = str(details.get("simd") or f.simd_name)
    fma = int(details.get("fma_pipes") or f.fma_pipes)
    hz = float(details.get("clock_hz") or f.clock_hz)
    how = str(details.get("clock_source") or f.clock_source)
    feats = CpuFeatures(cores, lanes, simd, fma, hz, how)
    bandwidth = float(details.get("memory_bandwidth_bytes_s") or memory_bandwidth())
    return GpuSpec(
        name=name or f"CPU ({platform.machine()}, {cores} cores)",
        memory_bytes=int(memory_bytes),
        bandwidth_bytes_s=bandwidth,
        smem_per_sm_bytes=1 << 20,
        fp16_tensor_flops=0.0,
        sms=cores,
        source=feats.source,
        fp32_flops=feats.fp32_flops,
        clock_hz=hz,
        clock_source=how,
        kind=CPU,
        bandwidth_source=str(
            details.get("memory_bandwidth_source")
            or f"measured: a {COPY_BYTES >> 20} MiB NumPy copy, read + write bytes"
        ),
    )
