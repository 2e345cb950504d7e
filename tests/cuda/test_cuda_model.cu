// test_cuda_model.cu — whole training steps on the CUDA kernel set against the CPU twin: the same
// GPT (gpt.h), the same weights and tokens, one backend each, in every precision.
//
// A step here is two micro-batches of gradient accumulation (zero_grad, forward + backward twice),
// the gradient norm, an AdamW update, and a forward on the updated weights. Compared:
//   * the loss of each micro-batch and after the update, and the gradient norm;
//   * every parameter tensor's accumulated gradient, normwise per tensor;
//   * the updated weights;
//   * logits of a sampling-shaped forward (B = 1, odd T), on the weights before the update.
// Tolerances are those of tests/test_precision.cpp (the CPU twin's precision vs fp32), which
// bound the CUDA-vs-CPU difference of the same precision with room: the two sides differ only
// where reordered FP32 sums round the other way, which is far rarer than every rounding of a
// 16-bit store. In fp32: loss 1e-5, gradients 1e-4 (reordered FP32 through ~6 ops per layer).
//   loss       u of the format (fp32: 1e-5; bf16 2^-9; fp16 2^-12; fp8 u(E4M3) = 2^-4)
//   gradients  8u per tensor (bf16, fp16); 2.4·u(E5M2) for fp8
// The update is checked as AdamW applied to the CUDA run's own gradients (tight), and against
// the CPU's updated weights (within 2·lr: Adam's first step is ≈ lr·sign(g), so a gradient at the
// comparison's noise level may move a weight the other way), and by the loss after it.
#include "tests/cuda/cuda_test_util.h"

#include "model/gpt.h"

#include <cstdio>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

constexpr float kLr = 1e-3f;

struct StepResult {
    std::vector<float> losses;   // micro-batch 1, micro-batch 2, after the update
    double norm = 0;
    std::vector<float> grads, weights, logits;
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
    for (float& g : r.grads) g /= S;
    r.norm = model.gradient_norm() / S;
    // sampling shape: one sequence of an odd length, no targets, on the weights both sides share
    // (after the update they may differ by up to 2·lr, see below: too much for the logits' bound)
    const int32_t* x = tokens.data() + (size_t)4 * B * T;
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
    double loss_tol, grad_tol;
    bool flash = false;   // the CUDA side runs the flash attention (--attention flash)
};

class CudaModelTest : public CudaTest, public ::testing::WithParamInterface<Case> {};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
    return std::string(precision_name(info.param.p)) + (info.param.flash ? "_flash" : "");
}

}  // namespace

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
    double worst_loss = 0;
    for (size_t i = 0; i < ref.losses.size(); i++) {
        const double err = std::fabs(got.losses[i] - ref.losses[i]) / ref.losses[i];
        EXPECT_LT(err, c.loss_tol) << name << " loss " << i << ": cuda " << got.losses[i] << " vs cpu " << ref.losses[i];
        worst_loss = std::max(worst_loss, err);
    }
    EXPECT_LT(std::fabs(got.norm - ref.norm) / ref.norm, c.grad_tol) << name << " gradient norm: cuda " << got.norm
                                                                      << " vs cpu " << ref.norm;
    auto sizes = param_tensor_sizes(cfg);
    double worst_grad = 0;
    size_t offset = 0;
    for (int i = 0; i < kNumParamTensors; i++) {
        std::vector<float> g(got.grads.begin() + offset, got.grads.begin() + offset + sizes[i]);
        std::vector<float> e(ref.grads.begin() + offset, ref.grads.begin() + offset + sizes[i]);
        worst_grad = std::max(worst_grad, expect_close(std::string(name) + " gradient of " + param_tensor_name(i), g, e,
                                                       c.grad_tol));
        offset += sizes[i];
    }
    // the update: the CUDA step must be AdamW applied to its own gradients. At t = 1 from m = v = 0,
    // AdamW moves each weight by lr·ĝ/(|ĝ| + ε) after the decay (2-D weights only):
    //   w ← w·(1 − lr·wd) − lr·ĝ/(|ĝ| + ε)
    // (FP32 arithmetic on the device: a few ulps of w, and of the step). weights() are the FP32
    // masters (the working weights in fp32). Against the CPU's update, only gradients at the
    // noise level of the comparison may move the other way: at most 2·lr apart.
    const double lr = kLr, wd = AdamWConfig{}.weight_decay, eps = AdamWConfig{}.eps;
    size_t bad_update = 0, first_bad = 0, flipped = 0;
    double max_dw = 0;
    offset = 0;
    for (int t = 0; t < kNumParamTensors; t++) {
        const double decay = param_tensor_decays(t) ? wd : 0.0;
        for (size_t i = offset; i < offset + sizes[t]; i++) {
            const double g = got.grads[i];
            const double expected = weights[i] * (1.0 - lr * decay) - lr * g / (std::fabs(g) + eps);
            if (std::fabs(got.weights[i] - expected) > 4e-7 * std::fabs(weights[i]) + 1e-3 * lr) {
                if (bad_update++ == 0) first_bad = i;
            }
            const double dw = std::fabs((double)got.weights[i] - ref.weights[i]);
            max_dw = std::max(max_dw, dw);
            if (dw > lr / 10) flipped++;
        }
        offset += sizes[t];
    }
    EXPECT_EQ(bad_update, 0u) << name << ": " << bad_update << " weights not updated by AdamW of the CUDA gradients; first "
                              << first_bad << ": " << got.weights[first_bad] << " from " << weights[first_bad]
                              << " with gradient " << got.grads[first_bad];
    EXPECT_LE(max_dw, 2 * lr + 1e-6) << name << ": updated weights differ from the CPU's by more than 2·lr";
    expect_close(std::string(name) + " sampling logits", got.logits, ref.logits, c.grad_tol);
    std::printf("%s cuda vs cpu: loss %.2e (bound %.1e), worst gradient tensor %.2e (bound %.1e); after the "
                "update: max weight difference %.2e (lr %.0e), %zu of %zu weights moved apart by > lr/10\n",
                name, worst_loss, c.loss_tol, worst_grad, c.grad_tol, max_dw, lr, flipped, ref.weights.size());
}

