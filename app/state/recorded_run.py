"""A recorded run (the JSON of `main.py bench --out`) served through the Backend interface.

The runner treats it like any backend: `run` answers from the file for a matching config and
says plainly when a config was not recorded, so a user without an NVIDIA GPU sees real GPU
numbers, labelled as recorded, and never numbers made up to fill a gap. No Qt here.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpu.algorithms import ALGORITHMS
from gpu.backend_factory import REPLAY
from gpu.backends.backend import RunOptions
from gpu.config import AttentionConfig
from gpu.errors import FileReadError, printable
from gpu.files.fileio import decode_member
from gpu.files.read_stop import check_stop
from gpu.files.recording import Recording, recording_from_members
from gpu.model.roofline import measured_clock_hz
from gpu.results import DeviceInfo, RunResult

from .family import cache_config, family, family_of
from .result_store import ResultStore
from .runs import backend_key

if TYPE_CHECKING:
    from .session import Session

#: Backends that measure now (a recording made with one can be continued on it).
LIVE_BACKENDS = ("cpu", "cuda")

#: The H200 sweep shipped with the app: what "recorded run" opens when no file was chosen.
RECORDED_DIR = Path(__file__).resolve().parents[2] / "resources" / "recorded"
SHIPPED_RECORDING = RECORDED_DIR / "h200_sweep.json"

#: Reference series measured beside ours (bench/record_run.py): id -> what the legend says.
REFERENCE_LABELS = {
    "sdpa_flash": "PyTorch SDPA flash",
    "sdpa_cudnn": "PyTorch SDPA cuDNN",
    "sdpa_math": "PyTorch SDPA math",
}
#: Tile sizes a reference (a peer's own kernel, which ignores ours) is filed under.
REFERENCE_TILES = {"block_m": 64, "block_n": 64}


def shipped_recording() -> Path | None:
    """The shipped recording, if this checkout or install has it."""
    return SHIPPED_RECORDING if SHIPPED_RECORDING.is_file() else None


def is_reference(algorithm: str) -> bool:
    """A peer measured for comparison (e.g. PyTorch SDPA), not one of our algorithms."""
    return algorithm not in ALGORITHMS


def reference_label(algorithm: str, recorded: bool = True) -> str:
    base = REFERENCE_LABELS.get(algorithm, f"{algorithm} (reference)")
    return f"{base} (recorded)" if recorded else base


def reference_config(config: AttentionConfig) -> AttentionConfig:
    """`config` as a reference result is filed: with the neutral tile sizes."""
    if (config.block_m, config.block_n) == (64, 64):
        return config
    return config.with_(**REFERENCE_TILES)


def short_date(date: str) -> str:
    """'2025-06-01T12:00:00+00:00' -> '2025-06-01' (anything else unchanged)."""
    return date[:10] if len(date) >= 10 and date[4:5] == "-" and date[7:8] == "-" else date


#: New objects a load must leave behind to be frozen out of the collector's reach (a young
#: collection over fewer takes a few milliseconds).
FREEZE_AFTER = 200_000
_collector_lock = threading.Lock()
_collector_users = 0


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a recording is built, then move what was
    built out of its reach (gc.freeze).

    Why: a recording of 60,000 results is millions of objects, and each full collection walks
    every object while holding the interpreter: during a 55 MB open they ran for 30-140 ms
    each, on the reading thread, and the GUI thread stalled as long. The results live as long
    as the recording is shown and hold no reference cycles (reference counting frees them), so
    later collections need not walk them again. Only a large load is frozen (more than
    FREEZE_AFTER new objects): the objects alive then stay out of the collector's reach for
    good, and cyclic garbage among them is never collected; for a small file the next young
    collection is quick, and nothing is frozen."""
    global _collector_users
    with _collector_lock:
        _collector_users += 1
        if _collector_users == 1:
            gc.disable()
    try:
        yield
    finally:
        with _collector_lock:
            _collector_users -= 1
            if _collector_users == 0:
                if gc.get_count()[0] > FREEZE_AFTER:
                    gc.freeze()
                gc.enable()


class NotRecorded(LookupError):
    """The recorded run holds no result for this (config, algorithm)."""


#: A file's content id and its members, raw (gpu.files.fileio.split_json_members).
FileMembers = tuple[str, dict[str, Any]]


def read_members(path: str) -> FileMembers:
    """Read a recording or session file: its content id (a hash of the bytes) and its members,
    large arrays split into pieces; SessionError for a file that is not a JSON object. A few
    long calls over the whole file, in whatever thread or process calls it."""
    from .session import parse_json_members, read_file_bytes

    raw = read_file_bytes(path)
    source_id = hashlib.blake2b(raw, digest_size=8).hexdigest()
    return source_id, parse_json_members(raw, printable(path))


