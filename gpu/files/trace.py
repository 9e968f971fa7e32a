"""Real execution traces: which SM ran each thread block of a kernel, and when each phase began.

The model (gpu/model/costmodel.py, gpu/model/schedule.py) says what the kernels *should* do; a trace
records what the hardware *did*: thread 0 of every block of a tiled kernel's trace build writes
`[block, sm, phase, j, t_ns]` rows at each phase boundary (gpu/profiling/trace_record.py records
them on a GPU; `trace_from_rows` turns them into a `Trace`).

Phases of a tiled block, in order (names match the schedule's step names, so a traced phase can
be replayed as the schedule steps it covers, `PHASE_STEPS`):

    load_Q_i        block start: Q_i -> SRAM (pipelined kernel: also K_0 and S_0)
    load_K_j  (j)   K_j, V_j -> SRAM (pipelined kernel: the wait for V_j and K_{j+1})
    compute_S_ij (j) S_ij, online softmax, O_i += P_ij V_j (pipelined: P_j V_j with S_{j+1})
    store_O_i       O_i, m_i, l_i -> HBM; the block ends at `end_ns`

Naive attention runs two cuBLAS GEMMs we cannot instrument, so its trace is kernel-level:
CUDA events around each of its three kernels, one "block" per kernel (sm = -1), drawn as one
lane per kernel rather than per SM.

`%globaltimer` is a global nanosecond clock shared by all SMs (its update granularity is
hardware-dependent, about 1 µs on some GPUs), so blocks on different SMs share one time axis.

Everything here (the dataclasses, JSON, validation, downsampling, SM slots and waves) is plain
NumPy and runs anywhere, so a saved trace replays without a GPU. Files are checked against
gpu/files/schema.py's trace format (SM count, block count and time limits) before a Trace is built.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..algorithms import tile_shape
from ..config import AttentionConfig, ceil_div
from ..errors import FileReadError, SchemaError, TraceError
from ..launch import trace_phases
from ..units import fmt_ms, fmt_ns
from .fileio import atomic_write_text, read_json
from .read_stop import check_stop
from .schema import (
    BLOCK_LEVEL,
    KERNEL_LEVEL,
    NAIVE_KERNELS,
    PHASE_CODES,
    RESULTS_SCHEMA,
    ROLE_PHASES,
    TRACE_SCHEMA,
    TRACES_FILE_SCHEMA,
    TraceDoc,
    TracesFileDoc,
    check,
)

SCHEMA = TRACE_SCHEMA
FILE_SCHEMA = TRACES_FILE_SCHEMA
#: int64 words per trace row: block, sm, phase, j, t_ns.
ROW_WORDS = 5
#: Code the kernels write at a block's end (after the phase codes, PHASE_CODES).
END_CODE = trace_phases.BLOCK_PHASES[-1].code

#: The schedule steps (gpu.model.schedule.STEP_NAMES) each traced phase covers.
PHASE_STEPS: dict[str, tuple[str, ...]] = {
    "load_Q_i": ("load_Q_i",),
    "load_K_j": ("load_K_j", "load_V_j"),
    "compute_S_ij": ("compute_S_ij", "online_softmax", "accumulate_O_i"),
    "store_O_i": ("store_O_i", "store_ml"),
}

#: Role marks that belong to one key/value tile j (thinned by `Trace.downsampled`); the others
#: (load_Q_i, store_O_i, end) are kept always, as is the last P·V's turn (gemm_issue, j = T).
ROLE_TILE_PHASES = ("load_K_j", "load_V_j", "wait_K_j", "gemm_issue", "online_softmax", "wait_PV")

__all__ = [
    "BLOCK_LEVEL",
    "KERNEL_LEVEL",
    "NAIVE_KERNELS",
    "PHASE_CODES",
    "ROLE_PHASES",
    "TraceError",
]


@dataclass(frozen=True)
class RoleTrace:
    """One warp role of a warp-specialized block ("producer", "consumer 0", ...): its marks
    (name, j, t_ns) in time order, names from `ROLE_PHASES` (gpu/launch/flash_ws.py's
    TRACE_CODES)."""

    role: str
    phases: tuple[tuple[str, int, int], ...]

    @property
    def end_ns(self) -> int | None:
        return next((t for name, _j, t in reversed(self.phases) if name == "end"), None)


@dataclass(frozen=True)
class BlockTrace:
    """One thread block as the hardware ran it (or, kernel-level, one kernel).

    Times are nanoseconds from the trace's start (the earliest block start). `phases` holds
    (name, j, t_ns) marks in time order: the phase `name` of tile `j` began at `t_ns` and lasted
    until the next mark (the last one until `end_ns`). For load_Q_i and store_O_i, j is the
    block's query tile; kernel-level records have one phase named after the kernel, j = -1.
    """

    block: int  # launch index blockIdx.x + gridDim.x · blockIdx.y (kernel index when kernel-level)
    sm: int  # %smid; -1 for kernel-level records
    start_ns: int
    end_ns: int
    phases: tuple[tuple[str, int, int], ...]
    kernel: str = "flash_fwd"
    #: Warp-specialized kernels: every role's own marks; `phases` then summarizes consumer 0's
    #: (load_Q_i at the block's start, load_K_j when it waits for K_j, compute_S_ij when its
    #: GEMMs are issued, store_O_i at its epilogue), so views and replays that know only
    #: blocks keep working.
    roles: tuple[RoleTrace, ...] = ()

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def query_tile(self) -> int | None:
        """The query tile i this block computed (None for kernel-level records)."""
        if self.phases and self.phases[0][0] == "load_Q_i":
            return self.phases[0][1]
        return None

    def phase_spans(self) -> list[tuple[str, int, int, int]]:
        """(name, j, t0, t1) for every phase: each lasts until the next mark or the end."""
        out = []
        for k, (name, j, t) in enumerate(self.phases):
            t1 = self.phases[k + 1][2] if k + 1 < len(self.phases) else self.end_ns
            out.append((name, j, t, t1))
        return out


@dataclass(frozen=True)
class Trace:
    """A recorded launch: every block's SM and phase times, with the config that ran."""

    config: AttentionConfig
    algorithm: str
    device: str
    sm_count: int
    blocks: tuple[BlockTrace, ...]
    level: str = BLOCK_LEVEL
    #: CUDA-event time of the traced launch(es), for comparison with the trace's own span.
    kernel_ms: float = 0.0
    #: 0: every K/V tile's phases kept; else at most this many tiles per block (see downsampled).
    tiles_kept: int = 0
    notes: str = ""
    #: The warp roles of a warp-specialized kernel's blocks (BlockTrace.roles), else empty.
    roles: tuple[str, ...] = ()

    @property
    def span_ns(self) -> int:
        if not self.blocks:
            return 0
        return max(b.end_ns for b in self.blocks) - min(b.start_ns for b in self.blocks)

    @property
    def lane_names(self) -> tuple[str, ...]:
        """What each lane of a trace view is: the SMs, or (kernel-level) the kernels."""
        if self.level == KERNEL_LEVEL:
            return tuple(b.kernel for b in sorted(self.blocks, key=lambda b: b.block))
        return tuple(f"SM {s}" for s in range(self.sm_count))

    def label(self) -> str:
        return f"{self.algorithm} on {self.device}: {self.config.label()}"

    def block(self, block: int) -> BlockTrace:
        for b in self.blocks:
            if b.block == block:
                return b
        raise KeyError(block)

    def downsampled(self, max_tiles: int, contiguous: bool = False) -> Trace:
        """The same trace keeping the K/V phases of at most `max_tiles` tiles per block (evenly
        spaced, first and last included; with `contiguous`, the first max_tiles - 2 tiles in a
        row and the last two, so consecutive tiles, where warp roles take turns, stay whole).
        Every block, its SM, start, end, load_Q_i and store_O_i are kept: this only thins the
        marks inside a block, to keep files small."""
        if max_tiles < 2:
            raise ValueError("keep at least 2 tiles per block (the first and the last)")
        if self.level != BLOCK_LEVEL:
            return self
        blocks = []
        for b in self.blocks:
            tiles = sorted({j for name, j, _ in b.phases if name in ("load_K_j", "compute_S_ij")})
            if len(tiles) <= max_tiles:
                blocks.append(b)
                continue
            if contiguous:
                keep = set(tiles[: max_tiles - 2]) | set(tiles[-2:])
            else:
                pick = np.unique(np.round(np.linspace(0, len(tiles) - 1, max_tiles)).astype(int))
                keep = {tiles[k] for k in pick}
            phases = tuple(p for p in b.phases if p[0] in ("load_Q_i", "store_O_i") or p[1] in keep)
            last = len(tiles)  # the last P·V's turn is marked with j = T
            roles = tuple(
                RoleTrace(
                    r.role,
                    tuple(
                        p
                        for p in r.phases
                        if p[0] not in ROLE_TILE_PHASES or p[1] in keep or p[1] >= last
                    ),
                )
                for r in b.roles
            )
            blocks.append(replace(b, phases=phases, roles=roles))
        return replace(self, blocks=tuple(blocks), tiles_kept=max_tiles)

    # ---- JSON ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Compact JSON-ready form: per block [block, sm, start, end, kernel, flat phases], the
        phases as [code, j, t - start, ...] with codes indexing `phase_names`."""
        names: list[str] = []
        kernels: list[str] = []
        for b in self.blocks:
            if b.kernel not in kernels:
                kernels.append(b.kernel)
            for name, _, _ in b.phases:
                if name not in names:
                    names.append(name)
        if self.level == BLOCK_LEVEL:  # stable codes: the kernels' own
            names = list(PHASE_CODES) + [n for n in names if n not in PHASE_CODES]
        code = {n: i for i, n in enumerate(names)}
        kcode = {k: i for i, k in enumerate(kernels)}
        rows = []
        for b in self.blocks:
            flat: list[int] = []
            for name, j, t in b.phases:
                flat += [code[name], int(j), int(t - b.start_ns)]
            rows.append(
                [int(b.block), int(b.sm), int(b.start_ns), int(b.end_ns), kcode[b.kernel], flat]
            )
        out = {
            "schema": SCHEMA,
            "config": self.config.to_dict(),
            "algorithm": self.algorithm,
            "device": self.device,
            "sm_count": int(self.sm_count),
            "level": self.level,
            "kernel_ms": float(self.kernel_ms),
            "tiles_kept": int(self.tiles_kept),
            "notes": self.notes,
            "phase_names": names,
            "kernels": kernels,
            "block_fields": ["block", "sm", "start_ns", "end_ns", "kernel", "phases"],
            "blocks": rows,
        }
        if self.roles:
            out.update(self._roles_dict())
        return out

    def _roles_dict(self) -> dict[str, Any]:
        """`roles`, `role_phase_names` and `role_marks`: per block (in `blocks` order), per role
        (in `roles` order), its marks flat as [code, j, t - block start, ...]."""
        role_index = {r: k for k, r in enumerate(self.roles)}
        code = {n: k for k, n in enumerate(ROLE_PHASES)}
        marks = []
        for b in self.blocks:
            per_role: list[list[int]] = [[] for _ in self.roles]
            for r in b.roles:
                flat = per_role[role_index[r.role]]
                for name, j, t in r.phases:
                    flat += [code[name], int(j), int(t - b.start_ns)]
            marks.append(per_role)
        return {
            "roles": list(self.roles),
            "role_phase_names": list(ROLE_PHASES),
            "role_fields": ["code", "j", "t - start_ns"],
            "role_marks": marks,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "trace", path: str = "") -> Trace:
        """Inverse of `to_dict`, after checking `data` against the trace format
        (gpu/files/schema.py): anything malformed or beyond the limits raises TraceError naming
        `where` and the field."""
        if not isinstance(data, dict):
            raise TraceError(f"{where}: {path or 'a trace'} is not a JSON object")
        if data.get("schema") != SCHEMA:
            raise TraceError(
                f"{where}: {path or 'trace'} is not a Tilescope trace "
                f"(schema {data.get('schema')!r}, expected {SCHEMA!r})"
            )
        try:
            check(data, TraceDoc, where, path)
        except SchemaError as exc:
            raise TraceError(str(exc)) from exc
        return cls.from_checked(data)

    @classmethod
    def from_checked(cls, data: dict[str, Any]) -> Trace:
        """Build from a dict that passed gpu.files.schema.TraceDoc (no second check)."""
        names = data["phase_names"]
        kernels = data["kernels"]
        roles = tuple(data.get("roles") or ())
        role_names = data.get("role_phase_names") or ()
        role_marks = data.get("role_marks") or ()
        blocks = []
        for k, (block, sm, start, end, kidx, flat) in enumerate(data["blocks"]):
            if k % 4096 == 0:
                check_stop()  # a reader that goes away stops here (gpu.files.read_stop)
            phases = _unflatten(flat, names, start)
            per_role = ()
            if role_marks:
                per_role = tuple(
                    RoleTrace(role, _unflatten(marks, role_names, start))
                    for role, marks in zip(roles, role_marks[k], strict=True)
                    if marks
                )
            blocks.append(BlockTrace(block, sm, start, end, phases, kernels[kidx], per_role))
        return cls(
            config=AttentionConfig.from_dict(data["config"]),
            algorithm=data["algorithm"],
            device=data["device"],
            sm_count=data["sm_count"],
            blocks=tuple(blocks),
            level=data.get("level", BLOCK_LEVEL),
            kernel_ms=float(data.get("kernel_ms", 0.0)),
            tiles_kept=data.get("tiles_kept", 0),
            notes=data.get("notes", ""),
            roles=roles if role_marks else (),
        )


def _unflatten(flat: Sequence[int], names: Sequence[str], start: int) -> tuple:
    """[code, j, t - start, ...] -> ((name, j, t), ...)."""
    return tuple((names[flat[k]], flat[k + 1], start + flat[k + 2]) for k in range(0, len(flat), 3))


# --------------------------------------------------------------------------------------------
# Files


def traces_json(traces: Sequence[Trace], meta: dict[str, Any] | None = None) -> str:
    """A traces file: {"schema", "meta", "traces": [...]}, compact (one trace per line).
    Non-finite numbers (never valid JSON) raise ValueError."""
    head = json.dumps({"schema": FILE_SCHEMA, "meta": meta or {}}, indent=1, allow_nan=False)
    body = ",\n".join(
        json.dumps(t.to_dict(), separators=(",", ":"), allow_nan=False) for t in traces
    )
    return f'{head[:-2]},\n "traces": [\n{body}\n]}}\n'


def save_traces(
    traces: Sequence[Trace],
    path: str | os.PathLike[str],
    *,
    meta: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> None:
    """Atomic write (gpu/files/fileio.py): FileExistsError when `path` exists and not `overwrite`,
    FileWriteError when it cannot be written."""
    atomic_write_text(path, traces_json(traces, meta), overwrite=overwrite)


def load_traces(path: str | os.PathLike[str]) -> tuple[Trace, ...]:
    """Traces from a traces file, or from a results recording that carries a "traces" list.
    Any problem (unreadable, not a regular file, too large, not JSON, a field out of range)
    raises TraceError naming the file and the cause."""
    where = os.fspath(path)
    try:
        data = read_json(path)
    except FileReadError as exc:
        raise TraceError(str(exc)) from exc
    return traces_from_document(data, where)


def traces_from_document(data: Any, where: str) -> tuple[Trace, ...]:
    """The traces of a parsed traces file or results recording (checked; TraceError if bad)."""
    raw = checked_traces(data, where)
    try:
        return tuple(Trace.from_checked(t) for t in raw)
    except (TypeError, ValueError, KeyError) as exc:  # a rule the format does not express
        raise TraceError(f"{where}: malformed trace ({exc})") from exc


def checked_traces(data: Any, where: str) -> list[dict[str, Any]]:
    """The parsed traces of a traces file or results recording, checked against the format."""
    if not isinstance(data, dict) or not isinstance(data.get("traces", []), list):
        raise TraceError(f"{where} holds no traces")
    schema = data.get("schema")
    if schema not in (FILE_SCHEMA, RESULTS_SCHEMA):
        raise TraceError(f"{where} is not a Tilescope traces file (schema {schema!r})")
    raw = data.get("traces", [])
    try:
        if schema == FILE_SCHEMA:
            check(data, TracesFileDoc, where)
        else:
            check(raw, list[TraceDoc], where, "traces")
    except SchemaError as exc:
        raise TraceError(str(exc)) from exc
    return raw


# --------------------------------------------------------------------------------------------
# From the kernels' rows


def rows_per_block(config: AttentionConfig, algorithm: str) -> int:
    """Trace rows the kernel reserves per block: load_Q_i, 2 per key tile, store_O_i, end."""
    _, bn = tile_shape(config, algorithm)
    return 3 + 2 * ceil_div(config.seq_len, bn)


def expected_block_count(config: AttentionConfig, algorithm: str, level: str = BLOCK_LEVEL) -> int:
    if level == KERNEL_LEVEL:
        return len(NAIVE_KERNELS)
    bm, _ = tile_shape(config, algorithm)
    return ceil_div(config.seq_len, bm) * config.bh


def trace_from_rows(
    rows: np.ndarray,
    *,
    config: AttentionConfig,
    algorithm: str,
    device: str,
    sm_count: int,
    kernel_ms: float = 0.0,
    notes: str = "",
) -> Trace:
    """Build a Trace from the kernel's (R, 5) int64 rows; rows with a negative phase code (the
    host's fill, never written) are skipped. Rows of one block keep their written order."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1, ROW_WORDS)
    rows = rows[rows[:, 2] >= 0]
    if rows.size == 0:
        raise TraceError("the trace buffer holds no rows: the trace build did not run")
    order = np.argsort(rows[:, 0], kind="stable")
    rows = rows[order]
    t0 = int(rows[:, 4].min())
    cut = np.flatnonzero(np.diff(rows[:, 0])) + 1
    blocks = []
    for grp in np.split(rows, cut):
        ts = (grp[:, 4] - t0).tolist()
        codes = grp[:, 2].tolist()
        js = grp[:, 3].tolist()
        ends = [ts[k] for k, c in enumerate(codes) if c == END_CODE]
        phases = tuple(
            (PHASE_CODES[c], j, t) for c, j, t in zip(codes, js, ts, strict=True) if c < END_CODE
        )
        start = phases[0][2] if phases else ts[0]
        end = ends[-1] if ends else ts[-1]
        blocks.append(BlockTrace(int(grp[0, 0]), int(grp[0, 1]), start, end, phases))
    # %smid need not be contiguous (PTX ISA): lanes cover the largest id seen, at least sm_count
    lanes = max(int(sm_count), int(rows[:, 1].max()) + 1)
    return Trace(config, algorithm, device, lanes, tuple(blocks), BLOCK_LEVEL, kernel_ms, 0, notes)


