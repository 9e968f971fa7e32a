"""One query row through the online softmax, tile by tile, with real NumPy numbers (Qt-free).

This is the arithmetic the tiled kernel's `online_softmax` and `accumulate_O_i` steps perform
for each row of Q_i: keep the running max m and the running sum l of exp(s - m), rescale the
accumulator whenever m grows, and divide by l at the end. The panel shows every intermediate
value and checks the result against the exact softmax(s)·V.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Toy sizes so the numbers fit on screen: 3 key tiles of 4 keys, head dim 4.
TOY_KEYS, TOY_TILE, TOY_DIM = 12, 4, 4
TOY_SEED = 7


@dataclass(frozen=True)
class TileUpdate:
    """State after folding key tile j into the row."""

    tile: int
    keys: tuple[int, int]  # [start, stop)
    scores: np.ndarray  # s for this tile
    m: float  # running max after this tile
    l: float  # running sum of exp(s - m)
    rescale: float  # exp(m_old - m_new) applied to the old l and O
    acc: np.ndarray  # unnormalised O accumulator (sum of exp(s - m) v)
    out: np.ndarray  # acc / l: the row's output if the keys ended here


@dataclass(frozen=True)
class OnlineSoftmaxTrace:
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray
    updates: tuple[TileUpdate, ...]
    exact: np.ndarray  # softmax(s) · V computed in one shot

    @property
    def final(self) -> np.ndarray:
        return self.updates[-1].out

    @property
    def max_abs_diff(self) -> float:
        return float(np.max(np.abs(self.final - self.exact)))


def toy_inputs(seed: int = TOY_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, K, V with a later tile holding the largest score, so m really changes mid-row."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(TOY_DIM)
    k = rng.standard_normal((TOY_KEYS, TOY_DIM))
    v = rng.standard_normal((TOY_KEYS, TOY_DIM))
    k[TOY_TILE : 2 * TOY_TILE] += 1.5 * q / np.linalg.norm(q)  # tile 1 scores higher
    return q, k, v


def online_softmax_trace(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, tile: int = TOY_TILE
) -> OnlineSoftmaxTrace:
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = (k @ q) * scale
    m, l_sum = -np.inf, 0.0
    acc = np.zeros(v.shape[1])
    updates = []
    for j, start in enumerate(range(0, len(s), tile)):
        stop = min(start + tile, len(s))
        sj = s[start:stop]
        m_new = max(m, float(sj.max()))
        rescale = float(np.exp(m - m_new)) if np.isfinite(m) else 0.0
        p = np.exp(sj - m_new)
        l_sum = rescale * l_sum + float(p.sum())
        acc = rescale * acc + p @ v[start:stop]
        m = m_new
        updates.append(
            TileUpdate(j, (start, stop), sj.copy(), m, l_sum, rescale, acc.copy(), acc / l_sum)
        )
    e = np.exp(s - s.max())
    exact = (e / e.sum()) @ v
    return OnlineSoftmaxTrace(q, k, v, s, tuple(updates), exact)


def toy_trace() -> OnlineSoftmaxTrace:
    return online_softmax_trace(*toy_inputs())
