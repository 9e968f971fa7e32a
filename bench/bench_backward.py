"""Benchmark the backward passes against torch's on a GPU, at FlashAttention-3's shapes.

Ours: the fused backward (gpu/launch/flash_bwd.py: preprocess + flash_bwd + dQ convert, or the
deterministic dQ pass; `ours_fused` runs the main kernel this GPU gets by default, the wgmma one
on an H100/H200, and `ours_fused_mma` the mma.sync one) and the naive backward
(gpu/backends/naive_bwd.py: four cuBLAS GEMMs and our softmax backward). Peers, in the same
process: torch autograd through scaled_dot_product_attention with the FLASH_ATTENTION
(FlashAttention-2), CUDNN_ATTENTION and MATH backends. Only the backward is timed: each input
set's forward runs once, untimed, and keeps what its backward needs (torch: its autograd graph,
retained; ours: O, m, l or P).

Method: one process; ≥ 30 s of continuous device work first (clocks settle); then per shape,
rounds in which every method is measured in turn (interleaved), each sample a batch of
back-to-back backward calls between two CUDA events, the inputs rotating over sets that add up
to several times the 60 MB L2 so no call starts from a warm cache (the naive and math paths
move N×N matrices far larger than the L2 and use one set; those two are interleaved where both
fit in device memory at once, one after the other where not, which each row's note says). Per
method: the median of each round's samples, then the median over rounds, with the spread of the
round medians.
TFLOP/s counts the backward's useful work as the app does (gpu.model.backward_cost): the four
products dV, dP, dQ and dK, 8·B·h·N²·d, halved when causal; the fused kernel's recompute of S is
not useful work.

Shapes (FlashAttention-3, section 4.1): 16k tokens in all (batch = 16384 / N), hidden 2048
(h = 2048 / d), d = 64 and 128, N = 512 ... 16k, causal and not.

    python bench/bench_backward.py --json $OUT/backward.json
    python bench/bench_backward.py --variants 64:128x64,128x128 --seq 1024,4096 --rounds 1
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu.config import AttentionConfig
from gpu.model.backward_cost import backward_useful_flops

TOKENS = 16384
HIDDEN = 2048
ROTATE_BYTES = 256 * 2**20
FUSED = ("ours_fused", "ours_fused_det", "ours_fused_mma", "sdpa_flash", "sdpa_cudnn")
NAIVE = ("ours_naive", "sdpa_math")


def backward_flops(config: AttentionConfig) -> float:
    """Useful FLOPs of one backward, the app's own figure: 8·B·h·N²·d (÷ 2 causal)."""
    return float(backward_useful_flops(config))


def time_batch(call: Callable[[int], None], sets: int, samples: int, target_ms: float) -> float:
    """Median ms per call over `samples` batches of back-to-back calls (call(i) uses set i)."""
    import cupy as cp

    start, stop = cp.cuda.Event(), cp.cuda.Event()
    call(0)
    start.record()
    call(1 % sets)
    stop.record()
    stop.synchronize()
    est = max(cp.cuda.get_elapsed_time(start, stop), 1e-3)
    inner = max(sets, min(200, math.ceil(target_ms / est)))
    out = []
    for _ in range(samples):
        start.record()
        for i in range(inner):
            call(i % sets)
        stop.record()
        stop.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, stop) / inner)
    return statistics.median(out)


def _random(shape: tuple[int, ...], dtype: str, rng: Any) -> Any:
    import cupy as cp

    from gpu.backends.cuda_arrays import from_float32

    return from_float32(rng.standard_normal(shape, dtype=cp.float32), dtype)


def _torch_view(x: Any, dtype: str) -> Any:
    import torch

    t = torch.from_dlpack(x)
    return t.view(torch.bfloat16) if dtype == "bf16" else t


