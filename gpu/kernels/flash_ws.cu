// flash_ws.cu — the warp-specialized Hopper (sm_90a) FlashAttention forward kernel.
//
// The same algorithm as the animation and the other tiled kernels, split between warp roles the
// way FlashAttention-3 does it on an H100/H200:
//
//   for each query tile Q_i (64·NCW rows)                  — one thread block
//     producer warp:                                         — warpgroup 0, one thread issues
//       Q_i -> smem once (TMA)                                 // STEP load_Q_i
//       for each key/value tile j: K_j, V_j -> ring stage      // STEP load_K_j / load_V_j
//         (TMA copy engine; waits only for a free stage)
//     consumer warpgroups 1..NCW (64 query rows each):
//       for each key/value tile j:
//         S_ij = Q_i K_jᵀ            (wgmma, A and B from smem)  // STEP compute_S_ij
//         online softmax: row max m, rescale, P = exp            // STEP online_softmax
//         O_i += P_ij V_j            (wgmma, A = P in registers) // STEP accumulate_O_i
//       O_i /= l, write O_i and the row statistics m, l       // STEP store_O_i / store_ml
//
// What makes it faster than flash_wgmma.cu, and why:
//   * Loads cost the consumers nothing. One producer thread moves whole K/V tiles with the
//     tensor-memory accelerator (TMA: cp.async.bulk.tensor with a host-built tensor map), which
//     writes the 128-byte-swizzle layout wgmma reads and zero-fills rows past N. The consumers
//     issue no copy instructions and keep no address registers for them.
//   * A ring of NS stages guarded by mbarriers: `full[s]` completes when the copy engine has
//     written all bytes of stage s (the producer announces the byte count with expect_tx);
//     `empty[s]` completes when every consumer warp has finished reading it. No __syncthreads in
//     the loop: each side waits only for what it needs.
//   * setmaxnreg: the producer warpgroup gives registers back (PREG, 24–40), the consumer
//     warpgroups take them (up to 240 with 2 consumers), so S, P and O of a 64×128 tile at d=128
//     (64 + 32 + 64 registers) fit without spills.
//   * Ping-pong (PINGPONG): two named barriers make the consumer warpgroups take turns issuing
//     their GEMMs, so the tensor cores run one warpgroup's S = QKᵀ and P·V while the other
//     warpgroup does its softmax (exponentials, row max and sums on the ALUs and the MUFU unit).
//   * Intra-warpgroup overlap (OVERLAP): step j issues S_j = Q K_jᵀ and P_{j-1} V_{j-1} back to
//     back, then does the softmax of S_j while P_{j-1} V_{j-1} is still running.
//   * Causal: key tiles above the diagonal are never loaded; blocks start longest first, and
//     heads are handed out in groups that share L2 (see "Block order").
//   * Persistent blocks (PERSIST): one block per SM walks the query tiles with two Q buffers (one
//     at d = 256, where two do not fit: then the next tile's first K tile goes ahead of its Q), so
//     the producer copies the next tile's Q and its first K/V tiles while the consumers still
//     finish this tile's P·V and epilogue; the next tile starts on data already in shared memory
//     instead of a new block's cold start. Tiles are handed out by a global counter (see "Tile
//     scheduler"): a block takes the next one when its producer has issued the last copy of the
//     current one, so the longest causal tiles, which go first, end up spread evenly and blocks
//     finish together.
//
// Warp roles (NT = 128·(NCW + 1) threads, __launch_bounds__(NT, 1): one block per SM):
//   warpgroup 0       producer: warp 0, lane 0 issues every TMA copy; the rest exit at once
//   warpgroup 1+c     consumer c: query rows 64c .. 64c+63 of the block; warp w of it owns 16 of
//                     them, thread (g = lane/4, t = lane%4) rows g and g+8 and, in every 8-column
//                     slice, columns 2t and 2t+1 (the wgmma accumulator layout)
//
// Shared memory (dynamic, rounded up to 1024 B for the swizzle):
//   Q_i     BR × D     (BR = 64·NCW), D/64 column blocks of BR rows × 128 B; PERSIST: QB of
//           them (1 or 2), tile number `it` of this block in buffer it % QB
//   K ring  NS × BC × D, stage s at sK + s·BC·D·2, column block h at + h·BC·128
//   V ring  the same
//   mbarriers  q_full[QB], (PERSIST: q_empty[QB]), k_full[NS], k_empty[NS], v_full[NS],
//              v_empty[NS] (8 bytes each)
//   PERSIST: tile[QB], the tile index each Q buffer holds (int32 each, 8 bytes in all)
// Every tile is the 128-byte-swizzle layout (16-byte chunk c of row r at chunk c ^ (r % 8)),
// written by TMA boxes of 64 columns (128 B) × rows with CU_TENSOR_MAP_SWIZZLE_128B.
// wgmma descriptors: K-major for Q (A) and K (B): + 32 B per k-step, SBO = 1024 (8 rows);
// V is MN-major (transposed B): + 16 rows · 128 B per k-step, LBO = BC·128 (next 64 columns of
// d), SBO = 1024.
//
// Tensor maps (built by gpu/launch/flash_ws.py): Q, K and V each as a 3-D tensor (D, N,
// batch·heads), innermost first, 16-bit elements; boxes of (64, BR or BC, 1). Rows at or past N of
// a head are outside the tensor, so TMA zero-fills them: a ragged last tile reads zeros, never the
// next head's rows.
//
// Ring protocol. Tile t lives in stage t % NS, round t / NS (t counts every key tile the block
// has visited, over all its query tiles). The producer, before writing stage
// s for round r ≥ 1, waits for phase r−1 of empty[s] (parity (r−1) & 1); it then arrives on
// full[s] with expect_tx(bytes) and issues the copies, which complete the phase. A consumer waits
// for phase r of full[s] (parity r & 1), and once its wgmmas reading the stage are complete
// (wgmma.wait_group), lane 0 of each of its warps arrives on empty[s] (4·NCW arrivals per phase).
// The producer issues K_{j+1} before V_j, the order the consumers need them.
//
// Order of work in a consumer warpgroup, OVERLAP on (step j ≥ 1; S holds S_j, P holds P_{j-1}):
//     wait full K_j            [ping-pong: wait for my turn]
//     issue S_j = Q K_jᵀ       issue O += P_{j-1} V_{j-1}      [ping-pong: pass the turn]
//     wait S_j (wait_group 1); free K_j's stage
//     mask S_j, row max, (rarely) move the reference: l *= alpha
//     P_j = 2^(S_j·c − m) in place, row sums                  <- overlaps P_{j-1} V_{j-1}
//     wait P_{j-1} V_{j-1} (wait_group 0); free V_{j-1}'s stage; O *= alpha if the reference moved
//     pack P_j to 16-bit pairs (the register A operand of the next P·V)
// OVERLAP off: S_j, wait, softmax, P_j V_j, wait — one GEMM in flight at a time.
// Ping-pong turns: consumer c waits on named barrier pingpong_turn_barrier(c) (hopper.cuh's
// NamedBarrier::PingPongTurn0 + c; 256 threads: its own 128 arrive by
// waiting, the previous consumer's 128 by `bar.arrive` after issuing its GEMMs); consumer 0
// gets the first turn from itself, and takes the last pending turn at the end, so every barrier
// is balanced when the block exits.
//
// Q buffers (PERSIST). The block's query tile number `it` uses buffer b = it % QB and phase
// it / QB of q_full[b]. The epilogue stages O in that buffer (generic-proxy stores), so before
// the producer may copy tile it + QB's Q into it, every consumer warp fences its shared-memory
// accesses against the copy engine (fence.proxy.async) and arrives on q_empty[b].
//
// Tile scheduler (PERSIST). Block b's first tile is b; after that its producer draws
// gridDim.x + atomicAdd(&sched[0], 1) and writes the index to tile[buffer] before its arrival
// on q_full[buffer] (an mbarrier arrival releases the thread's earlier writes; the consumers'
// wait acquires them). An index past the last tile is the end: the producer arrives without
// bytes and the consumers, reading it, leave. The last producer to leave puts both counters
// back to 0 (sched[1] counts the producers that left), so the next launch starts from zero with
// no host-side reset.
//
// Block order. A linear tile index (blockIdx.x, or with PERSIST the drawn one) → (head, query
// tile): heads are handed out in groups of HG
// (host-chosen so a group's K and V stay in L2), and inside a group causal blocks run longest
// first (the last query tiles see the most key tiles), so short blocks fill the tail and SMs
// finish together; non-causal blocks go in query-tile order.
//
// Row statistics written to M and L (fp32, one per query row), as in the other kernels:
//   M = max_j (q·k_j · scale)   natural-log units;   L = Σ_j exp(q·k_j · scale − M)
// Inside, the running max is kept in base-2 units (scores × scale × log2 e), with lazy
// rescaling (online_softmax.cuh).

