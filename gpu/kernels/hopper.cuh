// hopper.cuh — sm_90a building blocks: warpgroup MMA (wgmma), shared-memory matrix descriptors,
// mbarriers, the tensor-memory accelerator (TMA), register reallocation and named barriers.
//
// Compiled by NVRTC with -arch=sm_90a (wgmma and setmaxnreg exist only on the "a" target).
//
//   wgmma_fence / _commit / _wait   bookkeeping of the asynchronous warpgroup MMA
//   keep_regs                       pin accumulator reads below the wait that completes them
//   sw128_desc                      descriptor of a 128-byte-swizzled tile (the layout TMA writes)
//   wgmma_ss / wgmma_rs             D(64×N) (+)= A(64×16)·B(16×N), A from smem or registers
//   load_tile_sw128_async           cp.async of a row-major tile into the 128-byte-swizzle layout
//   stmatrix_x4_trans               accumulator fragments -> shared memory, transposed
//   TmaMap                          the 128-byte CUtensorMap, built on the host
//   mbar_*                          mbarrier init / arrive / expect_tx / wait (parity)
//   tma_load_3d                     cp.async.bulk.tensor: one box HBM -> smem, completes on an mbarrier
//   reg_alloc / reg_dealloc         setmaxnreg: move registers between warpgroup roles
//   NamedBarrier                    every named barrier id a kernel uses, in one enum
//   named_bar_sync / _arrive        bar.sync / bar.arrive on barriers 1..15 with a thread count
//
// With -DTILESCOPE_HANG_CHECK every mbarrier wait gives up after about two seconds and traps, so a
// pipeline bug ends the launch with an error instead of hanging the GPU.
#pragma once

#include "ptx.cuh"

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
                 "{" WGMMA_ACC_64 "}, %32, %33, p, 1, 1, 0, %35;\n}\n"                             \
                 : WGMMA_ACC_OPS_64(C, d)                                                          \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"((int)TRANS_B))

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
                 "{" WGMMA_ACC_128 "}, %64, %65, p, 1, 1, 0, %67;\n}\n"                            \
                 : WGMMA_ACC_OPS_128(C, d)                                                         \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"((int)TRANS_B))

#define WGMMA_RS_128(TY, C)                                                                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                      \
                 "{" WGMMA_ACC_128 "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"              \
                 : WGMMA_ACC_OPS_128(C, d)                                                         \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),          \
                   "n"((int)TRANS_B))

// N = 192 (S of a 192-key tile): SS only.
#define WGMMA_ACC_192                                                                              \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                   \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "         \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "         \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "         \
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "         \
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"

#define WGMMA_ACC_OPS_192(C, d)                                                                    \
    C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]),                        \
    C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]),                  \
    C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]),                \
    C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31]),                \
    C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]),                \
    C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]),                \
    C(d[48]), C(d[49]), C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]),                \
    C(d[56]), C(d[57]), C(d[58]), C(d[59]), C(d[60]), C(d[61]), C(d[62]), C(d[63]),                \
    C(d[64]), C(d[65]), C(d[66]), C(d[67]), C(d[68]), C(d[69]), C(d[70]), C(d[71]),                \
    C(d[72]), C(d[73]), C(d[74]), C(d[75]), C(d[76]), C(d[77]), C(d[78]), C(d[79]),                \
    C(d[80]), C(d[81]), C(d[82]), C(d[83]), C(d[84]), C(d[85]), C(d[86]), C(d[87]),                \
    C(d[88]), C(d[89]), C(d[90]), C(d[91]), C(d[92]), C(d[93]), C(d[94]), C(d[95])

#define WGMMA_SS_192(TY, C)                                                                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n192k16.f32." TY "." TY " "                      \
                 "{" WGMMA_ACC_192 "}, %96, %97, p, 1, 1, 0, 0;\n}\n"                              \
                 : WGMMA_ACC_OPS_192(C, d)                                                         \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d))

