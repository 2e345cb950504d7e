// tolerances.h — the numbers the tests' numeric bounds are built from, each from a format and an
// operation, never from what one machine measured. A bound in a test is one of these, or a short
// expression in them with its reasoning beside it.
//
// Unit roundoff. A format with p significant bits (the implicit one included) rounds to nearest
// with a relative error of at most u = 2^-p: fp32 p = 24, bf16 8, fp16 11, E4M3 4, E5M2 3. One ulp
// of a value is 2u of it at most, so a value that rounds to the neighbouring representable value
// instead (a "flip": its unrounded input moved across a rounding boundary) moves by at most 2u.
//
// A changed summation order. Two FP32 sums of the same K terms in different orders (the BLAS
// picks its blocking by shape and by CPU: OpenBLAS's Haswell, SkylakeX, Cooperlake, Zen and
// Prescott kernels all sum differently) each carry at most γ_K = K·u/(1 − K·u) of Σ|terms| of
// error; the errors are sums of K independent roundings, so their typical size is √K·u of it
// (Higham, "Accuracy and Stability of Numerical Algorithms", §3.4: the rule of thumb behind
// every normwise comparison of two BLAS results). The tests compare normwise (‖a − b‖ / ‖b‖ over
// a whole tensor), where that rule holds with room: a tensor's norm averages many such errors.
//
// A chain. A gradient at the bottom of a backward pass is the result of n stored (rounded)
// intermediate tensors in a row. To first order each carries its input's relative difference
// through (exact for the element-wise ops; for a GEMM up to ‖W‖·‖x‖ / ‖W·x‖, O(1) for the
// well-conditioned random weights of these tests) and adds its own rounding's. Independent
// differences add in quadrature: √n times one step's.
//
// Two training runs. Two runs from the same weights whose gradients differ at every step by at
// most δ (relative, per value) take AdamW updates that differ by at most 2δ of each update to first
// order (m and v move by δ and 2δ, m/√v by at most δ + δ, wherever |g| ≫ eps; where it is not, the
// gradient is ~0 and the weight's move changes the loss by ~0). The loss then differs by at most
// 2δ of what the updates moved it: with Adam's near-sign updates every weight's move lowers the
// loss, so that is 2δ·Σ|L(j+1) − L(j)| over the steps so far, and after i steps the differences
// have fed back through i gradients: i·2δ·Σ|ΔL|.
#pragma once

#include "model/gpt.h"   // Precision

#include <algorithm>
#include <cmath>
#include <vector>

namespace train_gpt::test {

constexpr double kUnitRoundoffFp32 = 0x1p-24;
constexpr double kUnitRoundoffBf16 = 0x1p-8;
constexpr double kUnitRoundoffFp16 = 0x1p-11;
constexpr double kUnitRoundoffTf32 = 0x1p-11;   // a GEMM operand's rounding in tf32 (10-bit fraction)
constexpr double kUnitRoundoffE4M3 = 0x1p-4;
constexpr double kUnitRoundoffE5M2 = 0x1p-3;

// u of the format a precision stores its activations in (fp8 stores bf16 beside its E4M3/E5M2
// GEMM operands).
inline double storage_unit_roundoff(Precision p) {
    switch (p) {
        case Precision::FP32:
        case Precision::TF32: return kUnitRoundoffFp32;
        case Precision::BF16: return kUnitRoundoffBf16;
        case Precision::FP16: return kUnitRoundoffFp16;
        case Precision::FP8: return kUnitRoundoffBf16;
    }
    return 1.0;
}

// The typical normwise relative difference of two FP32 sums of K terms in different orders.
inline double reordered_fp32_sum(double K) { return std::sqrt(K) * kUnitRoundoffFp32; }

// One rounding to a format of unit roundoff u that may land on the neighbouring value: 2u.
inline double one_flip(double u) { return 2 * u; }

// The backward pass of an L-layer GPT from the head's dln to the first layer's weight gradients
// goes through this many stored tensors: dln and ln_f's dresidual, then per layer dfch_gelu,
// dfch, dln2, dresidual, datty, dqkv, dln1 and dresidual again (8).
inline int backward_chain_length(int n_layer) { return 2 + 8 * n_layer; }

// Two FP32 implementations of the same GPT (the engine and PyTorch, or the engine on two shapes):
// every stored value of the chain carries a reordered sum of at most K terms and, through exp,
// tanh and the like, a last-bit difference of the functions' implementations (2u), in quadrature
// over the chain's values. The forward (10L + 2 stored tensors: per layer ln1, qkv, atty, attproj,
// residual2, ln2, fch, fch_gelu, fcproj, residual3; then lnf and the logits) sums over C, 4C and T;
// the backward (2 + 8L more) also over the batch's B·T rows and the vocabulary's Vp.
inline double fp32_logits_bound(const GPTConfig& cfg, int T) {
    const double K = std::max(4 * cfg.n_embd, T);
    return std::sqrt(10.0 * cfg.n_layer + 2) * (reordered_fp32_sum(K) + one_flip(kUnitRoundoffFp32));
}
inline double fp32_gradient_bound(const GPTConfig& cfg, int B, int T) {
    const double K = std::max({4 * cfg.n_embd, cfg.padded_vocab_size, B * T});
    const double n = (10.0 * cfg.n_layer + 2) + backward_chain_length(cfg.n_layer);
    return std::sqrt(n) * (reordered_fp32_sum(K) + one_flip(kUnitRoundoffFp32));
}
// The mean cross-entropy, whose gradient in a row's logits sums to at most 2 in absolute value:
// |Δloss| ≤ 2·max|Δlogit| ≤ 2·(the logits' normwise bound)·max|logit|; relative to the loss.
inline double fp32_loss_bound(const GPTConfig& cfg, int T, double max_abs_logit, double loss) {
    return 2 * fp32_logits_bound(cfg, T) * max_abs_logit / loss;
}

// The bound on step i's loss of the second run (trained_loss_bound(losses, δ)[i]), from the
// first run's losses (losses[0] is step 0's, before any update) and δ as above; step 0's is 0 and
// the caller adds what the loss's own reduction may differ by.
inline std::vector<double> trained_loss_bounds(const std::vector<double>& losses, double delta) {
    std::vector<double> bounds(losses.size(), 0.0);
    double moved = 0;
    for (size_t i = 1; i < losses.size(); i++) {
        moved += std::fabs(losses[i] - losses[i - 1]);
        bounds[i] = i * 2 * delta * moved;
    }
    return bounds;
}

}   // namespace train_gpt::test
