"""AttentionConfig: frozen, validated, and errors that name the field, the value and the range."""

from __future__ import annotations

import dataclasses

import pytest

from gpu.config import AttentionConfig, ConfigError


def test_defaults_are_the_lessons_configuration():
    cfg = AttentionConfig()
    assert (cfg.heads, cfg.head_dim, cfg.dtype, cfg.causal) == (12, 64, "fp16", False)


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        AttentionConfig().seq_len = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("seq_len", 0, "from 1 to"),
        ("seq_len", 1.5, "integer"),
        ("heads", -3, "from 1 to 256"),
        ("head_dim", 512, "from 1 to 256"),
        ("batch", True, "integer"),
        ("dtype", "fp8", "fp16, bf16, fp32"),
        ("causal", "yes", "true or false"),
        ("block_m", 48, "one of 8, 16"),
        ("block_n", 0, "one of"),
    ],
)
def test_bad_value_names_field_value_and_allowed_range(field, value, fragment):
    with pytest.raises(ConfigError) as info:
        AttentionConfig(**{field: value})
    err = info.value
    assert err.field == field
    assert err.value == value
    assert field in str(err) and repr(value) in str(err) and fragment in str(err)


def test_round_trips_through_a_dict():
    cfg = AttentionConfig(seq_len=333, heads=3, head_dim=32, batch=2, dtype="bf16", causal=True)
    assert AttentionConfig.from_dict(cfg.to_dict()) == cfg


def test_unknown_field_in_a_dict_is_named():
    with pytest.raises(ConfigError, match="colour"):
        AttentionConfig.from_dict({"seq_len": 128, "colour": "red"})


def test_with_validates_the_changed_copy():
    with pytest.raises(ConfigError, match="heads"):
        AttentionConfig().with_(heads=0)


def test_deterministic_dq_is_a_field_of_the_backward_and_the_step():
    for pass_ in ("backward", "step"):
        cfg = AttentionConfig(pass_=pass_, deterministic=True)
        assert cfg.deterministic and "deterministic dQ" in cfg.label()
    assert "deterministic" not in AttentionConfig(pass_="step").label()


def test_the_forward_pass_refuses_deterministic_dq_by_name():
    with pytest.raises(ConfigError, match=r"deterministic = True .*forward pass"):
        AttentionConfig(deterministic=True)
    with pytest.raises(ConfigError, match="deterministic"):
        AttentionConfig(pass_="step", deterministic="yes")


def test_the_forward_of_a_deterministic_step_is_the_plain_forward():
    step = AttentionConfig(seq_len=512, pass_="step", deterministic=True)
    assert step.forward() == AttentionConfig(seq_len=512)


def test_deterministic_round_trips_and_older_dicts_sum_dq_by_atomics():
    cfg = AttentionConfig(seq_len=333, pass_="backward", deterministic=True)
    assert cfg.to_dict()["deterministic"] is True
    assert AttentionConfig.from_dict(cfg.to_dict()) == cfg
    assert not AttentionConfig.from_dict({"seq_len": 128, "pass": "step"}).deterministic


def test_a_file_config_with_deterministic_dq_is_checked():
    from gpu.errors import SchemaError
    from gpu.files.schema import check_config

    cfg = check_config({"seq_len": 64, "pass": "step", "deterministic": True}, "run.json")
    assert cfg.deterministic
    with pytest.raises(SchemaError, match=r"config\.deterministic"):
        check_config({"seq_len": 64, "deterministic": True}, "run.json")
    with pytest.raises(SchemaError, match="deterministic"):
        check_config({"seq_len": 64, "pass": "step", "deterministic": 1}, "run.json")
