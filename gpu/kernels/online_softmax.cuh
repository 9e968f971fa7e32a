// online_softmax.cuh — the per-row state of the online softmax in the tensor-core kernels, and
// the end of every row: O / l, and the row statistics m and l written to HBM.
//
// In every tensor-core accumulator layout here (mma.sync m16n8k16, and wgmma, which stacks that
// layout over 4 warps) a thread holds two rows, g and g + 8 (g = lane / 4), and in every 8-column
// slice the columns 2t and 2t + 1 (t = lane % 4). Accumulator register i of a flat S or O array
// belongs to row (i / 2) % 2. A row's values are spread over the 4 threads of a quad.
//
// Units: scores are kept in base 2 (S · scale · log2 e) so every exponential is one ex2.approx.
// Lazy rescaling: the reference max m_ref that the exponentials subtract moves only when a row
// max grows by more than RESCALE_SLACK (2^8 = 256×); P then stays below 256 (harmless in fp32
// and in fp16/bf16 P), and O / l is exact because O and l always share one reference. The move
// is decided by one warp-wide vote, so a warp rescales all its rows or none.
#pragma once

#include "ptx.cuh"
#include "reductions.cuh"

constexpr float RESCALE_SLACK = 8.f;

// End of a thread's two rows: full row sums (quad reduction); returns 1 / l per row in inv_l;
// l is then expressed relative to the true row max m_run instead of the (possibly lower)
// reference m_ref, a factor in (2^-8, 1], for store_ml.
__device__ __forceinline__ void finish_rows(float (&l_run)[2], const float (&m_run)[2],
                                            const float (&m_ref)[2], float (&inv_l)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l_run[r] = quad_sum(l_run[r]);
        inv_l[r] = (l_run[r] == 0.f || l_run[r] != l_run[r]) ? 1.f : 1.f / l_run[r];
        if (m_run[r] != neg_inf()) l_run[r] *= fast_exp2(m_ref[r] - m_run[r]);
    }
}

struct RowStats {
    float m_run[2];   // true running row max (base 2), for store_ml
    float l_run[2];   // this thread's share of the row sums, relative to m_ref
    float m_ref[2];   // reference max of O and l
    float m_base[2];  // m_ref, or 0 while m_ref is still -inf (never exp2(-inf - -inf))
    float m_new[2];   // the reference after a pending rescale

    __device__ __forceinline__ void init() {
        m_run[0] = m_run[1] = neg_inf();
        l_run[0] = l_run[1] = 0.f;
        m_ref[0] = m_ref[1] = neg_inf();
        m_base[0] = m_base[1] = 0.f;
    }

    // The row max of a new (masked) S tile in a flat accumulator array. Returns whether this
    // warp must rescale (then `rescale` once no wgmma is writing O).
    template <int S_REGS>
    __device__ __forceinline__ bool new_max(const float (&s)[S_REGS], float scale_log2) {
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
    }

    // The factor that moves row r's O and l from m_ref to m_new (1 when it does not move), and
    // the move itself: callers that rescale l and O at different times use these two.
    __device__ __forceinline__ float alpha(int r) const {
        return (m_new[r] != m_ref[r]) ? fast_exp2(m_ref[r] - m_new[r]) : 1.f;
    }
    __device__ __forceinline__ void move_reference(int r) {
        m_ref[r] = m_new[r];
        m_base[r] = (m_new[r] == neg_inf()) ? 0.f : m_new[r];  // never exp2(-inf - -inf)
    }

    // Move the reference to m_new and rescale l and a flat O accumulator array by
    // alpha = 2^(m_ref - m_new) (1 where the reference does not move).
    template <int O_REGS>
    __device__ __forceinline__ void rescale(float (&o)[O_REGS]) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float alpha = (m_new[r] != m_ref[r]) ? fast_exp2(m_ref[r] - m_new[r]) : 1.f;
            m_ref[r] = m_new[r];
            m_base[r] = (m_new[r] == neg_inf()) ? 0.f : m_new[r];  // never exp2(-inf - -inf)
            l_run[r] *= alpha;
#pragma unroll
            for (int i = 2 * r; i < O_REGS; i += 4) {
                o[i] *= alpha;
                o[i + 1] *= alpha;
            }
        }
    }

    // End of the rows (finish_rows above).
    __device__ __forceinline__ void finish(float (&inv_l)[2]) {
        finish_rows(l_run, m_run, m_ref, inv_l);
    }
};

