"""Work off the GUI thread, newest request first: the GUI thread only applies finished results.

`LatestOnly` runs one job at a time on Qt's thread pool (superqt's function workers). A job
submitted while another runs waits; a newer submission replaces a waiting one, and the result
of a job that a newer submission superseded is dropped. The newest job's result is handed to
its `apply` callback on the GUI thread, in one step, through a queued signal. An exception in
the job goes to its `failed` callback instead (on the GUI thread too).

Jobs must be pure computations or file I/O on data they own: they never touch a widget. A job
whose result is no longer wanted (superseded, cancelled, its window closing) is asked to stop:
a file read in it ends at its next item (gpu.files.read_stop), so a closing window's large open
holds neither the close nor the program's end.
`flush()` runs the newest job on the calling thread at once (for code that needs the result
now: tests, exports of a config just set), and `wait()` lets a closing window finish cleanly.

A thread still shares the GIL with the GUI thread: a job that is mostly Python (the cost
model's curves) goes to a separate process with `in_process(func, *args)`, and the worker
thread only waits for it (a wait releases the GIL).
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, QThreadPool, Signal
from superqt.utils import create_worker

from gpu import exit_status
from gpu.files.read_stop import check_stop, stoppable

from .child_process import KeeperThread, background_child

#: LatestOnly objects whose owner went away while their job ran (see LatestOnly.abandon).
_abandoned: set[LatestOnly] = set()


@dataclass
class _Job:
    ticket: int
    work: Callable[[], Any]
    apply: Callable[[Any], None]
    failed: Callable[[BaseException], None] | None
    done: threading.Event = field(default_factory=threading.Event)
    #: Dropped before a pool thread took it up: it never starts (a closing window's job
    #: waiting for a thread, or for a compute process it would have to start afresh).
    dropped: bool = False
    #: Set when its result is no longer wanted: a read in it stops (gpu.files.read_stop).
    stop: threading.Event = field(default_factory=threading.Event)


class LatestOnly(QObject):
    """See the module docstring. `applied` fires after each result is applied (tests)."""

    applied = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._ticket = 0
        self._waiting: _Job | None = None
        self._running: _Job | None = None
        self._worker: Any = None
        #: Jobs that must run once submitted (a save): cancel drops their results only.
        self.keeps_jobs = False
        self.started = 0  # jobs started on a worker (tests and benchmarks read these)
        self.dropped = 0  # results dropped because a newer job superseded them

    @property
    def busy(self) -> bool:
        """A job is running or waiting."""
        return self._running is not None or self._waiting is not None

    def submit(
        self,
        work: Callable[[], Any],
        apply: Callable[[Any], None],
        failed: Callable[[BaseException], None] | None = None,
    ) -> int:
        """Run `work()` off the GUI thread, then `apply(result)` on it unless superseded."""
        self._ticket += 1
        if self._waiting is not None:
            self.dropped += 1
        if self._running is not None and not self.keeps_jobs:
            self._running.stop.set()  # superseded: a read in it stops
        self._waiting = _Job(self._ticket, work, apply, failed)
        if self._running is None:
            self._start_next()
        return self._ticket

    def flush(self) -> None:
        """Run the newest job here and now (superseding one still running elsewhere)."""
        job = self._waiting or (
            self._running
            if self._running is not None and self._running.ticket == self._ticket
            else None
        )
        if job is None:
            return
        self._waiting = None
        self._ticket += 1  # whatever is running now is stale
        self._deliver(job, *_call(job.work))

    def cancel(self) -> None:
        """Drop the waiting job and the result of the one running (which does not start at
        all if no pool thread has taken it up yet, and whose read stops where it is:
        gpu.files.read_stop)."""
        self._waiting = None
        self._ticket += 1
        if self._running is not None and not self.keeps_jobs:
            self._running.dropped = True
            self._running.stop.set()

    def abandon(self) -> None:
        """Drop the waiting job and the running one's result, and outlive the parent (a window
        closing during a large open): the job finishes on its own thread, its report lands on
        this object, kept by the application until then, and goes nowhere. Nobody waits."""
        self.cancel()
        if self._running is None:
            return
        self.setParent(QCoreApplication.instance())
        _abandoned.add(self)

    def wait(self, timeout_s: float = 5.0) -> bool:
        """Block until the running job (if any) has finished; True if none is left running."""
        job = self._running
        return job is None or job.done.wait(timeout_s)

    # ---------------------------------------------------------------- internals

    def _start_next(self) -> None:
        job, self._waiting = self._waiting, None
        if job is None:
            return
        self._running = job
        self.started += 1

        def run() -> tuple[Any, BaseException | None]:
            try:
                if job.dropped:
                    return None, None
                with stoppable(job.stop.is_set):
                    return _call(job.work)
            finally:
                job.done.set()

        worker = create_worker(run, _start_thread=False)
        worker.returned.connect(self._on_returned)
        self._worker = worker  # referenced until it has reported back
        worker.start()

    def _on_returned(self, outcome: tuple[Any, BaseException | None]) -> None:
        job, self._running, self._worker = self._running, None, None
        if self in _abandoned:
            _abandoned.discard(self)
            self.deleteLater()
            return
        if job is not None:
            if job.ticket == self._ticket:
                self._deliver(job, *outcome)
            else:
                self.dropped += 1
        self._start_next()

    def _deliver(self, job: _Job, result: Any, error: BaseException | None) -> None:
        if error is None:
            job.apply(result)
            self.applied.emit()
        elif job.failed is not None:
            job.failed(error)
        else:
            raise error


def _call(work: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return work(), None
    except Exception as exc:  # handed to the GUI thread, never lost on the worker
        return None, exc


#: How long an ending program waits for the jobs still on Qt's thread pool (see below).
POOL_EXIT_WAIT_S = 1.0


def finish_pool_jobs(timeout_s: float = POOL_EXIT_WAIT_S) -> bool:
    """Let the jobs on Qt's thread pool run out now, when the event loop has ended and the
    windows still exist; jobs not started by `timeout_s` are dropped. Left to the
    application's end, a job that was still waiting for a thread started after the
    interpreter had torn down the objects it reports through, and printed "Signal source has
    been deleted" tracebacks (a Ctrl+C soon after the start). True if none is left running."""
    pool = QThreadPool.globalInstance()
    if pool.waitForDone(round(timeout_s * 1e3)):
        return True
    pool.clear()
    return False