// ACC = false: D = A·B, and D's old contents are not inputs ("=f"), so the compiler need not keep
// them alive; ACC = true: D += A·B. TRANS_B = true reads B as MN-major (N = 64 and 128 only).
template <int N, bool ACC, bool BF16, bool TRANS_B = false>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], u64 desc_a, u64 desc_b) {
    static_assert(N == 64 || N == 128 || N == 192, "wrappers exist for N = 64, 128 and 192");
    static_assert(!TRANS_B || N != 192, "the N = 192 wrapper reads B K-major only");
    const int scale_d = ACC ? 1 : 0;
    if constexpr (N == 64) {
        if constexpr (BF16) {
            if constexpr (ACC) WGMMA_SS_64("bf16", "+f"); else WGMMA_SS_64("bf16", "=f");
        } else {
            if constexpr (ACC) WGMMA_SS_64("f16", "+f"); else WGMMA_SS_64("f16", "=f");
        }
    } else if constexpr (N == 128) {
        if constexpr (BF16) {
            if constexpr (ACC) WGMMA_SS_128("bf16", "+f"); else WGMMA_SS_128("bf16", "=f");
        } else {
            if constexpr (ACC) WGMMA_SS_128("f16", "+f"); else WGMMA_SS_128("f16", "=f");
        }
    } else {
        if constexpr (BF16) {
            if constexpr (ACC) WGMMA_SS_192("bf16", "+f"); else WGMMA_SS_192("bf16", "=f");
        } else {
            if constexpr (ACC) WGMMA_SS_192("f16", "+f"); else WGMMA_SS_192("f16", "=f");
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

// --- Shared-memory tiles in the 128-byte-swizzle layout ---------------------------------------
// Copy a ROWS×D tile (row-major in HBM, rows `rows_valid` and beyond zero-filled) into the
// 128-byte-swizzle layout with 16-byte cp.async. Consecutive threads take consecutive chunks
// of a row, so each warp reads whole 128-byte lines of HBM. A thread's chunks are NT/CPR rows
// apart (a multiple of 8), so its column, its swizzle XOR and its destination stride are the
// same for all of them: one base address plus compile-time offsets, few registers.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile_sw128_async(u32 s_tile, const u16* g_tile, int rows_valid,
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

// Four 8×8 b16 matrices registers -> shared memory, transposed (the inverse of
// ldmatrix.trans): register i of a thread holds row lane/4, columns 2·(lane%4) and +1 of matrix
// i, i.e. one m16n8k16 accumulator fragment packed to 16-bit pairs; lanes 8i..8i+7 give the
// addresses of the 8 rows of matrix i as stored, each row 16 bytes (8 values) — so matrix i is
// written with its columns as rows. sm_90.
__device__ __forceinline__ void stmatrix_x4_trans(u32 addr, u32 r0, u32 r1, u32 r2, u32 r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

// --- TMA and mbarriers ----------------------------------------------------------------------
// A CUtensorMap: 128 opaque bytes, 64-byte aligned, encoded on the host by the driver
// (cuTensorMapEncodeTiled) and passed by value as a `const __grid_constant__` kernel parameter
// (the copy engine reads it from the parameter space). Declared here because NVRTC has no cuda.h.
struct __align__(64) TmaMap {
    u64 words[16];
};

// Fetch a tensor map into the copy engine's descriptor cache ahead of the first copy.
__device__ __forceinline__ void tma_prefetch(const TmaMap& map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(&map)) : "memory");
}

// One box of a 3-D tensor (coordinates innermost first: column, row, matrix) -> shared memory
// at `dst`, written in the map's swizzle; the copy adds its bytes to the transaction count of
// mbarrier `bar`, which completes the current phase once all expected bytes have landed.
// Coordinates outside the tensor are zero-filled (rows past N read as zeros).
__device__ __forceinline__ void tma_load_3d(u32 dst, const TmaMap& map, u32 bar, int c0, int c1,
                                            int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5}], [%2];\n"
        ::"r"(dst), "l"(reinterpret_cast<u64>(&map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

// An mbarrier is a 64-bit shared-memory word: an arrival count that resets each phase, a
// transaction (byte) count, and a phase bit. Waiters wait for the phase with a given parity to
// complete: phase k of a barrier used once per ring round has parity k & 1.
__device__ __forceinline__ void mbar_init(u32 bar, u32 arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// Make the initialised barriers visible to the copy engine (the async proxy) and other threads;
// a __syncthreads must follow before anyone uses them.
__device__ __forceinline__ void mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival, and `bytes` more bytes to expect before the phase can complete (the producer's
// announcement of a TMA copy).
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
// Order this thread's earlier shared-memory accesses (ordinary loads and stores: the generic
// proxy) before later accesses by the copy engine (the async proxy), e.g. before a TMA copy
// overwrites a buffer the thread has just used; an mbarrier arrival then publishes it.
__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(u32 bar, u32 parity) {
    u32 done;
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done != 0;
}
// Wait until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
#ifdef TILESCOPE_HANG_CHECK
    if (mbar_try_wait(bar, parity)) return;
    const u64 t0 = global_timer_ns();
    while (!mbar_try_wait(bar, parity)) {
        if (global_timer_ns() - t0 > 2000000000ull) __trap();  // 2 s: a pipeline bug, not a wait
    }
#else
    asm volatile(
        "{\n.reg .pred p;\nLAB_WAIT:\n"  // labels are local to the { } scope
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra LAB_WAIT;\n}\n" ::"r"(bar), "r"(parity) : "memory");
#endif
}

// End the basic block once `x` is computed: a branch on x that is never taken (x is a sum of
// exponentials, never the all-ones NaN pattern) around an instruction that does nothing.
// ptxas schedules within basic blocks, so the work x depends on stays above whatever follows,
// e.g. a wgmma.wait_group it would otherwise hoist (waiting early is always safe).
__device__ __forceinline__ void end_block_after(float x) {
    if (__float_as_uint(x) == 0xffffffffu) asm volatile("nanosleep.u32 0;\n" ::: "memory");
}

// --- Warpgroup roles ------------------------------------------------------------------------
// setmaxnreg: every thread of the warpgroup runs the same one. `dec` gives registers back to
// the SM's pool (the producer needs few), `inc` takes them (the consumers hold S, P and O).
// Only effective when the kernel starts with a register cap (__launch_bounds__(threads, 1)).
template <int REGS>
__device__ __forceinline__ void reg_dealloc() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void reg_alloc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

// Named barrier ids, all in one place so two uses can never share an id by accident (as
// FlashAttention-3's named_barrier.hpp does). Barrier 0 is __syncthreads and is never named;
// the hardware has 16, so ids run 1..MAX_NAMED_BARRIER.
//   PingPongTurn0 + c   consumer warpgroup c's turn on the tensor cores (flash_ws.cu, PINGPONG;
//                       c = 0..2, one id per consumer)
enum class NamedBarrier : int {
    PingPongTurn0 = 1,
    PingPongTurn1 = 2,
    PingPongTurn2 = 3,
};
constexpr int MAX_NAMED_BARRIER = 15;
// The id of consumer warpgroup `c`'s ping-pong turn.
__device__ __forceinline__ int pingpong_turn_barrier(int c) {
    return static_cast<int>(NamedBarrier::PingPongTurn0) + c;
}

// Named barriers 1..15 (0 is __syncthreads): `sync` waits until `threads` threads have arrived
// (itself included), `arrive` counts this thread without waiting.
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
