"""cuBLAS's strided-batched GEMM, the one call naive attention's forward and backward GEMMs make.

Its own module so the CUDA backend (the forward's S = Q Kᵀ and O = P V) and the naive backward
(gpu/backends/naive_bwd.py: dV, dP, dQ, dK) both call it without importing each other.
"""

from __future__ import annotations

import cupy
import numpy as np

#: cudaDataType_t of each config dtype (library_types.h: CUDA_R_32F = 0, CUDA_R_16F = 2,
#: CUDA_R_16BF = 14).
_CUDA_DATA_TYPE = {"fp32": 0, "fp16": 2, "bf16": 14}


def gemm(
    transa: bool, m: int, n: int, k: int, alpha: float,
    a: cupy.ndarray, lda: int, stride_a: int,
    b: cupy.ndarray, ldb: int, stride_b: int,
    c: cupy.ndarray, ldc: int, stride_c: int,
    batch: int, dtype: str, transb: bool = False,
) -> None:  # fmt: skip
    """Column-major strided-batched C = alpha·op(A)·op(B) through cublasGemmStridedBatchedEx,
    fp32 accumulation (CUBLAS_COMPUTE_32F: tensor cores for fp16/bf16, exact SGEMM for fp32)."""
    from cupy_backends.cuda.libs import cublas

    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    alpha_host = np.array(alpha, dtype=np.float32)
    beta_host = np.array(0.0, dtype=np.float32)
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    t = _CUDA_DATA_TYPE[dtype]
    try:
        cublas.gemmStridedBatchedEx(
            handle,
            cublas.CUBLAS_OP_T if transa else cublas.CUBLAS_OP_N,
            cublas.CUBLAS_OP_T if transb else cublas.CUBLAS_OP_N,
            m, n, k,
            alpha_host.ctypes.data,
            a.data.ptr, t, lda, stride_a,
            b.data.ptr, t, ldb, stride_b,
            beta_host.ctypes.data,
            c.data.ptr, t, ldc, stride_c,
            batch,
            cublas.CUBLAS_COMPUTE_32F,
            cublas.CUBLAS_GEMM_DEFAULT,
        )  # fmt: skip
    finally:
        cublas.setPointerMode(handle, mode)
