// reductions.cuh — warp and quad reductions.
//
//   warp_max, warp_sum   all 32 lanes (butterfly shuffles): the readable and softmax kernels
//   quad_max, quad_sum   the 4 lanes of a quad: in every tensor-core accumulator layout a row's
//                        values are spread over the 4 threads of one quad (lane / 4 = row)
#pragma once

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
