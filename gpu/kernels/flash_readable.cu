// Tiled attention in one fused kernel, FlashAttention-2 order: the readable version.
//
//     O = softmax(Q K^T / sqrt(d) [+ causal mask]) V
//
// Naive attention writes the N x N matrices S and P to HBM. This kernel never does: it walks
// over S one tile at a time, keeps that tile on chip (shared memory), and folds it into the
// output with the online softmax. Extra memory is O(N): the row max m and row sum l.
//
// Who does what
//   grid  = (ceil(N / block_m), B*h)  one thread block per (query tile i, batch*head)
//   block = 256 threads               they share the tile work below
//
//   for the block's query tile Q_i (block_m rows):
//       load Q_i into shared memory, once
//       m_i = -inf, l_i = 0, O_i = 0            (on chip)
//       for each key/value tile j (block_n rows; causal: only up to the diagonal):
//           load K_j and V_j into shared memory
//           S_ij = Q_i K_j^T * scale            (block_m x block_n, on chip only)
//           online softmax: new row max, P_ij = exp(S_ij - m), rescale l and O by
//                           exp(m_old - m_new), l += rowsum(P_ij)
//           O_i += P_ij V_j
//       O_i /= l_i; store O_i, and m_i, l_i (fp32, for a backward pass or a check)
//
// The `// STEP name` comments mark each phase with the step names the tile schedule and the
// animation use, so the app can highlight the lines running in the current frame.
//
// Precision: Q, K, V, O in fp16, bf16 or fp32 (T below); everything on chip is fp32, so the
// accumulation of O, m and l is fp32 whatever T is.
//
// Simplifications that keep this readable (the tensor-core kernel drops them):
//   - plain CUDA-core fp32 FMAs, no tensor cores;
//   - tiles are converted to fp32 as they are loaded, and live in shared memory as fp32;
//   - K_j and V_j are loaded, then used: no double buffering of the next tile.
// Each thread still computes a small 4 x 4 patch of each product with 16-byte shared-memory
// loads, so the arithmetic is not starved by shared-memory bandwidth.
//
// Shared memory (floats), D = head dim rounded up to a multiple of 32 (zero padded):
//   Q_i  block_m x (D+4)   K_j, V_j  block_n x (D+4) each   S_ij  block_m x (block_n+1)
//   O_i  block_m x D       m_i, l_i, alpha_i  block_m each
// The +4 / +1 padding shifts consecutive rows to different memory banks (no bank conflicts).
// The host (gpu/launch/flash_readable.py) computes the same total and refuses tile sizes that
// exceed the device's opt-in limit, naming that limit.

#include "dtypes.cuh"
#include "reductions.cuh"

#define NUM_THREADS 256
#define NUM_WARPS (NUM_THREADS / 32)

// ---- Trace build (trace.cuh) -----------------------------------------------------------------
// With -DTILESCOPE_TRACE thread 0 of each block writes one row per phase boundary, as it passes
// it: [block, sm, phase, j, t_ns], block = blockIdx.x + gridDim.x * (batch*head);
//     phase 0 load_Q_i (j = query tile i), 1 load_K_j (j = key tile), 2 compute_S_ij (j),
//           3 store_O_i (j = i), 4 end (j = i).
// Block b owns rows [b * R, (b + 1) * R), R = 3 + 2 * ceil(n / block_n); rows it does not reach
// (causal blocks skip key tiles) keep the host's fill value.
#include "trace.cuh"

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
    acc = fmaf(a.z, b.z, acc);
    return fmaf(a.w, b.w, acc);
}
__device__ __forceinline__ float4 axpy4(float a, float4 x, float4 y) {  // a*x + y
    return make_float4(fmaf(a, x.x, y.x), fmaf(a, x.y, y.y), fmaf(a, x.z, y.z), fmaf(a, x.w, y.w));
}

// Copy `rows` rows of a (n x d) head matrix, starting at row `row0`, into a shared-memory tile
// of stride `ld`, converting to fp32 and multiplying by `mul`. Rows past n and columns past d
// become zeros, so a partial tile behaves like a full one padded with zeros.
template <typename T, int D>
__device__ __forceinline__ void load_tile(float* tile, int ld, const T* __restrict__ src,
                                          int row0, int rows, int n, int d, float mul) {
    for (int e = threadIdx.x; e < rows * D; e += NUM_THREADS) {
        const int r = e / D, k = e % D;  // consecutive threads read consecutive columns
        const int row = row0 + r;
        tile[r * ld + k] =
            (row < n && k < d) ? to_float(src[static_cast<size_t>(row) * d + k]) * mul : 0.f;
    }
}

