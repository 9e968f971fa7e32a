"""One GPU call for the warp-specialized kernel (tiled_ws): compile, check, time, summarize.

Stages, each in its own subprocess with a timeout, so a compile error is a log line and a
deadlocked variant costs its timeout, never the whole call:

  1. compile  every variant (gpu.launch.flash_ws.all_variants) × causal × fp16/bf16 with NVRTC, in
              parallel processes; failures print NVRTC's log
  2. correct  one process per variant: NaN-poisoned outputs vs the fp32 reference, O, m and l
              (defaults: fp16/bf16 × N ∈ {1, 17, 113, 128, 1000, 1023, 4096} × causal or not,
              plus a causal case with more heads than one L2 group; candidates: a smaller grid)
  3. time     the FlashAttention-3 paper's shapes (16k tokens, hidden 2048: B = 16384/N,
              h = 2048/d; N 512..16384; d 64, 128, 256; causal and not; fp16; bf16 at two
              shapes): tiled_ws default against tiled_wgmma, SDPA flash and SDPA cuDNN (torch);
              every correct candidate variant at N = 2048 and 16384
  4. trace    one trace-build launch of the d=128 default (raw rows as .npy, for the recorder)
  5. summary  a compact table (printed last) and JSON under --out

With --candidates, only the defaults, gpu.launch.flash_ws.BASELINES and
gpu.launch.flash_ws.CANDIDATES are compiled and checked, and stage 3 times them instead,
interleaved with SDPA cuDNN, at N = 1024, 4096, 16384 (FA3 shapes, fp16, causal and not, d 64, 128
and 256): --passes sweeps over the variants in alternating order, the median of the passes
reported. The summary then has one table per shape (best first, against cuDNN and the current
default) and, per head dim, the variant to paste into gpu.launch.flash_ws.WS_DEFAULTS.

With --sustained, the defaults (and any --variants) are checked, then timed after --warm
seconds (30) of continuous device work, when clocks have settled where a user's long run keeps
them, against SDPA flash and cuDNN at every FlashAttention-3 shape (fp16 and bf16 unless
--dtypes says otherwise): --rounds rounds (3) a shape, the order reversed every other round,
inputs rotating so that no launch starts from a warm L2. It prints each shape's median TF/s with
the spread of the rounds, the ratios, and how many shapes with N >= 1024 reach 1.0x cuDNN.

    PYTHONPATH=$PWD python3 bench/ws_check.py --out $OUT                # ~4-5 minutes on an H200
    PYTHONPATH=$PWD python3 bench/ws_check.py --out $OUT --quick        # fewer shapes, ~2 minutes
    PYTHONPATH=$PWD python3 bench/ws_check.py --out $OUT --candidates   # ~3 minutes
    PYTHONPATH=$PWD python3 bench/ws_check.py --out $OUT --sustained    # ~4 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu.config import AttentionConfig  # noqa: E402

MARK = "@@ "  # prefix of the JSON lines a worker prints for the parent
SEQ_LENS = (1, 17, 113, 128, 1000, 1023, 4096)
FA3_SEQ = (512, 1024, 2048, 4096, 8192, 16384)
CANDIDATE_SEQ = (1024, 4096, 16384)
TOKENS, HIDDEN = 16384, 2048


def emit(obj: dict) -> None:
    print(MARK + json.dumps(obj), flush=True)


def variant_by_label(label: str) -> Any:
    from gpu.launch import flash_ws

    try:
        return flash_ws.WsLaunch.from_label(label)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def fa3_config(n: int, d: int, causal: bool, dtype: str = "fp16") -> AttentionConfig:
    return AttentionConfig(
        seq_len=n, heads=HIDDEN // d, head_dim=d, batch=TOKENS // n, dtype=dtype, causal=causal
    )


# ---------------------------------------------------------------------------------------------
# Workers (run as `ws_check.py --worker STAGE ...` in a subprocess)


def worker_env() -> None:
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    info = {
        "stage": "env",
        "device": name,
        "compute_capability": cp.cuda.Device().compute_capability,
        "sm_count": props["multiProcessorCount"],
        "cupy": cp.__version__,
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
        "driver": cp.cuda.runtime.driverGetVersion(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:
        info["torch"] = f"unavailable: {exc}"
    emit(info)


def worker_compile(labels: list[str]) -> None:
    from gpu.launch import flash_ws
    from gpu.launch.cuda_kernels import KernelCompileError

    for label in labels:
        v = variant_by_label(label)
        for causal in (False, True):
            for bf16 in (False, True):
                t0 = time.time()
                rec = {"stage": "compile", "variant": label, "causal": causal, "bf16": bf16}
                try:
                    flash_ws.get_kernel(v, causal, bf16)
                    rec.update(ok=True, **flash_ws.kernel_resources(v, causal, bf16))
                except KernelCompileError as exc:
                    rec.update(ok=False, log=exc.log[-4000:])
                except Exception as exc:
                    rec.update(ok=False, log=f"{type(exc).__name__}: {exc}"[-4000:])
                rec["seconds"] = round(time.time() - t0, 2)
                emit(rec)


def correctness_cases(label: str, full: bool) -> list[AttentionConfig]:
    v = variant_by_label(label)
    seqs = SEQ_LENS if full else (17, 1000, 4096)
    cases = []
    for dtype in ("fp16", "bf16"):
        for causal in (False, True):
            for n in seqs:
                batch, heads = (2, 3) if n <= 1023 else (1, 2)
                cases.append(
                    AttentionConfig(
                        seq_len=n,
                        heads=heads,
                        head_dim=v.head_dim,
                        batch=batch,
                        dtype=dtype,
                        causal=causal,
                    )
                )
    if full:  # more heads than one L2 group of the causal block order: the last group is short
        cases.append(AttentionConfig(seq_len=4096, heads=23, head_dim=v.head_dim, causal=True))
    if v.persistent:  # several query tiles per block: both Q buffers, many ring rounds
        for causal in (False, True):
            cases.append(
                AttentionConfig(seq_len=4097, heads=23, batch=2, head_dim=v.head_dim, causal=causal)
            )
    return cases


def worker_correct(label: str, full: bool) -> None:
    import cupy as cp

    from gpu.launch import flash_ws
    from gpu.launch.attention_reference import check_outputs, poisoned_outputs, random_inputs

    v = variant_by_label(label)
    for config in correctness_cases(label, full):
        rec = {
            "stage": "correct",
            "variant": label,
            "config": config.label(),
            "dtype": config.dtype,
            "seq_len": config.seq_len,
            "causal": config.causal,
            "bh": config.bh,
        }
        try:
            seed = zlib.crc32(f"{label}-{config.label()}".encode())
            (q, k, vv), upcast = random_inputs(config, seed)
            o, m, l = poisoned_outputs(config, q)
            flash_ws.launch_forward(q, k, vv, o, m, l, config, v)
            cp.cuda.Device().synchronize()
            check = check_outputs(o, m, l, config, upcast)
            rec.update(
                ok=check.passed,
                detail=check.describe(),
                o_error=check.o_error,
                m_error=check.m_error,
                l_error=check.l_error,
            )
            del q, k, vv, o, m, l, upcast
        except Exception as exc:
            rec.update(ok=False, detail=f"{type(exc).__name__}: {exc}"[:600])
        emit(rec)
        cp.get_default_memory_pool().free_all_blocks()


def worker_time(labels: list[str], quick: bool, repeats: int) -> None:
    import cupy as cp
    from bench_kernels import Row, bench_fused, bench_sdpa, finish, make_sets, torch_views

    from gpu.launch import flash_ws

    args = argparse.Namespace(repeats=repeats, target_ms=10.0)
    variants = [variant_by_label(x) for x in labels]
    defaults = {d: flash_ws.default_launch(d) for d in flash_ws.SUPPORTED_HEAD_DIMS}
    try:
        import torch

        torch_ok = torch.cuda.is_available()
    except Exception:
        torch_ok = False
    seqs = (1024, 4096, 16384) if quick else FA3_SEQ
    configs = [fa3_config(n, d, c) for d in (64, 128, 256) for c in (False, True) for n in seqs]
    configs += [fa3_config(4096, 64, False, "bf16"), fa3_config(16384, 128, False, "bf16")]
    for config in configs:
        d = config.head_dim
        sets = make_sets(config, seed=config.seq_len + d + config.causal)
        out = cp.empty_like(sets[0][0])
        rows: list[Row] = []
        flash_out = None
        if torch_ok:
            tsets = torch_views(sets, config.dtype)
            for backend, name in (
                ("FLASH_ATTENTION", "sdpa_flash"),
                ("CUDNN_ATTENTION", "sdpa_cudnn"),
            ):
                row, res = bench_sdpa(config, tsets, backend, args)
                if name == "sdpa_flash":
                    flash_out = res
                rows.append(row)
        if d in (64, 128):
            from gpu.launch import flash_wgmma

            rows.append(
                bench_fused(
                    "wgmma",
                    "wgmma",
                    flash_wgmma.default_launch(d),
                    config,
                    sets,
                    args,
                    out,
                    flash_out,
                )
            )
        ws_here = [v for v in variants if v.head_dim == d]
        timed_n = (4096,) if quick else (2048, 16384)
        for v in ws_here:
            is_default = v == defaults[d]
            if not is_default and (config.seq_len not in timed_n or config.dtype != "fp16"):
                continue
            name = "ws" if is_default else f"ws_{v.label}"
            rows.append(bench_fused("ws", name, v, config, sets, args, out, flash_out))
        for row in rows:
            finish(row, config)
            emit(
                {
                    "stage": "time",
                    "config": config.label(),
                    "dtype": config.dtype,
                    "head_dim": d,
                    "seq_len": config.seq_len,
                    "causal": config.causal,
                    "batch": config.batch,
                    "heads": config.heads,
                    **row.__dict__,
                }
            )
        del sets, out, flash_out
        cp.get_default_memory_pool().free_all_blocks()
        if torch_ok:
            torch.cuda.empty_cache()


def worker_candidates(labels: list[str], passes: int, repeats: int) -> None:
    """Every variant against SDPA cuDNN at the candidate shapes: `passes` sweeps, the variant
    order reversed every other sweep, so clock drift during a shape's timing hits all alike."""
    import cupy as cp
    from bench_kernels import Row, bench_fused, bench_sdpa, finish, make_sets, torch_views

    args = argparse.Namespace(repeats=repeats, target_ms=10.0)
    variants = [variant_by_label(x) for x in labels]
    try:
        import torch

        torch_ok = torch.cuda.is_available()
    except Exception:
        torch_ok = False
    for d in sorted({v.head_dim for v in variants}):
        here = [v for v in variants if v.head_dim == d]
        for causal in (False, True):
            for n in CANDIDATE_SEQ:
                config = fa3_config(n, d, causal)
                sets = make_sets(config, seed=n + d + causal)
                out = cp.empty_like(sets[0][0])
                tsets = torch_views(sets, config.dtype) if torch_ok else None
                for sweep in range(passes):
                    rows: list[Row] = []
                    if torch_ok:
                        rows.append(bench_sdpa(config, tsets, "CUDNN_ATTENTION", args)[0])
                    for v in here if sweep % 2 == 0 else here[::-1]:
                        rows.append(bench_fused("ws", v.label, v, config, sets, args, out))
                    for row in rows:
                        finish(row, config)
                        emit(
                            {
                                "stage": "candidate",
                                "sweep": sweep,
                                "config": config.label(),
                                "head_dim": d,
                                "seq_len": n,
                                "causal": causal,
                                "batch": config.batch,
                                "heads": config.heads,
                                "impl": row.impl,
                                "ms": row.ms,
                                "tflops": row.tflops,
                                "error": row.error,
                            }
                        )
                del sets, out, tsets
                cp.get_default_memory_pool().free_all_blocks()
                if torch_ok:
                    torch.cuda.empty_cache()


