// test_cpu_kernels.cpp — every CPU op's backward against central finite differences of its
// forward, computed in double precision (the kernels are templates; Real = double here).
//
// For an op y = f(x) we take the scalar L = Σ_i w_i y_i with fixed random w, so ∂L/∂y = w is
// the `dout` fed to the backward, and compare its ∂L/∂x with (L(x + h e_j) − L(x − h e_j)) / 2h.
// Tolerance: with h = 1e-5 in double the truncation error is O(h² · |f'''|) ≈ 1e-10 and the
// rounding error O(ε · |L| / h) ≈ 1e-10 for the O(1)..O(10) values here, so a normwise relative
// error of 1e-7 leaves three orders of margin yet catches any wrong term (which is O(1)).
#include "cpu/kernels.h"
#include "precision/dtypes.h"
#include "rng.h"
#include "test_util.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

using namespace train_gpt;
using namespace train_gpt::test;
namespace k = train_gpt::cpu;

namespace {

constexpr double kStep = 1e-5;
constexpr double kTolerance = 1e-7;

std::vector<double> randn(size_t n, uint64_t seed, double scale = 1.0, double offset = 0.0) {
    Rng rng(seed);
    std::vector<double> v(n);
    for (double& x : v)
        x = offset + scale * rng.normal();
    return v;
}

double weighted_sum(const std::vector<double>& y, const std::vector<double>& w) {
    double s = 0;
    for (size_t i = 0; i < y.size(); i++)
        s += y[i] * w[i];
    return s;
}

// Central differences of loss() w.r.t. every element of x (x is perturbed in place and restored).
std::vector<double> finite_difference(std::vector<double>& x, const std::function<double()>& loss) {
    std::vector<double> grad(x.size());
    for (size_t j = 0; j < x.size(); j++) {
        const double saved = x[j];
        x[j] = saved + kStep;
        const double up = loss();
        x[j] = saved - kStep;
        const double down = loss();
        x[j] = saved;
        grad[j] = (up - down) / (2 * kStep);
    }
    return grad;
}

void expect_gradient_matches(const std::vector<double>& analytic, const std::vector<double>& numeric,
                             const char* what) {
    ASSERT_EQ(analytic.size(), numeric.size());
    double max_abs = 0;
    for (double g : numeric)
        max_abs = std::max(max_abs, std::fabs(g));
    EXPECT_GT(max_abs, 1e-3) << what << ": gradient is ~0, the test would be vacuous";
    EXPECT_LT(max_rel_error(analytic.data(), numeric.data(), analytic.size()), kTolerance) << what;
}

}   // namespace

TEST(CpuKernels, EncoderBackwardMatchesFiniteDifferences) {
    const int B = 2, T = 3, C = 4, V = 5, maxT = 4;
    std::vector<int32_t> tokens = {1, 3, 1, 0, 4, 1};   // repeats exercise the scatter-add
    auto wte = randn(V * C, 1), wpe = randn(maxT * C, 2), w = randn(B * T * C, 3);
    std::vector<double> out(B * T * C);
    auto loss = [&] {
        k::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
        return weighted_sum(out, w);
    };
    std::vector<double> dwte(V * C, 0.0), dwpe(maxT * C, 0.0);
    k::encoder_backward(dwte.data(), dwpe.data(), w.data(), tokens.data(), B, T, C);
    expect_gradient_matches(dwte, finite_difference(wte, loss), "dwte");
    expect_gradient_matches(dwpe, finite_difference(wpe, loss), "dwpe");
}

TEST(CpuKernels, LayerNormForwardIsNormalised) {
    const int N = 3, C = 16;
    auto x = randn(N * C, 4, 3.0, 5.0);
    std::vector<double> ones(C, 1.0), zeros(C, 0.0), y(N * C), mean(N), rstd(N);
    k::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), ones.data(), zeros.data(), N, C);
    for (int i = 0; i < N; i++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++)
            m += y[i * C + c];
        for (int c = 0; c < C; c++)
            v += y[i * C + c] * y[i * C + c];
        EXPECT_NEAR(m / C, 0.0, 1e-12);
        EXPECT_NEAR(v / C, 1.0 - 1e-5 * rstd[i] * rstd[i], 1e-12);   // eps = 1e-5 inside the sqrt
    }
}

