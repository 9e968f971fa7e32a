"""Every figure the roofline shows is the right formula of the recorded counters: tensor-pipe
shares of the pipes' real peak, roofs per instruction family at a sourced clock, ties said as
ties, the L2 roof named for what it is, and bytes called measured only when they were.

The figures come from the H200 sweep shipped in resources/recorded/ (no GPU needed)."""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
from pathlib import Path

import pytest

import main
from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA
from gpu.config import AttentionConfig
from gpu.files.recording import load_recording
from gpu.model import cpu_roofs, roofline
from gpu.model.costmodel import DEFAULT_GPU, GPUS, algorithm_cost
from gpu.results import DeviceInfo, KernelTime, KernelTraffic, RunResult, TrafficStrip

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "resources" / "recorded" / "h200_sweep.json"
N = 16384
H200 = GPUS[DEFAULT_GPU]


@functools.cache
def sweep():
    return load_recording(SWEEP)


def at(n: int, causal: bool = False) -> dict[str, RunResult]:
    return {
        r.algorithm: r
        for r in sweep().results
        if r.config.seq_len == n and r.config.causal == causal and r.config.head_dim == 64
    }


def explained(n: int = N, causal: bool = False, algos=None) -> roofline.Explanation:
    results = at(n, causal)
    config = next(iter(results.values())).config
    algos = algos or [a for a in (NAIVE, TILED, TILED_MMA, TILED_WGMMA, "tiled_ws") if a in results]
    gpu = roofline.device_gpu(sweep().device, sweep().results)  # the recording's one clock
    return roofline.explain(config, algos, gpu, results)


def explain_json(n: int = N) -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main.main(["explain", "--open", str(SWEEP), "--seq", str(n), "--json"]) == 0
    return json.loads(out.getvalue())


# --------------------------------------------------------------------------------------------
# Tensor-pipe share


def test_tensor_shares_are_at_most_one_for_every_recorded_kernel():
    data = explain_json()
    shares = [
        k["tensor_active"]
        for a in data["algorithms"].values()
        for k in a["kernels"]
        if k["tensor_active"] is not None
    ]
    assert shares and all(0 <= s <= 1.0 for s in shares)


def test_cublas_gemm_tensor_share_matches_its_tflops_over_the_wgmma_roof():
    e = explained()
    naive = e.algorithm(NAIVE)
    peak = e.roofs[roofline.TENSOR].peak
    for name in ("gemm_qk", "gemm_pv"):
        k = naive.kernel(name)
        achieved = k.executed_flops / (k.measured_ms * 1e-3)
        assert k.tensor_active == pytest.approx(achieved / peak, rel=0.10)
        assert k.tensor_active == pytest.approx(achieved / peak, rel=0.02)  # it is exact here


def test_the_tensor_share_divides_by_four_pipes_per_sm():
    t = KernelTraffic("k", 0, 0, 0, tensor_active_cycles=4 * 132 * 1000, elapsed_cycles=1000,
                      window_ns=1000)  # fmt: skip
    # 1 µs at 1 GHz, every pipe of every SM busy for its 1000 cycles: a share of exactly one
    assert roofline.tensor_share(t, 1e-3, 132) == pytest.approx(1.0)


def test_the_strip_stores_busy_pipe_cycles_per_sm_cycle_and_shows_their_share():
    strip = TrafficStrip((1.0, 2.0), (10.0, 20.0), (2.0, 4.0))
    assert strip.tensor_share == (0.5, 1.0)


def test_the_strip_is_trimmed_to_the_kernel_not_the_sampled_window():
    idle = [0.1, 0.2, 0.0, 0.3]
    strip = TrafficStrip(
        tuple(float(10 + 20 * i) for i in range(9)),
        (*idle, 40.0, *idle),
        (0.0,) * 4 + (0.02,) + (0.0,) * 4,
    )
    part = strip.kernel_part()
    assert part.t_us == (90.0,) and part.dram_gbs == (40.0,)


def test_the_recorded_short_kernel_spans_one_interval_on_the_strip_axis():
    from app.measure.strip_chart import strip_series

    gemm = at(256)[NAIVE]
    *_, spans = strip_series(gemm)
    # three kernels of ~6 µs each, one 20 µs sample each: not three 700 µs windows
    assert spans[-1][2] < 100


# --------------------------------------------------------------------------------------------
# Roofs per instruction family, at a sourced clock


