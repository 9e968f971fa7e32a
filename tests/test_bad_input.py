"""Bad input never crashes: every invalid config value and CLI flag gets a message naming the
field, and the CLI exits with status 2 without a traceback."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import main
from gpu.config import (
    BATCH_MAX,
    DTYPE_BYTES,
    HEAD_DIM_MAX,
    HEADS_MAX,
    SEQ_LEN_MAX,
    TILE_CHOICES,
    AttentionConfig,
    ConfigError,
)

INT_FIELDS = {
    "seq_len": (1, SEQ_LEN_MAX),
    "heads": (1, HEADS_MAX),
    "head_dim": (1, HEAD_DIM_MAX),
    "batch": (1, BATCH_MAX),
}
CLI_FLAG = {"seq_len": "--seq", "heads": "--heads", "head_dim": "--head-dim", "batch": "--batch"}

junk = st.one_of(
    st.none(),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.booleans(),
)


@st.composite
def bad_field(draw):
    """(field, value) where value is outside that field's allowed range or of the wrong type."""
    field = draw(st.sampled_from([*INT_FIELDS, "dtype", "causal", "block_m", "block_n"]))
    if field in INT_FIELDS:
        lo, hi = INT_FIELDS[field]
        value = draw(st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1), junk))
    elif field == "dtype":
        value = draw(st.one_of(st.text(max_size=6).filter(lambda s: s not in DTYPE_BYTES), junk))
    elif field == "causal":
        value = draw(st.one_of(st.integers(), st.text(max_size=4), st.none()))
    else:
        value = draw(st.one_of(st.integers().filter(lambda v: v not in TILE_CHOICES), junk))
    return field, value


@settings(max_examples=1000, deadline=None)
@given(bad_field())
def test_every_bad_config_value_raises_a_config_error_naming_the_field(case):
    field, value = case
    try:
        AttentionConfig(**{field: value})
    except ConfigError as err:
        assert err.field == field
        assert str(err).startswith(f"{field} = ")
    else:
        raise AssertionError(f"{field}={value!r} was accepted")


cli_bad_int = st.one_of(
    st.integers(max_value=0).map(str),
    st.text(alphabet="abcxyz-.,!", min_size=1, max_size=6),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@st.composite
def bad_cli_args(draw):
    """A `model` or `bench` command with exactly one invalid flag value."""
    command = draw(st.sampled_from(["model", "bench"]))
    field = draw(st.sampled_from([*CLI_FLAG, "dtype", "block_m", "algo", "backend"]))
    args = {"--seq": "128"}
    if field in CLI_FLAG:
        hi = INT_FIELDS[field][1]
        args[CLI_FLAG[field]] = draw(st.one_of(cli_bad_int, st.integers(hi + 1, 10**12).map(str)))
    elif field == "dtype":
        args["--dtype"] = draw(
            st.text(min_size=1, max_size=5).filter(lambda s: s not in DTYPE_BYTES)
        )
    elif field == "block_m":
        args["--block-m"] = str(draw(st.integers().filter(lambda v: v not in TILE_CHOICES)))
    elif field == "algo" and command == "bench":
        args["--algo"] = draw(st.text(alphabet="abcdefgh_", min_size=1, max_size=8))
    else:
        command, field = "bench", "backend"
        args["--backend"] = draw(st.text(alphabet="abcdefgh", min_size=1, max_size=6))
    argv = [command]
    for flag, value in args.items():
        # A separate token starting with "--" is another option to argparse ("--seq --b" is an
        # ambiguous --b, not a bad N); "--seq=--b" hands the bad value to the field itself.
        argv += [f"{flag}={value}"] if value.startswith("--") else [flag, value]
    return field, argv


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bad_cli_args())
def test_every_bad_cli_value_exits_2_with_one_line(case):
    field, argv = case
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main.main(argv)
    text = err.getvalue().strip()
    assert code == 2, (argv, text)
    assert text.startswith("tilescope: error:") and "\n" not in text
    assert "Traceback" not in text
    named = {
        "seq_len": ("seq_len", "--seq"),
        "heads": ("heads",),
        "head_dim": ("head_dim", "--head-dim"),
        "batch": ("batch",),
        "dtype": ("dtype",),
        "block_m": ("block_m", "--block-m"),
        "algo": ("algorithm", "--algo"),
        "backend": ("backend",),
    }[field]
    assert any(n in text for n in named), (argv, text)


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--seq=--"],  # found by the property test: bench measured nothing, exit 0
        ["model", "--seq=--"],
        ["bench", "--seq", "128", "--heads=--"],
    ],
)
def test_a_bare_double_dash_as_a_value_is_refused_naming_the_option(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main.main(argv)
    text = err.getvalue().strip()
    assert code == 2
    assert text.startswith("tilescope: error:") and "\n" not in text
    assert argv[-1].split("=")[0] in text
