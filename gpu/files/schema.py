"""The file formats, checked field by field before anything is built from them.

Recorded runs and `bench --out` (``tilescope.results/1``), the results, devices and configs
inside them and inside saved sessions, and execution traces (``tilescope.trace/1``, alone or in
a ``tilescope.traces/1`` file) are described here once, as msgspec types with ranges. Every
loader runs the check before building a dataclass, so a file with a time as a string, a NaN,
a negative byte count, an integer of 400 digits, an SM id of a million or a trace labelled
kernel-level that holds thousands of blocks is refused with one line naming the field's path
(``results[3].kernel_times[0].ms``), and never reaches a plot or a slot.

Unknown fields are tolerated and ignored, so a file written by a later version that adds an
optional field still opens. To check a new field of RunResult (gpu/results.py), add it to
`ResultDoc` below with its type, range and a default; a field of KernelTime goes in
`KernelTimeDoc`, of DeviceInfo in `DeviceDoc`. A result is built from the checked dict with
only the keys its dataclass has (`result_from_checked`), so a field can be added to the
dataclass and here in either order (a test fails while a dataclass field is unchecked).

For callers with parsed JSON (a session's parts): `check_config` and `check_result` check and
build, raising SchemaError; `check(data, Doc, where)` checks against any document type.
`finite_result` makes a result writable (no NaN).

Limits a file must respect (stated in messages and in `main.py bench --help`):
`MAX_SM_COUNT` SMs, `MAX_TRACE_BLOCKS` blocks per trace, times up to `MAX_TRACE_NS` ns in a
trace and `MAX_MS` ms per kernel, counts (bytes, FLOPs) up to `MAX_COUNT`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta

from ..algorithms import tile_shape
from ..config import (
    BATCH_MAX,
    BATCH_MIN,
    DTYPE_BYTES,
    HEAD_DIM_MAX,
    HEAD_DIM_MIN,
    HEADS_MAX,
    HEADS_MIN,
    NEW_TOKENS_MAX,
    NEW_TOKENS_MIN,
    PASS_KEY,
    PASSES,
    SEQ_LEN_MAX,
    SEQ_LEN_MIN,
    TILE_CHOICES,
    AttentionConfig,
    ConfigError,
    ceil_div,
)
from ..errors import FileReadError, SchemaError
from ..launch import trace_phases
from ..results import STRIP_MAX_POINTS, DeviceInfo, KernelTime, KernelTraffic, RunResult
from .fileio import RawArray, RawObject, decode_member
from .read_stop import check_stop

RESULTS_SCHEMA = "tilescope.results/1"
TRACE_SCHEMA = "tilescope.trace/1"
TRACES_FILE_SCHEMA = "tilescope.traces/1"

#: Trace levels: one record per thread block, or (naive: cuBLAS cannot be instrumented) one
#: record per kernel.
BLOCK_LEVEL, KERNEL_LEVEL = "block", "kernel"
#: Phase codes written by the tiled kernels' trace build (index = code; trace.cuh's BlockPhase
#: without its last code, `end`).
PHASE_CODES: tuple[str, ...] = tuple(p.name for p in trace_phases.BLOCK_PHASES[:-1])
#: The kernels of a kernel-level (naive) trace, in launch order.
NAIVE_KERNELS: tuple[str, ...] = ("gemm_qk", "softmax", "gemm_pv")
#: Marks of a warp-specialized kernel's roles (index = the kernel's code, trace.cuh's
#: RolePhase): what a producer or consumer warpgroup was doing from that moment on.
ROLE_PHASES: tuple[str, ...] = tuple(p.name for p in trace_phases.ROLE_PHASES)
#: Role names a trace may use: the producer and consumer warpgroups 0 .. MAX_ROLES - 2.
ROLE_NAMES: tuple[str, ...] = ("producer", *(f"consumer {c}" for c in range(7)))

# ----------------------------------------------------------------------------------- limits

#: Most SMs a trace may have: today's largest GPUs have under 200; a view draws one lane each.
MAX_SM_COUNT = 1024
#: Most thread blocks one trace may hold (N=131072, h=96 with 64-row tiles is 196,608).
MAX_TRACE_BLOCKS = 1 << 20
#: Latest time in a trace, ns from its start: 2^53 (104 days), exact as a float and far inside
#: int64 when a block's start and a phase's offset are added.
MAX_TRACE_NS = 1 << 53
#: Longest kernel time in a result, ms (11.6 days).
MAX_MS = 1e9
#: Shortest kernel time in a result, ms (a picosecond: clocks resolve nanoseconds). A time
#: closer to zero is no measurement, and a rate derived from it (TFLOP/s) is not finite.
MIN_MS = 1e-9
#: Largest byte or FLOP count: the largest config (B=1024, h=256, N=2^20, d=256) needs ~3e20
#: FLOPs, so anything beyond 10^24 is corrupt.
MAX_COUNT = 10**24
INT64_MAX = 2**63 - 1
#: Most warp roles a warp-specialized trace may have per block (a producer and 7 consumers).
MAX_ROLES = len(ROLE_NAMES)
#: Most marks one role may leave in one block (its kernel writes 4 per key tile plus a few).
MAX_ROLE_MARKS = 1 << 18
#: Longest free text (a message, notes) and longest name (algorithm, device, kernel).
MAX_TEXT, MAX_NAME = 1 << 20, 256
#: Most GPUs a result may span (ring attention).
MAX_DEVICES = 1 << 16
#: Deepest nesting inside free-form objects (a recording's meta, a device's details): they are
#: written back with an indented JSON writer that recurses once per level.
MAX_FREE_FORM_DEPTH = 32

Name = Annotated[str, Meta(min_length=1, max_length=MAX_NAME)]
Text = Annotated[str, Meta(max_length=MAX_TEXT)]
Ms = Annotated[float, Meta(ge=MIN_MS, le=MAX_MS)]
#: Largest float a result may hold (a rate, an error, a counter sample): far above any measured
#: quantity in its unit, and small enough that the sums, products and logarithms the plots and
#: verdicts take of it stay finite (1.8e308 overflowed them).
MAX_FLOAT = 1e30
#: A float >= 0 and <= MAX_FLOAT (NaN and infinity fail the bounds).
NonNegative = Annotated[float, Meta(ge=0.0, le=MAX_FLOAT)]
#: A bandwidth a device or link may have, B/s: 1 MB/s to 10 PB/s (an H200's L2 moves about
#: 15 TB/s). Beyond them a roofline or a modeled time drawn from it is not finite (5e-324 B/s
#: made every time infinite).
MIN_BANDWIDTH, MAX_BANDWIDTH = 1e6, 1e16
Bandwidth = Annotated[float, Meta(ge=MIN_BANDWIDTH, le=MAX_BANDWIDTH)]
#: Shared memory a block may have, bytes (today's GPUs: 227 KiB).
MAX_SMEM_BYTES = 1 << 30
#: Bytes of memory: fits int64 (checked natively).
Bytes = Annotated[int, Meta(ge=0, le=INT64_MAX)]
#: Bytes or FLOPs a model counts: >= 0 here, <= MAX_COUNT in `_Doc.__post_init__`.
Count = Annotated[int, Meta(ge=0)]
Repeats = Annotated[int, Meta(ge=0, le=1 << 30)]


def _field_error(field: str, reason: str) -> ValueError:
    """A rule broken at `field` (a path inside the document being checked); `check` puts the
    document's own path in front of it."""
    return ValueError(f"@{field}: {reason}")


