"""The hierarchical roofline names the roof that binds each kernel, from measurements where a
result carries them and from the cost model otherwise, and says which."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA
from gpu.config import AttentionConfig
from gpu.model import roofline
from gpu.model.costmodel import DEFAULT_GPU, GPUS, algorithm_cost, compulsory_cost, with_measured_l2
from gpu.results import DeviceInfo, KernelTime, KernelTraffic, RunResult

H200 = GPUS[DEFAULT_GPU]
CONFIG = AttentionConfig(seq_len=16384)
ALL = (NAIVE, TILED, TILED_MMA, TILED_WGMMA)


def traffic(name: str, read: int, write: int, l2: int, xu: int = 0) -> KernelTraffic:
    return KernelTraffic(
        name=name,
        dram_read_bytes=read,
        dram_write_bytes=write,
        l2_bytes=l2,
        tensor_active_cycles=1_000_000,
        xu_warp_instructions=xu,
        elapsed_cycles=2_000_000,
        window_ns=1_100_000,
        sample_interval_ns=20_000,
        launches=3,
    )


def result(algorithm: str, times: dict[str, float], measured: dict | None = None) -> RunResult:
    cost = algorithm_cost(CONFIG, algorithm)
    return RunResult(
        config=CONFIG,
        algorithm=algorithm,
        backend="cuda",
        device="NVIDIA H200",
        kernel_times=tuple(KernelTime(n, ms, ms * 0.98, ms * 1.05, 5) for n, ms in times.items()),
        model_peak_bytes=cost.peak_bytes,
        hbm_bytes=cost.hbm_bytes,
        flops=cost.flops,
        repeats=5,
        traffic=tuple(traffic(n, *v) for n, v in (measured or {}).items()),
    )


def test_roofs_are_hbm_and_the_compute_units_and_l2_once_its_bandwidth_is_known():
    unknown = dataclasses.replace(H200, l2_bandwidth_bytes_s=None)
    assert set(roofline.roofs(unknown)) == {
        roofline.HBM, "tensor", roofline.MMA, "fp32", roofline.XU
    }  # fmt: skip
    assert roofline.L2 in roofline.roofs(H200)  # measured on an H200: in the table
    with_l2 = with_measured_l2(unknown, 9e12, "measured")
    roofs = roofline.roofs(with_l2)
    assert roofs[roofline.L2].peak == 9e12 and roofs[roofline.L2].kind == roofline.MEMORY
    assert roofs["tensor"].kind == roofline.COMPUTE


def test_model_only_naive_is_memory_bound_and_fused_kernels_compute_bound_on_the_h200():
    e = roofline.explain(CONFIG, ALL, H200)
    assert e.algorithm(NAIVE).bound == "memory" and e.algorithm(NAIVE).roof == roofline.HBM
    assert e.algorithm(NAIVE).kernel("softmax").bound == "memory"
    for fused in (TILED_MMA, TILED_WGMMA):
        v = e.algorithm(fused)
        assert v.bytes_source == roofline.MODEL
        assert v.bound == "compute" and v.roof in ("tensor", roofline.MMA, roofline.XU)
        assert v.bytes == compulsory_cost(CONFIG, fused).hbm_bytes  # the L2-aware estimate
    # the readable kernel is judged against the fp32 CUDA cores, not the tensor cores
    assert e.algorithm(TILED).roof == "fp32"


def test_exponentials_tie_with_tensor_math_at_d64_and_trail_it_at_d128():
    """FlashAttention-3's point: 4·d FLOPs per exponential at 989 TFLOP/s against 3.9 Texp/s."""
    for d, ratio in ((64, 1.0), (128, 0.5)):
        cfg = CONFIG.with_(head_dim=d)
        k = roofline.explain(cfg, (TILED_WGMMA,), H200).algorithm(TILED_WGMMA).kernels[0]
        assert k.roof_ms[roofline.XU] / k.roof_ms["tensor"] == pytest.approx(ratio, rel=0.01)


def test_a_measurement_moves_the_point_to_measured_intensity_and_says_so():
    read, write = 75_600_000, 16_900_000  # the DRAM counters of docs/TRACES.md at 16384
    measured = result(TILED_MMA, {"flash_fwd": 2.6}, {"flash_fwd": (read, write, 6_500_000_000)})
    v = roofline.algorithm_verdict(CONFIG, TILED_MMA, H200, measured)
    # O, m and l are written once whatever the counters saw leave the L2 in the window
    written = max(write, compulsory_cost(CONFIG, TILED_MMA).bytes_written)
    assert v.bytes_source == roofline.MEASURED and v.bytes == read + written
    assert v.intensity == pytest.approx(CONFIG.bh * 4 * 16384**2 * 64 / (read + written))
    assert v.intensity > 8000  # thousands of FLOP per DRAM byte
    assert v.bound == "compute" and v.measured_ms == pytest.approx(2.6)
    model = roofline.algorithm_verdict(CONFIG, TILED_MMA, H200)
    assert model.bytes_source == roofline.MODEL and model.intensity != v.intensity


def test_the_verdict_flips_from_the_models_to_the_measured_one():
    """A kernel the model calls compute-bound is memory-bound when its measured DRAM traffic is
    too large for its FLOPs (here: every K/V re-read missing L2)."""
    model = roofline.algorithm_verdict(CONFIG, TILED_MMA, H200)
    no_reuse = algorithm_cost(CONFIG, TILED_MMA).hbm_bytes  # 6.5 GB
    heavy = result(TILED_MMA, {"flash_fwd": 2.6}, {"flash_fwd": (no_reuse * 2, 25_000_000, 0)})
    measured = roofline.algorithm_verdict(CONFIG, TILED_MMA, H200, heavy)
    assert model.bound == "compute"
    assert measured.bound == "memory" and measured.roof == roofline.HBM


