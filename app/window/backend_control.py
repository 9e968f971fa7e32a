"""Which backend the window measures on: starting one on the runner's thread, adopting it when
it is ready (one state update), falling back when it fails or is lost, and what the run
actions and the shown series may offer on it."""

from __future__ import annotations

from gpu.algorithms import ALGORITHMS
from gpu.backends.backend import Backend

from ..kit.plain_text import tooltip
from ..state.app_state import AppState
from ..state.default_view import default_checked
from ..state.recorded_run import REPLAY, RecordedBackend, shipped_recording
from ..state.ring.devices import backend_for
from ..state.runs import BackendFailure, BackendReady
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


class BackendControl:
    """The main window's backend: start, adopt, fall back (a part of MainWindow)."""

    def _start_backend(self, choice: str, **changes: object) -> None:
        """Start `choice` on the runner thread; `changes` go into the same state update."""
        if self._closing:
            return
        self._replay_if_no_cuda = False  # a backend asked for: the first start's choice is made
        self._startup.stop()  # an explicit start (e.g. open_recorded) replaces the initial one
        self._fell_back_from = ""
        if self._started_choice != "recorded":
            self._fallback_choice = self._started_choice
        self._started_choice = choice
        # What the status said was about the backend that goes: its notes (a refusal, an
        # out-of-memory) and its last run.
        self.notes.clear()
        self.readouts.clear_last()
        self._last_result = None
        self.state.update(backend_choice=choice, backend=None, bytes_refused="", **changes)
        if choice == "recorded":
            path = self.state.value.recorded_path
            preloaded, self._preloaded = self._preloaded, None

            def factory() -> Backend:
                if preloaded is not None and preloaded[0] == path:
                    return preloaded[1]
                return RecordedBackend.from_file(path, read_elsewhere)

            what = f"Opening {path.rsplit('/', 1)[-1]}…"
        else:
            make, devices = self.backend_factory, self.state.value.devices

            def factory() -> Backend:
                return backend_for(choice, devices, make)  # the ring's backend when P > 1

            what = f"Starting the {choice} backend…"
        self.run_status.set_text(what)
        self.readouts.set_backend(f"backend: {choice} (starting)")
        self._backend_generation = self.runner.set_backend(choice, factory)

    def _start_usual_backend(self, *_: object) -> None:
        """The backend the settings name, unless another was started meanwhile. A first start
        on `auto` where no CUDA device can exist opens the shipped GPU recording instead (and
        where one may exist, `_on_backend_ready` does so if `auto` finds none)."""
        if self._backend_generation != 0:
            return
        first = self._first_start and self.state.value.backend_choice == "auto"
        self._first_start = False
        if first and not self._cuda_possible and self._first_replay():
            return
        self._start_backend(self.state.value.backend_choice)
        self._replay_if_no_cuda = first

    def _first_replay(self) -> bool:
        """Open the shipped GPU recording: on a machine without a CUDA device it shows the
        wall on real hardware, and measuring here is one click away (`measure_here`). False
        when this install ships none; if it cannot be read, the CPU backend starts."""
        shipped = shipped_recording()
        if shipped is None:
            return False

        def failed(*_: object) -> None:
            self.file_menu.openFailed.disconnect(failed)
            self._start_backend("cpu")

        def opened(*_: object) -> None:
            self.file_menu.fileOpened.disconnect(opened)
            self.file_menu.openFailed.disconnect(failed)

        self.file_menu.openFailed.connect(failed)
        self.file_menu.fileOpened.connect(opened)
        self.file_menu.open_file(str(shipped))
        return True

    def measure_here(self) -> None:
        """Leave the replayed recording for a live backend on this machine: the CPU where no
        CUDA device is, else `auto`."""
        self.controls.set_backend_choice("auto" if self._cuda_possible else "cpu")

    def _on_backend_ready(self, ready: BackendReady) -> None:
        """One state update for everything a new backend changes."""
        if ready.generation != self._backend_generation or self._closing:
            return
        if self._failed_backend == ready.requested:  # it works now: the old failure is moot
            self.banner.dismiss()
            self._failed_backend = ""
        info = ready.info
        name = getattr(ready.backend, "name", info.backend)
        if ready.requested == "auto" and name == "cpu":
            self._cuda_possible = False
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
        self.readouts.set_backend(text)
        self.readouts.set_device(info)
        s = self.state.value
        wanted, config, scale = s.config, s.config, None
        if name == REPLAY:
            recorded: RecordedBackend = ready.backend  # type: ignore[assignment]
            # A recording is one source: opening one (again, or another) replaces the last
            # one's results, and its own are then taken over whole, in one step.
            for key in self.store.backend_keys():
                if key.startswith(f"{REPLAY}:"):
                    free_later(self.store.detach(key))  # a million objects: not freed here
            if s.replay:
                free_later(s.backend)  # the recording replaced, once the runner lets it go
            self.store.take_over(recorded.store)  # cached before the views ask for them
            scale = recorded.seq_lens() or None
            first = recorded.first_config()
            if first is not None and not recorded.has_family(config):
                config = first.with_(seq_len=config.seq_len)
        config = config.with_(seq_len=AppState(seq_scale=scale).snap(config.seq_len))
        if name == REPLAY:
            self._idle_text = f"Replayed: {ready.backend.label()}"
            if config != wanted:  # say what is shown instead of what was asked for
                self.notes.add(
                    config,
                    f"Showing {config.label()}: the recorded run ({ready.backend.label()}) "
                    f"holds no results for {wanted.label()}",
                )
        else:
            self._idle_text = f"Ready: {info.name} (started in {fmt_seconds(ready.seconds)})"
            continuing, self._continuing = self._continuing, None
            if continuing is not None:
                source, kept, file = continuing
                self.notes.add(
                    config,
                    f"Continuing {file}: {kept} results kept from it, the missing points are "
                    f"measured on {info.name}"
                    if source == ready.key
                    else f"{file} was measured on another device ({source.partition(':')[2]}): "
                    f"its results stay with it, and every point is measured on {info.name}",
                )
        off = self.runner.unavailable(ready.key)
        available = tuple(a for a in ready.algorithms if a not in off)
        self.state.update(
            backend=ready,
            config=config,
            seq_scale=scale,
            available=available,
            disabled=tuple(off.items()),
            **self._view_choice(available),
        )

    def _on_backend_failed(self, failure: BackendFailure) -> None:
        if failure.generation != self._backend_generation or self._closing:
            return
        fallback = "cpu" if failure.requested in ("auto", "cuda") else self._fallback_choice
        if fallback == failure.requested:
            fallback = "cpu" if failure.requested != "cpu" else ""
        self._failed_backend = failure.requested
        if failure.requested in ("auto", "cuda"):
            self._cuda_possible = False
        msg = f"Could not start the {failure.requested} backend: {failure.message}"
        if fallback:
            msg += f" — using {fallback} instead."
        self.banner.show_message(msg)
        self.controls.show_error("backend", failure.message)
        self.readouts.set_backend(f"backend: {failure.requested} failed")
        self.run_status.set_text("No backend running.")
        if fallback:
            self._start_backend(fallback)
        else:
            self.controls.show_backend_choice(self.state.value.backend_choice)

    def _on_backend_lost(self, failure: BackendFailure) -> None:
        """A backend that worked failed mid-run (a CUDA error): carry on with the CPU backend."""
        if failure.generation != self._backend_generation or self._closing:
            return
        ready = self.state.value.backend
        lost = ready.info.backend if ready is not None else failure.requested
        job, self._lost_job = self._lost_job, None
        during = f"{job.algorithm} at N = {job.config.seq_len}" if job is not None else "a run"
        self.banner.show_message(
            f"{lost.upper() if lost == 'cuda' else lost} error during {during}: "
            f"{failure.message} — switched to the CPU backend (NumPy); measurements from now on "
            "come from the CPU."
        )
        self._failed_backend = failure.requested  # keeps the banner up when cpu is ready
        self._start_backend("cpu")
        self._fell_back_from = lost
        self.readouts.set_backend(f"backend: cpu (starting, after a {lost} error)")

    def _sync_run_actions(self) -> None:
        """Sweep measures nothing on a recording; Continue measuring offers its backend."""
        s = self.state.value
        replay = s.replay
        self.sweep_action.setEnabled(not replay)
        self.sweep_button.setEnabled(not replay)
        self.sweep_button.setToolTip(tooltip(RECORDED_SWEEP_TIP if replay else SWEEP_TIP))
        self.sweep_action.setToolTip(tooltip(RECORDED_SWEEP_TIP if replay else SWEEP_TIP))
        target = self._continue_target()[1]
        no_device = target == "cuda" and not self._cuda_possible
        self.continue_action.setEnabled(bool(target) and not no_device)
        self.continue_action.setText(
            f"Continue measuring on {target}" if target else "Continue measuring"
        )
        self.continue_action.setToolTip(
            tooltip(f"Not here: {NO_CUDA_HERE}." if no_device else CONTINUE_TIP)
        )
        here = "auto" if self._cuda_possible else "cpu"
        button = self.controls.measure_here
        button.setText(MEASURE_HERE_GPU if self._cuda_possible else MEASURE_HERE_CPU)
        button.setToolTip(tooltip(MEASURE_HERE_TIP.format(backend=here)))
        button.setVisible(replay)

    def _view_choice(self, available: tuple[str, ...]) -> dict[str, object]:
        """The algorithms ticked for `available` until the user ticks others: every one with
        "Every series", else naive and the fastest fused kernel (app/state/default_view.py)."""
        s = self.state.value
        if s.algorithms_chosen:
            return {}
        return {"checked": tuple(ALGORITHMS) if s.all_series else default_checked(available)}

    def show_every_series(self, every: bool) -> None:
        """ "Every series" (View menu, the button by the key): every algorithm the backend has,
        every peer and naive's kernel lines; off, back to the default view's few."""
        s = self.state.value
        checked = tuple(ALGORITHMS) if every else default_checked(s.available)
        self.state.update(all_series=every, checked=checked, algorithms_chosen=False)

    def _apply_available(self) -> None:
        """The backend's algorithms minus those switched off this session (won't compile)."""
        ready = self.state.value.backend
        if ready is None:
            return
        off = self.runner.unavailable(ready.key)
        self.state.update(
            available=tuple(a for a in ready.algorithms if a not in off),
            disabled=tuple(off.items()),
        )
