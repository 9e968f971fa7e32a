"""The current point: every figure the screen shows for one config, N and set of results, each
a value, a unit and a source, worked out once.

A figure's source is one of
- `measured`: a hardware counter or event measured it (`detail` names which);
- `model`: the cost model or the roofline model worked it out (`detail` names which);
- `datasheet`: a published figure (`detail` cites it);
- `nominal`: a ceiling, not a rate anything reached nor a figure a datasheet prints: the L2
  counters' own peak, and a GPU's boost clock with the compute roofs quoted at it (a per-clock
  rate × SMs × that clock: the H200's wgmma roof at 1.98 GHz is 1,071 TFLOP/s, 8 % above the
  datasheet's 989.5).

The explain pane, `main.py explain`, the plots (markers, points and hover read-outs), the
Tiles tab's banner and the status bar's last run read the same objects (gpu.model.roofline's
Explanation inside), so they cannot disagree: the views ask through `point_for`, which makes
every view's question the same one (the shown algorithms in one order, the results of this
config among them, the model cache's traffic bands). Qt-free: `current_point` is memoized per
(config, algorithms, device, results), so a slider stop that comes back costs a dictionary
look-up, and `point_for` per the very result objects it is given, so asking again costs no
hashing of the results' counters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpu.algorithms import ALGORITHMS, NAIVE, SPLIT_KV, TILED, runs_pass
from gpu.config import AttentionConfig
from gpu.model.costmodel import CPU, GpuSpec, TrafficBand, traffic_band
from gpu.model.roofline import MEASURED, AlgorithmVerdict, Explanation, Roof, explain
from gpu.results import RunResult

from .family import cache_config
from .model.cache import band, known_band
from .units import fmt_bytes, fmt_flops, fmt_int, fmt_intensity, fmt_ms, fmt_rate, fmt_si

MODEL, DATASHEET, NOMINAL = "model", "datasheet", "nominal"
#: Entries kept by the memo (a long session's shapes: start afresh rather than grow).
MAX_POINTS = 256


@dataclass(frozen=True)
class Figure:
    """One number on screen: its value, unit, and where it comes from."""

    value: float | None
    unit: str  # "B", "ms", "FLOP", "FLOP/B", "FLOP/s", "B/s", "Hz", "×", "share", "tokens"
    source: str  # MEASURED, MODEL, DATASHEET or NOMINAL
    detail: str  # the counter, event, model or citation

    def text(self) -> str:
        """'92.3 MB (measured)', '0.927 ms (model)'."""
        return f"{self.value_text()} ({self.source})"

    def value_text(self) -> str:
        v, u = self.value, self.unit
        if v is None:
            return "—"
        if u == "B":
            return fmt_bytes(v)
        if u == "ms":
            return fmt_ms(v)
        if u == "FLOP":
            return fmt_flops(v)
        if u == "×":
            return f"{v:,.0f}×" if v >= 10 else f"{v:,.1f}×"
        if u == "share":
            return f"{v:.0%}"
        if u == "tokens":
            return fmt_int(int(v))
        if u == "Hz":
            return fmt_si(v, "Hz", 4)
        if u in ("B/s", "FLOP/s", "exp/s"):
            return fmt_rate(v, u)
        if u == "FLOP/B":
            return f"{fmt_intensity(v)} FLOP/B"
        return f"{v:,.1f} {u}"

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit, "source": self.source,
                "detail": self.detail}  # fmt: skip


@dataclass(frozen=True)
class AlgorithmFigures:
    """What the screen says about one algorithm at the current point."""

    algorithm: str
    label: str
    verdict: AlgorithmVerdict
    peak_bytes: Figure
    dram_bytes: Figure
    l2_bytes: Figure
    tile_loads: Figure  # the no-reuse model's bytes: what the Tiles tab's lanes move
    compulsory_bytes: Figure
    useful_flops: Figure
    roofline_ms: Figure
    measured_ms: Figure | None
    intensity: Figure
    l2_intensity: Figure
    achieved: Figure | None  # useful FLOP/s measured
    #: The time a Tiles lane of this algorithm plays: measured where timed on this device,
    #: else the roofline's (the same as `roofline_ms`).
    lane_ms: Figure

    def to_dict(self) -> dict[str, Any]:
        figures = {
            name: f.to_dict() if f is not None else None
            for name, f in (
                ("peak_bytes", self.peak_bytes), ("dram_bytes", self.dram_bytes),
                ("l2_bytes", self.l2_bytes), ("tile_loads", self.tile_loads),
                ("compulsory_bytes", self.compulsory_bytes), ("useful_flops", self.useful_flops),
                ("roofline_ms", self.roofline_ms), ("measured_ms", self.measured_ms),
                ("intensity", self.intensity), ("l2_intensity", self.l2_intensity),
                ("achieved", self.achieved), ("lane_ms", self.lane_ms),
            )
        }  # fmt: skip
        return {
            "label": self.label,
            "bound": self.verdict.bound,
            "roof": self.verdict.roof,
            "ties": list(self.verdict.ties),
            "roof_share": self.verdict.roof_share,
            "figures": figures,
        }


@dataclass(frozen=True)
class CurrentPoint:
    config: AttentionConfig
    device: GpuSpec
    roofs: dict[str, Figure]
    clock: Figure
    memory: Figure  # the device's capacity (GpuSpec.memory_bytes), what the device reports beside
    algorithms: dict[str, AlgorithmFigures]
    #: "naive/<algorithm>" -> naive's DRAM bytes over the algorithm's (measured or model)
    dram_ratios: dict[str, Figure]
    explanation: Explanation

    def algorithm(self, algorithm: str) -> AlgorithmFigures:
        return self.algorithms[algorithm]

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device.label,
            "clock": self.clock.to_dict(),
            "memory": self.memory.to_dict(),
            "roofs": {n: f.to_dict() for n, f in self.roofs.items()},
            "algorithms": {a: f.to_dict() for a, f in self.algorithms.items()},
            "dram_ratios": {p: f.to_dict() for p, f in self.dram_ratios.items()},
        }


# --------------------------------------------------------------------------------------------


def _roof_figure(roof: Roof, device: GpuSpec) -> Figure:
    if roof.nominal:
        source = NOMINAL
    elif device.kind == CPU:  # worked out from what the kernel reports of the CPU
        source = MODEL if roof.kind == "compute" else MEASURED
    elif roof.per_clock:  # a rate per clock at the clock the counters measured, or the boost's
        source = MEASURED if device.clock_measured else NOMINAL
    elif "measured" in roof.source:
        source = MEASURED
    else:
        source = DATASHEET
    return Figure(roof.peak, roof.unit, source, f"{roof.label}: {roof.source}")


def _clock(device: GpuSpec) -> Figure:
    """The clock the compute roofs are quoted at: measured by the counters, or a GPU's boost
    clock (a ceiling: nominal)."""
    ceiling = NOMINAL if device.kind != CPU else DATASHEET
    source = MEASURED if device.clock_measured else ceiling
    return Figure(device.clock_hz or None, "Hz", source, device.clock_source)


def _memory(device: GpuSpec, reported_bytes: int | None) -> Figure:
    """The capacity every wall is drawn at (GpuSpec.memory_bytes): a GPU's datasheet figure,
    with what the device reports beside it; this CPU's reported RAM."""
    if device.kind == CPU:
        return Figure(device.memory_bytes, "B", MEASURED, f"what {device.name} reports")
    reported = (
        f"; the device reports {fmt_bytes(reported_bytes)}, not used" if reported_bytes else ""
    )
    return Figure(
        device.memory_bytes, "B", DATASHEET, f"{device.name} capacity: {device.source}{reported}"
    )


