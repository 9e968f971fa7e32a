"""`--pass forward|backward|step` on bench, model and explain, with --layers and --preset: the
training step's figures as JSON, its kernels measured on the CPU, and bad combinations refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu.files.recording import load_recording
from gpu.model.backward_cost import FUSED_BACKWARD_KERNELS, NAIVE_BACKWARD_KERNELS
from tests.cli_process import run_cli

ROOT = Path(__file__).resolve().parents[1]


def test_model_of_a_training_step_reports_the_saved_activations_of_l_layers():
    proc = run_cli("model", "--seq", "4096", "--pass", "step", "--layers", "12", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["config"]["pass"] == "step"
    p_bytes = data["attn_matrix_bytes"]  # 12 heads · 4096² · 2 B
    mat = 12 * 4096 * 64 * 2
    assert data["naive_peak_bytes"] == 8 * mat + 3 * p_bytes  # P, dP and dS at once
    naive = data["training"]["algorithms"]["naive"]
    tiled = data["training"]["algorithms"]["tiled"]
    assert naive["saved_per_layer_bytes"] == 4 * mat + p_bytes
    assert naive["saved_total_bytes"] == 12 * naive["saved_per_layer_bytes"]
    assert tiled["saved_per_layer_bytes"] == 4 * mat + 2 * 12 * 4096 * 4  # O; m and l per row
    assert naive["recompute_flops"] == 0
    assert tiled["recompute_flops"] == 2 * 12 * 4096 * 4096 * 64
    assert naive["backward_useful_flops"] == 8 * 12 * 4096 * 4096 * 64
    assert naive["kernels"][3:] == list(NAIVE_BACKWARD_KERNELS)
    assert tiled["kernels"] == ["flash_fwd", *FUSED_BACKWARD_KERNELS]
    walls = naive["wall_seq_len"]
    assert walls["H200 SXM 141 GB"] > walls["RTX 4090 24 GB"]


def test_a_preset_sets_the_models_shape_and_layer_count():
    proc = run_cli("model", "--seq", "4096", "--pass", "step", "--preset", "llama-7b", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["config"]["heads"], data["config"]["head_dim"]) == (32, 128)
    assert data["training"]["layers"] == 32 and data["training"]["preset"] == "llama-7b"
    text = run_cli("model", "--seq", "4096", "--pass", "step", "--preset", "gpt2-small")
    assert text.returncode == 0 and "12 layers" in text.stdout and "wall at" in text.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["model", "--seq", "512", "--layers", "4"], "--pass step"),
        (["model", "--seq", "512", "--pass", "step", "--layers", "0"], "--layers 0"),
        (["model", "--seq", "512", "--pass", "sideways"], "invalid choice"),
        (["model", "--seq", "512", "--pass", "step", "--preset", "gpt2-small", "--heads", "4"],
         "--preset"),
        (["model", "--seq", "512", "--pass", "step", "--devices", "2"], "--devices"),
    ],
)  # fmt: skip
def test_bad_training_flags_are_one_line_errors(args, fragment):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert fragment in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_bench_times_the_training_steps_kernels_and_records_the_pass(tmp_path):
    out = tmp_path / "step.json"
    proc = run_cli(
        "bench", "--backend", "cpu", "--seq", "128", "--heads", "2", "--head-dim", "32",
        "--pass", "step", "--check", "--repeats", "1", "--warmup", "0", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "softmax_bwd=" in proc.stdout and "flash_bwd=" in proc.stdout
    results = load_recording(out).results
    assert {r.config.pass_ for r in results} == {"step"}
    assert all(r.agrees for r in results)
    assert json.loads(out.read_text())["results"][0]["config"]["pass"] == "step"


def test_bench_of_the_backward_times_only_the_backward_kernels():
    proc = run_cli(
        "bench", "--backend", "cpu", "--seq", "64", "--heads", "1", "--head-dim", "16",
        "--pass", "backward", "--algo", "naive", "--repeats", "1", "--warmup", "0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if " naive " in line)
    assert "gemm_qk=" not in row and "bwd_dK_gemm=" in row


def test_explain_gives_a_verdict_for_every_backward_kernel():
    proc = run_cli("explain", "--seq", "4096", "--pass", "backward", "--algo", "naive,tiled_mma",
                   "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    naive = [k["name"] for k in data["algorithms"]["naive"]["kernels"]]
    fused = [k["name"] for k in data["algorithms"]["tiled_mma"]["kernels"]]
    assert naive == list(NAIVE_BACKWARD_KERNELS)
    assert fused == list(FUSED_BACKWARD_KERNELS)
    by_name = {k["name"]: k for k in data["algorithms"]["naive"]["kernels"]}
    assert by_name["softmax_bwd"]["bound"] == "memory"
    assert data["algorithms"]["tiled_mma"]["kernels"][1]["bound"] == "compute"
    assert "training" in data


def test_explain_of_a_recording_without_the_pass_says_so():
    shipped = ROOT / "resources" / "recorded" / "h200_sweep.json"
    proc = run_cli("explain", "--seq", "4096", "--pass", "step", "--open", str(shipped))
    assert (
        proc.returncode == 2 and "no result for" in proc.stderr and "training step" in proc.stderr
    )
