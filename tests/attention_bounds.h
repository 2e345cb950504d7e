// attention_bounds.h — how far a 16-bit causal attention (any head size; the flash kernels' is 64) may lie from the exact
// op, cpu::attention_forward / attention_backward, element by element, derived from the formats.
// Used by tests/test_attention_tiled.cpp (the host twin of the flash kernels) and
// tests/cuda/test_cuda_attention_flash.cu (the kernels themselves).
//
// u is the unit roundoff of the 16-bit format: a value rounded to nearest is within a relative u
// of the exact one above the subnormal range, u = 2^-8 for bf16 (8 significant bits) and 2^-11 for
// fp16 (11 bits); two roundings of nearby values differ by at most their distance plus one ulp
// ≤ 2u·|value|. Below the normal range the error is absolute, at most h = half the smallest
// subnormal (2^-25 fp16, 2^-134 bf16). FP32 arithmetic is bounded per side by the recursive-summation
// bound n·ε·Σ|terms| with ε = 2^-23 (twice FP32's unit roundoff: the tensor core's accumulation
// order and rounding are not specified, so a truncating adder is allowed for), exp / exp2 / log
// by 2^-22 relative (CUDA's exp2f, expf: ≤ 2 ulp).
//
// Forward. The exact op rounds each normalised probability P_j to T; the flash kernel rounds the
// unnormalised p_j = exp2(s_j·scale·log2 e − m_running) and rescales in FP32. Either way each term
// of o_t = Σ_j P_j v_j carries one rounding of relative size ≤ u (or absolute ≤ h) on its
// coefficient, so per element
//   |o − o_exact| ≤ (2u + 2σ_t)·Σ_j P_j |v_jd| + 2(t+1)·h·max_j |v_jd|      (before the stores)
//                   + 2u·|o_exact| + 2h                                      (the two stores)
// where σ_t bounds the FP32 error of one side's coefficients: the hs-term dot products
// (hs·ε·scale·Σ_d |q_d k_d|, hs = 64 for the flash kernels), exp (2^-22) and the sums and rescalings over t + 8 terms ((t + 8)ε).
// lse = m·scale + ln l: |Δ| ≤ 2σ_t + 2^-22·|lse|.
//
// Backward. Both round the same normalised P_tj = exp(s_tj·scale − lse_t) and the same
// dS_tj = P_tj·(dP_tj − D_t) to T, from FP32 arguments that differ by σ_tj; so
//   ΔP ≤ (2u + 2σ_tj)·P + 2h,   ΔdS ≤ ΔP·(|dP − D| + ΔdP) + P·ΔdP + 2u·|dS| + 2h
// with ΔdP = 2·hs·ε·(Σ_d |dO_d v_d| + Σ_d |dO_d O_d|) (the dot products dP and D, both sides); then
//   |Δdv_jd| ≤ Σ_t (ΔP_tj + 2(T−j+2)ε·P_tj)·|dO_td|
//   |Δdq_td| ≤ scale·Σ_j (ΔdS_tj + 2(t+2)ε·|dS_tj|)·|k_jd|,  |Δdk_jd| the same over t with |q_td|
// plus the two stores (2u·|value| + 2h). The products of small error terms are covered by a
// factor (1 + 4u). These are worst cases: a rounding must fall on the other side of a tie-point
// for a term to contribute its full share. Measured errors are reported beside them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <vector>

