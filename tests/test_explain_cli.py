"""`main.py explain`: per algorithm flops, bytes, bytes_source, intensity, bound, roof,
roofline_ms and measured_ms, measured where a recording has counters; and `bench --profile`
says once, on a machine that cannot sample, that the figures stay the model's."""

from __future__ import annotations

import json

import pytest

import main
from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA
from gpu.config import AttentionConfig
from gpu.files.recording import Recording, save_recording
from gpu.model.costmodel import algorithm_cost, compulsory_cost
from gpu.results import DeviceInfo, KernelTime, KernelTraffic, RunResult, TrafficStrip

CONTRACT = ("flops", "bytes", "bytes_source", "intensity", "bound", "roof", "roofline_ms",
            "measured_ms")  # fmt: skip
N = 16384

#: DRAM bytes read and written per kernel at N = 16384 (12 heads, d = 64, fp16) as Nsight
#: Compute measured them on the H200 (docs/TRACES.md); L2 bytes: the no-reuse model's tile
#: traffic. A stand-in for the re-recorded sweep, which the counters will fill.
MEASURED = {
    NAIVE: {
        "gemm_qk": (145_200_000, 6_416_000_000, 1.989),
        "softmax": (6_442_600_000, 6_416_400_000, 4.498),
        "gemm_pv": (6_483_500_000, 19_300_000, 1.705),
    },
    TILED: {"flash_fwd": (76_300_000, 18_800_000, 54.332)},
    TILED_MMA: {"flash_fwd": (75_600_000, 16_900_000, 2.627)},
    TILED_WGMMA: {"flash_fwd": (75_600_000, 16_900_000, 2.05)},
}


def measured_result(config: AttentionConfig, algorithm: str) -> RunResult:
    cost = algorithm_cost(config, algorithm)
    kernels = MEASURED[algorithm]
    traffic = tuple(
        KernelTraffic(
            name=name,
            dram_read_bytes=read,
            dram_write_bytes=write,
            l2_bytes=cost.kernel(name).hbm_bytes,
            tensor_active_cycles=0,
            xu_warp_instructions=0,
            elapsed_cycles=int(ms * 1.98e6),
            window_ns=int(ms * 1e6) + 80_000,
            sample_interval_ns=20_000,
            launches=3,
            strip=TrafficStrip((10.0, 30.0), (100.0, 50.0), (0.5, 0.6)),
        )
        for name, (read, write, ms) in kernels.items()
    )
    return RunResult(
        config=config,
        algorithm=algorithm,
        backend="cuda",
        device="NVIDIA H200",
        kernel_times=tuple(
            KernelTime(n, ms, ms, ms * 1.01, 5) for n, (_, _, ms) in kernels.items()
        ),
        peak_bytes=cost.peak_bytes,
        model_peak_bytes=cost.peak_bytes,
        hbm_bytes=cost.hbm_bytes,
        flops=cost.flops,
        repeats=5,
        traffic=traffic,
    )


@pytest.fixture
def recording(tmp_path):
    config = AttentionConfig(seq_len=N)
    results = [measured_result(config, a) for a in MEASURED]
    results.append(measured_result(config.with_(seq_len=4096), TILED_MMA))  # another N
    peer = RunResult(config=config, algorithm="sdpa_flash", backend="cuda", device="NVIDIA H200",
                     kernel_times=(KernelTime("sdpa", 2.7),), flops=results[0].flops)  # fmt: skip
    device = DeviceInfo("cuda", "NVIDIA H200", 150_109_880_320, 149_557_477_376,
                        {"sm_count": 132, "smem_per_block_optin_bytes": 232_448})  # fmt: skip
    path = tmp_path / "sweep.json"
    save_recording(Recording(device, (*results, peer), {"command": "test"}), path)
    return path


