"""What the controls offer: the backends, the algorithms in the engine's order, the config
fields that have a widget, and the passes, each with the text and tool tip it is shown with."""

from __future__ import annotations

from gpu.algorithms import ALGORITHMS
from gpu.config import PASS_LABELS

BACKEND_CHOICES = (
    ("auto", "auto", "CUDA when CuPy sees a GPU, otherwise the NumPy CPU backend."),
    ("cuda", "cuda (CuPy)", "Real CUDA kernels through CuPy: cuBLAS + softmax, our fused kernels."),
    ("cpu", "cpu (NumPy)", "The same algorithms, exact, in NumPy on the CPU: slow, everywhere."),
    ("recorded", "recorded run", "Results measured earlier (main.py bench --out), from a file."),
)


#: Every algorithm the engine knows, in its order; a backend enables those it can run.
ALGORITHM_ORDER = tuple(ALGORITHMS)


#: Config fields that have a widget (and an inline error label); "pass" is the config's pass_.
CONFIG_FIELDS = (
    "seq_len", "heads", "head_dim", "batch", "dtype", "causal", "block_m", "block_n", "pass",
    "deterministic", "kv_heads", "new_tokens",
)  # fmt: skip


#: The Pass control's entries: (config pass, text, tooltip). A backward alone comes from a file
#: or the command line; the control offers it too, so such a config is shown as it is.
PASS_CHOICES = (
    (
        "forward",
        PASS_LABELS["forward"],
        "Inference: O = softmax(QKᵀ/√d)V. Naive writes S and P to memory; the fused kernels "
        "keep them on chip.",
    ),
    (
        "decode",
        PASS_LABELS["decode"],
        "Inference after the prefill: q new tokens per head against a KV cache of N tokens (the "
        "slider), H_q query heads over H_kv KV heads. Every step reads the whole cache, so "
        "decode is memory-bound even fused: naive writes its q×N scores to memory, the split-KV "
        "kernel spreads the cache over the SMs and merges the partials.",
    ),
    (
        "step",
        PASS_LABELS["step"],
        "Training: the forward, then the backward for dQ, dK, dV, each kernel timed. Naive keeps "
        "P (B·h·N² per layer) for its backward and materializes dP and dS; FlashAttention keeps "
        "O and its row statistics and recomputes S and P tile by tile.",
    ),
    (
        "backward",
        "backward only",
        "The backward kernels alone, after an untimed forward that saves what they need.",
    ),
)


#: The tool tip of the deterministic dQ control (beside the Pass control).
DETERMINISTIC_TIP = (
    "How the training pass sums dQ. Off: the fused backward adds each key tile's share of dQ "
    "by fp32 atomics, in whatever order the blocks finish, so two runs can differ in the last "
    "bits. On: a dQ pass (flash_bwd_dq) owns each query tile and sums the key tiles in a fixed "
    "order, rebuilding S, P and dP once more: bit-identical runs, two more products per tile "
    "and no fp32 accumulator. Naive's backward has no atomics and runs the same either way. "
    "Only a pass with a backward has a dQ: off for the inference forward."
)
