// flash_mma.cu — the tensor-core FlashAttention-2-style forward kernel.
//
// The same algorithm the animation shows, written for speed:
//
//   for each query tile Q_i (BR rows)                      — one thread block
//       load Q_i once, keep it in registers                  // STEP load_Q_i
//       for each key/value tile j (BC rows)                  — the inner loop
//           K_j, V_j stream HBM -> shared memory               // STEP load_K_j / load_V_j
//           S_ij = Q_i K_jᵀ · scale      (tensor cores)        // STEP compute_S_ij
//           online softmax: new row max m, rescale, P = exp     // STEP online_softmax
//           O_i = O_i · rescale + P_ij V_j (tensor cores)       // STEP accumulate_O_i
//       O_i /= l, write O_i and the row statistics m, l       // STEP store_O_i / store_ml
//
// S_ij and P_ij live only in registers: they never touch shared memory, let alone HBM.
//
// Two speed tricks change the order of that loop, not its result (details at the kernel):
//   * software pipelining: each step issues S_{j+1} = Q K_{j+1}ᵀ on the tensor cores and does
//     the softmax and P_j V_j of tile j meanwhile, so the exponentials hide behind matrix work;
//   * lazy rescaling: O and l are rescaled only when a row max grows by more than 2^8, not on
//     every tile (exact, because O and l always share the same reference max).
// Causal: key tiles wholly above the diagonal are never loaded; the tiles crossing it are
// masked element by element, as is the ragged last tile when N is not a multiple of BC.
//
// How the work is split:
//   * Block  = BR query rows of one (batch, head); NWARPS = BR / 16 warps.
//   * Warp   = 16 query rows (one m16 row of the tensor-core instruction) against all BC keys
//              of the current tile. Warps never exchange data: only K_j and V_j are shared.
//   * Thread = in `mma.sync.m16n8k16` each thread owns 2 rows (g and g+8, g = lane / 4) and,
//              in every 8-column slice, 2 neighbouring columns (2·(lane % 4) and +1). Row
//              reductions (max, sum) therefore need only the 4 threads of a quad: 2 shuffles.
//
// Tensor-core instruction used everywhere:
//   mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32
//     A: 16×16 (row-major) in 4 registers, B: 16×8 in 2 registers, C/D: 16×8 fp32 in 4.
//   ldmatrix.x4 loads four 8×8 b16 matrices from shared memory straight into that layout;
//   ldmatrix.x4.trans does the same with each 8×8 transposed, which is what V needs.
//
// Shared memory: Q tile (BR×D) + 2 stages of K (BC×D) + 2 stages of V (BC×D), all b16.
// Every row is D·2 = 128 or 256 bytes; a row is cut into 16-byte chunks and chunk c of row r is
// stored at chunk position c ^ (r % 8) (an XOR swizzle). ldmatrix reads one chunk from each of 8
// consecutive rows; without the swizzle those 8 chunks sit in the same 4 banks (an 8-way bank
// conflict), with it they cover all 32 banks.
//
// Storage types: fp16 and bf16 are both passed as raw 16-bit words (u16); the BF16 template
// flag picks the instruction variants. No CUDA headers: the PTX wrappers, the trace macros and
// the end-of-row code live in the shared headers of this folder, which NVRTC finds on its
// include path.
//
// Row statistics written to M and L (fp32, one per query row):
//   M = max_j (q·k_j · scale)                 natural-log units of the scaled scores
//   L = Σ_j exp(q·k_j · scale − M)            so logsumexp = M + log(L)
// Inside the kernel the running max is kept in base-2 units (scores × scale × log2 e) so that
// every exponential is one `ex2.approx` and the scale folds into one FMA.

#include "online_softmax.cuh"
#include "ptx.cuh"
#include "trace.cuh"

