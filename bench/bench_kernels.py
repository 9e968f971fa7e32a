"""Benchmark the tiled attention kernels against torch SDPA (FlashAttention-2 and cuDNN) on a GPU.

One run measures, for every selected config: our tensor-core kernel (`gpu.flash_mma`, optionally
several tile variants), our Hopper kernel (`gpu.flash_wgmma`, sm_90 only, likewise), our
readable tiled kernel and our naive path (through `gpu.cuda_backend`, when importable), and
torch's SDPA with the FLASH_ATTENTION and
CUDNN_ATTENTION backends as peers. torch is imported here only; the app never needs it.

Timing: CUDA events around a batch of back-to-back launches (so launch overhead hides behind
the queue), after warm-up; the median over repeats; inputs rotate among enough fresh random
sets that they do not sit in L2. TFLOP/s counts the useful 4·B·h·N²·d (halved when causal).

Example (the H200 run in docs/KERNELS.md):
    python bench/bench_kernels.py --seq 1024,2048,4096,8192,16384,32768 --dtypes fp16,bf16 \
        --json $OUT/bench.json --plot $OUT/bench.png
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu.config import AttentionConfig
from gpu.costmodel import useful_flops

ALL_IMPLS = ("mma", "wgmma", "readable", "naive", "sdpa_flash", "sdpa_cudnn")
ROTATE_BYTES = 256 * 2**20  # rotate inputs over at least this much memory (L2 is 60 MB)


@dataclass
class Row:
    impl: str
    dtype: str
    heads: int
    head_dim: int
    seq_len: int
    causal: bool
    ms: float | None = None
    tflops: float | None = None
    error: str = ""
    max_abs_diff_vs_flash: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Timing


def time_launches(launch: Callable[[int], None], repeats: int, target_ms: float) -> float:
    """Median ms of one launch. `launch(i)` enqueues launch number i (i picks the input set)."""
    import cupy as cp

    start, stop = cp.cuda.Event(), cp.cuda.Event()
    # Warm-up: compiles, loads modules, and estimates one launch's time.
    for i in range(2):
        launch(i)
    start.record()
    launch(2)
    stop.record()
    stop.synchronize()
    est = max(cp.cuda.get_elapsed_time(start, stop), 1e-3)
    inner = max(1, min(1000, math.ceil(target_ms / est)))
    samples = []
    count = 3
    for _ in range(repeats):
        start.record()
        for _ in range(inner):
            launch(count)
            count += 1
        stop.record()
        stop.synchronize()
        samples.append(cp.cuda.get_elapsed_time(start, stop) / inner)
    return statistics.median(samples)


def bf16_bits(x32: Any) -> Any:
    import cupy as cp

    u = x32.view(cp.uint32)
    return ((u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16).astype(cp.uint16)


def make_sets(config: AttentionConfig, seed: int) -> list[tuple[Any, Any, Any]]:
    """Random unit-normal (q, k, v) sets in 16-bit storage, enough of them to defeat L2."""
    import cupy as cp

    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    set_bytes = 3 * math.prod(shape) * 2
    n_sets = max(2, min(32, math.ceil(ROTATE_BYTES / set_bytes)))
    rng = cp.random.default_rng(seed)
    sets = []
    for _ in range(n_sets):
        arrays = []
        for _ in range(3):
            x = rng.standard_normal(shape, dtype=cp.float32)
            arrays.append(x.astype(cp.float16) if config.dtype == "fp16" else bf16_bits(x))
        sets.append(tuple(arrays))
    return sets


# ---------------------------------------------------------------------------------------------
# Implementations


def parse_variants(spec: str) -> dict[int, list[tuple[int, int, int]]]:
    """'64=128x64x2,128x128x2;128=128x64x1' -> {64: [(128, 64, 2), ...], 128: [...]}."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    for part in filter(None, spec.split(";")):
        dim, _, variants = part.partition("=")
        out[int(dim)] = [tuple(int(x) for x in v.split("x")) for v in variants.split(",") if v]
    return out


