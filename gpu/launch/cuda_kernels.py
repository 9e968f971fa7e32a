"""Compile our CUDA sources (gpu/kernels/*.cu) with NVRTC through CuPy, once per process.

Kernels are C++ templates over the element type (and, for the tiled kernel, the padded head
dim), so each launch names an instantiation such as ``flash_fwd_readable<half_t, 64>``; a module
holds just the instantiations asked for. The .cu files include shared headers
(gpu/kernels/*.cuh: PTX wrappers, dtype shims, reductions, trace macros), which NVRTC finds
through ``-I<gpu/kernels>``; a source outside that folder (a test's broken copy) also gets its
own folder first on the include path.

Modules are cached per (file, a hash of its text and of every header it includes, options,
instantiation). CuPy also keeps compiled cubins on disk (~/.cupy/kernel_cache), keyed on the
source text and the options but blind to included files, so the same hash is passed to NVRTC as
``-DTILESCOPE_SOURCE_HASH=...``: an edited header never brings back a stale binary.

A compile failure raises `KernelCompileError` carrying NVRTC's log, for the app to show.
CuPy is imported only when something is compiled or a device is asked about, so the pure
functions here (and in gpu/launch/flash_readable.py) work on machines without it.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

#: Where our .cu files live (shipped as package data).
KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"

#: Base NVRTC options; the device's `-arch=sm_XX` is appended by `compile_options`.
BASE_OPTIONS: tuple[str, ...] = ("-std=c++17",)

#: config.dtype -> (CuPy storage dtype, C++ element type in our kernels). CuPy has no bfloat16
#: dtype, so bf16 tensors are stored as their raw 16-bit patterns in uint16 arrays; the kernels'
#: `bf16_t` reads those bits, and cuBLAS is told the data is CUDA_R_16BF.
STORAGE: dict[str, tuple[type, str]] = {
    "fp16": (np.float16, "half_t"),
    "bf16": (np.uint16, "bf16_t"),
    "fp32": (np.float32, "float"),
}


class KernelCompileError(RuntimeError):
    """A .cu file failed to compile; `log` is the compiler's own output."""

    def __init__(self, path: Path, options: tuple[str, ...], log: str) -> None:
        self.path = path
        self.options = options
        self.log = log
        super().__init__(
            f"{path.name} failed to compile with NVRTC (options: {' '.join(options)}):\n{log}"
        )


_modules: dict[tuple, Any] = {}
_lock = threading.Lock()
#: `#include "name"` lines (system includes <...> are NVRTC's own and not hashed).
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
#: path -> (((file, mtime_ns, size), ...) of the source and its headers, hash); re-hashed only
#: when one of those files changes, so a launch costs a few stat calls, not a re-read.
_hashes: dict[str, tuple[tuple[tuple[str, int, int], ...], str]] = {}


def storage_dtype(dtype: str) -> type:
    """The CuPy dtype that holds a tensor of config dtype `dtype`."""
    return STORAGE[dtype][0]


def element_type(dtype: str) -> str:
    """The C++ element type our kernels use for config dtype `dtype`."""
    return STORAGE[dtype][1]


@functools.cache
def _device_attribute(name: str, device_id: int) -> int:
    import cupy

    runtime = cupy.cuda.runtime
    return int(runtime.deviceGetAttribute(getattr(runtime, "cudaDevAttr" + name), device_id))


def device_attribute(name: str) -> int:
    """A cudaDeviceAttr of the current device by its short name, e.g. 'MultiProcessorCount'."""
    import cupy

    return _device_attribute(name, cupy.cuda.Device().id)


def device_limits() -> tuple[int, int] | None:
    """(compute capability as an int, e.g. 90; opt-in shared memory per block) of the current
    device, or None where there is none. Cached per device: `supports()` runs before every
    launch, and cudaGetDeviceProperties would cost about a millisecond each time, which the
    CUDA events around a short kernel would then measure as kernel time."""
    try:
        import cupy

        device_id = cupy.cuda.runtime.getDevice()
        capability = int(cupy.cuda.Device(device_id).compute_capability)  # "90" -> 90
        return capability, _device_attribute("MaxSharedMemoryPerBlockOptin", device_id)
    except Exception:  # no CuPy, or no device
        return None