def free_form_depth(value: Any) -> int:
    """How deeply lists and objects nest in `value` (parsed JSON); 0 for a scalar."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, depth + 1)
            if depth + 1 <= MAX_FREE_FORM_DEPTH:  # deeper is refused anyway: stop counting
                stack.extend((child, depth + 1) for child in node)
    return deepest


def check_free_form(name: str, value: Any) -> None:
    """For a document type's `__post_init__`: refuse a free-form field (`name`) nested deeper
    than MAX_FREE_FORM_DEPTH (the message names the field, as every rule here does)."""
    if free_form_depth(value) > MAX_FREE_FORM_DEPTH:
        raise _field_error(name, f"nested deeper than {MAX_FREE_FORM_DEPTH} levels")


def _config_default(name: str) -> Any:
    return AttentionConfig.__dataclass_fields__[name].default


class _Doc(msgspec.Struct):
    """Base of every document type: counts (ints without a native bound) stay <= MAX_COUNT."""

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if type(value) is int and value > MAX_COUNT:
                raise _field_error(
                    name, f"a {len(str(value))}-digit number, beyond the limit of 1e24"
                )


class ConfigDoc(_Doc, forbid_unknown_fields=True):
    """gpu.config.AttentionConfig; missing fields take the config's defaults (a file written
    before the training step has no "pass": it holds forward passes; one written before the
    deterministic dQ has no "deterministic": its backwards summed dQ by atomics)."""

    seq_len: Annotated[int, Meta(ge=SEQ_LEN_MIN, le=SEQ_LEN_MAX)] = _config_default("seq_len")
    heads: Annotated[int, Meta(ge=HEADS_MIN, le=HEADS_MAX)] = _config_default("heads")
    head_dim: Annotated[int, Meta(ge=HEAD_DIM_MIN, le=HEAD_DIM_MAX)] = _config_default("head_dim")
    batch: Annotated[int, Meta(ge=BATCH_MIN, le=BATCH_MAX)] = _config_default("batch")
    dtype: Literal[tuple(DTYPE_BYTES)] = _config_default("dtype")  # type: ignore[valid-type]
    causal: bool = _config_default("causal")
    block_m: Literal[TILE_CHOICES] = _config_default("block_m")  # type: ignore[valid-type]
    block_n: Literal[TILE_CHOICES] = _config_default("block_n")  # type: ignore[valid-type]
    pass_: Literal[PASSES] = msgspec.field(  # type: ignore[valid-type]
        default=_config_default("pass_"), name=PASS_KEY
    )
    deterministic: bool = _config_default("deterministic")
    kv_heads: Annotated[int, Meta(ge=HEADS_MIN, le=HEADS_MAX)] | None = None
    new_tokens: Annotated[int, Meta(ge=NEW_TOKENS_MIN, le=NEW_TOKENS_MAX)] = 1


class KernelTimeDoc(_Doc):
    """gpu.results.KernelTime: the median, and optionally the spread of the repeats."""

    name: Name
    ms: Ms
    min_ms: Ms | None = None
    max_ms: Ms | None = None
    count: Repeats = 0

    def __post_init__(self) -> None:
        if self.min_ms is not None and self.min_ms > self.ms:
            raise _field_error("min_ms", f"{self.min_ms} is above the median ms {self.ms}")
        if self.max_ms is not None and self.max_ms < self.ms:
            raise _field_error("max_ms", f"{self.max_ms} is below the median ms {self.ms}")


class TrafficStripDoc(_Doc):
    """gpu.results.TrafficStrip: one kernel's sampled counters over a launch, thinned."""

    t_us: Annotated[list[NonNegative], Meta(max_length=STRIP_MAX_POINTS)] = []
    dram_gbs: Annotated[list[NonNegative], Meta(max_length=STRIP_MAX_POINTS)] = []
    tensor_active: Annotated[list[NonNegative], Meta(max_length=STRIP_MAX_POINTS)] = []

    def __post_init__(self) -> None:
        if not len(self.t_us) == len(self.dram_gbs) == len(self.tensor_active):
            raise _field_error("t_us", "the strip's three series differ in length")
        if any(b < a for a, b in zip(self.t_us, self.t_us[1:], strict=False)):
            raise _field_error("t_us", "times must not decrease")


