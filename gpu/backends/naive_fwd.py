"""Naive attention's forward on the GPU: cuBLAS S = Q Kᵀ/√d, our softmax kernel S -> P, cuBLAS
O = P V, with S and P really allocated (B, h, N, N) buffers.

The softmax (gpu/kernels/softmax.cu) reads a row of S once when it fits in shared memory and
twice otherwise; `softmax_plan` says which, as the cost model does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cupy
import numpy as np

from ..algorithms import ALGORITHMS, NAIVE
from ..config import AttentionConfig, ceil_div
from ..launch.cuda_kernels import element_type, get_kernel, smem_optin_bytes
from ..model import costmodel
from .cublas_gemm import gemm

#: The one kernel of ours in naive's forward: the registry's source of naive.
SOFTMAX_SOURCE = ALGORITHMS[NAIVE].source
#: Static shared memory of the softmax kernels (their 32-float reduction scratch) plus slack.
SOFTMAX_STATIC_SMEM = costmodel.SOFTMAX_STATIC_SMEM
#: Chunks (16-byte or single elements) each softmax thread handles, at least.
SOFTMAX_CHUNKS_PER_THREAD = 4


def gemm_qk(q: cupy.ndarray, k: cupy.ndarray, s: cupy.ndarray, config: AttentionConfig) -> None:
    """S = Q Kᵀ / √d for every (batch, head), into `s`.

    cuBLAS is column-major, and a row-major matrix read column-major is its transpose. So the
    row-major S we want is the column-major Sᵀ = K Qᵀ: A = K (column-major d×N, i.e. Kᵀ) used
    transposed, times B = Q (column-major d×N, i.e. Qᵀ)."""
    n, d = config.seq_len, config.head_dim
    gemm(True, n, n, d, config.scale, k, d, n * d, q, d, n * d, s, n, n * n, config.bh,
         config.dtype)  # fmt: skip


def gemm_pv(p: cupy.ndarray, v: cupy.ndarray, o: cupy.ndarray, config: AttentionConfig) -> None:
    """O = P V. Row-major O is column-major Oᵀ = Vᵀ Pᵀ, with A = V (d×N column-major) and
    B = P (N×N column-major, i.e. Pᵀ)."""
    n, d = config.seq_len, config.head_dim
    gemm(False, d, n, n, 1.0, v, d, n * d, p, n, n * n, o, d, n * d, config.bh,
         config.dtype)  # fmt: skip


@dataclass(frozen=True)
class SoftmaxPlan:
    """How the softmax kernel is launched for a config, and whether it reads S once."""

    kernel_name: str
    vec: int
    threads: int
    grid: int
    shared_bytes: int
    single_read: bool


def softmax_plan(
    config: AttentionConfig, smem_limit: int | None = None, rows: int | None = None
) -> SoftmaxPlan:
    """One block per row. A row that fits in shared memory is read once (smem kernel); a longer
    one (fp16/bf16 N > ~116k, fp32 N > ~58k on Hopper) is read twice (two-pass kernel).
    `rows`: rows of N scores (default B·h·N; a decode step has B·h·q)."""
    n, eb = config.seq_len, config.elem_bytes
    limit = smem_optin_bytes() if smem_limit is None else smem_limit
    vec = 16 // eb if n % (16 // eb) == 0 else 1  # 16-byte accesses when rows stay aligned
    chunks = n // vec
    single = costmodel.softmax_reads_s_once(config, limit)
    if single:
        threads = ceil_div(chunks, SOFTMAX_CHUNKS_PER_THREAD)
        threads = min(1024, max(32, 1 << (threads - 1).bit_length()))
    else:
        threads = 1024
    rows = config.bh * n if rows is None else rows
    name = "softmax_rows_smem" if single else "softmax_rows_twopass"
    return SoftmaxPlan(
        kernel_name=f"{name}<{element_type(config.dtype)}, {vec}>",
        vec=vec,
        threads=threads,
        grid=min(rows, (1 << 31) - 1),
        shared_bytes=costmodel.softmax_row_smem_bytes(config, limit),
        single_read=single,
    )


def softmax_launcher(
    config: AttentionConfig, smem_limit: int | None = None, rows: int | None = None
) -> Callable[[cupy.ndarray, cupy.ndarray], None]:
    """A function p <- softmax(s) for this config, with its kernel compiled and set up now.
    `smem_limit` overrides the device's limit (tests use it to force the two-pass kernel);
    `rows` as in `softmax_plan`."""
    plan = softmax_plan(config, smem_limit, rows)
    kernel = get_kernel(SOFTMAX_SOURCE, plan.kernel_name)
    if plan.shared_bytes and kernel.max_dynamic_shared_size_bytes < plan.shared_bytes:
        kernel.max_dynamic_shared_size_bytes = plan.shared_bytes
    rows = np.int64(config.bh * config.seq_len if rows is None else rows)
    n = np.int32(config.seq_len)
    causal = np.int32(1 if config.causal else 0)

    def launch(s: cupy.ndarray, p: cupy.ndarray) -> None:
        kernel((plan.grid,), (plan.threads,), (s, p, rows, n, causal), shared_mem=plan.shared_bytes)

    return launch


def naive_forward(
    q, k, v, s, p, o, config: AttentionConfig, launch_softmax: Callable | None = None
) -> None:
    """The three naive kernels, unmeasured (benchmarks time the whole sequence). Pass a
    `softmax_launcher(config)` made once to keep its set-up out of a timed loop."""
    launch_softmax = launch_softmax or softmax_launcher(config)
    gemm_qk(q, k, s, config)
    launch_softmax(s, p)
    gemm_pv(p, v, o, config)
