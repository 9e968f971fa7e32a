// ptx.cuh — small PTX wrappers the tensor-core kernels share (sm_80 and newer).
//
// Inline PTX keeps the kernels free of CUDA headers (NVRTC compiles them as they are) and makes
// each instruction a learner reads in the papers appear in the code by name:
//   smem_addr                     generic pointer -> 32-bit shared-memory address
//   cp_async_16 / _commit / _wait 16-byte asynchronous copies HBM -> shared memory
//   load_row_stats_async          the backward's LSE2 and D of a query tile -> shared memory
//   fence_proxy_async             generic-proxy smem writes -> visible to wgmma / TMA (sm_90)
//   ldmatrix_x4 / _trans          four 8×8 b16 matrices smem -> the mma register layouts
//   mma_16816                     mma.sync m16n8k16, fp16/bf16 in, fp32 accumulate
//   red_add_f32x2                 two fp32 reductions into global memory (dQ's atomics)
//   fast_exp2, neg_inf            one ex2.approx; the -inf bit pattern
#pragma once

#include "dtypes.cuh"

__device__ __forceinline__ u32 smem_addr(const void* p) {
    // Generic pointer -> 32-bit shared-memory address, the operand form ldmatrix/cp.async take.
    u32 r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\n"
                 : "=r"(r) : "l"(p));
    return r;
}

// One 16-byte asynchronous copy HBM -> shared memory that bypasses L1 (.cg). When `valid` is
// false it copies 0 source bytes and zero-fills the 16 destination bytes: rows past the end of
// the sequence become zeros (never garbage or NaN that could leak into P·V).
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, bool valid) {
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Wait until at most PENDING of this thread's committed copy groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// The backward's per-row statistics of query tile q0.. (BR rows of LSE2 and of D, fp32) into
// stage `st` of a shared buffer that holds LSE2 at [st·2BR, st·2BR+BR) and D after it: one
// 16-byte cp.async for each of the first BR/2 threads. The arrays are padded to whole tiles per
// head, so every chunk is in bounds.
template <int BR>
__device__ __forceinline__ void load_row_stats_async(u32 s_stats, const float* lse2,
                                                     const float* dsum, int q0, int st, int tid) {
    constexpr int STAT_CHUNKS = BR / 4;  // 16-byte chunks of BR floats
    if (tid < 2 * STAT_CHUNKS) {
        const bool is_d = tid >= STAT_CHUNKS;
        const int c = is_d ? tid - STAT_CHUNKS : tid;
        const float* src = (is_d ? dsum : lse2) + q0 + 4 * c;
        cp_async_16(s_stats + (st * 2 * BR + (is_d ? BR : 0) + 4 * c) * 4, src, true);
    }
}

// Make this thread's generic-proxy shared-memory writes (cp.async, st.shared) visible to the
// async proxy (wgmma operand reads, TMA stores) once a barrier has been passed.
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void ldmatrix_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

// D(16×8, fp32) += A(16×16) · B(16×8), fp32 accumulate.
template <bool BF16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    if constexpr (BF16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// p[0] += a, p[1] += b as fp32 reductions resolved in L2 (no value returned). On sm_90 one
// vector instruction covers both (p must be 8-byte aligned): half the instructions, and every
// 32-byte sector a warp touches is filled.
__device__ __forceinline__ void red_add_f32x2(float* p, float a, float b) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(p), "f"(a) : "memory");
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(p + 1), "f"(b) : "memory");
#endif
}

__device__ __forceinline__ float fast_exp2(float x) {  // 2^x; 2^-inf = +0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

// Nanoseconds of the GPU's global timer (%globaltimer; it ticks in steps of about a microsecond).
__device__ __forceinline__ u64 global_timer_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
