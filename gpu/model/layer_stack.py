"""Training memory of L attention layers: the saved activations stack up, layer after layer.

A training step runs every layer's forward before the first backward, so each layer keeps what
its backward will need until then: Q, K, V and O, plus P (B·h·N² elements) for naive attention,
or one fp32 logsumexp per row (B·h·N) for FlashAttention. At the last layer's backward all L
layers' saved activations are held, and that layer's backward buffers come on top:

    peak(L) = L · saved(one layer) + working(one layer's backward)

so naive's peak grows as L·B·h·N² and the wall comes L times sooner. Only attention's own
tensors are counted (no weights, optimizer state or MLP activations): the lesson's share of a
model, which a real model's total only adds to. `peak(1)` is gpu.model.backward_cost's step peak,
the figure a measured single-layer step is checked against.

Presets give a model's layer count and head shape: GPT-2 small (Radford et al., 2019: 12
layers, 12 heads of 64, context 1024) and a Llama-2-7B-like shape (Touvron et al., 2023: 32
layers, 32 heads of 128, context 4096).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import SEQ_LEN_MAX, SEQ_LEN_MIN, STEP, AttentionConfig
from .backward_cost import backward_working_bytes, saved_activation_bytes

LAYERS_MIN, LAYERS_MAX = 1, 1024


@dataclass(frozen=True)
class ModelPreset:
    """A model's attention shape: how many layers, heads and head dims, and its context."""

    key: str
    label: str
    layers: int
    heads: int
    head_dim: int
    seq_len: int
    source: str

    def config(self, base: AttentionConfig | None = None) -> AttentionConfig:
        """`base` (default: a training step in fp16) with this model's heads, head dim and N."""
        base = base or AttentionConfig(pass_=STEP)
        return base.with_(heads=self.heads, head_dim=self.head_dim, seq_len=self.seq_len)


PRESETS: dict[str, ModelPreset] = {
    p.key: p
    for p in (
        ModelPreset(
            "gpt2-small",
            "GPT-2 small-like",
            layers=12,
            heads=12,
            head_dim=64,
            seq_len=1024,
            source="GPT-2 small: 12 layers, 12 heads × 64 (Radford et al., 2019)",
        ),
        ModelPreset(
            "llama-7b",
            "Llama-7B-like",
            layers=32,
            heads=32,
            head_dim=128,
            seq_len=4096,
            source="Llama 2 7B: 32 layers, 32 heads × 128, context 4096 (Touvron et al., 2023)",
        ),
    )
}


def check_layers(layers: object) -> int:
    """`layers` if it is a whole number in range; ValueError naming the range otherwise."""
    if isinstance(layers, bool) or not isinstance(layers, int):
        raise ValueError(f"layers = {layers!r} is not allowed: an integer from 1 to {LAYERS_MAX}")
    if not LAYERS_MIN <= layers <= LAYERS_MAX:
        raise ValueError(f"layers = {layers!r} is not allowed: an integer from 1 to {LAYERS_MAX}")
    return layers


@dataclass(frozen=True)
class LayerStack:
    """The training memory of `layers` attention layers of `config`'s shape with `algorithm`."""

    config: AttentionConfig
    algorithm: str
    layers: int
    saved_per_layer: int
    working: int

    @property
    def saved_total(self) -> int:
        """Every layer's saved activations, all held at the first backward."""
        return self.layers * self.saved_per_layer

    @property
    def peak_bytes(self) -> int:
        return self.saved_total + self.working

    def fits(self, budget_bytes: int) -> bool:
        return self.peak_bytes <= budget_bytes


def layer_stack(config: AttentionConfig, algorithm: str, layers: int) -> LayerStack:
    check_layers(layers)
    return LayerStack(
        config,
        algorithm,
        layers,
        saved_activation_bytes(config, algorithm),
        backward_working_bytes(config, algorithm),
    )


def training_wall_seq_len(
    config: AttentionConfig, algorithm: str, layers: int, budget_bytes: int
) -> int | None:
    """The smallest N at which training `layers` layers no longer fits in `budget_bytes`
    (None: it fits at every N a config allows)."""
    check_layers(layers)

    def peak(n: int) -> int:
        return layer_stack(config.with_(seq_len=n), algorithm, layers).peak_bytes

    lo, hi = SEQ_LEN_MIN, SEQ_LEN_MAX
    if peak(hi) <= budget_bytes:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if peak(mid) > budget_bytes:
            hi = mid
        else:
            lo = mid + 1
    return lo