#include "hopper.cuh"
#include "online_softmax.cuh"
#include "trace.cuh"

// Trace build (trace.cuh, -DTILESCOPE_TRACE): one writer per role writes its own rows. Block b
// owns rows [b·R, (b+1)·R), R = RP + NCW·RC with T = ceil(N / BC), RP = 2·T + 2, RC = 4·T + 4;
// the producer's rows come first, then consumer 0's, then consumer 1's ... The phase word is
// role_word(role, RolePhase::...) (trace.cuh), role 0 = producer, 1 + c = consumer c:
//   producer (lane 0 of warp 0): load_Q_i issued (j = query tile); load_K_j issued (j);
//     load_V_j issued (j); end (all copies issued)
//   consumer (thread 0 of its warpgroup): load_Q_i, Q landed (j = query tile); wait_K_j (j);
//     gemm_issue (j: S_j with P_{j-1} V_{j-1}; j = T for the last P V), i.e. its turn on the
//     tensor cores began; online_softmax, S_j landed (j); wait_PV, softmax done (j);
//     store_O_i (j = query tile); end
// `block` in a row is blockIdx.x (the launch order), `j` as above.
#define WS_TRACE_ROWS_PRODUCER(T) (2 * (T) + 2)
#define WS_TRACE_ROWS_CONSUMER(T) (4 * (T) + 4)

