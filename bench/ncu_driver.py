"""Launch each attention kernel the app runs exactly once inside a profiled range, for Nsight
Compute (`ncu --profile-from-start off`).

By default: naive's three kernels (cuBLAS GEMM, our softmax, cuBLAS GEMM), the readable tiled
kernel and the tensor-core tiled kernel, in that order (what bench/trace_h200.py parses).
`--algos all` runs every algorithm the cuda backend offers on this GPU, in its order, and
`--markers` launches a tiny marker kernel (`read_sweep` of gpu/kernels/measure.cu over 16 bytes)
before each profiled kernel, so the CSV splits into one group per app kernel even when cuBLAS
runs a GEMM as several kernels. The kernels come from
`gpu.backends.cuda_backend.algorithm_launches`, exactly what the backend times and profiles.

Everything before the range (input generation, compilation, cuBLAS handles, one warm-up run of
each) is not profiled. Prints nothing on stdout (ncu's CSV goes there); the launch order goes to
stderr as one line "ncu_driver: order: naive/gemm_qk,naive/softmax,...".

    ncu --clock-control none --profile-from-start off --csv --print-units base \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
        python3 bench/ncu_driver.py --seq 4096 [--algos all --markers]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: The marker kernel's name as it appears in ncu's "Kernel Name" column.
MARKER = "read_sweep"
DEFAULT_ALGOS = "naive,tiled,tiled_mma"


def profiler(on: bool) -> None:
    import cupy

    rt = cupy.cuda.runtime
    if hasattr(rt, "profilerStart"):
        (rt.profilerStart if on else rt.profilerStop)()
    else:  # older CuPy
        from cupy.cuda import profiler as p

        (p.start if on else p.stop)()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--algos", default=DEFAULT_ALGOS, help="comma list, or 'all'")
    ap.add_argument("--markers", action="store_true", help="a marker kernel before each kernel")
    args = ap.parse_args()

    import cupy
    import numpy as np

    from gpu.backends.cuda_arrays import random_inputs
    from gpu.backends.cuda_backend import CudaBackend, algorithm_launches
    from gpu.backends.launch_timing import MEASURE_SOURCE
    from gpu.config import AttentionConfig
    from gpu.launch.cuda_kernels import get_kernel

    config = AttentionConfig(
        seq_len=args.seq,
        heads=args.heads,
        head_dim=args.head_dim,
        dtype=args.dtype,
        causal=args.causal,
    )
    offered = CudaBackend().algorithms()
    algos = list(offered) if args.algos == "all" else args.algos.split(",")
    missing = [a for a in algos if a not in offered]
    if missing:
        print(f"ncu_driver: not offered on this GPU: {','.join(missing)}", file=sys.stderr)
        return 2
    q, k, v = random_inputs(config, 0)
    kernels = []
    for algo in algos:
        arrays = {"q": q, "k": k, "v": v}
        for name, launch in algorithm_launches(config, algo, arrays):
            kernels.append((f"{algo}/{name}", launch))
    marker_kernel = get_kernel(MEASURE_SOURCE, "read_sweep<true>")
    marker_buffer = cupy.zeros(4, dtype=cupy.uint32)
    sync = cupy.cuda.get_current_stream().synchronize

    def marker() -> None:
        ptr = np.uint64(marker_buffer.data.ptr)
        marker_kernel((1,), (32,), (ptr, np.uint64(1), np.int32(1), ptr))

    def run_all() -> None:
        for _, launch in kernels:
            if args.markers:
                marker()
                sync()
            launch()
            sync()

    run_all()  # warm-up: compile, handles, modules
    print("ncu_driver: order: " + ",".join(name for name, _ in kernels), file=sys.stderr)
    print(f"ncu_driver: N={config.seq_len} warm, profiling", file=sys.stderr)
    profiler(True)
    run_all()
    profiler(False)
    print("ncu_driver: done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
