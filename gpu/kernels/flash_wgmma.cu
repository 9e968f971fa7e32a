// flash_wgmma.cu — the Hopper (sm_90a) FlashAttention forward kernel: warpgroup MMA (wgmma).
//
// The same algorithm as flash_mma.cu and the animation, on Hopper's own tensor-core instruction:
//
//   for each query tile Q_i (128 rows)                     — one thread block, 2 warpgroups
//       load Q_i once                                        // STEP load_Q_i
//       for each key/value tile j (BC rows)                  — the inner loop
//           K_j, V_j stream HBM -> shared memory               // STEP load_K_j / load_V_j
//           S_ij = Q_i K_jᵀ      (wgmma, B = K_j from smem)    // STEP compute_S_ij
//           online softmax: row max m, rescale, P = exp         // STEP online_softmax
//           O_i += P_ij V_j      (wgmma, A = P in registers)   // STEP accumulate_O_i
//       O_i /= l, write O_i and the row statistics m, l       // STEP store_O_i / store_ml
//
// What is different from the mma.sync kernel, and why it is faster on an H100/H200:
//   * wgmma.mma_async is issued by a whole warpgroup (4 warps, 128 threads) and computes a
//     64×N×16 product in one instruction, reading its B operand (and optionally A) straight from
//     shared memory through a 64-bit "matrix descriptor": no ldmatrix, no register copies of K
//     or V, and about twice the rate mma.sync reaches on this chip.
//   * It is asynchronous: the instruction returns at once, the tensor cores work in the
//     background, and `wgmma.wait_group` waits for them later. So each step issues the next
//     tile's S_{j+1} = Q K_{j+1}ᵀ, and while the tensor cores compute it the warpgroup does the
//     exponentials of tile j on the ordinary ALUs (the same software pipelining as the mma
//     kernel, but now the hardware really runs both at once).
//   * P·V takes P from registers: the S accumulator layout of a warp is exactly the A-operand
//     register layout (both are the mma.sync m16n8k16 layouts, 4 warps stacked), so P is packed
//     to fp16/bf16 in registers and never touches shared memory.
//
// How the work is split:
//   * Block     = 128 query rows of one (batch, head): warpgroups 0 and 1 own 64 rows each.
//   * Warpgroup = 64 rows × BC keys per S tile (one m64nBCk16 wgmma per 16 columns of d), and
//                 64 rows × D of O (one m64nDk16 wgmma per 16 keys).
//   * Warp w of a warpgroup owns rows 16w..16w+15 of its 64; thread (g = lane/4, t = lane%4)
//     holds rows g and g+8 and, in every 8-column slice, columns 2t and 2t+1 — the mma.sync
//     layout, so the row max and row sum need only the 4 threads of a quad (2 shuffles).
//   * All 256 threads load K/V tiles with cp.async into a ring of NS stages (no producer warp:
//     see "Loads" below); one __syncthreads per tile publishes a stage and frees another.
//
// Shared-memory layout: the wgmma "128-byte swizzle" layout (the same XOR swizzle the mma kernel
// uses). A tile of ROWS × D 16-bit values is cut into D/64 column blocks of 64 values (128 bytes
// per row); block h lives at base + h · ROWS · 128, row r of a block at + r · 128, and the 16-byte
// chunk c (values 8c..8c+7) of that row at chunk position c ^ (r % 8). Every tile starts on a
// 1024-byte boundary, because the hardware applies the XOR from address bits 7-9.
//   K_j as B of S = Q K_jᵀ is "K-major" (consecutive values run along d, the contracted dim):
//     descriptor start = block h + 32 bytes · (k-step within the 128-byte row), stride byte
//     offset (SBO) = 1024 (the next 8 keys), leading byte offset unused.
//   V_j as B of O = P V_j is "MN-major" (consecutive values run along d, the output dim), which
//     wgmma reads with its transpose flag (imm-trans-b = 1, allowed for 16-bit types):
//     start = 16 keys · 128 bytes per k-step, SBO = 1024 (the next 8 keys),
//     LBO = BC · 128 (the next 64-column block of d, used when D = 128).
//   Q_i (when A comes from shared memory) is K-major like K.
//
// Loads. The issue suggested a producer warp with cp.async.bulk (TMA's 1-D form). A bulk copy
// moves bytes unchanged, so it cannot write the swizzled layout above, and wgmma's unswizzled
// layout needs 8×16-byte "core matrices" that a row-major K tile is not. So this kernel keeps the
// 16-byte cp.async of the mma kernel (which can write any layout, and zero-fills rows past N),
// issued by all threads, NS stages deep. A TMA tensor map (cp.async.bulk.tensor with
// SWIZZLE_128B) would remove those copy instructions; it needs a CUtensorMap built on the host.
//
// Ordering rules that matter (Hopper has two "proxies" for shared memory):
//   * cp.async writes are generic-proxy writes and wgmma reads through the async proxy, so each
//     thread runs `fence.proxy.async.shared::cta` after its copies land and before the barrier.
//   * Registers an in-flight wgmma reads or writes (S, O, P) must not be touched until the
//     matching wgmma.wait_group; `wgmma.fence` orders earlier register writes (P, the rescaled O)
//     before the next wgmma; `keep_regs` stops the compiler hoisting accumulator reads above a
//     wait.
//
// Storage: fp16 and bf16 are raw 16-bit words (u16); BF16 picks the instruction variants. No
// CUDA headers, so NVRTC compiles this file as is, with -arch=sm_90a (wgmma needs the "a").
//
// Row statistics written to M and L (fp32, one per query row), as in flash_mma.cu:
//   M = max_j (q·k_j · scale)   natural-log units;   L = Σ_j exp(q·k_j · scale − M)
// Inside, the running max is kept in base-2 units (scores × scale × log2 e).

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

