// flash_bwd_wgmma.cu — the backward pass on Hopper's warpgroup MMA (sm_90a: H100, H200).
//
// The same algorithm as flash_bwd.cu (read that file first: the recompute of P, why the
// transposed tiles Sᵀ, dPᵀ, dSᵀ, the masking), with its five products on wgmma instead of
// mma.sync. It replaces only the main kernel: flash_bwd_preprocess (D, LSE2, dQ accumulator = 0)
// runs before it and flash_bwd_dq_convert (or, deterministic, flash_bwd_dq) after it, from
// flash_bwd.cu.
//
//   one block per key/value tile j of BC = 128 keys: 2 warpgroups, 64 keys each
//       load K_j, V_j once; they stay in shared memory                 // STEP load_KV_j
//       dK_j = dV_j = 0 (registers)
//       for each query tile i (BR rows) that may see key tile j:        — the inner loop
//           Q_i, dO_i, LSE2_i, D_i stream HBM -> shared memory (two stages) // STEP load_Q_dO_i
//           Sᵀ  = K_j Q_iᵀ   wgmma, A = K_j, B = Q_i, both from smem       // STEP recompute_S
//           dPᵀ = V_j dO_iᵀ  wgmma, A = V_j, B = dO_i (issued with Sᵀ)     // STEP compute_dP
//           Pᵀ = 2^(Sᵀ · scale · log2 e − LSE2)   (while dPᵀ runs)        // STEP recompute_P
//           dV_j += Pᵀ dO_i  wgmma, A = Pᵀ from registers                 // STEP accumulate_dV
//           dSᵀ = Pᵀ ∘ (dPᵀ − D)                  (while dV runs)          // STEP compute_dS
//           dK_j += dSᵀ Q_i  wgmma, A = dSᵀ from registers                // STEP accumulate_dK
//           dS -> shared memory (stmatrix, transposed; while dK runs)
//           dQ_i += dS K_j   wgmma, A = dS, B = K_j from smem; fp32 atomics  // STEP accumulate_dQ
//       write dK_j · scale and dV_j                                      // STEP store_dK_dV
//
// Why wgmma is faster here than mma.sync: one instruction computes 64×N×16 for a whole warpgroup,
// reads its shared-memory operands itself (no ldmatrix, no register copies of K, V, Q, dO),
// and runs asynchronously, so the exponentials of Pᵀ overlap dPᵀ, dSᵀ overlaps dV, and the store
// of dS overlaps dK.
//
// The split. Warpgroup w owns keys 64w..64w+63 of the tile: rows of Sᵀ, dPᵀ, dSᵀ, dK_j, dV_j.
// Warp q of a warpgroup owns 16 of those keys; thread (g = lane/4, t = lane%4) holds keys g and
// g+8 and, in every 8-query slice, queries 2t and 2t+1 (the accumulator layout of flash_wgmma.cu).
// As in flash_bwd.cu, that layout is exactly the register A operand of dV += Pᵀ dO and
// dK += dSᵀ Q, so Pᵀ and dSᵀ never leave the registers for those. dQ_i = dS K_j contracts over
// all 128 keys, both warpgroups' halves, so dS goes through shared memory once:
//   d = 64,  BR = 128: warpgroup w computes dQ for queries 64w..64w+63, all 64 columns;
//   d = 128, BR = 64:  warpgroup w computes dQ for all 64 queries, columns 64w..64w+63.
//
// Shared memory, every tile in the 128-byte-swizzle layout of flash_wgmma.cu (64-value column
// blocks of 128-byte rows, 16-byte chunk c of row r at c ^ (r % 8), 1024-byte aligned):
//   | buffer      | rows × cols       | d=64, BR=128 | d=128, BR=64 |
//   | sK, sV      | BC × d each       | 2 × 16 KiB   | 2 × 32 KiB   |
//   | sQ ×2       | BR × d per stage  | 2 × 16 KiB   | 2 × 16 KiB   |
//   | sdO ×2      | BR × d per stage  | 2 × 16 KiB   | 2 × 16 KiB   |
//   | sdS         | BR × BC (dS)      | 32 KiB       | 16 KiB       |
//   | LSE2, D ×2  | BR fp32 per stage | 2 KiB        | 1 KiB        |
// The wgmma operands, with their descriptors (start, leading and stride byte offsets):
//   Sᵀ:  A = K_j rows 64w.. (K-major: d runs along the row), B = Q_i (K-major)
//   dPᵀ: A = V_j rows 64w.., B = dO_i
//   dV:  B = dO_i read MN-major (d is the output dim N; the queries are contracted), as the
//        forward reads V: start + 16 rows · 128 bytes per k-step, LBO = BR · 128, SBO = 1024
//   dK:  B = Q_i, likewise
//   dQ:  A = dS (K-major: keys run along the row), B = K_j read MN-major
// dS is stored query-major (dS, not dSᵀ) so that it is a K-major A operand: stmatrix.trans
// writes each 8×8 block of the dSᵀ fragments with its columns as rows.
//
// Ordering: cp.async writes are generic-proxy writes, wgmma reads through the async proxy, so a
// fence.proxy.async follows every landing of copies and the st/stmatrix of dS, before the barrier
// that publishes them. A buffer is overwritten only after the wgmmas that read it have completed
// (wgmma.wait_group 0 at the end of each step, then the barrier at the top of the next).

