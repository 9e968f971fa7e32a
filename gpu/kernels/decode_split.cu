// Split-KV decode ("Flash-Decoding"): a few new tokens against a long KV cache, in one kernel.
//
//     O = softmax(Q K^T / sqrt(d)) V     Q: the new tokens (1 to 8 per head), K, V: the cache
//
// Why decode needs its own kernel
//   In the prefill, N query rows share every K/V tile, so a fused kernel does ~N FLOPs per byte
//   it reads. In decode there are only q new tokens per head: each cached key and value is used
//   for q dot products and then never again. The whole cache (2 * N * d elements per KV head)
//   must cross the DRAM interface for every generated token, whatever the kernel does: decode
//   is memory-bound by nature, fused or not. The only goals left are
//     1. read the cache exactly once, at the full bandwidth of the memory;
//     2. keep every SM busy even when B * heads is small (one sequence, 8 KV heads: 8 blocks
//        would leave 124 of an H100's 132 SMs idle);
//     3. do as little else as possible (no score matrix in HBM, one kernel launch).
//
// How this kernel meets them
//   GQA packing (goal 1). With grouped-query attention, G = heads / kv_heads query heads share
//   one KV head. A block takes the whole group: its G * q query rows ("group rows") meet each
//   key once, so the KV head is read once, not G times. Query head h reads KV head h / G, so a
//   group's rows are contiguous in Q and O: rows bkv * G * q ... bkv * G * q + G * q - 1 for
//   (batch, KV head) pair bkv. Up to 8 rows fit in a block's registers; a larger group (MQA with
//   several new tokens) is cut into chunks of 8 rows, each chunk a block of its own over the same
//   keys, launched next to each other so that their reads of the same keys meet in the L2 cache.
//
//   Split-KV (goal 2). The N keys are cut into `splits` ranges of `keys_per_split`; every
//   (unit, split) pair is a block, unit = (batch, KV head, row chunk). The host
//   (gpu/launch/decode_split.py) picks the split count so that the blocks fill the GPU's
//   resident-block slots in whole waves ("wave efficiency"), e.g. one sequence of 8 KV heads
//   and a 128k cache: 8 units x 48 splits = 384 of the 396 slots of an H100 at 3 blocks per SM.
//
//   Each block computes, for its rows, the attention over its key range alone:
//       m_s  the row max of the scaled scores (base-2 units here: scores * log2 e)
//       l_s  the row sum of 2^(score - m_s)
//       O_s  the softmax-weighted average of its values (divided by l_s)
//   These partials describe disjoint sets of keys, so they combine exactly with the same
//   online-softmax algebra as two K/V tiles of the prefill kernel, or two devices of the ring
//   (gpu/kernels/ring_merge.cu):
//       M = max_s m_s      w_s = l_s * 2^(m_s - M)      O = sum_s w_s O_s / sum_s w_s
//
//   The merge (goal 3). Instead of a second kernel launch, the last block of a unit to finish
//   merges the unit's partials: every block writes its partial, makes it visible to the whole
//   GPU (__threadfence), and bumps the unit's counter; the block that sees the counter reach
//   splits - 1 knows all partials are in and merges them. It then resets the counter to 0 for
//   the next launch (the counters are zeroed once, when allocated). With one split the block
//   writes O directly and no partial exists.
//
// Who does what inside a block (128 threads)
//   A key row of d 16-bit values is d / 8 chunks of 16 bytes. LANES = d / 8 consecutive threads
//   ("a key group") read one key row together, one 16-byte chunk each (16-byte vector loads,
//   goal 1): 16 threads per key at d = 128, so a warp reads 2 keys per load, a block 8. Each key
//   group walks its own keys of the block's range (key = base + u * GROUPS + g for the KPT
//   keys u of a step, so one load instruction of the whole block reads GROUPS consecutive rows:
//   coalesced), keeping an online softmax (m, l and an fp32 O slice of 8 columns) per row:
//
//   for each step of KPT keys per group:
//       load K and V chunks of KPT keys            (2 * KPT 16-byte loads per thread; with
//                                                   PREFETCH those of the next step are in
//                                                   flight during this step's arithmetic)
//       s[u][r] = q_r . k_u  : 8 products per thread, then a sum over the key group's lanes
//                              (butterfly shuffles)
//       online softmax: m_new = max(m, max_u s), alpha = 2^(m - m_new), p = 2^(s - m_new),
//                       l = alpha * l + sum p,   o = alpha * o + sum_u p_u * v_u
//   then the key groups' (m, l, o) are combined through shared memory (the same algebra), and
//   the block's partial (or O itself, with one split) is written.
//
// Precision: K, V, Q and O in fp16 or bf16 (BF16 below); every score, sum and accumulator is
// fp32. Exponentials are base 2 (ex2.approx): q is multiplied by scale * log2(e) once.
//
// Layout (row-major, contiguous):
//   Q, O        (B, heads, q, d)       query row index = (b * heads + h) * q + t
//   K, V        (B, kv_heads, N, d)
//   part_o      (rows, splits, d) fp32     part_ml (rows, splits, 2) fp32: m_s (base 2), l_s
//   counters    (units) uint32, zero between launches
// The host computes the same layout, grid and split count as the cost model
// (gpu/model/decode_cost.py) and the CPU backend's split-KV (gpu/backends/cpu_decode.py).

