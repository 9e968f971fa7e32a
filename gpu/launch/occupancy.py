"""How many thread blocks of a launch one SM holds at once: the per-SM limits of a compute
capability and the CUDA occupancy rules (CUDA C++ Programming Guide, "Technical Specifications
per Compute Capability" and the occupancy calculator).

Each GPU of the table carries its limits (`gpu.model.gpus.GpuSpec.sm_limits`); a launcher that
plans its launch by occupancy before a device is known (the split-KV decode kernel) uses
Hopper's, the GPU it is tuned on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits of one compute capability ("9.0")."""

    compute_capability: str
    max_threads: int
    max_blocks: int
    registers: int = 65536
    reserved_smem: int = 1024  # per block, compute capability 8.0 and later
    register_unit: int = 256  # registers are allocated per warp in units of this many


#: Compute capability 9.0 (H100, H200) and 8.0 (A100): 2,048 threads and 32 blocks per SM.
HOPPER = SmLimits("9.0", 2048, 32)
AMPERE_A100 = SmLimits("8.0", 2048, 32)
#: 8.9 (Ada: RTX 4090) and 8.6 (RTX 3060): 1,536 threads, 24 and 16 blocks per SM.
ADA = SmLimits("8.9", 1536, 24)
AMPERE_GA10X = SmLimits("8.6", 1536, 16)
#: 7.5 (Turing: T4): 1,024 threads, 16 blocks; no shared memory reserved per block.
TURING = SmLimits("7.5", 1024, 16, reserved_smem=0)


def blocks_per_sm(
    smem_bytes: int, threads: int, registers: int, limits: SmLimits, smem_per_sm: int
) -> dict[str, int]:
    """Blocks each SM resource allows: "shared memory", "registers", "threads", "blocks" (the
    fewest is the occupancy). Registers per thread round up to whole per-warp allocations; a
    block using no dynamic shared memory is limited by the rest."""
    warps = -(-threads // 32)
    unit = limits.register_unit
    per_warp = -(-registers * 32 // unit) * unit
    by_regs = (limits.registers // per_warp) // warps if per_warp else limits.max_blocks
    if smem_bytes:
        by_smem = smem_per_sm // (smem_bytes + limits.reserved_smem)
    else:
        by_smem = limits.max_blocks
    return {
        "shared memory": by_smem,
        "registers": by_regs,
        "threads": limits.max_threads // threads,
        "blocks": limits.max_blocks,
    }
