// config.h — the training configuration: every command-line flag with its default (TrainConfig,
// as parsed, never changed afterwards), and the run it resolves to at start-up (RunPlan).
//
// Parsing lives in config.cpp (CLI11, host compiler only); the trainer sees plain structs.
#pragma once

#include "model/gpt.h"
#include "train/schedule.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace train_gpt {

struct TrainConfig {
    // data
    std::string train_data = "data/kjv/kjv_train_*.bin";   // glob of token shards
    std::string val_data = "data/kjv/kjv_val_*.bin";       // glob of token shards ("" = none)
    std::string tokenizer = "";   // "": the model's, or the one beside the training shards (data/run_tokenizer.h)
    bool shuffle = false;
    std::string output_dir = "out";
    // model
    std::string model = "d2";   // depth dial: d12 = GPT-2 124M (the default is sized for a CPU run)
    int n_embd = 0;             // 0: from the depth dial
    int n_head = 0;             // 0: from the depth dial
    int vocab_size = 0;         // 0: from the tokenizer
    int max_seq_len = 0;        // position table rows; 0: = seq_len
    // batch
    int batch_size = 8;               // B, sequences per micro-batch per rank
    int seq_len = 128;                // T
    int64_t total_batch_tokens = 0;   // tokens per optimizer step; 0: B·T·world (no accumulation)
    // optimisation
    int steps = 120;
    float lr = 2e-3f;
    int warmup_steps = -1;   // -1: default_warmup_steps(steps)
    std::string lr_schedule = "cosine";
    float final_lr_frac = 0.1f;
    float wsd_decay_frac = 0.2f;
    float weight_decay = 0.1f;
    float beta1 = 0.9f;
    float beta2 = 0.95f;
    float adam_eps = 1e-8f;
    float grad_clip = 1.0f;   // 0: no clipping
    // precision (DESIGN §3, §4)
    std::string precision = "auto";   // auto (bf16 on a GPU, fp32 on the CPU) | fp32 | tf32 | bf16 | fp16 | fp8
    bool master_weights = true;       // FP32 master weights (off: the ablation that shows why they matter)
    bool loss_scaling = true;         // fp16 dynamic loss scaling (off: the ablation)
    float loss_scale_init = 65536.0f;
    int loss_scale_growth_interval = 2000;
    float loss_scale_min = 1.0f;
    int fp8_amax_history = 16;
    std::string fp8_amax_algo = "max";   // max | most_recent
    int fp8_margin = 0;
    std::string fp8_recipe = "delayed";         // delayed | current
    std::string fp8_gemms = "all";              // all | none | comma list of qkv, attproj, fc, fcproj | auto
    int fp8_telemetry_every = 50;               // steps between FP8 telemetry records in the log; 0: never
    int max_skipped_steps = 20;                 // stop after this many non-finite steps in a row
    float loss_spike_factor = 2.0f;             // warn when a step's loss exceeds this × its running level; 0: never
    bool stop_on_loss_spike = false;            // stop the run at the first loss spike
    float grad_norm_spike_factor = 10.0f;       // warn when a step's gradient norm exceeds this × its level; 0: never
    std::string inject_nonfinite_step = "-1";   // testing: poison a gradient at step N or steps FIRST-LAST
                                                //          (0-based); -1: never
    // evaluation and sampling
    int val_every = 40;           // steps between val-loss evaluations (and at the end); 0: never
    int val_batches = 20;         // micro-batches per val-loss evaluation
    std::string hellaswag = "";   // HellaSwag jsonl to evaluate (eval/hellaswag.h); "": none
    int eval_every = 0;           // steps between HellaSwag evaluations (and at the end); 0: at the end only
    int hellaswag_examples = 0;   // the first N examples of the file; 0: all
    int sample_tokens = 256;      // tokens per sample (at the end, and every sample_every steps); 0: no sample
    int sample_every = 0;         // steps between samples during training; 0: only at the end
    std::string sample_prompt = "";
    float temperature = 1.0f;   // 0: greedy
    int top_k = 0;              // 0: every token
    float top_p = 1.0f;         // 1: no nucleus cut
    int64_t sample_seed = -1;   // -1: from --seed
    // data parallel and checkpoints
    int zero = 0;               // 0: replicated optimizer state; 1: master weights and Adam m, v sharded (ZeRO-1)
    int recompute = 0;          // activations recomputed in backward: 0 none, 1 GELU, 2 GELU and layernorm
    int lm_head_chunks = 1;     // the LM head and cross-entropy over the tokens in this many chunks
    int checkpoint_every = 0;   // steps between checkpoints, plus one at the end; 0: no checkpoints
    std::string checkpoint_dir = "";   // "" = <output_dir>/checkpoints
    int keep_checkpoints = 3;          // complete checkpoints kept (older ones are deleted)
    bool resume = false;               // continue from the newest checkpoint in checkpoint_dir (none: an error)
    bool auto_resume = false;          // resume when checkpoint_dir holds a checkpoint, else start fresh
    bool resume_from_intact = false;   // the newest checkpoint damaged: resume from the newest intact one
    bool overwrite_output = false;     // a fresh run may replace the log.jsonl / config.json of a previous one
    std::string init_from = "";        // start from these weights with a fresh optimizer: a checkpoint root or
                                       // step directory, or a transformers GPT-2 directory (checkpoint/init_from.h)
    // runtime
    std::string device = "auto";   // auto | cpu | cuda
    bool fused_kernels = false;    // CUDA: fused ops as one kernel (off: the validated separate kernels)
    bool gemm_autotune = false;    // CUDA: time cuBLASLt's candidate algorithms per GEMM shape, keep the fastest
    bool gemm_epilogues = false;   // GELU and the bias gradients in the GEMMs' epilogues (model/epilogue_block_ops.h)
    std::string attention = "gemm";   // CUDA: gemm (cuBLASLt, T×T scratch) | flash (tensor cores, head size 64)
    std::string flash_backward =
        "default";     // --attention flash's backward kernels: default | wide (two m-tiles per warp)
    int threads = 0;   // CPU threads; 0: OpenMP's default
    uint64_t seed = 1337;
    int log_every = 1;       // print a step line every N steps (the JSONL log gets every step)
    bool profile = false;    // CUDA: GPU time per kernel-set op, printed at exit
    std::string trace_ops;   // every kernel-set op the run calls, one line each, into this file (train/op_trace.h)