def trace_from_role_rows(
    rows: Iterable[tuple[int, int, str, str, int, int]],
    *,
    config: AttentionConfig,
    algorithm: str,
    device: str,
    sm_count: int,
    roles: Sequence[str],
    kernel_ms: float = 0.0,
    notes: str = "",
) -> Trace:
    """Build a Trace from a warp-specialized kernel's decoded rows, (block, sm, role, phase, j,
    t_ns) in buffer order (`gpu.launch.flash_ws.decode_trace_rows`): each role's marks stay in their
    written (time) order. A block starts at its earliest mark and ends at its latest; its
    `phases` summarize consumer 0 (see BlockTrace.roles). `roles` names every role the kernel
    has, in order ("producer", "consumer 0", ...)."""
    by_block: dict[int, dict[str, list[tuple[str, int, int]]]] = {}
    sms: dict[int, int] = {}
    t0 = None
    for block, sm, role, phase, j, t in rows:
        by_block.setdefault(int(block), {}).setdefault(role, []).append((phase, int(j), int(t)))
        sms.setdefault(int(block), int(sm))
        t0 = int(t) if t0 is None else min(t0, int(t))
    if t0 is None:
        raise TraceError("the trace buffer holds no rows: the trace build did not run")
    order = {r: k for k, r in enumerate(roles)}
    unknown = sorted({r for marks in by_block.values() for r in marks} - set(order))
    if unknown:
        raise TraceError(f"rows name roles {unknown} outside {list(roles)}")
    blocks = []
    for block in sorted(by_block):
        marks = by_block[block]
        role_traces = tuple(
            RoleTrace(r, tuple((name, j, t - t0) for name, j, t in marks[r]))
            for r in sorted(marks, key=order.__getitem__)
        )
        times = [t for rt in role_traces for _n, _j, t in rt.phases]
        start, end = min(times), max(times)
        blocks.append(
            BlockTrace(
                block, sms[block], start, end, _summary(role_traces, start), roles=role_traces
            )
        )
    lanes = max(int(sm_count), max(sms.values()) + 1)
    return Trace(
        config, algorithm, device, lanes, tuple(blocks), BLOCK_LEVEL, kernel_ms, 0, notes,
        tuple(roles),
    )  # fmt: skip