def bench_mma(
    config: AttentionConfig, sets: list, args: argparse.Namespace, variants: list, out: Any
) -> list[Row]:
    import cupy as cp
    import numpy as np

    from gpu import flash_mma

    rows = []
    launches = [flash_mma.default_launch(config.head_dim)]
    for bm, bn, minb in variants:
        launch = flash_mma.MmaLaunch(config.head_dim, bm, bn, minb)
        if launch not in launches:
            launches.append(launch)
    shape = (config.batch, config.heads, config.seq_len)
    m = cp.empty(shape, dtype=cp.float32)
    l = cp.empty(shape, dtype=cp.float32)
    for launch in launches:
        name = "mma" if launch == launches[0] else f"mma_{launch.block_m}x{launch.block_n}"
        row = Row(name, config.dtype, config.heads, config.head_dim, config.seq_len, config.causal)
        try:
            # Validate (and compile) through the public path once, then call the kernel directly.
            flash_mma.launch_forward(*sets[0], out, m, l, config, launch)
            kernel = flash_mma.get_kernel(launch, config.causal, config.dtype == "bf16")
            grid = (math.ceil(config.seq_len / launch.block_m), config.bh)
            scale_log2 = np.float32(math.log2(math.e) / math.sqrt(config.head_dim))
            n = np.int32(config.seq_len)
            argsets = [(q, k, v, out, m, l, n, scale_log2) for q, k, v in sets]

            def run(i: int, kernel=kernel, grid=grid, argsets=argsets, launch=launch) -> None:
                kernel(
                    grid, (launch.threads,), argsets[i % len(argsets)], shared_mem=launch.smem_bytes
                )

            row.ms = time_launches(run, args.repeats, args.target_ms)
            row.extra = {
                "tiles": [launch.block_m, launch.block_n],
                "min_blocks": launch.min_blocks,
                **flash_mma.kernel_resources(launch, config.causal, config.dtype == "bf16"),
            }
        except Exception as exc:  # record and go on: one failure must not lose the whole run
            row.error = f"{type(exc).__name__}: {exc}"[:300]
        rows.append(row)
    return rows


def parse_wgmma_variants(spec: str) -> dict[int, list[tuple[int, int, bool]]]:
    """'128=128x2r,128x2s' -> {128: [(128, 2, True), (128, 2, False)]} (r: Q in registers)."""
    out: dict[int, list[tuple[int, int, bool]]] = {}
    for part in filter(None, spec.split(";")):
        dim, _, variants = part.partition("=")
        for v in filter(None, variants.split(",")):
            bn, _, rest = v.partition("x")
            out.setdefault(int(dim), []).append((int(bn), int(rest[:-1]), rest[-1] == "r"))
    return out


def bench_wgmma(
    config: AttentionConfig, sets: list, args: argparse.Namespace, variants: list, out: Any
) -> list[Row]:
    """Our Hopper kernel (default variant first, then any `--wgmma-variants`)."""
    import cupy as cp

    from gpu import flash_wgmma

    rows = []
    reason = flash_wgmma.supports(config)
    if reason is not None:
        row = Row("wgmma", config.dtype, config.heads, config.head_dim, config.seq_len,
                  config.causal, error=reason[:300])  # fmt: skip
        return [row]
    launches = [flash_wgmma.default_launch(config.head_dim)]
    for bn, stages, q_regs in variants:
        launch = flash_wgmma.WgmmaLaunch(config.head_dim, bn, stages, q_regs)
        if launch not in launches:
            launches.append(launch)
    shape = (config.batch, config.heads, config.seq_len)
    m = cp.empty(shape, dtype=cp.float32)
    l = cp.empty(shape, dtype=cp.float32)
    for launch in launches:
        name = "wgmma"
        if launch != launches[0]:
            name += f"_{launch.block_n}x{launch.stages}{'r' if launch.q_in_registers else 's'}"
        row = Row(name, config.dtype, config.heads, config.head_dim, config.seq_len, config.causal)
        try:
            flash_wgmma.launch_forward(*sets[0], out, m, l, config, launch)
            kernel = flash_wgmma.get_kernel(launch, config.causal, config.dtype == "bf16")
            argsets = [flash_wgmma.launch_args(q, k, v, out, m, l, config) for q, k, v in sets]

            def run(i: int, kernel=kernel, argsets=argsets, launch=launch) -> None:
                grid, kargs = argsets[i % len(argsets)]
                kernel(grid, (launch.threads,), kargs, shared_mem=launch.smem_bytes)

            row.ms = time_launches(run, args.repeats, args.target_ms)
            row.extra = {
                "tiles": [launch.block_m, launch.block_n],
                "stages": launch.stages,
                "q_in_registers": launch.q_in_registers,
                **flash_wgmma.kernel_resources(launch, config.causal, config.dtype == "bf16"),
            }
        except Exception as exc:  # record and go on: one failure must not lose the whole run
            row.error = f"{type(exc).__name__}: {exc}"[:300]
        rows.append(row)
    return rows


