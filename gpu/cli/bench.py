"""`main.py bench`: measure algorithms over sequence lengths on a backend (or the ring over P
devices), one table row per run, with --check against the reference, --profile for measured
traffic, and the results written to --out (kept in a named temporary file when that fails).
A run estimated past --time-limit is refused before anything is measured."""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
import tempfile
from pathlib import Path
from typing import Any

from gpu import exit_status
from gpu.algorithms import RING
from gpu.backend_factory import RING_BACKEND, BackendRequest, create_backend
from gpu.backends.backend import RunOptions, oom_result
from gpu.config import DETERMINISTIC_LABEL, AttentionConfig
from gpu.errors import FileWriteError, RunCancelled
from gpu.launch.cuda_kernels import KernelCompileError
from gpu.model.costmodel import pass_useful_flops
from gpu.units import fmt_rate, fmt_seconds

from .arguments import check_writable_out, config_for, refuse_folder_names
from .bench_output import BenchTable, Progress, traffic_column
from .errors import EXIT_CHECK_FAILED, EXIT_FAILED, EXIT_OK, UsageError, one_line

#: Sequence lengths `bench` measures by default: the CPU runs the same sweep ~1000x slower.
DEFAULT_SEQ = {"cuda": [1024, 2048, 4096], "cpu": [256, 512, 1024]}


#: Longest run `bench` starts by default when it can estimate it (the simulated ring on P
#: virtual devices: P² block pairs of NumPy calls).
BENCH_TIME_LIMIT_S = 600.0


def _check_out(args: argparse.Namespace) -> None:
    """Refuse a bad --out before anything is measured: no name, a suffix other than .json or
    .csv, an existing file without --force, a folder that is missing, read-only or full."""
    if args.out is None:
        return
    if not args.out.strip():
        raise UsageError("--out needs a file name (.json or .csv)")
    refuse_folder_names(args)
    if not args.out.lower().endswith((".json", ".csv")):
        raise UsageError(f"--out {args.out!r}: the file must end in .json or .csv")
    check_writable_out(args)


