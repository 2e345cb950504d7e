// test_cuda_model.cu — whole training steps on the CUDA kernel set against the CPU twin: the same
// GPT (gpt.h), the same weights and tokens, one backend each, in every precision.
//
// A step here is two micro-batches of gradient accumulation (zero_grad, forward + backward twice),
// the gradient norm, an AdamW update, and a forward on the updated weights. Compared:
//   * the loss of each micro-batch and after the update, and the gradient norm;
//   * every parameter tensor's accumulated gradient, per tensor;
//   * the updated weights;
//   * logits of a sampling-shaped forward (B = 1, odd T), on the weights before the update.
// Bounds (model_bounds below), from tests/tolerances.h's rules for two implementations of the same
// precision: they differ by reordered FP32 sums and last-bit libm differences, and wherever those
// move a value across a rounding boundary, a stored value that rounds to its neighbour (one flip,
// ≤ 2u of it), carried down the chain of n stored tensors and added in quadrature:
//   fp32        logits fp32_logits_bound, gradients fp32_gradient_bound (√n·(√K·u + 2u));
//   bf16, fp16  logits √n_fwd·2u, gradients √n·2u (n_fwd = 10L + 2 forward tensors, n = n_fwd +
//               the backward's 2 + 8L), u of the 16-bit format;
//   fp8         both sides cast the same bf16 values with the same recipe, so an FP8 code differs
//               only where its bf16 input (or its tensor's amax, hence its scale) moved by a flip,
//               2u(bf16) of it: an E4M3 code (spacing ≥ u = 2^-4 of the value) then lies across a
//               rounding boundary with probability ≤ 2u(bf16)/u(E4M3) = 1/8, an E5M2 code with
//               ≤ 1/16, and moves its GEMM term by one code, 2u of the format. In quadrature over
//               the chain: √(n_fwd·(2u_16)² + 4L·(1/8)·(2u_E4M3)²) for the logits (4L E4M3 casts);
//               for the gradients, which also read 4L E5M2 dY casts, R = √(n·(2u_16)² + 4L·(1/8)·
//               (2u_E4M3)² + 4L·(1/16)·(2u_E5M2)²) = 0.22 at L = 2. That is a bound on the typical
//               (rms) difference, not on every element: a gradient that cancels to near zero may
//               move by more than itself. So fp8 gradients are compared by their rms, ‖Δg‖/‖g‖ ≤ R
//               per tensor, and by their scale, α = ⟨g_cuda, g_cpu⟩/‖g_cpu‖²: the flips go either
//               way, independently of g, so |α − 1| = |⟨Δg, g⟩|/‖g‖² ≤ λ·R·max|g|/‖g‖ (Hoeffding,
//               λ = 6), and never more than R (Cauchy–Schwarz). A gradient 25% too large fails:
//               its rms difference is at least 0.25 > R, and on a tensor of more than a few
//               hundred values its scale (α = 1.25 against a bound of a few percent) too.
//   loss        a token's loss moves by at most 2·max|Δlogit| (its gradient in the logits sums
//               to 2 in absolute value), and the mean over N = B·T tokens of independent differences
//               of either sign by λ/√N of that (Hoeffding): |Δloss| ≤ 2·(logits bound)·max|logit|·
//               min(1, λ/√N), max|logit| from a CPU forward of the batch. After the update, the
//               weights also differ (below): Σ Δw·∂loss/∂w, of either sign, adds λ·‖Δw·ĝ‖₂ with ĝ
//               the gradient's size, 2·rms of the CPU's gradient of each tensor.
//   gradient    |Δ‖g‖| ≤ ‖Δg‖ ≤ the gradient bound of the whole vector; fp8: first order
//   norm        |Δ‖g‖|/‖g‖ = |α − 1| of the whole vector, plus R²/2.
// The update is checked as AdamW applied to the CUDA run's own gradients (tight), and against the
// CPU's: at t = 1 AdamW moves each weight by ≈ −lr·sign(g) (plus the decay), so a weight may move
// the other way on the two sides only where the two gradients' signs can differ, i.e. where
// |g_cuda − g_cpu| ≥ |g_cpu| (or |g| is at ε's scale, where the decay decides): every weight whose
// direction differs must have such a gradient. A wrong update direction anywhere else fails.
#include "tests/cuda/cuda_test_util.h"

