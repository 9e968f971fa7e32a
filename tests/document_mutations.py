"""Random JSON documents built from the recording and session formats by mutating types, ranges
and nesting: what the loaders, the window's File ▸ Open and `render --open` are fed by the
property tests. Each document is a small valid file (two measured results, an out-of-memory
result, a reference peer and a real trace) with one to three mutations: a value replaced by
junk (wrong type, out of range, NaN, 400-digit integers, 3000-deep nesting), a key deleted, or
a key or list item added."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from app.state.session import make_session
from gpu.config import AttentionConfig
from gpu.files.recording import recording_from_document
from gpu.files.trace import trace_from_rows
from tests.trace_fakes import fake_rows

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "resources" / "recorded" / "h200_sweep.json"
DEEP = "\x00deep\x00"  # replaced by 3000 nested lists after encoding

# One profile for every run of the suite (600 files: about 15 s per test on a 2-core machine),
# one for a longer hunt: HYPOTHESIS_PROFILE=long (bench/adversarial.py mutates thousands more).
settings.register_profile(
    "files", max_examples=600, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "files-long", max_examples=50_000, deadline=None, suppress_health_check=list(HealthCheck)
)
FILES = settings.get_profile(
    "files-long" if os.environ.get("HYPOTHESIS_PROFILE") == "long" else "files"
)


def _base_recording() -> dict:
    """A small valid recording: two measured results, an OOM result, a reference peer and a
    real trace (its first two blocks' worth of structure is what mutations reach)."""
    data = json.loads(SHIPPED.read_text())
    results = data["results"]
    oom = next(r for r in results if r["oom"])
    peer = next(r for r in results if r["algorithm"].startswith("sdpa"))
    data["results"] = [results[0], results[1], oom, peer]
    config = AttentionConfig(seq_len=256, heads=1)
    trace = trace_from_rows(
        fake_rows(config, "tiled", sm_count=8), config=config, algorithm="tiled",
        device="fake", sm_count=8,
    )  # fmt: skip
    data["traces"] = [trace.to_dict()]
    return data


def _base_session(recording: dict) -> dict:
    """A small valid session of that recording, as File ▸ Save session writes it: its results
    shown (under a replay key), one result of another backend with a budget, the controls."""
    rec = recording_from_document(recording, "base")
    shown = "replay:NVIDIA H200 (recorded)@0123456789abcdef"
    entries = [(shown, None, r) for r in rec.results]
    entries.append(("cpu:a test CPU", 2 * 10**9, rec.results[0]))
    controls = {
        "algorithms": ["naive", "tiled"],
        "backend": "recorded",
        "recorded_path": str(SHIPPED),
        "budget": "device",
        "custom_gb": 16.0,
        "theme": "dark",
    }
    session = make_session(
        rec.results[0].config, controls, entries, shown, rec.device, rec.meta, rec.traces
    )
    return session.to_dict()


BASE = _base_recording()
BASE_TEXT = json.dumps(BASE)
SESSION = _base_session(BASE)
SESSION_TEXT = json.dumps(SESSION)


def _paths(node, prefix=()) -> list[tuple]:
    """Every place in a document a mutation can reach (the first two items of each list)."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:2]):
            out += _paths(v, (*prefix, i))
    return out


PATHS = {BASE_TEXT: _paths(BASE), SESSION_TEXT: _paths(SESSION)}

junk_values = st.one_of(
    st.sampled_from(
        [None, True, False, "", "12", "fp8", -1, 0, 1, -1.5, 0.0, 2**63, 10**400, -(10**400),
         1e308, float("nan"), float("inf"), float("-inf"), [], {}, [1, "a"], {"a": 1}, DEEP]
    ),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
)  # fmt: skip


@st.composite
def mutated_documents(draw, bases: tuple[str, ...] = (BASE_TEXT,)) -> str:
    """JSON text: one of `bases` (BASE_TEXT, SESSION_TEXT) with one to three mutations."""
    base = draw(st.sampled_from(bases))
    doc = json.loads(base)  # a fresh copy, much faster than deepcopy
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS[base]))
        parent, key = _locate(doc, path)
        if parent is None:
            continue
        how = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
        value = copy.deepcopy(draw(junk_values))  # a fresh object: no shared or circular parts
        if how == "replace":
            parent[key] = value
        elif how == "delete":
            del parent[key]
        elif isinstance(parent[key], dict):
            parent[key][draw(st.text(min_size=1, max_size=6))] = value
        else:
            parent[key] = [parent[key], value]
    text = json.dumps(doc)  # NaN and Infinity become the literals some writers emit
    return text.replace(json.dumps(DEEP), "[" * 3000 + "]" * 3000)


def _locate(doc, path):
    """(container, key) of `path` in `doc`, or (None, None) when an earlier mutation moved it."""
    node = doc
    try:
        for k in path[:-1]:
            node = node[k]
        if not path or not isinstance(node, (dict, list)):
            return None, None
        node[path[-1]]
    except (KeyError, IndexError, TypeError):
        return None, None
    return node, path[-1]
