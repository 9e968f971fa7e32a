"""The left panel: every input of a run, validated into an AttentionConfig.

Widgets bound their own ranges, and what a range cannot express (an unsupported head dim on a
backend, say) arrives as a ConfigError: its message is shown inline next to the field it names,
never as a dialog or a crash. Typed text a number field cannot take (out of its range, say) is
not put back silently either: the field keeps its value and says why, inline. Nothing here runs
anything; the panel only emits what changed.
"""

from __future__ import annotations

import bisect
import contextlib
import re
from dataclasses import dataclass

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

from gpu.algorithms import ALGORITHMS, NAIVE, TILED
from gpu.config import (
    BATCH_MAX,
    BATCH_MIN,
    DTYPE_BYTES,
    HEAD_DIM_MAX,
    HEAD_DIM_MIN,
    HEADS_MAX,
    HEADS_MIN,
    TILE_CHOICES,
    AttentionConfig,
    ConfigError,
)
from gpu.costmodel import GPUS, GpuSpec

from .state.seq_scale import SEQ_MAX, SEQ_MIN, default_scale, nearest_index
from .state.units import fmt_bytes_short, fmt_int

BACKEND_CHOICES = (
    ("auto", "auto", "CUDA when CuPy sees a GPU, otherwise the NumPy CPU backend."),
    ("cuda", "cuda (CuPy)", "Real CUDA kernels through CuPy: cuBLAS + softmax, our fused kernels."),
    ("cpu", "cpu (NumPy)", "The same algorithms, exact, in NumPy on the CPU: slow, everywhere."),
    ("recorded", "recorded run", "Results measured earlier (main.py bench --out), from a file."),
)

DEVICE_PRESET = "device"
CUSTOM_PRESET = "custom"

#: Presets of the memory budget, largest first: this device, the GPUS table, custom.
BUDGET_PRESETS: tuple[str, ...] = (
    DEVICE_PRESET,
    *sorted(GPUS, key=lambda k: (-GPUS[k].memory_bytes, k)),
    CUSTOM_PRESET,
)

#: Every algorithm the engine knows, in its order; a backend enables those it can run.
ALGORITHM_ORDER = tuple(ALGORITHMS)


