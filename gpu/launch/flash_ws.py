"""Launch the warp-specialized Hopper kernel (gpu/kernels/flash_ws.cu) through CuPy.

Same interface as the other fused kernels: `supports(config)` and
`flash_forward(q, k, v, o, m, l, config)` with C-contiguous (B, h, N, d) 16-bit arrays
(`cupy.float16` for fp16, any 2-byte dtype holding bf16 bit patterns for bf16) and float32
(B, h, N) row statistics m (row max of q·k/√d, natural-log units) and l (row sum of
exp(q·k/√d − m)), so logsumexp = m + log(l). Head dims 64, 128 and 256, any N.

A producer warp moves K and V tiles with the tensor-memory accelerator (TMA), which reads a
tensor map: a 128-byte descriptor of each input (address, sizes, strides, box, swizzle) that
only the driver can encode (`cuTensorMapEncodeTiled`). `tensor_map` calls it through ctypes on
libcuda (CuPy does not wrap it, and NVRTC has no cuda.h: the kernel declares the 128-byte
struct itself) and the result is passed by value, as a one-element numpy array of 128 raw
bytes, which CuPy hands to cuLaunchKernel as the `__grid_constant__` parameter's bytes.

Each template instance is compiled once by NVRTC with `-arch=sm_90a` (wgmma, setmaxnreg) and
kept. `supports` refuses every GPU but compute capability 9.0, and machines without CUDA.
CuPy is imported lazily: `supports` and the variant bookkeeping work on machines without it.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

from ..config import AttentionConfig, ceil_div
from . import flash_launch
from .trace_phases import ROLE_PHASES, ROLE_STRIDE
from .ws_variant import WsLaunch

SOURCE = "flash_ws.cu"
#: NVRTC options: wgmma and setmaxnreg need the architecture-specific target sm_90a.
COMPILE_OPTIONS: tuple[str, ...] = ("-std=c++17", "--use_fast_math", "-arch=sm_90a")
#: Extra option of a checking build: every mbarrier wait traps after ~2 s instead of hanging.
HANG_CHECK = "-DTILESCOPE_HANG_CHECK"
#: Extra option of the trace build (gpu/kernels/trace.cuh; the recorder's TRACE_DEFINE).
TRACE_OPTION = "-DTILESCOPE_TRACE"
SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_DTYPES = ("fp16", "bf16")
REQUIRED_COMPUTE_CAPABILITY = 90
#: K and V bytes of one head that a group of heads may keep in L2 (the H200 has 60 MB); causal
#: blocks of that many heads are interleaved longest first (see "Block order" in the kernel).
L2_GROUP_BYTES = 40 * 2**20
#: Shared memory one block may opt in to on sm_90 (227 KiB).
MAX_SMEM_BYTES = 227 * 1024


#: Default variant per head dim, by its label (`gpu.launch.ws_variant.WsLaunch.label`: d, keys
#: per K/V tile × ring stages, consumer warpgroups of 64 query rows, p = ping-pong / o =
#: intra-warpgroup overlap, producer registers, -persist = persistent blocks). To switch, paste
#: the winner's label from `bench/ws_check.py --candidates`. Measured on the H200 (fp16): d=64
#: three consumers (493 TFLOP/s against 406 with two at N = 4096), d=128 ping-pong (594 against
#: 547 without at N = 16384, docs/bench/h200_ws_check_d128_pingpong.txt); persistent blocks at
#: both, which win most at short N (docs/bench/h200_ws_sustained.txt). Shared memory bounds the
#: tiles: at d=256 a 128-row Q tile and two 64-key stages of K and V take 192 KiB of the
#: 227 KiB, which leaves no room for the second Q buffer of a persistent block.
WS_DEFAULTS: dict[int, str] = {
    64: "d64-128x2-c3-po-r24-persist",
    128: "d128-128x2-c2-po-r24-persist",
    256: "d256-64x2-c2-po-r24",
}


def tile_shape(head_dim: int) -> tuple[int, int]:
    """(query rows per block, keys per K/V tile) of the default variant: 64 query rows per
    consumer warpgroup, and its key tile (head dims other than 64, 128 and 256 get the d=128
    tiles, which the kernel refuses anyway)."""
    launch = WsLaunch.from_label(WS_DEFAULTS.get(head_dim, WS_DEFAULTS[128]))
    return launch.block_m, launch.block_n


def default_launch(head_dim: int) -> WsLaunch:
    """The variant `flash_forward` uses for a head dim (`WS_DEFAULTS`, which the cost model and
    the schedule read through `tile_shape`)."""
    launch = WsLaunch.from_label(WS_DEFAULTS[head_dim])
    if launch.head_dim != head_dim:
        raise ValueError(f"WS_DEFAULTS[{head_dim}] names a d={launch.head_dim} variant")
    return launch


#: The plain variant at each head dim: 2 consumer warpgroups taking turns, overlap on, 128-key
#: tiles (64 at d=256). Every candidate timing times the defaults against them.
BASELINES = ("d64-128x2-c2-po-r24", "d128-128x2-c2-po-r24", "d256-64x2-c2-po-r24")

#: What the candidate timing (`bench/ws_check.py --candidates`) compares,
#: besides the defaults and BASELINES: overlap without ping-pong, with 3 consumers at d = 64
#: and with 2 at d = 128, one block per query tile (the persistent defaults' per-tile twins),
#: and persistent blocks without ping-pong at d = 128.
CANDIDATES = (
    "d64-128x2-c3-o-r24",
    "d128-128x2-c2-o-r24",
    "d64-128x2-c3-po-r24",
    "d128-128x2-c2-o-r24-persist",
)

#: Variants that change one thing of a baseline each, slower than their head dim's default on
#: the H200 (docs/KERNELS.md): compiled and checked so their template parameters stay correct,
#: not timed by --candidates.
CHECKED_VARIANTS = (
    "d64-128x3-c2-po-r24",
    "d64-128x2-c2-o-r24",
    "d64-128x2-c2-p-r24",
    "d64-192x2-c2-po-r24",
    "d128-128x3-c2-po-r24",
    "d128-64x3-c2-po-r24",
    "d128-128x2-c2-p-r24",
    "d128-128x2-c2-po-r40",
    "d128-192x2-c2-po-r24",
    "d256-64x2-c2-o-r24",
    "d256-64x2-c2-p-r24",
    "d256-64x2-c2-po-r24-persist1",  # one Q buffer: 0.95-0.97x the per-tile default
)


def candidate_variants() -> tuple[WsLaunch, ...]:
    """The variants `--candidates` times: the defaults, BASELINES, CANDIDATES."""
    out: list[WsLaunch] = [default_launch(d) for d in SUPPORTED_HEAD_DIMS]
    for label in (*BASELINES, *CANDIDATES):
        v = WsLaunch.from_label(label)
        if v not in out:
            out.append(v)
    return tuple(out)


def all_variants() -> tuple[WsLaunch, ...]:
    """Every variant the GPU check compiles and checks: the defaults first, then the candidates
    (`candidate_variants`), then CHECKED_VARIANTS, which change one thing each
    (ring depth, ping-pong, overlap, producer registers, key tile: 192-key tiles are
    FlashAttention-3's choice at d=64 and close to it at d=128)."""
    out = list(candidate_variants())
    for label in CHECKED_VARIANTS:
        v = WsLaunch.from_label(label)
        if v not in out:
            out.append(v)
    return tuple(out)


def check_launch(launch: WsLaunch) -> None:
    """Raise ValueError for a variant the kernel's static checks would reject."""
    if launch.head_dim not in SUPPORTED_HEAD_DIMS or launch.block_n not in (64, 128, 192):
        raise ValueError(f"bad variant {launch}")
    if launch.consumers not in (2, 3) or launch.stages < 2:
        raise ValueError(f"bad variant {launch}")
    if launch.producer_regs < 24 or launch.producer_regs % 8:
        raise ValueError(f"bad producer register count in {launch}")
    if launch.persistent_q_buffers not in (1, 2):
        raise ValueError(f"a persistent block holds 1 or 2 Q tiles, not {launch}")
    if launch.smem_bytes > MAX_SMEM_BYTES:
        raise ValueError(f"{launch.label} needs {launch.smem_bytes:,} B of shared memory")


# --------------------------------------------------------------------------------------------
# Tensor maps


#: CUtensorMapDataType / CUtensorMapSwizzle / ... values (cuda.h).
_TMA_FLOAT16, _TMA_BFLOAT16 = 6, 9
_TMA_INTERLEAVE_NONE = 0
_TMA_SWIZZLE_128B = 3
_TMA_L2_PROMOTION_256B = 3
_TMA_OOB_FILL_ZERO = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read as 0
TENSOR_MAP_BYTES = 128


@functools.cache
def _encode_tiled() -> Any:
    """cuTensorMapEncodeTiled from the driver library (CUDA 12+)."""
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuTensorMapEncodeTiled
    u32p = ctypes.POINTER(ctypes.c_uint32)
    u64p = ctypes.POINTER(ctypes.c_uint64)
    fn.argtypes = [
        ctypes.c_void_p,  # CUtensorMap* (64-byte aligned)
        ctypes.c_int,  # data type
        ctypes.c_uint32,  # rank
        ctypes.c_void_p,  # global address
        u64p,  # global dims (rank)
        u64p,  # global strides in bytes (rank - 1)
        u32p,  # box dims (rank)
        u32p,  # element strides (rank)
        ctypes.c_int,  # interleave
        ctypes.c_int,  # swizzle
        ctypes.c_int,  # L2 promotion
        ctypes.c_int,  # out-of-bounds fill
    ]
    fn.restype = ctypes.c_int
    return fn


def tensor_map(array: Any, box_rows: int, bf16: bool) -> Any:
    """The TMA descriptor of a C-contiguous (B, h, N, d) 16-bit device array seen as the 3-D
    tensor (d, N, B·h), innermost first, read in boxes of 64 columns × `box_rows` rows with the
    128-byte swizzle that wgmma's descriptors expect. Rows past N of a head are outside the
    tensor: TMA zero-fills them. Returns a one-element numpy array of 128 raw bytes (a kernel
    argument by value)."""
    import numpy as np

    b, h, n, d = (int(x) for x in array.shape)
    if array.data.ptr % 16:
        raise ValueError("TMA needs 16-byte aligned arrays")
    raw = np.zeros(TENSOR_MAP_BYTES + 64, dtype=np.uint8)
    offset = (-raw.ctypes.data) % 64
    dims = (ctypes.c_uint64 * 3)(d, n, b * h)
    strides = (ctypes.c_uint64 * 2)(d * 2, n * d * 2)
    box = (ctypes.c_uint32 * 3)(64, box_rows, 1)
    elem = (ctypes.c_uint32 * 3)(1, 1, 1)
    status = _encode_tiled()(
        raw.ctypes.data + offset,
        _TMA_BFLOAT16 if bf16 else _TMA_FLOAT16,
        3,
        array.data.ptr,
        dims,
        strides,
        box,
        elem,
        _TMA_INTERLEAVE_NONE,
        _TMA_SWIZZLE_128B,
        _TMA_L2_PROMOTION_256B,
        _TMA_OOB_FILL_ZERO,
    )
    if status != 0:
        raise RuntimeError(
            f"cuTensorMapEncodeTiled failed (CUresult {status}) for shape {array.shape}, "
            f"box 64×{box_rows}"
        )
    out = np.zeros(1, dtype=np.dtype((np.void, TENSOR_MAP_BYTES)))
    out.view(np.uint8)[:] = raw[offset : offset + TENSOR_MAP_BYTES]
    return out


def group_heads(config: AttentionConfig) -> int:
    """How many (batch, head) pairs the causal block order interleaves: as many as keep their
    K and V in L2 together. Non-causal blocks go head by head (1)."""
    if not config.causal:
        return 1
    per_head = 2 * config.seq_len * config.head_dim * 2
    return max(1, min(config.bh, L2_GROUP_BYTES // per_head))


def _ws_layout(config: AttentionConfig, launch: WsLaunch) -> tuple[tuple[int, ...], Any]:
    """A 1-D grid of ceil(N / block_m) · B·h blocks (persistent: at most one per SM), and
    arguments that pass Q, K and V as TMA tensor maps (made per launch: they hold the arrays'
    addresses)."""
    import numpy as np

    from .cuda_kernels import device_attribute

    bf16 = config.dtype == "bf16"
    scalars = (
        np.int32(config.seq_len),
        np.int32(config.bh),
        np.int32(group_heads(config)),
        np.float32(flash_launch.scale_log2(config)),
    )

    def arguments(q: Any, k: Any, v: Any, o: Any, m: Any, l: Any) -> tuple[Any, ...]:
        import cupy

        # The tile scheduler's counters, zero for the first launch; the kernel puts them back
        # to zero as it ends. One pair per argument tuple, so two launches that could overlap
        # (different streams) never share them.
        sched = cupy.zeros(2, dtype=cupy.int32)
        return (
            tensor_map(q, launch.block_m, bf16),
            tensor_map(k, launch.block_n, bf16),
            tensor_map(v, launch.block_n, bf16),
            o, m, l, *scalars, sched,
        )  # fmt: skip

    sm_count = device_attribute("MultiProcessorCount") if launch.persistent else 0
    return (launch.launch_blocks(config, sm_count),), arguments


SPEC = flash_launch.KernelSpec(
    name="warp-specialized Hopper kernel",
    source=SOURCE,
    options=COMPILE_OPTIONS,
    head_dims=SUPPORTED_HEAD_DIMS,
    dtypes=SUPPORTED_DTYPES,
    default_launch=default_launch,
    check_launch=check_launch,
    compute_capability=REQUIRED_COMPUTE_CAPABILITY,
    layout=_ws_layout,
)
#: None when the kernel can run a config on this machine, else the reason it cannot.
supports = SPEC.supports
#: The compiled kernel of one variant: get_kernel(launch, causal, bf16, extra_options=()),
#: `extra_options` e.g. HANG_CHECK or the trace build's define.
get_kernel = SPEC.get_kernel
#: Registers, spills and shared memory of a compiled variant: (launch, causal, bf16). The
#: register count is the kernel's cap at entry; setmaxnreg then moves registers from the
#: producer to the consumers (`WsLaunch.consumer_regs`).
kernel_resources = SPEC.kernel_resources
#: The kernel for a config (default variant unless `launch` names one): a 1-D grid.
prepare = SPEC.prepare


def launch_forward(
    q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, config: AttentionConfig, launch: WsLaunch
) -> None:
    """`flash_forward` with an explicit variant (the check script compares variants)."""
    flash_launch.run(prepare(config, launch), q, k, v, o, m, l, config)


def flash_forward(q: Any, k: Any, v: Any, o: Any, m: Any, l: Any, config: AttentionConfig) -> None:
    """O = softmax(Q Kᵀ/√d [causal]) V, warp-specialized on Hopper; also writes m and l.

    Asynchronous like any CUDA launch: it is queued on CuPy's current stream.
    """
    flash_launch.run(prepare(config), q, k, v, o, m, l, config)


# --------------------------------------------------------------------------------------------
# Trace build (for the recorder): the kernel with TILESCOPE_TRACE takes one more argument, an
# int64 buffer of rows [block, sm, phase word, j, t_ns], -1-filled by the host. Block b
# (blockIdx.x, the launch order) owns `trace_rows_per_block` rows; inside them the producer's
# rows come first, then each consumer warpgroup's (`trace_segments`). The phase word is
# role · ROLE_STRIDE + code (`TRACE_ROLES`; the codes are trace.cuh's RolePhase, `TRACE_CODES`).

TRACE_ROLES = ("producer", "consumer 0", "consumer 1", "consumer 2")
#: code -> (name, what the kernel marks), read from trace.cuh's RolePhase
#: (gpu/launch/trace_phases.py).
#: Producer: load_Q_i, load_K_j, load_V_j, end; consumers: all but load_K_j and load_V_j.
TRACE_CODES: dict[int, tuple[str, str]] = {p.code: (p.name, p.what) for p in ROLE_PHASES}


def trace_segments(config: AttentionConfig, launch: WsLaunch | None = None) -> tuple[int, ...]:
    """Rows per role inside a block: (producer, consumer 0, consumer 1, ...)."""
    launch = launch or default_launch(config.head_dim)
    t = ceil_div(config.seq_len, launch.block_n)
    return (2 * t + 2, *([4 * t + 4] * launch.consumers))


def trace_rows_per_block(config: AttentionConfig, launch: WsLaunch | None = None) -> int:
    return sum(trace_segments(config, launch))


def trace_buffer(config: AttentionConfig, prepared: flash_launch.Prepared,
                 launch: WsLaunch | None = None) -> Any:  # fmt: skip
    """The −1-filled int64 (rows, 5) buffer a trace build's launch writes into:
    `prepared(q, k, v, o, m, l, buffer)` with `prepared = prepare(config, launch,
    extra_options=(TRACE_OPTION,))`: `trace_rows_per_block` rows for each of the launch's
    blocks (`WsLaunch.grid_blocks`)."""
    import cupy

    launch = launch or default_launch(config.head_dim)
    blocks = launch.grid_blocks(config)
    if prepared.blocks > blocks:
        raise ValueError("the prepared launch is not one of this variant")
    rows = blocks * trace_rows_per_block(config, launch)
    return cupy.full((rows, 5), -1, dtype=cupy.int64)


def decode_trace_rows(rows: Any) -> list[tuple[int, int, str, str, int, int]]:
    """(block, sm, role, phase, j, t_ns) of every written row (host int64 array (R, 5)), in
    buffer order: per block, the producer's rows, then each consumer's, each in time order."""
    import numpy as np

    rows = np.asarray(rows, dtype=np.int64).reshape(-1, 5)
    out = []
    for block, sm, word, j, t in rows[rows[:, 2] >= 0].tolist():
        role, code = divmod(int(word), ROLE_STRIDE)
        out.append((block, sm, TRACE_ROLES[role], TRACE_CODES[code][0], j, t))
    return out
