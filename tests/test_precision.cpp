// test_precision.cpp — the mixed-precision recipe on the CPU twin:
//   * the recipe's claims, each as a test (FP32 masters keep sub-ulp updates; loss scaling keeps
//     gradients below fp16's smallest subnormal; an inf gradient skips the step, halves the loss
//     scale, and training continues);
//   * the FP8 kernels against their definition;
//   * each precision's loss and gradients against the fp32 model, within tolerances derived
//     from the formats (see ModesMatchFp32WithinFormatTolerances).
#include "cpu/fp8_kernels.h"
#include "cpu/kernels.h"
#include "precision/fp8_autotune.h"
#include "model/gpt.h"
#include "rng.h"
#include "data/shard.h"
#include "model_test_util.h"
#include "tests/tolerances.h"
#include "data/tokenizer.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <sstream>

using namespace train_gpt;
using namespace train_gpt::test;
namespace k = train_gpt::cpu;

TEST(Precision, SubUlpUpdateIsLostOnBf16WeightsButKeptByFp32Master) {
    // bf16 has 8 significant bits: at 1.0 its ulp is 2^-7, so an update of lr = 1e-3 per step
    // (Adam's step is ≈ lr·sign(g)) is below half an ulp (3.9e-3) and rounds away every time.
    const float lr = 1e-3f;
    std::vector<bf16> working_only(1, bf16::from_float(1.0f)), working(1, bf16::from_float(1.0f));
    std::vector<float> master(1, 1.0f), m1(1, 0), v1(1, 0), m2(1, 0), v2(1, 0), grad(1, 0.5f);
    for (int t = 1; t <= 10; t++) {
        k::adamw_update<bf16>(nullptr, working_only.data(), m1.data(), v1.data(), grad.data(), 1, lr, 0.9f, 0.95f,
                              1e-8f, 0.0f, 1.0f, t);
        k::adamw_update<bf16>(master.data(), working.data(), m2.data(), v2.data(), grad.data(), 1, lr, 0.9f, 0.95f,
                              1e-8f, 0.0f, 1.0f, t);
    }
    EXPECT_EQ(working_only[0].to_float(), 1.0f) << "ten updates of 1e-3 were all lost in bf16";
    EXPECT_NEAR(master[0], 1.0f - 10 * lr, 1e-5f) << "the FP32 master kept every update";
    EXPECT_EQ(working[0].bits, bf16::from_float(master[0]).bits) << "working weights = round(master)";
    EXPECT_LT(working[0].to_float(), 1.0f);
}

TEST(Precision, LossScalingKeepsGradientsBelowFp16SmallestSubnormal) {
    // fp16's smallest subnormal is 2^-24 ≈ 6e-8. With dloss = 1e-8 every dlogit |p − y|·dloss is
    // below half of it and the fp16 store flushes it to zero; scaled by S = 2^16 it is ~6.6e-4,
    // comfortably representable, and after the FP32 weight gradient is unscaled it matches fp32.
    const int N = 4, V = 6, Vp = 8, C = 3;
    Rng rng(3);
    std::vector<float> logits32(N * Vp), inp32(N * C);
    for (float& x : logits32)
        x = (float)rng.normal();
    for (float& x : inp32)
        x = (float)rng.normal();
    std::vector<fp16> logits16(N * Vp), inp16(N * C);
    for (int i = 0; i < N * Vp; i++)
        logits16[i] = fp16::from_float(logits32[i]);
    for (int i = 0; i < N * C; i++)
        inp16[i] = fp16::from_float(inp32[i]);
    std::vector<int32_t> targets = {0, 5, 2, 3};
    const float dloss = 1e-8f, S = 65536.0f;
    std::vector<float> losses(N);

    auto weight_gradient = [&](float scale) {   // dW (Vp, C) of the LM head, unscaled, FP32
        std::vector<fp16> dlogits(N * Vp), dinp(N * C), weight(Vp * C, fp16::from_float(0.1f));
        k::fused_classifier<fp16>(dlogits.data(), losses.data(), logits16.data(), targets.data(), N, V, Vp,
                                  dloss * scale);
        std::vector<float> dweight(Vp * C, 0.0f);
        k::matmul_backward<fp16>(dinp.data(), dweight.data(), nullptr, dlogits.data(), inp16.data(), weight.data(), N,
                                 C, Vp);
        for (float& g : dweight)
            g /= scale;
        return dweight;
    };
    std::vector<float> unscaled = weight_gradient(1.0f), scaled = weight_gradient(S);
    // the fp32 reference: same maths in float
    std::vector<float> dlogits_ref(N * Vp), dinp_ref(N * C), weight_ref(Vp * C, fp16::from_float(0.1f).to_float());
    std::vector<float> logits_ref(N * Vp), inp_ref(N * C), dweight_ref(Vp * C, 0.0f);
    for (int i = 0; i < N * Vp; i++)
        logits_ref[i] = logits16[i].to_float();
    for (int i = 0; i < N * C; i++)
        inp_ref[i] = inp16[i].to_float();
    k::fused_classifier<float>(dlogits_ref.data(), losses.data(), logits_ref.data(), targets.data(), N, V, Vp, dloss);
    k::matmul_backward<float>(dinp_ref.data(), dweight_ref.data(), nullptr, dlogits_ref.data(), inp_ref.data(),
                              weight_ref.data(), N, C, Vp);

    double ref_norm = 0, unscaled_norm = 0;
    for (int i = 0; i < Vp * C; i++) {
        ref_norm += dweight_ref[i] * dweight_ref[i];
        unscaled_norm += unscaled[i] * unscaled[i];
    }
    ASSERT_GT(ref_norm, 0.0);
    EXPECT_EQ(unscaled_norm, 0.0) << "without loss scaling every fp16 gradient flushed to zero";
    // with loss scaling: fp16 rounding of the dlogits (u = 2^-11 each) is the only error besides
    // FP32's in the N-term sum (S is a power of two: scaling and unscaling are exact), so each
    // element is within (u(fp16) + γ_N)·Σ|terms| of the reference
    for (int v = 0; v < Vp; v++) {
        for (int c = 0; c < C; c++) {
            double terms = 0;
            for (int i = 0; i < N; i++)
                terms += std::fabs((double)dlogits_ref[i * Vp + v] * inp_ref[i * C + c]);
            const double bound = (kUnitRoundoffFp16 + (N + 1) * kUnitRoundoffFp32) * terms;
            EXPECT_LE(std::fabs(scaled[v * C + c] - dweight_ref[v * C + c]), bound) << v << ", " << c;
        }
    }
}

