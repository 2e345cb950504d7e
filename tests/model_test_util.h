// model_test_util.h — helpers of the tests that train a small GPT in-process or through the
// trainer and compare two ways of computing the same run: one set of initial weights for both,
// random token ids, and the step losses a run logged.
#pragma once

#include "model/gpt.h"
#include "rng.h"
#include "tests/test_util.h"

#include <nlohmann/json.hpp>

#include <sstream>

namespace train_gpt::test {

// The weights GPT::init_weights(seed) gives `cfg` (FP32; every precision's model takes them with
// set_weights, so two models start from the same point).
inline std::vector<float> initial_weights(const GPTConfig& cfg, int B, int T, uint64_t seed) {
    auto backend = make_cpu_backend(DType::F32);
    GPT model(cfg, *backend, B, T);
    model.init_weights(seed);
    return model.weights();
}

// n token ids drawn uniformly from [0, vocab_size).
inline std::vector<int32_t> random_tokens(size_t n, int vocab_size, uint64_t seed) {
    Rng rng(seed);
    std::vector<int32_t> tokens(n);
    for (int32_t& id : tokens) id = (int32_t)(rng.uniform() * vocab_size) % vocab_size;
    return tokens;
}

// The loss of every "step" record of a log.jsonl, in order.
inline std::vector<double> step_losses(const std::string& log_path) {
    std::vector<double> losses;
    std::istringstream log(read_text(log_path));
    for (std::string line; std::getline(log, line);) {
        const auto j = nlohmann::json::parse(line);
        if (j["type"] == "step") losses.push_back(j["loss"].get<double>());
    }
    return losses;
}

}  // namespace train_gpt::test
