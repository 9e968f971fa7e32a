"""The one host-side launch path of the fused attention kernels.

Every fused kernel (flash_readable.cu, flash_mma.cu, flash_wgmma.cu, flash_ws.cu) is launched the
same way: its module's `prepare(config, ...)` compiles the instantiation the config needs (through
`cuda_kernels`, so a compile failure raises `KernelCompileError` with NVRTC's log, which the app
shows while the other kernels keep running), opts in to the dynamic shared memory it uses, and
returns a `Prepared` launch: grid, block, shared memory, and how the kernel's arguments are made
from (q, k, v, o, m, l). `run` checks the arrays against the config and queues it. The benchmark
and the trace recorder use `Prepared` too, so nothing else builds grids or argument lists.

The tensor-core kernels (flash_mma, flash_wgmma, flash_ws) differ only in what a `KernelSpec`
holds: the source, its NVRTC options, the shapes and GPUs it runs on, its default variant and how
its grid and arguments are laid out. `KernelSpec` gives each of them the same `supports`,
`get_kernel`, `kernel_resources` and `prepare`; the modules re-export them as their own.

The variant classes (`flash_mma.MmaLaunch`, `flash_wgmma.WgmmaLaunch`, `ws_variant.WsLaunch`) stay
with their kernels: their fields are the template parameters of that .cu file.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config import AttentionConfig, ceil_div
from ..units import fmt_bytes_binary
from .cuda_kernels import device_limits, get_kernel

#: The arrays every fused kernel reads and writes, in argument order.
ARRAYS = ("q", "k", "v", "o", "m", "l")


class Variant(Protocol):
    """What a launch needs to know of a kernel variant."""

    head_dim: int

    @property
    def block_m(self) -> int: ...

    @property
    def threads(self) -> int: ...

    @property
    def smem_bytes(self) -> int: ...

    def template_name(self, causal: bool, bf16: bool) -> str: ...


@dataclass(frozen=True)
class Prepared:
    """One compiled kernel, ready to launch for one config.

    `arguments(q, k, v, o, m, l)` gives the kernel's argument tuple; `blocks` is the number of
    thread blocks a launch runs (a trace build sizes its buffer by it)."""

    kernel: Any
    grid: tuple[int, ...]
    threads: int
    smem_bytes: int
    arguments: Callable[..., tuple[Any, ...]]
    blocks: int

    def __call__(self, q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, *extra: Any) -> None:
        """Queue one launch on CuPy's current stream; `extra` arguments follow the kernel's own
        (the trace build's buffer)."""
        self.launch_with(self.arguments(q, k, v, o, m, l), *extra)

    def launch_with(self, arguments: tuple[Any, ...], *extra: Any) -> None:
        """Queue one launch with arguments made earlier by `arguments` (the benchmark makes
        them once per input set, so its timed loop does no host-side work but the launch)."""
        self.kernel(self.grid, (self.threads,), (*arguments, *extra), shared_mem=self.smem_bytes)


def compiled_variant(
    source: str,
    variant: Variant,
    causal: bool,
    bf16: bool,
    options: tuple[str, ...],
    cache: dict[tuple, Any],
) -> Any:
    """The `cupy.RawKernel` of one instantiation, compiled on first use and kept in `cache`.

    Kept per device: CuPy loads a kernel's module on each device at its first launch there, and
    the shared-memory opt-in is an attribute of that device's copy, so every device gets its
    own entry, and with it its own opt-in (a second GPU would refuse the launch otherwise)."""
    import cupy

    key = (variant, causal, bf16, options, cupy.cuda.runtime.getDevice())
    kernel = cache.get(key)
    if kernel is None:
        kernel = get_kernel(source, variant.template_name(causal, bf16), options)
        set_max_dynamic_smem(kernel, variant.smem_bytes)
        cache[key] = kernel
    return kernel


def set_max_dynamic_smem(kernel: Any, nbytes: int) -> None:
    """Opt in to more than 48 KiB of dynamic shared memory (cudaFuncSetAttribute)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        function = getattr(kernel, "function", None)
        if function is not None and hasattr(function, "max_dynamic_shared_size_bytes"):
            try:
                function.max_dynamic_shared_size_bytes = nbytes
                return
            except Exception:
                pass
        if kernel.max_dynamic_shared_size_bytes < nbytes:
            kernel.max_dynamic_shared_size_bytes = nbytes


def kernel_resources(kernel: Any, variant: Variant) -> dict[str, int]:
    """Registers, local (spill) bytes and shared memory of a compiled variant, for the notes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        attrs = kernel.attributes
    return {
        "registers": int(attrs["num_regs"]),
        "local_bytes": int(attrs["local_size_bytes"]),
        "static_smem_bytes": int(attrs["shared_size_bytes"]),
        "dynamic_smem_bytes": variant.smem_bytes,
        "threads": variant.threads,
    }


def check_arrays(q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, config: AttentionConfig) -> None:
    """Raise ValueError naming the first array whose shape, layout or dtype the kernel cannot
    read: a wrong stride would not fail, it would silently read the wrong elements. Storage is
    float16 for fp16, float32 for fp32, and any 2-byte dtype (bf16 bit patterns) for bf16."""
    import cupy

    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    for name, a in (("q", q), ("k", k), ("v", v), ("o", o)):
        if tuple(a.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(a.shape)}, expected {shape}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")
        if a.dtype.itemsize != config.elem_bytes:
            raise ValueError(
                f"{name} must hold {8 * config.elem_bytes}-bit values for {config.dtype}, "
                f"got {a.dtype}"
            )
        expected = {"fp16": cupy.float16, "fp32": cupy.float32}.get(config.dtype)
        if expected is not None and a.dtype != expected:
            raise ValueError(f"{name} must be {cupy.dtype(expected).name} for {config.dtype}, "
                             f"got {a.dtype}")  # fmt: skip
    for name, a in (("m", m), ("l", l)):
        if tuple(a.shape) != shape[:3]:
            raise ValueError(f"{name} has shape {tuple(a.shape)}, expected {shape[:3]}")
        if a.dtype != cupy.float32 or not a.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous float32 array")


def scale_log2(config: AttentionConfig) -> float:
    """log2(e)/√d: the kernels exponentiate with exp2, so the softmax scale folds this in."""
    return math.log2(math.e) / math.sqrt(config.head_dim)


def standard_arguments(config: AttentionConfig) -> Callable[..., tuple[Any, ...]]:
    """(q, k, v, o, m, l, N, log2(e)/√d): the arguments of the mma.sync and wgmma kernels."""
    import numpy as np

    n = np.int32(config.seq_len)
    scale = np.float32(scale_log2(config))

    def arguments(q: Any, k: Any, v: Any, o: Any, m: Any, l: Any) -> tuple[Any, ...]:
        return (q, k, v, o, m, l, n, scale)

    return arguments


def run(
    prepared: Prepared,
    q: Any,
    k: Any,
    v: Any,
    o: Any,
    m: Any,
    l: Any,
    config: AttentionConfig,
) -> None:
    """Check the arrays against `config` and queue the prepared kernel on CuPy's current stream."""
    check_arrays(q, k, v, o, m, l, config)
    prepared(q, k, v, o, m, l)


#: How a kernel's launch is laid out for one config and variant: (grid, arguments).
Layout = Callable[[AttentionConfig, Any], tuple[tuple[int, ...], Callable[..., tuple[Any, ...]]]]


def standard_layout(config: AttentionConfig, launch: Variant) -> tuple[tuple[int, ...], Any]:
    """One block per `block_m` query rows of each (batch, head), a 2-D grid, and the standard
    arguments: the layout of the mma.sync and wgmma kernels."""
    return (ceil_div(config.seq_len, launch.block_m), config.bh), standard_arguments(config)


def _listed(values: tuple[int, ...]) -> str:
    return " and ".join(map(str, values)) if len(values) == 2 else ", ".join(map(str, values))


@dataclass(frozen=True)
class KernelSpec:
    """What sets one fused tensor-core kernel's launcher apart; the launcher itself is shared.

    `min_compute_capability` admits that GPU and newer (no GPU: supported, the CPU path decides);
    `compute_capability` admits that GPU only (sm_90a code runs nowhere else) and refuses a
    machine without one. `default_launch(head_dim)` is the variant a plain launch uses,
    `check_launch(variant)` raises ValueError for one the kernel's static checks would reject.
    `smem_need(head_dim)` is the shared memory per block a config needs where a kernel launches
    more than its default variant (the backward's deterministic dQ pass); by default that
    variant's."""

    name: str  # "tensor-core kernel": the subject of every refusal
    source: str
    options: tuple[str, ...]
    head_dims: tuple[int, ...]
    dtypes: tuple[str, ...]
    default_launch: Callable[[int], Any]
    check_launch: Callable[[Any], None]
    min_compute_capability: int | None = None
    compute_capability: int | None = None
    layout: Layout = standard_layout
    smem_need: Callable[[int], int] | None = None
    kernels: dict[tuple, Any] = field(default_factory=dict, compare=False, repr=False)

    def supports(self, config: AttentionConfig) -> str | None:
        """None when the kernel can run `config` on this machine, else the reason it cannot."""
        if config.dtype not in self.dtypes:
            return f"{self.name} supports {' and '.join(self.dtypes)}, not {config.dtype}"
        if config.head_dim not in self.head_dims:
            dims = _listed(self.head_dims)
            return f"{self.name} supports head_dim {dims}, not {config.head_dim}"
        limits = device_limits()
        exact = self.compute_capability
        if limits is None:
            if exact is None:
                return None
            return f"{self.name} needs a CUDA GPU of compute capability {exact / 10} (none found)"
        cc, smem_optin = limits
        if exact is not None and cc != exact:
            return (
                f"{self.name} needs compute capability {exact / 10} (sm_90a: H100/H200), "
                f"this GPU is {cc / 10}"
            )
        least = self.min_compute_capability
        if least is not None and cc < least:
            return (
                f"{self.name} needs compute capability {least / 10} or newer (this GPU: {cc / 10})"
            )
        if self.smem_need is not None:
            need = self.smem_need(config.head_dim)
        else:
            need = self.default_launch(config.head_dim).smem_bytes
        if need > smem_optin:
            return (
                f"{self.name} needs {fmt_bytes_binary(need)} of shared memory per block, "
                f"this GPU allows {fmt_bytes_binary(smem_optin)}"
            )
        return None

    def get_kernel(
        self, launch: Any, causal: bool, bf16: bool, extra_options: tuple[str, ...] = ()
    ) -> Any:
        """The compiled `cupy.RawKernel` of one variant (compiled on first use, then cached).
        `extra_options` adds NVRTC options, e.g. a trace build's define."""
        self.check_launch(launch)
        options = (*self.options, *extra_options)
        return compiled_variant(self.source, launch, causal, bf16, options, self.kernels)

    def kernel_resources(self, launch: Any, causal: bool, bf16: bool) -> dict[str, int]:
        """Registers, local (spill) bytes and shared memory of a compiled variant."""
        return kernel_resources(self.get_kernel(launch, causal, bf16), launch)

    def prepare(
        self,
        config: AttentionConfig,
        launch: Any | None = None,
        extra_options: tuple[str, ...] = (),
    ) -> Prepared:
        """The compiled kernel for `config` (the default variant unless `launch` names one)
        with its grid and arguments. Raises ValueError when the kernel cannot run `config`."""
        reason = self.supports(config)
        if reason is not None:
            raise ValueError(reason)
        launch = launch or self.default_launch(config.head_dim)
        if launch.head_dim != config.head_dim:
            raise ValueError("launch head_dim does not match the config")
        kernel = self.get_kernel(launch, config.causal, config.dtype == "bf16", extra_options)
        grid, arguments = self.layout(config, launch)
        return Prepared(kernel, grid, launch.threads, launch.smem_bytes, arguments, math.prod(grid))
