// checkpoint.cpp — see checkpoint.h.
#include "checkpoint/checkpoint.h"
#include "rng.h"

#include "precision/dtypes.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/train_state.h"
#include "json_fields.h"
#include "utils.h"

#include <nlohmann/json.hpp>

#include <xxhash.h>   // Debian's libxxhash-dev; link -lxxhash

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace train_gpt {

namespace {

constexpr const char* kManifestName = "manifest.json";
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleWeightsName = "model.safetensors";   // transformers' unsharded save
constexpr const char* kManifestFormat = "train_gpt checkpoint";
// 2: the manifest holds its own checksum, "manifest_xxh3"; 1 (read still): without it
constexpr int kManifestVersion = 2;
// The largest data position a manifest may hold: far beyond any run (2^62 samples), with room to
// count on from it without overflow.
constexpr int64_t kMaxDataPosition = int64_t(1) << 62;

// Offset of each engine tensor in the flat parameter vector (as GPT::offset_of).
std::array<size_t, kNumParamTensors + 1> param_offsets(const GPTConfig& cfg) {
    auto sizes = param_tensor_sizes(cfg);
    std::array<size_t, kNumParamTensors + 1> off{};
    for (int i = 0; i < kNumParamTensors; i++)
        off[i + 1] = off[i] + sizes[i];
    return off;
}

int param_index(const std::string& name) {
    for (int i = 0; i < kNumParamTensors; i++)
        if (name == param_tensor_name(i)) return i;
    return -1;
}

// Where HF tensor t's values live in the flat engine vector, and their engine (rows, cols): the
// (out, in) matrix for transposed tensors, else (numel, 1).
struct EngineView {
    size_t offset, rows, cols;
};
EngineView engine_view(const GPTConfig& cfg, const HfTensor& t) {
    const auto off = param_offsets(cfg);
    const auto sizes = param_tensor_sizes(cfg);
    size_t numel = 1;
    for (int64_t d : t.shape)
        numel *= (size_t)d;
    size_t base = off[t.param];
    if (t.layer >= 0) base += (size_t)t.layer * (sizes[t.param] / (size_t)cfg.n_layer);
    if (t.transpose) return {base, (size_t)t.shape[1], (size_t)t.shape[0]};
    return {base, numel, 1};
}

void fsync_path(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) fail("cannot open %s to fsync: %s", path.c_str(), std::strerror(errno));
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) fail("fsync %s failed: %s", path.c_str(), std::strerror(err));
}

std::string hex64(uint64_t x) { return format("%016llx", (unsigned long long)x); }

// A manifest's own checksum: XXH3 of its JSON without the "manifest_xxh3" field, dumped as the
// writer dumps it (fields in their order, 2-space indent), so that whitespace does not count.
std::string manifest_self_checksum(nlohmann::ordered_json j) {
    j.erase("manifest_xxh3");
    const std::string text = j.dump(2);
    return hex64(XXH3_64bits(text.data(), text.size()));
}

nlohmann::json json_or_null(const std::string& text, const char* what) {
    if (text.empty()) return nullptr;
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail("checkpoint manifest: %s is not valid JSON (%s)", what, cut_text(e.what()).c_str());
    }
}

std::string text_of(const nlohmann::json& j) { return j.is_null() ? "" : j.dump(); }

// The state slices of one file: key "<which>/<tensor>@<offset>".
struct Slice {
    const SafetensorsFile* file;
    const StTensorInfo* info;
    size_t global_begin, global_end;
};

}   // namespace

int64_t parse_step_name(const std::string& name) {
    if (name.size() <= 5 || name.compare(0, 5, "step_") != 0 || name.size() > 5 + 18) return -1;
    if (name.find_first_not_of("0123456789", 5) != std::string::npos) return -1;
    return std::stoll(name.substr(5));
}

namespace {
// The first entry of a step directory (or of its *.tmp) that is no part of a checkpoint ("" where
// there is none): anything but a file (a directory or a link to one: another run's -o put there,
// round 36), or, given the checkpoint's manifest, a file it does not list (a model card, eval
// results put beside the weights: round 37). Removing the directory would take them along.
std::string foreign_entry(const std::string& dir, const CheckpointManifest* manifest, std::error_code& ec) {
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        std::error_code type_ec;
        const std::string name = entry.path().filename().string();
        if (!entry.is_regular_file(type_ec)) return name;   // (a link to a file is one: a cp -rs copy's)
        if (manifest != nullptr && name != kManifestName && !manifest->files.count(name)) return name;
    }
    return "";
}
}   // namespace

// ---- directories ------------------------------------------------------------------------------

std::string checkpoint_dir(const std::string& out_dir, int64_t step) {
    return out_dir + format("/step_%08lld", (long long)step);
}

std::string checkpoint_tmp_dir(const std::string& out_dir, int64_t step) {
    return checkpoint_dir(out_dir, step) + ".tmp";
}

std::string begin_checkpoint(const std::string& out_dir, int64_t step) {
    const std::string final_dir = checkpoint_dir(out_dir, step), tmp = checkpoint_tmp_dir(out_dir, step);
    if (struct stat st; ::lstat(final_dir.c_str(), &st) == 0)   // a link too, even one that leads nowhere
        fail("checkpoint %s already exists; checkpoints are never overwritten", final_dir.c_str());
    make_dirs(out_dir);
    std::error_code ec;
    // a stale tmp directory of this step (a save that crashed) goes, but not with what is no part of
    // a save (round 37: a run kept in step_N.tmp/ft was deleted whole)
    if (fs::is_directory(tmp, ec)) {
        const std::string foreign = foreign_entry(tmp, nullptr, ec);
        if (!foreign.empty()) {
            fail(
                "cannot save checkpoint %s: its unfinished save %s holds %s, which is no part of a checkpoint; move "
                "it away",
                final_dir.c_str(), tmp.c_str(), foreign.c_str());
        }
    }
    ec.clear();
    fs::remove_all(tmp, ec);
    if (ec) fail("cannot remove stale %s: %s", tmp.c_str(), ec.message().c_str());
    if (::mkdir(tmp.c_str(), 0755) != 0) fail("cannot create directory %s: %s", tmp.c_str(), std::strerror(errno));
    return tmp;
}

