"""What fits at inference: a model's weights plus its KV cache on a GPU (or a memory budget).

FlashAttention removed the N×N matrix; what limits context at inference is the KV cache. Every
layer keeps K and V of every token of every sequence:

    KV bytes per token = 2 · L · H_kv · d · kv_bytes           (K and V, all L layers)
    max tokens         = ⌊(budget − params · weight_bytes) / KV bytes per token⌋
    max context        = ⌊max tokens / batch⌋

Only weights and cache are counted: activations, the framework's workspace and fragmentation
come on top, so the figures are upper bounds. GQA and MQA shrink the cache by H_q / H_kv; fp8
halves it (and fp8 weights halve the weights).

The presets' parameter counts are derived from each model's published configuration (the
derivation is the function beside it, its result quoted in the preset's source); the figures
are worked out by hand in tests/test_kv_fit.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import HEADS_MAX

#: Bytes per value of weights and of the cache, by storage type.
STORAGE_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2, "fp8": 1}


@dataclass(frozen=True)
class DecodeModel:
    """A transformer's shape as decode sees it: layers, query and KV heads, head dim, weights."""

    key: str
    label: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    params: int
    source: str

    def kv_bytes_per_token(self, kv_dtype: str = "fp16") -> int:
        """K and V of one token in every layer: 2 · L · H_kv · d · bytes."""
        return 2 * self.layers * self.kv_heads * self.head_dim * STORAGE_BYTES[kv_dtype]

    def weight_bytes(self, weight_dtype: str = "fp16") -> int:
        return self.params * STORAGE_BYTES[weight_dtype]

    @property
    def attention(self) -> str:
        """'MHA 32/32', 'GQA 32/8' or 'MQA 71/1'."""
        kind = "MHA" if self.kv_heads == self.heads else "MQA" if self.kv_heads == 1 else "GQA"
        return f"{kind} {self.heads}/{self.kv_heads}"


def _llama_params(vocab: int, hidden: int, ffn: int, layers: int, kv_dim: int) -> int:
    """A Llama block's weights: Q and O (hidden²), K and V (hidden·kv_dim), a gated MLP
    (3·hidden·ffn), two RMSNorms (2·hidden); plus untied embedding and output head
    (2·vocab·hidden) and the final norm (hidden)."""
    block = 2 * hidden * hidden + 2 * hidden * kv_dim + 3 * hidden * ffn + 2 * hidden
    return layers * block + 2 * vocab * hidden + hidden


def _falcon_params(vocab: int, hidden: int, layers: int, head_dim: int) -> int:
    """A Falcon block (no biases, parallel attention and MLP): fused QKV hidden·(hidden +
    2·head_dim) for one KV head, dense hidden², MLP 2·hidden·4·hidden, one LayerNorm (weight
    and bias, 2·hidden); plus the tied embedding (vocab·hidden) and the final LayerNorm."""
    block = hidden * (hidden + 2 * head_dim) + hidden * hidden + 8 * hidden * hidden + 2 * hidden
    return layers * block + vocab * hidden + 2 * hidden


DECODE_MODELS: dict[str, DecodeModel] = {
    m.key: m
    for m in (
        DecodeModel(
            "llama-3-8b", "Llama-3-8B", 32, 32, 8, 128,
            _llama_params(vocab=128_256, hidden=4096, ffn=14_336, layers=32, kv_dim=8 * 128),
            "Llama 3 8B (Meta, 2024): 32 layers, 32 query heads over 8 KV heads of 128, "
            "hidden 4096, MLP 14336, vocabulary 128256: 8,030,261,248 parameters",
        ),
        DecodeModel(
            "llama-2-7b", "Llama-2-7B", 32, 32, 32, 128,
            _llama_params(vocab=32_000, hidden=4096, ffn=11_008, layers=32, kv_dim=4096),
            "Llama 2 7B (Touvron et al., 2023): 32 layers, 32 heads of 128 (MHA), hidden "
            "4096, MLP 11008, vocabulary 32000: 6,738,415,616 parameters",
        ),
        DecodeModel(
            "llama-3-70b", "Llama-3-70B", 80, 64, 8, 128,
            _llama_params(vocab=128_256, hidden=8192, ffn=28_672, layers=80, kv_dim=8 * 128),
            "Llama 3 70B (Meta, 2024): 80 layers, 64 query heads over 8 KV heads of 128, "
            "hidden 8192, MLP 28672, vocabulary 128256: 70,553,706,496 parameters",
        ),
        DecodeModel(
            "falcon-7b", "Falcon-7B", 32, 71, 1, 64,
            _falcon_params(vocab=65_024, hidden=4544, layers=32, head_dim=64),
            "Falcon 7B (TII, 2023): 32 layers, 71 query heads of 64 over one KV head (MQA), "
            "hidden 4544, vocabulary 65024, tied embeddings: 6,921,720,704 parameters",
        ),
    )
}  # fmt: skip
assert all(m.heads <= HEADS_MAX for m in DECODE_MODELS.values())


@dataclass(frozen=True)
class Fit:
    """How much context × batch a model's weights leave room for in `budget_bytes`."""

    model: DecodeModel
    budget_bytes: int
    weight_dtype: str
    kv_dtype: str

    @property
    def weight_bytes(self) -> int:
        return self.model.weight_bytes(self.weight_dtype)

    @property
    def kv_bytes_per_token(self) -> int:
        return self.model.kv_bytes_per_token(self.kv_dtype)

    @property
    def cache_budget_bytes(self) -> int:
        """What the weights leave for the cache (0 when they do not fit at all)."""
        return max(0, self.budget_bytes - self.weight_bytes)

    @property
    def weights_fit(self) -> bool:
        return self.weight_bytes <= self.budget_bytes

    @property
    def max_tokens(self) -> int:
        """Context × batch: the cached tokens of all sequences together."""
        return self.cache_budget_bytes // self.kv_bytes_per_token

    def max_context(self, batch: int = 1) -> int:
        """The longest context each of `batch` sequences can have."""
        return self.max_tokens // max(1, batch)

    def cache_bytes(self, context: int, batch: int = 1) -> int:
        return context * batch * self.kv_bytes_per_token

    def formula(self) -> str:
        """The formula with this fit's numbers, for the explain pane and the CLI."""
        m = self.model
        return (
            f"max context × batch = ⌊(budget − weights) / (2 · L · H_kv · d · bytes)⌋ "
            f"= ⌊({self.budget_bytes:,} − {self.weight_bytes:,}) / "
            f"(2 · {m.layers} · {m.kv_heads} · {m.head_dim} · "
            f"{STORAGE_BYTES[self.kv_dtype]})⌋ = {self.max_tokens:,} tokens"
        )


def what_fits(
    model: DecodeModel | str,
    budget_bytes: int,
    weight_dtype: str = "fp16",
    kv_dtype: str = "fp16",
) -> Fit:
    """`model`'s weights in `weight_dtype` and a cache in `kv_dtype` within `budget_bytes`."""
    if isinstance(model, str):
        if model not in DECODE_MODELS:
            raise KeyError(f"unknown model {model!r}: known are {', '.join(DECODE_MODELS)}")
        model = DECODE_MODELS[model]
    for name, dtype in (("weights", weight_dtype), ("KV cache", kv_dtype)):
        if dtype not in STORAGE_BYTES:
            raise ValueError(f"{name} dtype {dtype!r}: one of {', '.join(STORAGE_BYTES)}")
    if budget_bytes <= 0:
        raise ValueError(f"budget {budget_bytes} bytes: a positive number of bytes")
    return Fit(model, int(budget_bytes), weight_dtype, kv_dtype)
