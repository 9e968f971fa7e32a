"""The warp-specialized kernel's roles inside one thread block, on one clock (Qt-free).

flash_ws.cu splits a block into a producer (one thread issuing TMA copies of K_j and V_j into a
ring of NS shared-memory stages) and consumer warpgroups of 64 query rows each. A consumer
waits for K_j, takes its turn on the tensor cores (issues S_j = Q K_jᵀ and P_{j-1} V_{j-1}),
does the softmax of S_j when it lands while its P·V still runs, then waits for the P·V. The
consumers take turns (ping-pong), so one's softmax runs under the others' GEMMs. A
`RoleTimeline` says when each of those moments happened in one block:

- `modeled_roles`: from per-SM rates of the cost model's GPU (tensor cores, exponential unit,
  the L2's bandwidth share for the copies, where the GPU table has it, else HBM's), replaying
  the kernel's order of work: the ring's full/empty waits, the turns, in-order tensor cores;
- `traced_roles`: from a traced block (gpu/files/trace.py `BlockTrace.roles`): the kernel's own
  marks (flash_ws.cu's trace build), which is what the hardware did.

Arrays, not objects: consumer arrays are (consumers, tiles + 1), index j = tiles for the last
P·V; the producer's copy landings are NaN when unknown (a trace records issues only).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpu.algorithms import TILED_WS, tile_shape
from gpu.config import AttentionConfig
from gpu.files.trace import BlockTrace
from gpu.launch.flash_ws import WS_DEFAULTS
from gpu.launch.ws_variant import WsLaunch
from gpu.model.costmodel import GpuSpec, kv_tiles_for_query_tile

#: What a consumer does between two of its marks, in drawing order; PV: its P·V on the tensor
#: cores while its warps do the softmax (known in the model only).
WAIT, GEMM, SOFTMAX, WAIT_PV, EPILOGUE = "wait", "gemm", "softmax", "wait_pv", "epilogue"
PV = "pv"
#: The producer: a copy in flight (issue -> landed), or an issue instant.
COPY_K, COPY_V, ISSUE = "copy_k", "copy_v", "issue"
CONSUMER_ROWS = 64
#: Tiles replayed step by step; beyond them the steady state (one tile per period) repeats.
SIM_TILES = 24


@dataclass(frozen=True)
class RoleSpan:
    """One stretch of one role: `role` 0 is the producer, 1 + c consumer c."""

    role: int
    kind: str
    j: int
    t0: float
    t1: float


@dataclass(frozen=True)
class RoleTimeline:
    """When each role of one block did what, from the block's start: seconds in the model,
    nanoseconds in a trace."""

    tiles: int
    stages: int
    wait: np.ndarray  # (C, T+1): starts waiting for K_j (j = T: for the last V)
    issue: np.ndarray  # (C, T+1): its GEMMs issued, its turn on the tensor cores
    s_done: np.ndarray  # (C, T): S_j landed, softmax starts
    sm_done: np.ndarray  # (C, T): softmax done, waiting for P·V
    epilogue: np.ndarray  # (C,): O_i / l and the stores begin
    end_c: np.ndarray  # (C,)
    k_issue: np.ndarray  # (T,)
    v_issue: np.ndarray  # (T,)
    k_land: np.ndarray  # (T,) NaN where unknown
    v_land: np.ndarray  # (T,)
    end: float
    #: The model only (None for traces): when a consumer's S_j started on the tensor cores
    #: (after any GEMM queued before it) and when its P_{j-1} V_{j-1} finished, (C, T+1).
    s_start: np.ndarray | None = None
    pv_end: np.ndarray | None = None

    @property
    def consumers(self) -> int:
        return int(self.wait.shape[0])

    @property
    def role_names(self) -> tuple[str, ...]:
        return ("producer", *(f"consumer {c}" for c in range(self.consumers)))

    def tile_at(self, t: float, consumer: int = 0) -> int:
        """The tile consumer `consumer` is working on at time t (its last wait at or before t)."""
        w = self.wait[consumer]
        ok = np.flatnonzero(np.isfinite(w) & (w <= t))
        return int(ok[-1]) if ok.size else 0

    def spans(self, j0: int, j1: int) -> list[RoleSpan]:
        """Every stretch of every role touching tiles j0 .. j1 (inclusive), for drawing."""
        out: list[RoleSpan] = []
        t = self.tiles
        j0, j1 = max(0, j0), min(t, j1)
        for c in range(self.consumers):
            role = 1 + c
            for j in range(j0, j1 + 1):
                wait = self.wait[c, j]
                start = self.issue[c, j] if self.s_start is None else self.s_start[c, j]
                out.append(RoleSpan(role, WAIT, j, wait, start))
                if j == t:  # the last P·V, then the epilogue
                    out.append(RoleSpan(role, GEMM, j, start, self.epilogue[c]))
                    out.append(RoleSpan(role, EPILOGUE, j, self.epilogue[c], self.end_c[c]))
                    continue
                nxt = self.wait[c, j + 1]
                out += [
                    RoleSpan(role, GEMM, j, start, self.s_done[c, j]),
                    RoleSpan(role, SOFTMAX, j, self.s_done[c, j], self.sm_done[c, j]),
                    RoleSpan(role, WAIT_PV, j, self.sm_done[c, j], nxt),
                ]
                if self.pv_end is not None and j > 0:
                    out.append(RoleSpan(role, PV, j - 1, self.s_done[c, j], self.pv_end[c, j]))
        for j in range(j0, min(t - 1, j1) + 1):
            for kind, issue, land in (
                (COPY_K, self.k_issue[j], self.k_land[j]),
                (COPY_V, self.v_issue[j], self.v_land[j]),
            ):
                if np.isfinite(land):
                    out.append(RoleSpan(0, kind, j, issue, land))
                out.append(RoleSpan(0, ISSUE, j, issue, issue))
        return [s for s in out if np.isfinite(s.t0) and np.isfinite(s.t1) and s.t1 >= s.t0]

    def step_bounds(self) -> np.ndarray:
        """Boundaries of the schedule's steps of this block (load_Q_i; per tile load_K_j,
        load_V_j, compute_S_ij, online_softmax, accumulate_O_i; store_O_i, store_ml) on this
        timeline, as consumer 0 lives them: len 1 + 5T + 2 + 1, non-decreasing, 0 .. end."""
        t = self.tiles
        w, iss = _filled(self.wait[0]), _filled(self.issue[0])
        sd, smd = _filled(self.s_done[0]), _filled(self.sm_done[0])
        b = np.empty(1 + 5 * t + 3)
        b[0] = 0.0
        b[1] = w[0]  # load_Q_i until consumer 0 waits for K_0
        body = np.empty((t, 5))
        body[:, 0] = (w[:t] + iss[:t]) / 2  # load_K_j ends halfway through the wait
        body[:, 1] = iss[:t]  # load_V_j: until its GEMMs are issued
        body[:, 2] = sd  # compute_S_ij: until S_j lands
        body[:, 3] = smd  # online_softmax
        nxt = w[1 : t + 1].copy()  # accumulate_O_i: until it waits for the next tile ...
        nxt[-1] = self.epilogue[0]  # ... or, the last one, until the epilogue
        body[:, 4] = nxt
        b[2 : 2 + 5 * t] = body.ravel()
        b[-2] = (self.epilogue[0] + self.end) / 2  # store_O_i, then store_ml until the end
        b[-1] = self.end
        return np.maximum.accumulate(np.nan_to_num(b, nan=0.0))


def _filled(a: np.ndarray) -> np.ndarray:
    """NaN (a thinned trace's missing tiles) filled by interpolation between known marks."""
    a = np.asarray(a, dtype=np.float64)
    ok = np.isfinite(a)
    if ok.all() or not ok.any():
        return np.nan_to_num(a)
    idx = np.arange(len(a))
    return np.interp(idx, idx[ok], a[ok])


# --------------------------------------------------------------------------------------------
# Modeled


@dataclass(frozen=True)
class RoleRates:
    """Per-SM times of one tile's work (seconds)."""

    gemm_s: float  # S_j = Q K_jᵀ of one consumer's 64 rows
    gemm_pv: float  # P_j V_j of one consumer
    softmax: float  # one consumer's exponentials on the exponential unit
    copy_kv: float  # one K or V tile
    copy_q: float
    store: float  # one consumer's O rows out


def role_rates(config: AttentionConfig, gpu: GpuSpec) -> RoleRates:
    d, eb = config.head_dim, config.elem_bytes
    bm, bn = tile_shape(config, TILED_WS)
    tensor = gpu.fp16_tensor_flops / gpu.sms
    xu = gpu.xu_ops_s / gpu.sms if gpu.xu_ops_s > 0 else tensor / 64
    # copies at the SM's share of the L2's bandwidth (K/V re-reads hit L2), else of HBM's
    rate = (gpu.l2_bandwidth_bytes_s or gpu.bandwidth_bytes_s) / gpu.sms
    gemm = 2 * CONSUMER_ROWS * bn * d / tensor
    return RoleRates(
        gemm_s=gemm,
        gemm_pv=gemm,
        softmax=CONSUMER_ROWS * bn / xu,
        copy_kv=bn * d * eb / rate,
        copy_q=bm * d * eb / rate,
        store=CONSUMER_ROWS * d * eb / rate,
    )


def ws_launch(config: AttentionConfig) -> WsLaunch:
    """The variant the app launches for `config` (WS_DEFAULTS, as `flash_ws.tile_shape` reads it). A
    head dim the kernel does not run gets d=128's variant at the config's head dim: the tiles,
    ring and warpgroups the schedule models, with its own shared memory."""
    launch = WsLaunch.from_label(WS_DEFAULTS.get(config.head_dim, WS_DEFAULTS[128]))
    if launch.head_dim != config.head_dim:
        launch = replace(launch, head_dim=config.head_dim)
    return launch


def ws_shape(config: AttentionConfig) -> tuple[int, int, int, int]:
    """(query rows per block, keys per tile, consumer warpgroups, ring stages)."""
    bm, bn = tile_shape(config, TILED_WS)
    launch = ws_launch(config)
    return bm, bn, launch.consumers, launch.stages


def modeled_roles(config: AttentionConfig, gpu: GpuSpec, query_tile: int) -> RoleTimeline:
    """One block's roles replayed at per-SM rates (module docstring): seconds from its start.

    The producer issues K_0, then K_{j+1} before V_j, each into stage t % NS once every consumer
    has released that stage's previous tile; copies go one after the other through the SM's
    share of bandwidth. With ping-pong the consumers take turns in a fixed round (0, 1, ...,
    C-1, 0, 1, ...; named barriers in the kernel); without it each issues as soon as it is
    ready; the tensor cores run the GEMMs in issue order; a consumer releases K_j when S_j lands
    and V_{j-1} when P_{j-1} V_{j-1} completes."""
    bm, bn, cons, ns = ws_shape(config)
    pingpong = ws_launch(config).pingpong
    r = role_rates(config, gpu)
    t_count = kv_tiles_for_query_tile(config, bm, bn, query_tile)
    k_issue = np.zeros(t_count)
    v_issue = np.zeros(t_count)
    k_land = np.zeros(t_count)
    v_land = np.zeros(t_count)
    k_free = np.zeros(t_count)  # when every consumer has released K_j (S_j landed)
    v_free = np.zeros(t_count)  # ... V_j (P_j V_j done)
    wait = np.zeros((cons, t_count + 1))
    issue = np.zeros((cons, t_count + 1))
    s_start = np.zeros((cons, t_count + 1))
    pv_end = np.zeros((cons, t_count + 1))
    s_done = np.zeros((cons, t_count))
    sm_done = np.zeros((cons, t_count))
    link = r.copy_q  # the Q copy goes first
    q_land = r.copy_q
    producer_t = 0.0

    def copy(ready: float) -> tuple[float, float]:
        nonlocal link, producer_t
        at = max(producer_t, ready)
        producer_t = at
        link = max(link, at) + r.copy_kv
        return at, link

    k_issue[0], k_land[0] = copy(0.0)
    finished = np.full(cons, q_land)  # each consumer's previous step end
    tensor_free = 0.0
    turn_after = 0.0  # the previous turn's issue time (ping-pong order)
    pv_done = np.zeros(cons)
    simulated = min(t_count, SIM_TILES)
    for j in range(simulated):
        if j + 1 < t_count:  # the producer: K_{j+1}, then V_j
            ready = k_free[j + 1 - ns] if j + 1 >= ns else 0.0
            k_issue[j + 1], k_land[j + 1] = copy(ready)
        ready = v_free[j - ns] if j >= ns else 0.0
        v_issue[j], v_land[j] = copy(ready)
        for c in range(cons):
            wait[c, j] = finished[c]
            need = k_land[j] if j == 0 else max(k_land[j], v_land[j - 1])
            at = max(finished[c], need, turn_after if pingpong else 0.0)
            issue[c, j] = at
            turn_after = at
            s_start[c, j] = max(at, tensor_free)
            s_done[c, j] = s_start[c, j] + r.gemm_s
            tensor_free = pv_done[c] = s_done[c, j] + (r.gemm_pv if j > 0 else 0.0)
            pv_end[c, j] = tensor_free
            sm_done[c, j] = s_done[c, j] + r.softmax
            finished[c] = max(sm_done[c, j], pv_done[c])
        k_free[j] = s_done[:, j].max()
        if j > 0:
            v_free[j - 1] = pv_done.max()
    if simulated < t_count:  # the steady state repeats: extend it tile by tile
        extra = np.arange(1, t_count - simulated + 1)
        for a in (wait, issue, s_start, pv_end, s_done, sm_done):
            last, step = a[:, simulated - 1], a[:, simulated - 1] - a[:, simulated - 2]
            a[:, simulated:t_count] = last[:, None] + step[:, None] * extra[None, :]
        for a in (k_issue, k_land, v_issue, v_land):
            last, step = a[simulated - 1], a[simulated - 1] - a[simulated - 2]
            a[simulated:] = last + step * extra
        period = wait[:, simulated - 1] - wait[:, simulated - 2]
        finished = wait[:, t_count - 1] + period
        tensor_free = float(s_done[:, t_count - 1].max() + r.gemm_pv)
        turn_after = float(issue[:, t_count - 1].max())
    for c in range(cons):  # the last P·V
        wait[c, t_count] = finished[c]
        at = max(finished[c], v_land[t_count - 1], turn_after)
        issue[c, t_count] = turn_after = at
        s_start[c, t_count] = max(at, tensor_free)
        tensor_free = finished[c] = pv_end[c, t_count] = s_start[c, t_count] + r.gemm_pv
    epilogue = finished.copy()
    end_c = epilogue + r.store
    return RoleTimeline(
        tiles=t_count,
        stages=ns,
        wait=wait,
        issue=issue,
        s_done=s_done,
        sm_done=sm_done,
        epilogue=epilogue,
        end_c=end_c,
        k_issue=k_issue,
        v_issue=v_issue,
        k_land=k_land,
        v_land=v_land,
        end=float(end_c.max()),
        s_start=s_start,
        pv_end=pv_end,
    )


# --------------------------------------------------------------------------------------------
# Traced


def traced_roles(block: BlockTrace) -> RoleTimeline | None:
    """The roles of a traced warp-specialized block (ns from the block's start), or None when
    the block carries no role marks."""
    if not block.roles:
        return None
    consumers = [r for r in block.roles if r.role.startswith("consumer")]
    producer = next((r for r in block.roles if r.role == "producer"), None)
    if not consumers:
        return None
    tiles = 0
    for r in block.roles:
        for name, j, _t in r.phases:
            if name in ("load_K_j", "load_V_j", "wait_K_j", "online_softmax"):
                tiles = max(tiles, j + 1)
    c_n = len(consumers)
    nan = np.nan
    wait = np.full((c_n, tiles + 1), nan)
    issue = np.full((c_n, tiles + 1), nan)
    s_done = np.full((c_n, tiles), nan)
    sm_done = np.full((c_n, tiles), nan)
    epilogue = np.full(c_n, nan)
    end_c = np.full(c_n, nan)
    t0 = block.start_ns
    for c, r in enumerate(consumers):
        for name, j, t in r.phases:
            dt = float(t - t0)
            if name == "wait_K_j" and 0 <= j <= tiles:
                wait[c, j] = dt
            elif name == "gemm_issue" and 0 <= j <= tiles:
                issue[c, j] = dt
                if j == tiles and np.isnan(wait[c, j]):
                    wait[c, j] = dt
            elif name == "online_softmax" and 0 <= j < tiles:
                s_done[c, j] = dt
            elif name == "wait_PV" and 0 <= j < tiles:
                sm_done[c, j] = dt
            elif name == "store_O_i":
                epilogue[c] = dt
            elif name == "end":
                end_c[c] = dt
        # the last P·V's wait starts when the last softmax's wait for P·V ends
        if tiles and np.isnan(wait[c, tiles]):
            wait[c, tiles] = sm_done[c, tiles - 1]
    k_issue = np.full(tiles, nan)
    v_issue = np.full(tiles, nan)
    if producer is not None:
        for name, j, t in producer.phases:
            if name == "load_K_j" and 0 <= j < tiles:
                k_issue[j] = float(t - t0)
            elif name == "load_V_j" and 0 <= j < tiles:
                v_issue[j] = float(t - t0)
    # consumers wait from their previous mark: fill a missing wait with the previous end
    end = float(block.end_ns - t0)
    end_c = np.where(np.isnan(end_c), end, end_c)
    epilogue = np.where(np.isnan(epilogue), end_c, epilogue)
    return RoleTimeline(
        tiles=tiles,
        stages=2,  # not in the trace: every default launch (WS_DEFAULTS) rings two stages
        wait=wait,
        issue=issue,
        s_done=s_done,
        sm_done=sm_done,
        epilogue=epilogue,
        end_c=end_c,
        k_issue=k_issue,
        v_issue=v_issue,
        k_land=np.full(tiles, nan),
        v_land=np.full(tiles, nan),
        end=end,
    )


def overlap_share(tl: RoleTimeline) -> float:
    """Share of the consumers' softmax time during which the tensor cores were busy with a
    GEMM: another consumer's (ping-pong) or, where known (the model), the consumer's own P·V
    (intra-warpgroup overlap). 0 when the softmax ran alone; what warp specialization buys."""
    spans = tl.spans(0, tl.tiles)
    soft = np.array([(s.t0, s.t1, s.role) for s in spans if s.kind == SOFTMAX], dtype=np.float64)
    busy = np.array(
        [(s.t0, s.t1, s.role, s.kind == PV) for s in spans if s.kind in (GEMM, PV)],
        dtype=np.float64,
    )
    if soft.size == 0 or busy.size == 0:
        return 0.0
    total = float((soft[:, 1] - soft[:, 0]).sum())
    if total <= 0:
        return 0.0
    lo = np.maximum(soft[:, None, 0], busy[None, :, 0])
    hi = np.minimum(soft[:, None, 1], busy[None, :, 1])
    counts = (soft[:, None, 2] != busy[None, :, 2]) | (busy[None, :, 3] > 0)
    # the model's GEMMs never overlap each other, and a trace of two consumers has one other
    # consumer: the overlaps add up
    hidden = float(np.where(counts, np.clip(hi - lo, 0.0, None), 0.0).sum())
    return min(1.0, hidden / total)