// The kernel.
//   D       head dim (64, 128 or 256)
//   BC      key/value rows per tile (64, 128 or 192): the N of the S wgmma
//   NCW     consumer warpgroups (2 or 3): BR = 64·NCW query rows per block
//   NS      K/V ring stages (≥ 2)
//   PINGPONG  consumers take turns on the tensor cores (named barriers)
//   OVERLAP   softmax of S_j overlaps P_{j-1} V_{j-1} inside a warpgroup
//   PREG    registers the producer warpgroup keeps (setmaxnreg.dec); consumers get the rest
//   PERSIST_Q  0: one block per query tile; 1 or 2: persistent blocks, one per SM, looping
//           over the query tiles with that many Q buffers (see "Q buffers", "Tile scheduler")
//   CAUSAL  key j may be seen by query i only when j <= i
//   BF16    bf16 inputs/outputs (else fp16)
// Grid: ceil(N / BR) · batch·heads (PERSIST: at most one block per SM). Block: 128·(NCW + 1).
// Dynamic shared memory: see gpu/launch/flash_ws.py (`WsLaunch.smem_bytes`), the same sum as
// the carve-up below.
// Arguments: tensor maps of Q, K, V; O (u16, [bh, N, D]); M, L (fp32, [bh, N]); N; the number of
// (batch, head) pairs; heads per L2 group; log2(e)/√d; the scheduler's two int32 counters (zero
// before the first launch; unused without PERSIST).
template <int D, int BC, int NCW, int NS, bool PINGPONG, bool OVERLAP, int PREG, int PERSIST_Q,
          bool CAUSAL, bool BF16>
