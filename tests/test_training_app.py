"""The training step in the window: the Pass control, the step's plots with the saved
activations of L layers, a backend without a backward saying so by the control, and the replay
of a recorded training sweep."""

from __future__ import annotations

import pyqtgraph as pg

from app.state.model.cost_model_backend import CostModelBackend
from gpu.algorithms import NAIVE, TILED
from gpu.backends.backend import RunOptions
from gpu.backends.cpu_backend import CpuBackend
from gpu.config import FORWARD, PASSES, STEP, AttentionConfig
from gpu.files.recording import Recording, save_recording
from gpu.model.layer_stack import layer_stack

#: How long a test waits for a condition before calling it a hang (a loaded machine is slow).
HANG_MS = 60_000


def _plot(window, name: str) -> pg.PlotWidget:
    return window.findChild(pg.PlotWidget, name)


def _choose_pass(window, pass_: str) -> None:
    combo = window.controls.pass_combo
    combo.setCurrentIndex(combo.findData(pass_))


def test_the_pass_control_switches_the_window_to_a_training_step(qtbot, make_window):
    window = make_window(CostModelBackend(passes=PASSES))
    assert window.controls.pass_combo.objectName() == "passCombo"
    assert window.config.pass_ == FORWARD and not window.controls.layers.isEnabled()
    _choose_pass(window, STEP)
    assert window.config.pass_ == STEP and window.controls.layers.isEnabled()
    timing = _plot(window, "timingPlot")
    assert timing.title == "Step time"
    memory = _plot(window, "memoryPlot")
    step = AttentionConfig(seq_len=1024, pass_=STEP)
    from gpu.model.costmodel import algorithm_cost

    def naive_peak_at_1024() -> None:
        # The forward pass's point stays drawn until the step's result arrives: wait for that.
        xs, ys = memory.series["measured_naive"]
        assert 1024 in xs
        # The fake backend reports 1.02 × the model's peak: the step's, with P, dP and dS.
        assert ys[list(xs).index(1024)] == int(algorithm_cost(step, NAIVE).peak_bytes * 1.02)

    qtbot.waitUntil(naive_peak_at_1024, timeout=HANG_MS)
    names = [k for k in timing.series if k.startswith("kernel_")]
    assert "kernel_softmax_bwd" in names
    qtbot.waitUntil(lambda: bool(timing.series["kernel_softmax_bwd"][0]), timeout=HANG_MS)
    _choose_pass(window, FORWARD)
    assert timing.title == "Time"


def test_the_memory_plot_stacks_the_saved_activations_of_l_layers(qtbot, make_window):
    window = make_window(CostModelBackend(passes=PASSES))
    memory = _plot(window, "memoryPlot")
    window.plots.flush_model()
    assert not memory.series["stack_naive"][0]  # inference stacks nothing
    _choose_pass(window, STEP)
    window.controls.layers.setValue(24)
    assert window.state.value.layers == 24

    def stack_at(n: int, name: str) -> float | None:
        xs, ys = memory.series[name]
        return ys[list(xs).index(n)] if n in xs else None

    qtbot.waitUntil(lambda: stack_at(4096, "stack_naive") is not None, timeout=HANG_MS)
    cfg = window.config.with_(seq_len=4096)
    qtbot.waitUntil(
        lambda: stack_at(4096, "stack_naive") == layer_stack(cfg, NAIVE, 24).peak_bytes,
        timeout=HANG_MS,
    )
    assert stack_at(4096, "stack_tiled") == layer_stack(cfg, TILED, 24).peak_bytes
    assert "24 layers" in window.plots.memory.labels["stack_naive"]
    window.plots.flush_visibility()
    assert window.plots.memory.items["stack_naive"].isVisible()


def test_a_backend_without_a_backward_says_so_by_the_pass_control(qtbot, make_window):
    window = make_window(CostModelBackend(passes=(FORWARD,)))
    _choose_pass(window, STEP)
    qtbot.waitUntil(lambda: bool(window.controls.error_text("pass")), timeout=HANG_MS)
    assert "no backward" in window.controls.error_text("pass")
    _choose_pass(window, FORWARD)
    qtbot.waitUntil(lambda: not window.controls.error_text("pass"), timeout=HANG_MS)


def _training_recording(tmp_path):
    """A small training sweep recorded with the CPU backend (forward and step, two N)."""
    backend = CpuBackend()
    opts = RunOptions(warmup=0, repeats=1)
    results = []
    for pass_ in (FORWARD, STEP):
        for n in (128, 256):
            cfg = AttentionConfig(seq_len=n, heads=2, head_dim=16, pass_=pass_)
            results += [backend.run(cfg, a, opts) for a in (NAIVE, TILED)]
    path = tmp_path / "training.json"
    save_recording(Recording(backend.device_info(), tuple(results), {"command": "test"}), path)
    return path, results


def test_a_recorded_training_sweep_replays_each_pass(qtbot, make_window, tmp_path):
    path, results = _training_recording(tmp_path)
    window = make_window(open_path=str(path))
    assert window.backend.info.backend == "replay"
    memory = _plot(window, "memoryPlot")
    _choose_pass(window, STEP)
    step = {r.config.seq_len: r for r in results if r.algorithm == NAIVE and r.config.pass_ == STEP}
    qtbot.waitUntil(
        lambda: memory.series["measured_naive"][1] == [step[128].peak_bytes, step[256].peak_bytes],
        timeout=HANG_MS,
    )
    assert memory.series["measured_naive"][0] == [128, 256]
    timing = _plot(window, "timingPlot")
    qtbot.waitUntil(lambda: bool(timing.series["kernel_bwd_dK_gemm"][0]), timeout=HANG_MS)
    assert timing.title.startswith("Step time · ")  # and where it was recorded
    _choose_pass(window, FORWARD)
    forward = {
        r.config.seq_len: r for r in results if r.algorithm == NAIVE and r.config.pass_ == FORWARD
    }
    qtbot.waitUntil(
        lambda: (
            memory.series["measured_naive"][1] == [forward[128].peak_bytes, forward[256].peak_bytes]
        ),
        timeout=HANG_MS,
    )