#include "hopper.cuh"
#include "online_softmax.cuh"

// The kernel.
//   D          head dim (64 or 128)
//   BR         query rows per step (128 at d = 64, 64 at d = 128: the registers decide)
//   CAUSAL     query q sees key k only when k <= q
//   BF16       bf16 inputs/outputs (else fp16)
//   DQ_ATOMIC  accumulate dQ here with fp32 atomics (else flash_bwd_dq computes it)
// Grid: (ceil(N / 128), batch·heads). Block: 256 threads (2 warpgroups). Dynamic shared memory:
// flash_bwd_wgmma_smem below (1024 bytes of alignment slack included), computed on the host too.
// Arrays as flash_bwd's: Q, K, V, dO (BH, N, D) b16; LSE2, Dsum (BH, n_pad) fp32; dQacc (BH, N, D)
// fp32; dK, dV (BH, N, D) b16. scale_log2 = log2(e)/√d, scale = 1/√d.
template <int D, int BR, bool CAUSAL, bool BF16, bool DQ_ATOMIC>
__global__ void __launch_bounds__(256, 1)
flash_bwd_wgmma(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V,
                const u16* __restrict__ dO, const float* __restrict__ LSE2,
                const float* __restrict__ Dsum, float* __restrict__ dQacc, u16* __restrict__ dK,
                u16* __restrict__ dV, int N, int n_pad, float scale_log2, float scale) {
    constexpr int BC = 128;             // keys per block: 2 warpgroups × 64
    constexpr int NT = 256;
    constexpr int D_STEPS = D / 16;     // k-steps of Sᵀ, dPᵀ (contraction over d)
    constexpr int Q_STEPS = BR / 16;    // k-steps of dV, dK (contraction over queries)
    constexpr int KEY_STEPS = BC / 16;  // k-steps of dQ (contraction over keys)
    constexpr int S_REGS = BR / 2;      // fp32 accumulators of Sᵀ (64 keys × BR) per thread
    constexpr int KV_REGS = D / 2;      // of dK_j or dV_j (64 keys × D)
    constexpr int DQ_N = BR == 128 ? D : D / 2;  // dQ columns per warpgroup
    constexpr int DQ_REGS = DQ_N / 2;
    constexpr u32 KV_BYTES = BC * D * 2;
    constexpr u32 Q_BYTES = BR * D * 2;
    constexpr u32 DS_BYTES = BR * BC * 2;
    static_assert((D == 64 && BR == 128) || (D == 128 && BR == 64), "d=64 with 128 query rows, "
                  "or d=128 with 64");

    extern __shared__ __align__(128) unsigned char smem_raw[];
    const u32 base = smem_addr(smem_raw);
    const u32 sK = (base + 1023u) & ~1023u;
    const u32 sV = sK + KV_BYTES;
    const u32 sQ = sV + KV_BYTES;       // stage s at sQ + s · Q_BYTES
    const u32 sdO = sQ + 2 * Q_BYTES;   // likewise
    const u32 sdS = sdO + 2 * Q_BYTES;
    const u32 sStats = sdS + DS_BYTES;  // stage s: LSE2 at [s·2BR, s·2BR+BR), D after it (fp32)
    const float* stats = reinterpret_cast<const float*>(smem_raw + (sStats - base));

    const int tid = threadIdx.x;
    const int wg = tid >> 7;            // warpgroup: keys 64·wg .. 64·wg + 63 of the tile
    const int warp = (tid >> 5) & 3;    // warp within it: 16 of those keys
    const int lane = tid & 31;
    const int g = lane >> 2;
    const int t = lane & 3;

    // Causal: key tile j is seen by queries j·BC and later. Tile 0 has the most query tiles,
    // so the natural order already launches the longest blocks first.
    const int kv0 = blockIdx.x * BC;
    const int warp_key0 = kv0 + wg * 64 + warp * 16;  // first key of this warp
    const size_t head = (size_t)blockIdx.y * N * D;
    const u16* Qh = Q + head;
    const u16* dOh = dO + head;
    const float* LSEh = LSE2 + (size_t)blockIdx.y * n_pad;
    const float* Dh = Dsum + (size_t)blockIdx.y * n_pad;
    float* dQh = dQacc + head;

    const int q_tiles = (N + BR - 1) / BR;
    const int i_first = CAUSAL ? kv0 / BR : 0;  // query tiles before it see none of these keys

    // Request query tile i (Q_i, dO_i, LSE2_i, D_i) into stage `st`. The statistics arrays are
    // padded to n_pad rows per head, so whole 16-byte chunks are always in bounds.
    auto load_query_tile = [&](int i, int st) {
        const int q0 = i * BR;
        load_tile_sw128_async<BR, D, NT>(sQ + st * Q_BYTES, Qh + (size_t)q0 * D, N - q0, tid);
        load_tile_sw128_async<BR, D, NT>(sdO + st * Q_BYTES, dOh + (size_t)q0 * D, N - q0, tid);
        load_row_stats_async<BR>(sStats, LSEh, Dh, q0, st, tid);
    };

    // STEP load_KV_j — K_j and V_j once, with the first query tile.
    load_tile_sw128_async<BC, D, NT>(sK, K + head + (size_t)kv0 * D, N - kv0, tid);
    load_tile_sw128_async<BC, D, NT>(sV, V + head + (size_t)kv0 * D, N - kv0, tid);
    load_query_tile(i_first, 0);
    cp_async_commit();

    float dk_acc[KV_REGS], dv_acc[KV_REGS];
#pragma unroll
    for (int r = 0; r < KV_REGS; ++r) dk_acc[r] = dv_acc[r] = 0.f;

    // This warpgroup's rows of K_j / V_j as the A operand (K-major), k-step kk over d.
    auto kv_desc = [&](u32 tile, int kk) {
        return sw128_desc(tile + (kk >> 2) * (BC * 128) + wg * 64 * 128 + (kk & 3) * 32, 16, 1024);
    };

    // dQ: this warpgroup's 64 queries and 64-column block of d (see "The split" above).
    const int q_slab = BR == 128 ? wg : 0;
    const int col_block = BR == 128 ? 0 : wg;
    float dq[DQ_REGS];
    // fp32 reductions of dQ_i into the accumulator (resolved in L2); the scale comes at convert.
    auto send_dq = [&](int i) {
        const int row = i * BR + q_slab * 64 + warp * 16 + g;
#pragma unroll
        for (int nb = 0; nb < DQ_N / 8; ++nb) {
            const int col = col_block * 64 + nb * 8 + 2 * t;
            if (row < N) red_add_f32x2(dQh + (size_t)row * D + col, dq[4 * nb], dq[4 * nb + 1]);
            if (row + 8 < N)
                red_add_f32x2(dQh + (size_t)(row + 8) * D + col, dq[4 * nb + 2], dq[4 * nb + 3]);
        }
    };

    for (int i = i_first; i < q_tiles; ++i) {
        const int st = (i - i_first) & 1;
        const int q0 = i * BR;
        // STEP load_Q_dO_i — tile i has landed (and is visible to the async proxy); the
        // barrier also says every wgmma of tile i-1 is complete, so its stage may be refilled.
        cp_async_wait<0>();
        fence_proxy_async();
        __syncthreads();
        if (i + 1 < q_tiles) load_query_tile(i + 1, st ^ 1);
        cp_async_commit();

        const u32 sQi = sQ + st * Q_BYTES;
        const u32 sdOi = sdO + st * Q_BYTES;
        const float* lse_i = stats + st * 2 * BR;
        const float* d_i = lse_i + BR;

        // STEP recompute_S — Sᵀ = K_j Q_iᵀ: 64 keys × BR queries per warpgroup, D/16 wgmmas.
        // STEP compute_dP — dPᵀ = V_j dO_iᵀ: the same shape, its own group right behind.
        float s[S_REGS], dp[S_REGS];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D_STEPS; ++kk) {
            const u64 b = sw128_desc(sQi + (kk >> 2) * (BR * 128) + (kk & 3) * 32, 16, 1024);
            if (kk == 0) wgmma_ss<BR, false, BF16>(s, kv_desc(sK, kk), b);
            else wgmma_ss<BR, true, BF16>(s, kv_desc(sK, kk), b);
        }
        wgmma_commit();
#pragma unroll
        for (int kk = 0; kk < D_STEPS; ++kk) {
            const u64 b = sw128_desc(sdOi + (kk >> 2) * (BR * 128) + (kk & 3) * 32, 16, 1024);
            if (kk == 0) wgmma_ss<BR, false, BF16>(dp, kv_desc(sV, kk), b);
            else wgmma_ss<BR, true, BF16>(dp, kv_desc(sV, kk), b);
        }
        wgmma_commit();
        wgmma_wait<1>();  // Sᵀ is done; dPᵀ may still run
        keep_regs(s);

        // STEP recompute_P — Pᵀ = 2^(Sᵀ·scale·log2 e − LSE2[query]), the forward's exact
        // softmax. Accumulator register r: queries 8·(r/4) + 2t + r%2, key g + 8·((r/2)%2).
        // Edge tiles (crossing the diagonal, or the ragged last key tile) mask P to 0.
        const bool edge = (CAUSAL && q0 < warp_key0 + 15) || warp_key0 + 16 > N;
        u32 p_frag[Q_STEPS][4];
#pragma unroll
        for (int nb = 0; nb < BR / 8; ++nb) {
            const int qc = nb * 8 + 2 * t;
            const float2 lse = *reinterpret_cast<const float2*>(lse_i + qc);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = 4 * nb + e;
                float p = fast_exp2(fmaf(s[r], scale_log2, (e & 1) ? -lse.y : -lse.x));
                if (edge) {
                    const int key = warp_key0 + g + ((e >> 1) << 3);
                    const int query = q0 + qc + (e & 1);
                    if (key >= N || (CAUSAL && key > query)) p = 0.f;
                }
                s[r] = p;
            }
        }
        // Packed to 16-bit pairs in the register-A layout: k-step kk (queries 16kk..16kk+15)
        // is exactly accumulator registers 8kk .. 8kk+7.
