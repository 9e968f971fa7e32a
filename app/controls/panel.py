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

import bisect
import contextlib
import re

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gpu.algorithms import ALGORITHMS
from gpu.config import (
    BATCH_MAX,
    BATCH_MIN,
    DTYPE_BYTES,
    HEAD_DIM_MAX,
    HEAD_DIM_MIN,
    HEADS_MAX,
    HEADS_MIN,
    PASS_LABELS,
    TILE_CHOICES,
    AttentionConfig,
    ConfigError,
)
from gpu.model.costmodel import GPUS
from gpu.model.layer_stack import LAYERS_MAX, LAYERS_MIN

from ..state.app_state import AppState, Change
from ..state.budget import (
    BUDGET_PRESETS,
    CUSTOM_GB_RANGE,
    CUSTOM_PRESET,
    DEVICE_PRESET,
    Budget,
)
from ..state.ring.devices import parse_devices
from ..state.seq_scale import SEQ_MAX, SEQ_MIN, default_scale, nearest_index
from ..state.units import fmt_bytes, fmt_int, short_n
from ..window import settings
from ..window.plain_text import PlainLabel, tooltip
from ..window.state_signal import StateSignal
from .devices import DevicesControl

BACKEND_CHOICES = (
    ("auto", "auto", "CUDA when CuPy sees a GPU, otherwise the NumPy CPU backend."),
    ("cuda", "cuda (CuPy)", "Real CUDA kernels through CuPy: cuBLAS + softmax, our fused kernels."),
    ("cpu", "cpu (NumPy)", "The same algorithms, exact, in NumPy on the CPU: slow, everywhere."),
    ("recorded", "recorded run", "Results measured earlier (main.py bench --out), from a file."),
)

#: Every algorithm the engine knows, in its order; a backend enables those it can run.
ALGORITHM_ORDER = tuple(ALGORITHMS)

#: Config fields that have a widget (and an inline error label); "pass" is the config's pass_.
CONFIG_FIELDS = (
    "seq_len", "heads", "head_dim", "batch", "dtype", "causal", "block_m", "block_n", "pass",
)  # fmt: skip

#: The Pass control's entries: (config pass, text, tooltip). A backward alone comes from a file
#: or the command line; the control offers it too, so such a config is shown as it is.
PASS_CHOICES = (
    (
        "forward",
        PASS_LABELS["forward"],
        "Inference: O = softmax(QKᵀ/√d)V. Naive writes S and P to memory; the fused kernels "
        "keep them on chip.",
    ),
    (
        "step",
        PASS_LABELS["step"],
        "Training: the forward, then the backward for dQ, dK, dV, each kernel timed. Naive keeps "
        "P (B·h·N² per layer) for its backward and materializes dP and dS; FlashAttention keeps "
        "O and its row statistics and recomputes S and P tile by tile.",
    ),
    (
        "backward",
        "backward only",
        "The backward kernels alone, after an untimed forward that saves what they need.",
    ),
)


_NUMBER_LIKE = re.compile(r"[+-]?\d*(?:[.,]\d*)?(?:[eE][+-]?\d*)?")


def _bare_text(box: QSpinBox | QDoubleSpinBox, text: str) -> str:
    return text.removeprefix(box.prefix()).removesuffix(box.suffix()).strip()


def _number_like(box: QSpinBox | QDoubleSpinBox, text: str, result: object) -> object:
    """Let out-of-range numbers be typed (Qt would drop the keystroke without a word), so that
    Enter can say why they are refused; letters are still refused as they are typed."""
    state = result[0] if isinstance(result, tuple) else result
    if state == QValidator.State.Invalid and _NUMBER_LIKE.fullmatch(_bare_text(box, text)):
        return (QValidator.State.Intermediate, text, result[2] if isinstance(result, tuple) else 0)
    return result


def _report_refusal(box: ValidatedSpinBox | ValidatedDoubleSpinBox, text: str, fixed: str) -> None:
    """Qt keeps the old value unless its own fix-up (dropping group separators, say) turned
    `text` into an acceptable value: only a refusal is reported."""
    if fixed != text and box.validate(fixed, len(fixed))[0] == QValidator.State.Acceptable:
        return
    box.rejections += 1
    box.rejected.emit(_bare_text(box, text))