def smem_optin_bytes() -> int:
    """Shared memory one block may opt in to (232,448 B on H100/H200)."""
    return device_attribute("MaxSharedMemoryPerBlockOptin")


def device_arch() -> str:
    """``sm_90`` on an H100/H200: the current device's compute capability."""
    import cupy

    return f"sm_{cupy.cuda.Device().compute_capability}"


def compile_options(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """BASE_OPTIONS, the device's -arch unless `extra` names one (sm_90a for wgmma), `extra`."""
    # CuPy appends its own -arch for the device as well; NVRTC accepts the repeat, and naming
    # it here makes the target explicit in the cache key and in error messages.
    base = tuple(o for o in BASE_OPTIONS if o not in extra)
    if any(o.startswith("-arch") for o in extra):
        return (*base, *extra)
    return (*base, f"-arch={device_arch()}", *extra)


def kernel_path(source: str | Path) -> Path:
    """A bare file name means gpu/kernels/<name>; a path is used as given."""
    path = Path(source)
    return path if path.is_absolute() or path.parent != Path(".") else KERNEL_DIR / path


def include_dirs(path: Path) -> tuple[Path, ...]:
    """Where NVRTC looks for a source's quoted includes: its own folder, then gpu/kernels."""
    folder = path.resolve().parent
    return (folder,) if folder == KERNEL_DIR else (folder, KERNEL_DIR)


def included_files(path: Path) -> tuple[Path, ...]:
    """`path` and every header it includes, recursively (quoted includes found in
    `include_dirs(path)`), in first-seen order. An include that is not found is left to NVRTC,
    whose log then names it."""
    dirs = include_dirs(path)
    seen: list[Path] = []
    todo = [path.resolve()]
    while todo:
        current = todo.pop(0)
        if current in seen:
            continue
        seen.append(current)
        for name in _INCLUDE.findall(current.read_text()):
            for folder in (current.parent, *dirs):
                candidate = (folder / name).resolve()
                if candidate.is_file():
                    todo.append(candidate)
                    break
    return tuple(seen)


def source_hash(path: Path) -> str:
    """SHA-256 (hex) of a source's text and of every header it includes."""
    key = str(path.resolve())
    cached = _hashes.get(key)
    if cached is not None:
        stamps, digest = cached
        try:
            if all(
                (st := Path(f).stat()).st_mtime_ns == mtime and st.st_size == size
                for f, mtime, size in stamps
            ):
                return digest
        except OSError:
            pass
    files = included_files(path)
    h = hashlib.sha256()
    stamps = []
    for f in files:
        data = f.read_bytes()
        st = f.stat()
        stamps.append((str(f), st.st_mtime_ns, st.st_size))
        h.update(f.name.encode() + b"\0" + data + b"\0")
    digest = h.hexdigest()
    _hashes[key] = (tuple(stamps), digest)
    return digest


def load_module(
    source: str | Path,
    name_expressions: tuple[str, ...] = (),
    options: tuple[str, ...] = (),
) -> Any:
    """The compiled module (cupy.RawModule) of `source` with these instantiations (cached)."""
    import cupy

    path = kernel_path(source)
    digest = source_hash(path)
    includes = tuple(f"-I{d}" for d in include_dirs(path))
    opts = (*compile_options(tuple(options)), *includes, f"-DTILESCOPE_SOURCE_HASH={digest[:16]}")
    key = (str(path), digest, opts, tuple(name_expressions))
    with _lock:
        module = _modules.get(key)
        if module is not None:
            return module
        code = path.read_text()
        try:
            module = cupy.RawModule(
                code=code, options=opts, name_expressions=tuple(name_expressions) or None
            )
            module.compile()  # compile now, so errors surface here and not at first launch
        except cupy.cuda.compiler.CompileException as exc:
            raise KernelCompileError(path, opts, exc.get_message()) from None
        _modules[key] = module
        return module


def get_kernel(source: str | Path, name: str, options: tuple[str, ...] = ()) -> Any:
    """One cupy.RawKernel: `name` is a plain extern "C" name or a template instantiation."""
    is_template = "<" in name
    module = load_module(source, (name,) if is_template else (), options)
    return module.get_function(name)
