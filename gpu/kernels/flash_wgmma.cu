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
// Loads. A 1-D bulk copy (cp.async.bulk) moves bytes unchanged, so it cannot write the swizzled
// layout above, and wgmma's unswizzled layout needs 8×16-byte "core matrices" that a row-major K
// tile is not. So this kernel keeps the 16-byte cp.async of the mma kernel (which can write any
// layout, and zero-fills rows past N), issued by all threads, NS stages deep. The
// warp-specialized kernel (flash_ws.cu) instead has one producer thread issue TMA tensor copies
// (cp.async.bulk.tensor with SWIZZLE_128B, from a CUtensorMap built on the host).
//
// Ordering rules that matter (Hopper has two "proxies" for shared memory):
//   * cp.async writes are generic-proxy writes and wgmma reads through the async proxy, so each
//     thread runs `fence.proxy.async.shared::cta` after its copies land and before the barrier.
//   * Registers an in-flight wgmma reads or writes (S, O, P) must not be touched until the
//     matching wgmma.wait_group; `wgmma.fence` orders earlier register writes (P, the rescaled O)
//     before the next wgmma; `keep_regs` stops the compiler hoisting accumulator reads above a
//     wait.
//
// Storage: fp16 and bf16 are raw 16-bit words (u16); BF16 picks the instruction variants. The
// PTX wrappers (cp.async, ldmatrix, wgmma and its descriptors) live in the shared headers of this
// folder; NVRTC compiles the file with -arch=sm_90a (wgmma needs the "a") and this folder on its
// include path.
//
// Row statistics written to M and L (fp32, one per query row), as in flash_mma.cu:
//   M = max_j (q·k_j · scale)   natural-log units;   L = Σ_j exp(q·k_j · scale − M)
// Inside, the running max is kept in base-2 units (scores × scale × log2 e).

#include "hopper.cuh"
#include "online_softmax.cuh"

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
    load_tile_sw128_async<BR, D, NT>(sQ, Qh + (size_t)q0 * D, N - q0, tid);
    // STEP load_K_j
    load_tile_sw128_async<BC, D, NT>(sK, Kh, N, tid);
    cp_async_commit();
    // STEP load_V_j — ... then groups 1 .. NS-1: K_i and V_{i-1}, still in flight during S_0.
#pragma unroll
    for (int i = 1; i < NS; ++i) {
        if (i < kv_tiles)
            load_tile_sw128_async<BC, D, NT>(sK + i * KV_BYTES, Kh + (size_t)i * BC * D, N - i * BC, tid);
        if (i - 1 < kv_tiles)
            load_tile_sw128_async<BC, D, NT>(sV + (i - 1) * KV_BYTES, Vh + (size_t)(i - 1) * BC * D,
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

    RowStats rows;  // running max, row sums and the lazy-rescaling reference of 2 rows
    rows.init();
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

    // Mask keys past the end of the sequence and (causal) keys after the query (mask_tile,
    // online_softmax.cuh): -inf scores become exactly 0 after the exponential.
    auto mask_edges = [&](float (&s)[S_REGS], int j) {
        mask_tile<S_REGS, CAUSAL>(s, j * BC, N, warp_row0, g, t);
    };

    // STEP online_softmax — part 1: the row max of a new S tile, and (rarely) a rescale
    // (`RowStats`, online_softmax.cuh): the reference m_ref moves only when a row max grows by
    // more than 2^8, so P stays < 256 and the rescale of O and l is rare; one warp-wide vote
    // decides it. `new_max` says whether this warp must rescale, done by `rescale` once no
    // wgmma is writing O.
    auto new_max = [&](float (&s)[S_REGS]) -> bool { return rows.new_max(s, scale_log2); };
    auto rescale = [&]() { rows.rescale(o_acc); };

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
                const float p = fast_exp2(fmaf(s[i], scale_log2, -rows.m_base[(e >> 1) & 1]));
                rows.l_run[(e >> 1) & 1] += p;
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
                load_tile_sw128_async<BC, D, NT>(sK + (tk % NS) * KV_BYTES, Kh + (size_t)tk * BC * D,
                                           N - tk * BC, tid);
            const int tv = j + NS - 1;
            if (tv < kv_tiles)
                load_tile_sw128_async<BC, D, NT>(sV + (tv % NS) * KV_BYTES, Vh + (size_t)tv * BC * D,
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
    rows.finish(inv_l);

    // STEP store_O_i — stage this warp's 16×D rows in its own rows of the Q tile (only its own
    // warpgroup's wgmmas or its own ldmatrix read them, all complete), then 16-byte coalesced
    // stores to HBM.
    store_o_sw128<D, BR, BF16>(O + head, sQ, wg * 64 + warp * 16, q0, N, o_acc, inv_l,
                               lane);

    // STEP store_ml — m in natural-log units (m_run · ln 2), l as is.
    store_row_stats(M, L, (size_t)blockIdx.y * N, warp_row0 + g, N, t, rows.m_run, rows.l_run);
}
