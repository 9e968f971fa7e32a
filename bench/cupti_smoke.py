"""CUPTI PM-sampling bring-up, step by step, loudly: which library loads, whether the device is
supported, whether the counters configure, start, stop and decode, and whether they count right:
ten copies of 1 GiB must read and write 10 × 2³⁰ B = 10.737 GB each (±1%). Then one profiled
run through the backend, as `main.py bench --profile` makes it.

Run from the repository root on the GPU host (cupti-python and nvidia-cuda-cupti importable):

    PYTHONUNBUFFERED=1 PYTHONPATH=$PWD python3 bench/cupti_smoke.py --out $OUT

Each step prints "STEP n ... OK" or "STEP n ... FAILED" with the error; later steps that need a
failed one are skipped. Writes cupti_smoke.json to --out; the table printed last has one line
per step. Exit status 0 only when every step passed. About 15 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GiB = 1 << 30
COPIES = 10
TOLERANCE = 0.01


class Steps:
    """Runs numbered steps, prints each loudly, keeps (name, ok, detail) for the table."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []
        self.data: dict = {}

    def run(self, name: str, fn, *needs: str):
        n = len(self.rows) + 1
        missing = [need for need in needs if not self.passed(need)]
        if missing:
            print(f"STEP {n} {name}: SKIPPED (needs {', '.join(missing)})", flush=True)
            self.rows.append((name, "SKIPPED", f"needs {', '.join(missing)}"))
            return None
        print(f"STEP {n} {name} ...", flush=True)
        t0 = time.monotonic()
        try:
            detail, value = fn()
        except Exception as exc:
            print(f"STEP {n} {name}: FAILED: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc()
            self.rows.append((name, "FAILED", f"{type(exc).__name__}: {exc}"[:160]))
            self.data[name] = {"error": f"{type(exc).__name__}: {exc}"}
            return None
        print(f"STEP {n} {name}: OK ({time.monotonic() - t0:.2f} s): {detail}", flush=True)
        self.rows.append((name, "OK", detail))
        self.data[name] = value
        return value

    def passed(self, name: str) -> bool:
        return any(row[0] == name and row[1] == "OK" for row in self.rows)


def step_environment():
    import cupy

    from gpu.backends.cuda_backend import device_name

    info = {
        "python": platform.python_version(),
        "cupy": cupy.__version__,
        "device": device_name(),
        "driver": cupy.cuda.runtime.driverGetVersion(),
        "runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "LD_PRELOAD": os.environ.get("LD_PRELOAD", ""),
        "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH", ""),
    }
    return f"{info['device']}, CuPy {info['cupy']}, driver {info['driver']}", info


def step_library():
    from importlib import metadata

    from gpu.counters import profiler

    info = {
        "cupti_python": metadata.version("cupti-python"),
        "wheels": [(v, str(p)) for v, p in profiler.wheel_library_dirs()],
        "mapped_before": profiler.loaded_libcupti(),
    }
    for version, folder in info["wheels"]:
        print(f"    nvidia-cuda-cupti {version}: {folder}")
    print(f"    libcupti mapped before loading: {info['mapped_before'] or 'none'}")
    profiler.load_cupti()
    info["mapped_after"] = profiler.loaded_libcupti()
    info["library"] = profiler.library_path()
    print(f"    libcupti mapped now: {info['mapped_after']}")
    if len(set(info["mapped_after"])) != 1:
        raise RuntimeError(f"expected one libcupti in the process, found {info['mapped_after']}")
    return f"cupti-python {info['cupti_python']} with {info['library']}", info


def step_device():
    from cupti import cupti, profiler_host

    params = cupti.DeviceGetChipNameParams()
    params.struct_size = cupti.DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE
    params.device_index = 0
    cupti.device_get_chip_name(params.ptr)
    chip = params.p_chip_name
    chips = profiler_host.get_supported_chips()
    if chip not in chips:
        raise RuntimeError(f"chip {chip} is not in CUPTI's supported chips {chips}")
    return f"chip {chip} (supported)", {"chip": chip, "supported_chips": chips}