def test_l2_traffic_binds_when_l2_bandwidth_is_the_slowest_roof():
    slow_l2 = with_measured_l2(H200, 2e12, "a slow L2")
    v = roofline.algorithm_verdict(CONFIG, TILED_MMA, slow_l2)
    assert v.roof == roofline.L2 and v.bound == "memory"
    fast_l2 = with_measured_l2(H200, 12e12, "a fast L2")
    assert roofline.algorithm_verdict(CONFIG, TILED_MMA, fast_l2).bound == "compute"


def test_causal_mask_names_useful_and_executed_intensity_apart():
    cfg = CONFIG.with_(causal=True)
    v = roofline.algorithm_verdict(cfg, TILED_MMA, H200)
    assert v.executed_flops > v.flops == CONFIG.bh * 2 * 16384**2 * 64
    assert v.executed_intensity > v.intensity
    d = v.to_dict()
    assert d["intensity"] == v.intensity and d["executed_intensity"] == v.executed_intensity


def test_naive_over_fused_dram_ratio_is_given_measured_and_modeled():
    naive = result(
        NAIVE,
        {"gemm_qk": 1.99, "softmax": 4.5, "gemm_pv": 1.7},
        {
            "gemm_qk": (145_200_000, 6_416_000_000, 6_600_000_000),
            "softmax": (6_442_600_000, 6_416_400_000, 12_900_000_000),
            "gemm_pv": (6_483_500_000, 19_300_000, 6_600_000_000),
        },
    )
    mma = result(TILED_MMA, {"flash_fwd": 2.6}, {"flash_fwd": (75_600_000, 16_900_000, 6.5e9)})
    e = roofline.explain(CONFIG, (NAIVE, TILED_MMA), H200, {NAIVE: naive, TILED_MMA: mma})
    ratio = e.naive_ratios[f"naive/{TILED_MMA}"]
    # compulsory writes counted: S and P in full (6.44 GB each), O, m and l (26.8 MB)
    naive_bytes = 145_200_000 + 6_442_450_944 + 6_442_600_000 + 6_442_450_944 + 6_483_500_000
    naive_bytes += 25_165_824
    mma_bytes = 75_600_000 + compulsory_cost(CONFIG, TILED_MMA).bytes_written
    assert ratio["measured"] == pytest.approx(naive_bytes / mma_bytes, rel=1e-3)
    assert ratio["model_no_reuse"] == pytest.approx(5.46, rel=0.01)
    assert ratio["model_l2_aware"] > 100
    assert e.algorithm(NAIVE).kernel("softmax").bound == "memory"


def test_a_result_for_another_config_or_an_oom_is_not_used():
    other = result(TILED_MMA, {"flash_fwd": 1.0}, {"flash_fwd": (1, 1, 1)})
    other = dataclasses.replace(other, config=CONFIG.with_(seq_len=8192))
    assert roofline.algorithm_verdict(CONFIG, TILED_MMA, H200, other).measured_ms is None
    oom = RunResult(config=CONFIG, algorithm=NAIVE, backend="cuda", device="x", oom=True)
    v = roofline.algorithm_verdict(CONFIG, NAIVE, H200, oom)
    assert v.measured_ms is None and v.bytes_source == roofline.MODEL


def test_measured_tensor_activity_is_a_share_of_the_four_tensor_pipes_of_every_sm():
    """sm__pipe_tensor_cycles_active counts busy sub-partition cycles: four per SM."""
    mma = result(TILED_MMA, {"flash_fwd": 1.0}, {"flash_fwd": (1e8, 1e7, 6e9)})
    k = roofline.algorithm_verdict(CONFIG, TILED_MMA, H200, mma).kernels[0]
    clock = 2_000_000 / 1.1e-3  # the sampled window's cycles per second
    assert k.tensor_active == pytest.approx(1_000_000 / (4 * 132 * clock * 1e-3))


def test_the_explanation_is_plain_json():
    e = roofline.explain(CONFIG, ALL, H200)
    data = json.loads(json.dumps(e.to_dict()))
    row = data["algorithms"][TILED_MMA]
    for key in ("flops", "bytes", "bytes_source", "intensity", "bound", "roof", "roofline_ms",
                "measured_ms", "kernels", "model_bytes"):  # fmt: skip
        assert key in row
    assert data["gpu"] == H200.name and "tensor" in data["roofs"]


def test_a_recorded_device_brings_its_measured_l2_bandwidth():
    device = DeviceInfo(
        "cuda", "NVIDIA H200", 150_109_880_320, 1, {"l2_read_bandwidth_bytes_s": 9e12}
    )
    gpu = roofline.device_gpu(device)
    assert gpu.name == H200.name and gpu.l2_bandwidth_bytes_s == 9e12
    assert roofline.device_gpu(None) is H200
    unknown = DeviceInfo("cuda", "Some GPU", 1, 1, {})
    assert roofline.device_gpu(unknown) is H200


def test_the_l2_peak_from_the_counters_wins_over_the_best_streaming_rate():
    """The other roofs are peaks (datasheet HBM and tensor rates), so the L2's should be too."""
    details = {"l2_read_bandwidth_bytes_s": 7e12, "l2_peak_bandwidth_bytes_s": 1.1e13}
    gpu = roofline.device_gpu(DeviceInfo("cuda", "NVIDIA H200", 1, 1, details))
    assert gpu.l2_bandwidth_bytes_s == 1.1e13 and "peak" in gpu.l2_source
