"""The CUDA sources share their helpers through headers, and the compile cache sees the headers.

No GPU needed: these read the .cu/.cuh files and hash them the way gpu.launch.cuda_kernels does
before it asks NVRTC for a module.
"""

from __future__ import annotations

import re
import shutil

from gpu.launch.cuda_kernels import KERNEL_DIR, include_dirs, included_files, source_hash

SOURCES = sorted(KERNEL_DIR.glob("*.cu"))
_DEFINITION = re.compile(r"^__device__[^(]*?\b(\w+)\s*\(", re.MULTILINE)
_MACRO = re.compile(r"^#define\s+(\w+)", re.MULTILINE)


def test_every_kernel_source_includes_headers_that_exist() -> None:
    assert {p.name for p in SOURCES} >= {
        "flash_readable.cu", "flash_mma.cu", "flash_wgmma.cu", "flash_ws.cu", "softmax.cu"
    }  # fmt: skip
    for source in SOURCES:
        files = included_files(source)
        assert files[0] == source.resolve()
        assert len(files) > 1, f"{source.name} includes no shared header"
        assert all(f.suffix == ".cuh" and f.parent == KERNEL_DIR for f in files[1:])


def test_no_device_helper_or_macro_is_defined_in_two_sources() -> None:
    seen: dict[str, str] = {}
    for path in [*SOURCES, *sorted(KERNEL_DIR.glob("*.cuh"))]:
        text = path.read_text()
        for name in {*_DEFINITION.findall(text), *_MACRO.findall(text)}:
            assert name not in seen, f"{name} is defined in {seen[name]} and {path.name}"
            seen[name] = path.name


def test_a_changed_header_changes_the_hash_of_every_source_that_includes_it(tmp_path) -> None:
    for f in KERNEL_DIR.iterdir():
        if f.suffix in (".cu", ".cuh"):
            shutil.copy(f, tmp_path / f.name)
    wgmma, softmax = tmp_path / "flash_wgmma.cu", tmp_path / "softmax.cu"
    before = source_hash(wgmma), source_hash(softmax)
    header = tmp_path / "hopper.cuh"
    header.write_text(header.read_text() + "\n// changed\n")
    after = source_hash(wgmma), source_hash(softmax)
    assert after[0] != before[0]  # the wgmma kernel includes hopper.cuh
    assert after[1] == before[1]  # softmax.cu does not


def test_a_copy_outside_the_kernel_folder_finds_the_shared_headers(tmp_path) -> None:
    copy = tmp_path / "flash_ws_copy.cu"
    shutil.copy(KERNEL_DIR / "flash_ws.cu", copy)
    assert include_dirs(copy) == (tmp_path.resolve(), KERNEL_DIR)
    names = {f.name for f in included_files(copy)}
    assert {"hopper.cuh", "online_softmax.cuh", "ptx.cuh", "trace.cuh"} <= names