#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/gpt.h"
#include "model/layout.h"
#include "tests/tolerances.h"

#include <cstdio>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

constexpr float kLr = 1e-3f;

// The bounds of the top of the file for a GPT of cfg's shape at B×T tokens.
struct ModelBounds {
    double logits;   // normwise, one position's logits
    double grads;    // normwise per gradient tensor; fp8: the rms bound R
    bool fp8 = false;
};
ModelBounds model_bounds(Precision p, const GPTConfig& cfg, int B, int T) {
    const int L = cfg.n_layer;
    const double n_fwd = 10.0 * L + 2, n = n_fwd + backward_chain_length(L);
    if (p == Precision::FP32) return {fp32_logits_bound(cfg, T), fp32_gradient_bound(cfg, B, T)};
    const double f16 = one_flip(storage_unit_roundoff(p));
    if (p != Precision::FP8) return {std::sqrt(n_fwd) * f16, std::sqrt(n) * f16};
    const double p4 = f16 / kUnitRoundoffE4M3, p5 = f16 / kUnitRoundoffE5M2;   // 1/8, 1/16
    const double f4 = one_flip(kUnitRoundoffE4M3), f5 = one_flip(kUnitRoundoffE5M2);
    const double fwd = n_fwd * f16 * f16 + 4 * L * p4 * f4 * f4;
    return {std::sqrt(fwd), std::sqrt(fwd - n_fwd * f16 * f16 + n * f16 * f16 + 4 * L * p5 * f5 * f5), true};
}
// |Δloss| (absolute) of a forward of `tokens` tokens whose logits reach max_abs_logit.
double loss_bound(const ModelBounds& b, double max_abs_logit, int tokens) {
    return 2 * b.logits * max_abs_logit * std::min(1.0, kLambda / std::sqrt((double)tokens));
}
// The largest |logit| of a forward of the B×T tokens x.
double max_abs_logit(GPT& model, const int32_t* x, int B, int T) {
    model.forward(x, nullptr, B, T);
    double m = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (float z : model.logits_at(b, t))
                m = std::max(m, (double)std::fabs(z));
    return m;
}

// fp8's comparison of one gradient tensor (see the top): its rms difference and its scale.
struct Fp8GradCheck {
    double rms = 0, scale_err = 0, scale_bound = 0;
};
Fp8GradCheck expect_fp8_gradient_close(const std::string& what, const std::vector<float>& g,
                                       const std::vector<float>& ref, double R) {
    double ee = 0, rr = 0, gr = 0, mx = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        const double e = (double)g[i] - ref[i];
        ee += e * e;
        rr += (double)ref[i] * ref[i];
        gr += (double)g[i] * ref[i];
        mx = std::max(mx, std::fabs((double)ref[i]));
    }
    Fp8GradCheck c;
    c.rms = rr > 0 ? std::sqrt(ee / rr) : std::sqrt(ee);
    c.scale_err = rr > 0 ? std::fabs(gr / rr - 1) : 0;
    c.scale_bound = rr > 0 ? std::min(R, kLambda * R * mx / std::sqrt(rr)) : R;
    EXPECT_LT(c.rms, R) << what << ": rms difference ‖Δg‖/‖g‖ " << c.rms << " (NaN: non-finite) ≥ bound " << R;
    EXPECT_LE(c.scale_err, c.scale_bound)
        << what << ": scale ⟨g_cuda, g_cpu⟩/‖g_cpu‖² is 1 ± " << c.scale_err << ", bound " << c.scale_bound;
    return c;
}