#include "dtypes.cuh"
#include "ptx.cuh"
#include "reductions.cuh"

#define DECODE_THREADS 128
#define DECODE_WARPS (DECODE_THREADS / 32)
// Most splits of one unit: the merge keeps one weight per split and row in shared memory.
#define DECODE_MAX_SPLITS 256

// 16 bytes of a row: eight fp16/bf16 values as four 32-bit words.
struct __align__(16) Chunk {
    u32 w[4];
};

// A 16-byte load of the cache that does not keep the line in L1: every byte is used once.
// ld.global.nc reads through the read-only path; L1::no_allocate leaves the L1 to Q and the
// shared memory; L2::256B asks the L2 to fetch the whole 256-byte block around the address
// from DRAM (the block's key groups read those neighbours next anyway), so DRAM sees fewer,
// longer bursts.
__device__ __forceinline__ Chunk load_stream(const u16* p) {
    Chunk c;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(c.w[0]), "=r"(c.w[1]), "=r"(c.w[2]), "=r"(c.w[3])
        : "l"(p));
    return c;
}

// Four fp32 partials from L2 (see load_l2).
__device__ __forceinline__ float4 load_l2_v4(const float* p) {
    float4 x;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(x.x), "=f"(x.y), "=f"(x.z), "=f"(x.w)
                 : "l"(p)
                 : "memory");
    return x;
}

// The KPT keys of one step of key group g: K and V chunks of this thread's 8 columns, zeros
// past the range (those keys then score -inf).
template <int KPT, int GROUPS, int D>
__device__ __forceinline__ void load_step(Chunk (&kc)[KPT], Chunk (&vc)[KPT],
                                          const u16* k_head, const u16* v_head, int base,
                                          int k_end, int g, int col) {
#pragma unroll
    for (int u = 0; u < KPT; ++u) {
        const int key = base + u * GROUPS + g;
        if (key < k_end) {
            kc[u] = load_stream(k_head + static_cast<size_t>(key) * D + col);
            vc[u] = load_stream(v_head + static_cast<size_t>(key) * D + col);
        } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) kc[u].w[i] = vc[u].w[i] = 0u;
        }
    }
}

// A 4-byte load from L2, past the L1 (which is not coherent between SMs): the merge reads the
// partials other blocks wrote during this launch.
__device__ __forceinline__ float load_l2(const float* p) {
    float x;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(x) : "l"(p) : "memory");
    return x;
}

// Two packed 16-bit values -> two floats (low half first).
template <bool BF16>
__device__ __forceinline__ float2 unpack(u32 w) {
    if constexpr (BF16) {
        return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
    } else {
        float lo, hi;
        asm("{\n .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}"
            : "=f"(lo), "=f"(hi)
            : "r"(w));
        return make_float2(lo, hi);
    }
}

