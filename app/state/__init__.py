"""The app's Qt-free state: what the window shows and why, testable and usable without Qt.

The state model (app_state.py)
- `AppState` is one immutable snapshot of every input of the window: `config`, `checked` and
  `available` algorithms (`disabled` ones with why), `budget_preset`/`custom_budget_gb`,
  `backend_choice` and the ready `backend` (None while one starts), `recorded_path`,
  `seq_scale`, `measure_bytes` (sample the counters after timing) and `bytes_refused` (why the
  running backend's counters refused). Derived values are properties computed from those:
  `algorithms` (enabled), `family`, `device`, `budget`, `run_budget`,
  `target_gpu`/`target_gpu_label` (the roofline GPU, with an L2 bandwidth measured on the
  recorded device where the recording has one), `on_gpu`, `budget_name`, `profile_runs` and
  `bytes_unmeasurable` (whether runs sample the counters, and why not), `scale`, `snap(n)`.
- `StateModel.update(**changes)` applies the changes atomically and calls each subscriber once
  with a `Change(old, new, fields)`; `change.changed("config", "target_gpu")` works for fields
  and derived values alike. An update that changes nothing calls nobody; an update made by a
  subscriber is applied after every subscriber has seen the current one.
- Adding a field (say `devices: int = 1` or `measure_bytes: bool = False`) is one line in
  AppState; a control writes it with `state.update(devices=n)`, and each view that cares adds
  `if change.changed("devices"): ...` to its `on_state`. Nothing else changes.

Views (in app/, Qt)
- app/window/state_signal.StateSignal relays every Change as one Qt signal, `changed(Change)`. A Qt
  view connects its `on_state(change)` to it (directly, or queued if it wants); Qt drops the
  connection when the view is deleted. The window's views: ControlsPanel (writes and shows),
  PlotsPanel, ExplainPane, and the window itself for runner requests, measured series and
  the animation. A view takes its first look with `on_state(Change.initial(state))`.

Pacing and work off the GUI thread (app/work/pacing.py, app/work/background.py)
- Anything that follows a stream of changes is paced by one policy, `coalesced(func, ms)`: a
  trailing throttle (a burst runs once with the newest arguments, a stream once per interval).
- Computations and file I/O run in a `LatestOnly` worker: one job at a time, a newer request
  supersedes a waiting or running one, the newest result is applied on the GUI thread in one
  step. Python-heavy jobs run in a separate process (`in_process`) so the GUI thread keeps the
  GIL.

Also here: the result store, sessions, recorded runs, units, the slider's scale, the cost-model
memo and curves, the config family, the budget, the runner's records, the cost-model backend,
and the animation's playback model (animation/).
"""
