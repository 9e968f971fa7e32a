"""The explain pane's decode section: the KV cache and its formula, naive's scores beside it,
the split-KV kernel's split, and what fits on the device with the formula's numbers.

Plain Python (HTML text), called by app/measure/explain.py for a decode config."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from gpu.algorithms import NAIVE, SPLIT_KV
from gpu.model.decode_cost import kv_cache_bytes, plan_for, score_bytes

from ..state.decode_lesson import model_of_shape
from ..state.model.cache import cost
from ..state.point_inputs import PointInputs
from ..state.units import fmt_bytes, fmt_flops, fmt_int

Name = Callable[[str], str]


def decode_header(inp: PointInputs, muted: str) -> list[str]:
    c = inp.config
    q = c.new_tokens
    return [
        f"<h3 style='margin-bottom:2px'>{escape(c.label())}</h3>",
        f"<p style='color:{muted};margin-top:0'>Useful FLOPs 4·B·h·q·N·d = "
        f"4 · {fmt_int(c.batch)} · {fmt_int(c.heads)} · {q} · {fmt_int(c.seq_len)} · "
        f"{c.head_dim} = {fmt_flops(cost(c, SPLIT_KV).flops)} per step, for every algorithm: "
        f"{q} new token{'s' if q > 1 else ''} per head against a cache of N = "
        f"{fmt_int(c.seq_len)}.</p>",
    ]


def decode_section(inp: PointInputs, name: Name) -> list[str]:
    c = inp.config
    cache = kv_cache_bytes(c)
    s_bytes = score_bytes(c)
    naive, split = cost(c, NAIVE), cost(c, SPLIT_KV)
    plan = plan_for(c, inp.gpu)
    out = [
        "<h4>The KV cache: the wall of inference</h4>",
        "<ul>",
        f"<li>One layer's cache: 2 · B · H_kv · N · d · bytes = 2 · {fmt_int(c.batch)} · "
        f"{c.kv_head_count} · {fmt_int(c.seq_len)} · {c.head_dim} · {c.elem_bytes} = "
        f"<b>{fmt_bytes(cache)}</b>, read whole for every generated token.</li>",
        f"<li>{c.heads} query heads over {c.kv_head_count} KV heads: groups of "
        f"{c.group_size}; one KV head per query head would cache "
        f"{fmt_bytes(kv_cache_bytes(c.with_(kv_heads=None)))}.</li>",
        "</ul>",
        f"<h4>{name(NAIVE)}: S and P in HBM, three kernels</h4>",
        f"<ul><li>S and P: B · h · q · N = {fmt_bytes(s_bytes)} each, "
        f"{s_bytes / cache:.1%} of the cache: the wall is the cache, not S. Peak "
        f"{fmt_bytes(naive.peak_bytes)}.</li></ul>",
        f"<h4>{name(SPLIT_KV)}: one kernel, the cache read once</h4>",
        f"<ul><li>{fmt_int(plan.units)} (batch, KV head) units × {plan.splits} splits of "
        f"{fmt_int(plan.keys_per_split)} keys = {fmt_int(plan.blocks)} blocks on "
        f"{fmt_int(plan.slots)} resident slots of {escape(inp.gpu_label)} "
        f"({plan.wave_efficiency:.0%} filled); partial (m, l, O) merged with the online "
        f"softmax. Peak {fmt_bytes(split.peak_bytes)}.</li></ul>",
    ]
    out += fits_section(inp)
    return out


def fits_section(inp: PointInputs) -> list[str]:
    """What fits: a preset of this shape's weights plus its cache in the budget."""
    c = inp.config
    model = model_of_shape(c)
    if model is None or not inp.budget_bytes:
        return []
    from gpu.model.kv_fit import what_fits

    kv = "fp16" if c.dtype == "fp32" else c.dtype
    out = [f"<h4>What fits: {escape(model.label)} ({escape(model.attention)})</h4>", "<ul>"]
    for weights in ("fp16", "fp8"):
        fit = what_fits(model, inp.budget_bytes, weights, kv)
        if not fit.weights_fit:
            out.append(
                f"<li>{weights} weights ({fmt_bytes(fit.weight_bytes)}) exceed "
                f"{fmt_bytes(inp.budget_bytes)} ({escape(inp.budget_name)}): nothing fits.</li>"
            )
            continue
        out.append(
            f"<li>{weights} weights: {escape(fit.formula())}; context "
            f"<b>{fmt_int(fit.max_context(c.batch))}</b> at batch {fmt_int(c.batch)}.</li>"
        )
    out.append("<li>Weights and cache only: activations and workspace come on top.</li></ul>")
    return out
