// json_fields.h — checked reads of JSON that came from a file: checkpoint manifests, safetensors
// headers, vocabularies. Such files may be damaged or hostile, so nothing is converted before it
// is checked:
//   - an integer field is a JSON integer (not 2.0, not "2") within its range;
//   - a real field is a finite JSON number within its range (so 1e300 never reaches a cast to
//     float or int, where it would be undefined behaviour);
//   - a missing field, or one of the wrong type, fails.
// Every error names the file and the field, with a dotted path for nested objects:
//   out/step_00000002/manifest.json: "model.n_layer" must be an integer in [1, 2147483647], got -5
// Host-only (nlohmann-json): include it from .cpp files, never from headers nvcc sees.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace train_gpt {

// The value as it appears in the file, cut short to 40 characters: what errors quote.
std::string json_excerpt(const nlohmann::json& value);

// `value`, the field called `field` of `file`, as an integer in [lo, hi] or a finite real in
// [lo, hi]; fails as above.
int64_t json_integer(const nlohmann::json& value, int64_t lo, int64_t hi, const std::string& file,
                     const std::string& field);
double json_real(const nlohmann::json& value, double lo, double hi, const std::string& file, const std::string& field);

// A JSON object of `file`, found at `path` within it ("" for the top level, else "model" or
// "files.config.json"): the fields it is read through are named path.key in errors.
class JsonObject {
  public:
    // Fails unless `value` is an object. `value` must outlive this view.
    JsonObject(const nlohmann::json& value, std::string file, std::string path = "");

    bool has(const std::string& key) const { return value_.contains(key); }
    const nlohmann::json& at(const std::string& key) const;   // any type; fails if missing
    JsonObject object(const std::string& key) const;          // a nested object
    int64_t integer(const std::string& key, int64_t lo, int64_t hi) const;
    double real(const std::string& key, double lo, double hi) const;
    std::string string(const std::string& key) const;

    const nlohmann::json& value() const { return value_; }
    const std::string& file() const { return file_; }
    std::string field(const std::string& key) const;   // path.key, or key at the top level

  private:
    const nlohmann::json& value_;
    std::string file_, path_;
};

}   // namespace train_gpt