namespace {
struct TinyRun {
    ScratchDir dir;
    TinyRun() {
        std::string text;
        for (int i = 0; i < 200; i++)
            text += "And God said, Let there be light. ";
        std::vector<uint32_t> tokens(text.begin(), text.end());
        write_shard(dir.file("train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
        Tokenizer::byte_level().save(dir.file("tokenizer.bin"));
    }
    std::string command(const std::string& extra) const {
        return train_gpt_binary() + " -i '" + dir.file("train_*.bin") + "' -j '' --tokenizer '" +
               dir.file("tokenizer.bin") + "' -e d2 --n-embd 32 -b 2 -t 16 -g 0 -o '" + dir.file("out") + "' " + extra;
    }
};
}   // namespace

TEST(Precision, InjectedInfGradientSkipsTheStepHalvesTheLossScaleAndTrainingContinues) {
    TinyRun run;
    std::string output;
    ASSERT_EQ(run_command(run.command("-p fp16 -x 6 --inject-nonfinite-step 2"), &output), 0) << output;
    EXPECT_CONTAINS(output, "SKIPPED");
    auto steps = log_records(run.dir.file("out/log.jsonl"), "step");
    ASSERT_EQ(steps.size(), 6u);
    for (int i = 0; i < 6; i++) {
        EXPECT_EQ(steps[i]["skipped"].get<int>(), i == 2 ? 1 : 0) << "step " << i + 1;
        EXPECT_TRUE(steps[i]["loss"].is_number()) << "every loss stays finite";
    }
    EXPECT_EQ(steps[2]["loss_scale"].get<double>(), 65536.0);
    EXPECT_EQ(steps[3]["loss_scale"].get<double>(), 32768.0) << "the overflow halved the loss scale";
    EXPECT_EQ(steps[5]["loss_scale"].get<double>(), 32768.0);
    EXPECT_LT(steps[5]["loss"].get<double>(), steps[0]["loss"].get<double>()) << "training went on";
}

TEST(Precision, TooManyNonFiniteStepsInARowStopTheRun) {
    TinyRun run;
    std::string output;
    int rc = run_command(run.command("-x 20 --lr 1e30 --warmup-steps 0 --grad-clip 0 --max-skipped-steps 3"), &output);
    EXPECT_NE(rc, 0) << output;
    EXPECT_CONTAINS(output, "3 steps in a row had a non-finite loss or gradient norm");
}

TEST(Fp8Kernels, QuantizeCountsSaturationAndFlushes) {
    // scale 2: 300·2 = 600 > 448 saturates; 1e-4·2 = 2e-4 < 2^-10 (half the smallest E4M3
    // subnormal 2^-9) flushes to zero; NaN stays NaN
    std::vector<float> x = {1.0f, -300.0f, 1e-4f, 0.0f, NAN, 3.0f};
    std::vector<fp8e4m3> q(x.size());
    Fp8CastStats s = k::quantize_fp8(q.data(), x.data(), x.size(), 2.0f);
    EXPECT_TRUE(std::isnan(s.amax)) << "a NaN input makes the amax NaN";
    EXPECT_EQ(s.saturated, 1u);
    EXPECT_EQ(s.flushed, 1u);
    EXPECT_EQ(s.nan, 1u);
    EXPECT_EQ(q[0].to_float(), 2.0f);
    EXPECT_EQ(q[1].to_float(), -448.0f);
    EXPECT_EQ(q[2].to_float(), 0.0f);
    EXPECT_EQ(q[5].to_float(), 6.0f);
    EXPECT_EQ(k::amax(x.data(), 4), 300.0f);
}

// One cast, two layouts: q is quantize_fp8's, qt its transpose, the statistics counted once.
TEST(Fp8Kernels, CastWithTransposeWritesBothLayoutsOfOneCast) {
    const int rows = 7, cols = 5;
    Rng rng(3);
    std::vector<float> x(rows * cols);
    for (float& v : x)
        v = (float)(300.0 * rng.normal());
    x[4] = NAN;
    std::vector<fp8e4m3> q_ref(x.size()), q(x.size()), qt(x.size()), qt_only(x.size());
    const Fp8CastStats ref = k::quantize_fp8(q_ref.data(), x.data(), x.size(), 0.5f);
    const Fp8CastStats both = k::quantize_transpose_fp8(q.data(), qt.data(), x.data(), rows, cols, 0.5f);
    const Fp8CastStats only =
        k::quantize_transpose_fp8<float, fp8e4m3>(nullptr, qt_only.data(), x.data(), rows, cols, 0.5f);
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) {
            EXPECT_EQ(q[r * cols + c].bits, q_ref[r * cols + c].bits);
            EXPECT_EQ(qt[c * rows + r].bits, q_ref[r * cols + c].bits);
            EXPECT_EQ(qt_only[c * rows + r].bits, q_ref[r * cols + c].bits);
        }
    }
    for (const Fp8CastStats& s : {both, only}) {
        EXPECT_TRUE(std::isnan(s.amax));
        EXPECT_EQ(s.count, ref.count);
        EXPECT_EQ(s.saturated, ref.saturated);
        EXPECT_EQ(s.flushed, ref.flushed);
        EXPECT_EQ(s.nan, 1u);
    }
}

