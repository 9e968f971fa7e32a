"""Launch the tensor-core tiled attention kernel (gpu/kernels/flash_mma.cu) through CuPy.

The kernel is a C++ template (head dim, tile sizes, causal, dtype); each combination is compiled
once by NVRTC (gpu/flash_launch.py; CuPy caches the binary on disk too) and kept here. The
tile sizes come from `algorithms.mma_tile_shape`, the same function the cost model and the
schedule read, so the animation's tiles are the launch's tiles.

Inputs q, k, v and the output o are C-contiguous (B, h, N, d) device arrays of 16-bit storage:
`cupy.float16` for fp16; for bf16 any 2-byte dtype holding bf16 bit patterns (CuPy has no native
bfloat16, so `uint16` storage is the usual carrier). m and l are float32 (B, h, N) arrays the
kernel writes: m is the row max of the scaled scores q·k/√d in natural-log units and l the row
sum of exp(q·k/√d − m), so logsumexp = m + log(l).

CuPy is imported lazily: `supports` works on machines without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import flash_launch
from .algorithms import mma_tile_shape
from .config import AttentionConfig, ceil_div
from .cuda_kernels import device_limits

SOURCE = "flash_mma.cu"
#: NVRTC options. The device's own arch is added by CuPy (sm_90 on an H200); mma.sync, ldmatrix
#: and cp.async need sm_80 or newer. Fast math only affects 1/l and the exponentials, which use
#: ex2.approx explicitly anyway.
COMPILE_OPTIONS: tuple[str, ...] = ("-std=c++17", "--use_fast_math")
SUPPORTED_HEAD_DIMS = (64, 128)
SUPPORTED_DTYPES = ("fp16", "bf16")
MIN_COMPUTE_CAPABILITY = 80


@dataclass(frozen=True)
class MmaLaunch:
    """One kernel variant: tile sizes, warps, and the blocks per SM it is register-tuned for."""

    head_dim: int
    block_m: int
    block_n: int
    min_blocks: int

    @property
    def warps(self) -> int:
        return self.block_m // 16  # one warp owns 16 query rows

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def smem_bytes(self) -> int:
        """Q tile + two stages of K and V, 2-byte elements."""
        return (self.block_m + 4 * self.block_n) * self.head_dim * 2

    def template_name(self, causal: bool, bf16: bool) -> str:
        return (
            f"flash_mma_fwd<{self.head_dim}, {self.block_m}, {self.block_n}, {self.warps}, "
            f"{self.min_blocks}, {str(causal).lower()}, {str(bf16).lower()}>"
        )


def default_launch(head_dim: int) -> MmaLaunch:
    """The variant `flash_forward` uses for a head dim (tiles from `mma_tile_shape`)."""
    block_m, block_n = mma_tile_shape(head_dim)
    # The pipelined kernel keeps two S tiles, O and Q in registers: 255 at d=64 (128×128) and
    # 250-252 at d=128 (128×64), so one 8-warp block per SM (docs/KERNELS.md has the variants).
    return MmaLaunch(head_dim, block_m, block_n, 1)


def _check_launch(launch: MmaLaunch) -> None:
    if launch.block_m % 16 or launch.block_m > 256 or launch.block_n % 16:
        raise ValueError(f"bad tile shape {launch.block_m}×{launch.block_n}")


def supports(config: AttentionConfig) -> str | None:
    """None when the tensor-core kernel can run `config`, else the reason it cannot."""
    if config.dtype not in SUPPORTED_DTYPES:
        return f"tensor-core kernel supports fp16 and bf16, not {config.dtype}"
    if config.head_dim not in SUPPORTED_HEAD_DIMS:
        dims = " and ".join(map(str, SUPPORTED_HEAD_DIMS))
        return f"tensor-core kernel supports head_dim {dims}, not {config.head_dim}"
    limits = device_limits()
    if limits is not None:
        cc, smem_optin = limits
        if cc < MIN_COMPUTE_CAPABILITY:
            return f"tensor-core kernel needs compute capability 8.0 or newer (this GPU: {cc / 10})"
        need = default_launch(config.head_dim).smem_bytes
        if need > smem_optin:
            return (
                f"tensor-core kernel needs {need // 1024} KiB of shared memory per block, "
                f"this GPU allows {smem_optin // 1024} KiB"
            )
    return None


_kernels: dict[tuple, Any] = {}


def get_kernel(
    launch: MmaLaunch, causal: bool, bf16: bool, extra_options: tuple[str, ...] = ()
) -> Any:
    """The compiled `cupy.RawKernel` of one variant (compiled on first use, then cached).
    `extra_options` adds NVRTC options, e.g. the trace build's -DTILESCOPE_TRACE."""
    _check_launch(launch)
    options = (*COMPILE_OPTIONS, *extra_options)
    return flash_launch.compiled_variant(SOURCE, launch, causal, bf16, options, _kernels)


def kernel_resources(launch: MmaLaunch, causal: bool, bf16: bool) -> dict[str, int]:
    """Registers, local (spill) bytes and shared memory of a compiled variant, for the notes."""
    return flash_launch.kernel_resources(get_kernel(launch, causal, bf16), launch)


def prepare(
    config: AttentionConfig, launch: MmaLaunch | None = None, extra_options: tuple[str, ...] = ()
) -> flash_launch.Prepared:
    """The compiled kernel for `config` (default variant unless `launch` names one) with its
    grid: one block per 128 query rows of each (batch, head). Raises ValueError when the kernel
    cannot run `config` here."""
    reason = supports(config)
    if reason is not None:
        raise ValueError(reason)
    launch = launch or default_launch(config.head_dim)
    if launch.head_dim != config.head_dim:
        raise ValueError("launch head_dim does not match the config")
    kernel = get_kernel(launch, config.causal, config.dtype == "bf16", extra_options)
    grid = (ceil_div(config.seq_len, launch.block_m), config.bh)
    return flash_launch.Prepared(
        kernel, grid, launch.threads, launch.smem_bytes,
        flash_launch.standard_arguments(config), grid[0] * grid[1],
    )  # fmt: skip


def launch_forward(
    q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, config: AttentionConfig, launch: MmaLaunch
) -> None:
    """`flash_forward` with an explicit variant (the benchmark uses this to compare tiles)."""
    flash_launch.run(prepare(config, launch), q, k, v, o, m, l, config)


def flash_forward(q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, config: AttentionConfig) -> None:
    """O = softmax(Q Kᵀ/√d [causal]) V on tensor cores; also writes the row statistics m and l.

    Asynchronous like any CUDA launch: it is queued on CuPy's current stream.
    """
    flash_launch.run(prepare(config), q, k, v, o, m, l, config)
