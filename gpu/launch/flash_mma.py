"""Launch the tensor-core tiled attention kernel (gpu/kernels/flash_mma.cu) through CuPy.

The kernel is a C++ template (head dim, tile sizes, causal, dtype); each combination is compiled
once by NVRTC (gpu/launch/flash_launch.py; CuPy caches the binary on disk too) and kept here. The
tile sizes are `tile_shape`'s, which the cost model and the schedule read through the algorithm
registry (gpu/algorithms.py), so the animation's tiles are the launch's tiles.

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

from ..config import AttentionConfig
from . import flash_launch

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
    def align_bytes(self) -> int:
        """No alignment slack: cp.async needs only 16-byte rows."""
        return 0

    @property
    def smem_bytes(self) -> int:
        """Q tile + two stages of K and V, 2-byte elements."""
        return (self.block_m + 4 * self.block_n) * self.head_dim * 2

    def template_name(self, causal: bool, bf16: bool) -> str:
        return (
            f"flash_mma_fwd<{self.head_dim}, {self.block_m}, {self.block_n}, {self.warps}, "
            f"{self.min_blocks}, {str(causal).lower()}, {str(bf16).lower()}>"
        )


def tile_shape(head_dim: int) -> tuple[int, int]:
    """(query rows per block, keys per K/V tile): 128 query rows (8 warps × 16 rows), and 128
    keys at d=64 or 64 at d=128, where two S tiles, O and Q in registers leave no room for more
    (measurements in docs/KERNELS.md)."""
    if head_dim <= 64:
        return 128, 128
    return 128, 64


def default_launch(head_dim: int) -> MmaLaunch:
    """The variant `flash_forward` uses for a head dim (tiles from `tile_shape`)."""
    block_m, block_n = tile_shape(head_dim)
    # The pipelined kernel keeps two S tiles, O and Q in registers: 255 at d=64 (128×128) and
    # 250-252 at d=128 (128×64), so one 8-warp block per SM (docs/KERNELS.md has the variants).
    return MmaLaunch(head_dim, block_m, block_n, 1)


def _check_launch(launch: MmaLaunch) -> None:
    if launch.block_m % 16 or launch.block_m > 256 or launch.block_n % 16:
        raise ValueError(f"bad tile shape {launch.block_m}×{launch.block_n}")


SPEC = flash_launch.KernelSpec(
    name="tensor-core kernel",
    source=SOURCE,
    options=COMPILE_OPTIONS,
    head_dims=SUPPORTED_HEAD_DIMS,
    dtypes=SUPPORTED_DTYPES,
    default_launch=default_launch,
    check_launch=_check_launch,
    min_compute_capability=MIN_COMPUTE_CAPABILITY,
)
#: None when the tensor-core kernel can run a config, else the reason it cannot.
supports = SPEC.supports
#: The compiled kernel of one variant: get_kernel(launch, causal, bf16, extra_options=()).
get_kernel = SPEC.get_kernel
#: Registers, spills and shared memory of a compiled variant: (launch, causal, bf16).
kernel_resources = SPEC.kernel_resources
#: The kernel for a config with its grid: one block per 128 query rows of each (batch, head).
prepare = SPEC.prepare


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