// ------------------------------------------------------------------------------------------
// Small PTX wrappers (the same ones flash_mma.cu uses, plus the Hopper ones).

__device__ __forceinline__ u32 smem_addr(const void* p) {
    u32 r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\n"
                 : "=r"(r) : "l"(p));
    return r;
}

// 16-byte asynchronous copy HBM -> shared memory; `valid` false copies 0 bytes and zero-fills.
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, bool valid) {
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// Make this thread's generic-proxy shared-memory writes (cp.async, st.shared) visible to the
// async proxy (wgmma operand reads) once a barrier has been passed.
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void ldmatrix_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

template <bool BF16>
__device__ __forceinline__ u32 pack2(float lo, float hi) {
    u32 r;
    if constexpr (BF16) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    }
    return r;
}

__device__ __forceinline__ float fast_exp2(float x) {  // 2^x; 2^-inf = +0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

// --- wgmma bookkeeping ---------------------------------------------------------------------
// wgmma.fence: earlier register writes (P, a rescaled O) are ordered before the next wgmma.
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
// Close the group of wgmmas issued since the last commit.
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Wait until at most PENDING committed groups of this warpgroup are still running.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
// An empty asm that "rewrites" each register: the compiler cannot move reads of an accumulator
// above the wait that precedes this (volatile asm statements keep their order).
template <int R>
__device__ __forceinline__ void keep_regs(float (&r)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Shared-memory matrix descriptor for the 128-byte-swizzle layout (PTX ISA "Matrix Descriptor"):
// bits 0-13 start address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4,
// 62-63 swizzle mode (1 = 128-byte). Base offset (bits 49-51) stays 0: tiles are 1024-aligned,
// and the +32-byte k-steps inside a row do not change address bits 7-9.
__device__ __forceinline__ u64 sw128_desc(u32 addr, u32 lbo, u32 sbo) {
    return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)((lbo & 0x3FFFFu) >> 4) << 16) |
           ((u64)((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}

// --- wgmma.mma_async wrappers (generated text: only N, the types and operand numbers differ) --
// D(64×N, fp32, in registers) (+)= A(64×16) · B(16×N), one instruction per warpgroup.
// Accumulator register i of a thread: n8 block i / 4, row g + 8·((i / 2) % 2), column 2t + i % 2
// (rows counted within the thread's warp's 16). `scale_d` = 0 makes the instruction overwrite D.
#define WGMMA_ACC_64                                                                               \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                   \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"

#define WGMMA_ACC_OPS_64(C, d)                                                                     \
    C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]),                        \
    C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]),                  \
    C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]),                \
    C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31])

