"""The guided first run: the lesson in four steps, each with the figures of what is on screen.

1. Naive's memory grows as N²: its peak at N and at 2N (×4 per doubling, once S and P
   dominate), against the fused kernels' O(N).
2. Where it hits the wall on this device: the N from which naive's modeled peak exceeds the
   memory the plots compare against.
3. Why naive is memory-bound and the fused kernel compute-bound: FLOPs per DRAM byte against
   the ridge of the roofs in use, from measured bytes where the results have them.
4. What the animation shows: the two lanes of the Tiles tab.

A decode config gets app/state/decode_lesson.py's four steps instead.

Qt-free: the window's lesson strip shows these texts and moves to the view each one names
(`focus`). The texts are made off the GUI thread (a tiled verdict walks the tile schedule).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpu.algorithms import ALGORITHMS, NAIVE
from gpu.model.costmodel import CPU, naive_oom_seq_len
from gpu.model.roofline import (
    DRAM,
    HBM,
    MEASURED,
    MEMORY_ROOFS,
    AlgorithmVerdict,
    KernelVerdict,
    Roof,
    compute_roof,
    roofs,
)
from gpu.results import RunResult

from .decode_lesson import decode_steps
from .default_view import fastest_fused
from .lesson_step import MEMORY, ROOFLINE, TILES, LessonStep
from .model.cache import cost, verdict
from .point_inputs import PointInputs
from .roof_words import binds_text
from .seq_scale import SEQ_MAX
from .units import fmt_bytes, fmt_flops, fmt_int, fmt_intensity

STEPS = 4


#: The N each step shows: where its point is plain to see and, on a CPU, still measured in
#: seconds (on a GPU or a recording, 16k tokens: naive's S and P are gigabytes there).
GPU_POINT_N, CPU_POINT_N = 16384, 1024
#: The animation's N: few enough tiles to follow one by one.
GPU_TILES_N = 4096


def _cpu(inp: PointInputs) -> bool:
    return inp.gpu.kind == CPU


def _point_n(inp: PointInputs) -> int:
    return CPU_POINT_N if _cpu(inp) else GPU_POINT_N


def _fused(inp: PointInputs) -> str:
    return fastest_fused(a for a in inp.algorithms if a != NAIVE)


def memory_step(inp: PointInputs) -> LessonStep:
    c = inp.config
    n = c.seq_len
    lo, hi = (n // 2, n) if n * 2 > SEQ_MAX else (n, n * 2)
    naive_lo, naive_hi = cost(c.with_(seq_len=lo), NAIVE), cost(c.with_(seq_len=hi), NAIVE)
    fused = _fused(inp)
    fused_lo, fused_hi = cost(c.with_(seq_len=lo), fused), cost(c.with_(seq_len=hi), fused)
    growth = naive_hi.peak_bytes / naive_lo.peak_bytes
    return LessonStep(
        "Naive's memory grows as N²",
        f"S and P hold B·h·N² elements each. Naive's peak: {fmt_bytes(naive_lo.peak_bytes)} "
        f"at N = {fmt_int(lo)}, {fmt_bytes(naive_hi.peak_bytes)} at N = {fmt_int(hi)}: "
        f"×{growth:.1f} for one doubling (×4 once S and P dominate). "
        f"{ALGORITHMS[fused].label}: {fmt_bytes(fused_lo.peak_bytes)} → "
        f"{fmt_bytes(fused_hi.peak_bytes)}, ×{fused_hi.peak_bytes / fused_lo.peak_bytes:.1f}: "
        "O(N), it never stores S or P.",
        MEMORY,
        _point_n(inp),
    )


def wall_step(inp: PointInputs) -> LessonStep:
    c = inp.config
    if not inp.budget_bytes:
        return LessonStep(
            "Where it hits the wall",
            "The memory of this device is not known: pick a GPU under Device ▸ Memory to see "
            "where naive runs out of it.",
            MEMORY,
        )
    wall = naive_oom_seq_len(c, inp.budget_bytes)
    fused = _fused(inp)
    top = cost(c.with_(seq_len=SEQ_MAX), fused).peak_bytes
    where = "you are past it" if wall <= c.seq_len else f"you are at N = {fmt_int(c.seq_len)}"
    return LessonStep(
        "Where naive hits the wall",
        f"In {fmt_bytes(inp.budget_bytes)} ({inp.budget_name}) naive runs out of memory from "
        f"N = {fmt_int(wall)} ({where}): the dashed line on the memory plot. "
        f"{ALGORITHMS[fused].label} needs {fmt_bytes(top)} at N = {fmt_int(SEQ_MAX)}.",
        MEMORY,
        wall if wall <= SEQ_MAX else None,
    )


def _ridge(inp: PointInputs, v: AlgorithmVerdict, kernels: list[KernelVerdict]) -> Roof | None:
    """The compute roof `kernels` are judged against (the roof that binds them, or the one
    their matmuls would meet): its ridge is where they turn compute-bound. None where what
    binds is no FLOP rate (the exponential unit) or they have no matmul."""
    all_roofs = roofs(inp.gpu)
    name = v.roof if v.roof not in MEMORY_ROOFS else ""
    if not name:
        units = [k.unit for k in sorted(kernels, key=lambda k: -k.flops) if k.unit]
        name = compute_roof(inp.gpu, v.algorithm, units[0]) if units else ""
    roof = all_roofs.get(name)
    return roof if roof is not None and roof.unit == "FLOP/s" else None


def _bound_text(inp: PointInputs, v: AlgorithmVerdict) -> str:
    """One algorithm's verdict with the figures it is made of: the kernels that take most of
    its roofline time, their FLOP per DRAM byte against the ridge of the roof that decides
    (above it compute binds, below it memory), so the numbers and the verdict agree."""
    cpu = inp.gpu.kind == CPU
    source = "measured" if v.bytes_source == MEASURED else "model"
    whole = f"{fmt_intensity(v.intensity)} FLOP per byte" if v.intensity else "no DRAM bytes"
    text = f"{fmt_bytes(v.bytes)} of DRAM traffic ({source}), {whole}"
    binding = [k for k in v.kernels if k.roof == v.roof]
    if len(v.kernels) > 1:
        text += " over its kernels"
    flops, nbytes = sum(k.flops for k in binding), sum(k.dram_bytes for k in binding)
    intensity = flops / nbytes if nbytes else None
    if len(binding) < len(v.kernels):
        names = " and ".join(k.name for k in binding)
        at = f" at {fmt_intensity(intensity)} FLOP per byte" if intensity else ""
        text += f". Most of its time goes to {names}{at}"
    ridge_roof = _ridge(inp, v, binding)
    bw = roofs(inp.gpu).get(DRAM if cpu else HBM)
    if ridge_roof is not None and bw is not None and intensity and not v.tie:
        ridge = ridge_roof.peak / bw.peak
        side = "above" if intensity > ridge else "below"
        text += f", {side} the ridge of {fmt_intensity(ridge)}"
    return f"{text}: {binds_text(v.ties, cpu)}, {v.bound}-bound"


def bound_step(inp: PointInputs) -> LessonStep:
    c = inp.config
    results: Mapping[str, RunResult] = dict(inp.results)
    fused = _fused(inp)
    naive_v = verdict(c, NAIVE, inp.gpu, results.get(NAIVE))
    fused_v = verdict(c, fused, inp.gpu, results.get(fused))
    return LessonStep(
        "Memory- or compute-bound",
        f"Both do the same {fmt_flops(naive_v.flops)} of useful work at "
        f"N = {fmt_int(c.seq_len)}. Naive: {_bound_text(inp, naive_v)}. "
        f"{ALGORITHMS[fused].label}: {_bound_text(inp, fused_v)}. (A ridge is a compute "
        f"roof of {inp.gpu_label} over its memory bandwidth, in FLOP per byte: below it "
        "memory binds, above it the arithmetic units do.)",
        ROOFLINE,
        _point_n(inp),
    )


def animation_step(inp: PointInputs) -> LessonStep:
    fused = ALGORITHMS[_fused(inp)].label
    return LessonStep(
        "What the animation shows",
        f"The Tiles tab plays naive and {fused} on one clock. Naive's three kernels write S "
        "and P to HBM and read them back: the N×N blocks fill memory. The fused kernel keeps a "
        "tile of Q on chip, streams tiles of K and V through SRAM and keeps the row max and sum "
        "(online softmax): only Q, K, V and O cross to HBM. The counters add up the bytes.",
        TILES,
        CPU_POINT_N if _cpu(inp) else GPU_TILES_N,
    )


def lesson_steps(inp: PointInputs) -> tuple[LessonStep, ...]:
    """The four steps for the config's pass: the decode pass has its own (decode_lesson)."""
    if inp.config.is_decode:
        return decode_steps(inp)
    return (memory_step(inp), wall_step(inp), bound_step(inp), animation_step(inp))
