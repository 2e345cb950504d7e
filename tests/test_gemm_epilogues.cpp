// test_gemm_epilogues.cpp — --gemm-epilogues (model/epilogue_block_ops.h) on the CPU kernel set,
// whose twins specify what cuBLASLt's epilogues compute (cuda/matmul_epilogues.cuh):
//   * the ops round once: matmul_forward_gelu's out is the GELU of the FP32 GEMM result rounded
//     once, bit for bit, and its pre is matmul_forward's output; matmul_backward_dgelu's dinp is
//     gelu'(pre) times the FP32 product rounded once. In 16 bits some elements must differ from
//     the two-rounding ops' (else the test could not tell them apart); in fp32 none may;
//   * fp32 training is bit-identical to BlockOps': the bias gradients move from the layernorm and
//     GELU backward passes to the GEMM backward, but sum the same values in the same order;
//   * through the binary, the step calls the epilogue ops and no GELU pass (--trace-ops), and the
//     combinations it cannot run are refused before anything is built.
// bf16/fp16 training with the epilogues stays within the formats' bounds of fp32: test_precision.cpp.
#include "cpu/kernels.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/gpt.h"
#include "tests/model_test_util.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

template <typename T>
std::vector<T> stored(const std::vector<float>& x) {
    std::vector<T> out(x.size());
    for (size_t i = 0; i < x.size(); i++)
        out[i] = cpu::store<T>(x[i]);
    return out;
}
template <typename T>
std::vector<float> widened(const std::vector<T>& x) {
    std::vector<float> out(x.size());
    for (size_t i = 0; i < x.size(); i++)
        out[i] = cpu::load(x[i]);
    return out;
}
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
template <typename T>
size_t count_differing(const std::vector<T>& a, const std::vector<T>& b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); i++)
        n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
    return n;
}

std::vector<float> normal(size_t n, double sd, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> x(n);
    for (float& v : x)
        v = (float)(sd * rng.normal());
    return x;
}

constexpr int kN = 37, kC = 48, kOC = 136;   // an N that is no multiple of anything

// matmul_forward_gelu<T> against the two ways to build it from the FP32 ops; returns how many
// outputs differ from matmul_forward + gelu_forward in T
template <typename T>
size_t check_forward_gelu() {
    const std::vector<T> inp = stored<T>(normal((size_t)kN * kC, 1.0, 1)),
                         w = stored<T>(normal((size_t)kOC * kC, 0.3, 2));
    const std::vector<T> bias = stored<T>(normal(kOC, 0.5, 3));
    std::vector<T> out(kN * kOC), pre(kN * kOC), two_out(kN * kOC), two_pre(kN * kOC);
    cpu::matmul_forward_gelu(out.data(), pre.data(), inp.data(), w.data(), bias.data(), kN, kC, kOC);
    cpu::matmul_forward(two_pre.data(), inp.data(), w.data(), bias.data(), kN, kC, kOC);
    cpu::gelu_forward(two_out.data(), two_pre.data(), two_out.size());
    EXPECT_TRUE(same_bits(pre, two_pre)) << "pre is matmul_forward's output";
    // the FP32 result, then its GELU in FP32, rounded once into T
    std::vector<float> z(kN * kOC), gz(kN * kOC);
    cpu::matmul_forward(z.data(), widened(inp).data(), widened(w).data(), widened(bias).data(), kN, kC, kOC);
    cpu::gelu_forward(gz.data(), z.data(), gz.size());
    EXPECT_TRUE(same_bits(out, stored<T>(gz))) << "out = round(gelu(z)), z the FP32 GEMM result";
    return count_differing(out, two_out);
}

