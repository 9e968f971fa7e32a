"""The Devices control (Device group): how many devices ring attention spans, P = 1 … 1024.

Each entry says what P means here (app/state/ring/devices.py): measured on the GPUs present,
simulated in NumPy on the CPU backend, replayed from a recorded run, or model only. The control
writes `devices` to the app state (ticking the ring algorithm when P > 1, so the runner has
something to run) and shows the state's value with its signals blocked, like every control.
"""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QVBoxLayout, QWidget

from gpu.algorithms import ALGORITHMS, RING

from ..kit.plain_text import PlainLabel
from ..kit.state_signal import StateSignal
from ..state.app_state import Change
from ..state.recorded_run import REPLAY
from ..state.ring.devices import (
    MODEL,
    RECORDED,
    SIMULATED,
    DeviceChoice,
    backend_kind,
    device_choices,
    recorded_devices,
    runnable_limit,
)


def describe(choice: DeviceChoice, kind: str) -> str:
    """What the hint under the control says for `choice`."""
    p = choice.devices
    if choice.mode == RECORDED:
        return f"P = {p}: replayed from the recorded run, as measured there."
    if choice.mode == MODEL:
        runs = runnable_limit(kind)
        here = (
            "a recorded run replays only the P it holds"
            if kind == REPLAY
            else f"this backend runs up to {runs} device{'s' if runs > 1 else ''}"
        )
        return (
            f"P = {p}: model only — the Ring tab predicts it from the cost model; {here}. "
            "Measurements stay on one device."
        )
    if p == 1:
        return "One device runs the whole sequence (every single-device algorithm)."
    if choice.mode == SIMULATED:
        return (
            f"P = {p}: ring attention on {p} virtual devices, simulated in NumPy: the real "
            "split, block order and merge; times are the CPU's."
        )
    return f"P = {p}: ring attention on {p} GPUs joined by NCCL, measured."


class DevicesControl(QWidget):
    """See the module docstring; `combo` is the `devicesCombo` widget."""

    def __init__(self, state: StateSignal, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("devicesControl")
        self.state = state
        self.combo = QComboBox()
        self.combo.setObjectName("devicesCombo")
        self.combo.setToolTip(
            "Devices P the sequence is split over (ring attention): each holds N/P rows of Q, K "
            "and V, and K/V blocks travel round the ring. Up to the GPUs present P is measured "
            "(the CPU backend simulates it), a recorded run replays its P, and larger P up to "
            "1024 are model only."
        )
        self.hint = PlainLabel()
        self.hint.setObjectName("devicesHint")
        self.hint.setProperty("role", "hint")
        self.hint.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.combo)
        lay.addWidget(self.hint)
        self._choices: tuple[DeviceChoice, ...] = ()
        self._kind = ""
        self.combo.currentIndexChanged.connect(self._on_combo)
        state.changed.connect(self.on_state)
        self.on_state(Change.initial(state.value))

    @property
    def choices(self) -> tuple[DeviceChoice, ...]:
        return self._choices

    def choice(self) -> DeviceChoice:
        """The entry the state's P stands at."""
        p = self.state.value.devices
        return next(c for c in self._choices if c.devices == p)

    def on_state(self, change: Change) -> None:
        if not change.changed("devices", "backend", "backend_choice"):
            return
        s = change.new
        self._kind = backend_kind(s)
        choices = device_choices(self._kind, recorded_devices(s), s.devices)
        self.combo.blockSignals(True)
        try:
            if choices != self._choices:
                self._choices = choices
                self.combo.clear()
                for c in choices:
                    self.combo.addItem(c.label, c.devices)
            self.combo.setCurrentIndex(self.combo.findData(s.devices))
        finally:
            self.combo.blockSignals(False)
        self.hint.setText(describe(self.choice(), self._kind))
        self._fit_hint()

    def _fit_hint(self) -> None:
        """A form row does not ask a wrapped label for its height at the row's width: the
        hint says how tall its text is at the width it has, so no line of it is cut."""
        width = self.hint.width() if self.hint.width() > 50 else self.combo.sizeHint().width()
        height = self.hint.heightForWidth(width)
        if height > 0 and height != self.hint.minimumHeight():
            self.hint.setMinimumHeight(height)
            # The form row takes its height from this widget's minimum: say it outright.
            self.setMinimumHeight(self.combo.sizeHint().height() + self.layout().spacing() + height)

    def resizeEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().resizeEvent(event)
        self._fit_hint()

    def _on_combo(self, index: int) -> None:
        p = self.combo.itemData(index)
        if not isinstance(p, int):
            return
        s = self.state.value
        changes: dict[str, object] = {"devices": p}
        if p > 1 and RING not in s.checked:  # the ring is what runs at P > 1
            changes["checked"] = tuple(a for a in ALGORITHMS if a in (*s.checked, RING))
        self.state.update(**changes)

    def set_devices(self, p: int) -> None:
        """Pick P as the user would."""
        i = self.combo.findData(p)
        if i >= 0:
            self.combo.setCurrentIndex(i)
