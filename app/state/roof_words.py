"""How the app says which roof binds, in the words of the device: a GPU's units (tensor cores,
fp32 CUDA cores, the exponential unit) or a CPU's (fp32 SIMD units, memory bandwidth). One
place for the explain pane, the lesson, the status bar and the roofline's hover text."""

from __future__ import annotations

from collections.abc import Mapping

from gpu.cli.explain_text import XU_OCCUPANCY_NOTE

#: How the pane says which roof binds.
ROOF_BINDS = {
    "hbm": "HBM bandwidth binds",
    "dram": "memory bandwidth binds",
    "l2": "L2 bandwidth binds",
    "tensor": "the tensor cores bind",
    "mma_sync": "the tensor cores bind (at mma.sync's rate)",
    "fp32": "the fp32 CUDA cores bind",
    "xu": "the exponential unit binds",
}
#: How the pane names a roof in a tie or a distance.
ROOF_NAMES = {
    "hbm": "HBM",
    "dram": "memory",
    "l2": "L2",
    "tensor": "tensor cores",
    "mma_sync": "tensor cores (mma.sync)",
    "fp32": "fp32",
    "xu": "exponential unit",
}

TIE_NAMES = {
    "hbm": "HBM bandwidth",
    "dram": "memory bandwidth",
    "l2": "L2 bandwidth",
    "tensor": "the tensor cores",
    "mma_sync": "the tensor cores (mma.sync)",
    "fp32": "the fp32 CUDA cores",
    "xu": "the exponential unit",
}


#: A CPU's roofs in its own words (its fp32 roof is SIMD lanes, not CUDA cores).
CPU_BINDS = {"fp32": "the fp32 SIMD units bind", "dram": "memory bandwidth binds"}
CPU_TIE_NAMES = {"fp32": "the fp32 SIMD units", "dram": "memory bandwidth"}


def binds_text(ties: tuple[str, ...], cpu: bool = False) -> str:
    """'HBM bandwidth binds', or 'a tie: the tensor cores and the exponential unit (within
    5 %), neither binds alone'; `cpu`: a CPU's roofs, in CPU words."""
    binds = {**ROOF_BINDS, **CPU_BINDS} if cpu else ROOF_BINDS
    tie_names = {**TIE_NAMES, **CPU_TIE_NAMES} if cpu else TIE_NAMES
    if len(ties) == 1:
        return binds.get(ties[0], ties[0])
    names = " and ".join(tie_names.get(r, r) for r in ties)
    return f"a tie of {names} (within 5 %): no single unit binds"


def shares_text(shares: Mapping[str, float], xu_per_exponential: float | None = None) -> str:
    """'exponential unit 61%, tensor cores 60%', ...: how far the measured kernel is from every
    roof. Where the counters saw the XU pipe run more than the kernel's exponentials
    (`xu_per_exponential` over XU_OCCUPANCY_NOTE), its share is named as the pipe's
    occupancy."""
    ranked = sorted(shares.items(), key=lambda kv: -kv[1])
    names = dict(ROOF_NAMES)
    if xu_per_exponential is not None and xu_per_exponential > XU_OCCUPANCY_NOTE:
        names["xu"] = (
            f"XU pipe occupancy ({xu_per_exponential:.1f} XU instructions per exponential, "
            "not exponentials alone)"
        )
    return ", ".join(f"{names.get(r, r)} {s:.0%}" for r, s in ranked)
