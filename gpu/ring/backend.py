"""Ring attention behind the same interface as every backend (gpu/backends/backend.py's `Backend`),
so `main.py bench --algo ring --devices P` and the app run it like any algorithm.

- `cpu`: the NumPy simulation of P virtual devices (gpu/ring/sim.py), any P >= 1 and any N.
- `cuda`: P real GPUs joined by NCCL (gpu/ring/cuda_ring.py), P no more than the GPUs present; N
  must split into equal chunks (divisible by P, by 2P with the causal mask).
The CUDA ring (its NCCL communicators) is created at the first run and kept until `close()`.
"""

from __future__ import annotations

from typing import Any

from ..algorithms import RING
from ..backends.backend import RunOptions, check_pass
from ..backends.cuda_check import cuda_available
from ..config import FORWARD, AttentionConfig
from ..errors import BackendUnavailable
from ..results import DeviceInfo, RunResult
from .schedule import check_devices, check_equal_chunks


def cuda_device_count() -> int:
    """CUDA devices CuPy sees here; 0 without CuPy or a GPU. Never raises."""
    if not cuda_available():
        return 0
    import cupy

    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


class RingBackend:
    """`ring` on `devices` devices of the `cuda` or `cpu` backend."""

    def __init__(self, backend: str, devices: int) -> None:
        check_devices(devices)
        if backend == "auto":
            backend = "cuda" if cuda_available() else "cpu"
        if backend not in ("cuda", "cpu"):
            raise ValueError(f"backend = {backend!r} is not allowed: auto, cuda or cpu")
        if backend == "cuda":
            present = cuda_device_count()
            if present == 0:
                raise BackendUnavailable(
                    "cuda backend unavailable: CuPy is not installed or sees no CUDA device "
                    "(the cpu backend simulates the ring on any number of devices)"
                )
            if devices > present:
                raise BackendUnavailable(
                    f"--devices {devices}: the CUDA ring needs one GPU per device and this "
                    f"machine has {present} (the cpu backend simulates any number)"
                )
        self.name = backend
        self.devices = devices
        self._ring: Any = None

    def algorithms(self) -> tuple[str, ...]:
        return (RING,)

    def passes(self, algorithm: str) -> tuple[str, ...]:
        return (FORWARD,)

    def check(self, config: AttentionConfig) -> None:
        """Raise RingConfigError (a ValueError) if this backend cannot split `config`."""
        if self.name == "cuda":
            check_equal_chunks(config, self.devices)

    def estimate_s(self, config: AttentionConfig, options: RunOptions) -> float | None:
        """About how long `run` takes: the CPU simulation's estimate (gpu.ring.sim), worked out
        before anything is built; None on GPUs, where the ring's time is the model's to say."""
        if self.name != "cpu":
            return None
        from .sim import estimate_seconds

        return estimate_seconds(config, self.devices, 1 + options.warmup + max(1, options.repeats))

    def device_info(self) -> DeviceInfo:
        if self.name == "cpu":
            from ..backends.cpu_backend import CpuBackend

            info = CpuBackend().device_info()
            details = {**info.details, "devices": self.devices, "ring": "simulated (NumPy)"}
            return DeviceInfo(
                backend="cpu",
                name=f"{self.devices} simulated devices on {info.name}",
                memory_total_bytes=info.memory_total_bytes,
                memory_free_bytes=info.memory_free_bytes,
                details=details,
            )
        return cuda_ring_device_info(list(range(self.devices)))

    def run(
        self, config: AttentionConfig, algorithm: str, options: RunOptions | None = None
    ) -> RunResult:
        options = options or RunOptions()
        if algorithm != RING:
            raise ValueError(f"algorithm = {algorithm!r}: this backend runs only {RING}")
        check_pass(self, config, algorithm)
        if self.name == "cpu":
            from .sim import run_ring_cpu

            return run_ring_cpu(config, self.devices, options)
        self.check(config)
        if self._ring is None:
            from .cuda_ring import CudaRing

            self._ring = CudaRing(list(range(self.devices)))
        return self._ring.measure(config, options)

    def close(self) -> None:
        if self._ring is not None:
            self._ring.close()
            self._ring = None


def cuda_ring_device_info(devices: list[int]) -> DeviceInfo:
    """The devices of a CUDA ring: the first one's facts, every one's name and memory, the link
    between them and the NCCL version."""
    import cupy

    from ..backends.cuda_backend import CudaBackend

    first = None
    per_device = []
    for d in devices:
        with cupy.cuda.Device(d):
            info = CudaBackend().device_info()
        first = first or info
        per_device.append(
            {"device_id": d, "name": info.name, "memory_total_bytes": info.memory_total_bytes}
        )
    assert first is not None
    details = dict(first.details)
    details["devices"] = per_device
    try:
        from cupy.cuda import nccl

        details["nccl_version"] = nccl.get_version() if getattr(nccl, "available", False) else None
    except ImportError:
        details["nccl_version"] = None
    if len(devices) > 1:
        from .cuda_ring import detect_link

        details["link"] = detect_link(devices)[0]
    names = {p["name"] for p in per_device}
    name = f"{len(devices)}× {first.name}" if len(names) == 1 else " + ".join(sorted(names))
    return DeviceInfo(
        backend="cuda",
        name=name,
        memory_total_bytes=first.memory_total_bytes,
        memory_free_bytes=first.memory_free_bytes,
        details=details,
    )