#define WGMMA_ACC_128                                                                              \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                   \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "         \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "         \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

#define WGMMA_ACC_OPS_128(C, d)                                                                    \
    C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]),                        \
    C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]),                  \
    C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]),                \
    C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31]),                \
    C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]),                \
    C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]),                \
    C(d[48]), C(d[49]), C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]),                \
    C(d[56]), C(d[57]), C(d[58]), C(d[59]), C(d[60]), C(d[61]), C(d[62]), C(d[63])

#define WGMMA_SS_64(TY, C)                                                                         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                       \
                 "{" WGMMA_ACC_64 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"                               \
                 : WGMMA_ACC_OPS_64(C, d)                                                          \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d))

#define WGMMA_RS_64(TY, C)                                                                         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                       \
                 "{" WGMMA_ACC_64 "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"               \
                 : WGMMA_ACC_OPS_64(C, d)                                                          \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),          \
                   "n"((int)TRANS_B))

#define WGMMA_SS_128(TY, C)                                                                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                      \
                 "{" WGMMA_ACC_128 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"                              \
                 : WGMMA_ACC_OPS_128(C, d)                                                         \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d))

#define WGMMA_RS_128(TY, C)                                                                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                      \
                 "{" WGMMA_ACC_128 "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"              \
                 : WGMMA_ACC_OPS_128(C, d)                                                         \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),          \
                   "n"((int)TRANS_B))

// ACC = false: D = A·B, and D's old contents are not inputs ("=f"), so the compiler need not keep
// them alive; ACC = true: D += A·B.
template <int N, bool ACC, bool BF16>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], u64 desc_a, u64 desc_b) {
    static_assert(N == 64 || N == 128, "wrappers exist for N = 64 and 128");
    const int scale_d = ACC ? 1 : 0;
    if constexpr (N == 64) {
        if constexpr (BF16) {
            if constexpr (ACC) WGMMA_SS_64("bf16", "+f"); else WGMMA_SS_64("bf16", "=f");
        } else {
            if constexpr (ACC) WGMMA_SS_64("f16", "+f"); else WGMMA_SS_64("f16", "=f");
        }
    } else {
        if constexpr (BF16) {
            if constexpr (ACC) WGMMA_SS_128("bf16", "+f"); else WGMMA_SS_128("bf16", "=f");
        } else {
            if constexpr (ACC) WGMMA_SS_128("f16", "+f"); else WGMMA_SS_128("f16", "=f");
        }
    }
}

