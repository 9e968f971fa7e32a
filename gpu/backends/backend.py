"""The one interface every backend implements: how to run, and what a run needs to know.

The factory that builds a backend by name lives in gpu/backends/factory.py, so this module imports
no backend and every backend can import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..algorithms import ALGORITHMS
from ..config import FORWARD, PASS_KEY, PASS_LABELS, AttentionConfig
from ..errors import BackendUnavailable, RunCancelled, UnsupportedConfig
from ..model.costmodel import algorithm_cost
from ..results import DeviceInfo, RunResult

#: Asked between units of work whether to stop: True abandons the run (RunCancelled).
CancelHook = Callable[[], bool]

__all__ = [
    "Backend",
    "BackendUnavailable",
    "CancelHook",
    "RunCancelled",
    "RunOptions",
    "check_cancel",
    "check_pass",
    "oom_result",
]


@dataclass(frozen=True)
class RunOptions:
    """How to measure: warm-up and repeats for timing, a reference check, a memory budget, and
    a cancel hook, and whether to sample the kernels' hardware counters after timing them
    (measured traffic)."""

    warmup: int = 1
    repeats: int = 5
    check: bool = False
    #: Emulates a smaller GPU (CUDA: CuPy pool limit) or caps RAM use (CPU). None = no limit.
    budget_bytes: int | None = None
    seed: int = 0
    #: Called between units of work (CPU: between tiles and between naive's kernels; CUDA:
    #: between kernels and repeats); when it returns True the run stops with RunCancelled.
    #: A `threading.Event`'s `is_set` fits. It must be cheap and must not raise.
    cancel: CancelHook | None = None
    #: Sample DRAM/L2 bytes and unit activity per kernel (CUDA, gpu.counters.profiler). The timed
    #: runs stay unsampled; the counters come from separate launches after them.
    profile: bool = False


def check_cancel(cancel: CancelHook | None) -> None:
    """Raise RunCancelled when the cancel hook (RunOptions.cancel) says so; a no-op without."""
    if cancel is not None and cancel():
        raise RunCancelled("run cancelled")


class Backend(Protocol):
    name: str

    def device_info(self) -> DeviceInfo: ...

    def algorithms(self) -> tuple[str, ...]:
        """The algorithm ids this backend can run here."""
        ...

    def passes(self, algorithm: str) -> tuple[str, ...]:
        """The passes (gpu.config.PASSES) this backend can run `algorithm` for: "forward"
        for every prefill kernel; "backward" and "step" where it has a backward for that
        algorithm; "decode" for the decode kernels (naive's and split-KV). A run of another
        pass raises UnsupportedConfig (`check_pass`), never a silent substitute."""
        ...

    def run(
        self, config: AttentionConfig, algorithm: str, options: RunOptions | None = None
    ) -> RunResult:
        """Measure one (config, algorithm) for `config.pass_`. Out of memory is a result
        (`oom`), not an error; raises UnsupportedConfig (gpu/errors.py) when the algorithm
        cannot run the config here (its pass included) and RunCancelled when `options.cancel`
        returns True mid-run."""
        ...


def check_pass(backend: Backend, config: AttentionConfig, algorithm: str) -> None:
    """Raise UnsupportedConfig (field "pass") when `backend` has no `config.pass_` for
    `algorithm`; the message names the algorithms that do have it. Every prefill kernel has
    the forward (a recording may hold only a training step's results: it then answers that
    nothing was recorded); a decode kernel has the decode pass alone."""
    info = ALGORITHMS.get(algorithm)
    prefill = info is None or FORWARD in info.passes  # a peer (not ours) is a prefill kernel
    if (config.pass_ == FORWARD and prefill) or config.pass_ in backend.passes(algorithm):
        return
    others = [a for a in backend.algorithms() if config.pass_ in backend.passes(a)]
    what = PASS_LABELS[config.pass_]
    hint = f"the {what} runs {', '.join(others)} here" if others else f"this backend has no {what}"
    missing = "backward pass" if config.has_backward else f"{what} pass"
    raise UnsupportedConfig(
        f"{algorithm} has no {missing} on the {backend.name} backend: {hint}",
        field=PASS_KEY,
    )


def oom_result(
    config: AttentionConfig, algorithm: str, backend: str, device: str, exc: BaseException
) -> RunResult:
    """The out-of-memory result for a MemoryError that escaped a backend's own budget check
    (out of memory is a result, never a crash): the model's figures, no times."""
    try:
        cost = algorithm_cost(config, algorithm)
        model = {"model_peak_bytes": cost.peak_bytes, "hbm_bytes": cost.hbm_bytes}
        model["flops"] = cost.flops
    except KeyError:  # an algorithm the cost model does not know (a reference peer)
        model = {}
    return RunResult(
        config=config,
        algorithm=algorithm,
        backend=backend,
        device=device,
        oom=True,
        message=f"out of memory: {str(exc) or type(exc).__name__}",
        **model,
    )
