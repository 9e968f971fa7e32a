"""Launch the split-KV decode kernel (gpu/kernels/decode_split.cu) on CuPy arrays.

The split plan is a pure function of the config and the GPU (its SMs and the blocks one SM holds
at once), so the cost model (gpu/model/decode_cost.py) and the CPU backend's split-KV
(gpu/backends/cpu_decode.py) cut the cache exactly as the kernel does. The kernel's shape:

- a block takes one (batch, KV head) and its whole group of G·q query rows: `rows_per_block`
  rows (a power of two up to 8); a group of more than 8 rows runs as several row chunks over the
  same keys;
- the cache of N keys is cut into `splits` ranges of `keys_per_split` (a multiple of
  `KEY_GRANULE`), chosen by wave efficiency: the fewest splits whose blocks fill the GPU's
  resident slots (SMs × blocks per SM) to `WAVE_TARGET`, or the best filling there is when none
  reaches it (a short cache cannot be cut finer than `KEY_GRANULE` keys a block).

Blocks per SM come from the kernel's registers (the device's count where there is a device;
else `DESIGN_REGISTERS`, what ptxas of CUDA 13.0 gave for sm_90, which a GPU test compares with
the compiled kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import AttentionConfig, ceil_div
from . import occupancy
from .occupancy import HOPPER

SOURCE = "decode_split.cu"
#: Threads per block; must equal DECODE_THREADS in the .cu file.
THREADS = 128
#: Most query rows one block holds in registers (the kernel's largest ROWS).
MAX_ROWS_PER_BLOCK = 8
#: Most splits of one unit; must equal DECODE_MAX_SPLITS in the .cu file.
MAX_SPLITS = 256
#: Keys per split are a multiple of this (a split's last step may be partly masked).
KEY_GRANULE = 32
#: The fewest splits whose blocks fill at least this share of the resident slots win.
WAVE_TARGET = 0.95
SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_DTYPES = ("fp16", "bf16")
#: Registers per thread of each default instantiation (PREFETCH on), by (head dim, rows per
#: block): ptxas of CUDA 13.0 for sm_90 (`nvcc -Xptxas -v`); the GPU test
#: tests/test_decode_gpu.py compares the blocks per SM they allow with the compiled kernel's.
DESIGN_REGISTERS: dict[tuple[int, int], int] = {
    (64, 1): 72, (64, 2): 96, (64, 4): 167, (64, 8): 247,
    (128, 1): 72, (128, 2): 96, (128, 4): 167, (128, 8): 247,
    (256, 1): 72, (256, 2): 96, (256, 4): 167, (256, 8): 247,
}  # fmt: skip


def group_rows(config: AttentionConfig) -> int:
    """Query rows sharing one KV head: G query heads × q new tokens."""
    return config.group_size * config.new_tokens


def rows_per_block(config: AttentionConfig) -> int:
    """The kernel's ROWS: the group's rows rounded up to a power of two, at most 8."""
    rows = group_rows(config)
    return MAX_ROWS_PER_BLOCK if rows >= MAX_ROWS_PER_BLOCK else 1 << (rows - 1).bit_length()


def keys_per_thread(config: AttentionConfig) -> int:
    """The kernel's KPT: keys each key group loads per step (fewer at 8 rows: registers)."""
    return 2 if rows_per_block(config) == MAX_ROWS_PER_BLOCK else 4


def row_chunks(config: AttentionConfig) -> int:
    return ceil_div(group_rows(config), rows_per_block(config))


def units(config: AttentionConfig) -> int:
    """(batch, KV head, row chunk) triples: the blocks of one split."""
    return config.kv_bh * row_chunks(config)


def blocks_per_sm(registers: int) -> int:
    """Blocks of THREADS threads a Hopper SM holds at once with `registers` per thread (its
    64 Ki registers, allocated per warp in units of 256, 2,048 threads, 32 blocks; the kernel's
    shared memory is too small to bind)."""
    return max(1, min(occupancy.blocks_per_sm(0, THREADS, registers, HOPPER, 0).values()))


def design_blocks_per_sm(config: AttentionConfig) -> int:
    d = config.head_dim if config.head_dim in SUPPORTED_HEAD_DIMS else 128
    return blocks_per_sm(DESIGN_REGISTERS[(d, rows_per_block(config))])


@dataclass(frozen=True)
class SplitPlan:
    """How one decode launch cuts the work: `splits` ranges of `keys_per_split` keys for each
    of `units` (batch, KV head, row chunk) triples; `slots` blocks fit on the GPU at once."""

    units: int
    splits: int
    keys_per_split: int
    rows_per_block: int
    row_chunks: int
    slots: int

    @property
    def blocks(self) -> int:
        return self.units * self.splits

    @property
    def waves(self) -> int:
        return ceil_div(self.blocks, self.slots)

    @property
    def wave_efficiency(self) -> float:
        """Share of the slots the blocks fill, over all waves: blocks / (waves · slots)."""
        return self.blocks / (self.waves * self.slots)


