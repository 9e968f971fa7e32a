"""Ring attention on two GPUs against one: speed-up, hidden communication, link bandwidth,
agreement with the one-GPU result and memory per GPU, written as a recording for replay.

    python bench/bench_ring.py --out $OUT/h200x2_ring.json            # 2 GPUs, under 5 minutes
    python bench/bench_ring.py --smoke --out $OUT/ring_smoke.json     # 1 GPU, about a minute

Full run, for N = 65,536 … 1,048,576 (powers of two), (h=12, d=64) and (h=16, d=128), fp16,
with and without the causal mask, cheapest first within each N:
- one GPU: the best fused kernel (the one the ring runs per step) on the whole sequence, timed
  with CUDA events (median);
- the ring on GPUs 0 and 1 over NCCL (gpu/ring/cuda_ring.py): median total, and from the median
  run's events the per-GPU timeline, the share of communication hidden behind compute and the
  achieved link bandwidth against the link's peak; pool peak per GPU;
- max |O_ring − O_one| over every element, compared on GPU 0 chunk by chunk (no N×N reference
  fits at N = 1M); it must stay within the fused kernels' own tolerance (2e-3 for fp16);
- the model's prediction for P = 2 (gpu/ring/model.py), from the one-GPU kernel's throughput
  measured in this run at the chunk sizes the ring runs (N/2 and N/4, from 16,384 up).
The JSON (schema tilescope.results/1: the one-GPU results, algorithm "tiled_wgmma" or whichever
kernel ran, and the ring results, algorithm "ring" with their `ring` field) is rewritten after
every configuration, so a run stopped by a time limit still leaves every finished point.

Runtime (estimated from FLOPs at the ~400 TFLOP/s the fused kernel sustains on one H200,
resources/recorded/h200_sweep.json): one pass over every configuration is 2.5e16 FLOP, 62 s on
one GPU and 31 s split over two. Warm-up + 3 repeats up to N = 262,144, then 2 repeats and no
separate warm-up at N = 524,288 and 1,048,576 (the same kernels and NCCL connections were warmed
moments before at the smaller N; a warm-up at 1M would add 70 s): about 200 s of kernels, plus
input generation, comparisons and start-up: 220-250 s. A time budget (--budget-s, default 285)
skips any configuration whose estimate, from the rate measured so far, would pass it.

Smoke run (one GPU): NCCL with one rank (initAll([0])) moves a block to itself through the
ring's own transport, checked byte for byte; the ring with P = 1 over NCCL, and with P = 2, 3, 4
virtual ranks on GPU 0 joined by the same-device test double (tests/ring_test_double.py), are
compared with the one-GPU kernel and with an fp32 reference at N = 3072, both head shapes, with
and without the mask; then the full run's code path at two small N on two virtual ranks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu.backends.backend import RunOptions
from gpu.config import AttentionConfig
from gpu.files.recording import Recording, save_recording
from gpu.model.costmodel import useful_flops
from gpu.model.links import NVLINK4, LinkSpec
from gpu.results import DeviceInfo, KernelTime, RunResult
from gpu.ring.model import MeasuredThroughput, predict

FAMILIES = ((12, 64), (16, 128))
FULL_SEQ = (65536, 131072, 262144, 524288, 1048576)
#: One-GPU sizes measured only to calibrate the model at the ring's smallest chunks.
CALIBRATION_SEQ = (16384, 32768)
SMOKE_SEQ = 3072  # divisible by 2P for P = 1 … 4
SMOKE_FULL_PATH_SEQ = (8192, 16384)
TARGET_SPEEDUP, TARGET_FROM_N = 1.8, 262144
#: The fused kernels' tolerance against an fp32 reference (tests/flash_reference.py); two of
#: their results agree within it.
TOLERANCE = {"fp16": 2e-3, "bf16": 1e-2}
#: Sustained one-GPU rate used only for the time estimates (recorded H200 sweep).
ESTIMATE_FLOPS_S = 400e12
SEED = 7


def repetitions(n: int) -> tuple[int, int]:
    """(warm-up, repeats) at sequence length n."""
    return (1, 3) if n <= TARGET_FROM_N else (0, 2)


def item_flops(n: int) -> float:
    """FLOPs of one pass (one GPU) over every family and mask at n."""
    return sum(
        useful_flops(AttentionConfig(seq_len=n, heads=h, head_dim=d, causal=c))
        for h, d in FAMILIES
        for c in (False, True)
    )


def estimate_seconds(seqs: tuple[int, ...]) -> float:
    """Kernel seconds of the whole run: one GPU, then the ring at twice the rate."""
    total = 0.0
    for n in seqs:
        warmup, repeats = repetitions(n)
        total += (warmup + repeats) * item_flops(n) * 1.5 / ESTIMATE_FLOPS_S
    return total


class Log:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def __call__(self, message: str) -> None:
        print(f"[{self.elapsed:6.1f} s] {message}", flush=True)


@dataclass
class Recorder:
    """The results so far, rewritten to `path` (atomically) after every configuration."""

    path: str
    device: DeviceInfo
    meta: dict
    results: list[RunResult] = field(default_factory=list)

    def add(self, *results: RunResult) -> None:
        self.results.extend(results)
        self.save()

    def save(self) -> None:
        recording = Recording(self.device, tuple(self.results), self.meta)
        save_recording(recording, self.path, overwrite=True)


@dataclass
class Row:
    config: AttentionConfig
    single: RunResult
    ring: RunResult
    model_ms: float | None

    @property
    def speedup(self) -> float | None:
        if self.ring.total_ms and self.single.total_ms:
            return self.single.total_ms / self.ring.total_ms
        return None

    @property
    def diff(self) -> float | None:
        return None if self.ring.ring is None else self.ring.ring.max_abs_diff_vs_single


# --------------------------------------------------------------------------------------------
# Measuring


def time_single(config: AttentionConfig, q, k, v, base_bytes: int, warmup: int, repeats: int):
    """The fused kernel the ring uses, on one GPU over the whole sequence: (RunResult, O)."""
    import statistics

    import cupy

    from gpu.backends.cuda_backend import device_name
    from gpu.model.costmodel import algorithm_cost
    from gpu.ring.cuda_ring import fused_kernel

    kernel, module = fused_kernel(config)
    shape = (config.batch, config.heads, config.seq_len)
    o = cupy.empty_like(q)
    m = cupy.empty(shape, cupy.float32)
    l = cupy.empty(shape, cupy.float32)
    pool = cupy.get_default_memory_pool()
    peak = pool.used_bytes() - base_bytes  # Q, K, V, O, m, l: all the kernel holds
    for _ in range(warmup):
        module.flash_forward(q, k, v, o, m, l, config)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    samples = []
    for _ in range(max(1, repeats)):
        start.record()
        module.flash_forward(q, k, v, o, m, l, config)
        end.record()
        end.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, end))
    cost = algorithm_cost(config, kernel)
    result = RunResult(
        config=config,
        algorithm=kernel,
        backend="cuda",
        device=device_name(),
        kernel_times=(KernelTime("flash_fwd", statistics.median(samples)),),
        peak_bytes=peak,
        model_peak_bytes=cost.peak_bytes,
        hbm_bytes=cost.hbm_bytes,
        flops=cost.flops,
        repeats=len(samples),
        message="one GPU, the ring's per-step kernel on the whole sequence",
    )
    return result, o


def free_all(devices) -> None:
    import cupy

    for d in sorted(set(devices)):
        with cupy.cuda.Device(d):
            cupy.cuda.Device().synchronize()
            cupy.get_default_memory_pool().free_all_blocks()


def measure_item(ring, config, link, check_fp32: bool = False) -> tuple[RunResult, RunResult]:
    """One configuration: inputs on the first ring device, one-GPU run there, then the ring on
    the same inputs, compared with the one-GPU output."""
    import cupy

    from gpu.backends.cuda_arrays import random_inputs

    warmup, repeats = repetitions(config.seq_len)
    first = ring.devices[0]
    with cupy.cuda.Device(first):
        free_all([first])
        base = cupy.get_default_memory_pool().used_bytes()
        q, k, v = random_inputs(config, SEED)
        single, o_single = time_single(config, q, k, v, base, warmup, repeats)
    options = RunOptions(warmup=warmup, repeats=repeats, check=check_fp32, seed=SEED)
    result = ring.measure(config, options, inputs=(q, k, v), compare_with=o_single, link=link)
    del q, k, v, o_single
    free_all(ring.devices)
    return single, result


def model_ms(
    results: list[RunResult], config: AttentionConfig, devices: int, kernel: str, link: LinkSpec
) -> float | None:
    """The model's ring time on `devices` devices from this run's one-GPU throughput."""
    singles = [r for r in results if r.ring is None]
    if not singles:
        return None
    throughput = MeasuredThroughput.from_results(singles, kernel, "this run's one-GPU kernel")
    return predict(config, devices, throughput=throughput, link=link).total_s * 1e3


def calibrate(log: Log, recorder: Recorder, device: int) -> None:
    """One-GPU kernel at the ring's smallest chunk sizes, for the model's throughput."""
    import cupy

    from gpu.backends.cuda_arrays import random_inputs

    for n in CALIBRATION_SEQ:
        for h, d in FAMILIES:
            for causal in (True, False):
                config = AttentionConfig(seq_len=n, heads=h, head_dim=d, causal=causal)
                with cupy.cuda.Device(device):
                    free_all([device])
                    base = cupy.get_default_memory_pool().used_bytes()
                    q, k, v = random_inputs(config, SEED)
                    single, _ = time_single(config, q, k, v, base, 1, 3)
                recorder.add(single)
    free_all([device])
    log(f"calibration: one-GPU kernel at N = {', '.join(map(str, CALIBRATION_SEQ))}")


def run_sweep(ring, seqs, link_name, link_spec, log, recorder, budget_s, devices) -> list[Row]:
    """Every (N, family, mask), N ascending, cheapest first; skip what the budget cannot fit."""
    rows: list[Row] = []
    seconds_per_flop: float | None = None
    peak = link_spec or NVLINK4
    for n in seqs:
        items = sorted(
            (
                AttentionConfig(seq_len=n, heads=h, head_dim=d, causal=c)
                for h, d in FAMILIES
                for c in (True, False)
            ),
            key=useful_flops,
        )
        for config in items:
            warmup, repeats = repetitions(n)
            runs = warmup + repeats
            if seconds_per_flop is not None:
                guess = runs * useful_flops(config) * seconds_per_flop * (1 + 1 / devices)
                if log.elapsed + guess > budget_s:
                    note = f"skipped {config.label()}: about {guess:.0f} s would pass the budget"
                    recorder.meta.setdefault("skipped", []).append(note)
                    recorder.save()
                    log(note)
                    continue
            t0 = time.monotonic()
            single, result = measure_item(ring, config, (link_name, link_spec))
            spent = time.monotonic() - t0
            seconds_per_flop = spent / (runs * useful_flops(config) * (1 + 1 / devices))
            recorder.add(single, result)
            row = Row(config, single, result, None)
            if result.ring is not None:
                kernel = result.ring.kernel
                row.model_ms = model_ms(recorder.results, config, devices, kernel, peak)
            rows.append(row)
            log(row_line(row))
    return rows


# --------------------------------------------------------------------------------------------
# Output


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def row_line(row: Row) -> str:
    r = row.ring.ring
    if row.ring.oom or r is None:
        return f"{row.config.label()}: ring {row.ring.message}"
    hidden = r.hidden_fraction
    bw, util = r.achieved_bytes_s, r.link_utilisation
    return (
        f"{row.config.label():<36} one {fmt(row.single.total_ms, '9.2f')} ms  ring "
        f"{fmt(row.ring.total_ms, '9.2f')} ms  x{fmt(row.speedup, '.2f')}  model "
        f"{fmt(row.model_ms, '9.2f')} ms  hidden {fmt(hidden and hidden * 100, '5.1f')}%  link "
        f"{fmt(bw and bw / 1e9, '6.1f')} GB/s ({fmt(util and util * 100, '4.1f')}% of peak)  "
        f"|ΔO| {fmt(row.diff, '.2e')}  {max(r.device_peak_bytes) / 1e9:6.2f} GB/GPU"
    )


def final_table(rows: list[Row], log: Log, stopped: bool, devices: int) -> bool:
    """Print the table and the success criteria; True when every criterion holds."""
    title = f"\n# ring attention, P = {devices} against one GPU"
    print(title + (" (INCOMPLETE)" if stopped else ""))
    header = (
        f"{'h':>3} {'d':>4} {'causal':>6} {'N':>8} {'one ms':>10} {'ring ms':>10} {'speed-up':>8} "
        f"{'model ms':>10} {'hidden':>7} {'link GB/s':>9} {'of peak':>7} {'max|ΔO|':>9} "
        f"{'GB/GPU':>7}"
    )
    print(header)
    slow, wrong = [], []
    judged = 0  # rows long enough for the speed-up target that ran to a speed-up
    for row in rows:
        c, r = row.config, row.ring.ring
        if r is None:
            print(f"{c.heads:>3} {c.head_dim:>4} {c.causal!s:>6} {c.seq_len:>8} {row.ring.message}")
            wrong.append(c.label())
            continue
        hidden, bw, util = r.hidden_fraction, r.achieved_bytes_s, r.link_utilisation
        print(
            f"{c.heads:>3} {c.head_dim:>4} {c.causal!s:>6} {c.seq_len:>8} "
            f"{fmt(row.single.total_ms, '10.2f')} {fmt(row.ring.total_ms, '10.2f')} "
            f"{fmt(row.speedup, '8.2f')} {fmt(row.model_ms, '10.2f')} "
            f"{fmt(hidden and hidden * 100, '6.1f')}% {fmt(bw and bw / 1e9, '9.1f')} "
            f"{fmt(util and util * 100, '6.1f')}% {fmt(row.diff, '9.2e')} "
            f"{max(r.device_peak_bytes) / 1e9:7.2f}"
        )
        if c.seq_len >= TARGET_FROM_N:
            judged += 1
            if (row.speedup or 0) < TARGET_SPEEDUP:
                slow.append(f"{c.label()} x{fmt(row.speedup, '.2f')}")
        if row.diff is None or row.diff > TOLERANCE[c.dtype]:
            wrong.append(f"{c.label()} |ΔO| {fmt(row.diff, '.2e')}")
    if not judged:  # nothing this long ran: say so rather than pass by default
        verdict = "not measured (no ring of N that long ran)"
    else:
        verdict = f"PASS ({judged} shapes)" if not slow else "FAIL: " + "; ".join(slow)
    print(f"speed-up >= {TARGET_SPEEDUP} for N >= {TARGET_FROM_N:,}: {verdict}")
    print(
        f"max |ΔO| within {TOLERANCE['fp16']:g} (fp16) everywhere: "
        + ("PASS" if not wrong else "FAIL: " + "; ".join(wrong))
    )
    log("done")
    return not slow and not wrong


# --------------------------------------------------------------------------------------------
# The two modes


def smoke(args, log: Log) -> int:
    """One GPU: NCCL with one rank, the P = 1 ring over NCCL, virtual rings over the test
    double, and the full run's code path on two virtual ranks."""
    import cupy

    from gpu.ring.backend import cuda_ring_device_info
    from gpu.ring.cuda_ring import CudaRing
    from tests.ring_test_double import SameDeviceCopyTransport

    device = cuda_ring_device_info([0])
    meta = _meta(args, "smoke: one GPU; P > 1 rings are virtual ranks on GPU 0 (test double)")
    recorder = Recorder(args.out, device, meta)
    recorder.save()
    failures = []
    with CudaRing([0]) as nccl_ring:
        with cupy.cuda.Device(0):
            a = cupy.arange(1 << 20, dtype=cupy.uint8)
            b = cupy.zeros_like(a)
            nccl_ring.synchronize()  # the comm stream does not wait for the default stream
            nccl_ring.transport.shift(nccl_ring.ranks, [a], [b])
            nccl_ring.synchronize()
            same = bool((a == b).all())
        log(f"NCCL {nccl_ring.transport.version}: one-rank send/receive of 1 MiB equal: {same}")
        if not same:
            failures.append("NCCL self send/receive")
        rings = [(1, nccl_ring)]
        rings += [(p, CudaRing([0] * p, SameDeviceCopyTransport())) for p in (2, 3, 4)]
        for h, d in FAMILIES:
            for causal in (False, True):
                config = AttentionConfig(seq_len=SMOKE_SEQ, heads=h, head_dim=d, causal=causal)
                for p, ring in rings:
                    single, result = measure_item(ring, config, ("", None), check_fp32=True)
                    recorder.add(single, result)
                    diff = result.ring.max_abs_diff_vs_single if result.ring else None
                    ok = (
                        diff is not None
                        and diff <= TOLERANCE[config.dtype]
                        and result.agrees is not False
                        and result.max_abs_error is not None
                        and result.max_abs_error <= TOLERANCE[config.dtype]
                    )
                    transport = result.ring.transport if result.ring else result.message
                    events = len(result.ring.timeline) if result.ring else 0
                    log(
                        f"{config.label():<32} P={p} ({transport}): |ΔO| vs one GPU "
                        f"{fmt(diff, '.2e')}, vs fp32 reference "
                        f"{fmt(result.max_abs_error, '.2e')}, {events} timeline events: "
                        + ("OK" if ok else "FAIL")
                    )
                    if not ok:
                        failures.append(f"{config.label()} P={p}")
        two = rings[1][1]
        rows = run_sweep(two, SMOKE_FULL_PATH_SEQ, "", None, log, recorder, args.budget_s, 2)
        if not final_table(rows, log, stopped=False, devices=2):
            failures.append("the full run's table on two virtual ranks")
    reloaded = _reload(args.out)
    log(f"wrote {args.out}: {reloaded} results, reloads cleanly")
    print("smoke: " + ("PASS" if not failures else "FAIL: " + "; ".join(failures)))
    return 0 if not failures else 1


