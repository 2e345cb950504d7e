// twin_bounds.h — how far a CUDA kernel's output may lie from its CPU twin's, op by op, derived
// from the formats and the operation (tests/tolerances.h's rules, made per element), never from
// what one GPU measured.
//
// Both sides read identical input bytes and run the same FP32 formula; what may differ is the
// order of FP32 sums, contraction (FMA or not), the device's libm (CUDA's expf, logf, tanhf: ≤ 2
// ulp), and, where that moves an unrounded value across a rounding boundary, a stored 16-bit
// value rounding to its neighbour (one ulp ≤ 2u of it). So each bound below is a per-element
// bound B_j on |cuda_j − cpu_j| from the inputs and the CPU's outputs, and a test compares
// normwise against max_j B_j / max_j |cpu_j| (normwise(), below), plus one ulp of a 16-bit output
// (act_tol in cuda_test_util.h).
//
// FP32 sums (sum_coeff). Each side evaluates s = Σ_{i<K} t_i with error Σ_k δ_k·r_k over its ≤ 2K
// roundings (products and partial sums r_k, each |r_k| ≤ A = Σ|t_i|, |δ_k| ≤ u = 2^-24):
//   deterministic: |error| ≤ γ_K·A, γ_K = K·u/(1 − K·u) (Higham, "Accuracy and Stability of
//     Numerical Algorithms", Thm. 3.1), so the two sides differ by at most 2γ_K·A;
//   probabilistic: with the δ_k independent and of mean zero (the model of Higham & Mary 2019,
//     true of round-to-nearest on data of random sign), Hoeffding's inequality bounds one side's
//     error by λ·u·(Σ r_k²)^½ ≤ λ·√(2K)·u·A except with probability 2·exp(−λ²/2): λ = 6 gives
//     3·10^-8 per element, so 2λ√(2K)·u·A for the two sides.
//   sum_coeff takes the smaller. Tensor-core GEMMs (16-bit operands) accumulate in an FP32 adder
//   whose alignment may truncate rather than round (errors of one sign, no √K cancellation):
//   there, the deterministic bound with u = 2^-23 (as tests/attention_bounds.h).
// FP8 tensor-core GEMMs (fp8_gemm_coeff). The model: Hopper's FP8 MMA keeps its accumulator to
// about 14 significant bits and truncates (DeepSeek-V3 report §3.3.2: "around 14 bits"; reported
// elsewhere as an e8m13 accumulator); the products of two FP8 values are exact, and each k = 32
// step (one wgmma) loses less than one 14-bit ulp of the partial sum, 2^-13 of it, ≤ 2^-13·A.
// Over K terms: ⌈K/32⌉·2^-13·A, whether the partial sums are promoted to FP32 at intervals (no
// fast accumulation: shorter truncating runs, no more error) or not (fast accumulation, one
// accumulator through K), plus the FP32 sums of either side. (The truncations' typical sum, a
// bias toward zero of ≈ ⌈K/32⌉·2^-14 of the output, lies well inside it: A ≥ every partial sum.)
#pragma once

#include "precision/dtypes.h"
#include "precision/precision.h"      // DType
#include "tests/attention_bounds.h"   // RoundingUnit, kBf16Rounding, kFp16Rounding
#include "tests/tolerances.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace train_gpt::test {

constexpr double kU32 = kUnitRoundoffFp32;   // 2^-24
constexpr double kLambda = 6.0;              // probabilistic bounds: exceeded with probability ≤ 2e^{-λ²/2}

// |s_cuda − s_cpu| ≤ sum_coeff(K)·Σ|t_i| for two FP32 sums of the same K terms (see the top).
inline double sum_coeff(double K, bool tensor_cores = false) {
    const double u = tensor_cores ? 0x1p-23 : kU32;
    const double gamma = K * u / (1 - K * u);
    if (tensor_cores) return 2 * gamma;
    return std::min(2 * gamma, 2 * kLambda * std::sqrt(2 * K) * u);
}

// An FP8 tensor-core GEMM of reduction length K against the CPU's FP32 sum of the same exact
// products: |Δ| ≤ fp8_gemm_coeff(K)·Σ|t_i| (see the top).
inline double fp8_gemm_coeff(double K) { return std::ceil(K / 32) * 0x1p-13 + sum_coeff(K, true); }

