"""The tile animation's playback model, free of Qt: one modeled clock, lanes, counters, LOD.

What the clock means (documented choice): each algorithm is a *lane* that plays the blocks of one
(batch, head) in launch order, kernel after kernel. The clock is **whole-GPU time**: while the
lane shows block b, all B·h copies of that block (one per head) run concurrently and share the
GPU's full bandwidth and peak. Modeled, each kernel takes the roofline's time, the very figure
the Measurements tab's roofline gives it (gpu.model.roofline: L2-aware DRAM bytes, L2 bytes, FLOPs
at the roof of the instruction family the kernel uses, exponentials), and its blocks share that
time in proportion to

    T_b = B·h · max(tile bytes_b / bandwidth, flops_b / peak)     (a roofline per block)

(the tile loads are the no-reuse model's: what each block asks for, not what DRAM serves).
Where the same config was measured on this GPU, each kernel's blocks are stretched to its
measured time instead (clock.py); the lane says which.
Inside a block, T_b is shared by its steps in proportion to each step's serial cost
(bytes/bandwidth + flops/peak; a zero-cost step such as `online_softmax` gets a small share so it
is visible): loads and math overlap inside a block, as they do on the GPU. The warp-specialized
kernel's steps follow its consumer 0 through the role model instead (warp_roles.py).

Both lanes run on this one clock, so the faster algorithm simply finishes first. A full pass
(the slower lane's total time) is mapped to `duration_s` of wall time at speed 1×.

Level of detail: nothing here ever iterates a lane's steps. Per-block totals come from
`KernelSchedule.table()` as NumPy prefix sums; kernels with more than `MAX_UNITS_PER_KERNEL`
blocks are grouped into that many units (exact integer sums via `np.add.reduceat`), and kernels
too large to tabulate at all use the cost model's per-kernel totals split evenly. Only the block
under the playhead is expanded into steps (`blockdetail`), so N = 131072 plays as smoothly as
N = 1024. Counters are exact integers: bytes and FLOPs of completed steps (completed units where
grouped), plus the in-flight fraction of the current one; at the end they equal the totals.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np

from gpu.algorithms import ALGORITHMS, NAIVE, TILED, TILED_WS, tile_shape
from gpu.config import AttentionConfig, ceil_div
from gpu.model.costmodel import DEFAULT_GPU, GPUS, GpuSpec, algorithm_cost, kv_tiles_for_query_tile
from gpu.model.schedule import READ, WRITE, Schedule, Step, build_schedule, launch_query_tile

from ..model.cache import verdict
from .blockdetail import KIND_CODES, BlockDetail, block_detail
from .chip import SMEM, ChipLayout, SlotSpec, chip_layout
from .clock import MODELED_CLOCK, LaneClock, kernel_scales
from .warp_roles import RoleTimeline, modeled_roles

#: Kernels with more blocks than this are not tabulated block by block (the table itself would
#: need gigabytes); their cost-model totals are split evenly over MAX_UNITS_PER_KERNEL units.
MAX_TABLE_BLOCKS = 1 << 22
#: Units per kernel at most; consecutive blocks beyond that are grouped (exact sums).
MAX_UNITS_PER_KERNEL = 1 << 16
#: Lanes with at most this many steps (per head) step one `Step` at a time; larger ones step by
#: blocks, grouped so that a pass has at most MAX_STEP_UNITS steps.
STEP_LEVEL_LIMIT = 50_000
MAX_STEP_UNITS = 2_000
DETAIL_CACHE_SIZE = 8
#: Trail of recently moved tiles: samples per frame and how long a mark stays (wall seconds at 1×).
TRAIL_SAMPLES = 6
TRAIL_MAX = 48
TRAIL_WALL_S = 0.8
DEFAULT_DURATION_S = 20.0

READ_CODE, WRITE_CODE, COMPUTE_CODE = KIND_CODES[READ], KIND_CODES[WRITE], 2

#: What each known kernel reads back from / writes to HBM as a whole matrix (for progress fills).
KERNEL_HBM_IO: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gemm_qk": ((), ("S",)),
    "softmax": (("S",), ("P",)),
    "gemm_pv": (("P",), ("O",)),
    "flash_fwd": ((), ("O", "ml")),
}

KERNEL_TITLES: dict[str, str] = {
    "gemm_qk": "S = Q·Kᵀ/√d   (GEMM, writes S to HBM)",
    "softmax": "P = softmax(S)   (reads S, writes P)",
    "gemm_pv": "O = P·V   (GEMM, reads P back)",
    "flash_fwd": "fused kernel: Q_i stays, K_j/V_j stream, online softmax",
}

#: The matrices whose on-chip buffers each step works on (a ring stage only when it holds the
#: step's tile).
STEP_USES: dict[str, tuple[str, ...]] = {
    "load_Q_i": ("Q",),
    "load_K_j": ("K",),
    "load_V_j": ("V",),
    "compute_S_ij": ("S", "Q", "K"),
    "online_softmax": ("S", "ml", "P"),
    "accumulate_O_i": ("O", "P", "V"),
    "store_O_i": ("O",),
    "store_ml": ("ml",),
    "qk_load_Q_i": ("Q",),
    "qk_load_K_j": ("K",),
    "qk_compute_S_ij": ("S",),
    "qk_store_S_ij": ("S",),
    "softmax_read_S": ("S",),
    "softmax_write_P": ("S",),
    "pv_load_P_ik": ("P",),
    "pv_load_V_k": ("V",),
    "pv_compute_O_i": ("O",),
    "pv_store_O_i": ("O",),
}
#: Where each K/V tile's load sits in a flash_fwd block's steps: 1 + 5j (K), 2 + 5j (V).
_RING_LOAD = {"K": 1, "V": 2}
ROLE_CACHE_SIZE = 64


def unit_peak(gpu: GpuSpec, unit: str) -> float:
    """FLOP/s of the unit a kernel multiplies on (`KernelCost.unit`); the tensor cores' peak
    where the unit is unknown or the kernel does no matmul."""
    return gpu.compute_peaks.get(unit, gpu.fp16_tensor_flops)


def sram_slots(
    config: AttentionConfig, algorithm: str, kernel, gpu: GpuSpec | None = None
) -> tuple[SlotSpec, ...]:
    """The on-chip buffers of one block of `kernel` (chip.py: the kernels' own layouts)."""
    return chip_layout(config, algorithm, kernel, gpu or GPUS[DEFAULT_GPU]).slots


# --------------------------------------------------------------------------------------------
# Snapshots handed to the views


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
class _Timing:
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
    timing: _Timing
    step_index: int
    step_phase: float
    unit_phase: float
    block_phase: float  # how far through the current block (0..1)
    read: int  # one head
    written: int
    flops: int
    done: bool


# --------------------------------------------------------------------------------------------
# One algorithm's timeline


class Lane:
    """One algorithm's blocks on the modeled clock, with exact running sums (see module doc)."""

    def __init__(
        self,
        config: AttentionConfig,
        algorithm: str,
        gpu: GpuSpec,
        schedule: Schedule | None = None,
        clock: LaneClock = MODELED_CLOCK,
    ) -> None:
        self.config = config
        self.algorithm = algorithm
        self.schedule = schedule if schedule is not None else build_schedule(config, algorithm)
        self.kernels = self.schedule.kernels
        self.cost = algorithm_cost(config, algorithm)
        self.clock = clock
        self._fast_ok = [True] * len(self.kernels)
        self._details: OrderedDict[tuple[int, int], _Timing] = OrderedDict()
        self._roles: OrderedDict[int, RoleTimeline] = OrderedDict()
        self._tabulate()
        self.set_gpu(gpu)

    # ---- construction

    def _tabulate(self) -> None:
        """Per-unit integer totals (one head) of every kernel, concatenated in launch order."""
        parts: list[tuple[np.ndarray, ...]] = []
        starts_k: list[int] = []
        unit = 0
        bh = self.config.bh
        cost_by_name = {k.name: k for k in self.cost.kernels}
        for k, ks in enumerate(self.kernels):
            starts_k.append(unit)
            if ks.blocks <= MAX_TABLE_BLOCKS:
                tab = ks.table()
                cols = [
                    np.asarray(a, dtype=np.int64)
                    for a in (tab.bytes_read, tab.bytes_written, tab.flops, tab.steps)
                ]
                first = np.arange(ks.blocks, dtype=np.int64)
                if ks.blocks > MAX_UNITS_PER_KERNEL:
                    group = ceil_div(ks.blocks, MAX_UNITS_PER_KERNEL)
                    first = np.arange(0, ks.blocks, group, dtype=np.int64)
                    cols = [np.add.reduceat(a, first) for a in cols]
            else:
                kc = cost_by_name.get(ks.name) or self.cost.kernels[k]
                count = MAX_UNITS_PER_KERNEL
                first = (np.arange(count, dtype=np.int64) * ks.blocks) // count
                ends = np.append(first[1:], ks.blocks)

                def split(
                    total: int, ends: np.ndarray = ends, blocks: int = ks.blocks
                ) -> np.ndarray:
                    cum = np.floor(total * (ends / blocks)).astype(np.int64)
                    cum[-1] = total
                    return np.diff(np.concatenate(([0], cum)))

                cols = [
                    split(kc.bytes_read // bh),
                    split(kc.bytes_written // bh),
                    split(kc.flops // bh),
                    ends - first,
                ]
            nblocks = np.diff(np.append(first, ks.blocks))
            parts.append((*cols, first, nblocks, np.full(len(first), k, np.int16)))
            unit += len(first)
        self.kernel_unit_start = np.array([*starts_k, unit], dtype=np.int64)
        cat = [np.concatenate([p[c] for p in parts]) for c in range(7)]
        self.u_read, self.u_written, self.u_flops, self.u_steps = cat[:4]
        self.u_first, self.u_nblocks, self.u_kernel = cat[4:]
        self.units = len(self.u_read)

        def prefix(a: np.ndarray) -> np.ndarray:
            return np.concatenate(([0], np.cumsum(a, dtype=np.int64)))

        self.cum_read = prefix(self.u_read)
        self.cum_written = prefix(self.u_written)
        self.cum_flops = prefix(self.u_flops)
        self.total_steps = int(self.u_steps.sum())
        self.step_level = self.total_steps <= STEP_LEVEL_LIMIT and bool(np.all(self.u_nblocks == 1))

    def set_gpu(self, gpu: GpuSpec) -> None:
        """Recompute the clock for another GPU (bytes and FLOPs do not change). A measured
        clock of another GPU does not carry over: the widget hands the lane the clock of the
        new GPU's measurements (set_clock)."""
        self.gpu = gpu
        self.layouts = tuple(chip_layout(self.config, self.algorithm, k, gpu) for k in self.kernels)
        self._roles.clear()
        bh = self.config.bh
        by_name = {k.name: k for k in self.cost.kernels}
        # FLOP/s of the unit each kernel multiplies on: its blocks and their steps are timed at it
        self._kernel_peak = np.array(
            [
                unit_peak(gpu, by_name[k.name].unit if k.name in by_name else "")
                for k in self.kernels
            ]
        )
        # Blocks keep these proportions inside their kernel; the kernel itself takes the
        # roofline's time (the Measurements tab's, from the L2-aware bytes and every roof), or
        # its measured time when the lane's clock is measured.
        self.modeled_u_time = bh * np.maximum(
            (self.u_read + self.u_written) / gpu.bandwidth_bytes_s,
            self.u_flops / self._kernel_peak[self.u_kernel],
        )
        self.roofline_seconds = roofline_kernel_seconds(self.config, self.algorithm, gpu)
        self._apply_clock()

    def set_clock(self, clock: LaneClock) -> None:
        """Time the lane by `clock` (measured per kernel, or the model); bytes do not change."""
        if clock == self.clock:
            return
        self.clock = clock
        self._apply_clock()

    def _apply_clock(self) -> None:
        self.u_time = self.modeled_u_time
        starts = self.kernel_unit_start
        modeled = {
            k.name: float(self.modeled_u_time[starts[i] : starts[i + 1]].sum())
            for i, k in enumerate(self.kernels)
        }
        if self.clock.measured:
            scales = kernel_scales(self.clock, modeled)
        else:
            roof = self.roofline_seconds
            known = set(roof) >= set(modeled) and all(v > 0 for v in modeled.values())
            scales = {k: roof[k] / v for k, v in modeled.items()} if known else {}
        if scales:
            factor = np.array([scales[k.name] for k in self.kernels])
            self.u_time = self.modeled_u_time * factor[self.u_kernel]
        self.cum_time = np.concatenate(([0.0], np.cumsum(self.u_time)))
        self.total_time = float(self.cum_time[-1])
        self.tol = self.total_time * 1e-12
        self._details.clear()
        if self.step_level:
            self.chunk = 1
            self.chunk_ends = None
        else:
            self.chunk = max(1, ceil_div(self.units, MAX_STEP_UNITS))
            idx = np.append(np.arange(self.chunk, self.units, self.chunk), self.units)
            self.chunk_ends = self.cum_time[idx]

    # ---- totals

    @property
    def label(self) -> str:
        info = ALGORITHMS.get(self.algorithm)
        return info.label if info else self.algorithm

    def totals(self) -> Counters:
        """End-of-play counters for all heads; equal to the cost model's by construction."""
        bh = self.config.bh
        peak_sram = max((lay.smem_bytes for lay in self.layouts), default=0)
        return Counters(
            int(self.cum_read[-1]) * bh,
            int(self.cum_written[-1]) * bh,
            int(self.cum_flops[-1]) * bh,
            peak_sram,
            self.total_time,
        )

    def lod_text(self) -> str:
        if self.step_level:
            return "every step"
        blocks = int(sum(k.blocks for k in self.kernels))
        per = blocks / max(1, self.units // self.chunk)
        return f"1 step ≈ {per:,.0f} blocks" if per >= 1.5 else "1 step = 1 block"

    # ---- block details

    def timing(self, k: int, block: int) -> _Timing:
        key = (k, block)
        hit = self._details.get(key)
        if hit is not None:
            self._details.move_to_end(key)
            return hit
        ks = self.kernels[k]
        det = block_detail(self.config, self.algorithm, ks, block, use_fast=self._fast_ok[k])
        exact = self._matches_table(k, block, det)
        if not exact and self._fast_ok[k]:
            self._fast_ok[k] = False  # the fast path drifted from the schedule: trust block_steps
            det = block_detail(self.config, self.algorithm, ks, block, use_fast=False)
            exact = self._matches_table(k, block, det)
        share = self._shares(k, block, det)
        zero = np.zeros(1, np.int64)
        t = _Timing(
            det,
            np.concatenate((zero, np.cumsum(det.read))),
            np.concatenate((zero, np.cumsum(det.written))),
            np.concatenate((zero, np.cumsum(det.flops))),
            share,
            exact,
        )
        for sid, name in enumerate(det.names):
            t.first_index[name] = int(np.argmax(det.name_ids == sid))
        self._details[key] = t
        if len(self._details) > DETAIL_CACHE_SIZE:
            self._details.popitem(last=False)
        return t

    def _shares(self, k: int, block: int, det: BlockDetail) -> np.ndarray:
        """Each step's share of the block's time, cumulative (len steps + 1, 0 .. 1)."""
        if self.algorithm == TILED_WS and self.kernels[k].name == "flash_fwd":
            bounds = self.roles_for_block(block).step_bounds()
            if len(bounds) == det.count + 1 and bounds[-1] > 0:
                w = np.diff(bounds)
            else:  # cannot happen for a schedule the role model mirrors; stay safe
                w = np.ones(det.count)
        else:
            peak = float(self._kernel_peak[k])  # the unit this kernel multiplies on
            w = (det.read + det.written) / self.gpu.bandwidth_bytes_s + det.flops / peak
        positive = w[w > 0]
        eps = 0.5 * float(positive.min()) if positive.size else 1.0
        w = np.where(w > 0, w, eps)
        share = np.concatenate(([0.0], np.cumsum(w)))
        share /= share[-1]
        share[-1] = 1.0
        return share

    def roles_for_block(self, block: int) -> RoleTimeline:
        """The warp-specialized kernel's roles in its `block`-th launched block (modeled,
        cached by its key-tile count: blocks with as many tiles play alike)."""
        bm, bn = tile_shape(self.config, self.algorithm)
        i = launch_query_tile(self.config, ceil_div(self.config.seq_len, bm), block)
        tiles = kv_tiles_for_query_tile(self.config, bm, bn, i)
        hit = self._roles.get(tiles)
        if hit is not None:
            self._roles.move_to_end(tiles)
            return hit
        tl = modeled_roles(self.config, self.gpu, i)
        self._roles[tiles] = tl
        if len(self._roles) > ROLE_CACHE_SIZE:
            self._roles.popitem(last=False)
        return tl

    def _matches_table(self, k: int, block: int, det: BlockDetail) -> bool:
        u = self.unit_of_block(k, block)
        if u is None or self.u_nblocks[u] != 1:
            return True  # grouped units interpolate; nothing to compare per block
        return (
            int(det.read.sum()) == int(self.u_read[u])
            and int(det.written.sum()) == int(self.u_written[u])
            and int(det.flops.sum()) == int(self.u_flops[u])
        )

    def unit_of_block(self, k: int, block: int) -> int | None:
        lo, hi = int(self.kernel_unit_start[k]), int(self.kernel_unit_start[k + 1])
        u = lo + int(np.searchsorted(self.u_first[lo:hi], block, side="right")) - 1
        return u if lo <= u < hi else None

    # ---- where the clock is

    def locate(self, t: float) -> Position:
        """The unit, block, step and exact running sums (one head) at modeled time t."""
        done = t >= self.total_time - self.tol
        if done:
            u, phase = self.units - 1, 1.0
        elif t <= 0:
            u, phase = 0, 0.0
        else:
            u = int(np.searchsorted(self.cum_time[1:], t - self.tol, side="left"))
            u = min(u, self.units - 1)
            phase = min(1.0, max(0.0, (t - self.cum_time[u]) / self.u_time[u]))
        k = int(self.u_kernel[u])
        nb = int(self.u_nblocks[u])
        if nb == 1:
            block, local = int(self.u_first[u]), phase
        else:
            pos = phase * nb
            off = min(nb - 1, int(pos))
            block, local = int(self.u_first[u]) + off, min(1.0, pos - off)
        tm = self.timing(k, block)
        s = int(np.searchsorted(tm.cum_share[1:], local - 1e-12, side="left"))
        s = min(s, tm.detail.count - 1)
        lo, hi = tm.cum_share[s], tm.cum_share[s + 1]
        sphase = 1.0 if hi <= lo else min(1.0, max(0.0, (local - lo) / (hi - lo)))
        if sphase > 1.0 - 1e-9:  # at a step boundary (up to rounding): the step is complete
            sphase = 1.0
        if done:
            r, w, f = (int(self.cum_read[-1]), int(self.cum_written[-1]), int(self.cum_flops[-1]))
        elif nb == 1 and tm.exact:
            d = tm.detail
            r = int(self.cum_read[u]) + int(tm.cum_read[s]) + int(sphase * int(d.read[s]))
            w = int(self.cum_written[u]) + int(tm.cum_written[s]) + int(sphase * int(d.written[s]))
            f = int(self.cum_flops[u]) + int(tm.cum_flops[s]) + int(sphase * int(d.flops[s]))
        else:
            r = int(self.cum_read[u]) + int(phase * int(self.u_read[u]))
            w = int(self.cum_written[u]) + int(phase * int(self.u_written[u]))
            f = int(self.cum_flops[u]) + int(phase * int(self.u_flops[u]))
        return Position(u, k, block, tm, s, sphase, phase, local, r, w, f, done)

    def _step_time(self, u: int, share: float) -> float:
        return float(self.cum_time[u] + self.u_time[u] * share)

    def next_boundary(self, t: float) -> float | None:
        """The modeled time at which the next step (or LOD unit) ends, or None at the end."""
        if t >= self.total_time - self.tol:
            return None
        if not self.step_level:
            assert self.chunk_ends is not None
            i = int(np.searchsorted(self.chunk_ends, t + self.tol, side="right"))
            return float(self.chunk_ends[min(i, len(self.chunk_ends) - 1)])
        p = self.locate(t)
        end = self._step_time(p.unit, p.timing.cum_share[p.step_index + 1])
        if end > t + self.tol:
            return end
        if p.step_index + 1 < p.timing.detail.count:
            return self._step_time(p.unit, p.timing.cum_share[p.step_index + 2])
        if p.unit + 1 < self.units:
            nxt = self.timing(int(self.u_kernel[p.unit + 1]), int(self.u_first[p.unit + 1]))
            return self._step_time(p.unit + 1, nxt.cum_share[1])
        return self.total_time

    def prev_boundary(self, t: float) -> float | None:
        """The modeled time at which the step (or LOD unit) before the current one ended."""
        if t <= self.tol:
            return None
        t = min(t, self.total_time)
        if not self.step_level:
            assert self.chunk_ends is not None
            bounds = np.concatenate(([0.0], self.chunk_ends))
            i = int(np.searchsorted(bounds, t - self.tol, side="left")) - 1
            return float(bounds[max(i, 0)])
        p = self.locate(t)
        start = self._step_time(p.unit, p.timing.cum_share[p.step_index])
        if start < t - self.tol:
            return start
        if p.step_index > 0:
            return self._step_time(p.unit, p.timing.cum_share[p.step_index - 1])
        if p.unit > 0:
            prev = self.timing(int(self.u_kernel[p.unit - 1]), int(self.u_first[p.unit - 1]))
            return self._step_time(p.unit - 1, prev.cum_share[-2])
        return 0.0

    # ---- snapshot

    def tile_at(self, p: Position) -> int:
        """The key/value tile a flash_fwd block's current step belongs to (-1 outside the loop
        and in other kernels)."""
        if self.kernels[p.kernel_index].name != "flash_fwd" or p.done:
            return -1
        s, count = p.step_index, p.timing.detail.count
        return (s - 1) // 5 if 1 <= s < count - 2 else -1

    def slots_at(self, p: Position) -> tuple[SlotState, ...]:
        specs = self.layouts[p.kernel_index].slots
        if p.done:
            return tuple(SlotState(s.name, s.bytes, s.matrix, False, False, s.place) for s in specs)
        tm = p.timing
        name = tm.detail.name(p.step_index)
        uses = STEP_USES.get(name, ())
        tile = self.tile_at(p)
        if tile < 0 and name == "store_O_i":
            tile = (tm.detail.count - 3) // 5  # the last tile's stages are still held
        started = p.step_index > 0 or p.step_phase > 0
        out = []
        for s in specs:
            if s.stages > 1:
                resident, held = self._ring_state(s, p)
                active = s.matrix in uses and held == tile and tile >= 0
            else:
                first = tm.first_index.get(s.filled_by, 0)
                resident = started and (
                    p.step_index > first or (p.step_index == first and p.step_phase > 0)
                )
                held = -1
                active = s.matrix in uses or (not uses and s.name == "block")
            out.append(SlotState(s.name, s.bytes, s.matrix, resident, active, s.place, held))
        return tuple(out)

    @staticmethod
    def _ring_state(s: SlotSpec, p: Position) -> tuple[bool, int]:
        """(resident, the tile it holds) for a ring stage at position p of a flash_fwd block:
        tile t lands in stage t % stages at its load step (1 + 5t for K, 2 + 5t for V)."""
        offset = _RING_LOAD.get(s.matrix, 1)
        tiles = (p.timing.detail.count - 3) // 5
        step = p.step_index if p.step_phase > 0 else p.step_index - 1  # steps begun
        last = min(tiles - 1, (step - offset) // 5) if step >= offset else -1
        if last < 0:
            return False, -1
        held = last - (last - s.stage) % s.stages
        return held >= 0, held

    def origins_at(self, p: Position) -> tuple[TrailMark, ...]:
        """Where in HBM the tiles the block holds came from: its latest load of each kind."""
        if p.done:
            return ()
        det = p.timing.detail
        upto = p.step_index + 1
        ids = det.name_ids[:upto]
        out = []
        for sid in np.unique(ids[det.kinds[:upto] == READ_CODE]):
            last = int(np.flatnonzero(ids == sid)[-1])
            if last == p.step_index and p.step_phase <= 0.0:
                continue
            st = det.step_at(last)
            out.append(TrailMark(st.matrix, st.region, st.kind, 0.0))
        return tuple(out)

    def kernel_progress(self, p: Position) -> float:
        lo, hi = (
            int(self.kernel_unit_start[p.kernel_index]),
            int(self.kernel_unit_start[p.kernel_index + 1]),
        )
        if p.done:
            return 1.0
        return min(1.0, (p.unit - lo + p.unit_phase) / max(1, hi - lo))

    def hbm_progress(self, p: Position) -> tuple[dict[str, float], dict[str, float]]:
        written: dict[str, float] = {}
        readback: dict[str, float] = {}
        prog = self.kernel_progress(p)
        for k, ks in enumerate(self.kernels):
            reads, writes = KERNEL_HBM_IO.get(ks.name, ((), ()))
            if k < p.kernel_index or p.done:
                frac = 1.0
            elif k == p.kernel_index:
                frac = prog
            else:
                frac = 0.0
            for m in writes:
                written[m] = max(written.get(m, 0.0), frac)
            if k == p.kernel_index and not p.done:
                for m in reads:
                    readback[m] = prog
        return written, readback


# --------------------------------------------------------------------------------------------
# The clock over several lanes


class Player:
    """Play, pause, seek and step two (or more) lanes on one modeled clock."""

    def __init__(
        self,
        config: AttentionConfig,
        gpu: GpuSpec | None = None,
        algorithms: tuple[str, ...] = (NAIVE, TILED),
        duration_s: float = DEFAULT_DURATION_S,
        lanes: list[Lane] | None = None,
    ) -> None:
        self.algorithms = algorithms
        self.gpu = gpu or GPUS[DEFAULT_GPU]
        self.duration_s = duration_s
        self.speed = 1.0
        self.playing = False
        self.loop = False
        self.config = config
        self.lanes: list[Lane] = []
        self.t = 0.0
        self._last_t = 0.0
        self._trails: list[deque[tuple[str, tuple[int, int, int, int], str, float]]] = []
        #: (from, to, elapsed wall s, duration wall s) while a step glides to its boundary
        self._glide: tuple[float, float, float, float] | None = None
        if lanes is not None:  # built elsewhere (off the GUI thread)
            self.adopt(config, lanes)
        else:
            self.set_config(config, force=True)

    # ---- configuration

    def set_config(self, config: AttentionConfig, force: bool = False) -> bool:
        """Rebuild every lane for `config` and go back to the start. False if nothing changed."""
        if not force and config == self.config and self.lanes:
            return False
        self.adopt(config, build_lanes(config, self.gpu, self.algorithms))
        return True

    def adopt(self, config: AttentionConfig, lanes: list[Lane]) -> None:
        """Play `lanes` (built by `build_lanes`, perhaps on another thread) from the start."""
        self.config = config
        self.lanes = list(lanes)
        for lane in self.lanes:
            if lane.gpu != self.gpu:  # the GPU changed while they were being built
                lane.set_gpu(self.gpu)
        self._trails = [deque(maxlen=TRAIL_MAX) for _ in self.lanes]
        self.t = self._last_t = 0.0
        self._glide = None

    def set_gpu(self, gpu: GpuSpec, clocks: dict[str, LaneClock] | None = None) -> None:
        """Another GPU: same bytes and FLOPs, a new clock (`clocks`: measurements on it; the
        others are modeled); keeps the relative position."""
        frac = self.fraction
        self.gpu = gpu
        clocks = clocks or {}
        for lane in self.lanes:
            lane.clock = clocks.get(lane.algorithm, MODELED_CLOCK)
            lane.set_gpu(gpu)
        self.seek(frac * self.total_time)

    def set_clocks(self, clocks: dict[str, LaneClock]) -> bool:
        """Time each lane by its clock in `clocks` (modeled where absent); keeps the relative
        position. False if nothing changed."""
        changed = False
        frac = self.fraction
        for lane in self.lanes:
            clock = clocks.get(lane.algorithm, MODELED_CLOCK)
            if clock != lane.clock:
                lane.set_clock(clock)
                changed = True
        if changed:
            self.seek(frac * self.total_time)
        return changed

    def lane(self, algorithm: str) -> Lane:
        for lane in self.lanes:
            if lane.algorithm == algorithm:
                return lane
        raise KeyError(algorithm)

    # ---- clock

    @property
    def total_time(self) -> float:
        return max((lane.total_time for lane in self.lanes), default=0.0)

    @property
    def fraction(self) -> float:
        total = self.total_time
        return 0.0 if total <= 0 else min(1.0, self.t / total)

    @property
    def finished(self) -> bool:
        return self.t >= self.total_time

    def rate(self) -> float:
        """Modeled seconds per wall second."""
        return self.total_time / max(1e-6, self.duration_s) * self.speed

    def play(self) -> None:
        self._finish_glide()
        if self.finished:
            self.seek(0.0)
        self.playing = True

    def pause(self) -> None:
        self.playing = False

    @property
    def gliding(self) -> bool:
        return self._glide is not None

    def _finish_glide(self) -> None:
        if self._glide is not None:
            self.t = self._glide[1]
            self._glide = None

    def advance(self, wall_dt: float) -> bool:
        """Move the clock by `wall_dt` wall seconds if playing or gliding; True if it moved."""
        if wall_dt <= 0:
            return False
        if self._glide is not None:
            start, end, elapsed, span = self._glide
            elapsed += wall_dt
            if elapsed >= span:
                self._finish_glide()
            else:
                self._glide = (start, end, elapsed, span)
                u = elapsed / span
                self.t = start + (end - start) * u * u * (3 - 2 * u)  # smoothstep
            return True
        if not self.playing:
            return False
        self.t = self.t + wall_dt * self.rate()
        if self.t >= self.total_time * (1 - 1e-12):
            if self.loop:
                self.seek(0.0)
                return True
            self.t = self.total_time
            self.playing = False
        return True

    def seek(self, t: float) -> None:
        self._glide = None
        self.t = min(max(0.0, t), self.total_time)
        self._last_t = self.t
        for trail in self._trails:
            trail.clear()

    def seek_fraction(self, frac: float) -> None:
        self.seek(frac * self.total_time)

    def seek_end(self) -> None:
        self.seek(self.total_time)

    def step_forward(self, glide_s: float = 0.0) -> bool:
        """Pause and move to the next step end of whichever lane reaches one first; with
        `glide_s` > 0 the clock gets there over that many wall seconds (see `advance`), so the
        tile is seen travelling."""
        self.playing = False
        self._finish_glide()
        cands = [b for lane in self.lanes if (b := lane.next_boundary(self.t)) is not None]
        if not cands:
            return False
        target = min(min(cands), self.total_time)
        if glide_s > 0:
            self._glide = (self.t, target, 0.0, glide_s)
        else:
            self._step_to(target)
        return True

    def step_back(self) -> bool:
        self.playing = False
        self._finish_glide()
        cands = [b for lane in self.lanes if (b := lane.prev_boundary(self.t)) is not None]
        if not cands:
            return False
        target = max(cands)
        self.t = target
        self._last_t = target
        for trail in self._trails:
            trail.clear()
        return True

    def _step_to(self, target: float) -> None:
        self._last_t = self.t
        self.t = min(target, self.total_time)

    # ---- snapshots

    def frames(self) -> list[LaneFrame]:
        """One frame per lane at the current time; records the tiles moved since the last call."""
        t0, t1 = self._last_t, self.t
        self._last_t = t1
        window = self.total_time * TRAIL_WALL_S / max(1e-6, self.duration_s)
        out = []
        for lane, trail in zip(self.lanes, self._trails, strict=True):
            out.append(self._frame(lane, trail, t0, t1, window))
        return out

    def _frame(self, lane: Lane, trail: deque, t0: float, t1: float, window: float) -> LaneFrame:
        p = lane.locate(t1)
        bh = self.config.bh
        # Sample the steps that ran since the last frame into the trail (bounded work).
        lo, hi = min(t0, lane.total_time), min(t1, lane.total_time)
        if hi > lo:
            n = TRAIL_SAMPLES
            for i in range(1, n + 1):
                ts = lo + (hi - lo) * i / n
                q = p if i == n else lane.locate(ts)
                code = int(q.timing.detail.kinds[q.step_index])
                if code != COMPUTE_CODE:
                    st = q.timing.detail.step_at(q.step_index)
                    mark = (st.matrix, st.region, st.kind, ts)
                    if not trail or trail[-1][:3] != mark[:3]:
                        trail.append(mark)
        while trail and t1 - trail[0][3] > window:
            trail.popleft()
        marks = tuple(
            TrailMark(m, r, kind, min(1.0, max(0.0, (t1 - ts) / window)) if window > 0 else 0.0)
            for m, r, kind, ts in trail
        )
        # Link utilisation since the last frame.
        if hi > lo:
            p0 = lane.locate(lo)
            dt = hi - lo
            scale = bh / lane.gpu.bandwidth_bytes_s / dt
            read_util = min(1.0, (p.read - p0.read) * scale)
            write_util = min(1.0, (p.written - p0.written) * scale)
        elif p.done:
            read_util = write_util = 0.0
        else:
            code = int(p.timing.detail.kinds[p.step_index])
            moving = 0.0 < p.step_phase < 1.0
            read_util = 1.0 if (moving and code == READ_CODE) else 0.0
            write_util = 1.0 if (moving and code == WRITE_CODE) else 0.0
        slots = lane.slots_at(p)
        written, readback = lane.hbm_progress(p)
        step = p.timing.detail.step_at(p.step_index)
        ks = lane.kernels[p.kernel_index]
        counters = Counters(
            p.read * bh,
            p.written * bh,
            p.flops * bh,
            sum(s.bytes for s in slots if s.resident and s.place == SMEM),
            min(t1, lane.total_time),
        )
        roles = None
        role_t = 0.0
        if lane.algorithm == TILED_WS and ks.name == "flash_fwd":
            roles = lane.roles_for_block(p.block)
            role_t = p.block_phase * roles.end
        return LaneFrame(
            algorithm=lane.algorithm,
            label=lane.label,
            config=self.config,
            counters=counters,
            totals=lane.totals(),
            done=p.done,
            started=t1 > 0,
            kernel=ks.name,
            kernel_index=p.kernel_index,
            kernel_count=len(lane.kernels),
            block=p.block,
            blocks=ks.blocks,
            step=step,
            step_index=p.step_index,
            steps_in_block=p.timing.detail.count,
            step_phase=p.step_phase,
            slots=slots,
            sram_capacity=self.gpu.smem_per_sm_bytes,
            written=written,
            readback=readback,
            trail=marks,
            origins=lane.origins_at(p),
            read_util=read_util,
            write_util=write_util,
            lod=lane.lod_text(),
            step_wall_s=self._step_wall_s(lane, p),
            clock_s=t1,
            clock_total_s=self.total_time,
            gliding=self.gliding,
            clock=lane.clock,
            layout=lane.layouts[p.kernel_index],
            roles=roles,
            role_t=role_t,
            tile=lane.tile_at(p),
        )

    def _step_wall_s(self, lane: Lane, p: Position) -> float:
        share = p.timing.cum_share
        modeled = float(lane.u_time[p.unit]) * float(share[p.step_index + 1] - share[p.step_index])
        return modeled / int(lane.u_nblocks[p.unit]) / max(1e-30, self.rate())

    def counters(self, algorithm: str) -> Counters:
        """Current counters of one lane, without touching the trail."""
        lane = self.lane(algorithm)
        p = lane.locate(self.t)
        bh = self.config.bh
        sram = sum(s.bytes for s in lane.slots_at(p) if s.resident and s.place == SMEM)
        return Counters(
            p.read * bh, p.written * bh, p.flops * bh, sram, min(self.t, lane.total_time)
        )


def build_lanes(
    config: AttentionConfig,
    gpu: GpuSpec,
    algorithms: tuple[str, ...],
    clocks: dict[str, LaneClock] | None = None,
) -> list[Lane]:
    """The lanes of `config`, each on its clock (modeled unless `clocks` names a measured one);
    tens of ms at large N: call it off the GUI thread."""
    clocks = clocks or {}
    return [Lane(config, a, gpu, clock=clocks.get(a, MODELED_CLOCK)) for a in algorithms]


def roofline_kernel_seconds(
    config: AttentionConfig, algorithm: str, gpu: GpuSpec
) -> dict[str, float]:
    """Each kernel's roofline time (s) at `config` on `gpu`: the verdict the Measurements tab
    draws (gpu.model.roofline, memoized in model_cache), so the animation's modeled clock and the
    roofline agree."""
    v = verdict(config, algorithm, gpu)
    return {k.name: k.roofline_ms * 1e-3 for k in v.kernels}


def cost_model_seconds(lane: Lane) -> float:
    """The roofline's time for the lane's config (the Measurements tab's): what a modeled
    lane's clock ends at."""
    return sum(roofline_kernel_seconds(lane.config, lane.algorithm, lane.gpu).values())


__all__ = [
    "DEFAULT_DURATION_S",
    "Counters",
    "Lane",
    "LaneFrame",
    "Player",
    "SlotState",
    "TrailMark",
    "build_lanes",
]