class FusedSetup:
    """Input sets for one shape with our forward's O, m, l (for our fused backward) and torch
    graphs for SDPA's backends, built lazily per backend."""

    def __init__(self, config: AttentionConfig, seed: int, variant: Any = None) -> None:
        import cupy as cp

        from gpu.launch import flash_bwd, flash_mma

        self.config = config
        shape = (config.batch, config.heads, config.seq_len, config.head_dim)
        per_set = 8 * math.prod(shape) * 2
        self.nsets = max(2, math.ceil(ROTATE_BYTES / per_set))
        rng = cp.random.RandomState(seed)
        self.sets = []
        stats = shape[:3]
        for _ in range(self.nsets):
            a = {n: _random(shape, config.dtype, rng) for n in ("q", "k", "v", "do")}
            a["o"] = cp.empty_like(a["q"])
            a["m"] = cp.empty(stats, dtype=cp.float32)
            a["l"] = cp.empty(stats, dtype=cp.float32)
            flash_mma.flash_forward(a["q"], a["k"], a["v"], a["o"], a["m"], a["l"], config)
            for n in ("dq", "dk", "dv"):
                a[n] = cp.empty_like(a["q"])
            self.sets.append(a)
        self._plans: dict[tuple, Any] = {}
        self._variant = variant
        self._flash_bwd = flash_bwd
        self.mma_launch = flash_bwd.default_launch(config.head_dim)
        self._graphs: dict[str, list] = {}

    def ours(self, deterministic: bool, variant: Any = None) -> Callable[[int], None]:
        variant = variant or self._variant
        key = (deterministic, variant)
        if key not in self._plans:
            plan = self._flash_bwd.prepare_backward(self.config, deterministic, variant)
            per_set = []
            for a in self.sets:
                a = dict(a)
                a.update(plan.workspace())
                per_set.append([f for _, f in plan.launches(a)])
            self._plans[key] = per_set
        per_set = self._plans[key]

        def call(i: int) -> None:
            for f in per_set[i]:
                f()

        return call

    def kernel_calls(self, deterministic: bool) -> list[Callable[[int], None]]:
        """One call per kernel of our default backward (each alone, for a breakdown)."""
        self.ours(deterministic)
        per_set = self._plans[(deterministic, self._variant)]
        return [functools.partial(_run_kernel, per_set, k) for k in range(len(per_set[0]))]

    def kernel_names(self, deterministic: bool) -> tuple[str, ...]:
        return self._flash_bwd.prepare_backward(self.config, deterministic).kernel_names

    def grads_of(self, deterministic: bool, variant: Any = None) -> tuple[Any, Any, Any]:
        self.ours(deterministic, variant)(0)
        a = self.sets[0]
        return a["dq"], a["dk"], a["dv"]

    def torch_call(self, backend: str) -> Callable[[int], None]:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel

        c = self.config
        if backend not in self._graphs:
            graphs = []
            for a in self.sets:
                q, k, v = (
                    _torch_view(a[n], c.dtype).detach().clone().requires_grad_(True)
                    for n in ("q", "k", "v")
                )
                with sdpa_kernel(getattr(SDPBackend, backend)):
                    o = torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, is_causal=c.causal
                    )
                graphs.append((o, (q, k, v), _torch_view(a["do"], c.dtype)))
            self._graphs = {backend: graphs}  # one backend's graphs alive at a time
        graphs = self._graphs[backend]

        def call(i: int) -> None:
            o, inputs, do = graphs[i]
            torch.autograd.grad(o, inputs, do, retain_graph=True)

        return call

    def torch_grads(self, backend: str) -> tuple[Any, ...]:
        import torch

        self.torch_call(backend)
        o, inputs, do = self._graphs[backend][0]
        return tuple(g.float() for g in torch.autograd.grad(o, inputs, do, retain_graph=True))


def _run_kernel(per_set: list[list[Callable[[], None]]], k: int, i: int) -> None:
    per_set[i][k]()


def _max_diff(ours: Any, theirs: Any, dtype: str) -> float:
    import cupy as cp

    from gpu.backends.cuda_arrays import to_float32

    return float(cp.abs(to_float32(ours, dtype) - cp.from_dlpack(theirs.contiguous())).max())


