// test_generate.cpp — sampling with a KV cache (model/generate.h) against the full forward of
// the same model (gpt.h) on the CPU kernel set: the logits after every token, greedy sequences,
// the sliding window past the position table, and seeded sampling.
//
// Tolerances (tests/tolerances.h). The cache path computes what the full forward computes, op for
// op, with the attention rows bit-identical by construction (cpu::attention_decode); only the
// GEMMs differ, which sum the same products over fewer rows (the BLAS may block, and so sum, a
// 1-row GEMM differently): a reordered FP32 sum of at most K = 4C terms, √K·u, in each of the
// n = 10L + 2 stored tensors of the forward (per layer ln1, qkv, atty, attproj, residual2, ln2,
// fch, fch_gelu, fcproj, residual3; then lnf and the logits), in quadrature: √n·√K·u normwise.
// In bf16 such a reordered output may round to the neighbouring bf16 value instead, one flip
// (2u) in each of the n tensors: √n·2u; the greedy tokens are still required equal (the closest
// call between the top two logits decides whether a flip could change one; GreedyTokens... below
// checks the tokens through a whole sequence).
#include "model/generate.h"
#include "model/gpt.h"
#include "rng.h"
#include "test_util.h"
#include "tests/tolerances.h"

#include <algorithm>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

struct TinyModel {
    GPTConfig cfg;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<GPT> model;
    TinyModel(DType dtype, int max_T) {
        cfg = gpt_config_from_spec("d2", 97, max_T, 64, 4);
        backend = make_cpu_backend(dtype);
        PrecisionConfig p;
        p.precision = dtype == DType::F32 ? Precision::FP32 : Precision::BF16;
        model = std::make_unique<GPT>(cfg, *backend, 1, max_T, p);
        model->init_weights(5);
        // larger weights than the initialisation's: peaked, position-dependent logits
        std::vector<float> w = model->weights();
        Rng rng(6);
        for (float& x : w)
            x += 0.05f * (float)rng.normal();
        model->set_weights(w);
    }
    // logits after the last of `tokens` by the full forward (the last max_T tokens of them)
    std::vector<float> full_logits(std::vector<int> tokens) const {
        if ((int)tokens.size() > cfg.max_seq_len) tokens.erase(tokens.begin(), tokens.end() - cfg.max_seq_len);
        std::vector<int32_t> in(tokens.begin(), tokens.end());
        model->forward(in.data(), nullptr, 1, (int)in.size());
        return model->logits_at(0, (int)in.size() - 1);
    }
};

// The normwise bound on the cache path's logits against the full forward's (the header's).
double logits_bound(DType dtype, const GPTConfig& cfg) {
    const double n = 10.0 * cfg.n_layer + 2;
    return dtype == DType::F32 ? std::sqrt(n) * reordered_fp32_sum(4.0 * cfg.n_embd)
                               : std::sqrt(n) * one_flip(kUnitRoundoffBf16);
}

int argmax(const std::vector<float>& v) { return (int)(std::max_element(v.begin(), v.end()) - v.begin()); }

std::vector<int> random_tokens(int n, uint64_t seed, int V) {
    Rng rng(seed);
    std::vector<int> t(n);
    for (int& x : t)
        x = (int)rng.below(V);
    return t;
}

}   // namespace

TEST(Generate, KvCacheLogitsAreTheFullForwardsAfterEveryToken) {
    for (DType dtype : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(dtype_name(dtype));
        TinyModel s(dtype, 48);
        const double bound = logits_bound(dtype, s.cfg);
        Generator gen(*s.model, *s.backend);
        const std::vector<int> tokens = random_tokens(48, 7, s.cfg.vocab_size);
        // a prompt of 9 tokens in one pass, then one token at a time
        std::vector<int> seen(tokens.begin(), tokens.begin() + 9);
        std::vector<float> got = gen.feed(seen);
        double worst = 0;
        for (size_t t = 9;; t++) {
            const std::vector<float> want = s.full_logits(seen);
            const double err = max_rel_error(got.data(), want.data(), want.size());
            worst = std::max(worst, err);
            EXPECT_LE(err, bound) << "after " << seen.size() << " tokens";
            if (t == tokens.size()) break;
            seen.push_back(tokens[t]);
            got = gen.feed({tokens[t]});
        }
        EXPECT_EQ(gen.cached(), 48);
        std::printf(
            "%s: KV cache vs full forward, worst normwise logit difference %.2e over 40 positions (bound %.2e)\n",
            dtype_name(dtype), worst, bound);
    }
}

TEST(Generate, GreedyTokensAreTheFullForwardsIncludingPastThePositionTable) {
    for (DType dtype : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(dtype_name(dtype));
        TinyModel s(dtype, 32);
        Generator gen(*s.model, *s.backend);
        SamplingParams greedy;
        greedy.temperature = 0.0f;
        Rng rng(1);
        const std::vector<int> prompt = random_tokens(5, 8, s.cfg.vocab_size);
        const std::vector<int> got = gen.generate(prompt, 45, greedy, rng);   // 50 > 32 positions: the window slides
        // the same tokens, except where the full forward's top two logits are so close that the
        // bound above allows either (then the generator's own token is followed): in fp32 that
        // never happens here, and at most rarely in bf16
        const double bound = logits_bound(dtype, s.cfg);
        std::vector<int> seq = prompt;
        int near_ties = 0;
        for (int i = 0; i < 45; i++) {
            const std::vector<float> logits = s.full_logits(seq);
            const int want = argmax(logits);
            if (got[i] != want) {
                double norm = 0;
                for (float x : logits)
                    norm += (double)x * x;
                EXPECT_LE(logits[want] - logits[got[i]], 2 * bound * std::sqrt(norm)) << "token " << i;
                near_ties++;
            }
            seq.push_back(got[i]);
        }
        EXPECT_LE(near_ties, dtype == DType::F32 ? 0 : 2);
        EXPECT_EQ(gen.cached(), 32);
        EXPECT_EQ(gen.context(), std::vector<int>(seq.end() - 33, seq.end() - 1)) << "the last 32 tokens fed";
    }
}

TEST(Generate, SamplingIsReproducibleInItsSeedAndUsesTheFilters) {
    TinyModel s(DType::F32, 40);
    Generator gen(*s.model, *s.backend);
    SamplingParams p;
    p.top_k = 5;
    p.top_p = 0.9f;
    auto run = [&](uint64_t seed) {
        Rng rng(seed);
        return gen.generate({3, 1, 4}, 30, p, rng);
    };
    EXPECT_EQ(run(42), run(42));
    EXPECT_NE(run(42), run(43));
    // every token is among the top 5 of the full forward's logits at its position
    const std::vector<int> got = run(44);
    std::vector<int> seq = {3, 1, 4};
    for (int id : got) {
        std::vector<float> logits = s.full_logits(seq);
        std::vector<float> sorted = logits;
        std::sort(sorted.begin(), sorted.end(), std::greater<float>());
        EXPECT_GE(logits[id], sorted[4]) << "token " << id << " is outside the top 5";
        seq.push_back(id);
    }
    EXPECT_CONTAINS(error_of([&] { gen.feed(std::vector<int>{s.cfg.vocab_size}); }), "outside the model's vocabulary");
    EXPECT_CONTAINS(error_of([&] {
                        Rng rng(1);
                        gen.generate({}, 3, p, rng);
                    }),
                    "empty prompt");
}