std::vector<std::pair<int64_t, std::string>> checkpoint_step_dirs(const std::string& out_dir) {
    std::vector<std::pair<int64_t, std::string>> found;
    std::error_code ec;
    if (!fs::is_directory(out_dir, ec)) return found;
    for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
        // whatever stands under a step's name, a directory or not (a file, a link to a disk not
        // mounted now): the newest is named as damaged, never passed over for an older one
        const int64_t step = parse_step_name(entry.path().filename().string());
        if (step >= 0) found.emplace_back(step, entry.path().string());
    }
    std::sort(found.begin(), found.end());
    return found;
}

namespace {
// The complete checkpoints under out_dir (step directories whose manifest reads), ascending by
// step, with their manifests.
struct Complete {
    int64_t step;
    std::string dir;
    CheckpointManifest manifest;
};
std::vector<Complete> complete_checkpoints(const std::string& out_dir) {
    std::vector<Complete> found;
    for (const auto& [step, dir] : checkpoint_step_dirs(out_dir)) {
        try {
            found.push_back({step, dir, read_manifest(dir)});
        } catch (const Error&) {
            continue;   // damaged (or not ours): not counted, never deleted
        }
    }
    return found;
}
}   // namespace

std::vector<int64_t> list_checkpoints(const std::string& out_dir) {
    std::vector<int64_t> steps;
    for (const auto& c : complete_checkpoints(out_dir))
        steps.push_back(c.step);
    return steps;
}

std::optional<std::string> latest_checkpoint(const std::string& out_dir) {
    const auto found = checkpoint_step_dirs(out_dir);
    if (found.empty()) return std::nullopt;
    return found.back().second;
}

void prune_checkpoints(const std::string& out_dir, int keep_last,
                       const std::function<bool(const CheckpointManifest&)>& healthy) {
    if (keep_last < 1) fail("prune_checkpoints: keep_last must be at least 1, got %d", keep_last);
    const auto found = complete_checkpoints(out_dir);
    if (found.empty()) return;
    // the newest healthy checkpoint stays, wherever it is
    size_t newest_healthy = found.size();
    if (healthy) {
        for (size_t i = found.size(); i-- > 0;) {
            if (healthy(found[i].manifest)) {
                newest_healthy = i;
                break;
            }
        }
    }
    // Pruning is housekeeping after a good save: a checkpoint it cannot remove (a directory
    // write-protected, or another user's) is kept with a warning, never a reason to stop the run
    // (round 27: every later save ended the run with exit 1, the checkpoint left as a *.tmp).
    auto keep_with_warning = [](const std::string& dir, const std::string& why) {
        std::fprintf(stderr, "warning: cannot remove old checkpoint %s (%s); it is kept\n", dir.c_str(), why.c_str());
    };
    std::error_code ec;
    for (size_t i = 0; i + (size_t)keep_last < found.size(); i++) {
        if (i == newest_healthy) continue;
        // Renamed out of the way first (atomic), then deleted: a crash mid-delete leaves a *.tmp
        // directory, never a complete-looking checkpoint with files missing. Its files can be
        // removed only where its directory is writable: checked first, so that one that cannot
        // be removed keeps its name.
        const std::string& dir = found[i].dir;
        const std::string doomed = dir + ".tmp";
        if (::access(dir.c_str(), W_OK | X_OK) != 0) {
            keep_with_warning(dir, std::strerror(errno));
            continue;
        }
        // a checkpoint is the files its manifest lists; a step holding more keeps it (round 36:
        // another run's -o put inside this step went with it)
        const std::string foreign = foreign_entry(dir, &found[i].manifest, ec);
        if (ec || !foreign.empty()) {
            keep_with_warning(dir, ec ? "it cannot be listed: " + ec.message()
                                      : "it holds " + foreign + ", which is no part of a checkpoint");
            ec.clear();
            continue;
        }
        fs::remove_all(doomed, ec);
        if (std::rename(dir.c_str(), doomed.c_str()) != 0) {
            keep_with_warning(dir, std::string("cannot rename it for deletion: ") + std::strerror(errno));
            continue;
        }
        fs::remove_all(doomed, ec);
        if (ec) {
            std::fprintf(stderr, "warning: cannot remove old checkpoint %s: %s; what is left of it is there\n",
                         doomed.c_str(), ec.message().c_str());
        }
    }
    std::vector<fs::path> stale;   // collected first: no removal while the directory is being read
    for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.size() < 4 || name.compare(name.size() - 4, 4, ".tmp") != 0) continue;
        const int64_t step = parse_step_name(name.substr(0, name.size() - 4));
        if (step >= 0 && step < found.back().step && entry.is_directory(ec)) stale.push_back(entry.path());
    }
    for (const fs::path& path : stale) {
        const std::string foreign = foreign_entry(path.string(), nullptr, ec);
        if (ec || !foreign.empty()) {   // (round 37: a run kept in step_N.tmp/ft went with it)
            std::fprintf(stderr, "warning: the stale %s holds %s, which is no part of a checkpoint; it is kept\n",
                         path.c_str(), ec ? ec.message().c_str() : foreign.c_str());
            ec.clear();
            continue;
        }
        fs::remove_all(path, ec);
        if (ec) std::fprintf(stderr, "warning: cannot remove stale %s: %s\n", path.c_str(), ec.message().c_str());
    }
}

// ---- Hugging Face layout ----------------------------------------------------------------------

int hf_num_shards(const GPTConfig& cfg, int world) {
    const int n_tensors = 4 + 12 * cfg.n_layer;
    return std::max(1, std::min(world, n_tensors));
}