def _summary(roles: Sequence[RoleTrace], start: int) -> tuple[tuple[str, int, int], ...]:
    """A role block's `phases` from consumer 0's marks (the first consumer present)."""
    q_tile = next((j for r in roles for name, j, _t in r.phases if name == "load_Q_i"), 0)
    consumer = next((r for r in roles if r.role.startswith("consumer")), None)
    out = [("load_Q_i", q_tile, start)]
    if consumer is None:
        return tuple(out)
    tiles = {j for name, j, _t in consumer.phases if name == "wait_K_j"}
    for name, j, t in consumer.phases:
        if name == "wait_K_j":
            out.append(("load_K_j", j, t))
        elif name == "gemm_issue" and j in tiles:  # j = T is the last P·V: part of tile T-1
            out.append(("compute_S_ij", j, t))
        elif name == "store_O_i":
            out.append(("store_O_i", j, t))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Validation


def _coverage_problems(trace: Trace) -> list[str]:
    want = expected_block_count(trace.config, trace.algorithm, trace.level)
    ids = sorted(b.block for b in trace.blocks)
    if ids == list(range(want)):
        return []
    seen = set(ids)
    missing = [b for b in range(want) if b not in seen]
    extra = sorted(b for b in seen if not 0 <= b < want)
    return [
        f"{len(ids)} block records for {want} blocks: {len(missing)} missing "
        f"{missing[:5]}, {len(ids) - len(seen)} repeated, {len(extra)} out of range {extra[:5]}"
    ]


