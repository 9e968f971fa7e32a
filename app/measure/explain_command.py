"""`main.py explain`: the explain pane's verdicts on the command line, built from the same
current point the window shows (Qt-free), from a recording's measured figures where --open
names one and from the cost model otherwise."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from gpu import exit_status
from gpu.algorithms import ALGORITHMS
from gpu.cli.arguments import config_for, layer_count, preset_of
from gpu.cli.errors import UsageError
from gpu.cli.explain_text import print_explanation
from gpu.cli.model import print_training_model, training_model


def cmd_explain(args: argparse.Namespace) -> int:
    """Print the verdicts (or one JSON object with the current point's figures); 0 on success."""
    from gpu.model import roofline
    from gpu.model.costmodel import GPUS, algorithm_cost, traffic_band

    cfg = config_for(args, args.seq)
    results: dict = {}
    device = None
    recorded: tuple = ()  # every result of the recording: its one clock (roofline.device_gpu)
    if args.explain_open is not None:
        if not args.explain_open.strip():
            raise UsageError("--open needs a file name")
        from gpu.errors import ReadStopped
        from gpu.files.read_stop import stoppable
        from gpu.files.recording import RecordingError, load_recording

        try:
            with stoppable(lambda: exit_status.signalled() is not None):
                recording = load_recording(args.explain_open)
        except RecordingError as exc:
            raise UsageError(str(exc)) from exc
        except ReadStopped:  # a signal came: the program ends here, with its status
            exit_status.check()
            raise
        device, recorded = recording.device, recording.results
        results = {r.algorithm: r for r in recording.results if r.config == cfg}
        if not results:
            lens = sorted({r.config.seq_len for r in recording.results})
            raise UsageError(
                f"{args.explain_open} has no result for {cfg.label()} "
                f"(its N: {', '.join(map(str, lens)) or 'none'})"
            )
    known = []
    for a in ALGORITHMS:
        try:
            algorithm_cost(cfg, a)
        except KeyError:
            continue
        known.append(a)
    algos = args.algo or ([a for a in known if a in results] if results else known)
    unknown = [a for a in algos if a not in known]
    if unknown:
        raise UsageError(f"--algo {','.join(unknown)}: the cost model does not know it")
    from app.state.current_point import current_point  # Qt-free: the app's own figures

    gpu = GPUS[args.gpu] if args.gpu else roofline.device_gpu(device, recorded)
    smem = device.details.get("smem_per_block_optin_bytes") if device else None
    # A run that ran out of memory has no time to judge: no roofline row for it, one line. It
    # stays in the point (judged on the model, as the app does) for naive's DRAM ratios: its
    # modelled bytes over a fused kernel's measured ones.
    oom = [a for a in algos if a in results and results[a].oom]
    ran = [a for a in algos if a not in oom] or algos
    oom = [a for a in oom if a not in ran]
    bands = {a: traffic_band(cfg, a, gpu, smem) for a in algos}
    reported = device.memory_total_bytes if device is not None and not args.gpu else None
    point = current_point(cfg, algos, gpu, results, bands, reported)
    explanation = replace(
        point.explanation,
        algorithms=tuple(v for v in point.explanation.algorithms if v.algorithm in ran),
    )
    layers = layer_count(args)
    training = training_model(cfg, layers, preset_of(args)) if cfg.has_backward else None
    out_of_memory = [
        {"algorithm": a, "message": results[a].message, "needs_bytes": results[a].model_peak_bytes}
        for a in oom
    ]
    if args.json:
        figures = point.to_dict()
        figures["algorithms"] = {a: f for a, f in figures["algorithms"].items() if a in ran}
        report = {**explanation.to_dict(), "figures": figures}
        if cfg.has_backward:  # the app's own training figures, each with its source
            from app.state.training_figures import training_figures

            budget = gpu.memory_bytes  # the one capacity rule (GpuSpec.memory_bytes)
            report["figures"]["training"] = training_figures(cfg, layers, budget, results).to_dict()
        report["out_of_memory"] = out_of_memory
        if training is not None:
            report["training"] = training
        print(json.dumps(report))
        return 0
    print_explanation(explanation, args.explain_open)
    for a in oom:
        print(f"  {a}: out of memory at N = {cfg.seq_len} ({results[a].message or 'recorded'})")
    if training is not None:
        print_training_model(training)
    return 0