def bench_fused_shape(config: AttentionConfig, args: argparse.Namespace) -> list[dict]:
    import cupy as cp

    if not args.fused_methods:
        return []
    setup = FusedSetup(config, seed=config.seq_len + config.head_dim + config.causal)
    calls: dict[str, Callable[[int], None]] = {}
    notes: dict[str, str] = {}
    for method in args.fused_methods:
        try:
            if method == "ours_fused":
                calls[method] = setup.ours(False)
            elif method == "ours_fused_det":
                calls[method] = setup.ours(True)
            elif method == "ours_fused_mma":
                calls[method] = setup.ours(False, setup.mma_launch)
            elif method == "sdpa_flash":
                calls[method] = setup.torch_call("FLASH_ATTENTION")
            elif method == "sdpa_cudnn":
                calls[method] = setup.torch_call("CUDNN_ATTENTION")
        except Exception as exc:  # a backend that refuses the shape is reported, not fatal
            notes[method] = f"{type(exc).__name__}: {exc}"[:200]
    # One graph family alive at a time: the torch methods rebuild theirs when they come round.
    samples: dict[str, list[float]] = {m: [] for m in calls}
    for _ in range(args.rounds):
        for method in calls:
            if method.startswith("sdpa"):
                calls[method] = setup.torch_call(
                    "FLASH_ATTENTION" if method == "sdpa_flash" else "CUDNN_ATTENTION"
                )
            samples[method].append(time_batch(calls[method], setup.nsets, args.samples, 20.0))
    # Agreement with SDPA flash's gradients (same inputs), and variants if asked.
    diffs: dict[str, float] = {}
    try:
        ref = setup.torch_grads("FLASH_ATTENTION")
        for label, det, variant in (
            ("atomic", False, None),
            ("det", True, None),
            ("mma", False, setup.mma_launch),
        ):
            got = setup.grads_of(det, variant)
            diffs[label] = max(_max_diff(g, r, config.dtype) for g, r in zip(got, ref, strict=True))
    except Exception as exc:
        notes["diff"] = f"{type(exc).__name__}: {exc}"[:200]
    rows = []
    for method, ms_list in samples.items():
        rows.append(_row(config, method, ms_list, notes.get(method, "")))
    for method, note in notes.items():
        if method not in samples and method != "diff":
            rows.append(_row(config, method, [], note))
    for r in rows:
        r["max_abs_diff_vs_sdpa_flash"] = diffs
    for variant in args.variants.get(config.head_dim, []):
        call = setup.ours(False, variant)
        ms = [time_batch(call, setup.nsets, args.samples, 20.0) for _ in range(args.rounds)]
        label = f"variant {variant.block_n}x{variant.block_m}s{variant.ds_stages}"
        rows.append(_row(config, label, ms, ""))
    if args.breakdown:
        for det in (False, True):
            for k, call in enumerate(setup.kernel_calls(det)):
                ms = [time_batch(call, setup.nsets, args.samples, 20.0)]
                name = ("det " if det else "") + setup.kernel_names(det)[k]
                rows.append(_row(config, f"kernel {name}", ms, ""))
    del setup
    cp.get_default_memory_pool().free_all_blocks()
    return rows


def _setup_ours_naive(config: AttentionConfig) -> Callable[[int], None]:
    """Our naive backward, ready to call: P from one forward, S's memory reused for dS (the
    buffers live as long as the returned call)."""
    import cupy as cp

    from gpu.backends import naive_bwd, naive_fwd

    rng = cp.random.RandomState(7)
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    a = {x: _random(shape, config.dtype, rng) for x in ("q", "k", "v", "do")}
    n = config.seq_len
    s = cp.empty((config.batch, config.heads, n, n), dtype=a["q"].dtype)
    a["p"] = cp.empty_like(s)
    naive_fwd.naive_forward(a["q"], a["k"], a["v"], s, a["p"], cp.empty_like(a["q"]), config)
    a["ds"] = s  # S is dead once P exists: its memory holds dS
    launches = [f for _, f in naive_bwd.backward_launches(config, a)]

    def ours(i: int) -> None:
        for f in launches:
            f()

    return ours


def _setup_sdpa_math(config: AttentionConfig) -> Callable[[int], None]:
    """torch's math backward, ready to call: the forward's autograd graph is retained (it
    lives as long as the returned call)."""
    import cupy as cp
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rng = cp.random.RandomState(8)
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    q, k, v = (
        _torch_view(_random(shape, config.dtype, rng), config.dtype).requires_grad_(True)
        for _ in range(3)
    )
    do = _torch_view(_random(shape, config.dtype, rng), config.dtype)
    with sdpa_kernel(SDPBackend.MATH):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=config.causal)

    def math_call(i: int) -> None:
        torch.autograd.grad(o, (q, k, v), do, retain_graph=True)

    return math_call


NAIVE_SETUPS = {"ours_naive": _setup_ours_naive, "sdpa_math": _setup_sdpa_math}


def _free_device_memory() -> None:
    import cupy as cp
    import torch

    cp.get_default_memory_pool().free_all_blocks()
    torch.cuda.empty_cache()


