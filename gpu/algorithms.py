"""The algorithm registry: every attention algorithm Tilescope knows, and everything the rest of
the code needs to know about it, in one entry each.

An entry says what the algorithm is called and what it does (label, description), the passes it
is written for, the host launcher of its fused kernel (gpu/launch/*.py, whose `SOURCE` is the
.cu file) and the tiles it really uses per pass and head dim, which instruction its matmuls
issue (the roof it is judged against), how its online softmax rescales, where it ranks by
speed, whether a trace build and a backward kernel of ours exist, how the Tiles tab captions its
lane and how the plots draw it. The cost model, the schedule, the backends, the trace recorder,
the plots and the animation read these entries; none keeps a table or an if-chain of its own.
Adding a kernel is its .cu file, its launcher, its entry here and its test (docs/ARCHITECTURE.md).

The cost model, the schedule and the kernels must describe the same algorithm with the same
tiles, so every tile size is looked up here, and every entry's tiles come from its launcher: for
the readable kernel the config's `block_m` and `block_n`; the tensor-core kernels have fixed
tiles per head dim, chosen for their register and shared-memory budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .config import BACKWARD, DECODE, FORWARD, STEP, AttentionConfig
from .launch import decode_split, flash_bwd, flash_mma, flash_readable, flash_wgmma, flash_ws

#: Output tile (rows × cols) of the naive path's GEMMs in the cost model and the schedule. A real
#: cuBLAS kernel picks its own tiling; 128×128 is the common choice for these shapes on Ampere and
#: Hopper, and what the traffic model assumes (L2 reuse ignored, see docs in costmodel).
NAIVE_GEMM_TILE = 128

NAIVE = "naive"
TILED = "tiled"
TILED_MMA = "tiled_mma"
TILED_WGMMA = "tiled_wgmma"
TILED_WS = "tiled_ws"
RING = "ring"
SPLIT_KV = "split_kv"

#: The passes of the prefill kernels: the forward, and the backward and step built on it.
PREFILL_PASSES: tuple[str, ...] = (FORWARD, BACKWARD, STEP)

#: The instruction an algorithm's matmuls issue (on Hopper), which picks the roof it is judged
#: against (gpu.model.roofline.compute_roof): fp32 CUDA cores, the warp-level tensor-core
#: mma.sync (its own, slower rate on Hopper), or Hopper's warpgroup wgmma (cuBLAS's choice too).
FP32_CORES, MMA_SYNC, WGMMA = "fp32", "mma_sync", "wgmma"
#: How a fused kernel's online softmax rescales its running sum and output: on every tile whose
#: row max grows (eager), or only once the max has grown by more than 2⁸ (lazy; the tensor-core
#: kernels), so most tiles skip it. Naive has no online softmax ("").
EAGER, LAZY = "eager", "lazy"
#: On-chip layouts the Tiles tab draws (app/state/animation/chip.py): fp32 tiles in shared
#: memory (the readable kernel), Q and a two-stage cp.async K/V ring with S, P, O in registers
#: (mma.sync and wgmma kernels), a TMA-filled K/V ring shared by warp roles (warp-specialized),
#: or "" where a library picks its own tiles (naive's cuBLAS GEMMs) or nothing is animated.
FP32_TILES, TWO_STAGE_RING, WARP_SPECIALIZED = "fp32 tiles", "two-stage ring", "warp-specialized"

Tiles = Callable[[AttentionConfig], tuple[int, int]]


class Launcher(Protocol):
    """What the registry and the backends use of a fused kernel's launcher module."""

    SOURCE: str

    def supports(self, config: AttentionConfig) -> str | None: ...


@dataclass(frozen=True)
class SeriesStyle:
    """How the plots draw an algorithm: its colour on the dark and on the light theme (each
    picked for contrast on its background; Okabe-Ito based, colour-blind safe) and its
    pyqtgraph symbol. Plain data, so gpu/ stays Qt-free; app/kit/theme.py reads it."""

    dark: str
    light: str
    symbol: str

    def color(self, theme: str) -> str:
        return self.light if theme == "light" else self.dark