// A (64×16) from registers: 4 registers of two 16-bit values per thread, the m16n8k16 A layout
// per warp. TRANS_B = true reads B as MN-major (V); false as K-major (K).
template <int N, bool TRANS_B, bool ACC, bool BF16>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const u32 (&a)[4], u64 desc_b) {
    static_assert(N == 64 || N == 128, "wrappers exist for N = 64 and 128");
    const int scale_d = ACC ? 1 : 0;
    if constexpr (N == 64) {
        if constexpr (BF16) {
            if constexpr (ACC) WGMMA_RS_64("bf16", "+f"); else WGMMA_RS_64("bf16", "=f");
        } else {
            if constexpr (ACC) WGMMA_RS_64("f16", "+f"); else WGMMA_RS_64("f16", "=f");
        }
    } else {
        if constexpr (BF16) {
            if constexpr (ACC) WGMMA_RS_128("bf16", "+f"); else WGMMA_RS_128("bf16", "=f");
        } else {
            if constexpr (ACC) WGMMA_RS_128("f16", "+f"); else WGMMA_RS_128("f16", "=f");
        }
    }
}
// ------------------------------------------------------------------------------------------
// Copy a ROWS×D tile (row-major in HBM, rows `rows_valid` and beyond zero-filled) into the
// 128-byte-swizzle layout with 16-byte cp.async. Consecutive threads take consecutive chunks
// of a row, so each warp reads whole 128-byte lines of HBM. A thread's chunks are NT/CPR rows
// apart (a multiple of 8), so its column, its swizzle XOR and its destination stride are the
// same for all of them: one base address plus compile-time offsets, few registers.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile_async(u32 s_tile, const u16* g_tile, int rows_valid,
                                                int tid) {
    constexpr int CHUNKS_PER_ROW = D / 8;
    constexpr int ROW_STEP = NT / CHUNKS_PER_ROW;  // rows between a thread's chunks
    static_assert(ROW_STEP % 8 == 0 && ROWS % ROW_STEP == 0, "tile/thread mismatch");
    const int r0 = tid / CHUNKS_PER_ROW;
    const int c = tid % CHUNKS_PER_ROW;
    const u16* src0 = g_tile + r0 * D + c * 8;
    const u32 dst0 = s_tile + (c >> 3) * (ROWS * 128) + r0 * 128 + (((c & 7) ^ (r0 & 7)) << 4);
    const int rows_left = rows_valid - r0;  // chunk i is valid when i · ROW_STEP < rows_left
#pragma unroll
    for (int i = 0; i < ROWS / ROW_STEP; ++i) {
        const bool valid = i * ROW_STEP < rows_left;
        // An invalid chunk copies 0 bytes from the tile's first row (always a real address).
        cp_async_16(dst0 + i * ROW_STEP * 128, valid ? src0 + i * ROW_STEP * D : g_tile, valid);
    }
}

