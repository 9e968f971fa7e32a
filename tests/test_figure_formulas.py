"""Each figure the roofline, the cost model and the current point give is pinned to a value
worked out here by hand: from the raw counters of the shipped H200 recording (read as plain
JSON, not through the code under test), from the datasheets' per-clock rates, and from the
closed-form byte counts of each kernel. A wrong operator or constant in the figure code moves
one of these numbers."""

from __future__ import annotations

import functools
import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA, TILED_WS
from gpu.config import AttentionConfig
from gpu.files.recording import load_recording
from gpu.model import costmodel, kernel_cost, roofline
from gpu.model.costmodel import GPUS
from gpu.results import DeviceInfo, KernelTime, KernelTraffic, RunResult

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "resources" / "recorded" / "h200_sweep.json"
N = 16384
H, D, EB = 12, 64, 2  # the sweep's heads, head size and fp16 bytes
H200 = GPUS["H200 SXM 141 GB"]
SMS = 132


@functools.cache
def raw() -> dict:
    return json.loads(SWEEP.read_text())


def raw_at(n: int = N, causal: bool = False) -> dict[str, dict]:
    return {
        r["algorithm"]: r
        for r in raw()["results"]
        if r["config"]["seq_len"] == n
        and r["config"]["causal"] == causal
        and r["config"]["head_dim"] == D
    }


@functools.cache
def loaded():
    return load_recording(SWEEP)


def results_at(n: int = N) -> dict[str, RunResult]:
    return {
        r.algorithm: r
        for r in loaded().results
        if r.config.seq_len == n and not r.config.causal and r.config.head_dim == D
    }


def hand_clock() -> float:
    """The median of cycles ÷ window time over every profiled kernel of the whole recording
    (every N, peers included): the one clock all its points are judged at."""
    return statistics.median(
        t["elapsed_cycles"] / (t["window_ns"] * 1e-9)
        for r in raw()["results"]
        for t in r.get("traffic", ())
    )


def hand_kernels() -> int:
    """How many profiled kernels the recording holds."""
    return sum(len(r.get("traffic", ())) for r in raw()["results"])


def explained(n: int = N) -> roofline.Explanation:
    results = results_at(n)
    gpu = roofline.device_gpu(loaded().device, loaded().results)  # the recording's one clock
    algos = (NAIVE, TILED, TILED_MMA, TILED_WGMMA, TILED_WS)
    return roofline.explain(results[NAIVE].config, algos, gpu, results)


def s_bytes(n: int) -> int:
    return H * n * n * EB


def qkvo_bytes(n: int) -> int:
    return H * n * D * EB


def stats(n: int) -> int:
    return 2 * H * n * 4  # m and l, fp32


def counted(t: dict, compulsory_written: int) -> int:
    """DRAM bytes with the compulsory writes still in L2 counted: read + max(written, due)."""
    return t["dram_read_bytes"] + max(t["dram_write_bytes"], compulsory_written)


# --------------------------------------------------------------------------------------------
# The roofs


def test_the_h200_roofs_at_the_boost_clock_are_per_clock_rates_times_132_sms_times_198_ghz():
    r = roofline.roofs(H200)
    hz = 1.98e9
    assert r[roofline.TENSOR].peak == pytest.approx(4096 * SMS * hz, rel=1e-12)
    assert r[roofline.MMA].peak == pytest.approx(4 * 2048 / 3 * SMS * hz, rel=1e-12)
    assert r["fp32"].peak == pytest.approx(128 * 2 * SMS * hz, rel=1e-12)
    assert r[roofline.XU].peak == pytest.approx(16 * SMS * hz, rel=1e-12)
    assert r[roofline.HBM].peak == 4.8e12 and r[roofline.L2].peak == 15.42e12
    assert r[roofline.L2].nominal and not r[roofline.HBM].nominal
    assert {n: x.kind for n, x in r.items()} == {
        "hbm": "memory", "l2": "memory", "tensor": "compute", "mma_sync": "compute",
        "fp32": "compute", "xu": "compute",
    }  # fmt: skip
    assert r[roofline.TENSOR].label == "tensor cores (wgmma) 1.07 PFLOP/s"  # 1,070.5 T
    assert r[roofline.MMA].label == "tensor cores (mma.sync) 714 TFLOP/s"  # 713.6
    assert r["fp32"].label == "fp32 CUDA cores 66.9 TFLOP/s"
    assert r[roofline.XU].label == "exponential unit 4.18 Texp/s"
    assert r[roofline.HBM].label == "HBM 4.80 TB/s"
    assert r[roofline.L2].label == "L2 15.4 TB/s nominal"
    assert "4,096 FLOP/clk/SM × 132 SMs at the boost clock 1.98 GHz" in r["tensor"].source
    assert "2,731 FLOP/clk/SM" in r[roofline.MMA].source
    assert "256 FLOP/clk/SM × 132 SMs" in r["fp32"].source
    assert r[roofline.XU].source.startswith("16 results/clk/SM")


def test_a_gpu_without_per_clock_rates_has_its_datasheet_peaks_and_no_mma_sync_roof():
    a100 = GPUS["A100 SXM 40 GB"]
    r = roofline.roofs(a100)
    assert roofline.MMA not in r
    assert r["tensor"].peak == 312e12 and r["tensor"].label == "tensor cores 312 TFLOP/s"
    assert r["fp32"].peak == 19.5e12 and r["fp32"].source == a100.source
    assert r[roofline.XU].peak == pytest.approx(16 * 108 * 1.41e9)
    assert r[roofline.L2].peak == pytest.approx(5120 * 1.41e9) and not r[roofline.L2].nominal
    assert r[roofline.L2].label == "L2 7.22 TB/s"
    assert GPUS["A100 SXM 80 GB"].l2_bandwidth_bytes_s == pytest.approx(5120 * 1.41e9)
    # three significant figures, trailing zeros kept (gpu/units.py)
    assert roofline.roofs(GPUS["T4 16 GB"])["tensor"].label == "tensor cores 65.0 TFLOP/s"
    assert roofline.roofs(GPUS["RTX 3060 12 GB"])["tensor"].label == "tensor cores 25.5 TFLOP/s"


def test_roof_labels_write_rates_with_the_largest_prefix_they_reach():
    """The roofs' labels are the one unit formatter's (gpu/units.py fmt_rate): three
    significant figures with trailing zeros, the next prefix once a figure rounds up to it."""
    h200 = roofline.roofs(GPUS["H200 SXM 141 GB"])
    cpu = replace(GPUS["T4 16 GB"], kind="cpu", bandwidth_bytes_s=12.34e9, fp32_flops=999e9)
    assert roofline.roofs(cpu)[roofline.DRAM].label == "memory 12.3 GB/s"
    assert roofline.roofs(cpu)["fp32"].label == "fp32 SIMD 999 GFLOP/s"
    assert h200[roofline.HBM].label == "HBM 4.80 TB/s"
    assert h200[roofline.TENSOR].label.endswith(" 1.07 PFLOP/s")


def test_the_roofs_of_the_recording_are_at_the_median_clock_of_its_counters():
    e = explained()
    hz = hand_clock()
    count = hand_kernels()
    assert e.gpu.clock_hz == pytest.approx(hz, rel=1e-12)
    assert e.gpu.clock_source == (
        f"gr__cycles_elapsed.max ÷ sampled time, median of {count} profiled kernels"
    )
    assert e.roofs["tensor"].peak == pytest.approx(4096 * SMS * hz, rel=1e-12)
    assert e.roofs[roofline.XU].peak == pytest.approx(16 * SMS * hz, rel=1e-12)
    assert f"at the measured clock {hz / 1e9:.2f} GHz" in e.roofs["tensor"].source
    # the L2 roof is what the recording's device measured: its counters' nominal peak
    details = raw()["device"]["details"]
    assert e.roofs[roofline.L2].peak == details["l2_peak_bandwidth_bytes_s"]
    read = details["l2_read_bandwidth_bytes_s"]
    assert e.roofs[roofline.L2].source == (
        "nominal: the L2 counters' peak on this NVIDIA H200 (bench/l2_bandwidth.py); best "
        f"streaming read {read / 1e12:.2f} TB/s"
    )


