"""What the window measures and how it says so (`Measurements`, a part of the window): sweeps,
re-measuring, requests for what the current config lacks, the run status, and each outcome
landing in the result store (measured series redrawn at most once a frame)."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QTimer
from PySide6.QtWidgets import QMainWindow

from gpu.algorithms import ALGORITHMS
from gpu.config import AttentionConfig
from gpu.results import RunResult

from ..measure.plot_styles import ALGOS
from ..state.app_state import AppState, Change
from ..state.current_point import AlgorithmFigures, figures_for
from ..state.default_view import shown_peers
from ..state.family import family_of
from ..state.recorded_run import is_reference, reference_config
from ..state.result_store import ResultStore
from ..state.runs import Job, RunOutcome
from ..state.seq_scale import powers_of_two_up_to
from ..state.timing_outliers import out_of_line
from ..work.pacing import ARRIVALS_HOLD_MS, MODEL_WAIT_MS, RESULTS_MS, coalesced, own_turn
from .status import ConfigNotes, describe_result

SWEEP_TIP = (
    "Measure every power of two N up to the current one, and the current N, for the "
    "selected algorithms (Ctrl+R). Cached results are not measured again."
)
CONTINUE_TIP = (
    "Measure on here what a session or recording made with the cpu or cuda backend lacks: its "
    "results are kept, labelled as recorded, and only the missing points are measured."
)
RECORDED_SWEEP_TIP = (
    "A recorded run has nothing to measure: the plots already show every N it holds. "
    "To measure more, pick a live backend or use Run ▸ Continue measuring."
)


class Measurements(QObject):
    """The window's measurements (a part of the window): the result store, requests for what
    the config shown lacks, results arriving and the timers that pace their drawing, the run
    status, and sweeps."""

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        #: The main window (app/window/main_window.py, which imports this part): its views
        #: and its other parts, through their public methods.
        self.window = window
        self.store = ResultStore()
        #: What the run status says about the config shown (dropped when another is shown).
        self.notes = ConfigNotes()
        #: The run status when nothing runs and nothing is noted (the backend's readiness).
        self.idle_text = ""
        #: (config, algorithm) measured again for being out of line (once each).
        self._remeasured: set[tuple[AttentionConfig, str]] = set()
        #: Results arriving in a burst are drawn once (at most once a frame), with the model
        #: curves of their family when those are on their way (`_draw_arrivals`).
        self._redraw_measured = coalesced(self._draw_arrivals, RESULTS_MS, parent=self)
        #: Results wait here while the model curves of their family are worked out
        #: (`_draw_arrivals`), MODEL_WAIT_MS at most.
        self.model_wait = QTimer(self)
        self.model_wait.setSingleShot(True)
        self.model_wait.setInterval(MODEL_WAIT_MS)
        self.model_wait.timeout.connect(self.refresh)
        #: Results of the config shown wait here while the rest of its algorithms are measured
        #: (`_draw_arrival`), ARRIVALS_HOLD_MS at most.
        self._arrivals_held = QTimer(self)
        self._arrivals_held.setSingleShot(True)
        self._arrivals_held.setInterval(ARRIVALS_HOLD_MS)
        self._arrivals_held.timeout.connect(self._redraw_measured)
        #: A change of what is shown is drawn once every view has followed it (`draw_shown`),
        #: with the plots' legends and ranges of the same change in one pass; in a turn of its
        #: own where no change delivers it (the first state).
        self._redraw_shown = own_turn(self.refresh, parent=self)
        #: Results or a change of what is shown wait to be drawn (`results_drawn`).
        self._draw_due = False
        #: The last result to arrive for the family shown, for the status bar with the redraw.
        self._last_result: RunResult | None = None
        r = window.runner
        r.outcome.connect(self._on_outcome)
        r.jobStarted.connect(self._on_job_started)
        r.idle.connect(self._on_idle)
        r.sweepProgress.connect(window.run_status.set_sweep)
        r.sweepFinished.connect(self.on_sweep_finished)
        window.plots.modelDrawn.connect(self._model_drawn)

    def forget_backend(self, *_: object) -> None:
        """A backend starts: what the status said about the last one goes (its notes, such as
        a refusal or an out-of-memory, and its last run)."""
        self.notes.clear()
        self.window.readouts.clear_last()
        self._last_result = None

    def follow_state(self, change: Change) -> bool:
        """The measurements' share of a state change: the measured series to redraw, and
        requests for what the config shown lacks. True when the series are redrawn (they take
        the point shown to the explain pane with them)."""
        redraw = change.changed("family", "algorithms", "backend", "run_budget", "all_series")
        if redraw and change.changed("backend"):
            # A backend's fan-out is long enough already: its series are drawn within a frame,
            # with those of a backend that becomes ready meanwhile (and its model curves).
            self._draw_due = True
            self._redraw_measured()
        elif redraw:
            self._draw_due = True
            self._redraw_shown()  # drawn by draw_shown once the views have followed
        if change.changed("config", "algorithms", "backend", "run_budget", "profile_runs"):
            self._show_run_status(measuring=self._request())
        return redraw

    def draw_shown(self, change: Change) -> None:
        """The measured series of what a change shows, once the plots have followed it: drawn
        with the legends and ranges that change asked for, so the window repaints once for
        it (drawn in a later turn, they cost a second pass over every plot and a repaint)."""
        self._redraw_shown.flush()

    def results_at_n(self) -> dict[str, RunResult]:
        """The shown algorithms' results at the N shown: a look-up per algorithm, whatever the
        number of results held."""
        s = self.window.state.value
        if s.backend is None:
            return {}
        key, budget = s.backend.key, s.run_budget
        return {
            a: r
            for a in ALGOS
            if a in s.algorithms and (r := self.store.get(s.config, a, key, budget)) is not None
        }

    def result_for(self, config: AttentionConfig, algorithm: str) -> RunResult | None:
        """The stored result of `config` for the animation's measured clock (None if none)."""
        s = self.window.state.value
        if s.backend is None:
            return None
        return self.store.get(config, algorithm, s.backend.key, s.run_budget)

    def sweep(self) -> int:
        """Queue every power-of-two N up to the current one (and it) that is not cached."""
        s = self.window.state.value
        if s.backend is None:
            self.window.statusBar().showMessage("The backend is still starting; try again.", 4000)
            return 0
        if s.replay:
            self.window.statusBar().showMessage(RECORDED_SWEEP_TIP, 6000)
            return 0
        items = []
        for n in powers_of_two_up_to(s.config.seq_len):
            config = s.config.with_(seq_len=n)
            missing = self.store.missing(
                config, s.algorithms, s.backend.key, s.run_budget, s.profile_runs
            )
            items += [(config, algo) for algo in missing]
        total = self.window.runner.start_sweep(items, s.run_budget, s.profile_runs)
        if total == 0:
            self.window.statusBar().showMessage(
                f"Sweep: every N up to {s.config.seq_len} is already measured.", 4000
            )
        return total

    def remeasure(self) -> int:
        """Measure the current N again for the selected algorithms (the newest result replaces
        the stored one); a recorded run cannot be measured again."""
        s = self.window.state.value
        if s.backend is None or s.replay:
            self.window.statusBar().showMessage(
                "A recorded run cannot be measured again: switch to a live backend.", 5000
            )
            return 0
        self.window.runner.request(s.config, list(s.algorithms), s.run_budget, s.profile_runs)
        return len(s.algorithms)

    def clear_results(self) -> None:
        """Forget the live backend's results (a recorded run's are its file's: kept)."""
        s = self.window.state.value
        if s.backend is None or s.replay:
            self.window.statusBar().showMessage(
                "A recorded run's results stay: they are the file.", 5000
            )
            return
        self.window.runner.cancel_sweep()
        self.window.runner.cancel()
        self.store.clear(s.backend.key)
        self.refresh()
        self.window.statusBar().showMessage(
            "Results cleared; the current N is measured again.", 4000
        )
        self._request()

    def cancel(self) -> None:
        """Stop the sweep and the measurement in flight (Esc)."""
        self.window.runner.cancel_sweep()
        self.window.runner.cancel()
        self.window.run_status.sweep_finished()
        self.window.run_status.set_idle(self.status_text())

    def _request(self) -> bool:
        """Ask the runner for whatever the current config lacks (True), else stop stale work."""
        s = self.window.state.value
        if s.backend is None or self.window.closing:
            return False
        missing = self.store.missing(
            s.config, s.algorithms, s.backend.key, s.run_budget, s.profile_runs
        )
        if missing:
            self.window.runner.request(s.config, missing, s.run_budget, s.profile_runs)
            return True
        self.window.runner.cancel()
        return False

    def _show_run_status(self, measuring: bool) -> None:
        """The run status and banner, derived from the config shown now: notes and errors about
        another config go, and Cancel is offered only while something runs."""
        s = self.window.state.value
        if s.backend is None:
            return  # "Starting…" / "Opening…" stays until the backend is ready
        self.notes.follow(s.config)
        self.window.banner.follow(s.config)
        if measuring:
            self.window.run_status.set_running(f"N = {s.config.seq_len}")
        else:
            self.window.run_status.set_idle(self.status_text())

    def status_text(self) -> str:
        """Notes about the config shown, else what the backend is ready for."""
        notes = self.notes.about(self.window.state.value.config)
        return " · ".join(notes) if notes else self.idle_text

    def last_figures(self, result: RunResult) -> AlgorithmFigures | None:
        """The current point's figures of a result that arrived (the status bar's last run):
        the ones the explain pane and the plots show for its config. Worked out now only for
        the config on screen (the plots and the pane work it out for it anyway); a sweep's
        other points are read as far as their model is known."""
        s = self.window.state.value
        if s.backend is None or result.oom or result.algorithm not in s.algorithms:
            return None
        key, budget = s.backend.key, s.run_budget
        results = {
            a: r
            for a in s.algorithms
            if (r := self.store.get(result.config, a, key, budget)) is not None
        }
        results[result.algorithm] = result
        here = family_of(result.config, result.algorithm) == family_of(s.config, result.algorithm)
        return figures_for(
            result.config, result.algorithm, s.algorithms, s.roof_device, results,
            compute=here and result.config.seq_len == s.config.seq_len,
        )  # fmt: skip

    def _draw_arrivals(self) -> None:
        """Results that arrived: drawn now, or, while the model curves of the family shown are
        being worked out, in the turn after theirs (`_model_drawn`), MODEL_WAIT_MS at most
        after they fell due: drawn before the curves, the plots' ranges and legends would be
        set twice; drawn in the curves' turn, a recording's hundreds of results and its curves
        made one long stall. Results arrive first only where runs take milliseconds."""
        if self.window.plots.isVisible() and self.window.plots.model_coming():
            if not self.model_wait.isActive():
                self.model_wait.start()
            return
        self.refresh()

    def _model_drawn(self) -> None:
        if self.model_wait.isActive():  # the results that waited: in the next turn of their own
            self.model_wait.stop()
            self._redraw_shown()

    @property
    def results_drawn(self) -> bool:
        """The plots show every result held for what is shown: none waits to be drawn."""
        return not self._draw_due

    def refresh(self) -> None:
        """Draw the measured series of what is shown, from the store, now."""
        # Whatever is due is drawn now, from the store: a pending redraw would draw it again.
        self._draw_due = False
        self._redraw_measured.cancel()
        self._redraw_shown.cancel()
        self.model_wait.stop()
        self._arrivals_held.stop()
        if self.window.animation is not None:
            self.window.animation.results_changed()
        s = self.window.state.value
        self.window.plots.set_reference(self._reference_series(s))
        self.window.follow_point()
        if s.backend is None:
            self._last_result = None  # the last backend's
            self.window.plots.set_measured({})
            return
        key, budget = s.backend.key, s.run_budget
        series = {
            a: self.store.series(s.config, a, key, budget) for a in ALGOS if a in s.algorithms
        }
        self.window.plots.set_measured(series)
        # Legends, ranges and the layout they change now, not in a later turn: the window then
        # repaints once for the results, not again for their legends and plot sizes.
        self.window.plots.flush_visibility()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        self._show_last_result()

    def _show_last_result(self) -> None:
        last, self._last_result = self._last_result, None
        if last is not None:
            self.window.readouts.set_last(last, self.last_figures(last))

    def _reference_series(self, s: AppState) -> dict[str, list]:
        """Peers recorded beside ours (PyTorch SDPA): reference series, never our algorithms."""
        ready = s.backend
        if ready is None or not s.replay:
            return {}
        config = reference_config(s.config)
        peers = shown_peers([a for a in ready.algorithms if is_reference(a)], s.all_series)
        return {a: self.store.series(config, a, ready.key, None) for a in peers}

    def _on_job_started(self, job: Job) -> None:
        if job.backend_generation != self.window.backend_switch.generation:
            return
        where = "sweep: " if job.sweep else ""
        self.window.run_status.set_running(
            f"{where}{ALGORITHMS[job.algorithm].label} at N = {job.config.seq_len}"
            if job.algorithm in ALGORITHMS
            else f"{where}{job.algorithm} at N = {job.config.seq_len}"
        )

    def _draw_arrival(self, outcome: RunOutcome) -> None:
        """A result of the family shown: drawn within a frame once the other algorithms of its
        config have come too (one pass over the plots for them all), or ARRIVALS_HOLD_MS after
        the first of them, whichever is sooner."""
        if outcome.more_to_come and not outcome.job.sweep:
            if not self._arrivals_held.isActive():
                self._arrivals_held.start()
        else:
            self._redraw_measured()

    def _release_arrivals(self) -> None:
        """Results held for the rest of their config: drawn within a frame."""
        if self._arrivals_held.isActive():
            self._arrivals_held.stop()
            self._redraw_measured()

    def _on_outcome(self, outcome: RunOutcome) -> None:
        job = outcome.job
        s = self.window.state.value
        if job.backend_generation != self.window.backend_switch.generation or s.backend is None:
            return
        if not (job.sweep or outcome.more_to_come):
            # The last of a config's runs ended, with a result or without (stopped, skipped,
            # failed): what arrived before it is drawn now.
            self._release_arrivals()
        if outcome.cancelled:  # stopped for a newer request or Esc: nothing to show
            return
        if outcome.result is not None:
            result = outcome.result
            self.store.add(result, outcome.backend_key, job.budget_bytes, job.profile)
            if job.profile and not result.oom and not result.traffic:
                self._bytes_not_measured(result)
            if family_of(job.config, job.algorithm) == family_of(s.config, job.algorithm):
                self._draw_due = True
                # The status bar's last run goes with the redraw: its figures are then those
                # of the point the plots draw (worked out once), whatever number arrived.
                self._last_result = result
                self._draw_arrival(outcome)
            else:
                self._last_result = None
                self.window.readouts.set_last(result, self.last_figures(result))
            if not s.replay:
                self.idle_text = f"Idle · {len(self.store)} results cached"
            if result.oom:  # its why (needs X, Y free) is the last run's tooltip
                self._note(job, describe_result(result))
        elif outcome.backend_lost:
            return  # backendLost follows: the backend switch says so and switches backends
        elif outcome.unavailable:
            if not outcome.skipped:  # the first failure; later jobs are skipped quietly
                label = ALGORITHMS[job.algorithm].label if job.algorithm in ALGORITHMS else ""
                self.window.banner.show_message(
                    f"{label or job.algorithm}: {outcome.error} — unavailable for this session; "
                    "the other algorithms keep working.",
                    details=outcome.details,
                )
                self._apply_available()
        elif outcome.unsupported:
            label = ALGORITHMS[job.algorithm].label if job.algorithm in ALGORITHMS else ""
            text = f"{label or job.algorithm} cannot run this here: {outcome.error}"
            self.window.controls.show_error(outcome.error_field, text)
            self.window.statusBar().showMessage(text, 8000)
        elif outcome.error_field:
            self.window.controls.show_error(outcome.error_field, outcome.error)
        elif outcome.skipped and outcome.too_long is not None:
            if job.config == self.window.state.value.config:
                self.notes.too_long(job.config, job.algorithm, *outcome.too_long)
                self.window.run_status.set_text(self.status_text())
            cpu = s.backend_name == "cpu"
            hint = " — Backend ▸ recorded run shows large N measured on a GPU" if cpu else ""
            self.window.statusBar().showMessage(outcome.error + hint, 8000)
        elif outcome.skipped:  # a point the recording lacks
            self._note(job, outcome.error)
            self.window.statusBar().showMessage(outcome.error, 6000)
        elif outcome.error:
            self.window.banner.show_message(
                f"{job.algorithm} at N = {job.config.seq_len} failed: {outcome.error}",
                about=job.config,
            )

    def _bytes_not_measured(self, result) -> None:  # type: ignore[no-untyped-def]
        """A sampled run came back without counters (no CUPTI, no permission, ...): say why
        once, and measure without sampling from now on (the figures stay the model's)."""
        if self.window.state.value.bytes_refused:
            return
        why = next(
            (m for m in result.message.split("; ") if "not measured" in m),
            "the counters gave nothing",
        )
        self.window.statusBar().showMessage(
            f"Measure bytes: {why} — the traffic stays the model's.", 15000
        )
        self.window.state.update(bytes_refused=why)

    def _note(self, job: Job, text: str) -> None:
        """Note `text` about the job's config. Notes about one config add up (naive's
        out-of-memory message is not wiped by tiled's "too slow" a moment later); they are
        shown while that config is, and a note about a config no longer shown is dropped."""
        config = self.window.state.value.config
        if job.config != config:
            return  # the window has moved on: the status bar said it, that is enough
        self.notes.add(config, text)
        self.window.run_status.set_text(self.status_text())

    def _on_idle(self) -> None:
        self._release_arrivals()  # the rest of a config's runs were dropped
        if self.window.state.value.backend is None:
            return
        self.window.run_status.set_idle(self.status_text())

    def on_sweep_finished(self, cancelled: bool) -> None:
        self.window.run_status.sweep_finished()
        self.window.statusBar().showMessage(
            "Sweep cancelled." if cancelled else "Sweep done.", 4000
        )
        if not cancelled:
            self.remeasure_out_of_line()

    def remeasure_out_of_line(self) -> int:
        """Measure again, once each, the points slower than a larger N of the same algorithm
        (app/state/timing_outliers.py): a live backend's sweep ends without a zigzag left by a
        noisy sample. Returns how many were queued."""
        s = self.window.state.value
        if s.backend is None or s.replay:
            return 0
        key, budget = s.backend.key, s.run_budget
        items = []
        for a in s.algorithms:
            for r in out_of_line(self.store.series(s.config, a, key, budget)):
                if (r.config, a) not in self._remeasured:
                    self._remeasured.add((r.config, a))
                    items.append((r.config, a))
        if items:
            self.window.runner.start_sweep(items, budget, s.profile_runs)
            self.window.statusBar().showMessage(
                f"Measuring {len(items)} point(s) again: slower than a larger N.", 6000
            )
        return len(items)

    def _apply_available(self) -> None:
        """The backend's algorithms minus those switched off this session (won't compile)."""
        state = self.window.state
        ready = state.value.backend
        if ready is None:
            return
        off = self.window.runner.unavailable(ready.key)
        state.update(
            available=tuple(a for a in ready.algorithms if a not in off),
            disabled=tuple(off.items()),
        )
