// checkpoint.h — sharded, reshardable, crash-safe checkpoints (DESIGN §5).
//
// A checkpoint is a directory <out>/step_00001000/ holding
//   model-00001-of-0000n.safetensors …   BF16 weights, Hugging Face GPT-2 names and layout; each
//                                         holds whole tensors, shard k written by rank k-1
//   model.safetensors.index.json         {"metadata": {"total_size"}, "weight_map": {name: file}}
//   config.json                          GPT2Config: GPT2LMHeadModel.from_pretrained(dir) loads it
//   state-00000.safetensors …            FP32 master weights and Adam m, v: one file per writer
//                                         (ZeRO-1 rank), its range of the flat parameter vector cut
//                                         at tensor boundaries into slices "master/qkvw@4096"
//   manifest.json                        step, configs, world size, data position, RNG, loss-scale
//                                         and FP8 state, and the size + XXH3-64 of every other file
//
// Invariants.
// - Crash safety: everything is written into <out>/step_00001000.tmp/; manifest.json is written
//   last, then the directory is renamed to its final name. So a step_* directory is always a
//   finished save: one whose manifest is missing or invalid, or whose files do not match it, is a
//   damaged checkpoint (reported as such, never deleted), and a *.tmp directory is an unfinished
//   save. An existing checkpoint is never overwritten.
// - Resharding: state slices are keyed by global tensor name plus element offset within the
//   tensor, never by rank; file names carry the writer's index only to be distinct. Reading a
//   range of the flat vector assembles it from whichever slices cover it, so a run saved on N
//   ranks resumes on M.
// - The flat parameter vector is the engine's (gpt.h): tensors in ParamTensor order, wte with
//   Vp rows. The HF weights hold V rows of wte (vocab_size = V) and Conv1D matrices (in, out),
//   i.e. our (out, in) matrices transposed; lm_head is tied and not stored.
// - Loading never deletes or repairs anything; every failure names the file at fault.
//
// Saving, with the trainer's barriers (every rank calls the functions marked "all ranks"):
//   rank 0:    tmp = begin_checkpoint(out, step);                     then barrier
//   all ranks: write_weight_shards(tmp, cfg, weights, rank, world);
//              write_state_shard(tmp, cfg, rank, begin, n, master, m, v);   then barrier
//   rank 0:    finalize_checkpoint(tmp, checkpoint_dir(out, step), manifest);
//              prune_checkpoints(out, keep_last);                       then barrier
// Resuming:
//   dir = latest_checkpoint(out);                      // std::nullopt: nothing to resume
//   manifest = open_checkpoint(*dir, cfg);              // reads, checks model shape, verifies hashes
//                                                       // (train/resume.h: choose_resume_checkpoint)
//                                                       // (rank 0 is enough on a shared filesystem)
//   weights = read_weights(*dir, cfg);   master = read_state_range(*dir, cfg, StateTensor::Master, b, e); …
#pragma once

