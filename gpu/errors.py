"""The errors the engine raises, in one Qt-free place, so the app and the CLI can tell them apart.

Every message is one line meant for a user: it names the file, field or limit at fault. The
types say what a caller should do:

- `FileReadError` (a ValueError): a file that cannot be opened, decoded or trusted; nothing was
  applied. `SchemaError` is the kind whose fields have the wrong type or range, with `where`,
  the path of the bad field (``results[3].kernel_times[0].ms``). `RecordingError` and
  `TraceError` are the kinds raised by the recording and trace loaders.
- `FileWriteError` (an OSError): a file that could not be written; nothing was left behind.
- `UnsupportedConfig` (a ValueError): an algorithm cannot run a config here; `field` names the
  config field to change ("head_dim", "dtype", "block_m", "seq_len" or "algorithm").
- `RunCancelled`: a run stopped because its caller's cancel hook said so (RunOptions.cancel).
- `BackendUnavailable` (a RuntimeError): a backend that cannot run on this machine.
"""

from __future__ import annotations

from typing import Any


def printable(text: str) -> str:
    """`text` with control characters escaped (a field name holding a newline stays one line)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class TilescopeError(Exception):
    """Base of the engine's own errors; the message is one line for a user."""


class FileReadError(TilescopeError, ValueError):
    """A file that cannot be read, decoded or trusted; the message names it and says why."""


class SchemaError(FileReadError):
    """A field of a results, session or trace document with the wrong type or an out-of-range
    value: "`source`: `where`: `reason`", where `source` names the file and `where` is the path
    of the field inside the document (``results[3].peak_bytes``)."""

    def __init__(self, source: str, where: str, reason: str) -> None:
        source, where, reason = printable(source), printable(where), printable(reason)
        super().__init__(f"{source}: {where}: {reason}")
        self.source = source
        self.where = where
        self.reason = reason


class RecordingError(FileReadError):
    """A results file (recorded run, `bench --out`) that cannot be read; the message says why."""


class TraceError(FileReadError):
    """A trace that cannot be recorded, read or trusted; the message says why."""


class FileWriteError(TilescopeError, OSError):
    """A file that could not be written (folder missing or read-only, disk full, a directory in
    the way); the temporary file was removed and the target left as it was."""


class UnsupportedConfig(TilescopeError, ValueError):
    """The algorithm cannot run this config on this device. `field` is the config field to
    change; "algorithm" when no field would help (the device lacks what the kernel needs)."""

    def __init__(self, message: str, field: str = "algorithm") -> None:
        super().__init__(message)
        self.field = field

    @classmethod
    def from_kernel(
        cls, reason: str, config: Any, kernel: Any, *, tiles_from_config: bool = False
    ) -> UnsupportedConfig:
        """The refusal `reason` of a kernel module's `supports(config)`, with the field read
        from the limits the module declares (SUPPORTED_DTYPES, SUPPORTED_HEAD_DIMS) rather than
        from the words of the reason. `tiles_from_config`: the kernel's tiles are the config's
        block_m/block_n, so any other refusal (shared memory) is about them."""
        if config.dtype not in getattr(kernel, "SUPPORTED_DTYPES", (config.dtype,)):
            return cls(reason, "dtype")
        if config.head_dim not in getattr(kernel, "SUPPORTED_HEAD_DIMS", (config.head_dim,)):
            return cls(reason, "head_dim")
        return cls(reason, "block_m" if tiles_from_config else "algorithm")


class RunCancelled(TilescopeError):
    """A run abandoned between tiles or kernels because its cancel hook returned True."""


class ReadStopped(TilescopeError):
    """A file's read abandoned between two items because its reader stopped it
    (gpu.files.read_stop: a window closing, a signal ending the program)."""


class BackendUnavailable(TilescopeError, RuntimeError):
    """The backend cannot run on this machine (no CUDA device, CuPy missing, ...)."""
