"""A trace made ready to draw, off the GUI thread: its phases and warp roles as arrays, every
block and its phases painted into one image, the lanes it needs and how far its roles overlap
(`prepare_trace`, `PreparedTrace`); TraceView only shows the result."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QImage,
    QPainter,
)

from gpu.files.trace import (
    BLOCK_LEVEL,
    ROLE_TILE_PHASES,
    Trace,
    TraceLayout,
    layout,
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
        "block": np.asarray(blk, dtype=np.int64),
        "kind": np.asarray(kind, dtype=np.int8),
        "t0": np.asarray(t0, dtype=np.float64),
        "t1": np.asarray(t1, dtype=np.float64),
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
    when it ran, coloured by wave, with its waits for K/V (or its warp roles) inside. Pure
    painting on a QImage, so it runs on a worker thread."""
    image = QImage(max(1, width), max(1, height), QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    p = QPainter(image)
    span = float(max(1, max((b.end_ns for b in trace.blocks), default=1)))
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
    p.setPen(Qt.PenStyle.NoPen)
    for c in range(nwaves):
        sel = np.flatnonzero(wave == c)
        if sel.size:
            p.setBrush(colors.waves[c])
            p.drawRects(list(map(QRectF, x0[sel], y[sel], w[sel], np.full(sel.size, hh))))
    if slot_h >= 1.0 and roles is not None:
        _paint_role_rects(p, trace, roles, colors, scale, y, hh)
    elif slot_h >= 1.0:
        px0 = phases["t0"] * scale
        pw = (phases["t1"] - phases["t0"]) * scale
        keep = pw >= 0.25
        blk = phases["block"]
        kinds = phases["kind"]
        groups: list[tuple[np.ndarray, QColor]] = [
            # waits for K/V: the block's own wave colour, darker
            (np.flatnonzero(keep & (kinds == 1) & (wave[blk] == c)), colors.waves[c].darker(185))
            for c in range(nwaves)
        ]
        groups.append((np.flatnonzero(keep & (kinds == 0)), colors.read))
        groups.append((np.flatnonzero(keep & (kinds == 3)), colors.write))
        for sel, color in groups:
            if sel.size:
                p.setBrush(color)
                p.drawRects(
                    list(map(QRectF, px0[sel], y[blk[sel]], pw[sel], np.full(sel.size, hh)))
                )
    p.end()
    return image


def _paint_role_rects(
    p: QPainter,
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
    hs = np.full(len(xs), max(0.8, sub))
    for kind in (GEMM, SOFTMAX):
        sel = np.flatnonzero(ra["kind"] == ROLE_KIND_CODES[kind])
        if sel.size:
            p.setBrush(colors.role[kind])
            p.drawRects(list(map(QRectF, xs[sel], ys[sel], ws[sel], hs[sel])))
    sel = np.flatnonzero(ra["kind"] == ROLE_KIND_CODES[ISSUE])
    if sel.size:
        p.setBrush(colors.role[ISSUE])
        p.drawRects(list(map(QRectF, xs[sel], ys[sel], np.full(sel.size, 0.8), hs[sel])))


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
        "block": np.asarray(blk, dtype=np.int64),
        "role": np.asarray(role, dtype=np.int64),
        "kind": np.asarray(kind, dtype=np.int8),
        "t0": np.asarray(t0, dtype=np.float64),
        "t1": np.asarray(t1, dtype=np.float64),
    }


@dataclass(frozen=True)
class PreparedTrace:
    """A trace with what showing it needs, computed off the GUI thread (`prepare_trace`): its
    SM/slot/wave layout, its phases and roles as arrays, and the lane its replay plays on."""

    trace: Trace
    lay: TraceLayout
    phases: dict[str, np.ndarray]
    roles: dict[str, np.ndarray] | None
    gpu: GpuSpec
    lanes: list[Lane]
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
