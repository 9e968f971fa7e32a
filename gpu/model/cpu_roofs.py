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
  cache folder (gpu/backends/cpu_machine.py), and each process keeps the better of it and its
  own.

Each figure keeps its source, and the roofline labels say them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..units import fmt_bytes_binary, fmt_si
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
            f"measured: a {fmt_bytes_binary(COPY_BYTES)} NumPy copy, read + write bytes, the best "
            f"of {COPY_RUNS} copies; the best on this machine, from {self.date}"
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
            f"per FMA × {self.fma_pipes} FMA pipes × {fmt_si(self.clock_hz, 'Hz')} "
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


@functools.cache
def _copy_bandwidth() -> float:
    """This process's own copy bandwidth, for a CPU whose details do not carry one (the CPU
    backend's do: gpu/backends/cpu_machine.py keeps the best this machine measured)."""
    return measure_copy_bandwidth()


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
    bandwidth = float(details.get("memory_bandwidth_bytes_s") or _copy_bandwidth())
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
            or f"measured: a {fmt_bytes_binary(COPY_BYTES)} NumPy copy, read + write bytes"
        ),
    )