// The casts fused into their producers cast what the producer would have stored in bf16: the
// value rounded to bf16 first (a fused cast of the unrounded FP32 value would differ wherever that
// rounding moves a value across an FP8 rounding boundary). With no output, the statistics alone.
TEST(Fp8Kernels, FusedCastsCastTheProducersRoundedOutput) {
    const int rows = 37, cols = 24;   // any shape: the CPU twin has no tiles
    const size_t n = (size_t)rows * cols;
    Rng rng(11);
    std::vector<bf16> x(n), w(cols), b(cols), dout(n), dinp(n);
    for (bf16& v : x)
        v = bf16::from_float((float)(2.0 * rng.normal()));
    for (bf16& v : w)
        v = bf16::from_float((float)(1.0 + 0.3 * rng.normal()));
    for (bf16& v : b)
        v = bf16::from_float((float)(0.2 * rng.normal()));
    for (bf16& v : dout)
        v = bf16::from_float((float)(1e-3 * rng.normal()));
    for (bf16& v : dinp)
        v = bf16::from_float((float)(1e-3 * rng.normal()));
    auto cast_of = [&](const std::vector<float>& values, float scale) {   // bf16-rounded values, then the cast
        std::vector<fp8e4m3> q(n);
        for (size_t i = 0; i < n; i++)
            q[i] = fp8e4m3::from_float(bf16::from_float(values[i]).to_float() * scale);
        return q;
    };
    auto expect_cast = [&](const std::vector<fp8e4m3>& q, const std::vector<fp8e4m3>& qt,
                           const std::vector<fp8e4m3>& ref, const char* what) {
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                ASSERT_EQ(q[r * cols + c].bits, ref[r * cols + c].bits) << what << " q at " << r << "," << c;
                ASSERT_EQ(qt[c * rows + r].bits, ref[r * cols + c].bits) << what << " qt at " << r << "," << c;
            }
        }
    };
    const float scale = 448.0f / 8.0f;
    {   // GELU forward
        std::vector<float> y(n);
        for (size_t i = 0; i < n; i++) {
            const float v = x[i].to_float();
            y[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        }
        std::vector<fp8e4m3> q(n), qt(n);
        const Fp8CastStats s = k::gelu_forward_fp8(q.data(), qt.data(), x.data(), rows, cols, scale);
        expect_cast(q, qt, cast_of(y, scale), "gelu");
        const Fp8CastStats only = k::gelu_forward_fp8<bf16, fp8e4m3>(nullptr, nullptr, x.data(), rows, cols, scale);
        EXPECT_EQ(only.amax, s.amax);
        EXPECT_EQ(only.count, n);
        EXPECT_EQ(only.saturated, s.saturated);
    }
    {   // layernorm forward: mean and rstd written as layernorm_forward writes them
        std::vector<bf16> y(n);
        std::vector<float> mean(rows), rstd(rows), mean_f(rows), rstd_f(rows), yf(n);
        k::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, cols);
        for (size_t i = 0; i < n; i++)
            yf[i] = y[i].to_float();
        std::vector<fp8e4m3> q(n), qt(n);
        k::layernorm_forward_fp8(q.data(), qt.data(), mean_f.data(), rstd_f.data(), x.data(), w.data(), b.data(), rows,
                                 cols, scale);
        expect_cast(q, qt, cast_of(yf, scale), "layernorm");
        EXPECT_EQ(mean_f, mean);
        EXPECT_EQ(rstd_f, rstd);
    }
    {   // GELU backward: dinp = gelu'(x)·dout (kept in bf16), and its E5M2 cast
        std::vector<bf16> ref = dinp;
        k::gelu_backward(ref.data(), x.data(), dout.data(), n);
        std::vector<fp8e5m2> q(n), qt(n);
        const float s5 = 57344.0f / 0.01f;
        k::gelu_backward_fp8(dinp.data(), q.data(), qt.data(), x.data(), dout.data(), rows, cols, s5);
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                const size_t i = (size_t)r * cols + c;
                ASSERT_EQ(dinp[i].bits, ref[i].bits);
                ASSERT_EQ(q[i].bits, fp8e5m2::from_float(ref[i].to_float() * s5).bits);
                ASSERT_EQ(qt[(size_t)c * rows + r].bits, q[i].bits);
            }
        }
    }
    {   // layernorm backward: dinp +=, the parameter gradients and the sums of the new dinp as
        // layernorm_backward leaves them, then the E5M2 cast of the new dinp
        std::vector<float> mean(rows), rstd(rows);
        std::vector<bf16> y(n);
        k::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, cols);
        std::vector<bf16> start(n), ref(n);
        for (bf16& d : start)
            d = bf16::from_float((float)(1e-3 * rng.normal()));
        ref = start;
        std::vector<float> dw_ref(cols, 0.5f), db_ref(cols, -0.5f), sums_ref(cols, 0.25f);
        std::vector<float> dw = dw_ref, db = db_ref, sums = sums_ref;
        k::layernorm_backward(ref.data(), dw_ref.data(), db_ref.data(), dout.data(), x.data(), w.data(), mean.data(),
                              rstd.data(), rows, cols, sums_ref.data());
        std::vector<fp8e5m2> q(n), qt(n);
        const float s5 = 57344.0f / 0.01f;
        k::layernorm_backward_fp8(start.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                                  rstd.data(), rows, cols, sums.data(), q.data(), qt.data(), s5);
        EXPECT_EQ(dw, dw_ref);
        EXPECT_EQ(db, db_ref);
        EXPECT_EQ(sums, sums_ref);
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                const size_t i = (size_t)r * cols + c;
                ASSERT_EQ(start[i].bits, ref[i].bits);
                ASSERT_EQ(q[i].bits, fp8e5m2::from_float(ref[i].to_float() * s5).bits);
                ASSERT_EQ(qt[(size_t)c * rows + r].bits, q[i].bits);
            }
        }
    }
    {   // AdamW: the update as adamw_update, then the E4M3 cast of the new bf16 working weights
        std::vector<float> master(n), m(n, 1e-4f), v(n, 1e-6f), grads(n);
        for (float& p : master)
            p = (float)(0.02 * rng.normal());
        for (float& gr : grads)
            gr = (float)(1e-2 * rng.normal());
        std::vector<bf16> working(n);
        for (size_t i = 0; i < n; i++)
            working[i] = bf16::from_float(master[i]);
        std::vector<float> master_ref = master, m_ref = m, v_ref = v;
        std::vector<bf16> working_ref = working;
        k::adamw_update(master_ref.data(), working_ref.data(), m_ref.data(), v_ref.data(), grads.data(), n, 1e-3f, 0.9f,
                        0.95f, 1e-8f, 0.1f, 1.0f, 3);
        std::vector<fp8e4m3> q(n), qt(n);
        const float sw = 448.0f / 0.1f;
        k::adamw_update_fp8(master.data(), working.data(), m.data(), v.data(), grads.data(), rows, cols, 1e-3f, 0.9f,
                            0.95f, 1e-8f, 0.1f, 1.0f, 3, q.data(), qt.data(), sw);
        EXPECT_EQ(master, master_ref);
        EXPECT_EQ(m, m_ref);
        EXPECT_EQ(v, v_ref);
        std::vector<float> w_ref(n);
        for (size_t i = 0; i < n; i++) {
            ASSERT_EQ(working[i].bits, working_ref[i].bits);
            w_ref[i] = working_ref[i].to_float();
        }
        expect_cast(q, qt, cast_of(w_ref, sw), "adamw");
    }
}

