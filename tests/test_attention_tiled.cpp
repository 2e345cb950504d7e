// test_attention_tiled.cpp — the host twin of the flash attention kernels (cpu/attention_tiled.h:
// the kernel's tiles, schedule, fragments, online softmax, roundings, masking and skipping, run on
// the CPU) against the exact op, cpu::attention_forward / attention_backward, in bf16 and fp16;
// and the tiling rules of cuda/attention_flash_tiling.h (schedule coverage, skipping).
//
// ---- The tolerance: a bound per element, derived from the formats ---------------------------------
// u is the unit roundoff of the 16-bit format: a value rounded to nearest is within a relative u
// of the exact one (above the subnormal range), u = 2^-8 for bf16 (8 significant bits) and 2^-11
// for fp16 (11 bits); two roundings of nearby values differ by at most their distance plus one
// ulp ≤ 2u·|value|. Below the normal range the rounding error is absolute, at most h = half the
// smallest subnormal (2^-25 fp16, 2^-134 bf16). All FP32 arithmetic (dot products of 64 terms,
// exp / exp2, sums over up to T terms) is bounded by its recursive-summation error n·2^-24 of the
// sum of absolute terms, taken twice (one for each side).
//
// Forward. The CPU rounds each normalised probability P_j to T; the twin rounds the unnormalised
// p_j = exp2(s_j·scale·log2 e − m_running) and rescales in FP32. Either way each term of
// o_t = Σ_j P_j v_j carries one rounding of relative size ≤ u (or absolute ≤ h) on its
// coefficient, so per element
//   |o_twin − o_cpu| ≤ (2u + 2σ_t)·Σ_j P_j |v_jd| + 2(t+1)·h·max_j |v_jd|        (before the store)
//                     + 2u·|o| + 2h                                               (the two stores)
// where σ_t covers the FP32 error of the coefficients and sums: the dot products
// (2^-18·scale·Σ_d |q_d k_d| per side), exp (2^-22), the sums and rescalings ((t + 8)·2^-24).
// lse = m·scale + ln l: |Δ| ≤ 2σ_t + 2^-22·|lse|.
//
// Backward. Both round the same normalised P_tj = exp(s_tj·scale − lse_t) (the twin as
// exp2(s·scale·log2 e − lse·log2 e)) and the same dS_tj = P_tj·(dP_tj − D_t) to T; their FP32
// arguments differ by σ_tj (dot products, lse·log2 e, exp), so the rounded values differ by at most
// one ulp plus that: ΔP ≤ (2u + 2σ_tj)·P + 2h, and ΔdS ≤ ΔP·|dP − D| + P·(ΔdP + ΔD) + 2u·|dS| + 2h.
// Then |ΔdV_jd| ≤ Σ_t ΔP_tj |dO_td|, |ΔdQ_td| ≤ scale·Σ_j ΔdS_tj |k_jd|, |ΔdK_jd| ≤ scale·Σ_t ΔdS_tj |q_td|,
// plus the FP32 sums and the two stores (2u·|value| + 2h).
// These are worst cases (a rounding that falls on the other side of a tie-point); the measured
// errors, printed by each test, sit well inside them.
#include "cpu/attention_tiled.h"

#include "cpu/kernels.h"
#include "cuda/attention_flash_tiling.h"
#include "precision/dtypes.h"
#include "rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace train_gpt;
namespace fl = train_gpt::flash;

