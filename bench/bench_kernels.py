"""Benchmark the tiled attention kernels against torch SDPA (FlashAttention-2 and cuDNN) on a GPU.

One run measures, for every selected config: our fused tensor-core kernels through their one
launch path (`prepare` -> gpu.launch.flash_launch.Prepared): `mma` (mma.sync), `wgmma` (Hopper
wgmma) and `ws` (warp-specialized, TMA + ping-pong), each optionally with several variants; our
readable tiled kernel and our naive path (through `gpu.backends.cuda_backend`); and torch's SDPA
with the FLASH_ATTENTION and CUDNN_ATTENTION backends as peers. torch is imported here only; the app
never needs it.

Timing: CUDA events around a batch of back-to-back launches (so launch overhead hides behind
the queue), after warm-up; the median over repeats; inputs rotate among enough fresh random
sets that they do not sit in L2. TFLOP/s counts the useful 4·B·h·N²·d (halved when causal).

Examples:
    python bench/bench_kernels.py --seq 1024,2048,4096,8192,16384,32768 --dtypes fp16,bf16 \
        --json $OUT/bench.json --plot $OUT/bench.png
    # the same kernels built from an older copy of gpu/kernels, against the current sources
    python bench/bench_kernels.py --compare-sources .old-kernels --seq 4096,16384 \
        --impls readable,mma,wgmma --json $OUT/compare.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu.config import AttentionConfig
from gpu.model.costmodel import useful_flops

ALL_IMPLS = ("mma", "wgmma", "ws", "readable", "naive", "sdpa_flash", "sdpa_cudnn")
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


def parse_wgmma_variants(spec: str) -> dict[int, list[tuple[int, int, bool]]]:
    """'128=128x2r,128x2s' -> {128: [(128, 2, True), (128, 2, False)]} (r: Q in registers)."""
    out: dict[int, list[tuple[int, int, bool]]] = {}
    for part in filter(None, spec.split(";")):
        dim, _, variants = part.partition("=")
        for v in filter(None, variants.split(",")):
            bn, _, rest = v.partition("x")
            out.setdefault(int(dim), []).append((int(bn), int(rest[:-1]), rest[-1] == "r"))
    return out


def fused_launches(impl: str, head_dim: int, args: argparse.Namespace) -> list[tuple[str, Any]]:
    """(row name, variant) of a fused kernel at one head dim: the default variant first (named
    `impl`), then the variants asked for on the command line."""
    module = FUSED_MODULES[impl]()
    launches = [module.default_launch(head_dim)]
    if impl == "mma":
        for bm, bn, minb in parse_variants(args.mma_variants).get(head_dim, []):
            launches.append(module.MmaLaunch(head_dim, bm, bn, minb))
    elif impl == "wgmma":
        for bn, stages, q_regs in parse_wgmma_variants(args.wgmma_variants).get(head_dim, []):
            launches.append(module.WgmmaLaunch(head_dim, bn, stages, q_regs))
    elif impl == "ws":
        wanted = {s for s in args.ws_variants.split(",") if s}
        for v in module.all_variants():
            if v.head_dim == head_dim and ("all" in wanted or v.label in wanted):
                launches.append(v)
    out: list[tuple[str, Any]] = []
    for launch in launches:
        if launch in (existing for _, existing in out):
            continue
        name = impl if not out else f"{impl}_{variant_label(launch)}"
        out.append((name, launch))
    return out


def variant_label(launch: Any) -> str:
    """A short variant name for table rows."""
    if hasattr(launch, "label"):
        return launch.label
    if hasattr(launch, "q_in_registers"):
        return f"{launch.block_n}x{launch.stages}{'r' if launch.q_in_registers else 's'}"
    return f"{launch.block_m}x{launch.block_n}"


#: impl name -> the module that launches it (imported lazily: CuPy is needed only here).
FUSED_MODULES: dict[str, Callable[[], Any]] = {
    "mma": lambda: __import__("gpu.launch.flash_mma", fromlist=["x"]),
    "wgmma": lambda: __import__("gpu.launch.flash_wgmma", fromlist=["x"]),
    "ws": lambda: __import__("gpu.launch.flash_ws", fromlist=["x"]),
}


def bench_fused(
    impl: str,
    name: str,
    launch: Any,
    config: AttentionConfig,
    sets: list,
    args: argparse.Namespace,
    out: Any,
    flash_out: Any = None,
    prepared: Any = None,
) -> Row:
    """Time one fused kernel variant through its `prepare` (or a given `Prepared`): one checked
    launch through the public path, then back-to-back launches with arguments made once per
    input set."""
    import cupy as cp

    from gpu.launch import flash_launch

    module = FUSED_MODULES[impl]()
    row = Row(name, config.dtype, config.heads, config.head_dim, config.seq_len, config.causal)
    reason = module.supports(config)
    if reason is not None:
        row.error = reason[:300]
        return row
    shape = (config.batch, config.heads, config.seq_len)
    m = cp.empty(shape, dtype=cp.float32)
    l = cp.empty(shape, dtype=cp.float32)
    try:
        prepared = prepared or module.prepare(config, launch)
        flash_launch.run(prepared, *sets[0], out, m, l, config)
        if flash_out is not None:
            row.max_abs_diff_vs_flash = _diff_vs_flash(out, flash_out, config.dtype)
        argsets = [prepared.arguments(q, k, v, out, m, l) for q, k, v in sets]

        def run(i: int) -> None:
            prepared.launch_with(argsets[i % len(argsets)])

        row.ms = time_launches(run, args.repeats, args.target_ms)
        row.extra = {
            "variant": asdict(launch),
            "tiles": [launch.block_m, launch.block_n],
            **module.kernel_resources(launch, config.causal, config.dtype == "bf16"),
        }
    except Exception as exc:  # record and go on: one failure must not lose the whole run
        row.error = f"{type(exc).__name__}: {exc}"[:300]
    return row


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
        from gpu.backend_factory import create_backend
        from gpu.backends.backend import RunOptions

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
                    ours = ("mma", "wgmma", "ws", "readable", "naive")
                    style = "-" if impl.startswith(ours) else "--"
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
# Old sources against new, in one process


def prepared_from_source(impl: str, config: AttentionConfig, source: Path | None) -> Any:
    """The default variant's `Prepared` for `config`, its kernel compiled from `source` (a .cu
    file elsewhere, e.g. a copy from before a change) instead of gpu/kernels when given."""
    import dataclasses

    from gpu.launch import flash_launch, flash_readable
    from gpu.launch.cuda_kernels import get_kernel

    if impl == "readable":
        prepared = flash_readable.prepare(config)
        name, options = flash_readable.kernel_name(config), ()
    else:
        module = FUSED_MODULES[impl]()
        launch = module.default_launch(config.head_dim)
        prepared = module.prepare(config, launch)
        name = launch.template_name(config.causal, config.dtype == "bf16")
        options = module.COMPILE_OPTIONS
    if source is None:
        return prepared
    kernel = get_kernel(source, name, options)
    flash_launch.set_max_dynamic_smem(kernel, prepared.smem_bytes)
    return dataclasses.replace(prepared, kernel=kernel)


def compare_sources(args: argparse.Namespace, configs: list[AttentionConfig]) -> list[dict]:
    """Time each fused kernel built from the current sources and from `--compare-sources DIR`
    (same file names) on the same inputs, alternating old and new `--rounds` times, and report
    new/old per config. Outputs must agree exactly (the same arithmetic)."""
    import cupy as cp

    from gpu.launch import flash_launch

    old_dir = Path(args.compare_sources)
    impls = [i for i in args.impls.split(",") if i in ("readable", "mma", "wgmma")]
    results = []
    for config in configs:
        sets = make_sets(config, seed=config.seq_len * 7 + config.head_dim + config.causal)
        shape = (config.batch, config.heads, config.seq_len)
        for impl in impls:
            module = FUSED_MODULES[impl]() if impl != "readable" else None
            if module is not None and module.supports(config) is not None:
                continue
            source = module.SOURCE if module else "flash_readable.cu"
            entry = {"impl": impl, "config": config.label(), "dtype": config.dtype,
                     "head_dim": config.head_dim, "seq_len": config.seq_len,
                     "causal": config.causal}  # fmt: skip
            try:
                new = prepared_from_source(impl, config, None)
                old = prepared_from_source(impl, config, old_dir / source)
                outs = {}
                for tag, prepared in (("new", new), ("old", old)):
                    o = cp.empty_like(sets[0][0])
                    m = cp.empty(shape, dtype=cp.float32)
                    l = cp.empty(shape, dtype=cp.float32)
                    flash_launch.run(prepared, *sets[0], o, m, l, config)
                    outs[tag] = (o, m, l)
                same = all(
                    bool((a.view(cp.uint8) == b.view(cp.uint8)).all())
                    for a, b in zip(outs["new"], outs["old"], strict=True)
                )
                times: dict[str, list[float]] = {"new": [], "old": []}
                for _ in range(args.rounds):
                    for tag, prepared in (("old", old), ("new", new)):
                        o, m, l = outs[tag]
                        argsets = [prepared.arguments(q, k, v, o, m, l) for q, k, v in sets]
                        times[tag].append(
                            time_launches(
                                lambda i, p=prepared, a=argsets: p.launch_with(a[i % len(a)]),
                                args.repeats,
                                args.target_ms,
                            )
                        )
                entry.update(
                    old_ms=statistics.median(times["old"]),
                    new_ms=statistics.median(times["new"]),
                    old_all=times["old"], new_all=times["new"], identical_output=same,
                )  # fmt: skip
                entry["new_over_old"] = entry["new_ms"] / entry["old_ms"]
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"[:400]
            results.append(entry)
            print(f"  {impl:8} {config.label()}: {_compare_line(entry)}", flush=True)
        del sets
        cp.get_default_memory_pool().free_all_blocks()
    print()
    print(f"{'impl':8} {'dtype':5} {'d':>4} {'N':>6} {'causal':6} {'old ms':>9} {'new ms':>9} "
          f"{'new/old':>8}  verdict")  # fmt: skip
    for e in results:
        print(f"{e['impl']:8} {e['dtype']:5} {e['head_dim']:>4} {e['seq_len']:>6} "
              f"{('yes' if e['causal'] else 'no'):6} {_compare_line(e)}")  # fmt: skip
    ok = [e for e in results if "error" not in e]
    within = sum(abs(e["new_over_old"] - 1) <= 0.01 for e in ok)
    same = sum(e["identical_output"] for e in ok)
    print(f"{within} of {len(ok)} within 1% ({len(results) - len(ok)} failed); "
          f"outputs identical in {same} of {len(ok)}")  # fmt: skip
    return results


def _compare_line(e: dict) -> str:
    if "error" in e:
        return "ERROR " + e["error"][:100]
    verdict = "ok" if abs(e["new_over_old"] - 1) <= 0.01 else "OUTSIDE 1%"
    same = "" if e["identical_output"] else " (outputs differ)"
    return f"{e['old_ms']:9.4f} {e['new_ms']:9.4f} {e['new_over_old']:8.4f}  {verdict}{same}"


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
    p.add_argument(
        "--ws-variants",
        default="",
        help="extra warp-specialized variants by label (gpu.launch.flash_ws.WsLaunch.label), "
        "or 'all'",
    )
    p.add_argument("--naive-max-n", type=int, default=16384)
    p.add_argument("--readable-max-n", type=int, default=32768)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--target-ms", type=float, default=10.0, help="GPU time per timed batch")
    p.add_argument(
        "--compare-sources",
        default="",
        metavar="DIR",
        help="time the fused kernels built from DIR/<same .cu names> against the current "
        "sources, alternating, and report new/old (speed within 1%%)",
    )
    p.add_argument("--rounds", type=int, default=3, help="old/new alternations (compare mode)")
    p.add_argument("--json", default="", help="write all rows here")
    p.add_argument("--plot", default="", help="write a PNG plot here")
    args = p.parse_args(argv)

    import cupy as cp

    impls = [s for s in args.impls.split(",") if s]
    unknown = set(impls) - set(ALL_IMPLS)
    if unknown:
        p.error(f"unknown impls {sorted(unknown)}; known: {', '.join(ALL_IMPLS)}")
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

    if args.compare_sources:
        configs = [
            AttentionConfig(seq_len=n, heads=h, head_dim=d, batch=1, dtype=dt, causal=c)
            for dt in dtypes
            for h, d in shapes
            for c in causals
            for n in seqs
        ]
        results = compare_sources(args, configs)
        if args.json:
            Path(args.json).write_text(
                json.dumps({"device": device, "args": vars(args), "compare": results}, indent=1)
            )
        return 0 if all("error" not in e for e in results) else 1

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
                    for impl in ("mma", "wgmma", "ws"):
                        if impl in impls:
                            for name, launch in fused_launches(impl, d, args):
                                group.append(
                                    bench_fused(impl, name, launch, config, sets, args, out,
                                                flash_out)
                                )  # fmt: skip
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
