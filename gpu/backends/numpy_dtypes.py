"""The NumPy dtype that holds each config dtype on the CPU (bf16 through ml_dtypes): one table for
the CPU backend's forward and backward passes.

ml_dtypes is imported only when a bf16 array is made: its import registers its types in one C
call that holds the interpreter for more than a second (1.9-3.1 s on the 2-core machine under
load), during which no other thread of the program runs (a window's GUI thread stalled at every
start) and no signal is handled."""

from __future__ import annotations

from typing import Any

import numpy as np

_PLAIN = {"fp16": np.float16, "fp32": np.float32}


def numpy_dtype(name: str) -> Any:
    """The NumPy dtype of the config dtype `name` (KeyError for one the CPU cannot hold)."""
    if name == "bf16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return _PLAIN[name]