TEST(Fp8Kernels, GemmsAreScaledFp8ProductsAccumulatedInFp32) {
    const int N = 5, C = 16, OC = 3;
    Rng rng(9);
    auto rand_q = [&](auto* q, size_t n, float range) {
        for (size_t i = 0; i < n; i++)
            q[i] = std::remove_pointer_t<decltype(q)>::from_float((float)(range * rng.normal()));
    };
    std::vector<fp8e4m3> xq(N * C), wq(OC * C);
    std::vector<fp8e5m2> dyq(N * OC);
    rand_q(xq.data(), xq.size(), 50.0f);
    rand_q(wq.data(), wq.size(), 100.0f);
    rand_q(dyq.data(), dyq.size(), 1000.0f);
    std::vector<float> bias = {0.5f, -1.0f, 2.0f}, dy(N * OC);
    for (int i = 0; i < N * OC; i++)
        dy[i] = dyq[i].to_float() / 64.0f;
    const float sx = 8.0f, sw = 16.0f, sdy = 64.0f;   // powers of two: every rescaling is exact

    std::vector<float> out(N * OC);
    k::matmul_forward_fp8<float>(out.data(), xq.data(), 1 / sx, wq.data(), 1 / sw, bias.data(), N, C, OC);
    std::vector<float> dinp(N * C, 0.0f), dweight(OC * C, 0.0f), dbias(OC, 0.0f);
    // the backward reads the transposed copies dYᵀ (OC,N), Xᵀ (C,N), Wᵀ (C,OC)
    auto transposed = [](const auto& a, int rows, int cols) {
        std::remove_const_t<std::remove_reference_t<decltype(a)>> t(a.size());
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++)
                t[(size_t)c * rows + r] = a[(size_t)r * cols + c];
        }
        return t;
    };
    const std::vector<fp8e5m2> dyqt = transposed(dyq, N, OC);
    const std::vector<fp8e4m3> xqt = transposed(xq, N, C), wqt = transposed(wq, OC, C);
    k::matmul_backward_fp8<float>(dinp.data(), dweight.data(), dbias.data(), dyq.data(), dyqt.data(), 1 / sdy,
                                  dy.data(), xqt.data(), 1 / sx, wqt.data(), 1 / sw, N, C, OC);
    // The products of two FP8 values are exact in FP32 (at most 4 + 4 significant bits), and so is
    // every rescaling by a power of two: the only error is FP32's in a K-term sum, at most
    // γ_K ≈ K·u of Σ|terms| (K + 1 with the bias's add, or the dequantising multiply).
    const double u = kUnitRoundoffFp32;
    // Σ_k term(k) in double, with Σ_k |term(k)|
    auto sum_of = [](int n, auto term) {
        double sum = 0, abs_sum = 0;
        for (int k = 0; k < n; k++) {
            const double t = term(k);
            sum += t;
            abs_sum += std::fabs(t);
        }
        return std::pair{sum, abs_sum};
    };
    for (int i = 0; i < N; i++) {
        for (int o = 0; o < OC; o++) {
            const auto [ref, terms] = sum_of(
                C, [&](int c) { return (double)xq[i * C + c].to_float() * wq[o * C + c].to_float() / (sx * sw); });
            EXPECT_NEAR(out[i * OC + o], ref + bias[o], (C + 1) * u * (terms + std::fabs(bias[o])));
        }
    }
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++) {
            const auto [ref, terms] = sum_of(
                OC, [&](int o) { return (double)dyq[i * OC + o].to_float() * wq[o * C + c].to_float() / (sdy * sw); });
            EXPECT_NEAR(dinp[i * C + c], ref, (OC + 1) * u * terms);
        }
    }
    for (int o = 0; o < OC; o++) {
        const auto [db, db_terms] = sum_of(N, [&](int i) { return (double)dy[i * OC + o]; });
        EXPECT_NEAR(dbias[o], db, (N + 1) * u * db_terms);
        for (int c = 0; c < C; c++) {
            const auto [ref, terms] = sum_of(
                N, [&](int i) { return (double)dyq[i * OC + o].to_float() * xq[i * C + c].to_float() / (sdy * sx); });
            EXPECT_NEAR(dweight[o * C + c], ref, (N + 1) * u * terms);
        }
    }
}

namespace {
struct ModeResult {
    float loss;
    std::vector<float> grads;
};

ModeResult run_mode(Precision p, const GPTConfig& cfg, const std::vector<float>& weights,
                    const std::vector<int32_t>& tokens, int B, int T, Fp8Recipe recipe = Fp8Recipe::Delayed,
                    bool gemm_epilogues = false) {
    PrecisionConfig pc;
    pc.precision = p;
    pc.fp8.recipe = recipe;
    auto backend = make_cpu_backend(activation_dtype(p), p == Precision::TF32);
    GPT model(cfg, *backend, B, T, pc, nullptr, 0, 0, 1, gemm_epilogues);
    model.set_weights(weights);
    model.zero_grad();
    // fp16 runs with a loss scale, as in training: 1/(B·T) alone would flush small dlogits
    const float S = p == Precision::FP16 ? 1024.0f : 1.0f;
    ModeResult r;
    r.loss = model.forward(tokens.data(), tokens.data() + B * T, B, T, S / (B * T));
    model.backward();
    r.grads = model.gradients();
    for (float& g : r.grads)
        g /= S;
    return r;
}
}   // namespace