// The normwise form of a per-element bound: max_j bound_j / max_j |ref_j|.
template <typename R>
double normwise(const std::vector<double>& bound, const std::vector<R>& ref) {
    double b = 0, r = 0;
    for (double x : bound)
        b = std::max(b, x);
    for (const R& x : ref)
        r = std::max(r, std::fabs((double)x));
    return r == 0 ? b : b / r;
}

// One ulp of an FP32 value y (2^(e−23) for |y| in [2^e, 2^(e+1))); 2^-149 at 0.
inline double ulp32(double y) {
    y = std::fabs(y);
    if (y < 0x1p-126) return 0x1p-149;
    return std::ldexp(1.0, std::ilogb(y) - 23);
}

// a (M, K) row-major, b (Nn, K) row-major: the (M, Nn) matrix of Σ_k |a_mk|·|b_nk|, the A of each
// element of a · bᵀ.
inline std::vector<double> abs_matmul(const std::vector<float>& a, const std::vector<float>& b, int M, int K, int Nn) {
    std::vector<double> out((size_t)M * Nn, 0.0);
#pragma omp parallel for
    for (int m = 0; m < M; m++) {
        const float* ar = a.data() + (size_t)m * K;
        for (int n = 0; n < Nn; n++) {
            const float* br = b.data() + (size_t)n * K;
            double s = 0;
            for (int k = 0; k < K; k++)
                s += std::fabs((double)ar[k] * br[k]);
            out[(size_t)m * Nn + n] = s;
        }
    }
    return out;
}
// a (rows, cols) → (cols, rows)
template <typename E>
std::vector<E> transposed(const std::vector<E>& a, int rows, int cols) {
    std::vector<E> t(a.size());
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++)
            t[(size_t)c * rows + r] = a[(size_t)r * cols + c];
    }
    return t;
}
// the per-element bound coef·A_j (+ add_j·coef_add when given)
inline std::vector<double> scaled(const std::vector<double>& A, double coef) {
    std::vector<double> b(A.size());
    for (size_t i = 0; i < A.size(); i++)
        b[i] = coef * A[i];
    return b;
}

// ---- layernorm --------------------------------------------------------------------------------
// Forward, both sides: mean = Σx / C, var = Σ(x − mean)² / C (two passes), rstd = 1 / sqrt(var +
// eps) (IEEE sqrt and divide), out = fma((x − mean)·rstd, w, b), each rounding spelled out the
// same way (llmc/cuda/layernorm.cuh). So:
//   mean: the sum of C terms, sum_coeff(C)·Σ|x| / C, and the divide (a flip, 2u|mean|);
//   var : C non-negative terms (A = C·var: relative sum_coeff(C)), their (x − mean) and squares
//         (4u), and the other side's mean (Σ(x − mean) = 0 to first order: Δmean²·rstd² second);
//   rstd: half var's relative difference, and the sqrt and divide (4u);
//   out : Δmean·rstd·|w| + |x̂·w|·(Δrstd/rstd + 4u) + 2u·|out| (x̂ = (x − mean)·rstd), to which
//         act_tol adds the 16-bit store's flip.
struct LayernormForwardTols {
    double out_fp32, mean, rstd;   // out_fp32: before the store's flip (act_tol adds it)
};
inline LayernormForwardTols layernorm_forward_tols(const std::vector<float>& x, const std::vector<float>& w,
                                                   const std::vector<float>& b, const std::vector<float>& mean,
                                                   const std::vector<float>& rstd, const std::vector<float>& out, int N,
                                                   int C) {
    const double u = kU32, cC = sum_coeff(C);
    std::vector<double> bm(N), br(N), bo((size_t)N * C);
    for (int n = 0; n < N; n++) {
        double ax = 0;
        for (int c = 0; c < C; c++)
            ax += std::fabs(x[(size_t)n * C + c]);
        const double m = mean[n], s = rstd[n];
        bm[n] = cC * ax / C + 2 * u * std::fabs(m);
        const double var_rel = cC + 4 * u + bm[n] * bm[n] * s * s;
        const double rstd_rel = 0.5 * var_rel + 4 * u;
        br[n] = rstd_rel * s;
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)n * C + c;
            const double xw = std::fabs(((double)x[i] - m) * s * w[c]);
            bo[i] = bm[n] * s * std::fabs(w[c]) + xw * (rstd_rel + 4 * u) + 2 * u * (xw + std::fabs(b[c]));
        }
    }
    return {normwise(bo, out), normwise(bm, mean), normwise(br, rstd)};
}

