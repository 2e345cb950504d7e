// model_test_util.h — helpers of the tests that train a small GPT in-process or through the
// trainer: one set of initial weights for two models, random token ids, and the records (and step
// losses) of a run's log.jsonl.
#pragma once

#include "model/gpt.h"
#include "rng.h"
#include "test_util.h"

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
    for (int32_t& id : tokens)
        id = (int32_t)(rng.uniform() * vocab_size) % vocab_size;
    return tokens;
}

// The records of one type ("step", "val", "sample", "fp8", ...) of a run's log.jsonl, in order.
inline std::vector<nlohmann::json> log_records(const std::string& log_path, const std::string& type) {
    std::vector<nlohmann::json> records;
    std::istringstream log(read_text(log_path));
    for (std::string line; std::getline(log, line);) {
        auto j = nlohmann::json::parse(line);
        if (j["type"] == type) records.push_back(std::move(j));
    }
    return records;
}

// The loss of every "step" record of a log.jsonl, in order.
inline std::vector<double> step_losses(const std::string& log_path) {
    std::vector<double> losses;
    for (const auto& j : log_records(log_path, "step"))
        losses.push_back(j["loss"].get<double>());
    return losses;
}

}   // namespace train_gpt::test
