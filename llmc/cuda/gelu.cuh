// cuda/gelu.cuh — GELU, tanh approximation, forward and backward (twin: cpu::gelu_*).
//
// Forward overwrites out; backward overwrites dinp = gelu'(inp) · dout, one rounding per
// element. Same formula and evaluation order as the CPU, FP32, every rounding spelled out
// (__fmul_rn, __fadd_rn: no multiply-add contraction), so the FP8 casts fused into these
// producers (cuda/fp8_fused.cuh) compute the same bits whatever the compiler does in either
// context; tanhf (CUDA's, ≤ 2 ulp, no fast-math) vs the host's tanhf is the only difference from
// the CPU, far below one ulp of bf16/fp16.
// One thread per 16-byte pack; the last pack of an n not divisible by the pack runs scalar.
// gelu_backward_bias also sums its output over the rows (the bias gradient of fc) in the same pass,
// through column_sums.cuh's fixed-order partial sums.
#pragma once

#include "cuda/column_sums.cuh"
#include "cuda/common.cuh"

namespace train_gpt::cuda {

constexpr float kGeluScale = 0.7978845608028654f;   // √(2/π)

// tanh(√(2/π)·(x + 0.044715·x³)), as the CPU evaluates it: ((0.044715·x)·x)·x, then + x
__device__ __forceinline__ float gelu_tanh(float x) {
    const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, x), x), x);
    return tanhf(__fmul_rn(kGeluScale, __fadd_rn(x, cube)));
}
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
__device__ __forceinline__ float gelu(float x) { return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, gelu_tanh(x))); }
// d/dx = 0.5(1 + tanh u) + 0.5 x (1 − tanh² u) · √(2/π)(1 + 3·0.044715 x²), u = √(2/π)(x + 0.044715 x³)
__device__ __forceinline__ float gelu_grad(float x) {
    const float th = gelu_tanh(x);
    const float du = __fmul_rn(kGeluScale, __fadd_rn(1.0f, __fmul_rn(__fmul_rn(float(3 * 0.044715), x), x)));
    return __fadd_rn(__fmul_rn(0.5f, __fadd_rn(1.0f, th)),
                     __fmul_rn(__fmul_rn(__fmul_rn(0.5f, x), __fsub_rn(1.0f, __fmul_rn(th, th))), du));
}
// gelu'(x)·dout: the value gelu_backward stores (before rounding to T)
__device__ __forceinline__ float gelu_backward_value(float x, float dout) { return __fmul_rn(gelu_grad(x), dout); }

// out (n) = gelu(inp)
template <int P, typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, size_t n) {
    const size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * P;
    if (i + P <= n) {
        const Packed<T, P> x = load_packed_cs<P>(inp + i);
        Packed<T, P> y;
#pragma unroll
        for (int k = 0; k < P; k++)
            y[k] = from_float<T>(gelu(to_float(x[k])));
        store_packed(out + i, y);
    } else {
        for (size_t j = i; j < n; j++)
            out[j] = from_float<T>(gelu(to_float(inp[j])));   // tail
    }
}

// dinp (n) = gelu'(inp) · dout
template <int P, typename T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, size_t n) {
    const size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * P;
    if (i + P <= n) {
        const Packed<T, P> x = load_packed_cs<P>(inp + i);
        const Packed<T, P> dy = load_packed_cs<P>(dout + i);
        Packed<T, P> dx;
#pragma unroll
        for (int k = 0; k < P; k++)
            dx[k] = from_float<T>(gelu_backward_value(to_float(x[k]), to_float(dy[k])));
        store_packed(dinp + i, dx);
    } else {
        for (size_t j = i; j < n; j++) {
            dinp[j] = from_float<T>(gelu_backward_value(to_float(inp[j]), to_float(dout[j])));   // tail
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
    launch_packed<T>(vec, [&](auto pack) {
        gelu_forward_kernel<decltype(pack)::value><<<blocks, kThreads, 0, stream>>>(out, inp, n);
    });
    cudaCheck(cudaGetLastError());
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    constexpr int kThreads = 256;
    const bool vec = is_aligned(dinp, 16) && is_aligned(inp, 16) && is_aligned(dout, 16);
    const int P = vec ? kPack<T> : 1;
    const unsigned blocks = grid_1d(ceil_div<size_t>(n, P), kThreads);
    launch_packed<T>(vec, [&](auto pack) {
        gelu_backward_kernel<decltype(pack)::value><<<blocks, kThreads, 0, stream>>>(dinp, inp, dout, n);
    });
    cudaCheck(cudaGetLastError());
}

// (i, o) → dinp[i, o] = gelu'(inp)·dout, stored in T and returned: the column sums' single visit of
// each element computes and writes it (gelu_backward_bias)
template <typename T>
struct GeluBackwardColumns {
    T* dinp;   // (rows, cols)
    const T* inp;
    const T* dout;
    int cols;
    __device__ __forceinline__ float operator()(int i, int o) const {
        const size_t k = (size_t)i * cols + o;
        const T v = from_float<T>(gelu_backward_value(to_float(inp[k]), to_float(dout[k])));
        dinp[k] = v;
        return to_float(v);
    }
};

// dinp (rows, cols) = gelu'(inp) · dout and dbias (cols) += Σ_rows dinp, in one pass over the
// elements (column_sums.cuh's order; its partials in the scratch buffer). Returns at once.
template <typename T>
void gelu_backward_bias(T* dinp, float* dbias, const T* inp, const T* dout, int rows, int cols, cudaStream_t stream) {
    float* partial = static_cast<float*>(scratch((size_t)column_sum_chunks(rows) * cols * sizeof(float), stream));
    add_column_sums_of(dbias, partial, GeluBackwardColumns<T>{dinp, inp, dout, cols}, rows, cols, stream);
}

}   // namespace train_gpt::cuda
