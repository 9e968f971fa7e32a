"""Registers, spills and stack of every kernel instance, from nvcc's `-Xptxas -v` (no GPU needed).

Each instance is compiled alone (so the report line is its own) with the options the app gives
NVRTC for that file: `-std=c++17`, `--use_fast_math` for the tensor-core kernels, sm_90a for the
Hopper ones and sm_90 for the others, and `-I <kernel dir>` for the shared headers.

    python bench/ptxas_report.py                       # the kernels in gpu/kernels
    python bench/ptxas_report.py --kernels old/ --json old.json
    python bench/ptxas_report.py --compare old.json    # side by side with an earlier report
    python bench/ptxas_report.py --only flash_ws       # one family

`--kernels DIR` reads the .cu files from DIR but keeps gpu/kernels on the include path after
DIR, so a directory of older sources that include no headers compiles too.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent.parent / "gpu" / "kernels"

_MMA_ARGS = "const u16*, const u16*, const u16*, u16*, float*, float*, int, float"
_READABLE_ARGS = (
    "const {T}*, const {T}*, const {T}*, {T}*, float*, float*, int, int, int, int, int, int, float"
)
_SOFTMAX_ARGS = "const {T}*, {T}*, long long, int, int"
_WS_ARGS = "const __grid_constant__ TmaMap, const __grid_constant__ TmaMap, const __grid_constant__ TmaMap, u16*, float*, float*, int, int, int, float"  # noqa: E501


@dataclass(frozen=True)
class Instance:
    label: str
    source: str
    template: str  # name<args>
    args: str
    hopper: bool
    fast_math: bool


def _instances() -> list[Instance]:
    out: list[Instance] = []
    for t, d in (("half_t", 64), ("bf16_t", 128), ("float", 64)):
        out.append(
            Instance(
                f"readable {t} d={d}",
                "flash_readable.cu",
                f"flash_fwd_readable<{t}, {d}>",
                _READABLE_ARGS.format(T=t),
                False,
                False,
            )
        )
    for t, vec in (("half_t", 8), ("float", 4)):
        for name in ("softmax_rows_smem", "softmax_rows_twopass"):
            out.append(
                Instance(
                    f"{name} {t}",
                    "softmax.cu",
                    f"{name}<{t}, {vec}>",
                    _SOFTMAX_ARGS.format(T=t),
                    False,
                    False,
                )
            )
    for d, bm, bn in ((64, 128, 128), (128, 128, 64)):
        for causal in (False, True):
            for bf16 in (False, True):
                c, b = str(causal).lower(), str(bf16).lower()
                out.append(
                    Instance(
                        f"mma d={d} {bm}x{bn} {'causal' if causal else 'full'} "
                        f"{'bf16' if bf16 else 'fp16'}",
                        "flash_mma.cu",
                        f"flash_mma_fwd<{d}, {bm}, {bn}, 8, 1, {c}, {b}>",
                        _MMA_ARGS,
                        False,
                        True,
                    )
                )
    for d, bn, ns, regs in (
        (64, 128, 2, True),
        (128, 128, 2, True),
        (64, 128, 3, True),
        (128, 64, 3, True),
        (128, 128, 2, False),
    ):
        for causal in (False, True):
            c = str(causal).lower()
            q = "r" if regs else "s"
            out.append(
                Instance(
                    f"wgmma d={d} {bn}x{ns}{q} {'causal' if causal else 'full'}",
                    "flash_wgmma.cu",
                    f"flash_wgmma_fwd<{d}, {bn}, {ns}, {str(regs).lower()}, {c}, false>",
                    _MMA_ARGS,
                    True,
                    True,
                )
            )
    out.extend(_ws_instances())
    return out


def _ws_instances() -> list[Instance]:
    """Every tiled_ws variant the GPU check script compiles (gpu.launch.flash_ws.CANDIDATES)."""
    sys.path.insert(0, str(KERNEL_DIR.parent.parent))
    try:
        from gpu.launch import flash_ws
    except ImportError:  # an older tree without the warp-specialized kernel
        return []
    out = []
    for variant in flash_ws.all_variants():
        for causal in (False, True):
            out.append(
                Instance(
                    f"ws {variant.label} {'causal' if causal else 'full'}",
                    flash_ws.SOURCE,
                    variant.template_name(causal, False),
                    _WS_ARGS,
                    True,
                    True,
                )
            )
    return out


@dataclass
class Report:
    label: str
    registers: int | None = None
    stack_bytes: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    sass_registers: int | None = None  # highest register the SASS uses + 1 (after setmaxnreg)
    warnings: str = ""
    error: str = ""


_USED = re.compile(r"Used (\d+) registers")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def compile_instance(
    inst: Instance, kernels: Path, nvcc: str, extra: list[str], cuobjdump: str | None = None
) -> Report:
    report = Report(inst.label)
    src = kernels / inst.source
    if not src.exists():
        report.error = f"{src} not found"
        return report
    arch = "compute_90a,code=sm_90a" if inst.hopper else "compute_90,code=sm_90"
    with tempfile.TemporaryDirectory() as tmp:
        unit = Path(tmp) / "inst.cu"
        unit.write_text(
            f'#include "{src.resolve()}"\ntemplate __global__ void {inst.template}({inst.args});\n'
        )
        cmd = [nvcc, "-std=c++17", "-cubin", f"-gencode=arch={arch}", "-Xptxas", "-v"]
        if inst.fast_math:
            cmd.append("--use_fast_math")
        cubin = Path(tmp) / "inst.cubin"
        cmd += [f"-I{kernels.resolve()}", f"-I{KERNEL_DIR}", *extra, str(unit), "-o", str(cubin)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode == 0 and cuobjdump:
            sass = subprocess.run(
                [cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=False
            ).stdout
            numbers = [int(x) for x in re.findall(r"\bR(\d+)\b", sass)]
            report.sass_registers = max(numbers) + 1 if numbers else None
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        report.error = log.strip()[-2000:]
        return report
    used = _USED.findall(log)
    frame = _FRAME.findall(log)
    if used:
        report.registers = int(used[-1])
    if frame:
        report.stack_bytes, report.spill_stores, report.spill_loads = map(int, frame[-1])
    # Warnings, and ptxas's notes that it serialized the wgmmas (a silent 2x slowdown).
    report.warnings = "; ".join(
        line.strip()
        for line in log.splitlines()
        if "warning" in line.lower() or "Performance Loss" in line
    )[:600]
    return report


def _fmt(r: dict | None) -> str:
    if r is None:
        return "-"
    if r.get("error"):
        return "ERROR"
    used = f" (SASS {r['sass_registers']})" if r.get("sass_registers") else ""
    return (
        f"{r['registers']} r{used}, {r['spill_stores']}/{r['spill_loads']} sp, "
        f"{r['stack_bytes']} st"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kernels", default=str(KERNEL_DIR), help="directory of the .cu files")
    p.add_argument("--only", default="", help="comma-separated label prefixes to keep")
    p.add_argument("--json", default="", help="write the report here")
    p.add_argument("--compare", default="", help="an earlier --json report to show beside")
    p.add_argument("--nvcc", default=shutil.which("nvcc") or "nvcc")
    p.add_argument(
        "--cuobjdump",
        default=shutil.which("cuobjdump") or "",
        help="for the registers the SASS really uses (warp-specialized kernels raise their cap "
        "with setmaxnreg); triton's wheel ships one under triton/backends/nvidia/bin",
    )
    p.add_argument("--define", action="append", default=[], help="extra -D for every instance")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = p.parse_args(argv)

    prefixes = [s for s in args.only.split(",") if s]
    instances = [i for i in _instances() if not prefixes or i.label.startswith(tuple(prefixes))]
    extra = [f"-D{d}" for d in args.define]
    kernels = Path(args.kernels)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        reports = list(
            pool.map(
                lambda i: compile_instance(i, kernels, args.nvcc, extra, args.cuobjdump or None),
                instances,
            )
        )
    earlier = {}
    if args.compare:
        earlier = {r["label"]: r for r in json.loads(Path(args.compare).read_text())["reports"]}
    failed = 0
    width = max(len(r.label) for r in reports) if reports else 10
    head = f"{'instance':{width}}  {'registers, spill st/ld bytes, stack bytes':44}"
    # "registers" is ptxas's count (the cap at entry for setmaxnreg kernels); "SASS" is the
    # highest register the code uses + 1, shown when --cuobjdump is available.
    print(head + ("  earlier" if earlier else ""))
    for r in reports:
        d = asdict(r)
        line = f"{r.label:{width}}  {_fmt(d):44}"
        if earlier:
            before = earlier.get(r.label)
            same = before is not None and all(
                before.get(k) == d.get(k)
                for k in ("registers", "stack_bytes", "spill_stores", "spill_loads")
            )
            marker = "" if same or before is None else "   <- differs"
            line += f"  {_fmt(before)}{marker}"
        print(line)
        if r.error:
            failed += 1
            print("    " + r.error.replace("\n", "\n    ")[:1500])
        elif r.warnings:
            print("    " + r.warnings)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"kernels": str(kernels), "reports": [asdict(r) for r in reports]}, indent=1)
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
