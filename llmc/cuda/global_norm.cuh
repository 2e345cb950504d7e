// cuda/global_norm.cuh — Σ g² of an FP32 (or FP64) gradient buffer (twin: cpu::sum_squares).
//
// Accumulated in double, like the CPU twin; inf and NaN propagate (the caller checks
// finiteness). Deterministic two-stage reduction, no atomics: a grid whose size depends only on
// n (never on the GPU) reduces grid-strided slices into one double partial per block, then one
// block adds the partials in a fixed tree. Same result from run to run and from GPU to GPU;
// vs the CPU, double-precision reordering only (relative ~1e-15).
#pragma once

#include "cuda/common.cuh"

#include <type_traits>

namespace train_gpt::cuda {

constexpr int kSumSquaresThreads = 512;
constexpr int kSumSquaresMaxBlocks = 1024;

// partials[block] = Σ g[i]² over i ≡ this block's threads (mod grid size), in double.
template <typename G>
__global__ void __launch_bounds__(kSumSquaresThreads)
    sum_squares_partial_kernel(double* partials, const G* g, size_t n) {
    double acc = 0.0;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
        const double x = g[i];
        acc += x * x;
    }
    acc = block_reduce_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// out[0] = Σ partials[0 .. count), one block, fixed order.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) sum_partials_kernel(double* out, const double* partials, int count) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += kThreads)
        acc += partials[i];
    acc = block_reduce_sum(acc);
    if (threadIdx.x == 0) out[0] = acc;
}

// *out (device) = Σ g², asynchronous on `stream`; `partials` holds kSumSquaresMaxBlocks doubles.
template <typename G>
void sum_squares_into(double* out, double* partials, const G* g, size_t n, cudaStream_t stream) {
    static_assert(std::is_same_v<G, float> || std::is_same_v<G, double>, "gradients are FP32 (FP64 for tests)");
    // the grid depends on n only: the same partition, so the same result, on every GPU
    const int blocks =
        int(std::min<size_t>(kSumSquaresMaxBlocks, std::max<size_t>(1, ceil_div<size_t>(n, kSumSquaresThreads))));
    sum_squares_partial_kernel<<<blocks, kSumSquaresThreads, 0, stream>>>(partials, g, n);
    cudaCheck(cudaGetLastError());
    sum_partials_kernel<kSumSquaresMaxBlocks><<<1, kSumSquaresMaxBlocks, 0, stream>>>(out, partials, blocks);
    cudaCheck(cudaGetLastError());
}

// *out (a device double, not in the scratch buffer) = Σ g², asynchronous on `stream`.
template <typename G>
void sum_squares_async(double* out, const G* g, size_t n, cudaStream_t stream) {
    double* partials = static_cast<double*>(scratch(sizeof(double) * kSumSquaresMaxBlocks, stream));
    sum_squares_into(out, partials, g, n, stream);
}

// Σ g², returned to the host (synchronises the stream).
template <typename G>
double sum_squares(const G* g, size_t n, cudaStream_t stream) {
    ScratchLayout layout;
    const size_t off_partials = layout.add(sizeof(double) * kSumSquaresMaxBlocks);
    const size_t off_result = layout.add(sizeof(double));
    void* base = scratch(layout.bytes, stream);
    double* result = at_offset<double>(base, off_result);
    sum_squares_into(result, at_offset<double>(base, off_partials), g, n, stream);
    double host = 0.0;
    cudaCheck(cudaMemcpyAsync(&host, result, sizeof(double), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    return host;
}

}   // namespace train_gpt::cuda