def bench_naive_shape(config: AttentionConfig, args: argparse.Namespace) -> list[dict]:
    """Our naive backward vs torch's math backward; one input set each (N×N ≫ L2).
    Interleaved like the fused methods (rounds alternate between the two, the order reversed
    every other round) where both fit in device memory at once; where they do not, one after
    the other (each holds several N×N matrices), and the row says so."""
    import cupy as cp
    import torch

    oom = (cp.cuda.memory.OutOfMemoryError, torch.OutOfMemoryError)
    calls: dict[str, Callable[[int], None]] = {}
    failed: dict[str, str] = {}
    for method, setup in NAIVE_SETUPS.items():
        try:
            calls[method] = setup(config)
        except oom as exc:
            failed[method] = f"out of memory: {exc}"[:200]
            break
    rows = []
    if not failed:
        samples: dict[str, list[float]] = {m: [] for m in calls}
        try:
            for r in range(args.rounds):
                for method in calls if r % 2 == 0 else list(calls)[::-1]:
                    samples[method].append(time_batch(calls[method], 1, args.samples, 20.0))
        except oom:  # a backward's own temporaries did not fit beside the other's buffers
            failed["both"] = "out of memory while both were held"
        else:
            calls.clear()
            _free_device_memory()
            return [_row(config, m, samples[m], "interleaved") for m in samples]
    # Both at once do not fit: each alone, one after the other.
    calls.clear()
    _free_device_memory()
    for method, setup in NAIVE_SETUPS.items():
        try:
            call = setup(config)
            ms = [time_batch(call, 1, args.samples, 20.0) for _ in range(args.rounds)]
            del call
            rows.append(_row(config, method, ms, "one after the other: both did not fit at once"))
        except oom as exc:
            rows.append(_row(config, method, [], f"out of memory: {exc}"[:200]))
        _free_device_memory()
    return rows


def _row(config: AttentionConfig, method: str, ms_list: list[float], note: str) -> dict:
    ms = statistics.median(ms_list) if ms_list else None
    return {
        "method": method,
        "seq_len": config.seq_len,
        "batch": config.batch,
        "heads": config.heads,
        "head_dim": config.head_dim,
        "dtype": config.dtype,
        "causal": config.causal,
        "ms": ms,
        "round_ms": ms_list,
        "spread": (max(ms_list) - min(ms_list)) / ms if ms else None,
        "tflops": backward_flops(config) / (ms * 1e9) if ms else None,
        "note": note,
    }


def warm_up(seconds: float, dtype: str) -> float:
    """Continuous device work (our fused backward and SDPA flash's at N = 4096) for `seconds`."""
    import cupy as cp

    config = AttentionConfig(seq_len=4096, batch=4, heads=32, head_dim=64, dtype=dtype)
    setup = FusedSetup(config, seed=1)
    ours, theirs = setup.ours(False), setup.torch_call("FLASH_ATTENTION")
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < seconds:
        for _ in range(20):
            ours(i % setup.nsets)
            theirs(i % setup.nsets)
            i += 1
        cp.cuda.get_current_stream().synchronize()
    return time.monotonic() - t0


