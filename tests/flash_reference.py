"""What the fused-kernel tests share: the check that a kernel wrote every output (NaN-poisoned
first) within tolerance of the fp32 reference (gpu.launch.attention_reference), and the shape
check."""

from __future__ import annotations

from collections.abc import Callable

from gpu.config import AttentionConfig
from gpu.launch.attention_reference import check_outputs, poisoned_outputs, random_inputs


def assert_matches_reference(flash_forward: Callable, config: AttentionConfig, seed: int) -> None:
    """Run `flash_forward` on NaN-poisoned outputs and compare O, m and l with the reference."""
    import cupy as cp

    (q, k, v), upcast = random_inputs(config, seed)
    o, m, l = poisoned_outputs(config, q)
    flash_forward(q, k, v, o, m, l, config)
    cp.cuda.Device().synchronize()
    check = check_outputs(o, m, l, config, upcast)
    assert check.passed, check.describe()


def assert_rejects_a_wrong_shape(flash_forward: Callable) -> None:
    import cupy as cp
    import pytest

    config = AttentionConfig(seq_len=64, heads=2, head_dim=64)
    q = cp.zeros((1, 2, 64, 64), dtype=cp.float16)
    bad = cp.zeros((1, 2, 64, 32), dtype=cp.float16)
    stats = cp.zeros((1, 2, 64), dtype=cp.float32)
    with pytest.raises(ValueError, match="shape"):
        flash_forward(q, q, q, bad, stats, stats, config)