@dataclass(frozen=True)
class AlgorithmInfo:
    """One algorithm: what the UI and CLI call it, the passes it is written for (a backend may
    run fewer: gpu.backends.backend.Backend.passes says which it runs), and what the rest of the
    code reads of it (module docstring).

    `launcher` is the host module of its fused kernel (None: naive's cuBLAS GEMMs and softmax,
    gpu/backends/naive_fwd.py; the ring's per-device runs, gpu/ring/). `tiles`,
    `backward_tiles` and `dq_tiles` give (query rows, key rows) per step for a config, None where
    the algorithm has no such pass here. `speed_rank` orders the fused prefill kernels, 0 the
    fastest, in the order of their times at every N of every recorded run
    (resources/recorded/h200_sweep.json: warp-specialized < wgmma < mma.sync < readable); None
    for the rest.
    `traceable`: a trace build (or, for naive, CUDA events) records it. `has_backward`: our GPU
    backward kernels follow its forward (gpu/backends/naive_bwd.py, gpu/launch/flash_bwd.py).
    `registers`: registers per thread of its compiled forward kernel by (head dim, causal)
    (docs/KERNELS.md: ptxas and CuPy's kernel attributes on the H200 agree)."""

    id: str
    label: str
    fused: bool
    description: str
    style: SeriesStyle
    passes: tuple[str, ...] = PREFILL_PASSES
    launcher: Launcher | None = None
    #: The .cu file of an algorithm without a launcher here (naive: its softmax kernel).
    kernel_file: str = ""
    tiles: Tiles | None = None
    backward_tiles: Tiles | None = None
    dq_tiles: Tiles | None = None
    matmul: str = WGMMA
    rescale: str = ""
    speed_rank: int | None = None
    traceable: bool = False
    has_backward: bool = False
    #: The Tiles tab's title of its lane ("" : the label).
    lane_title: str = ""
    chip: str = ""
    registers: Mapping[tuple[int, bool], int] = field(default_factory=dict)

    @property
    def uses_config_tiles(self) -> bool:
        """Whether its tiles are the config's `block_m` and `block_n` (the readable kernel's);
        the others choose their own."""
        return self.tiles is _config_tiles

    @property
    def source(self) -> str:
        """The .cu file the Tiles tab shows beside its lane ("" where none is ours)."""
        return self.launcher.SOURCE if self.launcher is not None else self.kernel_file


def _config_tiles(config: AttentionConfig) -> tuple[int, int]:
    return flash_readable.tile_shape(config)


def _gemm_tiles(config: AttentionConfig) -> tuple[int, int]:
    return NAIVE_GEMM_TILE, NAIVE_GEMM_TILE


def _mma_tiles(config: AttentionConfig) -> tuple[int, int]:
    return flash_mma.tile_shape(config.head_dim)


def _wgmma_tiles(config: AttentionConfig) -> tuple[int, int]:
    return flash_wgmma.tile_shape(config.head_dim)


def _ws_tiles(config: AttentionConfig) -> tuple[int, int]:
    return flash_ws.tile_shape(config.head_dim)


def _backward_launch_head_dim(config: AttentionConfig) -> int:
    """The fused backward's head dim for `config` (d = 128's tiles where it refuses)."""
    return config.head_dim if config.head_dim in flash_bwd.SUPPORTED_HEAD_DIMS else 128


def _fused_backward_tiles(config: AttentionConfig) -> tuple[int, int]:
    """gpu/kernels/flash_bwd.cu's launch (gpu.launch.flash_bwd.default_launch): 128 keys per
    block, 128 query rows per step at d = 64, 64 at d = 128."""
    launch = flash_bwd.default_launch(_backward_launch_head_dim(config))
    return launch.block_m, launch.block_n


def _fused_dq_tiles(config: AttentionConfig) -> tuple[int, int]:
    """The deterministic dQ pass (gpu.launch.flash_bwd.default_dq_launch): 128 query rows,
    64 keys per step."""
    launch = flash_bwd.default_dq_launch(_backward_launch_head_dim(config))
    return launch.block_m, launch.block_n