    // what the parser took: each flag's value as text (given, or its default), by long name
    // ("steps" → "120"), and the long names given on the command line
    std::map<std::string, std::string> flag_texts;
    std::set<std::string> given;
    // relative path flags a resume took from its checkpoint → the directory they are relative to
    // (parse_resumed_command_line); the others are relative to this process's working directory
    std::map<std::string, std::string> path_dirs;

    // --inject-nonfinite-step: whether the run poisons a gradient at `step` (0-based)
    bool injects_nonfinite_at(int step) const;
    // The seed of the samples' draws: --sample-seed, or one derived from --seed (another stream
    // than the initialisation's), which config.json records so that giving it back reproduces them
    uint64_t samples_seed() const { return sample_seed >= 0 ? (uint64_t)sample_seed : seed ^ 0x5eed5eedULL; }
};

// --inject-nonfinite-step's text: "N" (-1: never) or "FIRST-LAST" into first..last; false if it is
// neither.
bool parse_injected_steps(const std::string& text, int& first, int& last);

// Parses argv into cfg. Returns an exit code when the program should stop right away
// (--help: 0; an unknown flag or a bad value: non-zero, after printing the reason).
std::optional<int> parse_command_line(int argc, const char* const* argv, TrainConfig& cfg);

// The flags of a run, {"steps": "120", ...}, as its checkpoints record them.
std::string flags_json(const TrainConfig& cfg);
// "" if two flags_json() texts give the same flags, else the first difference, in words
// ("--steps is 4 here, 6 on rank 0").
std::string first_flag_difference(const std::string& flags, const std::string& reference);
// Whether a flag says which run it is: its data and output directory, model, batch, optimizer (but
// -x, which a longer run's resubmission raises), precision, and --seed. --auto-resume, which
// restarts one command line, refuses a checkpoint whose run this command line gives other values
// of these (another job's, sharing the directory); --resume takes them as deliberate changes.
bool defines_the_run(const std::string& long_name);
// The flags that define the run (defines_the_run, paths aside) whose values differ between this
// command line's flags_json and the checkpoint's recorded one (every flag is recorded, given or
// at its default, so a flag left at its default counts too), in words; "" where none does.
std::string run_identity_differences(const std::string& now_flags, const std::string& saved_flags);
// A flag's text in a flags_json() text; "" where it has none.
std::string recorded_flag_text(const std::string& flags, const std::string& long_name);