def _algorithm(
    v: AlgorithmVerdict, band: TrafficBand, result: RunResult | None, device: GpuSpec
) -> AlgorithmFigures:
    measured_bytes = v.bytes_source == MEASURED
    counters = "dram__bytes_read.sum + dram__bytes_write.sum (CUPTI)"
    l2_measured = all(k.l2_bytes_source == MEASURED for k in v.kernels)
    roofline = Figure(
        v.roofline_ms, "ms", MODEL,
        f"roofline on the {device.label} roofs: {'='.join(v.ties)} "
        f"{'tie' if v.tie else 'binds'}",
    )  # fmt: skip
    measured = (
        Figure(
            v.measured_ms,
            "ms",
            MEASURED,
            "median of the timed runs (CUDA events or perf_counter), no counters attached",
        )
        if v.measured_ms
        else None
    )
    peak = (
        Figure(result.peak_bytes, "B", MEASURED, "the memory pool's peak during the run")
        if result is not None and result.peak_bytes
        else Figure(band.no_reuse.peak_bytes, "B", MODEL, "cost model: tensors held at once")
    )
    achieved = (
        Figure(v.flops / (v.measured_ms * 1e-3), "FLOP/s", MEASURED, "useful FLOPs ÷ time")
        if v.measured_ms
        else None
    )
    intensity_src = MEASURED if measured_bytes else MODEL
    return AlgorithmFigures(
        algorithm=v.algorithm,
        label=v.label,
        verdict=v,
        peak_bytes=peak,
        dram_bytes=Figure(
            v.bytes,
            "B",
            MEASURED if measured_bytes else MODEL,
            counters if measured_bytes else "cost model, L2-aware estimate",
        ),
        l2_bytes=Figure(
            v.l2_bytes,
            "B",
            MEASURED if l2_measured else MODEL,
            "lts__t_bytes.sum (CUPTI)" if l2_measured else "cost model, no-reuse tile traffic",
        ),
        tile_loads=Figure(
            band.no_reuse.hbm_bytes,
            "B",
            MODEL,
            "tile loads: every block's tiles read and written, nothing reused (the animation)",
        ),
        compulsory_bytes=Figure(
            band.compulsory.hbm_bytes, "B", MODEL, "compulsory: every tensor read or written once"
        ),
        useful_flops=Figure(v.flops, "FLOP", MODEL, "4·B·h·N²·d (÷ 2 causal)"),
        roofline_ms=roofline,
        measured_ms=measured,
        intensity=Figure(v.intensity, "FLOP/B", intensity_src, "useful FLOPs ÷ DRAM bytes"),
        l2_intensity=Figure(
            v.l2_intensity,
            "FLOP/B",
            MEASURED if l2_measured else MODEL,
            "useful FLOPs ÷ L2 bytes",
        ),
        achieved=achieved,
        lane_ms=measured if measured is not None and device.kind != CPU else roofline,
    )


