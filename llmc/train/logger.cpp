// logger.cpp — see logger.h.
#include "train/logger.h"

#include "utils.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace train_gpt {

std::string LogRecord::to_json() const {
    nlohmann::ordered_json j;
    j["type"] = type_;
    for (auto [is_num, i] : order_) {
        if (is_num) {
            double v = nums_[i].second;
            // JSON has no inf/NaN: log them as strings so a diverging run stays parseable
            if (!std::isfinite(v)) {
                j[nums_[i].first] = format("%g", v);
            } else if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
                j[nums_[i].first] = (int64_t)v;   // whole numbers (steps, counts) as JSON integers
            } else {
                j[nums_[i].first] = v;
            }
        } else {
            j[strs_[i].first] = strs_[i].second;
        }
    }
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

JsonlLog::JsonlLog(const std::string& path, bool append) : path_(path), file_(open_file(path, append ? "a" : "w")) {}

JsonlLog::~JsonlLog() {
    if (file_ != nullptr) std::fclose(file_);
}

void JsonlLog::write(const LogRecord& record) {
    std::string line = record.to_json() + "\n";
    write_exact(line.data(), 1, line.size(), file_, path_);
    std::fflush(file_);
}

}  // namespace train_gpt
