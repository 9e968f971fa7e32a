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
from gpu.model.costmodel import naive_oom_seq_len
from gpu.model.roofline import MEASURED
from gpu.results import RunResult

from .decode_lesson import decode_steps
from .default_view import fastest_fused
from .lesson_step import MEMORY, ROOFLINE, TILES, LessonStep
from .model.cache import cost, verdict
from .point_inputs import PointInputs
from .seq_scale import SEQ_MAX
from .units import fmt_bytes, fmt_flops, fmt_int, fmt_intensity

STEPS = 4


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
        "Where it hits the wall on this device",
        f"In {fmt_bytes(inp.budget_bytes)} ({inp.budget_name}) naive runs out of memory from "
        f"N = {fmt_int(wall)} ({where}): the dashed line on the memory plot. "
        f"{ALGORITHMS[fused].label} needs {fmt_bytes(top)} at N = {fmt_int(SEQ_MAX)}.",
        MEMORY,
    )


def bound_step(inp: PointInputs) -> LessonStep:
    c = inp.config
    results: Mapping[str, RunResult] = dict(inp.results)
    fused = _fused(inp)
    naive_v = verdict(c, NAIVE, inp.gpu, results.get(NAIVE))
    fused_v = verdict(c, fused, inp.gpu, results.get(fused))
    ridge = inp.gpu.ridge_flops_per_byte

    def said(v) -> str:  # type: ignore[no-untyped-def]
        source = "measured" if v.bytes_source == MEASURED else "model"
        per = f"{v.intensity:,.0f}" if v.intensity else "—"
        return (
            f"{fmt_bytes(v.bytes)} of DRAM traffic ({source}), {per} FLOP per byte: {v.bound}-bound"
        )

    return LessonStep(
        "Memory-bound against compute-bound",
        f"Both do the same {fmt_flops(naive_v.flops)} of useful work at "
        f"N = {fmt_int(c.seq_len)}. Naive: {said(naive_v)}. {ALGORITHMS[fused].label}: "
        f"{said(fused_v)}. The ridge of the {inp.gpu_label} roofs is {fmt_intensity(ridge)} "
        "FLOP per byte: below it memory binds, above it the arithmetic units do.",
        ROOFLINE,
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
    )


def lesson_steps(inp: PointInputs) -> tuple[LessonStep, ...]:
    """The four steps for the config's pass: the decode pass has its own (decode_lesson)."""
    if inp.config.is_decode:
        return decode_steps(inp)
    return (memory_step(inp), wall_step(inp), bound_step(inp), animation_step(inp))
