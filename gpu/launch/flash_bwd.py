"""Launch the fused backward pass (gpu/kernels/flash_bwd.cu) through CuPy.

The forward kernels keep O and the row statistics m and l; from those and dO this module
computes dQ, dK and dV without ever materialising an N×N matrix:

    flash_bwd_preprocess   D = rowsum(dO ∘ O), LSE2 = (m + log l)·log2 e, dQ accumulator = 0
    flash_bwd              one block per key tile: dK, dV in registers, dQ by fp32 atomics
    flash_bwd_dq_convert   dQ accumulator · 1/√d -> fp16/bf16

or, deterministic, `flash_bwd` without its dQ part followed by `flash_bwd_dq`, which owns each
query tile's dQ and sums the key tiles in a fixed order (bit-identical runs).

`flash_bwd` has two implementations of the same algorithm and interface: the mma.sync kernel of
flash_bwd.cu (any GPU of compute capability 8.0 or newer) and, on sm_90a (H100, H200), the
warpgroup-MMA kernel of flash_bwd_wgmma.cu, which a plain `prepare_backward` picks there. The
element-wise kernels and the deterministic dQ pass come from flash_bwd.cu either way.

Arrays follow the forward kernels: q, k, v, o, do, dq, dk, dv are C-contiguous (B, h, N, d)
16-bit storage (float16 for fp16, uint16 holding bf16 bit patterns for bf16); m, l are the
forward's float32 (B, h, N) statistics. CuPy is imported lazily, so the variant bookkeeping
works without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..config import AttentionConfig, ceil_div
from . import flash_launch

SOURCE = "flash_bwd.cu"
COMPILE_OPTIONS: tuple[str, ...] = ("-std=c++17", "--use_fast_math")
WGMMA_SOURCE = "flash_bwd_wgmma.cu"
#: wgmma exists only on the architecture-specific target sm_90a.
WGMMA_OPTIONS: tuple[str, ...] = (*COMPILE_OPTIONS, "-arch=sm_90a")
WGMMA_COMPUTE_CAPABILITY = 90
SUPPORTED_HEAD_DIMS = (64, 128)
SUPPORTED_DTYPES = ("fp16", "bf16")
MIN_COMPUTE_CAPABILITY = 80
#: The per-row statistics (LSE2, D) are padded to a multiple of this many rows per head, so a
#: query tile of any supported size reads whole 16-byte chunks; padded rows carry LSE2 = +inf.
STAT_ROW_PAD = 128
#: Threads per block of the two element-wise kernels.
ELEMENTWISE_THREADS = 256

#: Kernel names as they appear in a run's timings (the cost model and the roofline use them).
PREPROCESS = "flash_bwd_preprocess"
MAIN = "flash_bwd"
DQ_CONVERT = "flash_bwd_dq_convert"
DQ_PASS = "flash_bwd_dq"


@dataclass(frozen=True)
class BwdLaunch:
    """One variant of `flash_bwd`: BC keys per block (16 per warp), BR queries per step."""

    head_dim: int
    block_n: int  # keys per block (BC)
    block_m: int  # query rows per inner step (BR)
    min_blocks: int = 1
    #: 1: dQ_i right after dSᵀ_i (a second barrier per step); 2: dSᵀ double-buffered, dQ_{i-1}
    #: at the start of step i behind the barrier it needs anyway.
    ds_stages: int = 2

    @property
    def warps(self) -> int:
        return self.block_n // 16

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def smem_bytes(self) -> int:
        """K_j, V_j; two stages of Q_i and dO_i; dSᵀ stages; two stages of LSE2 and D."""
        d, bc, br = self.head_dim, self.block_n, self.block_m
        return 2 * bc * d * 2 + 4 * br * d * 2 + self.ds_stages * bc * br * 2 + 4 * br * 4

    def template_name(self, causal: bool, bf16: bool, dq_atomic: bool = True) -> str:
        return (
            f"flash_bwd<{self.head_dim}, {self.block_n}, {self.block_m}, {self.warps}, "
            f"{self.min_blocks}, {str(causal).lower()}, {str(bf16).lower()}, "
            f"{str(dq_atomic).lower()}, {self.ds_stages}>"
        )


@dataclass(frozen=True)
class WgmmaBwdLaunch:
    """The Hopper `flash_bwd` (flash_bwd_wgmma.cu): 128 keys per block in two warpgroups of 64,
    and per step 128 queries at d=64 or 64 at d=128 (fixed by the kernel: dK, dV, Sᵀ and dPᵀ
    share the 255 registers a thread has)."""

    head_dim: int

    @property
    def block_n(self) -> int:
        return 128

    @property
    def block_m(self) -> int:
        return 128 if self.head_dim <= 64 else 64

    @property
    def threads(self) -> int:
        return 256

    @property
    def smem_bytes(self) -> int:
        """1024 bytes of alignment slack; K_j, V_j; two stages of Q_i and dO_i; dS; two
        stages of LSE2 and D."""
        d, bc, br = self.head_dim, self.block_n, self.block_m
        return 1024 + 2 * bc * d * 2 + 4 * br * d * 2 + br * bc * 2 + 4 * br * 4

    def template_name(self, causal: bool, bf16: bool, dq_atomic: bool = True) -> str:
        return (
            f"flash_bwd_wgmma<{self.head_dim}, {self.block_m}, {str(causal).lower()}, "
            f"{str(bf16).lower()}, {str(dq_atomic).lower()}>"
        )


#: A variant of the main kernel, on either implementation.
MainLaunch = BwdLaunch | WgmmaBwdLaunch


@dataclass(frozen=True)
class DqLaunch:
    """One variant of the deterministic `flash_bwd_dq`: BR query rows per block (16 per warp),
    BC keys per step."""

    head_dim: int
    block_m: int
    block_n: int
    min_blocks: int = 1

    @property
    def warps(self) -> int:
        return self.block_m // 16

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def smem_bytes(self) -> int:
        """Q_i and dO_i, two stages of K_j and V_j."""
        d = self.head_dim
        return 2 * self.block_m * d * 2 + 4 * self.block_n * d * 2

    def template_name(self, causal: bool, bf16: bool) -> str:
        return (
            f"flash_bwd_dq<{self.head_dim}, {self.block_m}, {self.block_n}, {self.warps}, "
            f"{self.min_blocks}, {str(causal).lower()}, {str(bf16).lower()}>"
        )


def default_launch(head_dim: int) -> BwdLaunch:
    """The `flash_bwd` variant used for a head dim: 128 keys per block (8 warps) and, per
    step, 128 queries at d=64 or 64 at d=128, where the dK and dV accumulators take twice the
    registers (255 either way, no spills); dSᵀ double-buffered. On the H200 at FlashAttention-3's
    shapes, 128 queries beat 64 at d=64 by 2-4 % and two dS stages beat one by 0-4 %
    (docs/KERNELS.md)."""
    return BwdLaunch(head_dim, 128, 128 if head_dim <= 64 else 64, 1, 2)


def wgmma_here() -> bool:
    """Whether this machine's current GPU runs sm_90a code (the Hopper `flash_bwd`)."""
    limits = flash_launch.device_limits()
    return limits is not None and limits[0] == WGMMA_COMPUTE_CAPABILITY