// Tolerances, from the formats' unit roundoff u (tests/tolerances.h: bf16 2^-8, fp16 2^-11, E4M3
// 2^-4, E5M2 2^-3), for one forward and backward of a 2-layer model against fp32's:
//   loss ≤ u of the forward's storage format: each token's loss is a log-sum-exp of logits that
//     carry a relative error of ~u each (the last rounding dominates), which moves the loss by
//     ~u·|logit| ≤ u·loss for logits of the loss's size; the mean over B·T = 128 tokens averages
//     their independent errors down by √128, so u holds with that much room;
//   gradients ≤ √n·u per tensor (bf16, fp16), n = 6L + 4 = 16: a parameter gradient is a product
//     chain through ~6 rounded tensors per layer and 4 in the head, each adding a relative error
//     of up to u; independent errors add in quadrature (the chain rule of tests/tolerances.h);
//   --gemm-epilogues in bf16, fp16: the same bounds, since they round the GELU output and fc's
//     output gradient once instead of twice (one rounding fewer in the chain, never one more);
//   fp8 gradients ≤ 2.4·u(E5M2) = 0.3: the backward GEMMs read dY in E5M2, whose rounding
//     dominates (u(E5M2) = 32 u(bf16)); one E5M2 operand per GEMM, through the chain of a block's
//     ~6 GEMM-and-cast steps in quadrature, √6·u(E5M2) ≈ 2.4·u(E5M2).
TEST(Precision, ModesMatchFp32WithinFormatTolerances) {
    const int B = 4, T = 32;
    GPTConfig cfg = gpt_config_from_spec("d2", 100, T, 64, 2);
    auto backend = make_cpu_backend(DType::F32);
    GPT init(cfg, *backend, B, T);
    init.init_weights(5);
    std::vector<float> weights = init.weights();
    Rng rng(6);
    std::vector<int32_t> tokens(2 * B * T);
    for (int32_t& t : tokens)
        t = (int32_t)rng.below(cfg.vocab_size);
    // The losses are compared on larger weights than the initialisation's: a fresh model's logits
    // are ~0 and its loss ln(V) whatever its blocks compute, which no loss comparison could tell
    // from an error. The gradients are compared on the fresh weights, where every op of the chain
    // is well-conditioned (the chain rule's assumption; with these larger weights the GEMMs
    // amplify relative differences by ~3).
    std::vector<float> peaked = weights;
    for (float& w : peaked)
        w += 0.2f * (float)rng.normal();

    ModeResult ref = run_mode(Precision::FP32, cfg, weights, tokens, B, T);
    const ModeResult ref_peaked = run_mode(Precision::FP32, cfg, peaked, tokens, B, T);
    ASSERT_GT(std::fabs(ref_peaked.loss - std::log((double)cfg.vocab_size)), 0.1 * ref_peaked.loss)
        << "the loss must depend on the weights, not sit at ln(V)";
    struct Case {
        Precision p;
        Fp8Recipe recipe;
        double loss_tol, grad_tol;
        bool gemm_epilogues = false;
    };
    const double chain = std::sqrt(6.0 * cfg.n_layer + 4);
    const double u_bf16 = kUnitRoundoffBf16, u_fp16 = kUnitRoundoffFp16;
    const double u_e4m3 = kUnitRoundoffE4M3, u_e5m2 = kUnitRoundoffE5M2;
    const Case cases[] = {
        {Precision::BF16, Fp8Recipe::Delayed, u_bf16, chain * u_bf16},
        {Precision::FP16, Fp8Recipe::Delayed, u_fp16, chain * u_fp16},
        {Precision::BF16, Fp8Recipe::Delayed, u_bf16, chain * u_bf16, true},
        {Precision::FP16, Fp8Recipe::Delayed, u_fp16, chain * u_fp16, true},
        // tf32 rounds only the GEMM operands, to fp16's u, and stores fp32: within fp16's bounds
        {Precision::TF32, Fp8Recipe::Delayed, kUnitRoundoffTf32, chain * kUnitRoundoffTf32},
        {Precision::FP8, Fp8Recipe::Delayed, u_e4m3, std::sqrt(6.0) * u_e5m2},
        {Precision::FP8, Fp8Recipe::Current, u_e4m3, std::sqrt(6.0) * u_e5m2},
    };
    auto sizes = param_tensor_sizes(cfg);
    for (const Case& c : cases) {
        ModeResult r = run_mode(c.p, cfg, weights, tokens, B, T, c.recipe, c.gemm_epilogues);
        const ModeResult r_peaked = run_mode(c.p, cfg, peaked, tokens, B, T, c.recipe, c.gemm_epilogues);
        const double loss_err = std::fabs(r_peaked.loss - ref_peaked.loss) / ref_peaked.loss;
        EXPECT_LT(loss_err, c.loss_tol) << precision_name(c.p);
        double worst = 0;
        size_t offset = 0;
        for (int i = 0; i < kNumParamTensors; i++) {
            double err = max_rel_error(r.grads.data() + offset, ref.grads.data() + offset, sizes[i]);
            EXPECT_LT(err, c.grad_tol) << precision_name(c.p) << " gradient of " << param_tensor_name(i);
            worst = std::max(worst, err);
            offset += sizes[i];
        }
        std::printf("%s%s vs fp32: loss %.2e (bound %.1e), worst gradient tensor %.2e (bound %.1e)\n",
                    precision_name(c.p),
                    c.p == Precision::FP8 ? (c.recipe == Fp8Recipe::Current ? " current" : " delayed")
                    : c.gemm_epilogues    ? " --gemm-epilogues"
                                          : "",
                    loss_err, c.loss_tol, worst, c.grad_tol);
    }
}