// ------------------------------------------------------------------------------------------
// The kernel.
//   D       head dim (64 or 128)
//   BC      key/value rows per tile (64 or 128): the N of the S wgmma
//   NS      K/V ring stages (2 or 3)
//   Q_REGS  Q as the register A operand of S = Q Kᵀ (else A from shared memory)
//   CAUSAL  key j may be seen by query i only when j <= i
//   BF16    bf16 inputs/outputs (else fp16)
// Grid: (ceil(N / 128), batch·heads). Block: 256 threads (2 warpgroups). Dynamic shared memory:
// 1024 (alignment slack) + (128 + 2·NS·BC) · D · 2 bytes.
//
// The ring. Copy group i (committed by every thread) holds K_i and V_{i-1}; group 0 holds Q and
// K_0. Step j needs K_{j+1} (for S_{j+1}) and V_j, i.e. group j+1, and commits group j+NS:
// K_{j+NS} into the stage K_j used (S_j finished in step j-1) and V_{j+NS-1} into the stage of
// V_{j-1} (P V_{j-1} finished in step j-1). So `cp.async.wait_group NS-2` at the top of step j.
//
// Order of work in step j (software pipelining across the asynchronous tensor cores):
//     [wait copies, fence, barrier]  prefetch group j+NS
//     issue S_{j+1} = Q K_{j+1}ᵀ  (async)
//     P_j = exp2(S_j·c − m) on the ALUs, row sums      <- overlaps S_{j+1}
//     issue O += P_j V_j  (async)
//     wait S_{j+1}; mask it if it is an edge tile; its row max   <- overlaps P_j V_j
//     wait P_j V_j; rescale O and l if a row max grew (rare, see "lazy rescaling")
template <int D, int BC, int NS, bool Q_REGS, bool CAUSAL, bool BF16>
__global__ void __launch_bounds__(256, 1)
flash_wgmma_fwd(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V,
                u16* __restrict__ O, float* __restrict__ M, float* __restrict__ L, int N,
                float scale_log2)  // scale_log2 = log2(e) / sqrt(D)
{
    constexpr int BR = 128;                // query rows per block: 2 warpgroups × 64
    constexpr int NT = 256;                // threads
    constexpr int K_STEPS = D / 16;        // k-steps of S = Q Kᵀ (contraction over d)
    constexpr int PV_STEPS = BC / 16;      // k-steps of O += P V (contraction over keys)
    constexpr int S_REGS = BC / 2;         // fp32 S accumulators per thread (64×BC / 128)
    constexpr int O_REGS = D / 2;          // fp32 O accumulators per thread (64×D / 128)
    constexpr u32 Q_BYTES = BR * D * 2;
    constexpr u32 KV_BYTES = BC * D * 2;   // one K or V stage
    static_assert(D == 64 || D == 128, "head dim 64 or 128");
    static_assert(BC == 64 || BC == 128, "key tile 64 or 128");
    static_assert(NS >= 2, "at least double buffering");

    extern __shared__ __align__(128) unsigned char smem_raw[];
    const u32 sQ = (smem_addr(smem_raw) + 1023u) & ~1023u;  // swizzle atoms need 1024 B
    const u32 sK = sQ + Q_BYTES;           // K_t in stage t % NS: sK + (t % NS) · KV_BYTES
    const u32 sV = sK + NS * KV_BYTES;     // V_t likewise

    const int tid = threadIdx.x;
    const int wg = tid >> 7;               // warpgroup 0 or 1: rows 64·wg .. 64·wg + 63
    const int warp = (tid >> 5) & 3;       // warp within the warpgroup: 16 of those rows
    const int lane = tid & 31;
    const int g = lane >> 2;               // this thread's rows: g and g + 8 of the warp's 16
    const int t = lane & 3;                // its column pair in every 8-column slice: 2t, 2t+1

    // Causal blocks near the end of the sequence have the most key tiles: launch them first.
    const int q_block = CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int q0 = q_block * BR;
    const int warp_row0 = q0 + wg * 64 + warp * 16;  // first query row of this warp
    const size_t head = (size_t)blockIdx.y * N * D;
    const u16* Qh = Q + head;
    const u16* Kh = K + head;
    const u16* Vh = V + head;

    // Key tiles this block visits (causal: up to the one holding its last row's diagonal).
    int kv_tiles = (N + BC - 1) / BC;
    if (CAUSAL) {
        const int last_row = min(q0 + BR, N) - 1;
        kv_tiles = min(kv_tiles, last_row / BC + 1);
    }

    // STEP load_Q_i — Q_i (and K_0) HBM -> shared memory: copy group 0 ...
    load_tile_async<BR, D, NT>(sQ, Qh + (size_t)q0 * D, N - q0, tid);
    // STEP load_K_j
    load_tile_async<BC, D, NT>(sK, Kh, N, tid);
    cp_async_commit();
    // STEP load_V_j — ... then groups 1 .. NS-1: K_i and V_{i-1}, still in flight during S_0.
#pragma unroll
    for (int i = 1; i < NS; ++i) {
        if (i < kv_tiles)
            load_tile_async<BC, D, NT>(sK + i * KV_BYTES, Kh + (size_t)i * BC * D, N - i * BC, tid);
        if (i - 1 < kv_tiles)
            load_tile_async<BC, D, NT>(sV + (i - 1) * KV_BYTES, Vh + (size_t)(i - 1) * BC * D,
                                       N - (i - 1) * BC, tid);
        cp_async_commit();
    }
    cp_async_wait<NS - 1>();  // group 0 (Q, K_0) has landed for this thread's copies ...
    fence_proxy_async();      // ... is visible to the tensor cores' async proxy ...
    __syncthreads();          // ... and everyone's copies are.

    // STEP load_Q_i — with Q_REGS, shared memory -> registers once (ldmatrix.x4 gives the
    // m16n8k16 A layout, which is wgmma's register-A layout for each warp's 16 rows).
    u32 q_frag[Q_REGS ? K_STEPS : 1][4];
    if constexpr (Q_REGS) {
        const int r = wg * 64 + warp * 16 + (lane & 15);
        const int half = lane >> 4;
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk) {
            const int c = 2 * (kk & 3) + half;  // 16-byte chunk within the 64-column block
            const u32 addr = sQ + (kk >> 2) * (BR * 128) + r * 128 + ((c ^ (r & 7)) << 4);
            ldmatrix_x4(addr, q_frag[kk][0], q_frag[kk][1], q_frag[kk][2], q_frag[kk][3]);
        }
    }

    float m_run[2] = {neg_inf(), neg_inf()};  // true running row max (base 2), for store_ml
    float l_run[2] = {0.f, 0.f};              // this thread's share of the row sums (vs m_ref)
    float m_ref[2] = {neg_inf(), neg_inf()};  // reference max of O and l (lazy rescaling)
    float m_base[2] = {0.f, 0.f};             // m_ref, or 0 while m_ref is still -inf
    float m_new[2];                           // reference after the pending rescale
    float o_acc[O_REGS];