def _sm_clock_mhz() -> int | None:
    """The SM clock nvidia-smi reports now (None where it cannot be read)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10,
        ).stdout  # fmt: skip
        return int(out.split()[0])
    except Exception:
        return None


def heat(seconds: float) -> dict:
    """Keep the device busy without a gap for `seconds`: the default kernel and SDPA cuDNN in
    turn at d=128 N=16384, synchronizing only every few launches. Clocks settle lower under
    sustained load than after idle, and the timings after this are the ones a user sees."""
    import cupy as cp

    from gpu.launch import flash_ws

    config = fa3_config(16384, 128, False)
    shape = (config.batch, config.heads, 16384, 128)
    q, k, v = (cp.random.standard_normal(shape, dtype=cp.float32).astype(cp.float16) for _ in "qkv")
    o = cp.empty_like(q)
    m = cp.empty((config.batch, config.heads, 16384), cp.float32)
    l = cp.empty_like(m)
    prepared = flash_ws.prepare(config)
    arguments = prepared.arguments(q, k, v, o, m, l)
    peer = None
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        tq, tk, tv = (torch.from_dlpack(a) for a in (q, k, v))

        def peer() -> None:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION), torch.no_grad():
                F.scaled_dot_product_attention(tq, tk, tv)
    except Exception:
        pass
    clock_before = _sm_clock_mhz()
    t0 = time.time()
    launches = 0
    while time.time() - t0 < seconds:
        for _ in range(8):
            prepared.launch_with(arguments)
            if peer is not None:
                peer()
            launches += 1
        cp.cuda.Device().synchronize()
    return {
        "seconds": round(time.time() - t0, 1),
        "launches": launches,
        "sm_clock_mhz_before": clock_before,
        "sm_clock_mhz_after": _sm_clock_mhz(),
    }


def worker_sustained(
    labels: list[str], rounds: int, repeats: int, dtypes: list[str], warm_s: float
) -> None:
    """Ours against SDPA flash and cuDNN at every FlashAttention-3 shape, after `warm_s` seconds
    of continuous device work: `rounds` rounds per shape, the order of the implementations
    reversed every other round so that drift hits them alike; inputs rotate (bench_kernels)."""
    import cupy as cp
    from bench_kernels import bench_fused, bench_sdpa, finish, make_sets, torch_views

    args = argparse.Namespace(repeats=repeats, target_ms=10.0)
    variants = [variant_by_label(x) for x in labels]
    try:
        import torch

        torch_ok = torch.cuda.is_available()
    except Exception:
        torch_ok = False
    emit({"stage": "heat", **heat(warm_s)})
    for dtype in dtypes:
        for d in (64, 128, 256):
            here = [v for v in variants if v.head_dim == d]
            for causal in (False, True):
                for n in FA3_SEQ:
                    config = fa3_config(n, d, causal, dtype)
                    sets = make_sets(config, seed=n + d + causal)
                    out = cp.empty_like(sets[0][0])
                    tsets = torch_views(sets, dtype) if torch_ok else None
                    jobs: list[tuple[str, Any]] = []
                    if torch_ok:
                        jobs += [
                            ("sdpa_flash", "FLASH_ATTENTION"),
                            ("sdpa_cudnn", "CUDNN_ATTENTION"),
                        ]
                    jobs += [(v.label, v) for v in here]
                    for rnd in range(rounds):
                        for name, what in jobs if rnd % 2 == 0 else jobs[::-1]:
                            if isinstance(what, str):
                                row = bench_sdpa(config, tsets, what, args)[0]
                            else:
                                row = bench_fused("ws", name, what, config, sets, args, out)
                            finish(row, config)
                            emit({
                                "stage": "sustained", "round": rnd, "config": config.label(),
                                "dtype": dtype, "head_dim": d, "seq_len": n, "causal": causal,
                                "batch": config.batch, "heads": config.heads, "impl": name,
                                "ms": row.ms, "tflops": row.tflops, "error": row.error,
                            })  # fmt: skip
                    del sets, out, tsets
                    cp.get_default_memory_pool().free_all_blocks()
                    if torch_ok:
                        torch.cuda.empty_cache()
    emit({"stage": "heat_end", "sm_clock_mhz": _sm_clock_mhz()})


def worker_trace(out_dir: str) -> None:
    """One trace-build launch (default variant, d=128, N=4096, 16 heads, causal and not) after
    two warm-ups; the raw rows go to ws_trace_<mask>.npy with a JSON description beside them."""
    import cupy as cp
    import numpy as np

    from gpu.launch import flash_ws
    from gpu.launch.attention_reference import random_inputs

    for causal in (False, True):
        config = AttentionConfig(seq_len=4096, heads=16, head_dim=128, causal=causal)
        (q, k, v), _ = random_inputs(config, seed=11)
        o = cp.empty_like(q)
        m = cp.empty((1, 16, 4096), cp.float32)
        l = cp.empty_like(m)
        prepared = flash_ws.prepare(config, extra_options=(flash_ws.TRACE_OPTION,))
        buffer = flash_ws.trace_buffer(config, prepared)
        for _ in range(2):
            prepared(q, k, v, o, m, l, buffer)
        buffer.fill(-1)
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        prepared(q, k, v, o, m, l, buffer)
        stop.record()
        stop.synchronize()
        name = "causal" if causal else "full"
        np.save(Path(out_dir) / f"ws_trace_{name}.npy", cp.asnumpy(buffer))
        meta = {
            "config": config.label(),
            "variant": flash_ws.default_launch(128).label,
            "blocks": prepared.blocks,
            "rows_per_block": flash_ws.trace_rows_per_block(config),
            "segments": flash_ws.trace_segments(config),
            "kernel_ms": cp.cuda.get_elapsed_time(start, stop),
            "row": "[block, sm, role*256 + code, j, t_ns]",
            "codes": {k: v[0] for k, v in flash_ws.TRACE_CODES.items()},
            "roles": list(flash_ws.TRACE_ROLES),
        }
        (Path(out_dir) / f"ws_trace_{name}.json").write_text(json.dumps(meta, indent=1))
        emit({"stage": "trace", "mask": name, "kernel_ms": meta["kernel_ms"]})


# ---------------------------------------------------------------------------------------------
# The parent


def run_worker(argv: list[str], timeout: float, log: Path) -> tuple[list[dict], str]:
    """Run this script as a worker; (its JSON records, 'ok' | 'timeout' | 'exit N')."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", *argv]
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        out, err, status = (
            proc.stdout,
            proc.stderr,
            "ok" if proc.returncode == 0 else (f"exit {proc.returncode}"),
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        status = "timeout"
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n[{status}]\n{out}\n{err}\n")
    records = [json.loads(line[len(MARK) :]) for line in out.splitlines() if line.startswith(MARK)]
    if status != "ok":
        records.append({"stage": "error", "argv": argv, "status": status, "stderr": err[-3000:]})
    return records, status


def summarize(records: list[dict], elapsed: float) -> list[str]:
    lines: list[str] = []
    env = next((r for r in records if r.get("stage") == "env"), {})
    lines.append(
        f"device {env.get('device')} cc {env.get('compute_capability')}, "
        f"CuPy {env.get('cupy')}, torch {env.get('torch')}, cuDNN {env.get('cudnn')}; "
        f"{elapsed:.0f} s"
    )
    comp = [r for r in records if r.get("stage") == "compile"]
    bad = [r for r in comp if not r.get("ok")]
    lines.append(f"compile: {len(comp) - len(bad)}/{len(comp)} instances ok")
    for r in bad[:6]:
        lines.append(
            f"  FAILED {r['variant']} causal={r['causal']} bf16={r['bf16']}: "
            + r.get("log", "")[-300:].replace("\n", " | ")
        )
    corr = [r for r in records if r.get("stage") == "correct"]
    by_variant: dict[str, list[dict]] = {}
    for r in corr:
        by_variant.setdefault(r["variant"], []).append(r)
    lines.append("correctness (cases passed / run; worst |O - O_ref|):")
    for label, rs in by_variant.items():
        ok = sum(r["ok"] for r in rs)
        worst = max((r.get("o_error", 0) for r in rs), default=0)
        lines.append(f"  {label:28} {ok:3}/{len(rs):<3} worst {worst:.1e}")
        for r in [r for r in rs if not r["ok"]][:3]:
            lines.append(f"     FAIL {r['config']}: {r['detail'][:160]}")
    for r in records:
        if r.get("stage") == "trace":
            lines.append(f"  trace build {r['mask']}: one launch {r['kernel_ms']:.3f} ms")
        if r.get("stage") == "error":
            lines.append(f"  worker {' '.join(r['argv'][:3])}: {r['status']}")
    timing = [r for r in records if r.get("stage") == "time" and r.get("ms")]
    if timing:
        lines.append("")
        lines.append(
            f"{'dtype':5} {'d':>3} {'N':>6} {'B×h':>7} {'causal':6} {'ws TF/s':>8} "
            f"{'wgmma':>7} {'flash':>7} {'cuDNN':>7} {'ws/cuDNN':>8} {'ws/flash':>8}"
            f"  best ws variant (TF/s)"
        )
        keys = sorted({(r["dtype"], r["head_dim"], r["causal"], r["seq_len"]) for r in timing})
        for dtype, d, causal, n in keys:
            rs = [
                r
                for r in timing
                if (r["dtype"], r["head_dim"], r["causal"], r["seq_len"]) == (dtype, d, causal, n)
            ]
            get = {r["impl"]: r["tflops"] for r in rs}
            ws = get.get("ws")
            cudnn, flash = get.get("sdpa_cudnn"), get.get("sdpa_flash")
            best = max(
                (r for r in rs if r["impl"].startswith("ws")),
                key=lambda r: r["tflops"],
                default=None,
            )
            fmt = lambda x: f"{x:7.0f}" if x else f"{'-':>7}"  # noqa: E731
            ratio = lambda a, b: f"{a / b:8.2f}" if a and b else f"{'-':>8}"  # noqa: E731
            bh = f"{rs[0]['batch']}×{rs[0]['heads']}"
            best_s = f"{best['impl']} ({best['tflops']:.0f})" if best else "-"
            lines.append(
                f"{dtype:5} {d:>3} {n:>6} {bh:>7} {('yes' if causal else 'no'):6} "
                f"{fmt(ws):>8} {fmt(get.get('wgmma'))} {fmt(flash)} {fmt(cudnn)} "
                f"{ratio(ws, cudnn)} {ratio(ws, flash)}  {best_s}"
            )
        lines.append("")
        lines.extend(target_lines(timing))
    lines.extend(candidate_lines(records))
    lines.extend(sustained_lines(records))
    return lines


def sustained_lines(records: list[dict]) -> list[str]:
    """Per shape: the median TFLOP/s over the rounds of each implementation and its spread
    ((max − min) / median), then each of ours against cuDNN and flash; then how many shapes
    with N >= 1024 reach 1.0x cuDNN, and the TFLOP/s targets at N = 16k."""
    import statistics

    rows = [r for r in records if r.get("stage") == "sustained"]
    if not rows:
        return []
    out: list[str] = [""]
    for r in records:
        if r.get("stage") == "heat":
            out.append(
                f"sustained load: {r['seconds']} s of back-to-back launches first "
                f"(SM clock {r['sm_clock_mhz_before']} -> {r['sm_clock_mhz_after']} MHz)"
            )
        if r.get("stage") == "heat_end":
            out.append(f"SM clock at the end: {r['sm_clock_mhz']} MHz")
    ours = sorted({r["impl"] for r in rows if not r["impl"].startswith("sdpa")})
    rounds = 1 + max(r["round"] for r in rows)
    out.append(
        f"median of {rounds} rounds, TF/s (spread); x = ratio of medians. ours: {', '.join(ours)}"
    )
    out.append(
        f"{'dtype':5} {'d':>3} {'N':>6} {'causal':6} {'flash':>12} {'cuDNN':>12}  "
        "ours: TF/s (spread) ×cuDNN ×flash"
    )
    keys = sorted({(r["dtype"], r["head_dim"], r["causal"], r["seq_len"]) for r in rows})
    tally: dict[str, list[float]] = {}
    for key in keys:
        here = [r for r in rows if (r["dtype"], r["head_dim"], r["causal"], r["seq_len"]) == key]
        runs: dict[str, list[float]] = {}
        for r in here:
            if r.get("tflops"):
                runs.setdefault(r["impl"], []).append(r["tflops"])
        med, spread = median_and_spread(runs)

        def cell(k: str, med: dict = med, spread: dict = spread) -> str:
            return f"{med[k]:5.0f} ({spread[k]:4.1%})" if k in med else f"{'-':>12}"

        dtype, d, causal, n = key
        parts = []
        for label in ours:
            if label not in med:
                continue
            x_cudnn = med[label] / med["sdpa_cudnn"] if "sdpa_cudnn" in med else None
            x_flash = med[label] / med["sdpa_flash"] if "sdpa_flash" in med else None
            parts.append(
                f"{label.split('-', 1)[1]} {cell(label)} "
                + (f"{x_cudnn:.2f}" if x_cudnn else "-")
                + " "
                + (f"{x_flash:.2f}" if x_flash else "-")
            )
            if x_cudnn and n >= 1024:
                tally.setdefault(label, []).append(x_cudnn)
        out.append(
            f"{dtype:5} {d:>3} {n:>6} {('yes' if causal else 'no'):6} "
            f"{cell('sdpa_flash')} {cell('sdpa_cudnn')}  " + " | ".join(parts)
        )
    out.append("")
    for label, xs in sorted(tally.items()):
        hit = sum(x >= 1.0 for x in xs)
        out.append(
            f"{label}: >= 1.0x cuDNN at {hit} of {len(xs)} shapes with N >= 1024 "
            f"(worst {min(xs):.2f}, best {max(xs):.2f})"
        )
    for d, goal in TFLOPS_TARGETS.items():
        for label in ours:
            got = [
                r["tflops"]
                for r in rows
                if r["impl"] == label and r["head_dim"] == d and r["seq_len"] == 16384
                and not r["causal"] and r["dtype"] == "fp16" and r.get("tflops")
            ]  # fmt: skip
            if got:
                tf = statistics.median(got)
                verdict = "met" if tf >= goal else "missed"
                out.append(
                    f"target d={d} N=16k full >= {goal} TFLOP/s: {label} {tf:.0f} ({verdict})"
                )
    return out


#: TFLOP/s targets at N = 16k, non-causal fp16, per head dim.
TFLOPS_TARGETS = {64: 500, 128: 650}


def median_and_spread(runs: dict[str, list[float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Per implementation: the median of its runs and their spread, (max − min) / median."""
    import statistics

    med = {k: statistics.median(v) for k, v in runs.items()}
    return med, {k: (max(v) - min(v)) / med[k] for k, v in runs.items()}


def candidate_lines(records: list[dict]) -> list[str]:
    """One table per shape, best first: TFLOP/s (median of the sweeps), × cuDNN, × the current
    default, and the spread of the sweeps ((max − min) / median: differences below it are
    noise); then per head dim the variant with the best geometric mean over the shapes."""
    import math

    from gpu.launch import flash_ws

    rows = [r for r in records if r.get("stage") == "candidate"]
    if not rows:
        return []
    defaults = {d: flash_ws.default_launch(d).label for d in flash_ws.SUPPORTED_HEAD_DIMS}
    baselines = set(flash_ws.BASELINES)
    shapes = sorted({(r["head_dim"], r["causal"], r["seq_len"]) for r in rows})
    out: list[str] = []
    ratios: dict[int, dict[str, list[float]]] = {}
    bests: list[tuple[int, bool, int, str, float, float | None]] = []
    for d, causal, n in shapes:
        here = [r for r in rows if (r["head_dim"], r["causal"], r["seq_len"]) == (d, causal, n)]
        runs: dict[str, list[float]] = {}
        errors: dict[str, str] = {}
        for r in here:
            if r.get("tflops"):
                runs.setdefault(r["impl"], []).append(r["tflops"])
            elif r.get("error"):
                errors[r["impl"]] = r["error"]
        med, spread = median_and_spread(runs)
        cudnn = med.pop("sdpa_cudnn", None)
        default = med.get(defaults[d])
        bh = f"{here[0]['batch']}×{here[0]['heads']}"
        mask = "causal" if causal else "full"
        cudnn_s = f"{cudnn:.0f}" if cudnn else "-"
        out.append("")
        out.append(f"d={d} N={n} {mask} (B×h {bh}, fp16)   SDPA cuDNN {cudnn_s} TF/s")
        out.append(f"  {'variant':34} {'TF/s':>6} {'×cuDNN':>7} {'×default':>8} {'spread':>6}")
        ranked = sorted(med.items(), key=lambda kv: -kv[1])
        if ranked:
            bests.append((d, causal, n, ranked[0][0], ranked[0][1], cudnn))
        for rank, (label, tf) in enumerate(ranked):
            tags = []
            if label == defaults[d]:
                tags.append("default")
            if label in baselines:
                tags.append("baseline")
            if rank == 0:
                tags.append("BEST")
            x_cudnn = f"{tf / cudnn:7.2f}" if cudnn else f"{'-':>7}"
            x_default = f"{tf / default:8.3f}" if default else f"{'-':>8}"
            out.append(
                f"  {label:34} {tf:6.0f} {x_cudnn} {x_default} {spread[label]:6.1%}"
                + (f"  <- {', '.join(tags)}" if tags else "")
            )
            if default:
                ratios.setdefault(d, {}).setdefault(label, []).append(tf / default)
        for label, err in errors.items():
            out.append(f"  {label:34} failed: {err[:90]}")
    out.append("")
    out.append("per head dim, geometric mean over the shapes of TF/s ÷ the current default's:")
    for d, by_label in sorted(ratios.items()):
        count = max(len(v) for v in by_label.values())
        complete = {k: v for k, v in by_label.items() if len(v) == count}
        gm = {k: math.exp(sum(map(math.log, v)) / len(v)) for k, v in complete.items()}
        best = max(gm, key=gm.get)
        for label in sorted(gm, key=lambda k: -gm[k]):
            worst = min(complete[label])
            out.append(
                f"  d={d:<3} {label:34} {gm[label]:6.3f} (worst shape {worst:.3f})"
                + ("  <- default" if label == defaults[d] else "")
            )
        if best != defaults[d]:
            out.append(
                f'  d={d}: to switch, set WS_DEFAULTS[{d}] = "{best}" in gpu/launch/flash_ws.py'
            )
        else:
            out.append(f"  d={d}: the default stays ({best})")
    below = [
        f"d={d} N={n} {'causal' if c else 'full'} {tf / cu:.2f}"
        for d, c, n, _, tf, cu in bests
        if cu and tf < cu
    ]
    out.append(
        "best variant of each shape >= 1.0x cuDNN: "
        + ("every shape" if not below else f"missed at {len(below)}: " + "; ".join(below))
    )
    for d, goal in TFLOPS_TARGETS.items():
        hit = [(label, tf) for dd, c, n, label, tf, _ in bests if (dd, c, n) == (d, False, 16384)]
        if hit:
            label, tf = hit[0]
            verdict = "met" if tf >= goal else "missed"
            out.append(
                f"target d={d} N=16k full >= {goal} TFLOP/s: {tf:.0f} by {label} ({verdict})"
            )
    return out


def target_lines(timing: list[dict]) -> list[str]:
    """The targets: >= 1.0x cuDNN at every N >= 1024; >= 500 (d=64) / 650 (d=128) TFLOP/s at
    N = 16k non-causal fp16."""
    out = []
    below = []
    for r in timing:
        if r["impl"] != "ws" or r["seq_len"] < 1024:
            continue
        peer = next(
            (
                p
                for p in timing
                if p["impl"] == "sdpa_cudnn"
                and p["config"] == r["config"]
                and p["dtype"] == r["dtype"]
            ),
            None,
        )
        if peer and peer.get("tflops") and r["tflops"] < peer["tflops"]:
            below.append(
                f"{r['dtype']} d={r['head_dim']} N={r['seq_len']} "
                f"{'causal' if r['causal'] else 'full'} "
                f"{r['tflops'] / peer['tflops']:.2f}"
            )
    out.append(
        "target >= 1.0x cuDNN at N >= 1024: "
        + ("met" if not below else f"missed at {len(below)}: " + "; ".join(below[:12]))
    )
    for d, goal in TFLOPS_TARGETS.items():
        r = next(
            (
                r
                for r in timing
                if r["impl"] == "ws"
                and r["head_dim"] == d
                and r["seq_len"] == 16384
                and not r["causal"]
                and r["dtype"] == "fp16"
            ),
            None,
        )
        got = f"{r['tflops']:.0f}" if r else "not measured"
        verdict = "met" if r and r["tflops"] >= goal else "missed"
        out.append(f"target d={d} N=16k full >= {goal} TFLOP/s: {got} ({verdict})")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT", "ws_check_out"))
    p.add_argument("--quick", action="store_true", help="fewer shapes")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--jobs", type=int, default=8, help="parallel compile processes")
    p.add_argument("--skip-time", action="store_true")
    p.add_argument(
        "--candidates",
        action="store_true",
        help="check and time the defaults and gpu.launch.flash_ws.CANDIDATES only (a table a "
        "shape)",
    )
    p.add_argument("--passes", type=int, default=3, help="--candidates: sweeps per shape")
    p.add_argument(
        "--sustained",
        action="store_true",
        help="after --warm seconds of continuous work, time the defaults and the persistent "
        "candidates against SDPA flash and cuDNN at every FA3 shape, --rounds rounds each",
    )
    p.add_argument("--warm", type=float, default=30.0, help="--sustained: seconds of heating")
    p.add_argument("--rounds", type=int, default=3, help="--sustained: rounds per shape")
    p.add_argument("--dtypes", default="fp16,bf16", help="--sustained: dtypes to time")
    p.add_argument(
        "--variants", default="", help="--sustained: more variant labels to time (comma list)"
    )
    p.add_argument("--worker", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        stage, rest = args.worker[0], args.worker[1:]
        if stage == "env":
            worker_env()
        elif stage == "compile":
            worker_compile(rest)
        elif stage == "correct":
            worker_correct(rest[0], rest[1] == "full")
        elif stage == "time":
            worker_time(rest[2:], rest[0] == "quick", int(rest[1]))
        elif stage == "candidates":
            worker_candidates(rest[2:], int(rest[0]), int(rest[1]))
        elif stage == "trace":
            worker_trace(rest[0])
        elif stage == "sustained":
            rounds, repeats, dtypes, warm = rest[:4]
            worker_sustained(rest[4:], int(rounds), int(repeats), dtypes.split(","), float(warm))
        return 0

    from gpu.launch import flash_ws

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "ws_check.log"
    log.write_text("")
    t0 = time.time()
    records: list[dict] = []

    def stage(name: str) -> None:
        print(f"[{time.time() - t0:5.0f} s] {name}", flush=True)

    stage("env")
    records += run_worker(["env"], 120, log)[0]
    variants = (
        flash_ws.candidate_variants()
        if args.candidates or args.sustained
        else flash_ws.all_variants()
    )
    labels = [v.label for v in variants]
    stage(f"compile {len(labels)} variants × 4 instances, {args.jobs} processes")
    chunks = [labels[i :: args.jobs] for i in range(args.jobs) if labels[i :: args.jobs]]
    with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        for recs, _ in pool.map(lambda c: run_worker(["compile", *c], 400, log), chunks):
            records += recs
    compiled = {r["variant"] for r in records if r.get("stage") == "compile" and r.get("ok")}
    failed = {r["variant"] for r in records if r.get("stage") == "compile" and not r.get("ok")}
    good = [x for x in labels if x in compiled and x not in failed]
    defaults = {flash_ws.default_launch(d).label for d in flash_ws.SUPPORTED_HEAD_DIMS}
    correct: list[str] = []
    for label in good:
        full = label in defaults
        stage(f"correct {label} ({'full' if full else 'reduced'} grid)")
        recs, status = run_worker(
            ["correct", label, "full" if full else "reduced"], 150 if full else 90, log
        )
        records += recs
        cases = [r for r in recs if r.get("stage") == "correct"]
        if status == "ok" and cases and all(r["ok"] for r in cases):
            correct.append(label)
    (out / "ws_check.json").write_text(json.dumps({"records": records}, indent=1))
    if correct and args.candidates and not args.skip_time:
        stage(f"time {len(correct)} correct variants vs SDPA cuDNN, {args.passes} sweeps a shape")
        recs, _ = run_worker(
            ["candidates", str(args.passes), str(args.repeats), *correct], 420, log
        )
        records += recs
    elif correct and args.sustained and not args.skip_time:
        extra = [x for x in args.variants.split(",") if x]
        timed = [x for x in correct if x in defaults or x in extra]
        stage(f"sustained: {args.warm:.0f} s of heating, then {len(timed)} variants vs SDPA")
        recs, _ = run_worker(
            ["sustained", str(args.rounds), str(args.repeats), args.dtypes, str(args.warm), *timed],
            590,
            log,
        )
        records += recs
    elif correct and not args.skip_time:
        stage(f"time {len(correct)} correct variants vs wgmma, SDPA flash, SDPA cuDNN")
        recs, _ = run_worker(
            ["time", "quick" if args.quick else "full", str(args.repeats), *correct], 420, log
        )
        records += recs
    default_128 = flash_ws.default_launch(128).label
    if default_128 in correct and not (args.candidates or args.sustained):
        stage("trace build (d=128, N=4096): raw rows to ws_trace_*.npy")
        records += run_worker(["trace", str(out)], 120, log)[0]
    elapsed = time.time() - t0
    lines = summarize(records, elapsed)
    (out / "ws_check.json").write_text(
        json.dumps({"records": records, "summary": lines, "seconds": elapsed}, indent=1)
    )
    (out / "ws_check_summary.txt").write_text("\n".join(lines) + "\n")
    print()
    print("\n".join(lines))
    ok = bool(correct) and all(x in correct for x in defaults)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
