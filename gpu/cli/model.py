"""`main.py model`: the cost model's figures for one config, as text or one JSON object: peaks,
and the current point's DRAM bytes, useful FLOP per DRAM byte and roofline verdicts on a GPU's
roofs, printed and labelled as `main.py explain` prints them (gpu.model.roofline's objects,
the ones the app shows); the tile loads (nothing reused) named as such, the roofline time on
every GPU of the table, the training step's saved activations and walls, and the ring's
prediction over P GPUs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gpu.algorithms import NAIVE, TILED
from gpu.config import DETERMINISTIC_LABEL, PASS_LABELS, AttentionConfig
from gpu.model.costmodel import GPUS, algorithm_cost, attention_matrix_bytes
from gpu.model.roofline import explain
from gpu.units import fmt_bytes, fmt_flops, fmt_ms_column, fmt_seconds

from .arguments import config_for, layer_count, preset_of
from .errors import UsageError
from .explain_text import print_flop_note, print_roofs, print_verdicts


def cmd_model(args: argparse.Namespace) -> int:
    cfg = config_for(args, args.seq)
    if cfg.is_decode:
        return _decode_model(cfg, args)
    gpu = GPUS[args.gpu]
    # The current point's figures, as `explain` prints them: the L2-aware DRAM bytes, useful
    # FLOP per DRAM byte and the roofline's verdict on the instruction family each kernel runs.
    e = explain(cfg, (NAIVE, TILED), gpu)
    naive, tiled = e.algorithm(NAIVE), e.algorithm(TILED)
    costs = {a: algorithm_cost(cfg, a) for a in (NAIVE, TILED)}
    on_each = {name: explain(cfg, (NAIVE, TILED), g) for name, g in GPUS.items()}
    report = {
        "config": cfg.to_dict(),
        "gpu": gpu.name,
        "attn_matrix_bytes": attention_matrix_bytes(cfg),
        "naive_peak_bytes": costs[NAIVE].peak_bytes,
        "tiled_peak_bytes": costs[TILED].peak_bytes,
        "naive_hbm_bytes": naive.bytes,
        "tiled_hbm_bytes": tiled.bytes,
        "hbm_bytes_source": "model: the cost model's L2-aware DRAM estimate on the named GPU",
        "naive_tile_loads_bytes": naive.model_bytes["no_reuse"],
        "tiled_tile_loads_bytes": tiled.model_bytes["no_reuse"],
        "naive_kernels": {
            k.name: {"bytes_read": k.bytes_read, "bytes_written": k.bytes_written, "flops": k.flops}
            for k in costs[NAIVE].kernels
        },
        "flops": naive.flops,
        "naive_intensity": naive.intensity,
        "tiled_intensity": tiled.intensity,
        "algorithms": {v.algorithm: _verdict(v) for v in e.algorithms},
        "gpus": {
            name: {
                "naive_fits": costs[NAIVE].peak_bytes <= g.memory_bytes,
                "ridge_flops_per_byte": g.ridge_flops_per_byte,
                "naive_roofline_ms": on_each[name].algorithm(NAIVE).roofline_ms,
                "tiled_roofline_ms": on_each[name].algorithm(TILED).roofline_ms,
            }
            for name, g in GPUS.items()
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
    print(f"{cfg.label()} on the {gpu.label} roofline (model)")
    print(f"  one attention matrix (S or P): {fmt_bytes(report['attn_matrix_bytes'])}")
    for label, cost in costs.items():
        print(f"  {label} peak: {fmt_bytes(cost.peak_bytes)}")
    print(f"  useful FLOPs: {fmt_flops(naive.flops)}")
    print_roofs(e)
    print_verdicts(e)
    print(
        "  tile loads, every tile read and written with nothing reused (what the Tiles tab's "
        "lanes move, not DRAM traffic): "
        + ", ".join(f"{v.algorithm} {fmt_bytes(v.model_bytes['no_reuse'])}" for v in e.algorithms)
    )
    print_flop_note(cfg, None)
    print("  roofline ms on each GPU (model; its own roofs and L2):")
    for name, g in report["gpus"].items():
        fits = "fits" if g["naive_fits"] else "naive DOES NOT FIT"
        print(
            f"  {name:<18} naive {fmt_ms_column(g['naive_roofline_ms']):>9} ms  "
            f"tiled {fmt_ms_column(g['tiled_roofline_ms']):>9} ms  {fits}"
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


def _verdict(v) -> dict[str, Any]:
    """An algorithm's figures under `explain --json`'s names."""
    return {
        "flops": v.flops,
        "bytes": v.bytes,
        "bytes_source": v.bytes_source,
        "tile_loads_bytes": v.model_bytes["no_reuse"],
        "intensity": v.intensity,
        "bound": v.bound,
        "roof": v.roof,
        "ties": list(v.ties),
        "roofline_ms": v.roofline_ms,
    }


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
    hidden = "hidden" if p["hidden"] else f"{fmt_seconds(p['exposed_s'])} exposed"
    print(
        f"  ring on {p['devices']} GPUs ({p['link']}, {p['throughput']}): "
        f"{fmt_seconds(p['total_s'])} vs {fmt_seconds(p['single_s'])} on one "
        f"(speed-up {p['speedup']:.2f}, efficiency {p['efficiency']:.0%}); per step "
        f"compute {fmt_seconds(p['step_compute_s'])}, transfer {fmt_seconds(p['step_transfer_s'])} "
        f"({hidden}); {fmt_bytes(p['peak_bytes_per_device'])} per GPU"
    )