namespace {

constexpr int kHs = fl::kHeadSize;

struct Shape {
    int B, T, NH;
};
// T = 1, T < a tile, T a tile multiple, T not a multiple of any tile, several query blocks;
// B·NH > 1 in most.
const Shape kShapes[] = {{1, 1, 1}, {2, 77, 3}, {1, 64, 2}, {1, 128, 1}, {2, 203, 2}, {1, 300, 1}};

std::string shape_str(const Shape& s) {
    return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " NH=" + std::to_string(s.NH);
}

template <typename T> constexpr double unit_roundoff();
template <> constexpr double unit_roundoff<bf16>() { return 0x1p-8; }
template <> constexpr double unit_roundoff<fp16>() { return 0x1p-11; }
template <typename T> constexpr double half_min_subnormal();
template <> constexpr double half_min_subnormal<bf16>() { return 0x1p-134; }
template <> constexpr double half_min_subnormal<fp16>() { return 0x1p-25; }

template <typename T>
std::vector<T> random_t(Rng& rng, size_t n, double stddev) {
    std::vector<T> v(n);
    for (T& x : v) x = T::from_float((float)(stddev * rng.normal()));
    return v;
}
template <typename T>
std::vector<T> poisoned(size_t n) {
    std::vector<T> v(n);
    std::memset(v.data(), 0xff, n * sizeof(T));   // NaN in bf16 and fp16
    return v;
}
template <typename T>
double val(const T& x) { return x.to_float(); }

// The inputs of one case, and views of them by (b, h, t, d).
template <typename T>
struct Case {
    int B, Tn, NH, C;
    std::vector<T> qkv, dout;
    Case(const Shape& s, uint64_t seed) : B(s.B), Tn(s.T), NH(s.NH), C(s.NH * kHs) {
        Rng rng(seed);
        qkv = random_t<T>(rng, (size_t)B * Tn * 3 * C, 1.5);   // peaked softmax rows too
        dout = random_t<T>(rng, (size_t)B * Tn * C, 1.0);
    }
    size_t at(int b, int t, int part, int h, int d) const { return ((size_t)b * Tn + t) * 3 * C + (size_t)part * C + h * kHs + d; }
    size_t at_out(int b, int t, int h, int d) const { return ((size_t)b * Tn + t) * C + h * kHs + d; }
    double q(int b, int t, int h, int d) const { return val(qkv[at(b, t, 0, h, d)]); }
    double k(int b, int t, int h, int d) const { return val(qkv[at(b, t, 1, h, d)]); }
    double v(int b, int t, int h, int d) const { return val(qkv[at(b, t, 2, h, d)]); }
};

// Exact (double) softmax row t of head (b, h) and the FP32-error scale σ of its scores.
template <typename T>
void exact_row(const Case<T>& c, int b, int h, int t, std::vector<double>& P, double* qk_abs_max) {
    const double scale = 1.0 / std::sqrt((double)kHs);
    P.assign(t + 1, 0.0);
    double mx = -INFINITY;
    *qk_abs_max = 0;
    for (int j = 0; j <= t; j++) {
        double s = 0, a = 0;
        for (int d = 0; d < kHs; d++) {
            s += c.q(b, t, h, d) * c.k(b, j, h, d);
            a += std::fabs(c.q(b, t, h, d) * c.k(b, j, h, d));
        }
        P[j] = s * scale;
        mx = std::max(mx, P[j]);
        *qk_abs_max = std::max(*qk_abs_max, a * scale);
    }
    double sum = 0;
    for (int j = 0; j <= t; j++) sum += (P[j] = std::exp(P[j] - mx));
    for (double& p : P) p /= sum;
}

struct Worst {
    double ratio = 0, err = 0, bound = 0;
    size_t violations = 0, checked = 0;
    void add(double e, double bnd) {
        checked++;
        if (!(e <= bnd)) violations++;   // NaN counts
        if (bnd > 0 && e / bnd > ratio) {
            ratio = e / bnd;
            err = e;
            bound = bnd;
        }
    }
};
void report(const char* what, const Worst& w) {
    EXPECT_EQ(w.violations, 0u) << what << ": " << w.violations << " of " << w.checked
                                << " elements outside the bound; worst error/bound " << w.ratio;
    std::printf("    %-10s worst |twin − exact op| / bound = %.3f (error %.3g, bound %.3g, %zu elements)\n", what,
                w.ratio, w.err, w.bound, w.checked);
}

template <typename T>
void check_forward(const Shape& s, uint64_t seed) {
    SCOPED_TRACE(shape_str(s));
    const Case<T> c(s, seed);
    const double u = unit_roundoff<T>(), hmin = half_min_subnormal<T>();
    std::vector<T> out_cpu((size_t)c.B * c.Tn * c.C), out_twin = poisoned<T>(out_cpu.size());
    std::vector<float> lse_cpu((size_t)c.B * c.NH * c.Tn), lse_twin(lse_cpu.size(), NAN);
    cpu::attention_forward(out_cpu.data(), lse_cpu.data(), c.qkv.data(), c.B, c.Tn, c.C, c.NH);
    cpu::TiledStats stats;
    cpu::attention_forward_tiled(out_twin.data(), lse_twin.data(), c.qkv.data(), c.B, c.Tn, c.C, c.NH, &stats);

    Worst wo, wl;
    std::vector<double> P;
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < c.NH; h++)
            for (int t = 0; t < c.Tn; t++) {
                double qk;
                exact_row(c, b, h, t, P, &qk);
                const double sigma = 0x1p-18 * qk + 0x1p-22 + (t + 8) * 0x1p-24;
                for (int d = 0; d < kHs; d++) {
                    double a = 0, vmax = 0;
                    for (int j = 0; j <= t; j++) {
                        a += P[j] * std::fabs(c.v(b, j, h, d));
                        vmax = std::max(vmax, std::fabs(c.v(b, j, h, d)));
                    }
                    const double ref = val(out_cpu[c.at_out(b, t, h, d)]);
                    const double bound = ((2 * u + 2 * sigma) * a + 2.0 * (t + 1) * hmin * vmax) * (1 + 4 * u) +
                                         2 * u * std::fabs(ref) + 2 * hmin;
                    wo.add(std::fabs(val(out_twin[c.at_out(b, t, h, d)]) - ref), bound);
                }
                const size_t i = ((size_t)b * c.NH + h) * c.Tn + t;
                wl.add(std::fabs((double)lse_twin[i] - lse_cpu[i]), 2 * sigma + 0x1p-22 * std::fabs(lse_cpu[i]));
            }
    report("out", wo);
    report("lse", wl);
    // the schedule visited every query block once; the skip rule was exact
    EXPECT_EQ(stats.blocks, (int64_t)c.B * c.NH * fl::ceil_div_int(c.Tn, fl::kFwdQueryRows));
    EXPECT_EQ(stats.computed_without_live, 0);
    EXPECT_EQ(stats.skipped_with_live, 0);
}