namespace train_gpt::test {

struct RoundingUnit {
    double u;   // unit roundoff (relative error of one rounding to nearest)
    double h;   // half the smallest subnormal (absolute error of one rounding near zero)
};
constexpr RoundingUnit kBf16Rounding{0x1p-8, 0x1p-134};
constexpr RoundingUnit kFp16Rounding{0x1p-11, 0x1p-25};

namespace attention_bounds_detail {
constexpr double kEps = 0x1p-23;     // FP32 arithmetic, per operation (see above)
constexpr double kTrans = 0x1p-22;   // exp / exp2 / log, relative

// Values of one case as floats (the 16-bit values, exactly), with index helpers; hs = C / NH.
struct View {
    const float* qkv;
    int T, C, hs;
    double q(int b, int t, int h, int d) const { return qkv[((size_t)b * T + t) * 3 * C + (size_t)h * hs + d]; }
    double k(int b, int t, int h, int d) const { return qkv[((size_t)b * T + t) * 3 * C + C + (size_t)h * hs + d]; }
    double v(int b, int t, int h, int d) const {
        return qkv[((size_t)b * T + t) * 3 * C + 2 * (size_t)C + (size_t)h * hs + d];
    }
    size_t at_out(int b, int t, int h, int d) const { return ((size_t)b * T + t) * C + (size_t)h * hs + d; }
};

// Row t of head (b, h): exact softmax P (j ≤ t) and σ_t's dot-product term hs·ε·scale·max_j Σ_d |q_d k_d|.
inline void exact_row(const View& x, int b, int h, int t, std::vector<double>& P, double* dot_term) {
    const double scale = 1.0 / std::sqrt((double)x.hs);
    P.assign(t + 1, 0.0);
    double mx = -INFINITY, qk = 0;
    for (int j = 0; j <= t; j++) {
        double s = 0, a = 0;
        for (int d = 0; d < x.hs; d++) {
            s += x.q(b, t, h, d) * x.k(b, j, h, d);
            a += std::fabs(x.q(b, t, h, d) * x.k(b, j, h, d));
        }
        P[j] = s * scale;
        mx = std::max(mx, P[j]);
        qk = std::max(qk, a * scale);
    }
    double sum = 0;
    for (int j = 0; j <= t; j++)
        sum += (P[j] = std::exp(P[j] - mx));
    for (double& p : P)
        p /= sum;
    *dot_term = x.hs * kEps * qk;
}
}   // namespace attention_bounds_detail

// Bounds on |out − out_exact| and |lse − lse_exact| for the query rows t0 … T−1 of each sequence:
// out_bound (B, T − t0, C), lse_bound (B, NH, T − t0) when non-null, from qkv (B, T, 3C) and the
// exact op's out and lse of those rows (all as floats), head size hs = C / NH.
inline void attention_forward_bounds_rows(std::vector<double>& out_bound, std::vector<double>* lse_bound,
                                          const float* qkv, const float* out_exact, const float* lse_exact, int B,
                                          int T, int NH, int hs, int t0, RoundingUnit r) {
    using namespace attention_bounds_detail;
    const View x{qkv, T, NH * hs, hs};
    const int C = x.C, rows = T - t0;
    out_bound.assign((size_t)B * rows * C, 0.0);
    if (lse_bound) lse_bound->assign((size_t)B * NH * rows, 0.0);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            std::vector<double> P;
            for (int t = t0; t < T; t++) {
                double dot_term;
                exact_row(x, b, h, t, P, &dot_term);
                const double sigma = dot_term + kTrans + (t + 8) * kEps;
                for (int d = 0; d < hs; d++) {
                    double a = 0, vmax = 0;
                    for (int j = 0; j <= t; j++) {
                        a += P[j] * std::fabs(x.v(b, j, h, d));
                        vmax = std::max(vmax, std::fabs(x.v(b, j, h, d)));
                    }
                    const size_t i = ((size_t)b * rows + (t - t0)) * C + (size_t)h * hs + d;
                    out_bound[i] = ((2 * r.u + 2 * sigma) * a + 2.0 * (t + 1) * r.h * vmax) * (1 + 4 * r.u) +
                                   2 * r.u * std::fabs(out_exact[i]) + 2 * r.h;
                }
                if (lse_bound) {
                    const size_t i = ((size_t)b * NH + h) * rows + (t - t0);
                    (*lse_bound)[i] = 2 * sigma + kTrans * std::fabs(lse_exact[i]);
                }
            }
        }
}

// The same for every row at head size 64 (the flash kernels'): out_bound (B,T,C), lse_bound (B,NH,T).
inline void attention_forward_bounds(std::vector<double>& out_bound, std::vector<double>& lse_bound, const float* qkv,
                                     const float* out_exact, const float* lse_exact, int B, int T, int NH,
                                     RoundingUnit r) {
    attention_forward_bounds_rows(out_bound, &lse_bound, qkv, out_exact, lse_exact, B, T, NH, 64, 0, r);
}

