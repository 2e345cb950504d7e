// cpu/fp8_kernels.h — the FP8 ops of the CPU kernel set (DESIGN §4).
//
// An FP8 GEMM here is emulated the way an FP8 tensor core computes it: both operands are FP8
// values q = saturate(x · s) (dtypes.h, fp8_scaling.h); their products are exact in FP32
// (3 + 3 or 3 + 2 mantissa bits), they are accumulated in FP32, and the sum is multiplied by
// the two dequantisation factors 1/s_a · 1/s_b before the bias is added and the result is
// rounded into the activation dtype T.
//
// Which operand is which (per GEMM of a block, y = x Wᵀ + b):
//   forward   y  (N,OC) = X (N,C)   · Wᵀ        X: E4M3, W: E4M3
//   backward  dX (N,C)  = dY (N,OC) · W         dY: E5M2 (the gradient's wide range), W: E4M3
//             dW (OC,C) += dYᵀ · X              dY: E5M2, X: the E4M3 copy saved by the forward
//             db (OC)  += Σ_rows dY             from the unquantised dY
// A Hopper FP8 GEMM takes its operands only with the reduction dimension contiguous ("TN"), so
// the backward GEMMs read transposed copies: Wᵀ (C,OC) for dX, dYᵀ (OC,N) and Xᵀ (C,N) for dW.
// One cast writes both layouts (quantize_transpose_fp8: the weights' copies after each update,
// X's transposed copy in the forward, dY's two in the backward), so no GEMM transposes anything.
// The CPU twin takes the same layouts, so a model that passes the wrong copy fails here too.
#pragma once

#include "cpu/kernels.h"
#include "precision/fp8_scaling.h"

namespace train_gpt::cpu {

// max |x| over n values; NaN if any value is NaN (so a NaN can never hide in an amax).
template <typename T>
float amax(const T* x, size_t n);

// q (n) = saturate(x · scale) in Q (fp8e4m3 or fp8e5m2); returns the cast's statistics:
// amax of the unscaled x, and how many values saturated or flushed to zero.
template <typename T, typename Q>
Fp8CastStats quantize_fp8(Q* q, const T* x, size_t n, float scale);

// q (rows, cols) = saturate(x (rows, cols) · scale) and qt (cols, rows) = qᵀ from the same cast
// (either may be null: one layout only); statistics as quantize_fp8, counted once per value.
template <typename T, typename Q>
Fp8CastStats quantize_transpose_fp8(Q* q, Q* qt, const T* x, int rows, int cols, float scale);

// ---- casts fused into the producer of the operand (DESIGN §4) ----------------------------------
// Each is its producer (cpu/kernels.h) writing the activation dtype T, followed by
// quantize_transpose_fp8 of that output, bit for bit, statistics included: the producer's value
// is rounded to T before it is cast, exactly as if it had gone through memory. On the GPU it
// never does (cuda/fp8_fused.cuh); here it passes through a temporary. q and qt may both be
// null: the statistics only (the just-in-time amax of a tensor that is never materialised).

// gelu(inp) (rows, cols) → q (rows, cols), qt (cols, rows)
template <typename T, typename Q>
Fp8CastStats gelu_forward_fp8(Q* q, Q* qt, const T* inp, int rows, int cols, float scale);
// layernorm(inp) (N, C) → q (N, C), qt (C, N); mean, rstd (N) as layernorm_forward saves them
template <typename T, typename Q>
Fp8CastStats layernorm_forward_fp8(Q* q, Q* qt, float* mean, float* rstd, const T* inp, const T* weight, const T* bias,
                                   int N, int C, float scale);
// dinp (rows, cols) = gelu'(inp) · dout as gelu_backward, then q, qt = the cast of dinp
template <typename T, typename Q>
Fp8CastStats gelu_backward_fp8(T* dinp, Q* q, Q* qt, const T* inp, const T* dout, int rows, int cols, float scale);

// layernorm_backward (cpu/kernels.h: dinp +=, dweight +=, dbias +=, dinp_sums += if non-null), then
// q (N, C), qt (C, N) = the cast of the new dinp: the dY of the projection whose output gradient the
// residual stream's gradient is
template <typename T, typename Q>
Fp8CastStats layernorm_backward_fp8(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                                    const float* mean, const float* rstd, int N, int C, float* dinp_sums, Q* q, Q* qt,
                                    float scale);

// adamw_update (cpu/kernels.h) of one weight matrix (rows, cols), then q (rows, cols), qt
// (cols, rows) = the cast of the new working weights
template <typename T, typename Q>
Fp8CastStats adamw_update_fp8(float* master, T* working, float* m, float* v, const float* grads, int rows, int cols,
                              float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                              int t, Q* q, Q* qt, float scale);

template <typename T>
void matmul_forward_fp8(T* out, const fp8e4m3* inp, float inp_inv_scale, const fp8e4m3* weight, float weight_inv_scale,
                        const T* bias, int N, int C, int OC);

// dinp (N,C) = dY·W from dout_q (N,OC) and weight_qt = Wᵀ (C,OC); dweight (OC,C) += dYᵀ·X from
// dout_qt (OC,N) and inp_qt = Xᵀ (C,N); dbias (OC) += Σ_rows dout (unquantised). dinp or dweight
// may be null (that GEMM is skipped).
template <typename T>
void matmul_backward_fp8(T* dinp, float* dweight, float* dbias, const fp8e5m2* dout_q, const fp8e5m2* dout_qt,
                         float dout_inv_scale, const T* dout, const fp8e4m3* inp_qt, float inp_inv_scale,
                         const fp8e4m3* weight_qt, float weight_inv_scale, int N, int C, int OC);

}   // namespace train_gpt::cpu
