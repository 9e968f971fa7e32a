"""`TracePanel`, the "real GPU trace" mode: pick a recorded trace, see every SM's blocks
(TraceView), click one to replay its traced phases (BlockStrip) as the schedule's steps in the
HBM/SRAM view (a TileCanvas), each lasting as long as it took on the hardware (see
app/state/animation/trace_replay.py). A warp-specialized trace also shows the selected block's
warp roles as the hardware ran them.

Trace files are read, checked and laid out on a worker thread (app/work/background.py): the panel
says "Loading…" meanwhile and `loaded` fires once the traces (or a message) are in."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QSplitter,
    QStyle,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpu.files.trace import (
    BLOCK_LEVEL,
    KERNEL_LEVEL,
    BlockTrace,
    Trace,
    TraceError,
    load_traces,
)

from ..kit.plain_text import PlainLabel
from ..state.animation.player import Player
from ..state.animation.trace_replay import BlockReplay
from ..state.recorded_run import collector_paused
from ..state.units import fmt_ns
from ..work.background import LatestOnly, read_traces_elsewhere
from .block_strip import BlockStrip
from .canvas import TileCanvas, scene_for
from .colors import DARK, AnimColors
from .trace_image import PreparedTrace, prepare_trace
from .trace_style import algo_label, query_tile_rows, trace_title
from .trace_view import TraceView

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "resources" / "traces"
#: The traces shipped with the app: naive and the tiled kernels (bench/trace_h200.py), the
#: warp-specialized kernel (bench/ws_check.py's rows, bench/ship_ws_trace.py), all on the H200.
SHIPPED_TRACES = (SHIPPED_DIR / "h200_trace.json", SHIPPED_DIR / "h200_ws_trace.json")


def read_traces(
    paths: Sequence[Path],
    every: bool = True,
    size: tuple[int, int] | None = None,
    colors: AnimColors | None = None,
    load: Callable[[str], tuple[Trace, ...]] = load_traces,
) -> tuple[PreparedTrace, ...]:
    """Load (with `load`) and prepare the traces of `paths` (a worker thread's job), their
    blocks drawn for a view of `size` in `colors`. With `every`, any file that cannot be read
    raises; without, unreadable files are skipped unless none is left. The millions of objects
    a large trace is made of are moved out of the garbage collector's reach once built
    (app.state.recorded_run.collector_paused)."""
    out: list[PreparedTrace] = []
    first_error: TraceError | None = None
    with collector_paused():
        for path in paths:
            try:
                out += [prepare_trace(t, size, colors) for t in load(str(path))]
            except TraceError as exc:
                if every:
                    raise
                first_error = first_error or exc
    if not out and first_error is not None:
        raise first_error
    return tuple(out)


REPLAY_WALL_S = 6.0  # one block replays in this many wall seconds at 1×
#: Parsed traces of at most this many blocks in all are prepared on the GUI thread (a few
#: milliseconds); more, on the loader's thread.
PREPARE_HERE_BLOCKS = 20_000
#: Waves counted one by one in the description; more are cut to the first few and the last.
WAVES_LISTED = 8


class TracePanel(QWidget):
    """Pick a recorded trace, see every SM's blocks, click one to replay its steps."""

    traceChanged = Signal(str)
    #: Traces asked for (load_shipped, load_file) arrived, or `message` says why not.
    loaded = Signal()

    def __init__(
        self, parent: QWidget | None = None, traces: tuple[Trace, ...] | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("tracePanel")
        self.traces: tuple[Trace, ...] = ()
        self.trace: Trace | None = None
        self.selected: BlockTrace | None = None
        self.replay: BlockReplay | None = None
        self.player: Player | None = None
        self.fraction = 0.0
        self.speed = 1.0
        self.message = ""
        self.source = ""
        self.c: AnimColors = DARK
        self.loader = LatestOnly(self)
        self._prepared: dict[int, PreparedTrace] = {}

        self.chooser = QComboBox(self)
        self.chooser.setObjectName("traceChooser")
        self.chooser.currentIndexChanged.connect(self._on_choose)
        self.replay_button = QToolButton(self)
        self.replay_button.setObjectName("traceReplay")
        self.replay_button.setText("Replay block")
        self.replay_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.replay_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_MediaPlay))
        self.replay_button.setToolTip("Replay the selected block's traced phases (Space)")
        self.replay_button.clicked.connect(self.toggle_replay)
        self.speed_box = QComboBox(self)
        self.speed_box.setObjectName("traceSpeed")
        for s in (0.25, 0.5, 1.0, 2.0, 4.0):
            self.speed_box.addItem(f"{s:g}×", s)
        self.speed_box.setCurrentIndex(2)
        self.speed_box.currentIndexChanged.connect(
            lambda _i: setattr(self, "speed", float(self.speed_box.currentData()))
        )
        self.open_button = QToolButton(self)
        self.open_button.setObjectName("traceOpen")
        self.open_button.setText("Open trace…")
        self.open_button.setToolTip("A traces file or a recorded run with traces")
        self.open_button.clicked.connect(self._open_dialog)
        self.info = PlainLabel(self)
        self.info.setObjectName("traceInfo")
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.PlainText)
        # The trace's name has a row of its own (it is long: kernel, GPU, N, blocks), the
        # buttons another: the page stays narrow enough for a 1280-pixel screen.
        pick = QHBoxLayout()
        pick.addWidget(PlainLabel("trace:", self))
        pick.addWidget(self.chooser, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.replay_button)
        buttons.addWidget(self.speed_box)
        buttons.addStretch(1)
        buttons.addWidget(self.open_button)
        bar = QVBoxLayout()
        bar.setSpacing(2)
        bar.addLayout(pick)
        bar.addLayout(buttons)

        self.view = TraceView(self)
        self.view.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.view.blockSelected.connect(self.select_block)
        self.strip = BlockStrip(self)
        self.canvas = TileCanvas(self)
        self.canvas.setMinimumSize(480, 250)
        self.canvas_caption = PlainLabel(self)
        self.canvas_caption.setObjectName("traceCanvasCaption")
        self.canvas_caption.setWordWrap(True)
        lower = QWidget(self)
        low = QVBoxLayout(lower)
        low.setContentsMargins(0, 0, 0, 0)
        low.setSpacing(2)
        low.addWidget(self.strip)
        low.addWidget(self.canvas_caption)
        low.addWidget(self.canvas, 1)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.view)
        split.addWidget(lower)
        split.setStretchFactor(0, 5)
        split.setStretchFactor(1, 4)
        split.setSizes([480, 400])
        self.splitter = split
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(self.info)
        lay.addWidget(split, 1)

        self._timer = QTimer(self)
        self._timer.setInterval(16)
        self._timer.timeout.connect(self._tick)
        self._clock = time.monotonic()
        if traces is not None:
            self.set_traces(traces)

    # ---- traces

    def load_shipped(self) -> None:
        """The traces in resources/ (read off the GUI thread; a message if none can be read)."""
        self._load(SHIPPED_TRACES, "the traces recorded on the H200", "shipped", every=False)

    def load_file(self, path: str | Path) -> None:
        """A traces file or a recorded run with traces (read off the GUI thread)."""
        self._load((Path(path),), Path(path).name, Path(path).name, every=True)

    def _load(self, paths: Sequence[Path], what: str, source: str, every: bool) -> None:
        self.info.setText(f"Loading {what}…")

        def failed(exc: BaseException) -> None:
            self.message = str(exc)
            where = f"Cannot open {paths[0]}" if every else "No trace"
            self.info.setText(f"{where}: {exc}")
            self.loaded.emit()

        def done(prepared: tuple[PreparedTrace, ...]) -> None:
            if not prepared:
                self.message = f"{what} holds no traces"
                self.info.setText(f"{what} holds no traces")
            else:
                self.message = ""
                self._prepared.clear()
                self.show_prepared(prepared, source=source)
            self.loaded.emit()

        def submit() -> None:  # once the panel is laid out: the blocks are drawn for its size
            lanes = self.view.lanes_rect()
            size = (max(1, round(lanes.width())), max(1, round(lanes.height())))
            colors = self.c
            self.loader.submit(
                lambda: read_traces(paths, every, size, colors, read_traces_elsewhere),
                done,
                failed,
            )

        QTimer.singleShot(0, submit)

    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a trace", str(SHIPPED_DIR), "JSON (*.json)"
        )
        if path:
            self.load_file(path)

    def set_colors(self, colors: AnimColors) -> None:
        self.c = colors
        for w in (self.view, self.strip, self.canvas):
            w.set_colors(colors)

    def show_prepared(self, prepared: Sequence[PreparedTrace], source: str = "") -> None:
        """Show traces prepared off the GUI thread (prepare_trace): nothing here walks their
        blocks."""
        self._prepared.update((id(p.trace), p) for p in prepared)
        self.set_traces(tuple(p.trace for p in prepared), source=source)

    def set_traces(self, traces: tuple[Trace, ...], source: str = "") -> None:
        """Show these traces (already parsed). Small ones are laid out here when first
        chosen; with a large one among them (more than PREPARE_HERE_BLOCKS in all) all are
        prepared on the loader's thread first, and shown when that is done."""
        traces = tuple(traces)
        unprepared = [t for t in traces if id(t) not in self._prepared]
        if sum(len(t.blocks) for t in unprepared) > PREPARE_HERE_BLOCKS:
            self.info.setText("Preparing the traces…")

            def done(prepared: tuple[PreparedTrace, ...]) -> None:
                self._prepared.update((id(p.trace), p) for p in prepared)
                self.set_traces(traces, source)  # all prepared now: shown at once
                self.loaded.emit()

            def prepare() -> tuple[PreparedTrace, ...]:
                with collector_paused():
                    return tuple(prepare_trace(t) for t in unprepared)

            self.loader.submit(prepare, done)
            return
        self.traces = traces
        self.source = source
        shown = {id(t) for t in self.traces}
        self._prepared = {k: v for k, v in self._prepared.items() if k in shown}
        self.chooser.blockSignals(True)
        self.chooser.clear()
        for t in self.traces:
            name = algo_label(t.algorithm)
            what = f"{len(t.blocks)} blocks" if t.level == BLOCK_LEVEL else "3 kernels"
            span = fmt_ns(self._span_ns(t))
            self.chooser.addItem(
                f"{name} · {t.device} · N={t.config.seq_len} · {what} · {span}", t.algorithm
            )
        self.chooser.blockSignals(False)
        if self.traces:
            pick = next((k for k, t in enumerate(self.traces) if t.level == BLOCK_LEVEL), 0)
            self.chooser.setCurrentIndex(pick)
            self._on_choose(pick)

    def select_trace(self, algorithm: str) -> None:
        for k, t in enumerate(self.traces):
            if t.algorithm == algorithm:
                self.chooser.setCurrentIndex(k)
                self._on_choose(k)
                return
        raise KeyError(algorithm)

    def _on_choose(self, index: int) -> None:
        if not 0 <= index < len(self.traces):
            return
        trace = self.traces[index]
        if trace is self.trace:
            return
        self.stop_replay()
        self.trace = trace
        prepared = self._prepared.get(id(trace))
        if prepared is None:  # given as parsed traces (a recording's): lay it out here
            prepared = self._prepared[id(trace)] = prepare_trace(trace)
        gpu = prepared.gpu
        self.player = Player(
            trace.config, gpu, algorithms=(trace.algorithm,), lanes=list(prepared.lanes)
        )
        self.canvas.set_scene(scene_for(trace.config, gpu, self.player.lanes))
        self.view.set_trace(trace, prepared)
        self.view.set_references(
            [
                (algo_label(o.algorithm), self._span_ns(o))
                for o in self.traces
                if o is not trace and o.config == trace.config and self._span_ns(o) > 0
            ]
        )
        self.info.setText(self._describe(trace))
        # start on a block in the middle of the launch (the second wave, where there is one)
        pick = trace.blocks[prepared.facts.first_pick]
        self.select_block(pick.block, play=False)
        self.replay_at(0.35)
        self.traceChanged.emit(trace.algorithm)

    def _span_ns(self, t: Trace) -> int:
        """First block start to last block end: from the trace's facts once it is prepared."""
        prepared = self._prepared.get(id(t))
        return prepared.facts.span_ns if prepared is not None else t.span_ns

    def _describe(self, t: Trace) -> str:
        lay, facts = self.view.lay, self.view.facts
        ev = f" (CUDA events {fmt_ns(t.kernel_ms * 1e6)})" if t.kernel_ms > 0 else ""
        if t.level == KERNEL_LEVEL or lay is None or facts is None:
            kernels = " + ".join(f"{b.kernel} {fmt_ns(b.duration_ns)}" for b in t.blocks)
            return f"{trace_title(t)} · {kernels} = {fmt_ns(t.span_ns)}{ev} · {t.notes}"
        sizes = [str(int(n)) for n in facts.wave_sizes]
        if len(sizes) > WAVES_LISTED:  # the first few, then the last
            sizes = [*sizes[: WAVES_LISTED - 2], "…", sizes[-1]]
        waves = " + ".join(sizes)
        load, comp = facts.load_ns, facts.compute_ns
        share = 100 * load / max(1, load + comp)
        per_sm = f"{lay.slots} at a time per SM" if lay.slots > 1 else "1 at a time per SM"
        kept = f" · phases of {t.tiles_kept} tiles per block kept" if t.tiles_kept else ""
        roles = ""
        prepared = self._prepared.get(id(t))
        if prepared is not None and prepared.role_overlap is not None:
            roles = (
                f" · a consumer's softmax runs under the other consumer's GEMMs for "
                f"{100 * prepared.role_overlap:.0f}% of its time (ping-pong; blocks sampled "
                "evenly)"
            )
        return (
            f"{trace_title(t)} · {len(t.blocks)} blocks on {facts.sms_used} SMs, "
            f"{per_sm} → {lay.waves} waves ({waves}) · first block start to last block end "
            f"{fmt_ns(facts.span_ns)}{ev} · waiting for K/V tiles: {share:.0f}% of the blocks' "
            f"loop time{roles}{kept}"
        )

    # ---- selection and replay

    def select_block(self, block: int, play: bool = True) -> None:
        if self.trace is None or self.player is None:
            return
        facts = self.view.facts
        k = facts.index_of(block) if facts is not None else None
        if k is None:
            raise KeyError(block)
        b = self.trace.blocks[k]
        self.selected = b
        self.view.select(block)
        self.replay = BlockReplay(self.trace, b, self.player.lane(self.trace.algorithm))
        self.strip.set_block(self.trace, b, self._block_caption(b))
        self.fraction = 0.0
        self.player.seek(self.replay.modeled_at(b.start_ns))
        self.replay_at(0.0)
        if play:
            self.start_replay()

    def _block_caption(self, b: BlockTrace, extra: str = "") -> str:
        t = self.trace
        assert t is not None
        if t.level == KERNEL_LEVEL:
            head = f"kernel {b.kernel} · {fmt_ns(b.duration_ns)}"
        else:
            q_tiles = max(1, math.ceil(t.config.seq_len / query_tile_rows(t)))
            head = (
                f"block {b.block}: query tile {b.query_tile} of head {b.block // q_tiles} · "
                f"SM {b.sm} · {fmt_ns(b.start_ns)} → {fmt_ns(b.end_ns)} "
                f"({fmt_ns(b.duration_ns)})"
            )
        return head + (f"   ·   {extra}" if extra else "")

    def replay_at(self, fraction: float) -> None:
        """Put the replay cursor `fraction` (0..1) through the selected block's real time."""
        if self.replay is None or self.player is None or self.selected is None:
            return
        self.fraction = min(1.0, max(0.0, fraction))
        t_ns = self.replay.time_at(self.fraction)
        seg = self.replay.segment_at(t_ns)
        m = self.replay.modeled_at(t_ns)
        if m < self.player.t:
            self.player.seek(m)
        else:
            self.player.t = m  # forward: the tiles moved since the last frame leave a trail
        frames = self.player.frames()
        roles = self.strip.roles
        if roles is not None and frames:  # the block's real roles, at the replay's moment
            t_role = float(t_ns - self.selected.start_ns)
            frames = [replace(frames[0], roles=roles, role_t=t_role), *frames[1:]]
        self.canvas.set_frames(frames)
        self.view.set_cursor(t_ns)
        into = fmt_ns(t_ns - self.selected.start_ns)
        if seg.steps:
            tile = f" of tile j={seg.j}" if seg.phase in ("load_K_j", "compute_S_ij") else ""
            now = f"{into} in: {seg.phase}{tile} → steps {', '.join(seg.steps)}"
        else:
            now = f"{into} in"
        self.strip.set_cursor(t_ns, self._block_caption(self.selected, now))
        step = frames[0].step.name if frames else ""
        what = "kernel" if self.trace is not None and self.trace.level == KERNEL_LEVEL else "block"
        self.canvas.header_text = (
            f"traced: {into} of {fmt_ns(self.selected.duration_ns)} into this {what}"
        )
        self.canvas_caption.setText(
            f"The same block in the HBM/SRAM view (one head drawn; bytes from the model, each "
            f"phase lasting as long as it did on the GPU): now {step}."
        )

    def step_phase(self, delta: int) -> None:
        """Pause and move the cursor to the start of the next (+1) or previous (-1) phase."""
        if self.replay is None or self.selected is None:
            return
        self.stop_replay()
        segs = self.replay.segments
        now = self.replay.time_at(self.fraction)
        k = segs.index(self.replay.segment_at(now))
        if delta < 0 and now > segs[k].t0_ns + 1:
            target = segs[k]  # back to the start of the current phase first
        else:
            target = segs[min(max(k + delta, 0), len(segs) - 1)]
        dur = max(1, self.selected.duration_ns)
        # a hair inside the phase, so the cursor's phase is the target's
        self.replay_at((min(target.t0_ns + 1, target.t1_ns) - self.selected.start_ns) / dur)

    def start_replay(self) -> None:
        if self.replay is None:
            return
        if self.fraction >= 1.0:
            self.fraction = 0.0
        self._clock = time.monotonic()
        self._timer.start()
        self.replay_button.setText("Pause")
        self.replay_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_MediaPause))

    def stop_replay(self) -> None:
        self._timer.stop()
        self.replay_button.setText("Replay block")
        self.replay_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_MediaPlay))

    def toggle_replay(self) -> None:
        if self._timer.isActive():
            self.stop_replay()
        else:
            self.start_replay()

    @property
    def replaying(self) -> bool:
        return self._timer.isActive()

    def _tick(self) -> None:
        now = time.monotonic()
        dt, self._clock = now - self._clock, now
        f = self.fraction + min(dt, 0.25) * self.speed / REPLAY_WALL_S
        self.replay_at(f)
        if f >= 1.0:
            self.stop_replay()

    def hideEvent(self, event) -> None:
        super().hideEvent(event)
        self.stop_replay()