def run_once(
    parent: QObject,
    work: Callable[[], Any],
    apply: Callable[[Any], None],
    failed: Callable[[BaseException], None],
) -> LatestOnly:
    """One job that no later one supersedes (a save must happen even if another follows): its
    own LatestOnly, which goes away once it has reported."""
    runner = LatestOnly(parent)
    runner.keeps_jobs = True

    def done(result: Any) -> None:
        runner.deleteLater()
        apply(result)

    def error(exc: BaseException) -> None:
        runner.deleteLater()
        failed(exc)

    runner.submit(work, done, error)
    return runner


_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()
_keeper: KeeperThread | None = None
_stops = 0  # how many times the process was stopped on purpose
_jobs_in_process = 0  # jobs waiting on the process now


class ComputeStopped(RuntimeError):
    """The compute process was stopped under a job (its window closed): the result is moot."""


def compute_process() -> ProcessPoolExecutor:
    """One process for the app's Python-heavy jobs, started on first use ("spawn": a fork of a
    process with Qt threads is not safe). It ends with the app however the app ends
    (app.work.child_process): started from the keeper thread, watching its parent."""
    global _pool, _keeper
    with _pool_lock:
        if _pool is None:
            if _keeper is None:
                _keeper = KeeperThread()
            _pool = _keeper.call(_start_pool)
        return _pool


