"""Record a sweep on a GPU for replay anywhere: every algorithm of ours, plus PyTorch SDPA peers.

The output is a `gpu.files.recording` file (schema tilescope.results/1) that `python main.py --open`
and the app's "recorded run" backend show on machines without an NVIDIA GPU. Our algorithms run
through `gpu.backends.cuda_backend.CudaBackend`, exactly as the app runs them (naive out-of-memory
points included: they are the lesson). PyTorch's scaled_dot_product_attention is measured in the
same process as reference series, with algorithm ids `sdpa_flash`, `sdpa_cudnn` and `sdpa_math`;
torch is imported only here, never by the app.

With `--profile`, every result (ours and the peers) also carries its measured traffic: DRAM and
L2 bytes and unit activity per kernel from CUPTI PM sampling (gpu/counters/profiler.py; the times
stay those of unsampled runs), and the device record carries the L2 read bandwidth measured by
bench/l2_bandwidth.py, which the roofline then uses as this device's L2 roof. CUPTI is loaded
before torch, whose own older libcupti would otherwise be the one in the process.

    python bench/record_run.py --profile --out resources/recorded/h200_sweep.json

`--pass backward` or `--pass step` records the training step instead: the algorithms with a
backward here (naive, tiled_mma), each result's pass in its config, and the SDPA peers timed
through torch autograd (step: forward then backward, each timed; backward: only the backward,
after an untimed forward), their peak from torch's allocator over the whole step.

    python bench/record_run.py --pass step --profile --out resources/recorded/h200_training.json

`--pass decode` records the decode step: q = --new-tokens query rows per head against a cache of
N tokens over --kv-heads KV heads (naive and split_kv, and the SDPA flash and cuDNN peers with
torch's enable_gqa, which reads each KV head once for its group as ours do).

    python bench/record_run.py --pass decode --heads 32 --kv-heads 8 --head-dim 128 --batch 8 \
        --profile --out resources/recorded/h100_decode.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu.algorithms import TILED
from gpu.backends.backend import RunOptions
from gpu.backends.cuda_backend import CudaBackend
from gpu.config import BACKWARD, DECODE, FORWARD, PASSES, STEP, AttentionConfig
from gpu.files.recording import Recording, save_recording
from gpu.model.costmodel import pass_useful_flops
from gpu.results import KernelTime, KernelTraffic, RunResult

PEERS = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_cudnn": "CUDNN_ATTENTION", "sdpa_math": "MATH"}


def time_peer(
    torch, cfg: AttentionConfig, peer: str, repeats: int, device: str, profile: bool = False
) -> RunResult:
    """One SDPA backend on random inputs: CUDA-event median after warm-up, peak from torch's
    allocator above the inputs' baseline; with `profile`, its counters sampled afterwards."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[cfg.dtype]
    flops = pass_useful_flops(cfg)
    base = dict(config=cfg, algorithm=peer, backend="cuda", device=device, flops=flops)
    shape = (cfg.batch, cfg.heads, cfg.seq_len, cfg.head_dim)
    shapes = (shape, shape, shape)
    extra: dict = {"is_causal": cfg.causal}
    if cfg.is_decode:  # q new tokens against the cache; GQA read once per KV head
        kv = (cfg.batch, cfg.kv_head_count, cfg.seq_len, cfg.head_dim)
        shapes = ((cfg.batch, cfg.heads, cfg.new_tokens, cfg.head_dim), kv, kv)
        extra = {"enable_gqa": cfg.kv_head_count != cfg.heads}
    msg = f"PyTorch {torch.__version__} scaled_dot_product_attention, {PEERS[peer]} backend (peer)"
    sdpa = torch.nn.functional.scaled_dot_product_attention
    inputs: tuple = ()
    try:
        inputs = tuple(torch.randn(s, device="cuda", dtype=dtype) for s in shapes)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        with sdpa_kernel(getattr(SDPBackend, PEERS[peer])):
            sdpa(*inputs, **extra)
            torch.cuda.synchronize()
            held = sum(x.nbytes for x in inputs) + inputs[0].nbytes  # the inputs and O
            peak = torch.cuda.max_memory_allocated() - before + held
            samples = []
            for _ in range(repeats):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                sdpa(*inputs, **extra)
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
            times = (KernelTime.from_samples("sdpa", samples),)
            traffic: tuple[KernelTraffic, ...] = ()
            if profile:
                from gpu.backends.launch_timing import profile_launches

                launch = [("sdpa", lambda: sdpa(*inputs, **extra))]
                traffic, note = profile_launches(launch, times, torch.cuda.synchronize)
                msg = f"{msg}; {note}" if note else msg
        return RunResult(
            **base,
            kernel_times=times,
            peak_bytes=int(peak),
            message=msg,
            repeats=repeats,
            traffic=traffic,
        )
    except torch.cuda.OutOfMemoryError as exc:
        return RunResult(**base, oom=True, message=f"{msg}: out of memory ({str(exc)[:120]})")
    except RuntimeError as exc:  # this backend does not support the config
        return RunResult(**base, message=f"{msg}: not run ({str(exc)[:160]})")
    finally:
        inputs = ()
        torch.cuda.empty_cache()


