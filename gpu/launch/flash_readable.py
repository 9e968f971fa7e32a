"""Launch the readable tiled kernel (gpu/kernels/flash_readable.cu) on CuPy arrays.

The kernel uses the config's own tile sizes (`block_m` query rows per block, `block_n` key rows
per step), so what it runs is exactly what the cost model and the schedule describe. Its shared
memory grows with the tiles and the head dim; a config whose tiles don't fit in the device's
opt-in shared memory is refused with a message that names the need and the limit.
"""

from __future__ import annotations

import numpy as np

from ..config import AttentionConfig, ceil_div
from .cuda_kernels import element_type, get_kernel, smem_optin_bytes
from .flash_launch import Prepared, run, set_max_dynamic_smem

SOURCE = "flash_readable.cu"
#: Threads per block; must equal NUM_THREADS in the .cu file.
NUM_THREADS = 256
#: The kernel pads the head dim with zeros to a multiple of this (its template parameter D).
HEAD_DIM_GRANULE = 32
#: CUDA's limit on gridDim.y; the kernel loops over (batch, head) pairs beyond it.
MAX_GRID_Y = 65535


def padded_head_dim(head_dim: int) -> int:
    return ceil_div(head_dim, HEAD_DIM_GRANULE) * HEAD_DIM_GRANULE


def tile_shape(config: AttentionConfig) -> tuple[int, int]:
    """(query rows per block, keys per step): the config's own `block_m` and `block_n`."""
    return config.block_m, config.block_n


def smem_bytes(config: AttentionConfig) -> int:
    """Dynamic shared memory of one block, the same sum as the carve-up in the kernel."""
    bm, bn = tile_shape(config)
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


def prepare(config: AttentionConfig, extra_options: tuple[str, ...] = ()) -> Prepared:
    """The compiled kernel for `config` with its grid: one block per `block_m` query rows of each
    (batch, head); the kernel loops over (batch, head) pairs beyond CUDA's gridDim.y limit.
    Raises ValueError when the tiles do not fit here."""
    reason = supports(config)
    if reason is not None:
        raise ValueError(reason)
    bm, bn = tile_shape(config)
    kernel = get_kernel(SOURCE, kernel_name(config), options=extra_options)
    shared = smem_bytes(config)
    set_max_dynamic_smem(kernel, shared)  # opt in beyond the default 48 KB
    grid = (ceil_div(config.seq_len, bm), min(config.bh, MAX_GRID_Y))
    scalars = (
        np.int32(config.bh), np.int32(config.seq_len), np.int32(config.head_dim),
        np.int32(bm), np.int32(bn), np.int32(1 if config.causal else 0),
        np.float32(config.scale),
    )  # fmt: skip

    def arguments(q, k, v, o, m, l) -> tuple:
        return (q, k, v, o, m, l, *scalars)

    return Prepared(kernel, grid, NUM_THREADS, shared, arguments, grid[0] * config.bh)


def flash_forward(q, k, v, o, m, l, config: AttentionConfig) -> None:
    """O = softmax(QKᵀ/√d) V into `o`, and the row statistics into `m`, `l` (fp32, (B, h, N)).

    q, k, v, o: CuPy arrays (B, h, N, d), C-contiguous, in the config's storage dtype (bf16 as
    uint16 bit patterns). The launch is asynchronous on the current stream.
    """
    run(prepare(config), q, k, v, o, m, l, config)