std::string hf_shard_name(int shard, int n_shards) {
    return format("model-%05d-of-%05d.safetensors", shard + 1, n_shards);
}

std::vector<HfTensor> hf_tensors(const GPTConfig& cfg, int world) {
    const int64_t V = cfg.vocab_size, C = cfg.n_embd;
    std::vector<HfTensor> t;
    t.push_back({"transformer.wte.weight", kWte, -1, false, {V, C}});
    t.push_back({"transformer.wpe.weight", kWpe, -1, false, {cfg.max_seq_len, C}});
    for (int l = 0; l < cfg.n_layer; l++) {
        const std::string h = format("transformer.h.%d.", l);
        t.push_back({h + "ln_1.weight", kLn1w, l, false, {C}});
        t.push_back({h + "ln_1.bias", kLn1b, l, false, {C}});
        t.push_back({h + "attn.c_attn.weight", kQkvw, l, true, {C, 3 * C}});
        t.push_back({h + "attn.c_attn.bias", kQkvb, l, false, {3 * C}});
        t.push_back({h + "attn.c_proj.weight", kAttprojw, l, true, {C, C}});
        t.push_back({h + "attn.c_proj.bias", kAttprojb, l, false, {C}});
        t.push_back({h + "ln_2.weight", kLn2w, l, false, {C}});
        t.push_back({h + "ln_2.bias", kLn2b, l, false, {C}});
        t.push_back({h + "mlp.c_fc.weight", kFcw, l, true, {C, 4 * C}});
        t.push_back({h + "mlp.c_fc.bias", kFcb, l, false, {4 * C}});
        t.push_back({h + "mlp.c_proj.weight", kFcprojw, l, true, {4 * C, C}});
        t.push_back({h + "mlp.c_proj.bias", kFcprojb, l, false, {C}});
    }
    t.push_back({"transformer.ln_f.weight", kLnfw, -1, false, {C}});
    t.push_back({"transformer.ln_f.bias", kLnfb, -1, false, {C}});

    // Largest tensor first onto the lightest shard (ties: lower index) — deterministic everywhere.
    const int n_shards = hf_num_shards(cfg, world);
    std::vector<size_t> order(t.size()), numel(t.size());
    for (size_t i = 0; i < t.size(); i++) {
        order[i] = i;
        numel[i] = 1;
        for (int64_t d : t[i].shape)
            numel[i] *= (size_t)d;
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return numel[a] > numel[b]; });
    std::vector<size_t> load(n_shards, 0);
    for (size_t i : order) {
        const int s = (int)(std::min_element(load.begin(), load.end()) - load.begin());
        t[i].shard = s;
        load[s] += numel[i];
    }
    return t;
}

std::string hf_config_json(const GPTConfig& cfg) {
    nlohmann::ordered_json j;
    j["architectures"] = {"GPT2LMHeadModel"};
    j["model_type"] = "gpt2";
    j["vocab_size"] = cfg.vocab_size;
    j["n_positions"] = cfg.max_seq_len;
    j["n_embd"] = cfg.n_embd;
    j["n_layer"] = cfg.n_layer;
    j["n_head"] = cfg.n_head;
    j["n_inner"] = nullptr;                  // 4·n_embd
    j["activation_function"] = "gelu_new";   // the tanh approximation, as the engine
    j["layer_norm_epsilon"] = 1e-5;
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
    j["initializer_range"] = 0.02;
    j["bos_token_id"] = cfg.vocab_size - 1;   // <|endoftext|> is the last id
    j["eos_token_id"] = cfg.vocab_size - 1;
    j["tie_word_embeddings"] = true;
    j["torch_dtype"] = "bfloat16";
    return j.dump(2) + "\n";
}

// ---- writing ----------------------------------------------------------------------------------

void write_weight_shards(const std::string& tmp_dir, const GPTConfig& cfg, const float* weights, int rank, int world) {
    if (world < 1 || rank < 0 || rank >= world) fail("write_weight_shards: rank %d of world %d", rank, world);
    const auto tensors = hf_tensors(cfg, world);
    const int n_shards = hf_num_shards(cfg, world);

    if (rank < n_shards) {
        std::vector<std::vector<bf16>> buffers;
        std::vector<StTensorView> views;
        for (const HfTensor& t : tensors) {
            if (t.shard != rank) continue;
            const EngineView e = engine_view(cfg, t);
            const float* src = weights + e.offset;   // (rows, cols) = (out, in) when transposed
            std::vector<bf16> dst(e.rows * e.cols);
            if (t.transpose) {
                for (size_t o = 0; o < e.rows; o++)   // hf[i][o] = ours[o][i]
                    for (size_t i = 0; i < e.cols; i++)
                        dst[i * e.rows + o] = bf16::from_float(src[o * e.cols + i]);
            } else {
                for (size_t k = 0; k < dst.size(); k++)
                    dst[k] = bf16::from_float(src[k]);
            }
            buffers.push_back(std::move(dst));
            views.push_back({t.name, StDType::BF16, t.shape, buffers.back().data()});
        }
        write_safetensors(tmp_dir + "/" + hf_shard_name(rank, n_shards), views, {{"format", "pt"}});
    }
    if (rank == 0) {
        nlohmann::ordered_json index;
        uint64_t total = 0;
        for (const HfTensor& t : tensors) {
            uint64_t n = 2;
            for (int64_t d : t.shape)
                n *= (uint64_t)d;
            total += n;
            index["weight_map"][t.name] = hf_shard_name(t.shard, n_shards);
        }
        index["metadata"]["total_size"] = total;
        const std::string text = index.dump(2) + "\n";
        write_file_atomic(tmp_dir + "/" + kIndexName, text.data(), text.size());
        const std::string config = hf_config_json(cfg);
        write_file_atomic(tmp_dir + "/config.json", config.data(), config.size());
    }
}