#: Members read by `keep_members`, handed back one piece at a time by `take_member_piece`.
_kept: dict[str, Any] = {}

#: (member name, number of pieces, or None for a member kept whole)
MemberLayout = list[tuple[str, int | None]]


def keep_members(path: str) -> tuple[str, MemberLayout]:
    """`read_members`, keeping the members here (the compute process) and returning only the
    content id and their layout; `take_member_piece` then hands each back. A result of tens of
    MB sent back whole is unpickled in one call on the receiving process's pool thread, which
    holds the interpreter from its GUI thread for as long (about 70 ms for 60 MB); a piece of
    about a megabyte holds it for about one."""
    from gpu.files.fileio import RawArray

    _kept.clear()
    source_id, members = read_members(path)
    _kept.update(members)
    layout = [
        (key, len(value.pieces) if isinstance(value, RawArray) else None)
        for key, value in members.items()
    ]
    return source_id, layout


def take_member_piece(key: str, index: int | None) -> Any:
    """One kept member (`index` None) or one piece of a split one; each is handed back once."""
    value = _kept[key]
    if index is None:
        del _kept[key]
        return value
    if index == len(value.pieces) - 1:
        del _kept[key]
    return value.pieces[index]


def assemble_members(
    layout: MemberLayout, take: Callable[[str, int | None], Any]
) -> dict[str, Any]:
    """The members of `layout`, each asked of `take` whole or piece by piece."""
    from gpu.files.fileio import RawArray

    return {
        key: take(key, None)
        if count is None
        else RawArray(tuple(take(key, i) for i in range(count)))
        for key, count in layout
    }


