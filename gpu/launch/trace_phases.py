"""The trace build's phase codes, read from the kernels' own header (gpu/kernels/trace.cuh).

The kernels write a code per phase boundary; Python decodes the rows, checks trace files and
animates them. Both sides read one definition: the `BlockPhase` and `RolePhase` enums of
trace.cuh, whose enumerators (`name = value,  // what it marks`) this module parses at import.
A header that no longer parses is an error at import, not a trace decoded with the wrong names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

HEADER = Path(__file__).resolve().parents[1] / "kernels" / "trace.cuh"

_ENUM = re.compile(r"enum\s+class\s+(\w+)\s*:\s*int\s*\{(.*?)\};", re.DOTALL)
_ENUMERATOR = re.compile(r"^\s*(\w+)\s*=\s*(\d+)\s*,\s*//\s*(.+?)\s*$", re.MULTILINE)
_CONSTANT = re.compile(r"constexpr\s+int\s+(\w+)\s*=\s*(\d+)\s*;")


@dataclass(frozen=True)
class Phase:
    """One code a kernel writes: its name (as the schedule and the animation call it), value,
    and what the kernel marks with it."""

    name: str
    code: int
    what: str


def parse_enums(text: str) -> dict[str, tuple[Phase, ...]]:
    """Every `enum class X : int { name = value,  // what ... };` of a header, by enum name.
    Raises ValueError unless each enum's values are 0, 1, 2, ... in order."""
    enums: dict[str, tuple[Phase, ...]] = {}
    for enum, body in _ENUM.findall(text):
        phases = tuple(Phase(n, int(v), w) for n, v, w in _ENUMERATOR.findall(body))
        if [p.code for p in phases] != list(range(len(phases))) or not phases:
            raise ValueError(f"{HEADER.name}: {enum} must number its codes 0, 1, 2, ... in order")
        enums[enum] = phases
    return enums


def parse_constants(text: str) -> dict[str, int]:
    """The header's `constexpr int NAME = value;` constants."""
    return {name: int(value) for name, value in _CONSTANT.findall(text)}


_TEXT = HEADER.read_text(encoding="utf-8")
_ENUMS = parse_enums(_TEXT)
_CONSTANTS = parse_constants(_TEXT)

#: Codes of the block-level kernels (flash_readable.cu, flash_mma.cu), "end" last.
BLOCK_PHASES: tuple[Phase, ...] = _ENUMS["BlockPhase"]
#: Codes of the warp-specialized kernel's roles (flash_ws.cu).
ROLE_PHASES: tuple[Phase, ...] = _ENUMS["RolePhase"]
#: A role's phase word is role · ROLE_STRIDE + code.
ROLE_STRIDE: int = _CONSTANTS["TRACE_ROLE_STRIDE"]
#: The producer's role index; consumer warpgroup c is role 1 + c.
PRODUCER_ROLE: int = _CONSTANTS["PRODUCER_ROLE"]

if BLOCK_PHASES[-1].name != "end" or max(p.code for p in ROLE_PHASES) >= ROLE_STRIDE:
    raise ValueError(
        f"{HEADER.name}: BlockPhase must end with `end`, RolePhase stay below {ROLE_STRIDE}"
    )
