"""The naive backward pass on the GPU: four cuBLAS GEMMs and our softmax backward.

The naive forward keeps P (B·h·N² elements) in device memory for this pass. The backward then
materialises two more N×N matrices, dP and dS, really allocated:

    bwd_dV_gemm   dV = Pᵀ dO
    bwd_dP_gemm   dP = dO Vᵀ                      (N×N written)
    softmax_bwd   dS = P ∘ (dP − rowsum(P ∘ dP))  (gpu/kernels/softmax_bwd.cu; N×N written)
    bwd_dQ_gemm   dQ = dS K / √d
    bwd_dK_gemm   dK = dSᵀ Q / √d

cuBLAS is column-major, and a row-major matrix read column-major is its transpose, so each
product is issued as its transpose (the comments at each GEMM say which). Arrays are (B, h, ·, ·)
C-contiguous in the config's storage dtype. Importing this module needs CuPy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cupy
import numpy as np

from ..config import AttentionConfig, ceil_div
from ..launch.cuda_kernels import element_type, get_kernel
from .cublas_gemm import gemm

SOURCE = "softmax_bwd.cu"
#: Chunks of P and dP each thread keeps in registers between the row's dot product and dS.
CACHE_CHUNKS = 4
MAX_THREADS = 1024

#: Kernel names in a run's timings, in launch order.
KERNELS = ("bwd_dV_gemm", "bwd_dP_gemm", "softmax_bwd", "bwd_dQ_gemm", "bwd_dK_gemm")


def gemm_dv(p, do, dv, config: AttentionConfig) -> None:
    """dV = Pᵀ dO, issued as column-major dVᵀ = dOᵀ P: A = dO (read as dOᵀ, d×N), B = P's
    storage (read as Pᵀ) used transposed."""
    n, d = config.seq_len, config.head_dim
    gemm(False, d, n, n, 1.0, do, d, n * d, p, n, n * n, dv, d, n * d, config.bh,
         config.dtype, transb=True)  # fmt: skip


def gemm_dp(do, v, dp, config: AttentionConfig) -> None:
    """dP = dO Vᵀ, issued as column-major dPᵀ = V dOᵀ: A = V's storage (Vᵀ) used transposed,
    B = dO's storage (dOᵀ)."""
    n, d = config.seq_len, config.head_dim
    gemm(True, n, n, d, 1.0, v, d, n * d, do, d, n * d, dp, n, n * n, config.bh,
         config.dtype)  # fmt: skip


def gemm_dq(ds, k, dq, config: AttentionConfig) -> None:
    """dQ = dS K / √d, issued as column-major dQᵀ = Kᵀ dSᵀ (the forward's O = P V pattern)."""
    n, d = config.seq_len, config.head_dim
    gemm(False, d, n, n, config.scale, k, d, n * d, ds, n, n * n, dq, d, n * d, config.bh,
         config.dtype)  # fmt: skip


def gemm_dk(ds, q, dk, config: AttentionConfig) -> None:
    """dK = dSᵀ Q / √d, issued as column-major dKᵀ = Qᵀ dS: B = dS's storage used
    transposed."""
    n, d = config.seq_len, config.head_dim
    gemm(False, d, n, n, config.scale, q, d, n * d, ds, n, n * n, dk, d, n * d, config.bh,
         config.dtype, transb=True)  # fmt: skip


@dataclass(frozen=True)
class SoftmaxBwdPlan:
    """How softmax_bwd is launched: one block per row, VEC elements per access."""

    kernel_name: str
    vec: int
    threads: int
    grid: int


def softmax_bwd_plan(config: AttentionConfig) -> SoftmaxBwdPlan:
    n, eb = config.seq_len, config.elem_bytes
    vec = 16 // eb if n % (16 // eb) == 0 else 1
    chunks = n // vec
    threads = ceil_div(chunks, CACHE_CHUNKS)
    threads = min(MAX_THREADS, max(32, 1 << (threads - 1).bit_length()))
    rows = config.bh * n
    return SoftmaxBwdPlan(
        kernel_name=f"softmax_bwd_rows<{element_type(config.dtype)}, {vec}, {CACHE_CHUNKS}>",
        vec=vec,
        threads=threads,
        grid=min(rows, (1 << 31) - 1),
    )


def softmax_bwd_launcher(config: AttentionConfig) -> Callable[..., None]:
    """A function (p, dp, ds) -> None queuing dS = P ∘ (dP − rowsum(P ∘ dP)), compiled now."""
    plan = softmax_bwd_plan(config)
    kernel = get_kernel(SOURCE, plan.kernel_name)
    rows = np.int64(config.bh * config.seq_len)
    n = np.int32(config.seq_len)

    def launch(p: cupy.ndarray, dp: cupy.ndarray, ds: cupy.ndarray) -> None:
        kernel((plan.grid,), (plan.threads,), (p, dp, ds, rows, n))

    return launch


def backward_launches(
    config: AttentionConfig, a: dict[str, cupy.ndarray]
) -> list[tuple[str, Callable[[], None]]]:
    """The five kernels as (name, launch). `a` holds q, k, v, p (the forward's P) and do;
    dp, dq, dk, dv are allocated into it here, and ds too unless `a` already holds a dead
    N×N buffer under "ds" (the backend hands over the forward's S, whose memory a framework's
    allocator would reuse once P exists)."""
    shape = a["q"].shape
    dtype = a["q"].dtype
    nn = (config.batch, config.heads, config.seq_len, config.seq_len)
    a["dp"] = cupy.empty(nn, dtype=dtype)
    if "ds" not in a:
        a["ds"] = cupy.empty(nn, dtype=dtype)
    for name in ("dq", "dk", "dv"):
        a[name] = cupy.empty(shape, dtype=dtype)
    softmax_bwd = softmax_bwd_launcher(config)
    return [
        ("bwd_dV_gemm", lambda: gemm_dv(a["p"], a["do"], a["dv"], config)),
        ("bwd_dP_gemm", lambda: gemm_dp(a["do"], a["v"], a["dp"], config)),
        ("softmax_bwd", lambda: softmax_bwd(a["p"], a["dp"], a["ds"])),
        ("bwd_dQ_gemm", lambda: gemm_dq(a["ds"], a["k"], a["dq"], config)),
        ("bwd_dK_gemm", lambda: gemm_dk(a["ds"], a["q"], a["dk"], config)),
    ]


def naive_backward(q, k, v, p, do, config: AttentionConfig):
    """(dQ, dK, dV) from the forward's P (unmeasured; benchmarks time the kernels)."""
    a = {"q": q, "k": k, "v": v, "p": p, "do": do}
    for _, launch in backward_launches(config, a):
        launch()
    return a["dq"], a["dk"], a["dv"]