def time_peer_training(
    torch, cfg: AttentionConfig, peer: str, repeats: int, device: str
) -> RunResult:
    """One SDPA backend's training pass through torch autograd on random inputs: per repeat
    CUDA events around the forward and around the backward (torch.autograd.grad with dO); the
    backward pass reports the backward only (its forward untimed). Peak from torch's allocator
    above the inputs' baseline, over forward and backward."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gpu.model.costmodel import algorithm_cost

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[cfg.dtype]
    base = dict(
        config=cfg, algorithm=peer, backend="cuda", device=device,
        flops=algorithm_cost(cfg, "tiled_mma").flops,
    )  # fmt: skip
    shape = (cfg.batch, cfg.heads, cfg.seq_len, cfg.head_dim)
    msg = (
        f"PyTorch {torch.__version__} scaled_dot_product_attention, {PEERS[peer]} backend, "
        "autograd (peer)"
    )
    sdpa = torch.nn.functional.scaled_dot_product_attention
    inputs: tuple = ()
    try:
        inputs = tuple(
            torch.randn(shape, device="cuda", dtype=dtype).requires_grad_(True) for _ in range(3)
        )
        do = torch.randn(shape, device="cuda", dtype=dtype)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fwd_ms, bwd_ms = [], []
        with sdpa_kernel(getattr(SDPBackend, PEERS[peer])):
            for i in range(repeats + 1):  # the first is the warm-up
                events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                events[0].record()
                o = sdpa(*inputs, is_causal=cfg.causal)
                events[1].record()
                torch.autograd.grad(o, inputs, do)
                events[2].record()
                events[2].synchronize()
                del o
                if i:
                    fwd_ms.append(events[0].elapsed_time(events[1]))
                    bwd_ms.append(events[1].elapsed_time(events[2]))
        peak = torch.cuda.max_memory_allocated() - before + 4 * do.nbytes
        times = (KernelTime.from_samples("sdpa_backward", bwd_ms),)
        if cfg.pass_ == STEP:
            times = (KernelTime.from_samples("sdpa_forward", fwd_ms), *times)
        return RunResult(
            **base, kernel_times=times, peak_bytes=int(peak), message=msg, repeats=repeats
        )
    except torch.cuda.OutOfMemoryError as exc:
        return RunResult(**base, oom=True, message=f"{msg}: out of memory ({str(exc)[:120]})")
    except RuntimeError as exc:  # this backend does not support the config
        return RunResult(**base, message=f"{msg}: not run ({str(exc)[:160]})")
    finally:
        inputs = ()
        torch.cuda.empty_cache()


def with_l2_bandwidth(device):
    """`device` with the L2 read bandwidth measured now (bench/l2_bandwidth.py), and the L2's
    peak from its counters where they give it; unchanged (with a note) if measuring fails."""
    from l2_bandwidth import measure_l2_read_bandwidth, sampled_check

    try:
        l2 = measure_l2_read_bandwidth()
    except Exception as exc:
        print(f"L2 bandwidth not measured: {exc}", flush=True)
        return device
    details = {**device.details, "l2_read_bandwidth_bytes_s": l2["best_bytes_s"]}
    try:
        peak = (sampled_check(l2["best_buffer_mib"]) or {}).get("peak_bytes_s")
    except Exception as exc:  # the streaming figure stands without it
        print(f"L2 peak from its counters not read: {exc}", flush=True)
        peak = None
    if peak:
        details["l2_peak_bandwidth_bytes_s"] = peak
    print(
        f"L2 read bandwidth {l2['best_bytes_s'] / 1e12:.2f} TB/s ({l2['best']}), peak from its "
        f"counters {'n/a' if not peak else f'{peak / 1e12:.2f} TB/s'}",
        flush=True,
    )
    return dataclasses.replace(device, details=details)


def _dram(r: RunResult) -> str:
    dram = r.measured_dram_bytes
    return "" if dram is None else f"  DRAM {dram / 1e6:,.1f} MB (measured)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seq", default="256,512,1024,2048,4096,8192,16384,32768,65536,131072")
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--dtype", default="fp16")
    p.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--readable-max-n", type=int, default=65536, help="the slow kernel stops here")
    p.add_argument("--check-max-n", type=int, default=8192, help="reference check up to this N")
    p.add_argument("--budget-s", type=float, default=150, help="stop early (and still write)")
    p.add_argument("--profile", action="store_true", help="measured traffic for every result")
    p.add_argument("--pass", dest="pass_", choices=PASSES, default=FORWARD)
    p.add_argument("--kv-heads", type=int, default=None, help="decode: KV heads of the cache")
    p.add_argument("--new-tokens", type=int, default=1, help="decode: query rows per head")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--force", action="store_true")
    args = p.parse_args()

    profile = False
    if args.profile:  # before torch: CUPTI must be the wheel's, not torch's older copy
        from gpu.counters.profiler import library_path, unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            print(f"--profile: traffic not measured ({reason.kind}): {reason}", flush=True)
        else:
            print(f"--profile: CUPTI PM sampling with {library_path()}", flush=True)
            profile = True

    import torch

    backend = CudaBackend()
    device = backend.device_info()
    if profile:
        device = with_l2_bandwidth(device)
    algos = [a for a in backend.algorithms() if args.pass_ in backend.passes(a)]
    results: list[RunResult] = []
    t0 = time.monotonic()
    causal_flags = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    decode = args.pass_ == DECODE
    if decode:
        causal_flags = (False,)  # a decode step attends to the whole cache
    stopped = ""
    for causal in causal_flags:
        for n in (int(x) for x in args.seq.split(",")):
            if time.monotonic() - t0 > args.budget_s:
                stopped = f"stopped at the time budget before causal={causal} N={n}"
                break
            cfg = AttentionConfig(
                seq_len=n, heads=args.heads, head_dim=args.head_dim, dtype=args.dtype,
                causal=causal, pass_=args.pass_, batch=args.batch,
                kv_heads=args.kv_heads if decode else None,
                new_tokens=args.new_tokens if decode else 1,
            )  # fmt: skip
            opts = RunOptions(
                warmup=1, repeats=args.repeats, check=n <= args.check_max_n, profile=profile
            )
            for algo in algos:
                if algo == TILED and n > args.readable_max_n:
                    continue
                try:
                    r = backend.run(cfg, algo, opts)
                except ValueError as exc:
                    print(f"skip {algo} N={n}: {exc}", flush=True)
                    continue
                results.append(r)
                print(
                    f"{'causal' if causal else 'full':6} N={n:>6} {algo:<12} "
                    + ("OOM" if r.oom else f"{r.total_ms:9.3f} ms {r.tflops:7.1f} TFLOP/s")
                    + (f" err {r.max_abs_error:.2e}" if r.max_abs_error is not None else "")
                    + _dram(r),
                    flush=True,
                )
            for peer in PEERS:
                if peer == "sdpa_math" and (n > 32768 or decode):
                    continue  # fp32 scores of 12·N² would take hundreds of GB; OOM is certain;
                    # in decode it repeats K and V per query head: not a decode kernel
                if args.pass_ in (BACKWARD, STEP):
                    r = time_peer_training(torch, cfg, peer, args.repeats, device.name)
                else:
                    r = time_peer(torch, cfg, peer, args.repeats, device.name, profile)
                # The peer's frame is gone now (an out-of-memory exception held its tensors
                # until then): hand torch's cached blocks back, or our next run would find the
                # device short of what the peer kept.
                gc.collect()
                torch.cuda.empty_cache()
                results.append(r)
                status = (
                    "OOM" if r.oom else ("n/a" if r.total_ms is None else f"{r.total_ms:9.3f} ms")
                )
                print(
                    f"{'causal' if causal else 'full':6} N={n:>6} {peer:<12} {status}" + _dram(r),
                    flush=True,
                )
        if stopped:
            break
    meta = {
        "command": "python bench/record_run.py " + " ".join(sys.argv[1:]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "note": "sdpa_* results are PyTorch peers measured in the same process, for reference",
    }
    if profile:
        meta["traffic"] = (
            "measured per kernel with CUPTI PM sampling (gpu/counters/profiler.py), each sampled "
            "launch after an L2 flush; times are from unsampled runs"
        )
    if stopped:
        meta["stopped"] = stopped
    save_recording(Recording(device, tuple(results), meta), args.out, overwrite=args.force)
    print(f"wrote {len(results)} results to {args.out} in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
