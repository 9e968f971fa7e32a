"""The lesson of the decode pass, in four steps with the figures of the config on screen.

1. The KV cache grows as N, and every generated token reads all of it.
2. What fits on this device: a model of this shape (gpu.model.kv_fit's presets), its weights
   plus the cache within the memory the plots compare against.
3. Memory-bound even when fused: FLOPs per DRAM byte against the ridge.
4. What GQA saves: the cache with H_kv KV heads against one per query head.

Qt-free, like app/state/lesson.py, which hands a decode config's steps to `decode_steps`.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpu.algorithms import ALGORITHMS, NAIVE, SPLIT_KV
from gpu.model.decode_cost import kv_cache_bytes, score_bytes
from gpu.model.kv_fit import what_fits
from gpu.model.roofline import MEASURED
from gpu.results import RunResult

from .decode_fit import model_of_shape
from .lesson_step import MEMORY, ROOFLINE, LessonStep
from .model.cache import verdict
from .point_inputs import PointInputs
from .seq_scale import SEQ_MAX
from .units import fmt_bytes, fmt_int, fmt_intensity


def cache_step(inp: PointInputs) -> LessonStep:
    c = inp.config
    n = c.seq_len
    lo, hi = (n // 2, n) if n * 2 > SEQ_MAX else (n, n * 2)
    at_lo, at_hi = kv_cache_bytes(c.with_(seq_len=lo)), kv_cache_bytes(c.with_(seq_len=hi))
    per_token = 2 * c.kv_head_count * c.head_dim * c.elem_bytes
    return LessonStep(
        "The KV cache grows as N, and every token reads it",
        f"One layer's cache holds K and V of every token: 2 · {c.kv_head_count} KV heads · "
        f"{c.head_dim} · {c.elem_bytes} B = {fmt_bytes(per_token)} per token and sequence. "
        f"At batch {fmt_int(c.batch)}: {fmt_bytes(at_lo)} at N = {fmt_int(lo)}, "
        f"{fmt_bytes(at_hi)} at N = {fmt_int(hi)}: linear, not N². Each new token reads all "
        f"of it; naive's scores for that token are only {fmt_bytes(score_bytes(c))}.",
        MEMORY,
    )


def fits_step(inp: PointInputs) -> LessonStep:
    c = inp.config
    model = model_of_shape(c)
    if not inp.budget_bytes:
        return LessonStep(
            "What fits on this device",
            "The memory of this device is not known: pick a GPU under Device ▸ Memory to see "
            "how much context its memory holds.",
            MEMORY,
        )
    if model is None:
        per_token = kv_cache_bytes(c.with_(seq_len=1)) // c.batch
        tokens = inp.budget_bytes // per_token
        return LessonStep(
            "What fits on this device",
            f"In {fmt_bytes(inp.budget_bytes)} ({inp.budget_name}) one layer of this shape "
            f"caches {fmt_int(tokens)} tokens ({fmt_int(tokens // c.batch)} per sequence at "
            f"batch {fmt_int(c.batch)}); a model of L layers holds L times fewer, after its "
            "weights. Pick a Model beside the Pass for the wall of a real one.",
            MEMORY,
        )
    weights, kv = inp.fit_weights, inp.fit_kv
    fit = what_fits(model, inp.budget_bytes, weights, kv)
    if not fit.weights_fit:
        text = (
            f"{model.label}'s {weights} weights ({fmt_bytes(fit.weight_bytes)}) alone exceed "
            f"{fmt_bytes(inp.budget_bytes)} ({inp.budget_name}): no context fits; fp8 weights "
            f"leave {fmt_int(what_fits(model, inp.budget_bytes, 'fp8', kv).max_tokens)} tokens."
        )
    else:
        text = (
            f"This is {model.label}'s attention ({model.attention}, {model.layers} layers). In "
            f"{fmt_bytes(inp.budget_bytes)} ({inp.budget_name}) its {weights} weights "
            f"({fmt_bytes(fit.weight_bytes)}) leave room for {fmt_int(fit.max_tokens)} cached "
            f"tokens in {kv}: context {fmt_int(fit.max_context(c.batch))} at batch "
            f"{fmt_int(c.batch)} ({fmt_bytes(fit.kv_bytes_per_token)} per token over all "
            "layers), the wall on the memory plot. The explain pane has the formula."
        )
    return LessonStep("What fits on this device", text, MEMORY)


def bound_step(inp: PointInputs) -> LessonStep:
    c = inp.config
    results: Mapping[str, RunResult] = dict(inp.results)
    fused = verdict(c, SPLIT_KV, inp.gpu, results.get(SPLIT_KV))
    naive = verdict(c, NAIVE, inp.gpu, results.get(NAIVE))
    ridge = inp.gpu.ridge_flops_per_byte

    def said(v) -> str:  # type: ignore[no-untyped-def]
        source = "measured" if v.bytes_source == MEASURED else "model"
        per = f"{v.intensity:,.1f}" if v.intensity else "—"
        return f"{fmt_bytes(v.bytes)} of DRAM traffic ({source}), {per} FLOP per byte"

    return LessonStep(
        "Memory-bound even when fused",
        f"Each cached byte meets {c.group_size * c.new_tokens} query row(s) and is never used "
        f"again. {ALGORITHMS[SPLIT_KV].label}: {said(fused)}; naive: {said(naive)}. The ridge "
        f"of the {inp.gpu_label} roofs is {fmt_intensity(ridge)} FLOP per byte: decode sits far "
        "left of it, so the time per token is the cache's bytes over the memory's bandwidth.",
        ROOFLINE,
    )


def gqa_step(inp: PointInputs) -> LessonStep:
    c = inp.config
    mine = kv_cache_bytes(c)
    mha = kv_cache_bytes(c.with_(kv_heads=None))
    if c.kv_head_count == c.heads:
        text = (
            f"This is MHA: {c.heads} KV heads, one per query head, {fmt_bytes(mine)} of cache. "
            f"Grouped-query attention shares one KV head among a group: 8 KV heads would cache "
            f"{fmt_bytes(mine * min(8, c.heads) // c.heads)}, one (MQA) "
            f"{fmt_bytes(mine // c.heads)}, and each token would read that much less."
        )
    else:
        text = (
            f"{c.heads} query heads share {c.kv_head_count} KV heads (groups of "
            f"{c.group_size}): {fmt_bytes(mine)} of cache instead of {fmt_bytes(mha)} with one "
            f"KV head per query head, {c.group_size}× less to keep and to read per token. The "
            f"split-KV kernel reads each KV head once for its whole group."
        )
    return LessonStep("What GQA saves", text, MEMORY)


def decode_steps(inp: PointInputs) -> tuple[LessonStep, ...]:
    return (cache_step(inp), fits_step(inp), bound_step(inp), gqa_step(inp))