def configs(args: argparse.Namespace) -> list[AttentionConfig]:
    out = []
    for d in args.head_dims:
        for causal in args.causal:
            for n in args.seq:
                out.append(
                    AttentionConfig(
                        seq_len=n, batch=max(1, TOKENS // n), heads=HIDDEN // d, head_dim=d,
                        dtype=args.dtype, causal=causal,
                    )
                )  # fmt: skip
    return out


def print_table(rows: list[dict]) -> None:
    by_shape: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        key = (r["head_dim"], r["causal"], r["seq_len"])
        by_shape.setdefault(key, {})[r["method"]] = r
    print(f"{'d':>4} {'mask':>6} {'N':>6} | {'ours':>7} {'det':>7} {'mma':>7} {'flash':>7} "
          f"{'cudnn':>7} | {'mma/ours':>8} {'flash/ours':>10} {'cudnn/ours':>10} | {'naive':>7} "
          f"{'math':>8} {'math/naive':>10} | ours TF/s  spread")  # fmt: skip

    def ms(m: dict, k: str) -> float | None:
        return m.get(k, {}).get("ms")

    def f(x: float | None, w: int = 7) -> str:
        return f"{x:{w}.3f}" if x is not None else f"{'—':>{w}}"

    for (d, causal, n), m in sorted(by_shape.items()):
        ours, mma = ms(m, "ours_fused"), ms(m, "ours_fused_mma")
        fl, cu = ms(m, "sdpa_flash"), ms(m, "sdpa_cudnn")
        r0 = mma / ours if mma and ours else None
        nv, mt = ms(m, "ours_naive"), ms(m, "sdpa_math")
        r1 = fl / ours if fl and ours else None
        r2 = cu / ours if cu and ours else None
        r3 = mt / nv if mt and nv else None
        tf = m.get("ours_fused", {}).get("tflops")
        sp = m.get("ours_fused", {}).get("spread")
        print(
            f"{d:>4} {'causal' if causal else 'full':>6} {n:>6} | {f(ours)} "
            f"{f(ms(m, 'ours_fused_det'))} {f(mma)} {f(fl)} {f(cu)} | {f(r0, 8)} {f(r1, 10)} "
            f"{f(r2, 10)} | "
            f"{f(nv)} {f(mt, 8)} {f(r3, 10)} | {f(tf, 8)} {f(sp, 6)}"
        )
        for k, r in m.items():
            if k.startswith("variant") and r["ms"]:
                print(f"{'':>19} {k}: {r['ms']:.3f} ms ({r['tflops']:.0f} TFLOP/s)")
    naive_notes = {r["note"] for r in rows if r["method"] in NAIVE}
    if naive_notes:
        print("naive vs math: " + "; ".join(sorted(naive_notes)))
    for r in rows:
        if r["method"] in NAIVE and r["note"] not in ("interleaved", ""):
            print(f"  {r['method']} d={r['head_dim']} N={r['seq_len']}: {r['note']}")


def parse_variants(spec: str) -> dict[int, list[Any]]:
    """'64:128x64s1,128x128;128:64x64' -> {64: [BwdLaunch(64, 128, 64, 1, 1), ...], ...}
    (keys per block × queries per step, optional sN dS stages; 2 blocks per SM for 64-key
    blocks)."""
    from gpu.launch.flash_bwd import BwdLaunch

    out: dict[int, list[Any]] = {}
    for part in filter(None, spec.split(";")):
        d, shapes = part.split(":")
        for s in shapes.split(","):
            s, _, stages = s.partition("s")
            bc, br = (int(x) for x in s.split("x"))
            out.setdefault(int(d), []).append(
                BwdLaunch(int(d), bc, br, 2 if bc == 64 else 1, int(stages or 2))
            )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seq", default="512,1024,2048,4096,8192,16384")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--causal", default="false,true")
    p.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--warmup-s", type=float, default=30.0)
    p.add_argument("--fused-methods", default=",".join(FUSED))
    p.add_argument("--naive-max-n", type=int, default=16384)
    p.add_argument("--no-naive", action="store_true")
    p.add_argument("--variants", default="", help="extra fused variants, e.g. 64:128x128;128:64x64")
    p.add_argument("--breakdown", action="store_true", help="time each of our kernels alone")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    args.seq = [int(x) for x in args.seq.split(",")]
    args.head_dims = [int(x) for x in args.head_dims.split(",")]
    args.causal = [x.strip().lower() == "true" for x in args.causal.split(",")]
    args.fused_methods = [m for m in args.fused_methods.split(",") if m]
    args.variants = parse_variants(args.variants)

    import cupy as cp
    import torch

    device = cp.cuda.runtime.getDeviceProperties(0)["name"]
    device = device.decode() if isinstance(device, bytes) else str(device)
    warmed = warm_up(args.warmup_s, args.dtype)
    print(f"{device}; torch {torch.__version__}; warm-up {warmed:.1f} s of continuous work",
          flush=True)  # fmt: skip
    rows: list[dict] = []
    t0 = time.monotonic()
    for config in configs(args):
        rows += bench_fused_shape(config, args)
        if not args.no_naive and config.seq_len <= args.naive_max_n:
            rows += bench_naive_shape(config, args)
        print(f"  {config.label()} done at {time.monotonic() - t0:.0f} s", flush=True)
        if args.json:  # keep what is measured even if the run is cut short
            Path(args.json).write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    print_table(rows)
    if args.json:
        meta = {
            "device": device,
            "torch": torch.__version__,
            "cupy": cp.__version__,
            "warmup_s": warmed,
            "rounds": args.rounds,
            "samples_per_round": args.samples,
            "command": "python bench/bench_backward.py " + " ".join(argv or sys.argv[1:]),
        }
        Path(args.json).write_text(json.dumps({**meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