// -p tf32 through the binary: it trains (the loss falls), keeps no master copy (fp32 storage),
// says so in config.json, and its losses are fp32's to within tf32's u (the steps' losses are
// compared, not equal: the GEMM operands are rounded).
TEST(Precision, Tf32TrainsNextToFp32) {
    TinyRun run;
    std::string output;
    ASSERT_EQ(run_command(run.command("-p tf32 -x 6 --device cpu"), &output), 0) << output;
    const auto tf32 = log_records(run.dir.file("out/log.jsonl"), "step");
    const auto config = nlohmann::json::parse(read_text(run.dir.file("out/config.json")));
    EXPECT_EQ(config["precision"], "tf32");
    TinyRun ref;
    ASSERT_EQ(run_command(ref.command("-p fp32 -x 6 --device cpu"), &output), 0) << output;
    const auto fp32 = log_records(ref.dir.file("out/log.jsonl"), "step");
    ASSERT_EQ(tf32.size(), 6u);
    ASSERT_EQ(fp32.size(), 6u);
    EXPECT_LT(tf32.back()["loss"].get<double>(), tf32.front()["loss"].get<double>());
    bool differs = false;
    for (size_t i = 0; i < 6; i++) {
        const double a = tf32[i]["loss"].get<double>(), b = fp32[i]["loss"].get<double>();
        EXPECT_LT(std::fabs(a - b) / b, 16 * kUnitRoundoffTf32) << "step " << i + 1;   // six steps of drift
        differs |= a != b;
    }
    EXPECT_TRUE(differs) << "tf32 computed exactly fp32's losses: its GEMM operands were not rounded";
}

TEST(Precision, Fp8TelemetryIsLoggedPerScaledTensor) {
    TinyRun run;
    std::string output;
    ASSERT_EQ(run_command(run.command("-p fp8 -x 4 --fp8-telemetry-every 2"), &output), 0) << output;
    auto records = log_records(run.dir.file("out/log.jsonl"), "fp8");
    // steps 1, 3 and the last (4): 2 layers × 4 GEMMs × 3 operands each
    ASSERT_EQ(records.size(), 3u * 2 * 4 * 3);
    std::set<std::string> names;
    for (const auto& r : records) {
        names.insert(r["tensor"].get<std::string>());
        EXPECT_GT(r["scale"].get<double>(), 0.0);
        EXPECT_GE(r["saturated"].get<double>(), 0.0);
        EXPECT_LE(r["flushed"].get<double>(), 1.0);
        EXPECT_GT(r["amax"].get<double>(), 0.0) << r.dump();
    }
    EXPECT_EQ(names.size(), 24u);
    EXPECT_TRUE(names.count("h0.qkv.x") && names.count("h1.fcproj.dy") && names.count("h1.attproj.w"));
}

// A checkpoint's FP8 state restored where the gradients are in other units (another number of
// ranks, -b, -t or accumulation: d(loss)/d(a token's loss) = 1 / a rank's tokens per step). Two
// runs that differ only in that unit, by 2 (an exact power of two: every gradient, amax and scale
// of the one is exactly 2x or 1/2x the other's, nothing else differs), end with the same X and W
// state and dY histories 2x apart; restoring one's state with the factor gives exactly the
// other's, scales included (the delayed rule on the rescaled amaxes). Factor 1 changes nothing.
TEST(Precision, Fp8StateRestoredInOtherGradientUnitsIsTheOtherRunsState) {
    const int B = 2, T = 16;
    const GPTConfig cfg = gpt_config_from_spec("d2", 300, T, 64, 2);
    const std::vector<float> init = initial_weights(cfg, B, T, 42);
    const std::vector<int32_t> tokens = random_tokens((size_t)2 * B * T + 1, cfg.vocab_size, 7);
    PrecisionConfig pc;
    pc.precision = Precision::FP8;
    auto backend = make_cpu_backend(activation_dtype(Precision::FP8));
    auto trained = [&](float unit) {   // two steps (the second on delayed scales), gradients × unit
        GPT model(cfg, *backend, B, T, pc);
        model.set_weights(init);
        for (int step = 0; step < 2; step++) {
            model.zero_grad();
            const int32_t* x = tokens.data() + (size_t)step * B * T;
            model.forward(x, x + 1, B, T, unit / (B * T));
            model.backward();
            model.update(1e-3f, AdamWConfig{}, 1.0f / unit, step + 1);   // the same update
        }
        return model.fp8_state_json();
    };
    const std::string one = trained(1.0f), two = trained(2.0f);
    const auto a = nlohmann::json::parse(one), b = nlohmann::json::parse(two);
    ASSERT_EQ(a.size(), b.size());
    for (size_t g = 0; g < a.size(); g++) {   // what the property rests on
        EXPECT_EQ(a[g]["x"], b[g]["x"]);
        EXPECT_EQ(a[g]["w"], b[g]["w"]);
        ASSERT_EQ(a[g]["dy"]["history"].size(), 2u);
        EXPECT_EQ(2.0f * a[g]["dy"]["history"][0].get<float>(), b[g]["dy"]["history"][0].get<float>()) << g;
    }
    GPT restored(cfg, *backend, B, T, pc);
    restored.restore_fp8_state(one, 2.0);
    EXPECT_EQ(restored.fp8_state_json(), two);
    restored.restore_fp8_state(two, 0.5);
    EXPECT_EQ(restored.fp8_state_json(), one);
    restored.restore_fp8_state(one);
    EXPECT_EQ(restored.fp8_state_json(), one);
}

