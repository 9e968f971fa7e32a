"""How a backend times its kernels so that one number per kernel can be trusted: the policy,
apart from the device that runs the batches (gpu/backends/launch_timing.py runs them with CUDA
events).

A *batch* runs the run's kernel sequence back to back `sequences` times and returns, per kernel,
the milliseconds summed over the batch. The policy (`time_batches`):
1. one first batch of a single sequence: it loads whatever loads lazily on a first launch
   (a CUDA module can take milliseconds) and sizes the batches to at least MIN_BATCH_MS;
2. warm-up batches until two consecutive ones agree within WARMUP_AGREE per sequence (clocks
   ramp up from idle over milliseconds), at least `warmup` of them, at most WARMUP_MAX_BATCHES;
3. `repeats` timed batches; each kernel's sample is its batch mean per sequence;
4. when any kernel's slowest sample exceeds SPREAD_LIMIT × its median (other work on the device
   meanwhile), all samples are taken again, at most MAX_REMEASURE times; the count is kept.
Each kernel keeps its median, min, max and sample count (`KernelTime`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..results import KernelTime

#: Each timed sample runs the kernel sequence back to back for at least this long.
MIN_BATCH_MS = 1.0
#: At most this many sequences in one batch (very short kernels).
MAX_SEQUENCES_PER_BATCH = 2000
#: Two consecutive warm-up batches agree when their times differ by at most this share.
WARMUP_AGREE = 0.05
#: Warm-up gives up waiting for agreement after this many batches.
WARMUP_MAX_BATCHES = 12
#: A kernel whose slowest sample exceeds this multiple of its median is timed again.
SPREAD_LIMIT = 1.5
MAX_REMEASURE = 3

#: run_batch(sequences, first) -> per-kernel milliseconds summed over the batch; `first` is
#: True for the batch that loads modules (the CUDA backend runs it without its launch gate).
RunBatch = Callable[[int, bool], Sequence[float]]


def batch_size(per_sequence_ms: float) -> int:
    """Sequences per batch so that a batch lasts at least MIN_BATCH_MS."""
    wanted = math.ceil(MIN_BATCH_MS / max(per_sequence_ms, 1e-4))
    return max(1, min(MAX_SEQUENCES_PER_BATCH, wanted))


def spread_too_wide(samples: Sequence[Sequence[float]]) -> bool:
    """Whether any kernel's slowest sample exceeds SPREAD_LIMIT × its median."""
    for per_kernel in samples:
        ordered = sorted(per_kernel)
        median = ordered[len(ordered) // 2]
        if median > 0 and ordered[-1] > SPREAD_LIMIT * median:
            return True
    return False


def time_batches(
    run_batch: RunBatch, names: Sequence[str], warmup: int, repeats: int
) -> tuple[tuple[KernelTime, ...], int]:
    """(per-kernel times, how many times the samples were taken again), by the policy above."""
    first = sum(run_batch(1, True))
    sequences = batch_size(first)
    previous = first if sequences == 1 else None  # a one-sequence batch is comparable
    for done in range(1, WARMUP_MAX_BATCHES + 1):
        per_sequence = sum(run_batch(sequences, False)) / sequences
        agree = previous is not None and abs(per_sequence - previous) <= WARMUP_AGREE * previous
        previous = per_sequence
        sequences = batch_size(per_sequence)
        if agree and done >= warmup:
            break
    remeasured = 0
    while True:
        samples: list[list[float]] = [[] for _ in names]
        for _ in range(max(1, repeats)):
            for k, total in enumerate(run_batch(sequences, False)):
                samples[k].append(total / sequences)
        if remeasured >= MAX_REMEASURE or not spread_too_wide(samples):
            break
        remeasured += 1
    times = tuple(KernelTime.from_samples(n, s) for n, s in zip(names, samples, strict=True))
    return times, remeasured