template <typename T, int D>
__global__ void __launch_bounds__(NUM_THREADS, 2)  // <= 128 registers: 2 blocks fit on an SM
flash_fwd_readable(const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,
                   T* __restrict__ O, float* __restrict__ M, float* __restrict__ L,
                   int bh_count, int n, int d, int block_m, int block_n, int causal,
                   float scale TRACE_PARAM) {
    // ---- Shared-memory carve-up (see the table at the top) -----------------------------------
    extern __shared__ __align__(16) float smem[];
    const int ld = D + 4;         // row stride of the Q, K and V tiles
    const int lds = block_n + 1;  // row stride of the S tile
    float* Qs = smem;                      // block_m x ld
    float* Ks = Qs + block_m * ld;         // block_n x ld
    float* Vs = Ks + block_n * ld;         // block_n x ld
    float* Ss = Vs + block_n * ld;         // block_m x lds   S_ij, then P_ij in place
    float* Os = Ss + block_m * lds;        // block_m x D     the O_i accumulator
    float* m_s = Os + block_m * D;         // block_m         running row max (log2 units)
    float* l_s = m_s + block_m;            // block_m         running row sum
    float* alpha_s = l_s + block_m;        // block_m         this step's rescale factor

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int num_q_tiles = (n + block_m - 1) / block_m;
    // With a causal mask the last query tiles have the most key tiles: start them first
    // (FlashAttention-2 does the same) so the long blocks don't run alone at the end.
    const int i = num_q_tiles - 1 - blockIdx.x;
    const int q0 = i * block_m;  // first query row of this tile
    // S is kept in log2 units: exp(x) = exp2(x * log2 e), and exp2 is one instruction.
    const float q_mul = scale * LOG2E;

    // Key/value tiles this query tile needs (the cost model counts the same ones).
    const int last_row = min(q0 + block_m, n) - 1;
    const int num_kv_tiles = causal ? last_row / block_n + 1 : (n + block_n - 1) / block_n;

    for (int bh = blockIdx.y; bh < bh_count; bh += gridDim.y) {  // y loops only if B*h > 65535
        const size_t head = static_cast<size_t>(bh) * n * d;       // start of this head's rows
        TRACE_BLOCK(static_cast<long long>(bh) * gridDim.x + blockIdx.x,
                    3 + 2 * ((n + block_n - 1) / block_n));
        TRACE_MARK(BlockPhase::load_Q_i, i);

        // STEP load_Q_i
        // Q_i: HBM -> shared memory, once per block, pre-multiplied by scale * log2(e).
        load_tile<T, D>(Qs, ld, Q + head, q0, block_m, n, d, q_mul);
        for (int e = tid; e < block_m * D; e += NUM_THREADS) Os[e] = 0.f;
        for (int r = tid; r < block_m; r += NUM_THREADS) {
            m_s[r] = NEG_INF;
            l_s[r] = 0.f;
        }

        for (int j = 0; j < num_kv_tiles; ++j) {
            const int k0 = j * block_n;  // first key row of this tile
            const int kv_rows = min(block_n, n - k0);

            __syncthreads();  // everyone is done with the previous K_j, V_j, S_ij
            TRACE_MARK(BlockPhase::load_K_j, j);
            // STEP load_K_j
            load_tile<T, D>(Ks, ld, K + head, k0, block_n, n, d, 1.f);
            // STEP load_V_j
            load_tile<T, D>(Vs, ld, V + head, k0, block_n, n, d, 1.f);
            __syncthreads();

            TRACE_MARK(BlockPhase::compute_S_ij, j);
            // STEP compute_S_ij
            // S_ij = Q_i K_j^T (already scaled), on chip. One work item = 4 query rows x 1 key:
            // the key row is loaded once per 4 dot products, 4 columns at a time (float4).
            for (int item = tid; item < (block_m / 4) * block_n; item += NUM_THREADS) {
                const int c = item % block_n;  // key within the tile (consecutive per lane)
                const int r = (item / block_n) * 4;
                const float4* k_row = reinterpret_cast<const float4*>(Ks + c * ld);
                const float4* q_row0 = reinterpret_cast<const float4*>(Qs + (r + 0) * ld);
                const float4* q_row1 = reinterpret_cast<const float4*>(Qs + (r + 1) * ld);
                const float4* q_row2 = reinterpret_cast<const float4*>(Qs + (r + 2) * ld);
                const float4* q_row3 = reinterpret_cast<const float4*>(Qs + (r + 3) * ld);
                float acc0 = 0.f, acc1 = 0.f, acc2 = 0.f, acc3 = 0.f;
#pragma unroll 8
                for (int k4 = 0; k4 < D / 4; ++k4) {
                    const float4 kv = k_row[k4];
                    acc0 = dot4(q_row0[k4], kv, acc0);
                    acc1 = dot4(q_row1[k4], kv, acc1);
                    acc2 = dot4(q_row2[k4], kv, acc2);
                    acc3 = dot4(q_row3[k4], kv, acc3);
                }
                Ss[(r + 0) * lds + c] = acc0;
                Ss[(r + 1) * lds + c] = acc1;
                Ss[(r + 2) * lds + c] = acc2;
                Ss[(r + 3) * lds + c] = acc3;
            }
            __syncthreads();

            // STEP online_softmax
            // One warp per query row. Masked entries (key past the end of the sequence, or key
            // after the query under the causal mask) become -inf, i.e. probability 0.
            //   m_new = max(m_old, max_c S[c])       P[c] = exp(S[c] - m_new)
            //   alpha = exp(m_old - m_new)           l    = alpha * l + sum_c P[c]
            // alpha rescales what O_i accumulated under the old max (done in accumulate_O_i).
            for (int r = warp; r < block_m; r += NUM_WARPS) {
                float* s_row = Ss + r * lds;
                const int q = q0 + r;
                float tile_max = NEG_INF;
                for (int c = lane; c < block_n; c += 32) {
                    const int key = k0 + c;
                    const bool visible = key < n && (!causal || key <= q);
                    const float s = visible ? s_row[c] : NEG_INF;
                    s_row[c] = s;
                    tile_max = fmaxf(tile_max, s);
                }
                tile_max = warp_max(tile_max);
                const float m_old = m_s[r];
                const float m_new = fmaxf(m_old, tile_max);
                // A row with nothing visible yet keeps m = -inf; subtract 0 then, not -inf
                // (-inf - -inf would be NaN). Its P entries and alpha are all exp2(-inf) = 0.
                const float m_ref = (m_new == NEG_INF) ? 0.f : m_new;
                float tile_sum = 0.f;
                for (int c = lane; c < block_n; c += 32) {
                    const float p = exp2f(s_row[c] - m_ref);
                    s_row[c] = p;  // P_ij overwrites S_ij in place
                    tile_sum += p;
                }
                tile_sum = warp_sum(tile_sum);  // every lane has read m_old by now
                if (lane == 0) {
                    const float alpha = exp2f(m_old - m_ref);
                    alpha_s[r] = alpha;
                    l_s[r] = alpha * l_s[r] + tile_sum;
                    m_s[r] = m_new;
                }
            }
            __syncthreads();

            // STEP accumulate_O_i
            // O_i = alpha * O_i + P_ij V_j. One work item = 4 query rows x 4 output columns:
            // each V row chunk (float4) is loaded once and used for 4 rows.
            for (int item = tid; item < (block_m / 4) * (D / 4); item += NUM_THREADS) {
                const int k4 = item % (D / 4);  // output column group (consecutive per lane)
                const int r = (item / (D / 4)) * 4;
                float4* o_row0 = reinterpret_cast<float4*>(Os + (r + 0) * D) + k4;
                float4* o_row1 = reinterpret_cast<float4*>(Os + (r + 1) * D) + k4;
                float4* o_row2 = reinterpret_cast<float4*>(Os + (r + 2) * D) + k4;
                float4* o_row3 = reinterpret_cast<float4*>(Os + (r + 3) * D) + k4;
                const float a0 = alpha_s[r + 0], a1 = alpha_s[r + 1];
                const float a2 = alpha_s[r + 2], a3 = alpha_s[r + 3];
                float4 acc0 = *o_row0, acc1 = *o_row1, acc2 = *o_row2, acc3 = *o_row3;
                acc0 = make_float4(acc0.x * a0, acc0.y * a0, acc0.z * a0, acc0.w * a0);
                acc1 = make_float4(acc1.x * a1, acc1.y * a1, acc1.z * a1, acc1.w * a1);
                acc2 = make_float4(acc2.x * a2, acc2.y * a2, acc2.z * a2, acc2.w * a2);
                acc3 = make_float4(acc3.x * a3, acc3.y * a3, acc3.z * a3, acc3.w * a3);
                const float* p0 = Ss + (r + 0) * lds;
                const float* p1 = Ss + (r + 1) * lds;
                const float* p2 = Ss + (r + 2) * lds;
                const float* p3 = Ss + (r + 3) * lds;
#pragma unroll 4
                for (int c = 0; c < kv_rows; ++c) {  // keys past the end have P = 0: skip them
                    const float4 v = reinterpret_cast<const float4*>(Vs + c * ld)[k4];
                    acc0 = axpy4(p0[c], v, acc0);
                    acc1 = axpy4(p1[c], v, acc1);
                    acc2 = axpy4(p2[c], v, acc2);
                    acc3 = axpy4(p3[c], v, acc3);
                }
                *o_row0 = acc0;
                *o_row1 = acc1;
                *o_row2 = acc2;
                *o_row3 = acc3;
            }
        }
        __syncthreads();  // the last accumulate_O_i is complete
        TRACE_MARK(BlockPhase::store_O_i, i);

        // STEP store_O_i
        // O_i / l_i: shared memory -> HBM, in the input dtype, once per block.
        for (int e = tid; e < block_m * D; e += NUM_THREADS) {
            const int r = e / D, k = e % D;
            const int q = q0 + r;
            if (q < n && k < d)
                O[head + static_cast<size_t>(q) * d + k] = from_float<T>(Os[e] / l_s[r]);
        }
        // STEP store_ml
        // The row statistics, fp32, with m back in natural-log units: logsumexp = m + log(l).
        for (int r = tid; r < block_m; r += NUM_THREADS) {
            const int q = q0 + r;
            if (q < n) {
                M[static_cast<size_t>(bh) * n + q] = m_s[r] * LN2;
                L[static_cast<size_t>(bh) * n + q] = l_s[r];
            }
        }
        __syncthreads();  // before the next (batch, head), if any, reuses shared memory
        TRACE_MARK(BlockPhase::end, i);
    }
}