template <typename T>
void check_backward(const Shape& s, uint64_t seed) {
    SCOPED_TRACE(shape_str(s));
    const Case<T> c(s, seed);
    const double u = unit_roundoff<T>(), hmin = half_min_subnormal<T>();
    const double scale = 1.0 / std::sqrt((double)kHs);
    const int B = c.B, Tn = c.Tn, NH = c.NH, C = c.C;
    // both backwards from the CPU forward's out and lse
    std::vector<T> out((size_t)B * Tn * C);
    std::vector<float> lse((size_t)B * NH * Tn);
    cpu::attention_forward(out.data(), lse.data(), c.qkv.data(), B, Tn, C, NH);
    std::vector<T> dqkv_cpu((size_t)B * Tn * 3 * C, T::from_float(0.0f)), dqkv_twin = poisoned<T>(dqkv_cpu.size());
    cpu::attention_backward(dqkv_cpu.data(), c.dout.data(), c.qkv.data(), out.data(), lse.data(), B, Tn, C, NH);
    cpu::TiledStats stats;
    cpu::attention_backward_tiled(dqkv_twin.data(), c.dout.data(), c.qkv.data(), out.data(), lse.data(), B, Tn, C, NH,
                                  &stats);

    // per head: exact P, dP, D, dS and the error budget of each rounded P and dS
    Worst wq, wk, wv;
    std::vector<double> P, dPmD, eP, edS;   // (T, T) row-major, j ≤ t
    std::vector<double> bq((size_t)Tn * kHs), bk((size_t)Tn * kHs), bv((size_t)Tn * kHs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            P.assign((size_t)Tn * Tn, 0);
            dPmD.assign(P.size(), 0);
            eP.assign(P.size(), 0);
            edS.assign(P.size(), 0);
            std::vector<double> row;
            for (int t = 0; t < Tn; t++) {
                double qk;
                exact_row(c, b, h, t, row, &qk);
                double D = 0, D_abs = 0;
                for (int d = 0; d < kHs; d++) {
                    const double x = val(c.dout[c.at_out(b, t, h, d)]) * val(out[c.at_out(b, t, h, d)]);
                    D += x;
                    D_abs += std::fabs(x);
                }
                const double l = lse[((size_t)b * NH + h) * Tn + t];
                for (int j = 0; j <= t; j++) {
                    double s = 0, s_abs = 0, dp = 0, dp_abs = 0;
                    for (int d = 0; d < kHs; d++) {
                        s += c.q(b, t, h, d) * c.k(b, j, h, d);
                        s_abs += std::fabs(c.q(b, t, h, d) * c.k(b, j, h, d));
                        const double o = val(c.dout[c.at_out(b, t, h, d)]);
                        dp += o * c.v(b, j, h, d);
                        dp_abs += std::fabs(o * c.v(b, j, h, d));
                    }
                    // P from the saved lse, as both backwards compute it
                    const double p = std::exp(s * scale - l);
                    const double sig = 0x1p-18 * s_abs * scale + 0x1p-23 * (std::fabs(s * scale) + std::fabs(l)) + 0x1p-22;
                    const size_t i = (size_t)t * Tn + j;
                    P[i] = p;
                    dPmD[i] = dp - D;
                    eP[i] = (2 * u + 2 * sig) * p * (1 + 2 * u) + 2 * hmin;
                    const double ddp = 2 * 0x1p-18 * (dp_abs + D_abs);
                    edS[i] = (eP[i] * (std::fabs(dp - D) + ddp) + p * ddp) * (1 + 2 * u) + 2 * u * p * std::fabs(dp - D) +
                             2 * hmin;
                }
            }
            // bounds per element of dq, dk, dv
            std::fill(bq.begin(), bq.end(), 0.0);
            std::fill(bk.begin(), bk.end(), 0.0);
            std::fill(bv.begin(), bv.end(), 0.0);
            for (int t = 0; t < Tn; t++)
                for (int j = 0; j <= t; j++) {
                    const size_t i = (size_t)t * Tn + j;
                    const double ds_abs = std::fabs(P[i] * dPmD[i]);
                    const double acc_q = 2.0 * (t + 2) * 0x1p-24, acc_kv = 2.0 * (Tn - j + 2) * 0x1p-24;   // FP32 sums
                    for (int d = 0; d < kHs; d++) {
                        bq[(size_t)t * kHs + d] += scale * (edS[i] + acc_q * ds_abs) * std::fabs(c.k(b, j, h, d));
                        bk[(size_t)j * kHs + d] += scale * (edS[i] + acc_kv * ds_abs) * std::fabs(c.q(b, t, h, d));
                        bv[(size_t)j * kHs + d] += (eP[i] + acc_kv * P[i]) * std::fabs(val(c.dout[c.at_out(b, t, h, d)]));
                    }
                }
            for (int t = 0; t < Tn; t++)
                for (int d = 0; d < kHs; d++)
                    for (int part = 0; part < 3; part++) {
                        const size_t i = c.at(b, t, part, h, d);
                        const double ref = val(dqkv_cpu[i]);
                        const double acc = (part == 0 ? bq : part == 1 ? bk : bv)[(size_t)t * kHs + d];
                        const double bound = acc * (1 + 4 * u) + 2 * u * std::fabs(ref) + 2 * hmin;
                        (part == 0 ? wq : part == 1 ? wk : wv).add(std::fabs(val(dqkv_twin[i]) - ref), bound);
                    }
        }
    report("dq", wq);
    report("dk", wk);
    report("dv", wv);
    const int nb = fl::ceil_div_int(Tn, fl::kBwdBlockRows);
    EXPECT_EQ(stats.blocks, 2 * (int64_t)B * NH * nb);   // dK/dV blocks, then dQ blocks
    EXPECT_EQ(stats.computed_without_live, 0);
    EXPECT_EQ(stats.skipped_with_live, 0);
}

