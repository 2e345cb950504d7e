// cuda/adamw.cuh — AdamW on one tensor (twin: cpu::adamw_update), PyTorch's semantics:
//   g ← grad · grad_scale                      (grad_scale = clipping factor / loss scale)
//   m ← β1·m + (1−β1)·g ;  v ← β2·v + (1−β2)·g²
//   p ← p·(1 − lr·wd)                          (decoupled weight decay)
//   p ← p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + ε)
// The step-dependent scalars are formed on the host in double, as PyTorch does, and passed as
// FP32, exactly as the CPU twin forms them; the per-element maths is FP32 with an IEEE sqrt and
// divide. p is the FP32 master copy when `master` is non-null, and the working copy is written
// as round(p); with master == nullptr p is read from and rounded back into the working weights.
// For T = float, master and working may be the same buffer (no __restrict__ on purpose).
// Agreement with the CPU: the same FP32 operations in the same order, each rounding spelled out
// (__fmul_rn, …: no contraction on the device); the host compiler may contract, so allow FP32
// rounding, and one ulp of T on working.
#pragma once

#include "cuda/common.cuh"

#include <cmath>

namespace train_gpt::cuda {

// The step's scalars, formed on the host as PyTorch forms them: in double, then FP32 (the same
// expressions as the CPU twin).
struct AdamWScalars {
    float step_size, decay, beta1, beta2, eps, bc2_sqrt, grad_scale;
};
inline AdamWScalars adamw_scalars(float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                                  int t) {
    TG_CUDA_REQUIRE(t >= 1, "the step count t starts at 1 (bias corrections divide by 1 − β^t)");
    const double bias_correction1 = 1.0 - std::pow((double)beta1, t);
    const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow((double)beta2, t));
    return AdamWScalars{float(lr / bias_correction1),
                        float(1.0 - (double)lr * weight_decay),
                        beta1,
                        beta2,
                        eps,
                        float(bias_correction2_sqrt),
                        grad_scale};
}

// The update of element i; returns the new working weight. One function for the plain kernel
// and for the one fused with the FP8 weight cast (cuda/fp8_fused.cuh): the same bits.
template <typename T>
__device__ __forceinline__ T adamw_element(size_t i, float* master, T* working, float* m, float* v, const float* grads,
                                           const AdamWScalars& s) {
    // the CPU twin's expressions, every rounding spelled out (no multiply-add contraction)
    const float g = __fmul_rn(grads[i], s.grad_scale);
    const float mi = __fadd_rn(__fmul_rn(s.beta1, m[i]), __fmul_rn(__fsub_rn(1.0f, s.beta1), g));
    const float vi = __fadd_rn(__fmul_rn(s.beta2, v[i]), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, s.beta2), g), g));
    m[i] = mi;
    v[i] = vi;
    float p = __fmul_rn(master != nullptr ? master[i] : to_float(working[i]), s.decay);
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
    p = __fsub_rn(p, __fmul_rn(s.step_size, __fdiv_rn(mi, denom)));
    if (master != nullptr) master[i] = p;
    const T w = from_float<T>(p);
    working[i] = w;
    return w;
}

template <typename T>
__global__ void adamw_kernel(float* master, T* working, float* m, float* v, const float* grads, size_t n,
                             AdamWScalars s) {
    const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) adamw_element(i, master, working, m, v, grads, s);
}

template <typename T>
void adamw_update(float* master, T* working, float* m, float* v, const float* grads, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float grad_scale, int t, cudaStream_t stream) {
    const AdamWScalars s = adamw_scalars(lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    if (n == 0) return;
    constexpr int kThreads = 256;
    const unsigned blocks = grid_1d(n, kThreads);
    adamw_kernel<<<blocks, kThreads, 0, stream>>>(master, working, m, v, grads, n, s);
    cudaCheck(cudaGetLastError());
}

}   // namespace train_gpt::cuda