_memo: dict[tuple, CurrentPoint] = {}


def current_point(
    config: AttentionConfig,
    algorithms: Sequence[str],
    device: GpuSpec,
    results: Mapping[str, RunResult] | None = None,
    bands: Mapping[str, TrafficBand] | None = None,
    reported_memory_bytes: int | None = None,
) -> CurrentPoint:
    """Every figure of `algorithms` at `config` judged on `device`'s roofs, from `results`
    (this config's, per algorithm) where they have figures; `bands` the traffic bands the
    caller has already worked out. Memoized."""
    results = dict(results or {})
    try:
        key: tuple | None = (
            config, tuple(algorithms), device, tuple(sorted(results.items())),
            reported_memory_bytes,
        )  # fmt: skip
        hit = _memo.get(key)
    except TypeError:  # a result built with lists: not hashable, not memoized
        key, hit = None, None
    if hit is not None:
        return hit
    bands = dict(bands or {})
    for a in algorithms:
        if a not in bands:
            bands[a] = traffic_band(config, a, device)
    e = explain(config, algorithms, device, results, bands=bands)
    figures = {
        v.algorithm: _algorithm(v, bands[v.algorithm], results.get(v.algorithm), e.gpu)
        for v in e.algorithms
    }
    ratios = {}
    for pair, r in e.naive_ratios.items():
        if r["measured"] is not None:
            ratios[pair] = Figure(r["measured"], "×", MEASURED, "DRAM bytes, hardware counters")
        elif r.get("model_over_measured") is not None:
            ratios[pair] = Figure(
                r["model_over_measured"], "×", MODEL,
                "naive's L2-aware model (not measured) over the counters' fused bytes",
            )  # fmt: skip
        else:
            ratios[pair] = Figure(r["model_l2_aware"], "×", MODEL, "L2-aware DRAM bytes")
    point = CurrentPoint(
        config=config,
        device=e.gpu,
        roofs={n: _roof_figure(r, e.gpu) for n, r in e.roofs.items()},
        clock=_clock(e.gpu),
        memory=_memory(e.gpu, reported_memory_bytes),
        algorithms=figures,
        dram_ratios=ratios,
        explanation=e,
    )
    if key is not None:
        if len(_memo) >= MAX_POINTS:
            _memo.clear()
        _memo[key] = point
    return point