def step_config(state: dict):
    from gpu.counters import profiler
    from gpu.launch.cuda_kernels import device_attribute

    sampler = profiler.PmSampler(0, device_attribute("MultiProcessorCount"))
    sampler.enable()
    state["sampler"] = sampler
    mapped = profiler.loaded_libcupti()  # a second copy would be loaded by now, if any
    if len(mapped) != 1:
        raise RuntimeError(f"expected one libcupti in the process, found {mapped}")
    detail = f"{len(profiler.METRICS)} metrics at {sampler.interval_ns} ns, libcupti {mapped[0]}"
    return detail, {"metrics": list(profiler.METRICS), "libcupti": mapped}


def step_decode(state: dict):
    import cupy

    sync = cupy.cuda.get_current_stream().synchronize
    samples = state["sampler"].sample_window(lambda: None, sync)
    first = samples[0]
    return (
        f"{len(samples)} samples in an idle window, first {first.duration_ns} ns: {first.values}",
        {"samples": len(samples), "first": [first.start_ns, first.end_ns, list(first.values)]},
    )


def step_copies(state: dict):
    import cupy

    from gpu.counters import profiler

    src = cupy.ones(GiB // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    dst[...] = src  # compile the copy kernel outside the window
    sync = cupy.cuda.get_current_stream().synchronize

    def copies() -> None:
        for _ in range(COPIES):
            dst[...] = src

    samples = state["sampler"].sample_window(copies, sync)
    read = sum(s.value(profiler.DRAM_READ) for s in samples)
    write = sum(s.value(profiler.DRAM_WRITE) for s in samples)
    expected = COPIES * GiB
    info = {"read": read, "write": write, "expected": expected, "samples": len(samples)}
    detail = (
        f"read {read / 1e9:.3f} GB, wrote {write / 1e9:.3f} GB, expected {expected / 1e9:.3f} GB "
        f"each ({len(samples)} samples)"
    )
    if abs(read - expected) > TOLERANCE * expected or abs(write - expected) > TOLERANCE * expected:
        raise RuntimeError(detail + f": off by more than {TOLERANCE:.0%}")
    return detail, info


def step_backend(state: dict):
    from gpu.backends.backend import RunOptions
    from gpu.backends.cuda_backend import CudaBackend
    from gpu.config import AttentionConfig

    state["sampler"].close()  # the backend opens its own session
    backend = CudaBackend()
    algo = backend.algorithms()[-1]  # the fastest tensor-core kernel here
    result = backend.run(AttentionConfig(seq_len=4096), algo, RunOptions(profile=True))
    if not result.traffic:
        raise RuntimeError(f"{algo}: no traffic ({result.message})")
    t = result.traffic[0]
    detail = (
        f"{algo} N=4096: DRAM read {t.dram_read_bytes / 1e6:.1f} MB, write "
        f"{t.dram_write_bytes / 1e6:.1f} MB, L2 {t.l2_bytes / 1e6:.1f} MB, "
        f"{t.launches} launches, {len(t.strip.t_us)} strip points, {result.total_ms:.3f} ms"
    )
    return detail, result.to_dict()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    steps, state = Steps(), {}
    steps.run("environment", step_environment)
    steps.run("library", step_library, "environment")
    steps.run("device support", step_device, "library")
    steps.run("configure", lambda: step_config(state), "device support")
    steps.run("start/stop/decode", lambda: step_decode(state), "configure")
    steps.run("ten 1 GiB copies", lambda: step_copies(state), "start/stop/decode")
    steps.run("backend profile", lambda: step_backend(state), "start/stop/decode")
    if "sampler" in state:
        state["sampler"].close()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cupti_smoke.json").write_text(json.dumps(steps.data, indent=1, default=str))
    print()
    print(f"{'step':<20} {'status':<8} detail")
    for name, status, detail in steps.rows:
        print(f"{name:<20} {status:<8} {detail}")
    return 0 if all(status == "OK" for _, status, _ in steps.rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