// Bounds on |dqkv − dqkv_exact| (B,T,3C) (dqkv_exact: the exact op's backward on a zeroed dqkv),
// from qkv, dout (B,T,C) and the forward's out and lse both backwards read; head size hs = C / NH.
inline void attention_backward_bounds(std::vector<double>& dqkv_bound, const float* qkv, const float* dout,
                                      const float* out, const float* lse, const float* dqkv_exact, int B, int T, int NH,
                                      RoundingUnit r, int hs = 64) {
    using namespace attention_bounds_detail;
    const View x{qkv, T, NH * hs, hs};
    const double scale = 1.0 / std::sqrt((double)hs);
    const int C = x.C;
    dqkv_bound.assign((size_t)B * T * 3 * C, 0.0);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            std::vector<double> bq((size_t)T * hs, 0.0), bk(bq.size(), 0.0), bv(bq.size(), 0.0);
            for (int t = 0; t < T; t++) {
                double D = 0, D_abs = 0;
                for (int d = 0; d < hs; d++) {
                    const double g = dout[x.at_out(b, t, h, d)] * (double)out[x.at_out(b, t, h, d)];
                    D += g;
                    D_abs += std::fabs(g);
                }
                const double l = lse[((size_t)b * NH + h) * T + t];
                for (int j = 0; j <= t; j++) {
                    double s = 0, s_abs = 0, dp = 0, dp_abs = 0;
                    for (int d = 0; d < hs; d++) {
                        s += x.q(b, t, h, d) * x.k(b, j, h, d);
                        s_abs += std::fabs(x.q(b, t, h, d) * x.k(b, j, h, d));
                        dp += dout[x.at_out(b, t, h, d)] * x.v(b, j, h, d);
                        dp_abs += std::fabs(dout[x.at_out(b, t, h, d)] * x.v(b, j, h, d));
                    }
                    const double p = std::exp(s * scale - l);   // P from the saved lse, as both backwards
                    const double sigma =
                        hs * kEps * s_abs * scale + kEps * (std::fabs(s * scale) + std::fabs(l)) + kTrans;
                    const double eP = (2 * r.u + 2 * sigma) * p + 2 * r.h;
                    const double ddp = 2 * hs * kEps * (dp_abs + D_abs);
                    const double ds_abs = p * std::fabs(dp - D);
                    const double edS = eP * (std::fabs(dp - D) + ddp) + p * ddp + 2 * r.u * ds_abs + 2 * r.h;
                    const double acc_q = 2.0 * (t + 2) * kEps, acc_kv = 2.0 * (T - j + 2) * kEps;   // FP32 sums
                    for (int d = 0; d < hs; d++) {
                        bq[(size_t)t * hs + d] += scale * (edS + acc_q * ds_abs) * std::fabs(x.k(b, j, h, d));
                        bk[(size_t)j * hs + d] += scale * (edS + acc_kv * ds_abs) * std::fabs(x.q(b, t, h, d));
                        bv[(size_t)j * hs + d] += (eP + acc_kv * p) * std::fabs((double)dout[x.at_out(b, t, h, d)]);
                    }
                }
            }
            for (int t = 0; t < T; t++)
                for (int part = 0; part < 3; part++) {
                    const std::vector<double>& acc = part == 0 ? bq : part == 1 ? bk : bv;
                    for (int d = 0; d < hs; d++) {
                        const size_t i = ((size_t)b * T + t) * 3 * C + (size_t)part * C + (size_t)h * hs + d;
                        dqkv_bound[i] =
                            acc[(size_t)t * hs + d] * (1 + 4 * r.u) + 2 * r.u * std::fabs(dqkv_exact[i]) + 2 * r.h;
                    }
                }
        }
}

// got against ref within bound, element by element (a NaN in got or ref is a violation).
struct BoundCheck {
    size_t checked = 0, violations = 0, identical = 0, worst = 0, first_violation = 0;
    double worst_ratio = 0, worst_err = 0, worst_bound = 0, max_err = 0, max_ref = 0;
    double normwise() const { return max_ref > 0 ? max_err / max_ref : max_err; }
};
inline BoundCheck check_within(const float* got, const float* ref, const double* bound, size_t n) {
    BoundCheck c;
    for (size_t i = 0; i < n; i++) {
        c.checked++;
        const double e = std::fabs((double)got[i] - (double)ref[i]);
        c.identical += got[i] == ref[i];
        if (!(e <= bound[i])) {
            if (c.violations++ == 0) c.first_violation = i;
        }
        if (std::isfinite(e)) c.max_err = std::max(c.max_err, e);
        c.max_ref = std::max(c.max_ref, std::fabs((double)ref[i]));
        const double ratio = !(e == e) ? INFINITY : bound[i] > 0 ? e / bound[i] : (e > 0 ? INFINITY : 0);
        if (!(ratio <= c.worst_ratio)) {
            c.worst_ratio = ratio;
            c.worst_err = e;
            c.worst_bound = bound[i];
            c.worst = i;
        }
    }
    return c;
}
inline void print_check(const char* what, const BoundCheck& c) {
    std::printf(
        "    %-28s worst error/bound %.3f (error %.3g, bound %.3g); normwise %.2e; %.1f%% bit-identical; "
        "%zu of %zu outside\n",
        what, c.worst_ratio, c.worst_err, c.worst_bound, c.normwise(),
        100.0 * c.identical / std::max<size_t>(1, c.checked), c.violations, c.checked);
}

}   // namespace train_gpt::test
