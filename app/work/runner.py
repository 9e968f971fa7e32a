"""The background runner: every backend call (creation included) happens on one worker thread.

Why one thread: a GPU runs one measurement at a time anyway, and a CUDA context belongs to the
thread that made it. The GUI thread only ever enqueues work and receives queued signals.

Coalescing: `request()` replaces whatever live work is still waiting, so while the slider moves
only the newest configuration runs; and the worker starts a live request only once requests
have paused for REQUEST_SETTLE_S (about a frame), so a fast drag, which asks for a new N
several times a frame, starts one run when it rests, not one for each N it passes. A run in
flight for an older request is cancelled through the engine's cancel hook (`RunOptions.cancel`):
the CPU backend stops between tiles, the CUDA backend between kernels, and the run ends with
`RunCancelled` (an outcome flagged `cancelled`, not an error). A backend that cannot stop
mid-run finishes; its (still true) result is cached and flagged `stale`. Either way the newest
request runs next. A sweep is a second, lower-priority queue: live requests overtake it (a
sweep item in flight is stopped and queued again), cancel empties it and stops the item in flight.

A freshly started NumPy backend warms up before its first measurement, until the times of a
small run agree (app/state/settle.py): the first measurements would otherwise share the cores
with the window's start-up work and come out several times the steady ones.

On a CPU a large N can take hours, and nothing can interrupt NumPy, so the worker estimates each
run from the throughput this machine showed at the nearest N (app/state/run_estimate.py) and
skips (with a message saying so) runs that would exceed the time limit, instead of
disappearing into one for an hour.

A backend that measures several algorithms together (`run_interleaved`: the NumPy backend's
interleaved rounds) gets a request's algorithms for one config, or a sweep's for one N, as one
group: load from elsewhere on the machine then slows them alike, and their comparison holds.

Faults are outcomes, never exceptions on the GUI thread (the window decides what to show):
- out of memory is a result (`oom`), also when a MemoryError escapes a backend;
- a ConfigError names its field; an UnsupportedConfig (gpu/errors.py: tiles beyond shared
  memory, a head dim a kernel lacks) is `unsupported`: this algorithm cannot run this config
  here, the message names the limit and the error the config field to change;
- a kernel that fails to compile (KernelCompileError) makes its algorithm `unavailable` on that
  backend for the rest of the session (never retried: the source will not fix itself); the
  outcome carries the compiler log in `details`;
- any other exception from the CUDA backend (a CUDA runtime error mid-run, a cuBLAS failure) is
  `backend_lost`: the worker stops using that backend at once, drops its waiting work and
  emits `backendLost`, so the window can fall back to the CPU backend.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from PySide6.QtCore import QObject, Signal, Slot

from gpu.algorithms import runs_pass
from gpu.backends.backend import Backend, RunOptions
from gpu.config import AttentionConfig, ConfigError
from gpu.errors import RunCancelled, UnsupportedConfig
from gpu.launch.cuda_kernels import KernelCompileError
from gpu.model.costmodel import algorithm_cost
from gpu.units import fmt_seconds

from ..state.recorded_run import NotRecorded
from ..state.run_estimate import RunRates
from ..state.runs import BackendFailure, BackendReady, Job, RunOutcome, backend_key
from ..state.settle import BUDGET_S, SETTLE_CONFIG, Settling, settle
from .run_failures import compile_summary, describe, oom_outcome_result, trim_heap

BackendFactory = Callable[[], Backend]


@dataclass
class RunnerStats:
    """Counters tests and the status bar read; only the worker writes runs_*."""

    requests: int = 0
    runs_started: int = 0
    runs_finished: int = 0
    jobs_dropped: int = 0  # waiting jobs replaced by a newer request or cancelled
    runs_cancelled: int = 0  # runs stopped mid-way through the cancel hook
    skipped: int = 0
    by_algorithm: dict[str, int] = field(default_factory=dict)
    #: The last warm-up of a fresh backend (None: none was needed, or none has run yet).
    settling: Settling | None = None


def default_options(backend_name: str) -> RunOptions:
    """Measurement effort per backend: a GPU can afford warm-up and repeats, NumPy cannot."""
    if backend_name == "cuda":
        return RunOptions(warmup=2, repeats=5)
    # NumPy: no warm-up to speak of, but a shared CPU stalls now and then; a median of 3.
    return RunOptions(warmup=0, repeats=3)


#: A live request starts once requests have paused this long (see the module docstring).
REQUEST_SETTLE_S = 0.02

#: The runner trims the heap once it has had no work for this long (see `trim_heap`).
IDLE_TRIM_AFTER_S = 1.0


class _Bridge(QObject):
    """Lives in the GUI thread; the worker emits on it, so every connection is queued."""

    ready = Signal(object)
    failed = Signal(object)
    lost = Signal(object)
    outcome = Signal(object)
    started = Signal(object)
    idle = Signal()
    progress = Signal(int, int)
    sweep_done = Signal(bool)
    device = Signal(object)


class Runner(QObject):
    """Owns the worker thread; see the module docstring. Call `shutdown()` before dropping it."""

    backendReady = Signal(object)  # BackendReady
    backendFailed = Signal(object)  # BackendFailure
    backendLost = Signal(object)  # BackendFailure: a backend that worked failed mid-run
    outcome = Signal(object)  # RunOutcome
    jobStarted = Signal(object)  # Job
    idle = Signal()
    sweepProgress = Signal(int, int)  # done, total
    sweepFinished = Signal(bool)  # True when cancelled
    deviceInfo = Signal(object)  # DeviceInfo after a run (memory free/total)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.stats = RunnerStats()
        #: Longest estimated run (seconds) the worker starts for a live request / a sweep item.
        self.live_time_limit_s: float | None = 20.0
        self.sweep_time_limit_s: float | None = 90.0
        self.options_for: Callable[[str], RunOptions] = default_options
        #: Seconds a fresh NumPy backend may warm up before its first measurement (0: none).
        self.settle_budget_s = BUDGET_S
        #: Seconds without work before the idle heap trim (see `trim_heap`).
        self.idle_trim_after_s = IDLE_TRIM_AFTER_S
        #: Seconds a live request waits for a newer one before it starts.
        self.request_settle_s = REQUEST_SETTLE_S
        self._requested_at = 0.0

        self._cond = threading.Condition()
        self._stop = False
        self._backend_spec: tuple[int, str, BackendFactory] | None = None
        self._live: list[Job] = []
        self._sweep: list[Job] = []
        self._sweep_total = 0
        self._sweep_done = 0
        self._request_id = 0
        self._backend_generation = 0
        self._busy = False
        #: The job the worker runs now, and the event its cancel hook reads.
        self._running: Job | None = None
        self._running_cancel = threading.Event()
        #: The running sweep job goes back to the front of the sweep queue when it stops.
        self._requeue_running = False
        #: What this machine measured: the estimates that refuse too long a run.
        self.rates = RunRates()
        #: The jobs the worker runs now together (the first is `_running`).
        self._running_group: list[Job] = []
        self._requeue_at = 0  # where the next stopped sweep job of a group goes back
        #: (backend key, algorithm) -> why it is off for this session (a kernel that won't build)
        self._unavailable: dict[tuple[str, str], str] = {}

        self._bridge = _Bridge()  # no parent: the worker may outlive this object briefly
        self._bridge.ready.connect(self._on_ready)
        self._bridge.failed.connect(self.backendFailed)
        self._bridge.lost.connect(self.backendLost)
        self._bridge.outcome.connect(self._on_outcome)
        self._bridge.started.connect(self.jobStarted)
        self._bridge.idle.connect(self.idle)
        self._bridge.progress.connect(self.sweepProgress)
        self._bridge.sweep_done.connect(self.sweepFinished)
        self._bridge.device.connect(self.deviceInfo)
        self._current_generation = 0
        self._thread = threading.Thread(target=self._work, name="tilescope-runner", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- GUI-thread API

    def set_backend(self, requested: str, factory: BackendFactory) -> int:
        """Create a backend on the worker (never here: CuPy imports and compiles take seconds).

        Waiting work for the previous backend is dropped; returns the backend generation."""
        with self._cond:
            self._backend_generation += 1
            self._backend_spec = (self._backend_generation, requested, factory)
            self._drop_locked(live=True, sweep=True)
            self._cancel_running_locked(live=True, sweep=True, force=True)
            self._cond.notify()
            return self._backend_generation

    def request(
        self,
        config: AttentionConfig,
        algorithms: list[str],
        budget_bytes: int | None,
        profile: bool = False,
    ) -> int:
        """Measure `config` with `algorithms`, replacing any live work still waiting;
        `profile`: also sample the kernels' counters (RunOptions.profile)."""
        with self._cond:
            self._request_id += 1
            self.stats.requests += 1
            self._requested_at = time.monotonic()
            self._drop_locked(live=True, sweep=False)
            running = self._running
            if self._still_wanted(running, config, algorithms, budget_bytes, profile):
                now = {j.algorithm for j in self._running_group}
                algorithms = [a for a in algorithms if a not in now]  # running now
            else:
                # Nothing stale may delay the newest point: an older request's run stops, and
                # a sweep item in flight stops and waits for its turn again.
                self._cancel_running_locked(live=True, sweep=bool(algorithms), requeue=True)
            self._live = [
                Job(
                    self._request_id,
                    self._backend_generation,
                    config,
                    a,
                    budget_bytes,
                    profile=profile,
                )
                for a in algorithms
            ]
            self._cond.notify()
            return self._request_id

    def cancel(self) -> None:
        """Drop waiting live work and stop a live run in flight (Esc)."""
        with self._cond:
            self._request_id += 1
            self._drop_locked(live=True, sweep=False)
            self._cancel_running_locked(live=True, sweep=False)

    def start_sweep(
        self,
        items: list[tuple[AttentionConfig, str]],
        budget_bytes: int | None,
        profile: bool = False,
    ) -> int:
        """Queue (config, algorithm) measurements behind live work; returns how many."""
        with self._cond:
            self._drop_locked(live=False, sweep=True)
            self._sweep = [
                Job(0, self._backend_generation, c, a, budget_bytes, sweep=True, profile=profile)
                for c, a in items
            ]
            self._sweep_total = len(self._sweep)
            self._sweep_done = 0
            self._cond.notify()
            total = self._sweep_total
        if total == 0:
            self.sweepFinished.emit(False)
        else:
            self.sweepProgress.emit(0, total)
        return total

    def cancel_sweep(self) -> None:
        with self._cond:
            had = bool(self._sweep) or (self._running is not None and self._running.sweep)
            self._drop_locked(live=False, sweep=True)
            self._cancel_running_locked(live=False, sweep=True)
            self._sweep_total = 0
        if had:
            self.sweepFinished.emit(True)

    def unavailable(self, backend_key: str) -> dict[str, str]:
        """Algorithms switched off on this backend for the session, with the reason."""
        with self._cond:
            return {a: why for (k, a), why in self._unavailable.items() if k == backend_key}

    @property
    def sweeping(self) -> bool:
        with self._cond:
            return bool(self._sweep) or (self._busy and self._sweep_total > 0)

    @property
    def busy(self) -> bool:
        """True while the worker runs or has work waiting."""
        with self._cond:
            return self._busy or bool(self._live or self._sweep or self._backend_spec)

    def shutdown(self, timeout: float = 0.5) -> None:
        """Stop the worker; waits at most `timeout` (a kernel in flight is left to finish)."""
        with self._cond:
            self._stop = True
            self._drop_locked(live=True, sweep=True)
            self._cancel_running_locked(live=True, sweep=True, force=True)
            self._cond.notify_all()
        self._thread.join(timeout)

    # ---------------------------------------------------------------- internals

    def _cancel_running_locked(
        self, live: bool, sweep: bool, requeue: bool = False, force: bool = False
    ) -> None:
        """Ask the run in flight to stop (its backend checks between tiles or kernels): a live
        run of an older request when `live`, a sweep item when `sweep` (queued again when
        `requeue`), any run when `force` (another backend, shutdown)."""
        job = self._running
        if job is None or self._running_cancel.is_set():
            return
        if force:
            self._running_cancel.set()
        elif job.sweep and sweep:
            self._requeue_running = requeue
            self._running_cancel.set()
        elif not job.sweep and live and job.request_id != self._request_id:
            self._running_cancel.set()

    def _still_wanted(
        self,
        job: Job | None,
        config: AttentionConfig,
        algorithms: list[str],
        budget_bytes: int | None,
        profile: bool,
    ) -> bool:
        """Whether the run in flight measures what a new request asks for (keep it going): an
        unsampled run does not stand in for a request to sample the counters."""
        return (
            job is not None
            and not self._running_cancel.is_set()
            and job.backend_generation == self._backend_generation
            and job.config == config
            and any(j.algorithm in algorithms for j in self._running_group)
            and job.budget_bytes == budget_bytes
            and (job.profile or not profile)
        )

    def _drop_locked(self, live: bool, sweep: bool) -> None:
        if live:
            self.stats.jobs_dropped += len(self._live)
            self._live = []
        if sweep:
            self.stats.jobs_dropped += len(self._sweep)
            self._sweep = []

    @Slot(object)
    def _on_ready(self, ready: BackendReady) -> None:
        self._current_generation = ready.generation
        self.backendReady.emit(ready)

    @Slot(object)
    def _on_outcome(self, outcome: RunOutcome) -> None:
        self.outcome.emit(outcome)

    def _work(self) -> None:
        backend: Backend | None = None
        key = ""
        generation = 0
        requested = ""
        while True:
            with self._cond:
                trim_due = False
                while not (self._stop or self._backend_spec or self._live or self._sweep):
                    if self._busy:
                        self._busy = False
                        self._emit(self._bridge.idle)
                        trim_due = True
                        continue
                    if trim_due:
                        # Idle for a while: give the C heap's freed blocks back to the OS,
                        # outside the lock so the GUI thread can queue work meanwhile. Not at
                        # once: a trim holds the allocator's lock, and a GUI thread allocating
                        # meanwhile (a slider being dragged) would wait for it.
                        if self._cond.wait(self.idle_trim_after_s):
                            continue  # woken: work (or a stop) arrived first
                        if self._stop or self._backend_spec or self._live or self._sweep:
                            continue
                        trim_due = False
                        self._cond.release()
                        try:
                            trim_heap()
                        finally:
                            self._cond.acquire()
                        continue
                    self._cond.wait()
                if self._stop:
                    return
                if self._backend_spec is None and self._live:
                    quiet = time.monotonic() - self._requested_at
                    if quiet < self.request_settle_s:  # a drag may ask again: let it rest
                        self._cond.wait(self.request_settle_s - quiet)
                        continue
                self._busy = True
                spec, job = self._backend_spec, None
                self._backend_spec = None
                if spec is None:
                    queue = self._live if self._live else self._sweep
                    job = queue.pop(0)
                    group = [job]
                    pass_ = job.config.pass_
                    if hasattr(backend, "run_interleaved") and runs_pass(job.algorithm, pass_):
                        # Measured together: the point's algorithms written for its pass (one
                        # that is not, the decode kernel on a prefill, is refused on its own).
                        rest = []
                        while queue and _same_point(queue[0], job):
                            other = queue.pop(0)
                            (group if runs_pass(other.algorithm, pass_) else rest).append(other)
                        queue[:0] = rest
                    self._running, self._running_group = job, group
                    self._running_cancel = threading.Event()
                    self._requeue_running = False
                    self._requeue_at = 0
            if spec is not None:
                backend, key, generation = self._create(spec) or (None, "", spec[0])
                requested = spec[1]
                if backend is not None:
                    self._settle(backend)
                continue
            assert job is not None
            if job.backend_generation != generation or backend is None:
                for j in group:
                    self._finish(j, RunOutcome(j, key, error="no backend is ready", skipped=True))
                with self._cond:
                    self._running, self._running_group = None, []
                continue
            self._emit(self._bridge.started, job)
            outcomes = self._run_group(backend, key, group, self._running_cancel)
            with self._cond:
                self._running, self._running_group = None, []
            for i, outcome in enumerate(outcomes):
                self._finish(outcome.job, outcome, later=len(outcomes) - 1 - i)
            outcome = next((o for o in outcomes if o.backend_lost), outcomes[-1])
            if outcome.backend_lost:
                backend = None  # never touch it again: a CUDA error can poison the context
                self._lose(generation, requested, outcome.error)
                continue
            if getattr(backend, "name", "") == "cpu":
                trim_heap()  # before device_info, so free RAM is read after the give-back
            with contextlib.suppress(Exception):  # memory figures are nice to have, not vital
                self._emit(self._bridge.device, backend.device_info())

    def _lose(self, generation: int, requested: str, message: str) -> None:
        """Drop the lost backend's waiting work (a sweep ends, cancelled) and say so."""
        with self._cond:
            if self._backend_generation != generation:
                return  # another backend was asked for meanwhile: its work is not ours to drop
            self._drop_locked(live=True, sweep=True)
            had_sweep = self._sweep_total > 0
            self._sweep_total = 0
        if had_sweep:
            self._emit(self._bridge.sweep_done, True)
        self._emit(self._bridge.lost, BackendFailure(generation, requested, message))

    def _finish(self, job: Job, outcome: RunOutcome, later: int = 0) -> None:
        """Hand `outcome` over; `later`: outcomes of its group still to come."""
        if not job.sweep:
            with self._cond:
                stale = job.request_id != self._request_id
                # The rest of a request that went stale while this ran is not worth running.
                if stale and self._live and self._live[0].request_id == job.request_id:
                    self.stats.jobs_dropped += len(self._live)
                    self._live = []
                more = later + sum(j.config == job.config for j in self._live)
            outcome = replace(outcome, stale=stale, more_to_come=more)
        self._emit(self._bridge.outcome, outcome)
        if job.sweep:
            with self._cond:
                if self._sweep_total == 0:  # cancelled meanwhile
                    return
                if outcome.cancelled and self._requeue_running:  # overtaken: its turn comes
                    self._sweep.insert(self._requeue_at, job)  # a group keeps its order
                    self._requeue_at += 1
                    return
                self._sweep_done += 1
                done, total = self._sweep_done, self._sweep_total
                finished = not self._sweep and later == 0  # a group ends with its last
                if finished:
                    self._sweep_total = 0
            self._emit(self._bridge.progress, done, total)
            if finished:
                self._emit(self._bridge.sweep_done, False)

    def _create(self, spec: tuple[int, str, BackendFactory]) -> tuple[Backend, str, int] | None:
        generation, requested, factory = spec
        t0 = time.perf_counter()
        try:
            backend = factory()
            info = backend.device_info()
            algorithms = tuple(backend.algorithms())
        except Exception as exc:
            self._emit(self._bridge.failed, BackendFailure(generation, requested, describe(exc)))
            return None
        key = backend_key(info)
        ready = BackendReady(
            generation, requested, backend, key, info, algorithms, time.perf_counter() - t0
        )
        self._emit(self._bridge.ready, ready)
        return backend, key, generation

    def _settle(self, backend: Backend) -> None:
        """Warm a fresh NumPy backend up before its first measurement (app/state/settle.py);
        stopped by a newer backend or the shutdown, its results thrown away. GPU backends time
        with their own warm-up, recordings measure nothing."""
        from gpu.backends.cpu_backend import CpuBackend

        if not isinstance(backend, CpuBackend) or self.settle_budget_s <= 0:
            return

        def stop() -> bool:
            with self._cond:
                return self._stop or self._backend_spec is not None

        options = RunOptions(warmup=0, repeats=1, cancel=stop)

        # The algorithms of the small run's pass (the decode kernel has no forward).
        algorithms = [a for a in backend.algorithms() if runs_pass(a, SETTLE_CONFIG.pass_)]

        def run_round() -> None:
            for algorithm in algorithms:
                backend.run(SETTLE_CONFIG, algorithm, options)

        try:
            self.stats.settling = settle(run_round, budget_s=self.settle_budget_s, stop=stop)
        except RunCancelled:
            pass  # a newer backend asked for: it settles on its own
        except Exception:  # a warm-up that fails says nothing the first measurement won't
            pass

    def _run_group(
        self, backend: Backend, key: str, group: list[Job], cancel: threading.Event
    ) -> list[RunOutcome]:
        """Measure the group's jobs (one config): those switched off or estimated past the
        time limit are skipped with a message, the rest run together, in interleaved rounds
        where there are several. One outcome per job, in the group's order."""
        name = getattr(backend, "name", "?")
        options = replace(
            self.options_for(name),
            budget_bytes=group[0].budget_bytes,
            profile=group[0].profile,
            cancel=cancel.is_set,
        )
        screened = {id(job): self._screen(backend, name, key, job, options) for job in group}
        runnable = [job for job in group if screened[id(job)] is None]
        measured = {
            id(j): o
            for j, o in zip(runnable, self._measure(backend, key, runnable, options), strict=True)
        }
        return [screened[id(job)] or measured[id(job)] for job in group]

    def _screen(
        self, backend: Backend, name: str, key: str, job: Job, options: RunOptions
    ) -> RunOutcome | None:
        """Why `job` is not run (switched off this session, or too long by the estimate);
        None when it runs."""
        with self._cond:
            off = self._unavailable.get((key, job.algorithm))
        if off is not None:
            return RunOutcome(job, key, error=off, skipped=True, unavailable=True)
        limit = self.sweep_time_limit_s if job.sweep else self.live_time_limit_s
        estimate = self._estimate_s(backend, name, key, job, options)
        # A run that cannot fit is refused (OOM) by the backend at once: let it say so, the
        # out-of-memory point is the lesson.
        too_slow = limit is not None and estimate is not None and estimate > limit
        if not too_slow or self._cannot_fit(backend, job):
            return None
        self.stats.skipped += 1
        return RunOutcome(
            job,
            key,
            skipped=True,
            too_long=(estimate, limit),
            error=(
                f"{job.algorithm} N={job.config.seq_len} not run: about "
                f"{fmt_seconds(estimate, digits=2)} here, limit {fmt_seconds(limit, digits=2)}"
            ),
        )

    def _measure(
        self, backend: Backend, key: str, jobs: list[Job], options: RunOptions
    ) -> list[RunOutcome]:
        """Run `jobs` (one config): alone, or together in interleaved rounds. A failure is
        every job's outcome."""
        if not jobs:
            return []
        name = getattr(backend, "name", "?")
        config = jobs[0].config
        self.stats.runs_started += len(jobs)
        for job in jobs:
            self.stats.by_algorithm[job.algorithm] = (
                self.stats.by_algorithm.get(job.algorithm, 0) + 1
            )

        def each(**fields: object) -> list[RunOutcome]:
            return [RunOutcome(job, key, **fields) for job in jobs]  # type: ignore[arg-type]

        t0 = time.perf_counter()
        try:
            if len(jobs) == 1:
                results = [backend.run(config, jobs[0].algorithm, options)]
            else:
                together = backend.run_interleaved(  # type: ignore[attr-defined]
                    config, [j.algorithm for j in jobs], options
                )
                results = [together[j.algorithm] for j in jobs]
        except ConfigError as exc:
            return each(error=str(exc), error_field=exc.field)
        except NotRecorded as exc:
            return each(error=str(exc), skipped=True)
        except RunCancelled:  # asked for (a newer request, Esc): not a fault of the backend
            self.stats.runs_cancelled += len(jobs)
            return each(error="cancelled", cancelled=True)
        except KernelCompileError as exc:
            reason = compile_summary(exc)
            with self._cond:
                for job in jobs:
                    self._unavailable[(key, job.algorithm)] = reason
            return each(error=reason, details=exc.log or str(exc), unavailable=True)
        except MemoryError as exc:  # CuPy's OutOfMemoryError is one; OOM is a result, always
            return [
                RunOutcome(j, key, result=oom_outcome_result(j, name, backend, exc)) for j in jobs
            ]
        except UnsupportedConfig as exc:  # a limit of this device or kernel, with its field
            return each(error=str(exc), error_field=exc.field, unsupported=True)
        except ValueError as exc:  # any other refusal of this config by the backend
            return each(error=str(exc), error_field="algorithms", unsupported=True)
        except Exception as exc:
            if name == "cuda":  # a CUDA error mid-run: stop trusting this backend
                return each(error=describe(exc), backend_lost=True)
            return each(error=describe(exc))
        finally:
            self.stats.runs_finished += len(jobs)
        seconds = (time.perf_counter() - t0) / len(jobs)
        for result in results:
            self.rates.learn(key, result)
        return [
            RunOutcome(job, key, result=result, seconds=seconds)
            for job, result in zip(jobs, results, strict=True)
        ]

    def _cannot_fit(self, backend: Backend, job: Job) -> bool:
        try:
            limit = job.budget_bytes or backend.device_info().memory_free_bytes
        except Exception:
            return False
        try:
            need = algorithm_cost(job.config, job.algorithm).peak_bytes
        except KeyError:  # an algorithm the model does not know for this pass: let it say so
            return False
        return bool(limit) and need > limit

    def _estimate_s(
        self, backend: Backend, name: str, key: str, job: Job, options: RunOptions
    ) -> float | None:
        own = getattr(backend, "estimate_s", None)
        if own is not None:  # a backend that knows its cost (the CPU ring: P² steps)
            seconds = own(job.config, options)
            if seconds is not None:
                return seconds
        runs = max(1, options.repeats) + options.warmup + 1  # + the metered (memory) run
        estimate = self.rates.estimate(key, name, job.config, job.algorithm, runs)
        return None if estimate is None else estimate.seconds

    def _emit(self, signal, *args) -> None:  # type: ignore[no-untyped-def]
        with contextlib.suppress(RuntimeError):  # the bridge is gone: the app is closing
            signal.emit(*args)


def _same_point(job: Job, first: Job) -> bool:
    """Whether `job` measures the same point as `first` (one config, budget and request):
    the two can run together."""
    return (
        job.config == first.config
        and job.budget_bytes == first.budget_bytes
        and job.profile == first.profile
        and job.sweep == first.sweep
        and job.request_id == first.request_id
        and job.backend_generation == first.backend_generation
        and job.algorithm != first.algorithm
    )