// matmul_backward_dgelu<T> likewise; returns how many dinp differ from matmul_backward + gelu_backward
template <typename T>
size_t check_backward_dgelu() {
    const std::vector<T> dout = stored<T>(normal((size_t)kN * kOC, 1.0, 4)),
                         w = stored<T>(normal((size_t)kOC * kC, 0.3, 5));
    const std::vector<T> pre = stored<T>(normal((size_t)kN * kC, 2.0, 6));
    std::vector<T> dinp(kN * kC), two_g(kN * kC), two_dinp(kN * kC);
    cpu::matmul_backward_dgelu(dinp.data(), dout.data(), w.data(), pre.data(), kN, kC, kOC);
    std::vector<float> dw_unused((size_t)kOC * kC);
    std::vector<T> inp_unused(kN * kC);
    cpu::matmul_backward(two_g.data(), dw_unused.data(), (float*)nullptr, dout.data(), inp_unused.data(), w.data(), kN,
                         kC, kOC);
    cpu::gelu_backward(two_dinp.data(), pre.data(), two_g.data(), two_dinp.size());
    std::vector<float> g(kN * kC), dg(kN * kC), dwf((size_t)kOC * kC);
    const std::vector<float> inpf(kN * kC);
    cpu::matmul_backward(g.data(), dwf.data(), (float*)nullptr, widened(dout).data(), inpf.data(), widened(w).data(),
                         kN, kC, kOC);
    cpu::gelu_backward(dg.data(), widened(pre).data(), g.data(), dg.size());
    EXPECT_TRUE(same_bits(dinp, stored<T>(dg))) << "dinp = round(gelu'(pre) · g), g the FP32 product";
    return count_differing(dinp, two_dinp);
}

}   // namespace

TEST(GemmEpilogues, TheGeluOpsRoundOnce) {
    EXPECT_EQ(check_forward_gelu<float>(), 0u) << "fp32: nothing to round, the separate ops' bits";
    EXPECT_EQ(check_backward_dgelu<float>(), 0u);
    // in 16 bits the second rounding of the separate ops must show somewhere in 5032 values
    EXPECT_GT(check_forward_gelu<bf16>(), 0u);
    EXPECT_GT(check_forward_gelu<fp16>(), 0u);
    EXPECT_GT(check_backward_dgelu<bf16>(), 0u);
    EXPECT_GT(check_backward_dgelu<fp16>(), 0u);
}

namespace {
struct Trained {
    std::vector<float> losses, grads, weights;
};
// Two optimizer steps of two micro-batches each (the bias gradients accumulate), then a forward.
Trained train(bool gemm_epilogues, const GPTConfig& cfg, const std::vector<float>& init,
              const std::vector<int32_t>& tokens, int B, int T) {
    auto backend = make_cpu_backend(DType::F32);
    GPT model(cfg, *backend, B, T, {}, nullptr, 0, 0, 1, gemm_epilogues);
    model.set_weights(init);
    Trained t;
    for (int step = 0; step < 2; step++) {
        model.zero_grad();
        for (int micro = 0; micro < 2; micro++) {
            const int32_t* x = tokens.data() + (size_t)(2 * step + micro) * B * T;
            t.losses.push_back(model.forward(x, x + 1, B, T, 1.0f / (2.0f * B * T)));
            model.backward();
        }
        if (step == 0) t.grads = model.gradients();
        model.update(1e-3f, AdamWConfig{}, 1.0f, step + 1);
    }
    t.losses.push_back(model.forward(tokens.data(), tokens.data() + 1, B, T));
    t.weights = model.weights();
    return t;
}
}   // namespace

TEST(GemmEpilogues, Fp32TrainingIsBitIdenticalToTheSeparateOps) {
    const int B = 2, T = 16;
    const GPTConfig cfg = gpt_config_from_spec("d2", 300, T, 64, 2);
    const std::vector<float> init = initial_weights(cfg, B, T, 42);
    const std::vector<int32_t> tokens = random_tokens((size_t)4 * B * T + 1, cfg.vocab_size, 7);
    const Trained separate = train(false, cfg, init, tokens, B, T), folded = train(true, cfg, init, tokens, B, T);
    EXPECT_TRUE(same_bits(folded.losses, separate.losses));
    EXPECT_TRUE(same_bits(folded.grads, separate.grads));
    EXPECT_TRUE(same_bits(folded.weights, separate.weights));
}

TEST(GemmEpilogues, ModelRefusesWhatItCannotFold) {
    const GPTConfig cfg = gpt_config_from_spec("d2", 300, 16, 64, 2);
    auto bf16_backend = make_cpu_backend(DType::BF16);
    PrecisionConfig bf16;
    bf16.precision = Precision::BF16;
    EXPECT_CONTAINS(error_of([&] { GPT(cfg, *bf16_backend, 2, 16, bf16, nullptr, 0, 1, 1, true); }),
                    "--gemm-epilogues with --recompute 1");
    PrecisionConfig fp8;
    fp8.precision = Precision::FP8;
    EXPECT_CONTAINS(error_of([&] { GPT(cfg, *bf16_backend, 2, 16, fp8, nullptr, 0, 0, 1, true); }),
                    "--gemm-epilogues: for fp32, bf16 and fp16 (fp8");
}

