"""One query row through the online softmax, tile by tile, with real NumPy numbers (Qt-free).

This is the arithmetic the tiled kernel's `online_softmax` and `accumulate_O_i` steps perform
for each row of Q_i: keep the running max m and the running sum l of exp(s - m), rescale the
accumulator whenever m grows, and divide by l at the end. The panel shows every intermediate
value and checks the result against the exact softmax(s)·V.

Two ways to rescale, as the kernels do them: the readable kernel rescales eagerly, on every
tile whose max grows; the tensor-core kernels rescale lazily (`lazy=True`): the exponentials
stay relative to a reference max that moves only when a tile's max exceeds it by more than
2⁸ (8 in base 2: 8·ln 2 in the natural-log units here), so most tiles skip the rescale, P stays
below 256, and O/l is the same because O and l always share the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Toy sizes so the numbers fit on screen: 3 key tiles of 4 keys, head dim 4.
TOY_KEYS, TOY_TILE, TOY_DIM = 12, 4, 4
TOY_SEED = 7
#: The tensor-core kernels' lazy-rescale slack: 2⁸, i.e. 8 in base-2 units (RESCALE_SLACK in
#: gpu/kernels/flash_mma.cu), in natural-log units.
LAZY_SLACK = 8 * float(np.log(2))


@dataclass(frozen=True)
class TileUpdate:
    """State after folding key tile j into the row."""

    tile: int
    keys: tuple[int, int]  # [start, stop)
    scores: np.ndarray  # s for this tile
    m: float  # running max after this tile
    l: float  # running sum of exp(s - m)
    rescale: float  # exp(ref_old - ref_new) applied to the old l and O (1 when skipped)
    acc: np.ndarray  # unnormalised O accumulator (sum of exp(s - m) v)
    out: np.ndarray  # acc / l: the row's output if the keys ended here
    ref: float = 0.0  # the max the exponentials are relative to (= m when eager)
    rescaled: bool = True  # whether this tile moved the reference (rescaled l and O)


@dataclass(frozen=True)
class OnlineSoftmaxTrace:
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray
    updates: tuple[TileUpdate, ...]
    exact: np.ndarray  # softmax(s) · V computed in one shot
    lazy: bool = False

    @property
    def final(self) -> np.ndarray:
        return self.updates[-1].out

    @property
    def max_abs_diff(self) -> float:
        return float(np.max(np.abs(self.final - self.exact)))


def toy_inputs(seed: int = TOY_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, K, V with a later tile holding far larger scores (by more than the lazy slack), and
    the last tile a little larger still, so m changes mid-row: an eager rescale on both, a
    lazy one on the first only."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(TOY_DIM)
    k = rng.standard_normal((TOY_KEYS, TOY_DIM))
    v = rng.standard_normal((TOY_KEYS, TOY_DIM))
    unit = q / np.linalg.norm(q)
    lift = 2 * np.sqrt(TOY_DIM) / np.linalg.norm(q)  # scores rise by about this ÷ √d·|q|
    k[TOY_TILE : 2 * TOY_TILE] += 4.0 * lift * unit  # tile 1: ~8 higher, past 8·ln 2
    k[2 * TOY_TILE :] += 4.6 * lift * unit  # tile 2: a little higher still
    return q, k, v


def online_softmax_trace(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, tile: int = TOY_TILE, lazy: bool = False
) -> OnlineSoftmaxTrace:
    """The row tile by tile; `lazy` rescales as the tensor-core kernels do (module doc)."""
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = (k @ q) * scale
    m = ref = -np.inf
    l_sum = 0.0
    acc = np.zeros(v.shape[1])
    updates = []
    for j, start in enumerate(range(0, len(s), tile)):
        stop = min(start + tile, len(s))
        sj = s[start:stop]
        m = max(m, float(sj.max()))
        moves = not np.isfinite(ref) or (m > ref + LAZY_SLACK if lazy else m > ref)
        new_ref = m if moves else ref
        rescale = float(np.exp(ref - new_ref)) if np.isfinite(ref) else 0.0
        p = np.exp(sj - new_ref)
        l_sum = rescale * l_sum + float(p.sum())
        acc = rescale * acc + p @ v[start:stop]
        ref = new_ref
        updates.append(
            TileUpdate(
                j, (start, stop), sj.copy(), m, l_sum, rescale, acc.copy(), acc / l_sum, ref,
                moves,
            )
        )  # fmt: skip
    e = np.exp(s - s.max())
    exact = (e / e.sum()) @ v
    return OnlineSoftmaxTrace(q, k, v, s, tuple(updates), exact, lazy)


def toy_trace(lazy: bool = False) -> OnlineSoftmaxTrace:
    return online_softmax_trace(*toy_inputs(), lazy=lazy)
