"""What the lanes canvas's layout takes (the scene of each lane) and gives (the rectangles and
texts of each lane, its counters and its legend), with the sizes every part shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QRectF
from PySide6.QtGui import QFont

from gpu.config import AttentionConfig
from gpu.model.costmodel import GpuSpec

from ..state.animation.chip import ChipLayout
from ..state.animation.clock import LaneClock
from ..state.animation.snapshots import Counters
from .canvas_text import TextItem

MIN_STRIP_PX = 10.0  # N×d matrices narrower than this are widened (and say so)


MIN_ML_PX = 4.0


#: Register file of one SM (65,536 32-bit registers on every GPU in the table).
REGISTER_FILE_BYTES = 65536 * 4


SMEM_BOX_W = 40.0


REGS_BOX_W = 12.0


@dataclass(frozen=True)
class LaneScene:
    """Static facts about one lane: enough to lay it out and paint its background."""

    algorithm: str
    label: str
    total_time_s: float
    row_tile: int  # rows per tile of Q (and O)
    kv_tile: int  # rows per tile of K and V
    s_tile: int  # tile of S/P (naive GEMM tile) for the grid
    totals: Counters  # end-of-play counters
    layouts: tuple[ChipLayout, ...]  # per kernel
    clock: LaneClock
    #: The warp-specialized kernel's consumer warpgroups (its launch's): the roles strip draws
    #: the producer and each consumer; 0 for the other kernels (no strip).
    consumers: int = 0


@dataclass(frozen=True)
class Scene:
    config: AttentionConfig
    gpu: GpuSpec
    lanes: tuple[LaneScene, ...]
    total_time_s: float


@dataclass
class CounterRow:
    key: str  # "read", "written", "flops", "sram", "time"
    value: QRectF  # where the running value is drawn (right aligned)
    font: QFont
    color: str


@dataclass
class LegendRow:
    swatch: QRectF
    text: QRectF


@dataclass
class LaneGeo:
    rect: QRectF
    timebar: QRectF
    status: QRectF
    hbm: QRectF
    mats: dict[str, QRectF]
    widen: float
    link: QRectF
    box: QRectF  # the SM's shared memory, to scale
    regs: QRectF | None  # the SM's register file, to scale (tensor-core lanes)
    legend: list[LegendRow]
    legend_font: QFont
    counters: list[CounterRow]
    bar: QRectF  # HBM traffic so far
    roles: QRectF | None  # the warp roles strip
    role_rows: list[QRectF] = field(default_factory=list)
    role_axis: QRectF | None = None


@dataclass
class CanvasLayout:
    width: float
    height: float
    header: QRectF
    lanes: list[LaneGeo]
    texts: list[TextItem]  # static texts (painted into the background)
    swatches: list[tuple[QRectF, str]]  # legend colour squares: (where, AnimColors role key)
    clock_rect: QRectF  # the header's running clock