def test_a_device_with_only_a_streaming_read_gets_that_as_a_measured_l2_roof():
    info = DeviceInfo("cuda", "NVIDIA H200", 150 * 10**9, 10**9,
                      {"l2_read_bandwidth_bytes_s": 8.7e12})  # fmt: skip
    gpu = roofline.device_gpu(info)
    assert gpu.l2_bandwidth_bytes_s == 8.7e12 and not gpu.l2_nominal
    assert gpu.l2_source == "best streaming read on this NVIDIA H200 (bench/l2_bandwidth.py)"
    assert not gpu.clock_measured and gpu.clock_hz == 1.98e9


def test_a_replayed_device_carries_its_clock_and_how_many_kernels_measured_it():
    info = DeviceInfo("cuda", "NVIDIA H200", 150 * 10**9, 10**9,
                      {"measured_clock_hz": 1.7e9, "measured_clock_kernels": 7})  # fmt: skip
    gpu = roofline.device_gpu(info)
    assert gpu.clock_measured and gpu.clock_hz == 1.7e9
    assert gpu.clock_source == "gr__cycles_elapsed.max ÷ sampled time, median of 7 profiled kernels"
    # results with counters win over the device's figure
    one = results_at()[TILED_MMA]
    t = raw_at()[TILED_MMA]["traffic"][0]
    hz = t["elapsed_cycles"] / (t["window_ns"] * 1e-9)
    assert roofline.device_gpu(info, [one]).clock_hz == pytest.approx(hz, rel=1e-12)
    assert roofline.device_gpu(None) is GPUS[costmodel.DEFAULT_GPU]


def test_the_clock_of_a_sampled_launch_is_its_cycles_over_its_window():
    t = KernelTraffic("k", 0, 0, 0, elapsed_cycles=3_300_000, window_ns=2_000_000)
    assert roofline.kernel_clock_hz(t) == pytest.approx(1.65e9)
    assert roofline.kernel_clock_hz(KernelTraffic("k", 0, 0, 0, elapsed_cycles=5)) is None
    assert roofline.kernel_clock_hz(KernelTraffic("k", 0, 0, 0, window_ns=5)) is None
    assert roofline.measured_clock_hz([]) is None
    hz, count = roofline.measured_clock_hz(loaded().results)
    assert count == hand_kernels()
    assert hz == pytest.approx(hand_clock(), rel=1e-12)


def test_the_tensor_share_is_busy_pipe_cycles_over_four_pipes_per_sm_times_cycles():
    # 2.5 ms at 1.6 GHz on 100 SMs: 4 × 100 × 4e6 = 1.6e9 pipe cycles; 4e8 busy: a quarter
    t = KernelTraffic("k", 0, 0, 0, tensor_active_cycles=4 * 10**8,
                      elapsed_cycles=1_600_000, window_ns=1_000_000)  # fmt: skip
    assert roofline.tensor_share(t, 2.5, 100) == pytest.approx(0.25, rel=1e-12)
    assert roofline.tensor_share(t, 0.0, 100) is None
    assert roofline.tensor_share(t, 2.5, 0) is None
    assert roofline.tensor_share(KernelTraffic("k", 0, 0, 0), 2.5, 100) is None


def test_a_tie_is_a_second_roof_within_five_percent_of_the_binding_ones_time():
    times = {"a": 1.0, "b": 0.95, "c": 0.97, "d": 0.9}
    assert roofline.ties(times, "a") == ("a", "c", "b")  # 0.95 is exactly 5 % off: a tie
    assert roofline.ties({"a": 0.0, "b": 0.0}, "a") == ("a",)
    assert roofline.ties({"a": 2.0}, "a") == ("a",)


def test_the_compute_roof_follows_the_instruction_family_the_kernel_issues():
    cpu = roofline.device_gpu(
        DeviceInfo("cpu", "CPU", 8 * 10**9, 10**9, {"cores": 2, "clock_hz": 2e9,
                   "memory_bandwidth_bytes_s": 1e10})
    )  # fmt: skip
    assert roofline.compute_roof(H200, NAIVE, "") == ""
    assert roofline.compute_roof(H200, TILED, "fp32") == "fp32"
    assert roofline.compute_roof(cpu, NAIVE, "tensor") == "fp32"
    assert roofline.compute_roof(H200, TILED_MMA, "tensor") == roofline.MMA
    assert roofline.compute_roof(H200, "sdpa_flash", "tensor") == roofline.MMA
    assert roofline.compute_roof(H200, TILED_WGMMA, "tensor") == "tensor"
    # The fused backward's main kernel is the wgmma build on Hopper; its dQ pass is mma.sync.
    assert roofline.compute_roof(H200, TILED_MMA, "tensor", "flash_bwd") == "tensor"
    assert roofline.compute_roof(H200, TILED_MMA, "tensor", "flash_bwd_dq") == roofline.MMA
    assert roofline.compute_roof(H200, TILED_MMA, "tensor", "flash_mma_fwd") == roofline.MMA
    # without a separate mma.sync rate, mma.sync kernels use the tensor roof
    assert roofline.compute_roof(GPUS["A100 SXM 40 GB"], TILED_MMA, "tensor") == "tensor"


# --------------------------------------------------------------------------------------------
# Naive at N = 16384 from its raw counters


def naive_hand() -> dict[str, dict[str, float]]:
    """Naive's three kernels worked out from the raw counters at N = 16384."""
    hz = hand_clock()
    r = raw_at()[NAIVE]
    l2_peak = raw()["device"]["details"]["l2_peak_bandwidth_bytes_s"]
    due = {"gemm_qk": s_bytes(N), "softmax": s_bytes(N), "gemm_pv": qkvo_bytes(N)}
    gemm_flops = 2 * H * N * N * D
    times = {k["name"]: k["ms"] for k in r["kernel_times"]}
    out = {}
    for t in r["traffic"]:
        name = t["name"]
        dram = counted(t, due[name])
        roof_ms = {"hbm": dram / 4.8e12 * 1e3, "l2": t["l2_bytes"] / l2_peak * 1e3}
        if name == "softmax":
            roof_ms["xu"] = t["xu_warp_instructions"] * 32 / (16 * SMS * hz) * 1e3
        else:
            roof_ms["tensor"] = gemm_flops / (4096 * SMS * hz) * 1e3
        kernel_hz = t["elapsed_cycles"] / (t["window_ns"] * 1e-9)
        out[name] = {
            "dram": dram,
            "deferred": max(0, due[name] - t["dram_write_bytes"]),
            "l2": t["l2_bytes"],
            "roof_ms": roof_ms,
            "ms": times[name],
            "share": t["tensor_active_cycles"] / (4 * SMS * kernel_hz * times[name] * 1e-3),
            "flops": gemm_flops if name != "softmax" else 0,
            "exps": t["xu_warp_instructions"] * 32,
        }
    return out


def test_naives_kernels_at_16384_are_their_counters_with_the_compulsory_writes_counted():
    v = explained().algorithm(NAIVE)
    hand = naive_hand()
    assert [k.name for k in v.kernels] == ["gemm_qk", "softmax", "gemm_pv"]
    for k in v.kernels:
        h = hand[k.name]
        assert k.dram_bytes == h["dram"] and k.deferred_write_bytes == h["deferred"]
        assert k.l2_bytes == h["l2"] and k.bytes_source == k.l2_bytes_source == "measured"
        assert k.executed_flops == h["flops"] and k.flops == h["flops"]
        assert k.exps == h["exps"]
        assert k.roof_ms.keys() == h["roof_ms"].keys()
        for roof, ms in h["roof_ms"].items():
            assert k.roof_ms[roof] == pytest.approx(ms, rel=1e-9), (k.name, roof)
        binding = max(h["roof_ms"], key=h["roof_ms"].get)
        assert k.roof == binding and k.roofline_ms == pytest.approx(h["roof_ms"][binding])
        others = [ms for r, ms in h["roof_ms"].items() if r != binding]
        assert k.tie == any(ms >= h["roof_ms"][binding] * 0.95 for ms in others)
        assert k.tie is False  # every naive kernel has one roof that binds alone
        assert k.bound == ("memory" if binding in ("hbm", "l2") else "compute")
        assert k.measured_ms == h["ms"]
        assert k.tensor_active == pytest.approx(h["share"], rel=1e-9)
        assert k.roof_share == pytest.approx({r: ms / h["ms"] for r, ms in h["roof_ms"].items()})
        if h["flops"]:
            assert k.intensity == pytest.approx(h["flops"] / h["dram"])
            assert k.executed_intensity == pytest.approx(h["flops"] / h["dram"])
            assert k.l2_intensity == pytest.approx(h["flops"] / h["l2"])
        else:
            assert k.intensity is None and k.executed_intensity is None
            assert k.l2_intensity is None