template <bool BF16>
__device__ __forceinline__ u16 to_storage(float x) {
    if constexpr (BF16) {
        return from_float<bf16_t>(x).bits;
    } else {
        return from_float<half_t>(x).bits;
    }
}

// q . k over this thread's 8 columns (the key group's lanes add the rest).
template <bool BF16>
__device__ __forceinline__ float dot8(const float (&q)[8], const Chunk& k) {
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 kk = unpack<BF16>(k.w[i]);
        acc = fmaf(q[2 * i], kk.x, acc);
        acc = fmaf(q[2 * i + 1], kk.y, acc);
    }
    return acc;
}

// BF16: bf16 (else fp16) storage. D: head dim (64, 128 or 256). ROWS: query rows per block
// (1, 2, 4 or 8; rows past the group's end are computed on zeros and never written).
// KPT: keys per key group per step (loads in flight). PREFETCH: the next step's loads are
// issued before this step's arithmetic (twice the bytes in flight, for 8 * KPT more registers).
template <bool BF16, int D, int ROWS, int KPT, bool PREFETCH>
__global__ void __launch_bounds__(DECODE_THREADS)
decode_split(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V,
             u16* __restrict__ O, float* __restrict__ part_o, float* __restrict__ part_ml,
             unsigned int* __restrict__ counters, int n, int group_rows, int row_chunks,
             int keys_per_split, int splits, float scale_log2) {
    constexpr int LANES = D / 8;                     // threads per key row (16 B each)
    constexpr int GROUPS = DECODE_THREADS / LANES;   // key groups per block
    constexpr int KEYS_PER_STEP = GROUPS * KPT;      // keys the block reads per step
    static_assert(LANES <= 32 && 32 % LANES == 0, "a key group must sit inside one warp");

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = tid / LANES;          // this thread's key group
    const int col = (tid % LANES) * 8;  // its 8 columns of every row

    // ---- Which rows and keys this block owns -------------------------------------------------
    const int unit = blockIdx.x;  // (batch, KV head, row chunk), row chunk fastest
    const int split = blockIdx.y;
    const int chunk = unit % row_chunks;
    const long long bkv = unit / row_chunks;  // (batch, KV head) pair
    const long long row0 = bkv * group_rows + chunk * ROWS;  // first query row (of B*heads*q)
    const int rows_here = min(ROWS, group_rows - chunk * ROWS);
    const u16* k_head = K + static_cast<size_t>(bkv) * n * D;
    const u16* v_head = V + static_cast<size_t>(bkv) * n * D;
    const int k_begin = split * keys_per_split;
    const int k_end = min(n, k_begin + keys_per_split);

    // STEP load_q
    // The block's query rows: this thread's 8 columns of each, pre-scaled to base-2 scores.
    float q[ROWS][8];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        if (r < rows_here) {
            const Chunk c = *reinterpret_cast<const Chunk*>(Q + (row0 + r) * D + col);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 x = unpack<BF16>(c.w[i]);
                q[r][2 * i] = x.x * scale_log2;
                q[r][2 * i + 1] = x.y * scale_log2;
            }
        } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) q[r][i] = 0.f;
        }
    }

    // The key group's online softmax per row: m, l (the same in all its lanes) and this
    // thread's 8 columns of the unnormalized output.
    float m[ROWS], l[ROWS], o[ROWS][8];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        m[r] = NEG_INF;
        l[r] = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) o[r][i] = 0.f;
    }

    // STEP stream_kv
    // KPT keys per group, K and V together: 2 * KPT independent 16-byte loads in flight before
    // the first use. With PREFETCH the loads of step i + 1 leave before the arithmetic of step
    // i, so a warp waits for memory once per step, not once per load and use.
    Chunk kc[KPT], vc[KPT];
    if (PREFETCH) load_step<KPT, GROUPS, D>(kc, vc, k_head, v_head, k_begin, k_end, g, col);
    for (int base = k_begin; base < k_end; base += KEYS_PER_STEP) {
        Chunk kn[KPT], vn[KPT];
        if (PREFETCH) {
            load_step<KPT, GROUPS, D>(kn, vn, k_head, v_head, base + KEYS_PER_STEP, k_end, g,
                                      col);
        } else {
            load_step<KPT, GROUPS, D>(kc, vc, k_head, v_head, base, k_end, g, col);
        }

        // STEP scores
        // s = q . k for every (key, row): this thread's 8 products, then the key group's sum.
        float s[KPT][ROWS];
#pragma unroll
        for (int u = 0; u < KPT; ++u) {
#pragma unroll
            for (int r = 0; r < ROWS; ++r) s[u][r] = dot8<BF16>(q[r], kc[u]);
        }
#pragma unroll
        for (int off = LANES / 2; off > 0; off >>= 1) {
#pragma unroll
            for (int u = 0; u < KPT; ++u) {
#pragma unroll
                for (int r = 0; r < ROWS; ++r)
                    s[u][r] += __shfl_xor_sync(0xffffffffu, s[u][r], off);
            }
        }
#pragma unroll
        for (int u = 0; u < KPT; ++u) {
            if (base + u * GROUPS + g >= k_end) {
#pragma unroll
                for (int r = 0; r < ROWS; ++r) s[u][r] = NEG_INF;
            }
        }

        // STEP online_softmax
        // New row max; the old sum and output are rescaled by alpha = 2^(m_old - m_new); the
        // step's probabilities p = 2^(s - m_new) are added. A group that has seen no key yet
        // keeps m = -inf and subtracts 0 (never -inf - -inf).
        float p[KPT][ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            float step_max = s[0][r];
#pragma unroll
            for (int u = 1; u < KPT; ++u) step_max = fmaxf(step_max, s[u][r]);
            const float m_new = fmaxf(m[r], step_max);
            const float m_ref = (m_new == NEG_INF) ? 0.f : m_new;
            const float alpha = fast_exp2(m[r] - m_ref);
            float sum = 0.f;
#pragma unroll
            for (int u = 0; u < KPT; ++u) {
                p[u][r] = fast_exp2(s[u][r] - m_ref);
                sum += p[u][r];
            }
            l[r] = alpha * l[r] + sum;
            m[r] = m_new;
#pragma unroll
            for (int i = 0; i < 8; ++i) o[r][i] *= alpha;
        }

        // STEP accumulate_o
        // o += p * v: each value chunk is converted once and used for every row.
#pragma unroll
        for (int u = 0; u < KPT; ++u) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 vv = unpack<BF16>(vc[u].w[i]);
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    o[r][2 * i] = fmaf(p[u][r], vv.x, o[r][2 * i]);
                    o[r][2 * i + 1] = fmaf(p[u][r], vv.y, o[r][2 * i + 1]);
                }
            }
        }
        if (PREFETCH) {
#pragma unroll
            for (int u = 0; u < KPT; ++u) {
                kc[u] = kn[u];
                vc[u] = vn[u];
            }
        }
    }

    // STEP combine_groups
    // The key groups saw disjoint keys: combine their (m, l, o) through shared memory with the
    // online-softmax algebra. Thread e then owns outputs (row e / D, column e % D), ...
    __shared__ float sm_m[GROUPS][ROWS], sm_l[GROUPS][ROWS];
    __shared__ __align__(16) float sm_o[GROUPS][ROWS][D];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        if (tid % LANES == 0) {
            sm_m[g][r] = m[r];
            sm_l[g][r] = l[r];
        }
        float4* dst = reinterpret_cast<float4*>(&sm_o[g][r][col]);
        dst[0] = make_float4(o[r][0], o[r][1], o[r][2], o[r][3]);
        dst[1] = make_float4(o[r][4], o[r][5], o[r][6], o[r][7]);
    }
    __syncthreads();

    // STEP write_partial
    // The block's own result over its keys: O itself when there is one split, else the
    // partial O_s = o / l_s and its statistics (m_s, l_s).
    for (int e = tid; e < ROWS * D; e += DECODE_THREADS) {
        const int r = e / D, c = e % D;
        if (r >= rows_here) continue;
        float block_max = NEG_INF;
#pragma unroll
        for (int gg = 0; gg < GROUPS; ++gg) block_max = fmaxf(block_max, sm_m[gg][r]);
        const float m_ref = (block_max == NEG_INF) ? 0.f : block_max;
        float sum = 0.f, acc = 0.f;
#pragma unroll
        for (int gg = 0; gg < GROUPS; ++gg) {
            const float w = fast_exp2(sm_m[gg][r] - m_ref);
            sum = fmaf(w, sm_l[gg][r], sum);
            acc = fmaf(w, sm_o[gg][r][c], acc);
        }
        const long long row = row0 + r;
        if (splits == 1) {
            O[row * D + c] = to_storage<BF16>(acc / sum);
        } else {
            const long long slot = row * splits + split;
            part_o[slot * D + c] = acc / sum;
            if (c == 0) {
                part_ml[2 * slot] = block_max;
                part_ml[2 * slot + 1] = sum;
            }
        }
    }
    if (splits == 1) return;

    // STEP count_split
    // Publish the partial, then count it. The block that brings the count to `splits` is the
    // last of its unit: every other partial is already visible, and it merges them.
    __shared__ int is_last;
    __threadfence();
    __syncthreads();
    if (tid == 0) is_last = (atomicAdd(&counters[unit], 1u) == static_cast<unsigned>(splits - 1));
    __syncthreads();
    if (!is_last) return;
    __threadfence();

    // STEP merge_splits
    // One warp per row: M = max_s m_s, w_s = l_s * 2^(m_s - M), 1 / sum_s w_s.
    __shared__ float sm_w[ROWS][DECODE_MAX_SPLITS];
    __shared__ float sm_inv[ROWS];
    for (int r = warp; r < rows_here; r += DECODE_WARPS) {
        const float* ml = part_ml + 2 * (row0 + r) * splits;
        float top = NEG_INF;
        for (int sp = lane; sp < splits; sp += 32) top = fmaxf(top, load_l2(ml + 2 * sp));
        top = warp_max(top);
        float total = 0.f;
        for (int sp = lane; sp < splits; sp += 32) {
            const float w = load_l2(ml + 2 * sp + 1) * fast_exp2(load_l2(ml + 2 * sp) - top);
            sm_w[r][sp] = w;
            total += w;
        }
        total = warp_sum(total);
        if (lane == 0) sm_inv[r] = 1.f / total;
    }
    __syncthreads();
    // STEP store_o
    // O = sum_s w_s O_s / sum_s w_s. A thread takes 4 consecutive columns of a row (16-byte
    // loads) and reads MERGE_BATCH splits' partials before it uses the first: their latencies
    // overlap instead of adding up, so the merge costs a few L2 round trips, not one per split.
    constexpr int MERGE_BATCH = 16;
    for (int e = tid; e < ROWS * (D / 4); e += DECODE_THREADS) {
        const int r = e / (D / 4), c = (e % (D / 4)) * 4;
        if (r >= rows_here) continue;
        const long long row = row0 + r;
        const float* src = part_o + row * splits * D + c;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int sp0 = 0; sp0 < splits; sp0 += MERGE_BATCH) {
            float4 x[MERGE_BATCH];
#pragma unroll
            for (int j = 0; j < MERGE_BATCH; ++j) {
                x[j] = (sp0 + j < splits) ? load_l2_v4(src + (sp0 + j) * D)
                                          : make_float4(0.f, 0.f, 0.f, 0.f);
            }
#pragma unroll
            for (int j = 0; j < MERGE_BATCH; ++j) {
                const float w = (sp0 + j < splits) ? sm_w[r][sp0 + j] : 0.f;
                acc.x = fmaf(w, x[j].x, acc.x);
                acc.y = fmaf(w, x[j].y, acc.y);
                acc.z = fmaf(w, x[j].z, acc.z);
                acc.w = fmaf(w, x[j].w, acc.w);
            }
        }
        const float inv = sm_inv[r];
        u16* dst = O + row * D + c;
        dst[0] = to_storage<BF16>(acc.x * inv);
        dst[1] = to_storage<BF16>(acc.y * inv);
        dst[2] = to_storage<BF16>(acc.z * inv);
        dst[3] = to_storage<BF16>(acc.w * inv);
    }
    if (tid == 0) counters[unit] = 0u;  // ready for the next launch
}