def test_the_recording_measures_the_clock_and_the_roofs_are_quoted_at_it():
    e = explained()
    clocks = [t.elapsed_cycles / t.window_ns for r in sweep().results for t in r.traffic]
    assert e.gpu.clock_measured and "gr__cycles_elapsed" in e.gpu.clock_source
    assert e.gpu.clock_hz == pytest.approx(statistics.median(clocks) * 1e9)
    assert 1.6e9 < e.gpu.clock_hz < 1.7e9
    assert e.roofs[roofline.TENSOR].peak == pytest.approx(4096 * 132 * e.gpu.clock_hz)
    assert e.roofs[roofline.XU].peak == pytest.approx(16 * 132 * e.gpu.clock_hz)
    assert "measured clock" in e.roofs[roofline.TENSOR].source


def test_without_counters_the_roofs_use_the_boost_clock_with_its_source():
    e = roofline.explain(AttentionConfig(seq_len=N), (TILED_WGMMA,), H200)
    assert e.gpu.clock_hz == 1.98e9 and not e.gpu.clock_measured
    assert "boost clock 1.98 GHz" in e.roofs[roofline.TENSOR].source


def test_mma_sync_kernels_are_judged_on_their_own_measured_rate():
    e = explained()
    mma = e.algorithm(TILED_MMA).kernels[0]
    assert mma.unit == roofline.MMA and mma.roof == roofline.MMA
    # the counters' FLOPs per busy pipe cycle of the mma.sync kernel is the roof's rate
    traffic = at(N)[TILED_MMA].traffic[0]
    per_cycle = mma.executed_flops / traffic.tensor_active_cycles
    assert 4 * per_cycle == pytest.approx(H200.mma_sync_flops_per_clock_per_sm, rel=0.01)
    assert e.roofs[roofline.MMA].peak < e.roofs[roofline.TENSOR].peak
    assert e.algorithm(TILED_WGMMA).kernels[0].unit == roofline.TENSOR


def test_the_d64_fused_kernels_are_a_tie_of_tensor_cores_and_exponentials():
    e = explained()
    for a in (TILED_WGMMA, "tiled_ws"):
        v = e.algorithm(a)
        assert v.tie and set(v.ties) == {roofline.TENSOR, roofline.XU}
        shares = v.roof_share
        assert set(shares) >= {roofline.TENSOR, roofline.XU, roofline.HBM, roofline.L2}
        assert all(0 < s < 1 for s in shares.values())
    data = explain_json()["algorithms"]["tiled_ws"]
    assert data["tie"] and set(data["ties"]) == {"tensor", "xu"}
    assert data["roof_share"]["tensor"] == pytest.approx(
        data["kernels"][0]["roof_ms"]["tensor"] / data["measured_ms"]
    )


def test_two_roofs_further_apart_than_five_percent_are_no_tie():
    assert roofline.ties({"a": 1.0, "b": 0.96}, "a") == ("a", "b")
    assert roofline.ties({"a": 1.0, "b": 0.94}, "a") == ("a",)


def test_the_counters_l2_peak_is_labelled_nominal_and_read_against_l2_intensity():
    e = explained()
    l2 = e.roofs[roofline.L2]
    assert l2.nominal and "nominal" in l2.label and "best streaming read 8.71" in l2.source
    k = e.algorithm(NAIVE).kernel("gemm_qk")
    assert k.roof_ms[roofline.L2] == pytest.approx(k.l2_bytes / l2.peak * 1e3)
    assert e.algorithm(NAIVE).l2_intensity == pytest.approx(
        e.algorithm(NAIVE).flops / e.algorithm(NAIVE).l2_bytes
    )


def test_measured_exponentials_are_xu_warp_instructions_times_32_lanes():
    e = explained()
    for a in (TILED_MMA, TILED_WGMMA):
        k = e.algorithm(a).kernels[0]
        model = algorithm_cost(k_config := e.config, a).kernel("flash_fwd").exps
        assert k.exps == at(N)[a].traffic[0].xu_warp_instructions * 32
        assert k.exps == pytest.approx(model, rel=0.02), k_config


# --------------------------------------------------------------------------------------------
# Sources


def _one_kernel_measured() -> RunResult:
    config = AttentionConfig(seq_len=4096)
    cost = algorithm_cost(config, NAIVE)
    return RunResult(
        config=config, algorithm=NAIVE, backend="cuda", device="NVIDIA H200",
        kernel_times=tuple(KernelTime(k.name, 1.0) for k in cost.kernels),
        model_peak_bytes=cost.peak_bytes, hbm_bytes=cost.hbm_bytes, flops=cost.flops,
        traffic=(KernelTraffic("softmax", 10**8, 10**8, 3 * 10**8),),
    )  # fmt: skip