// A resumed run: cfg (this command line, parsed) becomes the checkpoint's run — `saved_json`, the
// flags_json() its checkpoint recorded — with the flags given on this command line on top. Not
// taken from the checkpoint: --resume, --init-from (how the run was started; recorded on, where not
// given, as where its weights began) and --checkpoint-dir,
// which is `checkpoint_root` (where the checkpoint was found) unless given. (--threads is restored:
// the CPU kernel set's reductions follow the thread count, and resume is bit-exact only with it.) Returns the flags given now that differ from the saved run.
struct FlagOverride {
    std::string flag, saved, now;   // long name; the checkpoint's run's text, this command line's
};
// A relative path the checkpoint's run took (-i, -j, --tokenizer, --hellaswag, -o) is relative to
// the directory `saved_path_dirs` records for it (the working directory of the run that was given
// it): a resume started elsewhere reads it from there (before: the same text named other data),
// with a line in *notices saying so, and keeps the text and that directory for its own checkpoints
// (cfg.path_dirs). Where that directory no longer exists (a moved tree), or none is recorded, the
// text is taken as it is, relative to this run's directory.
// A run of the <output-dir>/checkpoints layout whose checkpoints are found under another directory
// that holds a log (moved or copied) keeps its log there: -o is that directory. Its other relative
// paths are read from the moved directory where they exist there and, for a copy (the recorded -o
// still holds this run's log: `holds_run_log(dir)`), only where the original's directory lost them.
// A path flag given now that names the recorded path otherwise spelled ("-o ./" for "-o .") is no
// override.
std::vector<FlagOverride> parse_resumed_command_line(int argc, const char* const* argv, const std::string& saved_json,
                                                     const std::string& checkpoint_root, TrainConfig& cfg,
                                                     const std::map<std::string, std::string>& saved_path_dirs = {},
                                                     std::vector<std::string>* notices = nullptr,
                                                     const std::function<bool(const std::string&)>& holds_run_log = {});
// The path flags that say which run it is (-i, -j, -o, --init-from), given now or left at their
// defaults, whose text in this command line's flags (`now_flags`) names other files than the
// checkpoint's run's (`saved_flags`, relative paths from `saved_dirs`), in words
// ("--train-data x (the checkpoint's run: y)"); "" where none does. --auto-resume refuses these.
// The same text, or the same path however spelled, is the run's. Not counted either: -o naming
// the directory that holds the checkpoints (in `checkpoint_root`) of a run that kept them at
// <output-dir>/checkpoints (its directory, moved), and an -i whose recorded place names
// nothing now while this one does (moved with the project: a line in *notices; the training
// data's token and shard counts are checked when the checkpoint is loaded).
std::string path_identity_differences(const std::string& now_flags, const std::string& saved_flags,
                                      const std::map<std::string, std::string>& saved_dirs,
                                      const std::string& checkpoint_root, std::vector<std::string>* notices);
// The directory each relative path flag of cfg is relative to, as JSON ({"train-data": "/home/me"}):
// cfg.path_dirs' for those a resume took from its checkpoint, this process's working directory
// for the others.
std::string path_dirs_json(const TrainConfig& cfg);

// Evaluating a checkpoint without training (-x 0): its val loss as the checkpoint's run measured
// it, over the same tokens: -b, -t and -m from `saved_config_json` (its config.json) where not
// given on this command line; they then count as given (-t so holds over the model's position
// table). Returns what it took ("--batch-size 8 --seq-len 128"), "" for nothing.
std::string evaluation_flags_of(const std::string& saved_config_json, TrainConfig& cfg);

