"""Which backend the window measures on (`BackendSwitch`, a part of the window): starting one
on the runner's thread from the one factory (gpu/backend_factory.py), adopting it when it is
ready (one state update), falling back when it fails or is lost, continuing a recording on
the backend it was measured with, and what the run actions may offer on it."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMainWindow

from gpu.algorithms import ALGORITHMS
from gpu.backend_factory import (
    BACKENDS,
    DEVICE_BACKENDS,
    REPLAY,
    BackendFactory,
    BackendRequest,
)
from gpu.backends.backend import Backend
from gpu.backends.cuda_check import cuda_possible

from ..kit.plain_text import tooltip
from ..state.app_state import AppState
from ..state.default_view import default_checked
from ..state.recorded_run import RecordedBackend, is_reference, shipped_recording
from ..state.ring.devices import backend_for
from ..state.runs import BackendFailure, BackendReady, Job, RunOutcome, backend_key
from ..state.units import fmt_seconds
from ..work.background import read_elsewhere
from ..work.release import free_later
from .measuring import CONTINUE_TIP, RECORDED_SWEEP_TIP, SWEEP_TIP

NO_CUDA_MESSAGE = "No CUDA device: using the CPU backend (NumPy)"
#: The header's button while a recording is replayed: measure on this machine instead.
MEASURE_HERE_CPU = "Measure on this CPU"
MEASURE_HERE_GPU = "Measure on this machine"
MEASURE_HERE_TIP = (
    "Leave the recording and measure naive and tiled attention here, live ({backend}). The "
    "recording stays one pick away: Backend ▸ recorded run."
)
NO_CUDA_HERE = "this machine has no CUDA device"


def window_backends(one_device: Callable[[str], Backend] | None = None) -> BackendFactory:
    """Every backend the window may start (gpu/backend_factory.py), a recorded run read in the
    compute process (app/work/background.py); `one_device` (name -> Backend: tests' and
    benchmarks' fakes) makes those of one device instead of the engine's."""
    makers: dict[str, Callable[[BackendRequest], Backend]] = {REPLAY: _open_recording}
    if one_device is not None:
        makers |= {name: _by_name(one_device) for name in DEVICE_BACKENDS}
    return BACKENDS.with_makers(makers)


def _open_recording(request: BackendRequest) -> Backend:
    return RecordedBackend.from_file(request.path, read_elsewhere)


def _by_name(make: Callable[[str], Backend]) -> Callable[[BackendRequest], Backend]:
    return lambda request: make(request.name)


class BackendSwitch(QObject):
    """The window's backend: start, adopt, fall back, continue a recording on its backend.
    `starting` says a backend is being started (what the status said about the last one
    goes)."""

    starting = Signal(str)

    def __init__(
        self,
        window: QMainWindow,
        one_device: Callable[[str], Backend] | None = None,
        first_start: bool = False,
    ) -> None:
        super().__init__(window)
        #: The main window (app/window/main_window.py, which imports this part): its views
        #: and its other parts, through their public methods.
        self.window = window
        #: Every backend the window may start, by name (`window_backends`).
        self.backends = window_backends(one_device)
        #: The runner's backend generation this switch started last (0: none yet).
        self.generation = 0
        self._started_choice = "auto"  # the backend last started
        self._fallback_choice = "auto"
        self._failed_backend = ""
        self._fell_back_from = ""  # "cuda" after a CUDA error made the window switch to cpu
        self._lost_job: Job | None = None  # the run during which a backend failed
        self._preloaded: tuple[str, RecordedBackend] | None = None  # checked by File ▸ Open
        #: (source key, results kept, file) while Continue measuring starts its backend
        self._continuing: tuple[str, int, str] | None = None
        #: A first start (empty settings, nothing asked for) on a machine without a CUDA device
        #: opens the shipped GPU recording instead of measuring on the CPU (`_first_replay`).
        self._first_start = first_start
        #: False once this machine is known to have no CUDA device: no CuPy, no device node,
        #: or `auto` found none (then the run actions offer the CPU, never CUDA).
        self.cuda_possible = cuda_possible()
        self._replay_if_no_cuda = False  # `auto` started on a first start: replay if it is cpu
        # The first backend starts once the event loop runs: its imports (CuPy, NumPy extras)
        # hold the GIL on the runner thread and would otherwise compete with the first paint.
        self._startup = QTimer(self)  # a child: never fires for a window already gone
        self._startup.setSingleShot(True)
        self._startup.timeout.connect(self.start_usual)
        r = window.runner
        r.backendReady.connect(self._on_backend_ready)
        r.backendFailed.connect(self._on_backend_failed)
        r.backendLost.connect(self._on_backend_lost)
        r.outcome.connect(self._note_lost)

    def start_usual_soon(self) -> None:
        """`start_usual` once the event loop runs."""
        self._startup.start(0)

    def start(self, choice: str, **changes: object) -> None:
        """Start `choice` on the runner thread; `changes` go into the same state update."""
        w = self.window
        if w.closing:
            return
        self._replay_if_no_cuda = False  # a backend asked for: the first start's choice is made
        self._startup.stop()  # an explicit start (e.g. open_recorded) replaces the initial one
        self._fell_back_from = ""
        if self._started_choice != "recorded":
            self._fallback_choice = self._started_choice
        self._started_choice = choice
        # What the status said was about the backend that goes: its notes (a refusal, an
        # out-of-memory) and its last run.
        self.starting.emit(choice)
        w.state.update(backend_choice=choice, backend=None, bytes_refused="", **changes)
        s = w.state.value
        path, devices, backends = s.recorded_path, s.devices, self.backends
        preloaded, self._preloaded = self._preloaded, None
        if choice == "recorded" and preloaded is not None and preloaded[0] == path:
            ready = preloaded[1]  # read and checked already (File ▸ Open)
            backends = backends.with_makers({REPLAY: lambda _: ready})

        def factory() -> Backend:
            # the recording, the ring's backend when P > 1 runs here, else one device's
            return backend_for(choice, devices, backends, path)

        if choice == "recorded":
            what = f"Opening {path.rsplit('/', 1)[-1]}…"
        else:
            what = f"Starting the {choice} backend…"
        w.run_status.set_text(what)
        w.readouts.set_backend(f"backend: {choice} (starting)")
        self.generation = w.runner.set_backend(choice, factory)

    def open_recorded(self, path: str, preloaded: RecordedBackend | None = None) -> None:
        """Replay a results file (main.py bench --out) or session; loading happens on the runner
        thread unless `preloaded` (already read and checked) is given."""
        self._preloaded = (path, preloaded) if preloaded is not None else None
        self.start("recorded", recorded_path=path)

    def start_usual(self, *_: object) -> None:
        """The backend the settings name, unless another was started meanwhile. A first start
        on `auto` where no CUDA device can exist opens the shipped GPU recording instead (and
        where one may exist, `_on_backend_ready` does so if `auto` finds none)."""
        if self.generation != 0:
            return
        choice = self.window.state.value.backend_choice
        first = self._first_start and choice == "auto"
        self._first_start = False
        if first and not self.cuda_possible and self._first_replay():
            return
        self.start(choice)
        self._replay_if_no_cuda = first

    def _first_replay(self) -> bool:
        """Open the shipped GPU recording: on a machine without a CUDA device it shows the
        wall on real hardware, and measuring here is one click away (`measure_here`). False
        when this install ships none; if it cannot be read, the CPU backend starts."""
        shipped = shipped_recording()
        if shipped is None:
            return False
        file_menu = self.window.file_menu

        def failed(*_: object) -> None:
            file_menu.openFailed.disconnect(failed)
            self.start("cpu")

        def opened(*_: object) -> None:
            file_menu.fileOpened.disconnect(opened)
            file_menu.openFailed.disconnect(failed)

        file_menu.openFailed.connect(failed)
        file_menu.fileOpened.connect(opened)
        file_menu.open_file(str(shipped))
        return True

    def measure_here(self) -> None:
        """Leave the replayed recording for a live backend on this machine: the CPU where no
        CUDA device is, else `auto`."""
        self.window.controls.set_backend_choice("auto" if self.cuda_possible else "cpu")

    def _on_backend_ready(self, ready: BackendReady) -> None:
        """One state update for everything a new backend changes."""
        w, m = self.window, self.window.measurements
        if ready.generation != self.generation or w.closing:
            return
        if self._failed_backend == ready.requested:  # it works now: the old failure is moot
            w.banner.dismiss()
            self._failed_backend = ""
        info = ready.info
        name = getattr(ready.backend, "name", info.backend)
        if ready.requested == "auto" and name == "cpu":
            self.cuda_possible = False
            if self._replay_if_no_cuda and self._first_replay():
                return  # the first start shows the GPU recording, not a CPU measurement
        self._replay_if_no_cuda = False
        if ready.requested == "auto" and name == "cpu":
            text = NO_CUDA_MESSAGE
        elif name == REPLAY:
            file = info.details.get("file", "")
            text = f"backend: replay of {file}"
        elif self._fell_back_from:
            text = f"backend: {name} (after a {self._fell_back_from} error)"
        else:
            text = f"backend: {name}"
        w.readouts.set_backend(text)
        w.readouts.set_device(info)
        s = w.state.value
        wanted, config, scale = s.config, s.config, None
        if name == REPLAY:
            recorded: RecordedBackend = ready.backend  # type: ignore[assignment]
            # A recording is one source: opening one (again, or another) replaces the last
            # one's results, and its own are then taken over whole, in one step.
            for key in m.store.backend_keys():
                if key.startswith(f"{REPLAY}:"):
                    free_later(m.store.detach(key))  # a million objects: not freed here
            if s.replay:
                free_later(s.backend)  # the recording replaced, once the runner lets it go
            m.store.take_over(recorded.store)  # cached before the views ask for them
            scale = recorded.seq_lens() or None
            first = recorded.first_config()
            if first is not None and not recorded.has_family(config):
                config = first.with_(seq_len=config.seq_len)
        config = config.with_(seq_len=AppState(seq_scale=scale).snap(config.seq_len))
        if name == REPLAY:
            m.idle_text = f"Replayed: {ready.backend.label()}"
            if config != wanted:  # say what is shown instead of what was asked for
                m.notes.add(
                    config,
                    f"Showing {config.label()}: the recorded run ({ready.backend.label()}) "
                    f"holds no results for {wanted.label()}",
                )
        else:
            m.idle_text = f"Ready: {info.name} (started in {fmt_seconds(ready.seconds)})"
            continuing, self._continuing = self._continuing, None
            if continuing is not None:
                source, kept, file = continuing
                m.notes.add(
                    config,
                    f"Continuing {file}: {kept} results kept from it, the missing points are "
                    f"measured on {info.name}"
                    if source == ready.key
                    else f"{file} was measured on another device ({source.partition(':')[2]}): "
                    f"its results stay with it, and every point is measured on {info.name}",
                )
        off = w.runner.unavailable(ready.key)
        available = tuple(a for a in ready.algorithms if a not in off)
        w.state.update(
            backend=ready,
            config=config,
            seq_scale=scale,
            available=available,
            disabled=tuple(off.items()),
            **self._view_choice(available),
        )

    def _on_backend_failed(self, failure: BackendFailure) -> None:
        w = self.window
        if failure.generation != self.generation or w.closing:
            return
        fallback = "cpu" if failure.requested in ("auto", "cuda") else self._fallback_choice
        if fallback == failure.requested:
            fallback = "cpu" if failure.requested != "cpu" else ""
        self._failed_backend = failure.requested
        if failure.requested in ("auto", "cuda"):
            self.cuda_possible = False
        msg = f"Could not start the {failure.requested} backend: {failure.message}"
        if fallback:
            msg += f" — using {fallback} instead."
        w.banner.show_message(msg)
        w.controls.show_error("backend", failure.message)
        w.readouts.set_backend(f"backend: {failure.requested} failed")
        w.run_status.set_text("No backend running.")
        if fallback:
            self.start(fallback)
        else:
            w.controls.show_backend_choice(w.state.value.backend_choice)

    def _on_backend_lost(self, failure: BackendFailure) -> None:
        """A backend that worked failed mid-run (a CUDA error): carry on with the CPU backend."""
        w = self.window
        if failure.generation != self.generation or w.closing:
            return
        ready = w.state.value.backend
        lost = ready.info.backend if ready is not None else failure.requested
        job, self._lost_job = self._lost_job, None
        during = f"{job.algorithm} at N = {job.config.seq_len}" if job is not None else "a run"
        w.banner.show_message(
            f"{lost.upper() if lost == 'cuda' else lost} error during {during}: "
            f"{failure.message} — switched to the CPU backend (NumPy); measurements from now on "
            "come from the CPU."
        )
        self._failed_backend = failure.requested  # keeps the banner up when cpu is ready
        self.start("cpu")
        self._fell_back_from = lost
        w.readouts.set_backend(f"backend: cpu (starting, after a {lost} error)")

    def _note_lost(self, outcome: RunOutcome) -> None:
        """The run during which a backend failed (backendLost follows: it says which)."""
        job = outcome.job
        s = self.window.state.value
        if job.backend_generation != self.generation or s.backend is None:
            return
        if outcome.backend_lost and outcome.result is None and not outcome.cancelled:
            self._lost_job = job

    def sync_run_actions(self) -> None:
        """Sweep measures nothing on a recording; Continue measuring offers its backend."""
        w, actions = self.window, self.window.window_actions
        replay = w.state.value.replay
        actions.sweep_action.setEnabled(not replay)
        w.sweep_button.setEnabled(not replay)
        w.sweep_button.setToolTip(tooltip(RECORDED_SWEEP_TIP if replay else SWEEP_TIP))
        actions.sweep_action.setToolTip(tooltip(RECORDED_SWEEP_TIP if replay else SWEEP_TIP))
        target = self._continue_target()[1]
        no_device = target == "cuda" and not self.cuda_possible
        actions.continue_action.setEnabled(bool(target) and not no_device)
        actions.continue_action.setText(
            f"Continue measuring on {target}" if target else "Continue measuring"
        )
        actions.continue_action.setToolTip(
            tooltip(f"Not here: {NO_CUDA_HERE}." if no_device else CONTINUE_TIP)
        )
        here = "auto" if self.cuda_possible else "cpu"
        button = w.controls.measure_here
        button.setText(MEASURE_HERE_GPU if self.cuda_possible else MEASURE_HERE_CPU)
        button.setToolTip(tooltip(MEASURE_HERE_TIP.format(backend=here)))
        button.setVisible(replay)

    def _view_choice(self, available: tuple[str, ...]) -> dict[str, object]:
        """The algorithms ticked for `available` until the user ticks others: every one with
        "Every series", else naive and the fastest fused kernel (app/state/default_view.py)."""
        s = self.window.state.value
        if s.algorithms_chosen:
            return {}
        return {"checked": tuple(ALGORITHMS) if s.all_series else default_checked(available)}

    def _continue_target(self) -> tuple[RecordedBackend | None, str]:
        """The replayed recording and the live backend it was measured with, when there is
        one to continue on; (None, "") otherwise."""
        s = self.window.state.value
        recorded = s.backend.backend if s.backend is not None and s.replay else None
        if isinstance(recorded, RecordedBackend) and recorded.measured_on:
            return recorded, recorded.measured_on
        return None, ""

    def continue_measuring(self) -> bool:
        """Leave a replayed session or recording for the backend it was measured with: its
        results stay in the store, marked recorded, as that device's, so only what they lack
        is measured (on another machine the device differs, and everything is measured)."""
        recorded, target = self._continue_target()
        if recorded is None:
            self.window.statusBar().showMessage(CONTINUE_TIP, 6000)
            return False
        source = backend_key(recorded.recording.device)
        session = recorded.session
        if session is not None:
            kept = [
                (replace(e.result, recorded=True), e.budget_bytes)
                for e in session.entries
                if e.backend_key == session.backend_key
            ]
        else:
            kept = [(r, None) for r in recorded.results() if not is_reference(r.algorithm)]
        store = self.window.measurements.store
        for result, budget in kept:
            store.add(result, source, budget)
        self._continuing = (source, len(kept), os.path.basename(recorded.path) or "the file")
        self.start(target)
        return True

    def ask_recorded_run(self) -> None:
        """The "recorded run" choice with no file: the shipped recording, else ask for one."""
        w = self.window
        if not w.file_menu.recorded_run_wanted():  # back to what ran before the combo asked
            w.controls.show_backend_choice(w.state.value.backend_choice)
