"""What one attention run is: shape, precision, masking, tile sizes, which pass it times and
how the backward sums dQ.

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

#: Which pass a run times. "forward": inference, O from Q, K, V. "backward": dQ, dK, dV from dO,
#: after an untimed forward that saves what the backward needs (naive: P; fused: O and one
#: logsumexp per row). "step": a training step, forward then backward, each kernel timed.
FORWARD, BACKWARD, STEP = "forward", "backward", "step"
PASSES: tuple[str, ...] = (FORWARD, BACKWARD, STEP)
#: The key the pass is written under in dicts and files (`pass` is a Python keyword, so the
#: dataclass field is `pass_`). Files written before the training step lack it: forward.
PASS_KEY = "pass"
#: The key of `AttentionConfig.deterministic` in dicts and files (absent in files written
#: before it: dQ by atomics).
DETERMINISTIC_KEY = "deterministic"


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
        if self.deterministic and self.pass_ == FORWARD:
            raise ConfigError(
                DETERMINISTIC_KEY, self.deterministic, "false for the forward pass (it has no dQ)"
            )

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
    def has_backward(self) -> bool:
        """True for the backward pass and the training step: gradients are computed."""
        return self.pass_ != FORWARD

    @property
    def has_forward_timed(self) -> bool:
        """True when the forward kernels are among the timed ones (forward and step)."""
        return self.pass_ != BACKWARD

    def forward(self) -> AttentionConfig:
        """The same problem as an inference forward pass (which has no dQ to sum)."""
        return self if self.pass_ == FORWARD else replace(self, pass_=FORWARD, deterministic=False)

    def with_(self, **changes: Any) -> AttentionConfig:
        """A copy with some fields changed, validated like a new config."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields by name, the pass under "pass"."""
        data = asdict(self)
        data[PASS_KEY] = data.pop("pass_")
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
        return (
            f"B={self.batch} h={self.heads} N={self.seq_len} d={self.head_dim} "
            f"{self.dtype}{causal}{step}{det}"
        )


#: How the pass is named to a user (labels, legends, the Pass control).
PASS_LABELS: dict[str, str] = {
    FORWARD: "inference forward",
    BACKWARD: "backward",
    STEP: "training step",
}
#: How the deterministic dQ mode is named to a user (labels, the control, explain).
DETERMINISTIC_LABEL = "deterministic dQ"


def _key(field_name: str) -> str:
    """A field's key in dicts and files."""
    return PASS_KEY if field_name == "pass_" else field_name


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