// Trace build (trace.cuh, -DTILESCOPE_TRACE): thread 0 of each block writes one row per phase
// boundary, [block, sm, phase, j, t_ns] with block = blockIdx.x + gridDim.x · blockIdx.y:
//     phase 0 load_Q_i (j = query tile), 1 load_K_j, 2 compute_S_ij (j = key tile),
//           3 store_O_i, 4 end (j = query tile)
// Pipelined order: load_Q_i also covers K_0 and S_0; load_K_j is the wait for V_j and K_{j+1}
// (cp.async wait + barrier); compute_S_ij is P_j V_j together with S_{j+1}. Store and end are
// marked after a barrier that exists only in this build. Block b owns rows [b·R, (b+1)·R),
// R = 3 + 2·ceil(N / BC).

// Copy a ROWS×D tile (rows `row0`.. of a row-major [N, D] matrix) into swizzled shared memory
// with cp.async, zero-filling rows at or past `rows_valid`. Each thread moves 16-byte chunks;
// consecutive threads take consecutive chunks of a row, so every warp reads whole 128-byte lines.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile_rows_async(u32 s_tile, const u16* g_tile,
                                                     int rows_valid, int tid) {
    constexpr int CHUNKS_PER_ROW = D / 8;
    constexpr int ROWS_PER_PASS = NT / CHUNKS_PER_ROW;
    static_assert(NT % CHUNKS_PER_ROW == 0 && ROWS % ROWS_PER_PASS == 0, "tile/thread mismatch");
    const int c = tid % CHUNKS_PER_ROW;
    int r = tid / CHUNKS_PER_ROW;
#pragma unroll
    for (int pass = 0; pass < ROWS / ROWS_PER_PASS; ++pass, r += ROWS_PER_PASS) {
        const bool valid = r < rows_valid;
        const u16* src = g_tile + (valid ? r * D + c * 8 : 0);
        const u32 dst = s_tile + r * (D * 2) + ((c ^ (r & 7)) << 4);
        cp_async_16(dst, src, valid);
    }
}

