"""L2 read bandwidth of this GPU, measured: the L2 roof of the hierarchical roofline.

A buffer that fits in the L2 is read many times over by every SM with 16-byte `ld.global.cg`
loads (cached in L2 only, so every pass crosses the SM-L2 link; `read_sweep` in
gpu/kernels/measure.cu), and bytes read / kernel time is the bandwidth. Several buffer sizes
(all well inside the L2, including half of it: data every SM reads may sit in both L2
partitions) and launch shapes are tried; the best is the figure. A buffer 8× the L2 read once
gives the DRAM read bandwidth for comparison. Where CUPTI is available, one L2 sweep is also
sampled: its DRAM reads must be a small share of its L2 traffic, proof the buffer stayed
resident; and the L2's own peak is read from its counters (lts__t_bytes against its
pct_of_peak_sustained_elapsed: peak = bytes / share of peak / time), the figure Nsight Compute's
hierarchical roofline draws. The roofline's other roofs are peaks too (datasheet HBM and tensor
rates), so the table should take the counters' peak; the best streaming rate is a lower bound
of it, used where the counters do not give a peak.

Run from the repository root on the GPU host:

    PYTHONPATH=$PWD python3 bench/l2_bandwidth.py --out $OUT

Writes l2_bandwidth.json to --out and prints a table, then the line to put in the GPU table
(gpu/model/costmodel.py: `l2_bandwidth_bytes_s=`). About 15 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MiB = 1 << 20
#: Each timed launch reads at least this many bytes (long enough for the events to be exact).
TARGET_BYTES = 8 << 30
REPEATS = 7


def _sweep_launcher(buffer, passes: int, blocks: int, threads: int = 512, cache_global=True):
    """A launch of read_sweep (gpu/kernels/measure.cu) reading `buffer` `passes` times."""
    import numpy as np

    from gpu.backends.launch_timing import MEASURE_SOURCE
    from gpu.launch.cuda_kernels import get_kernel

    kernel = get_kernel(MEASURE_SOURCE, f"read_sweep<{'true' if cache_global else 'false'}>")
    ptr = np.uint64(buffer.data.ptr)
    args = (ptr, np.uint64(buffer.nbytes // 16), np.int32(passes), ptr)
    return lambda: kernel((blocks,), (threads,), args)


def _sweep(buffer, passes: int, blocks: int, threads: int, cache_global: bool) -> float:
    """Median milliseconds of one read_sweep launch over `buffer`."""
    import cupy

    launch = _sweep_launcher(buffer, passes, blocks, threads, cache_global)
    launch()  # warm: loads the module and fills the L2
    times = []
    for _ in range(REPEATS):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        launch()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def measure_l2_read_bandwidth() -> dict:
    """{"best_bytes_s", "best" (its shape), "best_buffer_mib", "dram_read_bytes_s", "rows"}."""
    import cupy

    from gpu.launch.cuda_kernels import device_attribute

    l2 = device_attribute("L2CacheSize")
    sms = device_attribute("MultiProcessorCount")
    sizes = sorted({max(1, l2 // 8 // MiB), max(1, l2 // 4 // MiB), max(1, l2 // 2 // MiB)})
    rows = []
    for size_mib in sizes:
        buffer = cupy.zeros(size_mib * MiB // 4, dtype=cupy.uint32)
        passes = max(1, TARGET_BYTES // buffer.nbytes)
        for blocks_per_sm in (2, 4, 8):
            for threads in (256, 512, 1024):
                if blocks_per_sm * threads > 2048:
                    continue
                ms = _sweep(buffer, passes, blocks_per_sm * sms, threads, True)
                rows.append(
                    {
                        "buffer_mib": size_mib,
                        "passes": passes,
                        "blocks": blocks_per_sm * sms,
                        "threads": threads,
                        "ms": ms,
                        "bytes_s": buffer.nbytes * passes / (ms * 1e-3),
                    }
                )
        del buffer
    best = max(rows, key=lambda r: r["bytes_s"])
    big = cupy.zeros(8 * l2 // 4, dtype=cupy.uint32)
    dram_ms = _sweep(big, 1, 4 * sms, 512, False)
    dram = big.nbytes / (dram_ms * 1e-3)
    del big
    cupy.get_default_memory_pool().free_all_blocks()
    shape = f"{best['buffer_mib']} MiB × {best['passes']}, {best['blocks']}×{best['threads']}"
    return {
        "l2_cache_bytes": l2,
        "best_bytes_s": best["bytes_s"],
        "best": shape,
        "best_buffer_mib": best["buffer_mib"],
        "dram_read_bytes_s": dram,
        "rows": rows,
    }


#: Counters of the peak probe: L2 bytes and the share of the L2's peak rate they used.
PEAK_METRICS = ("lts__t_bytes.sum", "lts__t_bytes.sum.pct_of_peak_sustained_elapsed")


def sampled_check(best_mib: int) -> dict | None:
    """Under CUPTI, one L2 sweep: its DRAM and L2 bytes (residency), and the L2's peak rate from
    its counters; None where CUPTI is unavailable."""
    import cupy

    from gpu.counters import profiler
    from gpu.launch.cuda_kernels import device_attribute

    if profiler.unavailable_reason() is not None:
        return None
    buffer = cupy.zeros(best_mib * MiB // 4, dtype=cupy.uint32)
    passes = max(1, (16 << 30) // buffer.nbytes)  # about 2 ms: a hundred samples
    sms = device_attribute("MultiProcessorCount")
    run = _sweep_launcher(buffer, passes, 4 * sms)
    run()  # fills the L2
    sync = cupy.cuda.get_current_stream().synchronize
    with profiler.PmSampler(0, sms) as sampler:
        traffic = sampler.measure("read_sweep", run, sync, None, 1)
    out = {
        "bytes_requested": buffer.nbytes * passes,
        "l2_bytes": traffic.l2_bytes,
        "dram_read_bytes": traffic.dram_read_bytes,
    }
    try:
        with profiler.PmSampler(0, sms, metrics=PEAK_METRICS) as sampler:
            samples = sampler.sample_window(run, sync)
        peaks = [
            s.values[0] / (s.values[1] / 100) / (s.duration_ns * 1e-9)
            for s in samples
            if s.values[1] > 10  # busy samples only
        ]
        out["peak_bytes_s"] = statistics.median(peaks) if peaks else None
        out["peak_samples"] = len(peaks)
    except Exception as exc:  # not every chip offers the ratio in PM sampling
        out["peak_error"] = str(exc)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import cupy

    from gpu.backends.cuda_backend import device_name

    result = measure_l2_read_bandwidth()
    result["device"] = device_name()
    try:
        result["sampled"] = sampled_check(result["best_buffer_mib"])
    except Exception as exc:  # the figure stands without the check
        result["sampled"] = {"error": str(exc)}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "l2_bandwidth.json").write_text(json.dumps(result, indent=1))
    print(
        f"{result['device']}: L2 {result['l2_cache_bytes'] / MiB:.0f} MiB, CuPy {cupy.__version__}"
    )
    print(f"{'buffer MiB':>10} {'passes':>6} {'blocks':>6} {'threads':>7} {'ms':>8} {'TB/s':>7}")
    for r in result["rows"]:
        print(
            f"{r['buffer_mib']:>10} {r['passes']:>6} {r['blocks']:>6} {r['threads']:>7} "
            f"{r['ms']:>8.3f} {r['bytes_s'] / 1e12:>7.2f}"
        )
    sampled = result["sampled"] or {}
    if "l2_bytes" in sampled:
        share = sampled["dram_read_bytes"] / max(1, sampled["l2_bytes"])
        print(
            f"sampled sweep: {sampled['bytes_requested'] / 1e9:.2f} GB requested, L2 "
            f"{sampled['l2_bytes'] / 1e9:.2f} GB, DRAM read {sampled['dram_read_bytes'] / 1e6:.1f} "
            f"MB ({share:.2%} of L2: the buffer stayed in L2)"
        )
    else:
        print(f"sampled sweep: not run ({sampled})")
    print(f"DRAM read (buffer 8× L2, one pass): {result['dram_read_bytes_s'] / 1e12:.2f} TB/s")
    print(f"L2 read, best: {result['best_bytes_s'] / 1e12:.2f} TB/s ({result['best']})")
    peak = sampled.get("peak_bytes_s")
    if peak:
        print(
            f"L2 peak from its counters: {peak / 1e12:.2f} TB/s "
            f"(median of {sampled['peak_samples']} samples)"
        )
    else:
        print(f"L2 peak from its counters: not available ({sampled.get('peak_error', 'no CUPTI')})")
    figure = peak or result["best_bytes_s"]
    print(f"GPU table: l2_bandwidth_bytes_s={figure:.4g}  # {'counters peak' if peak else 'best'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
