"""A trace at the format's limits: 1,048,576 blocks (MAX_TRACE_BLOCKS) on 1,024 SMs
(MAX_SM_COUNT), about 74 MB of JSON, to open in the window (bench/bench_gui.py --only trace).

    python bench/limit_trace.py OUT.json [--blocks 1048576] [--sms 1024]

The launch: N = 65536, 64 heads × batch 16, 64-row query tiles (1,024 query tiles per head),
each block with its load of Q_i, its first key tile's load and compute, and its store (the
marks of the other key tiles thinned away, as `Trace.downsampled` does for large traces), the
blocks handed to the SMs in waves of two at a time per SM, with some jitter.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def limit_trace_document(blocks: int = 1 << 20, sms: int = 1024, seed: int = 1) -> dict:
    """The traces file's document (see the module docstring)."""
    from gpu.config import AttentionConfig
    from gpu.files.schema import PHASE_CODES, TRACE_SCHEMA, TRACES_FILE_SCHEMA

    heads, batch, seq = 64, 16, 65536
    q_tiles = max(1, blocks // (heads * batch))
    config = AttentionConfig(
        seq_len=max(64, q_tiles * 64), heads=heads, head_dim=64, batch=batch,
        dtype="fp16", causal=False, block_m=64, block_n=64,
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    per_slot = 2  # blocks resident on one SM at once
    slot = np.arange(blocks) % (sms * per_slot)
    wave = np.arange(blocks) // (sms * per_slot)
    block_ns = 40_000
    start = wave * block_ns + rng.integers(0, 3_000, blocks)
    length = block_ns - 4_000 + rng.integers(0, 3_000, blocks)
    code = {name: k for k, name in enumerate(PHASE_CODES)}
    k_tiles = config.seq_len // 64
    rows = []
    for b in range(blocks):
        n = int(length[b])
        flat = [
            code["load_Q_i"], b % q_tiles, 0,
            code["load_K_j"], 0, n // 10,
            code["compute_S_ij"], 0, n // 4,
            code["store_O_i"], b % q_tiles, n - n // 20,
        ]  # fmt: skip
        rows.append([b, int(slot[b] // per_slot), int(start[b]), int(start[b]) + n, 0, flat])
    trace = {
        "schema": TRACE_SCHEMA,
        "config": config.to_dict(),
        "algorithm": "tiled",
        "device": "limits of the trace format",
        "sm_count": sms,
        "level": "block",
        "kernel_ms": float((start.max() + block_ns) / 1e6),
        "tiles_kept": 2,
        "notes": f"synthetic: {blocks} blocks on {sms} SMs, {k_tiles} key tiles thinned to one",
        "phase_names": list(PHASE_CODES),
        "kernels": ["flash_fwd"],
        "block_fields": ["block", "sm", "start_ns", "end_ns", "kernel", "phases"],
        "blocks": rows,
    }
    return {"schema": TRACES_FILE_SCHEMA, "meta": {"seq": seq}, "traces": [trace]}


def write_limit_trace(path: Path, blocks: int = 1 << 20, sms: int = 1024) -> Path:
    """Write the document to `path` (compact JSON) unless it is there already."""
    if not path.exists():
        doc = limit_trace_document(blocks, sms)
        path.write_text(json.dumps(doc, separators=(",", ":")))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--blocks", type=int, default=1 << 20)
    parser.add_argument("--sms", type=int, default=1024)
    args = parser.parse_args()
    path = write_limit_trace(Path(args.out), args.blocks, args.sms)
    print(f"{path}: {path.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
