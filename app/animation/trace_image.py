"""A trace made ready to draw, off the GUI thread: its phases and warp roles as arrays, every
block and its phases painted into one image, the lanes it needs and how far its roles overlap
(`prepare_trace`, `PreparedTrace`); TraceView only shows the result."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtGui import (
    QColor,
    QImage,
)

from gpu.files.trace import (
    BLOCK_LEVEL,
    ROLE_TILE_PHASES,
    Occupancy,
    Trace,
    TraceLayout,
    block_values,
    layout,
    occupancy,
    values_array,
)
from gpu.model.costmodel import DEFAULT_GPU, GPUS, GpuSpec, gpu_for_device_name

from ..state.animation.lane import Lane, build_lanes
from ..state.animation.warp_roles import (
    EPILOGUE,
    GEMM,
    ISSUE,
    SOFTMAX,
    WAIT,
    WAIT_PV,
    overlap_share,
    traced_roles,
)
from .colors import DARK, AnimColors


def phase_arrays(trace: Trace) -> dict[str, np.ndarray]:
    """Every phase of every block as flat arrays (block index, kind, t0, t1), for fast drawing.
    kind: 0 load_Q_i, 1 load_K_j, 2 compute_S_ij, 3 store_O_i, -1 anything else."""
    code = {"load_Q_i": 0, "load_K_j": 1, "compute_S_ij": 2, "store_O_i": 3}
    blk, kind, t0, t1 = [], [], [], []
    for k, b in enumerate(trace.blocks):
        marks = b.phases
        for m, (name, _j, t) in enumerate(marks):
            blk.append(k)
            kind.append(code.get(name, -1))
            t0.append(t)
            t1.append(marks[m + 1][2] if m + 1 < len(marks) else b.end_ns)
    return {
        "block": values_array(blk, np.int64),
        "kind": values_array(kind, np.int8),
        "t0": values_array(t0, np.float64),
        "t1": values_array(t1, np.float64),
    }


def blocks_image(
    trace: Trace,
    lay: TraceLayout,
    phases: dict[str, np.ndarray],
    roles: dict[str, np.ndarray] | None,
    colors: AnimColors,
    width: int,
    height: int,
) -> QImage:
    """The lanes of a block-level trace as an image of `width` × `height`: each block where and
    when it ran, coloured by wave, with its waits for K/V (or its warp roles) inside. Drawn with
    NumPy into an array of pixels (`_Canvas`), never a Qt call per block: a million blocks
    drawn by QPainter.drawRects held the interpreter (and so the GUI thread) for a second. Runs
    on a worker thread."""
    canvas = _Canvas(max(1, width), max(1, height))
    span = float(max(1, int(lay.end.max()) if lay.end.size else 1))
    lane_h = height / max(1, lay.lanes)
    gap = 1.0 if lane_h >= 4 else 0.0
    slot_h = (lane_h - gap) / max(1, lay.slots)
    scale = width / span
    y = lay.lane * lane_h + gap / 2 + lay.slot * slot_h  # per block
    x0 = lay.start * scale
    w = np.maximum(1.0, (lay.end - lay.start) * scale)
    hh = max(1.0, slot_h)
    nwaves = len(colors.waves)
    wave = lay.wave % nwaves
    for c in range(nwaves):
        sel = wave == c
        canvas.fill(x0[sel], y[sel], w[sel], hh, colors.waves[c])
    if slot_h >= 1.0 and roles is not None:
        _paint_role_rects(canvas, trace, roles, colors, scale, y, hh)
    elif slot_h >= 1.0:
        px0 = phases["t0"] * scale
        pw = (phases["t1"] - phases["t0"]) * scale
        keep = pw >= 0.25
        blk = phases["block"]
        kinds = phases["kind"]
        groups: list[tuple[np.ndarray, QColor]] = [
            # waits for K/V: the block's own wave colour, darker
            (keep & (kinds == 1) & (wave[blk] == c), colors.waves[c].darker(185))
            for c in range(nwaves)
        ]
        groups.append((keep & (kinds == 0), colors.read))
        groups.append((keep & (kinds == 3), colors.write))
        for sel, color in groups:
            canvas.fill(px0[sel], y[blk[sel]], pw[sel], hh, color)
    return canvas.image()


class _Canvas:
    """Pixels painted as QPainter paints filled rectangles without antialiasing (a pixel is
    covered when its centre is), later fills over earlier ones, in O(rectangles + pixels): each
    fill counts its rectangles' cover of every pixel through a 2-D difference array (four
    corners per rectangle, then running sums down and across)."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.argb = np.zeros((height, width), dtype=np.uint32)  # transparent

    def fill(
        self, x: np.ndarray, y: np.ndarray, w: np.ndarray | float, h: np.ndarray | float, color
    ) -> None:
        """Fill the rectangles (x, y, w, h), each argument an array or one value for all."""
        if np.size(x) == 0:
            return
        W, H = self.width, self.height
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        c0 = np.clip(np.ceil(x - 0.5), 0, W).astype(np.int64)
        c1 = np.clip(np.ceil(x + w - 0.5), 0, W).astype(np.int64)
        r0 = np.clip(np.ceil(y - 0.5), 0, H).astype(np.int64)
        r1 = np.clip(np.ceil(y + h - 0.5), 0, H).astype(np.int64)
        c1, r1 = np.broadcast_to(c1, c0.shape), np.broadcast_to(r1, r0.shape)
        keep = (c1 > c0) & (r1 > r0)
        if not keep.any():
            return
        c0, c1, r0, r1 = c0[keep], c1[keep], r0[keep], r1[keep]
        stride, n = W + 1, (H + 1) * (W + 1)
        diff = (
            np.bincount(r0 * stride + c0, minlength=n)
            + np.bincount(r1 * stride + c1, minlength=n)
            - np.bincount(r0 * stride + c1, minlength=n)
            - np.bincount(r1 * stride + c0, minlength=n)
        )
        cover = diff.reshape(H + 1, W + 1).cumsum(axis=0).cumsum(axis=1)[:H, :W]
        self.argb[cover > 0] = np.uint32(QColor(color).rgba())

    def image(self) -> QImage:
        """The pixels as a QImage of its own (premultiplied, as the view draws it)."""
        data = np.ascontiguousarray(self.argb)
        image = QImage(
            data.data, self.width, self.height, 4 * self.width, QImage.Format.Format_ARGB32
        )
        return image.convertToFormat(QImage.Format.Format_ARGB32_Premultiplied)


