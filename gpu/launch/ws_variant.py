"""A variant of the warp-specialized kernel (gpu/kernels/flash_ws.cu): its template parameters
and the short label that names it.

Plain Python and device-free: the launcher (gpu/launch/flash_ws.py) names its default variants
by label (`flash_ws.WS_DEFAULTS`), and the tile bookkeeping (the algorithm registry, the cost
model, the schedule, the animation) reads them through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..config import AttentionConfig, ceil_div

_LABEL = re.compile(
    r"^d(?P<d>\d+)-(?P<bn>\d+)x(?P<ns>\d+)-c(?P<c>\d+)-(?P<flags>po|p|o|none)-r(?P<r>\d+)(?P<persist>-persist(?P<pq>1)?)?$"
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
    persistent: bool = False  # one block per SM walks the query tiles
    persistent_q_buffers: int = 2  # Q tiles of a persistent block (1 where two do not fit)

    @property
    def q_buffers(self) -> int:
        """Q tiles in shared memory: two when persistent (the next tile's Q lands meanwhile),
        or one where two do not fit (d = 256)."""
        return self.persistent_q_buffers if self.persistent else 1

    @property
    def barriers(self) -> int:
        """mbarriers: q_full (and, when persistent, q_empty) per Q buffer, then full and empty
        for each K and V stage."""
        return (2 * self.q_buffers if self.persistent else 1) + 4 * self.stages

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
        """1024 B alignment slack + the Q tile(s) + `stages` K and V tiles + the mbarriers
        (+ the tile slots when persistent)."""
        rows = self.q_buffers * self.block_m + 2 * self.stages * self.block_n
        return 1024 + rows * self.head_dim * 2 + 8 * self.barriers + self.tile_slot_bytes

    @property
    def tile_slot_bytes(self) -> int:
        """Persistent: the tile index each Q buffer holds (two int32 after the mbarriers)."""
        return 8 if self.persistent else 0

    @property
    def label(self) -> str:
        """Short name: d, key tile × stages, consumers, ping-pong/overlap flags, producer regs,
        and `-persist` for persistent blocks (`-persist1` with one Q buffer).
        `WsLaunch.from_label` reads it back (WS_DEFAULTS holds labels)."""
        flags = ("p" if self.pingpong else "") + ("o" if self.overlap else "")
        return (
            f"d{self.head_dim}-{self.block_n}x{self.stages}-c{self.consumers}"
            f"-{flags or 'none'}-r{self.producer_regs}" + self._persist_suffix
        )

    @property
    def _persist_suffix(self) -> str:
        if not self.persistent:
            return ""
        return (
            "-persist" if self.persistent_q_buffers == 2 else f"-persist{self.persistent_q_buffers}"
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
            persistent=bool(match["persist"]),
            persistent_q_buffers=1 if match["pq"] else 2,
        )

    def template_name(self, causal: bool, bf16: bool) -> str:
        b = lambda x: str(bool(x)).lower()  # noqa: E731
        return (
            f"flash_ws_fwd<{self.head_dim}, {self.block_n}, {self.consumers}, {self.stages}, "
            f"{b(self.pingpong)}, {b(self.overlap)}, {self.producer_regs}, "
            f"{self.q_buffers if self.persistent else 0}, {b(causal)}, {b(bf16)}>"
        )

    def grid_blocks(self, config: AttentionConfig) -> int:
        """Query tiles of a launch, one per `block_m` rows of every (batch, head) pair: the
        blocks it runs, or with `persistent` the tiles its blocks walk (a trace build writes
        each tile's rows as a block's)."""
        return ceil_div(config.seq_len, self.block_m) * config.bh

    def launch_blocks(self, config: AttentionConfig, sm_count: int) -> int:
        """Thread blocks a launch starts: one per query tile, or when persistent at most one
        per SM (one block fits an SM: `__launch_bounds__(threads, 1)`)."""
        tiles = self.grid_blocks(config)
        return min(tiles, sm_count) if self.persistent else tiles