ALGORITHMS: dict[str, AlgorithmInfo] = {
    NAIVE: AlgorithmInfo(
        NAIVE,
        "naive",
        False,
        "S = QKᵀ/√d and P = softmax(S) written to HBM, then O = PV: three kernels.",
        SeriesStyle("#ff8a5b", "#d55e00", "o"),
        passes=(*PREFILL_PASSES, DECODE),
        kernel_file="softmax.cu",  # its softmax (gpu/backends/naive_fwd.py); cuBLAS does the rest
        tiles=_gemm_tiles,
        backward_tiles=_gemm_tiles,
        traceable=True,
        has_backward=True,
        lane_title="naive: three kernels, S and P round-trip through HBM",
    ),
    TILED: AlgorithmInfo(
        TILED,
        "tiled (readable)",
        True,
        "One fused kernel: Q_i stays on chip, K_j/V_j stream through shared memory, "
        "online softmax; S and P never reach HBM.",
        SeriesStyle("#56b4e9", "#0072b2", "s"),
        launcher=flash_readable,
        tiles=_config_tiles,
        backward_tiles=_config_tiles,
        dq_tiles=_config_tiles,
        matmul=FP32_CORES,
        rescale=EAGER,
        speed_rank=3,
        traceable=True,
        lane_title="tiled, readable (FlashAttention-style): one fused kernel, S and P never "
        "leave the chip",
        chip=FP32_TILES,
    ),
    TILED_MMA: AlgorithmInfo(
        TILED_MMA,
        "tiled (tensor cores)",
        True,
        "The same tiled algorithm on tensor cores (mma.sync), double-buffered cp.async loads.",
        SeriesStyle("#6fd08c", "#009e73", "t"),
        launcher=flash_mma,
        tiles=_mma_tiles,
        backward_tiles=_fused_backward_tiles,
        dq_tiles=_fused_dq_tiles,
        matmul=MMA_SYNC,
        rescale=LAZY,
        speed_rank=2,
        traceable=True,
        has_backward=True,
        lane_title="tiled on tensor cores (mma.sync): one fused kernel, S and P stay in registers",
        chip=TWO_STAGE_RING,
        registers={(64, False): 255, (64, True): 255, (128, False): 250, (128, True): 252},
    ),
    TILED_WGMMA: AlgorithmInfo(
        TILED_WGMMA,
        "tiled (Hopper wgmma)",
        True,
        "The same tiled algorithm on Hopper's asynchronous warpgroup tensor-core instruction "
        "(wgmma, sm_90 only): S of the next tile overlaps the softmax of this one.",
        SeriesStyle("#c9a0dc", "#8e44ad", "d"),
        launcher=flash_wgmma,
        tiles=_wgmma_tiles,
        backward_tiles=_fused_backward_tiles,
        dq_tiles=_fused_dq_tiles,
        rescale=LAZY,
        speed_rank=1,
        lane_title="tiled, Hopper wgmma: one fused kernel, S of the next tile overlaps the softmax",
        chip=TWO_STAGE_RING,
        registers={(64, False): 252, (64, True): 252, (128, False): 255, (128, True): 255},
    ),
    TILED_WS: AlgorithmInfo(
        TILED_WS,
        "tiled (warp-specialized)",
        True,
        "FlashAttention-3's schedule on Hopper (sm_90 only): a producer warp streams K/V tiles "
        "with TMA into a ring of shared-memory stages while two consumer warpgroups take turns "
        "on the tensor cores, one's softmax running under the other's GEMMs.",
        SeriesStyle("#8c9eff", "#3949ab", "star"),
        launcher=flash_ws,
        tiles=_ws_tiles,
        backward_tiles=_fused_backward_tiles,
        dq_tiles=_fused_dq_tiles,
        rescale=LAZY,
        speed_rank=0,
        traceable=True,
        lane_title="tiled, warp-specialized: a producer warp fills a K/V ring, consumer "
        "warpgroups take turns on the tensor cores",
        chip=WARP_SPECIALIZED,
    ),
    RING: AlgorithmInfo(
        RING,
        "ring (P devices)",
        True,
        "The sequence split over P GPUs: each runs the fused kernel on its queries against one "
        "K/V block per step while passing the block on (NCCL), merging with the online softmax.",
        SeriesStyle("#d4a373", "#8d5524", "h"),
        passes=(FORWARD,),
        tiles=_wgmma_tiles,  # the per-device kernel on H100/H200
        rescale=LAZY,
    ),
    SPLIT_KV: AlgorithmInfo(
        SPLIT_KV,
        "split-KV decode",
        True,
        "Decode in one fused kernel (Flash-Decoding): the cache split over enough blocks to fill "
        "the SMs, each KV head read once for its whole group of query heads, partial (m, l, O) "
        "merged with the online softmax by the last block of each head.",
        SeriesStyle("#4fd1c5", "#00897b", "p"),
        passes=(DECODE,),
        launcher=decode_split,
        matmul=FP32_CORES,  # dot products: q rows are too few for a tensor-core tile
        rescale=EAGER,
    ),
}


