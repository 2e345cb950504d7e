// cuda/classifier.cuh — fused softmax + cross-entropy + dlogits (twin: cpu::fused_classifier).
//
// Logits are never widened to FP32 in memory: one block per row keeps everything it needs (the
// row max, the sum of exponentials) in FP32 registers and reads the row three times (max, sum,
// write), the second and third reads mostly from L2. Like the CPU, over the first V of the Vp
// columns of a row:
//   max = max_c x_c ;  sum = Σ_c exp(x_c − max) ;  loss = (max − x[target]) + log(sum)
//   dlogits_c = (exp(x_c − max) / sum − [c = target]) · dloss  (c < V),  0 for V ≤ c < Vp.
// losses (N) are FP32. dlogits may be null (loss only) or alias logits (in place): each element
// is read and then written by the same thread, and x[target] is read before the block barrier
// that precedes every write. expf / logf are CUDA's (≤ 2 ulp, no fast-math), and the sums are
// reduced in a different order than the CPU's serial loop: agreement to FP32 rounding, not bits.
#pragma once

#include "cuda/common.cuh"

namespace train_gpt::cuda {

constexpr int kClassifierThreads = 1024;

template <int P, typename T>
__global__ void __launch_bounds__(kClassifierThreads)
    fused_classifier_kernel(T* dlogits, float* losses, const T* logits, const int32_t* targets, int V, int Vp,
                            float dloss) {
    const size_t row = blockIdx.x;
    const T* x = logits + row * Vp;   // (Vp), only the first V are real
    const int target = targets[row];
    const float x_target = to_float(x[target]);   // before any barrier: dlogits may overwrite it

    float row_max = -INFINITY;
    for (int c = threadIdx.x * P; c < V; c += blockDim.x * P) {
        const Packed<T, P> xv = load_packed<P>(x + c);   // P | Vp: a pack never crosses the row
#pragma unroll
        for (int k = 0; k < P; k++) {
            if (c + k < V) row_max = fmaxf(row_max, to_float(xv[k]));
        }
    }
    row_max = block_reduce_max(row_max);

    float sum = 0.0f;
    for (int c = threadIdx.x * P; c < V; c += blockDim.x * P) {
        const Packed<T, P> xv = load_packed<P>(x + c);
#pragma unroll
        for (int k = 0; k < P; k++) {
            if (c + k < V) sum += expf(to_float(xv[k]) - row_max);
        }
    }
    sum = block_reduce_sum(sum);   // its barriers also order every read of x above before the writes below
    if (threadIdx.x == 0) losses[row] = (row_max - x_target) + logf(sum);   // −log softmax[target]
    if (dlogits == nullptr) return;

    T* dx = dlogits + row * Vp;   // (Vp)
    const float inv_sum = 1.0f / sum;
    for (int c = threadIdx.x * P; c < Vp; c += blockDim.x * P) {
        const Packed<T, P> xv = load_packed_cs<P>(x + c);   // last read of the row
        Packed<T, P> g;
#pragma unroll
        for (int k = 0; k < P; k++) {
            float v = 0.0f;   // padding columns
            if (c + k < V) {
                const float p = expf(to_float(xv[k]) - row_max) * inv_sum;
                v = (p - (c + k == target ? 1.0f : 0.0f)) * dloss;
            }
            g[k] = from_float<T>(v);
        }
        store_packed(dx + c, g);
    }
}

template <typename T>
void fused_classifier(T* dlogits, float* losses, const T* logits, const int32_t* targets, int N, int V, int Vp,
                      float dloss, cudaStream_t stream) {
    TG_CUDA_REQUIRE(N >= 0 && V > 0 && V <= Vp, "the real vocabulary must be non-empty and fit in the padded row");
    if (N == 0) return;
    // 16-byte packs need every row start aligned (Vp a multiple of the pack: it is a multiple of
    // 128 in the model) and aligned bases
    const bool vec = Vp % kPack<T> == 0 && is_aligned(logits, 16) && (dlogits == nullptr || is_aligned(dlogits, 16));
    launch_packed<T>(vec, [&](auto pack) {
        fused_classifier_kernel<decltype(pack)::value>
            <<<N, kClassifierThreads, 0, stream>>>(dlogits, losses, logits, targets, V, Vp, dloss);
    });
    cudaCheck(cudaGetLastError());
}

}   // namespace train_gpt::cuda