def test_bytes_are_measured_only_when_every_kernel_of_the_algorithm_was_measured():
    r = _one_kernel_measured()
    v = roofline.algorithm_verdict(r.config, NAIVE, H200, r)
    assert v.kernel("softmax").bytes_source == roofline.MEASURED
    assert v.kernel("gemm_qk").bytes_source == roofline.MODEL
    assert v.bytes_source == roofline.MODEL


def test_every_roof_says_where_its_peak_comes_from():
    for roof in explained().roofs.values():
        assert roof.source and roof.unit


# --------------------------------------------------------------------------------------------
# The CPU's own roofs

CPUINFO = "processor\t: 0\ncpu MHz\t\t: 2445.404\nflags\t\t: fpu sse2 avx fma avx2\n"


def test_a_cpu_roof_is_cores_times_simd_lanes_times_fma_times_clock():
    f = cpu_roofs.features(CPUINFO, max_freq_khz="3000000")
    assert f.simd_lanes_fp32 == 8 and f.fma_pipes == 2 and f.clock_hz == 3e9
    assert f.fp32_flops == f.cores * 8 * 2 * 2 * 3e9
    assert "cpufreq" in f.clock_source
    assert cpu_roofs.features(CPUINFO, max_freq_khz="").clock_hz == pytest.approx(2445.404e6)


def test_the_cpu_backend_is_judged_on_this_cpus_roofs():
    details = {
        "cores": 2, "simd_lanes_fp32": 8, "simd": "AVX2", "fma_pipes": 2, "clock_hz": 2.5e9,
        "clock_source": "test", "memory_bandwidth_bytes_s": 1e10,
    }  # fmt: skip
    device = DeviceInfo("cpu", "CPU: test (2 cores)", 8 * 10**9, 4 * 10**9, details)
    cpu = roofline.device_gpu(device)
    roofs = roofline.roofs(cpu)
    assert set(roofs) == {roofline.DRAM, "fp32"}
    assert roofs["fp32"].peak == 2 * 8 * 2 * 2 * 2.5e9 and roofs[roofline.DRAM].peak == 1e10
    copy = f"{cpu_roofs.COPY_BYTES >> 20} MiB"
    assert "measured" in roofs[roofline.DRAM].source and copy in roofs[roofline.DRAM].source
    e = roofline.explain(AttentionConfig(seq_len=1024), (NAIVE, TILED), cpu)
    gemm = e.algorithm(NAIVE).kernel("gemm_qk")
    assert gemm.unit == "fp32" and set(gemm.roof_ms) <= {roofline.DRAM, roofline.L2, "fp32"}
    assert cpu.ridge_flops_per_byte == pytest.approx(roofs["fp32"].peak / 1e10)


def test_the_cpu_roofs_sources_say_measured_bandwidth_and_derived_flops():
    from app.state.current_point import current_point

    details = {
        "cores": 2, "simd_lanes_fp32": 8, "simd": "AVX2", "fma_pipes": 2, "clock_hz": 2.5e9,
        "clock_source": "test", "memory_bandwidth_bytes_s": 1e10,
    }  # fmt: skip
    cpu = roofline.device_gpu(DeviceInfo("cpu", "CPU: test", 8 * 10**9, 4 * 10**9, details))
    point = current_point(AttentionConfig(seq_len=512), (NAIVE, TILED), cpu)
    assert point.roofs[roofline.DRAM].source == "measured"
    assert point.roofs["fp32"].source == "model" and "2 cores" in point.roofs["fp32"].detail


def test_causal_softmax_takes_two_exponentials_per_visible_score():
    config = AttentionConfig(seq_len=1000, heads=3, causal=True)
    softmax = algorithm_cost(config, NAIVE).kernel("softmax")
    assert softmax.exps == 2 * 3 * 1000 * 1001 // 2
    assert algorithm_cost(config.with_(causal=False), NAIVE).kernel("softmax").exps == 2 * 3 * 10**6


def test_the_cpu_bandwidth_is_measured_once_per_process():
    from gpu.backends import cpu_machine

    first = cpu_machine.memory_bandwidth()
    assert cpu_machine.memory_bandwidth() is first and first > 1e8


# --------------------------------------------------------------------------------------------
# Units


def test_one_unit_system_decimal_gb_for_the_same_device():
    e = explained()
    assert "GiB" not in e.gpu.label and e.gpu.label.endswith("141 GB")
    assert dataclasses.replace(H200).memory_label == "141 GB"


# --------------------------------------------------------------------------------------------
# What the views say of these figures