def cmd_bench(args: argparse.Namespace) -> int:
    from gpu.files.recording import Recording, save_recording

    if args.repeats < 1 or args.warmup < 0:
        raise UsageError("--repeats must be at least 1 and --warmup at least 0")
    _check_out(args)
    # every N and the shape flags are checked before a backend starts or anything is measured
    configs = [config_for(args, n) for n in args.seq or [1]]
    backend = _bench_backend(args, configs if args.seq else [])
    if args.seq is None:
        configs = [config_for(args, n) for n in DEFAULT_SEQ.get(backend.name, DEFAULT_SEQ["cuda"])]
        _check_ring_split(backend, configs)
    pass_ = configs[0].pass_
    algos = args.algo or [a for a in backend.algorithms() if pass_ in backend.passes(a)]
    missing = [a for a in algos if a not in backend.algorithms()]
    if missing:
        raise UsageError(
            f"--algo {','.join(missing)} is not available on the {backend.name} backend here "
            f"(available: {','.join(backend.algorithms())})"
        )
    options = RunOptions(
        warmup=args.warmup, repeats=args.repeats, check=args.check, budget_bytes=args.budget,
        profile=_profile_available(args, backend),
        cancel=lambda: exit_status.signalled() is not None,  # a signal stops the run in flight
    )  # fmt: skip
    _refuse_long_runs(backend, configs, algos, options, args.time_limit)
    device = backend.device_info()
    table = BenchTable(algos, "GFLOP/s" if backend.name == "cpu" else "TFLOP/s")
    print(f"# {backend.name} backend on {device.name}", flush=True)
    if configs[0].deterministic:
        print(
            f"# {DETERMINISTIC_LABEL}: the fused backward sums dQ in a fixed order "
            "(flash_bwd_dq in place of the atomics and flash_bwd_dq_convert)",
            flush=True,
        )
    # The NumPy backend measures a config's algorithms in interleaved rounds: load from
    # elsewhere on the machine slows them alike (min–max shows how much).
    interleaved = _interleaves(backend) and len(algos) > 1
    if interleaved:
        print(
            f"# interleaved rounds: at each N every algorithm runs once per round, in turn; "
            f"{args.warmup} warm-up and {args.repeats} timed rounds; min–max: the fastest and "
            "the slowest round",
            flush=True,
        )
    print(table.header(), flush=True)
    runs_each = args.warmup + args.repeats + 1  # + the metered run
    jobs = [(cfg, algo) for cfg in configs for algo in algos]
    progress = Progress([pass_useful_flops(cfg) * runs_each for cfg, _ in jobs])
    results = []
    failed: list[str] = []
    skipped: list[str] = []
    broken: dict[str, str] = {}  # algorithm -> why it cannot run at all (a compile failure)
    if interleaved:
        try:
            for cfg in configs:
                progress.start(f"{', '.join(algos)} N={cfg.seq_len}", len(algos))
                try:
                    rows = backend.run_interleaved(cfg, algos, options).values()
                except ValueError as exc:  # UnsupportedConfig: this config cannot run here
                    rows = ()
                    for algo in algos:
                        progress.print(table.note(cfg.seq_len, algo, "SKIPPED", one_line(exc)))
                        skipped.append(f"{algo} at N={cfg.seq_len}")
                for r in rows:
                    results.append(r)
                    progress.print(table.row(r))
                    if args.check and r.agrees is False:
                        failed.append(
                            f"{r.algorithm} at N={cfg.seq_len}: max abs error {r.max_abs_error:.3g}"
                        )
                for _ in algos:
                    progress.advance(pass_useful_flops(cfg) * runs_each)
        finally:
            progress.close()
        jobs = []
    try:
        for cfg, algo in jobs:
            exit_status.check()  # a signal ends the program here, with its status
            n = cfg.seq_len
            progress.start(f"{algo} N={n}")
            if algo in broken:
                progress.print(table.note(n, algo, "SKIPPED", broken[algo]))
                skipped.append(f"{algo} at N={n}")
                progress.advance(pass_useful_flops(cfg) * runs_each)
                continue
            try:
                r = backend.run(cfg, algo, options)
            except RunCancelled:  # by the cancel hook: a signal came
                exit_status.check()
                raise
            except ValueError as exc:  # UnsupportedConfig: this config cannot run here
                progress.print(table.note(n, algo, "SKIPPED", one_line(exc)))
                skipped.append(f"{algo} at N={n}")
            except KernelCompileError as exc:  # the kernel is broken: no N will run it
                broken[algo] = one_line(exc)
                progress.print(table.note(n, algo, "FAILED", broken[algo]))
            except MemoryError as exc:  # out of memory is a result
                r = oom_result(cfg, algo, backend.name, device.name, exc)
                results.append(r)
                progress.print(table.row(r))
            else:
                results.append(r)
                progress.print(table.row(r) + traffic_column(r, options))
                if options.profile and not r.oom and not r.traffic:
                    options = _say_traffic_missing_once(r, options)
                if args.check and r.agrees is False:
                    failed.append(f"{algo} at N={n}: max abs error {r.max_abs_error:.3g}")
            progress.advance(pass_useful_flops(cfg) * runs_each)
    finally:
        progress.close()
    if args.out:
        meta = {
            "command": "main.py " + " ".join(sys.argv[1:]),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        recording = Recording(device, tuple(results), meta)
        try:
            save_recording(recording, args.out, overwrite=args.force)
        except (FileWriteError, FileExistsError) as exc:
            kept = _save_fallback(recording, Path(args.out).suffix.lower())
            where = f"; the results were kept in {kept}" if kept else "; the results are lost"
            print(f"tilescope: error: {one_line(exc)}{where}", file=sys.stderr)
            return EXIT_FAILED
        print(f"# wrote {len(results)} results to {args.out}")
    status = EXIT_OK
    if broken:
        lines = "; ".join(f"{algo}: {why}" for algo, why in broken.items())
        print(f"tilescope: error: {lines}", file=sys.stderr)
        status = EXIT_FAILED
    if failed:
        print("tilescope: check failed: " + "; ".join(failed), file=sys.stderr)
        status = EXIT_CHECK_FAILED
    elif skipped and args.check and not broken:
        print("tilescope: check incomplete, not run: " + "; ".join(skipped), file=sys.stderr)
        status = EXIT_CHECK_FAILED
    return status


def _interleaves(backend) -> bool:  # type: ignore[no-untyped-def]
    """Whether the backend measures several algorithms in interleaved rounds (NumPy's)."""
    return hasattr(backend, "run_interleaved")


def _refuse_long_runs(
    backend, configs: list[AttentionConfig], algos: list[str], options, limit_s: float
) -> None:
    """Say up front how long the runs will take where it can be told (the simulated ring, the
    NumPy backend), on stdout whether or not it is a terminal, and refuse, before anything is
    built or measured, a run estimated past `limit_s`."""
    from gpu.backends.cpu_backend import CpuBackend

    estimate = getattr(backend, "estimate_s", None)
    if estimate is not None:  # the simulated ring: P² block pairs of NumPy calls
        seconds = [(cfg, RING, estimate(cfg, options)) for cfg in configs]
    elif isinstance(backend, CpuBackend):
        seconds = [
            (cfg, a, _cpu_run_seconds(backend, cfg, a, options)) for cfg in configs for a in algos
        ]
    else:
        return
    known = [(cfg, a, s) for cfg, a, s in seconds if s is not None]
    if not known:
        return
    cfg, algo, worst = max(known, key=lambda job: job[2])
    if worst > limit_s:
        about = fmt_seconds(worst, digits=2)
        if estimate is not None:
            raise UsageError(
                f"{backend.name} ring on {backend.devices} devices at N={cfg.seq_len}: about "
                f"{about} by the estimate, beyond --time-limit {limit_s:g} s; "
                f"fewer devices or a GPU ring, or `main.py model --seq {cfg.seq_len} --devices "
                f"{backend.devices}` for the model's figures at once"
            )
        raise UsageError(
            f"{algo} at N={cfg.seq_len} on the cpu backend: about {about} by the "
            f"estimate ({_cpu_rate_text()}), beyond --time-limit {limit_s:g} s; a smaller --seq, "
            f"a GPU (--backend cuda), or `main.py model --seq {cfg.seq_len}` for the model's "
            "figures at once"
        )
    total = sum(s for _, _, s in known)
    if total >= 10:
        how = "" if estimate is not None else f" ({_cpu_rate_text()})"
        print(f"# about {fmt_seconds(total, digits=2)} by the estimate{how}", flush=True)


def _cpu_run_seconds(backend, config: AttentionConfig, algorithm: str, options) -> float:
    """About how long the NumPy backend takes for `config`: its runs (warm-up, repeats and the
    metered one) of the pass's useful FLOPs at the simulated ring's NumPy rate; 0 for a run it
    refuses at once because it would not fit in free RAM or the budget (an out-of-memory
    result)."""
    import psutil

    from gpu.backends.cpu_backend import RAM_HEADROOM
    from gpu.ring import sim as ring_sim

    free = int(psutil.virtual_memory().available * RAM_HEADROOM)
    if backend.footprint_bytes(config, algorithm) > min(free, options.budget_bytes or free):
        return 0.0
    runs = options.warmup + max(1, options.repeats) + 1
    return pass_useful_flops(config) * runs / ring_sim.SIM_FLOPS_PER_S


def _cpu_rate_text() -> str:
    from gpu.ring import sim as ring_sim

    return f"NumPy at about {fmt_rate(ring_sim.SIM_FLOPS_PER_S, 'FLOP/s')}"


def _save_fallback(recording: Any, suffix: str) -> str | None:
    """Keep results whose --out write failed: a new, named file in the temporary folder, else
    in the home or the current folder; returns its path (None when nowhere would take it)."""
    from gpu.files.recording import save_recording

    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for folder in (tempfile.gettempdir(), Path.home(), Path.cwd()):
        for k in range(100):
            name = f"tilescope-results-{stamp}{f'-{k}' if k else ''}{suffix or '.json'}"
            path = Path(folder) / name
            try:
                save_recording(recording, path)
            except FileExistsError:
                continue
            except (FileWriteError, OSError):
                break
            return str(path)
    return None


def _bench_backend(args: argparse.Namespace, configs: list[AttentionConfig]):
    """The backend `bench` measures on: the ring over --devices P when asked, else the usual."""
    if args.devices is None and not (args.algo and RING in args.algo):
        return create_backend(args.backend)
    from gpu.ring.schedule import RingConfigError

    if args.devices is None:
        raise UsageError("--algo ring needs --devices P (the number of devices in the ring)")
    if args.algo and args.algo != [RING]:
        raise UsageError(
            f"--devices runs the ring alone: use --algo {RING} without other algorithms"
        )
    if args.budget is not None:
        raise UsageError("--budget does not apply to the ring")
    try:
        ring = BackendRequest(RING_BACKEND, devices=args.devices, on=args.backend)
        backend = create_backend(ring)
    except RingConfigError as exc:
        raise UsageError(str(exc)) from exc
    _check_ring_split(backend, configs)  # refuse N that cannot split before measuring any
    return backend


def _check_ring_split(backend: Any, configs: list[AttentionConfig]) -> None:
    """The ring backend refuses an N its devices cannot split evenly: say so before measuring."""
    check = getattr(backend, "check", None)
    if check is None:
        return
    from gpu.ring.schedule import RingConfigError

    for cfg in configs:
        try:
            check(cfg)
        except RingConfigError as exc:
            raise UsageError(str(exc)) from exc


def _profile_available(args: argparse.Namespace, backend) -> bool:
    """Whether --profile can sample counters here; if not, say why once and go on timing."""
    if not getattr(args, "profile", False):
        return False
    if backend.name != "cuda":
        print(f"# --profile: measured traffic needs the cuda backend ({backend.name} here); "
              "the figures stay the model's", flush=True)  # fmt: skip
        return False
    from gpu.counters.profiler import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        print(f"# --profile: traffic not measured ({reason.kind}): {reason}; "
              "the figures stay the model's", flush=True)  # fmt: skip
        return False
    print("# --profile: DRAM/L2 bytes per kernel from CUPTI PM sampling", flush=True)
    return True


def _say_traffic_missing_once(result, options: RunOptions) -> RunOptions:
    """A profiled run came back without counters: print its reason and stop profiling."""
    from dataclasses import replace

    why = next((m for m in result.message.split("; ") if "traffic not measured" in m), "")
    print(f"# --profile: {why or 'traffic not measured'}; the rest is timed only", flush=True)
    return replace(options, profile=False)
