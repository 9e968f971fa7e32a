"""The Ring tab's playback model, free of Qt: which K/V block each device holds at each step, when
it computes and when it sends, and how the score matrix fills up.

Steps follow gpu/ring/schedule.py's rules one device and one step at a time (`device_step`):
the whole schedule at P = 1024 is a million DeviceSteps (seconds to build), while a frame needs
at most 2·SUMMARY_SIDE of them. A test checks `device_step` against `ring_schedule` entry by
entry.

The clock is a ring run's timeline in milliseconds, one of:
- measured: the CUDA events on each device's compute and communication streams
  (`RingMeasurement.timeline`), one row per device;
- model: gpu/ring/model.py's prediction, the same for every device: step s computes c_s and
  sends x, both starting when step s − 1 ended (the first step computes the causal diagonal);
- schedule: equal steps, no time units (while the model is still being computed).
A pass of the ring plays in `pass_seconds` of wall time at 1×.

Beyond FULL_RING_MAX devices the ring is summarised: the first and last SUMMARY_SIDE devices are
drawn, and the score matrix is sampled to at most MATRIX_MAX chunks a side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from gpu.config import AttentionConfig
from gpu.ring.model import RingPrediction
from gpu.ring.schedule import (
    ChunkPair,
    DeviceStep,
    check_devices,
    chunk_count,
    chunk_rows,
    device_chunks,
    kv_block_bytes,
    pair_kind,
)
from gpu.ring_timeline import COMM, COMPUTE, RingMeasurement

#: Up to this many devices every one is drawn; beyond, the ring is summarised.
FULL_RING_MAX = 16
#: Devices drawn at each end of a summarised ring.
SUMMARY_SIDE = 6
#: Most chunks a side of the drawn score matrix (larger matrices are sampled).
MATRIX_MAX = 128

MEASURED_CLOCK, MODEL_CLOCK, SCHEDULE_CLOCK = "measured", "model", "schedule"

#: Cell states of the score matrix.
PENDING, DONE, ACTIVE, MASKED = 0, 1, 2, 3
#: Cell kinds: every key visible, the causal triangle, all masked.
KIND_FULL, KIND_DIAGONAL, KIND_SKIPPED = 0, 1, 2

#: Wall seconds per ring step at 1×, and the bounds of a whole pass.
STEP_SECONDS = 1.5
PASS_SECONDS = (4.0, 90.0)


# --------------------------------------------------------------------------------------------
# The schedule, on demand


@lru_cache(maxsize=32)
def _held_rows(seq_len: int, devices: int, causal: bool) -> tuple[int, ...]:
    """Rows of the K/V block each device starts with."""
    rows = chunk_rows(seq_len, chunk_count(devices, causal))
    return tuple(sum(rows[c] for c in device_chunks(d, devices, causal)) for d in range(devices))


def device_step(config: AttentionConfig, devices: int, device: int, step: int) -> DeviceStep:
    """`ring_schedule(config, devices).steps[step][device]`, without building the rest."""
    causal = config.causal
    owner = (device - step) % devices
    kv = device_chunks(owner, devices, causal)
    last = step == devices - 1
    return DeviceStep(
        device=device,
        step=step,
        block_owner=owner,
        kv_chunks=kv,
        pairs=tuple(
            ChunkPair(q, k, pair_kind(q, k, causal))
            for q in device_chunks(device, devices, causal)
            for k in kv
        ),
        sends_to=None if last else (device + 1) % devices,
        receives_from=None if last else (device - 1) % devices,
        bytes_sent=0
        if last
        else kv_block_bytes(config, _held_rows(config.seq_len, devices, causal)[owner]),
    )


def shown_devices(devices: int) -> tuple[int, ...]:
    """The devices a ring view draws: all of them, or both ends of a summarised ring."""
    if devices <= FULL_RING_MAX:
        return tuple(range(devices))
    return (*range(SUMMARY_SIDE), *range(devices - SUMMARY_SIDE, devices))


# --------------------------------------------------------------------------------------------
# The clock


@dataclass(frozen=True, eq=False)
class RingClock:
    """When each device computes and sends at each step (ms); see the module docstring.

    `compute` and `comm` are (rows, P, 2) arrays of (start, end): one row per device when
    measured, one row for all when modelled; NaN where nothing happens (the last step sends
    nothing)."""

    devices: int
    source: str
    compute: np.ndarray
    comm: np.ndarray

    @property
    def rows(self) -> int:
        return self.compute.shape[0]

    def row(self, device: int) -> int:
        return device if self.rows > 1 else 0

    @cached_property
    def span_ms(self) -> float:
        ends = np.concatenate([self.compute[..., 1].ravel(), self.comm[..., 1].ravel()])
        ends = ends[np.isfinite(ends)]
        return float(ends.max()) if ends.size else 1.0

    @property
    def timed(self) -> bool:
        """Whether the clock is in real milliseconds (measured or modelled)."""
        return self.source != SCHEDULE_CLOCK

    def boundaries(self) -> np.ndarray:
        """Where each step starts (its earliest compute start over the devices), then the end."""
        with np.errstate(all="ignore"):
            starts = np.nanmin(self.compute[..., 0], axis=0)
        starts = np.where(np.isfinite(starts), starts, 0.0)
        return np.append(np.maximum.accumulate(starts), self.span_ms)

    def done_steps(self, t: float) -> np.ndarray:
        """Per row: steps whose compute has finished by `t`."""
        return np.sum(self.compute[..., 1] <= t, axis=1)

    def active_steps(self, t: float) -> np.ndarray:
        """Per row: the step computing at `t`, −1 where none is."""
        start, end = self.compute[..., 0], self.compute[..., 1]
        on = (start <= t) & (t < end)
        return np.where(on.any(axis=1), on.argmax(axis=1), -1)

    def progress(self, kind: str, device: int, t: float) -> tuple[int, float] | None:
        """(step, fraction done) of the `kind` (COMPUTE or COMM) interval under `t`, if any."""
        spans = (self.compute if kind == COMPUTE else self.comm)[self.row(device)]
        on = np.nonzero((spans[:, 0] <= t) & (t < spans[:, 1]))[0]
        if not on.size:
            return None
        s = int(on[0])
        start, end = spans[s]
        return s, float((t - start) / (end - start)) if end > start else 1.0


def _empty(rows: int, devices: int) -> np.ndarray:
    return np.full((rows, devices, 2), np.nan)


def measured_clock(measurement: RingMeasurement) -> RingClock | None:
    """The clock of a measured timeline; None when the run has none (the NumPy simulation)."""
    if not measurement.timeline:
        return None
    p = measurement.devices
    compute, comm = _empty(p, p), _empty(p, p)
    for e in measurement.timeline:
        if 0 <= e.device < p and 0 <= e.step < p:
            (compute if e.stream == COMPUTE else comm)[e.device, e.step] = (e.start_ms, e.end_ms)
    return RingClock(p, MEASURED_CLOCK, compute, comm)


def model_clock(prediction: RingPrediction) -> RingClock:
    """The model's timeline of one device (all alike): step s starts when step s − 1 ended."""
    p = prediction.devices
    first, later = prediction.first_step_compute_s * 1e3, prediction.step_compute_s * 1e3
    send = prediction.step_transfer_s * 1e3
    return _uniform_clock(p, MODEL_CLOCK, first, later, send)


