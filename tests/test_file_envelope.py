"""Results files and saved sessions open with the same envelope, checked by one function
(gpu/files/envelope.py): the schema first, so that a file from a newer Tilescope says so, any
other file says what it is not, and nothing else in it is read before."""

from __future__ import annotations

import pytest

from app.state.session import Session, SessionError, app_version
from gpu.errors import RecordingError
from gpu.files.envelope import read_envelope, version_number
from gpu.files.recording import recording_from_members


def test_a_schema_version_is_a_short_number_or_nothing():
    assert version_number("1") == 1 and version_number("12") == 12
    assert version_number("1x") == version_number("") == version_number("١") == -1
    assert version_number("1" * 10) == -1  # no ten-digit versions: not a version at all


def test_the_envelope_is_every_member_but_the_lists():
    members = {"schema": "tilescope.results/1", "meta": {"a": 1}, "results": [1], "traces": []}
    envelope = read_envelope(members, "f.json", "tilescope.results/1", "results file", ValueError)
    assert envelope == {"schema": "tilescope.results/1", "meta": {"a": 1}}


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ("tilescope.{kind}/2", "was written by a newer Tilescope (schema tilescope.{kind}/2)"),
        ("tilescope.{kind}/0", "is not a Tilescope {what} (schema 'tilescope.{kind}/0')"),
        ("tilescope.{kind}/x", "is not a Tilescope {what} (schema 'tilescope.{kind}/x')"),
        ("other/9", "is not a Tilescope {what} (schema 'other/9')"),
    ],
)
def test_a_recording_and_a_session_refuse_a_schema_by_the_same_rule(schema, words):
    for kind, what, read, error in (
        ("results", "results file", recording_from_members, RecordingError),
        ("session", "session", Session.from_members, SessionError),
    ):
        members = {"schema": schema.format(kind=kind), "results": []}
        with pytest.raises(error) as caught:
            read(members, "f.json")
        assert f"f.json {words.format(kind=kind, what=what)}" in str(caught.value)


def test_a_newer_session_names_the_version_that_reads_it():
    with pytest.raises(SessionError, match=rf"this version \({app_version()}\) reads"):
        Session.from_members({"schema": "tilescope.session/3"}, "f.json")
