"""Out-of-memory is the lesson, so it must be survivable every time: an OOM at any allocation of a
run (the inputs, O, S, P, the row statistics) is an `oom` result, and device memory goes back to
where it was, fifty times in a row."""

from __future__ import annotations

import pytest

from gpu.algorithms import NAIVE, TILED
from gpu.backends.backend import RunOptions
from gpu.config import AttentionConfig
from gpu.model import costmodel

pytestmark = pytest.mark.gpu

CONFIG = AttentionConfig(seq_len=2048, heads=4, head_dim=64, dtype="fp16")


def _budgets() -> list[tuple[str, str, int]]:
    """(algorithm, the allocation that fails, budget) for every allocation of a run."""
    mat = costmodel.matrix_bytes(CONFIG)  # Q, K, V, O: 1 MiB each here
    attn = costmodel.attention_matrix_bytes(CONFIG)  # S, P: 32 MiB each here
    stats = costmodel.stats_bytes(CONFIG) // 2
    return [
        (NAIVE, "input generation", mat // 2),
        (NAIVE, "inputs and their fp32 temporaries", 2 * mat + mat // 2),
        (NAIVE, "O", 3 * mat + mat // 2),
        (NAIVE, "S", 4 * mat + attn // 2),
        (NAIVE, "P", 4 * mat + attn + attn // 2),
        (TILED, "O", 3 * mat + mat // 2),
        (TILED, "m", 4 * mat + stats // 2),
        (TILED, "l", 4 * mat + stats + stats // 2),
    ]


@pytest.fixture(scope="module")
def backend():
    from gpu.backends.cuda_backend import CudaBackend

    return CudaBackend()


def test_fifty_forced_ooms_at_every_allocation_leak_nothing(backend):
    import cupy

    pool = cupy.get_default_memory_pool()
    cupy.cuda.get_current_stream().synchronize()
    pool.free_all_blocks()
    # One successful run first, so cuBLAS handles and compiled modules exist before we measure.
    assert not backend.run(CONFIG, NAIVE, RunOptions(warmup=0, repeats=1)).oom
    pool.free_all_blocks()
    used0 = pool.used_bytes()
    free0, total = cupy.cuda.runtime.memGetInfo()
    cases = _budgets()
    for i in range(50):
        algorithm, where, budget = cases[i % len(cases)]
        result = backend.run(
            CONFIG, algorithm, RunOptions(warmup=0, repeats=1, budget_bytes=budget)
        )
        assert result.oom, (i, algorithm, where, budget)
        assert "out of memory" in result.message
        assert pool.used_bytes() == used0, (i, where)
        assert pool.get_limit() == 0
    free1, _ = cupy.cuda.runtime.memGetInfo()
    assert abs(free1 - free0) <= 0.01 * total
    after = backend.run(CONFIG, TILED, RunOptions(warmup=0, repeats=1, check=True))
    assert not after.oom and after.agrees, after.message
