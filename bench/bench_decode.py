"""Decode against its wall: our split-KV kernel (and naive decode) beside PyTorch's SDPA flash and
cuDNN, interleaved in one process, as a share of this device's measured copy bandwidth.

A decode step must read the whole KV cache, so its figure of merit is bandwidth: the bytes of K
and V read once (2·B·H_kv·N·d·2 in fp16), over the time per step, against

- the device-to-device copy bandwidth measured here (cudaMemcpyAsync of a 2 GiB buffer, bytes
  read plus bytes written): what a kernel that only streams memory reaches on this device;
- the datasheet's figure (gpu.model.gpus), labelled as such.

Method (the device's METHOD.md): first `--warm-s` seconds of back-to-back work (every contender
at every shape, and the copy), so clocks and caches settle; then `--rounds` rounds, each timing
every contender at every shape and the copy, one after another (interleaved: a slow moment of
the device hits all alike). One sample is CUDA events around a batch of launches that cycles
through several input sets whose caches together are at least `ROTATE_L2_MULTIPLE` times the L2,
so no launch finds its cache in L2 (a 4k-token cache of 17 MB would otherwise be read from the
50 MB L2); a round's figure is the median of its samples, and the report gives the median over
rounds with the fastest and slowest round. The inputs are shared: PyTorch reads our CuPy arrays
through DLPack, and each peer's output is compared with ours.

`--profile` (CUPTI, before torch is imported) samples each contender's DRAM bytes once per shape
(gpu.backends.launch_timing.profile_launches: after an L2 flush). `--variants` also times the
split kernel's keys-per-step variants and split counts (for choosing the defaults).

torch is imported only here (and in bench/record_run.py): never by gpu/ or app/.

Usage (on the GPU host):
    PYTHONPATH=$PWD python3 bench/bench_decode.py --warm-s 30 --rounds 3 --profile \\
        --out results/bench_decode.json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu.algorithms import NAIVE, SPLIT_KV
from gpu.config import DECODE, AttentionConfig
from gpu.model.decode_cost import kv_cache_bytes

#: The issue's shapes: fp16, d = 128, one new token.
SHAPES: dict[str, dict[str, int]] = {
    "GQA 32/8 B=8 L=128k": {"batch": 8, "heads": 32, "kv_heads": 8, "seq_len": 131072},
    "GQA 32/8 B=1 L=4k": {"batch": 1, "heads": 32, "kv_heads": 8, "seq_len": 4096},
    "GQA 32/8 B=1 L=16k": {"batch": 1, "heads": 32, "kv_heads": 8, "seq_len": 16384},
    "GQA 32/8 B=1 L=128k": {"batch": 1, "heads": 32, "kv_heads": 8, "seq_len": 131072},
    "MHA 32/32 B=8 L=128k": {"batch": 8, "heads": 32, "kv_heads": 32, "seq_len": 131072},
}
#: The input sets of one shape together hold at least this many L2s of cache.
ROTATE_L2_MULTIPLE = 8
#: A sample's batch runs about this long (fewer steps where MAX_GATED_STEPS stops it).
SAMPLE_MS = 1.0
#: Decode steps queued behind one closed gate: naive's three kernels each, and the peers' few,
#: stay under the ~100 launches gpu.backends.launch_timing.GATE_LAUNCHES allows.
MAX_GATED_STEPS = 24
SAMPLES_PER_ROUND = 5
COPY_BYTES = 2 << 30
PEERS = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_cudnn": "CUDNN_ATTENTION"}


def config_of(shape: dict[str, int]) -> AttentionConfig:
    return AttentionConfig(pass_=DECODE, head_dim=128, dtype="fp16", **shape)


class Contender:
    """One way to run one shape: a decode step per rotating input set, taken in turn."""

    def __init__(
        self,
        name: str,
        steps: list[Callable[[], None]],
        output: Callable[[], object],
        context: Callable[[], object] = contextlib.nullcontext,
    ):
        self.name = name
        self.steps = steps  # one decode step per input set
        self.output = output  # O of input set 0, as a CuPy array
        self.context = context  # entered around a batch (the peers' SDPA backend choice)
        self._next = 0

    def batch(self, count: int) -> None:
        with self.context():
            for _ in range(count):
                self.steps[self._next]()
                self._next = (self._next + 1) % len(self.steps)


def gated_ms(c: Contender, count: int, gate) -> float:
    """ms per step of `count` steps queued behind the launch gate (gpu.backends.launch_timing):
    the GPU starts them only once all are queued, so the host's time per launch (CuPy's and
    PyTorch's Python) never shows as device time."""
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    gate.hold()
    try:
        start.record()
        c.batch(count)
        stop.record()
    finally:
        gate.release()
    stop.synchronize()
    if gate.timed_out():
        raise RuntimeError("the launch gate timed out: the batch was not queued in time")
    return cupy.cuda.get_elapsed_time(start, stop) / count


