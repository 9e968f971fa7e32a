"""Measured traffic: hardware counters sampled during a kernel, through NVIDIA's CUPTI for
Python (`cupti-python`, PM sampling API).

How a kernel is measured (`PmSampler.measure`): the L2 cache is flushed (outside the sampled
window), sampling starts, the kernel runs once, the device finishes, sampling stops; this is
repeated `launches` times and the samples of each window are summed and averaged per launch.
PM sampling reads the counters every `interval` of GPU time, and a window's samples add up to
everything the GPU did in it: with only this kernel running, that is the kernel's traffic.
Each window opens and closes two intervals away from the kernel, so its first and last
samples are idle and none of the kernel's counts fall outside the window. The first sample a
window decodes counts from the counters' previous read (it starts at timestamp 0) and holds
what ran between windows, so it is dropped (`window_samples`).

The counters (`METRICS`) are DRAM bytes read and written, all L2 traffic, tensor-pipe active
cycles, warp instructions on the exponential unit (XU) and elapsed GPU cycles.

Loading: cupti-python must drive the libcupti of its own version (an older one in the process
crashes it or answers ERROR_INVALID_PARAMETER). `load_cupti` finds the `nvidia-cuda-cupti`
wheel that matches the installed cupti-python and loads its libnvperf_host, libnvperf_target
and libcupti globally (ctypes, RTLD_GLOBAL) before importing cupti, so the library lookups that
follow find that copy. A libcupti already given through LD_PRELOAD is used as is. Anything that
goes wrong (not installed, no device, no permission, unsupported GPU, an older libcupti already
loaded) is one `ProfilerUnavailable` with a `kind` and a one-line message, raised once and then
remembered, so callers can say it once and go on with the model.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..results import STRIP_ACTIVE_SHARE, STRIP_MAX_POINTS, KernelTraffic, TrafficStrip

#: Counters sampled, in this order (CUPTI metric names; all collectable in one PM-sampling pass
#: on Hopper).
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
L2_BYTES = "lts__t_bytes.sum"
TENSOR_CYCLES = "sm__pipe_tensor_cycles_active.sum"
XU_INSTRUCTIONS = "sm__inst_executed_pipe_xu.sum"
ELAPSED_CYCLES = "gr__cycles_elapsed.max"
METRICS: tuple[str, ...] = (
    DRAM_READ,
    DRAM_WRITE,
    L2_BYTES,
    TENSOR_CYCLES,
    XU_INSTRUCTIONS,
    ELAPSED_CYCLES,
)

#: Sampling interval (GPU time) for kernels up to MAX_SAMPLES_PER_WINDOW intervals long;
#: longer kernels get a longer interval so a window stays this many samples at most.
DEFAULT_INTERVAL_NS = 20_000
MAX_SAMPLES_PER_WINDOW = 1000
#: Size of the buffer the GPU writes raw samples to.
HARDWARE_BUFFER_BYTES = 256 << 20
#: Idle intervals kept before and after the kernel in each window.
EDGE_INTERVALS = 2
#: A gap between consecutive samples longer than this share of the interval is a lost sample.
LOST_SAMPLE_GAP = 0.5

#: ProfilerUnavailable kinds.
NOT_INSTALLED = "not_installed"
LIBRARY = "library"
NO_DEVICE = "no_device"
PERMISSION = "permission"
UNSUPPORTED = "unsupported"
BUSY = "busy"
INCOMPLETE = "incomplete"
ERROR = "error"

_WHEELS = ("nvidia-cuda-cupti", "nvidia-cuda-cupti-cu12")
_PRELOAD_ORDER = ("libnvperf_host.so", "libnvperf_target.so", "libcupti.so")


class ProfilerUnavailable(RuntimeError):
    """Counters cannot be sampled here; `kind` names why (NOT_INSTALLED, LIBRARY, NO_DEVICE,
    PERMISSION, UNSUPPORTED, BUSY, INCOMPLETE, ERROR), the message says it in one line."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


# --------------------------------------------------------------------------------------------
# Finding and loading the library


