"""Traces on the GPU in one call: trace tests, the shipped traces, trace overhead, ncu bytes.

Run from the repository root on the H200:

    PYTHONUNBUFFERED=1 PYTHONPATH=$PWD python3 bench/trace_h200.py --out $OUT

Stages (each independent: one that fails is logged and the others still run; later stages are
skipped when the time budget `--budget-s` runs short):
 1. `pytest -m gpu tests/test_trace.py` (compiles both builds of both tiled kernels, which the
    later stages then find in CuPy's kernel cache);
 2. traces of naive, tiled and tiled_mma at N=4096, 12 heads, d=64, fp16, every phase kept
    (h200_trace_full.json; the shipped resources/traces/h200_trace.json is made from it);
 3. trace overhead: median kernel time of the normal build, the trace build, the normal build
    again and the trace build again (same launch path for both builds, CUDA events around
    back-to-back launches, inputs rotating over > 256 MiB, bench/bench_kernels.time_launches);
 4. Nsight Compute DRAM bytes of every kernel (bench/ncu_driver.py) at N=4096 and 16384, beside
    the cost model's bytes.
Outputs in --out: trace_h200.log, trace_h200.json (all numbers), h200_trace_full.json,
pytest_gpu.txt, ncu_<N>.csv.
"""

from __future__ import annotations

import argparse
import csv
import glob
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu.algorithms import NAIVE, TILED, TILED_MMA  # noqa: E402
from gpu.config import AttentionConfig  # noqa: E402
from gpu.model.costmodel import algorithm_cost  # noqa: E402

TRACE_CONFIG = AttentionConfig(seq_len=4096, heads=12, head_dim=64, dtype="fp16")
NCU_METRICS = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"
T0 = time.monotonic()


class Tee:
    def __init__(self, path: Path) -> None:
        self.f = open(path, "w", encoding="utf-8")  # noqa: SIM115

    def __call__(self, *parts: object) -> None:
        line = " ".join(str(p) for p in parts)
        stamp = f"[{time.monotonic() - T0:6.1f}s] "
        print(stamp + line, flush=True)
        self.f.write(stamp + line + "\n")
        self.f.flush()


def elapsed() -> float:
    return time.monotonic() - T0


def stage(log: Tee, results: dict, name: str, fn, *args) -> None:
    log(f"=== {name}")
    t = time.monotonic()
    try:
        results[name] = fn(log, *args)
        results.setdefault("stage_s", {})[name] = round(time.monotonic() - t, 1)
    except Exception as exc:  # keep going: the other stages still give their numbers
        log(f"!!! {name} failed: {exc!r}")
        log(traceback.format_exc())
        results[name] = {"error": repr(exc)}


def gpu_state(log: Tee) -> str:
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except Exception as exc:
        out = f"nvidia-smi failed: {exc!r}"
    log("gpu:", out)
    return out


# --------------------------------------------------------------------------------------------


