// trace.cuh — the trace build of the tiled kernels.
//
// Compiled only with -DTILESCOPE_TRACE (gpu/profiling/trace.py); without it every TRACE_* macro is
// empty and a kernel is exactly the code around them (same SASS). In the trace build one thread per
// block (or per role, in the warp-specialized kernel) writes one row per phase boundary, as it
// passes it, to the extra kernel argument `trace`:
//     int64 row = [block, sm, phase, j, t_ns]      t_ns = %globaltimer, sm = %smid
// Block b owns rows [b·R, (b+1)·R) for a per-kernel R (see each kernel's comment); rows it does
// not reach keep the host's fill value.
//
//   TRACE_PARAM                the extra kernel parameter (empty otherwise)
//   TRACE_BLOCK(block, rows)   this block's first row; thread 0 writes
//   TRACE_MARK(phase, j)       thread 0 writes a row
//   TRACE_SYNC_MARK(phase, j)  a barrier (trace build only), then TRACE_MARK
//   TRACE_SEGMENT(block, rows, first)   this thread's rows start at row `first` of the block
//   TRACE_MARK_IF(writer, phase, j)     the thread for which `writer` holds writes a row
//   TRACE_CURSOR; TRACE_SEEK(block, rows, first)   TRACE_SEGMENT in two steps, for a block that
//                              works on several tiles: each tile's rows are a "block" of their own
//
// `phase` is always one of the codes below, never a bare number.
#pragma once

// ------------------------------------------------------------------------------ phase codes
// What a row's `phase` word says. gpu/profiling/trace_phases.py reads these enums (each
// enumerator's name, value and the comment after it), so the decoder, the trace file format and the
// animation name exactly what the kernels write. One enumerator per line:
// `name = value,  // what it marks`, values 0, 1, 2, ... in order.

// Block-level kernels (flash_readable.cu, flash_mma.cu): thread 0 marks each phase of its block
// as the phase begins.
enum class BlockPhase : int {
    load_Q_i = 0,      // block start: Q_i to shared memory (j = query tile)
    load_K_j = 1,      // K_j and V_j to shared memory (j = key tile)
    compute_S_ij = 2,  // S_ij, its online softmax and O_i += P_ij V_j (j = key tile)
    store_O_i = 3,     // O_i, m_i and l_i to HBM (j = query tile)
    end = 4,           // the block is done (j = query tile)
};

// The warp-specialized kernel (flash_ws.cu): one writer per role, role 0 the producer warp,
// role 1 + c consumer warpgroup c, writes the phase word role_word(role, code).
enum class RolePhase : int {
    load_Q_i = 0,        // producer: Q copy issued; consumer: Q landed
    load_K_j = 1,        // producer: K_j copy issued (its ring stage was free)
    load_V_j = 2,        // producer: V_j copy issued
    store_O_i = 3,       // consumer: epilogue starts
    end = 4,             // role done
    wait_K_j = 5,        // consumer: waiting for K_j (and V_{j-1})
    gemm_issue = 6,      // consumer: its turn on the tensor cores: S_j and P_{j-1} V_{j-1} issued
    online_softmax = 7,  // consumer: S_j landed, softmax starts
    wait_PV = 8,         // consumer: softmax done, waiting for P V
};

// A role's phase word: role · TRACE_ROLE_STRIDE + code (codes stay below the stride).
constexpr int TRACE_ROLE_STRIDE = 256;
constexpr int PRODUCER_ROLE = 0;
__host__ __device__ constexpr int role_word(int role, RolePhase code) {
    return role * TRACE_ROLE_STRIDE + static_cast<int>(code);
}
__host__ __device__ constexpr int phase_word(BlockPhase code) { return static_cast<int>(code); }

#ifdef TILESCOPE_TRACE
#define TRACE_PARAM , long long* __restrict__ trace
#define TRACE_BLOCK(block, rows) long long* trace_row = trace + (long long)(block) * (rows) * 5; \
    const long long trace_block = (block)
#define TRACE_MARK(phase, j) trace_mark(trace_row, trace_block, phase_word(phase), (j))
#define TRACE_SYNC_MARK(phase, j) do { __syncthreads(); TRACE_MARK(phase, j); } while (0)
#define TRACE_SEGMENT(block, rows, first) \
    long long* trace_row = trace + ((long long)(block) * (rows) + (first)) * 5; \
    const long long trace_block = (block)
#define TRACE_MARK_IF(writer, phase, j) \
    do { if (writer) trace_write(trace_row, trace_block, (phase), (j)); } while (0)
#define TRACE_CURSOR long long* trace_row = trace; long long trace_block = 0
#define TRACE_SEEK(block, rows, first) \
    do { trace_row = trace + ((long long)(block) * (rows) + (first)) * 5; trace_block = (block); } while (0)

__device__ __forceinline__ void trace_write(long long*& row, long long block, int phase, int j) {
    unsigned long long t;
    unsigned int sm;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    row[0] = block;
    row[1] = sm;
    row[2] = phase;
    row[3] = j;
    row[4] = (long long)t;
    row += 5;
}
__device__ __forceinline__ void trace_mark(long long*& row, long long block, int phase, int j) {
    if (threadIdx.x == 0) trace_write(row, block, phase, j);
}
#else
#define TRACE_PARAM
#define TRACE_BLOCK(block, rows)
#define TRACE_MARK(phase, j)
#define TRACE_SYNC_MARK(phase, j)
#define TRACE_SEGMENT(block, rows, first)
#define TRACE_MARK_IF(writer, phase, j)
#define TRACE_CURSOR
#define TRACE_SEEK(block, rows, first) do { } while (0)
#endif
