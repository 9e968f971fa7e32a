"""The command line's flag values and the checks they pass before anything runs: lists of N
and algorithms, sizes, seconds, the attention shape (or a model preset) and the files named
by --out and --open. A bad value raises UsageError (exit 2) with one line that says why."""

from __future__ import annotations

import argparse
import decimal
import math
import os

from gpu.algorithms import ALGORITHMS
from gpu.config import DECODE, DTYPE_BYTES, FORWARD, PASSES, AttentionConfig
from gpu.errors import FileWriteError
from gpu.files.fileio import MAX_READ_LABEL, check_writable
from gpu.files.schema import MAX_SM_COUNT, MAX_TRACE_BLOCKS

from .errors import UsageError

#: Largest memory budget: what a signed 64-bit byte count holds (CuPy's pool limit is one).
MAX_BUDGET = 2**63 - 1


LIMITS_EPILOG = (
    f"Files opened (--open, recordings, sessions, traces) must be regular files of at most "
    f"{MAX_READ_LABEL}, UTF-8 JSON; a trace may hold at most {MAX_SM_COUNT} SMs and "
    f"{MAX_TRACE_BLOCKS:,} blocks. Bad values exit 2, a failed check or run 1."
)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block, status 2
        raise UsageError(message)


def int_list(text: str) -> list[int]:
    """'1024,2048' -> [1024, 2048]; an empty item ('1,,2', '1,2,') is refused, not dropped:
    it is most likely a number left out."""
    items = text.split(",")
    if not text.strip():
        raise argparse.ArgumentTypeError("give at least one value")
    if any(not v.strip() for v in items):
        raise argparse.ArgumentTypeError(
            f"{text!r} has an empty item: give integers separated by single commas"
        )
    try:
        return [int(v.replace("_", "")) for v in items]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers"
        ) from None


def algo_list(text: str) -> list[str]:
    algos = [a.strip() for a in text.split(",") if a.strip()]
    for a in algos:
        if a not in ALGORITHMS:
            raise argparse.ArgumentTypeError(
                f"algorithm {a!r} is not one of {', '.join(ALGORITHMS)}"
            )
    if not algos:
        raise argparse.ArgumentTypeError("give at least one algorithm")
    return algos


_SIZE_UNITS = {
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "B": 1,
}


def size_bytes(text: str) -> int:
    """'24GB', '512MiB', '1e9' -> bytes: a finite, whole, positive number of bytes that fits in
    64 bits (so 'inf', '1e400', '1.5B' and '-1GB' are refused rather than meaning no budget or
    rounded). Worked out in exact decimals: 9223372036854775807 is 2^63 - 1, not 2^63."""
    t = text.strip().upper().replace("_", "")
    scale = 1
    for suffix, mult in _SIZE_UNITS.items():
        if t.endswith(suffix):
            t, scale = t[: -len(suffix)].strip(), mult
            break
    too_large = f"{text!r} is more than 2^63 - 1 bytes (a size is 1 to 2^63 - 1 bytes)"
    try:
        value = decimal.Decimal(t) * scale
    except decimal.Overflow:  # beyond even a decimal's exponent (1e1000000)
        raise argparse.ArgumentTypeError(too_large) from None
    except (decimal.InvalidOperation, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 24GB, 512MiB)") from None
    if not value.is_finite():
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite size")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    if value > MAX_BUDGET:
        raise argparse.ArgumentTypeError(too_large)
    if value != value.to_integral_value():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes")
    return int(value)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive, finite number of seconds")
    return value


def shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--heads", type=int, default=12, help="attention heads h (default 12)")
    p.add_argument("--head-dim", type=int, default=64, help="head dimension d (default 64)")
    p.add_argument("--batch", type=int, default=1, help="batch size B (default 1)")
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="fp16")
    p.add_argument("--causal", action="store_true", help="apply a causal mask")
    p.add_argument("--block-m", type=int, default=64, help="query rows per tile (readable kernel)")
    p.add_argument("--block-n", type=int, default=64, help="key rows per tile (readable kernel)")
    p.add_argument(
        "--pass",
        dest="pass_",
        choices=PASSES,
        default=FORWARD,
        help="forward (inference, the default), backward (the gradients, after an untimed "
        "forward that saves what they need), step (a training step: forward and backward) or "
        "decode (--new-tokens query rows per head against a KV cache of N tokens)",
    )
    p.add_argument(
        "--kv-heads",
        type=int,
        default=None,
        help="with --pass decode: KV heads of the cache, a divisor of --heads (default: as many "
        "as --heads, MHA; fewer is GQA, 1 is MQA)",
    )
    p.add_argument(
        "--new-tokens",
        type=int,
        default=1,
        help="with --pass decode: query rows per head, the tokens a step generates (1 to 8)",
    )
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="with --pass backward or step: the fused backward sums dQ in a fixed order "
        "(its dQ pass, flash_bwd_dq: bit-identical runs, two more products per tile) "
        "instead of by atomics",
    )