constexpr uint64_t kSeed = 20240613;

}  // namespace

TEST(AttentionTiled, ForwardMatchesExactOpWithinRoundingBoundBf16) {
    for (const Shape& s : kShapes) check_forward<bf16>(s, kSeed);
}
TEST(AttentionTiled, ForwardMatchesExactOpWithinRoundingBoundFp16) {
    for (const Shape& s : kShapes) check_forward<fp16>(s, kSeed + 1);
}
TEST(AttentionTiled, BackwardMatchesExactOpWithinRoundingBoundBf16) {
    for (const Shape& s : kShapes) check_backward<bf16>(s, kSeed + 2);
}
TEST(AttentionTiled, BackwardMatchesExactOpWithinRoundingBoundFp16) {
    for (const Shape& s : kShapes) check_backward<fp16>(s, kSeed + 3);
}
// One long sequence (GPT-2's T): many key tiles per query block, so the online rescaling runs
// for 16 tiles and the diagonal skipping is exercised on every block.
TEST(AttentionTiled, ForwardAndBackwardAtT1024Bf16) {
    check_forward<bf16>({1, 1024, 1}, kSeed + 4);
    check_backward<bf16>({1, 1024, 1}, kSeed + 5);
}

// Both kernels' outputs are fully written (poisoned inputs, checked finite): the backward
// overwrites dqkv, every element exactly once (the values are already checked above; this checks
// no element is left as it was).
TEST(AttentionTiled, EveryOutputElementIsWritten) {
    const Shape s{2, 203, 2};
    const Case<bf16> c(s, kSeed + 6);
    std::vector<bf16> out = poisoned<bf16>((size_t)c.B * c.Tn * c.C), dqkv = poisoned<bf16>(c.qkv.size());
    std::vector<float> lse((size_t)c.B * c.NH * c.Tn, NAN);
    cpu::attention_forward_tiled(out.data(), lse.data(), c.qkv.data(), c.B, c.Tn, c.C, c.NH);
    cpu::attention_backward_tiled(dqkv.data(), c.dout.data(), c.qkv.data(), out.data(), lse.data(), c.B, c.Tn, c.C, c.NH);
    for (const bf16& x : out) ASSERT_TRUE(std::isfinite(x.to_float()));
    for (float x : lse) ASSERT_TRUE(std::isfinite(x));
    for (const bf16& x : dqkv) ASSERT_TRUE(std::isfinite(x.to_float()));
}

