"""`main.py model --pass decode`: the decode step's figures (the KV cache, the bytes and FLOPs of
naive's three kernels and the split-KV kernel, its split on each GPU) and, with a --preset,
what fits: the longest context × batch a model's weights leave room for on each GPU."""

from __future__ import annotations

import argparse
from typing import Any

from gpu.algorithms import NAIVE, SPLIT_KV
from gpu.config import AttentionConfig
from gpu.model.costmodel import GPUS, algorithm_cost, compulsory_cost
from gpu.model.decode_cost import kv_cache_bytes, plan_for, score_bytes
from gpu.model.kv_fit import DecodeModel, what_fits
from gpu.units import fmt_bytes, fmt_flops, fmt_int, fmt_intensity, fmt_ms_column


def decode_report(cfg: AttentionConfig, args: argparse.Namespace, preset) -> dict[str, Any]:
    """One JSON-ready object; the keys of the prefill's report where they mean the same
    (attn_matrix_bytes is one of naive's S or P, tiled_* are the split-KV kernel's)."""
    naive, split = algorithm_cost(cfg, NAIVE), algorithm_cost(cfg, SPLIT_KV)
    once = compulsory_cost(cfg, SPLIT_KV)
    report: dict[str, Any] = {
        "config": cfg.to_dict(),
        "kv_cache_bytes": kv_cache_bytes(cfg),
        "kv_bytes_per_token": kv_cache_bytes(cfg) // (cfg.seq_len * cfg.batch),
        "attn_matrix_bytes": score_bytes(cfg),
        "naive_peak_bytes": naive.peak_bytes,
        "tiled_peak_bytes": split.peak_bytes,
        "naive_hbm_bytes": naive.hbm_bytes,
        "tiled_hbm_bytes": split.hbm_bytes,
        "naive_kernels": {
            k.name: {"bytes_read": k.bytes_read, "bytes_written": k.bytes_written, "flops": k.flops}
            for k in naive.kernels
        },
        "flops": split.flops,
        "naive_intensity": naive.arithmetic_intensity,
        "tiled_intensity": once.arithmetic_intensity,
        "gpus": {},
    }
    for name, gpu in GPUS.items():
        plan = plan_for(cfg, gpu)
        report["gpus"][name] = {
            "naive_model_ms": naive.modeled_seconds(gpu) * 1e3,
            "tiled_model_ms": once.modeled_seconds(gpu) * 1e3,
            "ridge_flops_per_byte": gpu.ridge_flops_per_byte,
            "splits": plan.splits,
            "keys_per_split": plan.keys_per_split,
            "blocks": plan.blocks,
            "wave_efficiency": plan.wave_efficiency,
        }
    if preset is not None:
        report["fits"] = fits_report(preset, cfg, args)
    return report


def fits_report(model: DecodeModel, cfg: AttentionConfig, args: argparse.Namespace) -> dict:
    """What fits on each GPU (and within --budget where given) for `model`."""
    weights = getattr(args, "weights", "fp16")
    kv = getattr(args, "kv_dtype", None) or ("fp16" if cfg.dtype == "fp32" else cfg.dtype)
    budgets = {name: gpu.memory_bytes for name, gpu in GPUS.items()}
    if getattr(args, "budget", None):
        budgets["budget"] = args.budget
    out = {}
    for name, budget in budgets.items():
        fit = what_fits(model, budget, weights, kv)
        out[name] = {
            "budget_bytes": budget,
            "weight_bytes": fit.weight_bytes,
            "weights_fit": fit.weights_fit,
            "kv_bytes_per_token": fit.kv_bytes_per_token,
            "max_tokens": fit.max_tokens,
            "max_context": fit.max_context(cfg.batch),
            "formula": fit.formula(),
        }
    return {
        "model": model.key,
        "source": model.source,
        "attention": model.attention,
        "layers": model.layers,
        "params": model.params,
        "weights": weights,
        "kv_dtype": kv,
        "batch": cfg.batch,
        "counts": "weights and KV cache only: activations and workspace come on top",
        "budgets": out,
    }


def print_decode_report(cfg: AttentionConfig, r: dict[str, Any]) -> None:
    print(cfg.label())
    print(
        f"  KV cache (one layer): {fmt_bytes(r['kv_cache_bytes'])}, "
        f"{fmt_bytes(r['kv_bytes_per_token'])} per token of each sequence"
    )
    print(f"  naive's scores S (and P): {fmt_bytes(r['attn_matrix_bytes'])} each")
    for label, key in (("naive", "naive"), ("split-KV", "tiled")):
        print(
            f"  {label:<9} peak {fmt_bytes(r[f'{key}_peak_bytes']):>10}   "
            f"HBM traffic {fmt_bytes(r[f'{key}_hbm_bytes'])}   "
            f"intensity {fmt_intensity(r[f'{key}_intensity'])} FLOP/B"
        )
    print(f"  FLOPs: {fmt_flops(r['flops'])}")
    for name, g in r["gpus"].items():
        print(
            f"  {name:<18} split-KV {fmt_ms_column(g['tiled_model_ms']):>9} ms, naive "
            f"{fmt_ms_column(g['naive_model_ms']):>9} ms (model); {g['splits']} splits of "
            f"{fmt_int(g['keys_per_split'])} keys, {g['blocks']} blocks, wave efficiency "
            f"{g['wave_efficiency']:.0%}"
        )
    fits = r.get("fits")
    if fits:
        print(
            f"  what fits, {fits['model']} ({fits['attention']}, {fits['layers']} layers), "
            f"weights {fits['weights']}, KV cache {fits['kv_dtype']}; {fits['counts']}:"
        )
        for name, f in fits["budgets"].items():
            if not f["weights_fit"]:
                print(
                    f"    {name:<18} the weights ({fmt_bytes(f['weight_bytes'])}) do not fit in "
                    f"{fmt_bytes(f['budget_bytes'])}"
                )
                continue
            print(
                f"    {name:<18} {fmt_int(f['max_tokens'])} tokens: context "
                f"{fmt_int(f['max_context'])} at batch {fits['batch']}"
            )
