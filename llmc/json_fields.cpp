// json_fields.cpp — see json_fields.h.
#include "json_fields.h"

#include "utils.h"

#include <algorithm>
#include <cmath>

namespace train_gpt {

std::string json_excerpt(const nlohmann::json& value) { return cut_text(value.dump(), 40); }

int64_t json_integer(const nlohmann::json& value, int64_t lo, int64_t hi, const std::string& file,
                     const std::string& field) {
    // nlohmann keeps non-negative integers as uint64 and negative ones as int64: each is read in
    // its own type, so no value wraps around before the range check.
    bool in_range = false;
    int64_t x = 0;
    if (value.is_number_unsigned()) {
        const uint64_t u = value.get<uint64_t>();
        in_range = hi >= 0 && u >= (uint64_t)std::max<int64_t>(lo, 0) && u <= (uint64_t)hi;
        x = in_range ? (int64_t)u : 0;
    } else if (value.is_number_integer()) {
        x = value.get<int64_t>();
        in_range = x >= lo && x <= hi;
    }
    if (!in_range) {
        fail("%s: \"%s\" must be an integer in [%lld, %lld], got %s", file.c_str(), field.c_str(), (long long)lo,
             (long long)hi, json_excerpt(value).c_str());
    }
    return x;
}

double json_real(const nlohmann::json& value, double lo, double hi, const std::string& file, const std::string& field) {
    const double x = value.is_number() ? value.get<double>() : NAN;
    if (!std::isfinite(x) || x < lo || x > hi) {
        fail("%s: \"%s\" must be a finite number in [%g, %g], got %s", file.c_str(), field.c_str(), lo, hi,
             json_excerpt(value).c_str());
    }
    return x;
}

JsonObject::JsonObject(const nlohmann::json& value, std::string file, std::string path)
    : value_(value), file_(std::move(file)), path_(std::move(path)) {
    if (!value_.is_object()) {
        if (path_.empty()) fail("%s: expected a JSON object, got %s", file_.c_str(), json_excerpt(value_).c_str());
        fail("%s: \"%s\" must be an object, got %s", file_.c_str(), path_.c_str(), json_excerpt(value_).c_str());
    }
}

std::string JsonObject::field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

const nlohmann::json& JsonObject::at(const std::string& key) const {
    const auto it = value_.find(key);
    if (it == value_.end()) fail("%s: \"%s\" is missing", file_.c_str(), field(key).c_str());
    return *it;
}

JsonObject JsonObject::object(const std::string& key) const { return JsonObject(at(key), file_, field(key)); }

int64_t JsonObject::integer(const std::string& key, int64_t lo, int64_t hi) const {
    return json_integer(at(key), lo, hi, file_, field(key));
}

double JsonObject::real(const std::string& key, double lo, double hi) const {
    return json_real(at(key), lo, hi, file_, field(key));
}

std::string JsonObject::string(const std::string& key) const {
    const nlohmann::json& v = at(key);
    if (!v.is_string()) {
        fail("%s: \"%s\" must be a string, got %s", file_.c_str(), field(key).c_str(), json_excerpt(v).c_str());
    }
    return v.get<std::string>();
}

}   // namespace train_gpt