def _diff_vs_flash(out: Any, flash_out: Any, dtype: str) -> float:
    import torch

    ours = torch.from_dlpack(out)
    if dtype == "bf16":
        ours = ours.view(torch.bfloat16)
    return (ours.float() - flash_out.float()).abs().max().item()


def bench_backend(config: AttentionConfig, algorithm: str, args: argparse.Namespace) -> Row:
    """Our readable tiled kernel or naive path, timed by the cuda backend itself."""
    name = "readable" if algorithm == "tiled" else "naive"
    row = Row(name, config.dtype, config.heads, config.head_dim, config.seq_len, config.causal)
    try:
        from gpu.backend import RunOptions
        from gpu.backends import create_backend

        backend = create_backend("cuda")
        if algorithm not in backend.algorithms():
            row.error = f"backend does not offer {algorithm!r}"
            return row
        result = backend.run(config, algorithm, RunOptions(warmup=2, repeats=args.repeats))
        if result.oom:
            row.error = "OOM: " + result.message
        else:
            row.ms = result.total_ms
            row.extra = {"kernels": {k.name: k.ms for k in result.kernel_times}}
    except Exception as exc:
        row.error = f"{type(exc).__name__}: {exc}"[:300]
    return row


def torch_views(sets: list, dtype: str) -> list:
    import torch

    def view(a: Any) -> Any:
        t = torch.from_dlpack(a)
        return t.view(torch.bfloat16) if dtype == "bf16" else t

    return [tuple(view(a) for a in s) for s in sets]


def bench_sdpa(
    config: AttentionConfig, tsets: list, backend_name: str, args: argparse.Namespace
) -> tuple[Row, Any]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    impl = "sdpa_flash" if backend_name == "FLASH_ATTENTION" else "sdpa_cudnn"
    row = Row(impl, config.dtype, config.heads, config.head_dim, config.seq_len, config.causal)
    result = None
    try:
        backend = getattr(SDPBackend, backend_name)
        with sdpa_kernel(backend), torch.no_grad():
            result = F.scaled_dot_product_attention(*tsets[0], is_causal=config.causal)

            def run(i: int) -> None:
                F.scaled_dot_product_attention(*tsets[i % len(tsets)], is_causal=config.causal)

            row.ms = time_launches(run, args.repeats, args.target_ms)
    except Exception as exc:
        row.error = f"{type(exc).__name__}: {exc}"[:300]
    return row, result


# ---------------------------------------------------------------------------------------------
# Report


def finish(row: Row, config: AttentionConfig) -> Row:
    if row.ms:
        row.tflops = useful_flops(config) / (row.ms * 1e-3) / 1e12
    return row