def shown_algorithms(algorithms: Sequence[str]) -> list[str]:
    """Naive first (the ratios need it), then the others in the app's order."""
    ordered = [a for a in ALGORITHMS if a in algorithms]
    ordered += [a for a in algorithms if a not in ordered]
    return [NAIVE, *(a for a in ordered if a != NAIVE)]


#: point_for's memo: (config, algorithms, device, reported memory, (algorithm, id(result))...)
#: -> (the result objects, the point); the objects are kept so their ids stay theirs.
_asked: dict[tuple, tuple[tuple[RunResult, ...], CurrentPoint]] = {}


def point_for(
    config: AttentionConfig,
    algorithms: Sequence[str],
    device: GpuSpec,
    results: Mapping[str, RunResult] | None = None,
    *,
    compute: bool = True,
    reported_memory_bytes: int | None = None,
) -> CurrentPoint | None:
    """The current point as every view asks for it, so that they all get the same one.

    The algorithms are the shown ones among ours (naive and the readable kernel when none
    is), naive first for the ratios; `results` are looked at for those algorithms only, and
    a result of an algorithm that ignores the tile sizes holds at every tile size (judged at
    `config`); a result of another config is none. The traffic bands come from the model
    cache: `compute=False` (the GUI thread on a slider move) gives None until every band is
    worked out, rather than walk a tiled model."""
    ours = [a for a in algorithms if runs_pass(a, config.pass_)]  # written for this pass
    fallback = [NAIVE, SPLIT_KV] if config.is_decode else [NAIVE, TILED]
    algos = tuple(shown_algorithms(ours or fallback))
    given = [(a, r) for a in algos if (r := (results or {}).get(a)) is not None]
    key = (config, algos, device, reported_memory_bytes, tuple((a, id(r)) for a, r in given))
    hit = _asked.get(key)
    if hit is not None and all(x is r for x, (_, r) in zip(hit[0], given, strict=True)):
        return hit[1]
    bands = {}
    for a in algos:
        b = band(config, a, device) if compute else known_band(config, a, device)
        if b is None:
            return None
        bands[a] = b
    mine = {
        a: r if r.config == config else replace(r, config=config)
        for a, r in given
        if cache_config(r.config, a) == cache_config(config, a)
    }
    point = current_point(config, algos, device, mine, bands, reported_memory_bytes)
    if len(_asked) >= MAX_POINTS:
        _asked.clear()
    _asked[key] = (tuple(r for _, r in given), point)
    return point


def figures_for(
    config: AttentionConfig,
    algorithm: str,
    algorithms: Sequence[str],
    device: GpuSpec,
    results: Mapping[str, RunResult] | None = None,
    *,
    compute: bool = True,
) -> AlgorithmFigures | None:
    """One algorithm's figures in `point_for`'s point (None: not shown, or not worked out)."""
    point = point_for(config, algorithms, device, results, compute=compute)
    return point.algorithms.get(algorithm) if point is not None else None