def _order_problems(trace: Trace, limit: int) -> list[str]:
    out: list[str] = []
    if trace.level == KERNEL_LEVEL:
        ordered = sorted(trace.blocks, key=lambda b: b.block)
        if tuple(b.kernel for b in ordered) != NAIVE_KERNELS:
            out.append(f"kernels {[b.kernel for b in ordered]} are not {list(NAIVE_KERNELS)}")
        prev_end = None
        for b in ordered:
            if b.end_ns < b.start_ns:
                out.append(f"kernel {b.kernel} ends before it starts")
            if prev_end is not None and b.start_ns < prev_end:
                out.append(f"kernel {b.kernel} starts before the previous one ended")
            prev_end = b.end_ns
        return out[:limit]
    for b in trace.blocks:
        if len(out) >= limit:
            break
        where = f"block {b.block}"
        if not b.phases:
            out.append(f"{where}: no phases")
            continue
        if b.sm < 0:
            out.append(f"{where}: no SM id ({b.sm})")
        names = [p[0] for p in b.phases]
        if names[0] != "load_Q_i":
            out.append(f"{where}: first phase is {names[0]}, not load_Q_i")
        if names[-1] != "store_O_i":
            out.append(f"{where}: last phase is {names[-1]}, not store_O_i")
        ts = [p[2] for p in b.phases]
        if any(t1 < t0 for t0, t1 in itertools.pairwise(ts)):
            out.append(f"{where}: phase times go backwards")
        if ts[0] < b.start_ns or b.end_ns < ts[-1]:
            out.append(f"{where}: phases outside [start, end]")
        tiles = [p[1] for p in b.phases[1:-1]]
        if any(j1 < j0 for j0, j1 in itertools.pairwise(tiles)):
            out.append(f"{where}: key tiles out of order")
        for r in b.roles:
            rts = [p[2] for p in r.phases]
            if any(t1 < t0 for t0, t1 in itertools.pairwise(rts)):
                out.append(f"{where}, {r.role}: mark times go backwards")
            if rts and (rts[0] < b.start_ns or b.end_ns < rts[-1]):
                out.append(f"{where}, {r.role}: marks outside [start, end]")
    return out[:limit]