// Backward, from the same mean and rstd on both sides: dnorm = w·dout, x̂ = (x − mean)·rstd,
//   dinp += rstd·(dnorm − mean_c(dnorm) − x̂·mean_c(dnorm·x̂))   two sums of C terms, ~8 roundings
//   dweight += Σ_n x̂·dout, dbias += Σ_n dout                  sums of N terms and the start value
// (x̂ recomputed on each side: 4u of each term). dinp_fp32 is before the 16-bit store's flip.
struct LayernormBackwardTols {
    double dinp_fp32, dweight, dbias;
};
inline LayernormBackwardTols layernorm_backward_tols(const std::vector<float>& dout, const std::vector<float>& x,
                                                     const std::vector<float>& w, const std::vector<float>& mean,
                                                     const std::vector<float>& rstd, const std::vector<float>& dinp0,
                                                     const std::vector<float>& dw0, const std::vector<float>& db0,
                                                     const std::vector<float>& dinp, const std::vector<float>& dw,
                                                     const std::vector<float>& db, int N, int C) {
    const double u = kU32, cC = sum_coeff(C), cN = sum_coeff(N + 1.0);
    std::vector<double> bd((size_t)N * C), aw(C), ab(C);
    for (int c = 0; c < C; c++) {
        aw[c] = std::fabs(dw0[c]);
        ab[c] = std::fabs(db0[c]);
    }
    for (int n = 0; n < N; n++) {
        const double m = mean[n], s = rstd[n];
        double sg = 0, sgx = 0, ag = 0, agx = 0;
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)n * C + c;
            const double xh = ((double)x[i] - m) * s, g = (double)w[c] * dout[i];
            sg += g;
            sgx += g * xh;
            ag += std::fabs(g);
            agx += std::fabs(g * xh);
            aw[c] += std::fabs(xh * dout[i]);
            ab[c] += std::fabs((double)dout[i]);
        }
        const double mg = sg / C, mgx = sgx / C;
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)n * C + c;
            const double xh = ((double)x[i] - m) * s, g = (double)w[c] * dout[i];
            bd[i] = s * (cC * ag / C + std::fabs(xh) * cC * agx / C) +
                    16 * u * (std::fabs(dinp0[i]) + s * (std::fabs(g) + std::fabs(mg) + std::fabs(xh * mgx)));
        }
    }
    return {normwise(bd, dinp), normwise(scaled(aw, cN + 4 * u), dw), normwise(scaled(ab, cN), db)};
}

// Column sums of each side's own stored values (add_column_sums: the bias gradient summed from
// dinp): sums_c = sums0_c + Σ_n v_nc with v the side's values, so |Δ| ≤ |Σ_n (v_cuda − v_cpu)| +
// sum_coeff(N + 1)·(|sums0| + Σ_n |v|).
inline double column_sums_tol(const std::vector<float>& v_cuda, const std::vector<float>& v_cpu,
                              const std::vector<float>& sums0, const std::vector<float>& sums_cpu, int N, int C) {
    const double cN = sum_coeff(N + 1.0);
    std::vector<double> b(C);
    for (int c = 0; c < C; c++) {
        double d = 0, a = std::fabs(sums0[c]);
        for (int n = 0; n < N; n++) {
            d += (double)v_cuda[(size_t)n * C + c] - v_cpu[(size_t)n * C + c];
            a += std::fabs(v_cpu[(size_t)n * C + c]);
        }
        b[c] = std::fabs(d) + cN * a;
    }
    return normwise(b, sums_cpu);
}

