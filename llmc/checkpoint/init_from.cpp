// init_from.cpp — see init_from.h.
#include "checkpoint/init_from.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/hf_tokenizer.h"
#include "model/layout.h"
#include "json_fields.h"
#include "utils.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace train_gpt {

namespace {

bool is_directory(const std::string& path) { return file_exists(path + "/."); }

// Runs read(), which reads m's step directory. Where m is the newest checkpoint of a root and read()
// failed because the directory is gone, a live run writing there pruned it (--keep-checkpoints)
// while this run read it: says so, rather than that a file does not exist.
template <class Read>
void reading(const ModelDir& m, Read read) {
    try {
        read();
    } catch (const Error&) {
        if (m.root.empty() || file_exists(m.dir)) throw;   // there, but damaged: the reader's own error
        fail(
            "--init-from %s: its newest checkpoint, %s, was removed while this run read it (a run still "
            "writing there prunes its older checkpoints, --keep-checkpoints); start again to take the "
            "newest now, or copy a step directory out first",
            m.root.c_str(), m.dir.c_str());
    }
}

}   // namespace

GPTConfig gpt_config_from_hf(const std::string& path) {
    const std::string bytes = read_json_file_text(path, size_t(16) << 20, "a config.json");   // transformers': ~1 kB
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(bytes);
    } catch (const nlohmann::json::exception& e) {
        fail("%s: not valid JSON (%s)", path.c_str(), cut_text(e.what()).c_str());
    }
    if (!j.is_object()) fail("%s: not a JSON object", path.c_str());
    // a text field, or its default where absent; fails if it is there but not a string
    auto text = [&](const char* key, const char* absent) -> std::string {
        if (!j.contains(key)) return absent;
        if (!j[key].is_string())
            fail("%s: %s must be a string, got %s", path.c_str(), key, json_excerpt(j[key]).c_str());
        return j[key].get<std::string>();
    };
    if (text("model_type", "") != "gpt2") {
        fail("%s: model_type is %s; --init-from takes GPT-2 models (model_type \"gpt2\")", path.c_str(),
             j.contains("model_type") ? json_excerpt(j["model_type"]).c_str() : "missing");
    }
    auto integer = [&](const char* key) {
        if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 1 ||
            j[key].get<int64_t>() > INT32_MAX) {
            fail("%s: %s must be a positive integer", path.c_str(), key);
        }
        return (int)j[key].get<int64_t>();
    };
    GPTConfig cfg;
    cfg.n_layer = integer("n_layer");
    cfg.n_head = integer("n_head");
    cfg.n_embd = integer("n_embd");
    cfg.vocab_size = integer("vocab_size");
    cfg.max_seq_len = integer("n_positions");
    cfg.padded_vocab_size = pad_vocab(cfg.vocab_size);
    check_model_shape(cfg, path, /*transformers=*/true);
    if (cfg.n_embd % cfg.n_head != 0)
        fail("%s: n_embd %d is not divisible by n_head %d", path.c_str(), cfg.n_embd, cfg.n_head);
    // what the engine computes, field by field (GPT2Config's defaults where a field is absent)
    const std::string act = text("activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
        fail("%s: activation_function \"%s\"; the engine computes GELU with the tanh approximation (gelu_new)",
             path.c_str(), act.c_str());
    }
    if (j.contains("n_inner") && !j["n_inner"].is_null() &&
        !(j["n_inner"].is_number_integer() && j["n_inner"].get<int64_t>() == 4 * (int64_t)cfg.n_embd)) {
        fail("%s: n_inner %s; the engine's MLP is 4·n_embd = %d wide", path.c_str(), json_excerpt(j["n_inner"]).c_str(),
             4 * cfg.n_embd);
    }
    if (j.contains("layer_norm_epsilon") &&
        !(j["layer_norm_epsilon"].is_number() && std::fabs(j["layer_norm_epsilon"].get<double>() - 1e-5) < 1e-12)) {
        fail("%s: layer_norm_epsilon %s; the engine's layernorm uses 1e-5", path.c_str(),
             json_excerpt(j["layer_norm_epsilon"]).c_str());
    }
    for (const char* flag : {"tie_word_embeddings", "scale_attn_weights"}) {
        if (j.contains(flag) && j[flag] != true)
            fail("%s: %s is %s; the engine's GPT-2 needs true", path.c_str(), flag, json_excerpt(j[flag]).c_str());
    }
    for (const char* flag : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"}) {
        if (j.contains(flag) && j[flag] == true)
            fail("%s: %s is true; the engine's GPT-2 does not do that", path.c_str(), flag);
    }
    return cfg;
}

