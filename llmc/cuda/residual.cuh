// cuda/residual.cuh — the residual add out = a + b (twin: cpu::residual_forward).
//
// Overwrites out (which may alias a or b: each element is read before it is written, by the
// same thread). One FP32 add rounded once: bit-identical to the CPU twin.
// One thread per 16-byte pack; the last pack of an n not divisible by the pack runs scalar.
#pragma once

#include "cuda/common.cuh"

namespace train_gpt::cuda {

// out (n) = a + b
template <int P, typename T>
__global__ void residual_forward_kernel(T* out, const T* a, const T* b, size_t n) {
    const size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * P;
    if (i + P <= n) {
        const Packed<T, P> av = load_packed<P>(a + i);
        const Packed<T, P> bv = load_packed<P>(b + i);
        Packed<T, P> o;
#pragma unroll
        for (int k = 0; k < P; k++)
            o[k] = from_float<T>(to_float(av[k]) + to_float(bv[k]));
        store_packed(out + i, o);
    } else {
        for (size_t j = i; j < n; j++)
            out[j] = from_float<T>(to_float(a[j]) + to_float(b[j]));   // tail
    }
}

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    constexpr int kThreads = 256;
    const bool vec = is_aligned(out, 16) && is_aligned(a, 16) && is_aligned(b, 16);   // 16-byte packs
    const int P = vec ? kPack<T> : 1;
    const unsigned blocks = grid_1d(ceil_div<size_t>(n, P), kThreads);
    launch_packed<T>(vec, [&](auto pack) {
        residual_forward_kernel<decltype(pack)::value><<<blocks, kThreads, 0, stream>>>(out, a, b, n);
    });
    cudaCheck(cudaGetLastError());
}

}   // namespace train_gpt::cuda
