// trace.cuh — the trace build of the tiled kernels.
//
// Compiled only with -DTILESCOPE_TRACE (gpu/trace.py); without it every TRACE_* macro is empty
// and a kernel is exactly the code around them (same SASS). In the trace build one thread per
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
#pragma once

#ifdef TILESCOPE_TRACE
#define TRACE_PARAM , long long* __restrict__ trace
#define TRACE_BLOCK(block, rows) long long* trace_row = trace + (long long)(block) * (rows) * 5; \
    const long long trace_block = (block)
#define TRACE_MARK(phase, j) trace_mark(trace_row, trace_block, (phase), (j))
#define TRACE_SYNC_MARK(phase, j) do { __syncthreads(); TRACE_MARK(phase, j); } while (0)
#define TRACE_SEGMENT(block, rows, first) \
    long long* trace_row = trace + ((long long)(block) * (rows) + (first)) * 5; \
    const long long trace_block = (block)
#define TRACE_MARK_IF(writer, phase, j) \
    do { if (writer) trace_write(trace_row, trace_block, (phase), (j)); } while (0)

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
#endif