__global__ void __launch_bounds__(128 * (NCW + 1), 1)
flash_ws_fwd(const __grid_constant__ TmaMap tm_q, const __grid_constant__ TmaMap tm_k,
             const __grid_constant__ TmaMap tm_v, u16* __restrict__ O, float* __restrict__ M,
             float* __restrict__ L, int N, int bh_count, int group_heads,
             float scale_log2, int* __restrict__ sched TRACE_PARAM) {
    constexpr int BR = 64 * NCW;
    constexpr int K_STEPS = D / 16;    // k-steps of S = Q Kᵀ (contraction over d)
    constexpr int PV_STEPS = BC / 16;  // k-steps of O += P V (contraction over keys)
    constexpr int S_REGS = BC / 2;     // fp32 S accumulators per consumer thread (64×BC / 128)
    constexpr int O_REGS = D / 2;      // fp32 O accumulators per consumer thread (64×D / 128)
    constexpr int PV_N = D < 128 ? D : 128;  // N of one P·V wgmma; d = 256 takes two halves
    constexpr int PV_HALVES = D / PV_N;
    constexpr u32 Q_BYTES = BR * D * 2;
    constexpr u32 KV_BYTES = BC * D * 2;  // one K or V stage
    // setmaxnreg: 128·(PREG + NCW·CREG) must fit the SM's 64 Ki registers; multiples of 8.
    constexpr int CREG = ((65536 / 128 - PREG) / NCW) / 8 * 8 > 240 ? 240
                                                                     : ((65536 / 128 - PREG) / NCW) / 8 * 8;
    static_assert(D == 64 || D == 128 || D == 256, "head dim 64, 128 or 256");
    static_assert(BC == 64 || BC == 128 || BC == 192, "key tile 64, 128 or 192");
    static_assert(NCW == 2 || NCW == 3, "2 or 3 consumer warpgroups");
    static_assert(static_cast<int>(NamedBarrier::PingPongTurn0) + NCW - 1 ==
                      static_cast<int>(NCW == 2 ? NamedBarrier::PingPongTurn1
                                                : NamedBarrier::PingPongTurn2),
                  "one named ping-pong barrier per consumer warpgroup");
    static_assert(static_cast<int>(NamedBarrier::PingPongTurn2) <= MAX_NAMED_BARRIER,
                  "named barrier ids run 1..15");
    static_assert(NS >= 2, "at least double buffering");
    static_assert(PREG >= 24 && PREG % 8 == 0 && CREG >= PREG, "register split");

    extern __shared__ __align__(128) unsigned char smem_raw[];
    constexpr bool PERSIST = PERSIST_Q > 0;
    constexpr int QB = PERSIST ? PERSIST_Q : 1;  // Q buffers
    constexpr int QBARS = PERSIST ? 2 * QB : 1;  // q_full[QB] (and q_empty[QB])
    static_assert(PERSIST_Q >= 0 && PERSIST_Q <= 2, "0, 1 or 2 Q buffers of a persistent block");
    const u32 sQ0 = (smem_addr(smem_raw) + 1023u) & ~1023u;  // swizzle atoms need 1024 B
    const u32 sK = sQ0 + QB * Q_BYTES;
    const u32 sV = sK + NS * KV_BYTES;
    const u32 bars = sV + NS * KV_BYTES;  // 8-byte mbarriers after the tiles
    auto q_full = [&](int b) { return bars + 8u * b; };
    auto q_empty = [&](int b) { return bars + 8u * (QB + b); };  // PERSIST only
    auto k_full = [&](int s) { return bars + 8u * (QBARS + s); };
    auto k_empty = [&](int s) { return bars + 8u * (QBARS + NS + s); };
    auto v_full = [&](int s) { return bars + 8u * (QBARS + 2 * NS + s); };
    auto v_empty = [&](int s) { return bars + 8u * (QBARS + 3 * NS + s); };
    // PERSIST: the tile index of each Q buffer, after the mbarriers.
    volatile int* tile_slot =
        reinterpret_cast<volatile int*>(smem_raw + (bars + 8u * (QBARS + 4 * NS) - smem_addr(smem_raw)));

    const int tid = threadIdx.x;
    const int wg = tid >> 7;          // 0: producer; 1..NCW: consumers
    const int warp = (tid >> 5) & 3;  // warp within its warpgroup
    const int lane = tid & 31;

    // Block order: tile index -> (head group, then query tile and head within the group).
    const int q_tiles = (N + BR - 1) / BR;
    const int tile_count = q_tiles * bh_count;
    int bh = 0, q_tile = 0, q0 = 0, kv_tiles = 0;  // of the query tile being worked on
    auto locate = [&](int tile) {
        const int per_group = group_heads * q_tiles;
        const int group = tile / per_group;
        const int heads = min(group_heads, bh_count - group * group_heads);
        const int r = tile - group * per_group;
        const int q_rank = r / heads;  // tiles of one query tile (all heads of the group) ...
        bh = group * group_heads + (r - q_rank * heads);
        q_tile = CAUSAL ? q_tiles - 1 - q_rank : q_rank;  // ... longest first when causal
        q0 = q_tile * BR;
        // Key tiles this query tile visits (causal: up to the one holding its last row's
        // diagonal).
        kv_tiles = (N + BC - 1) / BC;
        if (CAUSAL) kv_tiles = min(kv_tiles, (min(q0 + BR, N) - 1) / BC + 1);
    };

    if (tid == 0) {
        for (int b = 0; b < QB; ++b) mbar_init(q_full(b), 1);
        if constexpr (PERSIST)
            for (int b = 0; b < QB; ++b) mbar_init(q_empty(b), 4 * NCW);
        for (int s = 0; s < NS; ++s) {
            mbar_init(k_full(s), 1);
            mbar_init(v_full(s), 1);
            mbar_init(k_empty(s), 4 * NCW);
            mbar_init(v_empty(s), 4 * NCW);
        }
        mbar_fence_init();
    }
    __syncthreads();

#ifdef TILESCOPE_TRACE
    const int trace_t = (N + BC - 1) / BC;
    const int trace_rows = WS_TRACE_ROWS_PRODUCER(trace_t) + NCW * WS_TRACE_ROWS_CONSUMER(trace_t);
    const int trace_first = wg == 0 ? 0
                                    : WS_TRACE_ROWS_PRODUCER(trace_t) +
                                          (wg - 1) * WS_TRACE_ROWS_CONSUMER(trace_t);
#endif
    TRACE_CURSOR;  // moved to each query tile's rows (TRACE_SEEK) as the tile starts

    if (wg == 0) {
        // ---------------------------------------------------------------- producer warpgroup
        reg_dealloc<PREG>();
        if (warp != 0 || lane != 0) return;
        tma_prefetch(tm_q);
        tma_prefetch(tm_k);
        tma_prefetch(tm_v);
        int kv_base = 0;  // key tiles of this block's earlier query tiles (the ring's count)
        // STEP load_K_j / STEP load_V_j — key tile j of this query tile into ring stage
        // t % NS (t = kv_base + j) once that stage is free.
        auto load_kv = [&](const TmaMap& map, u32 s_ring, bool is_k, int j) {
            const int t = kv_base + j, s = t % NS, round = t / NS;
            const u32 full = is_k ? k_full(s) : v_full(s);
            if (round > 0) mbar_wait(is_k ? k_empty(s) : v_empty(s), (round - 1) & 1);
            mbar_arrive_expect_tx(full, KV_BYTES);
            const u32 stage = s_ring + s * KV_BYTES;
#pragma unroll
            for (int h = 0; h < D / 64; ++h) tma_load_3d(stage + h * (BC * 128), map, full, 64 * h, j * BC, bh);
        };
        // One Q buffer: the next tile's K_0 goes into the ring before the wait for the Q buffer
        // (the consumers' epilogue), so at least that copy overlaps the end of the tile.
        constexpr bool K_FIRST = PERSIST && QB == 1;
        int tile = blockIdx.x;
        for (int it = 0;; ++it) {
            const int b = it % QB;
            const bool done = PERSIST && tile >= tile_count;  // no tiles left
            if (!done) {
                locate(tile);
                TRACE_SEEK(tile, trace_rows, trace_first);
                if (K_FIRST) {
                    load_kv(tm_k, sK, true, 0);
                    TRACE_MARK_IF(true, role_word(PRODUCER_ROLE, RolePhase::load_K_j), 0);
                }
            }
            // STEP load_Q_i — Q_i: HBM -> shared memory once, D/64 boxes of 64 columns × BR
            // rows, into buffer it % QB once the tile that used it last has stored its O.
            if (PERSIST && it >= QB) mbar_wait(q_empty(b), ((it / QB) - 1) & 1);
            if constexpr (PERSIST) {
                tile_slot[b] = tile;  // published by the arrival on q_full[b]
                if (done) {  // tell the consumers, then leave
                    mbar_arrive(q_full(b));
                    break;
                }
            }
            const u32 sQ = sQ0 + b * Q_BYTES;
            mbar_arrive_expect_tx(q_full(b), Q_BYTES);
#pragma unroll
            for (int h = 0; h < D / 64; ++h) tma_load_3d(sQ + h * (BR * 128), tm_q, q_full(b), 64 * h, q0, bh);
            TRACE_MARK_IF(true, role_word(PRODUCER_ROLE, RolePhase::load_Q_i), q_tile);

            if (!K_FIRST) {
                load_kv(tm_k, sK, true, 0);
                TRACE_MARK_IF(true, role_word(PRODUCER_ROLE, RolePhase::load_K_j), 0);
            }
            for (int j = 0; j < kv_tiles; ++j) {
                if (j + 1 < kv_tiles) {
                    load_kv(tm_k, sK, true, j + 1);
                    TRACE_MARK_IF(true, role_word(PRODUCER_ROLE, RolePhase::load_K_j), j + 1);
                }
                load_kv(tm_v, sV, false, j);
                TRACE_MARK_IF(true, role_word(PRODUCER_ROLE, RolePhase::load_V_j), j);
            }
            TRACE_MARK_IF(true, role_word(PRODUCER_ROLE, RolePhase::end), q_tile);
            kv_base += kv_tiles;
            if constexpr (!PERSIST) break;
            tile = gridDim.x + atomicAdd(sched, 1);  // the next tile nobody has taken
        }
        if constexpr (PERSIST) {  // the last block out resets the scheduler for the next launch
            if (atomicAdd(sched + 1, 1) == (int)gridDim.x - 1) {
                atomicExch(sched, 0);
                atomicExch(sched + 1, 0);
            }
        }
        return;
    }

    // -------------------------------------------------------------------- consumer warpgroups
    reg_alloc<CREG>();
    const int c = wg - 1;              // consumer index: rows 64c .. 64c + 63 of the block
    const int g = lane >> 2;           // this thread's rows: g and g + 8 of its warp's 16
    const int t = lane & 3;            // its column pair in every 8-column slice: 2t, 2t + 1
    int warp_row0 = 0;  // first query row of this warp in the current query tile
    u32 sQ = sQ0;       // the current query tile's Q buffer
    int kv_base = 0;    // key tiles of this block's earlier query tiles (the ring's count)
    const bool tracer = (tid & 127) == 0;
    (void)tracer;
    const int role = 1 + c;
    (void)role;

    // Ping-pong turns on named barriers PingPongTurn0.. (256 threads each: this warpgroup and
    // the one before it in the round).
    auto my_turn = [&]() {
        if constexpr (PINGPONG) named_bar_sync(pingpong_turn_barrier(c), 256);
    };
    auto pass_turn = [&]() {
        if constexpr (PINGPONG) named_bar_arrive(pingpong_turn_barrier((c + 1) % NCW), 256);
    };

    // Free a stage: once this warp's wgmmas reading it are complete, one arrival per warp.
    auto release = [&](u32 empty) {
        __syncwarp();
        if (lane == 0) mbar_arrive(empty);
    };

    // Ring stage and phase parity of key tile j of the current query tile.
    auto stage = [&](int j) { return (kv_base + j) % NS; };
    auto parity = [&](int j) { return ((kv_base + j) / NS) & 1; };

    RowStats rows;  // running max, row sums and the lazy-rescaling reference of 2 rows
    float o_acc[O_REGS];
    float s_acc[S_REGS];
    u32 p_frag[PV_STEPS][4];  // P as the A operand of the P V wgmma

    // STEP compute_S_ij — issue S = Q_i K_jᵀ for this warpgroup's 64 rows × BC keys: D/16
    // wgmmas (A = Q rows of this warpgroup, B = K_j, both from smem), one commit group.
    auto issue_S = [&](int j) {
        const u32 k_stage = sK + stage(j) * KV_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk) {
            const u32 q_off = (kk >> 2) * (BR * 128) + c * 64 * 128 + (kk & 3) * 32;
            const u32 k_off = (kk >> 2) * (BC * 128) + (kk & 3) * 32;
            const u64 desc_q = sw128_desc(sQ + q_off, 16, 1024);
            const u64 desc_k = sw128_desc(k_stage + k_off, 16, 1024);
            if (kk == 0) wgmma_ss<BC, false, BF16>(s_acc, desc_q, desc_k);
            else wgmma_ss<BC, true, BF16>(s_acc, desc_q, desc_k);
        }
        wgmma_commit();
    };
    // STEP accumulate_O_i — issue O_i += P_ij V_j: BC/16 k-steps of m64nDk16 (two m64n128k16
    // halves at d = 256), A = P from registers, B = V_j read transposed, one commit group.
    auto issue_PV = [&](int j) {
        const u32 v_stage = sV + stage(j) * KV_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < PV_STEPS; ++kk) {
#pragma unroll
            for (int h = 0; h < PV_HALVES; ++h) {
                const u32 v_off = h * 2 * (BC * 128) + kk * 16 * 128;
                float (&o_half)[PV_N / 2] = *reinterpret_cast<float (*)[PV_N / 2]>(o_acc + h * (PV_N / 2));
                wgmma_rs<PV_N, true, true, BF16>(o_half, p_frag[kk],
                                                 sw128_desc(v_stage + v_off, BC * 128, 1024));
            }
        }
        wgmma_commit();
    };
    // STEP online_softmax — the row max of S_j (masked), the lazy reference move (l rescaled at
    // once, O later, when no wgmma writes it), P = 2^(S·c − m_ref) in place and the row sums.
    // Returns the per-row factors for O (1 where the reference did not move).
    auto softmax = [&](int j, float (&alpha)[2]) -> bool {
        mask_tile<S_REGS, CAUSAL>(s_acc, j * BC, N, warp_row0, g, t);
        const bool moved = rows.new_max(s_acc, scale_log2);
        alpha[0] = alpha[1] = 1.f;
        if (moved) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                alpha[r] = rows.alpha(r);
                rows.move_reference(r);
                rows.l_run[r] *= alpha[r];
            }
        }