def full(args, log: Log) -> int:
    import cupy

    from gpu.ring.backend import cuda_ring_device_info
    from gpu.ring.cuda_ring import CudaRing, detect_link

    present = cupy.cuda.runtime.getDeviceCount()
    if present < args.devices:
        print(f"bench_ring: needs {args.devices} GPUs, this machine has {present} (try --smoke)")
        return 2
    devices = list(range(args.devices))
    seqs = tuple(args.seq) if args.seq else FULL_SEQ
    log(
        f"estimated kernel time {estimate_seconds(seqs):.0f} s (at {ESTIMATE_FLOPS_S / 1e12:.0f} "
        f"TFLOP/s on one GPU); budget {args.budget_s:.0f} s"
    )
    link_name, link_spec = detect_link(devices)
    log(f"link: {link_name or 'unknown'}; NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}")
    device = cuda_ring_device_info(devices)
    meta = _meta(args, f"ring over GPUs {devices} with NCCL against one GPU")
    meta["link"] = link_name
    meta["link_peak_bytes_s"] = None if link_spec is None else link_spec.bytes_per_s
    recorder = Recorder(args.out, device, meta)
    recorder.save()
    with CudaRing(devices) as ring:
        log(f"NCCL {ring.transport.version} communicators on GPUs {devices}")
        calibrate(log, recorder, devices[0])
        rows = run_sweep(
            ring, seqs, link_name, link_spec, log, recorder, args.budget_s, len(devices)
        )
    stopped = bool(recorder.meta.get("skipped"))
    ok = final_table(rows, log, stopped, len(devices))
    log(f"wrote {args.out}: {_reload(args.out)} results")
    return 0 if ok else 1


def _meta(args, note: str) -> dict:
    return {
        "command": "python bench/bench_ring.py " + " ".join(sys.argv[1:]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "note": note,
        "tolerance": TOLERANCE,
    }


def _reload(path: str) -> int:
    from gpu.files.recording import load_recording

    return len(load_recording(path).results)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="recording JSON (rewritten as the run goes)")
    p.add_argument("--smoke", action="store_true", help="one-GPU shake-down (see the docstring)")
    p.add_argument("--devices", type=int, default=2, help="GPUs in the ring (full run)")
    p.add_argument("--seq", type=lambda t: [int(x) for x in t.split(",")], default=None)
    p.add_argument("--budget-s", type=float, default=285.0, help="skip what would pass this")
    args = p.parse_args()
    if Path(args.out).exists():
        print(f"bench_ring: {args.out} exists; choose another --out")
        return 2
    log = Log()
    return smoke(args, log) if args.smoke else full(args, log)


if __name__ == "__main__":
    sys.exit(main())
