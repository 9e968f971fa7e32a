"""A recorded run (the JSON of `main.py bench --out`) served through the Backend interface.

The runner treats it like any backend: `run` answers from the file for a matching config and
says plainly when a config was not recorded, so a user without an NVIDIA GPU sees real GPU
numbers, labelled as recorded, and never numbers made up to fill a gap. No Qt here.
"""

from __future__ import annotations

import os
from dataclasses import replace

from gpu.backend import RunOptions
from gpu.config import AttentionConfig
from gpu.recording import Recording, load_recording
from gpu.results import DeviceInfo, RunResult

from .result_store import cache_config

REPLAY = "replay"


class NotRecorded(LookupError):
    """The recorded run holds no result for this (config, algorithm)."""


class RecordedBackend:
    """Replays a results file; see the module docstring."""

    name = REPLAY

    def __init__(self, recording: Recording, path: str = "") -> None:
        self.recording = recording
        self.path = path
        self._by_key: dict[tuple[AttentionConfig, str], RunResult] = {}
        for r in recording.results:
            self._by_key[(cache_config(r.config, r.algorithm), r.algorithm)] = replace(
                r, recorded=True
            )

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> RecordedBackend:
        """Load and validate; raises gpu.recording.RecordingError with the file and the cause."""
        return cls(load_recording(path), os.fspath(path))

    def device_info(self) -> DeviceInfo:
        dev = self.recording.device
        details = dict(dev.details)
        details.update(recorded_backend=dev.backend, file=os.path.basename(self.path))
        return DeviceInfo(
            backend=REPLAY,
            name=f"{dev.name} (recorded)",
            memory_total_bytes=dev.memory_total_bytes,
            memory_free_bytes=dev.memory_free_bytes,
            details=details,
        )

    def algorithms(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for r in self.recording.results:
            seen.setdefault(r.algorithm)
        return tuple(seen)

    def results(self) -> tuple[RunResult, ...]:
        return tuple(self._by_key.values())

    def seq_lens(self) -> tuple[int, ...]:
        return tuple(sorted({r.config.seq_len for r in self.recording.results}))

    def first_config(self) -> AttentionConfig | None:
        """The config the app should show on opening: the recording's most common family."""
        if not self.recording.results:
            return None
        counts: dict[AttentionConfig, int] = {}
        for r in self.recording.results:
            fam = r.config.with_(seq_len=1)
            counts[fam] = counts.get(fam, 0) + 1
        best = max(counts, key=lambda c: counts[c])
        lens = sorted(
            r.config.seq_len for r in self.recording.results if r.config.with_(seq_len=1) == best
        )
        return best.with_(seq_len=lens[len(lens) // 2])

    def run(
        self, config: AttentionConfig, algorithm: str, options: RunOptions | None = None
    ) -> RunResult:
        found = self._by_key.get((cache_config(config, algorithm), algorithm))
        if found is None:
            raise NotRecorded(
                f"{algorithm} at {config.label()} is not in the recorded run "
                f"{os.path.basename(self.path) or ''}".rstrip()
            )
        return found
