"""Launch each attention kernel the app runs exactly once inside a profiled range, for Nsight
Compute (`ncu --profile-from-start off`): naive's three kernels (cuBLAS GEMM, our softmax, cuBLAS
GEMM), the readable tiled kernel and the tensor-core tiled kernel, in that order.

Everything before the range (input generation, compilation, cuBLAS handles, one warm-up run of
each) is not profiled. Used by bench/trace_h200.py; prints nothing on stdout (ncu's CSV goes
there), progress on stderr.

    ncu --clock-control none --profile-from-start off --csv --print-units base \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
        python3 bench/ncu_driver.py --seq 4096
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


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
    args = ap.parse_args()

    import cupy

    from gpu.config import AttentionConfig
    from gpu.cuda_backend import gemm_pv, gemm_qk, naive_forward, random_inputs, softmax_launcher
    from gpu.cuda_kernels import storage_dtype
    from gpu.flash_mma import flash_forward as mma_forward
    from gpu.flash_readable import flash_forward as readable_forward

    config = AttentionConfig(
        seq_len=args.seq, heads=args.heads, head_dim=args.head_dim, dtype=args.dtype
    )
    n = config.seq_len
    q, k, v = random_inputs(config, 0)
    dtype = storage_dtype(config.dtype)
    o = cupy.empty(q.shape, dtype=dtype)
    s = cupy.empty((config.batch, config.heads, n, n), dtype=dtype)
    p = cupy.empty_like(s)
    m = cupy.empty(q.shape[:3], dtype=cupy.float32)
    l = cupy.empty(q.shape[:3], dtype=cupy.float32)
    softmax = softmax_launcher(config)
    sync = cupy.cuda.get_current_stream().synchronize

    def run_all() -> None:
        gemm_qk(q, k, s, config)
        sync()
        softmax(s, p)
        sync()
        gemm_pv(p, v, o, config)
        sync()
        readable_forward(q, k, v, o, m, l, config)
        sync()
        mma_forward(q, k, v, o, m, l, config)
        sync()

    naive_forward(q, k, v, s, p, o, config, softmax)  # warm-up: compile, handles, modules
    run_all()
    print(f"ncu_driver: N={n} warm, profiling", file=sys.stderr)
    profiler(True)
    run_all()
    profiler(False)
    print("ncu_driver: done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