#pragma unroll
    for (int i = 0; i < O_REGS; ++i) o_acc[i] = 0.f;

    // STEP compute_S_ij — issue S = Q_i K_jᵀ for this warpgroup's 64 rows × BC keys: D/16
    // wgmmas (one per 16 columns of d), committed as one group. Returns at once.
    auto compute_S = [&](float (&s)[S_REGS], int j) {
        const u32 k_stage = sK + (j % NS) * KV_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk) {
            const u32 k_off = (kk >> 2) * (BC * 128) + (kk & 3) * 32;
            const u64 desc_k = sw128_desc(k_stage + k_off, 16, 1024);
            if constexpr (Q_REGS) {
                if (kk == 0) wgmma_rs<BC, false, false, BF16>(s, q_frag[kk], desc_k);
                else wgmma_rs<BC, false, true, BF16>(s, q_frag[kk], desc_k);
            } else {
                const u32 q_off = (kk >> 2) * (BR * 128) + wg * 64 * 128 + (kk & 3) * 32;
                const u64 desc_q = sw128_desc(sQ + q_off, 16, 1024);
                if (kk == 0) wgmma_ss<BC, false, BF16>(s, desc_q, desc_k);
                else wgmma_ss<BC, true, BF16>(s, desc_q, desc_k);
            }
        }
        wgmma_commit();
    };

    // Mask keys past the end of the sequence and (causal) keys after the query: -inf scores
    // become exactly 0 after the exponential. Only edge tiles pay for this.
    auto mask_edges = [&](float (&s)[S_REGS], int j) {
        const int kv0 = j * BC;
        if (kv0 + BC > N || (CAUSAL && kv0 + BC - 1 > warp_row0)) {
#pragma unroll
            for (int i = 0; i < S_REGS; ++i) {
                const int col = kv0 + (i >> 2) * 8 + 2 * t + (i & 1);
                const int row = warp_row0 + g + ((i >> 1) & 1) * 8;
                if (col >= N || (CAUSAL && col > row)) s[i] = neg_inf();
            }
        }
    };

    // STEP online_softmax — part 1: the row max of a new S tile. Lazy rescaling as in
    // flash_mma.cu: the reference m_ref moves only when a row max grows by more than 2^8, so P
    // stays < 256 and the rescale of O and l is rare; one warp-wide vote decides it. Returns
    // whether this warp must rescale (done by `rescale` once no wgmma is writing O).
    constexpr float RESCALE_SLACK = 8.f;
    auto new_max = [&](float (&s)[S_REGS]) -> bool {
        float tile_max[2] = {neg_inf(), neg_inf()};
#pragma unroll
        for (int i = 0; i < S_REGS; i += 4) {
            tile_max[0] = fmaxf(tile_max[0], fmaxf(s[i], s[i + 1]));
            tile_max[1] = fmaxf(tile_max[1], fmaxf(s[i + 2], s[i + 3]));
        }
        bool grow[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
            tile_max[r] *= scale_log2;
            m_run[r] = fmaxf(m_run[r], tile_max[r]);
            grow[r] = tile_max[r] > m_ref[r] + RESCALE_SLACK;  // always true on a first finite max
            m_new[r] = grow[r] ? tile_max[r] : m_ref[r];
        }
        return __any_sync(0xffffffffu, grow[0] || grow[1]);
    };
    auto rescale = [&]() {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float alpha = (m_new[r] != m_ref[r]) ? fast_exp2(m_ref[r] - m_new[r]) : 1.f;
            m_ref[r] = m_new[r];
            m_base[r] = (m_new[r] == neg_inf()) ? 0.f : m_new[r];  // never exp2(-inf - -inf)
            l_run[r] *= alpha;
#pragma unroll
            for (int i = 2 * r; i < O_REGS; i += 4) {
                o_acc[i] *= alpha;
                o_acc[i + 1] *= alpha;
            }
        }
    };

    auto exp_and_pv = [&](float (&s)[S_REGS], int j) {
        // STEP online_softmax — part 2: P = 2^(S·c − m_ref), one FMA and one ex2 per score, row
        // sums, and P packed to 16-bit pairs in the register-A layout of the P·V wgmma: for
        // k-step kk (keys 16kk..16kk+15) a0 = row g keys 2t,2t+1; a1 = row g+8; a2, a3 = the
        // same 8 keys further on — exactly S registers 8kk .. 8kk+7.
        u32 p_frag[PV_STEPS][4];
#pragma unroll
        for (int kk = 0; kk < PV_STEPS; ++kk) {
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const int i = 8 * kk + e;
                const float p = fast_exp2(fmaf(s[i], scale_log2, -m_base[(e >> 1) & 1]));
                l_run[(e >> 1) & 1] += p;
                s[i] = p;
            }
            p_frag[kk][0] = pack2<BF16>(s[8 * kk + 0], s[8 * kk + 1]);
            p_frag[kk][1] = pack2<BF16>(s[8 * kk + 2], s[8 * kk + 3]);
            p_frag[kk][2] = pack2<BF16>(s[8 * kk + 4], s[8 * kk + 5]);
            p_frag[kk][3] = pack2<BF16>(s[8 * kk + 6], s[8 * kk + 7]);
        }
        // STEP accumulate_O_i — O_i += P_ij V_j: BC/16 wgmmas m64nDk16, A = P from registers,
        // B = V_j from shared memory read transposed (MN-major), committed as one group.
        const u32 v_stage = sV + (j % NS) * KV_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < PV_STEPS; ++kk) {
            wgmma_rs<D, true, true, BF16>(o_acc, p_frag[kk],
                                          sw128_desc(v_stage + kk * 16 * 128, BC * 128, 1024));
        }
        wgmma_commit();
    };

    // Top of every step: this thread's copies of group j+1 have landed, are visible to the
    // async proxy, and (barrier) so are everyone's; all wgmmas of step j-1 are complete in both
    // warpgroups, so their stages may be overwritten.
    auto sync_tile = [&]() {
        cp_async_wait<NS - 2>();
        fence_proxy_async();
        __syncthreads();
    };

    auto step = [&](float (&s_cur)[S_REGS], float (&s_next)[S_REGS], int j) {
        sync_tile();
        // STEP load_K_j / STEP load_V_j — prefetch K_{j+NS} and V_{j+NS-1} (copy group j+NS).
        {
            const int tk = j + NS;
            if (tk < kv_tiles)
                load_tile_async<BC, D, NT>(sK + (tk % NS) * KV_BYTES, Kh + (size_t)tk * BC * D,
                                           N - tk * BC, tid);
            const int tv = j + NS - 1;
            if (tv < kv_tiles)
                load_tile_async<BC, D, NT>(sV + (tv % NS) * KV_BYTES, Vh + (size_t)tv * BC * D,
                                           N - tv * BC, tid);
            cp_async_commit();
        }
        compute_S(s_next, j + 1);  // tensor cores: S_{j+1} ...
        exp_and_pv(s_cur, j);      // ... while the ALUs do exp of S_j; then P_j V_j (async)
        wgmma_wait<1>();           // S_{j+1} done (P_j V_j may still run)
        keep_regs(s_next);
        mask_edges(s_next, j + 1);
        const bool must_rescale = new_max(s_next);
        wgmma_wait<0>();           // P_j V_j done: O may be touched
        keep_regs(o_acc);
        if (must_rescale) rescale();
    };
    auto last_step = [&](float (&s_cur)[S_REGS], int j) {
        sync_tile();
        exp_and_pv(s_cur, j);
        wgmma_wait<0>();
        keep_regs(o_acc);
    };

    float s_a[S_REGS], s_b[S_REGS];
    compute_S(s_a, 0);
    wgmma_wait<0>();
    keep_regs(s_a);
    mask_edges(s_a, 0);
    if (new_max(s_a)) rescale();
    // Unrolled by two so that S_j and S_{j+1} swap roles without register copies.
    int j = 0;
    for (; j + 2 < kv_tiles; j += 2) {
        step(s_a, s_b, j);
        step(s_b, s_a, j + 1);
    }
    if (j + 1 < kv_tiles) {
        step(s_a, s_b, j);
        last_step(s_b, j + 1);
    } else {
        last_step(s_a, j);
    }

    // Finish the rows: full row sums (quad reduction), then O_i / l.
    float inv_l[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
        inv_l[r] = (l_run[r] == 0.f || l_run[r] != l_run[r]) ? 1.f : 1.f / l_run[r];
        // For store_ml, l relative to the true row max m_run rather than the reference m_ref.
        if (m_run[r] != neg_inf()) l_run[r] *= fast_exp2(m_ref[r] - m_run[r]);
    }

    // STEP store_O_i — stage this warp's 16×D rows in its own rows of the Q tile (only its own
    // warpgroup's wgmmas or its own ldmatrix read them, all complete), then 16-byte coalesced
    // stores to HBM.
    {
        const int r_lo = wg * 64 + warp * 16 + g;  // block-local rows r_lo and r_lo + 8
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
            const u32 addr =
                sQ + (dt >> 3) * (BR * 128) + r_lo * 128 + (((dt & 7) ^ g) << 4) + 4 * t;
            const u32 lo = pack2<BF16>(o_acc[4 * dt] * inv_l[0], o_acc[4 * dt + 1] * inv_l[0]);
            const u32 hi = pack2<BF16>(o_acc[4 * dt + 2] * inv_l[1], o_acc[4 * dt + 3] * inv_l[1]);
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(lo) : "memory");
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr + 8 * 128), "r"(hi) : "memory");
        }
        __syncwarp();
        constexpr int CHUNKS_PER_ROW = D / 8;
        u16* Oh = O + head;