def start_compute_process() -> None:
    """Start the compute process now, from the main thread (the window's start): the thread
    that lives longest (PDEATHSIG follows it), and the one that can keep SIGINT from the child
    until the child ignores it. A Ctrl+C to the process group while the child still imports
    would print its KeyboardInterrupt traceback. The main thread blocks SIGINT while it starts
    the child (a blocked signal stays blocked across exec, and the child unblocks it once it
    ignores it: app.work.child_process.die_with_parent); a SIGINT sent to this process
    meanwhile goes to another of its threads, or waits. Ignoring SIGINT here instead lost a
    Ctrl+C that came during the start, and the window ran on. Elsewhere a no-op."""
    global _pool
    if threading.current_thread() is not threading.main_thread():
        return
    with _pool_lock:
        if _pool is not None:
            return
        if not hasattr(signal, "pthread_sigmask"):  # no signal masks (Windows): no Ctrl+C there
            _pool = _start_pool()
            return
        # multiprocessing starts its resource tracker with the first pool and unblocks SIGINT
        # after it: started first, it leaves the mask alone.
        _quiet_resource_tracker()
        resource_tracker.ensure_running()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            _pool = _start_pool()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


#: The warning filter (python -W) that keeps multiprocessing's resource tracker quiet.
QUIET_TRACKER = "ignore:resource_tracker:UserWarning"


def _quiet_resource_tracker() -> None:
    """The resource tracker that multiprocessing starts beside the compute process outlives an
    app killed outright for a moment, removes the pool's semaphores, and warned on the app's
    own stderr ("There appear to be 5 leaked semaphore objects"): noise on the user's terminal
    about a cleanup that worked. It is a fresh interpreter started with this one's -W options
    (sys.warnoptions), so one filter, set before it starts, silences it."""
    if QUIET_TRACKER not in sys.warnoptions:
        sys.warnoptions.append(QUIET_TRACKER)


def _start_pool() -> ProcessPoolExecutor:
    _quiet_resource_tracker()
    pool = ProcessPoolExecutor(
        1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=background_child,
        initargs=(os.getpid(),),
    )
    pool.submit(int)  # the process starts here, on the keeper thread
    return pool


def end_compute_process() -> None:
    """End the compute process now, whatever it is doing: the program is ending, so any result
    is moot. Runs by itself as the interpreter ends, before concurrent.futures joins its
    pools, which would otherwise wait for a running job (a large read, a model sweep) and hold
    the exit for as long as the job takes. Ended by a signal, the process is killed even when
    idle: it may still be starting, and a child whose parent closes the pipe it reads its start
    from prints a traceback."""
    global _pool, _stops
    with _pool_lock:
        pool, _pool = _pool, None
        busy = _jobs_in_process > 0 or exit_status.signalled() is not None
        _stops += 1  # a job running now fails with ComputeStopped, it does not rerun in-thread
    if pool is None:
        return
    if busy:
        _kill(pool, wait=True)
    else:  # idle: it ends on its own at once, and its queues are released cleanly
        with contextlib.suppress(Exception):
            pool.shutdown(wait=True, cancel_futures=True)