def _paint_role_rects(
    canvas: _Canvas,
    trace: Trace,
    ra: dict[str, np.ndarray],
    colors: AnimColors,
    scale: float,
    block_y: np.ndarray,
    block_h: float,
) -> None:
    """Each block's bar split into one sub-lane per warp role: GEMM turns and softmax of the
    consumers, the producer's copy issues."""
    sub = block_h / max(1, len(trace.roles))
    xs = ra["t0"] * scale
    ws = np.maximum(0.6, (ra["t1"] - ra["t0"]) * scale)
    ys = block_y[ra["block"]] + ra["role"] * sub
    hs = max(0.8, sub)
    for kind in (GEMM, SOFTMAX):
        sel = ra["kind"] == ROLE_KIND_CODES[kind]
        canvas.fill(xs[sel], ys[sel], ws[sel], hs, colors.role[kind])
    sel = ra["kind"] == ROLE_KIND_CODES[ISSUE]
    canvas.fill(xs[sel], ys[sel], 0.8, hs, colors.role[ISSUE])


#: Codes of the role activities in `role_arrays`.
ROLE_KIND_CODES = {WAIT: 0, GEMM: 1, SOFTMAX: 2, WAIT_PV: 3, EPILOGUE: 4, ISSUE: 5}


_MARK_KIND = {
    "load_Q_i": WAIT,
    "wait_K_j": WAIT,
    "gemm_issue": GEMM,
    "online_softmax": SOFTMAX,
    "wait_PV": WAIT_PV,
    "store_O_i": EPILOGUE,
}


def role_arrays(trace: Trace) -> dict[str, np.ndarray]:
    """Every role activity of every block as flat arrays (block index, role index, kind, t0,
    t1): a consumer's stretch from one mark to the next (not across tiles a thinned trace
    dropped), the producer's issues as instants."""
    roles = {r: k for k, r in enumerate(trace.roles)}
    blk, role, kind, t0, t1 = [], [], [], [], []
    for k, b in enumerate(trace.blocks):
        for r in b.roles:
            ri = roles.get(r.role)
            if ri is None:
                continue
            marks = r.phases
            for m, (name, j, t) in enumerate(marks):
                if r.role == "producer":
                    if name in ("load_K_j", "load_V_j"):
                        blk.append(k), role.append(ri), kind.append(ROLE_KIND_CODES[ISSUE])
                        t0.append(t), t1.append(t)
                    continue
                if m + 1 >= len(marks) or name not in _MARK_KIND:
                    continue
                nxt_name, nxt_j, nxt_t = marks[m + 1]
                if nxt_name in ROLE_TILE_PHASES and name in ROLE_TILE_PHASES and nxt_j > j + 1:
                    continue  # tiles between were not kept
                blk.append(k), role.append(ri), kind.append(ROLE_KIND_CODES[_MARK_KIND[name]])
                t0.append(t), t1.append(nxt_t)
    return {
        "block": values_array(blk, np.int64),
        "role": values_array(role, np.int64),
        "kind": values_array(kind, np.int8),
        "t0": values_array(t0, np.float64),
        "t1": values_array(t1, np.float64),
    }