TEST(CpuKernels, LayerNormBackwardMatchesFiniteDifferences) {
    const int N = 4, C = 8;
    auto x = randn(N * C, 5, 2.0, 1.0), weight = randn(C, 6, 0.5, 1.0), bias = randn(C, 7), w = randn(N * C, 8);
    std::vector<double> y(N * C), mean(N), rstd(N);
    auto loss = [&] {
        k::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), weight.data(), bias.data(), N, C);
        return weighted_sum(y, w);
    };
    loss();
    std::vector<double> dx(N * C, 0.0), dweight(C, 0.0), dbias(C, 0.0), dx_sums(C, 0.5);
    k::layernorm_backward(dx.data(), dweight.data(), dbias.data(), w.data(), x.data(), weight.data(), mean.data(),
                          rstd.data(), N, C, dx_sums.data());
    for (int c = 0; c < C; c++) {   // the sums of the new dinp over rows, added to what was there
        double sum = 0.5;
        for (int i = 0; i < N; i++)
            sum += dx[i * C + c];
        EXPECT_NEAR(dx_sums[c], sum, 1e-12);
    }
    expect_gradient_matches(dx, finite_difference(x, loss), "dinp");
    expect_gradient_matches(dweight, finite_difference(weight, loss), "dweight");
    expect_gradient_matches(dbias, finite_difference(bias, loss), "dbias");
}

TEST(CpuKernels, MatmulForwardMatchesNaiveLoop) {
    const int N = 5, C = 7, OC = 3;
    auto x = randn(N * C, 9), weight = randn(OC * C, 10), bias = randn(OC, 11);
    std::vector<double> y(N * OC);
    k::matmul_forward(y.data(), x.data(), weight.data(), bias.data(), N, C, OC);
    for (int i = 0; i < N; i++) {
        for (int o = 0; o < OC; o++) {
            double ref = bias[o];
            for (int c = 0; c < C; c++)
                ref += x[i * C + c] * weight[o * C + c];
            EXPECT_NEAR(y[i * OC + o], ref, 1e-12);
        }
    }
}

// The tf32 matmul ops are the fp32 ones on TF32-rounded operands, bit for bit (the bias and dbias
// untouched by the rounding), and within the TF32 bound of the exact product: each term carries
// two roundings of at most u = 2^-11 (|ab(1+δ1)(1+δ2) − ab| ≤ (2u + u²)|ab|), and the FP32 sum
// of C terms adds γ_C ≤ C·2^-24 of Σ|ab|. The rounding must show: the result is not fp32's.
TEST(CpuKernels, Tf32MatmulIsTheFp32GemmOfTf32Operands) {
    const int N = 9, C = 40, OC = 6;
    auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    const std::vector<float> x = as_float(randn(N * C, 31)), w = as_float(randn(OC * C, 32)),
                             b = as_float(randn(OC, 33)), dy = as_float(randn(N * OC, 34));
    auto rounded = [](std::vector<float> v) {
        for (float& f : v)
            f = tf32_round(f);
        return v;
    };
    const std::vector<float> xr = rounded(x), wr = rounded(w), dyr = rounded(dy);
    std::vector<float> y(N * OC), y_ref(N * OC), y_fp32(N * OC);
    k::matmul_forward_tf32(y.data(), x.data(), w.data(), b.data(), N, C, OC);
    k::matmul_forward(y_ref.data(), xr.data(), wr.data(), b.data(), N, C, OC);
    k::matmul_forward(y_fp32.data(), x.data(), w.data(), b.data(), N, C, OC);
    EXPECT_EQ(y, y_ref);
    EXPECT_NE(y, y_fp32) << "the operands were not rounded";
    const double u = 0x1p-11, gamma = C * 0x1p-24;
    for (int i = 0; i < N; i++) {
        for (int o = 0; o < OC; o++) {
            double exact = b[o], abs_sum = std::fabs(b[o]);
            for (int c = 0; c < C; c++) {
                exact += (double)x[i * C + c] * w[o * C + c];
                abs_sum += std::fabs((double)x[i * C + c] * w[o * C + c]);
            }
            EXPECT_LE(std::fabs(y[i * OC + o] - exact), (2 * u + u * u + gamma) * abs_sum);
        }
    }
    std::vector<float> dx(N * C), dx_ref(N * C), dw(OC * C, 0.5f), dw_ref(OC * C, 0.5f), db(OC, 0.25f),
        db_ref(OC, 0.25f);
    k::matmul_backward_tf32(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC);
    k::matmul_backward(dx_ref.data(), dw_ref.data(), (float*)nullptr, dyr.data(), xr.data(), wr.data(), N, C, OC);
    k::add_column_sums(db_ref.data(), dy.data(), N, OC);   // dbias: a sum of dout as it is
    EXPECT_EQ(dx, dx_ref);
    EXPECT_EQ(dw, dw_ref);
    EXPECT_EQ(db, db_ref);
}

