// dtypes.cuh — the storage types every kernel here shares, and their conversions.
//
// No CUDA headers: fp16 and bf16 travel as raw 16-bit words and are converted with PTX `cvt`
// instructions, so NVRTC compiles every kernel with nothing on its include path but this folder.
//   u16/u32/u64        raw words (the tensor-core kernels pass Q, K, V, O as u16 pointers)
//   half_t, bf16_t     tagged 16-bit words (the readable and softmax kernels template on them)
//   to_float, from_float<T>   one element <-> fp32
//   pack2<BF16>        two fp32 -> one 32-bit register of two fp16/bf16 (the tensor-core A layout)
//   Pack<T, VEC>       VEC elements moved as one (up to 16-byte) access (the row kernels)
//   NEG_INF, LOG2E, LN2   -inf as a bit pattern; log2(e) and ln(2) in fp32
#pragma once

#define NEG_INF __int_as_float(0xff800000)
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

struct half_t { unsigned short bits; };
struct bf16_t { unsigned short bits; };

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(half_t x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
    return f;
}
__device__ __forceinline__ float to_float(bf16_t x) {
    return __uint_as_float(static_cast<unsigned int>(x.bits) << 16);
}

template <typename T> __device__ __forceinline__ T from_float(float f);
template <> __device__ __forceinline__ float from_float<float>(float f) { return f; }
template <> __device__ __forceinline__ half_t from_float<half_t>(float f) {
    half_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}
template <> __device__ __forceinline__ bf16_t from_float<bf16_t>(float f) {
    bf16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}

// Two fp32 -> one register of two b16 values (lo in the low half), round to nearest even.
template <bool BF16>
__device__ __forceinline__ u32 pack2(float lo, float hi) {
    u32 r;
    if constexpr (BF16) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    }
    return r;
}

// VEC elements that travel as one (up to 16-byte) memory access.
template <typename T, int VEC>
struct __align__(sizeof(T) * VEC) Pack {
    T v[VEC];
};
