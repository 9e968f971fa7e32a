"""Bad input never crashes: every invalid config value and CLI flag gets a message naming the
field, and the CLI exits with status 2 without a traceback; every mutated recording loads or is
refused with one line, through the engine's loader and through `render --open`."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

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
from gpu.files.recording import (
    Recording,
    RecordingError,
    load_recording,
    recording_from_document,
    results_csv,
    save_recording,
)
from gpu.files.trace import layout, trace_problems
from tests.document_mutations import BASE_TEXT, FILES, SESSION_TEXT, mutated_documents

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


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


# --------------------------------------------------------------------------------------------
# Recordings: random documents built from the results format by mutating types, ranges and
# nesting. Whatever a file holds, opening it either gives a Recording that can be used and
# written back, or a RecordingError with one line; never another exception.


@pytest.fixture(scope="module")
def scratch():
    """A folder for the examples' files, in memory where the system has one (fsync is free)."""
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=shm) as folder:
        yield Path(folder)


def _use(recording: Recording, scratch: Path) -> None:
    """What the app and the CLI do with a recording, all of which must work once it loaded."""
    for r in recording.results:
        _ = (r.total_ms, r.tflops, r.bandwidth_gbs, r.agrees, r.config.label(), r.to_dict())
    for t in recording.traces:
        _ = (t.span_ns, t.lane_names, layout(t), trace_problems(t), t.downsampled(2))
    results_csv(recording.results)
    again = scratch / "again.json"
    save_recording(recording, again, overwrite=True)  # what loaded can be written back
    assert load_recording(again).results == recording.results


@FILES
@given(mutated_documents())
def test_a_mutated_recording_loads_or_is_refused_with_one_line(scratch, text):
    path = scratch / "mutated.json"
    path.write_text(text)
    try:
        recording = load_recording(path)
    except RecordingError as exc:
        message = str(exc)
        assert message.startswith(str(path)) and "\n" not in message, message
    else:
        _use(recording, scratch)


def test_the_unmutated_base_document_loads():
    assert len(recording_from_document(json.loads(BASE_TEXT), "base").results) == 4


@settings(max_examples=24, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated_documents((BASE_TEXT, SESSION_TEXT)))
def test_render_open_of_a_mutated_recording_or_session_exits_cleanly(
    scratch, capsys, monkeypatch, text
):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    capsys.readouterr()
    path = scratch / "mutated.json"
    path.write_text(text)
    out = scratch / "shot.png"
    argv = ["render", "--seq", "256", "--open", str(path), "--out", str(out), "--force"]
    code = main.main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    if code == 2:
        assert err.startswith("tilescope: error:") and err.count("\n") == 1, err
    else:
        assert code == 0 and out.exists(), err