// ------------------------------------------------------------------------------------------
// The kernel.
//   D       head dim (64 or 128)
//   BR      query rows per block (= 16 · NWARPS)
//   BC      key/value rows per tile
//   MINB    blocks per SM the register allocator must allow (__launch_bounds__)
//   CAUSAL  key j may be seen by query i only when j <= i
//   BF16    bf16 inputs/outputs (else fp16)
// Grid: (ceil(N / BR), batch·heads). Block: 32·NWARPS threads. Dynamic shared memory:
// (BR + 4·BC) · D · 2 bytes.
//
// Order of work inside a warp (software pipelining). The plain order per tile j would be
//     S_j = Q K_jᵀ  ->  softmax(S_j)  ->  O += P_j V_j
// and while a warp does the softmax (exponentials, max, sums: no tensor-core work) the tensor
// cores would wait for it. So each step issues the next tile's S_{j+1} = Q K_{j+1}ᵀ first and
// does softmax(S_j) and P_j V_j right after, in one straight-line stretch of code: the
// tensor-core instructions of S_{j+1} and the exponentials of tile j are independent, and the
// hardware overlaps them. The price is a second S accumulator (S_j and S_{j+1} both live) and a
// K tile that runs one ahead of the V tile:
//     step j:  [wait, barrier]  prefetch V_{j+1}, K_{j+2}  |  S_{j+1} = Q K_{j+1}ᵀ
//              P_j = exp2(S_j·c − m), O += P_j V_j  |  mask S_{j+1} if it is an edge tile,
//              row max of S_{j+1} (and, rarely, rescale O and l)
template <int D, int BR, int BC, int NWARPS, int MINB, bool CAUSAL, bool BF16>
__global__ void __launch_bounds__(NWARPS * 32, MINB)
flash_mma_fwd(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V,
              u16* __restrict__ O, float* __restrict__ M, float* __restrict__ L, int N,
              float scale_log2 TRACE_PARAM)  // scale_log2 = log2(e) / sqrt(D)
{
    constexpr int NT = NWARPS * 32;
    constexpr int ROW_BYTES = D * 2;  // one row of Q/K/V in shared memory
    constexpr int K_STEPS = D / 16;   // k-steps of S = Q Kᵀ (contraction over d)
    constexpr int S_TILES = BC / 8;   // 16×8 accumulator tiles of S per warp
    constexpr int O_TILES = D / 8;    // 16×8 accumulator tiles of O per warp
    constexpr int PV_STEPS = BC / 16; // k-steps of O += P V (contraction over keys)
    static_assert(BR == 16 * NWARPS, "one warp owns 16 query rows");
    static_assert(D % 64 == 0, "the XOR swizzle needs at least 8 chunks of 16 bytes per row");
    static_assert(BC % 16 == 0, "key tile must be a multiple of 16");

    extern __shared__ __align__(128) unsigned char smem[];
    const u32 sQ = smem_addr(smem);
    const u32 sK = sQ + BR * ROW_BYTES;      // K_t lives in stage t % 2: sK + (t & 1) · STAGE
    const u32 sV = sK + 2 * BC * ROW_BYTES;  // V_t likewise in sV + (t & 1) · STAGE
    constexpr u32 STAGE = BC * ROW_BYTES;

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int g = lane >> 2;  // this thread's rows in the warp's 16: g and g + 8
    const int t = lane & 3;   // this thread's column pair in every 8-column slice: 2t, 2t + 1

    // Causal blocks near the end of the sequence have the most key tiles: launch them first
    // (reverse order) so the short blocks fill in the tail of the grid.
    const int q_block = CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int q0 = q_block * BR;           // first query row of this block
    const int warp_row0 = q0 + warp * 16;  // first query row of this warp
    const size_t head = (size_t)blockIdx.y * N * D;
    const u16* Qh = Q + head;
    const u16* Kh = K + head;
    const u16* Vh = V + head;

    // Key tiles this block visits: all of them, or (causal) up to the one holding the diagonal
    // of its last row; tiles wholly above the diagonal are skipped, never loaded.
    int kv_tiles = (N + BC - 1) / BC;
    if (CAUSAL) {
        const int last_row = min(q0 + BR, N) - 1;
        kv_tiles = min(kv_tiles, last_row / BC + 1);
    }
    TRACE_BLOCK(blockIdx.x + (long long)gridDim.x * blockIdx.y, 3 + 2 * ((N + BC - 1) / BC));
    TRACE_MARK(BlockPhase::load_Q_i, q_block);

    // STEP load_Q_i — Q_i: HBM -> shared memory (cp.async), together with K_0 ...
    load_tile_rows_async<BR, D, NT>(sQ, Qh + (size_t)q0 * D, N - q0, tid);
    // STEP load_K_j
    load_tile_rows_async<BC, D, NT>(sK, Kh, N, tid);
    cp_async_commit();
    // STEP load_V_j — ... then V_0 and K_1 in a second group that may still be in flight while
    // S_0 is computed.
    load_tile_rows_async<BC, D, NT>(sV, Vh, N, tid);
    if (kv_tiles > 1) load_tile_rows_async<BC, D, NT>(sK + STAGE, Kh + (size_t)BC * D, N - BC, tid);
    cp_async_commit();
    cp_async_wait<1>();  // Q and K_0 have landed (for this thread's copies) ...
    __syncthreads();     // ... and for everyone's.

    // STEP load_Q_i — ... then shared memory -> registers, once. This warp's 16 rows of Q_i
    // stay in registers as ready-made A operands for every S_ij = Q_i K_jᵀ below.
    // ldmatrix.x4 lanes 0-15 point at rows 0-15 / left 8 columns, lanes 16-31 at rows 0-15 /
    // right 8 columns of each 16×16 slice: exactly the a0..a3 layout of m16n8k16.
    u32 q_frag[K_STEPS][4];
    {
        const int r = warp * 16 + (lane & 15);
        const int half = lane >> 4;
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk) {
            const u32 addr = sQ + r * ROW_BYTES + (((2 * kk + half) ^ (r & 7)) << 4);
            ldmatrix_x4(addr, q_frag[kk][0], q_frag[kk][1], q_frag[kk][2], q_frag[kk][3]);
        }
    }

    // Per-lane parts of the ldmatrix addresses (the swizzle XOR folds into one constant each).
    //   K (no transpose): lanes 0-7 keys 0-7 / d-chunk lo, 8-15 keys 0-7 / hi, 16-23 keys 8-15 /
    //   lo, 24-31 keys 8-15 / hi  ->  b0, b1 of key slice n and b0, b1 of slice n + 1.
    const u32 k_lane = ((lane & 7) + ((lane >> 4) << 3)) * ROW_BYTES;
    const int k_xor = ((lane >> 3) & 1) ^ (lane & 7);
    //   V (transposed): lanes 0-7 keys 0-7 / d lo, 8-15 keys 8-15 / d lo, 16-23 keys 0-7 / d hi,
    //   24-31 keys 8-15 / d hi  ->  b0, b1 of d slice n and b0, b1 of slice n + 1.
    const u32 v_lane = ((lane & 7) + (((lane >> 3) & 1) << 3)) * ROW_BYTES;
    const int v_xor = (lane >> 4) ^ (lane & 7);

    // Running statistics of this thread's two rows, base-2 units (see the file header).
    float m_run[2] = {neg_inf(), neg_inf()};  // row max so far
    float l_run[2] = {0.f, 0.f};  // partial sums (this thread's columns) relative to m_ref below
    float o_acc[O_TILES][4];