// Mask one warp's part of a 64-row wgmma S tile (flat accumulators, BC = 2·S_REGS keys from
// kv0): keys past the end of the sequence and, causal, keys after the query become -inf, which
// is exactly 0 after the exponential. Only edge tiles (the ragged last one, the ones crossing
// the diagonal) pay for the element test; the tile test is uniform across the warp.
template <int S_REGS, bool CAUSAL>
__device__ __forceinline__ void mask_tile(float (&s)[S_REGS], int kv0, int N, int warp_row0,
                                          int g, int t) {
    constexpr int BC = 2 * S_REGS;
    if (kv0 + BC > N || (CAUSAL && kv0 + BC - 1 > warp_row0)) {
#pragma unroll
        for (int i = 0; i < S_REGS; ++i) {
            const int col = kv0 + (i >> 2) * 8 + 2 * t + (i & 1);
            const int row = warp_row0 + g + ((i >> 1) & 1) * 8;
            if (col >= N || (CAUSAL && col > row)) s[i] = neg_inf();
        }
    }
}

// The O(N) statistics of rows `row_a` and `row_a + 8` (fp32, stat = first row of
// this head in M and L): m in natural-log units (m_run · ln 2), l as is. The thread with t == 0
// of each quad writes them; rows at or past N are not written.
__device__ __forceinline__ void store_row_stats(float* __restrict__ M, float* __restrict__ L,
                                                size_t stat, int row_a, int N, int t,
                                                const float (&m_run)[2], const float (&l_run)[2]) {
    if (t == 0) {
        const float ln2 = 0.6931471805599453f;
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

// A warp's 16 rows × D of O (wgmma accumulator layout, flat o_acc) scaled by
// 1/l, staged in shared memory at `s_tile` (the 128-byte-swizzle layout of a ROWS-row tile, the
// warp's rows starting at block-local row `r0`; nothing else may read them any more), then
// written to HBM with 16-byte coalesced stores. `O_rows` points at this head's row 0 and `q0` is
// the sequence row of block-local row 0; rows at or past N are not written.
template <int D, int ROWS, bool BF16>
__device__ __forceinline__ void store_o_sw128(u16* __restrict__ O_rows, u32 s_tile, int r0,
                                              int q0, int N, const float* o_acc,
                                              const float (&inv_l)[2], int lane) {
    const int g = lane >> 2;
    const int t = lane & 3;
    const int r_lo = r0 + g;  // block-local rows r_lo and r_lo + 8
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
        const u32 addr = s_tile + (dt >> 3) * (ROWS * 128) + r_lo * 128 + (((dt & 7) ^ g) << 4) + 4 * t;
        const u32 lo = pack2<BF16>(o_acc[4 * dt] * inv_l[0], o_acc[4 * dt + 1] * inv_l[0]);
        const u32 hi = pack2<BF16>(o_acc[4 * dt + 2] * inv_l[1], o_acc[4 * dt + 3] * inv_l[1]);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(lo) : "memory");
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr + 8 * 128), "r"(hi) : "memory");
    }
    __syncwarp();
    constexpr int CHUNKS_PER_ROW = D / 8;
#pragma unroll
    for (int i = 0; i < 16 * CHUNKS_PER_ROW / 32; ++i) {
        const int id = lane + 32 * i;
        const int r = id / CHUNKS_PER_ROW;  // 0..15 within the warp
        const int c = id % CHUNKS_PER_ROW;
        const int rb = r0 + r;  // block-local row
        const int row = q0 + rb;
        u32 x0, x1, x2, x3;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
                     : "r"(s_tile + (c >> 3) * (ROWS * 128) + rb * 128 + (((c & 7) ^ (rb & 7)) << 4))
                     : "memory");
        if (row < N) {
            u16* dst = O_rows + (size_t)row * D + c * 8;
            asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(x0),
                         "r"(x1), "r"(x2), "r"(x3) : "memory");
        }
    }
}