#pragma unroll
        for (int kk = 0; kk < Q_STEPS; ++kk) {
            p_frag[kk][0] = pack2<BF16>(s[8 * kk + 0], s[8 * kk + 1]);
            p_frag[kk][1] = pack2<BF16>(s[8 * kk + 2], s[8 * kk + 3]);
            p_frag[kk][2] = pack2<BF16>(s[8 * kk + 4], s[8 * kk + 5]);
            p_frag[kk][3] = pack2<BF16>(s[8 * kk + 6], s[8 * kk + 7]);
        }

        // STEP accumulate_dV — dV_j += Pᵀ dO_i: BR/16 wgmmas m64nDk16, dO_i read MN-major.
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Q_STEPS; ++kk)
            wgmma_rs<D, true, true, BF16>(dv_acc, p_frag[kk],
                                          sw128_desc(sdOi + kk * 16 * 128, BR * 128, 1024));
        wgmma_commit();
        wgmma_wait<1>();  // dPᵀ is done; dV may still run
        keep_regs(dp);

        // STEP compute_dS — dSᵀ = Pᵀ ∘ (dPᵀ − D[query]), packed like Pᵀ.
        u32 ds_frag[Q_STEPS][4];
#pragma unroll
        for (int kk = 0; kk < Q_STEPS; ++kk) {
            float ds[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const int r = 8 * kk + e;
                const float dd = d_i[8 * (r >> 2) + 2 * t + (e & 1)];
                ds[e] = s[r] * (dp[r] - dd);
            }
            ds_frag[kk][0] = pack2<BF16>(ds[0], ds[1]);
            ds_frag[kk][1] = pack2<BF16>(ds[2], ds[3]);
            ds_frag[kk][2] = pack2<BF16>(ds[4], ds[5]);
            ds_frag[kk][3] = pack2<BF16>(ds[6], ds[7]);
        }

        // STEP accumulate_dK — dK_j += dSᵀ Q_i, Q_i read MN-major (the scale comes at the store).
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Q_STEPS; ++kk)
            wgmma_rs<D, true, true, BF16>(dk_acc, ds_frag[kk],
                                          sw128_desc(sQi + kk * 16 * 128, BR * 128, 1024));
        wgmma_commit();

        if constexpr (DQ_ATOMIC) {
            // STEP accumulate_dQ — dS (query rows) into sdS while dK runs: each 8×8 block of the
            // dSᵀ fragments goes in transposed. This warpgroup's keys are column block wg of
            // sdS; k-step kk's fragments cover queries 16kk..16kk+15, this warp's 16 keys are
            // chunks 2·warp and 2·warp + 1 of each row.
#pragma unroll
            for (int kk = 0; kk < Q_STEPS; ++kk) {
                const int m = lane >> 3;  // the matrix whose row address this lane gives
                const int q = 16 * kk + 8 * (m >> 1) + (lane & 7);
                const int chunk = 2 * warp + (m & 1);
                stmatrix_x4_trans(sdS + wg * (BR * 128) + q * 128 + ((chunk ^ (q & 7)) << 4),
                                  ds_frag[kk][0], ds_frag[kk][1], ds_frag[kk][2], ds_frag[kk][3]);
            }
            fence_proxy_async();
            __syncthreads();  // both warpgroups' halves of dS are in sdS

            // dQ_i = dS K_j over all 128 keys: 8 wgmmas m64n(DQ_N)k16, K_j read MN-major.
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < KEY_STEPS; ++kk) {
                const u64 a = sw128_desc(sdS + (kk >> 2) * (BR * 128) + q_slab * 64 * 128 +
                                             (kk & 3) * 32, 16, 1024);
                const u64 b = sw128_desc(sK + col_block * (BC * 128) + kk * 16 * 128, BC * 128,
                                         1024);
                if (kk == 0) wgmma_ss<DQ_N, false, BF16, true>(dq, a, b);
                else wgmma_ss<DQ_N, true, BF16, true>(dq, a, b);
            }
            wgmma_commit();
            wgmma_wait<0>();  // dV, dK and dQ_i are done
            keep_regs(dq);
            send_dq(i);
        } else {
            wgmma_wait<0>();  // dV and dK are done
        }
        keep_regs(dk_acc);
        keep_regs(dv_acc);
    }

    // STEP store_dK_dV — dK_j = scale · Σ dSᵀ Q, dV_j = Σ Pᵀ dO, staged in this warp's own rows
    // of sK / sV once every warpgroup is done reading them.
    __syncthreads();
    const float k_mul[2] = {scale, scale};
    const float v_mul[2] = {1.f, 1.f};
    store_o_sw128<D, BC, BF16>(dK + head, sK, wg * 64 + warp * 16, kv0, N, dk_acc, k_mul, lane);
    store_o_sw128<D, BC, BF16>(dV + head, sV, wg * 64 + warp * 16, kv0, N, dv_acc, v_mul, lane);
}