TEST(CpuKernels, MatmulBackwardMatchesFiniteDifferences) {
    const int N = 6, C = 5, OC = 4;
    auto x = randn(N * C, 12), weight = randn(OC * C, 13), bias = randn(OC, 14), w = randn(N * OC, 15);
    std::vector<double> y(N * OC);
    auto loss = [&] {
        k::matmul_forward(y.data(), x.data(), weight.data(), bias.data(), N, C, OC);
        return weighted_sum(y, w);
    };
    // start from non-zero gradients: backward must ADD to the parameters' and OVERWRITE dinp
    std::vector<double> dx(N * C, 1.0), dweight(OC * C, 2.0), dbias(OC, 3.0);
    k::matmul_backward(dx.data(), dweight.data(), dbias.data(), w.data(), x.data(), weight.data(), N, C, OC);
    for (double& g : dweight)
        g -= 2.0;
    for (double& g : dbias)
        g -= 3.0;
    expect_gradient_matches(dx, finite_difference(x, loss), "dinp");
    expect_gradient_matches(dweight, finite_difference(weight, loss), "dweight");
    expect_gradient_matches(dbias, finite_difference(bias, loss), "dbias");
}

TEST(CpuKernels, AttentionForwardMatchesNaiveSoftmax) {
    const int B = 2, T = 5, C = 8, NH = 2, hs = C / NH;
    auto qkv = randn(B * T * 3 * C, 16);
    std::vector<double> out(B * T * C), lse(B * NH * T);
    k::attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                std::vector<double> s(t + 1);
                double z = 0;
                for (int j = 0; j <= t; j++) {
                    double dot = 0;
                    for (int d = 0; d < hs; d++) {
                        dot += qkv[(b * T + t) * 3 * C + h * hs + d] * qkv[(b * T + j) * 3 * C + C + h * hs + d];
                    }
                    s[j] = std::exp(dot / std::sqrt((double)hs));
                    z += s[j];
                }
                EXPECT_NEAR(lse[(b * NH + h) * T + t], std::log(z), 1e-12);
                for (int d = 0; d < hs; d++) {
                    double o = 0;
                    for (int j = 0; j <= t; j++)
                        o += s[j] / z * qkv[(b * T + j) * 3 * C + 2 * C + h * hs + d];
                    EXPECT_NEAR(out[(b * T + t) * C + h * hs + d], o, 1e-12);
                }
            }
        }
    }
}

// The KV-cache op reproduces attention_forward's rows bit for bit (in every storage type), reads
// no cache row past pos+n (they are NaN here) and overwrites all of out.
template <typename T>
void expect_decode_rows_equal_forward_rows() {
    const int T_ = 23, C = 12, NH = 3;
    Rng rng(31);
    std::vector<T> qkv((size_t)(T_ + 2) * 3 * C);
    for (T& x : qkv)
        x = k::store<T>((k::acc_t<T>)(1.5 * rng.normal()));
    std::vector<T> full((size_t)T_ * C);
    std::vector<k::acc_t<T>> lse((size_t)NH * T_);
    k::attention_forward(full.data(), lse.data(), qkv.data(), 1, T_, C, NH);
    for (size_t i = (size_t)T_ * 3 * C; i < qkv.size(); i++)
        qkv[i] = k::store<T>(NAN);
    for (auto [pos, n] : {std::pair{0, 1}, {0, T_}, {7, 1}, {15, 8}, {22, 1}}) {
        std::vector<T> out((size_t)n * C, k::store<T>(NAN));
        k::attention_decode(out.data(), qkv.data(), pos, n, C, NH);
        for (size_t e = 0; e < out.size(); e++) {
            ASSERT_EQ(std::memcmp(&out[e], &full[(size_t)pos * C + e], sizeof(T)), 0)
                << "pos " << pos << " n " << n << " element " << e;
        }
    }
}
TEST(CpuKernels, AttentionDecodeRowsAreAttentionForwardRowsBitForBit) {
    expect_decode_rows_equal_forward_rows<float>();
    expect_decode_rows_equal_forward_rows<double>();
    expect_decode_rows_equal_forward_rows<bf16>();
    expect_decode_rows_equal_forward_rows<fp16>();
}