def _kill(pool: ProcessPoolExecutor, wait: bool = False) -> None:
    """SIGKILL the pool's process, then shut the pool (`wait` joins its manager thread).

    A process killed while it sends a result leaves half a message in the result pipe, and
    the pool's manager thread then waits in `recv` for the rest, forever: the pipe's other
    writer is this process itself, so no end of file comes, the futures never fail and the
    interpreter's exit waits for that thread. Closing our own copy of the writing end leaves
    the dead process as its last holder: the read ends, the pool breaks as it should."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError, AttributeError, ValueError):
            process.kill()
    results = getattr(pool, "_result_queue", None)
    with contextlib.suppress(Exception):
        results._writer.close()  # type: ignore[union-attr]
    with contextlib.suppress(Exception):
        pool.shutdown(wait=wait, cancel_futures=True)


def _end_before_the_pools_are_joined() -> None:
    # Interpreter exit joins every pool's manager thread in a hook that concurrent.futures
    # registers with threading (run before atexit's handlers, newest first); ours, registered
    # later, runs before it. atexit is the fallback where that hook does not exist.
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is None:
            raise AttributeError
        register(end_compute_process)
    except (AttributeError, RuntimeError):
        atexit.register(end_compute_process)


_end_before_the_pools_are_joined()


def stop_compute_process() -> bool:
    """End the compute process now if a job is running in it (a window closes during a large
    open): the job fails at once with ComputeStopped instead of holding the close for seconds.
    An idle process stays for the next job. True if one was stopped."""
    global _pool, _stops
    with _pool_lock:
        if _pool is None or _jobs_in_process == 0:
            return False
        pool, _pool = _pool, None
        _stops += 1
    _kill(pool)
    return True


def in_process(func: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """A job for LatestOnly.submit that runs `func(*args)` (picklable) in the compute process;
    where that process cannot run, in the worker thread itself (not when it was stopped on
    purpose under this job: then ComputeStopped)."""

    def work() -> Any:
        global _pool, _jobs_in_process
        with _pool_lock:
            stops = _stops
            _jobs_in_process += 1
        try:
            return compute_process().submit(func, *args).result()
        except (BrokenProcessPool, OSError, RuntimeError) as exc:
            with _pool_lock:
                if _stops != stops:
                    raise ComputeStopped("the compute process was stopped") from exc
                _pool = None  # a later job tries a fresh process
            return func(*args)
        finally:
            with _pool_lock:
                _jobs_in_process -= 1

    return work


def read_elsewhere(path: str) -> Any:
    """app.state.recorded_run.read_members in the compute process: reading and splitting a
    large file makes long calls that would hold the interpreter from the GUI thread; the
    members come back a piece (about a megabyte) per call, and the thread that waits here then
    checks the pieces one short call at a time. The whole read counts as a job in the process,
    so a closing window stops it between two pieces as well (ComputeStopped); a process lost
    otherwise between two calls (started again empty) has the file read here instead."""
    from ..state import recorded_run as run

    global _jobs_in_process
    with _pool_lock:
        stops = _stops
        _jobs_in_process += 1

    def stopped() -> bool:
        return _stops != stops

    def take(key: str, index: int | None) -> Any:
        if stopped():
            raise ComputeStopped("the compute process was stopped")
        check_stop()
        return in_process(run.take_member_piece, key, index)()

    try:
        source_id, layout = in_process(run.keep_members, path)()
        try:
            members = run.assemble_members(layout, take)
        except KeyError:  # a fresh process holds nothing of this file
            if stopped():
                raise ComputeStopped("the compute process was stopped") from None
            return run.read_members(path)
        return source_id, members
    finally:
        with _pool_lock:
            _jobs_in_process -= 1


def read_traces_elsewhere(path: str) -> tuple[Any, ...]:
    """gpu.files.trace.load_traces with its reading and checking in the compute process
    (gpu.files.trace_pieces): the traces' rows come back a piece (about a megabyte) per
    call and are decoded and built here, one short call at a time. Stoppable like
    `read_elsewhere`; where the compute process cannot run, the file is read here."""
    from gpu.files import trace_pieces as pieces
    from gpu.files.trace import load_traces

    global _jobs_in_process
    with _pool_lock:
        stops = _stops
        _jobs_in_process += 1

    def take(k: int, key: str, count: int):  # type: ignore[no-untyped-def]
        for i in range(count):
            if _stops != stops:
                raise ComputeStopped("the compute process was stopped")
            check_stop()
            yield in_process(pieces.take_trace_piece, k, key, i)()

    try:
        try:
            heads = in_process(pieces.keep_trace_pieces, path)()
            return tuple(
                pieces.trace_from_pieces(head, take(k, "blocks", n), take(k, "role_marks", m))
                for k, (head, n, m) in enumerate(heads)
            )
        except (KeyError, IndexError):  # a fresh process holds nothing of this file
            if _stops != stops:
                raise ComputeStopped("the compute process was stopped") from None
            return load_traces(path)
    finally:
        with _pool_lock:
            _jobs_in_process -= 1