def layer_args(p: argparse.ArgumentParser) -> None:
    from gpu.model.kv_fit import DECODE_MODELS, STORAGE_BYTES
    from gpu.model.layer_stack import LAYERS_MAX, PRESETS

    p.add_argument(
        "--layers",
        type=int,
        default=None,
        help=f"attention layers L of a training step (1..{LAYERS_MAX}; default: the preset's, "
        "else 1): the saved activations of L layers and where they hit the wall",
    )
    p.add_argument(
        "--preset",
        choices=(*PRESETS, *DECODE_MODELS),
        default=None,
        help="a model's layers, heads and head dim (with --pass decode its KV heads and "
        "weights too, for what fits): "
        + "; ".join(f"{k} = {v.source}" for k, v in {**PRESETS, **DECODE_MODELS}.items()),
    )
    p.add_argument(
        "--weights",
        choices=tuple(STORAGE_BYTES),
        default="fp16",
        help="with --pass decode and a --preset: the weights' storage for what fits",
    )
    p.add_argument(
        "--kv-dtype",
        choices=tuple(STORAGE_BYTES),
        default=None,
        help="with --pass decode and a --preset: the cache's storage for what fits (default: "
        "--dtype)",
    )


def config_for(args: argparse.Namespace, seq_len: int) -> AttentionConfig:
    preset = preset_of(args)
    deterministic = getattr(args, "deterministic", False)
    if deterministic and args.pass_ in (FORWARD, DECODE):
        raise UsageError(
            f"--deterministic chooses how the backward sums dQ, and the {args.pass_} pass has "
            "none: add --pass backward or --pass step"
        )
    kv_heads, new_tokens = getattr(args, "kv_heads", None), getattr(args, "new_tokens", 1)
    if args.pass_ != DECODE and (kv_heads is not None or new_tokens != 1):
        raise UsageError("--kv-heads and --new-tokens describe a decode step: add --pass decode")
    if preset is not None and hasattr(preset, "kv_heads"):
        kv_heads = preset.kv_heads
    return AttentionConfig(
        seq_len=seq_len,
        heads=preset.heads if preset else args.heads,
        head_dim=preset.head_dim if preset else args.head_dim,
        batch=args.batch,
        dtype=args.dtype,
        causal=args.causal,
        block_m=args.block_m,
        block_n=args.block_n,
        pass_=args.pass_,
        deterministic=deterministic,
        kv_heads=kv_heads,
        new_tokens=new_tokens,
    )


def preset_of(args: argparse.Namespace):
    """The --preset's model, None without one: a training preset
    (gpu.model.layer_stack.ModelPreset) for a training pass, a decode model
    (gpu.model.kv_fit.DecodeModel) for --pass decode. It sets the heads and head dim (a decode
    model its KV heads too), so --heads, --head-dim or --kv-heads beside it is refused rather
    than ignored."""
    key = getattr(args, "preset", None)
    if key is None:
        return None
    from gpu.model.kv_fit import DECODE_MODELS
    from gpu.model.layer_stack import PRESETS

    if (args.heads, args.head_dim) != (12, 64) or getattr(args, "kv_heads", None) is not None:
        raise UsageError(
            f"--preset {key} sets the heads and head dim: leave out --heads/--head-dim/--kv-heads"
        )
    decode = args.pass_ == DECODE
    if decode and key not in DECODE_MODELS:
        raise UsageError(
            f"--preset {key} is a training preset; with --pass decode choose one of "
            + ", ".join(DECODE_MODELS)
        )
    if not decode and key not in PRESETS:
        raise UsageError(
            f"--preset {key} is a decode model: add --pass decode (training presets: "
            + ", ".join(PRESETS)
            + ")"
        )
    return DECODE_MODELS[key] if decode else PRESETS[key]


def layer_count(args: argparse.Namespace) -> int:
    """--layers, else the preset's, else 1; only a training pass stacks saved activations."""
    from gpu.model.layer_stack import check_layers

    preset = preset_of(args)
    if args.pass_ == DECODE:
        if args.layers is not None:
            raise UsageError(
                "--layers describes a training step; with --pass decode a --preset gives the "
                "layers that what fits counts"
            )
        return 1
    layers = args.layers if args.layers is not None else (preset.layers if preset else 1)
    if (args.layers is not None or preset is not None) and args.pass_ == FORWARD:
        raise UsageError(
            "--layers and --preset describe a training step: add --pass step (or backward)"
        )
    try:
        return check_layers(layers)
    except ValueError as exc:
        raise UsageError(f"--layers {layers}: {exc}") from None


def refuse_bare_double_dash_values(argv: list[str]) -> None:
    """`--seq=--` must be an error: Python 3.11's argparse drops the "--" as its end-of-options
    marker and hands the option an empty list, so `bench` measured nothing and exited 0."""
    for token in argv:
        name, eq, value = token.partition("=")
        if name.startswith("--") and eq and value == "--":
            raise UsageError(f"argument {name}: '--' is not a value")


def refuse_folder_names(args: argparse.Namespace) -> None:
    """An --out or --open that ends in a path separator names a folder, not a file: refused
    (`--out r.png/` wrote r.png)."""
    for flag, value in (("--out", args.out), ("--open", getattr(args, "render_open", None))):
        if value is not None and value.endswith((os.sep, "/")):
            raise UsageError(f"{flag} {value!r} ends in {value[-1]!r}: give a file, not a folder")
        if value is not None and not value.strip():
            raise UsageError(f"{flag} needs a file name")


def check_writable_out(args: argparse.Namespace) -> None:
    try:
        check_writable(args.out, overwrite=args.force)
    except FileExistsError:
        raise UsageError(f"--out {args.out!r} exists; add --force to replace it") from None
    except FileWriteError as exc:
        raise UsageError(f"--out {args.out!r}: {exc}") from None