class KernelTrafficDoc(_Doc):
    """gpu.results.KernelTraffic: what the hardware counters saw for one kernel, per launch."""

    name: Name
    dram_read_bytes: Count
    dram_write_bytes: Count
    l2_bytes: Count
    tensor_active_cycles: Count = 0
    xu_warp_instructions: Count = 0
    elapsed_cycles: Count = 0
    window_ns: Count = 0
    sample_interval_ns: Annotated[int, Meta(gt=0, le=MAX_TRACE_NS)] = 20_000
    launches: Annotated[int, Meta(ge=1, le=1 << 30)] = 1
    strip: TrafficStripDoc | None = None


class RingEventDoc(_Doc):
    """gpu.ring_timeline.RingEvent: one interval of one device's compute or comm stream."""

    device: Annotated[int, Meta(ge=0, lt=MAX_DEVICES)]
    step: Annotated[int, Meta(ge=0, lt=MAX_DEVICES)]
    stream: Literal["compute", "comm"]
    start_ms: Annotated[float, Meta(ge=-MAX_MS, le=MAX_MS)]
    end_ms: Annotated[float, Meta(ge=-MAX_MS, le=MAX_MS)]
    bytes: Bytes = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.end_ms < self.start_ms:
            raise _field_error("end_ms", f"{self.end_ms} is before start_ms {self.start_ms}")


