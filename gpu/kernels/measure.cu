// Kernels that serve measurement, not attention.
//
//   launch_gate  holds the stream until the host has queued a whole batch of timed launches.
//                Without it, a host thread that stalls between two launches (the GIL handed to
//                another Python thread, a page fault, a busy CPU) leaves the GPU idle between
//                two CUDA events, and the idle time is measured as kernel time. With it, the
//                launches wait in the queue behind the gate and run back to back once the host
//                opens it. The flag lives in pinned host memory (cudaHostAlloc: under unified
//                addressing its host pointer is valid on the device); the gate gives up after
//                `timeout_ns` of GPU time and says so in `status[1]`, so a host that never opens
//                it (an exception, a full launch queue) cannot hang the device.
//   read_sweep   reads a buffer with 16-byte loads, `passes` times, and keeps the result only
//                behind a condition the data never meets (so the loads cannot be optimized
//                away). Two uses: evicting the L2 cache before a sampled kernel (one pass over a
//                buffer several times the L2: the cache then holds only clean lines of the
//                buffer), and measuring L2 bandwidth (many passes over a buffer that fits in
//                L2; `.cg` loads are cached in L2 only, so every pass crosses the L1-L2 link).
//
// Compiled with NVRTC through gpu/launch/cuda_kernels.py like every kernel of the app.

#include "ptx.cuh"  // global_timer_ns

// One thread spins while status[0] == 0 (host memory, re-read every iteration).
extern "C" __global__ void launch_gate(volatile unsigned int* status, unsigned long long timeout_ns) {
    const unsigned long long t0 = global_timer_ns();
    while (status[0] == 0u) {
        if (global_timer_ns() - t0 > timeout_ns) {
            status[1] = 1u;  // timed out: the host will not trust this batch
            return;
        }
    }
}

// Grid-stride read of n16 16-byte words, `passes` times. CACHE_GLOBAL selects ld.global.cg
// (L2 only) instead of the default caching.
template <bool CACHE_GLOBAL>
__device__ __forceinline__ uint4 load16(const uint4* p) {
    uint4 v;
    if (CACHE_GLOBAL) {
        asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    } else {
        asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    }
    return v;
}

template <bool CACHE_GLOBAL>
__global__ void read_sweep(const uint4* __restrict__ data, unsigned long long n16, int passes,
                           unsigned int* sink) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long start = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int acc = 0u;
    for (int pass = 0; pass < passes; ++pass) {
        unsigned long long i = start;
        // Four independent loads in flight per thread, then the tail.
        for (; i + 3 * stride < n16; i += 4 * stride) {
            const uint4 a = load16<CACHE_GLOBAL>(data + i);
            const uint4 b = load16<CACHE_GLOBAL>(data + i + stride);
            const uint4 c = load16<CACHE_GLOBAL>(data + i + 2 * stride);
            const uint4 d = load16<CACHE_GLOBAL>(data + i + 3 * stride);
            acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
            acc ^= c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
        }
        for (; i < n16; i += stride) {
            const uint4 a = load16<CACHE_GLOBAL>(data + i);
            acc ^= a.x ^ a.y ^ a.z ^ a.w;
        }
        acc += pass;  // passes differ, so the compiler cannot merge them
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;  // practically never: keeps the loads alive
}
