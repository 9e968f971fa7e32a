"""The Tiles tab's measured clocks: a lane runs on its measured clock when its result was timed
on the GPU the lanes model; the banner's measured figures are read from the current point of
the algorithms the window shows and the lanes' (app/state/current_point.py), the one the
explain pane, the plots and the status bar read."""

from __future__ import annotations

from collections.abc import Callable

from gpu.config import AttentionConfig
from gpu.model.costmodel import GpuSpec
from gpu.results import RunResult

from ..state.animation.clock import LaneClock, clock_for
from ..state.animation.player import Player
from ..state.current_point import point_for

#: (config, algorithm) -> the measured result of that config, or None.
ResultLookup = Callable[[AttentionConfig, str], RunResult | None]


class MeasuredClocks:
    """Where the results come from (`lookup`) and the algorithms shown, asked for the lanes
    of `player`."""

    def __init__(self, player: Player) -> None:
        self.player = player
        self.lookup: ResultLookup | None = None
        self.shown: tuple[str, ...] = ()

    def question(self, config: AttentionConfig) -> tuple[tuple[str, ...], dict]:
        """What the current point is asked for: the shown algorithms and the lanes', with
        their results of `config`."""
        algos = tuple(dict.fromkeys((*self.shown, *self.player.algorithms)))
        lookup = self.lookup
        if lookup is None:
            return algos, {}
        return algos, {a: r for a in algos if (r := lookup(config, a)) is not None}

    def counted(self, results: dict) -> bool:
        """Whether a lane's result has counters: only then does the banner show measured DRAM
        bytes, and the lanes ask for the current point (a slider drag over unprofiled results
        costs nothing more)."""
        return any(r.traffic for a, r in results.items() if a in self.player.algorithms)

    def clocks(
        self, config: AttentionConfig, gpu: GpuSpec, compute: bool = True
    ) -> dict[str, LaneClock]:
        """Each measured lane's clock, with its DRAM bytes from the current point. A build
        (`compute=False`, on every slider stop) works the point out off the GUI thread; a
        result, a GPU or a set of algorithms that changes asks for it here (its bands are
        the plots' and the lanes' own, worked out already but for a newly ticked one)."""
        if self.lookup is None:
            return {}
        shown, results = self.question(config)
        point = None
        if self.counted(results):
            point = point_for(config, shown, gpu, results, compute=compute)
        out = {}
        for algo in self.player.algorithms:
            figures = point.algorithms.get(algo) if point is not None else None
            clock = clock_for(results.get(algo), gpu, figures)
            if clock.measured:
                out[algo] = clock
        return out