class RingDoc(_Doc):
    """gpu.ring_timeline.RingMeasurement: how a ring run over P devices went."""

    devices: Annotated[int, Meta(ge=1, le=MAX_DEVICES)]
    layout: Literal["contiguous", "zigzag"]
    transport: Name
    kernel: Name
    device_names: Annotated[list[Name], Meta(max_length=MAX_DEVICES)] = []
    device_peak_bytes: Annotated[list[Bytes], Meta(max_length=MAX_DEVICES)] = []
    step_bytes: Bytes = 0
    link: Text = ""
    link_peak_bytes_s: Bandwidth | None = None
    timeline: Annotated[list[RingEventDoc], Meta(max_length=1 << 20)] = []
    max_abs_diff_vs_single: NonNegative | None = None
    # derived by to_dict, dropped on load
    hidden_fraction: Annotated[float, Meta(ge=0.0, le=1.0)] | None = None
    achieved_bytes_s: NonNegative | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("device_names", "device_peak_bytes"):
            if getattr(self, name) and len(getattr(self, name)) != self.devices:
                raise _field_error(
                    name, f"holds {len(getattr(self, name))} entries for {self.devices} devices"
                )
        for event in self.timeline:
            if event.device >= self.devices or event.step >= self.devices:
                raise _field_error(
                    "timeline",
                    f"an event names device {event.device} step "
                    f"{event.step} of a ring of {self.devices}",
                )


class ResultDoc(_Doc):
    """gpu.results.RunResult as `to_dict` writes it. Add new RunResult fields here."""

    config: ConfigDoc
    algorithm: Name
    backend: Name
    device: Name
    kernel_times: Annotated[list[KernelTimeDoc], Meta(max_length=1024)] = []
    peak_bytes: Bytes | None = None
    model_peak_bytes: Count = 0
    hbm_bytes: Count = 0
    flops: Count = 0
    max_abs_error: NonNegative | None = None
    oom: bool = False
    message: Text = ""
    repeats: Repeats = 0
    recorded: bool = False
    # derived by to_dict (ignored when building, but they must still be sane numbers)
    total_ms: NonNegative | None = None
    tflops: NonNegative | None = None
    # device-level memory, timing re-measurements, measured traffic, multi-GPU runs
    device_peak_bytes: Bytes | None = None
    device_used_bytes: Bytes | None = None
    remeasured: Annotated[int, Meta(ge=0, le=1000)] = 0
    traffic: Annotated[list[KernelTrafficDoc], Meta(max_length=1024)] = []
    ring: RingDoc | None = None