class _ReportsRefusals:
    """Validation shared by the spin boxes below (mixed in before the Qt class): typed text that
    is not a number of this field is Invalid, and a refusal is reported, not silently undone."""

    rejections = 0  # edits refused since the last accepted one (set per box once refused)

    def validate(self, text: str, pos: int) -> object:
        return _number_like(self, text, super().validate(text, pos))

    def fixup(self, text: str) -> str:
        fixed = super().fixup(text)
        _report_refusal(self, text, fixed)
        return fixed


class ValidatedSpinBox(_ReportsRefusals, QSpinBox):
    """A spin box that reports typed text it cannot take instead of silently restoring the old
    value: `rejected(text)` fires when Enter or leaving the field finds such text."""

    rejected = Signal(str)


class ValidatedDoubleSpinBox(_ReportsRefusals, QDoubleSpinBox):
    """ValidatedSpinBox for decimals (the custom memory budget)."""

    rejected = Signal(str)


class SeqLenSpinBox(ValidatedSpinBox):
    """Exact N; the arrows step along the slider's scale instead of by 1."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.scale: tuple[int, ...] = default_scale()
        self.snap = False  # a recorded run: only its N values are allowed

    def stepBy(self, steps: int) -> None:
        n, scale = self.value(), self.scale
        if steps > 0:
            i = bisect.bisect_right(scale, n) + steps - 1
        elif steps < 0:
            i = bisect.bisect_left(scale, n) + steps
        else:
            return
        self.setValue(scale[max(0, min(len(scale) - 1, i))])


class ControlsPanel(QWidget):
    """Every input of a run; writes to `state` and shows it (see the module docstring)."""

    backendWanted = Signal(str)  # the user picked another backend ("auto", "cuda", "cpu", ...)
    recordedRunWanted = Signal()  # the user picked "recorded run" with no file open

    def __init__(self, state: StateSignal | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("controlsPanel")
        self.state = state if state is not None else StateSignal(parent=self)
        self._errors: dict[str, QLabel] = {}
        self._edit_errors: set[str] = set()  # fields showing a refused typed value
        self._building = True

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(6)
        layout.addWidget(self._build_seq_group())
        layout.addWidget(self._build_pass_group())
        layout.addWidget(self._build_shape_group())
        layout.addWidget(self._build_algorithm_group())
        layout.addWidget(self._build_device_group())
        layout.addStretch(1)
        self._building = False
        self.state.changed.connect(self.on_state)
        self.on_state(Change.initial(self.state.value))

    # ------------------------------------------------------------------ construction

    def _error_label(self, field: str) -> QLabel:
        label = PlainLabel()
        label.setObjectName("fieldError")
        label.setProperty("role", "error")
        label.setWordWrap(True)
        label.setVisible(False)
        self._errors[field] = label
        return label

    def _build_seq_group(self) -> QGroupBox:
        box = QGroupBox("Sequence length N")
        v = QVBoxLayout(box)
        row = QHBoxLayout()
        self.seq_value = PlainLabel()
        self.seq_value.setObjectName("seqLenValue")
        self.seq_value.setToolTip("The sequence length of this run: N tokens of Q, K and V.")
        row.addWidget(self.seq_value, 1)
        self.seq_spin = SeqLenSpinBox()
        self.seq_spin.setObjectName("seqLenSpin")
        self.seq_spin.setRange(SEQ_MIN, SEQ_MAX)
        self.seq_spin.setKeyboardTracking(False)
        self.seq_spin.setAccelerated(True)
        self.seq_spin.setToolTip(
            "Exact N (128 to 131072). Type any value and press Enter; the arrows step along the "
            "slider's scale."
        )
        self.seq_spin.valueChanged.connect(self._on_spin)
        self._validate_edits(self.seq_spin, "seq_len")
        row.addWidget(self.seq_spin)
        v.addLayout(row)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setObjectName("seqLenSlider")
        self.slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        self.slider.setToolTip(
            "Drag to change N on a log scale (four steps per doubling). Model curves follow "
            "instantly; measurements run in the background, newest first. ←/→ step N."
        )
        self.slider.valueChanged.connect(self._on_slider)
        v.addWidget(self.slider)
        ends = QHBoxLayout()
        self.seq_lo = PlainLabel()
        self.seq_hi = PlainLabel()
        for lab in (self.seq_lo, self.seq_hi):
            lab.setProperty("role", "hint")
        ends.addWidget(self.seq_lo)
        ends.addStretch(1)
        ends.addWidget(self.seq_hi)
        v.addLayout(ends)
        v.addWidget(self._error_label("seq_len"))
        return box

    def _build_pass_group(self) -> QGroupBox:
        box = QGroupBox("Pass")
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.pass_combo = QComboBox()
        self.pass_combo.setObjectName("passCombo")
        for key, text, tip in PASS_CHOICES:
            self.pass_combo.addItem(text, key)
            self.pass_combo.setItemData(
                self.pass_combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole
            )
        self.pass_combo.setToolTip(
            "What is run and timed: inference (the forward pass) or a training step (forward "
            "and backward). The plots, the explain pane and the tiles follow."
        )
        self.pass_combo.currentIndexChanged.connect(self._emit_config)
        self.layers = ValidatedSpinBox()
        self.layers.setObjectName("layersSpin")
        self.layers.setRange(LAYERS_MIN, LAYERS_MAX)
        self.layers.setValue(12)
        self.layers.setKeyboardTracking(False)
        self.layers.setToolTip(
            "Attention layers L of a model trained with this shape: every layer's forward keeps "
            "its saved activations until its backward, so they stack up L times (the memory "
            "plot's L-layer lines; attention's own tensors only)."
        )
        self.layers.valueChanged.connect(self._on_layers)
        self._validate_edits(self.layers, "layers")
        form.addRow("Pass", self.pass_combo)
        form.addRow("", self._error_label("pass"))
        form.addRow("Layers L", self.layers)
        form.addRow("", self._error_label("layers"))
        return box

    def _on_layers(self, value: int) -> None:
        if not self._building:
            self.state.update(layers=value)

    def _build_shape_group(self) -> QGroupBox:
        box = QGroupBox("Problem shape")
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)

        def spin(name: str, lo: int, hi: int, value: int, tip: str) -> QSpinBox:
            s = ValidatedSpinBox()
            s.setObjectName(name)
            s.setRange(lo, hi)
            s.setValue(value)
            s.setKeyboardTracking(False)
            s.setToolTip(tooltip(tip))
            s.valueChanged.connect(self._emit_config)
            return s

        self.heads = spin(
            "headsSpin",
            HEADS_MIN,
            HEADS_MAX,
            12,
            "Attention heads h. S and P hold B·h·N² elements each, so memory grows linearly in h.",
        )
        self.head_dim = spin(
            "headDimSpin",
            HEAD_DIM_MIN,
            HEAD_DIM_MAX,
            64,
            "Head dimension d. FLOPs grow as N²·d, naive's S/P traffic does not "
            "depend on d: small d makes naive attention memory-bound.",
        )
        self.batch = spin(
            "batchSpin",
            BATCH_MIN,
            BATCH_MAX,
            1,
            "Batch size B: independent sequences; every memory and FLOP figure scales with B.",
        )
        self.dtype = QComboBox()
        self.dtype.setObjectName("dtypeCombo")
        for d in DTYPE_BYTES:
            self.dtype.addItem(f"{d} ({DTYPE_BYTES[d]} B)", d)
        self.dtype.setToolTip("Element type of Q, K, V, S, P and O. Softmax statistics are fp32.")
        self.dtype.currentIndexChanged.connect(self._emit_config)
        self.causal = QCheckBox("causal mask")
        self.causal.setObjectName("causalCheck")
        self.causal.setToolTip(
            "Mask future keys: half the useful FLOPs. Naive still computes and stores all of S; "
            "the tiled kernel skips key tiles above the diagonal."
        )
        self.causal.toggled.connect(self._emit_config)

        def tile_combo(name: str, tip: str) -> QComboBox:
            c = QComboBox()
            c.setObjectName(name)
            for t in TILE_CHOICES:
                c.addItem(str(t), t)
            c.setCurrentIndex(TILE_CHOICES.index(64))
            c.setToolTip(tooltip(tip))
            c.currentIndexChanged.connect(self._emit_config)
            return c

        self.block_m = tile_combo(
            "blockMCombo",
            "Br: query rows per tile of the readable tiled "
            "kernel (one thread block's Q_i, kept on chip).",
        )
        self.block_n = tile_combo(
            "blockNCombo",
            "Bc: key/value rows per tile of the readable "
            "tiled kernel (the K_j, V_j streamed through shared memory). "
            "HBM traffic falls as the tiles grow.",
        )
        for widget, field in (
            (self.heads, "heads"),
            (self.head_dim, "head_dim"),
            (self.batch, "batch"),
        ):
            self._validate_edits(widget, field)
        for label, widget, field in (
            ("Heads h", self.heads, "heads"),
            ("Head dim d", self.head_dim, "head_dim"),
            ("Batch B", self.batch, "batch"),
            ("Dtype", self.dtype, "dtype"),
            ("", self.causal, "causal"),
        ):
            form.addRow(label, widget)
            form.addRow("", self._error_label(field))
        tiles = QHBoxLayout()
        tiles.addWidget(PlainLabel("Br"))
        tiles.addWidget(self.block_m, 1)
        tiles.addWidget(PlainLabel("Bc"))
        tiles.addWidget(self.block_n, 1)
        tiles_w = QWidget()
        tiles_w.setLayout(tiles)
        tiles.setContentsMargins(0, 0, 0, 0)
        tiles_w.setToolTip(
            "Tile sizes of the readable tiled kernel (the tensor-core kernel chooses its own)."
        )
        form.addRow("Tiles", tiles_w)
        form.addRow("", self._error_label("block_m"))
        form.addRow("", self._error_label("block_n"))
        return box

    def _build_algorithm_group(self) -> QGroupBox:
        box = QGroupBox("Algorithms")
        v = QVBoxLayout(box)
        self.algo_checks: dict[str, QCheckBox] = {}
        for algo in ALGORITHM_ORDER:
            info = ALGORITHMS[algo]
            check = QCheckBox(info.label)
            check.setObjectName(f"algo_{algo}")
            check.setChecked(True)
            check.setToolTip(tooltip(info.description))
            check.toggled.connect(self._emit_algorithms)
            self.algo_checks[algo] = check
            v.addWidget(check)
        v.addWidget(self._error_label("algorithms"))
        return box

    def _build_device_group(self) -> QGroupBox:
        box = QGroupBox("Device")
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.backend = QComboBox()
        self.backend.setObjectName("backendCombo")
        for key, label, tip in BACKEND_CHOICES:
            self.backend.addItem(label, key)
            self.backend.setItemData(self.backend.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.backend.setToolTip(
            "Where runs happen. auto: CUDA when a GPU is present, else NumPy. recorded run: "
            "results from a file (File ▸ Open recorded run…)."
        )
        self.backend.currentIndexChanged.connect(self._on_backend)
        form.addRow("Backend", self.backend)
        form.addRow("", self._error_label("backend"))
        self.devices = DevicesControl(self.state)
        form.addRow("Devices", self.devices)

        self.budget = QComboBox()
        self.budget.setObjectName("budgetCombo")
        for key in BUDGET_PRESETS:
            self.budget.addItem(key, key)
        self.budget.setToolTip(
            "GPU memory budget: draws the wall on the memory plot and caps what a run may "
            "allocate (CUDA: pool limit; CPU: RAM cap), emulating a smaller GPU. The preset's GPU "
            "also sets the roofline and the memory-/compute-bound verdict."
        )
        self.budget.currentIndexChanged.connect(self._on_budget)
        self.custom_gb = ValidatedDoubleSpinBox()
        self.custom_gb.setObjectName("customBudgetSpin")
        self.custom_gb.setRange(*CUSTOM_GB_RANGE)
        self.custom_gb.setDecimals(1)
        self.custom_gb.setValue(16.0)
        self.custom_gb.setSuffix(" GB")
        self.custom_gb.setKeyboardTracking(False)
        self.custom_gb.setToolTip("A custom memory budget in GB (10⁹ bytes).")
        self.custom_gb.valueChanged.connect(self._on_budget)
        self._validate_edits(self.custom_gb, "budget")
        form.addRow("Memory", self.budget)
        form.addRow("Custom", self.custom_gb)
        form.addRow("", self._error_label("budget"))
        self.measure_bytes = QCheckBox("Measure bytes (hardware counters)")
        self.measure_bytes.setObjectName("measureBytesCheck")
        self.measure_bytes.toggled.connect(self._on_measure_bytes)
        form.addRow(self.measure_bytes)  # both columns: the panel stays narrow
        return box

    # ------------------------------------------------------------------ typed values

    def _validate_edits(self, box: ValidatedSpinBox | ValidatedDoubleSpinBox, field: str) -> None:
        box.rejected.connect(lambda text: self._refuse_edit(box, field, text))
        box.editingFinished.connect(lambda: self._edit_finished(box, field))

    def _refuse_edit(
        self, box: ValidatedSpinBox | ValidatedDoubleSpinBox, field: str, text: str
    ) -> None:
        """Say why typed `text` is refused, naming the field; the field keeps its value."""
        decimal = isinstance(box, QDoubleSpinBox)
        value: object = text
        with contextlib.suppress(ValueError):
            value = float(text.replace(",", ".")) if decimal else int(text)
        if decimal:
            unit = box.suffix().strip()
            allowed = f"a number from {box.minimum():g} to {box.maximum():g} {unit}".rstrip()
            kept = f"{box.value():g} {unit}".rstrip()
        else:
            allowed = f"an integer from {box.minimum()} to {box.maximum()}"
            if field == "seq_len" and self.seq_spin.snap:
                allowed += " (the N values of the recorded run)"
            kept = str(box.value())
        self.show_error(field, f"{ConfigError(field, value, allowed)}; kept {kept}")
        self._edit_errors.add(field)

    def _edit_finished(self, box: ValidatedSpinBox | ValidatedDoubleSpinBox, field: str) -> None:
        if box.rejections:  # this edit was refused: its message stays
            box.rejections = 0
        elif field in self._edit_errors:  # an accepted edit: an older refusal is moot
            self._edit_errors.discard(field)
            self.clear_error(field)

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
                        self.clear_error(field)
                        self._edit_errors.discard(field)
            if change.changed("layers") and self.layers.value() != s.layers:
                self.layers.blockSignals(True)
                self.layers.setValue(s.layers)
                self.layers.blockSignals(False)
            if change.changed("checked", "available", "disabled"):
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
        if self.causal.isChecked() != c.causal:
            self.causal.blockSignals(True)
            self.causal.setChecked(c.causal)
            self.causal.blockSignals(False)
        i = self.pass_combo.findData(c.pass_)
        if i >= 0 and self.pass_combo.currentIndex() != i:
            self.pass_combo.blockSignals(True)
            self.pass_combo.setCurrentIndex(i)
            self.pass_combo.blockSignals(False)
        self.layers.setEnabled(c.has_backward)
        self.seq_value.setText(f"N = {fmt_int(c.seq_len)}")

    def _show_algorithms(self, s: AppState) -> None:
        reasons = dict(s.disabled)
        for algo, check in self.algo_checks.items():
            if check.isChecked() != (algo in s.checked):
                check.blockSignals(True)
                check.setChecked(algo in s.checked)
                check.blockSignals(False)
            ok = algo in s.available and algo not in reasons
            check.setEnabled(ok)
            tip = ALGORITHMS[algo].description
            if not ok:
                why = reasons.get(algo)
                tip += (
                    f"\n\nUnavailable this session: {why}"
                    if why
                    else "\n\nNot available on the current backend."
                )
            check.setToolTip(tooltip(tip))
        if not s.algorithms:
            self.show_error("algorithms", "Pick at least one algorithm to measure.")
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
            elif key == CUSTOM_PRESET:
                text, tip = "Custom…", "Type a budget in GB below."
            else:
                spec = GPUS[key]
                text = spec.label
                tip = (
                    f"{spec.name}: {spec.memory_label} = {fmt_bytes(spec.memory_bytes)}, "
                    f"{spec.bandwidth_bytes_s / 1e12:.2f} TB/s, "
                    f"{spec.fp16_tensor_flops / 1e12:.0f} TFLOP/s fp16 dense ({spec.source})"
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
        return AttentionConfig(
            seq_len=self.state.value.config.seq_len,
            heads=self.heads.value(),
            head_dim=self.head_dim.value(),
            batch=self.batch.value(),
            dtype=self.dtype.currentData(),
            causal=self.causal.isChecked(),
            block_m=self.block_m.currentData(),
            block_n=self.block_n.currentData(),
            pass_=self.pass_combo.currentData(),
        )

    @property
    def last_valid_config(self) -> AttentionConfig:
        return self.state.value.config

    def set_config(self, config: AttentionConfig) -> None:
        s = self.state.value
        config = config.with_(seq_len=s.snap(config.seq_len))
        if config == s.config:  # the same config typed again: its old messages are moot
            for field in CONFIG_FIELDS:
                self.clear_error(field)
                self._edit_errors.discard(field)
        self.state.update(config=config)

    def show_error(self, field: str, message: str) -> None:
        """Show `message` next to `field` (a ConfigError's field); unknown fields go to N's."""
        label = self._errors.get(field) or self._errors.get(_FIELD_ALIASES.get(field, ""))
        if label is None:
            label = self._errors["seq_len"]
        label.setText(message)
        label.setToolTip(tooltip(message))
        label.setVisible(True)

    def clear_error(self, field: str) -> None:
        label = self._errors.get(field)
        if label is not None and label.isVisible():
            label.setVisible(False)
            label.clear()

    def error_text(self, field: str) -> str:
        label = self._errors.get(field)
        return label.text() if label is not None and label.isVisible() else ""

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

    def save(self, s: QSettings) -> None:
        st = self.state.value
        c = st.config
        s.beginGroup("controls")
        s.setValue("seq_len", c.seq_len)
        s.setValue("heads", c.heads)
        s.setValue("head_dim", c.head_dim)
        s.setValue("batch", c.batch)
        s.setValue("dtype", c.dtype)
        s.setValue("causal", c.causal)
        s.setValue("block_m", c.block_m)
        s.setValue("block_n", c.block_n)
        s.setValue("pass", c.pass_)
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

    def restore(self, s: QSettings) -> None:
        """Apply saved values in one update; each is type-checked (app/window/settings.py), and one
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
                config = config.with_(pass_=pass_)
            except ConfigError as exc:
                settings.log.warning("ignored the setting controls/pass: %s", exc)
        changes: dict[str, object] = {"config": config.with_(seq_len=state.snap(config.seq_len))}
        layers = settings.read(s, "controls/layers")
        if isinstance(layers, int) and LAYERS_MIN <= layers <= LAYERS_MAX:
            changes["layers"] = layers
        algos = settings.read(s, "controls/algorithms")
        if algos is not None:
            changes["checked"] = tuple(a for a in ALGORITHM_ORDER if a in algos.split(","))
            changes["algorithms_chosen"] = True
        lo, hi = self.custom_gb.minimum(), self.custom_gb.maximum()
        gb = settings.read(s, "controls/custom_gb")
        if gb is not None and lo <= gb <= hi:
            changes["custom_budget_gb"] = gb
        preset = settings.read_in(s, "controls/budget", BUDGET_PRESETS)
        if preset is not None:
            changes["budget_preset"] = preset
        path = settings.read(s, "controls/recorded_path")
        if path:
            changes["recorded_path"] = path
        choices = [self.backend.itemData(i) for i in range(self.backend.count())]
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

    def sizeHint(self):
        hint = super().sizeHint()
        hint.setWidth(max(hint.width(), 290))
        return hint


_FIELD_ALIASES = {"config": "seq_len", "algorithm": "algorithms"}
