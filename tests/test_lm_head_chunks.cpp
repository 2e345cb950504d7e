// test_lm_head_chunks.cpp — --lm-head-chunks (GPT's lm_head_chunks): the LM head and the
// cross-entropy over the tokens in chunks, through a logits buffer of one chunk's rows, with the
// head's backward run in the forward chunk by chunk.
//
// Each row's logits, loss and dlogits are the same computation on the same row whatever the
// chunking; wte's head gradient, a sum over the tokens, is summed chunk by chunk, and dln's rows
// come from GEMMs of fewer rows. So: the same losses, every gradient within what another FP32
// summation order gives (and what follows from it in each precision), and a logits buffer of
// ⌈B·T / chunks⌉ rows. Through the trainer: the same run's losses.
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/gpt.h"
#include "model/layout.h"
#include "tests/model_test_util.h"
#include "tests/tolerances.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

struct Pass {
    float loss = 0;
    std::vector<float> grads;
    size_t activation_bytes = 0;
};

// zero_grad, then two micro-batches of forward + backward (the gradients accumulate across them).
Pass run(Precision p, int chunks, const GPTConfig& cfg, const std::vector<float>& init,
         const std::vector<int32_t>& tokens, int B, int T) {
    PrecisionConfig pc;
    pc.precision = p;
    auto backend = make_cpu_backend(activation_dtype(p));
    GPT model(cfg, *backend, B, T, pc, nullptr, 0, 0, chunks);
    model.set_weights(init);
    const float S = p == Precision::FP16 ? 1024.0f : 1.0f;   // fp16 trains with a loss scale
    Pass r;
    r.activation_bytes = model.activation_bytes();
    model.zero_grad();
    for (int micro = 0; micro < 2; micro++) {
        const int32_t* x = tokens.data() + (size_t)micro * B * T;
        r.loss += model.forward(x, x + 1, B, T, S / (2.0f * B * T));
        model.backward();
    }
    r.grads = model.gradients();
    return r;
}

class LmHeadChunks : public ::testing::TestWithParam<Precision> {};

}   // namespace

TEST_P(LmHeadChunks, SameLossesAndGradients) {
    const Precision p = GetParam();
    const int B = 2, T = 24;   // 48 tokens: 5 chunks leave a ragged last chunk (10, 10, 10, 10, 8)
    const GPTConfig cfg = gpt_config_from_spec("d2", 300, T, 64, 2);
    const std::vector<float> init = initial_weights(cfg, B, T, 42);
    const std::vector<int32_t> tokens = random_tokens((size_t)2 * B * T + 1, cfg.vocab_size, 11);

    const auto offsets = param_tensor_offsets(cfg);
    // Bound on each gradient tensor's normwise relative difference (tests/tolerances.h). Chunking
    // changes two FP32 computations only: wte's head gradient is summed chunk by chunk, and dln's
    // rows come from GEMMs of fewer rows (K = Vp terms each), which the BLAS may block, and so sum,
    // in another order. In fp32 that is a reordered sum of K terms, √K·u, carried down a chain of
    // n stored tensors: √n·√K·u. In 16 bits the same last-bit change flips an occasional rounding
    // of dln, and each of the n stored tensors below it may flip too: at most one ulp (2u) each, in
    // quadrature √n·2u. A wrong row or chunk boundary makes whole rows wrong: O(1), far above both.
    // fp8: the dY casts' scales follow their amax, so a last-bit change rescales whole E5M2 tensors
    // and flips many of their roundings (2u = 25% each), and the flip bound says nothing; what
    // holds is the recipe's own error against fp32 (tests/test_precision.cpp,
    // ModesMatchFp32WithinFormatTolerances: √6·u(E5M2) per gradient tensor), so both the whole
    // and the chunked fp8 gradients are compared with fp32's, each within that bound.
    const int n = backward_chain_length(cfg.n_layer);
    const double bound = p == Precision::FP32  ? std::sqrt(n) * reordered_fp32_sum(cfg.padded_vocab_size)
                         : p == Precision::FP8 ? std::sqrt(6.0) * kUnitRoundoffE5M2
                                               : std::sqrt(n) * one_flip(storage_unit_roundoff(p));
    const Pass fp32 = run(Precision::FP32, 1, cfg, init, tokens, B, T);
    const Pass whole = run(p, 1, cfg, init, tokens, B, T);
    if (p == Precision::FP8) {
        for (int t = 0; t < kNumParamTensors; t++) {
            const size_t b = offsets[t], e = offsets[t + 1];
            EXPECT_LE(max_rel_error(whole.grads.data() + b, fp32.grads.data() + b, e - b), bound)
                << "one chunk: " << param_tensor_name(t);
        }
    }
    for (int chunks : {2, 5, 48, 100}) {   // 100 > B·T: chunks of one row, the rest empty
        SCOPED_TRACE(std::string(precision_name(p)) + " --lm-head-chunks " + std::to_string(chunks));
        const Pass chunked = run(p, chunks, cfg, init, tokens, B, T);
        EXPECT_EQ(chunked.loss, whole.loss);
        ASSERT_EQ(chunked.grads.size(), whole.grads.size());
        const Pass& reference = p == Precision::FP8 ? fp32 : whole;
        double worst = 0;
        for (int t = 0; t < kNumParamTensors; t++) {
            const size_t b = offsets[t], e = offsets[t + 1];
            const double err = max_rel_error(chunked.grads.data() + b, reference.grads.data() + b, e - b);
            EXPECT_LE(err, bound) << param_tensor_name(t);
            worst = std::max(worst, err);
        }
        std::printf("%s, %d chunks: worst gradient tensor %.2e against %s (bound %.2e)\n", precision_name(p), chunks,
                    worst, p == Precision::FP8 ? "fp32" : "one chunk", bound);
        EXPECT_LT(chunked.activation_bytes, whole.activation_bytes);
    }
}

