"""Ring attention's schedule: which rows each device holds, which K/V block it has at each step,
which (query chunk, key chunk) pairs it computes there, and what it sends on.

Ring attention splits the sequence over P devices. Each device keeps its rows of Q, and the K/V
blocks travel round the ring: at step s device d holds the block that started on device
(d - s) mod P, computes its queries against it, and passes it to device (d + 1) mod P. After P
steps every query has met every key once. The partial results merge with the online-softmax
rescale, the same algebra that merges K/V tiles inside one fused kernel.

The split:
- without a mask, contiguous: the sequence is cut into P chunks, device d holds chunk d;
- with a causal mask, zigzag: the sequence is cut into 2P chunks and device d holds chunks d and
  2P - 1 - d. A contiguous split would leave device 0 with almost nothing to do (its queries see
  only its own keys) and device P - 1 with the most; pairing an early chunk with a late one gives
  every device the same work. A (query chunk a, key chunk b) pair is then "full" (b < a: every
  key is visible), "diagonal" (b == a: the causal triangle) or "skipped" (b > a: all masked).

This module is pure Python: the CPU simulation, the CUDA engine, the cost model and the app's
ring view all read the same schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..config import AttentionConfig

FULL, DIAGONAL, SKIPPED = "full", "diagonal", "skipped"
CONTIGUOUS, ZIGZAG = "contiguous", "zigzag"

#: The most devices a ring may have (the model's range; the CPU simulation runs any of them).
MAX_DEVICES = 1024


class RingConfigError(ValueError):
    """A ring that cannot be built for this config; the message names the requirement."""


def layout_for(causal: bool) -> str:
    return ZIGZAG if causal else CONTIGUOUS


def chunk_count(devices: int, causal: bool) -> int:
    """How many equal chunks the sequence is cut into: P, or 2P for the zigzag split."""
    return 2 * devices if causal else devices


def device_chunks(device: int, devices: int, causal: bool) -> tuple[int, ...]:
    """The chunks device `device` holds (its queries, and the K/V block it starts with)."""
    if causal:
        return (device, 2 * devices - 1 - device)
    return (device,)


def chunk_rows(seq_len: int, chunks: int) -> tuple[int, ...]:
    """Rows in each chunk: as equal as possible, the first `seq_len % chunks` one row longer."""
    base, extra = divmod(seq_len, chunks)
    return tuple(base + (1 if c < extra else 0) for c in range(chunks))


def pair_kind(q_chunk: int, k_chunk: int, causal: bool) -> str:
    if not causal or k_chunk < q_chunk:
        return FULL
    return DIAGONAL if k_chunk == q_chunk else SKIPPED


def check_devices(devices: int) -> None:
    if isinstance(devices, bool) or not isinstance(devices, int) or not 1 <= devices <= MAX_DEVICES:
        raise RingConfigError(f"devices = {devices!r} is not allowed: an integer from 1 to 1024")


def check_equal_chunks(config: AttentionConfig, devices: int) -> None:
    """The fused kernels take one N for queries and keys, so on a GPU every chunk must be the
    same size: N divisible by P (by 2P for the causal zigzag split)."""
    check_devices(devices)
    chunks = chunk_count(devices, config.causal)
    if config.seq_len % chunks:
        split = f"2·P = {chunks} (causal zigzag split)" if config.causal else f"P = {chunks}"
        raise RingConfigError(
            f"seq_len = {config.seq_len} is not divisible by {split}: the GPU ring needs equal "
            "chunks because the fused kernels are square (the CPU simulation takes any N)"
        )


@dataclass(frozen=True)
class ChunkPair:
    """One (query chunk, key chunk) block of the score matrix and how the mask treats it."""

    q_chunk: int
    k_chunk: int
    kind: str  # FULL, DIAGONAL or SKIPPED


@dataclass(frozen=True)
class DeviceStep:
    """What one device does in one step of the ring."""

    device: int
    step: int
    #: The device whose K/V block this device holds (and computes against) at this step.
    block_owner: int
    kv_chunks: tuple[int, ...]
    #: Every (local query chunk, held key chunk) pair, skipped ones included, in launch order.
    pairs: tuple[ChunkPair, ...]
    #: Where the held block goes next and where the next one comes from; None on the last step.
    sends_to: int | None
    receives_from: int | None
    #: Bytes of K and V this device sends in this step (all batches and heads).
    bytes_sent: int

    @property
    def computed(self) -> tuple[ChunkPair, ...]:
        return tuple(p for p in self.pairs if p.kind != SKIPPED)


@dataclass(frozen=True)
class RingSchedule:
    """The whole ring for one config on `devices` devices: `steps[s][d]` is device d at step s."""

    config: AttentionConfig
    devices: int
    layout: str
    chunk_rows: tuple[int, ...]
    steps: tuple[tuple[DeviceStep, ...], ...]

    @cached_property
    def chunk_starts(self) -> tuple[int, ...]:
        starts, row = [], 0
        for rows in self.chunk_rows:
            starts.append(row)
            row += rows
        return tuple(starts)

    def chunk_bounds(self, chunk: int) -> tuple[int, int]:
        """[start, stop) rows of `chunk` in the whole sequence."""
        start = self.chunk_starts[chunk]
        return start, start + self.chunk_rows[chunk]

    def device_chunks(self, device: int) -> tuple[int, ...]:
        return device_chunks(device, self.devices, self.config.causal)

    def device_rows(self, device: int) -> int:
        return sum(self.chunk_rows[c] for c in self.device_chunks(device))

    def pair_work(self, pair: ChunkPair) -> int:
        """(query, key) pairs the pair really scores: rows·cols, or the triangle on the diagonal."""
        rows, cols = self.chunk_rows[pair.q_chunk], self.chunk_rows[pair.k_chunk]
        if pair.kind == SKIPPED:
            return 0
        if pair.kind == DIAGONAL:
            return rows * (rows + 1) // 2
        return rows * cols

    def device_work(self, device: int) -> int:
        """(query, key) pairs device `device` scores over the whole ring: its share of the work."""
        return sum(self.pair_work(p) for step in self.steps for p in step[device].pairs)

    def step_work(self, step: int, device: int) -> int:
        return sum(self.pair_work(p) for p in self.steps[step][device].pairs)

    @property
    def bytes_per_device(self) -> int:
        """K/V bytes each device sends over the whole ring (P - 1 steps of sending)."""
        return max(
            (sum(st[d].bytes_sent for st in self.steps) for d in range(self.devices)), default=0
        )

    def to_dict(self) -> dict:
        """Plain data for a view: chunks, and per step per device the block, pairs and bytes."""
        return {
            "devices": self.devices,
            "layout": self.layout,
            "seq_len": self.config.seq_len,
            "causal": self.config.causal,
            "chunk_rows": list(self.chunk_rows),
            "device_chunks": [list(self.device_chunks(d)) for d in range(self.devices)],
            "steps": [
                [
                    {
                        "device": ds.device,
                        "block_owner": ds.block_owner,
                        "kv_chunks": list(ds.kv_chunks),
                        "pairs": [[p.q_chunk, p.k_chunk, p.kind] for p in ds.pairs],
                        "sends_to": ds.sends_to,
                        "receives_from": ds.receives_from,
                        "bytes_sent": ds.bytes_sent,
                    }
                    for ds in step
                ]
                for step in self.steps
            ],
        }


def kv_block_bytes(config: AttentionConfig, rows: int) -> int:
    """K and V of `rows` sequence rows, all batches and heads, in the config's dtype."""
    return 2 * rows * config.head_dim * config.bh * config.elem_bytes


def ring_schedule(config: AttentionConfig, devices: int) -> RingSchedule:
    """The ring of `devices` devices for `config` (any N; chunks differ by at most one row)."""
    check_devices(devices)
    causal = config.causal
    rows = chunk_rows(config.seq_len, chunk_count(devices, causal))
    held_rows = [sum(rows[c] for c in device_chunks(d, devices, causal)) for d in range(devices)]
    steps = []
    for s in range(devices):
        last = s == devices - 1
        step = []
        for d in range(devices):
            owner = (d - s) % devices
            kv = device_chunks(owner, devices, causal)
            pairs = tuple(
                ChunkPair(qc, kc, pair_kind(qc, kc, causal))
                for qc in device_chunks(d, devices, causal)
                for kc in kv
            )
            step.append(
                DeviceStep(
                    device=d,
                    step=s,
                    block_owner=owner,
                    kv_chunks=kv,
                    pairs=pairs,
                    sends_to=None if last else (d + 1) % devices,
                    receives_from=None if last else (d - 1) % devices,
                    bytes_sent=0 if last else kv_block_bytes(config, held_rows[owner]),
                )
            )
        steps.append(tuple(step))
    return RingSchedule(config, devices, layout_for(causal), rows, tuple(steps))