def test_naives_whole_verdict_sums_its_kernels_and_names_the_roof_of_the_most_time():
    v = explained().algorithm(NAIVE)
    hand = naive_hand()
    dram = sum(h["dram"] for h in hand.values())
    l2 = sum(h["l2"] for h in hand.values())
    useful = 4 * H * N * N * D
    assert v.bytes == dram and v.l2_bytes == l2 and v.bytes_source == "measured"
    assert v.flops == v.executed_flops == useful
    assert v.intensity == pytest.approx(useful / dram)
    assert v.executed_intensity == pytest.approx(useful / dram)
    assert v.l2_intensity == pytest.approx(useful / l2)
    per_roof: dict[str, float] = {}
    for h in hand.values():
        top = max(h["roof_ms"], key=h["roof_ms"].get)
        per_roof[top] = per_roof.get(top, 0.0) + h["roof_ms"][top]
    assert v.roofs_ms == pytest.approx(per_roof)
    assert v.roof == max(per_roof, key=per_roof.get)
    assert v.roofline_ms == pytest.approx(sum(per_roof.values()))
    measured = sum(h["ms"] for h in hand.values())
    assert v.measured_ms == pytest.approx(measured)
    assert v.roof_share == pytest.approx({"roofline": sum(per_roof.values()) / measured})
    assert v.bound == "memory"  # the softmax's HBM traffic binds the most time
    assert set(per_roof) == {"hbm"} and v.ties == ("hbm",) and not v.tie
    d = v.to_dict()
    assert d["bytes"] == dram and d["bytes_source"] == "measured" and d["roof"] == v.roof
    assert d["flops"] == useful and len(d["kernels"]) == 3
    assert d["kernels"][1]["exps"] == hand["softmax"]["exps"]
    assert d["kernels"][0]["deferred_write_bytes"] == hand["gemm_qk"]["deferred"]


def test_the_measured_dram_ratio_is_naives_counted_bytes_over_each_fused_kernels():
    e = explained()
    naive = sum(h["dram"] for h in naive_hand().values())
    due = qkvo_bytes(N) + stats(N)
    for a in (TILED, TILED_MMA, TILED_WGMMA, TILED_WS):
        (t,) = raw_at()[a]["traffic"]
        fused = counted(t, due)
        assert e.algorithm(a).bytes == fused
        r = e.naive_ratios[f"naive/{a}"]
        assert r["measured"] == pytest.approx(naive / fused, rel=1e-12)
        assert r["model_over_measured"] is None
        assert e.algorithm(a).model_over_measured == pytest.approx(
            e.algorithm(a).model_bytes["l2_aware"] / fused
        )
    ws = e.naive_ratios["naive/tiled_ws"]
    assert ws["model_no_reuse"] == pytest.approx(naive_no_reuse(N) / fused_no_reuse(N, 192, 128))
    assert 250 < ws["measured"] < 300  # ~271×: what the Tiles banner and explain both quote


def test_a_fused_kernels_measured_verdict_at_16384_is_its_counters_on_its_own_roof():
    e = explained()
    hz = hand_clock()
    useful = 4 * H * N * N * D
    l2_peak = raw()["device"]["details"]["l2_peak_bandwidth_bytes_s"]
    for a, rate in ((TILED_MMA, 4 * 2048 / 3), (TILED_WGMMA, 4096), (TILED_WS, 4096)):
        (t,) = raw_at()[a]["traffic"]
        (k,) = e.algorithm(a).kernels
        dram = counted(t, qkvo_bytes(N) + stats(N))
        expect = {
            "hbm": dram / 4.8e12 * 1e3,
            "l2": t["l2_bytes"] / l2_peak * 1e3,
            "xu": t["xu_warp_instructions"] * 32 / (16 * SMS * hz) * 1e3,
            roofline.MMA if a == TILED_MMA else "tensor": useful / (rate * SMS * hz) * 1e3,
        }
        assert k.roof_ms == pytest.approx(expect, rel=1e-9), a
        assert k.flops == useful and k.exps == t["xu_warp_instructions"] * 32
    # the readable kernel multiplies on the fp32 CUDA cores
    (t,) = raw_at()[TILED]["traffic"]
    (k,) = e.algorithm(TILED).kernels
    assert k.unit == "fp32"
    executed = fused_executed_flops(N, 64, 64)
    assert k.roof_ms["fp32"] == pytest.approx(executed / (256 * SMS * hz) * 1e3, rel=1e-9)


def test_an_unmeasured_kernel_is_placed_at_the_models_bytes_and_exponentials():
    config = AttentionConfig(seq_len=4096, heads=H, head_dim=D)
    v = roofline.algorithm_verdict(config, NAIVE, H200)
    band = costmodel.traffic_band(config, NAIVE, H200)
    for k in v.kernels:
        assert k.bytes_source == "model" and k.measured_ms is None and k.tensor_active is None
        assert k.deferred_write_bytes == 0
        assert k.dram_bytes == band.l2_aware.kernel(k.name).hbm_bytes
        assert k.l2_bytes == naive_no_reuse_kernels(4096)[k.name]
    assert v.kernel("softmax").exps == 2 * H * 4096 * 4096
    assert v.roof_share == {} and v.model_over_measured is None and v.measured_ms is None


def test_a_kernel_that_wrote_all_its_outputs_within_the_window_adds_no_deferred_bytes():
    config = AttentionConfig(seq_len=1024, heads=H, head_dim=D)
    cost = costmodel.algorithm_cost(config, TILED_MMA)
    due = qkvo_bytes(1024) + stats(1024)
    r = RunResult(
        config=config, algorithm=TILED_MMA, backend="cuda", device="NVIDIA H200",
        kernel_times=(KernelTime("flash_fwd", 0.1),), model_peak_bytes=cost.peak_bytes,
        hbm_bytes=cost.hbm_bytes, flops=cost.flops,
        traffic=(KernelTraffic("flash_fwd", 3 * qkvo_bytes(1024), due + 512, 10**9),),
    )  # fmt: skip
    (k,) = roofline.algorithm_verdict(config, TILED_MMA, H200, r).kernels
    assert k.deferred_write_bytes == 0 and k.dram_bytes == 3 * qkvo_bytes(1024) + due + 512
    assert roofline.counted_dram_bytes(r) == k.dram_bytes


def test_an_empty_kernel_is_memory_bound_in_no_time():
    cost = costmodel.KernelCost("nothing", 0, 0, 0)
    k = roofline.kernel_verdict(
        NAIVE, cost, 0, cost, cost, roofline.roofs(H200), H200, None
    )  # fmt: skip
    assert k.roof_ms == {"hbm": 0.0} and k.roof == "hbm" and k.bound == "memory"
    assert k.roofline_ms == 0.0


def test_a_result_of_another_config_or_out_of_memory_is_judged_as_no_result():
    r = results_at()[TILED_MMA]
    other = AttentionConfig(seq_len=8192, heads=H, head_dim=D)
    assert roofline.algorithm_verdict(other, TILED_MMA, H200, r).measured_ms is None
    from dataclasses import replace

    oom = replace(r, oom=True)
    assert roofline.algorithm_verdict(r.config, TILED_MMA, H200, oom).bytes_source == "model"