class DeviceDoc(_Doc):
    """gpu.results.DeviceInfo."""

    backend: Name
    name: Name
    memory_total_bytes: Bytes
    memory_free_bytes: Bytes
    details: dict[str, Any] = {}

    def __post_init__(self) -> None:
        super().__post_init__()
        check_free_form("details", self.details)
        for key, kind in _NUMERIC_DETAILS.items():
            if self.details.get(key) is not None:
                try:
                    msgspec.convert(self.details[key], kind, strict=True)
                except msgspec.ValidationError as exc:
                    raise _field_error(f"details.{key}", str(exc)) from None


#: Device details that the program computes with (the rest are shown as text): their types.
_NUMERIC_DETAILS: dict[str, Any] = {
    "copy_bandwidth_bytes_s": Bandwidth,  # a device-to-device copy, read + write bytes per s
    "l2_peak_bandwidth_bytes_s": Bandwidth,
    "l2_read_bandwidth_bytes_s": Bandwidth,
    "smem_per_block_optin_bytes": Annotated[int, Meta(gt=0, le=MAX_SMEM_BYTES)],
}


TraceNs = Annotated[int, Meta(ge=0, le=MAX_TRACE_NS)]
#: [block, sm, start_ns, end_ns, kernel index, flat phases (code, j, t - start_ns)*]
BlockRow = tuple[
    Annotated[int, Meta(ge=0, lt=MAX_TRACE_BLOCKS)],
    Annotated[int, Meta(ge=-1, lt=MAX_SM_COUNT)],
    TraceNs,
    TraceNs,
    Annotated[int, Meta(ge=0)],
    list[Annotated[int, Meta(ge=-1, le=MAX_TRACE_NS)]],
]


RoleMarks = Annotated[
    list[Annotated[int, Meta(ge=0, le=MAX_TRACE_NS)]], Meta(max_length=3 * MAX_ROLE_MARKS)
]