// The flags that say how a run starts (--resume, --auto-resume, --resume-from-intact), checked
// before the checkpoint is looked for; fails naming the flag.
// On a resume: "" where the learning rate of the step after `step` is what the checkpoint's run
// (its config.json text) had scheduled, else a notice of the change, with what to give instead.
std::string schedule_change_notice(const LrSchedule& now, const std::string& saved_config_json, int64_t step);
void validate_start(const TrainConfig& cfg);
// Cross-flag checks the parser cannot do (flags that contradict each other or have no effect,
// numbers beyond a float's range), on the run's flags (a resumed run's: the checkpoint's with
// this command line's on top); fails naming the flag.
void validate(const TrainConfig& cfg);

// The shapes the CUDA kernel set's kernels take, checked at start-up: its kernels check the same at
// launch, but a launch comes after config.json and log.jsonl are written. The attention `kind`
// (gemm | flash | cudnn, as chosen) on head size n_embd / n_head: gemm and cudnn take a multiple of
// 8 (16-byte operand rows), cudnn at most 128. FP8 training on a kernel set whose FP8 GEMMs take
// multiples of `fp8_gemm_multiple`: B·T, the weight gradients' reduction, one of them. Both fail
// naming the flags.
void check_cuda_attention_shape(const std::string& kind, int n_embd, int n_head);
void check_fp8_training_shape(int B, int T, int fp8_gemm_multiple, const std::string& kernel_set);

// What the configuration resolves to at start-up: everything the run uses that is not a flag as
// given. resolve_run_plan() fills it from the flags; the trainer then adds what only the machine
// can say (the kernel set, the parameter count, --fp8-gemms auto's timed choice). It is printed as
// the start-up table, saved as config.json and in every checkpoint.
struct RunPlan {
    std::string device;      // the kernel set used: cpu | cuda
    std::string attention;   // the attention that runs: gemm | flash (CUDA), exact (CPU)
    std::string tokenizer;   // the tokenizer's file (data/run_tokenizer.h), or "none"
    GPTConfig model;
    size_t num_parameters = 0;
    int seq_len = 0;   // T: --seq-len; without -t, when the run starts from a model, its
                       //    position table if that is shorter or the run does not train (-x 0)
    int world_size = 1;
    int grad_accum_steps = 1;
    int64_t tokens_per_step = 0;   // B · T · ranks · grad_accum_steps
    PrecisionConfig precision;     // fp8.gemms: the GEMMs that run in FP8 (auto: resolved by timing)
    AdamWConfig adamw;
    LrSchedule schedule;
    std::string checkpoint_dir;   // --checkpoint-dir, or <output-dir>/checkpoints
};

// The shards a run reads ("" = none): the training glob when it trains (steps > 0); the validation
// glob when it evaluates (val_every > 0) and either trains or was given -j. So a run with -x 0
// (sampling, evaluating) reads no data it was not given.
struct RunData {
    std::string train, val;
};
RunData run_data(const TrainConfig& cfg);

// The warmup of a run of `steps` steps when --warmup-steps is not given: a sixth of them (20 of the
// default 120; a 20-step run warms up for 4), at most 700 (llm.c's GPT-2 124M warmup).
int default_warmup_steps(int steps);

// Where the run's checkpoints go: --checkpoint-dir, or <output-dir>/checkpoints.
std::string checkpoint_dir_of(const TrainConfig& cfg);

// A resumed run whose optimizer step takes another number of tokens than the checkpoint's run
// (another world size with -d 0, another -b or -t): a notice saying so and how to keep the
// checkpoint's batch ("" if it is unchanged or the checkpoint does not record it).
std::string batch_change_notice(const TrainConfig& c, const RunPlan& now, const std::string& saved_config_json);

// A resumed run whose evaluation covers other validation tokens than the checkpoint's run (-m x -b
// x -t: another -b for another world size with the same global batch, say): a notice saying so,
// and the -m that keeps the checkpoint's where one does ("" if unchanged, not evaluated, or not
// recorded).
std::string val_set_change_notice(const TrainConfig& c, const RunPlan& now, const std::string& saved_config_json);

