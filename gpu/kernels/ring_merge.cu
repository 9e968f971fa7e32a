// Ring attention's merge: fold one fused kernel call's partial result into a device's running
// result, with the online-softmax rescale, and the final store of O in the input dtype.
//
// In ring attention each device meets the keys one block at a time. For a block, the fused
// kernel returns, per query row,
//     O_p  the attention output over that block alone, already divided by its row sum,
//     m_p  the row max of the scaled scores q·k/√d (natural-log units),
//     l_p  the row sum of exp(q·k/√d − m_p).
// The device keeps a running (O, m, l) over the blocks seen so far (O in fp32, normalised the
// same way). The two describe softmax-weighted averages over disjoint sets of keys, so they
// combine like two K/V tiles inside one fused kernel:
//     m' = max(m, m_p)
//     a  = l   · exp(m   − m')        the running side's weight, on the common scale
//     b  = l_p · exp(m_p − m')        the partial side's weight
//     O' = (a·O + b·O_p) / (a + b),   l' = a + b
// A row that has seen no key yet has m = −inf and l = 0, so a = 0 and O' = O_p.
//
// Layout: rows are (batch·head, query) pairs, contiguous; O and O_p are rows × d row-major.
// The partial O_p is 16-bit (fp16 or bf16 bit patterns, as the fused kernels write it).
//
// Kernels in this file:
//   ring_merge<BF16>  one warp per row: its 32 lanes share the row's two weights and stride
//                     over the d columns; lane 0 writes the new m and l after every lane has
//                     read the old ones.
//   ring_store<BF16>  the running fp32 O -> the output in fp16 or bf16 (round to nearest even).
// 16-bit values are converted with the shared helpers of dtypes.cuh.

#include "dtypes.cuh"

// The storage type the fused kernels wrote: fp16 or bf16 bits.
template <bool BF16> struct Storage { typedef half_t type; };
template <> struct Storage<true> { typedef bf16_t type; };

template <bool BF16>
__device__ __forceinline__ float widen(unsigned short bits) {
    typename Storage<BF16>::type v;
    v.bits = bits;
    return to_float(v);
}

template <bool BF16>
__device__ __forceinline__ unsigned short narrow(float x) {
    return from_float<typename Storage<BF16>::type>(x).bits;
}

template <bool BF16>
__global__ void ring_merge(float* __restrict__ o, float* __restrict__ m, float* __restrict__ l,
                           const unsigned short* __restrict__ o_part,
                           const float* __restrict__ m_part, const float* __restrict__ l_part,
                           long long rows, int d) {
    const long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;  // whole warps leave together: `row` is the same on all 32 lanes

    const float m_run = m[row], m_new_part = m_part[row];
    const float m_new = fmaxf(m_run, m_new_part);
    if (m_new == NEG_INF) return;  // neither side has seen a key for this row
    const float a = l[row] * expf(m_run - m_new);  // 0 when the running side is empty
    const float b = l_part[row] * expf(m_new_part - m_new);
    const float inv = 1.f / (a + b);
    const float wa = a * inv, wb = b * inv;

    float* o_row = o + row * d;
    const unsigned short* p_row = o_part + row * d;
    for (int c = lane; c < d; c += 32) o_row[c] = wa * o_row[c] + wb * widen<BF16>(p_row[c]);

    __syncwarp();  // every lane has read the old m and l before lane 0 replaces them
    if (lane == 0) {
        m[row] = m_new;
        l[row] = a + b;
    }
}

template <bool BF16>
__global__ void ring_store(const float* __restrict__ o, unsigned short* __restrict__ out,
                           long long n) {
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride)
        out[i] = narrow<BF16>(o[i]);
}
