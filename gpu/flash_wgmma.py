"""Launch the Hopper attention kernel (gpu/kernels/flash_wgmma.cu) through CuPy.

Same interface as `gpu.flash_mma`: `supports(config)` and `flash_forward(q, k, v, o, m, l, config)`
with C-contiguous (B, h, N, d) 16-bit arrays (`cupy.float16` for fp16, any 2-byte dtype holding
bf16 bit patterns for bf16) and float32 (B, h, N) row statistics m (row max of q·k/√d, natural
log units) and l (row sum of exp(q·k/√d − m)), so logsumexp = m + log(l).

The kernel uses `wgmma.mma_async`, which exists only on sm_90a (H100, H200): `supports` refuses
every other GPU, and machines without CUDA, so the mma.sync kernel stays the tensor-core path
elsewhere. Each template instance is compiled once by NVRTC with `-arch=sm_90a` (CuPy appends its
own `-arch=sm_90`; NVRTC builds the sm_90a code either way) and kept here.

CuPy is imported lazily: `supports` works on machines without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import flash_launch
from .algorithms import wgmma_tile_shape
from .config import AttentionConfig, ceil_div
from .cuda_kernels import device_limits

SOURCE = "flash_wgmma.cu"
#: NVRTC options: wgmma needs the architecture-specific target sm_90a.
COMPILE_OPTIONS: tuple[str, ...] = ("-std=c++17", "--use_fast_math", "-arch=sm_90a")
SUPPORTED_HEAD_DIMS = (64, 128)
SUPPORTED_DTYPES = ("fp16", "bf16")
REQUIRED_COMPUTE_CAPABILITY = 90
#: Query rows per block: two warpgroups of 64 rows (fixed by the kernel).
BLOCK_M = 128
THREADS = 256


@dataclass(frozen=True)
class WgmmaLaunch:
    """One kernel variant: key tile, K/V ring depth, and where Q lives for S = Q Kᵀ."""

    head_dim: int
    block_n: int
    stages: int
    q_in_registers: bool

    @property
    def block_m(self) -> int:
        return BLOCK_M

    @property
    def threads(self) -> int:
        return THREADS

    @property
    def smem_bytes(self) -> int:
        """1024 B alignment slack + Q tile + `stages` K and V tiles, 2-byte elements."""
        return 1024 + (BLOCK_M + 2 * self.stages * self.block_n) * self.head_dim * 2

    def template_name(self, causal: bool, bf16: bool) -> str:
        return (
            f"flash_wgmma_fwd<{self.head_dim}, {self.block_n}, {self.stages}, "
            f"{str(self.q_in_registers).lower()}, {str(causal).lower()}, {str(bf16).lower()}>"
        )


def default_launch(head_dim: int) -> WgmmaLaunch:
    """The variant `flash_forward` uses (tiles from `wgmma_tile_shape`): 128-key tiles, a
    2-stage K/V ring, Q in registers. On an H200 this beat 3 stages (d=64, by 7-9%) and 64-key
    tiles (d=128, by up to 9%, once 0.5% slower; docs/KERNELS.md). Registers: 252 at d=64 (no
    spills), 255 at d=128 with 96 bytes of spills (two 64-register S tiles, a 64-register O,
    32 registers of P and 32 of Q)."""
    _, block_n = wgmma_tile_shape(head_dim)
    return WgmmaLaunch(head_dim, block_n, 2, True)


def _check_launch(launch: WgmmaLaunch) -> None:
    if launch.head_dim not in SUPPORTED_HEAD_DIMS or launch.block_n not in (64, 128):
        raise ValueError(f"bad variant {launch}")
    if launch.stages < 2:
        raise ValueError("the K/V ring needs at least 2 stages")


def supports(config: AttentionConfig) -> str | None:
    """None when the Hopper kernel can run `config` on this machine, else the reason it cannot."""
    if config.dtype not in SUPPORTED_DTYPES:
        return f"Hopper wgmma kernel supports fp16 and bf16, not {config.dtype}"
    if config.head_dim not in SUPPORTED_HEAD_DIMS:
        dims = " and ".join(map(str, SUPPORTED_HEAD_DIMS))
        return f"Hopper wgmma kernel supports head_dim {dims}, not {config.head_dim}"
    limits = device_limits()
    if limits is None:
        return "Hopper wgmma kernel needs a CUDA GPU of compute capability 9.0 (none found)"
    cc, smem_optin = limits
    if cc != REQUIRED_COMPUTE_CAPABILITY:
        return (
            "Hopper wgmma kernel needs compute capability 9.0 (sm_90a: H100/H200), "
            f"this GPU is {cc / 10}"
        )
    need = default_launch(config.head_dim).smem_bytes
    if need > smem_optin:
        return (
            f"Hopper wgmma kernel needs {need // 1024} KiB of shared memory per block, "
            f"this GPU allows {smem_optin // 1024} KiB"
        )
    return None


_kernels: dict[tuple, Any] = {}


def get_kernel(
    launch: WgmmaLaunch, causal: bool, bf16: bool, extra_options: tuple[str, ...] = ()
) -> Any:
    """The compiled `cupy.RawKernel` of one variant (compiled on first use, then cached).
    `extra_options` adds NVRTC options."""
    _check_launch(launch)
    options = (*COMPILE_OPTIONS, *extra_options)
    return flash_launch.compiled_variant(SOURCE, launch, causal, bf16, options, _kernels)


def kernel_resources(launch: WgmmaLaunch, causal: bool, bf16: bool) -> dict[str, int]:
    """Registers, local (spill) bytes and shared memory of a compiled variant, for the notes."""
    return flash_launch.kernel_resources(get_kernel(launch, causal, bf16), launch)


def prepare(
    config: AttentionConfig, launch: WgmmaLaunch | None = None, extra_options: tuple[str, ...] = ()
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
    grid = (ceil_div(config.seq_len, BLOCK_M), config.bh)
    return flash_launch.Prepared(
        kernel, grid, THREADS, launch.smem_bytes,
        flash_launch.standard_arguments(config), grid[0] * grid[1],
    )  # fmt: skip


def launch_forward(
    q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, config: AttentionConfig, launch: WgmmaLaunch
) -> None:
    """`flash_forward` with an explicit variant (the benchmark uses this to compare tiles)."""
    flash_launch.run(prepare(config, launch), q, k, v, o, m, l, config)


def flash_forward(q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, config: AttentionConfig) -> None:
    """O = softmax(Q Kᵀ/√d [causal]) V with Hopper wgmma; also writes the row statistics m, l.

    Asynchronous like any CUDA launch: it is queued on CuPy's current stream.
    """
    flash_launch.run(prepare(config), q, k, v, o, m, l, config)
