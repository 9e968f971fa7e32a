"""What the controls panel keeps between runs of the app: its config, algorithms, backend,
budget and devices saved in the settings, and restored in one update of the app state (a value
that is missing, of the wrong type or no longer valid is ignored on its own)."""

from __future__ import annotations

import contextlib

from gpu.config import BACKWARD, DECODE, STEP, ConfigError
from gpu.model.layer_stack import LAYERS_MAX, LAYERS_MIN

from ..kit import settings
from ..kit.settings_store import SettingsStore
from ..kit.state_signal import StateSignal
from ..state.budget import BUDGET_PRESETS
from ..state.decode_fit import KV_CHOICES, WEIGHT_CHOICES
from ..state.ring.devices import parse_devices
from .choices import ALGORITHM_ORDER
from .control_groups import ControlGroups


class PanelSettings:
    """Saving and restoring what the controls panel shows: the app `state`, and the choices
    its `groups` keep that the state does not (the causal mask through decode, the
    deterministic mode through a forward pass)."""

    def __init__(self, state: StateSignal, groups: ControlGroups) -> None:
        self.state = state
        self.groups = groups

    def save(self, s: SettingsStore) -> None:
        st = self.state.value
        c = st.config
        s.beginGroup("controls")
        s.setValue("seq_len", c.seq_len)
        s.setValue("heads", c.heads)
        s.setValue("head_dim", c.head_dim)
        s.setValue("batch", c.batch)
        s.setValue("dtype", c.dtype)
        s.setValue("causal", self.groups.causal.isChecked())  # kept while decode too
        s.setValue("block_m", c.block_m)
        s.setValue("block_n", c.block_n)
        s.setValue("pass", c.pass_)
        s.setValue("deterministic", self.groups.deterministic.isChecked())  # kept while forward too
        s.setValue("kv_heads", c.kv_head_count)
        s.setValue("new_tokens", c.new_tokens)
        s.setValue("fit_weights", st.fit_weights)
        s.setValue("fit_kv", st.fit_kv)
        s.setValue("layers", st.layers)
        if st.algorithms_chosen:  # the default view's choice follows the backend: not saved
            s.setValue("algorithms", ",".join(st.checked))
        else:
            s.remove("algorithms")
        s.setValue("backend", st.backend_choice)
        s.setValue("recorded_path", st.recorded_path)
        s.setValue("budget", st.budget_preset)
        s.setValue("custom_gb", st.custom_budget_gb)
        s.setValue("measure_bytes", st.measure_bytes)
        s.setValue("devices", st.devices)
        s.endGroup()

    def restore(self, s: SettingsStore) -> None:
        """Apply saved values in one update; each is type-checked (app/kit/settings.py), and one
        that is missing, of the wrong type or no longer valid is ignored on its own."""
        state = self.state.value
        config = state.config
        for field in ("seq_len", "heads", "head_dim", "batch", "dtype", "causal"):
            value = settings.read(s, f"controls/{field}")
            if value is not None:
                try:
                    config = config.with_(**{field: value})
                except ConfigError as exc:
                    settings.log.warning("ignored the setting controls/%s: %s", field, exc)
        tiles = {f: settings.read(s, f"controls/{f}") for f in ("block_m", "block_n")}
        with contextlib.suppress(ConfigError):  # a pair: valid together or not at all
            config = config.with_(**{f: v for f, v in tiles.items() if v is not None})
        pass_ = settings.read(s, "controls/pass")
        if pass_ is not None:
            try:
                # A forward has no dQ to sum: the mode goes with the pass it belongs to; decode
                # has no mask, the saved one is the prefill's (the control keeps it).
                keep = config.deterministic and pass_ in (BACKWARD, STEP)
                causal = config.causal and pass_ != DECODE
                config = config.with_(pass_=pass_, deterministic=keep, causal=causal)
            except ConfigError as exc:
                settings.log.warning("ignored the setting controls/pass: %s", exc)
        if config.is_decode:
            self.groups.causal.blockSignals(True)
            self.groups.causal.setChecked(bool(settings.read(s, "controls/causal")))
            self.groups.causal.blockSignals(False)
            for field in ("kv_heads", "new_tokens"):
                value = settings.read(s, f"controls/{field}")
                if value is None:
                    continue
                if field == "kv_heads" and value == config.heads:
                    value = None  # MHA: written without kv_heads, as every MHA config is
                try:
                    config = config.with_(**{field: value})
                except ConfigError as exc:
                    settings.log.warning("ignored the setting controls/%s: %s", field, exc)
        deterministic = settings.read(s, "controls/deterministic")
        if deterministic is not None:
            check = self.groups.deterministic  # the choice, for a later training pass too
            check.blockSignals(True)
            check.setChecked(deterministic)
            check.blockSignals(False)
            if config.has_backward:
                config = config.with_(deterministic=deterministic)
        changes: dict[str, object] = {"config": config.with_(seq_len=state.snap(config.seq_len))}
        for key, choices in (("fit_weights", WEIGHT_CHOICES), ("fit_kv", KV_CHOICES)):
            value = settings.read_in(s, f"controls/{key}", choices)
            if value is not None:
                changes[key] = value
        layers = settings.read(s, "controls/layers")
        if isinstance(layers, int) and LAYERS_MIN <= layers <= LAYERS_MAX:
            changes["layers"] = layers
        algos = settings.read(s, "controls/algorithms")
        if algos is not None:
            changes["checked"] = tuple(a for a in ALGORITHM_ORDER if a in algos.split(","))
            changes["algorithms_chosen"] = True
        lo, hi = self.groups.custom_gb.minimum(), self.groups.custom_gb.maximum()
        gb = settings.read(s, "controls/custom_gb")
        if gb is not None and lo <= gb <= hi:
            changes["custom_budget_gb"] = gb
        preset = settings.read_in(s, "controls/budget", BUDGET_PRESETS)
        if preset is not None:
            changes["budget_preset"] = preset
        path = settings.read(s, "controls/recorded_path")
        if path:
            changes["recorded_path"] = path
        choices = [self.groups.backend.itemData(i) for i in range(self.groups.backend.count())]
        backend = settings.read_in(s, "controls/backend", choices)
        if backend is not None:
            changes["backend_choice"] = backend
        devices = parse_devices(settings.read(s, "controls/devices"))
        if devices is not None:
            changes["devices"] = devices
        measure = settings.read(s, "controls/measure_bytes")
        if measure is not None:
            changes["measure_bytes"] = measure
        self.state.update(**changes)
