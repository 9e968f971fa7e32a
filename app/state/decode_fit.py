"""What fits, as the window shows it: the model preset of the config's shape, its weights and
its KV cache in the storage types the user picked, within the memory the plots compare
against. The memory plot's wall, the explain pane's formula and the lesson's step all read
`shape_fit`, so the three cannot disagree.

The preset is the config's shape (query heads, KV heads, head dim: gpu.model.kv_fit's
presets); the Model control sets that shape. The KV cache's storage type is the what-fits
choice, not the run's dtype: the kernels measure the cache in the config's dtype, while an fp8
cache is a question of capacity only here.

Qt-free."""

from __future__ import annotations

from dataclasses import dataclass

from gpu.config import FORWARD, AttentionConfig
from gpu.model.kv_fit import DECODE_MODELS, DecodeModel, Fit, what_fits

#: The storage types the what-fits controls offer, for weights and for the cache.
WEIGHT_CHOICES: tuple[str, ...] = ("fp16", "fp8")
KV_CHOICES: tuple[str, ...] = ("fp16", "fp8")


def model_of_shape(config: AttentionConfig) -> DecodeModel | None:
    """The preset whose query heads, KV heads and head dim are the config's, if one is."""
    shape = (config.heads, config.kv_head_count, config.head_dim)
    return next(
        (m for m in DECODE_MODELS.values() if (m.heads, m.kv_heads, m.head_dim) == shape), None
    )


def preset_config(config: AttentionConfig, key: str) -> AttentionConfig:
    """`config` with the shape of preset `key` (its query heads, KV heads and head dim); the
    other fields stay. MHA is written without kv_heads, as every MHA config is."""
    m = DECODE_MODELS[key]
    kv = None if m.kv_heads == m.heads else m.kv_heads
    return config.with_(heads=m.heads, kv_heads=kv, head_dim=m.head_dim)


def prefill_of(config: AttentionConfig) -> AttentionConfig:
    """The prefill of a decode config's shape: a forward pass over its N tokens, for the memory
    plot's N² contrast and the Tiles tab's prefill lanes (the prefill kernels run one KV head
    per query head). A config of another pass is its own."""
    if not config.is_decode:
        return config
    return config.with_(pass_=FORWARD, kv_heads=None, new_tokens=1)


def shape_fit(
    config: AttentionConfig, budget_bytes: int | None, weights: str = "fp16", kv: str = "fp16"
) -> Fit | None:
    """What fits for the preset of `config`'s shape in `budget_bytes`; None without a preset
    of that shape or a known budget."""
    model = model_of_shape(config)
    if model is None or not budget_bytes:
        return None
    return what_fits(model, budget_bytes, weights, kv)


@dataclass(frozen=True)
class FitLines:
    """The memory plot's what-fits lines over `ns`: the preset's cache of all its layers, and
    that cache with the weights; the wall is the longest context of the config's batch."""

    fit: Fit
    ns: tuple[int, ...]
    cache: tuple[int, ...]
    total: tuple[int, ...]
    wall: int  # max context per sequence at the config's batch (0: the weights alone do not fit)


def fit_lines(
    config: AttentionConfig,
    ns: tuple[int, ...],
    budget_bytes: int | None,
    weights: str = "fp16",
    kv: str = "fp16",
) -> FitLines | None:
    """`shape_fit`'s lines over `ns` for the config's batch: L · 2 · B · H_kv · N · d · bytes
    of cache, and the weights on top."""
    fit = shape_fit(config, budget_bytes, weights, kv)
    if fit is None:
        return None
    cache = tuple(fit.cache_bytes(n, config.batch) for n in ns)
    total = tuple(c + fit.weight_bytes for c in cache)
    wall = fit.max_context(config.batch) if fit.weights_fit else 0
    return FitLines(fit, tuple(ns), cache, total, wall)
