// test_cuda_generate.cu — sampling with the KV cache (model/generate.h) on the CUDA kernel set
// against the CPU twin: the same GPT weights and tokens, a prompt in one pass then one token at a
// time, in fp32, bf16 and fp16. Compared: the logits after the prompt and after every token
// (normwise, the sampling-logits bounds of test_cuda_model.cu, from tests/tolerances.h: fp32
// fp32_logits_bound, 16 bits √n·2u over the forward's n = 10L + 2 stored tensors), and in fp32
// the greedy tokens. SKIPPED without a GPU.
#include "tests/cuda/cuda_test_util.h"

#include "model/generate.h"
#include "model/gpt.h"
#include "tests/tolerances.h"

#include <algorithm>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

struct Decoded {
    std::vector<std::vector<float>> logits;   // after the prompt, then after each fed token
    std::vector<int> greedy;
};

Decoded decode(Backend& backend, Precision p, const GPTConfig& cfg, const std::vector<float>& weights,
               const std::vector<int>& prompt, const std::vector<int>& fed) {
    PrecisionConfig pc;
    pc.precision = p;
    GPT model(cfg, backend, 1, 1, pc);
    model.set_weights(weights);
    Generator gen(model, backend);
    Decoded d;
    d.logits.push_back(gen.feed(prompt));
    for (int t : fed)
        d.logits.push_back(gen.feed({t}));
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    Rng rng(1);
    d.greedy = gen.generate(prompt, 24, greedy, rng);
    return d;
}

class CudaGenerateTest : public CudaTest, public ::testing::WithParamInterface<Precision> {};

}   // namespace

TEST_P(CudaGenerateTest, KvCacheDecodingMatchesTheCpuTwin) {
    const Precision p = GetParam();
    // head size 64, V not a multiple of 128, a position table the decode runs past (sliding window)
    const GPTConfig cfg = gpt_config_from_spec("d2", 1000, 48, 128, 2);
    const double tol = p == Precision::FP32 ? fp32_logits_bound(cfg, cfg.max_seq_len)
                                            : std::sqrt(10.0 * cfg.n_layer + 2) * one_flip(storage_unit_roundoff(p));
    Random r(seed_);
    std::vector<float> weights;
    {
        auto init_backend = make_cpu_backend(DType::F32);
        GPT init(cfg, *init_backend, 1, 1);
        init.init_weights(seed_);
        weights = init.weights();
    }
    std::vector<int> prompt, fed;
    for (int32_t t : r.ints(11, cfg.vocab_size))
        prompt.push_back(t);
    for (int32_t t : r.ints(45, cfg.vocab_size))
        fed.push_back(t);   // 11 + 45 > 48: the window slides
    auto cpu = make_cpu_backend(activation_dtype(p));
    auto gpu = make_cuda_backend(activation_dtype(p), 0);
    const Decoded ref = decode(*cpu, p, cfg, weights, prompt, fed);
    const Decoded got = decode(*gpu, p, cfg, weights, prompt, fed);
    double worst = 0;
    for (size_t i = 0; i < ref.logits.size(); i++) {
        worst = std::max(worst, expect_close(std::string(precision_name(p)) + " logits after " +
                                                 std::to_string(prompt.size() + i) + " tokens",
                                             got.logits[i], ref.logits[i], tol));
    }
    std::printf("%s: KV-cache logits, CUDA vs CPU, worst normwise difference %.2e (bound %.1e)\n", precision_name(p),
                worst, tol);
    if (p == Precision::FP32) EXPECT_EQ(got.greedy, ref.greedy);
}

INSTANTIATE_TEST_SUITE_P(AllPrecisions, CudaGenerateTest,
                         ::testing::Values(Precision::FP32, Precision::BF16, Precision::FP16),
                         [](const ::testing::TestParamInfo<Precision>& info) { return precision_name(info.param); });