// ---- the tiling rules ------------------------------------------------------------------------------

// Forward / dQ: blocks 0 … BH·nq−1 map onto every (bh, query block) exactly once, and the number of
// key tiles a block visits never increases along the launch order (longest first, across all (b, h)).
TEST(AttentionTiling, QueryBlockScheduleCoversEveryBlockOnceLongestFirst) {
    for (int BH : {1, 3, 16 * 12, 8 * 25})
        for (int Tn : {1, 64, 77, 128, 203, 1024}) {
            for (int rows : {fl::kFwdQueryRows, fl::kBwdBlockRows}) {
                const int nq = fl::ceil_div_int(Tn, rows);
                std::set<std::pair<int, int>> seen;
                int prev_work = 1 << 30;
                for (int block = 0; block < BH * nq; block++) {
                    const fl::TileIndex ti = fl::longest_first_query_block(block, BH, nq);
                    ASSERT_TRUE(ti.bh >= 0 && ti.bh < BH && ti.tile >= 0 && ti.tile < nq);
                    EXPECT_TRUE(seen.insert({ti.bh, ti.tile}).second) << "block " << block << " repeats";
                    const int work = fl::key_tiles_for_query_block(ti.tile * rows, rows, Tn, fl::kFwdKeyTile);
                    EXPECT_LE(work, prev_work) << "block " << block;
                    prev_work = work;
                }
                EXPECT_EQ(seen.size(), (size_t)BH * nq);
            }
        }
}

