"""Find the lines of a `.cu` kernel that each schedule step corresponds to (Qt-free).

The readable kernels mark their phases with `// STEP <name>` comments whose names equal
`gpu.model.schedule.STEP_NAMES`. A tagged block starts at the tag line and runs until the next tag
or the first blank line, whichever comes first. A name may be tagged more than once (all blocks are
highlighted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import gpu
from gpu.algorithms import ALGORITHMS, NAIVE, single_kernel_fused
from gpu.config import FORWARD

KERNEL_DIR = Path(gpu.__file__).resolve().parent / "kernels"

#: Which source file the panel shows for each algorithm's lane, the registry's (the fused
#: kernels tag the same steps; naive's GEMMs are cuBLAS, so its lane shows its softmax kernel).
SOURCE_FILES: dict[str, str] = {
    a: ALGORITHMS[a].source for a in (*single_kernel_fused(FORWARD), NAIVE)
}

#: The backward lane's sources: the fused backward's main kernel in its two builds (the
#: mma.sync one, the file to read first, and the Hopper wgmma one), which tag the same steps.
BACKWARD_SOURCE_FILES: dict[str, str] = {
    "flash_bwd": "flash_bwd.cu",
    "flash_bwd_wgmma": "flash_bwd_wgmma.cu",
}
BACKWARD_SOURCE_LABELS: dict[str, str] = {
    "flash_bwd": "mma.sync (any GPU): flash_bwd.cu",
    "flash_bwd_wgmma": "wgmma (H100/H200): flash_bwd_wgmma.cu",
}
#: The `// STEP` tags of each phase of the backward lane (app/state/animation/backward_order.py).
BACKWARD_PHASE_STEPS: dict[str, tuple[str, ...]] = {
    "load_KV": ("load_KV_j",),
    "load_Q_dO": ("load_Q_dO_i",),
    "recompute_P": ("recompute_S", "recompute_P"),
    "dV": ("accumulate_dV",),
    "dP_dS": ("compute_dP", "compute_dS"),
    "dK": ("accumulate_dK",),
    "dQ_atomic": ("accumulate_dQ",),
    "store_dK_dV": ("store_dK_dV",),
}

#: `// STEP name`, also `// STEP a / b` and `// STEP a / STEP b`; not when quoted in backticks.
_TAG = re.compile(r"(?<!`)//\s*STEP\s+(\w+)((?:\s*/\s*(?:STEP\s+)?\w+)*)")
_MORE = re.compile(r"/\s*(?:STEP\s+)?(\w+)")


def _tag_names(line: str) -> list[str]:
    m = _TAG.search(line)
    if not m:
        return []
    return [m.group(1), *_MORE.findall(m.group(2) or "")]


@dataclass(frozen=True)
class KernelSource:
    """A loaded kernel file and the (first, last) line numbers (0-based) of each step's blocks."""

    path: Path
    text: str
    blocks: dict[str, tuple[tuple[int, int], ...]]

    def lines_for(self, step: str | tuple[str, ...]) -> tuple[tuple[int, int], ...]:
        """The blocks of one step, or of several (in file order)."""
        if isinstance(step, str):
            return self.blocks.get(step, ())
        return tuple(sorted(b for name in step for b in self.blocks.get(name, ())))


def parse_step_tags(text: str) -> dict[str, tuple[tuple[int, int], ...]]:
    lines = text.splitlines()
    tags = [(i, names) for i, line in enumerate(lines) if (names := _tag_names(line))]
    out: dict[str, list[tuple[int, int]]] = {}
    for k, (start, names) in enumerate(tags):
        stop = tags[k + 1][0] if k + 1 < len(tags) else len(lines)
        last = start
        for i in range(start + 1, stop):
            if not lines[i].strip():
                break
            last = i
        for name in names:
            out.setdefault(name, []).append((start, last))
    return {name: tuple(v) for name, v in out.items()}


def load_kernel_source(path: Path) -> KernelSource | None:
    """Read and parse one kernel file; None if it does not exist (yet) or cannot be read."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return KernelSource(path, text, parse_step_tags(text))
