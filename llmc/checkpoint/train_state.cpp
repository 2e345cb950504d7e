// train_state.cpp — see train_state.h.
#include "checkpoint/train_state.h"

#include "json_fields.h"
#include "utils.h"

#include <cfloat>
#include <chrono>
#include <climits>
#include <limits>
#include <random>

namespace train_gpt {

namespace {

nlohmann::json parse(const std::string& text, const std::string& origin, const char* field) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail("%s: \"%s\" is not valid JSON (%s)", origin.c_str(), field, cut_text(e.what()).c_str());
    }
}

}   // namespace

std::string trainer_state_to_json(const TrainCounters& c, const std::string& flags_json,
                                  const std::string& path_dirs_json) {
    nlohmann::ordered_json j{{"updates", c.updates},
                             {"skipped", c.skipped},
                             {"tokens", c.tokens},
                             {"seconds", c.seconds},
                             {"skip_streak", c.skip_streak},
                             {"loss_level", c.loss_level},
                             {"spike_since", c.spike_since},
                             {"grad_norm_level", c.grad_norm_level},
                             {"grad_norm_seen", c.grad_norm_seen},
                             {"grad_norm_in_spike", c.grad_norm_in_spike ? 1 : 0}};
    if (!c.run_id.empty()) j["run_id"] = c.run_id;
    if (!flags_json.empty()) j["flags"] = nlohmann::ordered_json::parse(flags_json);
    if (!path_dirs_json.empty()) j["path_dirs"] = nlohmann::ordered_json::parse(path_dirs_json);
    return j.dump();
}

std::string new_run_id() {
    std::random_device device;
    const uint64_t bits =
        ((uint64_t)device() << 32 ^ device()) ^ (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
    return format("%016llx", (unsigned long long)bits);
}

TrainCounters counters_from_json(const std::string& text, const std::string& origin) {
    const nlohmann::json j = parse(text, origin, "extra");
    const JsonObject o(j, origin, "extra");
    // updates is AdamW's step t, an int in the optimizer
    TrainCounters c;
    c.updates = o.integer("updates", 0, INT_MAX);
    c.skipped = o.integer("skipped", 0, INT64_MAX);
    if (o.has("tokens")) c.tokens = o.integer("tokens", 0, INT64_MAX);   // checkpoints before them: 0
    if (o.has("seconds")) c.seconds = o.real("seconds", 0, DBL_MAX);
    if (o.has("skip_streak")) c.skip_streak = o.integer("skip_streak", 0, INT_MAX);
    if (o.has("loss_level")) c.loss_level = o.real("loss_level", 0, DBL_MAX);
    if (o.has("spike_since")) c.spike_since = o.integer("spike_since", 0, INT64_MAX);
    if (o.has("grad_norm_level")) c.grad_norm_level = o.real("grad_norm_level", 0, DBL_MAX);
    if (o.has("grad_norm_seen")) c.grad_norm_seen = o.integer("grad_norm_seen", 0, INT64_MAX);
    if (o.has("grad_norm_in_spike")) c.grad_norm_in_spike = o.integer("grad_norm_in_spike", 0, 1) != 0;
    if (o.has("run_id")) {
        c.run_id = o.string("run_id");
        if (c.run_id.empty() || c.run_id.size() > 64 ||
            c.run_id.find_first_not_of("0123456789abcdef") != std::string::npos) {
            fail("%s: \"extra.run_id\" must be 1 to 64 lowercase hex digits", origin.c_str());
        }
    }
    return c;
}

std::map<std::string, std::string> run_path_dirs_from_json(const std::string& text, const std::string& origin) {
    const nlohmann::json j = parse(text, origin, "extra");
    const JsonObject o(j, origin, "extra");
    std::map<std::string, std::string> dirs;
    if (!o.has("path_dirs")) return dirs;
    const JsonObject paths = o.object("path_dirs");
    for (const auto& [flag, dir] : paths.value().items())
        dirs[flag] = paths.string(flag);
    return dirs;
}

std::string run_flags_from_json(const std::string& text, const std::string& origin) {
    const nlohmann::json j = parse(text, origin, "extra");
    const JsonObject o(j, origin, "extra");
    if (!o.has("flags")) return "";
    if (!j["flags"].is_object()) fail("%s: \"extra.flags\" must be an object", origin.c_str());
    return j["flags"].dump();
}

std::string loss_scaler_to_json(const LossScaler& s) {
    return nlohmann::json{{"scale", s.scale()},
                          {"clean_streak", s.clean_streak()},
                          {"floor_streak", s.floor_streak()},
                          {"skipped", s.skipped_steps()}}
        .dump();
}

void loss_scaler_from_json(LossScaler& s, const std::string& text, const std::string& origin) {
    const nlohmann::json j = parse(text, origin, "loss_scaler");
    const JsonObject o(j, origin, "loss_scaler");
    // any positive float: a finite, non-zero scale
    s.restore((float)o.real("scale", std::numeric_limits<float>::denorm_min(), FLT_MAX),
              (int)o.integer("clean_streak", 0, INT_MAX), (int)o.integer("floor_streak", 0, INT_MAX),
              o.integer("skipped", 0, INT64_MAX));
}

}   // namespace train_gpt
