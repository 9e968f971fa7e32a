"""Tilescope entry point: the desktop app by default, plus headless `model`, `bench` and `render`.

    python main.py                      the desktop app
    python main.py --open results.json  the app, showing a recorded run or saved session
    python main.py model --seq N [...]  the cost model's figures (--json for one JSON object)
    python main.py bench [...]          measure algorithms over sequence lengths
    python main.py render --seq N --out shot.png   headless screenshot of the window

Bad flags or values print one line naming the problem and exit with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from collections.abc import Sequence

from gpu.algorithms import ALGORITHMS, NAIVE, RING, TILED
from gpu.backend import BACKEND_NAMES, BackendUnavailable, RunOptions, create_backend
from gpu.config import DTYPE_BYTES, AttentionConfig, ConfigError
from gpu.costmodel import GPUS, algorithm_cost, attention_matrix_bytes

EXIT_USAGE = 2
EXIT_CHECK_FAILED = 1


class UsageError(Exception):
    """Bad command-line input: reported on one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block, status 2
        raise UsageError(message)


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v.replace("_", "")) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("give at least one value")
    return values


def _algo_list(text: str) -> list[str]:
    algos = [a.strip() for a in text.split(",") if a.strip()]
    for a in algos:
        if a not in ALGORITHMS:
            raise argparse.ArgumentTypeError(
                f"algorithm {a!r} is not one of {', '.join(ALGORITHMS)}"
            )
    if not algos:
        raise argparse.ArgumentTypeError("give at least one algorithm")
    return algos


def _bytes(text: str) -> int:
    """'24GB', '512MiB', '1e9' -> bytes."""
    units = {
        "KIB": 2**10,
        "MIB": 2**20,
        "GIB": 2**30,
        "KB": 10**3,
        "MB": 10**6,
        "GB": 10**9,
        "B": 1,
    }
    t = text.strip().upper()
    for suffix, mult in units.items():
        if t.endswith(suffix):
            t, scale = t[: -len(suffix)], mult
            break
    else:
        scale = 1
    try:
        value = float(t) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 24GB, 512MiB)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return int(value)


def _shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--heads", type=int, default=12, help="attention heads h (default 12)")
    p.add_argument("--head-dim", type=int, default=64, help="head dimension d (default 64)")
    p.add_argument("--batch", type=int, default=1, help="batch size B (default 1)")
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="fp16")
    p.add_argument("--causal", action="store_true", help="apply a causal mask")
    p.add_argument("--block-m", type=int, default=64, help="query rows per tile (readable kernel)")
    p.add_argument("--block-n", type=int, default=64, help="key rows per tile (readable kernel)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tilescope", description="See the attention memory wall.")
    parser.add_argument("--open", metavar="FILE", help="open a recorded run or saved session")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    model = sub.add_parser("model", help="print the cost model's figures for one config")
    model.add_argument("--seq", type=int, required=True, help="sequence length N")
    _shape_args(model)
    model.add_argument("--json", action="store_true", help="print one JSON object")
    model.add_argument("--devices", type=int, default=None, help="add the ring model for P GPUs")

    bench = sub.add_parser("bench", help="measure algorithms over sequence lengths")
    bench.add_argument("--backend", choices=BACKEND_NAMES, default="auto")
    bench.add_argument("--seq", type=_int_list, default=[1024, 2048, 4096])
    _shape_args(bench)
    bench.add_argument("--algo", type=_algo_list, default=None, help="e.g. naive,tiled")
    bench.add_argument(
        "--check", action="store_true", help="compare with the reference; exit 1 on disagreement"
    )
    bench.add_argument("--repeats", type=int, default=5)
    bench.add_argument("--warmup", type=int, default=1)
    bench.add_argument("--budget", type=_bytes, default=None, help="memory budget, e.g. 24GB")
    bench.add_argument(
        "--devices", type=int, default=None, help="ring attention over P devices (--algo ring)"
    )
    bench.add_argument("--out", help="write results to .json or .csv")
    bench.add_argument("--force", action="store_true", help="replace an existing --out file")

    render = sub.add_parser("render", help="headless screenshot of the window")
    render.add_argument("--seq", type=int, required=True)
    render.add_argument("--backend", choices=(*BACKEND_NAMES, "replay"), default="auto")
    _shape_args(render)
    render.add_argument("--open", dest="render_open", metavar="FILE", help="recorded run to show")
    render.add_argument("--out", required=True, help="PNG path")
    render.add_argument("--force", action="store_true", help="replace an existing --out file")
    render.add_argument(
        "--colors", type=int, default=0, help="reduce the PNG to this many colours (2..256)"
    )
    return parser


def _config(args: argparse.Namespace, seq_len: int) -> AttentionConfig:
    return AttentionConfig(
        seq_len=seq_len,
        heads=args.heads,
        head_dim=args.head_dim,
        batch=args.batch,
        dtype=args.dtype,
        causal=args.causal,
        block_m=args.block_m,
        block_n=args.block_n,
    )