def schedule_clock(devices: int) -> RingClock:
    """Equal steps in no unit: the schedule's order only, before the model is known."""
    return _uniform_clock(devices, SCHEDULE_CLOCK, 1.0, 1.0, 0.6)


def _uniform_clock(devices: int, source: str, first: float, later: float, send: float):
    compute, comm = _empty(1, devices), _empty(1, devices)
    t = 0.0
    for s in range(devices):
        c = first if s == 0 else later
        compute[0, s] = (t, t + c)
        if s < devices - 1:
            comm[0, s] = (t, t + send)
            t += max(c, send)
    return RingClock(devices, source, compute, comm)


# --------------------------------------------------------------------------------------------
# A frame


@dataclass(frozen=True)
class NodeFrame:
    """One drawn device at one moment."""

    device: int
    #: The step it computes (or waits for, or finished last) and the block it holds there.
    held: DeviceStep
    #: Fraction of that step's fused kernels done; None while it waits or after the last step.
    compute: float | None
    finished: bool
    #: The block it is sending on (a step's held block) and how far the send has got.
    sending: DeviceStep | None
    send_progress: float


@dataclass(frozen=True)
class RingFrame:
    t_ms: float
    devices: int
    #: The step the ring is at: the lowest step any device still has to finish (P when done).
    step: int
    nodes: tuple[NodeFrame, ...]
    summarised: bool


def ring_frame(config: AttentionConfig, clock: RingClock, t: float) -> RingFrame:
    """What the drawn devices do at time `t` of `clock` (ms, or steps for a schedule clock)."""
    p = clock.devices
    done, active = clock.done_steps(t), clock.active_steps(t)
    nodes = []
    for d in shown_devices(p):
        r = clock.row(d)
        n_done, now = int(done[r]), int(active[r])
        finished = n_done >= p
        step = now if now >= 0 else min(n_done, p - 1)
        compute = clock.progress(COMPUTE, d, t)
        send = clock.progress(COMM, d, t)
        nodes.append(
            NodeFrame(
                device=d,
                held=device_step(config, p, d, step),
                compute=None if compute is None else compute[1],
                finished=finished,
                sending=None if send is None else device_step(config, p, d, send[0]),
                send_progress=0.0 if send is None else send[1],
            )
        )
    return RingFrame(
        t_ms=t,
        devices=p,
        step=int(done.min()),
        nodes=tuple(nodes),
        summarised=p > FULL_RING_MAX,
    )


# --------------------------------------------------------------------------------------------
# The score matrix


