"""Where a lane's time comes from: a measurement of that very config, or the roofline model.

A lane plays on the whole-GPU clock (lane.py). Modeled, each kernel takes its roofline time,
the Measurements tab's (gpu.model.roofline), and its blocks share it in proportion to their own
roofline. A model can be far off: on the H200 the readable kernel's roofline is under 1 ms at
N = 4096 (h = 12, d = 64), and it measures 3.5 ms.

Where a result of the same config was measured on the GPU the animation models, each kernel's
blocks are stretched so the kernel takes its measured median time; the blocks keep their
modeled proportions inside it. A result from another device (a CPU run, another GPU) leaves the
lane modeled: its times say nothing about this GPU's SRAM and HBM.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu.model.costmodel import GpuSpec, gpu_for_device_name
from gpu.results import RunResult

from ..current_point import AlgorithmFigures

MEASURED, MODELED = "measured", "modeled"


@dataclass(frozen=True)
class LaneClock:
    """A lane's clock: MODELED, or MEASURED with each kernel's time (seconds, all heads)."""

    source: str = MODELED
    kernel_seconds: tuple[tuple[str, float], ...] = ()
    #: Where the measurement comes from: "H200 SXM, recorded run".
    origin: str = ""
    #: DRAM bytes the hardware counters measured for this run, every kernel (None: not
    #: measured): shown beside the lane's tile loads, which are the model's.
    dram_bytes: int | None = None

    @property
    def measured(self) -> bool:
        return self.source == MEASURED

    @property
    def seconds(self) -> float:
        return sum(s for _, s in self.kernel_seconds)

    def label(self) -> str:
        """'measured (H200 SXM, recorded run)' or 'modeled (roofline)'."""
        return f"measured ({self.origin})" if self.measured else "modeled (roofline)"


MODELED_CLOCK = LaneClock()


def clock_for(
    result: RunResult | None, gpu: GpuSpec, figures: AlgorithmFigures | None = None
) -> LaneClock:
    """The measured clock of `result` when it is a timed run on `gpu`, else the modeled one;
    its DRAM bytes are the current point's (`figures`: app/state/current_point.py) where the
    counters measured every kernel."""
    if result is None or result.oom or not result.kernel_times:
        return MODELED_CLOCK
    if any(k.ms <= 0 for k in result.kernel_times):
        return MODELED_CLOCK
    spec = gpu_for_device_name(result.device) if result.device else None
    if spec is None or spec.name != gpu.name:
        return MODELED_CLOCK
    how = "recorded run" if result.recorded else f"{result.backend} run"
    origin = f"{spec.name.rsplit(' ', 2)[0]}, {how}"
    # every kernel, or none; compulsory writes counted: the figure explain and the plots show
    dram = None
    if figures is not None and figures.dram_bytes.source == MEASURED:
        dram = int(figures.dram_bytes.value or 0)
    times = tuple((k.name, k.ms * 1e-3) for k in result.kernel_times)
    return LaneClock(MEASURED, times, origin, dram)


def kernel_scales(clock: LaneClock, modeled: dict[str, float]) -> dict[str, float]:
    """Factor each kernel's modeled time is multiplied by: measured over modeled per kernel when
    the measurement names every kernel of the lane, else one factor for the whole lane (the
    total over the total). Empty for a modeled clock."""
    if not clock.measured or not modeled:
        return {}
    measured = dict(clock.kernel_seconds)
    if set(measured) >= set(modeled) and all(modeled[k] > 0 for k in modeled):
        return {k: measured[k] / modeled[k] for k in modeled}
    total = sum(modeled.values())
    if total <= 0:
        return {}
    factor = clock.seconds / total
    return {k: factor for k in modeled}
