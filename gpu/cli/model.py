"""`main.py model`: the cost model's figures for one config (peaks, HBM traffic, FLOPs, modeled
times per GPU), with the training step's saved activations and walls, and the ring's
prediction over P GPUs, as text or one JSON object."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gpu.algorithms import NAIVE, TILED
from gpu.config import DETERMINISTIC_LABEL, PASS_LABELS, AttentionConfig
from gpu.model.costmodel import GPUS, algorithm_cost, attention_matrix_bytes
from gpu.units import fmt_bytes, fmt_flops

from .arguments import config_for, layer_count, preset_of
from .errors import UsageError


def cmd_model(args: argparse.Namespace) -> int:
    cfg = config_for(args, args.seq)
    if cfg.is_decode:
        return _decode_model(cfg, args)
    naive, tiled = algorithm_cost(cfg, NAIVE), algorithm_cost(cfg, TILED)
    report = {
        "config": cfg.to_dict(),
        "attn_matrix_bytes": attention_matrix_bytes(cfg),
        "naive_peak_bytes": naive.peak_bytes,
        "tiled_peak_bytes": tiled.peak_bytes,
        "naive_hbm_bytes": naive.hbm_bytes,
        "tiled_hbm_bytes": tiled.hbm_bytes,
        "naive_kernels": {
            k.name: {"bytes_read": k.bytes_read, "bytes_written": k.bytes_written, "flops": k.flops}
            for k in naive.kernels
        },
        "flops": naive.flops,
        "naive_intensity": naive.arithmetic_intensity,
        "tiled_intensity": tiled.arithmetic_intensity,
        "gpus": {
            name: {
                "naive_fits": naive.peak_bytes <= gpu.memory_bytes,
                "ridge_flops_per_byte": gpu.ridge_flops_per_byte,
                "naive_model_ms": naive.modeled_seconds(gpu) * 1e3,
                "tiled_model_ms": tiled.modeled_seconds(gpu) * 1e3,
            }
            for name, gpu in GPUS.items()
        },
    }
    if args.devices is not None:
        if cfg.has_backward:
            raise UsageError("--devices models the ring's forward pass: leave out --pass")
        report["ring"] = _ring_model(cfg, args.devices)
    layers = layer_count(args)
    if cfg.has_backward:
        report["training"] = training_model(cfg, layers, preset_of(args))
    if args.json:
        print(json.dumps(report))
        return 0
    print(cfg.label())
    print(f"  one attention matrix (S or P): {fmt_bytes(report['attn_matrix_bytes'])}")
    for label, cost in (("naive", naive), ("tiled", tiled)):
        print(
            f"  {label} peak:  {fmt_bytes(cost.peak_bytes):>10}   "
            f"HBM traffic {fmt_bytes(cost.hbm_bytes)}   "
            f"intensity {cost.arithmetic_intensity:.1f} FLOP/B"
        )
    print(f"  FLOPs: {fmt_flops(naive.flops)}")
    for name, g in report["gpus"].items():
        fits = "fits" if g["naive_fits"] else "naive DOES NOT FIT"
        print(
            f"  {name:<18} naive {g['naive_model_ms']:9.3f} ms  tiled {g['tiled_model_ms']:9.3f} ms"
            f"  (model)  {fits}"
        )
    if "ring" in report:
        _print_ring_model(report["ring"])
    if "training" in report:
        print_training_model(report["training"])
    return 0


def _decode_model(cfg: AttentionConfig, args: argparse.Namespace) -> int:
    from .decode_report import decode_report, print_decode_report

    if args.devices is not None:
        raise UsageError("--devices models the ring's forward pass: leave out --pass decode")
    layer_count(args)  # refuses --layers
    report = decode_report(cfg, args, preset_of(args))
    if args.json:
        print(json.dumps(report))
    else:
        print_decode_report(cfg, report)
    return 0


def training_model(cfg: AttentionConfig, layers: int, preset) -> dict[str, Any]:
    """The training step's figures per algorithm: the backward's useful and recomputed FLOPs,
    the saved activations of one layer and of L, and, per GPU, the N where L layers hit the
    wall (attention's own tensors only: no weights, optimizer state or MLP activations)."""
    from gpu.model.backward_cost import backward_useful_flops, recompute_flops, step_peak_bytes
    from gpu.model.layer_stack import layer_stack, training_wall_seq_len

    algos = {}
    for algo in (NAIVE, TILED):
        stack = layer_stack(cfg, algo, layers)
        cost = algorithm_cost(cfg, algo)
        algos[algo] = {
            "kernels": [k.name for k in cost.kernels],
            "backward_useful_flops": backward_useful_flops(cfg),
            "recompute_flops": recompute_flops(cfg, algo),
            "executed_flops": cost.executed_flops,
            "hbm_bytes": cost.hbm_bytes,
            "step_peak_bytes": step_peak_bytes(cfg, algo),
            "saved_per_layer_bytes": stack.saved_per_layer,
            "saved_total_bytes": stack.saved_total,
            "layers_peak_bytes": stack.peak_bytes,
            "wall_seq_len": {
                name: training_wall_seq_len(cfg, algo, layers, gpu.memory_bytes)
                for name, gpu in GPUS.items()
            },
        }
    return {
        "pass": cfg.pass_,
        "deterministic": cfg.deterministic,
        "layers": layers,
        "preset": preset.key if preset else None,
        "preset_source": preset.source if preset else None,
        "counts": "attention's own tensors: no weights, optimizer state or MLP activations",
        "algorithms": algos,
    }


def print_training_model(t: dict[str, Any]) -> None:
    what = f"{t['layers']} layer" + ("s" if t["layers"] != 1 else "")
    if t["preset"]:
        what += f" ({t['preset_source']})"
    how = f", {DETERMINISTIC_LABEL}" if t["deterministic"] else ""
    print(f"  {PASS_LABELS[t['pass']]}{how}, {what}; {t['counts']}:")
    for algo, a in t["algorithms"].items():
        recompute = f", recompute {fmt_flops(a['recompute_flops'])}" if a["recompute_flops"] else ""
        print(
            f"    {algo:<6} saved {fmt_bytes(a['saved_per_layer_bytes'])}/layer, "
            f"{fmt_bytes(a['saved_total_bytes'])} for {t['layers']}; "
            f"peak {fmt_bytes(a['layers_peak_bytes'])}; "
            f"backward {fmt_flops(a['backward_useful_flops'])} useful{recompute}"
        )
        walls = ", ".join(
            f"{name}: N={n:,}" if n else f"{name}: fits at every N"
            for name, n in a["wall_seq_len"].items()
        )
        print(f"           wall at {walls}")


def _ring_model(cfg: AttentionConfig, devices: int) -> dict:
    from gpu.model.links import DEFAULT_TOPOLOGY
    from gpu.ring.model import predict
    from gpu.ring.schedule import RingConfigError, check_devices

    try:
        check_devices(devices)
    except RingConfigError as exc:
        raise UsageError(str(exc)) from exc
    prediction = predict(cfg, devices).to_dict()
    prediction["topology"] = DEFAULT_TOPOLOGY.name
    return prediction


def _print_ring_model(p: dict) -> None:
    hidden = "hidden" if p["hidden"] else f"{p['exposed_s'] * 1e3:.3f} ms exposed"
    print(
        f"  ring on {p['devices']} GPUs ({p['link']}, {p['throughput']}): "
        f"{p['total_s'] * 1e3:.3f} ms vs {p['single_s'] * 1e3:.3f} ms on one "
        f"(speed-up {p['speedup']:.2f}, efficiency {p['efficiency']:.0%}); per step "
        f"compute {p['step_compute_s'] * 1e3:.3f} ms, transfer {p['step_transfer_s'] * 1e3:.3f} ms "
        f"({hidden}); {fmt_bytes(p['peak_bytes_per_device'])} per GPU"
    )