class TraceDoc(_Doc):
    """gpu.files.trace.Trace as `to_dict` writes it, with the rules a view relies on: every
    block on an SM the trace has, every phase code and kernel index naming an entry, every block
    with phases, block-level blocks starting with load_Q_i and holding only the kernels' phases,
    kernel-level records with no SM, tile indices inside the config's tiles.

    Optional (warp-specialized kernels, older files have none): `roles` (names from
    ROLE_NAMES, at most MAX_ROLES), `role_phase_names` (from ROLE_PHASES) and `role_marks`, one
    entry per block (in `blocks` order) holding one flat [code, j, t - start_ns, ...] list per
    role: codes name a role phase, times lie inside the block, j inside the config's tiles (the
    last P·V's turn is j = the key tile count)."""

    schema: Literal[TRACE_SCHEMA]  # type: ignore[valid-type]
    config: ConfigDoc
    algorithm: Name
    device: Name
    sm_count: Annotated[int, Meta(ge=1, le=MAX_SM_COUNT)]
    phase_names: Annotated[list[Name], Meta(max_length=64)]
    kernels: Annotated[list[Name], Meta(min_length=1, max_length=64)]
    blocks: Annotated[list[BlockRow], Meta(min_length=1, max_length=MAX_TRACE_BLOCKS)]
    level: Literal[BLOCK_LEVEL, KERNEL_LEVEL] = BLOCK_LEVEL  # type: ignore[valid-type]
    kernel_ms: Annotated[float, Meta(ge=0.0, le=MAX_MS)] = 0.0
    tiles_kept: Repeats = 0
    notes: Text = ""
    block_fields: list[str] = []
    roles: Annotated[list[Name], Meta(max_length=MAX_ROLES)] = []
    role_phase_names: Annotated[list[Name], Meta(max_length=64)] = []
    role_fields: list[str] = []
    role_marks: Annotated[
        list[Annotated[list[RoleMarks], Meta(max_length=MAX_ROLES)]],
        Meta(max_length=MAX_TRACE_BLOCKS),
    ] = []

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_block_times()
        if self.level == KERNEL_LEVEL:
            self._check_kernel_level()
        else:
            self._check_block_level()
        if self.role_marks or self.roles:
            self._check_roles()

    def _check_block_times(self) -> None:
        """Every block ends no earlier than it starts, its phases begin within it, and no block
        id appears twice (a view keys its lanes and its detail on them)."""
        seen: set[int] = set()
        for k, (block, _, start, end, _, flat) in enumerate(self.blocks):
            if end < start:
                raise _field_error(f"blocks[{k}]", f"ends at {end} ns, before it starts ({start})")
            offsets = flat[2::3]
            if offsets and max(offsets) > end - start:
                raise _field_error(f"blocks[{k}]", "a phase begins after its block's end")
            if block in seen:
                raise _field_error(f"blocks[{k}]", f"block {block} appears twice")
            seen.add(block)

    def _check_roles(self) -> None:
        if self.level != BLOCK_LEVEL:
            raise _field_error("roles", "only block-level traces have warp roles")
        bad = [r for r in self.roles if r not in ROLE_NAMES]
        if bad or len(set(self.roles)) != len(self.roles) or not self.roles:
            raise _field_error(
                "roles", f"{self.roles} must be distinct names among {', '.join(ROLE_NAMES)}"
            )
        unknown = [n for n in self.role_phase_names if n not in ROLE_PHASES]
        if unknown:
            raise _field_error(
                "role_phase_names", f"{unknown[0]!r} is not one of {', '.join(ROLE_PHASES)}"
            )
        if len(self.role_marks) != len(self.blocks):
            raise _field_error(
                "role_marks",
                f"{len(self.role_marks)} entries for {len(self.blocks)} blocks (one per block)",
            )
        bm, bn = tile_shape(self.config_value(), self.algorithm)
        most = max(ceil_div(self.config.seq_len, bm), ceil_div(self.config.seq_len, bn))
        codes = len(self.role_phase_names)
        for k, (per_role, block) in enumerate(zip(self.role_marks, self.blocks, strict=True)):
            if len(per_role) != len(self.roles):
                raise _field_error(
                    f"role_marks[{k}]", f"{len(per_role)} lists for {len(self.roles)} roles"
                )
            span = block[3] - block[2]
            for r, flat in enumerate(per_role):
                where = f"role_marks[{k}][{r}]"
                if len(flat) % 3:
                    raise _field_error(where, "marks must be (code, tile, time) triples")
                if not flat:
                    continue
                if max(flat[0::3]) >= codes:
                    raise _field_error(where, f"phase code outside 0..{codes - 1}")
                if max(flat[1::3]) > most:
                    raise _field_error(where, f"tile index outside 0..{most}")
                if max(flat[2::3]) > span:
                    raise _field_error(where, "a mark lies after its block's end")

    def _check_kernel_level(self) -> None:
        if len(self.blocks) > len(self.kernels):
            raise _field_error(
                "blocks",
                f"a kernel-level trace holds one record per kernel: {len(self.blocks)} records "
                f"for {len(self.kernels)} kernels (a block trace labelled kernel-level?)",
            )
        for k, (block, sm, _, _, kidx, flat) in enumerate(self.blocks):
            if sm != -1:
                raise _field_error(f"blocks[{k}]", f"a kernel-level record has SM -1, not {sm}")
            if block >= len(self.kernels) or kidx >= len(self.kernels):
                raise _field_error(
                    f"blocks[{k}]",
                    f"kernel {max(block, kidx)} of a trace with {len(self.kernels)} kernels",
                )
            self._check_phases(k, flat)

    def _check_block_level(self) -> None:
        try:
            bm, bn = tile_shape(self.config_value(), self.algorithm)
        except KeyError:
            raise _field_error(
                "algorithm", f"{self.algorithm!r} has no block-level trace"
            ) from None
        q_tiles = ceil_div(self.config.seq_len, bm)
        kv_tiles = ceil_div(self.config.seq_len, bn)
        max_block = q_tiles * self.config.batch * self.config.heads
        unknown = [n for n in self.phase_names if n not in PHASE_CODES]
        if unknown:
            raise _field_error(
                "phase_names", f"{unknown[0]!r} is not one of {', '.join(PHASE_CODES)}"
            )
        first = self.phase_names.index(PHASE_CODES[0]) if PHASE_CODES[0] in self.phase_names else -1
        for k, (block, sm, _, _, kidx, flat) in enumerate(self.blocks):
            if not 0 <= sm < self.sm_count:
                raise _field_error(
                    f"blocks[{k}]",
                    f"ran on SM {sm}, outside 0..{self.sm_count - 1} "
                    f"(the trace's sm_count is {self.sm_count})",
                )
            if block >= max_block:
                raise _field_error(
                    f"blocks[{k}]", f"block {block}, but the config launches {max_block} blocks"
                )
            if kidx >= len(self.kernels):
                raise _field_error(f"blocks[{k}]", f"kernel index {kidx} of {len(self.kernels)}")
            self._check_phases(k, flat)
            if flat[0] != first:
                raise _field_error(f"blocks[{k}]", f"the first phase must be {PHASE_CODES[0]}")
            if not 0 <= flat[1] < q_tiles:
                raise _field_error(
                    f"blocks[{k}]", f"query tile {flat[1]} outside 0..{q_tiles - 1} of the config"
                )
            tiles = flat[1::3]
            if min(tiles) < 0 or max(tiles) >= max(q_tiles, kv_tiles):
                raise _field_error(
                    f"blocks[{k}]", f"tile index outside 0..{max(q_tiles, kv_tiles) - 1}"
                )

    def _check_phases(self, k: int, flat: list[int]) -> None:
        if not flat or len(flat) % 3:
            raise _field_error(
                f"blocks[{k}]",
                f"phases must be one or more (code, tile, time) triples, got {len(flat)} numbers",
            )
        codes, offsets = flat[0::3], flat[2::3]
        if min(codes) < 0 or max(codes) >= len(self.phase_names):
            raise _field_error(
                f"blocks[{k}]", f"phase code outside 0..{len(self.phase_names) - 1} (phase_names)"
            )
        if min(offsets) < 0:
            raise _field_error(f"blocks[{k}]", "a phase begins before its block starts")

    def config_value(self) -> AttentionConfig:
        return AttentionConfig(**msgspec.structs.asdict(self.config))


