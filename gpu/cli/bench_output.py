"""What `main.py bench` prints while it measures: the table's rows, with fixed columns, and a
progress bar with an estimate on stderr when stderr is a terminal."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from typing import Any

from gpu.backends.backend import RunOptions
from gpu.units import fmt_bytes


class BenchTable:
    """The rows `bench` prints as it goes: fixed columns (the per-kernel times last, since
    their width varies), throughput in one unit per table (GFLOP/s on the CPU, where TFLOP/s
    would read 0.00)."""

    def __init__(self, algos: Sequence[str], flops_unit: str) -> None:
        self.algo_width = max(9, *(len(a) for a in algos))
        self.unit = flops_unit
        self.scale = 1e3 if flops_unit == "GFLOP/s" else 1.0  # RunResult.tflops is TFLOP/s

    def header(self) -> str:
        return (
            f"{'N':>7} {'algorithm':<{self.algo_width}} {'total ms':>10} {'min–max ms':>17} "
            f"{self.unit:>9} {'peak':>10} {'model peak':>10} {'max err':>9}  kernels (ms)"
        )

    def row(self, r: Any) -> str:
        n, algo = r.config.seq_len, r.algorithm
        if r.oom:
            return f"{n:>7} {algo:<{self.algo_width}} {'OOM':>10} {r.message}"
        kernels = " ".join(f"{k.name}={k.ms:.3f}" for k in r.kernel_times)
        rate = "" if r.tflops is None else f"{r.tflops * self.scale:.2f}"
        err = "" if r.max_abs_error is None else f"{r.max_abs_error:.2e}"
        peak = "" if r.peak_bytes is None else fmt_bytes(r.peak_bytes)
        total = "" if r.total_ms is None else f"{r.total_ms:.3f}"
        return (
            f"{n:>7} {algo:<{self.algo_width}} {total:>10} {spread_text(r):>17} {rate:>9} "
            f"{peak:>10} "
            f"{fmt_bytes(r.model_peak_bytes):>10} {err:>9}  {kernels}"
            + ("" if r.ring is None else "  " + r.ring.summary())
        )

    def note(self, n: int, algo: str, word: str, text: str) -> str:
        return f"{n:>7} {algo:<{self.algo_width}} {word:>10} {text}"


def spread_text(r: Any) -> str:
    """'95.1–110.4': the total of each kernel's fastest and of its slowest timed sample (the
    spread the median sits in); '' where the result kept no spread."""
    lo = [k.min_ms for k in r.kernel_times]
    hi = [k.max_ms for k in r.kernel_times]
    if not lo or None in lo or None in hi:
        return ""
    return f"{sum(lo):.3f}–{sum(hi):.3f}"


class Progress:
    """A progress bar with an estimate on stderr, only when stderr is a terminal (tqdm). Work
    is counted in FLOPs, not runs, so the estimate holds when N doubles from run to run."""

    def __init__(self, work: list[int]) -> None:
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            size = shutil.get_terminal_size((80, 24))  # a terminal of unknown size: 80×24
            self.bar = tqdm(
                total=sum(work),
                file=sys.stderr,
                leave=False,
                ncols=min(size.columns, 120),
                nrows=size.lines,
                bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}",
            )
        self.done = 0
        self.runs = len(work)

    def start(self, what: str, count: int = 1) -> None:
        """Runs `done + 1` to `done + count` (interleaved runs go together) begin."""
        if self.bar is not None:
            first, last = self.done + 1, self.done + count
            runs = f"run {first}" if count == 1 else f"runs {first}–{last}"
            self.bar.set_description_str(f"{runs}/{self.runs}: {what}")

    def advance(self, amount: int) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(amount)

    def print(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)
        else:
            print(line, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def traffic_column(r, options: RunOptions) -> str:
    if not options.profile or r.measured_dram_bytes is None:
        return ""
    read = sum(t.dram_read_bytes for t in r.traffic)
    written = sum(t.dram_write_bytes for t in r.traffic)
    return f"  DRAM read {fmt_bytes(read)} written {fmt_bytes(written)} (measured)"
