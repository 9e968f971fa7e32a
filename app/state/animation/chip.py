"""What one thread block keeps on chip, as each kernel really lays it out, and how many such
blocks an SM holds at once (Qt-free).

The schedule (gpu/model/schedule.py) models a block's on-chip bytes in the input dtype; the kernels
lay them out their own way, and the animation's SRAM box shows the kernels' layouts:

- the readable kernel (flash_readable.cu) converts every tile to fp32 and pads rows (+4 floats
  for Q, K, V; +1 for S) against bank conflicts, with the head dim rounded up to 32:
  `gpu.launch.flash_readable.smem_bytes`, 86,016 B at 64×64 tiles and d = 64;
- the tensor-core kernels keep Q (16-bit) and a ring of K and V stages in shared memory, and S,
  P and O in registers: 2 stages (flash_mma.cu, flash_wgmma.cu), or the warp-specialized
  kernel's TMA ring guarded by mbarriers (flash_ws.cu);
- naive's cuBLAS GEMMs choose their own tiling, so their lanes keep the model's tiles.

Blocks per SM follow the CUDA occupancy rules: the fewest that shared memory (each block also
reserves 1 KiB on compute capability 8.0 and later), the register file (registers per thread
rounded up to whole 256-register warp allocations), the thread limit and the block limit allow.
Registers are the compiler's own figures where known, each with where it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu.algorithms import (
    ALGORITHMS,
    FP32_CORES,
    FP32_TILES,
    MMA_SYNC,
    NAIVE,
    TILED,
    TILED_WS,
    TWO_STAGE_RING,
    WARP_SPECIALIZED,
    WGMMA,
    AlgorithmInfo,
    tile_shape,
)
from gpu.config import STAT_BYTES, AttentionConfig
from gpu.launch import flash_readable, flash_ws
from gpu.launch.occupancy import HOPPER, blocks_per_sm
from gpu.model.costmodel import GpuSpec, softmax_row_smem_bytes
from gpu.model.schedule import KernelSchedule

from .warp_roles import ws_launch

SMEM, REGISTERS = "smem", "registers"
FLOAT = 4  # bytes of the fp32 values the kernels keep on chip
HALF = 2  # the tensor-core kernels' 16-bit elements (fp16 or bf16; they take no other dtype)
#: How a layout's note names the instruction of a kernel's matmuls (`AlgorithmInfo.matmul`).
MATMUL_NAMES = {MMA_SYNC: "mma.sync", WGMMA: "wgmma", FP32_CORES: "fp32"}


@dataclass(frozen=True)
class SlotSpec:
    """One on-chip buffer a block allocates: its name, bytes, the HBM matrix it mirrors (for the
    colour) and the step that fills it. A ring stage (`stages` > 1) holds tile j when
    j % stages == stage; `place` says whether it lives in shared memory or in registers."""

    name: str
    bytes: int
    matrix: str
    filled_by: str
    stage: int = -1
    stages: int = 1
    place: str = SMEM

    def holds(self, tile: int) -> bool:
        """Whether this slot is where tile `tile` of its matrix lands."""
        return self.stages <= 1 or tile % self.stages == self.stage


#: The readable kernel's registers per thread by padded head dim: ptxas (nvcc 13.0.88,
#: -arch=sm_90, the same for fp16, bf16 and fp32 inputs; no spills). Its __launch_bounds__
#: (256 threads, 2 blocks) caps it at 128 on any GPU.
READABLE_REGISTERS = {32: 118, 64: 117, 96: 116, 128: 115, 160: 116, 192: 116, 224: 117, 256: 117}
READABLE_REGISTER_SOURCE = "ptxas, sm_90 (nvcc 13.0.88)"
READABLE_REGISTER_CAP = 128
#: Where the tensor-core kernels' register counts (`AlgorithmInfo.registers`) come from.
KERNELS_DOC = "docs/KERNELS.md (ptxas; kernel attributes on the H200)"


@dataclass(frozen=True)
class Occupancy:
    """How many blocks of a kernel one SM runs at once, and what limits it."""

    blocks: int
    limits: dict[str, int]  # "shared memory", "registers", "threads", "blocks" -> blocks allowed
    registers: int  # per thread, at launch
    register_source: str
    capability: str
    reserved_smem: int = 0  # shared memory the driver reserves per block

    @property
    def binding(self) -> tuple[str, ...]:
        """The limits that allow exactly `blocks` (what a bigger tile or more registers hits)."""
        return tuple(k for k, v in self.limits.items() if v == self.blocks)


def explain_layout(layout: ChipLayout) -> str:
    """Several lines on one block's chip use and the blocks per SM, with where the register
    count comes from (the canvas's tooltip over the SRAM box)."""
    lines = [f"One block: {layout.smem_bytes:,} B of shared memory ({layout.note})"]
    regs = layout.register_slots
    if regs:
        parts = ", ".join(f"{s.name} {s.bytes:,} B" for s in regs)
        lines.append(f"In registers (summed over the block's threads): {parts}")
    occ = layout.occupancy
    if occ is None:
        lines.append("Blocks per SM: not modeled (a library kernel picks its own launch)")
        return "\n".join(lines)
    unit = "block" if occ.blocks == 1 else "blocks"
    lines.append(
        f"{occ.blocks} {unit} per SM (compute capability {occ.capability}): shared memory "
        f"allows {occ.limits['shared memory']} (each block also reserves "
        f"{occ.reserved_smem:,} B), registers {occ.limits['registers']} "
        f"({layout.threads} threads × {occ.registers} registers; {occ.register_source}), "
        f"threads {occ.limits['threads']}, the block limit {occ.limits['blocks']}"
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class ChipLayout:
    """One block of one kernel on chip: its shared memory and register buffers, and (for our
    own kernels) how many blocks an SM holds."""

    slots: tuple[SlotSpec, ...]
    smem_bytes: int  # dynamic shared memory of one block (the slots in SMEM add up to it)
    threads: int
    occupancy: Occupancy | None  # None for library kernels (cuBLAS picks its own launch)
    note: str  # what the layout is, in a few words

    @property
    def smem_slots(self) -> tuple[SlotSpec, ...]:
        return tuple(s for s in self.slots if s.place == SMEM)

    @property
    def register_slots(self) -> tuple[SlotSpec, ...]:
        return tuple(s for s in self.slots if s.place == REGISTERS)


def chip_layout(
    config: AttentionConfig, algorithm: str, kernel: KernelSchedule, gpu: GpuSpec
) -> ChipLayout:
    """The layout of one block of `kernel` (see the module docstring)."""
    info = ALGORITHMS.get(algorithm)
    if kernel.name == "flash_fwd" and info is not None:
        if info.chip == FP32_TILES:
            return _readable(config, gpu)
        if info.chip == TWO_STAGE_RING:
            return _two_stage(config, info, gpu)
        if info.chip == WARP_SPECIALIZED:
            return _warp_specialized(config, gpu)
    return _modeled(config, kernel)


def _occupancy(
    gpu: GpuSpec, smem: int, threads: int, registers: int, source: str
) -> Occupancy | None:
    sm = gpu.sm_limits
    if sm is None:
        return None
    limits = blocks_per_sm(smem, threads, registers, sm, gpu.smem_per_sm_bytes)
    return Occupancy(
        min(limits.values()), limits, registers, source, sm.compute_capability, sm.reserved_smem
    )


def _readable(config: AttentionConfig, gpu: GpuSpec) -> ChipLayout:
    """flash_readable.cu's carve-up: every tile in fp32, rows padded against bank conflicts."""
    bm, bn = tile_shape(config, TILED)
    d = flash_readable.padded_head_dim(config.head_dim)
    ld = d + 4
    slots = (
        SlotSpec("Q_i", bm * ld * FLOAT, "Q", "load_Q_i"),
        SlotSpec("K_j", bn * ld * FLOAT, "K", "load_K_j"),
        SlotSpec("V_j", bn * ld * FLOAT, "V", "load_V_j"),
        SlotSpec("S_ij", bm * (bn + 1) * FLOAT, "S", "compute_S_ij"),
        SlotSpec("O_i", bm * d * FLOAT, "O", "load_Q_i"),
        SlotSpec("m,l,α", 3 * bm * FLOAT, "ml", "load_Q_i"),
    )
    smem = flash_readable.smem_bytes(config)
    if gpu.compute_capability == HOPPER.compute_capability and d in READABLE_REGISTERS:
        regs, source = READABLE_REGISTERS[d], READABLE_REGISTER_SOURCE
    else:
        regs, source = READABLE_REGISTER_CAP, "at most 128: __launch_bounds__(256, 2)"
    occ = _occupancy(gpu, smem, flash_readable.NUM_THREADS, regs, source)
    note = f"fp32 tiles, rows padded (+4, +1 floats), d rounded up to {d}"
    return ChipLayout(slots, smem, flash_readable.NUM_THREADS, occ, note)


def _registers(config: AttentionConfig, bm: int, bn: int, q: bool, two_s: bool) -> list[SlotSpec]:
    """What the tensor-core kernels keep in registers, summed over the block's threads."""
    d, eb = config.head_dim, HALF
    regs = [SlotSpec("Q_i", bm * d * eb, "Q", "load_Q_i", place=REGISTERS)] if q else []
    regs.append(SlotSpec("S_ij", bm * bn * FLOAT, "S", "compute_S_ij", place=REGISTERS))
    if two_s:
        regs.append(SlotSpec("S_i,j+1", bm * bn * FLOAT, "S", "compute_S_ij", place=REGISTERS))
    regs += [
        SlotSpec("P_ij", bm * bn * eb, "P", "online_softmax", place=REGISTERS),
        SlotSpec("O_i", bm * d * FLOAT, "O", "load_Q_i", place=REGISTERS),
        SlotSpec("m,l", 2 * bm * STAT_BYTES, "ml", "load_Q_i", place=REGISTERS),
    ]
    return regs


def _ring(config: AttentionConfig, bn: int, stages: int) -> list[SlotSpec]:
    tile = bn * config.head_dim * HALF
    out = []
    for matrix, step in (("K", "load_K_j"), ("V", "load_V_j")):
        for s in range(stages):
            out.append(SlotSpec(f"{matrix} stage {s}", tile, matrix, step, s, stages))
    return out


def _two_stage(config: AttentionConfig, info: AlgorithmInfo, gpu: GpuSpec) -> ChipLayout:
    """flash_mma.cu / flash_wgmma.cu: Q and a 2-stage K/V ring in shared memory (cp.async),
    S (two tiles: the next one is pipelined), P and O in registers."""
    bm, bn = tile_shape(config, info.id)
    d, eb = config.head_dim, HALF
    launcher: Any = info.launcher
    launch = launcher.default_launch(d)
    smem, threads, align = launch.smem_bytes, launch.threads, launch.align_bytes
    regs = info.registers.get((d, config.causal))
    what = MATMUL_NAMES[info.matmul]
    slots = [SlotSpec("Q_i", bm * d * eb, "Q", "load_Q_i"), *_ring(config, bn, 2)]
    if align:
        slots.append(SlotSpec("align", align, "", ""))
    slots += _registers(config, bm, bn, q=True, two_s=True)
    rest = smem - sum(s.bytes for s in slots if s.place == SMEM)
    if rest > 0:
        slots.append(SlotSpec("other", rest, "", ""))
    occ = None
    if regs is not None:
        occ = _occupancy(gpu, smem, threads, regs, KERNELS_DOC)
    note = f"{what}: Q and a 2-stage K/V ring in smem; S, P, O in registers"
    if regs is None or config.dtype not in launcher.SUPPORTED_DTYPES:
        note += " (the kernel runs d = 64 or 128, fp16 or bf16)"
    return ChipLayout(tuple(slots), smem, threads, occ, note)


def _warp_specialized(config: AttentionConfig, gpu: GpuSpec) -> ChipLayout:
    """flash_ws.cu: Q and an NS-stage K/V ring filled by TMA, guarded by mbarriers; each
    consumer warpgroup's S, P and O in its registers (setmaxnreg)."""
    launch = ws_launch(config)
    runs = config.head_dim in flash_ws.SUPPORTED_HEAD_DIMS
    bm, bn = tile_shape(config, TILED_WS)
    stages, threads = launch.stages, launch.threads
    slots = (
        SlotSpec("align", 1024, "", ""),
        SlotSpec("Q_i", bm * config.head_dim * HALF, "Q", "load_Q_i"),
        *(
            (SlotSpec("Q_i+1", bm * config.head_dim * HALF, "Q", "load_Q_i"),)
            if launch.persistent
            else ()
        ),
        *_ring(config, bn, stages),
        SlotSpec("mbarriers", 8 * launch.barriers, "", ""),
        *((SlotSpec("tile ids", launch.tile_slot_bytes, "", ""),) if launch.persistent else ()),
        *_registers(config, bm, bn, q=False, two_s=False),
    )
    occ = None
    if runs:
        # __launch_bounds__(threads, 1) caps every thread at 65536 / threads registers at
        # launch (168 with 384 threads, 128 with 512); setmaxnreg then moves them from the
        # producer to the consumers.
        cap = 65536 // threads // 8 * 8
        source = f"the launch's cap, __launch_bounds__({threads}, 1)"
        occ = _occupancy(gpu, launch.smem_bytes, threads, cap, source)
    note = f"TMA ring of {stages} K/V stages (mbarriers); S, P, O in consumer registers"
    if launch.persistent:
        note += "; one block per SM walks the query tiles, the next tile's Q lands meanwhile"
    if not runs or config.dtype not in flash_ws.SUPPORTED_DTYPES:
        note += " (the kernel runs d = 64, 128 or 256, fp16 or bf16)"
    return ChipLayout(slots, launch.smem_bytes, threads, occ, note)


def _modeled(config: AttentionConfig, kernel: KernelSchedule) -> ChipLayout:
    """Naive's kernels: cuBLAS GEMMs (which pick their own tiling) and our softmax, drawn with
    the model's tiles; a kernel the animation does not know gets one band."""
    d, eb = config.head_dim, config.elem_bytes
    name = kernel.name
    if name == "gemm_qk":
        t, _ = tile_shape(config, NAIVE)
        slots = [
            SlotSpec("Q_i", t * d * eb, "Q", "qk_load_Q_i"),
            SlotSpec("K_j", t * d * eb, "K", "qk_load_K_j"),
            SlotSpec("S_ij", t * t * 4, "S", "qk_load_Q_i"),
        ]
    elif name == "softmax":
        # The row as the kernel stages it: n · sizeof(T), or nothing (the two-pass kernel)
        row = softmax_row_smem_bytes(config)
        slots = [SlotSpec("row", row, "S", "softmax_read_S")] if row else []
    elif name == "gemm_pv":
        t, _ = tile_shape(config, NAIVE)
        slots = [
            SlotSpec("P_ik", t * t * eb, "P", "pv_load_P_ik"),
            SlotSpec("V_k", t * t * eb, "V", "pv_load_V_k"),
            SlotSpec("O_i", t * t * 4, "O", "pv_load_P_ik"),
        ]
    else:
        slots = [SlotSpec("block", kernel.sram_bytes, "", "")]
    rest = kernel.sram_bytes - sum(s.bytes for s in slots)
    if rest > 0:
        slots.append(SlotSpec("other", rest, "", ""))
    if name.startswith("gemm"):
        note = "cuBLAS picks its own tiles: the model's"
    elif name == "softmax":
        note = (
            "the row of S in the input dtype (softmax.cu)"
            if slots
            else "two-pass kernel: the row is read twice, not staged (softmax.cu)"
        )
    else:
        note = "model"
    return ChipLayout(tuple(slots), kernel.sram_bytes, 0, None, note)
