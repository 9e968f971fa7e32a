"""Turn the warp-specialized kernel's raw trace rows into a small traces file for the app.

bench/ws_check.py's trace stage runs the trace build of the default d=128 variant once on the
GPU and saves the buffer as ws_trace_<full|causal>.npy with a JSON description beside it. This
converts one of them with the recorder's own decode path
(gpu.profiling.trace_record.ws_trace_from_rows), checks the result (every block once, marks in
order) and writes it, thinned to the first `--tiles` - 2 key tiles in a row and the last two of
every block (warp roles take turns tile by tile, so kept tiles stay consecutive):

    python bench/ship_ws_trace.py ws_trace_full.npy --seq 4096 --heads 16 --head-dim 128 \\
        --device "NVIDIA H200" --sm-count 132 --made-by "..." --out resources/traces/x.json

The JSON beside the .npy must describe the same config and variant, or nothing is written.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from gpu.config import AttentionConfig
from gpu.files.trace import save_traces, summarize, trace_problems
from gpu.launch import flash_ws
from gpu.profiling.trace_record import ws_trace_from_rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path, help="ws_trace_<mask>.npy (its .json beside it)")
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--head-dim", type=int, required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--device", required=True, help="the GPU's name, as CuPy reported it")
    ap.add_argument("--sm-count", type=int, required=True)
    ap.add_argument("--tiles", type=int, default=12, help="key tiles kept per block")
    ap.add_argument("--made-by", required=True, help="how the rows were recorded (for notes)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--overwrite", action="store_true")
    args = ap.parse_args(argv)

    config = AttentionConfig(
        seq_len=args.seq,
        heads=args.heads,
        head_dim=args.head_dim,
        batch=args.batch,
        dtype=args.dtype,
        causal=args.causal,
    )
    meta = json.loads(args.rows.with_suffix(".json").read_text())
    launch = flash_ws.default_launch(config.head_dim)
    expected = {
        "config": config.label(),
        "variant": launch.label,
        "rows_per_block": flash_ws.trace_rows_per_block(config),
    }
    wrong = {k: (meta.get(k), v) for k, v in expected.items() if meta.get(k) != v}
    if wrong:
        print(f"the rows were recorded for something else: {wrong}", file=sys.stderr)
        return 1
    rows = np.load(args.rows)
    event_ms = float(meta["kernel_ms"])
    tiles = -(-config.seq_len // launch.block_n)
    kept = min(args.tiles, tiles)
    notes = (
        f"trace build of {launch.label}, one launch after 2 warm-up launches, recorded by "
        f"{args.made_by}; converted with bench/ship_ws_trace.py "
        f"(gpu.profiling.trace_record.ws_trace_from_rows), marks of {kept} of {tiles} key tiles "
        f"per block kept (the first {kept - 2} and the last 2). CUDA events around that launch "
        f"read {event_ms:.3f} ms, but they also enclose the host encoding the three TMA tensor "
        "maps before the launch, so no kernel time is given; the first mark to the last spans "
    )
    trace = ws_trace_from_rows(rows, config=config, device=args.device, sm_count=args.sm_count)
    trace = replace(trace, notes=f"{notes}{trace.span_ns / 1e6:.3f} ms.")
    problems = trace_problems(trace)
    if problems:
        print("the trace has problems: " + "; ".join(problems), file=sys.stderr)
        return 1
    small = trace.downsampled(args.tiles, contiguous=True) if tiles > args.tiles else trace
    save_traces([small], args.out, meta={"made_by": args.made_by}, overwrite=args.overwrite)
    for line in summarize([small]):
        print(line)
    print(f"{args.out}: {args.out.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