TEST(CpuKernels, AttentionBackwardMatchesFiniteDifferences) {
    const int B = 2, T = 5, C = 8, NH = 2;
    auto qkv = randn(B * T * 3 * C, 17), w = randn(B * T * C, 18);
    std::vector<double> out(B * T * C), lse(B * NH * T);
    auto loss = [&] {
        k::attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
        return weighted_sum(out, w);
    };
    loss();
    std::vector<double> dqkv(B * T * 3 * C, 7.0);   // overwritten, not added to
    k::attention_backward(dqkv.data(), w.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
    expect_gradient_matches(dqkv, finite_difference(qkv, loss), "dqkv");
}

TEST(CpuKernels, GeluMatchesFormulaAndFiniteDifferences) {
    const size_t n = 64;
    auto x = randn(n, 19, 3.0), w = randn(n, 20);
    std::vector<double> y(n);
    k::gelu_forward(y.data(), x.data(), n);
    for (size_t i = 0; i < n; i++) {
        double ref = 0.5 * x[i] * (1 + std::tanh(std::sqrt(2 / M_PI) * (x[i] + 0.044715 * std::pow(x[i], 3))));
        EXPECT_NEAR(y[i], ref, 1e-13);
    }
    auto loss = [&] {
        k::gelu_forward(y.data(), x.data(), n);
        return weighted_sum(y, w);
    };
    std::vector<double> dx(n, 7.0);   // overwritten, not added to
    k::gelu_backward(dx.data(), x.data(), w.data(), n);
    expect_gradient_matches(dx, finite_difference(x, loss), "gelu dinp");
}

TEST(CpuKernels, ResidualForwardAdds) {
    std::vector<float> a = {1, 2, -3}, b = {0.5f, -2, 4}, out(3);
    k::residual_forward(out.data(), a.data(), b.data(), 3);
    EXPECT_EQ(out, (std::vector<float>{1.5f, 0, 1}));
}

TEST(CpuKernels, FusedClassifierLossAndGradient) {
    const int N = 3, V = 5, Vp = 8;
    auto logits = randn(N * Vp, 21, 2.0);
    std::vector<int32_t> targets = {0, 4, 2};
    const double dloss = 0.25;
    std::vector<double> losses(N);
    // the loss ignores the padding columns whatever they hold
    for (int i = 0; i < N; i++)
        logits[i * Vp + V] = 1e6;
    k::fused_classifier<double>(nullptr, losses.data(), logits.data(), targets.data(), N, V, Vp, dloss);
    for (int i = 0; i < N; i++) {
        double z = 0;
        for (int c = 0; c < V; c++)
            z += std::exp(logits[i * Vp + c]);
        EXPECT_NEAR(losses[i], std::log(z) - logits[i * Vp + targets[i]], 1e-12);
    }
    auto loss = [&] {
        k::fused_classifier<double>(nullptr, losses.data(), logits.data(), targets.data(), N, V, Vp, dloss);
        return dloss * (losses[0] + losses[1] + losses[2]);
    };
    auto numeric = finite_difference(logits, loss);
    std::vector<double> dlogits = logits;   // in place, as the model uses it
    k::fused_classifier(dlogits.data(), losses.data(), dlogits.data(), targets.data(), N, V, Vp, dloss);
    expect_gradient_matches(dlogits, numeric, "dlogits");
    for (int i = 0; i < N; i++) {
        for (int c = V; c < Vp; c++)
            EXPECT_EQ(dlogits[i * Vp + c], 0.0) << "padding column " << c;
    }
}

TEST(CpuKernels, FusedClassifierIsStableForHugeLogits) {
    std::vector<float> logits = {1000.f, 999.f, -1000.f, 0.f}, losses(1);
    std::vector<int32_t> target = {1};
    k::fused_classifier<float>(nullptr, losses.data(), logits.data(), target.data(), 1, 3, 4, 1.0f);
    EXPECT_NEAR(losses[0], 1.0 + std::log1p(std::exp(-1.0)), 1e-5);   // −log softmax, no overflow
}

TEST(CpuKernels, SumSquares) {
    std::vector<float> g = {3, -4, 0, 12};
    EXPECT_EQ(k::sum_squares(g.data(), g.size()), 169.0);
}

TEST(CpuKernels, AdamWMatchesTheUpdateRule) {
    // three steps of AdamW on four values, against the textbook formulas written out in double
    std::vector<float> p = {0.5f, -1.0f, 2.0f, 0.0f}, m(4, 0.0f), v(4, 0.0f);
    std::vector<double> pr(p.begin(), p.end()), mr(4, 0.0), vr(4, 0.0);
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, scale = 0.5f;
    for (int t = 1; t <= 3; t++) {
        std::vector<float> g = {0.1f * t, -0.2f, 0.0f, 3.0f / t};
        k::adamw_update<float>(nullptr, p.data(), m.data(), v.data(), g.data(), 4, lr, b1, b2, eps, wd, scale, t);
        for (int i = 0; i < 4; i++) {
            double gi = (double)g[i] * scale;
            mr[i] = b1 * mr[i] + (1 - b1) * gi;
            vr[i] = b2 * vr[i] + (1 - b2) * gi * gi;
            double mhat = mr[i] / (1 - std::pow((double)b1, t)), vhat = vr[i] / (1 - std::pow((double)b2, t));
            pr[i] = pr[i] - lr * (mhat / (std::sqrt(vhat) + eps) + wd * pr[i]);
        }
    }
    // fp32 state: each of the 3 steps rounds the weight once (one ulp, 2u·|p|) and moves it by an
    // update of ≤ lr computed in FP32 (a few roundings of u each, well inside 2u·lr)
    for (int i = 0; i < 4; i++)
        EXPECT_NEAR(p[i], pr[i], 3 * 2 * 0x1p-24 * (std::fabs(pr[i]) + lr)) << i;
}

// The fused ops of the CPU kernel set are their parts in sequence, exactly (the CUDA fused kernels
// are held to these): residual + layernorm, GELU backward + the sums of its output, and the column
// sums themselves against a direct double sum.
TEST(CpuKernels, FusedOpsAreTheirPartsInSequence) {
    const int N = 7, C = 12;
    auto a = randn(N * C, 30), b = randn(N * C, 31), weight = randn(C, 32), bias = randn(C, 33);
    std::vector<double> res(N * C), out(N * C), mean(N), rstd(N);
    k::residual_layernorm_forward(res.data(), out.data(), mean.data(), rstd.data(), a.data(), b.data(), weight.data(),
                                  bias.data(), N, C);
    std::vector<double> res2(N * C), out2(N * C), mean2(N), rstd2(N);
    k::residual_forward(res2.data(), a.data(), b.data(), (size_t)N * C);
    k::layernorm_forward(out2.data(), mean2.data(), rstd2.data(), res2.data(), weight.data(), bias.data(), N, C);
    EXPECT_EQ(res, res2);
    EXPECT_EQ(out, out2);
    EXPECT_EQ(mean, mean2);
    EXPECT_EQ(rstd, rstd2);

    auto x = randn(N * C, 34, 2.0), dy = randn(N * C, 35);
    std::vector<double> dx(N * C, 9.0), sums(C, 0.25), dx2(N * C), sums2(C, 0.25);
    k::gelu_backward_bias(dx.data(), sums.data(), x.data(), dy.data(), N, C);
    k::gelu_backward(dx2.data(), x.data(), dy.data(), (size_t)N * C);
    k::add_column_sums(sums2.data(), dx2.data(), N, C);
    EXPECT_EQ(dx, dx2);
    EXPECT_EQ(sums, sums2);
    for (int c = 0; c < C; c++) {
        double direct = 0.25;
        for (int i = 0; i < N; i++)
            direct += dx2[i * C + c];
        EXPECT_NEAR(sums2[c], direct, 1e-12);
    }
}
