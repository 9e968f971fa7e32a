"""Profiled results for app tests: naive and the two H200 tiled kernels at N = 4096 and 16384
(12 heads, d = 64, fp16), shaped as `bench --profile` writes them.

Test data, labelled as such in the device name and the recording's meta. The DRAM bytes read
and written per kernel and the kernel times are Nsight Compute's on an H200
(docs/bench/h200_ncu_4096.csv and h200_ncu_16384.csv, quoted in docs/TRACES.md); the other
counters (L2 bytes, tensor-pipe cycles, XU instructions) and the sampled strips are made up to
be plausible, and the memory figures are the cost model's.
"""

from __future__ import annotations

from pathlib import Path

from gpu.algorithms import NAIVE, TILED, TILED_MMA
from gpu.config import AttentionConfig
from gpu.files.recording import Recording, save_recording
from gpu.model.costmodel import algorithm_cost
from gpu.results import DeviceInfo, KernelTime, KernelTraffic, RunResult, TrafficStrip

DEVICE = "NVIDIA H200 (test data: DRAM counts from Nsight Compute)"
#: (N, algorithm) -> kernel -> (DRAM bytes read, DRAM bytes written, ncu time in ms).
NCU: dict[tuple[int, str], dict[str, tuple[int, int, float]]] = {
    (4096, NAIVE): {
        "gemm_qk": (12_838_656, 375_510_528, 0.121088),
        "softmax": (402_717_440, 375_917_568, 0.229152),
        "gemm_pv": (409_101_056, 55_808, 0.104160),
    },
    (4096, TILED): {"flash_fwd": (18_999_296, 2_816, 3.505152)},
    (4096, TILED_MMA): {"flash_fwd": (18_938_368, 512, 0.174944)},
    (16384, NAIVE): {
        "gemm_qk": (145_153_536, 6_416_008_448, 1.988704),
        "softmax": (6_442_610_432, 6_416_437_760, 4.498400),
        "gemm_pv": (6_483_533_056, 19_298_560, 1.705184),
    },
    (16384, TILED): {"flash_fwd": (76_285_696, 18_802_688, 54.332480)},
    (16384, TILED_MMA): {"flash_fwd": (75_578_368, 16_933_120, 2.627328)},
}
H200_CLOCK_HZ = 1.98e9
H200_SMS = 132


def strip(ms: float, dram_bytes: int, tensor_share: float, points: int = 24) -> TrafficStrip:
    """A made-up but consistent strip: flat DRAM rate (the bytes over the time), a tensor-pipe
    share that ramps up over the first samples."""
    t = tuple((i + 0.5) * ms * 1e3 / points for i in range(points))
    rate = dram_bytes / (ms * 1e-3) / 1e9
    active = tuple(tensor_share * min(1.0, (i + 1) / 3) for i in range(points))
    return TrafficStrip(t, tuple(rate for _ in t), active)


def traffic(name: str, read: int, write: int, ms: float, l2: int, tensor: float) -> KernelTraffic:
    cycles = int(ms * 1e-3 * H200_CLOCK_HZ)
    return KernelTraffic(
        name=name,
        dram_read_bytes=read,
        dram_write_bytes=write,
        l2_bytes=l2,
        tensor_active_cycles=int(tensor * cycles * H200_SMS),
        xu_warp_instructions=0,
        elapsed_cycles=cycles,
        window_ns=int(ms * 1e6),
        sample_interval_ns=20_000,
        launches=3,
        strip=strip(ms, read + write, tensor),
    )


def profiled_result(n: int, algorithm: str, profiled: bool = True) -> RunResult:
    """One result at N = `n`: timed as Nsight Compute timed it (a spread of ±3%), with the
    counters when `profiled`."""
    config = AttentionConfig(seq_len=n, heads=12, head_dim=64, dtype="fp16")
    cost = algorithm_cost(config, algorithm)
    kernels = NCU[(n, algorithm)]
    tensor = {NAIVE: 0.3, TILED: 0.0, TILED_MMA: 0.45}[algorithm]
    model = {k.name: k for k in cost.kernels}
    return RunResult(
        config=config,
        algorithm=algorithm,
        backend="cuda",
        device=DEVICE,
        kernel_times=tuple(
            KernelTime(k, ms, ms * 0.97, ms * 1.03, 5) for k, (_, _, ms) in kernels.items()
        ),
        peak_bytes=cost.peak_bytes,
        model_peak_bytes=cost.peak_bytes,
        hbm_bytes=cost.hbm_bytes,
        flops=cost.flops,
        repeats=5,
        device_peak_bytes=cost.peak_bytes + (8 << 20),  # + a cuBLAS-sized workspace
        traffic=tuple(
            traffic(k, r, w, ms, model[k].hbm_bytes, tensor if k != "softmax" else 0.0)
            for k, (r, w, ms) in kernels.items()
        )
        if profiled
        else (),
    )


def profiled_recording() -> Recording:
    results = tuple(profiled_result(n, a) for n, a in NCU)
    device = DeviceInfo("cuda", DEVICE, 150_109_880_320, 149_557_477_376)
    meta = {
        "command": "test data: DRAM bytes and times from Nsight Compute, other counters made up",
        "date": "2026-11-29T12:00:00+00:00",
    }
    return Recording(device, results, meta)


def write_profiled(path: Path) -> Path:
    save_recording(profiled_recording(), path)
    return path
