"""What the playback model hands the views at one instant, all frozen: a lane's frame (its
kernel, block, step, SRAM slots, trail and counters) and the position of the clock in a lane."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpu.config import AttentionConfig
from gpu.model.schedule import Step

from .blockdetail import BlockDetail
from .chip import SMEM, ChipLayout
from .clock import MODELED_CLOCK, LaneClock
from .warp_roles import RoleTimeline


@dataclass(frozen=True)
class SlotState:
    name: str
    bytes: int
    matrix: str
    resident: bool
    active: bool
    place: str = SMEM
    tile: int = -1  # a ring stage: the tile it holds now (-1: none yet)


@dataclass(frozen=True)
class TrailMark:
    """A tile that moved recently: where (matrix, region in elements), which way, how long ago."""

    matrix: str
    region: tuple[int, int, int, int]
    kind: str
    age: float  # 0 = now, 1 = about to vanish


@dataclass(frozen=True)
class Counters:
    """Running totals for all B·h heads (bytes, FLOPs), one SM's SRAM, and the modeled clock."""

    bytes_read: int
    bytes_written: int
    flops: int
    sram_bytes: int
    time_s: float


@dataclass(frozen=True)
class LaneFrame:
    """Everything a view needs to draw one lane at one instant."""

    algorithm: str
    label: str
    config: AttentionConfig
    counters: Counters
    totals: Counters  # the end-of-play values, for "x of y" labels
    done: bool
    started: bool
    kernel: str
    kernel_index: int
    kernel_count: int
    block: int
    blocks: int
    step: Step
    step_index: int
    steps_in_block: int
    step_phase: float
    slots: tuple[SlotState, ...]
    sram_capacity: int
    written: dict[str, float]  # matrix -> fraction written to HBM so far
    readback: dict[str, float]  # matrix -> fraction read back so far (current kernel only)
    trail: tuple[TrailMark, ...]
    origins: tuple[TrailMark, ...]  # HBM regions of the tiles now held in SRAM (last loads)
    read_util: float  # share of HBM bandwidth spent reading since the last frame (0..1)
    write_util: float
    lod: str
    step_wall_s: float  # how long the current step lasts on screen at the current speed
    clock_s: float  # the shared clock (may be past this lane's end)
    clock_total_s: float  # the shared clock's end: the slower lane's total time
    gliding: bool = False  # the clock is gliding to a step boundary (step buttons)
    clock: LaneClock = MODELED_CLOCK  # where this lane's time comes from
    layout: ChipLayout | None = None  # the current kernel's on-chip layout and occupancy
    roles: RoleTimeline | None = None  # the warp-specialized block's roles (else None)
    role_t: float = 0.0  # where the block is on `roles`' clock
    tile: int = -1  # the key/value tile the block works on (-1: none)


@dataclass
class Timing:
    """A block's detail with its prefix sums and its steps' share of the block's time."""

    detail: BlockDetail
    cum_read: np.ndarray
    cum_written: np.ndarray
    cum_flops: np.ndarray
    cum_share: np.ndarray  # len S+1, 0 .. 1
    exact: bool  # its sums equal the table's row, so per-step counters are exact
    first_index: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Position:
    unit: int
    kernel_index: int
    block: int
    timing: Timing
    step_index: int
    step_phase: float
    unit_phase: float
    block_phase: float  # how far through the current block (0..1)
    read: int  # one head
    written: int
    flops: int
    done: bool
