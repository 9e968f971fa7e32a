"""Extreme floats in any numeric field of a recording or a session (the smallest subnormal,
the largest double, subnormals, -0.0, 2^63): the check refuses what the program cannot draw
or compute with, with a message naming the field; what it accepts opens in the window, renders
and explains with every figure finite, and no Qt slot raises."""

from __future__ import annotations

import contextlib
import io
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import main as cli
from gpu.algorithms import ALGORITHMS
from gpu.files.recording import recording_from_document
from gpu.model.roofline import device_gpu, explain
from tests.document_mutations import BASE, BASE_TEXT, SESSION, SESSION_TEXT
from tests.test_open_files import open_and_wait

EXTREMES = (5e-324, 1e-310, 2.2250738585072014e-308, 1e-300, -0.0, 0.0, 1.7976931348623157e308,
            1e300, -1e300, 1e30, 1e16, 2.0**63, 2**63, 2**64, -1, 1, 1e-9, 1e9)  # fmt: skip


def _numeric_paths(node, prefix=()) -> list[tuple]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _numeric_paths(v, (*prefix, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node[:2]) for p in _numeric_paths(v, (*prefix, i))]
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return [prefix]
    return []


PATHS = {BASE_TEXT: _numeric_paths(BASE), SESSION_TEXT: _numeric_paths(SESSION)}


@st.composite
def extreme_documents(draw, bases=(BASE_TEXT, SESSION_TEXT)) -> str:
    """A valid recording or session with one to three numbers replaced by extreme ones."""
    base = draw(st.sampled_from(bases))
    doc = json.loads(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS[base]))
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = draw(st.sampled_from(EXTREMES) | st.floats(allow_nan=False))
    return json.dumps(doc)


def _finite_figures(value) -> None:
    """Every number in an explanation's dict is finite (None where there is none)."""
    if isinstance(value, dict):
        for v in value.values():
            _finite_figures(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _finite_figures(v)
    elif isinstance(value, float):
        assert math.isfinite(value), value


def test_the_numbers_of_the_formats_are_many():
    assert len(PATHS[BASE_TEXT]) > 60 and len(PATHS[SESSION_TEXT]) > 60


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=extreme_documents((BASE_TEXT,)))
def test_an_extreme_number_is_refused_or_every_figure_explained_from_it_is_finite(text):
    try:
        rec = recording_from_document(json.loads(text), "extreme.json")
    except ValueError as exc:  # RecordingError / SchemaError: a message naming the field
        assert str(exc).startswith("extreme.json") and "\n" not in str(exc)
        return
    gpu = device_gpu(rec.device)
    for r in rec.results:
        if r.oom or r.algorithm not in ALGORITHMS:  # PyTorch's peers have no cost model
            continue
        e = explain(r.config, [r.algorithm], gpu, {r.algorithm: r})
        _finite_figures(e.to_dict())


@pytest.mark.parametrize("value", [5e-324, 1.7976931348623157e308, 1e-310, -0.0])
def test_an_extreme_l2_bandwidth_is_refused_by_the_check(value):
    doc = json.loads(BASE_TEXT)
    doc["device"]["details"]["l2_peak_bandwidth_bytes_s"] = value
    with pytest.raises(ValueError, match="l2_peak_bandwidth_bytes_s"):
        recording_from_document(doc, "x.json")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("extreme")


@pytest.fixture
def shown_window(make_window):
    window = make_window()
    window.opened = 0
    yield window
    assert window.opened >= 60


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=extreme_documents())
def test_extreme_numbers_open_in_the_window_or_are_refused_and_no_slot_raises(
    qtbot, shown_window, scratch, text
):
    path = scratch / "extreme.json"
    path.write_text(text)
    if not open_and_wait(qtbot, shown_window, path):
        assert shown_window.banner.message.startswith("Could not open extreme.json: ")
    for i in range(shown_window.tabs.count()):
        shown_window.tabs.setCurrentIndex(i)
        qtbot.wait(5)
    shown_window.tabs.setCurrentIndex(0)
    shown_window.grab()  # paints every plot with what it holds
    shown_window.opened += 1


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=extreme_documents((BASE_TEXT,)), seq=st.sampled_from([256, 1024, 4096, 16384]))
def test_explain_of_an_extreme_recording_exits_0_or_2_with_one_line(scratch, text, seq):
    path = scratch / "explain.json"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["explain", "--seq", str(seq), "--open", str(path)])
    assert code in (0, 2), err.getvalue()
    assert "Traceback" not in err.getvalue()
    if code:
        assert err.getvalue().count("\n") == 1 and not out.getvalue()
    else:
        assert not any(w in out.getvalue() for w in ("inf", "nan"))


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=extreme_documents((BASE_TEXT, SESSION_TEXT)))
def test_render_of_an_extreme_file_writes_a_picture_or_refuses_it(qtbot, scratch, text):
    from app.launch import render_window
    from gpu.config import AttentionConfig

    path = scratch / "render.json"
    path.write_text(text)
    out = scratch / "render.png"
    out.unlink(missing_ok=True)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = render_window(AttentionConfig(seq_len=1024), open_path=str(path), out=str(out))
    assert code in (0, 2), err.getvalue()
    assert out.exists() == (code == 0)
