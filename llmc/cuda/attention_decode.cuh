// cuda/attention_decode.cuh — attention of n new queries against a sequence's KV cache, for
// decoding (twin: cpu::attention_decode; backend.h: Backend::attention_decode).
//
// qkv (≥ pos+n, 3C) holds the [q | k | v] rows of positions 0 .. pos+n−1 of one sequence; out
// (n, C) row i is query pos+i against keys and values 0 .. pos+i, i.e. row pos+i of the causal
// attention over the cache. OVERWRITES out; reads no qkv row past pos+n−1.
//
// One block of 128 threads per (query i, head h). The query goes to shared memory; each thread
// scores keys j ≡ tid (mod 128), each score a sequential FP32 dot product over the head (the CPU
// twin's order, up to its SIMD split); the row max and the sum of exp(s − max) are block
// reductions (FP32, a fixed tree: the same bits run after run); then thread d < hs accumulates
// out[d] = Σ_j round(p_j) · v_j[d] over j in order, p_j = exp(s_j − max) / sum rounded to the
// storage type as the CPU twin rounds it. Scores live in dynamic shared memory: (pos+n) floats,
// so the cache length is bounded by the GPU's shared memory per block (about 56k positions on
// Hopper; the launcher checks).
// Naive equivalent: for t = pos+i: p = softmax(q_t · K[0..t]ᵀ / √hs); out_i = p · V[0..t].
// Not on the training path: sampling is the only caller (model/generate.h).
#pragma once

#include "cuda/common.cuh"

namespace train_gpt::cuda {

constexpr int kDecodeThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kDecodeThreads)
    attention_decode_kernel(T* out, const T* qkv, int pos, int C, int hs) {
    extern __shared__ float shared_scores[];   // (pos + n): this row's scores, then exp(s − max)
    __shared__ float q[256];                   // the query of head h (hs ≤ 256, checked by the launcher)
    const int i = blockIdx.x, h = blockIdx.y, t = pos + i;
    const size_t row = (size_t)3 * C;   // one position's [q | k | v]
    for (int d = threadIdx.x; d < hs; d += blockDim.x)
        q[d] = to_float(qkv[t * row + h * hs + d]);
    __syncthreads();

    const float scale = 1.0f / sqrtf((float)hs);
    float local_max = -INFINITY;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) {
        const T* k = qkv + j * row + C + h * hs;   // (hs)
        float s = 0.0f;
        for (int d = 0; d < hs; d++)
            s += q[d] * to_float(k[d]);
        s *= scale;
        shared_scores[j] = s;
        local_max = fmaxf(local_max, s);
    }
    const float row_max = block_reduce_max(local_max);
    float local_sum = 0.0f;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) {
        const float e = expf(shared_scores[j] - row_max);
        shared_scores[j] = e;
        local_sum += e;
    }
    const float inv_sum = 1.0f / block_reduce_sum(local_sum);   // its leading barrier publishes the exps

    for (int d = threadIdx.x; d < hs; d += blockDim.x) {
        float o = 0.0f;
        for (int j = 0; j <= t; j++) {
            const float p = to_float(from_float<T>(shared_scores[j] * inv_sum));   // P in the storage type
            o += p * to_float(qkv[j * row + 2 * C + h * hs + d]);
        }
        out[(size_t)i * C + h * hs + d] = from_float<T>(o);
    }
}

// out (n, C) = attention of queries pos .. pos+n−1 against the cache qkv (≥ pos+n, 3C).
template <typename T>
void attention_decode(T* out, const T* qkv, int pos, int n, int C, int NH, cudaStream_t stream) {
    if (n == 0) return;
    TG_CUDA_REQUIRE(pos >= 0 && n > 0 && NH > 0 && C % NH == 0, "pos >= 0, n > 0, and C a multiple of NH");
    const int hs = C / NH;
    TG_CUDA_REQUIRE(hs <= 256, "the query of one head is staged in 256 floats of shared memory");
    TG_CUDA_REQUIRE((size_t)(pos + n) * 3 * C < (size_t)INT32_MAX, "cache offsets are computed in int");
    const size_t smem = (size_t)(pos + n) * sizeof(float);   // one score per cached position
    int device = 0, max_smem = 0;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    TG_CUDA_REQUIRE(smem + 256 * sizeof(float) + 32 * sizeof(float) <= (size_t)max_smem,
                    "one score per cached position must fit the GPU's shared memory per block");
    if (smem > 48 * 1024) {   // above the default dynamic shared memory: opt in
        cudaCheck(
            cudaFuncSetAttribute(attention_decode_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    }
    attention_decode_kernel<T><<<dim3(n, NH), kDecodeThreads, smem, stream>>>(out, qkv, pos, C, hs);
    cudaCheck(cudaGetLastError());
}

}   // namespace train_gpt::cuda