// --fp8-gemms: only the named GEMMs run in FP8 (and are reported); a bad list is a usage error.
TEST(Precision, Fp8GemmsSelectsTheGemmsThatRunInFp8) {
    EXPECT_EQ(parse_fp8_gemms("all"), 0xFu);
    EXPECT_EQ(parse_fp8_gemms("qkv"), 0x1u);
    EXPECT_EQ(parse_fp8_gemms("fc,fcproj"), 0xCu);
    EXPECT_EQ(parse_fp8_gemms("fcproj,attproj"), 0xAu);
    EXPECT_EQ(fp8_gemms_name(0xFu), "all");
    EXPECT_EQ(fp8_gemms_name(0xCu), "fc,fcproj");
    EXPECT_EQ(parse_fp8_gemms("none"), 0u);
    EXPECT_EQ(fp8_gemms_name(0u), "none");
    for (const char* bad : {"", "qkv,", "mlp", "qkv,,fc"})
        EXPECT_THROW(parse_fp8_gemms(bad), Error) << bad;

    TinyRun run;
    std::string output;
    ASSERT_EQ(run_command(run.command("-p fp8 -x 2 --fp8-telemetry-every 1 --fp8-gemms fc,fcproj"), &output), 0)
        << output;
    auto records = log_records(run.dir.file("out/log.jsonl"), "fp8");
    ASSERT_EQ(records.size(), 2u * 2 * 2 * 3);   // steps 1, 2 × 2 layers × fc, fcproj × x, w, dy
    for (const auto& r : records) {
        const std::string name = r["tensor"].get<std::string>();
        EXPECT_TRUE(name.find(".fc.") != std::string::npos || name.find(".fcproj.") != std::string::npos) << name;
    }
    for (const auto& step : log_records(run.dir.file("out/log.jsonl"), "step")) {
        EXPECT_TRUE(std::isfinite(step["loss"].get<double>()));
    }
    EXPECT_NE(run_command(run.command("-p fp8 -x 1 --fp8-gemms mlp"), &output), 0);
    EXPECT_NE(output.find("--fp8-gemms"), std::string::npos) << output;
    EXPECT_NE(output.find("'mlp'"), std::string::npos) << output;
    // round 29: the flag named once (it was "--fp8-gemms: --fp8-gemms: ..."), all/none said to stand
    // alone, and spaces around a name are no part of it ("qkv, fc" was refused for ' fc')
    EXPECT_EQ(output.find("--fp8-gemms: --fp8-gemms"), std::string::npos) << output;
    EXPECT_NE(output.find("(all or none alone, or a comma list of"), std::string::npos) << output;
    EXPECT_EQ(run_command(run.command("-p fp8 -x 1 --fp8-gemms 'qkv, fc' --overwrite-output"), &output), 0) << output;
}

// --fp8-gemms auto: the timing runs every op of both paths on a kernel set (here the CPU's, where
// the trainer itself would not time: it emulates FP8), and the choice follows the timings. The
// trainer resolves auto before the model is built and records the list it chose; a resumed run
// takes the list its checkpoint recorded instead of timing again.
TEST(Precision, Fp8GemmsAutoTimesEveryGemmAndRecordsItsChoice) {
    auto backend = make_cpu_backend(DType::BF16);
    const GPTConfig cfg = gpt_config_from_spec("d2", 256, 16, 32, 2);
    const std::vector<Fp8GemmTiming> t = time_fp8_gemms(*backend, cfg, 2, 16, 2);
    ASSERT_EQ(t.size(), 4u);
    const char* names[] = {"qkv", "attproj", "fc", "fcproj"};
    const int c_in[] = {32, 32, 32, 128}, c_out[] = {96, 32, 128, 32};
    unsigned expected = 0;
    for (int g = 0; g < 4; g++) {
        EXPECT_EQ(t[g].name, names[g]);
        EXPECT_EQ(t[g].n, 32);
        EXPECT_EQ(t[g].c_in, c_in[g]);
        EXPECT_EQ(t[g].c_out, c_out[g]);
        EXPECT_GT(t[g].ms_16bit, 0.0);
        EXPECT_GT(t[g].ms_fp8, 0.0);
        EXPECT_EQ(t[g].fp8, t[g].ms_fp8 < t[g].ms_16bit);
        if (t[g].fp8) expected |= 1u << g;
    }
    EXPECT_EQ(fp8_gemms_from_timings(t), expected);

    TinyRun run;
    std::string output;
    ASSERT_EQ(run_command(run.command("-p fp8 -x 2 --checkpoint-every 2 --fp8-gemms auto"), &output), 0) << output;
    EXPECT_NE(output.find("fp8 GEMMs: auto → all (the CPU kernel set emulates FP8"), std::string::npos) << output;
    EXPECT_EQ(nlohmann::json::parse(read_text(run.dir.file("out/config.json")))["fp8_gemms"], "all");
    // a run trained with fc,fcproj, resumed with auto, keeps fc,fcproj
    TinyRun mlp;
    ASSERT_EQ(run_command(mlp.command("-p fp8 -x 2 --checkpoint-every 2 --fp8-gemms fc,fcproj"), &output), 0) << output;
    ASSERT_EQ(run_command(mlp.command("-p fp8 -x 4 --checkpoint-every 2 --fp8-gemms auto --resume"), &output), 0)
        << output;
    EXPECT_NE(output.find("fp8 GEMMs: auto → fc,fcproj (as the checkpoint trained)"), std::string::npos) << output;
    EXPECT_EQ(nlohmann::json::parse(read_text(mlp.dir.file("out/config.json")))["fp8_gemms"], "fc,fcproj");
    // a checkpoint from another precision records no list: auto chooses afresh, and the resume
    // itself is refused with the reason (no FP8 state to continue)
    TinyRun bf16;
    ASSERT_EQ(run_command(bf16.command("-p bf16 -x 2 --checkpoint-every 2"), &output), 0) << output;
    EXPECT_NE(run_command(bf16.command("-p fp8 -x 4 --checkpoint-every 2 --fp8-gemms auto --resume"), &output), 0);
    EXPECT_NE(output.find("fp8 GEMMs: auto → all (the CPU kernel set"), std::string::npos) << output;
    EXPECT_NE(output.find("holds no FP8 scaling state"), std::string::npos) << output;
    EXPECT_NE(run_command(run.command("-p fp8 -x 1 --fp8-gemms automatic"), &output), 0);
    EXPECT_NE(output.find("'automatic'"), std::string::npos) << output;
}

