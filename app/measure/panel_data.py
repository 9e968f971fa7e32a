"""What the Measurements tab shows, in one place: the family and algorithms on screen, the GPU
whose roofs judge them, the budget, the measured and reference results, the model curves
drawn; and the figures read from them (the current point at an N, a result's verdict). The
panel writes it as the state and the results arrive; its parts (markers, hover read-outs,
visibility) read it."""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpu.algorithms import NAIVE, TILED, TILED_MMA
from gpu.config import BACKWARD, FORWARD, STEP, AttentionConfig
from gpu.model.backward_cost import NAIVE_BACKWARD_KERNELS
from gpu.model.costmodel import GpuSpec
from gpu.results import RunResult

from ..state.current_point import AlgorithmFigures, CurrentPoint, point_for
from ..state.family import cache_config
from ..state.model.cache import band, known_band, known_verdict
from ..state.model.curves import MODEL_GRID, ModelCurves
from ..state.seq_scale import SEQ_MAX, SEQ_MIN
from .plot_styles import ALGOS, NAIVE_FORWARD_KERNELS, NAIVE_KERNELS


class PanelData:
    """The panel's data and inputs (module docstring): written by the panel (the peers' by
    its PlotReferences), read by its parts."""

    def __init__(self) -> None:
        self.config: AttentionConfig | None = None  # the slider's point
        self.family: AttentionConfig | None = None
        self.layers = 1  # the saved-activation stack's L (training passes)
        self.algorithms: tuple[str, ...] = (NAIVE, TILED)
        self.every = False  # "Every series": naive's kernel lines too
        self.measured: dict[str, list[RunResult]] = {a: [] for a in ALGOS}
        self.by_n: dict[str, dict[int, RunResult]] = {a: {} for a in ALGOS}
        self.any_samples = False  # some result of the family carries counter samples
        #: Some result shown since the backend came carried samples: the strip chart keeps its
        #: room from then on, so changing the shape never changes the plots' sizes (each
        #: change of them relays out and repaints every plot in full).
        self.samples_seen = False
        self.gpu: GpuSpec | None = None
        self.gpu_label = ""
        self.time_model_gpu: GpuSpec | None = None
        self.budget: int | None = None
        self.budget_label = ""
        self.n_span: tuple[int, int] = (SEQ_MIN, SEQ_MAX)
        self.references: dict[str, list[RunResult]] = {}
        self.reference_by_n: dict[str, dict[int, RunResult]] = {}
        self.reference_ids: list[str] = []
        self.recorded_note = ""
        self.model: ModelCurves | None = None

    def shown_pass(self) -> str:
        """The pass whose measurements the plots show (gpu.config's PASSES)."""
        return self.family.pass_ if self.family is not None else FORWARD

    def is_decode(self) -> bool:
        return self.family is not None and self.family.is_decode

    def naive_kernels(self) -> tuple[str, ...]:
        """Naive's kernels the current pass times, in launch order."""
        pass_ = self.shown_pass()
        if pass_ == STEP:
            return NAIVE_KERNELS
        return NAIVE_BACKWARD_KERNELS if pass_ == BACKWARD else NAIVE_FORWARD_KERNELS

    def model_ready(self) -> bool:
        """Whether the model curves drawn are the current family's."""
        m = self.model
        return (
            m is not None
            and m.family == self.family
            and m.algorithms == self.algorithms
            and m.gpu == self.gpu
        )

    def point(self, n: int, compute: bool = False) -> CurrentPoint | None:
        """The current point at N = n (app/state/current_point.py): the figures the explain
        pane, the Tiles banner and the status bar show for the same config and results. None
        until its model is worked out (`compute`: work it out now, the hover read-outs)."""
        if self.gpu is None or self.family is None:
            return None
        results = {a: r for a in self.algorithms if (r := self.by_n[a].get(n)) is not None}
        config = self.family.with_(seq_len=n)
        return point_for(config, self.algorithms, self.gpu, results, compute=compute)

    def figures(self, n: int, algorithm: str, compute: bool = False) -> AlgorithmFigures | None:
        point = self.point(n, compute)
        return point.algorithms.get(algorithm) if point is not None else None

    def verdict(self, result: RunResult, algorithm: str):  # type: ignore[no-untyped-def]
        """The roofline verdict of a shown result: the current point's at its N (None until
        its model is worked out). A result of an algorithm that ignores the tile sizes holds
        at the family's tiles too."""
        fam = self.family
        config = result.config
        if fam is None or cache_config(fam.with_(seq_len=config.seq_len), algorithm) != (
            cache_config(config, algorithm)
        ):
            return None  # not of the series shown
        f = self.figures(config.seq_len, algorithm)
        return f.verdict if f is not None else None

    def band(self, config: AttentionConfig, algorithm: str, compute: bool):  # type: ignore[no-untyped-def]
        if self.gpu is None:
            return None
        if compute:
            return band(config, algorithm, self.gpu)
        return known_band(config, algorithm, self.gpu)

    def reference_intensity(self, config: AttentionConfig, peer: str) -> float | None:
        """Roofline x of a peer: its FLOPs over the DRAM bytes our model gives the same
        algorithm (our tensor-core tiled kernel for the fused SDPA backends, naive for the math
        backend, which writes S and P); the peer's own traffic is not measured."""
        if self.gpu is None:
            return None
        ours = NAIVE if peer == "sdpa_math" else TILED_MMA
        v = known_verdict(config, ours, self.gpu)
        return v.intensity if v is not None else None

    def nearest_n(self, x: float) -> int:
        """The N of a model point or a result nearest to log10 N = x (the hover read-outs)."""
        n = 10.0**x
        candidates = set(MODEL_GRID)
        for a in self.algorithms:
            candidates.update(self.by_n[a])
        for by_n in self.reference_by_n.values():
            candidates.update(by_n)
        if self.config is not None:
            candidates.add(self.config.seq_len)
        return min(candidates, key=lambda c: abs(math.log10(c) - math.log10(n)))

    def current_results(self) -> Mapping[str, RunResult]:
        """The shown algorithms' results at the current N."""
        if self.config is None:
            return {}
        n = self.config.seq_len
        return {a: r for a in self.algorithms if (r := self.by_n[a].get(n)) is not None}

    def results_shown(self) -> dict[str, list[RunResult]]:
        """The results drawn now: ours per algorithm shown, and the reference peers."""
        out = {a: list(self.measured[a]) for a in self.algorithms if self.measured[a]}
        out.update({p: list(rs) for p, rs in self.references.items() if rs})
        return out
