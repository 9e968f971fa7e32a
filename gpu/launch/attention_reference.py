"""The fp32 reference the fused kernels are checked against, on the GPU with CuPy.

Shared by the GPU tests (tests/flash_reference.py) and the device check scripts in bench/: fresh
unit-normal 16-bit inputs with their exact fp32 upcasts, attention in fp32 with the row
statistics m (row max of q·k/√d) and l (row sum of exp(q·k/√d − m)), and the comparison of a
kernel's NaN-poisoned outputs with it. CuPy is imported inside the functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import AttentionConfig

#: Max abs error of O allowed vs the fp32 reference with unit-normal inputs (outputs are O(1)).
TOLERANCE = {"fp16": 2e-3, "bf16": 1e-2}
#: Max abs error of m (natural-log units) and max relative error of l.
M_TOLERANCE = 1e-3
L_TOLERANCE = 1e-3


def bf16_bits(x32: Any) -> Any:
    """float32 -> bf16 bit patterns (uint16), round to nearest even."""
    import cupy as cp

    u = x32.view(cp.uint32)
    return ((u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16).astype(cp.uint16)


def from_bf16_bits(b: Any) -> Any:
    import cupy as cp

    return (b.astype(cp.uint32) << 16).view(cp.float32)


def random_inputs(config: AttentionConfig, seed: int) -> tuple[list[Any], list[Any]]:
    """Fresh unit-normal q, k, v in the config's dtype, and their exact float32 upcasts."""
    import cupy as cp

    rng = cp.random.default_rng(seed)
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    stored, upcast = [], []
    for _ in range(3):
        x = rng.standard_normal(shape, dtype=cp.float32)
        if config.dtype == "fp16":
            h = x.astype(cp.float16)
            stored.append(h)
            upcast.append(h.astype(cp.float32))
        else:
            b = bf16_bits(x)
            stored.append(b)
            upcast.append(from_bf16_bits(b))
    return stored, upcast


def fp32_reference(q: Any, k: Any, v: Any, causal: bool) -> tuple[Any, Any, Any]:
    """fp32 attention: O, row max m (natural units of scaled scores) and row sum l."""
    import cupy as cp

    n, d = q.shape[-2], q.shape[-1]
    s = cp.matmul(q, k.transpose(0, 1, 3, 2)) * cp.float32(d**-0.5)
    if causal:
        s = cp.where(cp.triu(cp.ones((n, n), dtype=bool), 1), cp.float32(-cp.inf), s)
    m = s.max(axis=-1)
    p = cp.exp(s - m[..., None])
    l = p.sum(axis=-1)
    return cp.matmul(p, v) / l[..., None], m, l


@dataclass(frozen=True)
class Check:
    """How far a kernel's outputs are from the reference, and whether that passes."""

    unwritten_o: int  # NaN elements left in the poisoned O
    unwritten_stats: int  # NaN elements left in m or l
    o_error: float  # max |O - O_ref|
    m_error: float  # max |m - m_ref|
    l_error: float  # max |l - l_ref| / l_ref
    o_tolerance: float

    @property
    def passed(self) -> bool:
        return (
            self.unwritten_o == 0
            and self.unwritten_stats == 0
            and self.o_error <= self.o_tolerance
            and self.m_error <= M_TOLERANCE
            and self.l_error <= L_TOLERANCE
        )

    def describe(self) -> str:
        return (
            f"unwritten O {self.unwritten_o}, m/l {self.unwritten_stats}; "
            f"max |O - O_ref| {self.o_error:.2e} (tol {self.o_tolerance:.0e}), "
            f"|m - m_ref| {self.m_error:.2e}, rel l {self.l_error:.2e}"
        )


def poisoned_outputs(config: AttentionConfig, like: Any) -> tuple[Any, Any, Any]:
    """O, m, l filled with NaN (in either 16-bit storage), so an unwritten element shows."""
    import cupy as cp

    o = cp.empty_like(like)
    o.fill(cp.nan if config.dtype == "fp16" else 0x7FC0)
    stats_shape = (config.batch, config.heads, config.seq_len)
    m = cp.full(stats_shape, cp.nan, dtype=cp.float32)
    l = cp.full(stats_shape, cp.nan, dtype=cp.float32)
    return o, m, l


def check_outputs(
    o: Any, m: Any, l: Any, config: AttentionConfig, upcast: list[Any], o_tolerance: float = 0.0
) -> Check:
    """Compare a kernel's O, m, l with the fp32 reference of the upcast inputs."""
    import cupy as cp

    out = o.astype(cp.float32) if config.dtype == "fp16" else from_bf16_bits(o)
    o_ref, m_ref, l_ref = fp32_reference(*upcast, config.causal)
    finite = ~cp.isnan(out)
    return Check(
        unwritten_o=int((~finite).sum()),
        unwritten_stats=int(cp.isnan(m).sum()) + int(cp.isnan(l).sum()),
        o_error=float(cp.abs(cp.where(finite, out, o_ref) - o_ref).max()),
        m_error=float(cp.nan_to_num(cp.abs(m - m_ref), nan=0.0).max()),
        l_error=float(cp.nan_to_num(cp.abs(l - l_ref) / l_ref, nan=0.0).max()),
        o_tolerance=o_tolerance or TOLERANCE[config.dtype],
    )
