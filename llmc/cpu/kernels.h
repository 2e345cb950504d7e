// cpu/kernels.h — the CPU kernel set: forward and backward of every op of the model.
//
// This file is the executable specification of the CUDA kernels: each function here has a
// CUDA twin with the same arguments, the same buffer layouts and the same maths. What each op
// computes, and the conventions (destination first, forward overwrites, backward accumulates),
// are specified once in llmc/backend.h; the notes below are what the CPU set adds:
//   * every kernel is a template over the storage type T of activations and working weights:
//     float (fp32 training), bf16 or fp16 (mixed precision), double (finite-difference tests).
//     Arithmetic is done in acc_t<T> — FP32, or double for T = double — and every value stored
//     into a T buffer is rounded to nearest even, exactly once per store, as a GPU kernel does.
//     Parameter gradients, Adam moments, master weights, norm statistics, softmax and
//     cross-entropy are always acc_t<T> (FP32 in training).
//   * the sequence length is Tlen where T names the storage type.
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
    if constexpr (std::is_same_v<T, acc_t<T>>)
        return v;
    else
        return T::from_float(v);
}
// v as it reads back after a store into T (identity for float and double)
template <typename T>
inline acc_t<T> round_to(acc_t<T> v) {
    return load(store<T>(v));
}

// Backend::encoder_forward / encoder_backward (serial over (b,t) in backward: deterministic)
template <typename T>
void encoder_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tlen, int C);
template <typename T>
void encoder_backward(acc_t<T>* dwte, acc_t<T>* dwpe, const T* dout, const int32_t* tokens, int B, int Tlen, int C);

// Backend::layernorm_forward / layernorm_backward (dinp_sums may be null)
template <typename T>
void layernorm_forward(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* inp, const T* weight, const T* bias, int N,
                       int C);
template <typename T>
void layernorm_backward(T* dinp, acc_t<T>* dweight, acc_t<T>* dbias, const T* dout, const T* inp, const T* weight,
                        const acc_t<T>* mean, const acc_t<T>* rstd, int N, int C, acc_t<T>* dinp_sums);
// Backend::residual_layernorm_forward: residual_forward, then layernorm_forward of its output
template <typename T>
void residual_layernorm_forward(T* residual, T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* a, const T* b,
                                const T* weight, const T* bias, int N, int C);
// sums (cols) += Σ_rows x (rows, cols), each column summed in row order: the bias gradients
template <typename T>
void add_column_sums(acc_t<T>* sums, const T* x, int rows, int cols);

// Backend::matmul_forward / matmul_backward. For 16-bit T the operands are widened to FP32
// (exact) and multiplied by the BLAS with FP32 accumulation, like a tensor-core GEMM with FP32
// accumulate; the output is rounded once.
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC);
template <typename T>
void matmul_backward(T* dinp, acc_t<T>* dweight, acc_t<T>* dbias, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC);

// The tf32 precision's matmul ops: each GEMM's two operands rounded to TF32 first (tf32_round in
// precision/dtypes.h), as TF32 tensor cores read them, then the FP32 GEMM; the bias and dbias
// stay FP32 (an epilogue add and a column sum, not products).
void matmul_forward_tf32(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC);
void matmul_backward_tf32(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, int N, int C, int OC);

// Backend::attention_forward, exact per row (no tiling): scores, max, sum and lse in FP32; with
// 16-bit T the normalised probabilities P are rounded to T before P·V, as a bf16/fp16 kernel
// feeds them to its second matmul.
template <typename T>
void attention_forward(T* out, acc_t<T>* lse, const T* qkv, int B, int Tlen, int C, int NH);
// Backend::attention_decode: each row exactly as attention_forward computes it (the same code),
// so a KV-cache decode reproduces the full forward's attention rows bit for bit.
template <typename T>
void attention_decode(T* out, const T* qkv, int pos, int n, int C, int NH);
// Backend::attention_backward: dq, dk, dv are accumulated in FP32 per head and added to dqkv
// once; P and dS are rounded to T before they multiply (the operands a 16-bit flash backward
// kernel feeds its matmuls).
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const acc_t<T>* lse, int B, int Tlen, int C,
                        int NH);

// Backend::gelu_forward / gelu_backward / residual_forward
template <typename T>
void gelu_forward(T* out, const T* inp, size_t n);
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n);
// Backend::matmul_forward_gelu / matmul_backward_dgelu (the GEMM epilogues): the GEMM as
// matmul_forward's / matmul_backward's dinp, and GELU (its gradient) evaluated as gelu_forward
// (gelu_backward) evaluates it, on the FP32 result before its one rounding
template <typename T>
void matmul_forward_gelu(T* out, T* pre, const T* inp, const T* weight, const T* bias, int N, int C, int OC);
template <typename T>
void matmul_backward_dgelu(T* dinp, const T* dout, const T* weight, const T* pre, int N, int C, int OC);
// Backend::gelu_backward_bias: gelu_backward, then add_column_sums of its output into dbias
template <typename T>
void gelu_backward_bias(T* dinp, acc_t<T>* dbias, const T* inp, const T* dout, int rows, int cols);

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n);

// Backend::fused_classifier (dlogits may alias logits)
template <typename T>
void fused_classifier(T* dlogits, acc_t<T>* losses, const T* logits, const int32_t* targets, int N, int V, int Vp,
                      acc_t<T> dloss);

// Σ g² over n values, accumulated in double (inf/NaN propagate: the caller checks finiteness).
template <typename G>
double sum_squares(const G* g, size_t n);

// Backend::adamw_update, on one tensor of n values. For T = acc_t<T>, master and working may be
// the same buffer.
template <typename T>
void adamw_update(acc_t<T>* master, T* working, acc_t<T>* m, acc_t<T>* v, const acc_t<T>* grads, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t);

}   // namespace train_gpt::cpu
