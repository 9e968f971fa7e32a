"""What one attention run is: shape, precision, masking, tile sizes, which pass it times and
how the backward sums dQ; for the decode pass, how many new tokens meet a cache of how many KV
heads.

Every layer (cost model, schedule, backends, plots, animation) takes an `AttentionConfig`, so
validation happens once, here, and a bad value is reported with the field, the value and the
allowed range instead of surfacing later as a CUDA error or a wrong plot.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

#: Element size in bytes of each supported input dtype.
DTYPE_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2, "fp32": 4}

#: Bytes of one fp32 statistic (row max m, row sum l); always fp32, whatever the input dtype.
STAT_BYTES = 4

SEQ_LEN_MIN, SEQ_LEN_MAX = 1, 1 << 20
HEADS_MIN, HEADS_MAX = 1, 256
HEAD_DIM_MIN, HEAD_DIM_MAX = 1, 256
BATCH_MIN, BATCH_MAX = 1, 1024
#: Tile sizes are powers of two in this range (rows of Q for block_m, rows of K/V for block_n).
TILE_CHOICES: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
#: New tokens a decode step computes at once: 1 for plain generation, up to 8 for speculative
#: decoding's drafted tokens checked together.
NEW_TOKENS_MIN, NEW_TOKENS_MAX = 1, 8

#: Which pass a run times. "forward": inference, O from Q, K, V. "backward": dQ, dK, dV from dO,
#: after an untimed forward that saves what the backward needs (naive: P; fused: O and one
#: logsumexp per row). "step": a training step, forward then backward, each kernel timed.
#: "decode": inference after the prefill: `new_tokens` query rows per head against a KV cache of
#: `seq_len` tokens, `heads` query heads sharing `kv_heads` KV heads (MHA, GQA, MQA).
FORWARD, BACKWARD, STEP, DECODE = "forward", "backward", "step", "decode"
PASSES: tuple[str, ...] = (FORWARD, BACKWARD, STEP, DECODE)
#: The key the pass is written under in dicts and files (`pass` is a Python keyword, so the
#: dataclass field is `pass_`). Files written before the training step lack it: forward.
PASS_KEY = "pass"
#: The key of `AttentionConfig.deterministic` in dicts and files (absent in files written
#: before it: dQ by atomics).
DETERMINISTIC_KEY = "deterministic"
#: Decode's own fields, written to dicts and files only when they differ from their defaults,
#: so a config of the other passes reads and writes as it did before decode existed.
DECODE_FIELDS: dict[str, object] = {"kv_heads": None, "new_tokens": 1}


class ConfigError(ValueError):
    """A configuration value outside its allowed range; carries the field for the UI to mark."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field} = {value!r} is not allowed: {allowed}")


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, value, f"an integer from {lo} to {hi}")
    if not lo <= value <= hi:
        raise ConfigError(name, value, f"an integer from {lo} to {hi}")


