"""`main.py bench --algo ring --devices P` and `main.py model --devices P`: the simulated ring on
the CPU with --check and --out, and one-line refusals (exit 2) for what cannot run."""

from __future__ import annotations

import json
import time

import pytest

import main
from gpu.algorithms import RING
from gpu.files.recording import load_recording
from gpu.ring import backend as ring_backend


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_bench_runs_the_simulated_ring_checks_it_and_records_it(capsys, tmp_path):
    out = tmp_path / "ring.json"
    code, stdout, stderr = run(
        capsys, "bench", "--backend", "cpu", "--algo", "ring", "--devices", "3", "--seq",
        "100,96", "--heads", "2", "--head-dim", "16", "--causal", "--check", "--repeats", "1",
        "--out", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    assert "3 simulated devices" in stdout and "zigzag" in stdout
    recording = load_recording(out)
    assert [r.config.seq_len for r in recording.results] == [100, 96]
    for r in recording.results:
        assert r.algorithm == RING and r.ring is not None and r.ring.devices == 3
        assert r.agrees


def test_devices_alone_means_the_ring(capsys):
    code, stdout, stderr = run(
        capsys, "bench", "--backend", "cpu", "--devices", "2", "--seq", "64", "--heads", "1",
        "--repeats", "1",
    )  # fmt: skip
    assert code == 0, stderr
    assert " ring " in stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--algo", "ring"], "needs --devices"),
        (["--algo", "tiled,ring", "--devices", "2"], "alone"),
        (["--devices", "0"], "devices = 0"),
        (["--devices", "2000"], "1 to 1024"),
        (["--devices", "2", "--budget", "1GB"], "--budget"),
    ],
)
def test_ring_flags_that_cannot_run_give_one_line_and_exit_2(capsys, args, message):
    code, stdout, stderr = run(capsys, "bench", "--backend", "cpu", "--seq", "64", *args)
    assert code == 2 and stdout == ""
    assert stderr.count("\n") == 1 and message in stderr


def test_cuda_ring_needs_a_gpu_per_device(capsys, monkeypatch):
    monkeypatch.setattr(ring_backend, "cuda_device_count", lambda: 1)
    code, _, stderr = run(capsys, "bench", "--backend", "cuda", "--devices", "2", "--seq", "64")
    assert code == 2 and "this machine has 1" in stderr and "cpu backend simulates" in stderr


def test_cuda_ring_refuses_n_that_does_not_split_before_measuring(capsys, monkeypatch):
    monkeypatch.setattr(ring_backend, "cuda_device_count", lambda: 8)
    code, stdout, stderr = run(
        capsys, "bench", "--backend", "cuda", "--devices", "3", "--causal", "--seq", "1002,1000"
    )
    assert code == 2 and stdout == ""
    assert "seq_len = 1000 is not divisible by 2·P = 6" in stderr


def test_model_adds_the_ring_prediction_for_p_devices(capsys):
    code, stdout, _ = run(capsys, "model", "--seq", "1048576", "--devices", "8", "--json")
    assert code == 0
    ring = json.loads(stdout)["ring"]
    assert ring["devices"] == 8 and ring["hidden"] is True
    assert 7 < ring["speedup"] <= 8 and ring["link"].startswith("NVLink 4")
    code, stdout, _ = run(capsys, "model", "--seq", "1048576", "--devices", "8")
    assert code == 0 and "ring on 8 GPUs" in stdout


def test_the_cpu_ring_on_1024_devices_is_refused_with_its_estimate_within_2_s(capsys):
    t0 = time.perf_counter()
    code, out, err = run(
        capsys, "bench", "--backend", "cpu", "--algo", "ring", "--devices", "1024", "--seq", "1024",
        "--heads", "1",
    )  # fmt: skip
    assert time.perf_counter() - t0 < 2.0
    assert code == 2 and not out
    assert "by the estimate" in err and "--time-limit" in err and err.count("\n") == 1


def test_a_long_cpu_ring_says_its_estimate_before_it_starts(capsys, monkeypatch):
    from gpu.ring import sim as ring_sim

    monkeypatch.setattr(ring_sim, "PAIR_OVERHEAD_S", 1.0)  # every pair a second: 16 s at P = 4
    code, out, _ = run(
        capsys, "bench", "--backend", "cpu", "--algo", "ring", "--devices", "4", "--seq", "64",
        "--heads", "1", "--repeats", "1", "--warmup", "0", "--time-limit", "100",
    )  # fmt: skip
    assert code == 0
    assert out.splitlines()[0].startswith("# about ") and "by the estimate" in out.splitlines()[0]


def test_the_estimate_of_the_simulated_ring_grows_as_its_block_pairs():
    from gpu.config import AttentionConfig
    from gpu.ring.sim import estimate_seconds

    cfg = AttentionConfig(seq_len=1024, heads=1)
    small, large = estimate_seconds(cfg, 32), estimate_seconds(cfg, 1024)
    assert large / small > 0.5 * (1024 / 32) ** 2
    assert estimate_seconds(cfg, 64, runs=7) > estimate_seconds(cfg, 64, runs=1)