def main_launch(head_dim: int) -> MainLaunch:
    """The `flash_bwd` variant a plain `prepare_backward` uses here: the wgmma kernel on an
    H100/H200 (1.25–1.47× the mma.sync one on an H200 at FlashAttention-3's shapes,
    docs/KERNELS.md), the mma.sync kernel on any other GPU."""
    return WgmmaBwdLaunch(head_dim) if wgmma_here() else default_launch(head_dim)


def default_dq_launch(head_dim: int) -> DqLaunch:
    """The `flash_bwd_dq` variant: 128 query rows per block (8 warps), 64 keys per step."""
    return DqLaunch(head_dim, 128, 64, 1)


def backward_tile_shape(head_dim: int) -> tuple[int, int]:
    """(keys per block, queries per step) of the fused backward, for the cost model and the
    animation: K_j/V_j stay on chip while Q_i/dO_i stream."""
    launch = default_launch(head_dim)
    return launch.block_n, launch.block_m


def _check_launch(launch: BwdLaunch) -> None:
    if launch.block_n % 16 or launch.block_m % 16:
        raise ValueError(f"bad tile shape {launch.block_n}×{launch.block_m}")


def _smem_need(head_dim: int) -> int:
    """Shared memory per block of the larger of `flash_bwd` and the deterministic dQ pass."""
    return max(default_launch(head_dim).smem_bytes, default_dq_launch(head_dim).smem_bytes)


SPEC = flash_launch.KernelSpec(
    name="fused backward",
    source=SOURCE,
    options=COMPILE_OPTIONS,
    head_dims=SUPPORTED_HEAD_DIMS,
    dtypes=SUPPORTED_DTYPES,
    default_launch=default_launch,
    check_launch=_check_launch,
    min_compute_capability=MIN_COMPUTE_CAPABILITY,
    smem_need=_smem_need,
)
#: None when the fused backward can run a config, else the reason it cannot.
supports = SPEC.supports


def padded_rows(seq_len: int) -> int:
    """Rows per head of the LSE2 and D arrays."""
    return ceil_div(seq_len, STAT_ROW_PAD) * STAT_ROW_PAD


