"""One point, one set of figures wherever it is shown: `main.py model` and `main.py explain`
print the same bytes, intensities and verdicts; the app and the command line judge a recorded
point at one clock; the device's capacity is one figure for the budget line, the explain
pane's walls, the Tiles tab, `model` and `explain`; a compute roof quoted at the boost clock is
never called the datasheet's; naive's modelled-over-measured ratio survives naive running out
of memory; and the README's figures are what the commands beside them print."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

import main
from app.state.app_state import AppState, BackendReady
from app.state.current_point import point_for
from app.state.point_inputs import PointInputs
from app.state.recorded_run import RecordedBackend
from app.state.units import fmt_bytes
from gpu.algorithms import NAIVE, TILED, TILED_MMA
from gpu.config import AttentionConfig
from gpu.files.recording import load_recording
from gpu.model import roofline
from gpu.model.costmodel import GPUS, naive_oom_seq_len, traffic_band

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "resources" / "recorded" / "h200_sweep.json"
TRAINING = ROOT / "resources" / "recorded" / "h200_training.json"
H200 = "H200 SXM 141 GB"


def cli_json(capsys, *args: str) -> dict:
    assert main.main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def cli_text(capsys, *args: str) -> str:
    assert main.main(list(args)) == 0
    return capsys.readouterr().out


# ------------------------------------------------------------------ model prints explain's point


@pytest.mark.parametrize("pass_", ["forward", "step"])
def test_model_gives_the_dram_bytes_intensity_and_verdicts_that_explain_gives(capsys, pass_):
    flags = ("--seq", "16384", "--pass", pass_)
    model = cli_json(capsys, "model", *flags)
    explained = cli_json(capsys, "explain", *flags, "--algo", "naive,tiled")
    for a in (NAIVE, TILED):
        m, e = model["algorithms"][a], explained["algorithms"][a]
        for key in ("bytes", "bytes_source", "intensity", "bound", "roof", "ties", "roofline_ms"):
            assert m[key] == e[key], (a, key)
        assert model[f"{a}_hbm_bytes"] == e["bytes"] and e["bytes_source"] == "model"
        assert model[f"{a}_intensity"] == e["intensity"]
        # the no-reuse tile loads are named as such, never as the DRAM traffic
        assert m["tile_loads_bytes"] == e["model_bytes"]["no_reuse"] != e["bytes"]
        assert model["gpus"][H200][f"{a}_roofline_ms"] == e["roofline_ms"]
    tiled = model["algorithms"][TILED]
    # the readable kernel multiplies on the fp32 CUDA cores: judged there, not on the tensor roof
    assert tiled["roof"] == "fp32" and tiled["bound"] == "compute"
    if pass_ == "forward":
        assert model["tiled_hbm_bytes"] == 102_236_160  # 102 MB, not the 12.9 GB of tile loads
        assert model["gpus"][H200]["tiled_roofline_ms"] == pytest.approx(12.325, abs=1e-3)
    else:  # the training step: the fused step's 535 MB against naive's 71.2 GB
        assert model["tiled_hbm_bytes"] < model["naive_hbm_bytes"] / 100


def test_model_and_explain_print_the_same_rows_under_the_same_headings(capsys):
    model = cli_text(capsys, "model", "--seq", "16384").splitlines()
    explained = cli_text(capsys, "explain", "--seq", "16384", "--algo", "naive,tiled").splitlines()
    head = next(i for i, line in enumerate(explained) if line.split()[:1] == ["algorithm"])
    rows = explained[head : head + 6]  # the heading, naive and its three kernels, tiled
    assert rows[-1].split()[0] == TILED
    start = model.index(rows[0])
    assert model[start : start + 6] == rows
    assert "tile loads, every tile read and written with nothing reused" in "\n".join(model)
    assert not any("HBM traffic" in line for line in model)


# ------------------------------------------------------------------ one clock per recording


def test_the_app_and_explain_judge_a_recorded_point_at_the_same_clock_and_roofs(capsys):
    recorded = RecordedBackend.from_file(str(SWEEP))
    app_gpu = roofline.device_gpu(recorded.device_info())  # what the window judges on
    config = AttentionConfig(seq_len=16384)
    results = {r.algorithm: r for r in load_recording(SWEEP).results if r.config == config}
    point = point_for(config, (NAIVE, TILED, TILED_MMA), app_gpu, results)
    data = cli_json(capsys, "explain", "--open", str(SWEEP), "--seq", "16384")
    assert data["clock_hz"] == point.clock.value and data["clock_measured"]
    assert {n: r["peak"] for n, r in data["roofs"].items()} == {
        n: f.value for n, f in point.roofs.items()
    }
    for a in (NAIVE, TILED, TILED_MMA):
        app = point.algorithm(a).verdict
        assert data["algorithms"][a]["roof_share"] == app.roof_share
        assert data["algorithms"][a]["roofline_ms"] == app.roofline_ms


# ------------------------------------------------------------------ one capacity


def _replayed_state(path: Path) -> tuple[AppState, RecordedBackend]:
    backend = RecordedBackend.from_file(str(path))
    info = backend.device_info()
    ready = BackendReady(1, "recorded", backend, f"{info.backend}:{info.name}", info, (), 0.0)
    return AppState(backend=ready), backend


def test_the_devices_capacity_is_one_figure_in_every_place_that_states_it(capsys):
    from app.measure.explain import explain_html

    s, backend = _replayed_state(TRAINING)
    capacity = GPUS[H200].memory_bytes
    assert backend.device_info().memory_total_bytes == 150_109_880_320  # reported: not used
    # the budget line, and the GPU the Tiles tab draws HBM against
    assert s.budget.line_bytes == capacity and s.target_gpu.memory_bytes == capacity
    # the explain pane's walls, forward and training step (one layer)
    forward, step = s.config.with_(seq_len=16384), s.config.with_(seq_len=16384, pass_="step")
    walls = {}
    for config in (forward, step):
        html = explain_html(PointInputs.from_state(replace(s, config=config, layers=1)))
        text = re.sub("<[^>]+>", "", html).replace("\u2009", "")
        walls[config.pass_] = [
            int(n)
            for n in re.findall(r"in 141 GB naive runs out of memory from N = (\d+)", text)
            + re.findall(r"The wall for 1 layers in 141 GB: naive from N = (\d+)", text)
        ]
    assert walls["forward"] == [naive_oom_seq_len(forward, capacity)]
    model = cli_json(capsys, "model", "--seq", "16384", "--pass", "step")
    wall = model["training"]["algorithms"][NAIVE]["wall_seq_len"][H200]
    assert walls["step"] == [wall, wall]
    data = cli_json(capsys, "explain", "--open", str(TRAINING), "--seq", "16384",
                    "--pass", "step")  # fmt: skip
    figures = data["figures"]
    assert figures["memory"]["value"] == capacity == figures["training"]["budget_bytes"]
    assert figures["training"]["algorithms"][NAIVE]["wall_seq_len"]["value"] == wall
    # the runs on "this device" use it too, where a GPU of the table runs live
    live = AppState(backend=_live_h200())
    assert live.budget.run_bytes == capacity == live.budget.line_bytes


def _live_h200() -> BackendReady:
    from app.state.model.cost_model_backend import CostModelBackend

    backend = CostModelBackend(name="cuda", device="NVIDIA H200", memory_bytes=150_109_880_320)
    info = backend.device_info()
    return BackendReady(1, "auto", backend, f"{info.backend}:{info.name}", info, (), 0.0)


# ------------------------------------------------------------------ the boost clock's ceiling


def test_a_roof_at_the_boost_clock_is_a_ceiling_not_the_datasheets_figure(capsys):
    data = cli_json(capsys, "explain", "--seq", "16384")
    tensor = data["figures"]["roofs"]["tensor"]
    assert tensor["value"] == pytest.approx(4096 * 132 * 1.98e9)  # 1,070.5 TFLOP/s
    assert tensor["value"] > GPUS[H200].fp16_tensor_flops * 1.08  # 8 % above 989.5
    assert tensor["source"] == "nominal" and data["figures"]["clock"]["source"] == "nominal"
    assert "the datasheet's dense fp16 989.5 TFLOP/s is this rate at 1.83 GHz" in tensor["detail"]
    text = cli_text(capsys, "explain", "--seq", "16384")
    clock = next(line for line in text.splitlines() if line.strip().startswith("clock:"))
    assert "not measured" in clock and "datasheet" not in clock


# ------------------------------------------------------------------ naive out of memory


@pytest.mark.parametrize("n", [65536, 131072])
def test_explain_keeps_naives_modelled_over_measured_ratio_where_naive_ran_out_of_memory(capsys, n):
    data = cli_json(capsys, "explain", "--open", str(SWEEP), "--seq", str(n))
    assert NAIVE not in data["algorithms"]  # no roofline row for a run that never ran
    ratios = data["naive_dram_ratios"]
    assert set(ratios) == {f"naive/{a}" for a in data["algorithms"]}
    config = AttentionConfig(seq_len=n)
    gpu = roofline.device_gpu(load_recording(SWEEP).device)
    naive_model = traffic_band(config, NAIVE, gpu).l2_aware.hbm_bytes
    for pair, r in ratios.items():
        fused = data["algorithms"][pair.split("/")[1]]
        assert r["measured"] is None and fused["bytes_source"] == "measured"
        assert r["model_over_measured"] == pytest.approx(naive_model / fused["bytes"])
        figure = data["figures"]["dram_ratios"][pair]
        assert figure["value"] == r["model_over_measured"] and figure["source"] == "model"
    if n == 131072:
        quoted = sorted(round(r["model_over_measured"]) for r in ratios.values())
        assert (quoted[0], quoted[-1]) == (456, 683)
        assert "measured fused ones (456–683×)" in (ROOT / "docs" / "MEASUREMENTS.md").read_text()
        assert "456–683" in (ROOT / "docs" / "TRAFFIC.md").read_text()


# ------------------------------------------------------------------ the docs' figures


def test_the_docs_llama_wall_is_what_the_command_beside_it_prints(capsys):
    readme = " ".join((ROOT / "docs" / "COMMANDS.md").read_text().split())
    said = re.search(
        r"saves ([\d.]+ GB) of attention activations with naive attention and ([\d.]+ GB) with "
        r"FlashAttention's \(model, decimal GB\); naive's wall on an H200 comes at N = ([\d,]+) "
        r"\(`python main.py model --seq 8192 --pass step --preset llama-7b`\)",
        readme,
    )
    assert said, "docs/COMMANDS.md's Llama-7B sentence"
    text = cli_text(capsys, "model", "--seq", "8192", "--pass", "step", "--preset", "llama-7b")
    naive = next(line for line in text.splitlines() if line.strip().startswith("naive  saved"))
    tiled = next(line for line in text.splitlines() if line.strip().startswith("tiled  saved"))
    assert f"{said[1]} for 32" in naive and f"{said[2]} for 32" in tiled
    walls = next(
        line for line in text.splitlines()[text.splitlines().index(naive) + 1 :]
        if "wall at" in line
    )  # fmt: skip
    assert f"{H200}: N={said[3]}," in walls


# ------------------------------------------------------------------ the fused kernel named


def test_the_explain_pane_names_the_fused_kernel_shown_and_the_one_that_ran_the_step():
    from app.measure.explain import explain_html

    s, backend = _replayed_state(TRAINING)
    config = s.config.with_(seq_len=16384, pass_="step")
    results = {r.algorithm: r for r in backend.results() if r.config == config}
    inp = replace(
        PointInputs.from_state(replace(s, config=config, layers=1)),
        algorithms=(NAIVE, TILED_MMA),
        results=tuple((a, results[a]) for a in (NAIVE, TILED_MMA)),
    )
    text = re.sub("<[^>]+>", "", explain_html(inp))
    # the readable kernel has no GPU backward: it is neither shown nor credited with the step
    assert "tiled (readable)" not in text
    assert "tiled (tensor cores): one fused kernel, S and P stay on chip" in text
    peak = f"tiled (tensor cores) {fmt_bytes(results[TILED_MMA].peak_bytes)} (measured)"
    assert peak in text  # its measured 255 MB, under its own name
    assert "tiled (tensor cores) kept no P" in text
    # several fused kernels shown: each is named in the heading
    both = replace(inp, algorithms=(NAIVE, TILED, TILED_MMA))
    text = re.sub("<[^>]+>", "", explain_html(both))
    assert "tiled (readable), tiled (tensor cores): one fused kernel each" in text


# ------------------------------------------------------------------ the XU pipe's occupancy


def test_an_xu_share_that_counts_more_than_the_exponentials_is_called_the_pipes_occupancy(
    capsys,
):
    from app.measure.explain import explain_html

    raw = json.loads(SWEEP.read_text())
    config = AttentionConfig(seq_len=16384)
    lanes = {
        r["algorithm"]: sum(t["xu_warp_instructions"] for t in r["traffic"]) * 32
        for r in raw["results"]
        if AttentionConfig.from_dict(r["config"]) == config and r.get("traffic")
    }
    scores = 12 * 16384 * 16384
    assert 2.5 < lanes[TILED] / scores < 3  # the readable kernel: ~2.8 XU lanes per score
    assert 0.99 < lanes[TILED_MMA] / scores < 1.01  # the tensor-core one: its exponentials
    data = cli_json(capsys, "explain", "--open", str(SWEEP), "--seq", "16384")
    kernel = data["algorithms"][TILED]["kernels"][0]
    assert kernel["xu_per_exponential"] == pytest.approx(lanes[TILED] / kernel["model_exps"])
    mma = data["algorithms"][TILED_MMA]["kernels"][0]
    assert mma["xu_per_exponential"] == pytest.approx(1.0, abs=0.02)  # its exponentials alone
    text = cli_text(capsys, "explain", "--open", str(SWEEP), "--seq", "16384")
    row = next(line for line in text.splitlines() if line.split()[:1] == [TILED])
    per = kernel["xu_per_exponential"]
    assert f"xu 5% (pipe: {per:.1f} XU lanes per exponential)" in row
    mma_row = next(line for line in text.splitlines() if line.split()[:1] == [TILED_MMA])
    assert "pipe:" not in mma_row
    s, backend = _replayed_state(SWEEP)
    results = {r.algorithm: r for r in backend.results() if r.config == config}
    inp = replace(
        PointInputs.from_state(replace(s, config=config)),
        algorithms=(NAIVE, TILED, TILED_MMA),
        results=tuple((a, results[a]) for a in (NAIVE, TILED, TILED_MMA)),
    )
    html = re.sub("<[^>]+>", "", explain_html(inp))
    assert f"XU pipe occupancy ({per:.1f} XU instructions per exponential" in html
    assert html.count("XU pipe occupancy") == 1  # the readable kernel's alone


# ------------------------------------------------------------------ one backward convention


def test_backward_tflops_count_the_apps_useful_work_in_the_bench_and_in_kernels_md():
    """8·B·h·N²·d (the four products; the recompute of S is not useful), halved when causal:
    bench/bench_backward.py counts what gpu.model.backward_cost counts, and docs/KERNELS.md's
    table is that over the recorded run's ms."""
    import importlib.util

    from gpu.model.backward_cost import backward_useful_flops

    spec = importlib.util.spec_from_file_location(
        "bench_backward", ROOT / "bench" / "bench_backward.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for causal in (False, True):
        config = AttentionConfig(seq_len=4096, batch=4, heads=32, head_dim=64, causal=causal)
        assert bench.backward_flops(config) == backward_useful_flops(config)
        assert backward_useful_flops(config) == 8 * 4 * 32 * 4096**2 * 64 // (2 if causal else 1)
    recorded = json.loads((ROOT / "docs" / "bench" / "h200_backward.json").read_text())
    ms = {
        (r["head_dim"], "causal" if r["causal"] else "full", r["seq_len"]): (r["ms"], r)
        for r in recorded["rows"]
        if r["method"] == "ours_fused"
    }
    doc = (ROOT / "docs" / "KERNELS.md").read_text().splitlines()
    head = doc.index(next(line for line in doc if line.startswith("| d | mask | N | ours (wgmma)")))
    rows = [line.split("|")[1:-1] for line in doc[head + 2 : head + 26]]
    assert len(rows) == 24
    for cells in rows:
        d, mask, n = int(cells[0]), cells[1].strip(), int(cells[2])
        t, r = ms[(d, mask, n)]
        config = AttentionConfig(seq_len=n, batch=r["batch"], heads=r["heads"], head_dim=d,
                                 causal=mask == "causal")  # fmt: skip
        assert float(cells[3]) == pytest.approx(t, rel=0.001)
        assert int(cells[-1]) == round(backward_useful_flops(config) / (t * 1e9)), cells
    assert "142–318 TFLOP/s of useful work (8·B·h·N²·d)" in " ".join(doc)


# ------------------------------------------------------------------ the recompute's share


@pytest.mark.parametrize(("deterministic", "share"), [(False, "25%"), (True, "75%")])
def test_the_fused_backwards_recompute_is_a_share_of_the_useful_work(deterministic, share):
    """S rebuilt (2·B·h·N²·d; with the dQ pass S and dP again, 6) against the useful 8·B·h·N²·d:
    25 % and 75 % more work, not a share of useful + recomputed (20 %, 43 %)."""
    from app.measure.explain import explain_html

    config = AttentionConfig(seq_len=4096, pass_="step", deterministic=deterministic)
    s = replace(AppState(), config=config)
    text = re.sub("<[^>]+>", "", explain_html(PointInputs.from_state(s)))
    assert f"({share} more than the useful work)" in text