class RecordedBackend:
    """Replays a results file; see the module docstring."""

    name = REPLAY

    def __init__(
        self,
        recording: Recording,
        path: str = "",
        preferred_config: AttentionConfig | None = None,
        session: Session | None = None,
        source_id: str = "",
    ) -> None:
        self.recording = recording
        self.path = path
        #: Identifies the file replayed (its contents): results of two files never mix.
        self.source_id = source_id
        #: The config to show on opening (a session's), when it has results.
        self.preferred_config = preferred_config
        #: The app.state.session.Session this replays, when opened from a session file.
        self.session = session
        # Everything the window asks of a recording is worked out here, in one pass, on the
        # thread that opened it: a recording of tens of thousands of results then costs the GUI
        # thread nothing proportional to its size. Each result's family is computed once.
        self._by_key: dict[tuple[AttentionConfig, str], RunResult] = {}
        self.store = ResultStore()
        self.key = backend_key(self.device_info())
        filed: dict[tuple[AttentionConfig, str], tuple[RunResult, AttentionConfig]] = {}
        # N of each family shown, ours (True) and peers' (False), for the config to open on.
        shown: dict[bool, dict[AttentionConfig, list[int]]] = {True: {}, False: {}}
        for i, r in enumerate(recording.results):
            if i % 1024 == 0:
                check_stop()  # a closing window stops the open here too (read_stop)
            ours = not is_reference(r.algorithm)
            if not ours:  # a peer's kernel ignores our tile sizes
                r = replace(r, config=reference_config(r.config))
            fam = family_of(r.config, r.algorithm)
            filed[(cache_config(r.config, r.algorithm), r.algorithm)] = (
                r if r.recorded else replace(r, recorded=True),
                fam,
            )
            shown[ours].setdefault(family(r.config), []).append(r.config.seq_len)
        for key, (r, fam) in filed.items():  # the window's store takes these over
            self._by_key[key] = r
            self.store.add(r, self.key, None, family=fam)
        self._families = frozenset(
            (r.algorithm, fam) for r, fam in filed.values() if not is_reference(r.algorithm)
        )
        self._seq_lens = tuple(sorted({r.config.seq_len for r in recording.results}))
        self._algorithms = tuple(dict.fromkeys(r.algorithm for r in recording.results))
        passes: dict[str, dict[str, None]] = {}
        for r in recording.results:
            passes.setdefault(r.algorithm, {})[r.config.pass_] = None
        self._passes = {a: tuple(p) for a, p in passes.items()}
        self._first_config = self._most_shown_config(shown[True] or shown[False])

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], read: Callable[[str], FileMembers] | None = None
    ) -> RecordedBackend:
        """Load and validate a recording or a saved session; raises
        gpu.files.recording.RecordingError or app.state.session.SessionError with the file and the
        cause. Called off the GUI thread; see `collector_paused` for why it pauses the garbage
        collector. `read` does the reading and splitting (`read_members`; the app runs it in its
        compute process, where its long calls over the whole file hold up no thread of the
        GUI's)."""
        with collector_paused():
            return cls._from_file(os.fspath(path), read or read_members)

    @classmethod
    def _from_file(cls, path: str, read: Callable[[str], FileMembers]) -> RecordedBackend:
        from .session import Session, SessionError

        where = printable(path)
        source_id, members = read(path)
        try:
            schema = decode_member(members.get("schema"), where)
        except FileReadError as exc:
            raise SessionError(str(exc)) from exc
        if str(schema).startswith("tilescope.session/"):
            return cls.from_session(Session.from_members(members, where), path, source_id)
        if not str(schema).startswith("tilescope.results/"):
            raise SessionError(
                f"{where} is not a Tilescope session or recorded run (schema {schema!r:.80})"
            )
        return cls(recording_from_members(members, where), path, source_id=source_id)

    @classmethod
    def from_session(
        cls, session: Session, path: str | os.PathLike[str] = "", source_id: str = ""
    ) -> RecordedBackend:
        """Replay the results a session showed, opening on the session's config."""
        return cls(session.recording(), os.fspath(path), session.config, session, source_id)

    @property
    def measured_on(self) -> str:
        """The live backend the results were measured with ("cpu", "cuda"), '' if none."""
        backend = self.recording.device.backend
        return backend if backend in LIVE_BACKENDS else ""

    @property
    def date(self) -> str:
        """When the results were measured (the recording's meta), '' if it does not say."""
        return str(self.recording.meta.get("date", ""))

    def label(self) -> str:
        """'H200, 2025-06-01': where and when, short for status lines and plot titles (each
        of which says it is a recording; the status bar names the whole device)."""
        dev = self.recording.device.name.removesuffix(" (recorded)").removeprefix("NVIDIA ")
        date = short_date(self.date)
        return f"{dev}, {date}" if date else dev

    def device_info(self) -> DeviceInfo:
        dev = self.recording.device
        details = dict(dev.details)
        details.update(
            source_id=self.source_id,
            recorded_backend=dev.backend,
            file=os.path.basename(self.path),
            recorded_date=self.date,
            recorded_command=str(self.recording.meta.get("command", "")),
        )
        # The clock the counters measured during the recording: the roofs are quoted at it
        # (worked out once: a large recording holds tens of thousands of kernels).
        if not hasattr(self, "_clock"):
            self._clock = measured_clock_hz(self.recording.results)
        clock = self._clock
        if clock is not None:
            details.update(measured_clock_hz=clock[0], measured_clock_kernels=clock[1])
        name = dev.name if dev.name.endswith("(recorded)") else f"{dev.name} (recorded)"
        return DeviceInfo(
            backend=REPLAY,
            name=name,
            memory_total_bytes=dev.memory_total_bytes,
            memory_free_bytes=dev.memory_free_bytes,
            details=details,
        )

    def algorithms(self) -> tuple[str, ...]:
        return self._algorithms

    def passes(self, algorithm: str) -> tuple[str, ...]:
        """The passes recorded for `algorithm` (forward only in files made before training)."""
        return self._passes.get(algorithm, ())

    def results(self) -> tuple[RunResult, ...]:
        return tuple(self._by_key.values())

    def seq_lens(self) -> tuple[int, ...]:
        return self._seq_lens

    def reference_algorithms(self) -> tuple[str, ...]:
        """Peers recorded beside ours (PyTorch SDPA...): drawn as reference series only."""
        return tuple(a for a in self.algorithms() if is_reference(a))

    def has_family(self, config: AttentionConfig) -> bool:
        """Whether any of our algorithms was recorded in `config`'s family (any N)."""
        return any(
            (a, family_of(config, a)) in self._families
            for a in self._algorithms
            if not is_reference(a)
        )

    def first_config(self) -> AttentionConfig | None:
        """The config the app should show on opening: a session's own config, else the
        recording's most common family."""
        return self._first_config

    def _most_shown_config(
        self, lens_by_family: dict[AttentionConfig, list[int]]
    ) -> AttentionConfig | None:
        """The preferred config if recorded, else the most common family at its median N."""
        if self.preferred_config is not None and self.has_family(self.preferred_config):
            return self.preferred_config
        if not lens_by_family:
            return None
        best = max(lens_by_family, key=lambda c: len(lens_by_family[c]))
        lens = sorted(lens_by_family[best])
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
