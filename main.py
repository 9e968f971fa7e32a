"""Tilescope entry point: the desktop app by default, plus headless `model`, `bench` and `render`.

    python main.py                      the desktop app
    python main.py --open results.json  the app, showing a recorded run or saved session
    python main.py model --seq N [...]  the cost model's figures (--json for one JSON object)
    python main.py bench [...]          measure algorithms over sequence lengths
    python main.py explain --seq N [...] roofline verdicts (measured where a recording has them)
    python main.py render --seq N --out shot.png   headless screenshot of the window

Every error reaches the user as one line without a traceback (`report_error`): bad flags, values
or files exit with status 2, a failed check or a failed run with status 1. An error nobody
expected also gets one line, plus a hint: TILESCOPE_DEBUG=1 prints its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import decimal
import json
import math
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpu import exit_status
from gpu.algorithms import ALGORITHMS, NAIVE, RING, TILED
from gpu.backends.backend import RunOptions, oom_result
from gpu.backends.factory import BACKEND_NAMES, create_backend
from gpu.config import DTYPE_BYTES, FORWARD, PASS_LABELS, PASSES, AttentionConfig, ConfigError
from gpu.errors import (
    BackendUnavailable,
    FileReadError,
    FileWriteError,
    TilescopeError,
    UnsupportedConfig,
)
from gpu.files.fileio import (
    MAX_READ_LABEL,
    check_writable,
    remove_partial_files,
    remove_partial_files_on_signals,
)
from gpu.files.schema import MAX_SM_COUNT, MAX_TRACE_BLOCKS
from gpu.launch.cuda_kernels import KernelCompileError
from gpu.model.costmodel import GPUS, algorithm_cost, attention_matrix_bytes, pass_useful_flops
from gpu.units import fmt_bytes, fmt_ms_column

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_CHECK_FAILED = 1
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
DEBUG_ENV = "TILESCOPE_DEBUG"

#: Sequence lengths `bench` measures by default: the CPU runs the same sweep ~1000x slower.
DEFAULT_SEQ = {"cuda": [1024, 2048, 4096], "cpu": [256, 512, 1024]}
#: Largest memory budget: what a signed 64-bit byte count holds (CuPy's pool limit is one).
MAX_BUDGET = 2**63 - 1
#: Image files `render` writes, by suffix.
RENDER_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}

LIMITS_EPILOG = (
    f"Files opened (--open, recordings, sessions, traces) must be regular files of at most "
    f"{MAX_READ_LABEL}, UTF-8 JSON; a trace may hold at most {MAX_SM_COUNT} SMs and "
    f"{MAX_TRACE_BLOCKS:,} blocks. Bad values exit 2, a failed check or run 1."
)


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


_SIZE_UNITS = {
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "B": 1,
}


def _bytes(text: str) -> int:
    """'24GB', '512MiB', '1e9' -> bytes: a finite, whole, positive number of bytes that fits in
    64 bits (so 'inf', '1e400', '1.5B' and '-1GB' are refused rather than meaning no budget or
    rounded). Worked out in exact decimals: 9223372036854775807 is 2^63 - 1, not 2^63."""
    t = text.strip().upper().replace("_", "")
    scale = 1
    for suffix, mult in _SIZE_UNITS.items():
        if t.endswith(suffix):
            t, scale = t[: -len(suffix)].strip(), mult
            break
    try:
        value = decimal.Decimal(t) * scale
    except (decimal.InvalidOperation, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 24GB, 512MiB)") from None
    if not value.is_finite():
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite size")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    if value > MAX_BUDGET:
        raise argparse.ArgumentTypeError(f"{text!r} is more than 2^63 - 1 bytes")
    if value != value.to_integral_value():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes")
    return int(value)


#: Longest run `bench` starts by default when it can estimate it (the simulated ring on P
#: virtual devices: P² block pairs of NumPy calls).
BENCH_TIME_LIMIT_S = 600.0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive, finite number of seconds")
    return value


def _shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--heads", type=int, default=12, help="attention heads h (default 12)")
    p.add_argument("--head-dim", type=int, default=64, help="head dimension d (default 64)")
    p.add_argument("--batch", type=int, default=1, help="batch size B (default 1)")
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="fp16")
    p.add_argument("--causal", action="store_true", help="apply a causal mask")
    p.add_argument("--block-m", type=int, default=64, help="query rows per tile (readable kernel)")
    p.add_argument("--block-n", type=int, default=64, help="key rows per tile (readable kernel)")
    p.add_argument(
        "--pass",
        dest="pass_",
        choices=PASSES,
        default=FORWARD,
        help="forward (inference, the default), backward (the gradients, after an untimed "
        "forward that saves what they need) or step (a training step: forward and backward)",
    )


def _layer_args(p: argparse.ArgumentParser) -> None:
    from gpu.model.layer_stack import LAYERS_MAX, PRESETS

    p.add_argument(
        "--layers",
        type=int,
        default=None,
        help=f"attention layers L of a training step (1..{LAYERS_MAX}; default: the preset's, "
        "else 1): the saved activations of L layers and where they hit the wall",
    )
    p.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default=None,
        help="a model's layers, heads and head dim: "
        + "; ".join(f"{k} = {v.source}" for k, v in PRESETS.items()),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tilescope", description="See the attention memory wall.", epilog=LIMITS_EPILOG
    )
    parser.add_argument(
        "--open",
        metavar="FILE",
        help=f"open a recorded run or saved session (a regular file of at most {MAX_READ_LABEL})",
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    model = sub.add_parser("model", help="print the cost model's figures for one config")
    model.add_argument("--seq", type=int, required=True, help="sequence length N")
    _shape_args(model)
    _layer_args(model)
    model.add_argument("--json", action="store_true", help="print one JSON object")
    model.add_argument("--devices", type=int, default=None, help="add the ring model for P GPUs")

    bench = sub.add_parser(
        "bench",
        help="measure algorithms over sequence lengths",
        description="Measure algorithms over sequence lengths: one table row per run on "
        "stdout; on a terminal, a progress bar with an estimate on stderr.",
        epilog=LIMITS_EPILOG,
    )
    bench.add_argument("--backend", choices=BACKEND_NAMES, default="auto")
    bench.add_argument(
        "--seq",
        type=_int_list,
        default=None,
        help="sequence lengths, e.g. 1024,2048 (default "
        + "; ".join(f"{','.join(map(str, v))} on {k}" for k, v in DEFAULT_SEQ.items())
        + ")",
    )
    _shape_args(bench)
    bench.add_argument("--algo", type=_algo_list, default=None, help="e.g. naive,tiled")
    bench.add_argument(
        "--check", action="store_true", help="compare with the reference; exit 1 on disagreement"
    )
    bench.add_argument("--repeats", type=int, default=5)
    bench.add_argument("--warmup", type=int, default=1)
    bench.add_argument(
        "--budget",
        type=_bytes,
        default=None,
        help="memory budget, e.g. 24GB or 512MiB: a whole number of bytes from 1 to 2^63",
    )
    bench.add_argument(
        "--out",
        help="write results to .json or .csv (checked before measuring; if the final write "
        "fails, the results are kept in a named file in the temporary folder)",
    )
    bench.add_argument(
        "--devices", type=int, default=None, help="ring attention over P devices (--algo ring)"
    )
    bench.add_argument("--force", action="store_true", help="replace an existing --out file")
    bench.add_argument(
        "--time-limit",
        type=_seconds,
        default=BENCH_TIME_LIMIT_S,
        metavar="SECONDS",
        help="refuse, before measuring, a run estimated to take longer (the simulated ring on "
        f"the CPU; default {BENCH_TIME_LIMIT_S:g})",
    )
    bench.add_argument(
        "--profile",
        action="store_true",
        help="also sample DRAM/L2 bytes per kernel with CUPTI (cuda backend; times stay unsampled)",
    )
    _add_explain_parser(sub)

    render = sub.add_parser("render", help="headless screenshot of the window")
    render.add_argument("--seq", type=int, required=True)
    render.add_argument("--backend", choices=(*BACKEND_NAMES, "replay"), default="auto")
    _shape_args(render)
    render.add_argument(
        "--open",
        dest="render_open",
        metavar="FILE",
        help=f"recorded run or session to show (a regular file of at most {MAX_READ_LABEL})",
    )
    render.add_argument("--out", required=True, help="image path: .png, .jpg or .jpeg")
    render.add_argument("--force", action="store_true", help="replace an existing --out file")
    render.add_argument(
        "--colors", type=int, default=0, help="reduce the PNG to this many colours (2..256)"
    )
    return parser


def _config(args: argparse.Namespace, seq_len: int) -> AttentionConfig:
    preset = _preset(args)
    return AttentionConfig(
        seq_len=seq_len,
        heads=preset.heads if preset else args.heads,
        head_dim=preset.head_dim if preset else args.head_dim,
        batch=args.batch,
        dtype=args.dtype,
        causal=args.causal,
        block_m=args.block_m,
        block_n=args.block_n,
        pass_=args.pass_,
    )


def _preset(args: argparse.Namespace):
    """The --preset's model (gpu.model.layer_stack.ModelPreset), None without one; it sets the heads
    and head dim, so --heads or --head-dim beside it is refused rather than ignored."""
    key = getattr(args, "preset", None)
    if key is None:
        return None
    from gpu.model.layer_stack import PRESETS

    if (args.heads, args.head_dim) != (12, 64):
        raise UsageError(
            f"--preset {key} sets the heads and head dim: leave out --heads/--head-dim"
        )
    return PRESETS[key]


def _layers(args: argparse.Namespace) -> int:
    """--layers, else the preset's, else 1; only a training pass stacks saved activations."""
    from gpu.model.layer_stack import check_layers

    preset = _preset(args)
    layers = args.layers if args.layers is not None else (preset.layers if preset else 1)
    if (args.layers is not None or preset is not None) and args.pass_ == FORWARD:
        raise UsageError(
            "--layers and --preset describe a training step: add --pass step (or backward)"
        )
    try:
        return check_layers(layers)
    except ValueError as exc:
        raise UsageError(f"--layers {layers}: {exc}") from None


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
        if cfg.has_backward:
            raise UsageError("--devices models the ring's forward pass: leave out --pass")
        report["ring"] = _ring_model(cfg, args.devices)
    layers = _layers(args)
    if cfg.has_backward:
        report["training"] = _training_model(cfg, layers, _preset(args))
    if args.json:
        print(json.dumps(report))
        return 0
    print(cfg.label())
    print(f"  one attention matrix (S or P): {fmt_bytes(report['attn_matrix_bytes'])}")
    for label, cost in (("naive", naive), ("tiled", tiled)):
        print(
            f"  {label} peak:  {fmt_bytes(cost.peak_bytes):>10}   "
            f"HBM traffic {fmt_bytes(cost.hbm_bytes)}   "
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
    if "training" in report:
        _print_training_model(report["training"])
    return 0


def _training_model(cfg: AttentionConfig, layers: int, preset) -> dict[str, Any]:
    """The training step's figures per algorithm: the backward's useful and recomputed FLOPs,
    the saved activations of one layer and of L, and, per GPU, the N where L layers hit the
    wall (attention's own tensors only: no weights, optimizer state or MLP activations)."""
    from gpu.model.backward_cost import backward_useful_flops, recompute_flops, step_peak_bytes
    from gpu.model.layer_stack import layer_stack, training_wall_seq_len

    algos = {}
    for algo in (NAIVE, TILED):
        stack = layer_stack(cfg, algo, layers)
        cost = algorithm_cost(cfg, algo)
        algos[algo] = {
            "kernels": [k.name for k in cost.kernels],
            "backward_useful_flops": backward_useful_flops(cfg),
            "recompute_flops": recompute_flops(cfg, algo),
            "executed_flops": cost.executed_flops,
            "hbm_bytes": cost.hbm_bytes,
            "step_peak_bytes": step_peak_bytes(cfg, algo),
            "saved_per_layer_bytes": stack.saved_per_layer,
            "saved_total_bytes": stack.saved_total,
            "layers_peak_bytes": stack.peak_bytes,
            "wall_seq_len": {
                name: training_wall_seq_len(cfg, algo, layers, gpu.memory_bytes)
                for name, gpu in GPUS.items()
            },
        }
    return {
        "pass": cfg.pass_,
        "layers": layers,
        "preset": preset.key if preset else None,
        "preset_source": preset.source if preset else None,
        "counts": "attention's own tensors: no weights, optimizer state or MLP activations",
        "algorithms": algos,
    }


def _print_training_model(t: dict[str, Any]) -> None:
    what = f"{t['layers']} layer" + ("s" if t["layers"] != 1 else "")
    if t["preset"]:
        what += f" ({t['preset_source']})"
    print(f"  {PASS_LABELS[t['pass']]}, {what}; {t['counts']}:")
    for algo, a in t["algorithms"].items():
        recompute = f", recompute {a['recompute_flops']:.3e}" if a["recompute_flops"] else ""
        print(
            f"    {algo:<6} saved {fmt_bytes(a['saved_per_layer_bytes'])}/layer, "
            f"{fmt_bytes(a['saved_total_bytes'])} for {t['layers']}; "
            f"peak {fmt_bytes(a['layers_peak_bytes'])}; "
            f"backward FLOPs {a['backward_useful_flops']:.3e} useful{recompute}"
        )
        walls = ", ".join(
            f"{name}: N={n:,}" if n else f"{name}: fits at every N"
            for name, n in a["wall_seq_len"].items()
        )
        print(f"           wall at {walls}")


# --------------------------------------------------------------------------------------------
# bench


def _check_out(args: argparse.Namespace) -> None:
    """Refuse a bad --out before anything is measured: no name, a suffix other than .json or
    .csv, an existing file without --force, a folder that is missing, read-only or full."""
    if args.out is None:
        return
    if not args.out.strip():
        raise UsageError("--out needs a file name (.json or .csv)")
    _refuse_folder_names(args)
    if not args.out.lower().endswith((".json", ".csv")):
        raise UsageError(f"--out {args.out!r}: the file must end in .json or .csv")
    _check_writable_out(args)


def _check_writable_out(args: argparse.Namespace) -> None:
    try:
        check_writable(args.out, overwrite=args.force)
    except FileExistsError:
        raise UsageError(f"--out {args.out!r} exists; add --force to replace it") from None
    except FileWriteError as exc:
        raise UsageError(f"--out {args.out!r}: {exc}") from None


class BenchTable:
    """The rows `bench` prints as it goes: fixed columns (the per-kernel times last, since
    their width varies), throughput in one unit per table (GFLOP/s on the CPU, where TFLOP/s
    would read 0.00)."""

    def __init__(self, algos: Sequence[str], flops_unit: str) -> None:
        self.algo_width = max(9, *(len(a) for a in algos))
        self.unit = flops_unit
        self.scale = 1e3 if flops_unit == "GFLOP/s" else 1.0  # RunResult.tflops is TFLOP/s

    def header(self) -> str:
        return (
            f"{'N':>7} {'algorithm':<{self.algo_width}} {'total ms':>10} {self.unit:>9} "
            f"{'peak':>10} {'model peak':>10} {'max err':>9}  kernels (ms)"
        )

    def row(self, r: Any) -> str:
        n, algo = r.config.seq_len, r.algorithm
        if r.oom:
            return f"{n:>7} {algo:<{self.algo_width}} {'OOM':>10} {r.message}"
        kernels = " ".join(f"{k.name}={k.ms:.3f}" for k in r.kernel_times)
        rate = "" if r.tflops is None else f"{r.tflops * self.scale:.2f}"
        err = "" if r.max_abs_error is None else f"{r.max_abs_error:.2e}"
        peak = "" if r.peak_bytes is None else fmt_bytes(r.peak_bytes)
        total = "" if r.total_ms is None else f"{r.total_ms:.3f}"
        return (
            f"{n:>7} {algo:<{self.algo_width}} {total:>10} {rate:>9} {peak:>10} "
            f"{fmt_bytes(r.model_peak_bytes):>10} {err:>9}  {kernels}"
            + ("" if r.ring is None else "  " + r.ring.summary())
        )

    def note(self, n: int, algo: str, word: str, text: str) -> str:
        return f"{n:>7} {algo:<{self.algo_width}} {word:>10} {text}"


class Progress:
    """A progress bar with an estimate on stderr, only when stderr is a terminal (tqdm). Work
    is counted in FLOPs, not runs, so the estimate holds when N doubles from run to run."""

    def __init__(self, work: list[int]) -> None:
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            size = shutil.get_terminal_size((80, 24))  # a terminal of unknown size: 80×24
            self.bar = tqdm(
                total=sum(work),
                file=sys.stderr,
                leave=False,
                ncols=min(size.columns, 120),
                nrows=size.lines,
                bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}",
            )
        self.done = 0
        self.runs = len(work)

    def start(self, what: str) -> None:
        if self.bar is not None:
            self.bar.set_description_str(f"run {self.done + 1}/{self.runs}: {what}")

    def advance(self, amount: int) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(amount)

    def print(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)
        else:
            print(line, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_bench(args: argparse.Namespace) -> int:
    from gpu.files.recording import Recording, save_recording

    if args.repeats < 1 or args.warmup < 0:
        raise UsageError("--repeats must be at least 1 and --warmup at least 0")
    _check_out(args)
    # every N and the shape flags are checked before a backend starts or anything is measured
    configs = [_config(args, n) for n in args.seq or [1]]
    backend = _bench_backend(args, configs if args.seq else [])
    if args.seq is None:
        configs = [_config(args, n) for n in DEFAULT_SEQ.get(backend.name, DEFAULT_SEQ["cuda"])]
        _check_ring_split(backend, configs)
    algos = args.algo or list(backend.algorithms())
    missing = [a for a in algos if a not in backend.algorithms()]
    if missing:
        raise UsageError(
            f"--algo {','.join(missing)} is not available on the {backend.name} backend here "
            f"(available: {','.join(backend.algorithms())})"
        )
    options = RunOptions(
        warmup=args.warmup, repeats=args.repeats, check=args.check, budget_bytes=args.budget,
        profile=_profile_available(args, backend),
    )  # fmt: skip
    _refuse_long_runs(backend, configs, algos, options, args.time_limit)
    device = backend.device_info()
    table = BenchTable(algos, "GFLOP/s" if backend.name == "cpu" else "TFLOP/s")
    print(f"# {backend.name} backend on {device.name}", flush=True)
    print(table.header(), flush=True)
    runs_each = args.warmup + args.repeats + 1  # + the metered run
    jobs = [(cfg, algo) for cfg in configs for algo in algos]
    progress = Progress([pass_useful_flops(cfg) * runs_each for cfg, _ in jobs])
    results = []
    failed: list[str] = []
    skipped: list[str] = []
    broken: dict[str, str] = {}  # algorithm -> why it cannot run at all (a compile failure)
    try:
        for cfg, algo in jobs:
            n = cfg.seq_len
            progress.start(f"{algo} N={n}")
            if algo in broken:
                progress.print(table.note(n, algo, "SKIPPED", broken[algo]))
                skipped.append(f"{algo} at N={n}")
                progress.advance(pass_useful_flops(cfg) * runs_each)
                continue
            try:
                r = backend.run(cfg, algo, options)
            except ValueError as exc:  # UnsupportedConfig: this config cannot run here
                progress.print(table.note(n, algo, "SKIPPED", _one_line(exc)))
                skipped.append(f"{algo} at N={n}")
            except KernelCompileError as exc:  # the kernel is broken: no N will run it
                broken[algo] = _one_line(exc)
                progress.print(table.note(n, algo, "FAILED", broken[algo]))
            except MemoryError as exc:  # out of memory is a result
                r = oom_result(cfg, algo, backend.name, device.name, exc)
                results.append(r)
                progress.print(table.row(r))
            else:
                results.append(r)
                progress.print(table.row(r) + _traffic_column(r, options))
                if options.profile and not r.oom and not r.traffic:
                    options = _say_traffic_missing_once(r, options)
                if args.check and r.agrees is False:
                    failed.append(f"{algo} at N={n}: max abs error {r.max_abs_error:.3g}")
            progress.advance(pass_useful_flops(cfg) * runs_each)
    finally:
        progress.close()
    if args.out:
        meta = {
            "command": "main.py " + " ".join(sys.argv[1:]),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        recording = Recording(device, tuple(results), meta)
        try:
            save_recording(recording, args.out, overwrite=args.force)
        except (FileWriteError, FileExistsError) as exc:
            kept = _save_fallback(recording, Path(args.out).suffix.lower())
            where = f"; the results were kept in {kept}" if kept else "; the results are lost"
            print(f"tilescope: error: {_one_line(exc)}{where}", file=sys.stderr)
            return EXIT_FAILED
        print(f"# wrote {len(results)} results to {args.out}")
    status = EXIT_OK
    if broken:
        lines = "; ".join(f"{algo}: {why}" for algo, why in broken.items())
        print(f"tilescope: error: {lines}", file=sys.stderr)
        status = EXIT_FAILED
    if failed:
        print("tilescope: check failed: " + "; ".join(failed), file=sys.stderr)
        status = EXIT_CHECK_FAILED
    elif skipped and args.check and not broken:
        print("tilescope: check incomplete, not run: " + "; ".join(skipped), file=sys.stderr)
        status = EXIT_CHECK_FAILED
    return status


def _refuse_long_runs(
    backend, configs: list[AttentionConfig], algos: list[str], options, limit_s: float
) -> None:
    """Say up front how long the runs will take where it can be told (the simulated ring, the
    NumPy backend), on stdout whether or not it is a terminal, and refuse, before anything is
    built or measured, a run estimated past `limit_s`."""
    from gpu.backends.cpu_backend import CpuBackend

    estimate = getattr(backend, "estimate_s", None)
    if estimate is not None:  # the simulated ring: P² block pairs of NumPy calls
        seconds = [(cfg, RING, estimate(cfg, options)) for cfg in configs]
    elif isinstance(backend, CpuBackend):
        seconds = [
            (cfg, a, _cpu_run_seconds(backend, cfg, a, options)) for cfg in configs for a in algos
        ]
    else:
        return
    known = [(cfg, a, s) for cfg, a, s in seconds if s is not None]
    if not known:
        return
    cfg, algo, worst = max(known, key=lambda job: job[2])
    if worst > limit_s:
        if estimate is not None:
            raise UsageError(
                f"{backend.name} ring on {backend.devices} devices at N={cfg.seq_len}: about "
                f"{_fmt_duration(worst)} by the estimate, beyond --time-limit {limit_s:g} s; "
                f"fewer devices or a GPU ring, or `main.py model --seq {cfg.seq_len} --devices "
                f"{backend.devices}` for the model's figures at once"
            )
        raise UsageError(
            f"{algo} at N={cfg.seq_len} on the cpu backend: about {_fmt_duration(worst)} by the "
            f"estimate ({_cpu_rate_text()}), beyond --time-limit {limit_s:g} s; a smaller --seq, "
            f"a GPU (--backend cuda), or `main.py model --seq {cfg.seq_len}` for the model's "
            "figures at once"
        )
    total = sum(s for _, _, s in known)
    if total >= 10:
        how = "" if estimate is not None else f" ({_cpu_rate_text()})"
        print(f"# about {_fmt_duration(total)} by the estimate{how}", flush=True)


def _cpu_run_seconds(backend, config: AttentionConfig, algorithm: str, options) -> float:
    """About how long the NumPy backend takes for `config`: its runs (warm-up, repeats and the
    metered one) of the pass's useful FLOPs at the simulated ring's NumPy rate; 0 for a run it
    refuses at once because it would not fit in free RAM or the budget (an out-of-memory
    result)."""
    import psutil

    from gpu.backends.cpu_backend import RAM_HEADROOM
    from gpu.ring import sim as ring_sim

    free = int(psutil.virtual_memory().available * RAM_HEADROOM)
    if backend.footprint_bytes(config, algorithm) > min(free, options.budget_bytes or free):
        return 0.0
    runs = options.warmup + max(1, options.repeats) + 1
    return pass_useful_flops(config) * runs / ring_sim.SIM_FLOPS_PER_S


def _cpu_rate_text() -> str:
    from gpu.ring import sim as ring_sim

    return f"NumPy at about {ring_sim.SIM_FLOPS_PER_S / 1e9:g} GFLOP/s"


def _fmt_duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _save_fallback(recording: Any, suffix: str) -> str | None:
    """Keep results whose --out write failed: a new, named file in the temporary folder, else
    in the home or the current folder; returns its path (None when nowhere would take it)."""
    from gpu.files.recording import save_recording

    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for folder in (tempfile.gettempdir(), Path.home(), Path.cwd()):
        for k in range(100):
            name = f"tilescope-results-{stamp}{f'-{k}' if k else ''}{suffix or '.json'}"
            path = Path(folder) / name
            try:
                save_recording(recording, path)
            except FileExistsError:
                continue
            except (FileWriteError, OSError):
                break
            return str(path)
    return None


def _bench_backend(args: argparse.Namespace, configs: list[AttentionConfig]):
    """The backend `bench` measures on: the ring over --devices P when asked, else the usual."""
    if args.devices is None and not (args.algo and RING in args.algo):
        return create_backend(args.backend)
    from gpu.ring.backend import RingBackend
    from gpu.ring.schedule import RingConfigError

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
    except RingConfigError as exc:
        raise UsageError(str(exc)) from exc
    _check_ring_split(backend, configs)  # refuse N that cannot split before measuring any
    return backend


def _check_ring_split(backend: Any, configs: list[AttentionConfig]) -> None:
    """The ring backend refuses an N its devices cannot split evenly: say so before measuring."""
    check = getattr(backend, "check", None)
    if check is None:
        return
    from gpu.ring.schedule import RingConfigError

    for cfg in configs:
        try:
            check(cfg)
        except RingConfigError as exc:
            raise UsageError(str(exc)) from exc


def _ring_model(cfg: AttentionConfig, devices: int) -> dict:
    from gpu.model.links import DEFAULT_TOPOLOGY
    from gpu.ring.model import predict
    from gpu.ring.schedule import RingConfigError, check_devices

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
        f"({hidden}); {fmt_bytes(p['peak_bytes_per_device'])} per GPU"
    )


# --------------------------------------------------------------------------------------------
# render


def _refuse_folder_names(args: argparse.Namespace) -> None:
    """An --out or --open that ends in a path separator names a folder, not a file: refused
    (`--out r.png/` wrote r.png)."""
    for flag, value in (("--out", args.out), ("--open", getattr(args, "render_open", None))):
        if value is not None and value.endswith((os.sep, "/")):
            raise UsageError(f"{flag} {value!r} ends in {value[-1]!r}: give a file, not a folder")
        if value is not None and not value.strip():
            raise UsageError(f"{flag} needs a file name")


def cmd_render(args: argparse.Namespace) -> int:
    _refuse_folder_names(args)
    cfg = _config(args, args.seq)
    suffix = Path(args.out).suffix.lower()
    if suffix not in RENDER_FORMATS:
        raise UsageError(f"--out {args.out!r}: the image must end in {', '.join(RENDER_FORMATS)}")
    if args.colors and not 2 <= args.colors <= 256:
        raise UsageError(f"--colors {args.colors}: give 2 to 256 (or leave it out)")
    if args.colors and RENDER_FORMATS[suffix] != "PNG":
        raise UsageError("--colors makes a palette PNG: use it with a .png --out")
    _check_writable_out(args)
    try:
        from app.launch import render_window
    except ImportError as exc:
        raise UsageError(f"render needs the desktop app's Qt libraries: {exc}") from exc
    return render_window(
        cfg,
        backend=args.backend,
        out=args.out,
        open_path=args.render_open,
        overwrite=args.force,
        colors=args.colors,
    )


# -------------------------------------------------------------------------------------------
# bench --profile: measured traffic, said once when it cannot be measured


def _profile_available(args: argparse.Namespace, backend) -> bool:
    """Whether --profile can sample counters here; if not, say why once and go on timing."""
    if not getattr(args, "profile", False):
        return False
    if backend.name != "cuda":
        print(f"# --profile: measured traffic needs the cuda backend ({backend.name} here); "
              "the figures stay the model's", flush=True)  # fmt: skip
        return False
    from gpu.profiling.profiler import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        print(f"# --profile: traffic not measured ({reason.kind}): {reason}; "
              "the figures stay the model's", flush=True)  # fmt: skip
        return False
    print("# --profile: DRAM/L2 bytes per kernel from CUPTI PM sampling", flush=True)
    return True


def _say_traffic_missing_once(result, options: RunOptions) -> RunOptions:
    """A profiled run came back without counters: print its reason and stop profiling."""
    from dataclasses import replace

    why = next((m for m in result.message.split("; ") if "traffic not measured" in m), "")
    print(f"# --profile: {why or 'traffic not measured'}; the rest is timed only", flush=True)
    return replace(options, profile=False)


def _traffic_column(r, options: RunOptions) -> str:
    if not options.profile or r.measured_dram_bytes is None:
        return ""
    read = sum(t.dram_read_bytes for t in r.traffic)
    written = sum(t.dram_write_bytes for t in r.traffic)
    return f"  DRAM read {fmt_bytes(read)} written {fmt_bytes(written)} (measured)"


# -------------------------------------------------------------------------------------------
# explain: roofline verdicts per algorithm


def _add_explain_parser(sub) -> None:
    from gpu.model.costmodel import GPUS

    explain = sub.add_parser(
        "explain", help="memory- or compute-bound, per algorithm and kernel (hierarchical roofline)"
    )
    explain.add_argument("--seq", type=int, required=True, help="sequence length N")
    _shape_args(explain)
    _layer_args(explain)
    explain.add_argument(
        "--open", dest="explain_open", metavar="FILE", help="a recording: its measured figures"
    )
    explain.add_argument("--algo", type=_algo_list, default=None, help="e.g. naive,tiled_mma")
    explain.add_argument(
        "--gpu", choices=tuple(GPUS), default=None,
        help="roofs of this GPU (default: the recording's device, else the H200)",
    )  # fmt: skip
    explain.add_argument("--json", action="store_true", help="print one JSON object")


def cmd_explain(args: argparse.Namespace) -> int:
    from gpu.model import roofline
    from gpu.model.costmodel import GPUS, algorithm_cost, traffic_band

    cfg = _config(args, args.seq)
    results: dict = {}
    device = None
    if args.explain_open is not None:
        if not args.explain_open.strip():
            raise UsageError("--open needs a file name")
        from gpu.files.recording import RecordingError, load_recording

        try:
            recording = load_recording(args.explain_open)
        except RecordingError as exc:
            raise UsageError(str(exc)) from exc
        device = recording.device
        results = {r.algorithm: r for r in recording.results if r.config == cfg}
        if not results:
            lens = sorted({r.config.seq_len for r in recording.results})
            raise UsageError(
                f"{args.explain_open} has no result for {cfg.label()} "
                f"(its N: {', '.join(map(str, lens)) or 'none'})"
            )
    known = []
    for a in ALGORITHMS:
        try:
            algorithm_cost(cfg, a)
        except KeyError:
            continue
        known.append(a)
    algos = args.algo or ([a for a in known if a in results] if results else known)
    unknown = [a for a in algos if a not in known]
    if unknown:
        raise UsageError(f"--algo {','.join(unknown)}: the cost model does not know it")
    from app.state.current_point import current_point  # Qt-free: the app's own figures

    gpu = GPUS[args.gpu] if args.gpu else roofline.device_gpu(device, results.values())
    smem = device.details.get("smem_per_block_optin_bytes") if device else None
    # A run that ran out of memory has no time to judge: no roofline row for it, one line.
    oom = [a for a in algos if a in results and results[a].oom]
    ran = [a for a in algos if a not in oom] or algos
    oom = [a for a in oom if a not in ran]
    bands = {a: traffic_band(cfg, a, gpu, smem) for a in ran}
    reported = device.memory_total_bytes if device is not None and not args.gpu else None
    point = current_point(cfg, ran, gpu, results, bands, reported)
    explanation = point.explanation
    layers = _layers(args)
    training = _training_model(cfg, layers, _preset(args)) if cfg.has_backward else None
    out_of_memory = [
        {"algorithm": a, "message": results[a].message, "needs_bytes": results[a].model_peak_bytes}
        for a in oom
    ]
    if args.json:
        report = {**explanation.to_dict(), "figures": point.to_dict()}
        if cfg.has_backward:  # the app's own training figures, each with its source
            from app.state.training_figures import training_figures

            budget = reported or gpu.memory_bytes
            report["figures"]["training"] = training_figures(cfg, layers, budget, results).to_dict()
        report["out_of_memory"] = out_of_memory
        if training is not None:
            report["training"] = training
        print(json.dumps(report))
        return 0
    _print_explanation(explanation, args.explain_open)
    for a in oom:
        print(f"  {a}: out of memory at N = {cfg.seq_len} ({results[a].message or 'recorded'})")
    if training is not None:
        _print_training_model(training)
    return 0


def _roof_text(v) -> str:
    """'hbm', or 'xu=tensor' when two roofs tie (within 5 %)."""
    return "=".join(v.ties)


def _shares_text(v) -> str:
    """'xu 60%, tensor 59%, hbm 1%': the share of each roof's peak the kernel ran at."""
    shares = sorted(v.roof_share.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{name} {share:.0%}" for name, share in shares)


def _print_explanation(e, source: str | None) -> None:
    print(f"{e.config.label()} on the {e.gpu.label} roofline")
    print("  roofs: " + "; ".join(r.label for r in e.roofs.values()))
    if e.gpu.clock_hz and e.gpu.kind == "gpu":
        how = "measured" if e.gpu.clock_measured else "datasheet"
        print(f"  clock: {e.gpu.clock_hz / 1e9:.3f} GHz, {how} ({e.gpu.clock_source})")
    kw = max([10] + [len(k.name) for a in e.algorithms for k in a.kernels])
    print(
        f"  {'algorithm':<14} {'kernel':<{kw}} {'DRAM bytes':>10} {'source':<8} "
        f"{'FLOP/B':>9} {'bound':<8} {'roof':<12} {'roofline ms':>11} {'measured ms':>11}  "
        "share of each roof's peak"
    )
    for a in e.algorithms:
        rows = [(a.algorithm, "", a)] + [("", k.name, k) for k in a.kernels]
        if len(a.kernels) == 1:
            rows = rows[:1]
        for name, kernel, v in rows:
            intensity = v.intensity
            ai = "" if intensity is None else f"{intensity:,.1f}"
            bound = "tie" if v.tie and v.bound == "compute" else v.bound
            dram = fmt_bytes(v.dram_bytes if kernel else v.bytes)
            print(
                f"  {name:<14} {kernel:<{kw}} {dram:>10} "
                f"{v.bytes_source:<8} {ai:>9} {bound:<8} {_roof_text(v):<12} "
                f"{fmt_ms_column(v.roofline_ms):>11} {fmt_ms_column(v.measured_ms):>11}  "
                f"{_shares_text(v)}"
            )
    for pair, ratio in e.naive_ratios.items():
        measured = "" if ratio["measured"] is None else f"measured {ratio['measured']:,.0f}×, "
        if ratio.get("model_over_measured") is not None:
            measured = (
                f"naive's model over the measured {pair.split('/')[1]} "
                f"{ratio['model_over_measured']:,.0f}×, "
            )
        print(
            f"  DRAM bytes {pair}: {measured}model {ratio['model_l2_aware']:,.0f}× (L2-aware), "
            f"{ratio['model_no_reuse']:,.1f}× (no reuse)"
        )
    for a in e.algorithms:
        check = a.model_over_measured
        if check is not None and not 0.8 <= check <= 1.25:
            model = fmt_bytes(a.model_bytes["l2_aware"])
            print(
                f"  model check, {a.algorithm}: the L2-aware model's {model} is {check:.2f}× "
                f"the {fmt_bytes(a.bytes)} the counters measured"
            )
    useful = {"forward": "4", "backward": "8", "step": "12"}[e.config.pass_]
    print(
        f"  FLOP/B: useful FLOPs ({useful}·B·h·N²·d, halved when causal"
        + ("; the fused backward's recompute of S not counted" if e.config.has_backward else "")
        + ") per DRAM byte; source: "
        "measured (hardware counters"
        + (f" in {source})" if source else ")")
        + " or model (the cost model's L2-aware estimate). Roofs within 5 % are a tie (a=b)."
    )


def _refuse_bare_double_dash_values(argv: list[str]) -> None:
    """`--seq=--` must be an error: Python 3.11's argparse drops the "--" as its end-of-options
    marker and hands the option an empty list, so `bench` measured nothing and exited 0."""
    for token in argv:
        name, eq, value = token.partition("=")
        if name.startswith("--") and eq and value == "--":
            raise UsageError(f"argument {name}: '--' is not a value")


# --------------------------------------------------------------------------------------------
# errors: one line each, and an exit status that says whose fault it was

#: Errors in what the user gave (flags, values, files): exit 2.
BAD_INPUT: tuple[type[BaseException], ...] = (
    UsageError,
    ConfigError,
    FileReadError,
    FileExistsError,
    BackendUnavailable,
    UnsupportedConfig,
)
#: Failures of a run or a write the engine knows about: exit 1, no hint needed.
KNOWN_FAILURES: tuple[type[BaseException], ...] = (
    TilescopeError,
    KernelCompileError,
    MemoryError,
    OSError,
)


def _one_line(exc: BaseException) -> str:
    """What went wrong, in one line: a compile failure's first compiler error, else the first
    line of the message, else the error's type."""
    if isinstance(exc, KernelCompileError):
        lines = [ln.strip() for ln in (exc.log or "").splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
        return f"{exc.path.name} failed to compile" + (f": {first}" if first else "")
    if isinstance(exc, MemoryError):
        return f"out of memory{': ' + str(exc) if str(exc) else ''}"
    text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        text = f"{exc.filename}: {exc.strerror}"
    return text or type(exc).__name__


def report_error(exc: BaseException) -> int:
    """Print `exc` as one `tilescope: error:` line on stderr; return the exit status."""
    debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    line = _one_line(exc)
    if isinstance(exc, BAD_INPUT):
        print(f"tilescope: error: {line}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, KNOWN_FAILURES):
        print(f"tilescope: error: {line}", file=sys.stderr)
        return EXIT_FAILED
    hint = "" if debug else f" (run with {DEBUG_ENV}=1 for a traceback)"
    print(f"tilescope: error: {type(exc).__name__}: {line}{hint}", file=sys.stderr)
    return EXIT_FAILED


def _reader_gone() -> int:
    """The reader of stdout went away (`main.py model ... | head -n1`): what it wanted was
    written, so this is no error; stdout goes to the null device, so that flushing it at exit
    does not raise again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        _refuse_bare_double_dash_values(argv)
        args = parser.parse_args(argv)
        if args.command is not None:
            remove_partial_files_on_signals()  # a signal mid-write leaves no .part file
        if args.command == "model":
            return cmd_model(args)
        if args.command == "bench":
            return cmd_bench(args)
        if args.command == "render":
            return cmd_render(args)
        if args.command == "explain":
            return cmd_explain(args)
    except KeyboardInterrupt:
        print("tilescope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:
        return report_error(exc)
    try:
        from app.launch import run_gui

        return run_gui(open_path=args.open)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # the app could not start: one line, like every other error
        return report_error(exc)


if __name__ == "__main__":
    exit_status.finish_at_exit(remove_partial_files)  # first: the hook that runs last
    status = main()
    exit_status.shutting_down(status)
    sys.exit(status)
