"""The deterministic dQ control beside the Pass control: enabled for a pass with a backward,
the dQ pass in the timing plot and the explain pane, kept in settings and sessions."""

from __future__ import annotations

import pyqtgraph as pg

from gpu.algorithms import NAIVE, TILED
from gpu.backends.model_backend import CostModelBackend
from gpu.config import BACKWARD, FORWARD, PASSES, STEP, AttentionConfig


def _choose_pass(window, pass_: str) -> None:
    combo = window.controls.pass_combo
    combo.setCurrentIndex(combo.findData(pass_))


def test_the_deterministic_control_is_enabled_only_for_a_pass_with_a_backward(make_window):
    window = make_window(CostModelBackend(passes=PASSES))
    box = window.controls.deterministic
    assert box.objectName() == "deterministicCheck"
    assert not box.isEnabled() and not window.config.deterministic
    _choose_pass(window, STEP)
    assert box.isEnabled()
    box.setChecked(True)
    assert window.config.deterministic and window.config.pass_ == STEP
    _choose_pass(window, FORWARD)  # the forward has no dQ: off in the config, kept in the box
    assert not window.config.deterministic and not box.isEnabled() and box.isChecked()
    _choose_pass(window, BACKWARD)
    assert window.config.deterministic and window.config.pass_ == BACKWARD
    box.setChecked(False)
    assert not window.config.deterministic


def test_a_deterministic_step_runs_the_dq_pass_and_the_plots_follow_its_peak(qtbot, make_window):
    from gpu.model.backward_cost import DETERMINISTIC_BACKWARD_KERNELS
    from gpu.model.costmodel import algorithm_cost

    window = make_window(CostModelBackend(passes=PASSES))
    _choose_pass(window, STEP)
    window.controls.deterministic.setChecked(True)
    key = window.backend.key
    qtbot.waitUntil(
        lambda: window.measurements.store.get(window.config, TILED, key) is not None, timeout=5000
    )
    result = window.measurements.store.get(window.config, TILED, key)
    assert result.config.deterministic
    assert [k.name for k in result.kernel_times] == ["flash_fwd", *DETERMINISTIC_BACKWARD_KERNELS]
    # The memory plot shows the deterministic step's peak (no fp32 dQ accumulator).
    memory = window.findChild(pg.PlotWidget, "memoryPlot")
    n = window.config.seq_len
    det = int(algorithm_cost(window.config, TILED).peak_bytes * 1.02)
    atomic = int(algorithm_cost(window.config.with_(deterministic=False), TILED).peak_bytes * 1.02)
    assert det < atomic

    def shown() -> int | None:
        xs, ys = memory.series["measured_tiled"]
        return ys[list(xs).index(n)] if n in xs else None

    qtbot.waitUntil(lambda: shown() == det, timeout=5000)


def test_the_explain_pane_names_the_mode_and_gives_the_dq_pass_a_verdict(qtbot):
    from PySide6.QtWidgets import QTextBrowser

    from app.measure.explain import explain_html
    from app.state.point_inputs import PointInputs
    from gpu.model.costmodel import DEFAULT_GPU, GPUS

    cfg = AttentionConfig(seq_len=8192, pass_=STEP, deterministic=True)
    inp = PointInputs(
        cfg, (NAIVE, TILED, "tiled_mma"), GPUS[DEFAULT_GPU], "H200", 80 * 10**9, "an H100",
        layers=12,
    )  # fmt: skip
    doc = QTextBrowser()
    doc.setHtml(explain_html(inp))
    text = doc.toPlainText()
    assert "training step, deterministic dQ" in text
    assert "flash_bwd_dq: the tensor cores bind" in text
    assert "flash_bwd_dq_convert" not in text
    assert "its dQ pass rebuilds S, P and dP once more: three products" in text
    atomic = QTextBrowser()
    atomic.setHtml(explain_html(PointInputs(
        cfg.with_(deterministic=False), (NAIVE, TILED), GPUS[DEFAULT_GPU], "H200", None, "",
    )))  # fmt: skip
    assert "deterministic" not in atomic.toPlainText() and "a fifth product" in atomic.toPlainText()


def test_the_deterministic_choice_persists_across_a_restart_even_through_a_forward(make_window):
    window = make_window(CostModelBackend(passes=PASSES))
    _choose_pass(window, STEP)
    window.controls.deterministic.setChecked(True)
    _choose_pass(window, FORWARD)
    settings = window.settings
    window.close()
    again = make_window(CostModelBackend(passes=PASSES))
    assert again.settings.fileName() == settings.fileName()
    assert again.config.pass_ == FORWARD and not again.config.deterministic
    assert again.controls.deterministic.isChecked() and not again.controls.deterministic.isEnabled()
    _choose_pass(again, STEP)
    assert again.config.deterministic


def test_a_saved_session_opens_in_the_deterministic_mode(qtbot, make_window, tmp_path):
    window = make_window(CostModelBackend(passes=PASSES))
    _choose_pass(window, STEP)
    window.controls.deterministic.setChecked(True)
    store = window.measurements.store
    qtbot.waitUntil(lambda: store.get(window.config, TILED, window.backend.key) is not None,
                    timeout=5000)  # fmt: skip
    path = tmp_path / "det_session.json"
    with qtbot.waitSignal(window.file_menu.sessionSaved, timeout=10_000):
        assert window.file_menu.save_session(str(path))
    window.close()
    opened = make_window(CostModelBackend(passes=PASSES), open_path=str(path))
    qtbot.waitUntil(lambda: opened.state.value.replay, timeout=10_000)
    assert opened.config.deterministic and opened.config.pass_ == STEP
    assert opened.controls.deterministic.isChecked() and opened.controls.deterministic.isEnabled()