std::string state_shard_name(int writer) { return format("state-%05d.safetensors", writer); }

const char* state_tensor_name(StateTensor s) {
    switch (s) {
        case StateTensor::Master: return "master";
        case StateTensor::M: return "m";
        case StateTensor::V: return "v";
    }
    return "?";
}

void write_state_shard(const std::string& tmp_dir, const GPTConfig& cfg, int writer, size_t global_begin, size_t n,
                       const float* master, const float* m, const float* v) {
    const auto off = param_offsets(cfg);
    const size_t total = off[kNumParamTensors];
    if (n > 0 && (global_begin > total || n > total - global_begin)) {   // an empty range may start anywhere
        fail("write_state_shard: range [%zu, %zu) is outside the model's %zu parameters", global_begin,
             global_begin + n, total);
    }
    const StateTensor kinds[3] = {StateTensor::Master, StateTensor::M, StateTensor::V};
    const float* data[3] = {master, m, v};
    std::vector<StTensorView> views;
    for (int k = 0; k < 3; k++) {
        for (int p = 0; p < kNumParamTensors; p++) {   // the range cut at tensor boundaries
            const size_t b = std::max(global_begin, off[p]), e = std::min(global_begin + n, off[p + 1]);
            if (b >= e) continue;
            views.push_back({format("%s/%s@%zu", state_tensor_name(kinds[k]), param_tensor_name(p), b - off[p]),
                             StDType::F32,
                             {(int64_t)(e - b)},
                             data[k] + (b - global_begin)});
        }
    }
    write_safetensors(tmp_dir + "/" + state_shard_name(writer), views,
                      {{"format", "train_gpt state"},
                       {"global_begin", std::to_string(global_begin)},
                       {"global_end", std::to_string(global_begin + n)}});
}

namespace {

// Every file each of the manifest's world_size ranks writes into a save (write_weight_shards,
// write_state_shard) is in tmp_dir. One missing means a rank wrote elsewhere: its node does not
// see this directory (node-local storage under the same path), and the checkpoint would not load.
void require_every_ranks_files(const std::string& tmp_dir, const CheckpointManifest& manifest) {
    std::vector<std::pair<std::string, int>> expected;   // (file, the rank that writes it)
    for (int rank = 0; rank < manifest.world_size; rank++)
        expected.emplace_back(state_shard_name(rank), rank);
    const int n_shards = hf_num_shards(manifest.model, manifest.world_size);
    for (int shard = 0; shard < n_shards; shard++)
        expected.emplace_back(hf_shard_name(shard, n_shards), shard);
    std::vector<std::pair<std::string, int>> missing;
    for (const auto& file : expected)
        if (manifest.files.count(file.first) == 0) missing.push_back(file);
    if (missing.empty()) return;
    const std::string more =
        missing.size() == 1 ? ""
                            : format(" (and %zu other file%s)", missing.size() - 1, missing.size() == 2 ? "" : "s");
    fail(
        "%s lacks %s, written by rank %d of %d%s: every rank must see the same directory (a file system shared "
        "by every node), or the checkpoint cannot be loaded; step %lld is not saved",
        tmp_dir.c_str(), missing[0].first.c_str(), missing[0].second, manifest.world_size, more.c_str(),
        (long long)manifest.step);
}

}   // namespace

uint64_t finalize_checkpoint(const std::string& tmp_dir, const std::string& final_dir, CheckpointManifest manifest) {
    if (file_exists(final_dir))
        fail("checkpoint %s already exists; checkpoints are never overwritten", final_dir.c_str());
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(tmp_dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name == kManifestName || !entry.is_regular_file(ec)) continue;
        names.push_back(name);
    }
    if (ec) fail("cannot list %s: %s", tmp_dir.c_str(), ec.message().c_str());
    manifest.files.clear();
    for (const std::string& name : names) {
        const std::string path = tmp_dir + "/" + name;
        CheckpointManifest::FileRecord r;
        r.xxh3 = hash_file(path, &r.bytes);
        fsync_path(path);   // written by this or another process: make sure it is on disk
        manifest.files[name] = r;
    }

    nlohmann::ordered_json j;
    j["format"] = kManifestFormat;
    j["version"] = kManifestVersion;
    j["step"] = manifest.step;
    j["world_size"] = manifest.world_size;
    j["model"] = {{"n_layer", manifest.model.n_layer},
                  {"n_head", manifest.model.n_head},
                  {"n_embd", manifest.model.n_embd},
                  {"vocab_size", manifest.model.vocab_size},
                  {"padded_vocab_size", manifest.model.padded_vocab_size},
                  {"max_seq_len", manifest.model.max_seq_len}};
    j["train_config"] = json_or_null(manifest.train_config_json, "train_config_json");
    j["data_position"] = manifest.data_position;
    if (manifest.train_shards >= 0)
        j["train_data"] = {{"shards", manifest.train_shards}, {"tokens", manifest.train_tokens}};
    j["rng_state"] = manifest.rng_state;
    j["loss_scaler"] = json_or_null(manifest.loss_scaler_json, "loss_scaler_json");
    j["fp8"] = json_or_null(manifest.fp8_json, "fp8_json");
    j["extra"] = json_or_null(manifest.extra_json, "extra_json");
    j["files"] = nlohmann::ordered_json::object();
    for (const auto& [name, r] : manifest.files)
        j["files"][name] = {{"bytes", r.bytes}, {"xxh3_64", hex64(r.xxh3)}};
    j["manifest_xxh3"] = manifest_self_checksum(j);
    require_every_ranks_files(tmp_dir, manifest);
    const std::string text = j.dump(2) + "\n";
    write_file_atomic(tmp_dir + "/" + kManifestName, text.data(), text.size());
    fsync_path(tmp_dir);
    if (std::rename(tmp_dir.c_str(), final_dir.c_str()) != 0) {
        fail("cannot rename %s to %s: %s", tmp_dir.c_str(), final_dir.c_str(), std::strerror(errno));
    }
    const std::string parent = fs::path(final_dir).parent_path().string();
    fsync_path(parent.empty() ? "." : parent);
    return XXH3_64bits(text.data(), text.size());   // what hash_file of it gives
}

