"""The pass a run times (inference forward, backward, training step): a validated config field,
written as "pass" in files, old files read as forward, and a backend without a backward for an
algorithm refuses the pass by name instead of running something else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.state.model.cost_model_backend import CostModelBackend
from gpu.algorithms import NAIVE, TILED
from gpu.backends.backend import RunOptions, check_pass
from gpu.config import BACKWARD, FORWARD, PASSES, STEP, AttentionConfig, ConfigError
from gpu.errors import UnsupportedConfig
from gpu.files.recording import Recording, load_recording, save_recording
from gpu.files.schema import SchemaError, check_config, check_result
from gpu.results import DeviceInfo, RunResult

SHIPPED = Path(__file__).resolve().parents[1] / "resources" / "recorded" / "h200_sweep.json"


def test_a_config_is_a_forward_pass_unless_told_otherwise():
    cfg = AttentionConfig()
    assert cfg.pass_ == FORWARD
    assert not cfg.has_backward and cfg.has_forward_timed
    assert PASSES == ("forward", "backward", "step", "decode")


def test_backward_and_step_compute_gradients_and_only_the_step_times_the_forward():
    assert AttentionConfig(pass_=BACKWARD).has_backward
    assert not AttentionConfig(pass_=BACKWARD).has_forward_timed
    step = AttentionConfig(pass_=STEP)
    assert step.has_backward and step.has_forward_timed
    assert AttentionConfig(pass_=STEP, seq_len=77).forward() == AttentionConfig(seq_len=77)


@pytest.mark.parametrize("value", ["sideways", "", "Forward", 1, None, True])
def test_a_bad_pass_names_the_field_and_the_passes_allowed(value):
    with pytest.raises(ConfigError) as info:
        AttentionConfig(pass_=value)
    assert info.value.field == "pass"
    assert "forward, backward, step" in str(info.value) and repr(value) in str(info.value)


def test_the_pass_is_written_as_pass_and_round_trips():
    cfg = AttentionConfig(seq_len=333, pass_=STEP)
    data = cfg.to_dict()
    assert data["pass"] == "step" and "pass_" not in data
    assert AttentionConfig.from_dict(data) == cfg
    assert AttentionConfig.from_dict(json.loads(json.dumps(data))) == cfg


def test_a_dict_without_pass_is_a_forward_pass_and_pass_underscore_is_unknown():
    assert AttentionConfig.from_dict({"seq_len": 128}).pass_ == FORWARD
    with pytest.raises(ConfigError, match="pass_"):
        AttentionConfig.from_dict({"seq_len": 128, "pass_": "step"})


def test_the_label_says_which_pass_apart_from_inference():
    assert "training step" in AttentionConfig(pass_=STEP).label()
    assert "backward" in AttentionConfig(pass_=BACKWARD).label()
    assert "forward" not in AttentionConfig().label()


def test_the_file_format_checks_the_pass():
    assert check_config({"seq_len": 64, "pass": "backward"}, "f.json").pass_ == BACKWARD
    assert check_config({"seq_len": 64}, "f.json").pass_ == FORWARD
    with pytest.raises(SchemaError) as info:
        check_config({"seq_len": 64, "pass": "sideways"}, "f.json")
    assert "config.pass" in str(info.value)


def test_files_written_before_the_training_step_load_as_forward_passes():
    recording = load_recording(SHIPPED)
    assert recording.results
    assert {r.config.pass_ for r in recording.results} == {FORWARD}


def test_a_recording_keeps_each_results_pass(tmp_path):
    device = DeviceInfo("cpu", "test CPU", 1, 1)
    results = tuple(
        RunResult(
            config=AttentionConfig(seq_len=64, pass_=p),
            algorithm=NAIVE,
            backend="cpu",
            device="test CPU",
        )
        for p in PASSES
    )
    path = tmp_path / "training.json"
    save_recording(Recording(device, results, {"command": "test"}), path)
    written = json.loads(path.read_text())
    assert [r["config"]["pass"] for r in written["results"]] == list(PASSES)
    assert load_recording(path).results == results
    assert check_result(written["results"][2], "f.json").config.pass_ == STEP


def test_a_backend_without_a_backward_refuses_the_step_and_names_who_has_one():
    backend = CostModelBackend(passes=(FORWARD,))
    with pytest.raises(UnsupportedConfig) as info:
        backend.run(AttentionConfig(seq_len=64, pass_=STEP), NAIVE, RunOptions())
    assert info.value.field == "pass"
    assert "naive" in str(info.value) and "training step" in str(info.value)


class _OneBackward(CostModelBackend):
    """Naive has a backward here, tiled does not."""

    def passes(self, algorithm: str) -> tuple[str, ...]:
        return PASSES if algorithm == NAIVE else (FORWARD,)


def test_the_refusal_names_the_algorithms_that_run_the_pass():
    backend = _OneBackward()
    check_pass(backend, AttentionConfig(pass_=STEP), NAIVE)  # no error
    check_pass(backend, AttentionConfig(), TILED)  # forward always runs
    with pytest.raises(UnsupportedConfig, match=r"tiled has no backward.*runs naive"):
        check_pass(backend, AttentionConfig(pass_=BACKWARD), TILED)


def test_the_forward_pass_is_never_refused_for_want_of_a_backward():
    result = CostModelBackend(passes=(FORWARD,)).run(AttentionConfig(seq_len=64), TILED)
    assert result.kernel_times and result.config.pass_ == FORWARD