#pragma unroll
    for (int i = 0; i < O_TILES; ++i) o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.f;

    // STEP compute_S_ij — S = Q_i K_jᵀ for this warp's 16 rows × BC keys, fp32 accumulate.
    auto compute_S = [&](float (&s)[S_TILES][4], u32 sK_j) {
#pragma unroll
        for (int i = 0; i < S_TILES; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk) {
#pragma unroll
            for (int np = 0; np < S_TILES / 2; ++np) {
                u32 b0, b1, b2, b3;
                ldmatrix_x4(sK_j + np * 16 * ROW_BYTES + k_lane + (((2 * kk) ^ k_xor) << 4), b0,
                            b1, b2, b3);
                mma_16816<BF16>(s[2 * np], q_frag[kk], b0, b1);
                mma_16816<BF16>(s[2 * np + 1], q_frag[kk], b2, b3);
            }
        }
    };

    // Mask keys past the end of the sequence and (causal) keys after the query: -inf scores
    // become exactly 0 after the exponential. Only edge tiles (the ragged last one, the ones
    // crossing the diagonal) pay for this.
    auto mask_edges = [&](float (&s)[S_TILES][4], int j) {
        const int kv0 = j * BC;
        if (kv0 + BC > N || (CAUSAL && kv0 + BC - 1 > warp_row0)) {
#pragma unroll
            for (int nt = 0; nt < S_TILES; ++nt) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int col = kv0 + nt * 8 + 2 * t + (e & 1);
                    const int row = warp_row0 + g + ((e >> 1) << 3);
                    if (col >= N || (CAUSAL && col > row)) s[nt][e] = neg_inf();
                }
            }
        }
    };

    // STEP online_softmax — part 1, per new tile S: its row max, and (rarely) a rescale.
    // m_ref is the reference the exponentials subtract. Textbook online softmax moves it to the
    // new row max on every tile and rescales O and l by 2^(m_old − m_new) each time. Here it
    // moves only when a row's max grows by more than RESCALE_SLACK (2^8 = 256×): until then
    // P = 2^(S·c − m_ref) stays below 256, harmless in fp32 and in fp16/bf16 P, and the result
    // is exactly the same because O and l always share one reference (O/l does not depend on
    // it). On random data this skips nearly every rescale after the first tile. The decision is
    // one warp-wide vote, so a warp either rescales all its rows or none.
    float m_ref[2] = {neg_inf(), neg_inf()};   // reference of O and l (base-2 units)
    float m_base[2] = {0.f, 0.f};              // m_ref, or 0 while m_ref is still -inf
    auto update_max = [&](float (&s)[S_TILES][4]) {
        float tile_max[2] = {neg_inf(), neg_inf()};
#pragma unroll
        for (int nt = 0; nt < S_TILES; ++nt) {
            tile_max[0] = fmaxf(tile_max[0], fmaxf(s[nt][0], s[nt][1]));
            tile_max[1] = fmaxf(tile_max[1], fmaxf(s[nt][2], s[nt][3]));
        }
        bool grow[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            // The 4 threads of a quad hold one row between them.
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
            tile_max[r] *= scale_log2;
            m_run[r] = fmaxf(m_run[r], tile_max[r]);  // the true running max, for store_ml
            grow[r] = tile_max[r] > m_ref[r] + RESCALE_SLACK;  // always true on a first finite max
        }
        if (__any_sync(0xffffffffu, grow[0] || grow[1])) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const float m_new = grow[r] ? tile_max[r] : m_ref[r];
                const float alpha = grow[r] ? fast_exp2(m_ref[r] - m_new) : 1.f;  // 0 first time
                m_ref[r] = m_new;
                m_base[r] = (m_new == neg_inf()) ? 0.f : m_new;  // never exp2(-inf - -inf)
                l_run[r] *= alpha;
#pragma unroll
                for (int dt = 0; dt < O_TILES; ++dt) {
                    o_acc[dt][2 * r] *= alpha;
                    o_acc[dt][2 * r + 1] *= alpha;
                }
            }
        }
    };

    auto exp_and_pv = [&](float (&s)[S_TILES][4], u32 sV_j) {
        // STEP online_softmax — part 2: P = 2^(S·c − m_ref), one FMA and one ex2 per score,
        // and the row sums l.
#pragma unroll
        for (int nt = 0; nt < S_TILES; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float p = fast_exp2(fmaf(s[nt][e], scale_log2, -m_base[e >> 1]));
                l_run[e >> 1] += p;
                s[nt][e] = p;
            }
        }

        // STEP accumulate_O_i — O_i += P_ij V_j. The S accumulator layout (rows g, g+8;
        // columns 2t, 2t+1 of each 8-key slice) is exactly the A-operand layout of the next
        // mma, so P is converted to fp16/bf16 pairs in registers: no shared-memory round trip.
