"""The ring recording the Ring tab's tests replay: a subset of a real GPU run (every figure as
measured). Tests read what they check from the file, so any ring recording can take its place."""

from __future__ import annotations

from pathlib import Path

from gpu.files.recording import Recording, load_recording
from gpu.results import RunResult

RING_RECORDING = Path(__file__).resolve().parent / "data" / "ring_smoke_subset.json"


def recording() -> Recording:
    return load_recording(RING_RECORDING)


def ring_results() -> list[RunResult]:
    return [r for r in recording().results if r.ring is not None and not r.oom]


def widest_ring() -> RunResult:
    """The recorded ring result with the most devices and, among those, the most events."""
    return max(ring_results(), key=lambda r: (r.ring.devices, len(r.ring.timeline)))
