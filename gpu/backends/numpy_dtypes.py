"""The NumPy dtype that holds each config dtype on the CPU (bf16 through ml_dtypes): one table for
the CPU backend's forward and backward passes."""

from __future__ import annotations

import ml_dtypes
import numpy as np

NUMPY_DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}