#pragma unroll
        for (int i = 0; i < 16 * CHUNKS_PER_ROW / 32; ++i) {
            const int id = lane + 32 * i;
            const int r = id / CHUNKS_PER_ROW;  // 0..15 within the warp
            const int c = id % CHUNKS_PER_ROW;
            const int rb = wg * 64 + warp * 16 + r;  // block-local row
            const int row = q0 + rb;
            u32 x0, x1, x2, x3;
            asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
                         : "r"(sQ + (c >> 3) * (BR * 128) + rb * 128 + (((c & 7) ^ (rb & 7)) << 4))
                         : "memory");
            if (row < N) {
                u16* dst = Oh + (size_t)row * D + c * 8;
                asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(x0),
                             "r"(x1), "r"(x2), "r"(x3) : "memory");
            }
        }
    }

    // STEP store_ml — m in natural-log units (m_run · ln 2), l as is.
    if (t == 0) {
        const size_t stat = (size_t)blockIdx.y * N;
        const float ln2 = 0.6931471805599453f;
        const int row_a = warp_row0 + g;
        const int row_b = row_a + 8;
        if (row_a < N) {
            M[stat + row_a] = m_run[0] * ln2;
            L[stat + row_a] = l_run[0];
        }
        if (row_b < N) {
            M[stat + row_b] = m_run[1] * ln2;
            L[stat + row_b] = l_run[1];
        }
    }
}