// ---- reading ----------------------------------------------------------------------------------

namespace {

// The FP8 scaling state as GPT::fp8_state_json writes it and GPT::restore_fp8_state reads it: an
// array with one object per FP8 GEMM, {"x" | "w" | "dy": {"scale": s > 0, "history": [amax >= 0,
// ...], "steps": n >= 0}}, every number within float range, a scale a normal float; or null.
void check_fp8_state(const nlohmann::json& fp8, const std::string& path) {
    if (fp8.is_null()) return;
    if (!fp8.is_array()) fail("%s: \"fp8\" must be an array of per-GEMM scaling states", path.c_str());
    for (size_t g = 0; g < fp8.size(); g++) {
        const JsonObject gemm(fp8[g], path, format("fp8[%zu]", g));
        for (const char* operand : {"x", "w", "dy"}) {
            const JsonObject t = gemm.object(operand);
            t.real("scale", FLT_MIN, FLT_MAX);   // what the scaling rule gives: 1/s finite (the GEMMs read it)
            t.integer("steps", 0, INT64_MAX);
            const nlohmann::json& history = t.at("history");
            if (!history.is_array()) fail("%s: \"%s\" must be an array", path.c_str(), t.field("history").c_str());
            for (size_t k = 0; k < history.size(); k++) {
                json_real(history[k], 0.0, FLT_MAX, path, t.field("history") + format("[%zu]", k));
            }
        }
    }
}

}   // namespace

CheckpointManifest parse_manifest(const std::string& text, const std::string& path) {
    const char* p = path.c_str();
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail("%s: not valid JSON (%s)", p, cut_text(e.what()).c_str());
    }
    if (!j.is_object() || !j.contains("format") || j["format"] != kManifestFormat) {
        fail("%s: not a train_gpt checkpoint manifest (no \"format\": \"%s\")", p, kManifestFormat);
    }
    const JsonObject top(j, path);
    const int64_t version = top.integer("version", 0, INT_MAX);
    if (version > kManifestVersion) {
        throw NewerBuildError(
            format("%s: manifest version %lld, written by a newer build of train_gpt (this build "
                   "reads 1 to %d): use that build",
                   p, (long long)version, kManifestVersion));
    }
    if (version < 1)
        fail("%s: manifest version %lld, this build reads 1 to %d", p, (long long)version, kManifestVersion);
    CheckpointManifest m;
    m.version = (int)version;
    // checked wherever present: a version 1 never wrote one, so "version": 1 beside one is an edit
    if (version >= 2 || j.contains("manifest_xxh3")) {
        const auto ordered = nlohmann::ordered_json::parse(text);
        const auto recorded = ordered.find("manifest_xxh3");
        if (recorded == ordered.end() || !recorded->is_string()) {
            m.self_check = "it has no \"manifest_xxh3\", its own checksum";
        } else if (const std::string actual = manifest_self_checksum(ordered); *recorded != actual) {
            m.self_check = format("its checksum is XXH3 %s, \"manifest_xxh3\" records %s", actual.c_str(),
                                  recorded->get<std::string>().c_str());
        }
    }
    m.step = top.integer("step", 0, INT_MAX);   // the trainer counts steps in an int
    m.world_size = (int)top.integer("world_size", 1, INT_MAX);
    const JsonObject model = top.object("model");
    const std::pair<const char*, int*> shape[] = {{"n_layer", &m.model.n_layer},
                                                  {"n_head", &m.model.n_head},
                                                  {"n_embd", &m.model.n_embd},
                                                  {"vocab_size", &m.model.vocab_size},
                                                  {"padded_vocab_size", &m.model.padded_vocab_size},
                                                  {"max_seq_len", &m.model.max_seq_len}};
    for (const auto& [key, field] : shape)
        *field = (int)model.integer(key, 1, INT_MAX);
    check_model_shape(m.model, path + " (\"model\")");
    // no tensor has the head count in its shape, so only this catches a wrong one
    if (m.model.n_embd % m.model.n_head != 0)
        fail("%s: \"model.n_head\" %d does not divide \"model.n_embd\" %d (the heads split the width evenly)", p,
             m.model.n_head, m.model.n_embd);
    m.train_config_json = text_of(top.at("train_config"));
    // the run's configuration records the shape too: an edit of one of them is caught here (the
    // head count is in no tensor's shape)
    if (const nlohmann::json& run = top.at("train_config"); run.is_object()) {
        const std::pair<const char*, int> recorded[] = {
            {"n_layer", m.model.n_layer}, {"n_head", m.model.n_head}, {"n_embd", m.model.n_embd}};
        for (const auto& [key, value] : recorded) {
            const auto it = run.find(key);
            if (it != run.end() && (!it->is_number_integer() || it->get<int64_t>() != value)) {
                fail("%s: \"model.%s\" %d disagrees with \"train_config.%s\" %s: the manifest was edited", p, key,
                     value, key, it->dump().c_str());
            }
        }
    }
    m.data_position = top.integer("data_position", 0, kMaxDataPosition);
    if (top.has("train_data")) {
        const JsonObject data = top.object("train_data");
        m.train_shards = (int)data.integer("shards", 0, INT_MAX);
        m.train_tokens = data.integer("tokens", 0, INT64_MAX);
    }
    m.rng_state = top.string("rng_state");
    if (!m.rng_state.empty() && !Rng(0).set_state(m.rng_state))
        fail("%s: \"rng_state\" is not the state of the sampler's random numbers (rng.h)", p);
    m.loss_scaler_json = text_of(top.at("loss_scaler"));
    m.fp8_json = text_of(top.at("fp8"));
    m.extra_json = text_of(top.at("extra"));
    // the trainer's state, checked here as its owners read it, so that a bad value stops a resume
    // before anything is written
    if (!m.loss_scaler_json.empty()) {
        LossScaler probe;
        loss_scaler_from_json(probe, m.loss_scaler_json, path);
    }
    if (!m.extra_json.empty()) counters_from_json(m.extra_json, path);
    check_fp8_state(top.at("fp8"), path);

    const JsonObject files = top.object("files");
    for (const auto& [name, rec] : files.value().items()) {
        if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
            fail("%s: invalid file name '%s'", p, name.c_str());
        }
        const JsonObject file = files.object(name);
        CheckpointManifest::FileRecord r;
        r.bytes = (uint64_t)file.integer("bytes", 0, INT64_MAX);
        const std::string h = file.string("xxh3_64");
        char* end = nullptr;
        r.xxh3 = std::strtoull(h.c_str(), &end, 16);
        if (h.size() != 16 || *end != '\0')
            fail("%s: file %s has a malformed checksum '%s'", p, name.c_str(), h.c_str());
        m.files[name] = r;
    }
    return m;
}