def test_explain_gives_a_verdict_for_every_backward_kernel_and_the_wall_for_l_layers(qtbot):
    from PySide6.QtWidgets import QTextBrowser

    from app.measure.explain import explain_html
    from app.state.point_inputs import PointInputs
    from gpu.model.costmodel import DEFAULT_GPU, GPUS
    from gpu.model.layer_stack import training_wall_seq_len

    cfg = AttentionConfig(seq_len=8192, pass_=STEP)
    budget = 80 * 10**9
    inp = PointInputs(
        cfg, (NAIVE, TILED, "tiled_mma"), GPUS[DEFAULT_GPU], "H200", budget, "an H100", layers=12
    )
    doc = QTextBrowser()
    doc.setHtml(explain_html(inp))
    text = doc.toPlainText().replace("\u2009", " ")  # thousands: thin spaces
    for kernel in ("bwd_dV_gemm", "bwd_dP_gemm", "bwd_dQ_gemm", "bwd_dK_gemm", "softmax_bwd"):
        assert f"{kernel}: HBM bandwidth binds (memory)" in text
    # On Hopper the fused backward's flash_bwd has a wgmma build: the tensor cores' full roof.
    assert "flash_bwd: the tensor cores bind (compute)" in text
    assert "flash_bwd_preprocess: HBM bandwidth binds (memory)" in text
    assert "recomputes S and P tile by tile" in text
    wall = training_wall_seq_len(cfg, NAIVE, 12, budget)
    assert f"naive from N = {wall:,}".replace(",", " ") in text
    assert "12 layers" in text


def test_the_pass_and_the_layer_count_persist_across_a_restart(qtbot, make_window):
    window = make_window(CostModelBackend(passes=PASSES))
    _choose_pass(window, STEP)
    window.controls.layers.setValue(32)
    settings = window.settings
    window.close()
    again = make_window(CostModelBackend(passes=PASSES))
    assert again.settings.fileName() == settings.fileName()
    assert again.config.pass_ == STEP and again.state.value.layers == 32
    assert again.controls.pass_combo.currentData() == STEP


def test_the_shipped_h200_training_sweep_replays_in_the_window(qtbot, make_window):
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[1] / "resources" / "recorded" / "h200_training.json"
    window = make_window(open_path=str(shipped))
    assert window.backend.info.backend == "replay"
    assert window.config.pass_ == STEP  # the recording holds training steps only
    assert window.controls.pass_combo.currentData() == STEP
    memory, timing = _plot(window, "memoryPlot"), _plot(window, "timingPlot")
    qtbot.waitUntil(lambda: len(memory.series["measured_naive"][0]) >= 3, timeout=HANG_MS)
    qtbot.waitUntil(lambda: bool(timing.series["kernel_softmax_bwd"][0]), timeout=HANG_MS)
    assert len(memory.series["measured_tiled_mma"][0]) >= 3
    assert timing.title.startswith("Step time · ")
    # Naive's measured step holds P, dP and dS: above three attention matrices at every N.
    for n, peak in zip(*memory.series["measured_naive"], strict=True):
        assert peak >= 3 * window.config.bh * n * n * window.config.elem_bytes


def test_the_explain_pane_labels_each_training_figure_measured_or_model():
    """A replayed H200 step at N = 8192: one layer's peak is the memory pool's (measured), the
    saved activations and L layers' stack are the model's, each said so."""
    import re
    from pathlib import Path

    from app.measure.explain import explain_html
    from app.state.point_inputs import PointInputs
    from app.state.training_figures import training_figures
    from app.state.units import fmt_bytes
    from gpu.files.recording import load_recording
    from gpu.model.costmodel import DEFAULT_GPU, GPUS

    path = Path(__file__).resolve().parent.parent / "resources" / "recorded" / "h200_training.json"
    results = {
        r.algorithm: r
        for r in load_recording(path).results
        if r.config.seq_len == 8192 and r.config.head_dim == 64 and not r.config.causal
    }
    cfg = results[NAIVE].config
    inp = PointInputs(
        cfg, (NAIVE, "tiled_mma"), GPUS[DEFAULT_GPU], "H200", 141 * 10**9, "an H200",
        tuple(results.items()), layers=32,
    )  # fmt: skip
    t = training_figures(cfg, 32, 141 * 10**9, results)
    text = re.sub(r"<[^>]+>", "", explain_html(inp))
    naive, fused = t.algorithm(NAIVE), t.algorithm(TILED)
    assert f"naive {fmt_bytes(results[NAIVE].peak_bytes)} (measured)" in text
    assert f"{fmt_bytes(results['tiled_mma'].peak_bytes)} (measured)" in text
    assert f"naive {naive.saved_per_layer.value_text()} (model)" in text
    assert f"{naive.layers_peak.value_text()} (model) with one layer's backward" in text
    assert f"{fused.layers_peak.value_text()} (model) with one layer's backward" in text