@dataclass(frozen=True)
class Budget:
    """The memory budget as the rest of the app needs it."""

    preset: str
    #: Passed to the backend (RunOptions.budget_bytes); None = the device's own memory.
    run_bytes: int | None
    #: Where to draw the line: the budget, or the device's memory for "this device".
    line_bytes: int | None
    label: str  # "RTX 4090 24 GB", "this device (23.4 GB RAM)"
    gpu: GpuSpec | None  # the GPU whose roofline and ridge point the verdicts use


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
    configChanged = Signal(object)  # AttentionConfig (valid)
    algorithmsChanged = Signal(tuple)
    backendChanged = Signal(str)
    budgetChanged = Signal(object)  # Budget
    recordedRunWanted = Signal()  # the user picked "recorded run" with no file open

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("controlsPanel")
        self._scale: tuple[int, ...] = default_scale()
        self._seq_len = 1024
        self._errors: dict[str, QLabel] = {}
        self._edit_errors: set[str] = set()  # fields showing a refused typed value
        self._last_valid: AttentionConfig | None = None
        self._available: tuple[str, ...] = (NAIVE, TILED)
        self._unavailable_reasons: dict[str, str] = {}
        self._recorded_path = ""
        self._device_memory: int | None = None
        self._device_label = "this device"
        self._device_gpu: GpuSpec | None = None
        self._building = True

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(6)
        layout.addWidget(self._build_seq_group())
        layout.addWidget(self._build_shape_group())
        layout.addWidget(self._build_algorithm_group())
        layout.addWidget(self._build_device_group())
        layout.addStretch(1)
        self._building = False
        self._set_seq_len(self._seq_len, emit=False)
        self._update_budget_widgets()
        self._last_valid = self.config()

    # ------------------------------------------------------------------ construction

    def _error_label(self, field: str) -> QLabel:
        label = QLabel()
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
        self.seq_value = QLabel()
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
        self.seq_lo = QLabel()
        self.seq_hi = QLabel()
        for lab in (self.seq_lo, self.seq_hi):
            lab.setProperty("role", "hint")
        ends.addWidget(self.seq_lo)
        ends.addStretch(1)
        ends.addWidget(self.seq_hi)
        v.addLayout(ends)
        v.addWidget(self._error_label("seq_len"))
        self._apply_scale()
        return box

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
            s.setToolTip(tip)
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
            c.setToolTip(tip)
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
        tiles.addWidget(QLabel("Br"))
        tiles.addWidget(self.block_m, 1)
        tiles.addWidget(QLabel("Bc"))
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
            check.setToolTip(info.description)
            check.toggled.connect(self._emit_algorithms)
            self.algo_checks[algo] = check
            v.addWidget(check)
        v.addWidget(self._error_label("algorithms"))
        self._update_algorithm_availability()
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
        self.custom_gb.setRange(0.1, 4096.0)
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
        self._refresh_budget_labels()
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

    # ------------------------------------------------------------------ sequence length

    def _apply_scale(self) -> None:
        self.slider.blockSignals(True)
        self.slider.setRange(0, len(self._scale) - 1)
        self.slider.setSingleStep(1)
        self.slider.setPageStep(4 if not self.seq_spin.snap else 1)
        self.slider.setTickInterval(4 if not self.seq_spin.snap else 1)
        self.slider.blockSignals(False)
        self.seq_spin.scale = self._scale
        self.seq_spin.blockSignals(True)
        if self.seq_spin.snap:
            self.seq_spin.setRange(self._scale[0], self._scale[-1])
        else:
            self.seq_spin.setRange(SEQ_MIN, SEQ_MAX)
        self.seq_spin.blockSignals(False)
        self.seq_lo.setText(_short_n(self._scale[0]))
        self.seq_hi.setText(_short_n(self._scale[-1]))

    def set_seq_scale(self, values: tuple[int, ...] | None) -> None:
        """Snap N to `values` (a recorded run's N), or back to the log scale with None."""
        if values:
            self._scale = tuple(sorted(set(values)))
            self.seq_spin.snap = True
        else:
            self._scale = default_scale()
            self.seq_spin.snap = False
        self._apply_scale()
        self._set_seq_len(self._seq_len, emit=True)

    @property
    def seq_scale(self) -> tuple[int, ...]:
        return self._scale

    def seq_len(self) -> int:
        return self._seq_len

    def set_seq_len(self, n: int) -> None:
        self._set_seq_len(n, emit=True)

    def step_seq(self, steps: int) -> None:
        """Move N along the scale by `steps` positions (the ←/→ shortcuts)."""
        self.seq_spin.stepBy(steps)

    def _on_slider(self, pos: int) -> None:
        self._set_seq_len(self._scale[pos], emit=True)

    def _on_spin(self, n: int) -> None:
        self._set_seq_len(n, emit=True)

    def _set_seq_len(self, n: int, emit: bool) -> None:
        if self.seq_spin.snap or not SEQ_MIN <= n <= SEQ_MAX:
            n = self._scale[nearest_index(self._scale, n)]
        changed = n != self._seq_len
        self._seq_len = n
        for widget, value in (
            (self.slider, nearest_index(self._scale, n)),
            (self.seq_spin, n),
        ):
            if widget.value() != value:
                widget.blockSignals(True)
                widget.setValue(value)
                widget.blockSignals(False)
        self.seq_value.setText(f"N = {fmt_int(n)}")
        if emit and changed:
            self._emit_config()

    # ------------------------------------------------------------------ config

    def config(self) -> AttentionConfig:
        """The current config; raises ConfigError for a value the engine refuses."""
        return AttentionConfig(
            seq_len=self._seq_len,
            heads=self.heads.value(),
            head_dim=self.head_dim.value(),
            batch=self.batch.value(),
            dtype=self.dtype.currentData(),
            causal=self.causal.isChecked(),
            block_m=self.block_m.currentData(),
            block_n=self.block_n.currentData(),
        )

    @property
    def last_valid_config(self) -> AttentionConfig:
        assert self._last_valid is not None
        return self._last_valid

    def set_config(self, config: AttentionConfig) -> None:
        """Show `config` in the widgets (one configChanged at the end)."""
        self._building = True
        try:
            self.heads.setValue(config.heads)
            self.head_dim.setValue(config.head_dim)
            self.batch.setValue(config.batch)
            self.dtype.setCurrentIndex(max(0, self.dtype.findData(config.dtype)))
            self.causal.setChecked(config.causal)
            for combo, value in ((self.block_m, config.block_m), (self.block_n, config.block_n)):
                i = combo.findData(value)
                if i >= 0:
                    combo.setCurrentIndex(i)
            self._set_seq_len(config.seq_len, emit=False)
        finally:
            self._building = False
        self._emit_config()

    def _emit_config(self, *_: object) -> None:
        if self._building:
            return
        try:
            config = self.config()
        except ConfigError as exc:
            self.show_error(exc.field, str(exc))
            return
        for field in (
            "seq_len",
            "heads",
            "head_dim",
            "batch",
            "dtype",
            "causal",
            "block_m",
            "block_n",
        ):
            self.clear_error(field)
            self._edit_errors.discard(field)
        self._last_valid = config
        self.configChanged.emit(config)

    def show_error(self, field: str, message: str) -> None:
        """Show `message` next to `field` (a ConfigError's field); unknown fields go to N's."""
        label = self._errors.get(field) or self._errors.get(_FIELD_ALIASES.get(field, ""))
        if label is None:
            label = self._errors["seq_len"]
        label.setText(message)
        label.setToolTip(message)
        label.setVisible(True)

    def clear_error(self, field: str) -> None:
        label = self._errors.get(field)
        if label is not None and label.isVisible():
            label.setVisible(False)
            label.clear()

    def error_text(self, field: str) -> str:
        label = self._errors.get(field)
        return label.text() if label is not None and label.isVisible() else ""

    # ------------------------------------------------------------------ algorithms

    def set_available_algorithms(
        self, algorithms: tuple[str, ...], reasons: dict[str, str] | None = None
    ) -> None:
        """Enable these algorithms; `reasons` says why others are off (a kernel that failed to
        compile this session, say) in their tooltips."""
        self._available = tuple(algorithms)
        self._unavailable_reasons = dict(reasons or {})
        self._update_algorithm_availability()
        self._emit_algorithms()

    def _update_algorithm_availability(self) -> None:
        reasons = self._unavailable_reasons
        for algo, check in self.algo_checks.items():
            ok = algo in self._available
            check.setEnabled(ok)
            tip = ALGORITHMS[algo].description
            if not ok:
                why = reasons.get(algo)
                tip += (
                    f"\n\nUnavailable this session: {why}"
                    if why
                    else "\n\nNot available on the current backend."
                )
            check.setToolTip(tip)

    def algorithms(self) -> tuple[str, ...]:
        """Checked and available on the backend, in a fixed order."""
        return tuple(
            a for a in ALGORITHM_ORDER if self.algo_checks[a].isChecked() and a in self._available
        )

    def checked_algorithms(self) -> tuple[str, ...]:
        return tuple(a for a in ALGORITHM_ORDER if self.algo_checks[a].isChecked())

    def set_checked_algorithms(self, algorithms: tuple[str, ...]) -> None:
        for algo, check in self.algo_checks.items():
            check.blockSignals(True)
            check.setChecked(algo in algorithms)
            check.blockSignals(False)
        self._emit_algorithms()

    def _emit_algorithms(self, *_: object) -> None:
        if self._building:
            return
        algos = self.algorithms()
        if not algos:
            self.show_error("algorithms", "Pick at least one algorithm to measure.")
        else:
            self.clear_error("algorithms")
        self.algorithmsChanged.emit(algos)

    # ------------------------------------------------------------------ backend

    def backend_choice(self) -> str:
        return self.backend.currentData()

    def set_backend_choice(self, key: str, emit: bool = True) -> None:
        i = self.backend.findData(key)
        if i < 0:
            return
        self.backend.blockSignals(not emit)
        self.backend.setCurrentIndex(i)
        self.backend.blockSignals(False)

    @property
    def recorded_path(self) -> str:
        return self._recorded_path

    def set_recorded_path(self, path: str) -> None:
        self._recorded_path = path
        i = self.backend.findData("recorded")
        name = path.rsplit("/", 1)[-1] if path else ""
        self.backend.setItemText(i, f"recorded run: {name}" if name else "recorded run")

    def _on_backend(self, *_: object) -> None:
        self.clear_error("backend")
        key = self.backend_choice()
        if key == "recorded" and not self._recorded_path:
            self.recordedRunWanted.emit()
            return
        self.backendChanged.emit(key)

    # ------------------------------------------------------------------ budget

    def set_device(self, memory_bytes: int | None, label: str, gpu: GpuSpec | None) -> None:
        """What "this device" means now: its memory, a label, its GPUS entry if known."""
        self._device_memory = memory_bytes
        self._device_label = label
        self._device_gpu = gpu
        self._refresh_budget_labels()
        self._on_budget()

    def _refresh_budget_labels(self) -> None:
        for i in range(self.budget.count()):
            key = self.budget.itemData(i)
            if key == DEVICE_PRESET:
                mem = f" ({fmt_bytes_short(self._device_memory)})" if self._device_memory else ""
                text = f"This device{mem}"
                tip = f"No emulated limit: {self._device_label}'s own memory."
            elif key == CUSTOM_PRESET:
                text, tip = "Custom…", "Type a budget in GB below."
            else:
                spec = GPUS[key]
                text = key
                tip = (
                    f"{spec.name}: {fmt_bytes_short(spec.memory_bytes)}, "
                    f"{spec.bandwidth_bytes_s / 1e12:.2f} TB/s, "
                    f"{spec.fp16_tensor_flops / 1e12:.0f} TFLOP/s fp16 dense ({spec.source})"
                )
            self.budget.setItemText(i, text)
            self.budget.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)

    def _update_budget_widgets(self) -> None:
        self.custom_gb.setEnabled(self.budget.currentData() == CUSTOM_PRESET)

    def _on_budget(self, *_: object) -> None:
        self._update_budget_widgets()
        if not self._building:
            self.budgetChanged.emit(self.budget_state())

    def budget_state(self) -> Budget:
        preset = self.budget.currentData()
        if preset == DEVICE_PRESET:
            return Budget(
                preset,
                None,
                self._device_memory,
                f"this device ({self._device_label})",
                self._device_gpu,
            )
        if preset == CUSTOM_PRESET:
            b = round(self.custom_gb.value() * 1e9)
            return Budget(preset, b, b, f"custom {fmt_bytes_short(b)}", self._device_gpu)
        spec = GPUS[preset]
        return Budget(preset, spec.memory_bytes, spec.memory_bytes, spec.name, spec)

    def set_budget_preset(self, preset: str) -> None:
        i = self.budget.findData(preset)
        if i >= 0:
            self.budget.setCurrentIndex(i)

    # ------------------------------------------------------------------ settings

    def save(self, s: QSettings) -> None:
        s.beginGroup("controls")
        s.setValue("seq_len", self._seq_len)
        s.setValue("heads", self.heads.value())
        s.setValue("head_dim", self.head_dim.value())
        s.setValue("batch", self.batch.value())
        s.setValue("dtype", self.dtype.currentData())
        s.setValue("causal", self.causal.isChecked())
        s.setValue("block_m", self.block_m.currentData())
        s.setValue("block_n", self.block_n.currentData())
        s.setValue("algorithms", ",".join(self.checked_algorithms()))
        s.setValue("backend", self.backend_choice())
        s.setValue("recorded_path", self._recorded_path)
        s.setValue("budget", self.budget.currentData())
        s.setValue("custom_gb", self.custom_gb.value())
        s.endGroup()

    def restore(self, s: QSettings) -> None:
        """Apply saved values, ignoring any that are missing or no longer valid."""
        s.beginGroup("controls")
        try:
            base = self.config()
            values = {}
            for field, kind in (
                ("seq_len", int),
                ("heads", int),
                ("head_dim", int),
                ("batch", int),
                ("dtype", str),
                ("block_m", int),
                ("block_n", int),
            ):
                raw = s.value(field)
                if raw is not None:
                    with contextlib.suppress(TypeError, ValueError):
                        values[field] = kind(raw)
            causal = s.value("causal")
            if causal is not None:
                values["causal"] = str(causal).lower() in ("true", "1")
            with contextlib.suppress(ConfigError):
                self.set_config(base.with_(**values))
            algos = s.value("algorithms")
            if isinstance(algos, str):
                self.set_checked_algorithms(tuple(a for a in algos.split(",") if a))
            preset = s.value("budget")
            custom = s.value("custom_gb")
            if custom is not None:
                with contextlib.suppress(TypeError, ValueError):
                    self.custom_gb.setValue(float(custom))
            if isinstance(preset, str):
                self.set_budget_preset(preset)
            backend = s.value("backend")
            path = s.value("recorded_path")
            if isinstance(path, str) and path:
                self.set_recorded_path(path)
            if isinstance(backend, str):
                self.set_backend_choice(backend, emit=False)
        finally:
            s.endGroup()

    def sizeHint(self):
        hint = super().sizeHint()
        hint.setWidth(max(hint.width(), 290))
        return hint


_FIELD_ALIASES = {"config": "seq_len", "algorithm": "algorithms"}


def _short_n(n: int) -> str:
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return str(n)