// ---- GELU (tanh approximation) ----------------------------------------------------------------
// The same FP32 expression on both sides (llmc/cuda/gelu.cuh); tanh t = tanhf(a), a = √(2/π)(x +
// 0.044715x³), is taken within 4 ulp on each side (CUDA's tanhf is within 2): Δt ≤ 8·ulp(t) plus
// the argument's 3 roundings through tanh' = 1 − t². Forward 0.5x(1 + t): |Δ| ≤ 0.5|x|·(Δt +
// 2u|1 + t|) + 2u|out|. Backward dout·(0.5(1 + t) + 0.5x(1 − t²)a'): Δt through both terms
// (0.5Δt·(1 + 2|x|a'|t|)), 10 roundings on terms ≤ G = 0.5(1 + |t|) + 0.5|x|(1 − t²)a', and the
// rounding of t² inside 1 − t² (2u·t²·0.5|x|a'). Both before the 16-bit store's flip.
namespace gelu_detail {
constexpr double kScale = 0.7978845608028654;   // √(2/π)
inline double arg(double x) { return kScale * (x + 0.044715 * x * x * x); }
inline double dt(double x, double t) { return 8 * ulp32(t) + 6 * kU32 * std::fabs(arg(x)) * (1 - t * t); }
}   // namespace gelu_detail
inline double gelu_forward_tol(const std::vector<float>& x, const std::vector<float>& out) {
    using namespace gelu_detail;
    std::vector<double> b(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        const double t = std::tanh(arg(x[i]));
        b[i] = 0.5 * std::fabs(x[i]) * (dt(x[i], t) + 2 * kU32 * (1 + t)) + 2 * kU32 * std::fabs(out[i]);
    }
    return normwise(b, out);
}
inline double gelu_backward_tol(const std::vector<float>& x, const std::vector<float>& dout,
                                const std::vector<float>& dinp) {
    using namespace gelu_detail;
    std::vector<double> b(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        const double xi = x[i], t = std::tanh(arg(xi)), da = kScale * (1 + 3 * 0.044715 * xi * xi);
        const double G = 0.5 * (1 + std::fabs(t)) + 0.5 * std::fabs(xi) * (1 - t * t) * da;
        b[i] = std::fabs(dout[i]) * (0.5 * dt(xi, t) * (1 + 2 * std::fabs(xi) * da * std::fabs(t)) + 20 * kU32 * G +
                                     kU32 * std::fabs(xi) * da * t * t) +
               2 * kU32 * std::fabs(dinp[i]);
    }
    return normwise(b, dinp);
}

// ---- fused classifier -------------------------------------------------------------------------
// Per row: m = max z (exact), e_v = exp(z_v − m) (≤ 2 ulp each side: 8u of e_v apart), sum = Σ e_v
// (V positive terms: relative sum_coeff(V)), loss = (m − z_y) + log(sum) (log ≤ 2 ulp each side,
// the add a flip); dlogits_v = (e_v/sum − [v = y])·dloss: relative 8u + sum_coeff(V) + 4u of p_v,
// and the product's flip. p_v ≤ |dlogit_v|/dloss off the target, ≤ 1 on it.
struct ClassifierTols {
    double losses, dlogits_fp32;
};
inline ClassifierTols classifier_tols(const std::vector<float>& logits, const std::vector<int32_t>& targets,
                                      const std::vector<float>& losses, const std::vector<float>* dlogits, int N, int V,
                                      int Vp, double dloss) {
    const double u = kU32, cV = sum_coeff(V);
    std::vector<double> bl(N), bd;
    if (dlogits) bd.assign((size_t)N * Vp, 0.0);
    for (int n = 0; n < N; n++) {
        double m = -INFINITY;
        for (int v = 0; v < V; v++)
            m = std::max(m, (double)logits[(size_t)n * Vp + v]);
        const double lsum = losses[n] - (m - logits[(size_t)n * Vp + targets[n]]);   // log(sum) ∈ [0, log V]
        bl[n] = 8 * u + cV + 8 * u * std::fabs(lsum) + 2 * u * std::fabs(losses[n]);
        if (dlogits) {
            for (int v = 0; v < V; v++) {
                const double d = (*dlogits)[(size_t)n * Vp + v];
                const double p = v == targets[n] ? 1.0 : std::fabs(d) / dloss;
                bd[(size_t)n * Vp + v] = dloss * p * (12 * u + cV) + 2 * u * std::fabs(d);
            }
        }
    }
    return {normwise(bl, losses), dlogits ? normwise(bd, *dlogits) : 0.0};
}

