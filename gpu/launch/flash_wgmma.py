"""Launch the Hopper attention kernel (gpu/kernels/flash_wgmma.cu) through CuPy.

Same interface as `gpu.launch.flash_mma`: `supports(config)` and `flash_forward(q, k, v, o, m, l,
config)` with C-contiguous (B, h, N, d) 16-bit arrays (`cupy.float16` for fp16, any 2-byte dtype
holding bf16 bit patterns for bf16) and float32 (B, h, N) row statistics m (row max of q·k/√d,
natural log units) and l (row sum of exp(q·k/√d − m)), so logsumexp = m + log(l).

The kernel uses `wgmma.mma_async`, which exists only on sm_90a (H100, H200): `supports` refuses
every other GPU, and machines without CUDA, so the mma.sync kernel stays the tensor-core path
elsewhere. Each template instance is compiled once by NVRTC with `-arch=sm_90a` (CuPy appends its
own `-arch=sm_90`; NVRTC builds the sm_90a code either way) and kept here.

CuPy is imported lazily: `supports` works on machines without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import AttentionConfig
from . import flash_launch

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
    def align_bytes(self) -> int:
        """Slack that lets the kernel align its tiles to 1024 B (wgmma's swizzled layout)."""
        return 1024

    @property
    def smem_bytes(self) -> int:
        """Alignment slack + Q tile + `stages` K and V tiles, 2-byte elements."""
        return self.align_bytes + (BLOCK_M + 2 * self.stages * self.block_n) * self.head_dim * 2

    def template_name(self, causal: bool, bf16: bool) -> str:
        return (
            f"flash_wgmma_fwd<{self.head_dim}, {self.block_n}, {self.stages}, "
            f"{str(self.q_in_registers).lower()}, {str(causal).lower()}, {str(bf16).lower()}>"
        )


def tile_shape(head_dim: int) -> tuple[int, int]:
    """(query rows per block, keys per K/V tile): 128 query rows (2 warpgroups × 64 rows) and
    128 keys at both head dims (64-key tiles at d=128 avoid its 96 bytes of register spills but
    measured up to 9% slower; docs/KERNELS.md)."""
    _ = head_dim  # the same tiles at 64 and 128
    return BLOCK_M, 128


def default_launch(head_dim: int) -> WgmmaLaunch:
    """The variant `flash_forward` uses (tiles from `tile_shape`): 128-key tiles, a
    2-stage K/V ring, Q in registers. On an H200 this beat 3 stages (d=64, by 7-9%) and 64-key
    tiles (d=128, by up to 9%, once 0.5% slower; docs/KERNELS.md). Registers: 252 at d=64 (no
    spills), 255 at d=128 with 96 bytes of spills (two 64-register S tiles, a 64-register O,
    32 registers of P and 32 of Q)."""
    _, block_n = tile_shape(head_dim)
    return WgmmaLaunch(head_dim, block_n, 2, True)


def _check_launch(launch: WgmmaLaunch) -> None:
    if launch.head_dim not in SUPPORTED_HEAD_DIMS or launch.block_n not in (64, 128):
        raise ValueError(f"bad variant {launch}")
    if launch.stages < 2:
        raise ValueError("the K/V ring needs at least 2 stages")


SPEC = flash_launch.KernelSpec(
    name="Hopper wgmma kernel",
    source=SOURCE,
    options=COMPILE_OPTIONS,
    head_dims=SUPPORTED_HEAD_DIMS,
    dtypes=SUPPORTED_DTYPES,
    default_launch=default_launch,
    check_launch=_check_launch,
    compute_capability=REQUIRED_COMPUTE_CAPABILITY,
)
#: None when the Hopper kernel can run a config on this machine, else the reason it cannot.
supports = SPEC.supports
#: The compiled kernel of one variant: get_kernel(launch, causal, bf16, extra_options=()).
get_kernel = SPEC.get_kernel
#: Registers, spills and shared memory of a compiled variant: (launch, causal, bf16).
kernel_resources = SPEC.kernel_resources
#: The kernel for a config with its grid: one block per 128 query rows of each (batch, head).
prepare = SPEC.prepare


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