INSTANTIATE_TEST_SUITE_P(
    AllPrecisions, CudaModelTest,
    ::testing::Values(Case{Precision::FP32, 1e-5, 1e-4},
                      Case{Precision::BF16, std::ldexp(1.0, -9), 8 * std::ldexp(1.0, -9)},
                      Case{Precision::FP16, std::ldexp(1.0, -12), 8 * std::ldexp(1.0, -12)},
                      Case{Precision::FP8, std::ldexp(1.0, -4), 2.4 * std::ldexp(1.0, -3)},
                      // the flash attention (head size 64 here) in a whole step, against the same bounds
                      Case{Precision::BF16, std::ldexp(1.0, -9), 8 * std::ldexp(1.0, -9), true},
                      Case{Precision::FP16, std::ldexp(1.0, -12), 8 * std::ldexp(1.0, -12), true},
                      Case{Precision::FP8, std::ldexp(1.0, -4), 2.4 * std::ldexp(1.0, -3), true}),
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
    const std::string narrow = message([&] { GPT model(gpt_config_from_spec("d2", 1000, 64, 72, 2), *backend, 2, 16, pc); });
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

// --fused-kernels (CudaOptions::fused_kernels) changes nothing but the order of two FP32 sums. The
// fused forward ops (the FP8 casts in their producers, residual + layernorm) round exactly as the
// separate kernels, and so do the fused backward values (GELU backward, the FP8 dY cast, AdamW's
// weight cast); only the bias gradients of attproj and fcproj, summed inside layernorm backward,
// add their rows in another order than the separate column-sum kernel. So, in bf16 and fp8: the
// first step's loss and every gradient but those two are bit-identical, those two agree to FP32
// reordering (1e-5 normwise), and three steps later the losses still agree to 1e-4 relative.
TEST_F(CudaTest, FusedKernelsChangeOnlyTheOrderOfTwoSums) {
    const int B = 4, T = 64, steps = 3;
    const GPTConfig cfg = gpt_config_from_spec("d2", 1000, T, 128, 2);
    Random r(seed_);
    const std::vector<int32_t> tokens = r.ints((size_t)(steps + 1) * B * T, cfg.vocab_size);
    for (Precision p : {Precision::BF16, Precision::FP8}) {
        SCOPED_TRACE(precision_name(p));
        PrecisionConfig pc;
        pc.precision = p;
        struct Run { std::vector<float> losses, first_grads; };
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
            return out;
        };
        const Run fused = run(true), unfused = run(false);
        EXPECT_EQ(float_bits(fused.losses[0]), float_bits(unfused.losses[0])) << "the first loss";
        const auto offsets = param_tensor_offsets(cfg);
        for (int t = 0; t < kNumParamTensors; t++) {
            const std::vector<float> f(fused.first_grads.begin() + offsets[t], fused.first_grads.begin() + offsets[t + 1]);
            const std::vector<float> u(unfused.first_grads.begin() + offsets[t],
                                       unfused.first_grads.begin() + offsets[t + 1]);
            if (t == kAttprojb || t == kFcprojb) {
                expect_close(std::string("gradient of ") + param_tensor_name(t), f, u, 1e-5);
            } else {
                size_t differ = 0;
                for (size_t i = 0; i < f.size(); i++) differ += float_bits(f[i]) != float_bits(u[i]);
                EXPECT_EQ(differ, 0u) << "gradient of " << param_tensor_name(t);
            }
        }
        for (size_t i = 1; i < fused.losses.size(); i++) {
            EXPECT_NEAR(fused.losses[i], unfused.losses[i], 1e-4 * unfused.losses[i]) << "loss " << i;
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
                for (size_t i = 0; i < none.second.size(); i++) differ += float_bits(again.second[i]) != float_bits(none.second[i]);
                EXPECT_EQ(differ, 0u) << "weights after " << steps << " steps";
            }
        }
    }
}

// --lm-head-chunks on the CUDA kernel set: the head and cross-entropy in 3 chunks of a 256-token
// batch (86, 86, 84 rows: offsets that are not multiples of a tile) give the same losses as the
// whole head (each row's logits are the same GEMM row), and gradients within the bounds of
// tests/test_lm_head_chunks.cpp: only the order of wte's head-gradient sum and the M of dln's GEMM
// change. Also against the CPU twin chunked the same way, as the training step above.
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
        auto gpu = make_cuda_backend(activation_dtype(p), 0, CudaOptions{});
        const auto whole = run(*gpu, 1), chunked = run(*gpu, 3);
        EXPECT_EQ(float_bits(chunked.first), float_bits(whole.first));
        const double bound = p == Precision::FP8 ? 0.1 : 1e-4;
        EXPECT_LE(max_rel_error(chunked.second.data(), whole.second.data(), whole.second.size()), bound);
        auto cpu = make_cpu_backend(activation_dtype(p));
        const auto cpu_chunked = run(*cpu, 3);
        EXPECT_NEAR(chunked.first, cpu_chunked.first, (p == Precision::FP8 ? 0.0625 : 0.002) * cpu_chunked.first);
    }
}
