"""The controls panel's groups, built once: backend, sequence length (slider and exact N), pass
and layers, shape and tiles, algorithms, and device (memory budget, devices), each field with
its inline error label. The groups hold their widgets; the panel that owns them wires their
signals."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QPushButton,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gpu.algorithms import ALGORITHMS
from gpu.config import (
    BATCH_MAX,
    BATCH_MIN,
    DETERMINISTIC_LABEL,
    DTYPE_BYTES,
    HEAD_DIM_MAX,
    HEAD_DIM_MIN,
    HEADS_MAX,
    HEADS_MIN,
    TILE_CHOICES,
)
from gpu.model.layer_stack import LAYERS_MAX, LAYERS_MIN

from ..kit.plain_text import PlainLabel, tooltip
from ..kit.state_signal import StateSignal
from ..state.budget import (
    BUDGET_PRESETS,
    CUSTOM_GB_RANGE,
)
from ..state.seq_scale import SEQ_MAX, SEQ_MIN
from .choices import ALGORITHM_ORDER, BACKEND_CHOICES, DETERMINISTIC_TIP, PASS_CHOICES
from .decode_controls import DecodeRows
from .devices import DevicesControl
from .field_errors import FieldErrors
from .spin_boxes import SeqLenSpinBox, ValidatedDoubleSpinBox, ValidatedSpinBox


def _choice_combo(object_name: str, choices: tuple[tuple[str, str, str], ...]) -> QComboBox:
    """A combo box of (key, text, tooltip) choices: the key is each item's data."""
    combo = QComboBox()
    combo.setObjectName(object_name)
    for key, text, tip in choices:
        combo.addItem(text, key)
        combo.setItemData(combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
    return combo


class ControlGroups:
    """The group boxes of the controls panel, top to bottom in `boxes`, and their widgets
    (module docstring). `errors` makes each field's error label; the decode rows call
    `config_changed`, `preset_chosen(key)` and `fit_changed(weights, kv)` (DecodeRows)."""

    def __init__(
        self,
        state: StateSignal,
        errors: FieldErrors,
        config_changed: Callable[[], None],
        preset_chosen: Callable[[str], None],
        fit_changed: Callable[[str, str], None],
    ) -> None:
        self.state = state
        self.errors = errors
        self._decode_callbacks = (config_changed, preset_chosen, fit_changed)
        self.boxes = (
            self._build_backend_group(),
            self._build_seq_group(),
            self._build_pass_group(),
            self._build_shape_group(),
            self._build_algorithm_group(),
            self._build_device_group(),
        )

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
        row.addWidget(self.seq_spin)
        v.addLayout(row)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setObjectName("seqLenSlider")
        self.slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        self.slider.setToolTip(
            "Drag to change N on a log scale (four steps per doubling). Model curves follow "
            "instantly; measurements run in the background, newest first. ←/→ step N."
        )
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
        v.addWidget(self.errors.label("seq_len"))
        return box

    def _build_pass_group(self) -> QGroupBox:
        box = QGroupBox("Pass")
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.pass_combo = _choice_combo("passCombo", PASS_CHOICES)
        self.pass_combo.setToolTip(
            "What is run and timed: inference (the forward pass, or a decode step against a KV "
            "cache) or a training step (forward and backward). The plots, the explain pane and "
            "the tiles follow."
        )
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
        self.deterministic = QCheckBox(DETERMINISTIC_LABEL)
        self.deterministic.setObjectName("deterministicCheck")
        self.deterministic.setToolTip(tooltip(DETERMINISTIC_TIP))
        form.addRow("Pass", self.pass_combo)
        form.addRow("", self.errors.label("pass"))
        self.decode_rows = DecodeRows(form, self.errors.label, *self._decode_callbacks)
        form.addRow("", self.deterministic)
        form.addRow("", self.errors.label("deterministic"))
        form.addRow("Layers L", self.layers)
        form.addRow("", self.errors.label("layers"))
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
            s.setToolTip(tooltip(tip))
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
        self.causal = QCheckBox("causal mask")
        self.causal.setObjectName("causalCheck")
        self.causal.setToolTip(
            "Mask future keys: half the useful FLOPs. Naive still computes and stores all of S; "
            "the tiled kernel skips key tiles above the diagonal."
        )

        def tile_combo(name: str, tip: str) -> QComboBox:
            c = QComboBox()
            c.setObjectName(name)
            for t in TILE_CHOICES:
                c.addItem(str(t), t)
            c.setCurrentIndex(TILE_CHOICES.index(64))
            c.setToolTip(tooltip(tip))
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
        for label, widget, field in (
            ("Heads h", self.heads, "heads"),
            ("Head dim d", self.head_dim, "head_dim"),
            ("Batch B", self.batch, "batch"),
            ("Dtype", self.dtype, "dtype"),
            ("", self.causal, "causal"),
        ):
            form.addRow(label, widget)
            form.addRow("", self.errors.label(field))
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
        form.addRow("", self.errors.label("block_m"))
        form.addRow("", self.errors.label("block_n"))
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
            self.algo_checks[algo] = check
            v.addWidget(check)
        v.addWidget(self.errors.label("algorithms"))
        return box

    def _build_backend_group(self) -> QGroupBox:
        """Where the results come from, first in the panel: a recorded GPU run or a live
        backend is the first choice a newcomer makes."""
        box = QGroupBox("Backend")
        box.setObjectName("backendGroup")
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.backend = _choice_combo("backendCombo", BACKEND_CHOICES)
        self.backend.setToolTip(
            "Where runs happen. auto: CUDA when a GPU is present, else NumPy. recorded run: "
            "results measured on a GPU, replayed from a file (File ▸ Open…)."
        )
        form.addRow(self.backend)  # the group's title names it
        form.addRow(self.errors.label("backend"))
        # While a recording is replayed: measuring on this machine, one click away (the
        # window says where and shows it).
        self.measure_here = QPushButton("Measure on this CPU")
        self.measure_here.setObjectName("measureHereButton")
        self.measure_here.setVisible(False)
        form.addRow(self.measure_here)
        return box

    def _build_device_group(self) -> QGroupBox:
        box = QGroupBox("Device")
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
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
        self.custom_gb = ValidatedDoubleSpinBox()
        self.custom_gb.setObjectName("customBudgetSpin")
        self.custom_gb.setRange(*CUSTOM_GB_RANGE)
        self.custom_gb.setDecimals(1)
        self.custom_gb.setValue(16.0)
        self.custom_gb.setSuffix(" GB")
        self.custom_gb.setKeyboardTracking(False)
        self.custom_gb.setToolTip("A custom memory budget in GB (10⁹ bytes).")
        form.addRow("Memory", self.budget)
        form.addRow("Custom", self.custom_gb)
        form.addRow("", self.errors.label("budget"))
        self.measure_bytes = QCheckBox("Measure bytes (hardware counters)")
        self.measure_bytes.setObjectName("measureBytesCheck")
        form.addRow(self.measure_bytes)  # both columns: the panel stays narrow
        return box
