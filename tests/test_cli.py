"""The command-line contract of DESIGN.md: model --json keys, bench --check, --out, exit codes."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

import main
from gpu.recording import load_recording

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "main.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_model_json_has_the_contract_keys_and_the_lessons_numbers():
    proc = run_cli("model", "--seq", "4096", "--heads", "12", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for key in (
        "attn_matrix_bytes",
        "naive_peak_bytes",
        "tiled_peak_bytes",
        "naive_hbm_bytes",
        "tiled_hbm_bytes",
        "flops",
    ):
        assert key in data
    assert data["attn_matrix_bytes"] == 402_653_184


@pytest.mark.parametrize(
    "args",
    [
        ["model"],
        ["model", "--seq", "0"],
        ["model", "--seq", "abc"],
        ["model", "--seq", "128", "--dtype", "fp8"],
        ["model", "--seq", "128", "--head-dim", "1000"],
        ["bench", "--seq", "1,x"],
        ["bench", "--algo", "magic"],
        ["bench", "--backend", "tpu"],
        ["bench", "--out", "results.txt"],
        ["--no-such-flag"],
    ],
)
def test_bad_flags_give_one_line_and_exit_2(args, capsys):
    assert main.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tilescope: error:")
    assert "\n" not in err and "Traceback" not in err


def test_bench_check_passes_and_writes_json(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench",
        "--backend",
        "cpu",
        "--seq",
        "64,100",
        "--heads",
        "2",
        "--head-dim",
        "16",
        "--repeats",
        "1",
        "--check",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    rec = load_recording(out)
    assert [(r.config.seq_len, r.algorithm) for r in rec.results] == [
        (64, "naive"),
        (64, "tiled"),
        (100, "naive"),
        (100, "tiled"),
    ]
    assert all(r.agrees for r in rec.results)


def test_bench_check_fails_when_an_algorithm_disagrees(monkeypatch, tmp_path, capsys):
    import gpu.cpu_backend as cpu

    real = cpu._tiled_kernels

    def broken(config, q, k, v, **kw):
        out, spent = real(config, q, k, v, **kw)
        return out * 1.5, spent

    monkeypatch.setattr(cpu, "_tiled_kernels", broken)
    code = main.main(
        [
            "bench",
            "--backend",
            "cpu",
            "--seq",
            "32",
            "--heads",
            "1",
            "--head-dim",
            "8",
            "--repeats",
            "1",
            "--check",
        ]
    )
    assert code == 1
    assert "check failed: tiled" in capsys.readouterr().err


def test_bench_csv_has_units_in_the_header_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "r.csv"
    args = [
        "bench",
        "--backend",
        "cpu",
        "--seq",
        "32",
        "--heads",
        "1",
        "--head-dim",
        "8",
        "--repeats",
        "1",
        "--algo",
        "naive",
        "--out",
        str(out),
    ]
    assert run_cli(*args).returncode == 0
    rows = list(csv.reader(out.open()))
    assert "total_ms [ms]" in rows[0] and "peak_bytes [B]" in rows[0]
    assert rows[1][rows[0].index("algorithm")] == "naive"
    before = out.read_bytes()
    second = run_cli(*args)
    assert second.returncode == 2 and "--force" in second.stderr
    assert out.read_bytes() == before
    assert run_cli(*args, "--force").returncode == 0


def test_cuda_backend_without_a_gpu_is_a_clear_error(monkeypatch, capsys):
    import gpu.backends as backends_module

    monkeypatch.setattr(backends_module, "cuda_available", lambda: False)
    assert main.main(["bench", "--backend", "cuda", "--seq", "64"]) == 2
    assert "cuda backend unavailable" in capsys.readouterr().err
