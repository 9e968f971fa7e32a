"""The explain pane's decode section: the KV cache and its formula, naive's scores beside it,
the split-KV kernel's split, and what fits on the device with the formula's numbers.

Plain Python (HTML text), called by app/measure/explain.py for a decode config."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from gpu.algorithms import NAIVE, SPLIT_KV
from gpu.model.decode_cost import kv_cache_bytes, plan_for, score_bytes

from ..state.decode_bandwidth import NO_COPY, kv_read_rate, memory_roof, share_text
from ..state.decode_fit import WEIGHT_CHOICES, model_of_shape, shape_fit
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
    out += bandwidth_section(inp, name)
    out += fits_section(inp)
    return out


def bandwidth_section(inp: PointInputs, name: Name) -> list[str]:
    """Each measured run's rate at this N, the KV cache read once over its time, as a share of
    the memory roof and of a measured copy (app/state/decode_bandwidth.py)."""
    rates = [(a, rate) for a, r in inp.results if (rate := kv_read_rate(r))]
    if not rates:
        return []
    roof = memory_roof(inp.gpu)
    out = ["<h4>Bandwidth: the cache read per step</h4>", "<ul>"]
    for a, rate in rates:
        out.append(f"<li>{name(a)}: {escape(share_text(rate, roof, inp.copy_bytes_s))}.</li>")
    if not inp.copy_bytes_s:
        out.append(f"<li>{escape(NO_COPY)}</li>")
    out.append(
        "<li>Short caches are latency-bound (launch, merge), long ones bandwidth-bound: the "
        "bandwidth plot draws the rate over N.</li></ul>"
    )
    return out


def fits_section(inp: PointInputs) -> list[str]:
    """What fits: a preset of this shape's weights plus its cache in the budget, for the
    storage types the memory plot's wall uses (app/state/decode_fit.py), then the other
    weights' storage for contrast."""
    c = inp.config
    model = model_of_shape(c)
    if model is None or not inp.budget_bytes:
        return []
    out = [f"<h4>What fits: {escape(model.label)} ({escape(model.attention)})</h4>", "<ul>"]
    others = [w for w in WEIGHT_CHOICES if w != inp.fit_weights]
    for weights in (inp.fit_weights, *others):
        fit = shape_fit(c, inp.budget_bytes, weights, inp.fit_kv)
        assert fit is not None
        kind = f"{weights} weights, {inp.fit_kv} cache"
        wall = " (the memory plot's wall)" if weights == inp.fit_weights else ""
        if not fit.weights_fit:
            out.append(
                f"<li>{kind}{wall}: the weights ({fmt_bytes(fit.weight_bytes)}) exceed "
                f"{fmt_bytes(inp.budget_bytes)} ({escape(inp.budget_name)}): nothing fits.</li>"
            )
            continue
        out.append(
            f"<li>{kind}{wall}: {escape(fit.formula())}; context "
            f"<b>{fmt_int(fit.max_context(c.batch))}</b> at batch {fmt_int(c.batch)}.</li>"
        )
    out.append("<li>Weights and cache only: activations and workspace come on top.</li></ul>")
    return out
