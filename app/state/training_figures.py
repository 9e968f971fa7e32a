"""The training pass's figures at the current point, each a value, a unit and a source (the
current point's Figure): what one layer saves for its backward, what the fused backward
recomputes, the peak of one layer's step (measured where a step of this config ran, the
model's otherwise) and of L layers, and where L layers hit the memory wall.

Naive keeps P (B·h·N²) for its backward; FlashAttention keeps O and the row statistics and
recomputes S and P. Every fused kernel saves the same and runs the same backward, so one fused
entry stands for them all (`FUSED`), measured by whichever fused kernel ran the step. The
explain pane and `main.py explain --json` read these objects; Qt-free, memoized per
(config, layers, budget, results).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpu.algorithms import ALGORITHMS, NAIVE, TILED
from gpu.config import PASS_LABELS, AttentionConfig
from gpu.model.backward_cost import backward_useful_flops, recompute_flops
from gpu.model.layer_stack import layer_stack, training_wall_seq_len
from gpu.results import RunResult

from .current_point import MAX_POINTS, MODEL, Figure
from .current_point import MEASURED as MEASURED_SOURCE

#: The fused entry's key: the readable kernel stands for every fused one (same saved bytes,
#: same backward).
FUSED = TILED
COUNTS = "attention's own tensors: no weights, optimizer state or MLP activations"


@dataclass(frozen=True)
class TrainingAlgorithmFigures:
    """One algorithm's training memory and recompute at the current point."""

    algorithm: str
    recompute_flops: Figure
    saved_per_layer: Figure
    saved_total: Figure  # L layers'
    layers_peak: Figure  # L layers' saved activations + one layer's backward
    step_peak: Figure  # one layer's step (or backward): measured where it ran
    #: The N where L layers no longer fit the budget (value None: they fit at every N);
    #: None without a budget.
    wall_seq_len: Figure | None
    #: The algorithm whose run measured `step_peak` (for FUSED: the fused kernel that ran the
    #: step, which the views name); None where the peak is the model's.
    measured_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        names = ("recompute_flops", "saved_per_layer", "saved_total", "layers_peak",
                 "step_peak", "wall_seq_len")  # fmt: skip
        out: dict[str, Any] = {}
        for n in names:
            f = getattr(self, n)
            out[n] = f.to_dict() if f is not None else None
        out["measured_by"] = self.measured_by
        return out


@dataclass(frozen=True)
class TrainingFigures:
    config: AttentionConfig
    layers: int
    budget_bytes: int | None
    backward_useful_flops: Figure
    algorithms: dict[str, TrainingAlgorithmFigures]  # NAIVE and FUSED

    def algorithm(self, algorithm: str) -> TrainingAlgorithmFigures:
        return self.algorithms[algorithm]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pass": self.config.pass_,
            "deterministic": self.config.deterministic,
            "layers": self.layers,
            "budget_bytes": self.budget_bytes,
            "counts": COUNTS,
            "backward_useful_flops": self.backward_useful_flops.to_dict(),
            "algorithms": {a: f.to_dict() for a, f in self.algorithms.items()},
        }


def _step_result(
    config: AttentionConfig, algorithm: str, results: Mapping[str, RunResult]
) -> RunResult | None:
    """The measured step of `algorithm` (for FUSED: the readable kernel's, else the first fused
    kernel's that ran) at exactly this config, with a peak."""
    if algorithm == NAIVE:
        order = [NAIVE]
    else:
        order = [TILED, *(a for a in ALGORITHMS if a != TILED and ALGORITHMS[a].fused)]
    for a in order:
        r = results.get(a)
        if r is not None and r.config == config and not r.oom and r.peak_bytes:
            return r
    return None