def split_plan(config: AttentionConfig, sms: int, per_sm: int | None = None) -> SplitPlan:
    """The split of `config`'s cache on a GPU of `sms` SMs holding `per_sm` blocks each
    (default: the design's, `design_blocks_per_sm`)."""
    per_sm = per_sm or design_blocks_per_sm(config)
    slots = max(1, sms * per_sm)
    n, count = config.seq_len, units(config)
    best: tuple[float, int, int] | None = None  # (efficiency, splits, keys per split)
    most = min(MAX_SPLITS, ceil_div(n, KEY_GRANULE))
    seen = set()
    for wanted in range(1, most + 1):
        keys = ceil_div(ceil_div(n, wanted), KEY_GRANULE) * KEY_GRANULE
        splits = ceil_div(n, keys)
        if splits in seen:
            continue
        seen.add(splits)
        blocks = count * splits
        efficiency = blocks / (ceil_div(blocks, slots) * slots)
        if efficiency >= WAVE_TARGET:
            best = (efficiency, splits, keys)
            break
        if best is None or efficiency > best[0] + 1e-12:
            best = (efficiency, splits, keys)
    assert best is not None
    _, splits, keys = best
    return SplitPlan(count, splits, keys, rows_per_block(config), row_chunks(config), slots)


def partial_bytes(config: AttentionConfig, plan: SplitPlan) -> int:
    """The fp32 partials (O_s of d values, m_s and l_s per row and split); none with one split."""
    if plan.splits == 1:
        return 0
    rows = config.bh * config.new_tokens
    return rows * plan.splits * (config.head_dim + 2) * 4


def counter_bytes(plan: SplitPlan) -> int:
    """One 32-bit arrival counter per unit (the last block of a unit merges)."""
    return plan.units * 4 if plan.splits > 1 else 0


def supports(config: AttentionConfig) -> str | None:
    """None when the kernel can run `config`, else why not (no device needed)."""
    if not config.is_decode:
        return "the split-KV kernel runs the decode pass only"
    if config.dtype not in SUPPORTED_DTYPES:
        return f"the split-KV kernel reads an fp16 or bf16 cache, not {config.dtype}"
    if config.head_dim not in SUPPORTED_HEAD_DIMS:
        return (
            f"the split-KV kernel has head dims {', '.join(map(str, SUPPORTED_HEAD_DIMS))}, "
            f"not {config.head_dim}"
        )
    return None


#: The kernel's PREFETCH: the next step's loads leave before this step's arithmetic.
PREFETCH = True


def kernel_name(
    config: AttentionConfig, kpt: int | None = None, prefetch: bool | None = None
) -> str:
    """The instantiation `config` needs (`kpt`, `prefetch`: another variant, for benchmarks)."""
    bf16 = "true" if config.dtype == "bf16" else "false"
    kpt = kpt or keys_per_thread(config)
    pf = "true" if (PREFETCH if prefetch is None else prefetch) else "false"
    return f"decode_split<{bf16}, {config.head_dim}, {rows_per_block(config)}, {kpt}, {pf}>"


def fixed_plan(config: AttentionConfig, splits: int, slots: int) -> SplitPlan:
    """A plan with (about) `splits` splits instead of the chosen count, for benchmarks that
    compare split counts: whole key granules per split, at most MAX_SPLITS."""
    splits = max(1, min(MAX_SPLITS, splits, ceil_div(config.seq_len, KEY_GRANULE)))
    keys = ceil_div(ceil_div(config.seq_len, splits), KEY_GRANULE) * KEY_GRANULE
    splits = ceil_div(config.seq_len, keys)
    return SplitPlan(units(config), splits, keys, rows_per_block(config), row_chunks(config), slots)


@dataclass(frozen=True)
class PreparedDecode:
    """The compiled kernel, its plan and grid; `workspace()` allocates the partials and the
    zeroed counters a launch needs, `__call__` queues one launch."""

    kernel: object
    plan: SplitPlan
    config: AttentionConfig

    @property
    def grid(self) -> tuple[int, int]:
        return (self.plan.units, self.plan.splits)

    def workspace(self) -> dict:
        import cupy

        plan, c = self.plan, self.config
        rows = c.bh * c.new_tokens
        s = plan.splits if plan.splits > 1 else 0
        return {
            "part_o": cupy.empty((rows, s, c.head_dim), dtype=cupy.float32),
            "part_ml": cupy.empty((rows, s, 2), dtype=cupy.float32),
            "counters": cupy.zeros(plan.units if s else 0, dtype=cupy.uint32),
        }

    def __call__(self, q, k, v, o, part_o, part_ml, counters) -> None:
        c, plan = self.config, self.plan
        args = (
            q, k, v, o, part_o, part_ml, counters,
            np.int32(c.seq_len), np.int32(group_rows(c)), np.int32(plan.row_chunks),
            np.int32(plan.keys_per_split), np.int32(plan.splits),
            np.float32(c.scale * np.log2(np.e)),
        )  # fmt: skip
        self.kernel(self.grid, (THREADS,), args)


def prepare(
    config: AttentionConfig,
    extra_options: tuple[str, ...] = (),
    *,
    kpt: int | None = None,
    prefetch: bool | None = None,
    splits: int | None = None,
) -> PreparedDecode:
    """Compile the instantiation `config` needs and plan its split on this device (its SMs and
    the compiled kernel's registers). `kpt`, `prefetch` and `splits` pick another variant
    (benchmarks). Raises ValueError when the kernel cannot run `config`."""
    from .cuda_kernels import device_attribute, get_kernel

    reason = supports(config)
    if reason is not None:
        raise ValueError(reason)
    kernel = get_kernel(SOURCE, kernel_name(config, kpt, prefetch), options=extra_options)
    per_sm = blocks_per_sm(compiled_registers(kernel))
    sms = device_attribute("MultiProcessorCount")
    if splits is None:
        plan = split_plan(config, sms, per_sm)
    else:
        plan = fixed_plan(config, splits, sms * per_sm)
    return PreparedDecode(kernel, plan, config)


def compiled_registers(kernel) -> int:
    """Registers per thread of a compiled instantiation (cudaFuncAttributes.numRegs)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return int(kernel.attributes["num_regs"])