def test_useful_flops_are_split_over_kernels_in_proportion_to_what_they_execute():
    cost = costmodel.KernelCost("k", 0, 0, flops=300)
    assert roofline._useful_share(cost, 900, 100) == 33
    assert roofline._useful_share(costmodel.KernelCost("k", 0, 0, 0), 900, 100) == 0
    assert roofline._useful_share(cost, 0, 100) == 0
    causal = AttentionConfig(seq_len=1000, heads=3, head_dim=D, causal=True)
    v = roofline.algorithm_verdict(causal, NAIVE, H200)
    # naive executes the whole N×N products; the useful half is split between its two GEMMs
    useful = 4 * 3 * 1000 * 1000 * D // 2
    assert v.kernel("gemm_qk").flops == v.kernel("gemm_pv").flops == useful // 2
    assert v.kernel("gemm_qk").executed_flops == 2 * 3 * 1000 * 1000 * D


# --------------------------------------------------------------------------------------------
# The cost model's bytes, by hand


def naive_no_reuse_kernels(n: int, heads: int = H, d: int = D, eb: int = EB) -> dict[str, int]:
    """Naive's no-reuse bytes per kernel: 128×128 output tiles re-read their input strips."""
    tiles, d_tiles = math.ceil(n / 128), math.ceil(d / 128)
    s = heads * n * n * eb
    m = heads * n * d * eb
    return {
        "gemm_qk": heads * 2 * tiles * n * d * eb + s,
        "softmax": 2 * s,
        "gemm_pv": heads * (d_tiles * n * n * eb + tiles * n * d * eb) + m,
    }


def naive_no_reuse(n: int) -> int:
    return sum(naive_no_reuse_kernels(n).values())