_kernels = SPEC.kernels


@dataclass(frozen=True)
class _Named:
    """A non-template variant key for the element-wise kernels (flash_launch's cache wants
    a `template_name(causal, bf16)`)."""

    name: str
    smem_bytes: int = 0

    def template_name(self, causal: bool, bf16: bool) -> str:
        return self.name


@dataclass(frozen=True)
class _AtomicVariant:
    """A `flash_bwd` variant with its dQ mode, the one more template flag than the forward's."""

    launch: MainLaunch
    dq_atomic: bool

    @property
    def smem_bytes(self) -> int:
        return self.launch.smem_bytes

    def template_name(self, causal: bool, bf16: bool) -> str:
        return self.launch.template_name(causal, bf16, self.dq_atomic)


def _kernel(variant: Any, causal: bool, bf16: bool) -> Any:
    hopper = isinstance(variant, _AtomicVariant) and isinstance(variant.launch, WgmmaBwdLaunch)
    source, options = (WGMMA_SOURCE, WGMMA_OPTIONS) if hopper else (SOURCE, COMPILE_OPTIONS)
    return flash_launch.compiled_variant(source, variant, causal, bf16, options, _kernels)


def kernel_resources(launch: MainLaunch | DqLaunch, causal: bool, bf16: bool) -> dict[str, int]:
    """Registers, local (spill) bytes and shared memory of a compiled variant, for the notes."""
    variant = launch if isinstance(launch, DqLaunch) else _AtomicVariant(launch, True)
    return flash_launch.kernel_resources(_kernel(variant, causal, bf16), launch)


@dataclass(frozen=True)
class BackwardPlan:
    """The compiled kernels of one fused backward for one config, with their grids.

    `workspace()` allocates the O(N) statistics (and the fp32 dQ accumulator when dQ is
    summed by atomics); `launches(arrays)` returns the kernels as (name, launch) in order,
    reading q, k, v, o, m, l, do from `arrays` and writing dq, dk, dv there."""

    config: AttentionConfig
    deterministic: bool
    main: MainLaunch
    dq: DqLaunch
    _preprocess: Any
    _main: Any
    _finish: Any  # dq_convert, or the deterministic dQ pass

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return (PREPROCESS, MAIN, DQ_PASS if self.deterministic else DQ_CONVERT)

    def workspace(self) -> dict[str, Any]:
        import cupy

        c = self.config
        ws = {
            "lse2": cupy.empty((c.bh, padded_rows(c.seq_len)), dtype=cupy.float32),
            "dsum": cupy.empty((c.bh, padded_rows(c.seq_len)), dtype=cupy.float32),
        }
        if not self.deterministic:
            ws["dq_acc"] = cupy.empty((c.batch, c.heads, c.seq_len, c.head_dim), dtype=cupy.float32)
        return ws

    def launches(self, a: dict[str, Any]) -> list[tuple[str, Callable[[], None]]]:
        """The kernels as (name, launch); `a` must hold q, k, v, o, m, l, do, dq, dk, dv and
        the workspace's arrays. Argument tuples are made once, here."""
        import numpy as np

        c = self.config
        n = np.int32(c.seq_len)
        n_pad_int = padded_rows(c.seq_len)
        n_pad = np.int32(n_pad_int)
        scale = np.float32(1.0 / math.sqrt(c.head_dim))
        scale_log2 = np.float32(flash_launch.scale_log2(c))
        rows_pad = c.bh * n_pad_int
        tpr = c.head_dim // 8
        pre_grid = (ceil_div(rows_pad * tpr, ELEMENTWISE_THREADS),)
        dq_acc = a.get("dq_acc")
        zero = dq_acc if dq_acc is not None else a["lse2"]  # unused when deterministic
        pre_args = (a["o"], a["do"], a["m"], a["l"], a["lse2"], a["dsum"], zero, n, n_pad,
                    np.int64(rows_pad))  # fmt: skip
        main_grid = (ceil_div(c.seq_len, self.main.block_n), c.bh)
        main_args = (a["q"], a["k"], a["v"], a["do"], a["lse2"], a["dsum"], zero, a["dk"],
                     a["dv"], n, n_pad, scale_log2, scale)  # fmt: skip
        pre, main = self._preprocess, self._main
        main_smem, main_threads = self.main.smem_bytes, self.main.threads

        def preprocess() -> None:
            pre(pre_grid, (ELEMENTWISE_THREADS,), pre_args)

        def fused() -> None:
            main(main_grid, (main_threads,), main_args, shared_mem=main_smem)

        finish = self._finish
        if self.deterministic:
            dq_grid = (ceil_div(c.seq_len, self.dq.block_m), c.bh)
            dq_args = (a["q"], a["k"], a["v"], a["do"], a["lse2"], a["dsum"], a["dq"], n, n_pad,
                       scale_log2, scale)  # fmt: skip
            dq_smem, dq_threads = self.dq.smem_bytes, self.dq.threads

            def last() -> None:
                finish(dq_grid, (dq_threads,), dq_args, shared_mem=dq_smem)

            return [(PREPROCESS, preprocess), (MAIN, fused), (DQ_PASS, last)]
        chunks = c.bh * c.seq_len * c.head_dim // 8
        conv_grid = (ceil_div(chunks, ELEMENTWISE_THREADS),)
        conv_args = (dq_acc, a["dq"], np.int64(chunks), scale)

        def convert() -> None:
            finish(conv_grid, (ELEMENTWISE_THREADS,), conv_args)

        return [(PREPROCESS, preprocess), (MAIN, fused), (DQ_CONVERT, convert)]