def _recorded_inputs(algos=(NAIVE, TILED_MMA, "tiled_ws")):
    from app.state.point_inputs import PointInputs

    results = at(N)
    config = results[NAIVE].config
    gpu = roofline.device_gpu(sweep().device, results.values())
    return PointInputs(
        config, algos, gpu, gpu.label, 150_109_880_320, "this H200",
        tuple((a, results[a]) for a in algos),
    )  # fmt: skip


def _plain(html: str) -> str:
    import re

    return re.sub(r"<[^>]+>", "", html)


def test_the_explain_pane_gives_the_roofline_over_the_measured_time_as_its_speed():
    from app.measure.explain import explain_html

    text = _plain(explain_html(_recorded_inputs()))
    v = explained().algorithm("tiled_ws")
    assert v.roofline_ms < v.measured_ms  # the roofline is a lower bound on the time
    assert f"({v.roofline_ms / v.measured_ms:.0%} of the roofline's speed)" in text


def test_the_explain_pane_calls_the_d64_tie_a_tie_and_says_each_roofs_share():
    from app.measure.explain import explain_html

    text = _plain(explain_html(_recorded_inputs()))
    ws = next(line for line in text.splitlines() if "(warp-specialized): compute" in line)
    assert "a tie of" in ws and "tensor cores" in ws and "exponential unit" in ws
    assert "the exponential unit binds" not in ws
    share = explained().algorithm("tiled_ws").roof_share
    assert f"exponential unit {share['xu']:.0%}" in ws and f"HBM {share['hbm']:.0%}" in ws


def test_the_strip_chart_draws_the_tensor_share_in_percent(qtbot):
    from app.kit.theme import DARK
    from app.measure.strip_chart import TrafficStripChart

    chart = TrafficStripChart()
    qtbot.addWidget(chart)
    chart.apply_palette(DARK)
    result = at(N)[NAIVE]
    chart.show_point(N, {NAIVE: result})
    _, ys = chart.active.getData()
    top = max(y for y in ys if y == y)
    gemm = explained().algorithm(NAIVE).kernel("gemm_pv")
    # the busiest sample of the GEMMs, in percent of the pipes' peak: above their mean share
    assert gemm.tensor_active * 100 * 0.9 < top <= 100


# --------------------------------------------------------------------------------------------
# Compulsory writes, the model against the counters, and the current point


def test_measured_bytes_count_the_compulsory_writes_still_in_l2():
    e = explained(4096)
    ws = e.algorithm("tiled_ws")
    traffic = at(4096)["tiled_ws"].traffic[0]
    assert traffic.dram_write_bytes < 1000  # O was still in L2 when the window closed
    compulsory = algorithm_cost(e.config, "tiled_ws").bytes_written
    assert ws.bytes == traffic.dram_read_bytes + compulsory
    assert ws.kernels[0].deferred_write_bytes == compulsory - traffic.dram_write_bytes
    for a in (TILED_MMA, TILED_WGMMA, "tiled_ws"):
        v = explained(N).algorithm(a)
        assert v.bytes >= v.model_bytes["compulsory"]


def test_the_plots_measured_dram_dots_never_sit_below_the_compulsory_edge():
    from gpu.model.costmodel import compulsory_cost

    for r in sweep().results:
        if r.traffic and r.algorithm in (NAIVE, TILED, TILED_MMA, TILED_WGMMA, "tiled_ws"):
            floor = compulsory_cost(r.config, r.algorithm).hbm_bytes
            assert roofline.counted_dram_bytes(r) >= floor * 0.97, (r.algorithm, r.config)


def test_at_131072_the_ratio_uses_the_measured_fused_bytes_and_the_model_is_checked():
    e = explained(131072)
    ws = e.algorithm("tiled_ws")
    r = e.naive_ratios["naive/tiled_ws"]
    assert r["measured"] is None  # naive does not fit: never measured
    assert r["model_over_measured"] == pytest.approx(e.algorithm(NAIVE).bytes / ws.bytes)
    assert r["model_over_measured"] < r["model_l2_aware"] / 2  # the model's 1,531× overstates
    assert ws.model_over_measured == pytest.approx(ws.model_bytes["l2_aware"] / ws.bytes)
    assert ws.model_over_measured < 0.5


def test_every_figure_of_the_current_point_has_a_unit_and_a_source():
    data = explain_json()["figures"]
    assert data["clock"]["source"] == "measured" and data["clock"]["unit"] == "Hz"
    assert data["memory"]["value"] == 141 * 10**9 and data["memory"]["source"] == "datasheet"
    seen = 0
    for a in data["algorithms"].values():
        for f in a["figures"].values():
            if f is None:
                continue
            seen += 1
            assert f["unit"] and f["source"] in ("measured", "model", "datasheet", "nominal")
            assert f["detail"]
    for f in data["roofs"].values():
        assert f["source"] in ("measured", "model", "datasheet", "nominal") and f["detail"]
    assert data["roofs"]["l2"]["source"] == "nominal"
    assert seen > 50