@dataclass(frozen=True)
class TraceFacts:
    """What the panel says and the view draws about a whole trace, worked out once with NumPy
    over its layout and phases (`trace_facts`, in `prepare_trace` off the GUI thread): nothing
    on the GUI thread walks a trace's blocks (a million of them took 14 s to describe)."""

    end_ns: float  # the last block's end: the time axis (at least 1)
    span_ns: int  # first block start to last block end
    ids: np.ndarray  # the block ids, sorted
    where: np.ndarray  # the index in trace.blocks of each id of `ids`
    sms_used: int
    wave_sizes: np.ndarray  # blocks per wave
    wave_starts: np.ndarray  # the median start of each wave's blocks (ns)
    load_ns: int  # time the blocks spent waiting for K/V tiles (load_K_j)
    compute_ns: int  # and computing (compute_S_ij)
    first_pick: int  # the index of the block to show first (the middle of the launch)
    occupancy: Occupancy

    def index_of(self, block: int) -> int | None:
        """The index in trace.blocks of the block with id `block`, if there is one."""
        k = int(np.searchsorted(self.ids, block))
        if k < self.ids.size and int(self.ids[k]) == block:
            return int(self.where[k])
        return None


def trace_facts(trace: Trace, lay: TraceLayout, phases: dict[str, np.ndarray]) -> TraceFacts:
    """TraceFacts of `trace` from its layout and phase arrays (NumPy over arrays)."""
    n = len(trace.blocks)
    ids = block_values(trace, "block")
    sms = block_values(trace, "sm")
    where = np.argsort(ids, kind="stable")
    sizes = np.bincount(lay.wave, minlength=lay.waves)
    starts = lay.start[np.lexsort((lay.start, lay.wave))].astype(np.float64)  # by wave, then time
    first = np.cumsum(sizes) - sizes
    lo = np.minimum(first + np.maximum(sizes - 1, 0) // 2, max(0, n - 1))
    hi = np.minimum(first + sizes // 2, max(0, n - 1))
    medians = (starts[lo] + starts[hi]) / 2 if n else np.zeros(sizes.size)
    spans = phases["t1"] - phases["t0"]
    order = np.lexsort((ids, lay.start))
    pick = n // 2 if trace.level == BLOCK_LEVEL else min(1, n - 1)
    return TraceFacts(
        end_ns=float(max(1, int(lay.end.max()) if n else 1)),
        span_ns=int(lay.end.max() - lay.start.min()) if n else 0,
        ids=ids[where],
        where=where,
        sms_used=int(np.unique(sms).size) if trace.level == BLOCK_LEVEL else 0,
        wave_sizes=sizes,
        wave_starts=medians,
        load_ns=int(spans[phases["kind"] == 1].sum()),
        compute_ns=int(spans[phases["kind"] == 2].sum()),
        first_pick=int(order[max(0, pick)]) if n else 0,
        occupancy=occupancy(lay.start, lay.end),
    )


@dataclass(frozen=True)
class PreparedTrace:
    """A trace with what showing it needs, computed off the GUI thread (`prepare_trace`): its
    SM/slot/wave layout, its phases and roles as arrays, its facts, and the lane its replay
    plays on."""

    trace: Trace
    lay: TraceLayout
    phases: dict[str, np.ndarray]
    roles: dict[str, np.ndarray] | None
    gpu: GpuSpec
    lanes: list[Lane]
    facts: TraceFacts
    #: Warp-specialized traces: the share of the consumers' softmax time during which the
    #: other consumer's GEMMs were on the tensor cores (ping-pong at work), mean over up to
    #: OVERLAP_SAMPLE blocks; else None.
    role_overlap: float | None = None
    #: The lanes' blocks drawn for the view's size and colours (blocks_image), if asked for.
    image: QImage | None = None
    image_key: tuple = ()


def prepare_trace(
    trace: Trace, size: tuple[int, int] | None = None, colors: AnimColors | None = None
) -> PreparedTrace:
    """Everything the trace panel needs to show `trace`, and with `size` (the view's lanes) the
    image of its blocks (pure: runs on a worker thread)."""
    gpu = gpu_for_device_name(trace.device) or GPUS[DEFAULT_GPU]
    lay = layout(trace)
    phases = phase_arrays(trace)
    roles = role_arrays(trace) if trace.roles else None
    image, key = None, ()
    if size is not None and trace.level == BLOCK_LEVEL:
        colors = colors or DARK
        image = blocks_image(trace, lay, phases, roles, colors, *size)
        key = (colors, *size)
    return PreparedTrace(
        trace,
        lay,
        phases,
        roles,
        gpu,
        build_lanes(trace.config, gpu, (trace.algorithm,)),
        trace_facts(trace, lay, phases),
        _mean_overlap(trace) if trace.roles else None,
        image,
        key,
    )


#: Blocks (evenly spaced in launch order) the role overlap is averaged over.
OVERLAP_SAMPLE = 64


def _mean_overlap(trace: Trace) -> float | None:
    blocks = trace.blocks
    step = max(1, len(blocks) // OVERLAP_SAMPLE)
    shares = [overlap_share(tl) for b in blocks[::step] if (tl := traced_roles(b)) is not None]
    return sum(shares) / len(shares) if shares else None
