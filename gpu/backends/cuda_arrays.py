"""Device arrays in the storage dtypes: fp32 <-> fp16/bf16, and seeded random inputs.

bf16 lives in uint16 arrays as raw bit patterns (CuPy has no bfloat16 dtype), converted by two
element-wise kernels compiled on first use.
"""

from __future__ import annotations

import functools

import cupy

from ..config import AttentionConfig


@functools.cache
def _bf16_kernels() -> tuple[cupy.ElementwiseKernel, cupy.ElementwiseKernel]:
    to_bf16 = cupy.ElementwiseKernel(
        "float32 x",
        "uint16 y",
        # round to nearest even on the 16 dropped bits (inputs here are finite)
        "unsigned int u = __float_as_uint(x);"
        "y = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);",
        "tilescope_f32_to_bf16",
    )
    from_bf16 = cupy.ElementwiseKernel(
        "uint16 x",
        "float32 y",
        "y = __uint_as_float(((unsigned int)x) << 16);",
        "tilescope_bf16_to_f32",
    )
    return to_bf16, from_bf16


def from_float32(x: cupy.ndarray, dtype: str) -> cupy.ndarray:
    """fp32 array -> storage array of config dtype `dtype`."""
    if dtype == "fp32":
        return x
    if dtype == "fp16":
        return x.astype(cupy.float16)
    return _bf16_kernels()[0](x)


def to_float32(x: cupy.ndarray, dtype: str) -> cupy.ndarray:
    """Storage array of config dtype `dtype` -> fp32 array (a new array)."""
    if dtype == "bf16":
        return _bf16_kernels()[1](x)
    return x.astype(cupy.float32)


def random_inputs(config: AttentionConfig, seed: int, count: int = 3) -> tuple[cupy.ndarray, ...]:
    """Q, K, V (and, with count=4, the upstream gradient dO) of shape (B, h, N, d): seeded
    standard-normal data (never zeros, which would make every row's softmax uniform and hide
    masking or rescaling bugs)."""
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    rng = cupy.random.RandomState(seed)
    out = []
    for _ in range(count):  # one fp32 temporary at a time
        out.append(from_float32(rng.standard_normal(shape, dtype=cupy.float32), config.dtype))
    return tuple(out)
