"""The command line's grammar: the subcommands `model`, `bench`, `explain` and `render`, their
flags and help. Parsing only: each subcommand's work lives in a module of its own."""

from __future__ import annotations

import argparse

from gpu.backends.factory import BACKEND_NAMES
from gpu.files.fileio import MAX_READ_LABEL
from gpu.model.costmodel import DEFAULT_GPU, GPUS

from .arguments import (
    LIMITS_EPILOG,
    Parser,
    algo_list,
    int_list,
    layer_args,
    positive_seconds,
    shape_args,
    size_bytes,
)
from .bench import BENCH_TIME_LIMIT_S, DEFAULT_SEQ


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="tilescope", description="See the attention memory wall.", epilog=LIMITS_EPILOG
    )
    parser.add_argument(
        "--open",
        metavar="FILE",
        help=f"open a recorded run or saved session (a regular file of at most {MAX_READ_LABEL})",
    )
    sub = parser.add_subparsers(dest="command", parser_class=Parser)

    model = sub.add_parser("model", help="print the cost model's figures for one config")
    model.add_argument("--seq", type=int, required=True, help="sequence length N")
    shape_args(model)
    layer_args(model)
    model.add_argument("--json", action="store_true", help="print one JSON object")
    model.add_argument("--devices", type=int, default=None, help="add the ring model for P GPUs")
    model.add_argument(
        "--budget",
        type=size_bytes,
        default=None,
        help="with --pass decode and a --preset: what fits in this memory budget too (e.g. 24GB)",
    )
    model.add_argument(
        "--gpu", choices=tuple(GPUS), default=DEFAULT_GPU,
        help=f"the roofs the verdicts are read on (default {DEFAULT_GPU})",
    )  # fmt: skip

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
        type=int_list,
        default=None,
        help="sequence lengths, e.g. 1024,2048 (default "
        + "; ".join(f"{','.join(map(str, v))} on {k}" for k, v in DEFAULT_SEQ.items())
        + ")",
    )
    shape_args(bench)
    bench.add_argument("--algo", type=algo_list, default=None, help="e.g. naive,tiled")
    bench.add_argument(
        "--check", action="store_true", help="compare with the reference; exit 1 on disagreement"
    )
    bench.add_argument("--repeats", type=int, default=5)
    bench.add_argument("--warmup", type=int, default=1)
    bench.add_argument(
        "--budget",
        type=size_bytes,
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
        type=positive_seconds,
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
    add_explain_parser(sub)

    render = sub.add_parser("render", help="headless screenshot of the window")
    render.add_argument("--seq", type=int, required=True)
    render.add_argument("--backend", choices=(*BACKEND_NAMES, "replay"), default="auto")
    shape_args(render)
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


def add_explain_parser(sub) -> None:
    explain = sub.add_parser(
        "explain", help="memory- or compute-bound, per algorithm and kernel (hierarchical roofline)"
    )
    explain.add_argument("--seq", type=int, required=True, help="sequence length N")
    shape_args(explain)
    layer_args(explain)
    explain.add_argument(
        "--open", dest="explain_open", metavar="FILE", help="a recording: its measured figures"
    )
    explain.add_argument("--algo", type=algo_list, default=None, help="e.g. naive,tiled_mma")
    explain.add_argument(
        "--gpu", choices=tuple(GPUS), default=None,
        help="roofs of this GPU (default: the recording's device, else the H200)",
    )  # fmt: skip
    explain.add_argument("--json", action="store_true", help="print one JSON object")