struct StepResult {
    std::vector<float> losses;   // micro-batch 1, micro-batch 2, after the update
    double norm = 0;
    std::vector<float> grads, weights, logits;
    double max_logit = 0;   // max |logit| over the evaluation batch, before the update
};

StepResult train_step(Backend& backend, Precision p, const GPTConfig& cfg, const std::vector<float>& weights,
                      const std::vector<int32_t>& tokens, int B, int T) {
    PrecisionConfig pc;
    pc.precision = p;
    GPT model(cfg, backend, B, T, pc);
    model.set_weights(weights);
    // fp16 runs with a loss scale, as in training (test_precision.cpp does the same)
    const float S = p == Precision::FP16 ? 1024.0f : 1.0f;
    StepResult r;
    model.zero_grad();
    for (int micro = 0; micro < 2; micro++) {
        const int32_t* x = tokens.data() + (size_t)micro * 2 * B * T;
        r.losses.push_back(model.forward(x, x + B * T, B, T, S / (2.0f * B * T)));
        model.backward();
    }
    r.grads = model.gradients();
    for (float& g : r.grads)
        g /= S;
    r.norm = model.gradient_norm() / S;
    // the evaluation batch's logits (for the loss bounds), then the sampling shape: one sequence
    // of an odd length, no targets, on the weights both sides share (after the update they differ
    // where the update directions do, see below)
    const int32_t* x = tokens.data() + (size_t)4 * B * T;
    r.max_logit = max_abs_logit(model, x, B, T);
    const int Ts = T / 2 + 3;
    model.forward(x, nullptr, 1, Ts);
    r.logits = model.logits_at(0, Ts - 1);
    AdamWConfig opt;
    model.update(kLr, opt, 1.0f / S, 1);
    r.weights = model.weights();
    r.losses.push_back(model.forward(x, x + B * T, B, T));
    return r;
}

struct Case {
    Precision p;
    bool flash = false;   // the CUDA side runs the flash attention (--attention flash)
};

class CudaModelTest : public CudaTest, public ::testing::WithParamInterface<Case> {};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
    return std::string(precision_name(info.param.p)) + (info.param.flash ? "_flash" : "");
}

}   // namespace