def _version_key(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def wheel_library_dirs() -> list[tuple[str, Path]]:
    """(version, folder) of every installed nvidia-cuda-cupti wheel that holds a libcupti,
    best match for the installed cupti-python first (same major.minor, then newest)."""
    from importlib import metadata

    try:
        want = _version_key(metadata.version("cupti-python"))[:2]
    except metadata.PackageNotFoundError:
        want = ()
    found: dict[Path, str] = {}
    for wheel in _WHEELS:
        for dist in metadata.distributions(name=wheel):
            for file in dist.files or ():
                if Path(str(file)).name.startswith("libcupti.so"):
                    folder = Path(str(dist.locate_file(file))).resolve().parent
                    if folder.is_dir():
                        found.setdefault(folder, dist.version)
    ranked = sorted(
        found.items(),
        key=lambda item: (_version_key(item[1])[:2] == want, _version_key(item[1])),
        reverse=True,
    )
    return [(version, folder) for folder, version in ranked]


def loaded_libcupti() -> list[str]:
    """Paths of libcupti files mapped into this process (Linux /proc/self/maps)."""
    try:
        text = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    paths = {line.split()[-1] for line in text.splitlines() if "libcupti.so" in line}
    return sorted(p for p in paths if p.startswith("/"))


def _library_file(folder: Path, stem: str) -> Path | None:
    matches = sorted(folder.glob(stem + "*"), key=lambda p: len(p.name))
    return matches[0] if matches else None


_load_lock = threading.Lock()
_loaded: Any = None
_load_error: ProfilerUnavailable | None = None
_library_path: str = ""


def library_path() -> str:
    """The libcupti this process uses (after `load_cupti`), for reports."""
    return _library_path


def load_cupti() -> Any:
    """Import `cupti.pm_sampling` with the matching libcupti loaded first; the module, or
    ProfilerUnavailable (remembered: later calls raise the same at once)."""
    global _loaded, _load_error, _library_path
    with _load_lock:
        if _loaded is not None:
            return _loaded
        if _load_error is not None:
            raise _load_error
        try:
            _loaded = _load()
        except ProfilerUnavailable as exc:
            _load_error = exc
            raise
        mapped = loaded_libcupti()
        _library_path = mapped[0] if mapped else _library_path
        return _loaded


def _load() -> Any:
    global _library_path
    from importlib import metadata

    try:
        metadata.version("cupti-python")
    except metadata.PackageNotFoundError:
        raise ProfilerUnavailable(
            NOT_INSTALLED,
            "measured traffic needs NVIDIA's cupti-python and nvidia-cuda-cupti "
            "(pip install the cuda13 extra)",
        ) from None
    preloaded = "libcupti.so" in os.environ.get("LD_PRELOAD", "")
    if not preloaded:
        dirs = wheel_library_dirs()
        if not dirs:
            raise ProfilerUnavailable(
                NOT_INSTALLED,
                "cupti-python is installed but no nvidia-cuda-cupti wheel with libcupti was "
                "found (pip install nvidia-cuda-cupti matching cupti-python)",
            )
        version, folder = dirs[0]
        target = _library_file(folder, "libcupti.so")
        already = [p for p in loaded_libcupti() if target is None or Path(p) != target.resolve()]
        if already:
            raise ProfilerUnavailable(
                LIBRARY,
                f"another libcupti is already loaded in this process ({already[0]}); "
                f"cupti-python needs the one of nvidia-cuda-cupti {version}: load "
                "gpu.counters.profiler before libraries that bring their own (PyTorch)",
            )
        for stem in _PRELOAD_ORDER:
            path = _library_file(folder, stem)
            if path is None:
                if stem == "libcupti.so":
                    raise ProfilerUnavailable(LIBRARY, f"no libcupti in {folder}")
                continue
            try:
                ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                raise ProfilerUnavailable(LIBRARY, f"cannot load {path}: {exc}") from None
        _library_path = str(target)
    try:
        import cupti.cupti  # noqa: F401  (the bindings: the library is resolved from here on)
        from cupti import pm_sampling
    except ModuleNotFoundError as exc:  # cupti itself, or what it needs (cuda.bindings, ...)
        raise ProfilerUnavailable(
            NOT_INSTALLED,
            f"cupti-python cannot be imported: {exc} (PM sampling needs cupti-python 13.3 or "
            "newer with its dependencies)",
        ) from None
    except ImportError as exc:  # cupti.pm_sampling missing (an old release) or a broken .so
        raise ProfilerUnavailable(
            NOT_INSTALLED if "pm_sampling" in str(exc) else LIBRARY,
            f"cupti-python cannot be imported or has no PM sampling (needs 13.3 or newer): {exc}",
        ) from None
    except OSError as exc:
        raise ProfilerUnavailable(LIBRARY, f"cupti-python cannot load libcupti: {exc}") from None
    return pm_sampling


# --------------------------------------------------------------------------------------------
# Samples and what they add up to


@dataclass(frozen=True)
class Sample:
    """One sampling interval: GPU timestamps (ns) and the counters' increments, in METRICS
    order."""

    start_ns: int
    end_ns: int
    values: tuple[float, ...]

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    def value(self, metric: str) -> float:
        return self.values[METRICS.index(metric)]


def window_gaps_ns(samples: Sequence[Sample], min_gap_ns: int = 0) -> int:
    """Time between consecutive samples that no sample covers, counting only gaps longer than
    `min_gap_ns` (lost samples show up here; a timer's few-ns seams do not)."""
    gaps = (b.start_ns - a.end_ns for a, b in itertools.pairwise(samples))
    return sum(g for g in gaps if g > min_gap_ns)


def window_samples(samples: Sequence[Sample]) -> list[Sample]:
    """The samples that belong to the window. The first sample after `start` counts from the
    counters' previous read, not from `start` (its start timestamp is 0), so it holds whatever
    the GPU did between two windows: the L2 flush before a sampled launch, buffer fills. The
    window opens EDGE_INTERVALS idle intervals before the work it measures, so that sample
    never holds any of it and is dropped, with any other sample that starts at time 0."""
    return [s for i, s in enumerate(samples) if i > 0 and s.start_ns > 0]


def _total(windows: Sequence[Sequence[Sample]], metric: str) -> float:
    i = METRICS.index(metric)
    return sum(s.values[i] for window in windows for s in window)


def active_span(samples: Sequence[Sample]) -> Sequence[Sample]:
    """The samples from the first to the last whose L2 or DRAM traffic is more than
    STRIP_ACTIVE_SHARE of the window's busiest sample (the kernel, without the idle edges of
    its window: an idle GPU's counters are small but not zero)."""

    def traffic(s: Sample) -> float:
        return max(s.value(L2_BYTES), s.value(DRAM_READ) + s.value(DRAM_WRITE))

    top = max((traffic(s) for s in samples), default=0.0)
    busy = [i for i, s in enumerate(samples) if top and traffic(s) > STRIP_ACTIVE_SHARE * top]
    return samples[busy[0] : busy[-1] + 1] if busy else samples


def strip_from_samples(
    samples: Sequence[Sample], sms: int, max_points: int = STRIP_MAX_POINTS
) -> TrafficStrip:
    """The kernel's samples thinned to at most `max_points`: consecutive samples are merged
    (bytes and cycles summed, so each point is the exact mean over its merged time)."""
    span = list(active_span(samples))
    if not span:
        return TrafficStrip()
    per_point = math.ceil(len(span) / max_points)
    t0 = span[0].start_ns
    t_us, dram_gbs, tensor = [], [], []
    for k in range(0, len(span), per_point):
        group = span[k : k + per_point]
        start, end = group[0].start_ns, group[-1].end_ns
        dt = max(1, end - start)
        dram = sum(s.value(DRAM_READ) + s.value(DRAM_WRITE) for s in group)
        cycles = sum(s.value(ELAPSED_CYCLES) for s in group)
        active = sum(s.value(TENSOR_CYCLES) for s in group)
        t_us.append(round((start + end) / 2e3 - t0 / 1e3, 3))
        dram_gbs.append(round(dram / dt, 3))  # bytes per ns = GB/s
        # Busy sub-partition cycles per SM cycle (0..4: four tensor pipes per SM), the strip's
        # stored unit; TrafficStrip.tensor_share divides by the four pipes.
        tensor.append(round(active / (cycles * sms), 4) if cycles and sms else 0.0)
    return TrafficStrip(tuple(t_us), tuple(dram_gbs), tuple(tensor))


def summarize(
    name: str,
    windows: Sequence[Sequence[Sample]],
    interval_ns: int,
    sms: int,
) -> KernelTraffic:
    """Per-launch means over sampled windows that each held one launch of the kernel; the strip
    comes from the first window."""
    if not windows or not all(windows):
        raise ProfilerUnavailable(INCOMPLETE, f"{name}: a sampled window holds no samples")
    launches = len(windows)

    def per_launch(metric: str) -> int:
        return round(_total(windows, metric) / launches)

    span = sum(w[-1].end_ns - w[0].start_ns for w in windows) / launches
    return KernelTraffic(
        name=name,
        dram_read_bytes=per_launch(DRAM_READ),
        dram_write_bytes=per_launch(DRAM_WRITE),
        l2_bytes=per_launch(L2_BYTES),
        tensor_active_cycles=per_launch(TENSOR_CYCLES),
        xu_warp_instructions=per_launch(XU_INSTRUCTIONS),
        elapsed_cycles=per_launch(ELAPSED_CYCLES),
        window_ns=round(span),
        sample_interval_ns=interval_ns,
        launches=launches,
        strip=strip_from_samples(windows[0], sms),
    )


def interval_for(kernel_ns: float, base_ns: int = DEFAULT_INTERVAL_NS) -> int:
    """The sampling interval for a kernel this long: `base_ns`, or longer so that a window
    holds at most MAX_SAMPLES_PER_WINDOW samples."""
    return max(base_ns, math.ceil(kernel_ns / MAX_SAMPLES_PER_WINDOW / 1000) * 1000)


# --------------------------------------------------------------------------------------------
# The sampler


def _reason(exc: BaseException, what: str) -> ProfilerUnavailable:
    """A CUPTI or cupti-python failure as one typed reason."""
    if isinstance(exc, ProfilerUnavailable):
        return exc
    if isinstance(exc, PermissionError):
        return ProfilerUnavailable(
            PERMISSION,
            f"{what}: no permission to read GPU performance counters (run as root, or set "
            "NVreg_RestrictProfilingToAdminUsers=0 in the NVIDIA driver)",
        )
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, ValueError) and "not supported" in text.lower():
        return ProfilerUnavailable(UNSUPPORTED, f"{what}: {text}")
    if isinstance(exc, RuntimeError) and "already" in text.lower():
        return ProfilerUnavailable(BUSY, f"{what}: {text} (another profiler holds the counters?)")
    if isinstance(exc, MemoryError):
        return ProfilerUnavailable(INCOMPLETE, f"{what}: {text}")
    status = getattr(exc, "status", None)
    name = getattr(status, "name", None) or (str(status) if status is not None else "")
    if "NO_DEVICE" in name or "INVALID_DEVICE" in name:
        return ProfilerUnavailable(NO_DEVICE, f"{what}: CUPTI sees no device ({name})")
    if "NOT_SUPPORTED" in name or "NOT_COMPATIBLE" in name:
        return ProfilerUnavailable(UNSUPPORTED, f"{what}: {name}")
    if "INSUFFICIENT_PRIVILEGES" in name:
        return _reason(PermissionError(), what)
    return ProfilerUnavailable(ERROR, f"{what}: {name or text}")