CheckpointManifest read_manifest(const std::string& dir) {
    const char* d = dir.c_str();
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
        const fs::path target = fs::read_symlink(dir, ec);
        if (!ec) {
            fail("checkpoint %s is a symbolic link to %s, which cannot be reached (a disk not mounted, a link loop?)",
                 d, target.c_str());
        }
        fail("checkpoint %s does not exist", d);
    }
    if (!fs::is_directory(dir, ec)) fail("%s is not a checkpoint: not a directory", d);
    if (::access(d, R_OK | X_OK) != 0)
        throw UnreadableCheckpointError(format("%s: this user cannot read it: %s", d, std::strerror(errno)));
    const std::string path = dir + "/" + kManifestName;
    if (!file_exists(path)) {
        fail("%s is not a checkpoint: it has no %s (an unfinished save is a *.tmp directory)", d, kManifestName);
    }
    if (::access(path.c_str(), R_OK) != 0) {
        throw UnreadableCheckpointError(format("%s: this user cannot read it: %s", path.c_str(), std::strerror(errno)));
    }
    CheckpointManifest m =
        parse_manifest(read_json_file_text(path, kMaxManifestBytes, "a checkpoint's manifest.json"), path);
    // a step_<N> directory holds the checkpoint of step N
    std::string name = dir;
    while (name.size() > 1 && name.back() == '/')
        name.pop_back();
    const int64_t named_step = parse_step_name(fs::path(name).filename().string());
    if (named_step >= 0 && named_step != m.step) {
        fail("%s: \"step\" is %lld, but the directory is named for step %lld", path.c_str(), (long long)m.step,
             (long long)named_step);
    }
    return m;
}

void check_model_config(const CheckpointManifest& manifest, const GPTConfig& expected, const std::string& dir) {
    const std::pair<const char*, std::pair<int, int>> fields[] = {
        {"n_layer", {manifest.model.n_layer, expected.n_layer}},
        {"n_head", {manifest.model.n_head, expected.n_head}},
        {"n_embd", {manifest.model.n_embd, expected.n_embd}},
        {"vocab_size", {manifest.model.vocab_size, expected.vocab_size}},
        {"padded_vocab_size", {manifest.model.padded_vocab_size, expected.padded_vocab_size}},
        {"max_seq_len", {manifest.model.max_seq_len, expected.max_seq_len}},
    };
    for (const auto& [name, v] : fields) {
        if (v.first != v.second) {
            fail("checkpoint %s is for another model: %s is %d there, %d in this run", dir.c_str(), name, v.first,
                 v.second);
        }
    }
}

namespace {

void verify_manifest_itself(const std::string& dir, const CheckpointManifest& manifest) {
    if (!manifest.self_check.empty()) {
        fail("%s/%s: checksum mismatch: %s (the manifest was altered or corrupted after it was written)", dir.c_str(),
             kManifestName, manifest.self_check.c_str());
    }
}

}   // namespace

void verify_checkpoint(const std::string& dir, const CheckpointManifest& manifest) {
    verify_manifest_itself(dir, manifest);
    std::vector<std::string> names;
    for (const auto& entry : manifest.files)
        names.push_back(entry.first);
    verify_checkpoint_files(dir, manifest, names);
}

void verify_checkpoint_metadata(const std::string& dir, const CheckpointManifest& manifest) {
    verify_manifest_itself(dir, manifest);
    std::vector<std::string> small;
    for (const auto& entry : manifest.files) {
        if (entry.first.find(".safetensors") == std::string::npos) small.push_back(entry.first);
    }
    verify_checkpoint_files(dir, manifest, small);
}

uint64_t manifest_checksum(const std::string& dir) {
    uint64_t bytes = 0;
    return hash_file(dir + "/" + kManifestName, &bytes);
}

void verify_checkpoint_files(const std::string& dir, const CheckpointManifest& manifest,
                             const std::vector<std::string>& names) {
    for (const std::string& name : names) {
        const auto found = manifest.files.find(name);
        if (found == manifest.files.end()) fail("%s/%s: not listed in %s", dir.c_str(), name.c_str(), kManifestName);
        const CheckpointManifest::FileRecord& r = found->second;
        const std::string path = dir + "/" + name;
        const char* p = path.c_str();
        struct stat st;
        if (::stat(p, &st) != 0) fail("%s: missing (listed in %s)", p, kManifestName);
        if (!S_ISREG(st.st_mode)) fail("%s: not a regular file (listed in %s as one)", p, kManifestName);
        if (::access(p, R_OK) != 0)
            throw UnreadableCheckpointError(format("%s: this user cannot read it: %s", p, std::strerror(errno)));
        if ((uint64_t)st.st_size != r.bytes) {
            fail("%s: checksum mismatch: the file has %llu bytes, %s records %llu (truncated or altered)", p,
                 (unsigned long long)st.st_size, kManifestName, (unsigned long long)r.bytes);
        }
        uint64_t bytes = 0;
        const uint64_t h = hash_file(path, &bytes);
        if (h != r.xxh3) {
            fail("%s: checksum mismatch: XXH3 %s, %s records %s (the file was altered or corrupted)", p,
                 hex64(h).c_str(), kManifestName, hex64(r.xxh3).c_str());
        }
    }
}

