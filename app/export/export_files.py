"""How every export reaches the disk: written atomically (a temporary file renamed at the end),
never over an existing file unless the caller says so, and refused up front where the folder
cannot take it."""

from __future__ import annotations

import os
from pathlib import Path

from gpu.errors import FileWriteError
from gpu.files.fileio import (
    atomic_write_bytes,
    discard_partial_file,
    new_partial_file,
)


class ExportError(Exception):
    """An export that cannot be made; the message says why (shown in the banner)."""


def write_file(path: str | os.PathLike[str], data: bytes, *, overwrite: bool = False) -> None:
    """Atomic write. FileExistsError when `path` exists and not `overwrite`; ExportError when
    the folder cannot be written (nothing is left behind either way)."""
    try:
        atomic_write_bytes(path, data, overwrite=overwrite)
    except FileWriteError as exc:
        raise ExportError(str(exc)) from exc
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from exc


def check_writable(path: str | os.PathLike[str]) -> None:
    """ExportError now if `path`'s folder cannot take a file (before any work is spent on it)."""
    target = Path(path)
    try:
        if target.is_dir():
            raise ExportError(f"{target} is a folder")
        discard_partial_file(new_partial_file(target, target.suffix))
    except FileWriteError as exc:
        raise ExportError(str(exc)) from exc
    except OSError as exc:  # the system cannot look at the path at all
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from exc


def check_target(path: Path, overwrite: bool) -> None:
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists (use --force to replace it)")
    if path.is_dir():
        raise ExportError(f"{path} is a folder")