class PmSampler:
    """A PM-sampling session on one device: `enable` once, `measure` kernels, `close`.

    One session holds the device's counters; Nsight Compute or a second session cannot use
    them meanwhile. Use it as a context manager so the counters are always given back.
    """

    def __init__(
        self,
        device_index: int = 0,
        sms: int = 0,
        interval_ns: int = DEFAULT_INTERVAL_NS,
        metrics: Sequence[str] = METRICS,
    ) -> None:
        self.device_index = device_index
        self.sms = sms
        self.interval_ns = interval_ns
        #: What each sample's values are; `measure` (and Sample.value) need METRICS.
        self.metrics = tuple(metrics)
        self._collector: Any = None

    def __enter__(self) -> PmSampler:
        self.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def enable(self) -> None:
        pm_sampling = load_cupti()
        collector = pm_sampling.Collector(device_index=self.device_index)
        try:
            collector.enable()
        except Exception as exc:
            raise _reason(exc, "enabling PM sampling") from None
        try:
            collector.configure(
                metrics=list(self.metrics),
                hardware_buffer_size=HARDWARE_BUFFER_BYTES,
                sampling_interval=self.interval_ns,
                trigger_mode=pm_sampling.TriggerMode.GPU_TIME_INTERVAL,
            )
        except Exception as exc:
            with contextlib.suppress(Exception):
                collector.disable()
            raise _reason(exc, "configuring PM sampling") from None
        self._collector = collector

    def close(self) -> None:
        collector, self._collector = self._collector, None
        if collector is not None:
            with contextlib.suppress(Exception):
                collector.disable()

    def _edge(self) -> None:
        time.sleep(EDGE_INTERVALS * self.interval_ns * 1e-9)

    def sample_window(
        self, run: Callable[[], None], synchronize: Callable[[], None]
    ) -> list[Sample]:
        """Samples of one window around `run()` (which queues GPU work; `synchronize` waits)."""
        collector = self._collector
        if collector is None:
            raise ProfilerUnavailable(ERROR, "the PM sampler is not enabled")
        synchronize()
        t0 = time.perf_counter()
        try:
            collector.start()
            self._edge()
            run()
            synchronize()
            self._edge()
            collector.stop()
        except Exception as exc:
            with contextlib.suppress(Exception):
                collector.stop()
            raise _reason(exc, "sampling") from None
        host_ns = (time.perf_counter() - t0) * 1e9
        max_samples = int(host_ns / self.interval_ns * 1.5) + 64
        try:
            data = collector.decode(max_samples=max_samples)
            samples = [
                Sample(
                    int(x.start_timestamp), int(x.end_timestamp), tuple(map(float, x.metric_values))
                )
                for x in data
            ]
        except Exception as exc:
            raise _reason(exc, "decoding PM samples") from None
        if tuple(data.metrics) != self.metrics:
            raise ProfilerUnavailable(ERROR, f"decoded {data.metrics}, configured {self.metrics}")
        samples = window_samples(samples)
        if not samples:
            raise ProfilerUnavailable(INCOMPLETE, "the sampled window holds no samples")
        lost = window_gaps_ns(samples, int(LOST_SAMPLE_GAP * self.interval_ns))
        if lost:
            span = samples[-1].end_ns - samples[0].start_ns
            raise ProfilerUnavailable(
                INCOMPLETE, f"samples are missing from the window ({lost} ns of {span} ns)"
            )
        return samples

    def measure(
        self,
        name: str,
        launch: Callable[[], None],
        synchronize: Callable[[], None],
        flush: Callable[[], None] | None = None,
        launches: int = 3,
    ) -> KernelTraffic:
        """Counters of `launch` per launch: `launches` windows, each after `flush()` (run
        outside the window; pass one that evicts the L2 for cold-cache figures)."""
        if self.metrics != METRICS:
            raise ValueError("measure() sums the METRICS counters; this sampler reads others")
        windows = []
        for _ in range(max(1, launches)):
            if flush is not None:
                flush()
            windows.append(self.sample_window(launch, synchronize))
        return summarize(name, windows, self.interval_ns, self.sms)


_reason_lock = threading.Lock()
_checked: dict[int, ProfilerUnavailable | None] = {}


def unavailable_reason(device_index: int = 0) -> ProfilerUnavailable | None:
    """None when counters can be sampled on this device, else why not; checked once per
    process and device (the library loads, a session enables and configures, then closes)."""
    with _reason_lock:
        if device_index in _checked:
            return _checked[device_index]
        reason: ProfilerUnavailable | None = None
        try:
            import cupy

            if not cupy.is_available():
                raise ProfilerUnavailable(NO_DEVICE, "no CUDA device: counters cannot be sampled")
            device = cupy.cuda.Device(device_index)
            with device:
                device.synchronize()  # makes sure the device's context exists for CUPTI
                with PmSampler(device_index):
                    pass
        except ImportError:
            reason = ProfilerUnavailable(NO_DEVICE, "CuPy is not installed: no device to sample")
        except ProfilerUnavailable as exc:
            reason = exc
        except Exception as exc:
            reason = _reason(exc, "checking PM sampling")
        _checked[device_index] = reason
        return reason
