// train_state.cpp — see train_state.h.
#include "checkpoint/train_state.h"

#include "utils.h"

#include <nlohmann/json.hpp>

namespace train_gpt {

std::string trainer_state_to_json(const TrainCounters& c, const std::string& flags_json) {
    nlohmann::ordered_json j{{"updates", c.updates}, {"skipped", c.skipped}, {"tokens", c.tokens},
                             {"seconds", c.seconds}};
    if (!flags_json.empty()) j["flags"] = nlohmann::ordered_json::parse(flags_json);
    return j.dump();
}

TrainCounters counters_from_json(const std::string& text) {
    try {
        auto j = nlohmann::json::parse(text);
        TrainCounters c;
        c.updates = j.at("updates").get<int64_t>();
        c.skipped = j.at("skipped").get<int64_t>();
        c.tokens = j.value("tokens", int64_t(0));
        c.seconds = j.value("seconds", 0.0);
        return c;
    } catch (const nlohmann::json::exception& e) {
        fail("checkpoint trainer state is malformed: %s", e.what());
    }
}

std::string run_flags_from_json(const std::string& text) {
    try {
        auto j = nlohmann::json::parse(text);
        return j.contains("flags") ? j["flags"].dump() : "";
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