CheckpointManifest open_checkpoint(const std::string& dir, const GPTConfig& expected) {
    CheckpointManifest m = read_manifest(dir);
    check_model_config(m, expected, dir);
    verify_checkpoint(dir, m);
    return m;
}

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string text;
    for (int64_t d : shape)
        text += (text.empty() ? "" : ", ") + std::to_string(d);
    return "[" + text + "]";
}

// The weight files of a checkpoint or transformers directory, headers only: each engine tensor's
// name in them, its file, its header; every shape checked against cfg, and no tensor of a layer
// beyond cfg's n_layer. `described_by` is what cfg came from (config.json, a manifest).
struct WeightFiles {
    std::string index_path;
    std::map<std::string, std::unique_ptr<SafetensorsFile>> files;
    struct Located {
        HfTensor t;
        std::string name;   // as the file names it
        SafetensorsFile* file;
    };
    std::vector<Located> tensors;

    WeightFiles(const std::string& dir, const GPTConfig& cfg, const std::string& described_by) {
        // sharded (an index names each tensor's file), or one model.safetensors
        index_path = dir + "/" + kIndexName;
        nlohmann::json weight_map = nlohmann::json::object();
        // both: transformers loads model.safetensors, this engine the index's files, each another
        // model where they differ
        if (file_exists(index_path) && file_exists(dir + "/" + kSingleWeightsName)) {
            fail(
                "%s holds both %s and %s, which transformers and this engine would read as two models (transformers "
                "loads %s): remove the one that is not this model's",
                dir.c_str(), kSingleWeightsName, kIndexName, kSingleWeightsName);
        }
        if (!file_exists(index_path) && file_exists(dir + "/" + kSingleWeightsName)) {
            index_path = dir + "/" + kSingleWeightsName;
            auto single = std::make_unique<SafetensorsFile>(index_path);
            for (const StTensorInfo& t : single->tensors())
                weight_map[t.name] = kSingleWeightsName;
            files[kSingleWeightsName] = std::move(single);
        } else {
            try {
                nlohmann::json index = nlohmann::json::parse(
                    read_json_file_text(index_path, size_t(64) << 20, "a model.safetensors.index.json"));
                if (!index.at("weight_map").is_object()) fail("%s: weight_map is not an object", index_path.c_str());
                weight_map = index["weight_map"];
            } catch (const nlohmann::json::exception& e) {
                fail("%s: malformed index (%s)", index_path.c_str(), cut_text(e.what()).c_str());
            }
        }
        const std::string model = format("(n_layer %d, n_head %d, n_embd %d, vocab_size %d, n_positions %d)",
                                         cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size, cfg.max_seq_len);
        // a layer the config does not have: its tensors would be ignored, the model another
        long held_layers = 0;   // 1 + the highest layer the weights hold
        for (const auto& entry : weight_map.items()) {
            std::string name = entry.key();
            if (name.rfind("transformer.", 0) == 0) name = name.substr(12);
            if (name.rfind("h.", 0) != 0) continue;
            const size_t dot = name.find('.', 2);
            const std::string digits = name.substr(2, dot == std::string::npos ? std::string::npos : dot - 2);
            if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
                continue;
            const long layer = std::stol(digits);
            held_layers = std::max(held_layers, layer + 1);
            if (layer >= cfg.n_layer) {
                fail("%s: holds tensor %s of layer %ld, but %s describes %d layers %s", index_path.c_str(),
                     entry.key().c_str(), layer, described_by.c_str(), cfg.n_layer, model.c_str());
            }
        }
        for (const HfTensor& t : hf_tensors(cfg, 1)) {
            // GPT2LMHeadModel's names, or GPT2Model's (without "transformer.")
            std::string name = t.name;
            if (!weight_map.contains(name) && name.rfind("transformer.", 0) == 0) name = name.substr(12);
            if (!weight_map.contains(name) || !weight_map[name].is_string()) {
                if (t.layer >= held_layers) {   // fewer layers than the config says: it is the config that differs
                    fail("%s: holds %ld layers, but %s describes %d layers %s (no tensor %s)", index_path.c_str(),
                         held_layers, described_by.c_str(), cfg.n_layer, model.c_str(), t.name.c_str());
                }
                fail("%s: no file for tensor %s", index_path.c_str(), t.name.c_str());
            }
            const std::string file = weight_map[name].get<std::string>();
            if (file.find('/') != std::string::npos)
                fail("%s: invalid file name '%s'", index_path.c_str(), file.c_str());
            auto& st = files[file];
            if (!st) st = std::make_unique<SafetensorsFile>(dir + "/" + file);
            const StTensorInfo& info = st->at(name);
            if (info.shape != t.shape) {
                fail("%s: tensor %s has shape %s, but %s describes a model %s that needs %s", st->path().c_str(),
                     t.name.c_str(), shape_text(info.shape).c_str(), described_by.c_str(), model.c_str(),
                     shape_text(t.shape).c_str());
            }
            tensors.push_back({t, name, st.get()});
        }
    }
};

}   // namespace

void check_weights(const std::string& dir, const GPTConfig& cfg, const std::string& described_by) {
    const WeightFiles checked(dir, cfg, described_by);
    (void)checked;
}