def trace_problems(trace: Trace, limit: int = 10) -> list[str]:
    """What is wrong with a trace (empty when nothing): missing or repeated blocks, a block with
    no SM id, phases out of time order or not starting with load_Q_i / ending with store_O_i."""
    return (_coverage_problems(trace) + _order_problems(trace, limit))[:limit]


def covers_every_block_once(trace: Trace) -> bool:
    """Every block of the launch (every kernel, kernel-level) has exactly one record."""
    return not _coverage_problems(trace)


def phases_ordered(trace: Trace) -> bool:
    """Times never go backwards; a block starts with load_Q_i and ends with store_O_i (kernels
    run gemm_qk, softmax, gemm_pv one after the other)."""
    return not _order_problems(trace, limit=1)


# --------------------------------------------------------------------------------------------
# Layout: SM slots and waves


@dataclass(frozen=True)
class TraceLayout:
    """Per block (in `trace.blocks` order): its lane, its slot within the lane (blocks resident
    on one SM at the same time get different slots), and its wave (the how-manieth block that
    slot ran). Arrays, so a view can draw thousands of blocks quickly."""

    lane: np.ndarray
    slot: np.ndarray
    wave: np.ndarray
    start: np.ndarray
    end: np.ndarray
    slots: int  # most blocks one SM held at once
    waves: int
    lanes: int