def test_the_current_point_is_worked_out_once_per_config_and_results():
    from app.state.current_point import current_point

    results = at(N)
    config = results[NAIVE].config
    gpu = roofline.device_gpu(sweep().device, results.values())
    one = current_point(config, (NAIVE, TILED_MMA), gpu, results)
    assert current_point(config, (NAIVE, TILED_MMA), gpu, dict(results)) is one
    fig = one.algorithm(TILED_MMA)
    assert fig.dram_bytes.source == "measured" and fig.tile_loads.source == "model"
    assert fig.tile_loads.value > 10 * fig.dram_bytes.value  # tile loads are not DRAM bytes
    assert fig.lane_ms.value == pytest.approx(results[TILED_MMA].total_ms)


def test_a_modeled_tiles_lane_plays_the_measurements_roofline_time():
    from app.state.animation.player import Player
    from app.state.model.cache import verdict

    config = AttentionConfig(seq_len=N)
    lane = Player(config, algorithms=(TILED_MMA,)).lane(TILED_MMA)
    v = verdict(config, TILED_MMA, H200)
    assert lane.total_time == pytest.approx(v.roofline_ms * 1e-3, rel=1e-9)
    # not the tile loads at HBM speed
    tile_loads = algorithm_cost(config, TILED_MMA).hbm_bytes / H200.bandwidth_bytes_s
    assert lane.total_time < tile_loads * 0.9


def test_a_replayed_recording_judges_on_the_clock_its_counters_measured():
    from app.state.recorded_run import RecordedBackend

    info = RecordedBackend(sweep(), str(SWEEP)).device_info()
    gpu = roofline.device_gpu(info)
    assert gpu.clock_measured and gpu.clock_hz == explained().gpu.clock_hz  # one clock
    assert roofline.roofs(gpu)[roofline.TENSOR].peak < H200.tensor_flops  # 1.66, not 1.98 GHz


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [100, 4096])
def test_the_closed_form_compulsory_writes_equal_the_cost_models(n, causal):
    from gpu.model.costmodel import compulsory_cost

    config = AttentionConfig(seq_len=n, heads=3, causal=causal)
    for a in (NAIVE, TILED, TILED_MMA, TILED_WGMMA, "tiled_ws"):
        model = {k.name: k.bytes_written for k in compulsory_cost(config, a).kernels}
        assert roofline.compulsory_writes(config, a) == model


def test_the_roof_labels_say_each_peak_at_the_measured_clock():
    labels = {n: r.label for n, r in explained().roofs.items()}
    assert labels[roofline.TENSOR] == "tensor cores (wgmma) 898 TFLOP/s"
    assert labels[roofline.MMA] == "tensor cores (mma.sync) 599 TFLOP/s"
    assert labels["fp32"] == "fp32 CUDA cores 56.2 TFLOP/s"  # 256 × 132 × 1.6618 GHz
    assert labels[roofline.XU] == "exponential unit 3.51 Texp/s"
    assert labels[roofline.HBM] == "HBM 4.80 TB/s" and labels[roofline.L2] == "L2 15.4 TB/s nominal"


def test_a_figure_prints_its_value_in_its_unit_and_says_its_source():
    from app.state.current_point import Figure

    assert Figure(92_254_208, "B", "measured", "x").text() == "92.3 MB (measured)"
    assert Figure(0.92692, "ms", "model", "x").text() == "927 µs (model)"
    assert Figure(280.9, "×", "measured", "x").value_text() == "281×"
    assert Figure(2.7, "×", "model", "x").value_text() == "2.7×"
    assert Figure(0.605, "share", "measured", "x").value_text() == "60%"
    assert Figure(1.6608e9, "Hz", "measured", "x").value_text() == "1.661 GHz"
    assert Figure(8.98e14, "FLOP/s", "datasheet", "x").value_text() == "898 TFLOP/s"
    assert Figure(None, "B", "model", "x").value_text() == "—"


def test_table_peaks_without_a_per_clock_rate_are_their_datasheets_rate_at_its_clock():
    """The RTX 3060's is derived: 512 dense fp16 FLOP/clk/SM × 28 SMs × 1.777 GHz."""
    rtx = GPUS["RTX 3060 12 GB"]
    assert rtx.tensor_flops == pytest.approx(512 * 28 * 1.777e9, rel=0.01)
    assert rtx.fp32_peak_flops == pytest.approx(256 * 28 * 1.777e9, rel=0.01)