class RecordingDoc(_Doc):
    """A results file: `main.py bench --out`, bench/record_run.py, the shipped recordings."""

    schema: Literal[RESULTS_SCHEMA]  # type: ignore[valid-type]
    device: DeviceDoc
    results: list[ResultDoc]
    meta: dict[str, Any] = {}
    traces: list[TraceDoc] = []

    def __post_init__(self) -> None:
        super().__post_init__()
        check_free_form("meta", self.meta)


class TracesFileDoc(_Doc):
    """A traces file (bench/trace_h200.py, `save_traces`)."""

    schema: Literal[TRACES_FILE_SCHEMA]  # type: ignore[valid-type]
    traces: list[TraceDoc]
    meta: dict[str, Any] = {}

    def __post_init__(self) -> None:
        super().__post_init__()
        check_free_form("meta", self.meta)


# --------------------------------------------------------------------------------- checking

D = TypeVar("D")
T = TypeVar("T")


def check(data: Any, doc: type[D] | Any, where: str, path: str = "") -> D:
    """`data` (parsed JSON) as the document type `doc`, or SchemaError naming `where` (the
    file) and the path of the first bad field, prefixed with `path` (where `data` sits)."""
    try:
        return msgspec.convert(data, doc)
    except msgspec.ValidationError as exc:
        raise _schema_error(exc, where, path) from None
    except RecursionError:
        raise SchemaError(where, path or "the document", "nested too deeply") from None


def _schema_error(exc: msgspec.ValidationError, where: str, prefix: str) -> SchemaError:
    text = str(exc)
    message, _, at = text.rpartition(" - at `")
    if not message:
        message, at = text, "$`"
    inner = at.rstrip("`").removeprefix("$")
    if message.startswith("@"):  # a rule of ours: "@sub.path: reason"
        sub, _, message = message[1:].partition(": ")
        inner = f"{inner}.{sub}" if not sub.startswith("[") else inner + sub
    field = (prefix + inner).lstrip(".") or "the document"
    return SchemaError(where, field, message[:1].lower() + message[1:])