def runs_pass(algorithm: str, pass_: str) -> bool:
    """Whether `algorithm` is written for `pass_` (unknown algorithms, the peers, are not)."""
    info = ALGORITHMS.get(algorithm)
    return info is not None and pass_ in info.passes


def fastest_fused_first() -> tuple[str, ...]:
    """The fused prefill kernels, fastest first (by `speed_rank`)."""
    ranked = [a for a, info in ALGORITHMS.items() if info.speed_rank is not None]
    return tuple(sorted(ranked, key=lambda a: ALGORITHMS[a].speed_rank or 0))


def single_kernel_fused(pass_: str = FORWARD) -> tuple[str, ...]:
    """The fused algorithms that run as one kernel of ours on one GPU for `pass_` (what the
    schedule walks and the Tiles tab animates beside naive), in registry order."""
    return tuple(
        a
        for a, info in ALGORITHMS.items()
        if info.fused and info.launcher is not None and pass_ in info.passes
    )


def info_for(algorithm: str) -> AlgorithmInfo:
    """The entry of `algorithm`; KeyError naming the known ones for an unknown id."""
    info = ALGORITHMS.get(algorithm)
    if info is None:
        raise KeyError(f"unknown algorithm {algorithm!r}: known are {', '.join(ALGORITHMS)}")
    return info


def tile_shape(config: AttentionConfig, algorithm: str) -> tuple[int, int]:
    """(rows of Q per block, rows of K/V per step) that `algorithm` uses for `config`."""
    tiles = info_for(algorithm).tiles
    if tiles is None:
        raise KeyError(f"{algorithm!r} has no fixed tiles (its launch plans them per GPU)")
    return tiles(config)


def backward_tile_shape(config: AttentionConfig, algorithm: str) -> tuple[int, int]:
    """(rows of Q per streamed tile, rows of K/V held per block) of `algorithm`'s backward.
    The readable algorithm (and the CPU's tiled backward) uses the config's tiles: block_m
    query rows, block_n keys; naive's GEMMs the naive output tile; the tensor-core kernels the
    launch of gpu/kernels/flash_bwd.cu (gpu.launch.flash_bwd.default_launch: 128 keys per block, 128
    query rows per step at d = 64, 64 at d = 128; other head dims, which it refuses, d = 128's)."""
    tiles = info_for(algorithm).backward_tiles
    if tiles is None:
        raise KeyError(f"{algorithm!r} has no backward pass")
    return tiles(config)


def dq_pass_tile_shape(config: AttentionConfig, algorithm: str) -> tuple[int, int]:
    """(query rows per block, keys per step) of the deterministic backward's dQ pass, which
    holds Q_i, dO_i and dQ_i while the key tiles stream in a fixed order. The CPU's tiled
    backward uses the config's tiles, as its main pass does; the tensor-core kernels the
    launch of gpu.launch.flash_bwd.default_dq_launch (128 query rows, 64 keys per step)."""
    info = ALGORITHMS.get(algorithm)
    if info is None or info.dq_tiles is None:
        raise KeyError(
            f"{algorithm!r} has no dQ pass: known are "
            + ", ".join(a for a, i in ALGORITHMS.items() if i.dq_tiles is not None)
        )
    return info.dq_tiles(config)
