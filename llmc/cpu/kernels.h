// cpu/kernels.h — the CPU kernel set: forward and backward of every op of the model.
//
// This file is the executable specification of the CUDA kernels: each function here has a
// CUDA twin with the same arguments, the same buffer layouts and the same maths.
//
// Conventions (as in llm.c):
//   * destination first: `out`/`dinp` come before inputs;
//   * forward ops overwrite their outputs;
//   * backward ops ACCUMULATE (+=) into every gradient they touch, parameter gradients and
//     activation gradients alike; the model zeroes activation gradients once per backward
//     and parameter gradients once per optimizer step (gradient accumulation);
//   * every kernel is a template over the scalar type Real, instantiated for float (training)
//     and double (the finite-difference tests): for Real = float all arithmetic is FP32,
//     including norm statistics, softmax and cross-entropy.
//   * shapes: B batch, T time, C channels, NH heads, hs = C/NH head size, V vocabulary,
//     Vp padded vocabulary (V rounded up to a multiple of 128), N = B*T rows.
#pragma once

#include <cstddef>
#include <cstdint>

namespace train_gpt::cpu {

// out (B,T,C) = wte[tokens[b,t]] + wpe[t]
template <typename Real>
void encoder_forward(Real* out, const int32_t* tokens, const Real* wte, const Real* wpe,
                     int B, int T, int C);
// dwte (Vp,C) += scatter of dout by token; dwpe (maxT,C) += sum over b. Serial over (b,t): deterministic.
template <typename Real>
void encoder_backward(Real* dwte, Real* dwpe, const Real* dout, const int32_t* tokens,
                      int B, int T, int C);

// out (N,C) = (inp - mean) * rstd * weight + bias, per row; mean, rstd (N) saved for backward.
// Biased variance, eps = 1e-5 (GPT-2 / PyTorch default).
template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, int N, int C);
template <typename Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                        const Real* weight, const Real* mean, const Real* rstd, int N, int C);

// out (N,OC) = inp (N,C) · weight (OC,C)ᵀ + bias (OC); bias may be null.
template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, const Real* bias,
                    int N, int C, int OC);
// dinp (N,C) += dout·weight; dweight (OC,C) += doutᵀ·inp; dbias (OC) += Σ_rows dout (if non-null).
template <typename Real>
void matmul_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                     const Real* weight, int N, int C, int OC);

// Causal self-attention, flash-style: out (B,T,C) from qkv (B,T,3C) = [q | k | v];
// only the log-sum-exp of each softmax row, lse (B,NH,T), is kept for backward (no T×T matrix
// is saved; backward recomputes the probabilities). Scores are scaled by 1/sqrt(hs).
template <typename Real>
void attention_forward(Real* out, Real* lse, const Real* qkv, int B, int T, int C, int NH);
// dqkv (B,T,3C) += gradient of the above.
template <typename Real>
void attention_backward(Real* dqkv, const Real* dout, const Real* qkv, const Real* out,
                        const Real* lse, int B, int T, int C, int NH);

// GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
template <typename Real>
void gelu_forward(Real* out, const Real* inp, size_t n);
template <typename Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, size_t n);

// out (n) = a + b
template <typename Real>
void residual_forward(Real* out, const Real* a, const Real* b, size_t n);

// Fused softmax + cross-entropy over the first V of Vp logits per row.
// losses (N) = logsumexp(logits[i, :V]) - logits[i, target[i]].
// If dlogits is non-null: dlogits (N,Vp) = (softmax - onehot(target)) · dloss for columns < V,
// 0 for the padding columns. dlogits may alias logits (in-place, as the GPU kernel does).
template <typename Real>
void fused_classifier(Real* dlogits, Real* losses, const Real* logits, const int32_t* targets,
                      int N, int V, int Vp, Real dloss);

// Σ g² over n values, accumulated in double.
template <typename Real>
double sum_squares(const Real* g, size_t n);

// AdamW with PyTorch's semantics, on one tensor of n values (fp32 master weights and moments):
//   g ← grad · grad_scale                      (grad_scale = global-norm clipping factor)
//   m ← β1·m + (1−β1)·g ;  v ← β2·v + (1−β2)·g²
//   p ← p·(1 − lr·wd)                          (decoupled weight decay)
//   p ← p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + ε)
template <typename Real>
void adamw_update(Real* params, Real* m, Real* v, const Real* grads, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t);

}  // namespace train_gpt::cpu
