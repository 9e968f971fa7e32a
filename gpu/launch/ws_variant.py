"""A variant of the warp-specialized kernel (gpu/kernels/flash_ws.cu): its template parameters
and the short label that names it.

Plain Python, apart from the launcher (gpu/flash_ws.py), so the tile bookkeeping
(`algorithms.ws_tile_shape`, the cost model, the schedule, the animation) reads a variant
without importing the launcher, and the launcher reads its defaults (`algorithms.WS_DEFAULTS`)
without the two importing each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..config import AttentionConfig, ceil_div

_LABEL = re.compile(
    r"^d(?P<d>\d+)-(?P<bn>\d+)x(?P<ns>\d+)-c(?P<c>\d+)-(?P<flags>po|p|o|none)-r(?P<r>\d+)$"
)


@dataclass(frozen=True)
class WsLaunch:
    """One kernel variant; the fields are flash_ws.cu's template parameters."""

    head_dim: int
    block_n: int = 128
    consumers: int = 2  # consumer warpgroups; 64 query rows each
    stages: int = 2  # K/V ring depth
    pingpong: bool = True
    overlap: bool = True
    producer_regs: int = 24

    @property
    def block_m(self) -> int:
        return 64 * self.consumers

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    @property
    def consumer_regs(self) -> int:
        """Registers a consumer thread gets after setmaxnreg (the kernel's CREG)."""
        share = (65536 // 128 - self.producer_regs) // self.consumers // 8 * 8
        return min(share, 240)

    @property
    def smem_bytes(self) -> int:
        """1024 B alignment slack + Q tile + `stages` K and V tiles + the mbarriers."""
        tiles = (self.block_m + 2 * self.stages * self.block_n) * self.head_dim * 2
        return 1024 + tiles + 8 * (1 + 4 * self.stages)

    @property
    def label(self) -> str:
        """Short name: d, key tile × stages, consumers, ping-pong/overlap flags, producer regs.
        `WsLaunch.from_label` reads it back (WS_DEFAULTS holds labels)."""
        flags = ("p" if self.pingpong else "") + ("o" if self.overlap else "")
        return (
            f"d{self.head_dim}-{self.block_n}x{self.stages}-c{self.consumers}"
            f"-{flags or 'none'}-r{self.producer_regs}"
        )

    @classmethod
    def from_label(cls, label: str) -> WsLaunch:
        """The variant a label names (the inverse of `label`); ValueError for a malformed one."""
        match = _LABEL.match(label)
        if match is None:
            raise ValueError(f"not a warp-specialized variant label: {label!r}")
        flags = "" if match["flags"] == "none" else match["flags"]
        return cls(
            head_dim=int(match["d"]),
            block_n=int(match["bn"]),
            consumers=int(match["c"]),
            stages=int(match["ns"]),
            pingpong="p" in flags,
            overlap="o" in flags,
            producer_regs=int(match["r"]),
        )

    def template_name(self, causal: bool, bf16: bool) -> str:
        b = lambda x: str(bool(x)).lower()  # noqa: E731
        return (
            f"flash_ws_fwd<{self.head_dim}, {self.block_n}, {self.consumers}, {self.stages}, "
            f"{b(self.pingpong)}, {b(self.overlap)}, {self.producer_regs}, "
            f"{b(causal)}, {b(bf16)}>"
        )

    def grid_blocks(self, config: AttentionConfig) -> int:
        """Blocks a launch runs: one per query tile of every (batch, head) pair."""
        return ceil_div(config.seq_len, self.block_m) * config.bh
