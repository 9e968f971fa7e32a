"""One algorithm's lane of the tile animation, free of Qt: its blocks in launch order on one
modeled clock, and what it shows at any time (slots, counters, level of detail).

What the clock means (documented choice): each algorithm is a *lane* that plays the blocks of one
(batch, head) in launch order, kernel after kernel. The clock is **whole-GPU time**: while the
lane shows block b, all B·h copies of that block (one per head) run concurrently and share the
GPU's full bandwidth and peak. Modeled, each kernel takes the roofline's time, the very figure
the Measurements tab's roofline gives it (gpu.model.roofline: L2-aware DRAM bytes, L2 bytes, FLOPs
at the roof of the instruction family the kernel uses, exponentials), and its blocks share
that time in proportion to

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

from collections import OrderedDict

import numpy as np

from gpu.algorithms import ALGORITHMS, TILED_WS, tile_shape
from gpu.config import AttentionConfig, ceil_div
from gpu.model.costmodel import DEFAULT_GPU, GPUS, GpuSpec, algorithm_cost, kv_tiles_for_query_tile
from gpu.model.schedule import Schedule, build_schedule, launch_query_tile

from ..model.cache import verdict
from .blockdetail import BlockDetail, block_detail
from .chip import SlotSpec, chip_layout
from .clock import MODELED_CLOCK, LaneClock, kernel_scales
from .kernel_steps import KERNEL_HBM_IO, READ_CODE, STEP_USES
from .snapshots import Counters, Position, SlotState, Timing, TrailMark
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
        self._details: OrderedDict[tuple[int, int], Timing] = OrderedDict()
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

    def timing(self, k: int, block: int) -> Timing:
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
        t = Timing(
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
        i = launch_query_tile(self.config, ceil_div(self.config.seq_len, bm), block, self.algorithm)
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
