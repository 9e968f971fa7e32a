// softmax_bwd.cu — the softmax backward of naive attention: dS = P ∘ (dP − rowsum(P ∘ dP)).
//
// The middle kernel of the naive backward (cuBLAS GEMMs around it):
//     bwd_dV_gemm   dV = Pᵀ dO          (reads the P the forward kept in HBM)
//     bwd_dP_gemm   dP = dO Vᵀ          (writes an N×N matrix to HBM)
//     softmax_bwd   dS = P ∘ (dP − D)   this file: reads P and dP, writes dS (N×N)
//     bwd_dQ_gemm   dQ = dS K / √d
//     bwd_dK_gemm   dK = dSᵀ Q / √d
// For one row of P = softmax(s), ∂L/∂s_k = p_k (∂L/∂p_k − Σ_j p_j ∂L/∂p_j): the row's dot
// product D = Σ_j p_j dP_j, then one multiply-subtract per element. It is memory-bound, so it
// moves each byte once: a thread keeps up to CACHE chunks of its P and dP row in registers
// between the dot product and the output (rows of up to CACHE · VEC · blockDim elements:
// 32,768 for fp16/bf16 with 1024 threads); longer rows read their remaining chunks twice.
// Masked (causal) entries have P = 0, so their dS is exactly 0 with no mask test.
//
// Precision: D is summed in fp32 from the very P and dP values this kernel reads, as stored.
// FlashAttention gets the same D as rowsum(dO ∘ O) instead, since it keeps neither P nor dP;
// here O was rounded from the stored P, so that D would not match the P that multiplies it
// below, and dK comes out less exact with a causal mask. What rounding remains is naive
// attention's own: S, P, dP and dS stored in the inputs' dtype, as torch stores them when it
// computes attention in that dtype, and the gradients stay within twice torch's error
// (tests/test_naive_backward_rounding.py models each rounding on the CPU).
//
// Layout: P, dP, dS are (rows, n) row-major, rows = B·h·N; one thread block per row.
// VEC elements move as one access (16 bytes when n allows it); all math is fp32.

#include "dtypes.cuh"
#include "reductions.cuh"

template <typename T, int VEC, int CACHE>
__global__ void softmax_bwd_rows(const T* __restrict__ P, const T* __restrict__ dP,
                                 T* __restrict__ dS, long long rows, int n) {
    __shared__ float scratch[32];
    const int chunks = n / VEC;  // the host picks VEC so that it divides n
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const Pack<T, VEC>* p = reinterpret_cast<const Pack<T, VEC>*>(P + row * n);
        const Pack<T, VEC>* dp = reinterpret_cast<const Pack<T, VEC>*>(dP + row * n);
        Pack<T, VEC>* ds = reinterpret_cast<Pack<T, VEC>*>(dS + row * n);

        // STEP softmax_bwd_dot — D = Σ p · dP over the row (each chunk read once).
        Pack<T, VEC> p_reg[CACHE], dp_reg[CACHE];
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < CACHE; ++i) {
            const int c = threadIdx.x + i * blockDim.x;
            if (c < chunks) {
                p_reg[i] = p[c];
                dp_reg[i] = dp[c];
#pragma unroll
                for (int e = 0; e < VEC; ++e) dot += to_float(p_reg[i].v[e]) * to_float(dp_reg[i].v[e]);
            }
        }
        for (int c = threadIdx.x + CACHE * blockDim.x; c < chunks; c += blockDim.x) {
            const Pack<T, VEC> a = p[c], b = dp[c];
#pragma unroll
            for (int e = 0; e < VEC; ++e) dot += to_float(a.v[e]) * to_float(b.v[e]);
        }
        dot = block_sum(dot, scratch);

        // STEP softmax_bwd_write_dS — dS = p · (dP − D), written once.
#pragma unroll
        for (int i = 0; i < CACHE; ++i) {
            const int c = threadIdx.x + i * blockDim.x;
            if (c < chunks) {
                Pack<T, VEC> out;
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                    out.v[e] = from_float<T>(to_float(p_reg[i].v[e]) * (to_float(dp_reg[i].v[e]) - dot));
                ds[c] = out;
            }
        }
        for (int c = threadIdx.x + CACHE * blockDim.x; c < chunks; c += blockDim.x) {
            const Pack<T, VEC> a = p[c], b = dp[c];
            Pack<T, VEC> out;
#pragma unroll
            for (int e = 0; e < VEC; ++e)
                out.v[e] = from_float<T>(to_float(a.v[e]) * (to_float(b.v[e]) - dot));
            ds[c] = out;
        }
        // block_sum's first barrier orders the next row's use of scratch.
    }
}
