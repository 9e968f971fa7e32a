"""Results carry their timing spread, device-level peak and measured traffic, round-trip through
JSON, and results written before those fields existed still load."""

from __future__ import annotations

import json

import pytest

from gpu.config import AttentionConfig
from gpu.files.recording import Recording, RecordingError, load_recording, save_recording
from gpu.results import DeviceInfo, KernelTime, KernelTraffic, RunResult, TrafficStrip

CONFIG = AttentionConfig(seq_len=4096)


def profiled() -> RunResult:
    strip = TrafficStrip((10.0, 30.0, 50.0), (35.0, 40.5, 12.0), (0.41, 0.44, 0.1))
    return RunResult(
        config=CONFIG,
        algorithm="tiled_mma",
        backend="cuda",
        device="NVIDIA H200",
        kernel_times=(KernelTime.from_samples("flash_fwd", [0.171, 0.169, 0.175, 0.170, 0.172]),),
        peak_bytes=25_600_000,
        model_peak_bytes=25_559_040,
        hbm_bytes=415_563_776,
        flops=51_539_607_552,
        repeats=5,
        device_peak_bytes=27_262_976,
        device_used_bytes=1_073_741_824,
        remeasured=1,
        traffic=(
            KernelTraffic(
                name="flash_fwd",
                dram_read_bytes=18_900_000,
                dram_write_bytes=0,
                l2_bytes=416_000_000,
                tensor_active_cycles=9_000_000,
                xu_warp_instructions=196_608,
                elapsed_cycles=660_000,
                window_ns=333_000,
                sample_interval_ns=20_000,
                launches=3,
                strip=strip,
            ),
        ),
    )


def test_a_kernel_time_keeps_median_min_max_and_count():
    k = KernelTime.from_samples("softmax", [0.24, 0.23, 0.90, 0.235, 0.238])
    assert (k.ms, k.min_ms, k.max_ms, k.count) == (0.238, 0.23, 0.90, 5)
    assert k.spread == pytest.approx(0.90 / 0.238)
    assert KernelTime("softmax", 0.2).spread is None
    with pytest.raises(ValueError):
        KernelTime.from_samples("softmax", [])


def test_a_profiled_result_round_trips_through_json():
    r = profiled()
    back = RunResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r
    assert back.traffic[0].strip.dram_gbs == (35.0, 40.5, 12.0)


def test_measured_and_model_bandwidth_are_named_apart():
    r = profiled()
    ms = r.total_ms
    assert r.measured_dram_bytes == 18_900_000
    assert r.measured_bandwidth_gbs == pytest.approx(18_900_000 / (ms * 1e-3) / 1e9)
    assert r.model_bandwidth_gbs == pytest.approx(415_563_776 / (ms * 1e-3) / 1e9)
    assert r.bandwidth_gbs == r.model_bandwidth_gbs  # the older name, same model figure
    unmeasured = RunResult(CONFIG, "naive", "cuda", "x", (KernelTime("softmax", 1.0),))
    assert unmeasured.measured_bandwidth_gbs is None and unmeasured.measured_dram_bytes is None


#: A result as the H200 sweep recorded it before traffic, timing spread and device peaks.
RESULT_BEFORE_TRAFFIC = """{"config": {"seq_len": 256, "heads": 12, "head_dim": 64, "batch": 1,
"dtype": "fp16", "causal": false, "block_m": 64, "block_n": 64}, "algorithm": "naive",
"backend": "cuda", "device": "NVIDIA H200", "kernel_times": [{"name": "gemm_qk",
"ms": 0.03920000046491623}, {"name": "softmax", "ms": 0.02236800082027912}, {"name": "gemm_pv",
"ms": 0.03782400116324425}], "peak_bytes": 4718592, "model_peak_bytes": 4718592,
"hbm_bytes": 9043968, "flops": 201326592, "max_abs_error": 0.001168370246887207, "oom": false,
"message": "", "repeats": 5, "recorded": false, "total_ms": 0.0993920024484396,
"tflops": 2.025581405349387}"""


def test_results_written_before_the_new_fields_still_load():
    old = json.loads(RESULT_BEFORE_TRAFFIC)
    assert "traffic" not in old and "min_ms" not in old["kernel_times"][0]
    r = RunResult.from_dict(old)
    assert r.traffic == () and r.device_peak_bytes is None and r.remeasured == 0
    assert r.kernel_times[0].min_ms is None and r.kernel_times[0].count == 0
    assert r.measured_bandwidth_gbs is None and r.model_bandwidth_gbs > 0


def test_a_recording_with_traffic_saves_and_loads(tmp_path):
    device = DeviceInfo("cuda", "NVIDIA H200", 150_109_880_320, 149_557_477_376,
                        {"l2_read_bandwidth_bytes_s": 9.1e12})  # fmt: skip
    path = tmp_path / "profiled.json"
    save_recording(Recording(device, (profiled(),), {"command": "test"}), path)
    loaded = load_recording(path)
    assert loaded.results == (profiled(),)
    assert loaded.device.details["l2_read_bandwidth_bytes_s"] == 9.1e12


def test_a_strip_whose_series_differ_in_length_is_refused(tmp_path):
    data = profiled().to_dict()
    data["traffic"][0]["strip"]["t_us"] = [1.0]
    with pytest.raises(ValueError, match="differ in length"):
        RunResult.from_dict(data)
    device = DeviceInfo("cuda", "NVIDIA H200", 1, 1)
    path = tmp_path / "bad.json"
    good = Recording(device, (profiled(),), {}).to_dict()
    good["results"][0] = data
    good_text = json.dumps(good)
    path.write_text(good_text)
    with pytest.raises(RecordingError, match=r"traffic\[0\]\.strip.*differ in length"):
        load_recording(path)