// In fp8 mode the 16-bit inputs of the FP8 GEMMs (ln1, ln2, fch_gelu) are never written: their
// casts are fused into the producers. The weight gradients read E4M3 Xᵀ copies instead: kept for
// qkv and fc (1 byte instead of bf16's 2), cast again in backward for attproj and fcproj from atty
// and fch, which backward keeps anyway. FP8 qkv, fc, fcproj save memory. The GPT-2 sizes are
// checked through activation_bytes_for, the function the model sizes its allocation with, without
// building them; ActivationBytes.AreTheTensorsThatForwardKeepsAndBackwardNeeds checks that function
// against a count by hand.
TEST(Precision, Fp8KeepsFewerActivationBytesThanBf16) {
    GPTConfig cfg = gpt_config_from_spec("d12", 256, 64, 128, 4);   // GPT-2 small's depth, narrow
    auto bytes = [&](Precision p, unsigned gemms) {
        auto backend = make_cpu_backend(activation_dtype(p));
        PrecisionConfig pc;
        pc.precision = p;
        pc.fp8.gemms = gemms;
        GPT model(cfg, *backend, 8, 64, pc);
        return model.activation_bytes();
    };
    const size_t bf16 = bytes(Precision::BF16, 0xF), fp8_all = bytes(Precision::FP8, 0xF);
    for (unsigned g : {0x1u, 0x4u, 0x8u}) {   // qkv, fc, fcproj
        const size_t one = bytes(Precision::FP8, g);
        EXPECT_LT(one, bf16) << "FP8 GEMM mask " << g;
        EXPECT_GT(one, fp8_all) << "FP8 GEMM mask " << g;
    }
    // attproj's input (atty) is kept in bf16 for attention backward anyway: FP8 there saves nothing
    // and adds its one-layer buffers, Xᵀ (B·T·C) and dY in two layouts (2·B·T·C bytes)
    EXPECT_EQ(bytes(Precision::FP8, 0x2u), bf16 + 3 * 8 * 64 * (size_t)cfg.n_embd);
    // The target of issue 6 at the benchmark's shapes (scripts/gpu_check.sh: T = 1024): fp8 keeps at
    // most 0.75x of bf16's activation bytes at d48. At d12 the logits (B, T, 50304), the same in
    // both modes, are a quarter of the total, so the ratio is higher there.
    // With the head in 16 chunks (--lm-head-chunks 16) the logits take a sixteenth of that, and fp8
    // keeps at most 0.75x of bf16's bytes at every size.
    struct Shape {
        const char* spec;
        int B;
    };
    double ratio_d48 = 0;
    for (const Shape& s : {Shape{"d12", 16}, Shape{"d24", 16}, Shape{"d36", 8}, Shape{"d48", 8}}) {
        const GPTConfig gpt2 = gpt_config_from_spec(s.spec, 50257, 1024);
        for (int chunks : {1, 16}) {
            PrecisionConfig pc;
            pc.precision = Precision::BF16;
            const double b = (double)GPT::activation_bytes_for(gpt2, s.B, 1024, pc, 0, chunks);
            pc.precision = Precision::FP8;
            const double f = (double)GPT::activation_bytes_for(gpt2, s.B, 1024, pc, 0, chunks);
            std::printf("activation bytes at %s, B=%d, T=1024, %d head chunk(s): bf16 %.2f GiB, fp8 %.2f GiB (%.3fx)\n",
                        s.spec, s.B, chunks, b / (1 << 30), f / (1 << 30), f / b);
            EXPECT_LT(f, b) << s.spec;
            if (chunks == 1)
                ratio_d48 = f / b;
            else
                EXPECT_LE(f / b, 0.75) << s.spec << " with 16 head chunks";
        }
    }
    EXPECT_LE(ratio_d48, 0.75);
}

// The activation memory, counted by hand from the block's maths at d2 (C = 64, NH = 2, Vp = 128),
// B·T = 64 tokens (every tensor then a multiple of the 64-byte alignment):
//   kept for backward, per layer, in the activation dtype (A bytes): ln1 C, qkv 3C, atty C,
//     residual2 C, ln2 C, fch 4C, fch_gelu 4C, residual3 C = 16C; in FP32: ln1's and ln2's mean
//     and rstd (4) and the attention's log-sum-exp per head (NH);
//   once: encoded, attproj, fcproj, lnf (C each), the logits (Vp), the backward's scratch dresidual,
//     dln, datty (C), dqkv (3C), dfch, dfch_gelu (4C each) = 18C + Vp; in FP32 lnf's mean and rstd
//     and the per-token loss (3).
// --recompute 1 keeps fch_gelu for one layer only, --recompute 2 also ln1 and ln2; FP8 GEMMs keep
// no 16-bit input of their own (ln1 for qkv, ln2 for fc, fch_gelu for fcproj) and add E4M3 copies,
// which Fp8State counts (tests above).
TEST(ActivationBytes, AreTheTensorsThatForwardKeepsAndBackwardNeeds) {
    const GPTConfig cfg = gpt_config_from_spec("d2", 100, 64, 64, 2);
    const size_t L = 2, C = 64, NH = 2, Vp = cfg.padded_vocab_size, BT = 64;
    ASSERT_EQ(Vp, 128u);
    for (auto [p, A] :
         {std::pair{Precision::FP32, size_t{4}}, {Precision::BF16, size_t{2}}, {Precision::FP16, size_t{2}}}) {
        SCOPED_TRACE(precision_name(p));
        PrecisionConfig pc;
        pc.precision = p;
        const size_t once = BT * ((18 * C + Vp) * A + 3 * 4);
        EXPECT_EQ(GPT::activation_bytes_for(cfg, 1, 64, pc), BT * L * (16 * C * A + (4 + NH) * 4) + once);
        EXPECT_EQ(GPT::activation_bytes_for(cfg, 1, 64, pc, 1),
                  BT * (L * (12 * C * A + (4 + NH) * 4) + 4 * C * A) + once);
        EXPECT_EQ(GPT::activation_bytes_for(cfg, 1, 64, pc, 2),
                  BT * (L * (10 * C * A + (4 + NH) * 4) + 6 * C * A) + once);
    }
}
