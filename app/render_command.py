"""`main.py render`: a headless screenshot of the window. The flags are checked here, before
Qt is loaded; the window itself is made and painted by app.launch.render_window."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpu.cli.arguments import check_writable_out, config_for, refuse_folder_names
from gpu.cli.errors import UsageError

#: Image files `render` writes, by suffix.
RENDER_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}


def cmd_render(args: argparse.Namespace) -> int:
    refuse_folder_names(args)
    cfg = config_for(args, args.seq)
    suffix = Path(args.out).suffix.lower()
    if suffix not in RENDER_FORMATS:
        raise UsageError(f"--out {args.out!r}: the image must end in {', '.join(RENDER_FORMATS)}")
    if args.colors and not 2 <= args.colors <= 256:
        raise UsageError(f"--colors {args.colors}: give 2 to 256 (or leave it out)")
    if args.colors and RENDER_FORMATS[suffix] != "PNG":
        raise UsageError("--colors makes a palette PNG: use it with a .png --out")
    check_writable_out(args)
    try:
        from app.launch import render_window
    except ImportError as exc:
        raise UsageError(f"render needs the desktop app's Qt libraries: {exc}") from exc
    return render_window(
        cfg,
        backend=args.backend,
        out=args.out,
        open_path=args.render_open,
        overwrite=args.force,
        colors=args.colors,
    )