// ---- through the binary ---------------------------------------------------------------------

namespace {
struct Corpus {
    ScratchDir dir;
    Corpus() {
        std::string text;
        for (int i = 0; i < 200; i++)
            text += "And God said, Let there be light. ";
        std::vector<uint32_t> tokens(text.begin(), text.end());
        write_shard(dir.file("train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
        Tokenizer::byte_level().save(dir.file("tokenizer.bin"));
    }
    std::string command(const std::string& out, const std::string& extra) const {
        return train_gpt_binary() + " --device cpu --threads 1 -i '" + dir.file("train_*.bin") +
               "' -j '' --tokenizer '" + dir.file("tokenizer.bin") + "' -e d2 --n-embd 32 -b 2 -t 16 -g 0 -o '" +
               dir.file(out) + "' " + extra + " 2>&1";
    }
};
}   // namespace

// The step with the flag calls the epilogue ops and no GELU pass; every block GEMM's backward sums
// its bias gradient, no layernorm backward does; fp32's losses are the separate ops' to the bit.
TEST(GemmEpilogues, TheTrainerRunsTheFoldedStep) {
    Corpus c;
    std::string output;
    ASSERT_EQ(run_command(c.command("folded",
                                    "-p fp32 -x 3 --gemm-epilogues true --trace-ops '" + c.dir.file("trace.txt") + "'"),
                          &output),
              0)
        << output;
    ASSERT_EQ(run_command(c.command("separate", "-p fp32 -x 3"), &output), 0) << output;
    const std::string trace = read_text(c.dir.file("trace.txt"));
    EXPECT_CONTAINS(trace, "matmul_forward_gelu N=32 C=32 OC=128 bias");
    EXPECT_CONTAINS(trace, "matmul_backward_dgelu N=32 C=128 OC=32");
    EXPECT_EQ(trace.find("gelu_forward"), std::string::npos) << trace;
    EXPECT_EQ(trace.find("gelu_backward"), std::string::npos) << trace;
    EXPECT_EQ(trace.find("dinp_sums"), std::string::npos) << trace;
    size_t with_dbias = 0;
    for (size_t at = trace.find("dbias"); at != std::string::npos; at = trace.find("dbias", at + 1))
        with_dbias++;
    EXPECT_EQ(with_dbias, 3u * 4 * 2) << "4 block GEMMs × 2 layers per step, 3 steps";
    const std::vector<double> folded = step_losses(c.dir.file("folded/log.jsonl"));
    const std::vector<double> separate = step_losses(c.dir.file("separate/log.jsonl"));
    ASSERT_EQ(folded.size(), 3u);
    EXPECT_EQ(folded, separate);
    const auto config = nlohmann::json::parse(read_text(c.dir.file("folded/config.json")));
    EXPECT_EQ(config["gemm_epilogues"], true);
    // bf16 runs too (its bounds: test_precision.cpp)
    ASSERT_EQ(run_command(c.command("bf16", "-p bf16 -x 3 --gemm-epilogues true"), &output), 0) << output;
}

TEST(GemmEpilogues, TheTrainerRefusesWhatItCannotFold) {
    Corpus c;
    const struct {
        const char* flags;
        const char* says;
    } cases[] = {
        {"-p fp8 --gemm-epilogues true", "--gemm-epilogues is for fp32, bf16 and fp16; -p fp8"},
        {"-p tf32 --gemm-epilogues true", "--gemm-epilogues is for fp32, bf16 and fp16; -p tf32"},
        {"-p bf16 -r 1 --gemm-epilogues true", "--gemm-epilogues with --recompute 1"},
    };
    for (const auto& k : cases) {
        SCOPED_TRACE(k.flags);
        const CommandResult r = run_timed(c.command("out", std::string("-x 2 ") + k.flags));
        expect_refused(r, {k.says});
        EXPECT_FALSE(std::filesystem::exists(c.dir.file("out/log.jsonl"))) << "refused before anything is written";
    }
}