INSTANTIATE_TEST_SUITE_P(AllPrecisions, LmHeadChunks,
                         ::testing::Values(Precision::FP32, Precision::BF16, Precision::FP16, Precision::FP8),
                         [](const ::testing::TestParamInfo<Precision>& info) { return precision_name(info.param); });

// The logits buffer holds ⌈B·T / chunks⌉ rows of Vp values: that, and nothing else, is what the
// chunks save.
TEST(LmHeadChunksMemory, LogitsTakeOneChunksRows) {
    const GPTConfig cfg = gpt_config_from_spec("d12", 50257, 1024);
    const size_t Vp = cfg.padded_vocab_size, BT = 16 * 1024;
    PrecisionConfig pc;
    pc.precision = Precision::BF16;
    const size_t whole = GPT::activation_bytes_for(cfg, 16, 1024, pc, 0, 1);
    for (int chunks : {2, 8, 3}) {
        const size_t rows = (BT + chunks - 1) / chunks;
        const size_t saved = BT * Vp * 2 - (rows * Vp * 2 + 63) / 64 * 64;
        EXPECT_EQ(whole - GPT::activation_bytes_for(cfg, 16, 1024, pc, 0, chunks), saved) << chunks;
    }
}

// Without targets a chunked forward keeps no logits, and logits_at says so rather than read a
// stale chunk; an invalid chunk count is refused.
TEST(LmHeadChunksApi, NoLogitsWithoutTargets) {
    const GPTConfig cfg = gpt_config_from_spec("d2", 300, 8, 64, 2);
    auto backend = make_cpu_backend(DType::F32);
    GPT model(cfg, *backend, 1, 8, {}, nullptr, 0, 0, 2);
    model.init_weights(1);
    const std::vector<int32_t> x(8, 3);
    EXPECT_EQ(model.forward(x.data(), nullptr, 1, 8), 0.0f);
    EXPECT_CONTAINS(error_of([&] { model.logits_at(0, 0); }), "no logits are kept");
    EXPECT_CONTAINS(error_of([&] { GPT bad(cfg, *backend, 1, 8, {}, nullptr, 0, 0, 0); }), "--lm-head-chunks 0");
}

// Through the trainer: 6 steps of the same fp32 run with the head in one piece and in 3 chunks (of
// a batch of 2·16 tokens: 11, 11, 10). Step 0's loss, before any update, is the same exactly. After
// it, each step's gradients differ by at most δ = √n·√K·u (the bound above), and the losses by
// what tests/tolerances.h's trained_loss_bounds gives for δ, plus one FP32 reordering of the
// loss's own mean over 32 tokens.
TEST(LmHeadChunksTrainer, SameRunSameLosses) {
    ScratchDir dir;
    std::string text;
    for (int i = 0; i < 200; i++)
        text += "In the beginning was the word. ";
    const std::vector<uint32_t> tokens(text.begin(), text.end());
    write_shard(dir.file("tiny_train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
    write_shard(dir.file("tiny_val_000000.bin"), tokens.data(), 2000, 2);
    Tokenizer::byte_level().save(dir.file("tokenizer.bin"));
    auto losses = [&](const std::string& chunks) {
        const std::string out = dir.file("out" + chunks);
        std::string output;
        const int rc = run_command(train_gpt_binary() + " -i '" + dir.file("tiny_train_*.bin") + "' -j '" +
                                       dir.file("tiny_val_*.bin") +
                                       "' -e d2 --n-embd 32 -b 2 -t 16 -m 2 -x 6 -v 0 "
                                       "-g 0 -o '" +
                                       out + "' --lm-head-chunks " + chunks,
                                   &output);
        EXPECT_EQ(rc, 0) << output;
        return step_losses(out + "/log.jsonl");
    };
    const std::vector<double> whole = losses("1"), chunked = losses("3");
    ASSERT_EQ(whole.size(), 6u);
    ASSERT_EQ(chunked.size(), 6u);
    EXPECT_EQ(chunked[0], whole[0]);                                    // before any update: the same loss exactly
    const GPTConfig cfg = gpt_config_from_spec("d2", 257, 16, 32, 2);   // -e d2 --n-embd 32, byte-level
    const double delta = std::sqrt(backward_chain_length(cfg.n_layer)) * reordered_fp32_sum(cfg.padded_vocab_size);
    const std::vector<double> bounds = trained_loss_bounds(whole, delta);
    for (size_t i = 1; i < whole.size(); i++) {
        EXPECT_NEAR(chunked[i], whole[i], bounds[i] + reordered_fp32_sum(32) * whole[i]) << "step " << i;
    }
    std::string output;
    EXPECT_NE(run_command(train_gpt_binary() + " --lm-head-chunks 0", &output), 0);
    EXPECT_CONTAINS(output, "--lm-head-chunks");
}