#pragma unroll
        for (int i = 0; i < S_REGS; ++i) {
            const int r = (i >> 1) & 1;
            const float p = fast_exp2(fmaf(s_acc[i], scale_log2, -rows.m_base[r]));
            rows.l_run[r] += p;
            s_acc[i] = p;
        }
        return moved;
    };
    auto rescale_o = [&](const float (&alpha)[2]) {
#pragma unroll
        for (int i = 0; i < O_REGS; i += 4) {
            o_acc[i] *= alpha[0];
            o_acc[i + 1] *= alpha[0];
            o_acc[i + 2] *= alpha[1];
            o_acc[i + 3] *= alpha[1];
        }
    };
    // P packed to 16-bit pairs in the register-A layout of the P·V wgmma: for k-step kk (keys
    // 16kk..16kk+15) exactly S registers 8kk .. 8kk+7.
    auto pack_P = [&](u32 (&p)[PV_STEPS][4]) {
#pragma unroll
        for (int kk = 0; kk < PV_STEPS; ++kk) {
            p[kk][0] = pack2<BF16>(s_acc[8 * kk + 0], s_acc[8 * kk + 1]);
            p[kk][1] = pack2<BF16>(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);
            p[kk][2] = pack2<BF16>(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);
            p[kk][3] = pack2<BF16>(s_acc[8 * kk + 6], s_acc[8 * kk + 7]);
        }
    };
    // The registers an in-flight wgmma reads (P) must stay untouched until its wait: this empty
    // asm after the wait is their last "use", so the compiler cannot reuse them earlier.
    auto keep_p = [&]() {
#pragma unroll
        for (int kk = 0; kk < PV_STEPS; ++kk)
#pragma unroll
            for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(p_frag[kk][e])::"memory");
    };

    float alpha[2];
    bool moved = false;  // whether the last softmax moved the reference (O to be rescaled)

    // Wait for the P V wgmma of tile j_done and free its V stage.
    auto finish_pv = [&](int j_done) {
        wgmma_wait<0>();
        keep_regs(o_acc);
        keep_p();
        release(v_empty(stage(j_done)));
    };

    // Step j >= 1 with OVERLAP: S_j and P_{j-1} V_{j-1} issued together; the softmax of S_j
    // runs while P_{j-1} V_{j-1} does; then wait for it, rescale O if the reference moved, and
    // pack P_j into the registers P_{j-1} V_{j-1} read.
    auto overlap_step = [&](int j) {
        const int sk = stage(j), sv = stage(j - 1);
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::wait_K_j), j);
        mbar_wait(k_full(sk), parity(j));
        mbar_wait(v_full(sv), parity(j - 1));
        my_turn();
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::gemm_issue), j);
        issue_S(j);
        issue_PV(j - 1);  // P_{j-1} V_{j-1} runs behind S_j ...
        pass_turn();
        wgmma_wait<1>();  // S_j done (P_{j-1} V_{j-1} may still run)
        keep_regs(s_acc);
        release(k_empty(sk));
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::online_softmax), j);
        moved = softmax(j, alpha);  // ... while this runs on the ALUs
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::wait_PV), j);
        // ptxas schedules within basic blocks and would hoist the wait below above most of
        // the exponentials; a (never taken) branch on the row sums keeps them above it.
        end_block_after(rows.l_run[0] + rows.l_run[1]);
        finish_pv(j - 1);
        if (moved) rescale_o(alpha);
        pack_P(p_frag);
    };
    // Step j >= 1 without OVERLAP: P_{j-1} V_{j-1} and S_j, both waited for before the softmax.
    auto plain_step = [&](int j) {
        const int sk = stage(j), sv = stage(j - 1);
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::wait_K_j), j);
        mbar_wait(k_full(sk), parity(j));
        mbar_wait(v_full(sv), parity(j - 1));
        my_turn();
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::gemm_issue), j);
        issue_PV(j - 1);
        issue_S(j);
        pass_turn();
        finish_pv(j - 1);
        keep_regs(s_acc);
        release(k_empty(sk));
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::online_softmax), j);
        moved = softmax(j, alpha);
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::wait_PV), j);
        if (moved) rescale_o(alpha);
        pack_P(p_frag);
    };
    // The last tile's P V.
    auto last_pv = [&]() {
        const int last = kv_tiles - 1;
        mbar_wait(v_full(stage(last)), parity(last));
        my_turn();
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::gemm_issue), kv_tiles);
        issue_PV(last);
        pass_turn();
        finish_pv(last);
    };

    for (int it = 0;; ++it) {
        // STEP load_Q_i — wait for Q_i (the producer's TMA copy) and, with PERSIST, read which
        // tile it is.
        const int qb = it % QB;
        mbar_wait(q_full(qb), (it / QB) & 1);
        const int tile = PERSIST ? tile_slot[qb] : (int)blockIdx.x;
        if (tile >= tile_count) break;
        locate(tile);
        TRACE_SEEK(tile, trace_rows, trace_first);
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::load_Q_i), q_tile);
        warp_row0 = q0 + c * 64 + warp * 16;
        sQ = sQ0 + qb * Q_BYTES;
        rows.init();
