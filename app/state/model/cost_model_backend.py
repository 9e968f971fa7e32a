"""A backend that answers from the cost model: instant, deterministic results on any machine.

It implements gpu.backends.backend.Backend, so the whole app (runner, store, plots, animation) runs
on it as on a GPU: the app's tests use it, the GUI benchmarks and soaks use it to put GPU-like
result rates through the window on a laptop, and a demo can show the lesson's shapes without
hardware. Its numbers are the model's, never presented as measurements: the device says so.
"""

from __future__ import annotations

import threading
import time

from gpu.algorithms import ALGORITHMS, NAIVE, TILED, runs_pass
from gpu.backends.backend import RunOptions, check_pass
from gpu.config import FORWARD, AttentionConfig, ConfigError
from gpu.model.costmodel import algorithm_cost
from gpu.results import DeviceInfo, KernelTime, RunResult


class CostModelBackend:
    """Times are the model's FLOPs (or bytes) at 1 TFLOP/s (1 TB/s); peak = the model's peak.

    delay_s: seconds each run sleeps (releases the GIL, like a kernel wait).
    bad_head_dims: head dims refused with ConfigError("head_dim", ...), as a kernel without
    that head dim would.
    record_calls: keep `calls` and `threads` (off for soaks, where they would grow without end).
    passes: the passes it runs (gpu.config.PASSES); others are refused as a real backend would.
    """

    def __init__(
        self,
        name: str = "fake",
        delay_s: float = 0.0,
        algorithms: tuple[str, ...] = (NAIVE, TILED),
        device: str = "Fake GPU 24 GB",
        memory_bytes: int = 24 * 10**9,
        bad_head_dims: tuple[int, ...] = (),
        record_calls: bool = True,
        passes: tuple[str, ...] = (FORWARD,),
    ) -> None:
        self.name = name
        self.delay_s = delay_s
        self._algorithms = algorithms
        self.device = device
        self.memory_bytes = memory_bytes
        self.bad_head_dims = bad_head_dims
        self.record_calls = record_calls
        self._passes = passes
        self.calls: list[tuple[int, str, int | None]] = []  # (N, algorithm, budget)
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def device_info(self) -> DeviceInfo:
        return DeviceInfo(self.name, self.device, self.memory_bytes, self.memory_bytes // 2)

    def algorithms(self) -> tuple[str, ...]:
        return self._algorithms

    def passes(self, algorithm: str) -> tuple[str, ...]:
        """Its passes that `algorithm` is written for (a decode kernel has no forward)."""
        if algorithm not in ALGORITHMS:
            return self._passes
        return tuple(p for p in self._passes if runs_pass(algorithm, p))

    def run(
        self, config: AttentionConfig, algorithm: str, options: RunOptions | None = None
    ) -> RunResult:
        options = options or RunOptions()
        if self.record_calls:
            with self._lock:
                self.calls.append((config.seq_len, algorithm, options.budget_bytes))
                self.threads.add(threading.get_ident())
        check_pass(self, config, algorithm)
        if config.head_dim in self.bad_head_dims:
            raise ConfigError("head_dim", config.head_dim, "64 or 128 on this fake kernel")
        if self.delay_s:
            time.sleep(self.delay_s)
        cost = algorithm_cost(config, algorithm)
        base = dict(
            config=config,
            algorithm=algorithm,
            backend=self.name,
            device=self.device,
            model_peak_bytes=cost.peak_bytes,
            hbm_bytes=cost.hbm_bytes,
            flops=cost.flops,
        )
        limit = options.budget_bytes or self.memory_bytes
        if cost.peak_bytes > limit:
            return RunResult(**base, oom=True, message="out of memory (fake)")
        kernels = tuple(KernelTime(k.name, max(k.flops, k.hbm_bytes) / 1e9) for k in cost.kernels)
        return RunResult(
            **base, kernel_times=kernels, peak_bytes=int(cost.peak_bytes * 1.02), repeats=1
        )

    def runs_for(self, seq_len: int) -> int:
        with self._lock:
            return sum(1 for n, _, _ in self.calls if n == seq_len)
