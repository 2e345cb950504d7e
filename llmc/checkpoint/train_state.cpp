// train_state.cpp — see train_state.h.
#include "checkpoint/train_state.h"

#include "utils.h"

#include <nlohmann/json.hpp>

namespace train_gpt {

std::string counters_to_json(const TrainCounters& c) {
    return nlohmann::json{{"updates", c.updates}, {"skipped", c.skipped}}.dump();
}

TrainCounters counters_from_json(const std::string& text) {
    try {
        auto j = nlohmann::json::parse(text);
        return TrainCounters{j.at("updates").get<int64_t>(), j.at("skipped").get<int64_t>()};
    } catch (const nlohmann::json::exception& e) {
        fail("checkpoint trainer state is malformed: %s", e.what());
    }
}

std::string loss_scaler_to_json(const LossScaler& s) {
    return nlohmann::json{{"scale", s.scale()}, {"clean_streak", s.clean_streak()}, {"floor_streak", s.floor_streak()},
                          {"skipped", s.skipped_steps()}}.dump();
}

void loss_scaler_from_json(LossScaler& s, const std::string& text) {
    try {
        auto j = nlohmann::json::parse(text);
        s.restore(j.at("scale").get<float>(), j.at("clean_streak").get<int>(), j.at("floor_streak").get<int>(),
                  j.at("skipped").get<int64_t>());
    } catch (const nlohmann::json::exception& e) {
        fail("checkpoint loss-scaler state is malformed: %s", e.what());
    }
}

}  // namespace train_gpt