#pragma unroll
        for (int i = 0; i < O_REGS; ++i) o_acc[i] = 0.f;
        if (PINGPONG && c == 0) named_bar_arrive(pingpong_turn_barrier(0), 256);  // 0 goes first

        // Tile 0: S_0, then its softmax (nothing to overlap with yet; O is still 0).
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::wait_K_j), 0);
        mbar_wait(k_full(stage(0)), parity(0));
        my_turn();
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::gemm_issue), 0);
        issue_S(0);
        pass_turn();
        wgmma_wait<0>();
        keep_regs(s_acc);
        release(k_empty(stage(0)));
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::online_softmax), 0);
        softmax(0, alpha);
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::wait_PV), 0);
        pack_P(p_frag);

        for (int j = 1; j < kv_tiles; ++j) {
            if constexpr (OVERLAP) overlap_step(j);
            else plain_step(j);
        }
        last_pv();

        // Finish the rows: full row sums (quad reduction), then O_i / l.
        float inv_l[2];
        rows.finish(inv_l);
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::store_O_i), q_tile);

        // STEP store_O_i — stage this warp's 16×D rows in its own rows of the Q tile (only this
        // warpgroup's wgmmas read them, all complete), then 16-byte coalesced stores to HBM.
        store_o_sw128<D, BR, BF16>(O + (size_t)bh * N * D, sQ, c * 64 + warp * 16, q0, N, o_acc, inv_l,
                                   lane);
        if constexpr (PERSIST) {  // this warp is done with the Q buffer: the producer may refill it
            fence_proxy_async_smem();
            release(q_empty(qb));
        }

        // STEP store_ml — m in natural-log units (m_run · ln 2), l as is.
        store_row_stats(M, L, (size_t)bh * N, warp_row0 + g, N, t, rows.m_run, rows.l_run);
        TRACE_MARK_IF(tracer, role_word(role, RolePhase::end), q_tile);
        if (PINGPONG && c == 0) named_bar_sync(pingpong_turn_barrier(0), 256);  // the last turn
        kv_base += kv_tiles;
        if constexpr (!PERSIST) break;
    }
}