namespace {
bool has_transformers_files(const std::string& dir) {
    return file_exists(dir + "/config.json") &&
           (file_exists(dir + "/model.safetensors") || file_exists(dir + "/model.safetensors.index.json"));
}

// A manifest.json that is some other tool's (a JSON object without a "format" field), in a
// directory that also holds a transformers model: what the refusal should tell (round 19: the
// model could not be loaded, and nothing said why).
bool foreign_manifest_beside_a_transformers_model(const std::string& dir) {
    if (!has_transformers_files(dir)) return false;
    try {
        const nlohmann::json j =
            nlohmann::json::parse(read_json_file_text(dir + "/manifest.json", kMaxManifestBytes, "a manifest.json"));
        return j.is_object() && !j.contains("format");
    } catch (const std::exception&) {
        return false;
    }
}
}   // namespace

ModelDir find_model_dir(const std::string& path) {
    if (!file_exists(path)) fail("--init-from %s: no such file or directory", path.c_str());
    if (!is_directory(path)) fail("--init-from %s: not a directory", path.c_str());
    ModelDir m;
    if (file_exists(path + "/manifest.json")) {   // a step directory
        m.dir = path;
        m.checkpoint = true;
        try {
            m.model = read_manifest(path).model;
        } catch (const Error& e) {
            if (!foreign_manifest_beside_a_transformers_model(path)) throw;
            fail(
                "%s; a directory that holds a manifest.json is read as a train_gpt checkpoint: to load the "
                "transformers model of its config.json and weights, move manifest.json out of it",
                e.what());
        }
        m.description = "checkpoint " + path;
    } else if (std::optional<std::string> newest = latest_checkpoint(path)) {   // a checkpoint root
        m.dir = *newest;
        m.checkpoint = true;
        m.root = path;
        reading(m, [&] { m.model = read_manifest(*newest).model; });
        m.description = "checkpoint " + *newest + " (the newest in " + path + ")";
    } else if (file_exists(path + "/state-00000.safetensors")) {
        // a train_gpt step directory that lost its manifest: its weights would be read as a
        // transformers model's, with nothing to verify them against (round 27)
        fail(
            "--init-from %s: a train_gpt checkpoint (it holds state-00000.safetensors) without its manifest.json: "
            "damaged or copied in part, and its files cannot be verified without it; give a complete checkpoint",
            path.c_str());
    } else if (has_transformers_files(path)) {
        m.dir = path;
        m.model = gpt_config_from_hf(path + "/config.json");
        m.description = "transformers model " + path;
    } else {
        fail(
            "--init-from %s: not a checkpoint (no manifest.json), a directory of checkpoints (no complete step_*), "
            "or a transformers model (config.json with model.safetensors or model.safetensors.index.json)",
            path.c_str());
    }
    // the shape the config or manifest claims, against the weights' headers, before any model of
    // that shape is allocated
    reading(m, [&] {
        check_weights(m.dir, m.model, m.dir + (m.checkpoint ? "/manifest.json" : "/config.json"));
        // the manifest and the small files (the tokenizer, config.json) before the run reads any;
        // the weights are verified as they are read (read_model_weights)
        if (m.checkpoint) {
            const CheckpointManifest manifest = read_manifest(m.dir);
            verify_checkpoint_metadata(m.dir, manifest);
            m.manifest_version = manifest.version;
        }
    });
    return m;
}

std::optional<Tokenizer> read_model_dir_tokenizer(const ModelDir& m) {
    std::optional<Tokenizer> tokenizer;
    reading(m, [&] {
        tokenizer = read_model_tokenizer(m.dir);
        if (!tokenizer && !file_exists(m.dir)) fail("%s no longer exists", m.dir.c_str());   // not "no tokenizer"
    });
    return tokenizer;
}

std::vector<float> read_model_weights(const ModelDir& m) {
    std::vector<float> w;
    if (!m.checkpoint) {
        w = read_weights(m.dir, m.model);
    } else {
        reading(m, [&] {
            open_checkpoint(m.dir, m.model);   // every file's checksum
            size_t n = 0;
            for (size_t s : param_tensor_sizes(m.model))
                n += s;
            w = read_state_range(m.dir, m.model, StateTensor::Master, 0, n);
        });
    }
    // a model that holds NaN or inf would train with every step skipped, or sample nothing
    const auto offsets = param_tensor_offsets(m.model);
    for (int t = 0; t < kNumParamTensors; t++) {
        for (size_t i = offsets[t]; i < offsets[t + 1]; i++) {
            if (!std::isfinite(w[i])) {
                fail("--init-from: %s holds a non-finite weight (%g) in %s, at index %zu of its %zu values",
                     m.description.c_str(), w[i], param_tensor_name(t), i - offsets[t], offsets[t + 1] - offsets[t]);
            }
        }
    }
    return w;
}

}   // namespace train_gpt
