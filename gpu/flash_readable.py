"""Launch the readable tiled kernel (gpu/kernels/flash_readable.cu) on CuPy arrays.

The kernel uses the config's own tile sizes (`block_m` query rows per block, `block_n` key rows
per step), so what it runs is exactly what the cost model and the schedule describe. Its shared
memory grows with the tiles and the head dim; a config whose tiles don't fit in the device's
opt-in shared memory is refused with a message that names the need and the limit.
"""

from __future__ import annotations

import numpy as np

from .algorithms import TILED, tile_shape
from .config import AttentionConfig, ceil_div
from .cuda_kernels import element_type, get_kernel, smem_optin_bytes, storage_dtype

SOURCE = "flash_readable.cu"
#: Threads per block; must equal NUM_THREADS in the .cu file.
NUM_THREADS = 256
#: The kernel pads the head dim with zeros to a multiple of this (its template parameter D).
HEAD_DIM_GRANULE = 32
#: CUDA's limit on gridDim.y; the kernel loops over (batch, head) pairs beyond it.
MAX_GRID_Y = 65535


def padded_head_dim(head_dim: int) -> int:
    return ceil_div(head_dim, HEAD_DIM_GRANULE) * HEAD_DIM_GRANULE


def smem_bytes(config: AttentionConfig) -> int:
    """Dynamic shared memory of one block, the same sum as the carve-up in the kernel."""
    bm, bn = tile_shape(config, TILED)
    d = padded_head_dim(config.head_dim)
    floats = (
        bm * (d + 4)  # Q_i
        + 2 * bn * (d + 4)  # K_j, V_j
        + bm * (bn + 1)  # S_ij / P_ij
        + bm * d  # O_i accumulator
        + 3 * bm  # m_i, l_i, alpha_i
    )
    return 4 * floats


def supports(config: AttentionConfig) -> str | None:
    """None when the kernel can run `config` here, else the reason it cannot."""
    need = smem_bytes(config)
    try:
        limit = smem_optin_bytes()
    except Exception as exc:  # no device, no CuPy
        return f"no CUDA device to run the tiled kernel: {exc}"
    if need > limit:
        return (
            f"block_m={config.block_m}, block_n={config.block_n} with head_dim={config.head_dim} "
            f"need {need:,} bytes of shared memory per block, more than this GPU's opt-in limit "
            f"of {limit:,} bytes; choose smaller tiles"
        )
    return None


def kernel_name(config: AttentionConfig) -> str:
    return f"flash_fwd_readable<{element_type(config.dtype)}, {padded_head_dim(config.head_dim)}>"


def _check_array(name: str, array, shape: tuple[int, ...], dtype) -> None:
    if tuple(array.shape) != shape or array.dtype != np.dtype(dtype):
        raise ValueError(
            f"{name} must be {np.dtype(dtype).name} of shape {shape}, "
            f"got {array.dtype} of shape {tuple(array.shape)}"
        )
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")


def flash_forward(q, k, v, o, m, l, config: AttentionConfig) -> None:
    """O = softmax(QKᵀ/√d) V into `o`, and the row statistics into `m`, `l` (fp32, (B, h, N)).

    q, k, v, o: CuPy arrays (B, h, N, d), C-contiguous, in the config's storage dtype (bf16 as
    uint16 bit patterns). The launch is asynchronous on the current stream.
    """
    reason = supports(config)
    if reason is not None:
        raise ValueError(reason)
    b, h, n, d = config.batch, config.heads, config.seq_len, config.head_dim
    dtype = storage_dtype(config.dtype)
    for name, array in (("q", q), ("k", k), ("v", v), ("o", o)):
        _check_array(name, array, (b, h, n, d), dtype)
    for name, array in (("m", m), ("l", l)):
        _check_array(name, array, (b, h, n), np.float32)

    bm, bn = tile_shape(config, TILED)
    kernel = get_kernel(SOURCE, kernel_name(config))
    shared = smem_bytes(config)
    if kernel.max_dynamic_shared_size_bytes < shared:
        kernel.max_dynamic_shared_size_bytes = shared  # opt in beyond the default 48 KB
    grid = (ceil_div(n, bm), min(config.bh, MAX_GRID_Y))
    kernel(
        grid,
        (NUM_THREADS,),
        (
            q,
            k,
            v,
            o,
            m,
            l,
            np.int32(config.bh),
            np.int32(n),
            np.int32(d),
            np.int32(bm),
            np.int32(bn),
            np.int32(1 if config.causal else 0),
            np.float32(config.scale),
        ),
        shared_mem=shared,
    )
