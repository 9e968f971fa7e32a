"""Host-side launch plumbing shared by the two tensor-core kernels (flash_mma.cu, flash_wgmma.cu).

Both are C++ templates launched the same way: compile one instantiation per (tile variant,
causal, dtype), opt in to more than 48 KiB of dynamic shared memory, check the six arrays, and
launch a (query tiles, batch·heads) grid with (q, k, v, o, m, l, N, log2(e)/√d). Compiling goes
through `cuda_kernels.get_kernel`, so a kernel that fails to compile raises `KernelCompileError`
with NVRTC's log, which the app shows while the other kernels keep running.

The variant classes (`flash_mma.MmaLaunch`, `flash_wgmma.WgmmaLaunch`) stay with their kernels:
their fields are the template parameters of that .cu file.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Protocol

from .config import AttentionConfig, ceil_div
from .cuda_kernels import get_kernel


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
    read: a wrong stride would not fail, it would silently read the wrong elements."""
    import cupy

    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    for name, a in (("q", q), ("k", k), ("v", v), ("o", o)):
        if tuple(a.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(a.shape)}, expected {shape}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")
        if a.dtype.itemsize != 2:
            raise ValueError(f"{name} must hold 16-bit values, got {a.dtype}")
        if config.dtype == "fp16" and a.dtype != cupy.float16:
            raise ValueError(f"{name} must be float16 for fp16, got {a.dtype}")
    for name, a in (("m", m), ("l", l)):
        if tuple(a.shape) != shape[:3]:
            raise ValueError(f"{name} has shape {tuple(a.shape)}, expected {shape[:3]}")
        if a.dtype != cupy.float32 or not a.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous float32 array")


def launch_args(
    q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, config: AttentionConfig, block_m: int
) -> tuple[tuple[int, int], tuple[Any, ...]]:
    """(grid, kernel arguments): one block per `block_m` query rows of each (batch, head); the
    softmax scale is passed as log2(e)/√d because the kernels exponentiate with exp2."""
    import numpy as np

    grid = (ceil_div(config.seq_len, block_m), config.bh)
    scale_log2 = math.log2(math.e) / math.sqrt(config.head_dim)
    return grid, (q, k, v, o, m, l, np.int32(config.seq_len), np.float32(scale_log2))


def launch(
    kernel: Any,
    variant: Variant,
    q: Any,
    k: Any,
    v: Any,
    o: Any,
    m: Any,
    l: Any,
    config: AttentionConfig,
) -> None:
    """Check the arrays against `config` and queue the kernel on CuPy's current stream."""
    if variant.head_dim != config.head_dim:
        raise ValueError("launch head_dim does not match the config")
    check_arrays(q, k, v, o, m, l, config)
    grid, args = launch_args(q, k, v, o, m, l, config, variant.block_m)
    kernel(grid, (variant.threads,), args, shared_mem=variant.smem_bytes)
