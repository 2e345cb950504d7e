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
//   * every kernel is a template over the storage type T of activations and working weights:
//     float (fp32 training), bf16 or fp16 (mixed precision), double (finite-difference tests).
//     Arithmetic is done in acc_t<T> — FP32, or double for T = double — and every value stored
//     into a T buffer is rounded to nearest even, exactly once per store, as a GPU kernel does.
//     Parameter gradients, Adam moments, master weights, norm statistics, softmax and
//     cross-entropy are always acc_t<T> (FP32 in training).
//   * shapes: B batch, T time, C channels, NH heads, hs = C/NH head size, V vocabulary,
//     Vp padded vocabulary (V rounded up to a multiple of 128), N = B*T rows.
#pragma once

#include "precision/dtypes.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace train_gpt::cpu {

// The arithmetic type for storage type T: double for double, FP32 for everything else.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Storage ↔ arithmetic, rounding to nearest even on the way in.
inline float load(float x) { return x; }
inline double load(double x) { return x; }
inline float load(bf16 x) { return x.to_float(); }
inline float load(fp16 x) { return x.to_float(); }
template <typename T>
inline T store(acc_t<T> v) {
    if constexpr (std::is_same_v<T, acc_t<T>>) return v; else return T::from_float(v);
}
// v as it reads back after a store into T (identity for float and double)
template <typename T>
inline acc_t<T> round_to(acc_t<T> v) { return load(store<T>(v)); }

// out (B,T,C) = wte[tokens[b,t]] + wpe[t]
template <typename T>
void encoder_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tlen, int C);
// dwte (Vp,C) += scatter of dout by token; dwpe (maxT,C) += sum over b. Serial over (b,t): deterministic.
template <typename T>
void encoder_backward(acc_t<T>* dwte, acc_t<T>* dwpe, const T* dout, const int32_t* tokens, int B, int Tlen, int C);

// out (N,C) = (inp - mean) * rstd * weight + bias, per row; mean, rstd (N) saved for backward.
// Biased variance, eps = 1e-5 (GPT-2 / PyTorch default).
template <typename T>
void layernorm_forward(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* inp, const T* weight, const T* bias,
                       int N, int C);
template <typename T>
void layernorm_backward(T* dinp, acc_t<T>* dweight, acc_t<T>* dbias, const T* dout, const T* inp, const T* weight,
                        const acc_t<T>* mean, const acc_t<T>* rstd, int N, int C);

// out (N,OC) = inp (N,C) · weight (OC,C)ᵀ + bias (OC); bias may be null.
// For 16-bit T the operands are widened to FP32 (exact) and multiplied by the BLAS with FP32
// accumulation, like a tensor-core GEMM with FP32 accumulate; the output is rounded once.
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC);
// dinp (N,C) += dout·weight; dweight (OC,C) += doutᵀ·inp; dbias (OC) += Σ_rows dout (if non-null).
template <typename T>
void matmul_backward(T* dinp, acc_t<T>* dweight, acc_t<T>* dbias, const T* dout, const T* inp, const T* weight,
                     int N, int C, int OC);

// Causal self-attention, flash-style: out (B,T,C) from qkv (B,T,3C) = [q | k | v];
// only the log-sum-exp of each softmax row, lse (B,NH,T), is kept for backward (no T×T matrix
// is saved; backward recomputes the probabilities). Scores are scaled by 1/sqrt(hs).
// With 16-bit T the softmax probabilities are rounded to T before P·V, as a bf16/fp16 flash
// kernel feeds them to its second matmul; scores, max, sum and lse stay FP32.
template <typename T>
void attention_forward(T* out, acc_t<T>* lse, const T* qkv, int B, int Tlen, int C, int NH);
// dqkv (B,T,3C) += gradient of the above.
// dq, dk, dv are accumulated in FP32 per head and added to dqkv once; P and dS are rounded to T
// before they multiply (the operands a 16-bit flash backward kernel would feed its matmuls).
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const acc_t<T>* lse, int B, int Tlen,
                        int C, int NH);

// GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
template <typename T>
void gelu_forward(T* out, const T* inp, size_t n);
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n);

// out (n) = a + b
template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n);

// Fused softmax + cross-entropy over the first V of Vp logits per row.
// losses (N) = logsumexp(logits[i, :V]) - logits[i, target[i]].
// If dlogits is non-null: dlogits (N,Vp) = (softmax - onehot(target)) · dloss for columns < V,
// 0 for the padding columns. dlogits may alias logits (in-place, as the GPU kernel does).
template <typename T>
void fused_classifier(T* dlogits, acc_t<T>* losses, const T* logits, const int32_t* targets, int N, int V, int Vp,
                      acc_t<T> dloss);

// Σ g² over n values, accumulated in double (inf/NaN propagate: the caller checks finiteness).
template <typename G>
double sum_squares(const G* g, size_t n);

// AdamW with PyTorch's semantics, on one tensor of n values (FP32 moments):
//   g ← grad · grad_scale                      (grad_scale = clipping factor / loss scale)
//   m ← β1·m + (1−β1)·g ;  v ← β2·v + (1−β2)·g²
//   p ← p·(1 − lr·wd)                          (decoupled weight decay)
//   p ← p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + ε)
// p is the FP32 master copy when `master` is non-null, and the working copy is then written as
// round(p); with master == nullptr (the "no master weights" ablation) p is read from and
// rounded back into the working weights, so updates below half an ulp of T are lost.
// For T = acc_t<T>, master and working may be the same buffer.
template <typename T>
void adamw_update(acc_t<T>* master, T* working, acc_t<T>* m, acc_t<T>* v, const acc_t<T>* grads, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t);

}  // namespace train_gpt::cpu