// dK/dV: every (bh, key block) once; the number of query tiles walked never increases.
TEST(AttentionTiling, KeyBlockScheduleCoversEveryBlockOnceLongestFirst) {
    for (int BH : {1, 3, 16 * 12, 8 * 25})
        for (int Tn : {1, 64, 77, 203, 1024}) {
            const int nk = fl::ceil_div_int(Tn, fl::kBwdBlockRows), nq = fl::ceil_div_int(Tn, fl::kBwdTile);
            std::set<std::pair<int, int>> seen;
            int prev_work = 1 << 30;
            for (int block = 0; block < BH * nk; block++) {
                const fl::TileIndex ti = fl::longest_first_key_block(block, BH);
                ASSERT_TRUE(ti.bh >= 0 && ti.bh < BH && ti.tile >= 0 && ti.tile < nk);
                EXPECT_TRUE(seen.insert({ti.bh, ti.tile}).second);
                const int work = nq - fl::first_query_tile_for_key(ti.tile * fl::kBwdBlockRows, fl::kBwdTile);
                EXPECT_LE(work, prev_work);
                prev_work = work;
            }
            EXPECT_EQ(seen.size(), (size_t)BH * nk);
        }
}

// The tiles a query block visits are exactly those holding a key some of its rows (< T) can see.
TEST(AttentionTiling, QueryBlocksVisitExactlyTheKeyTilesTheyCanSee) {
    for (int Tn : {1, 63, 64, 65, 77, 128, 203, 1024})
        for (int rows : {fl::kFwdQueryRows, fl::kBwdBlockRows})
            for (int q0 = 0; q0 < Tn; q0 += rows) {
                const int last_row = std::min(q0 + rows, Tn) - 1;
                const int n = fl::key_tiles_for_query_block(q0, rows, Tn, fl::kFwdKeyTile);
                EXPECT_LE((n - 1) * fl::kFwdKeyTile, last_row);                  // the last tile holds a visible key
                EXPECT_GT(n * fl::kFwdKeyTile, last_row);                        // and no visible key is beyond it
            }
}

// The fully-masked predicates against brute force over small ranges.
TEST(AttentionTiling, SkipPredicatesAreExact) {
    for (int Tn : {1, 20, 40})
        for (int r0 = 0; r0 < 48; r0 += 4)
            for (int k0 = 0; k0 < 48; k0 += 4) {
                bool live_q = false, live_k = false, need = false;
                for (int t = r0; t < r0 + 16; t++)
                    for (int j = k0; j < k0 + 16; j++) {
                        live_q |= fl::causal_keep_bwd(t, j, Tn);   // rows are queries
                        live_k |= fl::causal_keep_bwd(j, t, Tn);   // rows are keys: query j, key t
                        need |= t == r0 && !fl::causal_keep(t, j);
                    }
                EXPECT_EQ(fl::query_rows_fully_masked(r0, 16, k0, Tn), !live_q) << r0 << " " << k0 << " " << Tn;
                EXPECT_EQ(fl::key_rows_fully_masked(r0, k0, 16, Tn), !live_k) << r0 << " " << k0 << " " << Tn;
                // the mask is needed exactly when the first row cannot see the whole tile
                EXPECT_EQ(fl::query_rows_need_mask(r0, k0, 16), need);
            }
}