def fused_no_reuse(n: int, bm: int, bn: int, causal: bool = False, heads: int = H) -> int:
    """A fused kernel's tile loads: Q_i once, every visited K_j and V_j; O_i, m_i, l_i out."""
    total = 0
    for i in range(math.ceil(n / bm)):
        rows = min(bm, n - i * bm)
        last = min((i + 1) * bm, n) - 1
        kv = (last // bn + 1) if causal else math.ceil(n / bn)
        total += rows * D * EB + 2 * min(kv * bn, n) * D * EB + rows * D * EB + 2 * rows * 4
    return heads * total


def fused_executed_flops(n: int, bm: int, bn: int, causal: bool = False, heads: int = H) -> int:
    total = 0
    for i in range(math.ceil(n / bm)):
        rows = min(bm, n - i * bm)
        last = min((i + 1) * bm, n) - 1
        kv = (last // bn + 1) if causal else math.ceil(n / bn)
        total += 4 * rows * min(kv * bn, n) * D
    return heads * total


@pytest.mark.parametrize("n", [1000, 16384])
def test_naives_no_reuse_bytes_are_the_re_read_strips_of_its_128_tiles(n):
    cost = costmodel.algorithm_cost(AttentionConfig(seq_len=n, heads=H, head_dim=D), NAIVE)
    assert {k.name: k.hbm_bytes for k in cost.kernels} == naive_no_reuse_kernels(n)
    assert cost.kernel("gemm_qk").bytes_written == cost.kernel("softmax").bytes_written
    assert cost.kernel("gemm_pv").bytes_written == H * n * D * EB
    assert cost.peak_bytes == 4 * H * n * D * EB + 2 * H * n * n * EB
    assert cost.flops == 4 * H * n * n * D and cost.executed_flops == 4 * H * n * n * D
    assert cost.arithmetic_intensity == pytest.approx(4 * H * n * n * D / naive_no_reuse(n))


def test_a_row_longer_than_shared_memory_makes_the_softmax_read_s_twice():
    # 232,448 B opt-in: a row of n fp16 scores + 1 KiB fits up to n = 115,712
    fits = AttentionConfig(seq_len=115_712, heads=1, head_dim=D)
    assert costmodel.softmax_reads_s_once(fits)
    assert not costmodel.softmax_reads_s_once(fits.with_(seq_len=115_713))
    assert costmodel.softmax_reads_s_once(fits.with_(seq_len=1000), 2000 + 1024)
    assert not costmodel.softmax_reads_s_once(fits.with_(seq_len=1000), 2000 + 1023)
    small = AttentionConfig(seq_len=1000, heads=2, head_dim=D)
    twice = costmodel.naive_cost(small, smem_limit_bytes=1000)
    assert twice.kernel("softmax").bytes_read == 2 * 2 * 1000 * 1000 * EB


@pytest.mark.parametrize(
    ("n", "bm", "bn", "causal"),
    [(1000, 128, 128, False), (1000, 128, 128, True), (1000, 128, 64, True),
     (1000, 64, 128, True), (300, 128, 128, True)],
)  # fmt: skip
def test_a_fused_kernels_tile_loads_visit_every_key_tile_or_up_to_the_diagonal(n, bm, bn, causal):
    config = AttentionConfig(seq_len=n, heads=H, head_dim=D, causal=causal, block_m=bm,
                             block_n=bn)  # fmt: skip
    (k,) = costmodel.tiled_cost(config, TILED).kernels
    assert k.hbm_bytes == fused_no_reuse(n, bm, bn, causal)
    assert k.flops == fused_executed_flops(n, bm, bn, causal)
    assert k.bytes_written == H * (n * D * EB + 2 * n * 4)


def test_causal_key_tiles_stop_at_the_tile_holding_the_last_rows_diagonal():
    c = AttentionConfig(seq_len=1000, causal=True)
    # query rows 0..127 need keys 0..127: one 128-key tile, two 64-key tiles
    assert costmodel.kv_tiles_for_query_tile(c, 128, 128, 0) == 1
    assert costmodel.kv_tiles_for_query_tile(c, 128, 64, 0) == 2
    # the last, ragged query tile (rows 896..999) reaches key 999: tile 7 of 128
    assert costmodel.kv_tiles_for_query_tile(c, 128, 128, 7) == 8
    assert costmodel.kv_tiles_for_query_tile(c, 64, 128, 1) == 1  # rows 64..127
    assert costmodel.kv_tiles_for_query_tile(c.with_(causal=False), 128, 64, 0) == 16
    assert costmodel.tile_rows(1000, 128, 7) == 104 and costmodel.tile_rows(1000, 128, 6) == 128


def test_the_readable_kernel_takes_one_extra_exponential_per_row_and_key_tile():
    config = AttentionConfig(seq_len=256, heads=2, head_dim=D, block_m=64, block_n=64)
    readable = costmodel.tiled_cost(config, TILED).kernels[0].exps
    mma = costmodel.tiled_cost(config, TILED_MMA).kernels[0].exps
    assert mma == 2 * 256 * 256  # one per score
    assert readable == 2 * (256 * 256 + 256 * 4)  # plus one per row per 64-key tile


def test_the_compulsory_traffic_reads_each_input_once_and_writes_each_output_once():
    n = 1000
    config = AttentionConfig(seq_len=n, heads=H, head_dim=D)
    s, m = s_bytes(n), qkvo_bytes(n)
    naive = costmodel.compulsory_cost(config, NAIVE)
    assert {k.name: (k.bytes_read, k.bytes_written) for k in naive.kernels} == {
        "gemm_qk": (2 * m, s), "softmax": (s, s), "gemm_pv": (s + m, m),
    }  # fmt: skip
    (fused,) = costmodel.compulsory_cost(config, TILED_WGMMA).kernels
    assert (fused.bytes_read, fused.bytes_written) == (3 * m, m + stats(n))


def test_the_l2_aware_estimate_of_a_head_that_fits_one_wave_reads_k_and_v_once():
    # tiled_mma at N = 8192: 64 query tiles of 128 rows, 132 resident blocks: one cohort
    config = AttentionConfig(seq_len=8192, heads=H, head_dim=D)
    (k,) = costmodel.l2_aware_cost(config, TILED_MMA, H200).kernels
    assert k.bytes_read == 3 * qkvo_bytes(8192)


def test_the_l2_aware_estimate_past_one_wave_misses_by_the_working_set_over_half_the_l2():
    # tiled_mma at N = 131072 on the H200: 1024 query tiles of 128 rows, 132 resident blocks
    n, bm = 131072, 128
    config = AttentionConfig(seq_len=n, heads=H, head_dim=D)
    q_tiles, resident = n // bm, SMS
    cohorts = math.ceil(q_tiles / resident)  # 8
    heads = min(H, math.ceil(resident / q_tiles))  # 1
    head = n * D * EB
    ws = heads * 2 * head + resident * 2 * bm * D * EB
    usable = 60 * 2**20 * 0.5
    kv_once = 2 * qkvo_bytes(n)
    kv_no_reuse = H * q_tiles * 2 * n * D * EB
    across = min(1.0, (cohorts - 1) / (q_tiles - 1))
    hit = min(1.0, usable / ws)
    kv = kv_once + round((kv_no_reuse - kv_once) * across * (1.0 - hit))
    (k,) = costmodel.l2_aware_cost(config, TILED_MMA, H200).kernels
    assert 0 < hit < 1 and cohorts > 1
    assert k.bytes_read == qkvo_bytes(n) + kv
    assert k.bytes_written == qkvo_bytes(n) + stats(n)


@pytest.mark.parametrize("n", [16384, 131072])
def test_naives_l2_aware_gemm_reads_miss_by_the_operand_working_set(n):
    # (N / 128)² output tiles per head, 132 at a time: one head per wave; at N = 131072 the
    # head's two operands (33.6 MB) pass half the L2 (31.5 MB), and re-reads start to miss
    t = 128
    config = AttentionConfig(seq_len=n, heads=H, head_dim=D)
    tiles = (n // t) ** 2
    row_tiles = n // t
    cohorts = math.ceil(tiles / min(tiles, SMS))
    heads = min(H, math.ceil(SMS / tiles))
    usable = 60 * 2**20 * 0.5
    ws = heads * 2 * n * D * EB
    across = min(1.0, (cohorts - 1) / (row_tiles - 1))
    hit = min(1.0, usable / ws)
    m = qkvo_bytes(n)
    once, no_reuse = 2 * m, H * 2 * row_tiles * n * D * EB
    qk = once + round((no_reuse - once) * across * (1.0 - hit))
    assert (hit < 1) == (n == 131072)
    band = costmodel.traffic_band(config, NAIVE, H200)
    got = {k.name: k.bytes_read for k in band.l2_aware.kernels}
    assert got["gemm_qk"] == qk
    # the PV GEMM's P strips are read once however many tiles; its V re-reads as QKᵀ's
    v_no_reuse = H * row_tiles * n * D * EB
    assert got["gemm_pv"] == s_bytes(n) + m + round((v_no_reuse - m) * across * (1.0 - hit))
    if n == 16384:  # the softmax reads each row once at this N
        assert got["softmax"] == s_bytes(n)
    assert band.compulsory.hbm_bytes <= band.l2_aware.hbm_bytes <= band.no_reuse.hbm_bytes


def test_the_two_pass_softmax_rereads_hit_l2_by_the_resident_rows_share_of_it():
    n = 131072  # a row of 256 KiB: the two-pass softmax
    config = AttentionConfig(seq_len=n, heads=1, head_dim=D)
    band = costmodel.traffic_band(config, NAIVE, H200)
    s = n * n * EB
    ws = SMS * 2 * n * EB
    hit = min(1.0, 60 * 2**20 * 0.5 / ws)
    assert band.no_reuse.kernel("softmax").bytes_read == 2 * s
    assert band.l2_aware.kernel("softmax").bytes_read == s + round(s * 1.0 * (1.0 - hit))


def test_cached_reads_cover_every_edge_of_the_rule():
    assert kernel_cost.cached_reads(100, 100, 5, 5, 10, 5.0) == 100  # no re-reads
    assert kernel_cost.cached_reads(100, 80, 5, 5, 10, 5.0) == 80  # fewer than once: as read
    assert kernel_cost.cached_reads(100, 500, 1, 5, 10, 5.0) == 100  # one cohort
    assert kernel_cost.cached_reads(100, 500, 3, 1, 10, 5.0) == 100  # one unit
    assert kernel_cost.cached_reads(100, 500, 3, 5, 10, 5.0) == 100 + round(400 * 0.5 * 0.5)
    assert kernel_cost.cached_reads(100, 500, 9, 5, 0, 5.0) == 100  # no working set: all hit
    assert kernel_cost.cached_reads(100, 500, 2, 2, 20, 5.0) == 100 + 300
    assert kernel_cost.cached_reads(100, 500, 2, 2, 1, 0.0) == 500  # no L2: every re-read misses
    assert kernel_cost.cached_reads(100, 101, 2, 2, 20, 5.0) == 101  # one re-read, 3/4 missed


def test_the_readable_kernel_holds_two_blocks_per_sm_where_shared_memory_allows():
    from gpu.launch.flash_readable import smem_bytes

    config = AttentionConfig(seq_len=4096, head_dim=D, block_m=64, block_n=64)
    need = smem_bytes(config)
    expect = max(1, min(2, H200.smem_per_sm_bytes // need))
    assert costmodel.resident_blocks_per_sm(config, TILED, H200) == expect
    assert costmodel.resident_blocks_per_sm(config, TILED_MMA, H200) == 1
    assert costmodel.resident_blocks_per_sm(config.with_(head_dim=256), TILED, H200) == 1


def test_naives_wall_is_the_first_n_whose_peak_passes_the_budget():
    config = AttentionConfig(seq_len=1, heads=H, head_dim=D)

    def peak(n: int) -> int:
        return H * EB * (4 * n * D + 2 * n * n)

    budget = 141 * 10**9
    wall = costmodel.naive_oom_seq_len(config, budget)
    assert peak(wall) > budget >= peak(wall - 1)
    assert costmodel.naive_oom_seq_len(config, peak(1000)) == 1001
    assert costmodel.naive_oom_seq_len(config, peak(1000) - 1) == 1000


# --------------------------------------------------------------------------------------------
# The GPU table: each figure is its per-clock rate × SMs × clock, or bus width × data rate


@pytest.mark.parametrize(
    ("name", "tensor_per_clk", "fp32_per_clk", "sms", "clock"),
    [
        ("A100 SXM 40 GB", 2048, 128, 108, 1.41e9),
        ("A100 SXM 80 GB", 2048, 128, 108, 1.41e9),
        ("RTX 4090 24 GB", 512, 256, 128, 2.52e9),
        ("T4 16 GB", 1024, 128, 40, 1.59e9),
        ("RTX 3060 12 GB", 512, 256, 28, 1.777e9),
    ],
)
def test_a_datasheet_peak_is_its_per_clock_rate_times_sms_times_the_boost_clock(
    name, tensor_per_clk, fp32_per_clk, sms, clock
):
    g = GPUS[name]
    assert g.sms == sms and g.clock_hz == clock
    assert g.tensor_flops == pytest.approx(tensor_per_clk * sms * clock, rel=0.01)
    assert g.fp32_peak_flops == pytest.approx(fp32_per_clk * sms * clock, rel=0.01)
    assert g.xu_ops_s == pytest.approx(16 * sms * clock)


@pytest.mark.parametrize(
    ("name", "bus_bits", "gbps"),
    [
        ("H200 SXM 141 GB", 6144, 6.25),
        ("H100 SXM 80 GB", 5120, 5.234),
        ("A100 SXM 40 GB", 5120, 2.43),
        ("A100 SXM 80 GB", 5120, 3.186),
        ("RTX 4090 24 GB", 384, 21),
        ("RTX 3060 12 GB", 192, 15),
        ("T4 16 GB", 256, 10),
    ],
)
def test_a_memory_bandwidth_is_its_bus_width_times_its_data_rate(name, bus_bits, gbps):
    assert GPUS[name].bandwidth_bytes_s == pytest.approx(bus_bits * gbps * 1e9 / 8, rel=0.002)


def test_the_hopper_parts_rates_are_the_whitepapers_per_sm_figures():
    for name in ("H200 SXM 141 GB", "H100 SXM 80 GB"):
        g = GPUS[name]
        assert g.sms == 132 and g.clock_hz == 1.98e9 and not g.clock_measured
        assert g.tensor_flops == pytest.approx(4 * 512 * 2 * 132 * 1.98e9)
        assert g.mma_sync_flops == pytest.approx(2 / 3 * 4096 * 132 * 1.98e9)
        assert g.fp32_peak_flops == pytest.approx(128 * 2 * 132 * 1.98e9)
        assert g.smem_per_sm_bytes == 228 * 1024
        # the datasheet's dense fp16 figure is the same rate at its own 1.83 GHz
        assert g.fp16_tensor_flops == pytest.approx(4096 * 132 * 1.83e9, rel=0.001)
        assert g.fp32_flops == pytest.approx(256 * 132 * 1.98e9, rel=0.01)
    assert GPUS["H200 SXM 141 GB"].memory_bytes == 141 * 10**9
    # shared memory per SM, from each architecture's tuning guide
    assert [GPUS[n].smem_per_sm_bytes for n in (
        "A100 SXM 40 GB", "A100 SXM 80 GB", "RTX 4090 24 GB", "RTX 3060 12 GB", "T4 16 GB"
    )] == [164 * 1024, 164 * 1024, 100 * 1024, 100 * 1024, 64 * 1024]  # fmt: skip
    assert [GPUS[n].l2_bytes for n in ("RTX 4090 24 GB", "RTX 3060 12 GB", "T4 16 GB")] == [
        72 * 2**20, 3 * 2**20, 4 * 2**20
    ]  # fmt: skip
    assert GPUS["A100 SXM 80 GB"].l2_bytes == 40 * 2**20
    assert GPUS["H200 SXM 141 GB"].l2_bytes == 60 * 2**20
    assert GPUS["H100 SXM 80 GB"].l2_bytes == 50 * 2**20
    assert GPUS["A100 SXM 40 GB"].l2_bytes == 40 * 2**20
    assert [GPUS[n].memory_bytes for n in ("RTX 4090 24 GB", "T4 16 GB", "RTX 3060 12 GB")] == [
        24 * 10**9, 16 * 10**9, 12 * 10**9
    ]  # fmt: skip


def test_a_specs_derived_figures():
    g = GPUS["A100 SXM 80 GB"]
    assert g.top_flops == 312e12
    assert g.ridge_flops_per_byte == pytest.approx(312e12 / 2.039e12)
    assert g.memory_gb == 80 and g.memory_label == "80 GB" and g.label == "A100 SXM, 80 GB"
    assert g.compute_peaks == {"tensor": 312e12, "fp32": 19.5e12}
    assert g.kernel_seconds(2.039e12, 0) == pytest.approx(1.0)
    assert g.kernel_seconds(0, 624e12) == pytest.approx(2.0)
    cost = costmodel.algorithm_cost(AttentionConfig(seq_len=4096, heads=H, head_dim=D), NAIVE)
    assert cost.modeled_seconds(g) == pytest.approx(
        sum(max(k.hbm_bytes / 2.039e12, k.flops / 312e12) for k in cost.kernels)
    )
    assert costmodel.with_clock(g, 0, "x") is g and costmodel.with_clock(g, -1.0, "x") is g
    faster = costmodel.with_clock(g, 1.5e9, "measured")
    assert faster.clock_hz == 1.5e9 and faster.clock_measured
    assert costmodel.with_measured_l2(g, None, "x") is g
    assert costmodel.with_measured_l2(g, 9e12, "x", True).l2_nominal


@pytest.mark.parametrize(
    ("device", "name"),
    [("NVIDIA H200", "H200 SXM 141 GB"), ("NVIDIA H100 80GB HBM3", "H100 SXM 80 GB"),
     ("NVIDIA A100-SXM4-80GB", "A100 SXM 80 GB"), ("NVIDIA A100-SXM4-40GB", "A100 SXM 40 GB"),
     ("NVIDIA A100 PCIe", "A100 SXM 40 GB"), ("Tesla T4", "T4 16 GB")],
)  # fmt: skip
def test_a_device_name_finds_its_table_entry(device, name):
    assert costmodel.gpu_for_device_name(device).name == name


def test_an_unknown_device_name_finds_none():
    assert costmodel.gpu_for_device_name("Radeon") is None


# --------------------------------------------------------------------------------------------
# The current point: each figure's value, unit and source


def recorded_point(algos=(NAIVE, TILED_MMA, TILED_WS)):
    from app.state.current_point import current_point

    results = results_at()
    gpu = roofline.device_gpu(loaded().device, loaded().results)
    return current_point(results[NAIVE].config, algos, gpu, results, None, 150_109_880_320)


def test_naives_figures_at_16384_are_its_counters_its_pool_peak_and_its_median_times():
    point = recorded_point()
    f = point.algorithm(NAIVE)
    r = raw_at()[NAIVE]
    dram = sum(h["dram"] for h in naive_hand().values())
    useful = 4 * H * N * N * D
    assert (f.dram_bytes.value, f.dram_bytes.unit, f.dram_bytes.source) == (dram, "B", "measured")
    assert "dram__bytes_read.sum + dram__bytes_write.sum" in f.dram_bytes.detail
    l2 = sum(t["l2_bytes"] for t in r["traffic"])
    assert (f.l2_bytes.value, f.l2_bytes.source) == (l2, "measured")
    assert f.l2_bytes.detail == "lts__t_bytes.sum (CUPTI)"
    assert (f.peak_bytes.value, f.peak_bytes.source) == (r["peak_bytes"], "measured")
    ms = sum(k["ms"] for k in r["kernel_times"])
    assert f.measured_ms.value == pytest.approx(ms) and f.measured_ms.source == "measured"
    assert f.achieved.value == pytest.approx(useful / (ms * 1e-3))
    assert f.achieved.unit == "FLOP/s" and f.achieved.source == "measured"
    assert f.intensity.value == pytest.approx(useful / dram) and f.intensity.source == "measured"
    assert f.l2_intensity.value == pytest.approx(useful / l2)
    assert f.l2_intensity.source == "measured"
    assert f.useful_flops.value == useful and f.useful_flops.source == "model"
    assert f.tile_loads.value == naive_no_reuse(N) and f.tile_loads.source == "model"
    compulsory = 2 * qkvo_bytes(N) + s_bytes(N) + 2 * s_bytes(N) + s_bytes(N) + 2 * qkvo_bytes(N)
    assert f.compulsory_bytes.value == compulsory
    assert f.roofline_ms.source == "model" and f.roofline_ms.value == f.verdict.roofline_ms
    assert f.roofline_ms.detail.endswith("hbm binds")
    assert f.lane_ms is f.measured_ms  # a GPU's lane plays the measured time
    assert f.label == "naive"


def test_a_tied_fused_kernels_roofline_figure_names_the_tie():
    f = recorded_point().algorithm(TILED_WS)
    # the exponential unit's time is 0.9 % longer (rescale exponentials): named first
    assert f.roofline_ms.detail.endswith("xu=tensor tie")
    d = f.to_dict()
    assert d["bound"] == "compute" and d["ties"] == ["xu", "tensor"] and d["roof"] == "xu"
    assert d["figures"]["dram_bytes"]["value"] == f.dram_bytes.value
    assert set(d["figures"]) == {
        "peak_bytes", "dram_bytes", "l2_bytes", "tile_loads", "compulsory_bytes",
        "useful_flops", "roofline_ms", "measured_ms", "intensity", "l2_intensity", "achieved",
        "lane_ms",
    }  # fmt: skip


def test_the_points_ratios_clock_memory_and_roofs_say_their_sources():
    point = recorded_point()
    naive = sum(h["dram"] for h in naive_hand().values())
    (t,) = raw_at()[TILED_WS]["traffic"]
    ratio = point.dram_ratios["naive/tiled_ws"]
    assert ratio.value == pytest.approx(naive / counted(t, qkvo_bytes(N) + stats(N)))
    assert ratio.source == "measured" and ratio.unit == "×"
    assert point.clock.value == pytest.approx(hand_clock()) and point.clock.source == "measured"
    assert point.clock.unit == "Hz"
    # the capacity every wall is drawn at: the datasheet's, what the device reports beside it
    assert point.memory.value == 141 * 10**9 and point.memory.source == "datasheet"
    assert point.memory.detail.startswith("H200 SXM 141 GB capacity: NVIDIA H200 datasheet")
    assert point.memory.detail.endswith("; the device reports 150 GB, not used")
    assert point.roofs["l2"].source == "nominal" and point.roofs["hbm"].source == "datasheet"
    # the rate per clock from the whitepaper, at the clock the counters measured
    assert point.roofs["tensor"].source == "measured"
    assert "at the measured clock" in point.roofs["tensor"].detail
    assert point.roofs["tensor"].value == pytest.approx(4096 * SMS * hand_clock())
    assert point.roofs["tensor"].detail.startswith("tensor cores (wgmma)")
    d = point.to_dict()
    assert d["device"] == "H200 SXM, 141 GB" and d["memory"]["value"] == 141 * 10**9
    assert d["dram_ratios"]["naive/tiled_ws"]["value"] == ratio.value
    assert set(d["algorithms"]) == {NAIVE, TILED_MMA, TILED_WS}


def test_without_results_every_figure_is_the_models_and_the_ratio_the_l2_aware_one():
    from app.state.current_point import current_point

    config = AttentionConfig(seq_len=4096, heads=H, head_dim=D)
    point = current_point(config, (NAIVE, TILED_MMA), H200)
    f = point.algorithm(NAIVE)
    band = costmodel.traffic_band(config, NAIVE, H200)
    assert f.dram_bytes.source == "model" and f.dram_bytes.value == band.l2_aware.hbm_bytes
    assert f.dram_bytes.detail == "cost model, L2-aware estimate"
    assert f.l2_bytes.source == "model" and f.l2_bytes.value == naive_no_reuse(4096)
    assert f.peak_bytes.value == 4 * qkvo_bytes(4096) + 2 * s_bytes(4096)
    assert f.peak_bytes.source == "model"
    assert f.measured_ms is None and f.achieved is None and f.lane_ms is f.roofline_ms
    assert f.intensity.source == "model" and f.l2_intensity.source == "model"
    mma_band = costmodel.traffic_band(config, TILED_MMA, H200)
    ratio = point.dram_ratios["naive/tiled_mma"]
    assert ratio.source == "model" and ratio.detail == "L2-aware DRAM bytes"
    assert ratio.value == pytest.approx(band.l2_aware.hbm_bytes / mma_band.l2_aware.hbm_bytes)
    # the boost clock is a ceiling, and so are the compute roofs quoted at it: the wgmma roof
    # at 1.98 GHz is 8 % above the datasheet's 989.5 TFLOP/s, and never called the datasheet's
    assert point.clock.source == "nominal" and point.clock.value == 1.98e9
    tensor = point.roofs["tensor"]
    assert tensor.source == "nominal" and tensor.value == pytest.approx(4096 * SMS * 1.98e9)
    assert "the datasheet's dense fp16 989.5 TFLOP/s is this rate at 1.83 GHz" in tensor.detail
    assert {point.roofs[r].source for r in ("mma_sync", "fp32", "xu")} == {"nominal"}
    assert point.roofs["hbm"].source == "datasheet" and point.roofs["l2"].source == "nominal"
    assert point.memory.value == 141 * 10**9 and point.memory.source == "datasheet"


def test_a_causal_points_achieved_rate_and_intensity_count_the_useful_flops_not_the_executed():
    """Under a causal mask the kernels execute more than the useful 4·B·h·N²·d ÷ 2 (naive all of
    S, the fused kernels the diagonal tiles in full): TFLOP/s and FLOP per byte count the
    useful ones, worked out here from the raw recording."""
    from app.state.current_point import current_point

    results = {
        r.algorithm: r
        for r in loaded().results
        if r.config.seq_len == N and r.config.causal and r.config.head_dim == D
    }
    config = results[NAIVE].config
    gpu = roofline.device_gpu(loaded().device, loaded().results)
    point = current_point(config, (NAIVE, TILED_MMA, TILED_WS), gpu, results)
    useful = 4 * H * N * N * D // 2
    raw_causal = raw_at(N, causal=True)
    due = {
        NAIVE: {"gemm_qk": s_bytes(N), "softmax": s_bytes(N), "gemm_pv": qkvo_bytes(N)},
        TILED_MMA: {"flash_fwd": qkvo_bytes(N) + stats(N)},
        TILED_WS: {"flash_fwd": qkvo_bytes(N) + stats(N)},
    }
    for a in (NAIVE, TILED_MMA, TILED_WS):
        r = raw_causal[a]
        seconds = sum(k["ms"] for k in r["kernel_times"]) * 1e-3
        dram = sum(counted(t, due[a].get(t["name"], 0)) for t in r["traffic"])
        f = point.algorithm(a)
        assert f.verdict.executed_flops > useful * 1.001  # the mask's extra work is there
        assert f.useful_flops.value == useful
        assert f.achieved.value == pytest.approx(useful / seconds, rel=1e-9)
        assert f.intensity.value == pytest.approx(useful / dram, rel=1e-9)
        assert f.intensity.source == "measured"


def test_a_fused_kernel_measured_where_naive_could_not_run_is_set_against_naives_model():
    from app.state.current_point import current_point

    results = {
        r.algorithm: r
        for r in loaded().results
        if r.config.seq_len == 131072 and not r.config.causal and r.config.head_dim == D
    }
    config = results[TILED_WS].config
    gpu = roofline.device_gpu(loaded().device)
    point = current_point(config, (NAIVE, TILED_WS), gpu, {TILED_WS: results[TILED_WS]})
    ratio = point.dram_ratios["naive/tiled_ws"]
    naive = costmodel.traffic_band(config, NAIVE, gpu).l2_aware.hbm_bytes
    (t,) = raw_at(131072)[TILED_WS]["traffic"]
    fused = counted(t, qkvo_bytes(131072) + stats(131072))
    assert ratio.source == "model" and ratio.value == pytest.approx(naive / fused)
    assert "over the counters' fused bytes" in ratio.detail


def test_a_cpu_points_roofs_memory_and_lane_say_what_measured_them():
    from app.state.current_point import current_point

    details = {
        "cores": 2,
        "simd_lanes_fp32": 8,
        "simd": "AVX2",
        "fma_pipes": 2,
        "clock_hz": 2.5e9,
        "clock_source": "test",
        "memory_bandwidth_bytes_s": 1e10,
    }
    cpu = roofline.device_gpu(DeviceInfo("cpu", "CPU: t", 8 * 10**9, 4 * 10**9, details))
    config = AttentionConfig(seq_len=256, heads=2, head_dim=D)
    cost = costmodel.algorithm_cost(config, NAIVE)
    result = RunResult(
        config=config, algorithm=NAIVE, backend="cpu", device="CPU: t",
        kernel_times=tuple(KernelTime(k.name, 2.0) for k in cost.kernels), peak_bytes=12345,
        model_peak_bytes=cost.peak_bytes, hbm_bytes=cost.hbm_bytes, flops=cost.flops,
    )  # fmt: skip
    point = current_point(config, (NAIVE,), cpu, {NAIVE: result})
    assert point.roofs["dram"].source == "measured" and point.roofs["fp32"].source == "model"
    assert point.clock.source == "datasheet"  # a CPU's clock is what its kernel reports
    f = point.algorithm(NAIVE)
    assert f.peak_bytes.value == 12345 and f.peak_bytes.source == "measured"
    assert f.measured_ms.value == pytest.approx(6.0)
    assert f.lane_ms is f.roofline_ms  # a CPU's time says nothing of a GPU's tiles
    assert f.achieved.value == pytest.approx(4 * 2 * 256 * 256 * D / 6e-3)


def test_a_figure_prints_each_unit_its_own_way():
    from app.state.current_point import Figure

    def text(v, u):
        return Figure(v, u, "model", "x").value_text()

    assert text(4.8e12, "B/s") == "4.80 TB/s" and text(3.51e12, "exp/s") == "3.51 Texp/s"
    assert text(1.0705e15, "FLOP/s") == "1.07 PFLOP/s"  # was "1.07e+03 TFLOP/s"
    assert text(8066.4, "FLOP/B") == "8\u2009066 FLOP/B" and text(63.51, "FLOP/B") == "63.5 FLOP/B"
    assert text(9.99, "×") == "10.0×" and text(10, "×") == "10×" and text(1531.2, "×") == "1,531×"
    assert text(1.98e9, "Hz") == "1.980 GHz"
    assert text(8.2e11, "FLOP") == Figure(8.2e11, "FLOP", "m", "").value_text() != "—"
    assert Figure(1.0, "ms", "measured", "d").to_dict() == {
        "value": 1.0, "unit": "ms", "source": "measured", "detail": "d"
    }  # fmt: skip


def test_the_point_memo_starts_afresh_when_full():
    from app.state import current_point as cp

    config = AttentionConfig(seq_len=512, heads=1, head_dim=D)
    cp._memo.clear()
    first = cp.current_point(config, (NAIVE,), H200)
    assert len(cp._memo) == 1 and cp.current_point(config, (NAIVE,), H200) is first
    for n in range(1, cp.MAX_POINTS):
        cp._memo[("filler", n)] = first
    assert len(cp._memo) == cp.MAX_POINTS
    cp.current_point(config.with_(seq_len=640), (NAIVE,), H200)
    assert len(cp._memo) == 1  # cleared, then this one kept
    assert cp.shown_algorithms((TILED_WS, TILED_MMA)) == [NAIVE, TILED_MMA, TILED_WS]
    assert cp.shown_algorithms((NAIVE, "sdpa_flash")) == [NAIVE, "sdpa_flash"]


# --------------------------------------------------------------------------------------------
# The training figures: one layer's saved bytes and peak, L layers', the wall, the recompute

TRAINING = ROOT / "resources" / "recorded" / "h200_training.json"


def training_results(n: int) -> dict[str, RunResult]:
    return {
        r.algorithm: r
        for r in load_recording(TRAINING).results
        if r.config.seq_len == n and r.config.head_dim == D and not r.config.causal
    }


def test_a_recorded_steps_peak_is_measured_and_l_layers_are_the_models_stack():
    from app.state.training_figures import training_figures

    n, layers = 8192, 32
    raw_steps = {
        r["algorithm"]: r
        for r in json.loads(TRAINING.read_text())["results"]
        if r["config"]["seq_len"] == n and r["config"]["head_dim"] == D
    }
    results = training_results(n)
    config = results[NAIVE].config
    assert config.pass_ == "step"
    t = training_figures(config, layers, 141 * 10**9, results)
    m, s, rows = qkvo_bytes(n), s_bytes(n), H * n
    saved = {NAIVE: 4 * m + s, TILED: 4 * m + 2 * rows * 4}
    working = {NAIVE: 4 * m + 2 * s, TILED: 4 * m + 2 * rows * 4 + rows * D * 4}
    for a, measured_by in ((NAIVE, NAIVE), (TILED, TILED_MMA)):
        f = t.algorithm(a)
        assert (f.saved_per_layer.value, f.saved_per_layer.source) == (saved[a], "model")
        assert f.saved_total.value == layers * saved[a]
        assert f.layers_peak.value == layers * saved[a] + working[a]
        assert f.step_peak.source == "measured"
        assert f.step_peak.value == raw_steps[measured_by]["peak_bytes"]
        assert measured_by in f.step_peak.detail
    assert t.algorithm(NAIVE).recompute_flops.value == 0
    assert t.algorithm(TILED).recompute_flops.value == 2 * H * n * n * D
    assert t.backward_useful_flops.value == 8 * H * n * n * D
    # one measured layer against the model's: the stack's first layer is the model's figure
    assert t.algorithm(NAIVE).step_peak.value == saved[NAIVE] + working[NAIVE]

    def naive_peak(k: int) -> int:
        return layers * (4 * H * k * D * 2 + H * k * k * 2) + 4 * H * k * D * 2 + 2 * H * k * k * 2

    wall = t.algorithm(NAIVE).wall_seq_len.value
    assert naive_peak(wall) > 141 * 10**9 >= naive_peak(wall - 1)
    assert t.to_dict()["algorithms"]["naive"]["wall_seq_len"]["value"] == wall


def test_without_a_measured_step_the_one_layer_peak_is_the_models():
    from app.state.training_figures import training_figures

    config = AttentionConfig(seq_len=2048, heads=H, head_dim=D, pass_="step")
    t = training_figures(config, 1)
    f = t.algorithm(NAIVE)
    assert f.step_peak.source == "model" and f.wall_seq_len is None
    assert f.step_peak.value == f.layers_peak.value
    fused = training_figures(config, 2, 10**15).algorithm(TILED).wall_seq_len
    assert fused.value is None and "at every N" in fused.detail


def test_a_training_steps_cost_is_the_forwards_kernels_then_the_backwards():
    step = AttentionConfig(seq_len=1024, heads=H, head_dim=D, pass_="step")
    naive = costmodel.algorithm_cost(step, NAIVE)
    assert [k.name for k in naive.kernels] == [
        "gemm_qk", "softmax", "gemm_pv",
        "bwd_dV_gemm", "bwd_dP_gemm", "softmax_bwd", "bwd_dQ_gemm", "bwd_dK_gemm",
    ]  # fmt: skip
    fused = costmodel.algorithm_cost(step, TILED_MMA)
    assert [k.name for k in fused.kernels] == [
        "flash_fwd",
        "flash_bwd_preprocess",
        "flash_bwd",
        "flash_bwd_dq_convert",
    ]
    for bad in ("ring", "sdpa_flash"):
        with pytest.raises(KeyError):
            costmodel.algorithm_cost(step, bad)
    forward = 4 * H * 1024 * 1024 * D
    assert costmodel.pass_useful_flops(step) == 3 * forward
    assert costmodel.pass_useful_flops(step.with_(pass_="backward")) == 2 * forward
    assert costmodel.pass_useful_flops(step.with_(pass_="forward")) == forward
    assert costmodel.pass_useful_flops(step.with_(causal=True)) == 3 * forward // 2


def test_a_point_is_judged_at_its_devices_clock_never_at_one_of_its_own():
    """One clock per recording: a profiled point's own kernels do not move the roofs (the app
    replaying the recording and `explain --open` quote them at the recording's median)."""
    results = results_at()
    config = results[NAIVE].config
    e = roofline.explain(config, (NAIVE, TILED_WS), H200, results)
    assert not e.gpu.clock_measured and e.gpu.clock_hz == 1.98e9
    recording = roofline.device_gpu(loaded().device, loaded().results)
    e = roofline.explain(config, (NAIVE, TILED_WS), recording, results)
    assert e.gpu.clock_measured and e.gpu.clock_hz == pytest.approx(hand_clock(), rel=1e-12)
    this_n = statistics.median(
        t["elapsed_cycles"] / (t["window_ns"] * 1e-9) for r in raw_at().values()
        for t in r.get("traffic", ())
    )  # fmt: skip
    assert abs(this_n - hand_clock()) > 1e5  # this N's own median is another clock


def test_a_tile_agnostic_result_of_other_tiles_is_judged_at_the_shown_config():
    from dataclasses import replace

    from app.state.current_point import point_for

    r = results_at()[TILED_MMA]
    shown = r.config.with_(block_m=128, block_n=32)  # the readable kernel's tiles changed
    point = point_for(shown, (TILED_MMA,), H200, {TILED_MMA: r})
    f = point.algorithm(TILED_MMA)
    assert f.dram_bytes.source == "measured" and f.measured_ms.value == r.total_ms
    assert point.config == shown
    # the readable kernel's own result holds only at its own tiles
    readable = results_at()[TILED]
    p2 = point_for(shown, (TILED,), H200, {TILED: readable})
    assert p2.algorithm(TILED).measured_ms is None
    same = point_for(r.config, (TILED_MMA,), H200, {TILED_MMA: replace(r)})
    assert same.algorithm(TILED_MMA).dram_bytes.source == "measured"