def _algorithm(
    config: AttentionConfig,
    algorithm: str,
    layers: int,
    budget_bytes: int | None,
    results: Mapping[str, RunResult],
) -> TrainingAlgorithmFigures:
    stack = layer_stack(config, algorithm, layers)
    one = layer_stack(config, algorithm, 1)
    kept = "Q, K, V, O and P" if algorithm == NAIVE else "Q, K, V, O and the row statistics"
    pass_label = PASS_LABELS[config.pass_]
    measured = _step_result(config, algorithm, results)
    if measured is not None:
        step = Figure(
            measured.peak_bytes, "B", MEASURED_SOURCE,
            f"{measured.algorithm}'s memory pool peak during one layer's {pass_label}",
        )  # fmt: skip
    else:
        step = Figure(
            one.peak_bytes, "B", MODEL,
            "cost model: one layer's saved activations + its backward's buffers",
        )  # fmt: skip
    wall = None
    if budget_bytes:
        n = training_wall_seq_len(config, algorithm, layers, budget_bytes)
        how = (
            f"cost model: the first N where {layers} layers' peak passes {budget_bytes:,} B"
            if n is not None
            else f"cost model: {layers} layers fit in {budget_bytes:,} B at every N"
        )
        wall = Figure(n, "tokens", MODEL, how)
    return TrainingAlgorithmFigures(
        algorithm=algorithm,
        recompute_flops=Figure(
            recompute_flops(config, algorithm), "FLOP", MODEL,
            _recompute_source(config, algorithm),
        ),
        saved_per_layer=Figure(
            stack.saved_per_layer, "B", MODEL, f"cost model: {kept} of one layer"
        ),
        saved_total=Figure(stack.saved_total, "B", MODEL, f"cost model: {layers} × one layer's"),
        layers_peak=Figure(
            stack.peak_bytes, "B", MODEL,
            f"cost model: {layers} layers' saved activations + one layer's backward ({COUNTS})",
        ),
        step_peak=step,
        wall_seq_len=wall,
        measured_by=measured.algorithm if measured is not None else None,
    )  # fmt: skip


def _recompute_source(config: AttentionConfig, algorithm: str) -> str:
    """Where the recompute figure comes from, in the mode `config` sums dQ in."""
    if algorithm == NAIVE:
        return "none: naive's backward reads the P it kept"
    if config.deterministic:
        return (
            "cost model: S = QKᵀ rebuilt tile by tile in flash_bwd, and S and dP = dO·Vᵀ once "
            "more in the deterministic dQ pass (flash_bwd_dq), 6·B·h·N²·d"
        )
    return "cost model: S = QKᵀ rebuilt tile by tile in the backward, 2·B·h·N²·d"


_memo: dict[tuple, TrainingFigures] = {}


def training_figures(
    config: AttentionConfig,
    layers: int,
    budget_bytes: int | None = None,
    results: Mapping[str, RunResult] | None = None,
) -> TrainingFigures:
    """The training figures of `config` (a backward or step pass) for `layers` layers against
    `budget_bytes`, with the measured steps among `results` (this config's, per algorithm)."""
    results = dict(results or {})
    try:
        key: tuple | None = (config, layers, budget_bytes, tuple(sorted(results.items())))
        hit = _memo.get(key)
    except TypeError:  # a result built with lists: not hashable, not memoized
        key, hit = None, None
    if hit is not None:
        return hit
    figures = TrainingFigures(
        config=config,
        layers=layers,
        budget_bytes=budget_bytes,
        backward_useful_flops=Figure(
            backward_useful_flops(config),
            "FLOP",
            MODEL,
            "dV = PᵀdO, dP = dO·Vᵀ, dQ = dS·K/√d, dK = dSᵀQ/√d: 8·B·h·N²·d (÷ 2 causal)",
        ),
        algorithms={
            a: _algorithm(config, a, layers, budget_bytes, results) for a in (NAIVE, FUSED)
        },
    )
    if key is not None:
        if len(_memo) >= MAX_POINTS:
            _memo.clear()
        _memo[key] = figures
    return figures