// The order the checkpoint's run read its data in (from its recorded config); nullopt for a
// checkpoint from before these were recorded, or a record that does not parse.
struct SavedDataOrder {
    int seq_len = 0;
    bool shuffle = false;
    uint64_t seed = 0;
};
std::optional<SavedDataOrder> saved_data_order(const std::string& saved_config_json);
// The tokens one rank's loss averaged over in an optimizer step of the checkpoint's run
// (batch_size · seq_len · grad_accum_steps, from its recorded config): the backward's gradients
// are in units of 1 / that (train_gpt.cu: dloss). nullopt where it was not recorded.
std::optional<int64_t> saved_rank_tokens_per_step(const std::string& saved_config_json);

// A resumed run that reads its data otherwise than the checkpoint's run did: another -t (the data
// position, a sample index, was moved from `position_then` to `position_now`, see
// DataLoader::position_at_seq_len), or another --shuffle or --seed of a shuffled run (the epoch in
// progress is permuted anew). A notice saying what that does to the data; "" if nothing changed.
struct DataOrderNow {
    int seq_len;
    bool shuffle;
    uint64_t seed;
    int64_t samples_per_epoch;
};
std::string data_order_change_notice(const SavedDataOrder& then, const DataOrderNow& now, int64_t position_then,
                                     int64_t position_now);

// The plan for `world_size` ranks; tokenizer_vocab is the tokenizer's vocabulary (0: none);
// model: the shape of the model the run starts from (a checkpoint or transformers directory:
// --init-from, --resume; model_source names it), else null and the shape follows the flags,
// which must agree with the model where given. Fails naming the flag when flags contradict each
// other, the model or the tokenizer.
RunPlan resolve_run_plan(const TrainConfig& cfg, int world_size, int tokenizer_vocab, const GPTConfig* model = nullptr,
                         const std::string& model_source = "");

// Resolves total_batch_tokens into gradient-accumulation steps for sequences of seq_len tokens
// (0: --seq-len); fails if it does not divide.
int grad_accum_steps_for(const TrainConfig& cfg, int world_size, int seq_len = 0);

// The resolved configuration as ordered rows: the start-up table and config.json (where each
// value is a JSON string, integer, number, boolean or null by its kind). Built from the flag
// table (train/flags.h): one or more rows per flag, so config.json holds every flag, as the run
// resolved it.
struct ConfigRow {
    enum Kind { kText, kInteger, kNumber, kBool, kNone } kind;   // kNone: not used in this run (shown as "-")
    std::string key, value;
};
std::vector<ConfigRow> describe(const TrainConfig& cfg, const RunPlan& plan);
void print_config_table(const TrainConfig& cfg, const RunPlan& plan);
// One notice per flag given on the command line that this run does not use (Flag::only_for: an
// fp8 flag under bf16, a sampling flag with -g 0): "--fp8-recipe has no effect in this run: …".
std::vector<std::string> unused_flag_notices(const TrainConfig& cfg, const RunPlan& plan);
// -p auto, once the device is known: bf16 on a GPU (its tensor cores; FP32 master weights keep the
// update exact), fp32 on the CPU (no 16-bit speed to gain there, and the exact reference)
Precision default_precision_for(const std::string& device);
// Why the run has its precision, for the configuration: "-p" or the default's reason.
std::string precision_source(const TrainConfig& cfg, const RunPlan& plan);
void save_config_json(const std::string& path, const TrainConfig& cfg, const RunPlan& plan);
std::string config_json(const TrainConfig& cfg, const RunPlan& plan);   // the same, as text
// The flags that define the run (defines_the_run; -i, -j and --init-from as what they name,
// relative to this directory) on which this run's resolved configuration and the config.json an
// earlier start wrote disagree, in words; "" where they agree, nullopt where it does not parse or
// is not a train_gpt run's (no model, data, batch, lr, seed or precision).
std::optional<std::string> config_identity_differences(const std::string& saved_config_json, const TrainConfig& cfg,
                                                       const RunPlan& plan);

}   // namespace train_gpt