def explain_json(capsys, *args: str) -> dict:
    assert main.main(["explain", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_explain_on_a_measured_recording_meets_the_contract(recording, capsys):
    data = explain_json(capsys, "--open", str(recording), "--seq", str(N))
    algos = data["algorithms"]
    assert set(algos) == set(MEASURED)  # the peer is not one of ours
    for row in algos.values():
        for key in CONTRACT:
            assert key in row
        assert row["bytes_source"] == "measured"
        assert row["measured_ms"] > 0
    for fused in (TILED_MMA, TILED_WGMMA):
        assert algos[fused]["bound"] == "compute", algos[fused]
        assert algos[fused]["intensity"] > 1000
        compulsory = compulsory_cost(AttentionConfig(seq_len=N), fused).hbm_bytes
        assert algos[fused]["bytes"] <= 2 * compulsory
    softmax = next(k for k in algos[NAIVE]["kernels"] if k["name"] == "softmax")
    assert softmax["bound"] == "memory" and softmax["roof"] == "hbm"
    ratio = data["naive_dram_ratios"][f"naive/{TILED_MMA}"]
    assert ratio["measured"] > 200 and ratio["model_no_reuse"] < 10


def test_explain_without_a_recording_is_the_model(capsys):
    data = explain_json(capsys, "--seq", "4096", "--algo", "naive,tiled_mma")
    assert set(data["algorithms"]) == {NAIVE, TILED_MMA}
    for row in data["algorithms"].values():
        assert row["bytes_source"] == "model" and row["measured_ms"] is None
    assert data["algorithms"][NAIVE]["bound"] == "memory"


def test_explain_takes_the_shape_flags(capsys):
    data = explain_json(capsys, "--seq", "2048", "--heads", "16", "--head-dim", "128",
                        "--batch", "2", "--dtype", "bf16", "--causal")  # fmt: skip
    assert (
        data["config"]
        == AttentionConfig(
            seq_len=2048, heads=16, head_dim=128, batch=2, dtype="bf16", causal=True
        ).to_dict()
    )
    row = data["algorithms"][TILED_MMA]
    assert row["executed_flops"] > row["flops"]  # causal: diagonal tiles in full


def test_explain_prints_a_readable_table_by_default(recording, capsys):
    assert main.main(["explain", "--open", str(recording), "--seq", str(N)]) == 0
    out = capsys.readouterr().out
    assert "H200" in out and "measured" in out and "softmax" in out and "compute" in out
    assert "DRAM bytes naive/tiled_mma: measured" in out


def test_explain_prints_times_evenly_from_microseconds_to_minutes(capsys):
    # A million tokens: naive's model moves hundreds of terabytes and runs for over a minute.
    assert main.main(["explain", "--seq", "1048576", "--heads", "32", "--algo", "naive"]) == 0
    naive = capsys.readouterr().out.splitlines()[4].split()
    assert naive[:3] == ["naive", "441", "TB"] and naive[-1] == "91,882"  # ms, no exponent
    assert main.main(["explain", "--seq", "256", "--algo", "tiled_mma"]) == 0
    tiny = capsys.readouterr().out.splitlines()[4].split()[-1]
    assert "e" not in tiny and len(tiny.replace("0.", "").lstrip("0")) == 4  # 4 significant


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--seq", "1000", "--open", "RECORDING"], "no result for"),
        (["--seq", "4096", "--open", "MISSING"], "cannot read"),
        (["--seq", "0"], "seq_len"),
        (["--seq", "4096", "--algo", "magic"], "magic"),
        (["--seq", "4096", "--gpu", "H900"], "H900"),
    ],
)
def test_explain_refuses_bad_input_in_one_line(recording, tmp_path, capsys, args, says):
    args = [
        str(recording) if a == "RECORDING" else str(tmp_path / "nope.json") if a == "MISSING" else a
        for a in args
    ]
    assert main.main(["explain", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


def test_bench_profile_on_the_cpu_says_once_that_traffic_stays_modeled(capsys):
    code = main.main(["bench", "--backend", "cpu", "--seq", "64,128", "--algo", "naive",
                      "--heads", "1", "--repeats", "1", "--profile"])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert out.count("--profile") == 1 and "needs the cuda backend" in out


def test_explain_json_gives_the_training_figures_each_with_its_source(capsys):
    """The recorded H200 step at N = 8192: one layer's peak is the memory pool's (measured, as
    recorded), L layers' stack the model's."""
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "resources" / "recorded" / "h200_training.json"
    raw = json.loads(path.read_text())
    peak = next(
        r["peak_bytes"]
        for r in raw["results"]
        if r["algorithm"] == NAIVE and r["config"]["seq_len"] == 8192
    )
    data = explain_json(capsys, "--open", str(path), "--seq", "8192", "--pass", "step",
                        "--layers", "4")  # fmt: skip
    t = data["figures"]["training"]
    # the H200's capacity by the one rule (GpuSpec.memory_bytes), not the 150.1 GB it reports
    assert t["layers"] == 4 and t["budget_bytes"] == 141 * 10**9
    assert raw["device"]["memory_total_bytes"] == 150_109_880_320
    naive = t["algorithms"]["naive"]
    assert naive["step_peak"] == {**naive["step_peak"], "value": peak, "source": "measured"}
    h, n, d = 12, 8192, 64
    saved = 4 * h * n * d * 2 + h * n * n * 2
    assert naive["saved_per_layer"]["value"] == saved and naive["saved_total"]["value"] == 4 * saved
    assert naive["layers_peak"]["source"] == "model" and naive["wall_seq_len"]["unit"] == "tokens"
    assert t["algorithms"]["tiled"]["recompute_flops"]["value"] == 2 * h * n * n * d
