"""Replay one traced block on the schedule's modeled clock (Qt-free).

A trace says when the hardware began each phase of a block (gpu/files/trace.py); the animation's
`Lane` (lane.py) knows where on its modeled clock each schedule step of a block lies. This
module pairs them: every traced phase becomes a `ReplaySegment` from its real start/end (ns) to
the modeled start/end of the schedule steps it covers (`gpu.files.trace.PHASE_STEPS`), so a
replay cursor moving through the block's real time moves the HBM/SRAM view through the same steps,
each lasting as long as the hardware took. Downsampled traces (marks for only some tiles) still
work: a segment then runs up to the next kept mark, covering the skipped tiles' steps.

Kernel-level traces (naive) map each kernel's real interval to that kernel's span on the clock.
The blocks of a lane are one (batch, head); a traced block of any head maps to the block with
the same query tile.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from gpu.algorithms import tile_shape
from gpu.config import ceil_div
from gpu.files.trace import KERNEL_LEVEL, PHASE_STEPS, BlockTrace, Trace
from gpu.model.costmodel import kv_tiles_for_query_tile
from gpu.model.schedule import launch_query_tile

from .lane import Lane


@dataclass(frozen=True)
class ReplaySegment:
    """One traced phase: real [t0_ns, t1_ns) mapped onto modeled [m0_s, m1_s)."""

    phase: str
    j: int
    t0_ns: int
    t1_ns: int
    m0_s: float
    m1_s: float
    steps: tuple[str, ...]  # the schedule steps this phase covers


def first_step_index(phase: str, j: int, kv_tiles: int) -> int:
    """Index, in a flash_fwd block's schedule steps, of the first step of a traced phase.

    The schedule orders a block as load_Q_i, then per key tile j: load_K_j, load_V_j,
    compute_S_ij, online_softmax, accumulate_O_i, then store_O_i, store_ml."""
    if phase == "load_Q_i":
        return 0
    if phase == "load_K_j":
        return 1 + 5 * j
    if phase == "compute_S_ij":
        return 3 + 5 * j
    if phase == "store_O_i":
        return 1 + 5 * kv_tiles
    raise KeyError(f"unknown traced phase {phase!r}")


def _block_clock(lane: Lane, kernel: int, block: int) -> tuple[float, float]:
    """Modeled (start, duration) of one block of `kernel` on the lane's clock."""
    u = lane.unit_of_block(kernel, block)
    if u is None:
        raise KeyError(f"block {block} is not in kernel {kernel} of the lane")
    nb = int(lane.u_nblocks[u])
    span = float(lane.u_time[u]) / nb
    return float(lane.cum_time[u]) + span * (block - int(lane.u_first[u])), span


def replay_segments(trace: Trace, block: BlockTrace, lane: Lane) -> list[ReplaySegment]:
    """The block's phases, each with its real and modeled interval, in time order."""
    if trace.level == KERNEL_LEVEL:
        k = block.block
        lo, hi = int(lane.kernel_unit_start[k]), int(lane.kernel_unit_start[k + 1])
        m0, m1 = float(lane.cum_time[lo]), float(lane.cum_time[hi])
        return [ReplaySegment(block.kernel, -1, block.start_ns, block.end_ns, m0, m1, ())]
    i = block.query_tile
    if i is None:
        raise ValueError(f"block {block.block} has no load_Q_i phase")
    bm, bn = tile_shape(lane.config, lane.algorithm)
    kv = kv_tiles_for_query_tile(lane.config, bm, bn, i)
    q_tiles = ceil_div(lane.config.seq_len, bm)
    b = launch_query_tile(lane.config, q_tiles, i, lane.algorithm)  # the lane's block
    start, span = _block_clock(lane, 0, b)
    share = lane.timing(0, b).cum_share  # len = steps + 1, 0 .. 1

    def at(step: int) -> float:
        return start + span * float(share[min(step, len(share) - 1)])

    spans = block.phase_spans()
    out = []
    for k, (name, j, t0, t1) in enumerate(spans):
        s0 = first_step_index(name, j, kv)
        if k + 1 < len(spans):
            s1 = first_step_index(spans[k + 1][0], spans[k + 1][1], kv)
        else:
            s1 = len(share) - 1  # the block's end
        out.append(ReplaySegment(name, j, t0, t1, at(s0), at(max(s0, s1)), PHASE_STEPS[name]))
    return out


class BlockReplay:
    """Real time within one block -> modeled time of the lane, by linear interpolation inside
    each traced phase."""

    def __init__(self, trace: Trace, block: BlockTrace, lane: Lane) -> None:
        self.trace, self.block, self.lane = trace, block, lane
        self.segments = replay_segments(trace, block, lane)
        self._starts = [s.t0_ns for s in self.segments]

    @property
    def start_ns(self) -> int:
        return self.block.start_ns

    @property
    def end_ns(self) -> int:
        return self.block.end_ns

    def time_at(self, fraction: float) -> int:
        """Real time (ns) a fraction 0..1 of the way through the block."""
        f = min(1.0, max(0.0, fraction))
        return round(self.start_ns + f * (self.end_ns - self.start_ns))

    def segment_at(self, t_ns: int) -> ReplaySegment:
        k = bisect.bisect_right(self._starts, t_ns) - 1
        return self.segments[min(max(k, 0), len(self.segments) - 1)]

    def modeled_at(self, t_ns: int) -> float:
        s = self.segment_at(t_ns)
        if s.t1_ns <= s.t0_ns:
            return s.m0_s
        u = min(1.0, max(0.0, (t_ns - s.t0_ns) / (s.t1_ns - s.t0_ns)))
        # stay just inside the segment's steps (the end is the next segment's first step)
        m = s.m0_s + u * (s.m1_s - s.m0_s)
        return min(m, s.m1_s - 1e-9 * max(1e-30, s.m1_s - s.m0_s)) if s.m1_s > s.m0_s else m