// ---- AdamW ------------------------------------------------------------------------------------
// The same FP32 operations per element (llmc/cuda/adamw.cuh); the host compiler may contract a
// multiply-add, the device does not, so each side's value is within its roundings of the exact one:
//   m1 = β1·m0 + (1−β1)·(g·gs)          4 roundings on terms ≤ A_m: 8u·A_m between the sides
//   v1 = β2·v0 + (1−β2)·(g·gs)²         5 roundings: 10u·A_v
//   p1 = p0·decay − step·m1/(√v1/bc2 + ε): p0·decay (4u), the update through Δm1 and Δv1
//        (Δ√v = Δv/(2√v)), and its 5 roundings (20u), the subtraction's flip (2u|p1|).
// The working copy is round(p1): act_tol adds the 16-bit flip.
struct AdamWTols {
    double m, v, p_fp32;
};
inline AdamWTols adamw_tols(const std::vector<float>& p0, const std::vector<float>& m0, const std::vector<float>& v0,
                            const std::vector<float>& g, const std::vector<float>& m1, const std::vector<float>& v1,
                            const std::vector<float>& p1, float lr, float b1, float b2, float eps, float wd, float gs,
                            int t) {
    const double u = kU32;
    const double bc1 = 1.0 - std::pow((double)b1, t), bc2 = std::sqrt(1.0 - std::pow((double)b2, t));
    const double step = lr / bc1, decay = 1.0 - (double)lr * wd;
    const size_t n = p0.size();
    std::vector<double> bm(n), bv(n), bp(n);
    for (size_t i = 0; i < n; i++) {
        const double gg = (double)g[i] * gs;
        bm[i] = 8 * u * (std::fabs(b1 * (double)m0[i]) + std::fabs((1 - b1) * gg));
        bv[i] = 10 * u * (std::fabs(b2 * (double)v0[i]) + std::fabs((1 - b2) * gg * gg));
        const double sv = std::sqrt(std::max(0.0, (double)v1[i])), den = sv / bc2 + eps;
        const double dv = sv > 0 ? bv[i] / (2 * sv * bc2) : 0.0;   // Δ(√v1/bc2)
        const double upd = step * std::fabs(m1[i]) / den;
        bp[i] = 4 * u * std::fabs(p0[i] * decay) + step * bm[i] / den + upd * dv / den + 20 * u * upd +
                2 * u * std::fabs(p1[i]);
    }
    return {normwise(bm, m1), normwise(bv, v1), normwise(bp, p1)};
}

// ---- causal attention, any head size ----------------------------------------------------------
// tests/attention_bounds.h's element-wise bounds (its header has the derivation: one rounding of
// each probability on either side, the FP32 dot products, exp and sums by the recursive-summation
// bound with ε = 2^-23, the stores; for the backward P and dS carried through dq, dk, dv) at the
// shapes' head size, on the twin's vectors.
// RoundingUnit r: the activation dtype's u and half its smallest subnormal (fp32: 2^-24, 2^-150,
// where P and the outputs are not rounded: the bound only over-counts).
inline RoundingUnit rounding_unit(DType d) {
    switch (d) {
        case DType::BF16: return kBf16Rounding;
        case DType::F16: return kFp16Rounding;
        case DType::F32: break;
    }
    return RoundingUnit{kU32, 0x1p-150};
}
// out_bound: (B, T − t0, C), lse_bound: (B, NH, T − t0) when non-null; out_ref: the CPU's out rows
// t0 … T−1 (B, T − t0, C).
inline void attention_forward_bounds_any(std::vector<double>& out_bound, std::vector<double>* lse_bound,
                                         const std::vector<float>& qkv, const std::vector<float>& out_ref,
                                         const std::vector<float>* lse_ref, int B, int T, int C, int NH, int t0,
                                         RoundingUnit r) {
    attention_forward_bounds_rows(out_bound, lse_bound, qkv.data(), out_ref.data(), lse_ref ? lse_ref->data() : nullptr,
                                  B, T, NH, C / NH, t0, r);
}

// dqkv_bound (B, T, 3C) from qkv, dout (B, T, C), the out and lse both backwards read, and the
// CPU's dqkv.
inline void attention_backward_bounds_any(std::vector<double>& dqkv_bound, const std::vector<float>& qkv,
                                          const std::vector<float>& dout, const std::vector<float>& out,
                                          const std::vector<float>& lse, const std::vector<float>& dqkv_ref, int B,
                                          int T, int C, int NH, RoundingUnit r) {
    attention_backward_bounds(dqkv_bound, qkv.data(), dout.data(), out.data(), lse.data(), dqkv_ref.data(), B, T, NH, r,
                              C / NH);
}

}   // namespace train_gpt::test
