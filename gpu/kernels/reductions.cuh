// reductions.cuh — warp and quad reductions.
//
//   warp_max, warp_sum   all 32 lanes (butterfly shuffles): the readable and softmax kernels
//   quad_max, quad_sum   the 4 lanes of a quad: in every tensor-core accumulator layout a row's
//                        values are spread over the 4 threads of one quad (lane / 4 = row)
//   block_max, block_sum a whole thread block, through a 32-float scratch array (row kernels)
#pragma once

#include "dtypes.cuh"

__device__ __forceinline__ float warp_max(float x) {
    for (int off = 16; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}
__device__ __forceinline__ float warp_sum(float x) {
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
    return x;
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    return x;
}

// Block-wide reductions through warp shuffles and a 32-float scratch array.

// All threads get the result. `scratch` must not be in use by another reduction at the same time.
__device__ float block_max(float x, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    x = warp_max(x);
    __syncthreads();  // the previous user of scratch is done
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    x = lane < warps ? scratch[lane] : NEG_INF;
    return warp_max(x);
}
__device__ float block_sum(float x, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    x = warp_sum(x);
    __syncthreads();
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    x = lane < warps ? scratch[lane] : 0.f;
    return warp_sum(x);
}
