"""The left panel: every input of a run, validated into the app state.

The panel writes to the app state (app/state/app_state.py) and draws from it: a user's edit
becomes one `state.update(...)`, and every change of the state (the user's, a session opened, a
backend ready) is shown by `on_state` with the widgets' signals blocked, so nothing echoes back.
Widgets bound their own ranges, and what a range cannot express (an unsupported head dim on a
backend, say) arrives as a ConfigError: its message is shown inline next to the field it names,
never as a dialog or a crash. Typed text a number field cannot take (out of its range, say) is
not put back silently either: the field keeps its value and says why, inline. Nothing here runs
anything: starting a backend is asked for with `backendWanted`.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from gpu.algorithms import ALGORITHMS, runs_pass
from gpu.config import (
    BACKWARD,
    DECODE,
    PASS_LABELS,
    STEP,
    AttentionConfig,
    ConfigError,
)
from gpu.model.costmodel import GPUS

from ..kit.plain_text import tooltip
from ..kit.settings_store import SettingsStore
from ..kit.state_signal import StateSignal
from ..state.app_state import AppState, Change
from ..state.budget import (
    BUDGET_PRESETS,
    CUSTOM_PRESET,
    DEVICE_PRESET,
    Budget,
)
from ..state.decode_fit import preset_config
from ..state.seq_scale import SEQ_MAX, SEQ_MIN, nearest_index
from ..state.units import fmt_bytes, fmt_int, fmt_rate, short_n
from .choices import ALGORITHM_ORDER, BACKEND_CHOICES, CONFIG_FIELDS
from .control_groups import ControlGroups
from .field_errors import FieldErrors
from .panel_settings import PanelSettings


class ControlsPanel(QWidget):
    """Every input of a run; writes to `state` and shows it (see the module docstring). Its
    parts: the group boxes and their widgets (`groups`), the inline messages (`errors`), the
    settings kept between runs (`settings`)."""

    backendWanted = Signal(str)  # the user picked another backend ("auto", "cuda", "cpu", ...)
    recordedRunWanted = Signal()  # the user picked "recorded run" with no file open

    def __init__(self, state: StateSignal | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("controlsPanel")
        self.state = state if state is not None else StateSignal(parent=self)
        self.errors = FieldErrors()
        self._building = True

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(6)
        g = self.groups = ControlGroups(
            self.state, self.errors, self._emit_config, self._on_preset, self._on_fit
        )
        for box in g.boxes:
            layout.addWidget(box)
        layout.addStretch(1)
        # The widgets, by the names the window and the tests know them by.
        self.backend, self.measure_here = g.backend, g.measure_here
        self.seq_value, self.seq_spin, self.slider = g.seq_value, g.seq_spin, g.slider
        self.seq_lo, self.seq_hi = g.seq_lo, g.seq_hi
        self.pass_combo, self.layers, self.deterministic = g.pass_combo, g.layers, g.deterministic
        self.decode_rows = g.decode_rows
        self.heads, self.head_dim, self.batch = g.heads, g.head_dim, g.batch
        self.dtype, self.causal = g.dtype, g.causal
        self.block_m, self.block_n = g.block_m, g.block_n
        self.algo_checks = g.algo_checks
        self.devices, self.budget, self.custom_gb = g.devices, g.budget, g.custom_gb
        self.measure_bytes = g.measure_bytes
        self._wire()
        self.settings = PanelSettings(self.state, g)
        self._building = False
        self.state.changed.connect(self.on_state)
        self.on_state(Change.initial(self.state.value))

    def _wire(self) -> None:
        """The widgets' signals to the edits they make; typed text a field refuses is said."""
        self.backend.currentIndexChanged.connect(self._on_backend)
        self.seq_spin.valueChanged.connect(self._on_spin)
        self.slider.valueChanged.connect(self._on_slider)
        self.layers.valueChanged.connect(self._on_layers)
        for signal in (
            self.pass_combo.currentIndexChanged,
            self.deterministic.toggled,
            self.heads.valueChanged,
            self.head_dim.valueChanged,
            self.batch.valueChanged,
            self.dtype.currentIndexChanged,
            self.causal.toggled,
            self.block_m.currentIndexChanged,
            self.block_n.currentIndexChanged,
        ):
            signal.connect(self._emit_config)
        for check in self.algo_checks.values():
            check.toggled.connect(self._emit_algorithms)
        self.budget.currentIndexChanged.connect(self._on_budget)
        self.custom_gb.valueChanged.connect(self._on_budget)
        self.measure_bytes.toggled.connect(self._on_measure_bytes)
        for box, field in (
            (self.seq_spin, "seq_len"),
            (self.layers, "layers"),
            (self.decode_rows.kv_heads, "kv_heads"),
            (self.decode_rows.new_tokens, "new_tokens"),
            (self.heads, "heads"),
            (self.head_dim, "head_dim"),
            (self.batch, "batch"),
            (self.custom_gb, "budget"),
        ):
            self.errors.watch(box, field)

    def save(self, s: SettingsStore) -> None:
        """Keep what the panel shows in the settings (`PanelSettings.save`)."""
        self.settings.save(s)

    def restore(self, s: SettingsStore) -> None:
        """Apply saved values in one update (`PanelSettings.restore`)."""
        self.settings.restore(s)

    # ------------------------------------------------------------------ showing the state

    def on_state(self, change: Change) -> None:
        """Show what changed; the widgets' signals are blocked, so nothing is written back."""
        s = change.new
        self._building = True
        try:
            if change.changed("seq_scale"):
                self._apply_scale(s)
            if change.changed("config", "seq_scale"):
                self._show_config(s)
                if change.old is not None:  # a new valid config: older messages are moot
                    for field in CONFIG_FIELDS:
                        self.errors.forget(field)
            if change.changed("fit_weights", "fit_kv"):
                self.decode_rows.show_fit(s.fit_weights, s.fit_kv)
            if change.changed("layers") and self.layers.value() != s.layers:
                self.layers.blockSignals(True)
                self.layers.setValue(s.layers)
                self.layers.blockSignals(False)
            if change.changed("checked", "available", "disabled", "algorithms"):
                self._show_algorithms(s)
            if change.changed("backend_choice", "recorded_path"):
                self._show_backend_choice(s)
            if change.changed("backend"):
                self._refresh_budget_labels(s)
            if change.changed("budget_preset", "custom_budget_gb"):
                self._show_budget(s)
            if change.changed("measure_bytes", "bytes_unmeasurable"):
                self._show_measure_bytes(s)
        finally:
            self._building = False

    def _apply_scale(self, s: AppState) -> None:
        scale, snap = s.scale, s.seq_scale is not None
        self.slider.blockSignals(True)
        self.slider.setRange(0, len(scale) - 1)
        self.slider.setSingleStep(1)
        self.slider.setPageStep(4 if not snap else 1)
        self.slider.setTickInterval(4 if not snap else 1)
        self.slider.blockSignals(False)
        self.seq_spin.scale = scale
        self.seq_spin.snap = snap
        self.seq_spin.blockSignals(True)
        if snap:
            self.seq_spin.setRange(scale[0], scale[-1])
        else:
            self.seq_spin.setRange(SEQ_MIN, SEQ_MAX)
        self.seq_spin.blockSignals(False)
        self.seq_lo.setText(short_n(scale[0]))
        self.seq_hi.setText(short_n(scale[-1]))

    def _show_config(self, s: AppState) -> None:
        c = s.config
        for widget, value in (
            (self.slider, nearest_index(s.scale, c.seq_len)),
            (self.seq_spin, c.seq_len),
            (self.heads, c.heads),
            (self.head_dim, c.head_dim),
            (self.batch, c.batch),
        ):
            if widget.value() != value:
                widget.blockSignals(True)
                widget.setValue(value)
                widget.blockSignals(False)
        for combo, value in (
            (self.dtype, c.dtype),
            (self.block_m, c.block_m),
            (self.block_n, c.block_n),
        ):
            i = combo.findData(value)
            if i >= 0 and combo.currentIndex() != i:
                combo.blockSignals(True)
                combo.setCurrentIndex(i)
                combo.blockSignals(False)
        # Decode has no mask (each new token sees the whole cache): the control keeps the
        # user's choice, disabled, for the next prefill pass.
        self.causal.setEnabled(not c.is_decode)
        if not c.is_decode and self.causal.isChecked() != c.causal:
            self.causal.blockSignals(True)
            self.causal.setChecked(c.causal)
            self.causal.blockSignals(False)
        self.decode_rows.show_config(c)
        i = self.pass_combo.findData(c.pass_)
        if i >= 0 and self.pass_combo.currentIndex() != i:
            self.pass_combo.blockSignals(True)
            self.pass_combo.setCurrentIndex(i)
            self.pass_combo.blockSignals(False)
        self.layers.setEnabled(c.has_backward)
        # The forward has no dQ: the control keeps the user's choice, disabled, for the next
        # training pass; a pass with a backward shows its config's mode.
        self.deterministic.setEnabled(c.has_backward)
        if c.has_backward and self.deterministic.isChecked() != c.deterministic:
            self.deterministic.blockSignals(True)
            self.deterministic.setChecked(c.deterministic)
            self.deterministic.blockSignals(False)
        self.seq_value.setText(f"N = {fmt_int(c.seq_len)}")

    def _show_algorithms(self, s: AppState) -> None:
        reasons = dict(s.disabled)
        pass_ = s.config.pass_
        for algo, check in self.algo_checks.items():
            if check.isChecked() != (algo in s.checked):
                check.blockSignals(True)
                check.setChecked(algo in s.checked)
                check.blockSignals(False)
            written = runs_pass(algo, pass_)
            ok = algo in s.available and algo not in reasons and written
            check.setEnabled(ok)
            tip = ALGORITHMS[algo].description
            if not written:
                tip += f"\n\nNot written for the {PASS_LABELS[pass_]} pass."
            elif not ok:
                why = reasons.get(algo)
                tip += (
                    f"\n\nUnavailable this session: {why}"
                    if why
                    else "\n\nNot available on the current backend."
                )
            check.setToolTip(tooltip(tip))
        if not s.algorithms:
            ours = [ALGORITHMS[a].label for a in ALGORITHMS if runs_pass(a, pass_)]
            self.show_error(
                "algorithms",
                f"Pick at least one algorithm to measure (the {PASS_LABELS[pass_]} runs "
                f"{' or '.join(ours)}).",
            )
        else:
            self.clear_error("algorithms")

    def _show_backend_choice(self, s: AppState) -> None:
        i = self.backend.findData("recorded")
        name = s.recorded_path.rsplit("/", 1)[-1] if s.recorded_path else ""
        # The file's name in the list's tooltip and the status bar: the field stays short.
        self.backend.setItemText(i, "recorded run")
        tip = next(t for k, _, t in BACKEND_CHOICES if k == "recorded")
        self.backend.setItemData(
            i, f"{tip}\n\nNow: {name}" if name else tip, Qt.ItemDataRole.ToolTipRole
        )
        self.show_backend_choice(s.backend_choice)

    def show_backend_choice(self, key: str) -> None:
        """Put the backend list back on `key` without asking for anything."""
        i = self.backend.findData(key)
        if i >= 0 and self.backend.currentIndex() != i:
            self.backend.blockSignals(True)
            self.backend.setCurrentIndex(i)
            self.backend.blockSignals(False)

    def _refresh_budget_labels(self, s: AppState) -> None:
        device = s.device
        for i in range(self.budget.count()):
            key = self.budget.itemData(i)
            if key == DEVICE_PRESET:
                mem = f" ({fmt_bytes(device.memory_bytes)})" if device.memory_bytes else ""
                text = f"This device{mem}"
                tip = f"No emulated limit: {device.label}'s own memory."
                if device.gpu is not None and device.memory_bytes:
                    reported = (
                        f"; the device reports {fmt_bytes(device.reported_bytes)}"
                        if device.reported_bytes
                        else ""
                    )
                    tip = (
                        f"{device.label}: {fmt_bytes(device.memory_bytes)}, the "
                        f"{device.gpu.name}'s capacity by its datasheet{reported}. Runs, the "
                        "budget line and every wall use the datasheet's figure."
                    )
            elif key == CUSTOM_PRESET:
                text, tip = "Custom…", "Type a budget in GB below."
            else:
                spec = GPUS[key]
                text = spec.label
                tip = (
                    f"{spec.name}: {spec.memory_label} = {fmt_bytes(spec.memory_bytes)}, "
                    f"{fmt_rate(spec.bandwidth_bytes_s, 'B/s')}, "
                    f"{fmt_rate(spec.fp16_tensor_flops, 'FLOP/s')} fp16 dense ({spec.source})"
                )
            self.budget.setItemText(i, text)
            self.budget.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)

    def _show_measure_bytes(self, s: AppState) -> None:
        if self.measure_bytes.isChecked() != s.measure_bytes:
            self.measure_bytes.blockSignals(True)
            self.measure_bytes.setChecked(s.measure_bytes)
            self.measure_bytes.blockSignals(False)
        why = s.bytes_unmeasurable
        self.measure_bytes.setEnabled(not why)
        tip = (
            "Also sample each kernel's hardware counters (CUPTI) after timing it: DRAM bytes "
            "read and written, L2 bytes, tensor-pipe and exponential-unit activity. The timed "
            "runs stay unsampled; each kernel runs a few more times, with a cold L2, to be "
            "counted. The traffic plot, the roofline and the verdicts then use measured bytes."
        )
        self.measure_bytes.setToolTip(
            tooltip(f"{tip}\n\nNot available now: {why}." if why else tip)
        )

    def _on_measure_bytes(self, on: bool) -> None:
        if not self._building:
            self.state.update(measure_bytes=bool(on))

    def _show_budget(self, s: AppState) -> None:
        i = self.budget.findData(s.budget_preset)
        if i >= 0 and self.budget.currentIndex() != i:
            self.budget.blockSignals(True)
            self.budget.setCurrentIndex(i)
            self.budget.blockSignals(False)
        if self.custom_gb.value() != s.custom_budget_gb:
            self.custom_gb.blockSignals(True)
            self.custom_gb.setValue(s.custom_budget_gb)
            self.custom_gb.blockSignals(False)
        self.custom_gb.setEnabled(s.budget_preset == CUSTOM_PRESET)

    # ------------------------------------------------------------------ the user's edits

    def _on_slider(self, pos: int) -> None:
        self.set_seq_len(self.state.value.scale[pos])

    def _on_spin(self, n: int) -> None:
        self.set_seq_len(n)

    def _emit_config(self, *_: object) -> None:
        if self._building:
            return
        try:
            config = self.config()
        except ConfigError as exc:
            self.show_error(exc.field, str(exc))
            return
        self.set_config(config)

    def _emit_algorithms(self, *_: object) -> None:
        if not self._building:
            self.set_checked_algorithms(
                tuple(a for a in ALGORITHM_ORDER if self.algo_checks[a].isChecked())
            )

    def _on_backend(self, *_: object) -> None:
        self.clear_error("backend")
        key = self.backend_choice()
        if key == "recorded" and not self.state.value.recorded_path:
            self.recordedRunWanted.emit()
        else:
            self.backendWanted.emit(key)

    def _on_budget(self, *_: object) -> None:
        if not self._building:
            self.state.update(
                budget_preset=self.budget.currentData(),
                custom_budget_gb=float(self.custom_gb.value()),
            )

    # ------------------------------------------------------------------ API

    @property
    def seq_scale(self) -> tuple[int, ...]:
        return self.state.value.scale

    def seq_len(self) -> int:
        return self.state.value.config.seq_len

    def set_seq_len(self, n: int) -> None:
        """Show N = `n` (snapped to the scale where the scale says so)."""
        s = self.state.value
        n = s.snap(n)
        if n == s.config.seq_len:
            self._building = True
            try:
                self._show_config(s)  # a snapped value: put the widgets back on it
            finally:
                self._building = False
            return
        self.state.update(config=s.config.with_(seq_len=n))

    def step_seq(self, steps: int) -> None:
        """Move N along the scale by `steps` positions (the ←/→ shortcuts)."""
        self.seq_spin.stepBy(steps)

    def config(self) -> AttentionConfig:
        """The config the widgets show; raises ConfigError for a value the engine refuses."""
        pass_ = self.pass_combo.currentData()
        decode = pass_ == DECODE
        heads = self.heads.value()
        return AttentionConfig(
            seq_len=self.state.value.config.seq_len,
            heads=heads,
            head_dim=self.head_dim.value(),
            batch=self.batch.value(),
            dtype=self.dtype.currentData(),
            causal=self.causal.isChecked() and not decode,
            block_m=self.block_m.currentData(),
            block_n=self.block_n.currentData(),
            pass_=pass_,
            deterministic=self.deterministic.isChecked() and pass_ in (BACKWARD, STEP),
            **self.decode_rows.fields(decode, heads),
        )

    def _on_preset(self, key: str) -> None:
        """A model picked for what fits: its attention's shape, in one update."""
        if self._building:
            return
        try:
            config = self.config()
        except ConfigError:  # a field showing an error: the preset's shape replaces it
            config = self.state.value.config
        try:
            self.set_config(preset_config(config, key))
        except ConfigError as exc:
            self.show_error(exc.field, str(exc))

    def _on_layers(self, value: int) -> None:
        if not self._building:
            self.state.update(layers=value)

    def _on_fit(self, weights: str, kv: str) -> None:
        if not self._building:
            self.state.update(fit_weights=weights, fit_kv=kv)

    @property
    def last_valid_config(self) -> AttentionConfig:
        return self.state.value.config

    def set_config(self, config: AttentionConfig) -> None:
        s = self.state.value
        config = config.with_(seq_len=s.snap(config.seq_len))
        if config == s.config:  # the same config typed again: its old messages are moot
            for field in CONFIG_FIELDS:
                self.errors.forget(field)
        self.state.update(config=config)

    def show_error(self, field: str, message: str) -> None:
        """Show `message` next to `field` (a ConfigError's field); unknown fields go to N's."""
        self.errors.show(field, message)

    def clear_error(self, field: str) -> None:
        self.errors.clear(field)

    def error_text(self, field: str) -> str:
        return self.errors.text(field)

    def algorithms(self) -> tuple[str, ...]:
        """Checked and available on the backend, in a fixed order."""
        return self.state.value.algorithms

    def checked_algorithms(self) -> tuple[str, ...]:
        return self.state.value.checked

    def set_checked_algorithms(self, algorithms: tuple[str, ...]) -> None:
        """Tick these algorithms, as the user does: the default view no longer picks."""
        self.state.update(
            checked=tuple(a for a in ALGORITHM_ORDER if a in algorithms), algorithms_chosen=True
        )

    def backend_choice(self) -> str:
        return self.backend.currentData()

    def set_backend_choice(self, key: str) -> None:
        """Pick `key` in the backend list, as the user would (asks for that backend)."""
        i = self.backend.findData(key)
        if i >= 0:
            self.backend.setCurrentIndex(i)

    @property
    def recorded_path(self) -> str:
        return self.state.value.recorded_path

    def budget_state(self) -> Budget:
        """The budget the state stands at."""
        return self.state.value.budget

    def set_budget_preset(self, preset: str) -> None:
        if preset in BUDGET_PRESETS:
            self.state.update(budget_preset=preset)

    # ------------------------------------------------------------------ settings

    def sizeHint(self):
        hint = super().sizeHint()
        hint.setWidth(max(hint.width(), 290))
        return hint