def per_launch_ms(c: Contender, samples: int, gate) -> list[float]:
    """`samples` per-step times, each from a gated batch of about SAMPLE_MS (at most
    MAX_GATED_STEPS steps, so the launch queue never fills behind the closed gate)."""
    one = max(gated_ms(c, 1, gate), 1e-3)
    count = max(1, min(MAX_GATED_STEPS, math.ceil(SAMPLE_MS / one)))
    if len(c.steps) > 1:  # a batch visits as many input sets as it can
        count = max(count, min(len(c.steps), MAX_GATED_STEPS))
    return [gated_ms(c, count, gate) for _ in range(samples)]


def build(cfg: AttentionConfig, torch, l2_bytes: int, variants: bool) -> list[Contender]:
    """Our two algorithms and the peers on shared, rotating input sets."""
    import cupy

    from gpu.backends.cuda_decode import decode_launches, random_decode_inputs
    from gpu.launch import decode_split

    sets = max(1, -(-ROTATE_L2_MULTIPLE * l2_bytes // kv_cache_bytes(cfg)))
    inputs = [random_decode_inputs(cfg, seed) for seed in range(sets)]
    out: list[Contender] = []
    for algo in (SPLIT_KV, NAIVE):
        arrays = [dict(zip(("q", "k", "v"), x, strict=True)) for x in inputs]
        runs = [decode_launches(cfg, algo, a) for a in arrays]
        steps = [_sequence([f for _, f in r]) for r in runs]
        out.append(Contender(algo, steps, _output_of(steps[0], arrays[0])))
    if variants:
        base = decode_split.prepare(cfg)
        kpt0, pf0, s0 = decode_split.keys_per_thread(cfg), decode_split.PREFETCH, base.plan.splits
        chosen = [(kpt, pf, s0) for kpt in (2, 4, 8) for pf in (False, True)]
        chosen += [(kpt0, pf0, s) for s in (s0 // 2, 2 * s0)]
        for kpt, pf, splits in chosen:
            if splits >= 1 and (kpt, pf, splits) != (kpt0, pf0, s0):
                prepared = decode_split.prepare(cfg, kpt=kpt, prefetch=pf, splits=splits)
                arrays = [dict(zip(("q", "k", "v"), x, strict=True)) for x in inputs]
                steps = []
                for a in arrays:
                    a["o"] = cupy.empty_like(a["q"])
                    a.update(prepared.workspace())
                    names = ("q", "k", "v", "o", "part_o", "part_ml", "counters")
                    steps.append(lambda a=a, p=prepared, n=names: p(*(a[x] for x in n)))
                name = f"split_kv kpt={kpt} pf={int(pf)} s={prepared.plan.splits}"
                out.append(Contender(name, steps, _output_of(steps[0], arrays[0])))
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    gqa = cfg.kv_head_count != cfg.heads
    tensors = [tuple(torch.from_dlpack(x) for x in s) for s in inputs]
    for peer, backend in PEERS.items():
        kernel = getattr(SDPBackend, backend)
        holder: dict = {}

        def step(t, holder=holder) -> None:
            holder["o"] = sdpa(*t, enable_gqa=gqa)

        steps = [lambda t=t, f=step: f(t) for t in tensors]
        context = lambda kernel=kernel: sdpa_kernel(kernel)  # noqa: E731
        try:
            with context():
                steps[0]()
            torch.cuda.synchronize()
        except RuntimeError as exc:
            print(f"# {peer} does not run {cfg.label()}: {str(exc)[:200]}", flush=True)
            continue

        def output(step0=steps[0], holder=holder, context=context):
            import cupy

            with context():
                step0()
            return cupy.from_dlpack(holder["o"].detach())

        out.append(Contender(peer, steps, output, context))
    return out


def _output_of(step: Callable[[], None], arrays: dict) -> Callable[[], object]:
    """O of input set 0, computed now."""

    def output() -> object:
        step()
        return arrays["o"]

    return output


def _sequence(launches: list[Callable[[], None]]) -> Callable[[], None]:
    def run() -> None:
        for f in launches:
            f()

    return run


def copy_contender():
    """cudaMemcpyAsync device to device of COPY_BYTES: bytes moved = 2 · COPY_BYTES."""
    import cupy

    src = cupy.empty(COPY_BYTES, dtype=cupy.uint8)
    dst = cupy.empty_like(src)
    src.fill(1)
    stream = cupy.cuda.get_current_stream().ptr
    kind = cupy.cuda.runtime.memcpyDeviceToDevice

    def step() -> None:
        cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, COPY_BYTES, kind, stream)

    return Contender("copy", [step], lambda: dst)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--warm-s", type=float, default=30.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shape names")
    p.add_argument("--profile", action="store_true", help="CUPTI DRAM bytes per contender")
    p.add_argument("--variants", action="store_true", help="time the split kernel's variants")
    args = p.parse_args()

    profile_note = ""
    if args.profile:  # before torch: CUPTI must be the wheel's, not torch's older copy
        from gpu.counters.profiler import unavailable_reason

        reason = unavailable_reason()
        profile_note = "" if reason is None else f"traffic not measured: {reason}"
    import cupy
    import torch

    from gpu.backends.launch_timing import LaunchGate
    from gpu.launch.cuda_kernels import device_attribute
    from gpu.model.gpus import gpu_for_device_name

    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    device = name.decode() if isinstance(name, bytes) else str(name)
    spec = gpu_for_device_name(device)
    l2 = device_attribute("L2CacheSize")
    shapes = {k: SHAPES[k] for k in args.shapes.split(",")}
    print(f"# {device}, L2 {l2 / 1e6:.0f} MB, torch {torch.__version__}", flush=True)
    built = {k: build(config_of(s), torch, l2, args.variants) for k, s in shapes.items()}
    copy = copy_contender()
    gate = LaunchGate()

    # correctness of the shared inputs: every contender's O against ours (split_kv)
    agree: dict[str, dict[str, float]] = {}
    for k, contenders in built.items():
        ours = contenders[0].output().astype(cupy.float32)
        agree[k] = {
            c.name: float(cupy.abs(c.output().astype(cupy.float32) - ours).max())
            for c in contenders[1:]
        }
    print(f"# max |O - split_kv's O|: {json.dumps(agree)}", flush=True)

    t0 = time.monotonic()
    while time.monotonic() - t0 < args.warm_s:
        for contenders in built.values():
            for c in contenders:
                c.batch(len(c.steps))
        copy.batch(4)
        cupy.cuda.runtime.deviceSynchronize()
    warm_s = time.monotonic() - t0
    print(f"# warm-up: {warm_s:.1f} s of back-to-back work", flush=True)

    rounds: list[dict] = []
    for r in range(args.rounds):
        figures: dict = {"copy_ms": statistics.median(per_launch_ms(copy, SAMPLES_PER_ROUND, gate))}
        for k, contenders in built.items():
            figures[k] = {
                c.name: statistics.median(per_launch_ms(c, SAMPLES_PER_ROUND, gate))
                for c in contenders
            }
        rounds.append(figures)
        print(f"# round {r + 1}: {json.dumps(figures)}", flush=True)

    copy_ms = [x["copy_ms"] for x in rounds]
    copy_bw = 2 * COPY_BYTES / (statistics.median(copy_ms) * 1e-3)
    report: dict = {
        "device": device,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python3 bench/bench_decode.py " + " ".join(sys.argv[1:]),
        "torch": torch.__version__,
        "cupy": cupy.__version__,
        "warm_s": warm_s,
        "rounds": rounds,
        "copy": {
            "bytes": 2 * COPY_BYTES,
            "bandwidth_bytes_s": copy_bw,
            "round_ms": copy_ms,
        },
        "datasheet_bandwidth_bytes_s": spec.bandwidth_bytes_s if spec else None,
        "datasheet": spec.name if spec else None,
        "max_abs_diff_vs_split_kv": agree,
        "shapes": {},
    }
    print(
        f"\n{device}: device-to-device copy {copy_bw / 1e12:.2f} TB/s (read + write, median of "
        f"{len(copy_ms)} rounds); datasheet "
        + (f"{spec.bandwidth_bytes_s / 1e12:.2f} TB/s ({spec.name})" if spec else "unknown")
    )
    print(
        f"{'shape':<24} {'contender':<28} {'µs/token':>10} {'spread':>15} {'TB/s':>6} "
        f"{'copy':>6} {'sheet':>6}"
    )
    for k in shapes:
        cfg = config_of(shapes[k])
        kv = kv_cache_bytes(cfg)
        entry: dict = {"config": cfg.to_dict(), "kv_bytes": kv, "contenders": {}}
        for name in rounds[0][k]:
            ms = [x[k][name] for x in rounds]
            med = statistics.median(ms)
            bw = kv / (med * 1e-3)
            entry["contenders"][name] = {
                "ms": med,
                "min_ms": min(ms),
                "max_ms": max(ms),
                "round_ms": ms,
                "kv_bytes_per_s": bw,
                "share_of_copy": bw / copy_bw,
                "share_of_datasheet": bw / spec.bandwidth_bytes_s if spec else None,
            }
            sheet = f"{bw / spec.bandwidth_bytes_s:6.0%}" if spec else "   n/a"
            print(
                f"{k:<24} {name:<28} {med * 1e3:10.1f} "
                f"{min(ms) * 1e3:7.1f}-{max(ms) * 1e3:7.1f} {bw / 1e12:6.2f} "
                f"{bw / copy_bw:6.0%} {sheet}"
            )
        cudnn = entry["contenders"].get("sdpa_cudnn")
        if cudnn:
            entry["split_kv_vs_cudnn"] = cudnn["ms"] / entry["contenders"][SPLIT_KV]["ms"]
            print(f"{k:<24} split_kv is {entry['split_kv_vs_cudnn']:.2f}x cuDNN's speed")
        report["shapes"][k] = entry

    if args.profile:
        report["traffic"] = profile_note or profile_all(built, shapes, rounds)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"# wrote {args.out}")
    return 0


def profile_all(built: dict, shapes: dict, rounds: list[dict]) -> dict:
    """DRAM bytes each contender moved for input set 0, per shape (CUPTI, after an L2 flush)."""
    from gpu.backends.launch_timing import profile_launches
    from gpu.results import KernelTime

    out: dict = {}
    for k, contenders in built.items():
        kv = kv_cache_bytes(config_of(shapes[k]))
        out[k] = {}
        for c in contenders:
            if c.name.startswith(f"{SPLIT_KV} "):  # a variant: timed, not profiled
                continue
            times = (KernelTime(c.name, rounds[-1][k][c.name]),)

            def first_set(c=c) -> None:
                with c.context():  # a peer's own SDPA backend, as timed
                    c.steps[0]()

            traffic, note = profile_launches([(c.name, first_set)], times)
            if not traffic:
                out[k][c.name] = {"note": note}
                continue
            t = traffic[0]
            dram = t.dram_read_bytes + t.dram_write_bytes
            out[k][c.name] = {
                "dram_read_bytes": t.dram_read_bytes,
                "dram_write_bytes": t.dram_write_bytes,
                "dram_over_kv": dram / kv,
                "note": note,
            }
            print(
                f"# DRAM {k} {c.name}: read {t.dram_read_bytes / 1e6:,.1f} MB, written "
                f"{t.dram_write_bytes / 1e6:,.1f} MB ({dram / kv:.3f}x the KV cache)",
                flush=True,
            )
    return out


if __name__ == "__main__":
    sys.exit(main())