std::vector<float> read_weights(const std::string& dir, const GPTConfig& cfg) {
    WeightFiles weights(dir, cfg, dir + "/config.json");
    std::vector<float> out(param_offsets(cfg)[kNumParamTensors], 0.0f);   // wte padding rows stay 0
    for (const WeightFiles::Located& w : weights.tensors) {
        const HfTensor& t = w.t;
        const std::vector<float> src = w.file->read_floats(w.name);
        const EngineView e = engine_view(cfg, t);
        float* dst = out.data() + e.offset;   // (rows, cols) = (out, in) when transposed
        if (t.transpose) {
            for (size_t o = 0; o < e.rows; o++)
                for (size_t i = 0; i < e.cols; i++)
                    dst[o * e.cols + i] = src[i * e.rows + o];
        } else {
            std::copy(src.begin(), src.end(), dst);
        }
    }
    return out;
}

namespace {

// The slices of `which` in every state file the manifest lists (files opens each one), in file
// order; every slice's name and extent checked against the model.
std::vector<Slice> state_slices(const std::string& dir, const GPTConfig& cfg, const CheckpointManifest& manifest,
                                StateTensor which, std::vector<std::unique_ptr<SafetensorsFile>>& files) {
    const auto off = param_offsets(cfg);
    const std::string prefix = std::string(state_tensor_name(which)) + "/";
    std::vector<Slice> slices;
    for (const auto& entry : manifest.files) {
        const std::string& name = entry.first;
        if (name.compare(0, 6, "state-") != 0 || name.size() < 18 ||
            name.compare(name.size() - 12, 12, ".safetensors") != 0)
            continue;
        files.push_back(std::make_unique<SafetensorsFile>(dir + "/" + name));
        const SafetensorsFile& f = *files.back();
        for (const StTensorInfo& t : f.tensors()) {
            if (t.name.compare(0, prefix.size(), prefix) != 0) continue;
            const size_t at = t.name.rfind('@');
            const int p = at == std::string::npos ? -1 : param_index(t.name.substr(prefix.size(), at - prefix.size()));
            const std::string digits = at == std::string::npos ? "" : t.name.substr(at + 1);
            if (p < 0 || digits.empty() || digits.size() > 18 ||
                digits.find_first_not_of("0123456789") != std::string::npos) {
                fail("%s: tensor '%s' is not a state slice <which>/<tensor>@<offset>", f.path().c_str(),
                     t.name.c_str());
            }
            const size_t offset = std::stoull(digits), len = t.numel();
            if (t.dtype != StDType::F32 || t.shape.size() != 1 || offset > off[p + 1] - off[p] ||
                len > off[p + 1] - off[p] - offset) {
                fail("%s: slice '%s' (%s, %zu values) does not fit tensor %s of this model (%zu values)",
                     f.path().c_str(), t.name.c_str(), st_dtype_name(t.dtype), len, param_tensor_name(p),
                     off[p + 1] - off[p]);
            }
            slices.push_back({&f, &t, off[p] + offset, off[p] + offset + len});
        }
    }
    return slices;
}

void check_state_range(const GPTConfig& cfg, size_t global_begin, size_t global_end) {
    const size_t total = param_offsets(cfg)[kNumParamTensors];
    if (global_begin > global_end || global_end > total) {
        fail("read_state_range: range [%zu, %zu) is outside the model's %zu parameters", global_begin, global_end,
             total);
    }
}

}   // namespace

std::vector<std::string> state_files_for_range(const std::string& dir, const GPTConfig& cfg, size_t global_begin,
                                               size_t global_end) {
    check_state_range(cfg, global_begin, global_end);
    const CheckpointManifest manifest = read_manifest(dir);
    std::set<std::string> names;
    for (StateTensor which : {StateTensor::Master, StateTensor::M, StateTensor::V}) {
        std::vector<std::unique_ptr<SafetensorsFile>> files;
        for (const Slice& s : state_slices(dir, cfg, manifest, which, files)) {
            if (s.global_begin < global_end && global_begin < s.global_end) {
                const std::string& path = s.file->path();
                names.insert(path.substr(path.find_last_of('/') + 1));
            }
        }
    }
    return std::vector<std::string>(names.begin(), names.end());
}

std::vector<float> read_state_range(const std::string& dir, const GPTConfig& cfg, StateTensor which,
                                    size_t global_begin, size_t global_end) {
    check_state_range(cfg, global_begin, global_end);
    const CheckpointManifest manifest = read_manifest(dir);
    std::vector<std::unique_ptr<SafetensorsFile>> files;
    std::vector<Slice> slices = state_slices(dir, cfg, manifest, which, files);
    std::sort(slices.begin(), slices.end(),
              [](const Slice& a, const Slice& b) { return a.global_begin < b.global_begin; });

    std::vector<float> out(global_end - global_begin);
    size_t covered = global_begin;   // [global_begin, covered) is filled
    for (size_t i = 0; i < slices.size(); i++) {
        const Slice& s = slices[i];
        if (i > 0 && s.global_begin < slices[i - 1].global_end) {
            fail("checkpoint %s: state slices %s (%s) and %s (%s) overlap", dir.c_str(),
                 slices[i - 1].info->name.c_str(), slices[i - 1].file->path().c_str(), s.info->name.c_str(),
                 s.file->path().c_str());
        }
        const size_t b = std::max(s.global_begin, global_begin), e = std::min(s.global_end, global_end);
        if (b >= e) continue;
        if (b > covered) break;   // a hole
        s.file->read_bytes(out.data() + (b - global_begin), *s.info, (b - s.global_begin) * sizeof(float),
                           (e - b) * sizeof(float));
        covered = e;
    }
    if (covered < global_end) {
        fail("checkpoint %s: no %s state for parameters [%zu, %zu) (the state files cover only part of the model)",
             dir.c_str(), state_tensor_name(which), covered, global_end);
    }
    return out;
}

}   // namespace train_gpt