@dataclass(frozen=True, eq=False)
class ScoreMatrix:
    """The (query chunk, key chunk) blocks of the score matrix, sampled to `side` a side: who
    computes each block, at which step, and how the mask treats it."""

    devices: int
    causal: bool
    chunks: int
    #: The chunk each drawn row (and column) stands for.
    sample: np.ndarray
    #: The device holding each drawn row's queries.
    row_device: np.ndarray
    step: np.ndarray  # (side, side): the step the block is computed at
    kind: np.ndarray  # (side, side): KIND_FULL, KIND_DIAGONAL or KIND_SKIPPED

    @property
    def side(self) -> int:
        return len(self.sample)

    @property
    def sampled(self) -> bool:
        return self.side < self.chunks


def chunk_owner(chunks: np.ndarray, devices: int, causal: bool) -> np.ndarray:
    """The device holding each chunk: chunk c, or 2P − 1 − c for the zigzag's second half."""
    if not causal:
        return chunks.copy()
    return np.where(chunks < devices, chunks, 2 * devices - 1 - chunks)


@lru_cache(maxsize=8)
def score_matrix(devices: int, causal: bool, max_side: int = MATRIX_MAX) -> ScoreMatrix:
    check_devices(devices)
    chunks = chunk_count(devices, causal)
    side = min(chunks, max_side)
    sample = (np.arange(side) * chunks) // side
    owner = chunk_owner(sample, devices, causal)
    # Device d holds the block that started on device o at step (d − o) mod P.
    step = (owner[:, None] - owner[None, :]) % devices
    q, k = sample[:, None], sample[None, :]
    kind = np.zeros((side, side), np.uint8)
    if causal:
        kind[k == q] = KIND_DIAGONAL
        kind[k > q] = KIND_SKIPPED
    return ScoreMatrix(devices, causal, chunks, sample, owner, step, kind)


def cell_states(matrix: ScoreMatrix, clock: RingClock, t: float) -> np.ndarray:
    """(side, side) PENDING, DONE, ACTIVE or MASKED at time `t`."""
    rows = matrix.row_device if clock.rows > 1 else np.zeros(matrix.side, int)
    done = clock.done_steps(t)[rows][:, None]
    active = clock.active_steps(t)[rows][:, None]
    states = np.where(
        matrix.step < done, DONE, np.where(matrix.step == active, ACTIVE, PENDING)
    ).astype(np.uint8)
    states[matrix.kind == KIND_SKIPPED] = MASKED
    return states


# --------------------------------------------------------------------------------------------
# Playing


def pass_seconds(devices: int) -> float:
    """Wall seconds a whole pass takes at 1×: STEP_SECONDS a step, within PASS_SECONDS."""
    lo, hi = PASS_SECONDS
    return min(hi, max(lo, STEP_SECONDS * devices))


class RingPlayer:
    """A position on a ring clock, playing at a speed; the views draw `frame()`."""

    def __init__(self, config: AttentionConfig, clock: RingClock) -> None:
        self.config = config
        self.clock = clock
        self.t = 0.0
        self.speed = 1.0
        self.playing = False

    @property
    def span(self) -> float:
        return self.clock.span_ms

    @property
    def fraction(self) -> float:
        return self.t / self.span if self.span > 0 else 0.0

    @property
    def at_end(self) -> bool:
        return self.t >= self.span

    def set_clock(self, config: AttentionConfig, clock: RingClock) -> None:
        """Another run or config: keep the place (as a fraction) when only the timing changed."""
        same = config == self.config and clock.devices == self.clock.devices
        fraction = self.fraction if same else 0.0
        self.config, self.clock = config, clock
        self.t = fraction * self.span

    def seek_fraction(self, fraction: float) -> None:
        self.t = min(1.0, max(0.0, fraction)) * self.span

    def advance(self, wall_s: float) -> bool:
        """Move on by `wall_s` seconds of wall time; False (and stopped) at the end."""
        if not self.playing:
            return False
        self.t = min(self.span, self.t + wall_s * self.speed * self.span / self.pass_seconds)
        if self.at_end:
            self.playing = False
        return True

    @property
    def pass_seconds(self) -> float:
        return pass_seconds(self.clock.devices)

    def play(self) -> None:
        if self.at_end:
            self.t = 0.0
        self.playing = True

    def pause(self) -> None:
        self.playing = False

    def step_forward(self) -> None:
        """To the start of the next step (or the end)."""
        marks = self.clock.boundaries()
        later = marks[marks > self.t + _eps(self.span)]
        self.t = float(later[0]) if later.size else self.span

    def step_back(self) -> None:
        """To the start of this step, or of the one before when already there."""
        marks = self.clock.boundaries()
        earlier = marks[marks < self.t - _eps(self.span)]
        self.t = float(earlier[-1]) if earlier.size else 0.0

    def frame(self) -> RingFrame:
        return ring_frame(self.config, self.clock, self.t)


def _eps(span: float) -> float:
    return max(span * 1e-9, math.ulp(span) * 4)
