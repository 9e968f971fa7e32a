// Row softmax of naive attention: P = softmax(S) along each row, S and P in HBM.
//
// This is the middle kernel of the naive path (GEMM -> softmax -> GEMM). It is memory-bound:
// it does a handful of flops per element, so its cost is the bytes it moves. The lesson needs
// it to move exactly what the cost model says: each row of S read ONCE from HBM, each row of P
// written ONCE to HBM. A textbook softmax reads the row three times (max, sum, normalize); here
// the row is read once into on-chip shared memory and the max, sum and write passes run over
// that copy.
//
// Layout: S and P are (rows, n) row-major, rows = B*h*N and n = N; row r is query r % n of its
// head. Input and output share one dtype (fp32, fp16 or bf16); all math is fp32.
//
// Causal mask by index: in query row q, column c > q is masked: probability exactly 0 (its S
// value is read with the row but never used).
//
// Kernels in this file:
//   softmax_rows_smem<T, VEC>     one thread block per row; the row is staged in dynamic shared
//                                 memory (n * sizeof(T) bytes). Single read of S. Used whenever
//                                 the row (plus 1 KB of slack) fits in the device's opt-in
//                                 shared memory (232,448 B on Hopper: n <= 115,712 for
//                                 fp16/bf16, n <= 57,856 for fp32).
//   softmax_rows_twopass<T, VEC>  for longer rows only: pass 1 reads the row with an online
//                                 max/sum (running max, rescaled running sum), pass 2 reads it
//                                 AGAIN to write P. That is two reads of S; the backend adds the
//                                 extra read to the run's HBM bytes and says so in its message.
// VEC is how many elements one thread moves per memory access: 16 bytes (8 fp16/bf16, 4 fp32)
// when n allows 16-byte aligned rows, else 1.

// ---------------------------------------------------------------------------------------------
// Element types (dtypes.cuh): fp16 and bf16 are carried as raw 16-bit patterns and converted
// with PTX instructions; warp reductions from reductions.cuh. No CUDA headers: NVRTC compiles
// this file with this folder on its include path.

#include "dtypes.cuh"
#include "reductions.cuh"

// ---------------------------------------------------------------------------------------------
// The softmax the naive path uses: one block per row, row held in shared memory.
//
// Each thread owns the chunks c = threadIdx.x, threadIdx.x + blockDim.x, ... of its row (a chunk
// is VEC consecutive elements). It copies its chunks from HBM into shared memory while taking
// their max, then reads only ITS OWN chunks back for the sum and for the output, so shared memory
// is just on-chip room for the row: no thread reads another's chunk, and the only barriers are
// those inside the two block reductions.

template <typename T, int VEC>
__global__ void softmax_rows_smem(const T* __restrict__ S, T* __restrict__ P, long long rows,
                                  int n, int causal) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Pack<T, VEC>* row_buf = reinterpret_cast<Pack<T, VEC>*>(smem_raw);  // n / VEC chunks
    __shared__ float scratch[32];

    const int chunks = n / VEC;  // the host picks VEC so that it divides n
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const Pack<T, VEC>* s = reinterpret_cast<const Pack<T, VEC>*>(S + row * n);
        Pack<T, VEC>* p = reinterpret_cast<Pack<T, VEC>*>(P + row * n);
        // Columns [0, visible) take part; with the causal mask query q sees keys 0..q.
        const int q = static_cast<int>(row % n);
        const int visible = causal ? q + 1 : n;

        // STEP softmax_read_S
        // The only read of S: each chunk goes HBM -> registers -> shared memory, and its
        // visible elements update this thread's running max.
        float mx = NEG_INF;
#pragma unroll 4
        for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
            const Pack<T, VEC> pk = s[c];
            row_buf[c] = pk;
#pragma unroll
            for (int e = 0; e < VEC; ++e)
                if (c * VEC + e < visible) mx = fmaxf(mx, to_float(pk.v[e]));
        }
        mx = block_max(mx, scratch);  // finite: column 0 is always visible
        const float mx2 = mx * LOG2E;  // exp(x - mx) = exp2(x*log2e - mx*log2e)

        // Sum of exponentials, from the on-chip copy.
        float sum = 0.f;
        for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
            const Pack<T, VEC> pk = row_buf[c];
#pragma unroll
            for (int e = 0; e < VEC; ++e)
                if (c * VEC + e < visible) sum += exp2f(fmaf(to_float(pk.v[e]), LOG2E, -mx2));
        }
        sum = block_sum(sum, scratch);
        const float inv_sum = 1.f / sum;

        // STEP softmax_write_P
        // The only write of P: normalized probabilities, exact zeros where the mask hides a key.
        for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
            const Pack<T, VEC> pk = row_buf[c];
            Pack<T, VEC> out;
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                const float x = to_float(pk.v[e]);
                const float prob = (c * VEC + e < visible)
                                       ? exp2f(fmaf(x, LOG2E, -mx2)) * inv_sum
                                       : 0.f;
                out.v[e] = from_float<T>(prob);
            }
            p[c] = out;
        }
        // The next row reuses row_buf, but only through this same thread's chunks, and
        // block_max's first barrier orders the scratch reuse: no extra barrier needed.
    }
}

// ---------------------------------------------------------------------------------------------
// Fallback for rows longer than shared memory: S is read twice (see the header).
//
// Pass 1 keeps, per thread, a running max m and a running sum l of exp(x - m); when a larger
// value arrives the sum is rescaled by exp(m_old - m_new) (the online softmax of Milakov &
// Gimelshein, the same trick the tiled kernel uses). The per-thread (m, l) pairs are then merged
// across the block. Pass 2 re-reads S and writes P.

template <typename T, int VEC>
__global__ void softmax_rows_twopass(const T* __restrict__ S, T* __restrict__ P,
                                     long long rows, int n, int causal) {
    __shared__ float scratch[32];
    const int chunks = n / VEC;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const Pack<T, VEC>* s = reinterpret_cast<const Pack<T, VEC>*>(S + row * n);
        Pack<T, VEC>* p = reinterpret_cast<Pack<T, VEC>*>(P + row * n);
        const int q = static_cast<int>(row % n);
        const int visible = causal ? q + 1 : n;

        // Pass 1 (first read of S): running max and rescaled running sum, in log2 units.
        float m = NEG_INF, l = 0.f;
        for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
            const Pack<T, VEC> pk = s[c];
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                if (c * VEC + e < visible) {
                    const float x = to_float(pk.v[e]) * LOG2E;
                    if (x > m) {
                        l = l * exp2f(m - x) + 1.f;  // exp2f(-inf) = 0 on the first value
                        m = x;
                    } else {
                        l += exp2f(x - m);
                    }
                }
            }
        }
        // Merge the threads' (m, l): the block max, then each l rescaled to it.
        const float block_m = block_max(m, scratch);
        const float rescaled = (m == NEG_INF) ? 0.f : l * exp2f(m - block_m);
        const float block_l = block_sum(rescaled, scratch);
        const float inv_sum = 1.f / block_l;

        // Pass 2 (second read of S): write P.
        for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
            const Pack<T, VEC> pk = s[c];
            Pack<T, VEC> out;
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                const float x = to_float(pk.v[e]);
                const float prob = (c * VEC + e < visible)
                                       ? exp2f(fmaf(x, LOG2E, -block_m)) * inv_sum
                                       : 0.f;
                out.v[e] = from_float<T>(prob);
            }
            p[c] = out;
        }
    }
}
