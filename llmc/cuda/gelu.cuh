// cuda/gelu.cuh — GELU, tanh approximation, forward and backward (twin: cpu::gelu_*).
//
// Forward overwrites out; backward ACCUMULATES: dinp += gelu'(inp) · dout, one rounding per
// element. Same formula and evaluation order as the CPU, FP32; tanhf (CUDA's, ≤ 2 ulp, no
// fast-math) vs the host's tanhf is the only difference, far below one ulp of bf16/fp16.
// One thread per 16-byte pack; the last pack of an n not divisible by the pack runs scalar.
#pragma once

#include "cuda/common.cuh"

namespace train_gpt::cuda {

constexpr float kGeluScale = 0.7978845608028654f;   // √(2/π)

// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
__device__ __forceinline__ float gelu(float x) {
    return 0.5f * x * (1.0f + tanhf(kGeluScale * (x + 0.044715f * x * x * x)));
}
// d/dx = 0.5(1 + tanh u) + 0.5 x (1 − tanh² u) · √(2/π)(1 + 3·0.044715 x²), u = √(2/π)(x + 0.044715 x³)
__device__ __forceinline__ float gelu_grad(float x) {
    const float th = tanhf(kGeluScale * (x + 0.044715f * x * x * x));
    const float du = kGeluScale * (1.0f + float(3 * 0.044715) * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

// out (n) = gelu(inp)
template <int P, typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, size_t n) {
    const size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * P;
    if (i + P <= n) {
        const Packed<T, P> x = load_packed_cs<P>(inp + i);
        Packed<T, P> y;
#pragma unroll
        for (int k = 0; k < P; k++) y[k] = from_float<T>(gelu(to_float(x[k])));
        store_packed(out + i, y);
    } else {
        for (size_t j = i; j < n; j++) out[j] = from_float<T>(gelu(to_float(inp[j])));   // tail
    }
}

// dinp (n) += gelu'(inp) · dout
template <int P, typename T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, size_t n) {
    const size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * P;
    if (i + P <= n) {
        const Packed<T, P> x = load_packed_cs<P>(inp + i);
        const Packed<T, P> dy = load_packed_cs<P>(dout + i);
        Packed<T, P> dx = load_packed<P>(dinp + i);
#pragma unroll
        for (int k = 0; k < P; k++) dx[k] = from_float<T>(to_float(dx[k]) + gelu_grad(to_float(x[k])) * to_float(dy[k]));
        store_packed(dinp + i, dx);
    } else {
        for (size_t j = i; j < n; j++) {
            dinp[j] = from_float<T>(to_float(dinp[j]) + gelu_grad(to_float(inp[j])) * to_float(dout[j]));   // tail
        }
    }
}

template <typename T>
void gelu_forward(T* out, const T* inp, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    constexpr int kThreads = 256;
    const bool vec = is_aligned(out, 16) && is_aligned(inp, 16);   // packs of 16 bytes need aligned bases
    const int P = vec ? kPack<T> : 1;
    const unsigned blocks = grid_1d(ceil_div<size_t>(n, P), kThreads);
    if (vec) {
        gelu_forward_kernel<kPack<T>><<<blocks, kThreads, 0, stream>>>(out, inp, n);
    } else {
        gelu_forward_kernel<1><<<blocks, kThreads, 0, stream>>>(out, inp, n);
    }
    cudaCheck(cudaGetLastError());
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    constexpr int kThreads = 256;
    const bool vec = is_aligned(dinp, 16) && is_aligned(inp, 16) && is_aligned(dout, 16);
    const int P = vec ? kPack<T> : 1;
    const unsigned blocks = grid_1d(ceil_div<size_t>(n, P), kThreads);
    if (vec) {
        gelu_backward_kernel<kPack<T>><<<blocks, kThreads, 0, stream>>>(dinp, inp, dout, n);
    } else {
        gelu_backward_kernel<1><<<blocks, kThreads, 0, stream>>>(dinp, inp, dout, n);
    }
    cudaCheck(cudaGetLastError());
}

}  // namespace train_gpt::cuda