# --------------------------------------------------------------------------------------------


def cmd_model(args: argparse.Namespace) -> int:
    cfg = _config(args, args.seq)
    naive, tiled = algorithm_cost(cfg, NAIVE), algorithm_cost(cfg, TILED)
    report = {
        "config": cfg.to_dict(),
        "attn_matrix_bytes": attention_matrix_bytes(cfg),
        "naive_peak_bytes": naive.peak_bytes,
        "tiled_peak_bytes": tiled.peak_bytes,
        "naive_hbm_bytes": naive.hbm_bytes,
        "tiled_hbm_bytes": tiled.hbm_bytes,
        "naive_kernels": {
            k.name: {"bytes_read": k.bytes_read, "bytes_written": k.bytes_written, "flops": k.flops}
            for k in naive.kernels
        },
        "flops": naive.flops,
        "naive_intensity": naive.arithmetic_intensity,
        "tiled_intensity": tiled.arithmetic_intensity,
        "gpus": {
            name: {
                "naive_fits": naive.peak_bytes <= gpu.memory_bytes,
                "ridge_flops_per_byte": gpu.ridge_flops_per_byte,
                "naive_model_ms": naive.modeled_seconds(gpu) * 1e3,
                "tiled_model_ms": tiled.modeled_seconds(gpu) * 1e3,
            }
            for name, gpu in GPUS.items()
        },
    }
    if args.devices is not None:
        report["ring"] = _ring_model(cfg, args.devices)
    if args.json:
        print(json.dumps(report))
        return 0
    print(cfg.label())
    print(f"  one attention matrix (S or P): {_fmt_bytes(report['attn_matrix_bytes'])}")
    for label, cost in (("naive", naive), ("tiled", tiled)):
        print(
            f"  {label} peak:  {_fmt_bytes(cost.peak_bytes):>10}   "
            f"HBM traffic {_fmt_bytes(cost.hbm_bytes)}   "
            f"intensity {cost.arithmetic_intensity:.1f} FLOP/B"
        )
    print(f"  FLOPs: {naive.flops:.3e}")
    for name, g in report["gpus"].items():
        fits = "fits" if g["naive_fits"] else "naive DOES NOT FIT"
        print(
            f"  {name:<18} naive {g['naive_model_ms']:9.3f} ms  tiled {g['tiled_model_ms']:9.3f} ms"
            f"  (model)  {fits}"
        )
    if "ring" in report:
        _print_ring_model(report["ring"])
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from gpu.recording import Recording, RecordingError, save_recording

    configs = [_config(args, n) for n in args.seq]  # validate every N before measuring any
    if args.repeats < 1 or args.warmup < 0:
        raise UsageError("--repeats must be at least 1 and --warmup at least 0")
    if args.out and not args.out.lower().endswith((".json", ".csv")):
        raise UsageError(f"--out {args.out!r}: the file must end in .json or .csv")
    if args.out and not args.force:
        from pathlib import Path

        if Path(args.out).exists():
            raise UsageError(f"--out {args.out!r} exists; add --force to replace it")
    try:
        backend = _bench_backend(args, configs)
    except BackendUnavailable as exc:
        raise UsageError(str(exc)) from exc
    algos = args.algo or list(backend.algorithms())
    missing = [a for a in algos if a not in backend.algorithms()]
    if missing:
        raise UsageError(
            f"--algo {','.join(missing)} is not available on the {backend.name} backend here "
            f"(available: {','.join(backend.algorithms())})"
        )
    options = RunOptions(
        warmup=args.warmup, repeats=args.repeats, check=args.check, budget_bytes=args.budget
    )
    device = backend.device_info()
    print(f"# {backend.name} backend on {device.name}", flush=True)
    print(
        f"{'N':>7} {'algorithm':<10} {'total ms':>10} {'kernels (ms)':<40} {'TFLOP/s':>8} "
        f"{'peak':>10} {'model peak':>10} {'max err':>9}",
        flush=True,
    )
    results = []
    failed: list[str] = []
    skipped: list[str] = []
    for cfg in configs:
        for algo in algos:
            try:
                r = backend.run(cfg, algo, options)
            except ValueError as exc:  # this algorithm cannot run this config here: say so, go on
                print(f"{cfg.seq_len:>7} {algo:<10} {'SKIPPED':>10} {exc}", flush=True)
                skipped.append(f"{algo} at N={cfg.seq_len}")
                continue
            results.append(r)
            print(_bench_row(r), flush=True)
            if args.check and r.agrees is False:
                failed.append(f"{algo} at N={cfg.seq_len}: max abs error {r.max_abs_error:.3g}")
    if args.out:
        meta = {
            "command": "main.py " + " ".join(sys.argv[1:]),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        try:
            save_recording(Recording(device, tuple(results), meta), args.out, overwrite=args.force)
        except (RecordingError, OSError) as exc:
            print(f"tilescope: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"# wrote {len(results)} results to {args.out}")
    if failed:
        print("tilescope: check failed: " + "; ".join(failed), file=sys.stderr)
        return EXIT_CHECK_FAILED
    if skipped and args.check:
        print("tilescope: check incomplete, not run: " + "; ".join(skipped), file=sys.stderr)
        return EXIT_CHECK_FAILED
    return 0


def _bench_row(r) -> str:
    n = r.config.seq_len
    if r.oom:
        return f"{n:>7} {r.algorithm:<10} {'OOM':>10} {r.message}"
    kernels = " ".join(f"{k.name}={k.ms:.3f}" for k in r.kernel_times)
    err = "" if r.max_abs_error is None else f"{r.max_abs_error:.2e}"
    peak = "" if r.peak_bytes is None else _fmt_bytes(r.peak_bytes)
    ring = "" if r.ring is None else "  " + r.ring.summary()
    return (
        f"{n:>7} {r.algorithm:<10} {r.total_ms:>10.3f} {kernels:<40} {r.tflops:>8.2f} "
        f"{peak:>10} {_fmt_bytes(r.model_peak_bytes):>10} {err:>9}{ring}"
    )


def _bench_backend(args: argparse.Namespace, configs: list[AttentionConfig]):
    """The backend `bench` measures on: the ring over --devices P when asked, else the usual."""
    if args.devices is None and not (args.algo and RING in args.algo):
        return create_backend(args.backend)
    from gpu.ring_backend import RingBackend
    from gpu.ring_schedule import RingConfigError

    if args.devices is None:
        raise UsageError("--algo ring needs --devices P (the number of devices in the ring)")
    if args.algo and args.algo != [RING]:
        raise UsageError(
            f"--devices runs the ring alone: use --algo {RING} without other algorithms"
        )
    if args.budget is not None:
        raise UsageError("--budget does not apply to the ring")
    try:
        backend = RingBackend(args.backend, args.devices)
        for cfg in configs:  # refuse N that cannot split before measuring any
            backend.check(cfg)
    except RingConfigError as exc:
        raise UsageError(str(exc)) from exc
    return backend


def _ring_model(cfg: AttentionConfig, devices: int) -> dict:
    from gpu.links import DEFAULT_TOPOLOGY
    from gpu.ring_model import predict
    from gpu.ring_schedule import RingConfigError, check_devices

    try:
        check_devices(devices)
    except RingConfigError as exc:
        raise UsageError(str(exc)) from exc
    prediction = predict(cfg, devices).to_dict()
    prediction["topology"] = DEFAULT_TOPOLOGY.name
    return prediction


def _print_ring_model(p: dict) -> None:
    hidden = "hidden" if p["hidden"] else f"{p['exposed_s'] * 1e3:.3f} ms exposed"
    print(
        f"  ring on {p['devices']} GPUs ({p['link']}, {p['throughput']}): "
        f"{p['total_s'] * 1e3:.3f} ms vs {p['single_s'] * 1e3:.3f} ms on one "
        f"(speed-up {p['speedup']:.2f}, efficiency {p['efficiency']:.0%}); per step "
        f"compute {p['step_compute_s'] * 1e3:.3f} ms, transfer {p['step_transfer_s'] * 1e3:.3f} ms "
        f"({hidden}); {_fmt_bytes(p['peak_bytes_per_device'])} per GPU"
    )


def cmd_render(args: argparse.Namespace) -> int:
    cfg = _config(args, args.seq)
    try:
        from app.launch import render_window
    except ImportError as exc:
        raise UsageError(f"render needs the desktop app's Qt libraries: {exc}") from exc
    if args.colors and not 2 <= args.colors <= 256:
        raise UsageError(f"--colors {args.colors}: give 2 to 256 (or leave it out)")
    return render_window(
        cfg,
        backend=args.backend,
        out=args.out,
        open_path=args.render_open,
        overwrite=args.force,
        colors=args.colors,
    )


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _refuse_bare_double_dash_values(argv: list[str]) -> None:
    """`--seq=--` must be an error: Python 3.11's argparse drops the "--" as its end-of-options
    marker and hands the option an empty list, so `bench` measured nothing and exited 0."""
    for token in argv:
        name, eq, value = token.partition("=")
        if name.startswith("--") and eq and value == "--":
            raise UsageError(f"argument {name}: '--' is not a value")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        _refuse_bare_double_dash_values(argv)
        args = parser.parse_args(argv)
        if args.command == "model":
            return cmd_model(args)
        if args.command == "bench":
            return cmd_bench(args)
        if args.command == "render":
            return cmd_render(args)
    except (UsageError, ConfigError) as exc:
        print(f"tilescope: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("tilescope: interrupted", file=sys.stderr)
        return 130
    from app.launch import run_gui

    return run_gui(open_path=args.open)


if __name__ == "__main__":
    sys.exit(main())
