"""What the window measures and how it says so: sweeps, re-measuring, continuing a recording,
requests for what the current config lacks, the run status, and each outcome landing in the
result store (measured series redrawn at most once a frame)."""

from __future__ import annotations

import os
from dataclasses import replace

from PySide6.QtCore import QCoreApplication, QEvent

from gpu.algorithms import ALGORITHMS
from gpu.results import RunResult

from ..measure.plot_styles import ALGOS
from ..state.app_state import AppState
from ..state.current_point import AlgorithmFigures, figures_for
from ..state.default_view import shown_peers
from ..state.family import family_of
from ..state.recorded_run import RecordedBackend, is_reference, reference_config
from ..state.runs import Job, RunOutcome, backend_key
from ..state.seq_scale import powers_of_two_up_to
from ..state.timing_outliers import out_of_line
from .status import describe_result

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


class Measuring:
    """The main window's measurements: requests, outcomes, run status (a part of MainWindow)."""

    def sweep(self) -> int:
        """Queue every power-of-two N up to the current one (and it) that is not cached."""
        s = self.state.value
        if s.backend is None:
            self.statusBar().showMessage("The backend is still starting; try again.", 4000)
            return 0
        if s.replay:
            self.statusBar().showMessage(RECORDED_SWEEP_TIP, 6000)
            return 0
        items = []
        for n in powers_of_two_up_to(s.config.seq_len):
            config = s.config.with_(seq_len=n)
            missing = self.store.missing(
                config, s.algorithms, s.backend.key, s.run_budget, s.profile_runs
            )
            items += [(config, algo) for algo in missing]
        total = self.runner.start_sweep(items, s.run_budget, s.profile_runs)
        if total == 0:
            self.statusBar().showMessage(
                f"Sweep: every N up to {s.config.seq_len} is already measured.", 4000
            )
        return total

    def remeasure(self) -> int:
        """Measure the current N again for the selected algorithms (the newest result replaces
        the stored one); a recorded run cannot be measured again."""
        s = self.state.value
        if s.backend is None or s.replay:
            self.statusBar().showMessage(
                "A recorded run cannot be measured again: switch to a live backend.", 5000
            )
            return 0
        self.runner.request(s.config, list(s.algorithms), s.run_budget, s.profile_runs)
        return len(s.algorithms)

    def clear_results(self) -> None:
        """Forget the live backend's results (a recorded run's are its file's: kept)."""
        s = self.state.value
        if s.backend is None or s.replay:
            self.statusBar().showMessage("A recorded run's results stay: they are the file.", 5000)
            return
        self.runner.cancel_sweep()
        self.runner.cancel()
        self.store.clear(s.backend.key)
        self._refresh_measured()
        self.statusBar().showMessage("Results cleared; the current N is measured again.", 4000)
        self._request()

    def cancel(self) -> None:
        """Stop the sweep and the measurement in flight (Esc)."""
        self.runner.cancel_sweep()
        self.runner.cancel()
        self.run_status.sweep_finished()
        self.run_status.set_idle(self._status_text())

    def _continue_target(self) -> tuple[RecordedBackend | None, str]:
        """The replayed recording and the live backend it was measured with, when there is
        one to continue on; (None, "") otherwise."""
        s = self.state.value
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
            self.statusBar().showMessage(CONTINUE_TIP, 6000)
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
        for result, budget in kept:
            self.store.add(result, source, budget)
        self._continuing = (source, len(kept), os.path.basename(recorded.path) or "the file")
        self._start_backend(target)
        return True

    def _request(self) -> bool:
        """Ask the runner for whatever the current config lacks (True), else stop stale work."""
        s = self.state.value
        if s.backend is None or self._closing:
            return False
        missing = self.store.missing(
            s.config, s.algorithms, s.backend.key, s.run_budget, s.profile_runs
        )
        if missing:
            self.runner.request(s.config, missing, s.run_budget, s.profile_runs)
            return True
        self.runner.cancel()
        return False

    def _show_run_status(self, measuring: bool) -> None:
        """The run status and banner, derived from the config shown now: notes and errors about
        another config go, and Cancel is offered only while something runs."""
        s = self.state.value
        if s.backend is None:
            return  # "Starting…" / "Opening…" stays until the backend is ready
        self.notes.follow(s.config)
        self.banner.follow(s.config)
        if measuring:
            self.run_status.set_running(f"N = {s.config.seq_len}")
        else:
            self.run_status.set_idle(self._status_text())

    def _status_text(self) -> str:
        """Notes about the config shown, else what the backend is ready for."""
        notes = self.notes.about(self.state.value.config)
        return " · ".join(notes) if notes else self._idle_text

    def _last_figures(self, result: RunResult) -> AlgorithmFigures | None:
        """The current point's figures of a result that arrived (the status bar's last run):
        the ones the explain pane and the plots show for its config. Worked out now only for
        the config on screen (the plots and the pane work it out for it anyway); a sweep's
        other points are read as far as their model is known."""
        s = self.state.value
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
        if self.plots.isVisible() and self.plots.model_coming():
            if not self._held.isActive():
                self._held.start()
            return
        self._refresh_measured()

    def _model_drawn(self) -> None:
        if self._held.isActive():  # the results that waited: in the next turn of their own
            self._held.stop()
            self._redraw_shown()

    @property
    def results_drawn(self) -> bool:
        """The plots show every result held for what is shown: none waits to be drawn."""
        return not self._draw_due

    def _refresh_measured(self) -> None:
        # Whatever is due is drawn now, from the store: a pending redraw would draw it again.
        self._draw_due = False
        self._redraw_measured.cancel()
        self._redraw_shown.cancel()
        self._held.stop()
        self._arrivals_held.stop()
        if self.animation is not None:
            self.animation.results_changed()
        s = self.state.value
        self.plots.set_reference(self._reference_series(s))
        self._follow_point()
        if s.backend is None:
            self._last_result = None  # the last backend's
            self.plots.set_measured({})
            return
        key, budget = s.backend.key, s.run_budget
        series = {
            a: self.store.series(s.config, a, key, budget) for a in ALGOS if a in s.algorithms
        }
        self.plots.set_measured(series)
        # Legends, ranges and the layout they change now, not in a later turn: the window then
        # repaints once for the results, not again for their legends and plot sizes.
        self.plots.flush_visibility()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        self._show_last_result()

    def _show_last_result(self) -> None:
        last, self._last_result = self._last_result, None
        if last is not None:
            self.readouts.set_last(last, self._last_figures(last))

    def _reference_series(self, s: AppState) -> dict[str, list]:
        """Peers recorded beside ours (PyTorch SDPA): reference series, never our algorithms."""
        ready = s.backend
        if ready is None or not s.replay:
            return {}
        config = reference_config(s.config)
        peers = shown_peers([a for a in ready.algorithms if is_reference(a)], s.all_series)
        return {a: self.store.series(config, a, ready.key, None) for a in peers}

    def _on_job_started(self, job: Job) -> None:
        if job.backend_generation != self._backend_generation:
            return
        where = "sweep: " if job.sweep else ""
        self.run_status.set_running(
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
        s = self.state.value
        if job.backend_generation != self._backend_generation or s.backend is None:
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
                self.readouts.set_last(result, self._last_figures(result))
            if not s.replay:
                self._idle_text = f"Idle · {len(self.store)} results cached"
            if result.oom:  # its why (needs X, Y free) is the last run's tooltip
                self._note(job, describe_result(result))
        elif outcome.backend_lost:
            self._lost_job = job  # backendLost follows: it shows the banner, switches backends
        elif outcome.unavailable:
            if not outcome.skipped:  # the first failure; later jobs are skipped quietly
                label = ALGORITHMS[job.algorithm].label if job.algorithm in ALGORITHMS else ""
                self.banner.show_message(
                    f"{label or job.algorithm}: {outcome.error} — unavailable for this session; "
                    "the other algorithms keep working.",
                    details=outcome.details,
                )
                self._apply_available()
        elif outcome.unsupported:
            label = ALGORITHMS[job.algorithm].label if job.algorithm in ALGORITHMS else ""
            text = f"{label or job.algorithm} cannot run this here: {outcome.error}"
            self.controls.show_error(outcome.error_field, text)
            self.statusBar().showMessage(text, 8000)
        elif outcome.error_field:
            self.controls.show_error(outcome.error_field, outcome.error)
        elif outcome.skipped and outcome.too_long is not None:
            if job.config == self.state.value.config:
                self.notes.too_long(job.config, job.algorithm, *outcome.too_long)
                self.run_status.set_text(self._status_text())
            cpu = s.backend_name == "cpu"
            hint = " — Backend ▸ recorded run shows large N measured on a GPU" if cpu else ""
            self.statusBar().showMessage(outcome.error + hint, 8000)
        elif outcome.skipped:  # a point the recording lacks
            self._note(job, outcome.error)
            self.statusBar().showMessage(outcome.error, 6000)
        elif outcome.error:
            self.banner.show_message(
                f"{job.algorithm} at N = {job.config.seq_len} failed: {outcome.error}",
                about=job.config,
            )

    def _bytes_not_measured(self, result) -> None:  # type: ignore[no-untyped-def]
        """A sampled run came back without counters (no CUPTI, no permission, ...): say why
        once, and measure without sampling from now on (the figures stay the model's)."""
        if self.state.value.bytes_refused:
            return
        why = next(
            (m for m in result.message.split("; ") if "not measured" in m),
            "the counters gave nothing",
        )
        self.statusBar().showMessage(
            f"Measure bytes: {why} — the traffic stays the model's.", 15000
        )
        self.state.update(bytes_refused=why)

    def _note(self, job: Job, text: str) -> None:
        """Note `text` about the job's config. Notes about one config add up (naive's
        out-of-memory message is not wiped by tiled's "too slow" a moment later); they are
        shown while that config is, and a note about a config no longer shown is dropped."""
        config = self.state.value.config
        if job.config != config:
            return  # the window has moved on: the status bar said it, that is enough
        self.notes.add(config, text)
        self.run_status.set_text(self._status_text())

    def _on_idle(self) -> None:
        self._release_arrivals()  # the rest of a config's runs were dropped
        if self.state.value.backend is None:
            return
        self.run_status.set_idle(self._status_text())

    def _on_sweep_finished(self, cancelled: bool) -> None:
        self.run_status.sweep_finished()
        self.statusBar().showMessage("Sweep cancelled." if cancelled else "Sweep done.", 4000)
        if not cancelled:
            self.remeasure_out_of_line()

    def remeasure_out_of_line(self) -> int:
        """Measure again, once each, the points slower than a larger N of the same algorithm
        (app/state/timing_outliers.py): a live backend's sweep ends without a zigzag left by a
        noisy sample. Returns how many were queued."""
        s = self.state.value
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
            self.runner.start_sweep(items, budget, s.profile_runs)
            self.statusBar().showMessage(
                f"Measuring {len(items)} point(s) again: slower than a larger N.", 6000
            )
        return len(items)

    def _ask_recorded_run(self) -> None:
        """The "recorded run" choice with no file: the shipped recording, else ask for one."""
        if not self.file_menu.recorded_run_wanted():  # back to what ran before the combo asked
            self.controls.show_backend_choice(self.state.value.backend_choice)