def print_table(rows: list[Row]) -> None:
    ref = {
        (r.dtype, r.heads, r.head_dim, r.seq_len, r.causal): r.ms
        for r in rows
        if r.impl == "sdpa_flash" and r.ms
    }
    header = (
        f"{'dtype':5} {'h':>3} {'d':>4} {'N':>6} {'causal':6} {'impl':16} {'ms':>9} "
        f"{'TFLOP/s':>8} {'x flash':>8}  note"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        flash = ref.get((r.dtype, r.heads, r.head_dim, r.seq_len, r.causal))
        ratio = f"{flash / r.ms:8.3f}" if (flash and r.ms) else f"{'':8}"
        ms = f"{r.ms:9.3f}" if r.ms else f"{'-':>9}"
        tf = f"{r.tflops:8.1f}" if r.tflops else f"{'-':>8}"
        note = r.error[:60]
        if r.max_abs_diff_vs_flash is not None:
            note = f"|Δ vs flash| {r.max_abs_diff_vs_flash:.1e} " + note
        if "registers" in r.extra:
            note += f" regs {r.extra['registers']} local {r.extra['local_bytes']}"
        print(
            f"{r.dtype:5} {r.heads:>3} {r.head_dim:>4} {r.seq_len:>6} "
            f"{('yes' if r.causal else 'no'):6} {r.impl:16} {ms} {tf} {ratio}  {note}"
        )


def plot(rows: list[Row], path: str, device: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtypes = sorted({r.dtype for r in rows})
    panels = sorted({(r.heads, r.head_dim, r.causal) for r in rows})
    fig, axes = plt.subplots(
        len(dtypes), len(panels), figsize=(4.2 * len(panels), 3.6 * len(dtypes)), squeeze=False
    )
    impls = list(dict.fromkeys(r.impl for r in rows))
    for i, dtype in enumerate(dtypes):
        for j, (heads, d, causal) in enumerate(panels):
            ax = axes[i][j]
            for impl in impls:
                pts = sorted(
                    (r.seq_len, r.tflops)
                    for r in rows
                    if r.impl == impl
                    and r.dtype == dtype
                    and r.heads == heads
                    and r.head_dim == d
                    and r.causal == causal
                    and r.tflops
                )
                if pts:
                    style = "-" if impl.startswith(("mma", "wgmma", "readable", "naive")) else "--"
                    ax.plot(*zip(*pts, strict=True), style, marker="o", ms=3, label=impl)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{dtype}, h={heads}, d={d}{', causal' if causal else ''}", fontsize=9)
            ax.set_xlabel("sequence length N")
            ax.set_ylabel("TFLOP/s")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(f"Attention forward, batch 1 — {device}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seq", default="1024,2048,4096,8192,16384,32768")
    p.add_argument("--shapes", default="12x64,16x128", help="heads x head_dim pairs")
    p.add_argument("--causal", default="both", choices=("both", "yes", "no"))
    p.add_argument("--dtypes", default="fp16,bf16")
    p.add_argument("--impls", default=",".join(ALL_IMPLS))
    p.add_argument(
        "--mma-variants",
        default="",
        help="extra tensor-core tile variants, e.g. '64=128x128x2,64x64x4;128=64x64x2'",
    )
    p.add_argument(
        "--wgmma-variants",
        default="",
        help="extra Hopper variants: key tile x stages + r|s (Q in registers or smem), "
        "e.g. '128=128x2r,128x2s'",
    )
    p.add_argument("--naive-max-n", type=int, default=16384)
    p.add_argument("--readable-max-n", type=int, default=32768)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--target-ms", type=float, default=10.0, help="GPU time per timed batch")
    p.add_argument("--json", default="", help="write all rows here")
    p.add_argument("--plot", default="", help="write a PNG plot here")
    args = p.parse_args(argv)

    import cupy as cp

    impls = [s for s in args.impls.split(",") if s]
    unknown = set(impls) - set(ALL_IMPLS)
    if unknown:
        p.error(f"unknown impls {sorted(unknown)}; known: {', '.join(ALL_IMPLS)}")
    variants = parse_variants(args.mma_variants)
    wgmma_variants = parse_wgmma_variants(args.wgmma_variants)
    seqs = [int(s) for s in args.seq.split(",") if s]
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s]
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    dtypes = [s for s in args.dtypes.split(",") if s]

    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    torch_ok = False
    if {"sdpa_flash", "sdpa_cudnn"} & set(impls):
        try:
            import torch

            torch_ok = torch.cuda.is_available()
            print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
        except Exception as exc:
            print(f"torch unavailable ({exc}); skipping SDPA peers")
    print(f"device {device}, CuPy {cp.__version__}")

    rows: list[Row] = []
    t0 = time.time()
    for dtype in dtypes:
        for heads, d in shapes:
            for causal in causals:
                for n in seqs:
                    config = AttentionConfig(
                        seq_len=n, heads=heads, head_dim=d, batch=1, dtype=dtype, causal=causal
                    )
                    sets = make_sets(config, seed=n * 7 + d + causal)
                    out = cp.empty_like(sets[0][0])
                    group: list[Row] = []
                    flash_out = None
                    if torch_ok and ("sdpa_flash" in impls or "sdpa_cudnn" in impls):
                        tsets = torch_views(sets, dtype)
                        for name, impl in (
                            ("FLASH_ATTENTION", "sdpa_flash"),
                            ("CUDNN_ATTENTION", "sdpa_cudnn"),
                        ):
                            if impl in impls:
                                row, res = bench_sdpa(config, tsets, name, args)
                                if impl == "sdpa_flash":
                                    flash_out = res
                                group.append(row)
                    if "mma" in impls:
                        mma_rows = bench_mma(config, sets, args, variants.get(d, []), out)
                        if flash_out is not None:
                            import torch

                            from gpu.flash_mma import launch_forward

                            stats = cp.empty((1, heads, n), dtype=cp.float32)
                            for r in mma_rows:
                                if r.ms is None:
                                    continue
                                from gpu.flash_mma import MmaLaunch

                                bm, bn = r.extra["tiles"]
                                launch_forward(
                                    *sets[0],
                                    out,
                                    stats,
                                    stats.copy(),
                                    config,
                                    MmaLaunch(d, bm, bn, r.extra["min_blocks"]),
                                )
                                ours = torch.from_dlpack(out)
                                if dtype == "bf16":
                                    ours = ours.view(torch.bfloat16)
                                diff = (ours.float() - flash_out.float()).abs().max().item()
                                r.max_abs_diff_vs_flash = diff
                        group.extend(mma_rows)
                    if "wgmma" in impls:
                        wg_rows = bench_wgmma(config, sets, args, wgmma_variants.get(d, []), out)
                        if flash_out is not None:
                            from gpu import flash_wgmma

                            stats = cp.empty((1, heads, n), dtype=cp.float32)
                            for r in wg_rows:
                                if r.ms is None:
                                    continue
                                launch = flash_wgmma.WgmmaLaunch(
                                    d, r.extra["tiles"][1], r.extra["stages"],
                                    r.extra["q_in_registers"],
                                )  # fmt: skip
                                flash_wgmma.launch_forward(
                                    *sets[0], out, stats, stats.copy(), config, launch
                                )
                                r.max_abs_diff_vs_flash = _diff_vs_flash(out, flash_out, dtype)
                        group.extend(wg_rows)
                    if "readable" in impls and n <= args.readable_max_n:
                        group.append(bench_backend(config, "tiled", args))
                    if "naive" in impls and n <= args.naive_max_n:
                        group.append(bench_backend(config, "naive", args))
                    for r in group:
                        rows.append(finish(r, config))
                    del sets, out
                    cp.get_default_memory_pool().free_all_blocks()
                    if torch_ok:
                        import torch

                        torch.cuda.empty_cache()
                    print(f"  done {config.label()} ({time.time() - t0:.0f} s)", flush=True)

    print()
    print_table(rows)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"device": device, "args": vars(args), "rows": [r.__dict__ for r in rows]}, indent=1
            )
        )
    if args.plot:
        plot(rows, args.plot, device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