def block_values(trace: Trace, field: str) -> np.ndarray:
    """One int64 field of every block, in `trace.blocks` order. Made by np.fromiter over a
    generator, which runs Python between items: a million blocks never make one long call
    that holds the interpreter (np.array of a million-item list held it 100-300 ms)."""
    return np.fromiter((getattr(b, field) for b in trace.blocks), np.int64, len(trace.blocks))


def values_array(values: Sequence[float], dtype: Any) -> np.ndarray:
    """`values` as an array, converted a slice at a time (see `block_values`)."""
    step = 1 << 16
    parts = [np.asarray(values[i : i + step], dtype=dtype) for i in range(0, len(values), step)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def layout(trace: Trace) -> TraceLayout:
    n = len(trace.blocks)
    start = block_values(trace, "start_ns")
    end = block_values(trace, "end_ns")
    if trace.level == KERNEL_LEVEL:
        lane = block_values(trace, "block")
        zeros = np.zeros(n, dtype=np.int64)
        lanes = max(len(NAIVE_KERNELS), int(lane.max()) + 1 if n else 0)
        return TraceLayout(lane, zeros, zeros.copy(), start, end, 1, 1, lanes)
    lane = block_values(trace, "sm")
    slot = np.zeros(n, dtype=np.int64)
    wave = np.zeros(n, dtype=np.int64)
    order = np.lexsort((end, start, lane))
    free_at: dict[int, list[int]] = {}  # lane -> end time of each slot's current block
    count: dict[int, list[int]] = {}
    for k in order.tolist():
        ends = free_at.setdefault(int(lane[k]), [])
        runs = count.setdefault(int(lane[k]), [])
        s = next((i for i, e in enumerate(ends) if e <= start[k]), len(ends))
        if s == len(ends):
            ends.append(0)
            runs.append(0)
        ends[s] = int(end[k])
        slot[k] = s
        wave[k] = runs[s]
        runs[s] += 1
    slots = max((len(v) for v in free_at.values()), default=1)
    waves = int(wave.max()) + 1 if n else 0
    # %smid need not be contiguous (PTX ISA): lanes cover the largest id seen, at least sm_count
    lanes = max(trace.sm_count, int(lane.max()) + 1 if n else 0, 1)
    return TraceLayout(lane, slot, wave, start, end, slots, waves, lanes)


@dataclass(frozen=True)
class Occupancy:
    """How many blocks ran over time, for any number of time bins, in O(bins · log blocks):
    the blocks' starts and ends sorted once (`occupancy`, O(blocks · log blocks)), with their
    running sums. The busy time up to t is Σ over started blocks of (t − start) minus Σ over
    ended blocks of (t − end), so a bin's busy time is that at its right edge minus that at
    its left, and no array of blocks × bins is ever made (at a million blocks it was 62 s and
    gigabytes)."""

    starts: np.ndarray  # sorted, float64
    ends: np.ndarray  # sorted, float64
    start_sums: np.ndarray  # running sums of `starts`, a leading 0
    end_sums: np.ndarray
    t0: float
    t1: float

    def busy_until(self, t: np.ndarray) -> np.ndarray:
        """Block-nanoseconds run before each time of `t`."""
        ns = np.searchsorted(self.starts, t, side="right")
        ne = np.searchsorted(self.ends, t, side="right")
        return (ns * t - self.start_sums[ns]) - (ne * t - self.end_sums[ne])

    def per_bin(self, bins: int) -> np.ndarray:
        """Blocks running in each of `bins` equal bins from the first start to the last end
        (the average over the bin)."""
        if bins <= 0 or self.starts.size == 0:
            return np.zeros(max(0, bins))
        edges = np.linspace(self.t0, self.t1, bins + 1)
        return np.diff(self.busy_until(edges)) / (edges[1] - edges[0])


def occupancy(start: np.ndarray, end: np.ndarray) -> Occupancy:
    """The Occupancy of blocks running from `start` to `end` (ns)."""
    starts = np.sort(np.asarray(start, dtype=np.float64))
    ends = np.sort(np.asarray(end, dtype=np.float64))
    t0 = float(starts[0]) if starts.size else 0.0
    t1 = max(float(ends[-1]), t0 + 1) if ends.size else 1.0
    zero = np.zeros(1)
    return Occupancy(
        starts, ends, np.concatenate([zero, np.cumsum(starts)]),
        np.concatenate([zero, np.cumsum(ends)]), t0, t1,
    )  # fmt: skip


def active_blocks(trace: Trace, bins: int) -> np.ndarray:
    """Blocks running in each of `bins` equal time bins (average over the bin): the waves and
    the tail of the launch at a glance."""
    if not trace.blocks or bins <= 0:
        return np.zeros(max(0, bins))
    return occupancy(block_values(trace, "start_ns"), block_values(trace, "end_ns")).per_bin(bins)


def summarize(traces: Iterable[Trace]) -> list[str]:
    """One line per trace: blocks, SMs used, span vs event time, waves."""
    lines = []
    for t in traces:
        lay = layout(t)
        used = len({b.sm for b in t.blocks}) if t.level == BLOCK_LEVEL else 0
        lines.append(
            f"{t.algorithm:10s} {t.level:6s} blocks={len(t.blocks):5d} sms_used={used:3d} "
            f"slots/SM={lay.slots} waves={lay.waves} span={fmt_ns(t.span_ns)} "
            f"events={fmt_ms(t.kernel_ms)} ok={covers_every_block_once(t) and phases_ordered(t)}"
        )
    return lines