def check_each(
    items: Any, doc: type[Any], where: str, path: str, build: Callable[[Any], T]
) -> list[T]:
    """The items of a JSON array (parsed, raw from gpu.files.fileio.decode_json_members, or a
    gpu.files.fileio.RawArray), each checked as `doc` and built with `build`, one at a time: a large
    file's thousands of results are never one long call, so a reading thread leaves the GUI
    thread room to paint. A bad item raises SchemaError naming its path
    (``results[3].peak_bytes``)."""
    pieces = items.pieces if isinstance(items, RawArray) else (items,)
    out: list[T] = []
    for piece in pieces:
        for item in _array(piece, where, path):
            check_stop()  # a reader that goes away stops the read here (read_stop)
            i = len(out)
            try:
                data = decode_member(item, where)
            except FileReadError as exc:
                raise SchemaError(where, f"{path}[{i}]", str(exc).rpartition(": ")[2]) from None
            check(data, doc, where, f"{path}[{i}]")
            out.append(build(data))
    return out


def _array(items: Any, where: str, path: str) -> list[Any]:
    """A JSON array's items, raw when it is raw; SchemaError when it is not an array."""
    if isinstance(items, RawObject):  # one item of a RawArray, too large for a piece
        return [items]
    if isinstance(items, msgspec.Raw):
        try:
            return msgspec.json.decode(items, type=list[msgspec.Raw])
        except msgspec.ValidationError as exc:
            raise _schema_error(exc, where, path) from None
    check(items, list[Any], where, path)
    return items


def check_config(data: Any, where: str, path: str = "config") -> AttentionConfig:
    """A config from parsed JSON (a session's, a result's), checked; SchemaError if bad."""
    return _config(check(data, ConfigDoc, where, path), where, path)


def _config(doc: ConfigDoc, where: str, path: str) -> AttentionConfig:
    try:
        return AttentionConfig(**msgspec.structs.asdict(doc))
    except ConfigError as exc:  # a rule the ranges above do not express
        raise SchemaError(where, f"{path}.{exc.field}", str(exc)) from None


def check_result(data: Any, where: str, path: str = "result") -> RunResult:
    """A RunResult from parsed JSON, checked; SchemaError if bad. Keys the document type does
    not know (a session's backend_key, say) are ignored."""
    check(data, ResultDoc, where, path)
    return result_from_checked(data)


def _known(data: dict[str, Any], cls: type) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def result_from_checked(data: dict[str, Any]) -> RunResult:
    """Build a RunResult from a dict that passed `ResultDoc`: only the fields RunResult and
    KernelTime have are passed on, so optional fields of other versions are ignored."""
    known = _known(data, RunResult)
    known["kernel_times"] = [_known(k, KernelTime) for k in data.get("kernel_times", ())]
    known["traffic"] = [_known(t, KernelTraffic) for t in data.get("traffic") or ()]
    return RunResult.from_dict(known)


def finite_result(result: RunResult) -> RunResult:
    """`result` as a file can hold it: a NaN or infinite error (an output that is not finite)
    becomes MAX_FLOAT, which still disagrees, and the message says why; a finite error beyond
    MAX_FLOAT (an fp32 output gone astray) is held as MAX_FLOAT."""
    error = result.max_abs_error
    if error is None or (math.isfinite(error) and error <= MAX_FLOAT):
        return result
    if math.isfinite(error):
        return dataclasses.replace(result, max_abs_error=MAX_FLOAT)
    note = "the output holds NaN or infinity"
    message = f"{result.message}; {note}" if result.message else note
    return dataclasses.replace(result, max_abs_error=MAX_FLOAT, message=message)


def device_from_checked(data: dict[str, Any]) -> DeviceInfo:
    return DeviceInfo.from_dict(_known(data, DeviceInfo))