#include "model/layout.h"
#include "utils.h"   // Error

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace train_gpt {

// What a checkpoint records besides tensors. The *_json fields are JSON texts ("" means null)
// stored as JSON inside manifest.json, so the manifest stays readable; reading checks the ones
// with a known shape (loss_scaler, fp8, extra: see parse_manifest).
struct CheckpointManifest {
    int64_t step = 0;                // optimizer steps completed
    GPTConfig model;                 // the model's shape; checked on load (check_model_config)
    int world_size = 1;              // ranks that wrote it (informational: loading does not depend on it)
    std::string train_config_json;   // the resolved run configuration
    int64_t data_position = 0;       // train loader position: global sample index
    // the training data the position is in: its shards and tokens (-1: a checkpoint from before
    // they were recorded). A resume on other data is noticed (train_gpt.cu load_checkpoint).
    int train_shards = -1;
    int64_t train_tokens = -1;
    std::string rng_state;          // the sampler's random numbers (rng.h Rng::state); "" = none saved
    std::string loss_scaler_json;   // fp16 dynamic loss-scale state (train_state.h)
    std::string fp8_json;           // FP8 delayed-scaling state (amax histories, scales)
    std::string extra_json;         // the trainer's counters (train_state.h)
    struct FileRecord {
        uint64_t bytes = 0;
        uint64_t xxh3 = 0;   // XXH3_64bits of the whole file, seed 0
    };
    std::map<std::string, FileRecord> files;   // every file but manifest.json; filled by finalize
    // manifest.json's own checksum ("manifest_xxh3", version 2): "" when the manifest read matches
    // it, else what is wrong. Checked with the files' checksums (verify_checkpoint), so that a flip
    // of a data position or a learning rate in it is a damaged checkpoint, not a silent change.
    std::string self_check;
    int version = 0;   // 1: written before manifests held their own checksum (nothing to verify it by)
};

// ---- directories --------------------------------------------------------------------------

std::string checkpoint_dir(const std::string& out_dir, int64_t step);       // <out>/step_00001000
std::string checkpoint_tmp_dir(const std::string& out_dir, int64_t step);   // <out>/step_00001000.tmp
// Rank 0, before anyone writes: creates a fresh, empty tmp directory for `step` (removing a stale
// one left by a crash) and returns it. Fails if the checkpoint for `step` already exists.
std::string begin_checkpoint(const std::string& out_dir, int64_t step);
// Every step_<digits> entry under out_dir, complete or not, a directory or not (a file or a link
// there is a damaged checkpoint), ascending by step (none when out_dir does not exist). Ignores
// *.tmp and everything else.
std::vector<std::pair<int64_t, std::string>> checkpoint_step_dirs(const std::string& out_dir);
// The newest step directory under out_dir, complete or not, or nullopt when there is none (or
// out_dir does not exist): a damaged newest checkpoint is returned, so that whoever reads it
// names what is wrong with it instead of silently taking an older one.
std::optional<std::string> latest_checkpoint(const std::string& out_dir);
// "step_00001000" → 1000; -1 if `name` is not step_<digits>.
int64_t parse_step_name(const std::string& name);
// Steps of the complete checkpoints under out_dir (manifest present and valid), ascending.
std::vector<int64_t> list_checkpoints(const std::string& out_dir);
// Deletes all but the newest keep_last (≥ 1) complete checkpoints, except the newest one that
// `healthy` accepts (when given), and the *.tmp directories of steps older than the newest
// complete one (stale leftovers of crashed saves). Never deletes a step directory whose manifest
// does not read (a damaged checkpoint is left for its owner to inspect). Touches nothing else. A
// directory it cannot remove (write-protected, another user's), or one that holds anything but
// files (a directory of someone's put there), is kept with a warning on stderr.
void prune_checkpoints(const std::string& out_dir, int keep_last,
                       const std::function<bool(const CheckpointManifest&)>& healthy = nullptr);

// ---- writing (into begin_checkpoint's tmp directory) ----------------------------------------

// The Hugging Face tensors of a model, in HF order, and which shard file holds each when written
// by `world` ranks: whole tensors, balanced by bytes (largest first onto the lightest shard), the
// same on every rank. n_shards = min(world, number of tensors).
struct HfTensor {
    std::string name;             // e.g. "transformer.h.3.attn.c_attn.weight"
    int param = 0;                // ParamTensor it comes from
    int layer = -1;               // layer index for stacked tensors, else -1
    bool transpose = false;       // HF Conv1D weight (in, out) = our (out, in) transposed
    std::vector<int64_t> shape;   // HF shape
    int shard = 0;                // 0-based shard index
};
std::vector<HfTensor> hf_tensors(const GPTConfig& cfg, int world);
int hf_num_shards(const GPTConfig& cfg, int world);
std::string hf_shard_name(int shard, int n_shards);   // "model-00001-of-00004.safetensors"
// transformers' GPT2Config for the model, as JSON text.
std::string hf_config_json(const GPTConfig& cfg);

// All ranks: rank r writes shard r (if r < n_shards) from the full engine-layout FP32 weights
// (num_parameters floats), rounded to BF16 (nearest even); rank 0 also writes
// model.safetensors.index.json and config.json.
void write_weight_shards(const std::string& tmp_dir, const GPTConfig& cfg, const float* weights, int rank, int world);

enum class StateTensor { Master, M, V };
const char* state_tensor_name(StateTensor s);   // "master", "m", "v"

// All ranks: writer w stores the FP32 master weights and Adam moments of its range
// [global_begin, global_begin + n) of the flat parameter vector (GPT::state_begin(), state_size();
// n may be 0) as state-%05d.safetensors, one slice per tensor the range touches.
void write_state_shard(const std::string& tmp_dir, const GPTConfig& cfg, int writer, size_t global_begin, size_t n,
                       const float* master, const float* m, const float* v);
std::string state_shard_name(int writer);   // "state-00003.safetensors"

// Rank 0, after every rank has written: checks that every rank's weight and state shard is there
// (manifest.model and world_size say which), hashes every file, writes manifest.json (recording the
// files), fsyncs, renames tmp_dir → final_dir and fsyncs the parent. Fails if final_dir exists.
// Returns the XXH3 of the manifest.json it wrote (the checkpoint's identity in the run's log).
uint64_t finalize_checkpoint(const std::string& tmp_dir, const std::string& final_dir, CheckpointManifest manifest);

// ---- reading ----------------------------------------------------------------------------------

// Reads manifest.json (fails if `dir` is not a checkpoint, or the manifest is malformed), with the
// checks of parse_manifest, and that a step_<N> directory's manifest records step N. A manifest of
// a later version than this build reads throws NewerBuildError: the checkpoint is not damaged.
struct NewerBuildError : Error {
    using Error::Error;
};
// A checkpoint this user may not read (a directory or file without read permission) is not damaged
// either: reading it (read_manifest, verify_checkpoint) throws UnreadableCheckpointError.
struct UnreadableCheckpointError : Error {
    using Error::Error;
};
CheckpointManifest read_manifest(const std::string& dir);
// A manifest.json lists a checkpoint's files (a few per rank) and its run's configuration: a few
// kB. One larger than this is refused by its size before it is read (a damaged checkpoint).
constexpr size_t kMaxManifestBytes = size_t(64) << 20;
// The manifest in `text` (the contents of `path`), every field checked before use: present, of its
// type and in range (the step and the model's shape positive ints, positions and sizes
// non-negative integers, numbers finite), and the trainer's state in it as its owners read it —
// loss_scaler and extra (train_state.h), fp8 (GPT::fp8_state_json's per-GEMM scales, histories and
// step counts). Errors name `path` and the field.
CheckpointManifest parse_manifest(const std::string& text, const std::string& path);
// Fails, naming the field and both values, if the checkpoint's model differs from `expected`.
void check_model_config(const CheckpointManifest& manifest, const GPTConfig& expected, const std::string& dir);
// Checks that every file the manifest lists exists with its recorded size and XXH3 checksum.
void verify_checkpoint(const std::string& dir, const CheckpointManifest& manifest);
// The manifest's own checksum and the small files' (all but the *.safetensors: the tokenizer,
// config.json), before a run reads any of them: --init-from, whose weights are verified as they
// are read.
void verify_checkpoint_metadata(const std::string& dir, const CheckpointManifest& manifest);
// The same for the files `names` of the manifest (a rank checks what it reads).
void verify_checkpoint_files(const std::string& dir, const CheckpointManifest& manifest,
                             const std::vector<std::string>& names);
// XXH3 of the checkpoint's manifest.json as it is on disk: ranks compare it to see that they
// resume from the same checkpoint.
uint64_t manifest_checksum(const std::string& dir);
// read_manifest + check_model_config + verify_checkpoint.
CheckpointManifest open_checkpoint(const std::string& dir, const GPTConfig& expected);

// The full engine-layout FP32 weights (num_parameters floats) from the HF shards: transposed
// back, wte padded to Vp rows with zeros. Shapes are checked against cfg. Also reads a
// transformers directory: one model.safetensors instead of an index, GPT2Model's names (no
// "transformer." prefix), F32, BF16 or F16 tensors; tensors the engine has no use for (a tied
// lm_head.weight, attention-mask buffers) are ignored.
std::vector<float> read_weights(const std::string& dir, const GPTConfig& cfg);
// What read_weights checks before it reads a value, from the files' headers alone: every tensor
// there with cfg's shape, and no layer beyond cfg's n_layer. Errors name the file, the tensor, and
// `described_by` (the config.json or manifest cfg came from). Nothing is allocated for the model.
void check_weights(const std::string& dir, const GPTConfig& cfg, const std::string& described_by);
// Values [global_begin, global_end) of the flat FP32 vector `which`, assembled from the slices of
// all state files listed in the manifest, whatever world size wrote them. Fails unless the range
// is fully covered.
std::vector<float> read_state_range(const std::string& dir, const GPTConfig& cfg, StateTensor which,
                                    size_t global_begin, size_t global_end);
// The state files (manifest names) read_state_range reads for [global_begin, global_end): those
// holding a slice of any state tensor that overlaps it (from their headers only).
std::vector<std::string> state_files_for_range(const std::string& dir, const GPTConfig& cfg, size_t global_begin,
                                               size_t global_end);

}   // namespace train_gpt