def run_pytest(log: Tee, out: Path, timeout: float) -> dict:
    cmd = [
        sys.executable, "-m", "pytest", "-m", "gpu", "tests/test_trace.py",
        "-p", "no:qt", "-p", "no:cacheprovider", "-q", "-rA",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    text = proc.stdout + "\n" + proc.stderr
    (out / "pytest_gpu.txt").write_text(text)
    tail = [ln for ln in text.splitlines() if ln.strip()][-12:]
    for ln in tail:
        log("  " + ln)
    return {"rc": proc.returncode, "seconds": round(time.monotonic() - t, 1), "tail": tail}


def record_traces(log: Tee, out: Path) -> dict:
    from gpu.files.trace import save_traces, summarize, trace_problems
    from gpu.profiling.trace_record import record_trace

    traces = []
    info = {}
    for algo in (NAIVE, TILED, TILED_MMA):
        t = record_trace(TRACE_CONFIG, algo)
        traces.append(t)
        problems = trace_problems(t)
        times = sorted({p[2] for b in t.blocks for p in b.phases} | {b.end_ns for b in t.blocks})
        steps = [b - a for a, b in itertools.pairwise(times) if b > a]
        info[algo] = {
            "blocks": len(t.blocks),
            "kernel_ms": t.kernel_ms,
            "span_ms": t.span_ns / 1e6,
            "problems": problems,
            "notes": t.notes,
            "min_time_step_ns": min(steps) if steps else None,
            "time_steps_multiple_of_32ns": (
                sum(1 for s in steps if s % 32 == 0) / len(steps) if steps else None
            ),
            "time_steps_multiple_of_1us": (
                sum(1 for s in steps if s % 1000 == 0) / len(steps) if steps else None
            ),
        }
        log(f"  {algo}: {info[algo]}")
    for line in summarize(traces):
        log("  " + line)
    save_traces(
        traces,
        out / "h200_trace_full.json",
        meta={"command": "PYTHONPATH=$PWD python3 bench/trace_h200.py --out $OUT", "full": True},
        overwrite=True,
    )
    return info


def launcher(kernel, sets: list, outputs: tuple, buffer=None):
    """launch(i): one launch of `kernel` on input set i (rotating, so inputs are not in L2)."""

    def launch(i: int) -> None:
        q, k, v = sets[i % len(sets)]
        kernel.launch(q, k, v, *outputs, buffer)

    return launch


def measure_overhead(log: Tee, sizes: list[int]) -> list[dict]:
    import cupy
    from bench_kernels import make_sets, time_launches

    from gpu.profiling.trace_record import TiledKernel

    rows = []
    for n in sizes:
        config = TRACE_CONFIG.with_(seq_len=n)
        sets = make_sets(config, seed=1)
        q0 = sets[0][0]
        o = cupy.empty_like(q0)
        m = cupy.empty(q0.shape[:3], dtype=cupy.float32)
        l = cupy.empty(q0.shape[:3], dtype=cupy.float32)
        for algo in (TILED, TILED_MMA):
            normal = TiledKernel(config, algo, trace=False)
            traced = TiledKernel(config, algo, trace=True)
            buf = traced.new_buffer()

            run_normal = launcher(normal, sets, (o, m, l))
            run_traced = launcher(traced, sets, (o, m, l), buf)
            a1 = time_launches(run_normal, 9, 15.0)
            b1 = time_launches(run_traced, 9, 15.0)
            a2 = time_launches(run_normal, 9, 15.0)
            b2 = time_launches(run_traced, 9, 15.0)
            base = statistics.mean([a1, a2])
            row = {
                "algorithm": algo,
                "seq_len": n,
                "default_ms": a1,
                "trace_ms": b1,
                "default_again_ms": a2,
                "trace_again_ms": b2,
                "overhead_pct": 100 * (statistics.mean([b1, b2]) / base - 1),
                "default_drift_pct": 100 * (a2 / a1 - 1),
            }
            rows.append(row)
            log(
                f"  {algo:9s} N={n:6d} default {a1:.4f} ms  trace {b1:.4f} ms  default again "
                f"{a2:.4f} ms  trace again {b2:.4f} ms  overhead {row['overhead_pct']:+.2f}%  "
                f"default drift {row['default_drift_pct']:+.2f}%"
            )
            del buf
        del sets, o, m, l
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def parse_ncu_csv(text: str) -> list[dict]:
    """Kernels in launch order with their metrics (details-page or raw-page CSV)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return []
    reader = csv.reader(lines)
    header = next(reader)
    col = {h: i for i, h in enumerate(header)}
    kernels: dict[str, dict] = {}
    for row in reader:
        if len(row) != len(header) or not row[col["ID"]].strip().isdigit():
            continue
        k = kernels.setdefault(row[col["ID"]], {"name": row[col["Kernel Name"]]})
        if "Metric Name" in col:
            k[row[col["Metric Name"]]] = float(row[col["Metric Value"]].replace(",", ""))
        else:
            for metric in NCU_METRICS.split(","):
                if metric in col:
                    k[metric] = float(row[col[metric]].replace(",", ""))
    return [kernels[i] for i in sorted(kernels, key=int)]


def stage_of(kernels: list[dict]) -> list[str]:
    """Which app kernel each profiled kernel belongs to (cuBLAS GEMMs by their position)."""
    out, seen_softmax = [], False
    for k in kernels:
        name = k["name"]
        if "softmax_rows" in name:
            out.append("softmax")
            seen_softmax = True
        elif "flash_fwd_readable" in name:
            out.append(TILED)
        elif "flash_mma_fwd" in name:
            out.append(TILED_MMA)
        else:
            out.append("gemm_pv" if seen_softmax else "gemm_qk")
    return out


def run_ncu(log: Tee, out: Path, n: int, timeout: float) -> dict:
    ncu = find_ncu()
    if ncu is None:
        raise RuntimeError("ncu not found")
    cmd = [
        ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv",
        "--print-units", "base", "--metrics", NCU_METRICS,
        sys.executable, str(ROOT / "bench" / "ncu_driver.py"), "--seq", str(n),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log("  " + " ".join(cmd))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    (out / f"ncu_{n}.csv").write_text(proc.stdout + "\n# stderr\n" + proc.stderr)
    kernels = parse_ncu_csv(proc.stdout)
    if not kernels:
        log("  ncu gave no kernels; stderr tail:")
        for ln in proc.stderr.splitlines()[-15:]:
            log("    " + ln)
        return {"rc": proc.returncode, "kernels": []}
    config = TRACE_CONFIG.with_(seq_len=n)
    model = {k.name: k for k in algorithm_cost(config, NAIVE).kernels}
    model[TILED] = algorithm_cost(config, TILED).kernels[0]
    model[TILED_MMA] = algorithm_cost(config, TILED_MMA).kernels[0]
    per_stage: dict[str, dict] = {}
    for k, st in zip(kernels, stage_of(kernels), strict=True):
        agg = per_stage.setdefault(st, {"read": 0.0, "write": 0.0, "ns": 0.0, "launches": []})
        agg["read"] += k.get("dram__bytes_read.sum", float("nan"))
        agg["write"] += k.get("dram__bytes_write.sum", float("nan"))
        agg["ns"] += k.get("gpu__time_duration.sum", float("nan"))
        agg["launches"].append(k["name"][:120])
    rows = []
    for st in ("gemm_qk", "softmax", "gemm_pv", TILED, TILED_MMA):
        if st not in per_stage:
            continue
        agg, mk = per_stage[st], model[st]
        row = {
            "seq_len": n,
            "kernel": st,
            "model_read": mk.bytes_read,
            "dram_read": agg["read"],
            "model_write": mk.bytes_written,
            "dram_write": agg["write"],
            "ncu_ms": agg["ns"] / 1e6,
            "launches": agg["launches"],
        }
        rows.append(row)
        log(
            f"  N={n:6d} {st:9s} read model {mk.bytes_read / 1e6:10.1f} MB  dram "
            f"{agg['read'] / 1e6:10.1f} MB | write model {mk.bytes_written / 1e6:9.1f} MB  "
            f"dram {agg['write'] / 1e6:9.1f} MB | {agg['ns'] / 1e6:.3f} ms  "
            f"({len(agg['launches'])} launch(es))"
        )
    return {"rc": proc.returncode, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=175.0)
    ap.add_argument("--skip", default="", help="comma list of stages to skip")
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    log = Tee(out / "trace_h200.log")
    skip = set(filter(None, args.skip.split(",")))
    results: dict = {"config": TRACE_CONFIG.to_dict()}
    results["gpu_before"] = gpu_state(log)

    def left() -> float:
        return args.budget_s - elapsed()

    if "pytest" not in skip:
        stage(log, results, "pytest", run_pytest, out, min(100.0, max(30.0, left() - 60)))
    if "traces" not in skip:
        stage(log, results, "traces", record_traces, out)
    if "overhead" not in skip and left() > 40:
        stage(log, results, "overhead", measure_overhead, [4096, 16384])
    if "ncu" not in skip:
        for n in (4096, 16384):
            if left() > 30:
                stage(log, results, f"ncu_{n}", run_ncu, out, n, max(20.0, left() - 3))
            else:
                log(f"=== ncu_{n} skipped: {left():.0f} s left")
    results["gpu_after"] = gpu_state(log)
    results["elapsed_s"] = round(elapsed(), 1)
    (out / "trace_h200.json").write_text(json.dumps(results, indent=1, default=str))

    log("=== summary")
    for row in results.get("overhead", []) if isinstance(results.get("overhead"), list) else []:
        log(
            f"  overhead {row['algorithm']:9s} N={row['seq_len']:6d} "
            f"{row['default_ms']:.4f} / {row['trace_ms']:.4f} / {row['default_again_ms']:.4f} / "
            f"{row['trace_again_ms']:.4f} ms  {row['overhead_pct']:+.2f}%"
        )
    log(f"done in {elapsed():.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
