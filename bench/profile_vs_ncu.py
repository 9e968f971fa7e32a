"""Measured DRAM bytes, two ways, side by side: `main.py bench --profile` (CUPTI PM sampling in
the process, gpu/counters/profiler.py) against Nsight Compute, for every algorithm this GPU offers
at N = 4096 and 16384 (12 heads, d = 64, fp16, non-causal); plus a check that timing runs are
unchanged by having profiled before.

Run from the repository root on the GPU host (cupti-python and nvidia-cuda-cupti importable):

    PYTHONUNBUFFERED=1 PYTHONPATH=$PWD python3 bench/profile_vs_ncu.py --out $OUT

1. Nsight Compute first, in a child process, before this process loads CUPTI (the counters
   belong to one profiler at a time): `ncu --clock-control none --profile-from-start off --csv
   --print-units base --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
   python3 bench/ncu_driver.py --seq N --algos all --markers` (ncu's default cache control
   flushes the caches before each kernel; the profiler flushes L2 before each sampled launch).
2. In this process, per algorithm: a timing run, a profiled run (`RunOptions(profile=True)`,
   as `bench --profile` makes), a timing run again.
Outputs in --out: profile_vs_ncu.json (everything), ncu_<N>.csv (ncu's raw output). The table
printed last has, per kernel, DRAM read and written by both, their ratio (target: within 2%),
and the ratio of the median times after/before profiling (target: 1.00 within noise).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from trace_h200 import NCU_METRICS, find_ncu, parse_ncu_csv  # noqa: E402

from gpu.config import AttentionConfig  # noqa: E402

SEQ_LENS = (4096, 16384)
CONFIG = AttentionConfig(seq_len=4096, heads=12, head_dim=64, dtype="fp16")
#: Agreement target between the two counters, and the floor below which bytes are "tiny"
#: (O of the fused kernels can stay in L2 and show up as nothing in either).
TOLERANCE = 0.02
TINY_BYTES = 2e6


def ncu_bytes(n: int, out: Path, timeout: float) -> dict[str, dict[str, float]]:
    """{"algorithm/kernel": {"read", "write", "ms", "launches"}} from one ncu run."""
    ncu = find_ncu()
    if ncu is None:
        raise RuntimeError("ncu not found (PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-compute)")
    cmd = [
        ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv",
        "--print-units", "base", "--metrics", NCU_METRICS,
        sys.executable, str(ROOT / "bench" / "ncu_driver.py"), "--seq", str(n),
        "--heads", str(CONFIG.heads), "--head-dim", str(CONFIG.head_dim), "--dtype", CONFIG.dtype,
        "--algos", "all", "--markers",
    ]  # fmt: skip
    print("  " + " ".join(cmd), flush=True)
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    (out / f"ncu_{n}.csv").write_text(proc.stdout + "\n# stderr\n" + proc.stderr)
    order_line = next(
        (ln for ln in (proc.stderr + proc.stdout).splitlines() if "ncu_driver: order: " in ln), ""
    )
    order = order_line.split("ncu_driver: order: ", 1)[1].strip().split(",") if order_line else []
    kernels = parse_ncu_csv(proc.stdout)
    if not kernels or not order:
        tail = "\n".join(proc.stderr.splitlines()[-15:])
        raise RuntimeError(f"ncu gave no kernels or no order (rc {proc.returncode}):\n{tail}")
    groups: list[list[dict]] = []
    for k in kernels:
        if "read_sweep" in k["name"]:
            groups.append([])
        elif groups:
            groups[-1].append(k)
    if len(groups) != len(order):
        raise RuntimeError(f"{len(groups)} marked groups in ncu's CSV for {len(order)} kernels")
    out_rows = {}
    for name, group in zip(order, groups, strict=True):
        out_rows[name] = {
            "read": sum(k.get("dram__bytes_read.sum", float("nan")) for k in group),
            "write": sum(k.get("dram__bytes_write.sum", float("nan")) for k in group),
            "ms": sum(k.get("gpu__time_duration.sum", float("nan")) for k in group) / 1e6,
            "launches": len(group),
        }
    return out_rows


def ours(n: int) -> tuple[dict, dict]:
    """({"algorithm/kernel": traffic dict}, {"algorithm/kernel": timing before/after}) in this
    process through the backend, exactly as `main.py bench --profile` runs it."""
    from gpu.backends.backend import RunOptions
    from gpu.backends.cuda_backend import CudaBackend
    from gpu.counters.profiler import library_path, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"CUPTI unavailable ({reason.kind}): {reason}")
    print(f"  libcupti: {library_path()}", flush=True)
    backend = CudaBackend()
    config = CONFIG.with_(seq_len=n)
    timing = RunOptions(warmup=1, repeats=5)
    traffic, times = {}, {}
    for algo in backend.algorithms():
        before = backend.run(config, algo, timing)
        profiled = backend.run(config, algo, RunOptions(warmup=1, repeats=5, profile=True))
        after = backend.run(config, algo, timing)
        if not profiled.traffic:
            raise RuntimeError(f"{algo} at N={n}: no traffic ({profiled.message})")
        for t in profiled.traffic:
            traffic[f"{algo}/{t.name}"] = t.to_dict()
        kernels = zip(before.kernel_times, profiled.kernel_times, after.kernel_times, strict=True)
        for b, p, a in kernels:
            times[f"{algo}/{b.name}"] = {
                "before_ms": b.ms,
                "profiled_run_ms": p.ms,
                "after_ms": a.ms,
                "before_spread": [b.min_ms, b.max_ms],
                "after_spread": [a.min_ms, a.max_ms],
                "remeasured": [before.remeasured, after.remeasured],
            }
        seen = ", ".join(
            f"{t.name} read {t.dram_read_bytes / 1e6:.1f} MB, "
            f"write {t.dram_write_bytes / 1e6:.1f} MB"
            for t in profiled.traffic
        )
        print(f"  N={n} {algo}: {seen}", flush=True)
    return traffic, times


def agree(a: float, b: float) -> bool:
    return abs(a - b) <= max(TOLERANCE * max(a, b), TINY_BYTES)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ncu-timeout-s", type=float, default=150.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    report: dict = {"config": CONFIG.to_dict(), "seq_lens": list(SEQ_LENS)}
    ncu: dict[int, dict] = {}
    for n in SEQ_LENS:  # ncu first: this process has not touched the counters yet
        print(f"=== ncu N={n}", flush=True)
        try:
            ncu[n] = ncu_bytes(n, args.out, args.ncu_timeout_s)
        except Exception as exc:  # keep going: our side still gets measured
            print(f"  FAILED: {exc}", flush=True)
            ncu[n] = {}
    mine: dict[int, tuple[dict, dict]] = {}
    for n in SEQ_LENS:
        print(f"=== bench --profile N={n}", flush=True)
        try:
            mine[n] = ours(n)
        except Exception as exc:
            print(f"  FAILED: {exc}", flush=True)
            mine[n] = ({}, {})
    report["ncu"] = {str(n): rows for n, rows in ncu.items()}
    report["profile"] = {str(n): m[0] for n, m in mine.items()}
    report["timing"] = {str(n): m[1] for n, m in mine.items()}
    rows, failures = [], 0
    for n in SEQ_LENS:
        traffic, timing = mine[n]
        for name in sorted(set(traffic) | set(ncu[n]), key=lambda s: (s.split("/")[0], s)):
            t, c, tm = traffic.get(name), ncu[n].get(name), timing.get(name, {})
            ok = (
                t is not None
                and c is not None
                and agree(t["dram_read_bytes"], c["read"])
                and agree(t["dram_write_bytes"], c["write"])
            )
            failures += not ok
            rows.append((n, name, t, c, tm, ok))
    report["failures"] = failures
    report["elapsed_s"] = round(time.monotonic() - t0, 1)
    (args.out / "profile_vs_ncu.json").write_text(json.dumps(report, indent=1))

    def mb(x: float | None) -> str:
        return "–" if x is None else f"{x / 1e6:10.1f}"

    def ratio(a: float | None, b: float | None) -> str:
        return "–" if not a or not b else f"{a / b:6.3f}"

    print("\nDRAM bytes per launch: CUPTI PM sampling (ours) vs Nsight Compute; MB = 1e6 B")
    print(
        f"{'N':>6} {'kernel':<22} {'read ours':>10} {'read ncu':>10} {'ratio':>6} "
        f"{'write ours':>10} {'write ncu':>10} {'ratio':>6} {'t after/before':>14}  ok"
    )
    for n, name, t, c, tm, ok in rows:
        tr = None if t is None else t["dram_read_bytes"]
        tw = None if t is None else t["dram_write_bytes"]
        cr = None if c is None else c["read"]
        cw = None if c is None else c["write"]
        drift = ratio(tm.get("after_ms"), tm.get("before_ms"))
        print(
            f"{n:>6} {name:<22} {mb(tr)} {mb(cr)} {ratio(tr, cr):>6} {mb(tw)} {mb(cw)} "
            f"{ratio(tw, cw):>6} {drift:>14}  {'OK' if ok else 'FAIL'}"
        )
    print(
        f"\n{failures} kernel(s) outside {TOLERANCE:.0%} (or {TINY_BYTES / 1e6:.0f} MB); "
        f"done in {report['elapsed_s']} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
