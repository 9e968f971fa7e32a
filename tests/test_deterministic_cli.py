"""`--deterministic` on bench, model and explain: the dQ pass timed, recorded and modeled in
place of the atomics, and refused with the forward pass, which has no dQ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu.files.recording import load_recording
from gpu.model.backward_cost import DETERMINISTIC_BACKWARD_KERNELS
from tests.cli_process import run_cli

ROOT = Path(__file__).resolve().parents[1]
SHAPE = ("--heads", "2", "--head-dim", "32")


def test_bench_deterministic_times_the_dq_pass_and_the_recording_says_so(tmp_path):
    out = tmp_path / "det.json"
    proc = run_cli(
        "bench", "--backend", "cpu", "--seq", "128", *SHAPE, "--pass", "step", "--deterministic",
        "--check", "--repeats", "1", "--warmup", "0", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "# deterministic dQ" in proc.stdout
    tiled = next(line for line in proc.stdout.splitlines() if " tiled " in line)
    assert "flash_bwd_dq=" in tiled and "flash_bwd_dq_convert" not in tiled
    results = load_recording(out).results
    assert all(r.config.deterministic and r.agrees for r in results)
    assert json.loads(out.read_text())["results"][0]["config"]["deterministic"] is True
    # The recording answers for the deterministic step only, never for the atomic one.
    flags = ("explain", "--seq", "128", *SHAPE, "--pass", "step", "--open", str(out))
    atomic = run_cli(*flags)
    assert atomic.returncode == 2 and "no result for" in atomic.stderr
    det = run_cli(*flags, "--deterministic", "--algo", "tiled", "--json")
    assert det.returncode == 0, det.stderr
    kernels = json.loads(det.stdout)["algorithms"]["tiled"]["kernels"]
    assert [k["name"] for k in kernels] == ["flash_fwd", *DETERMINISTIC_BACKWARD_KERNELS]
    assert all(k["measured_ms"] is not None for k in kernels)


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "--backend", "cpu", "--seq", "64", "--deterministic"],
        ["bench", "--backend", "cpu", "--seq", "64", "--pass", "forward", "--deterministic"],
        ["model", "--seq", "512", "--deterministic"],
        ["explain", "--seq", "512", "--deterministic"],
    ],
)
def test_deterministic_with_the_forward_pass_is_a_one_line_usage_error(args):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert "--deterministic" in proc.stderr and "--pass backward" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""  # refused before anything is measured


def test_model_json_of_a_deterministic_backward_has_the_dq_pass_and_no_accumulator():
    flags = ("model", "--seq", "4096", "--pass", "backward", "--json")
    atomic = json.loads(run_cli(*flags).stdout)
    det = json.loads(run_cli(*flags, "--deterministic").stdout)
    assert det["config"]["deterministic"] is True and atomic["config"]["deterministic"] is False
    assert det["training"]["deterministic"] is True
    h, n, d = 12, 4096, 64
    tiled = det["training"]["algorithms"]["tiled"]
    assert tiled["kernels"] == list(DETERMINISTIC_BACKWARD_KERNELS)
    # S in flash_bwd, S and dP again in the dQ pass: three products rebuilt, none useful.
    assert tiled["recompute_flops"] == 3 * 2 * h * n * n * d
    assert (
        tiled["backward_useful_flops"]
        == atomic["training"]["algorithms"]["tiled"]["backward_useful_flops"]
    )
    assert atomic["tiled_peak_bytes"] - det["tiled_peak_bytes"] == h * n * d * 4
    # Naive's backward has no atomics: the same kernels and bytes either way.
    assert det["naive_hbm_bytes"] == atomic["naive_hbm_bytes"]


def test_explain_gives_the_dq_pass_a_verdict_of_its_own():
    flags = ("explain", "--seq", "4096", "--pass", "backward", "--algo", "tiled_mma")
    data = json.loads(run_cli(*flags, "--deterministic", "--json").stdout)
    assert data["config"]["deterministic"] is True
    by_name = {k["name"]: k for k in data["algorithms"]["tiled_mma"]["kernels"]}
    dq = by_name["flash_bwd_dq"]
    unit = 2 * 12 * 4096 * 4096 * 64
    assert dq["flops"] == unit and dq["executed_flops"] == 3 * unit  # dQ useful, S and dP not
    assert dq["bound"] == "compute"
    text = run_cli(*flags, "--deterministic")
    assert text.returncode == 0 and "flash_bwd_dq" in text.stdout
    assert "deterministic dQ" in text.stdout and "S and dP in its dQ pass" in text.stdout
