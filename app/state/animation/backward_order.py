"""The fused backward's tile order, step by step, for the backward lane (Qt-free).

One thread block per K/V tile j (FlashAttention-2's backward): it loads K_j and V_j once and
holds them on chip while the query tiles i stream past it. For each (j, i) it

    load_Q_dO     reads Q_i, dO_i, logsumexp_i and D_i
    recompute_P   recomputes S_ij = Q_i K_jᵀ/√d and P_ij = exp(S_ij − logsumexp_i): no P was kept
    dV            dV_j += P_ijᵀ dO_i (on chip)
    dP_dS         dP_ij = dO_i V_jᵀ, dS_ij = P_ij ∘ (dP_ij − D_i)
    dK            dK_j += dS_ijᵀ Q_i (on chip)
    dQ_atomic     dQ_i += dS_ij K_j/√d, added to the fp32 accumulator in HBM (atomics)

and at the end writes dK_j and dV_j once. With a causal mask a block skips the query tiles that
end before its first key. With deterministic dQ (`config.deterministic`) the kernel has no
dQ_atomic step and no accumulator: dQ is summed afterwards by the dQ pass (`flash_bwd_dq`),
which the lane does not play, so its dQ column stays empty. The lane plays the blocks of one
(batch, head) in launch order, one step at a time (the order, not to time scale: on a GPU the
blocks run side by side).

Nothing iterates the steps: per-block and per-query-tile prefix sums locate any step and give
exact byte, FLOP and recompute counts after it; after the last step they equal the cost model's
`flash_bwd` kernel for one head (gpu/model/backward_cost.py), which the tests check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu.algorithms import backward_tile_shape
from gpu.config import STAT_BYTES, AttentionConfig, ceil_div
from gpu.model.backward_cost import DQ_ACCUM_BYTES

LOAD_KV, STORE_KV = "load_KV", "store_dK_dV"
#: What a block does for each streamed query tile, in order.
VISIT_PHASES: tuple[str, ...] = ("load_Q_dO", "recompute_P", "dV", "dP_dS", "dK", "dQ_atomic")
PHASE_TEXT: dict[str, str] = {
    LOAD_KV: "load K_j, V_j from HBM: they stay on chip for the whole block",
    "load_Q_dO": "stream Q_i, dO_i (and logsumexp_i, D_i) in from HBM",
    "recompute_P": (
        "recompute S_ij = Q_i K_jᵀ/√d and P_ij = exp(S_ij − logsumexp_i): P was not kept"
    ),
    "dV": "dV_j += P_ijᵀ dO_i, on chip",
    "dP_dS": "dP_ij = dO_i V_jᵀ, dS_ij = P_ij ∘ (dP_ij − D_i), on chip",
    "dK": "dK_j += dS_ijᵀ Q_i, on chip",
    "dQ_atomic": "dQ_i += dS_ij K_j/√d: fp32 atomic adds into the accumulator in HBM",
    STORE_KV: "write dK_j, dV_j to HBM, once",
}


@dataclass(frozen=True)
class BackwardFrame:
    """Where the lane is after `step` (0-based) and what it has moved and computed so far."""

    step: int
    total_steps: int
    kv_tile: int  # j: the block's K/V tile, resident on chip
    q_tile: int | None  # i: the streamed query tile (None while loading or storing K/V)
    phase: str
    #: Per query tile: K/V blocks whose dQ contribution has been added, and how many will be.
    dq_added: np.ndarray
    dq_needed: np.ndarray
    kv_stored: int  # blocks whose dK_j, dV_j are written
    bytes_read: int  # one (batch, head), HBM -> chip
    bytes_written: int
    flops: int
    recomputed_tiles: int  # P_ij tiles rebuilt so far
    recompute_flops: int  # the FLOPs of rebuilding S_ij

    @property
    def text(self) -> str:
        where = f"block j = {self.kv_tile}"
        if self.q_tile is not None:
            where += f", query tile i = {self.q_tile}"
        return f"{where}: {PHASE_TEXT[self.phase]}"

    @property
    def recomputing(self) -> bool:
        return self.phase == "recompute_P"


class BackwardTileOrder:
    """The steps of the fused backward for `config` with `algorithm`'s backward tiles."""

    def __init__(self, config: AttentionConfig, algorithm: str) -> None:
        self.config = config
        self.algorithm = algorithm
        #: The steps of one visit: without dQ_atomic when dQ is left to the dQ pass.
        self.phases = VISIT_PHASES[:-1] if config.deterministic else VISIT_PHASES
        per_visit = len(self.phases)
        acc = 0 if config.deterministic else DQ_ACCUM_BYTES
        #: GEMM-shaped products per visit: S (recompute), dV, dP, dK, and dQ unless
        #: deterministic.
        self.products = per_visit - 1
        n, d, eb = config.seq_len, config.head_dim, config.elem_bytes
        bm, bn = backward_tile_shape(config, algorithm)
        self.block_m, self.block_n = bm, bn
        self.q_tiles, self.kv_tiles = ceil_div(n, bm), ceil_div(n, bn)
        q_rows = np.full(self.q_tiles, bm, dtype=np.int64)
        q_rows[-1] = n - (self.q_tiles - 1) * bm
        kv_rows = np.full(self.kv_tiles, bn, dtype=np.int64)
        kv_rows[-1] = n - (self.kv_tiles - 1) * bn
        self.q_rows, self.kv_rows = q_rows, kv_rows
        j = np.arange(self.kv_tiles, dtype=np.int64)
        #: The first query tile block j streams (0 without a causal mask).
        self.first = (j * bn) // bm if config.causal else np.zeros_like(j)
        self.visits = self.q_tiles - self.first
        self.block_steps = 2 + per_visit * self.visits
        self.block_start = np.concatenate(([0], np.cumsum(self.block_steps)))
        self.total_steps = int(self.block_start[-1])
        # Prefix sums over query tiles: rows before tile i (for the visits of a block so far).
        self.q_rows_before = np.concatenate(([0], np.cumsum(q_rows)))
        # Bytes and FLOPs of one visit per row of Q_i (times the block's keys for FLOPs).
        self._visit_read_per_row = 2 * d * eb + 2 * STAT_BYTES + d * acc
        self._visit_write_per_row = d * acc
        self._kv_bytes = 2 * kv_rows * d * eb  # K_j + V_j in, or dK_j + dV_j out
        streamed = self.q_rows_before[-1] - self.q_rows_before[self.first]  # rows per block
        self._block_read = self._kv_bytes + streamed * self._visit_read_per_row
        self._block_write = self._kv_bytes + streamed * self._visit_write_per_row
        self._block_flops = 2 * self.products * streamed * kv_rows * d
        self._before = {
            name: np.concatenate(([0], np.cumsum(a)))
            for name, a in (
                ("read", self._block_read),
                ("write", self._block_write),
                ("flops", self._block_flops),
                ("visits", self.visits),
                ("recompute", 2 * streamed * kv_rows * d),
            )
        }
        # Query tile i receives a dQ contribution from every block j with first[j] <= i (none
        # from this kernel when deterministic: the dQ pass owns dQ_i).
        self.dq_needed = np.searchsorted(self.first, np.arange(self.q_tiles), side="right")
        if config.deterministic:
            self.dq_needed = np.zeros_like(self.dq_needed)

    def totals(self) -> tuple[int, int, int]:
        """Bytes read, bytes written and FLOPs of the whole kernel for one (batch, head)."""
        return (
            int(self._before["read"][-1]),
            int(self._before["write"][-1]),
            int(self._before["flops"][-1]),
        )

    def frame(self, step: int) -> BackwardFrame:
        """The state after `step` (clamped to the pass)."""
        step = max(0, min(self.total_steps - 1, int(step)))
        j = int(np.searchsorted(self.block_start, step, side="right") - 1)
        offset = step - int(self.block_start[j])
        last = int(self.block_steps[j]) - 1
        d = self.config.head_dim
        c = int(self.kv_rows[j])
        first = int(self.first[j])
        read = int(self._before["read"][j])
        write = int(self._before["write"][j])
        flops = int(self._before["flops"][j])
        recomputed = int(self._before["visits"][j])
        recompute_flops = int(self._before["recompute"][j])
        read += int(self._kv_bytes[j])  # K_j, V_j were loaded at offset 0
        if offset == 0:
            phase, i = LOAD_KV, None
            visits_done, phase_index = 0, -1
        elif offset == last:
            phase, i = STORE_KV, None
            visits_done, phase_index = int(self.visits[j]), len(self.phases)
            write += int(self._kv_bytes[j])
        else:
            k, phase_index = divmod(offset - 1, len(self.phases))
            phase, i = self.phases[phase_index], first + k
            visits_done = k
        # Whole visits done in this block.
        rows_done = int(self.q_rows_before[first + visits_done] - self.q_rows_before[first])
        read += rows_done * self._visit_read_per_row
        write += rows_done * self._visit_write_per_row
        flops += 2 * self.products * rows_done * c * d
        recomputed += visits_done
        recompute_flops += 2 * rows_done * c * d
        if i is not None:  # the visit in progress, phase by phase
            r = int(self.q_rows[i])
            read += r * self._visit_read_per_row  # Q_i, dO_i, lse_i, D_i (and dQ_i's lines)
            if phase_index >= 1:
                recomputed += 1
                recompute_flops += 2 * r * c * d
            # S (recompute), dV, dP, dK, dQ: 2·r·c·d each, done by their phases.
            flops += (
                2
                * r
                * c
                * d
                * sum((phase_index >= 1, phase_index >= 2, phase_index >= 3, phase_index >= 4))
            )
            if phase_index >= 5:  # dQ_atomic (never reached when deterministic)
                flops += 2 * r * c * d
                write += r * self._visit_write_per_row
        added = np.minimum(j, self.dq_needed)  # from every earlier block that visits tile i
        # (When deterministic no step adds to dQ: dq_needed and so `added` are zero.)
        if not self.config.deterministic and (visits_done or (i is not None and phase_index >= 5)):
            done_to = first + visits_done + (1 if i is not None and phase_index >= 5 else 0)
            added = added.copy()
            added[first:done_to] += 1
        return BackwardFrame(
            step=step,
            total_steps=self.total_steps,
            kv_tile=j,
            q_tile=i,
            phase=phase,
            dq_added=added,
            dq_needed=self.dq_needed,
            kv_stored=j + (1 if phase == STORE_KV else 0),
            bytes_read=read,
            bytes_written=write,
            flops=flops,
            recomputed_tiles=recomputed,
            recompute_flops=recompute_flops,
        )

    def first_step_of(self, kv_tile: int) -> int:
        return int(self.block_start[kv_tile])
