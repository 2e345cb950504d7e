// cuda/column_sums.cuh — sums over the rows of a (rows, cols) matrix into FP32, in a fixed order:
// the bias gradients (twin: cpu::add_column_sums). Deterministic, no atomics: the rows are cut into
// R = column_sum_chunks(rows) chunks; block (x, chunk) sums its chunk's rows of 32 columns (each
// thread rows y, y + 8, …, the 8 partial sums then added in order) into partial (R, cols); a second
// kernel adds the R partials of each column in order and the total into the sums once. The
// partition depends only on the shape: the same bits from run to run. (The CPU adds row by row; the
// two agree to FP32 reordering.)
//
// What is summed comes from a Source: the matrix itself (TensorColumns), or a producer whose output
// is written on the way (cuda/gelu.cuh: GELU backward, whose output is the bias gradient's input).
#pragma once

#include "cuda/common.cuh"

#include <algorithm>

namespace train_gpt::cuda {

inline int column_sum_chunks(int rows) { return std::min(256, std::max(1, (rows + 127) / 128)); }

// x (rows, cols) in T, read
template <typename T>
struct TensorColumns {
    const T* x;
    int cols;
    __device__ __forceinline__ float operator()(int i, int o) const { return to_float(x[(size_t)i * cols + o]); }
};

// partial (R, cols): partial[r, o] = Σ src(i, o) over the rows i of chunk r; block (32, 8), grid (⌈cols/32⌉, R).
template <typename Source>
__global__ void column_partial_sums_kernel(float* partial, Source src, int rows, int cols, int rows_per_chunk) {
    __shared__ float sums[8][32];
    const int o = blockIdx.x * 32 + threadIdx.x;
    const int begin = blockIdx.y * rows_per_chunk;
    const int end = min(rows, begin + rows_per_chunk);
    float sum = 0.0f;
    if (o < cols) {
        for (int i = begin + threadIdx.y; i < end; i += 8)
            sum += src(i, o);
    }
    sums[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && o < cols) {
        float total = 0.0f;
        for (int y = 0; y < 8; y++)
            total += sums[y][threadIdx.x];
        partial[(size_t)blockIdx.y * cols + o] = total;
    }
}

// sums (cols) += Σ_r partial[r, :], r = 0, 1, …, R-1 in order.
template <typename F>
__global__ void column_sums_reduce_kernel(F* sums, const F* partial, int R, int cols) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= cols) return;
    F sum = 0;
    for (int r = 0; r < R; r++)
        sum += partial[(size_t)r * cols + o];
    sums[o] += sum;
}

// sums (cols) += Σ_rows src(i, ·) over rows; `partial` holds column_sum_chunks(rows)·cols floats.
template <typename Source>
void add_column_sums_of(float* sums, float* partial, Source src, int rows, int cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    const int R = column_sum_chunks(rows);
    const int rows_per_chunk = (rows + R - 1) / R;
    column_partial_sums_kernel<<<dim3((cols + 31) / 32, R), dim3(32, 8), 0, stream>>>(partial, src, rows, cols,
                                                                                      rows_per_chunk);
    cudaCheck(cudaGetLastError());
    column_sums_reduce_kernel<<<(cols + 255) / 256, 256, 0, stream>>>(sums, (const float*)partial, R, cols);
    cudaCheck(cudaGetLastError());
}

// sums (cols) += Σ_rows x (rows, cols), in FP32, in a fixed order (cpu::add_column_sums)
template <typename T>
void add_column_sums(float* sums, float* partial, const T* x, int rows, int cols, cudaStream_t stream) {
    add_column_sums_of(sums, partial, TensorColumns<T>{x, cols}, rows, cols, stream);
}

}   // namespace train_gpt::cuda