def prepare_backward(
    config: AttentionConfig,
    deterministic: bool = False,
    launch: MainLaunch | None = None,
    dq_launch: DqLaunch | None = None,
) -> BackwardPlan:
    """Compile (once) the kernels `config` needs (`main_launch` unless `launch` names a
    variant). Raises ValueError when the fused backward cannot run it here."""
    reason = supports(config)
    if reason is not None:
        raise ValueError(reason)
    launch = launch or main_launch(config.head_dim)
    if isinstance(launch, WgmmaBwdLaunch) and not wgmma_here():
        raise ValueError("the wgmma backward needs compute capability 9.0 (sm_90a: H100/H200)")
    dq_launch = dq_launch or default_dq_launch(config.head_dim)
    if launch.head_dim != config.head_dim or dq_launch.head_dim != config.head_dim:
        raise ValueError("launch head_dim does not match the config")
    if launch.block_n % 16 or STAT_ROW_PAD % launch.block_m or launch.block_m < 64:
        raise ValueError(f"bad backward tile shape {launch.block_n}×{launch.block_m}")
    bf16 = config.dtype == "bf16"
    causal = config.causal
    d = config.head_dim
    pre = _kernel(
        _Named(f"flash_bwd_preprocess<{d}, {str(bf16).lower()}, {str(not deterministic).lower()}>"),
        causal, bf16,
    )  # fmt: skip
    if deterministic and isinstance(launch, BwdLaunch):  # no dQ: one dSᵀ buffer is enough
        launch = replace(launch, ds_stages=1)
    main = _kernel(_AtomicVariant(launch, not deterministic), causal, bf16)
    if deterministic:
        finish = _kernel(dq_launch, causal, bf16)
    else:
        finish = _kernel(_Named(f"flash_bwd_dq_convert<{str(bf16).lower()}>"), causal, bf16)
    return BackwardPlan(config, deterministic, launch, dq_launch, pre, main, finish)


def check_arrays(config: AttentionConfig, **arrays: Any) -> None:
    """Raise ValueError naming the first array the kernels cannot read or write."""
    import cupy

    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    for name, a in arrays.items():
        want = shape[:3] if name in ("m", "l") else shape
        if tuple(a.shape) != want:
            raise ValueError(f"{name} has shape {tuple(a.shape)}, expected {want}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")
        if name in ("m", "l"):
            if a.dtype != cupy.float32:
                raise ValueError(f"{name} must be float32, got {a.dtype}")
        elif a.dtype.itemsize != 2 or (config.dtype == "fp16" and a.dtype != cupy.float16):
            raise ValueError(f"{name} must hold 16-bit {config.dtype} values, got {a.dtype}")


def flash_backward(
    q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, do: Any, config: AttentionConfig,
    *, deterministic: bool = False, launch: MainLaunch | None = None,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """(dQ, dK, dV) of O = softmax(Q Kᵀ/√d [causal]) V for the upstream gradient dO, from the
    forward's O, m and l (`launch` picks a `flash_bwd` variant, `main_launch` by default).
    Asynchronous like any CUDA launch (CuPy's current stream)."""
    import cupy

    check_arrays(config, q=q, k=k, v=v, o=o, m=m, l=l, do=do)
    plan = prepare_backward(config, deterministic, launch)
    arrays = {"q": q, "k": k, "v": v, "o": o, "m": m, "l": l, "do": do}
    arrays.update(plan.workspace())
    for name in ("dq", "dk", "dv"):
        arrays[name] = cupy.empty_like(q)
    for _, launch in plan.launches(arrays):
        launch()
    return arrays["dq"], arrays["dk"], arrays["dv"]
