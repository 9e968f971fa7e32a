"""The Tiles tab's decode lanes on one clock, free of Qt: naive decode and the split-KV kernel,
step by step (gpu/model/decode_schedule.py), and what each shows at any time.

The clock is whole-GPU time, as for the prefill lanes (lane.py): while a lane shows a step of
one (batch, KV head), the B·H_kv pairs all take that step side by side. Each kernel takes its
roofline time (the Measurements tab's), or its measured time where this config was timed on
the GPU the lanes model (clock.py); its steps share it in proportion to their own roofline,
bytes over the memory's bandwidth and FLOPs over the CUDA cores' peak (decode's dot products
are too few rows for a tensor-core tile; naive's GEMMs run on the tensor cores). Both lanes
run on the one clock, so the faster finishes first.

Counters are exact integers: the bytes and FLOPs of the steps done, plus the share of the step
in flight; at the end they equal the cost model's no-reuse kernels (the tests check it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu.algorithms import NAIVE, SPLIT_KV
from gpu.config import AttentionConfig
from gpu.model.costmodel import GpuSpec
from gpu.model.decode_schedule import (
    STEP_NAMES,
    DecodeSchedule,
    decode_schedule,
    keys_per_step,
)
from gpu.results import RunResult

from ..model.cache import cost, verdict
from .clock import MODELED_CLOCK, LaneClock, clock_for, kernel_scales
from .lane import unit_peak

#: What each step does, in words (the lane's caption).
STEP_TEXT: dict[str, str] = {
    "qk_store_S_ij": "gemm_qk: a tile of K in, 128 scores of each query row out to HBM (S)",
    "softmax_write_P": "softmax: a row of S read back from HBM, P written out",
    "pv_load_V_k": "gemm_pv: a tile of P and a tile of V in from HBM, O accumulated",
    "pv_store_O_i": "gemm_pv: O written to HBM",
    "load_q": "every split's block loads the group's query rows (scaled once)",
    "stream_kv": "each split streams its next keys of K and V from HBM: scores, online "
    "softmax and O on chip",
    "combine_groups": "each block combines its key groups' (m, l, O) in shared memory",
    "write_partial": "each split writes its partial (m, l, O) to HBM",
    "merge_splits": "the last block reads every split's m and l: the weights l·2^(m − M)",
    "store_o": "the last block merges the partial O of every split and writes O",
}
#: Steps whose kernel writes the split's result itself (one split): the caption.
ONE_SPLIT_TEXT = "one split: the block writes O itself, no partial and no merge"


@dataclass(frozen=True)
class DecodeFrame:
    """Where a lane is at a time, and what it has moved and computed (all B·H_kv pairs)."""

    algorithm: str
    step: int
    total_steps: int
    name: str
    kernel: str
    tile: int
    phase: float  # share of the step done
    done: bool
    bytes_read: int
    bytes_written: int
    flops: int
    #: naive: score tiles written, P rows written, O stored (each 0..1)
    s_written: float
    p_written: float
    o_written: float
    #: split_kv: keys streamed by each split so far (one entry per split)
    keys_streamed: tuple[int, ...]
    partials_written: bool
    merged: float  # share of the merge done (0..1)

    @property
    def text(self) -> str:
        if self.done:
            return "done: O is in HBM"
        if self.name == "write_partial" and len(self.keys_streamed) == 1:
            return ONE_SPLIT_TEXT
        return STEP_TEXT[self.name]


class DecodeLane:
    """One algorithm's decode steps on the clock (see the module docstring)."""

    def __init__(
        self,
        config: AttentionConfig,
        algorithm: str,
        gpu: GpuSpec,
        clock: LaneClock = MODELED_CLOCK,
    ) -> None:
        self.config = config
        self.algorithm = algorithm
        self.gpu = gpu
        self.clock = clock
        self.schedule: DecodeSchedule = decode_schedule(config, algorithm, gpu)
        s = self.schedule
        self.kernels = s.kernels()
        self.kernel_of = s.kernel_of()
        self.names = [STEP_NAMES[int(c)] for c in s.name]
        v = verdict(config, algorithm, gpu)
        units = {k.name: k.unit for k in cost(config, algorithm).kernels}
        peaks = np.array([unit_peak(gpu, units.get(k, "")) for k in self.kernels])
        weight = (s.bytes_read + s.bytes_written) / gpu.bandwidth_bytes_s + s.flops / peaks[
            self.kernel_of
        ]
        positive = weight[weight > 0]
        weight = np.where(weight > 0, weight, 0.02 * (positive.min() if positive.size else 1.0))
        modeled = {k: float(weight[self.kernel_of == i].sum()) for i, k in enumerate(self.kernels)}
        if clock.measured:
            scales = kernel_scales(clock, modeled)
        else:
            roof = {k.name: k.roofline_ms * 1e-3 for k in v.kernels}
            scales = {k: roof[k] / modeled[k] for k in self.kernels if modeled[k] > 0}
        factor = np.array([scales.get(k, 1.0) for k in self.kernels])
        self.seconds = weight * factor[self.kernel_of]
        self.cum_time = np.concatenate(([0.0], np.cumsum(self.seconds)))
        self.total_seconds = float(self.cum_time[-1])
        zero = np.zeros(1, dtype=np.int64)
        self.cum_read = np.concatenate((zero, np.cumsum(s.bytes_read)))
        self.cum_written = np.concatenate((zero, np.cumsum(s.bytes_written)))
        self.cum_flops = np.concatenate((zero, np.cumsum(s.flops)))
        # What each kernel's tiles, rows or keys add up to (the progress bars' denominators).
        names = np.array(self.names)
        self._count = {n: int(np.sum(names == n)) for n in set(self.names)}
        self._before = {n: np.concatenate(([0], np.cumsum(names == n))) for n in self._count}
        if s.plan is not None:
            per, n = s.plan.keys_per_split, config.seq_len
            self.split_keys = np.minimum(per, n - np.arange(s.plan.splits) * per)
            self.keys_per_step = keys_per_step(config)

    @property
    def label(self) -> str:
        return "naive" if self.algorithm == NAIVE else "split-KV"

    def totals(self) -> dict[str, int]:
        pairs = self.schedule.pairs
        return {
            "bytes_read": int(self.cum_read[-1]) * pairs,
            "bytes_written": int(self.cum_written[-1]) * pairs,
            "flops": int(self.cum_flops[-1]) * pairs,
        }

    def _share(self, name: str, i: int, phase: float) -> float:
        """Steps named `name` done by step i (the current one by `phase`), as a share."""
        count = self._count.get(name, 0)
        if not count:
            return 0.0
        done = int(self._before[name][i]) + (phase if self.names[i] == name else 0.0)
        return min(1.0, done / count)

    def frame(self, t: float) -> DecodeFrame:
        """The lane at time `t` (seconds of the whole-GPU clock; clamped)."""
        total = self.total_seconds
        done = t >= total * (1 - 1e-12)
        if done:
            i, phase = self.schedule.steps - 1, 1.0
        else:
            t = max(0.0, t)
            i = int(np.searchsorted(self.cum_time[1:], t, side="right"))
            i = min(i, self.schedule.steps - 1)
            span = self.seconds[i]
            phase = min(1.0, max(0.0, (t - self.cum_time[i]) / span)) if span > 0 else 1.0
        s, pairs = self.schedule, self.schedule.pairs

        def counted(cum: np.ndarray, row: np.ndarray) -> int:
            return (int(cum[i]) + int(phase * int(row[i]))) * pairs

        streamed: tuple[int, ...] = ()
        if s.plan is not None:
            steps_done = self._share("stream_kv", i, phase) * self._count.get("stream_kv", 0)
            keys = np.minimum(self.split_keys, np.floor(steps_done * self.keys_per_step))
            streamed = tuple(int(k) for k in keys)
        partial_done = s.plan is not None and (
            done or self._share("write_partial", i, phase) >= 1.0
        )
        merge = (self._share("merge_splits", i, phase) + self._share("store_o", i, phase)) / 2
        return DecodeFrame(
            algorithm=self.algorithm,
            step=i,
            total_steps=s.steps,
            name=self.names[i],
            kernel=self.kernels[int(self.kernel_of[i])],
            tile=int(s.tile[i]),
            phase=phase,
            done=done,
            bytes_read=counted(self.cum_read, s.bytes_read),
            bytes_written=counted(self.cum_written, s.bytes_written),
            flops=counted(self.cum_flops, s.flops),
            s_written=self._share("qk_store_S_ij", i, phase),
            p_written=self._share("softmax_write_P", i, phase),
            o_written=self._share("pv_store_O_i", i, phase),
            keys_streamed=streamed,
            partials_written=bool(partial_done),
            merged=1.0 if done and s.plan is not None else merge,
        )


class DecodeLanes:
    """Naive and split-KV decode of `config` on one clock; `results` (this config's, per
    algorithm) give a lane its measured clock where timed on `gpu` (clock.py)."""

    ALGORITHMS = (NAIVE, SPLIT_KV)

    def __init__(
        self,
        config: AttentionConfig,
        gpu: GpuSpec,
        results: dict[str, RunResult] | None = None,
    ) -> None:
        self.config = config
        self.gpu = gpu
        results = results or {}
        self.lanes = tuple(
            DecodeLane(config, a, gpu, clock_for(results.get(a), gpu)) for a in self.ALGORITHMS
        )
        self.total_seconds = max(lane.total_seconds for lane in self.lanes)

    def frames(self, t: float) -> tuple[DecodeFrame, ...]:
        return tuple(lane.frame(t) for lane in self.lanes)

    def boundaries(self) -> np.ndarray:
        """Every lane's step ends, merged and sorted (stepping one step at a time)."""
        return np.unique(np.concatenate([lane.cum_time[1:] for lane in self.lanes]))