TEST_P(CudaModelTest, TrainingStepMatchesCpuTwin) {
    const Case c = GetParam();
    const int B = 4, T = 64;
    // d2 at width 128: head size 64 as in every GPT-2 size; V not a multiple of 128 (padding)
    GPTConfig cfg = gpt_config_from_spec("d2", 1000, T, 128, 2);
    Random r(seed_);
    std::vector<float> weights;
    {
        auto init_backend = make_cpu_backend(DType::F32);
        GPT init(cfg, *init_backend, B, T);
        init.init_weights(seed_);
        weights = init.weights();
    }
    std::vector<int32_t> tokens = r.ints((size_t)6 * B * T, cfg.vocab_size);

    auto cpu = make_cpu_backend(activation_dtype(c.p));
    CudaOptions options;
    options.flash_attention = c.flash;
    auto gpu = make_cuda_backend(activation_dtype(c.p), 0, options);
    StepResult ref = train_step(*cpu, c.p, cfg, weights, tokens, B, T);
    StepResult got = train_step(*gpu, c.p, cfg, weights, tokens, B, T);

    const std::string label = std::string(precision_name(c.p)) + (c.flash ? " (flash attention)" : "");
    const char* name = label.c_str();
    const ModelBounds bound = model_bounds(c.p, cfg, B, T);
    auto sizes = param_tensor_sizes(cfg);
    double worst_grad = 0, worst_scale = 0;
    size_t offset = 0;
    std::vector<double> grad_rms(kNumParamTensors);   // each tensor's CPU gradient rms
    for (int i = 0; i < kNumParamTensors; i++) {
        std::vector<float> g(got.grads.begin() + offset, got.grads.begin() + offset + sizes[i]);
        std::vector<float> e(ref.grads.begin() + offset, ref.grads.begin() + offset + sizes[i]);
        const std::string what = std::string(name) + " gradient of " + param_tensor_name(i);
        if (bound.fp8) {
            const Fp8GradCheck f = expect_fp8_gradient_close(what, g, e, bound.grads);
            worst_grad = std::max(worst_grad, f.rms);
            worst_scale = std::max(worst_scale, f.scale_err);
        } else {
            worst_grad = std::max(worst_grad, expect_close(what, g, e, bound.grads));
        }
        double ss = 0;
        for (float x : e)
            ss += (double)x * x;
        grad_rms[i] = std::sqrt(ss / e.size());
        offset += sizes[i];
    }
    // the norm: |Δ‖g‖| ≤ ‖Δg‖; in fp8 to first order ⟨Δg, g⟩/‖g‖ (see the top)
    double norm_bound = bound.grads;
    if (bound.fp8) {
        double mx = 0;
        for (float x : ref.grads)
            mx = std::max(mx, (double)std::fabs(x));
        norm_bound = std::min(bound.grads, kLambda * bound.grads * mx / ref.norm + bound.grads * bound.grads / 2);
    }
    EXPECT_LT(std::fabs(got.norm - ref.norm) / ref.norm, norm_bound)
        << name << " gradient norm: cuda " << got.norm << " vs cpu " << ref.norm;
    // the update: the CUDA step must be AdamW applied to its own gradients. At t = 1 from m = v = 0,
    // AdamW moves each weight by lr·ĝ/(|ĝ| + ε) after the decay (2-D weights only):
    //   w ← w·(1 − lr·wd) − lr·ĝ/(|ĝ| + ε)
    // (FP32 arithmetic on the device: a few ulps of w, and of the step). weights() are the FP32
    // masters (the working weights in fp32). Against the CPU's update: the direction of each
    // weight's move, sign(−wd·w − ĝ/(|ĝ| + ε)), is the same on both sides unless the two
    // gradients' signs differ, so |g_cuda − g_cpu| ≥ |g_cpu|, or a gradient is within ε's scale
    // (|ĝ| ≤ ε·wd·|w|/(1 − wd·|w|) < ε: there the decay term decides): each weight whose direction
    // differs must have such a "noise-level" gradient.
    const double lr = kLr, wd = AdamWConfig{}.weight_decay, eps = AdamWConfig{}.eps;
    auto direction = [](double d) { return (d > 0) - (d < 0); };
    size_t bad_update = 0, first_bad = 0, disagree = 0, noise_level = 0, unexplained = 0, first_unexplained = 0;
    double dw_grad = 0;   // Σ (Δw·ĝ)², ĝ = 2·rms of the weight's CPU gradient tensor
    offset = 0;
    for (int t = 0; t < kNumParamTensors; t++) {
        const double decay = param_tensor_decays(t) ? wd : 0.0;
        for (size_t i = offset; i < offset + sizes[t]; i++) {
            const double g = got.grads[i], gc = ref.grads[i];
            const double expected = weights[i] * (1.0 - lr * decay) - lr * g / (std::fabs(g) + eps);
            if (std::fabs(got.weights[i] - expected) > 4e-7 * std::fabs(weights[i]) + 1e-3 * lr) {
                if (bad_update++ == 0) first_bad = i;
            }
            const bool noisy = std::fabs(g - gc) >= std::fabs(gc) || std::min(std::fabs(g), std::fabs(gc)) < eps;
            noise_level += noisy;
            if (direction((double)got.weights[i] - weights[i]) != direction((double)ref.weights[i] - weights[i])) {
                disagree++;
                if (!noisy && unexplained++ == 0) first_unexplained = i;
            }
            const double dw = (double)got.weights[i] - ref.weights[i];
            dw_grad += dw * dw * 4 * grad_rms[t] * grad_rms[t];
        }
        offset += sizes[t];
    }
    EXPECT_EQ(bad_update, 0u) << name << ": " << bad_update
                              << " weights not updated by AdamW of the CUDA gradients; first " << first_bad << ": "
                              << got.weights[first_bad] << " from " << weights[first_bad] << " with gradient "
                              << got.grads[first_bad];
    EXPECT_EQ(unexplained, 0u) << name << ": " << unexplained
                               << " weights moved the other way than on the CPU without a "
                               << "noise-level gradient; first " << first_unexplained << ": gradient cuda "
                               << got.grads[first_unexplained] << " vs cpu " << ref.grads[first_unexplained];
    EXPECT_LE(disagree, noise_level);   // implied by the above, printed below
    expect_close(std::string(name) + " sampling logits", got.logits, ref.logits, bound.logits);
    // the losses: micro-batches 1 and 2, then after the update (where the weights also differ)
    double worst_loss = 0, worst_ratio = 0;
    for (size_t i = 0; i < ref.losses.size(); i++) {
        double tol = loss_bound(bound, ref.max_logit, B * T);
        if (i == 2) tol += kLambda * std::sqrt(dw_grad);
        const double err = std::fabs(got.losses[i] - ref.losses[i]);
        EXPECT_LE(err, tol) << name << " loss " << i << ": cuda " << got.losses[i] << " vs cpu " << ref.losses[i];
        worst_loss = std::max(worst_loss, err / ref.losses[i]);
        worst_ratio = std::max(worst_ratio, err / tol);
    }
    std::printf(
        "%s cuda vs cpu: loss %.2e relative (%.2f of its bound), worst gradient tensor %.2e %s (bound %.2e)%s; "
        "after the update %zu of %zu weights moved the other way, %zu gradients at noise level\n",
        name, worst_loss, worst_ratio, worst_grad, bound.fp8 ? "rms" : "normwise", bound.grads,
        bound.fp8 ? (", worst scale error " + std::to_string(worst_scale)).c_str() : "", disagree, ref.weights.size(),
        noise_level);
}

