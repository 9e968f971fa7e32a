"""What the first screen shows before the user picks: naive, the fastest fused kernel the
backend has, and one peer; every other series is one click away ("Every series").

Four fused kernels, four naive kernel lines and three PyTorch peers on one time plot are
eleven series and a key of two rows: too much for a first look. The lesson needs two lines
(naive against the best fused kernel) and one outside yardstick.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpu.algorithms import ALGORITHMS, NAIVE, RING, SPLIT_KV, TILED, fastest_fused_first

#: The one peer shown by default: the fastest PyTorch backend first.
PEERS_FIRST = ("sdpa_cudnn", "sdpa_flash", "sdpa_math")


def fastest_fused(available: Iterable[str]) -> str:
    """The fastest fused kernel among `available` (the readable one when none is)."""
    have = set(available)
    return next((a for a in fastest_fused_first() if a in have), TILED)


def default_checked(available: Iterable[str]) -> tuple[str, ...]:
    """The algorithms ticked until the user ticks others: naive and the fastest fused kernel
    (and the ring, which runs only when Devices asks for P > 1, and the split-KV kernel,
    which runs only the decode pass: each pass draws those written for it)."""
    fused = fastest_fused(available)
    return tuple(a for a in ALGORITHMS if a in (NAIVE, fused, RING, SPLIT_KV))


def shown_peers(peers: Iterable[str], every: bool) -> tuple[str, ...]:
    """The peers drawn: all of them with "Every series", else the first of PEERS_FIRST there
    is (or the first one recorded)."""
    peers = tuple(peers)
    if every or len(peers) <= 1:
        return peers
    first = next((p for p in PEERS_FIRST if p in peers), peers[0])
    return (first,)


def tiles_fused(available: Iterable[str], cpu: bool) -> str:
    """The fused kernel the Tiles tab plays against naive by default. Its lanes run on a GPU's
    clock (the target GPU's model, or the times measured on it): the fastest fused kernel the
    backend has; on the CPU, whose only fused path is the readable
    algorithm in NumPy (slower than naive on a GPU's clock: naive would finish first), the
    fastest one the animation models on the target GPU."""
    return fastest_fused(fastest_fused_first() if cpu else available)
