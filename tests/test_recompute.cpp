// test_recompute.cpp — --recompute (GPT's recompute level): backward computes again the
// activations the forward kept for one layer only — 1: the GELU output; 2: also the layernorm
// outputs (and in fp8 mode the E4M3 Xᵀ of qkv and fc). The recomputation runs the same ops on the
// same inputs, so training must not change by a single bit: losses, gradients, weights and the FP8
// scaling state are compared exactly, in every precision, over two optimizer steps with gradient
// accumulation (the first fp8 step takes just-in-time scales, the second delayed scales and the
// fused casts). Memory must shrink by what the levels drop.
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/gpt.h"
#include "tests/model_test_util.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

struct Trace {
    std::vector<float> losses, grads, weights;
    std::string fp8_state;
    size_t activation_bytes = 0;
};

// Two optimizer steps of two micro-batches each, then a forward on the updated weights.
Trace train(Precision p, int recompute, const GPTConfig& cfg, const std::vector<float>& init,
            const std::vector<int32_t>& tokens, int B, int T) {
    PrecisionConfig pc;
    pc.precision = p;
    auto backend = make_cpu_backend(activation_dtype(p));
    GPT model(cfg, *backend, B, T, pc, nullptr, 0, recompute);
    model.set_weights(init);
    const float S = p == Precision::FP16 ? 1024.0f : 1.0f;   // fp16 trains with a loss scale
    Trace t;
    t.activation_bytes = model.activation_bytes();
    for (int step = 0; step < 2; step++) {
        model.zero_grad();
        for (int micro = 0; micro < 2; micro++) {
            const int32_t* x = tokens.data() + (size_t)(2 * step + micro) * B * T;
            t.losses.push_back(model.forward(x, x + 1, B, T, S / (2.0f * B * T)));
            model.backward();
        }
        if (step == 0) t.grads = model.gradients();
        model.update(1e-3f, AdamWConfig{}, 1.0f / S, step + 1);
    }
    t.losses.push_back(model.forward(tokens.data(), tokens.data() + 1, B, T));
    t.weights = model.weights();
    t.fp8_state = model.fp8_state_json();
    return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class Recompute : public ::testing::TestWithParam<Precision> {};

}   // namespace

TEST_P(Recompute, ChangesNoBitOfTraining) {
    const Precision p = GetParam();
    const int B = 2, T = 16;
    const GPTConfig cfg = gpt_config_from_spec("d2", 300, T, 64, 2);
    const std::vector<float> init = initial_weights(cfg, B, T, 42);
    const std::vector<int32_t> tokens = random_tokens((size_t)4 * B * T + 1, cfg.vocab_size, 7);

    const Trace none = train(p, 0, cfg, init, tokens, B, T);
    for (int level : {1, 2}) {
        SCOPED_TRACE(std::string(precision_name(p)) + " --recompute " + std::to_string(level));
        const Trace again = train(p, level, cfg, init, tokens, B, T);
        EXPECT_TRUE(same_bits(again.losses, none.losses));
        EXPECT_TRUE(same_bits(again.grads, none.grads));
        EXPECT_TRUE(same_bits(again.weights, none.weights));
        EXPECT_EQ(again.fp8_state, none.fp8_state);
        // fp8 keeps no 16-bit GELU output to drop: level 1 saves nothing there
        if (p == Precision::FP8 && level == 1)
            EXPECT_EQ(again.activation_bytes, none.activation_bytes);
        else
            EXPECT_LT(again.activation_bytes, none.activation_bytes);
    }
}

INSTANTIATE_TEST_SUITE_P(AllPrecisions, Recompute,
                         ::testing::Values(Precision::FP32, Precision::BF16, Precision::FP16, Precision::FP8),
                         [](const ::testing::TestParamInfo<Precision>& info) { return precision_name(info.param); });

// What each level keeps: level 1 drops L−1 layers of the GELU output (B·T·4C values each), level 2
// also L−1 layers of ln1 and ln2 (B·T·C each). In fp8 mode with every GEMM in FP8 those 16-bit
// tensors are not kept at all; level 2 then drops the E4M3 Xᵀ of qkv and fc instead (B·T·C bytes
// each per layer), which backward casts again into one layer's buffer.
TEST(RecomputeMemory, EachLevelDropsWhatItRecomputes) {
    const GPTConfig cfg = gpt_config_from_spec("d12", 512, 64, 128, 2);
    const size_t L = cfg.n_layer, C = cfg.n_embd, BT = 4 * 64;
    auto bytes = [&](Precision p, int recompute) {
        PrecisionConfig pc;
        pc.precision = p;
        return GPT::activation_bytes_for(cfg, 4, 64, pc, recompute);
    };
    const size_t A = 2;   // bf16
    EXPECT_EQ(bytes(Precision::BF16, 0) - bytes(Precision::BF16, 1), (L - 1) * BT * 4 * C * A);
    EXPECT_EQ(bytes(Precision::BF16, 1) - bytes(Precision::BF16, 2), 2 * (L - 1) * BT * C * A);
    EXPECT_EQ(bytes(Precision::FP8, 0), bytes(Precision::FP8, 1));   // fcproj's input is E4M3 already
    // level 2: the kept Xᵀ of qkv and fc go (2·L·B·T·C bytes); their recast needs one layer's
    // buffer, which attproj's and fcproj's recast (B·T·4C, the largest) already provides
    EXPECT_EQ(bytes(Precision::FP8, 1) - bytes(Precision::FP8, 2), 2 * L * BT * C);
}

// Through the trainer: -r 2 trains to the same losses as -r 0 and reports less activation memory.
TEST(RecomputeCli, TrainsTheSameAndSaysHowMuchItSaves) {
    ScratchDir dir;
    std::string text;
    for (int i = 0; i < 100; i++)
        text += "And the evening and the morning were the first day. ";
    const std::vector<uint32_t> ids(text.begin(), text.end());
    write_shard(dir.file("r_train_000000.bin"), ids.data(), (int64_t)ids.size(), 2);
    Tokenizer::byte_level().save(dir.file("tokenizer.bin"));
    auto run = [&](int level, std::string* output) {
        const std::string out = dir.file("r" + std::to_string(level));
        return run_command(repo_root() + "/train_gpt -i '" + dir.file("r_train_*.bin") + "' -j '' --tokenizer '" +
                               dir.file("tokenizer.bin") + "' -e d2 -b 4 -t 32 -x 4 -g 0 --threads 1 -p bf16 -r " +
                               std::to_string(level) + " -o '" + out + "'",
                           output);
    };
    auto losses = [&](int level) { return step_losses(dir.file("r" + std::to_string(level) + "/log.jsonl")); };
    auto memory = [](const std::string& output) {
        const size_t at = output.find("memory: activations ");
        return at == std::string::npos ? -1.0 : std::stod(output.substr(at + 20));
    };
    std::string out0, out2;
    ASSERT_EQ(run(0, &out0), 0) << out0;
    ASSERT_EQ(run(2, &out2), 0) << out2;
    EXPECT_EQ(losses(0).size(), 4u);
    EXPECT_EQ(losses(2), losses(0));   // exactly: the same bits
    EXPECT_GT(memory(out0), 0.0);
    EXPECT_LT(memory(out2), memory(out0));
}
