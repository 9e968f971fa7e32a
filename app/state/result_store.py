"""Measured results, cached by (configuration, algorithm, source), and their series over N.

A source is where results come from: a live backend on one device (its key names the device),
or one recording or session file (its key names the file and its contents), so two recordings
of the same GPU never share a series, and a series is never a mix of sources.

Plain Python (no Qt), so it is testable on its own and the runner's thread never touches it: the
GUI thread adds results as they arrive and asks for series when it redraws.

Two rules keep the cache honest:
- Series are per family (app/state/family.py), and algorithms that ignore the config's tile
  sizes (naive uses cuBLAS-style GEMMs, the tensor-core kernels have their own fixed tiles) are
  cached without them, so changing the readable kernel's tiles keeps their measurements.
- A memory budget changes outcomes, so every result remembers the budget it ran under. A success
  under budget B also holds for any larger budget; an out-of-memory under B also holds for any
  smaller one. Anything else is measured again rather than guessed.
- A result remembers whether its run sampled the counters (`profiled`): while bytes are to be
  measured, a result from an unsampled run counts as missing (a sampled run whose counters
  came back empty does not: running it again would not change that).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpu.config import AttentionConfig
from gpu.results import RunResult

from .family import Family, family_of


def _covers(ran_under: int | None, wanted: int | None, oom: bool) -> bool:
    """Whether an outcome under budget `ran_under` also holds under `wanted` (None = unlimited)."""
    if ran_under == wanted:
        return True
    if oom:  # failing with more memory means failing with less
        return ran_under is None or (wanted is not None and wanted <= ran_under)
    # succeeding with less memory means succeeding with more
    return wanted is None or (ran_under is not None and ran_under <= wanted)


@dataclass(frozen=True)
class StoredResult:
    result: RunResult
    budget_bytes: int | None
    profiled: bool = False

    def holds_for(self, budget_bytes: int | None) -> bool:
        return _covers(self.budget_bytes, budget_bytes, self.result.oom)


class ResultStore:
    """RunResults by backend, family, algorithm and N; the newest outcome per budget wins."""

    def __init__(self) -> None:
        # source key -> (family, algorithm) -> N -> outcomes: a source comes and goes whole.
        self._data: dict[str, dict[tuple[Family, str], dict[int, list[StoredResult]]]] = {}

    def __len__(self) -> int:
        return sum(
            len(e)
            for series in self._data.values()
            for by_n in series.values()
            for e in by_n.values()
        )

    def add(
        self,
        result: RunResult,
        backend_key: str,
        budget_bytes: int | None = None,
        profiled: bool = False,
        family: Family | None = None,
    ) -> None:
        """Keep `result` (run under `budget_bytes`; `profiled`: its run sampled the counters),
        replacing an older outcome under the same budget. `family`: its family_of, where the
        caller has worked it out already (filing a whole recording)."""
        fam = family if family is not None else family_of(result.config, result.algorithm)
        key = (fam, result.algorithm)
        series = self._data.setdefault(backend_key, {})
        entries = series.setdefault(key, {}).setdefault(result.config.seq_len, [])
        stored = StoredResult(result, budget_bytes, profiled or bool(result.traffic))
        for i, old in enumerate(entries):
            if old.budget_bytes == budget_bytes:
                entries[i] = stored
                return
        entries.append(stored)

    def get(
        self,
        config: AttentionConfig,
        algorithm: str,
        backend_key: str,
        budget_bytes: int | None = None,
    ) -> RunResult | None:
        stored = self._stored(config, algorithm, backend_key, budget_bytes)
        return stored.result if stored is not None else None

    def _stored(
        self, config: AttentionConfig, algorithm: str, backend_key: str, budget_bytes: int | None
    ) -> StoredResult | None:
        key = (family_of(config, algorithm), algorithm)
        entries = self._data.get(backend_key, {}).get(key, {}).get(config.seq_len, ())
        return _pick(entries, budget_bytes)

    def missing(
        self,
        config: AttentionConfig,
        algorithms: Iterable[str],
        backend_key: str,
        budget_bytes: int | None = None,
        need_traffic: bool = False,
    ) -> list[str]:
        """The algorithms that still need a measurement for this config and budget;
        `need_traffic`: also those measured without sampling the counters (out of memory
        aside)."""
        out = []
        for a in algorithms:
            stored = self._stored(config, a, backend_key, budget_bytes)
            if stored is None or (need_traffic and not stored.profiled and not stored.result.oom):
                out.append(a)
        return out

    def series(
        self,
        config: AttentionConfig,
        algorithm: str,
        backend_key: str,
        budget_bytes: int | None = None,
    ) -> list[RunResult]:
        """Every N measured for config's family (any seq_len), sorted by N."""
        key = (family_of(config, algorithm), algorithm)
        by_n = self._data.get(backend_key, {}).get(key, {})
        out = []
        for n in sorted(by_n):
            picked = _pick(by_n[n], budget_bytes)
            if picked is not None:
                out.append(picked.result)
        return out

    def seq_lens(self, backend_key: str) -> list[int]:
        """Every N held for a backend, in any family (a recorded run's slider stops)."""
        found: set[int] = set()
        for by_n in self._data.get(backend_key, {}).values():
            found.update(by_n)
        return sorted(found)

    def results(self, backend_key: str | None = None) -> list[RunResult]:
        out = []
        for bk, series in self._data.items():
            if backend_key is None or bk == backend_key:
                for by_n in series.values():
                    for entries in by_n.values():
                        out.extend(s.result for s in entries)
        return out

    def entries(self) -> list[tuple[str, int | None, RunResult]]:
        """Every stored outcome as (backend key, budget it ran under, result): a session saves
        these and adds them back, so a reopened session has the same cache."""
        return [
            (bk, stored.budget_bytes, stored.result)
            for bk, series in self._data.items()
            for by_n in series.values()
            for entries in by_n.values()
            for stored in entries
        ]

    def take_over(self, other: ResultStore) -> None:
        """Hold every entry of `other` (a store filled off the GUI thread: a recording's); a
        source this store does not hold yet is taken whole, in one step whatever its size.
        `other` must not be used after."""
        for bk, theirs in other._data.items():
            mine = self._data.setdefault(bk, theirs)
            if mine is not theirs:
                for key, by_n in theirs.items():
                    mine.setdefault(key, {}).update(by_n)

    def backend_keys(self) -> list[str]:
        """Every source held: a backend (device) key, or a recording's own key."""
        return sorted(self._data)

    def detach(self, backend_key: str) -> Any:
        """Forget one source's entries and hand them back (to be freed elsewhere: a large
        recording's are many objects)."""
        return self._data.pop(backend_key, None)

    def clear(self, backend_key: str | None = None) -> None:
        if backend_key is None:
            self._data.clear()
        else:
            self._data.pop(backend_key, None)


def _pick(entries: Sequence[StoredResult], budget_bytes: int | None) -> StoredResult | None:
    exact = [s for s in entries if s.budget_bytes == budget_bytes]
    if exact:
        return exact[-1]
    for stored in reversed(entries):
        if stored.holds_for(budget_bytes):
            return stored
    return None