INSTANTIATE_TEST_SUITE_P(AllPrecisions, CudaModelTest,
                         ::testing::Values(Case{Precision::FP32}, Case{Precision::BF16}, Case{Precision::FP16},
                                           Case{Precision::FP8},
                                           // the flash attention (head size 64 here) in a whole step, same bounds
                                           Case{Precision::BF16, true}, Case{Precision::FP16, true},
                                           Case{Precision::FP8, true}),
                         case_name);

// Shapes Hopper's FP8 GEMMs cannot take are refused up front, with the reason, not by cuBLASLt
// mid-step: a width that is not a multiple of 16, and (training only: the weight gradients reduce
// over it) B·T not a multiple of 16. Sampling at any length still runs.
TEST_F(CudaTest, Fp8RefusesShapesItsGemmsCannotTake) {
    auto backend = make_cuda_backend(DType::BF16, 0);
    PrecisionConfig pc;
    pc.precision = Precision::FP8;
    auto message = [](auto&& f) {
        try {
            f();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::string narrow =
        message([&] { GPT model(gpt_config_from_spec("d2", 1000, 64, 72, 2), *backend, 2, 16, pc); });
    EXPECT_NE(narrow.find("n_embd 72 must be a multiple of 16"), std::string::npos) << narrow;
    PrecisionConfig none = pc;   // no GEMM in FP8: nothing to refuse
    none.fp8.gemms = 0;
    EXPECT_EQ(message([&] { GPT model(gpt_config_from_spec("d2", 1000, 64, 72, 2), *backend, 2, 16, none); }),
              "no error");

    GPT model(gpt_config_from_spec("d2", 1000, 64, 128, 2), *backend, 1, 64, pc);
    model.init_weights(1);
    std::vector<int32_t> tokens(64 + 1, 7);
    const std::string odd = message([&] { model.forward(tokens.data(), tokens.data() + 1, 1, 7, 1.0f / 7); });
    EXPECT_NE(odd.find("B·T = 1·7 = 7 must be a multiple of 16"), std::string::npos) << odd;
    EXPECT_EQ(message([&] { model.forward(tokens.data(), nullptr, 1, 7); }), "no error");   // sampling
    EXPECT_EQ(message([&] { model.forward(tokens.data(), tokens.data() + 1, 1, 16, 1.0f / 16); }), "no error");
}

// Round 26: the shapes above were refused only at the first forward, after the run had written its
// config.json and log.jsonl; the binary refuses them at start-up (Config.CudaShapeChecksNameTheFlags
// holds the messages on the CPU), with nothing written.
TEST_F(CudaTest, TrainGptRefusesCudaShapesBeforeWritingAnything) {
    ScratchDir dir;
    std::string text;
    for (int i = 0; i < 200; i++)
        text += "In the beginning was the word. ";
    const std::vector<uint32_t> tokens(text.begin(), text.end());
    write_shard(dir.file("train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
    Tokenizer::byte_level().save(dir.file("tokenizer.bin"));
    const std::string run = train_gpt_binary() + " --device cuda -e d2 -x 1 -j '' -g 0 -i '" + dir.file("train_*.bin") +
                            "' --tokenizer '" + dir.file("tokenizer.bin") + "' -o '" + dir.file("out") + "' ";
    expect_refused(run_timed(run + "-p fp8 --n-embd 64 -b 1 -t 100"),
                   {"-p fp8 training on cuda: -b 1 times -t 100 = 100 must be a multiple of 16"});
    EXPECT_FALSE(file_exists(dir.file("out"))) << "nothing written";
    expect_refused(run_timed(run + "-p bf16 --n-embd 100 --n-head 2 -b 2 -t 16"),
                   {"--n-embd 100 / --n-head 2 = head size 50: the CUDA attention (gemm)"});
    EXPECT_FALSE(file_exists(dir.file("out"))) << "nothing written";
}

// --fused-kernels (CudaOptions::fused_kernels) changes nothing but the order of two FP32 sums. The
// fused forward ops (the FP8 casts in their producers, residual + layernorm) round exactly as the
// separate kernels, and so do the fused backward values (GELU backward, the FP8 dY cast, AdamW's
// weight cast); only the bias gradients of attproj and fcproj, summed inside layernorm backward,
// add their rows in another order than the separate column-sum kernel. So, in bf16 and fp8: the
// first step's loss and every gradient but those two are bit-identical; those two are FP32 sums
// of the same N = B·T stored dY rows in two orders, within sum_coeff(N)·Σ_n|dy| (twin_bounds.h),
// and a bias gradient of a fresh model, a sum of N terms of either sign, is of the size of
// (Σ dy²)^½ ≥ Σ|dy|/√N: normwise sum_coeff(N)·√N. From there the weights differ, and the losses of
// the steps after it within trained_loss_bounds (tests/tolerances.h) with δ the precision's
// gradient bound of the training-step test, plus a forward's own loss bound.
TEST_F(CudaTest, FusedKernelsChangeOnlyTheOrderOfTwoSums) {
    const int B = 4, T = 64, steps = 3;
    const GPTConfig cfg = gpt_config_from_spec("d2", 1000, T, 128, 2);
    Random r(seed_);
    const std::vector<int32_t> tokens = r.ints((size_t)(steps + 1) * B * T, cfg.vocab_size);
    for (Precision p : {Precision::BF16, Precision::FP8}) {
        SCOPED_TRACE(precision_name(p));
        PrecisionConfig pc;
        pc.precision = p;
        struct Run {
            std::vector<float> losses, first_grads;
            double max_logit = 0;
        };
        auto run = [&](bool fused) {
            CudaOptions options;
            options.fused_kernels = fused;
            auto backend = make_cuda_backend(activation_dtype(p), 0, options);
            GPT model(cfg, *backend, B, T, pc);
            model.init_weights(seed_);
            Run out;
            for (int s = 0; s < steps; s++) {
                const int32_t* x = tokens.data() + (size_t)s * B * T;
                model.zero_grad();
                out.losses.push_back(model.forward(x, x + B * T, B, T, 1.0f / (B * T)));
                model.backward();
                if (s == 0) out.first_grads = model.gradients();
                model.update(kLr, AdamWConfig{}, 1.0f, s + 1);
            }
            const int32_t* x = tokens.data() + (size_t)steps * B * T;
            out.losses.push_back(model.forward(x, x + B * T, B, T));
            out.max_logit = max_abs_logit(model, x, B, T);
            return out;
        };
        const Run fused = run(true), unfused = run(false);
        const ModelBounds bound = model_bounds(p, cfg, B, T);
        EXPECT_EQ(float_bits(fused.losses[0]), float_bits(unfused.losses[0])) << "the first loss";
        const auto offsets = param_tensor_offsets(cfg);
        for (int t = 0; t < kNumParamTensors; t++) {
            const std::vector<float> f(fused.first_grads.begin() + offsets[t],
                                       fused.first_grads.begin() + offsets[t + 1]);
            const std::vector<float> u(unfused.first_grads.begin() + offsets[t],
                                       unfused.first_grads.begin() + offsets[t + 1]);
            if (t == kAttprojb || t == kFcprojb) {
                expect_close(std::string("gradient of ") + param_tensor_name(t), f, u,
                             sum_coeff(B * T) * std::sqrt((double)B * T));
            } else {
                size_t differ = 0;
                for (size_t i = 0; i < f.size(); i++)
                    differ += float_bits(f[i]) != float_bits(u[i]);
                EXPECT_EQ(differ, 0u) << "gradient of " << param_tensor_name(t);
            }
        }
        const std::vector<double> trained =
            trained_loss_bounds(std::vector<double>(unfused.losses.begin(), unfused.losses.end()), bound.grads);
        for (size_t i = 1; i < fused.losses.size(); i++) {
            EXPECT_NEAR(fused.losses[i], unfused.losses[i], trained[i] + loss_bound(bound, unfused.max_logit, B * T))
                << "loss " << i;
        }
    }
}

// --recompute 1 and 2 change no bit of training on the CUDA kernel set either: three steps in bf16
// and in fp8 (the GEMM and the flash attention) give the losses and weights of --recompute 0.
TEST_F(CudaTest, RecomputeChangesNoBitOfTraining) {
    const int B = 4, T = 64, steps = 3;
    const GPTConfig cfg = gpt_config_from_spec("d2", 1000, T, 128, 2);
    Random r(seed_);
    const std::vector<int32_t> tokens = r.ints((size_t)(steps + 1) * B * T, cfg.vocab_size);
    for (Precision p : {Precision::BF16, Precision::FP8}) {
        for (bool flash : {false, true}) {
            auto run = [&](int recompute) {
                PrecisionConfig pc;
                pc.precision = p;
                CudaOptions options;
                options.flash_attention = flash;
                auto backend = make_cuda_backend(activation_dtype(p), 0, options);
                GPT model(cfg, *backend, B, T, pc, nullptr, 0, recompute);
                model.init_weights(seed_);
                std::vector<float> losses;
                for (int s = 0; s < steps; s++) {
                    const int32_t* x = tokens.data() + (size_t)s * B * T;
                    model.zero_grad();
                    losses.push_back(model.forward(x, x + B * T, B, T, 1.0f / (B * T)));
                    model.backward();
                    model.update(kLr, AdamWConfig{}, 1.0f, s + 1);
                }
                return std::make_pair(losses, model.weights());
            };
            const auto none = run(0);
            for (int level : {1, 2}) {
                SCOPED_TRACE(std::string(precision_name(p)) + (flash ? " flash" : " gemm") + " --recompute " +
                             std::to_string(level));
                const auto again = run(level);
                for (size_t i = 0; i < none.first.size(); i++) {
                    EXPECT_EQ(float_bits(again.first[i]), float_bits(none.first[i])) << "loss " << i;
                }
                size_t differ = 0;
                for (size_t i = 0; i < none.second.size(); i++)
                    differ += float_bits(again.second[i]) != float_bits(none.second[i]);
                EXPECT_EQ(differ, 0u) << "weights after " << steps << " steps";
            }
        }
    }
}

// --lm-head-chunks on the CUDA kernel set: the head and cross-entropy in 3 chunks of a 256-token
// batch (86, 86, 84 rows: offsets that are not multiples of a tile) give the same losses as the
// whole head (each row's logits are the same GEMM row), and gradients within the training-step
// test's bounds (model_bounds): only the order of wte's head-gradient sum and the M of dln's GEMM
// change, whose last-bit differences flip roundings down the backward chain (and in fp8 rescale
// E5M2 dY casts), a subset of what CUDA and the CPU twin may differ by. Also the loss against the
// CPU twin chunked the same way, within the training-step test's loss bound.
TEST_F(CudaTest, LmHeadChunksMatchTheWholeHead) {
    const int B = 4, T = 64;
    const GPTConfig cfg = gpt_config_from_spec("d2", 1000, T, 128, 2);
    Random r(seed_);
    const std::vector<int32_t> tokens = r.ints((size_t)B * T + 1, cfg.vocab_size);
    for (Precision p : {Precision::BF16, Precision::FP8}) {
        auto run = [&](Backend& backend, int chunks) {
            PrecisionConfig pc;
            pc.precision = p;
            GPT model(cfg, backend, B, T, pc, nullptr, 0, 0, chunks);
            model.init_weights(seed_);
            model.zero_grad();
            const float loss = model.forward(tokens.data(), tokens.data() + 1, B, T, 1.0f / (B * T));
            model.backward();
            return std::make_pair(loss, model.gradients());
        };
        SCOPED_TRACE(precision_name(p));
        const ModelBounds bound = model_bounds(p, cfg, B, T);
        auto gpu = make_cuda_backend(activation_dtype(p), 0, CudaOptions{});
        const auto whole = run(*gpu, 1), chunked = run(*gpu, 3);
        EXPECT_EQ(float_bits(chunked.first), float_bits(whole.first));
        if (bound.fp8) {
            const auto offsets = param_tensor_offsets(cfg);
            for (int t = 0; t < kNumParamTensors; t++) {
                const std::vector<float> c(chunked.second.begin() + offsets[t],
                                           chunked.second.begin() + offsets[t + 1]);
                const std::vector<float> w(whole.second.begin() + offsets[t], whole.second.begin() + offsets[t + 1]);
                expect_fp8_gradient_close(std::string("chunked gradient of ") + param_tensor_name(t), c, w,
                                          bound.grads);
            }
        } else {
            EXPECT_LE(max_rel_error(chunked.second.data(), whole.second.data(), whole.second.size()), bound.grads);
        }
        auto cpu = make_cpu_backend(activation_dtype(p));
        const auto cpu_chunked = run(*cpu, 3);
        double max_logit;   // the CPU's logits of the batch, through the whole head (chunks keep no logits)
        {
            PrecisionConfig pc;
            pc.precision = p;
            GPT model(cfg, *cpu, B, T, pc);
            model.init_weights(seed_);
            max_logit = max_abs_logit(model, tokens.data(), B, T);
        }
        EXPECT_NEAR(chunked.first, cpu_chunked.first, loss_bound(bound, max_logit, B * T));
    }
}