@dataclass(frozen=True)
class AttentionConfig:
    """One attention problem: O = softmax(Q Kᵀ / √d [+ causal mask]) V for B·h heads of N×d."""

    seq_len: int = 1024
    heads: int = 12
    head_dim: int = 64
    batch: int = 1
    dtype: str = "fp16"
    causal: bool = False
    #: Query rows per tile (Br in the FlashAttention papers): one thread block's Q_i.
    block_m: int = 64
    #: Key/value rows per tile (Bc): the K_j, V_j streamed through shared memory.
    block_n: int = 64
    #: The pass a run times: one of PASSES (written as "pass" in dicts and files).
    pass_: str = FORWARD
    #: The backward sums dQ in a fixed order (bit-identical runs) instead of by atomics: the
    #: fused backward then runs a dQ pass (`flash_bwd_dq`) in place of its dQ conversion and
    #: does two more products per tile. A field of the config, not of the run options, because
    #: it changes what is computed (the kernels, their FLOPs, bytes and peak), so each result,
    #: recording and cost-model figure carries the mode that produced it. Only a pass with a
    #: backward has a dQ: a forward config must leave it False. Naive's backward has no
    #: atomics, so for naive both modes run the same kernels.
    deterministic: bool = False
    #: KV heads of the decode pass's cache: None for as many as `heads` (MHA); a divisor of
    #: `heads` shares each KV head among heads // kv_heads query heads (GQA; 1 is MQA). Query
    #: head h reads KV head h // (heads // kv_heads), the order of Llama's repeat_kv.
    kv_heads: int | None = None
    #: Query rows per head of a decode step (the tokens generated together), 1 to 8. Each
    #: attends to the whole cache of `seq_len` tokens, which already holds their own K and V.
    new_tokens: int = 1

    def __post_init__(self) -> None:
        _check_int("seq_len", self.seq_len, SEQ_LEN_MIN, SEQ_LEN_MAX)
        _check_int("heads", self.heads, HEADS_MIN, HEADS_MAX)
        _check_int("head_dim", self.head_dim, HEAD_DIM_MIN, HEAD_DIM_MAX)
        _check_int("batch", self.batch, BATCH_MIN, BATCH_MAX)
        if not isinstance(self.dtype, str) or self.dtype not in DTYPE_BYTES:
            raise ConfigError("dtype", self.dtype, "one of " + ", ".join(DTYPE_BYTES))
        if not isinstance(self.causal, bool):
            raise ConfigError("causal", self.causal, "true or false")
        for name in ("block_m", "block_n"):
            value = getattr(self, name)
            if type(value) is not int or value not in TILE_CHOICES:
                raise ConfigError(name, value, "one of " + ", ".join(map(str, TILE_CHOICES)))
        if not isinstance(self.pass_, str) or self.pass_ not in PASSES:
            raise ConfigError(PASS_KEY, self.pass_, "one of " + ", ".join(PASSES))
        if not isinstance(self.deterministic, bool):
            raise ConfigError(DETERMINISTIC_KEY, self.deterministic, "true or false")
        if self.deterministic and not self.has_backward:
            raise ConfigError(
                DETERMINISTIC_KEY,
                self.deterministic,
                f"false for the {PASS_LABELS[self.pass_]} pass (it has no dQ)",
            )
        self._check_decode_fields()

    def _check_decode_fields(self) -> None:
        """kv_heads and new_tokens: in range, kv_heads a divisor of heads, and both at their
        defaults outside the decode pass (whose kernels are the only ones that read them)."""
        kv = self.kv_heads
        if kv is not None:
            _check_int("kv_heads", kv, HEADS_MIN, HEADS_MAX)
            if self.heads % kv:
                divisors = ", ".join(
                    str(k) for k in range(1, self.heads + 1) if self.heads % k == 0
                )
                raise ConfigError("kv_heads", kv, f"a divisor of heads = {self.heads} ({divisors})")
        _check_int("new_tokens", self.new_tokens, NEW_TOKENS_MIN, NEW_TOKENS_MAX)
        if self.pass_ == DECODE:
            if self.causal:
                raise ConfigError(
                    "causal",
                    self.causal,
                    "false for the decode pass (each new token attends "
                    "to the whole cache, which holds the tokens before it)",
                )
            return
        if kv is not None and kv != self.heads:
            raise ConfigError(
                "kv_heads", kv, f"equal to heads = {self.heads} outside the decode pass"
            )
        if self.new_tokens != 1:
            raise ConfigError("new_tokens", self.new_tokens, "1 outside the decode pass")

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def bh(self) -> int:
        """Independent (batch, head) pairs: each is its own attention problem."""
        return self.batch * self.heads

    @property
    def scale(self) -> float:
        return self.head_dim**-0.5

    @property
    def kv_head_count(self) -> int:
        """KV heads of the cache: `kv_heads`, or `heads` when unset (MHA)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def group_size(self) -> int:
        """Query heads per KV head (G): 1 for MHA, heads for MQA."""
        return self.heads // self.kv_head_count

    @property
    def kv_bh(self) -> int:
        """Independent (batch, KV head) pairs: each KV head is read for its whole group."""
        return self.batch * self.kv_head_count

    @property
    def is_decode(self) -> bool:
        return self.pass_ == DECODE

    @property
    def query_rows(self) -> int:
        """Query rows per head: the new tokens of a decode step, else the sequence itself."""
        return self.new_tokens if self.pass_ == DECODE else self.seq_len

    @property
    def has_backward(self) -> bool:
        """True for the backward pass and the training step: gradients are computed."""
        return self.pass_ in (BACKWARD, STEP)

    @property
    def has_forward_timed(self) -> bool:
        """True when the forward kernels are among the timed ones (forward and step)."""
        return self.pass_ in (FORWARD, STEP)

    def forward(self) -> AttentionConfig:
        """The same problem as an inference forward pass (which has no dQ to sum); a decode
        config, inference already, is its own."""
        if self.pass_ in (FORWARD, DECODE):
            return self
        return replace(self, pass_=FORWARD, deterministic=False)

    def with_(self, **changes: Any) -> AttentionConfig:
        """A copy with some fields changed, validated like a new config."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields by name, the pass under "pass"; decode's own fields only where set."""
        data = asdict(self)
        data[PASS_KEY] = data.pop("pass_")
        for name, default in DECODE_FIELDS.items():
            if data[name] == default:
                del data[name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttentionConfig:
        """From a dict (a saved session, say); unknown keys are errors, missing ones default
        (a dict without "pass" is a forward pass, as every file written before it)."""
        if not isinstance(data, dict):
            raise ConfigError("config", data, "an object with the config's fields")
        known = {_key(f.name) for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                unknown[0], data[unknown[0]], "a known field: " + ", ".join(sorted(known))
            )
        values = dict(data)
        if PASS_KEY in values:
            values["pass_"] = values.pop(PASS_KEY)
        return cls(**values)

    def label(self) -> str:
        causal = ", causal" if self.causal else ""
        step = "" if self.pass_ == FORWARD else f", {PASS_LABELS[self.pass_]}"
        det = f", {DETERMINISTIC_LABEL}" if self.deterministic else ""
        if self.pass_ == DECODE:
            heads = f"h={self.heads}/{self.kv_head_count}"
            step += f" q={self.new_tokens}"
        else:
            heads = f"h={self.heads}"
        return (
            f"B={self.batch} {heads} N={self.seq_len} d={self.head_dim} "
            f"{self.dtype}{causal}{step}{det}"
        )


#: How the pass is named to a user (labels, legends, the Pass control).
PASS_LABELS: dict[str, str] = {
    FORWARD: "inference forward",
    BACKWARD: "backward",
    STEP: "training step",
    DECODE: "inference decode",
}
#: How the deterministic dQ mode is named to a user (labels, the control, explain).
DETERMINISTIC_LABEL = "deterministic dQ"


def _key(field_name: str) -> str:
    """A field's key in dicts and files."""
    return PASS_KEY if field_name == "pass_" else field_name


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