#pragma unroll
        for (int kk = 0; kk < PV_STEPS; ++kk) {
            u32 p_frag[4];
            p_frag[0] = pack2<BF16>(s[2 * kk][0], s[2 * kk][1]);          // row g,   keys 0-7
            p_frag[1] = pack2<BF16>(s[2 * kk][2], s[2 * kk][3]);          // row g+8, keys 0-7
            p_frag[2] = pack2<BF16>(s[2 * kk + 1][0], s[2 * kk + 1][1]);  // row g,   keys 8-15
            p_frag[3] = pack2<BF16>(s[2 * kk + 1][2], s[2 * kk + 1][3]);  // row g+8, keys 8-15
#pragma unroll
            for (int dp = 0; dp < O_TILES / 2; ++dp) {
                u32 b0, b1, b2, b3;
                ldmatrix_x4_trans(sV_j + kk * 16 * ROW_BYTES + v_lane + (((2 * dp) ^ v_xor) << 4),
                                  b0, b1, b2, b3);
                mma_16816<BF16>(o_acc[2 * dp], p_frag, b0, b1);
                mma_16816<BF16>(o_acc[2 * dp + 1], p_frag, b2, b3);
            }
        }
    };

    // One pipelined step for a tile j that has a successor: s_cur holds S_j (masked), s_next
    // receives S_{j+1}.
    auto step = [&](float (&s_cur)[S_TILES][4], float (&s_next)[S_TILES][4], int j) {
        // V_j and K_{j+1} were requested one step ago: wait for this thread's copies, then a
        // barrier makes everyone's visible and guarantees no warp still reads the stages the
        // prefetch below overwrites (V_{j-1} and K_j, both consumed in the previous step).
        TRACE_MARK(BlockPhase::load_K_j, j);
        cp_async_wait<0>();
        __syncthreads();
        TRACE_MARK(BlockPhase::compute_S_ij, j);
        // STEP load_V_j / STEP load_K_j — prefetch V_{j+1} and K_{j+2}; the copies run while
        // the tensor cores work (double buffering).
        const int kv1 = (j + 1) * BC;
        load_tile_rows_async<BC, D, NT>(sV + ((j + 1) & 1) * STAGE, Vh + (size_t)kv1 * D, N - kv1, tid);
        if (j + 2 < kv_tiles) {
            const int kv2 = kv1 + BC;
            load_tile_rows_async<BC, D, NT>(sK + (j & 1) * STAGE, Kh + (size_t)kv2 * D, N - kv2, tid);
        }
        cp_async_commit();
        compute_S(s_next, sK + ((j + 1) & 1) * STAGE);  // tensor cores: S_{j+1} ...
        exp_and_pv(s_cur, sV + (j & 1) * STAGE);        // ... overlapped with softmax of S_j
        mask_edges(s_next, j + 1);
        update_max(s_next);  // after P_j V_j, before P_{j+1} V_{j+1}: the only safe place
    };
    // The last tile: nothing left to prefetch or precompute.
    auto last_step = [&](float (&s_cur)[S_TILES][4], int j) {
        TRACE_MARK(BlockPhase::load_K_j, j);
        cp_async_wait<0>();
        __syncthreads();
        TRACE_MARK(BlockPhase::compute_S_ij, j);
        exp_and_pv(s_cur, sV + (j & 1) * STAGE);
    };

    float s_a[S_TILES][4], s_b[S_TILES][4];
    compute_S(s_a, sK);
    mask_edges(s_a, 0);
    update_max(s_a);
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

    // Finish the rows: full row sums (quad reduction), then O_i / l; for store_ml, l relative
    // to the true row max m_run instead of the (possibly lower) reference m_ref.
    float inv_l[2];
    finish_rows(l_run, m_run, m_ref, inv_l);

    TRACE_SYNC_MARK(BlockPhase::store_O_i, q_block);
    // STEP store_O_i — stage this warp's 16×D output rows in its own rows of the Q tile (only this
    // warp ever read them), then write HBM with 16-byte coalesced stores.
    {
        const int r_lo = warp * 16 + g;  // block-local rows g and g + 8 share r % 8 == g
#pragma unroll
        for (int dt = 0; dt < O_TILES; ++dt) {
            const u32 chunk = ((dt ^ g) << 4) + 4 * t;
            const u32 lo = pack2<BF16>(o_acc[dt][0] * inv_l[0], o_acc[dt][1] * inv_l[0]);
            const u32 hi = pack2<BF16>(o_acc[dt][2] * inv_l[1], o_acc[dt][3] * inv_l[1]);
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sQ + r_lo * ROW_BYTES + chunk),
                         "r"(lo) : "memory");
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sQ + (r_lo + 8) * ROW_BYTES + chunk),
                         "r"(hi) : "memory");
        }
        __syncwarp();
        constexpr int CHUNKS_PER_ROW = D / 8;
        u16* Oh = O + head;
#pragma unroll
        for (int i = 0; i < 16 * CHUNKS_PER_ROW / 32; ++i) {
            const int id = lane + 32 * i;
            const int r = id / CHUNKS_PER_ROW;  // 0..15 within the warp
            const int c = id % CHUNKS_PER_ROW;
            const int row = warp_row0 + r;
            u32 x0, x1, x2, x3;
            asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
                         : "r"(sQ + (warp * 16 + r) * ROW_BYTES + ((c ^ (r & 7)) << 4))
                         : "memory");
            if (row < N) {
                u16* dst = Oh + (size_t)row * D + c * 8;
                asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(x0),
                             "r"(x1), "r"(x2), "r"(x3) : "memory");
            }
        }
    }

    // STEP store_ml — the O(N) statistics: m in natural-log units (m_run · ln 2), l as is.
    store_row_stats(M, L, (size_t)blockIdx.y * N, warp_row0 + g, N, t, m_run, l_run);

    TRACE_SYNC_MARK(BlockPhase::end, q_block);
}
