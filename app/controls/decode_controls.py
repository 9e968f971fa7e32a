"""The decode pass's own rows of the Pass group: KV heads H_kv and new tokens q (fields of the
config), and what fits: the model preset (it sets the shape), the storage types of its weights
and of its KV cache. Shown only while the pass is decode; built once, their values written to
and read from the controls panel that owns them."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QFormLayout, QHBoxLayout, QLabel, QWidget

from gpu.config import HEADS_MAX, HEADS_MIN, NEW_TOKENS_MAX, NEW_TOKENS_MIN, AttentionConfig
from gpu.model.kv_fit import DECODE_MODELS

from ..kit.plain_text import PlainLabel, tooltip
from ..state.decode_fit import KV_CHOICES, WEIGHT_CHOICES, model_of_shape
from .spin_boxes import ValidatedSpinBox

#: The Model control's entry for a shape no preset has.
NO_PRESET = ""

KV_HEADS_TIP = (
    "KV heads H_kv of the cache: as many as the query heads for MHA, fewer for GQA (each KV "
    "head shared by a group of H_q / H_kv query heads), 1 for MQA. It must divide the heads "
    "h. The cache, and what each generated token reads, shrinks by H_q / H_kv."
)
NEW_TOKENS_TIP = (
    "New tokens q per head in one decode step (1 to 8): 1 for plain generation, more for "
    "speculative decoding's drafted tokens checked together. Each reads the whole cache once, "
    "so q tokens cost about the time of one: the FLOPs per byte grow q times."
)
MODEL_TIP = (
    "A model whose attention has this shape, for what fits: picking one sets the heads, KV "
    "heads and head dim. The memory plot's wall is the longest context its weights leave room "
    "for in the memory budget (Device ▸ Memory), the explain pane has the formula."
)
FIT_TIP = (
    "Storage of the model's weights and of its KV cache for what fits: 1 byte a value in fp8, "
    "2 in fp16. The runs measure the cache in the Dtype below; this asks only what fits."
)


def _combo(name: str, items: tuple[tuple[str, str], ...], tip: str) -> QComboBox:
    combo = QComboBox()
    combo.setObjectName(name)
    for key, text in items:
        combo.addItem(text, key)
    combo.setToolTip(tooltip(tip))
    return combo


def _set_data(combo: QComboBox, key: object) -> None:
    """Put `combo` on the item of `key` without telling anyone."""
    i = combo.findData(key)
    if i >= 0 and combo.currentIndex() != i:
        combo.blockSignals(True)
        combo.setCurrentIndex(i)
        combo.blockSignals(False)


class DecodeRows:
    """The decode rows of the Pass group's `form` (see the module docstring). `error_label`
    makes a field's inline error label; `config_changed` is called when H_kv or q changes,
    `preset_chosen(key)` when a model is picked, `fit_changed(weights, kv)` when a storage
    type is."""

    def __init__(
        self,
        form: QFormLayout,
        error_label: Callable[[str], QLabel],
        config_changed: Callable[[], None],
        preset_chosen: Callable[[str], None],
        fit_changed: Callable[[str, str], None],
    ) -> None:
        self._form = form
        self.kv_heads = ValidatedSpinBox()
        self.kv_heads.setObjectName("kvHeadsSpin")
        self.kv_heads.setRange(HEADS_MIN, HEADS_MAX)
        self.kv_heads.setValue(12)
        self.kv_heads.setKeyboardTracking(False)
        self.kv_heads.setToolTip(tooltip(KV_HEADS_TIP))
        self.kv_heads.valueChanged.connect(lambda _v: config_changed())
        self.new_tokens = ValidatedSpinBox()
        self.new_tokens.setObjectName("newTokensSpin")
        self.new_tokens.setRange(NEW_TOKENS_MIN, NEW_TOKENS_MAX)
        self.new_tokens.setValue(1)
        self.new_tokens.setKeyboardTracking(False)
        self.new_tokens.setToolTip(tooltip(NEW_TOKENS_TIP))
        self.new_tokens.valueChanged.connect(lambda _v: config_changed())
        presets = tuple((m.key, m.label) for m in DECODE_MODELS.values())
        self.model = _combo("modelCombo", ((NO_PRESET, "none of this shape"), *presets), MODEL_TIP)
        for i, m in enumerate(DECODE_MODELS.values(), start=1):
            self.model.setItemData(
                i,
                f"{m.label}: {m.attention}, d = {m.head_dim}, {m.layers} layers ({m.source})",
                Qt.ItemDataRole.ToolTipRole,
            )
        self.model.currentIndexChanged.connect(
            lambda _i: self.model.currentData() and preset_chosen(self.model.currentData())
        )
        self.weights = _combo("fitWeightsCombo", tuple((d, d) for d in WEIGHT_CHOICES), FIT_TIP)
        self.kv = _combo("fitKvCombo", tuple((d, d) for d in KV_CHOICES), FIT_TIP)
        for combo in (self.weights, self.kv):
            combo.currentIndexChanged.connect(
                lambda _i: fit_changed(self.weights.currentData(), self.kv.currentData())
            )
        storage = QWidget()
        row = QHBoxLayout(storage)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.weights, 1)
        row.addWidget(PlainLabel("KV"))
        row.addWidget(self.kv, 1)
        storage.setToolTip(tooltip(FIT_TIP))
        self._rows: list[QWidget] = []
        self._errors: list[QLabel] = []
        for label, widget, field in (
            ("KV heads", self.kv_heads, "kv_heads"),
            ("New tokens q", self.new_tokens, "new_tokens"),
            ("Model", self.model, "model"),
            ("Weights", storage, "fit"),
        ):
            form.addRow(label, widget)
            error = error_label(field)
            form.addRow("", error)
            self._rows.append(widget)
            self._errors.append(error)
        self.visible = True
        self.set_visible(False)

    def set_visible(self, visible: bool) -> None:
        """Show the rows for the decode pass, hide them for the others (their error labels
        with them: a hidden field's message would point at nothing)."""
        if visible == self.visible:
            return
        self.visible = visible
        for widget in self._rows:
            self._form.setRowVisible(widget, visible)
        if not visible:
            for error in self._errors:
                error.setVisible(False)

    def show_config(self, config: AttentionConfig) -> None:
        """Show `config`'s KV heads, new tokens and preset (outside decode: a KV head count
        that still divides the heads, so choosing decode starts from a valid shape)."""
        kv = config.kv_head_count
        if not config.is_decode:
            kv = self.kv_heads.value()
            kv = kv if config.heads % kv == 0 else config.heads
        for spin, value in ((self.kv_heads, kv), (self.new_tokens, config.new_tokens)):
            if spin.value() != value:
                spin.blockSignals(True)
                spin.setValue(value)
                spin.blockSignals(False)
        model = model_of_shape(config)
        _set_data(self.model, model.key if model is not None else NO_PRESET)
        self.set_visible(config.is_decode)

    def show_fit(self, weights: str, kv: str) -> None:
        _set_data(self.weights, weights)
        _set_data(self.kv, kv)

    def fields(self, decode: bool, heads: int) -> dict[str, object]:
        """The config fields these rows give: H_kv (None for as many as the heads) and q for
        the decode pass, the defaults for the others."""
        if not decode:
            return {"kv_heads": None, "new_tokens": 1}
        kv = self.kv_heads.value()
        return {"kv_heads": None if kv == heads else kv, "new_tokens": self.new_tokens.value()}
