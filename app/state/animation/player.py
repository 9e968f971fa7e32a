"""The tile animation's playback model, free of Qt: one clock over several lanes (lane.py,
which also says what the clock means), play, pause, glide, seek and step, and the frames the
views draw with each lane's trail. Both lanes run on this one clock, so the faster algorithm
simply finishes first; a full pass (the slower lane's total time) is mapped to `duration_s` of
wall time at speed 1×."""

from __future__ import annotations

from collections import deque

from gpu.algorithms import NAIVE, TILED, TILED_WS
from gpu.config import AttentionConfig
from gpu.model.costmodel import DEFAULT_GPU, GPUS, GpuSpec

from .chip import SMEM
from .clock import MODELED_CLOCK, LaneClock
from .kernel_steps import COMPUTE_CODE, READ_CODE, WRITE_CODE
from .lane import Lane, build_lanes
from .snapshots import Counters, LaneFrame, Position, TrailMark

#: Trail of recently moved tiles: samples per frame and how long a mark stays (wall seconds at 1×).
TRAIL_SAMPLES = 6


TRAIL_MAX = 48


TRAIL_WALL_S = 0.8


DEFAULT_DURATION_S = 20.0


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
