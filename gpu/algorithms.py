"""The attention algorithms Tilescope knows, and the tile sizes each one really uses.

The cost model, the schedule and the kernels must describe the same algorithm with the same tiles,
so every tile size is looked up here: for the readable kernel it is the config's `block_m` and
`block_n`; the tensor-core kernel has fixed tiles per head dim, chosen for its register and
shared-memory budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import BACKWARD, DECODE, FORWARD, STEP, AttentionConfig
from .launch.ws_variant import WsLaunch

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


@dataclass(frozen=True)
class AlgorithmInfo:
    """What the UI and CLI need to name an algorithm, and the passes it is written for (a
    backend may run fewer: gpu.backends.backend.Backend.passes says which it runs)."""

    id: str
    label: str
    fused: bool
    description: str
    passes: tuple[str, ...] = PREFILL_PASSES


ALGORITHMS: dict[str, AlgorithmInfo] = {
    NAIVE: AlgorithmInfo(
        NAIVE,
        "naive",
        False,
        "S = QKᵀ/√d and P = softmax(S) written to HBM, then O = PV: three kernels.",
        (*PREFILL_PASSES, DECODE),
    ),
    TILED: AlgorithmInfo(
        TILED,
        "tiled (readable)",
        True,
        "One fused kernel: Q_i stays on chip, K_j/V_j stream through shared memory, "
        "online softmax; S and P never reach HBM.",
    ),
    TILED_MMA: AlgorithmInfo(
        TILED_MMA,
        "tiled (tensor cores)",
        True,
        "The same tiled algorithm on tensor cores (mma.sync), double-buffered cp.async loads.",
    ),
    TILED_WGMMA: AlgorithmInfo(
        TILED_WGMMA,
        "tiled (Hopper wgmma)",
        True,
        "The same tiled algorithm on Hopper's asynchronous warpgroup tensor-core instruction "
        "(wgmma, sm_90 only): S of the next tile overlaps the softmax of this one.",
    ),
    TILED_WS: AlgorithmInfo(
        TILED_WS,
        "tiled (warp-specialized)",
        True,
        "FlashAttention-3's schedule on Hopper (sm_90 only): a producer warp streams K/V tiles "
        "with TMA into a ring of shared-memory stages while two consumer warpgroups take turns "
        "on the tensor cores, one's softmax running under the other's GEMMs.",
    ),
    RING: AlgorithmInfo(
        RING,
        "ring (P devices)",
        True,
        "The sequence split over P GPUs: each runs the fused kernel on its queries against one "
        "K/V block per step while passing the block on (NCCL), merging with the online softmax.",
        (FORWARD,),
    ),
    SPLIT_KV: AlgorithmInfo(
        SPLIT_KV,
        "split-KV decode",
        True,
        "Decode in one fused kernel (Flash-Decoding): the cache split over enough blocks to fill "
        "the SMs, each KV head read once for its whole group of query heads, partial (m, l, O) "
        "merged with the online softmax by the last block of each head.",
        (DECODE,),
    ),
}


def runs_pass(algorithm: str, pass_: str) -> bool:
    """Whether `algorithm` is written for `pass_` (unknown algorithms, the peers, are not)."""
    info = ALGORITHMS.get(algorithm)
    return info is not None and pass_ in info.passes


#: Default variant of the warp-specialized kernel per head dim, by its label
#: (`gpu.launch.ws_variant.WsLaunch.label`: d, keys per K/V tile × ring stages, consumer
#: warpgroups of 64 query rows, p = ping-pong / o = intra-warpgroup overlap, producer registers,
#: -persist = persistent blocks). To switch, paste the winner's label from `bench/ws_check.py
#: --candidates`. Measured on the H200 (fp16): d=64 three consumers (493 TFLOP/s against 406 with
#: two at N = 4096), d=128 ping-pong (594 against 547 without at N = 16384,
#: docs/bench/h200_ws_check_d128_pingpong.txt); persistent blocks at both, which win most at
#: short N (docs/bench/h200_ws_sustained.txt). Shared memory bounds the tiles: at d=256 a
#: 128-row Q tile and two 64-key stages of K and V take 192 KiB of the 227 KiB, which leaves no
#: room for the second Q buffer of a persistent block.
WS_DEFAULTS: dict[int, str] = {
    64: "d64-128x2-c3-po-r24-persist",
    128: "d128-128x2-c2-po-r24-persist",
    256: "d256-64x2-c2-po-r24",
}


def tile_shape(config: AttentionConfig, algorithm: str) -> tuple[int, int]:
    """(rows of Q per block, rows of K/V per step) that `algorithm` uses for `config`."""
    if algorithm == TILED:
        return config.block_m, config.block_n
    if algorithm == TILED_MMA:
        return mma_tile_shape(config.head_dim)
    if algorithm in (TILED_WGMMA, RING):  # the ring's per-device kernel on H100/H200
        return wgmma_tile_shape(config.head_dim)
    if algorithm == TILED_WS:
        return ws_tile_shape(config.head_dim)
    if algorithm == NAIVE:
        return NAIVE_GEMM_TILE, NAIVE_GEMM_TILE
    raise KeyError(f"unknown algorithm {algorithm!r}: known are {', '.join(ALGORITHMS)}")


def mma_tile_shape(head_dim: int) -> tuple[int, int]:
    """Tiles of the tensor-core kernel (gpu/kernels/flash_mma.cu): 128 query rows per block
    (8 warps × 16 rows), and 128 keys per K/V tile at d=64 or 64 at d=128, where two S tiles,
    O and Q in registers leave no room for more (measurements in docs/KERNELS.md)."""
    if head_dim <= 64:
        return 128, 128
    return 128, 64


def wgmma_tile_shape(head_dim: int) -> tuple[int, int]:
    """Tiles of the Hopper kernel (gpu/kernels/flash_wgmma.cu): 128 query rows per block
    (2 warpgroups × 64 rows) and 128 keys per K/V tile at both head dims (64-key tiles at d=128
    avoid its 96 bytes of register spills but measured up to 9% slower; docs/KERNELS.md)."""
    _ = head_dim  # the same tiles at 64 and 128
    return 128, 128


def ws_tile_shape(head_dim: int) -> tuple[int, int]:
    """Tiles of the warp-specialized kernel (gpu/kernels/flash_ws.cu): 64 query rows per
    consumer warpgroup, and its default key tile (`WS_DEFAULTS`; head dims other than 64, 128
    and 256 get the d=128 tiles, which the kernel refuses anyway)."""
    launch = WsLaunch.from_label(WS_DEFAULTS.get(head_dim, WS_DEFAULTS[128]))
    return launch.block_m, launch.block_n


def backward_tile_shape(config: AttentionConfig, algorithm: str) -> tuple[int, int]:
    """(rows of Q per streamed tile, rows of K/V held per block) of `algorithm`'s backward.
    The readable algorithm (and the CPU's tiled backward) uses the config's tiles: block_m
    query rows, block_n keys; naive's GEMMs the naive output tile; the tensor-core kernels the
    launch of gpu/kernels/flash_bwd.cu (gpu.launch.flash_bwd.default_launch: 128 keys per block, 128
    query rows per step at d = 64, 64 at d = 128; other head dims, which it refuses, d = 128's)."""
    if algorithm == TILED:
        return config.block_m, config.block_n
    if algorithm == NAIVE:
        return NAIVE_GEMM_TILE, NAIVE_GEMM_TILE
    if algorithm in ALGORITHMS:
        from .launch.flash_bwd import SUPPORTED_HEAD_DIMS, default_launch  # no device needed

        d = config.head_dim if config.head_dim in SUPPORTED_HEAD_DIMS else 128
        launch = default_launch(d)
        return launch.block_m, launch.block_n
    raise KeyError(f"unknown algorithm {algorithm!r}: known are {', '.join(ALGORITHMS)}")


def dq_pass_tile_shape(config: AttentionConfig, algorithm: str) -> tuple[int, int]:
    """(query rows per block, keys per step) of the deterministic backward's dQ pass, which
    holds Q_i, dO_i and dQ_i while the key tiles stream in a fixed order. The CPU's tiled
    backward uses the config's tiles, as its main pass does; the tensor-core kernels the
    launch of gpu.launch.flash_bwd.default_dq_launch (128 query rows, 64 keys per step)."""
    if algorithm == TILED:
        return config.block_m, config.block_n
    if algorithm in ALGORITHMS and algorithm != NAIVE:
        from .launch.flash_bwd import SUPPORTED_HEAD_DIMS, default_dq_launch  # no device needed

        d = config.head_dim if config.head_dim in SUPPORTED_HEAD_DIMS else 128
        launch = default_dq_launch(d)
        return launch.block_m, launch.block_n
    raise KeyError(
        f"{algorithm!r} has no dQ pass: known fused algorithms are "
        + ", ".join(a for a, info in ALGORITHMS.items() if info.fused)
    )
