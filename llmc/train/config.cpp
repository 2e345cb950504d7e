// config.cpp — command line (CLI11) and the resolved-configuration table / JSON (nlohmann-json).
#include "train/config.h"

#include "precision/fp8_scaling.h"

#include "train/schedule.h"
#include "utils.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace train_gpt {

namespace {

// A numeric check that names the problem: "'abc' is not a number", "... outside [lo, hi]", or a
// value that FP32 (every float flag's type) cannot hold: above FLT_MAX, or non-zero and below the
// smallest normal FLT_MIN, where it would become 0 or lose its precision silently. (CLI11's own
// range validators report a non-number as out of range.)
CLI::Validator numeric(double lo, double hi = 1e300, bool lo_exclusive = false, bool hi_exclusive = false) {
    std::string desc = lo_exclusive ? "POSITIVE"
                       : hi < 1e300 ? format("[%g, %g%s", lo, hi, hi_exclusive ? ")" : "]")
                                    : format(">= %g", lo);
    return CLI::Validator(
        [=](std::string& text) -> std::string {
            char* end = nullptr;
            double x = std::strtod(text.c_str(), &end);
            if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(x)) {
                return "'" + text + "' is not a number";
            }
            if (lo_exclusive ? !(x > lo) : !(x >= lo)) {
                return format("%s must be %s %g", text.c_str(), lo_exclusive ? ">" : ">=", lo);
            }
            if (hi_exclusive ? !(x < hi) : x > hi) return format("%s must be %s %g", text.c_str(), hi_exclusive ? "<" : "<=", hi);
            if (std::fabs(x) > FLT_MAX) return format("%s is beyond FP32's range (at most %g)", text.c_str(), (double)FLT_MAX);
            if (x != 0 && std::fabs(x) < FLT_MIN) {
                return format("%s underflows FP32 (the smallest normal value is %g): give 0 or a larger value",
                              text.c_str(), (double)FLT_MIN);
            }
            return "";
        },
        desc);
}
const CLI::Validator kPositive = numeric(0.0, 1e300, true);
const CLI::Validator kNonNegative = numeric(0.0);
const CLI::Validator kFraction = numeric(0.0, 1.0);
// Adam's β: 1 − β^t divides the bias correction, 0 at β = 1 (and the moments never move)
const CLI::Validator kAdamBeta = numeric(0.0, 1.0, false, true);

// Every flag, bound to the fields of c, with its help text and check: the one table of the
// command line (parsing, --help, and the flags a checkpoint records all come from it).
void add_flags(CLI::App& app, TrainConfig& c) {
    app.option_defaults()->always_capture_default();
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);   // later flags override earlier ones
    app.get_formatter()->column_width(34);

    app.add_option("-i,--train-data", c.train_data, "Glob of training token shards")->group("Data");
    app.add_option("-j,--val-data", c.val_data, "Glob of validation token shards ('' = no validation)")->group("Data");
    app.add_option("--tokenizer", c.tokenizer,
                   "Tokenizer file (tokenizer.bin), for the vocabulary size, prompts and samples ('' = the model's, "
                   "or the one beside the training shards; shards that record theirs are checked against it)")
        ->group("Data");
    app.add_flag("--shuffle,!--no-shuffle", c.shuffle, "Shuffle training samples each epoch")->group("Data");
    app.add_option("-o,--output-dir", c.output_dir, "Directory for log.jsonl and config.json")->group("Data");

    app.add_option("-e,--model", c.model, "Depth dial dN: d12 = GPT-2 124M, d24, d36, d48 = 1.5B; else C = 64N, N heads")
        ->group("Model");
    app.add_option("--n-embd", c.n_embd, "Override the width C (0 = from --model)")->check(kNonNegative)->group("Model");
    app.add_option("--n-head", c.n_head, "Override the number of heads (0 = from --model)")->check(kNonNegative)->group("Model");
    app.add_option("--vocab-size", c.vocab_size, "Vocabulary size (0 = from --tokenizer)")->check(kNonNegative)->group("Model");
    app.add_option("--max-seq-len", c.max_seq_len, "Rows of the position table (0 = --seq-len)")->check(kNonNegative)->group("Model");

    app.add_option("-b,--batch-size", c.batch_size, "Micro-batch size B (sequences per rank)")->check(kPositive)->group("Batch");
    app.add_option("-t,--seq-len", c.seq_len, "Sequence length T")->check(kPositive)->group("Batch");
    app.add_option("-d,--total-batch-tokens", c.total_batch_tokens,
                   "Tokens per optimizer step, reached by gradient accumulation (0 = B*T*ranks)")
        ->check(kNonNegative)->group("Batch");

    app.add_option("-x,--steps", c.steps, "Optimizer steps")->check(kNonNegative)->group("Optimizer");
    app.add_option("-l,--lr", c.lr, "Peak learning rate")->check(kNonNegative)->group("Optimizer");
    app.add_option("-u,--warmup-steps", c.warmup_steps,
                   "Linear warmup steps (-1 = a sixth of the steps, at most 700)")->check(numeric(-1.0))->group("Optimizer");
    app.add_option("-k,--lr-schedule", c.lr_schedule, "After warmup: cosine | linear | constant | wsd")
        ->check(CLI::IsMember({"cosine", "linear", "constant", "wsd"}))->group("Optimizer");
    app.add_option("-q,--final-lr-frac", c.final_lr_frac, "Final learning rate as a fraction of --lr")
        ->check(kFraction)->group("Optimizer");
    app.add_option("--wsd-decay-frac", c.wsd_decay_frac, "wsd: fraction of all steps spent in the final decay")
        ->check(kFraction)->group("Optimizer");
    app.add_option("-c,--weight-decay", c.weight_decay, "AdamW weight decay (2-D weights only)")
        ->check(kNonNegative)->group("Optimizer");
    app.add_option("--beta1", c.beta1, "AdamW beta1")->check(kAdamBeta)->group("Optimizer");
    app.add_option("--beta2", c.beta2, "AdamW beta2")->check(kAdamBeta)->group("Optimizer");
    app.add_option("--adam-eps", c.adam_eps, "AdamW epsilon")->check(kPositive)->group("Optimizer");
    app.add_option("--grad-clip", c.grad_clip, "Clip the global gradient norm to this (0 = off)")
        ->check(kNonNegative)->group("Optimizer");

    app.add_option("-p,--precision", c.precision, "fp32 | bf16 | fp16 | fp8 (bf16 storage, FP8 GEMMs)")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16", "fp8"}))->group("Precision");
    app.add_option("-w,--master-weights", c.master_weights, "Keep FP32 master weights (bf16/fp16/fp8)")->group("Precision");
    app.add_option("--loss-scaling", c.loss_scaling, "fp16: dynamic loss scaling")->group("Precision");
    app.add_option("--loss-scale-init", c.loss_scale_init, "fp16: initial loss scale")->check(kPositive)->group("Precision");
    app.add_option("--loss-scale-growth-interval", c.loss_scale_growth_interval,
                   "fp16: clean steps before the loss scale doubles")->check(kPositive)->group("Precision");
    app.add_option("--loss-scale-min", c.loss_scale_min, "fp16: floor of the loss scale")->check(kPositive)->group("Precision");
    app.add_option("--fp8-amax-history", c.fp8_amax_history, "fp8: amax history length")->check(kPositive)->group("Precision");
    app.add_option("--fp8-amax-algo", c.fp8_amax_algo, "fp8: scale from the history's max | most_recent")
        ->check(CLI::IsMember({"max", "most_recent"}))->group("Precision");
    app.add_option("--fp8-margin", c.fp8_margin, "fp8: back the scale off by 2^-margin")->check(kNonNegative)->group("Precision");
    app.add_option("--fp8-recipe", c.fp8_recipe, "fp8: delayed (amax history) | current (this step's amax)")
        ->check(CLI::IsMember({"delayed", "current"}))->group("Precision");
    app.add_option("--fp8-gemms", c.fp8_gemms,
                   "fp8: the block GEMMs that run in FP8 (all, none, a comma list of qkv, attproj, fc, fcproj, or "
                   "auto: those faster in FP8 on this GPU at this B·T, timed at start); the others run in bf16")
        ->check(CLI::Validator(
            [](std::string& text) -> std::string {
                try {
                    if (text != "auto") parse_fp8_gemms(text);
                } catch (const Error& e) {
                    return e.what();
                }
                return "";
            },
            "GEMMS"))
        ->group("Precision");
    app.add_option("--fp8-telemetry-every", c.fp8_telemetry_every,
                   "fp8: log per-tensor amax/scale/saturation every N steps (0 = never)")->check(kNonNegative)->group("Precision");
    app.add_option("--max-skipped-steps", c.max_skipped_steps,
                   "Stop after this many consecutive steps with a non-finite loss or gradient (the streak is saved in "
                   "checkpoints)")->check(kPositive)->group("Precision");
    app.add_option("--loss-spike-factor", c.loss_spike_factor,
                   "Warn when a step's loss exceeds this times its running level (an average of the earlier losses, "
                   "weight 0.1 per step); 0 = never")
        ->check(CLI::Validator(
            [](std::string& text) -> std::string {
                char* end = nullptr;
                const double x = std::strtod(text.c_str(), &end);
                if (text.empty() || *end != '\0' || !(x == 0 || (x > 1 && x <= FLT_MAX))) {
                    return "'" + text + "' must be 0 (off) or a number above 1";
                }
                return "";
            },
            "0 | > 1"))
        ->group("Precision");
    app.add_flag("--stop-on-loss-spike", c.stop_on_loss_spike,
                 "Stop the run (exit 1) at the first loss spike (see --loss-spike-factor)")->group("Precision");
    app.add_option_function<std::string>(
           "--inject-nonfinite-step",
           [&c](const std::string& text) {
               const size_t dash = text.find('-', 1);
               c.inject_nonfinite_first = std::stoi(text.substr(0, dash));
               c.inject_nonfinite_last = dash == std::string::npos ? c.inject_nonfinite_first : std::stoi(text.substr(dash + 1));
           },
           "Testing: make a gradient +inf at this step, or at the steps FIRST-LAST (0-based), to exercise the skip "
           "path (-1 = never)")
        ->check(CLI::Validator(
            [](std::string& text) -> std::string {
                int first = 0, last = 0, used = 0;
                if (std::sscanf(text.c_str(), "%d%n", &first, &used) == 1 && text[used] == '\0' && first >= -1) return "";
                if (std::sscanf(text.c_str(), "%d-%d%n", &first, &last, &used) == 2 && text[used] == '\0' && first >= 0 &&
                    last >= first) {
                    return "";
                }
                return "'" + text + "' is not a step (N, -1 = never) or a range FIRST-LAST";
            },
            "N|FIRST-LAST"))
        ->default_str("-1")
        ->group("Precision");

    app.add_option("-v,--val-every", c.val_every, "Evaluate val loss every N steps and at the end (0 = never)")
        ->check(kNonNegative)->group("Evaluation");
    app.add_option("-m,--val-batches", c.val_batches, "Micro-batches per val-loss evaluation")
        ->check(kPositive)->group("Evaluation");
    app.add_option("--hellaswag", c.hellaswag,
                   "HellaSwag jsonl (dev/data/hellaswag.sh) to evaluate as llm.c does (acc_norm), at the end and every "
                   "--eval-every steps ('' = none)")->group("Evaluation");
    app.add_option("--eval-every", c.eval_every, "Evaluate HellaSwag every N steps and at the end (0 = at the end only)")
        ->check(kNonNegative)->group("Evaluation");
    app.add_option("--hellaswag-examples", c.hellaswag_examples, "Evaluate the first N HellaSwag examples (0 = all)")
        ->check(kNonNegative)->group("Evaluation");
    app.add_option("-g,--sample-tokens", c.sample_tokens, "Tokens per sample, at the end and every -s steps (0 = none)")
        ->check(kNonNegative)->group("Evaluation");
    app.add_option("-s,--sample-every", c.sample_every, "Sample every N steps during training (0 = only at the end)")
        ->check(kNonNegative)->group("Evaluation");
    app.add_option("--sample-prompt", c.sample_prompt, "Text to start the sample from (default: <|endoftext|>)")
        ->group("Evaluation");
    app.add_option("--temperature", c.temperature, "Sampling temperature (0 = greedy)")->check(kNonNegative)
        ->group("Evaluation");
    app.add_option("--top-k", c.top_k, "Sample from the k most likely tokens (0 = all)")->check(kNonNegative)
        ->group("Evaluation");
    app.add_option("--top-p", c.top_p, "Sample from the smallest set of tokens holding this much probability (1 = all)")
        ->check(numeric(0.0, 1.0, true))->group("Evaluation");
    app.add_option("--sample-seed", c.sample_seed, "Seed of the samples' draws (-1 = from --seed)")
        ->check(numeric(-1.0))->group("Evaluation");

    app.add_option("-r,--recompute", c.recompute, "Activations recomputed in backward instead of kept for every "
                   "layer: 0 none, 1 GELU outputs, 2 GELU and layernorm outputs (less memory, the same result)")
        ->check(CLI::IsMember({0, 1, 2}))->group("Batch");
    app.add_option("--lm-head-chunks", c.lm_head_chunks, "Run the LM head and the cross-entropy over the tokens in N "
                   "chunks: the logits take 1/N of their memory, and the head's backward runs in the forward")
        ->check(CLI::Range(1, 1024))->group("Batch");
    app.add_option("-z,--zero", c.zero, "0: every rank keeps the whole optimizer state; 1: ZeRO-1 (master weights and "
                   "Adam m, v sharded over ranks)")->check(CLI::IsMember({0, 1}))->group("Distributed and checkpoints");
    app.add_option("-n,--checkpoint-every", c.checkpoint_every, "Write a checkpoint every N steps and at the end (0 = none)")
        ->check(kNonNegative)->group("Distributed and checkpoints");
    app.add_option("--checkpoint-dir", c.checkpoint_dir, "Where checkpoints go ('' = <output-dir>/checkpoints)")
        ->group("Distributed and checkpoints");
    app.add_option("--keep-checkpoints", c.keep_checkpoints, "Complete checkpoints to keep (older ones are deleted)")
        ->check(kPositive)->group("Distributed and checkpoints");
    app.add_flag("--resume", c.resume,
                 "Continue the run of the newest checkpoint in --checkpoint-dir: its flags, with those given here on "
                 "top. No checkpoint there, or a damaged one: an error")
        ->group("Distributed and checkpoints");
    app.add_option_function<int>("-y", [&c](const int& y) { c.resume = y != 0; }, "llm.c's form of --resume: -y 1")
        ->check(CLI::IsMember({0, 1}))->group("Distributed and checkpoints");
    app.add_flag("--auto-resume", c.auto_resume,
                 "As --resume when --checkpoint-dir holds a checkpoint, else start fresh: one command line for the "
                 "first start and every restart (a requeued job)")
        ->group("Distributed and checkpoints");
    app.add_flag("--resume-from-intact", c.resume_from_intact,
                 "With --resume / --auto-resume: when the newest checkpoint is damaged, resume from the newest intact "
                 "one (a warning names the damaged ones, which are kept, renamed to step_*.damaged)")
        ->group("Distributed and checkpoints");
    app.add_flag("--overwrite-output", c.overwrite_output,
                 "A run that does not resume may replace the log.jsonl and config.json a previous run left in "
                 "--output-dir (without it, that is an error)")
        ->group("Distributed and checkpoints");
    app.add_option("--init-from", c.init_from,
                   "Start from these weights with a fresh optimizer (the model's shape and tokenizer come with them): "
                   "a checkpoint directory (its newest step), a step directory, or a transformers GPT-2 directory. "
                   "With -x 0: sample / evaluate it without training")
        ->group("Distributed and checkpoints");

    app.add_option("--device", c.device, "Kernel set: auto (GPU if present, else CPU) | cpu | cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}))->group("Runtime");
    app.add_option("--attention", c.attention,
                   "CUDA attention: gemm (cuBLASLt batched GEMMs, T×T scores in scratch) | flash (tensor-core flash "
                   "attention, head size 64, bf16/fp16; not yet validated on a GPU)")
        ->check(CLI::IsMember({"gemm", "flash"}))->group("Runtime");
    app.add_option("--fused-kernels", c.fused_kernels,
                   "CUDA: run fused ops as one kernel (FP8 casts in their producers, residual add + layernorm, bias "
                   "gradients in layernorm and GELU backward); false: as the separate kernels validated on a GPU, "
                   "the same bits. Not yet validated on a GPU")->group("Runtime");
    app.add_flag("--gemm-autotune", c.gemm_autotune,
                 "CUDA: time cuBLASLt's candidate algorithms once per GEMM shape and keep the fastest (logged); "
                 "default: the heuristic's first. Not yet validated on a GPU")->group("Runtime");
    app.add_option("--threads", c.threads, "CPU threads, at most 1024 (0 = OpenMP default)")
        ->check(numeric(0, 1024))->group("Runtime");
    app.add_option("--seed", c.seed, "Seed for initialisation, shuffling and sampling")->group("Runtime");
    app.add_option("--log-every", c.log_every, "Print a step line every N steps")->check(kPositive)->group("Runtime");
    app.add_flag("--profile", c.profile, "CUDA: GPU time per kernel-set op (CUDA events, no added synchronisation), "
                 "printed at exit")->group("Runtime");

}

CLI::App make_app() {
    return CLI::App{
        "train_gpt: pretrain a GPT-2-style model from token shards.\n"
        "  single process:   ./train_gpt -e d12 -i 'data/fineweb/fw_train_*.bin' -j 'data/fineweb/fw_val_*.bin'\n"
        "  defaults train a small model on the bundled KJV corpus (scripts/run_default.sh prepares it).",
        "train_gpt"};
}

// The long name of an option ("steps"), or "" for one without (help has one: "help").
std::string long_name(const CLI::Option* opt) { return opt->get_lnames().empty() ? "" : opt->get_lnames()[0]; }

// A flag (no value: --shuffle) rather than an option with a value.
bool is_flag(const CLI::Option* opt) { return opt->get_expected_max() == 0; }

// Records in c what the parse of `app` took: every flag's text and the names given.
void record_flags(const CLI::App& app, TrainConfig& c) {
    c.flag_texts.clear();
    for (const CLI::Option* opt : app.get_options()) {
        const std::string name = long_name(opt);
        if (name.empty() || name == "help") continue;
        if (is_flag(opt)) {
            c.flag_texts[name] = opt->count() > 0 && opt->as<bool>() ? "true" : "false";   // every flag defaults to off
        } else {
            c.flag_texts[name] = opt->count() > 0 ? opt->results().back() : opt->get_default_str();
        }
    }
}

// Flags a resumed run takes from the command line only: how it was started and found its
// checkpoint.
bool restored_on_resume(const std::string& name) {
    for (const char* how : {"resume", "auto-resume", "resume-from-intact", "overwrite-output", "init-from", "checkpoint-dir"}) {
        if (name == how) return false;
    }
    return true;
}

// Two texts of one flag mean the same value: equal, or equal numbers ("2e-3", "0.002").
bool same_value(const std::string& a, const std::string& b) {
    if (a == b) return true;
    char *end_a = nullptr, *end_b = nullptr;
    const double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
    return !a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0' && x == y;
}

}  // namespace

std::optional<int> parse_command_line(int argc, const char* const* argv, TrainConfig& c) {
    CLI::App app = make_app();
    add_flags(app, c);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    record_flags(app, c);
    c.given.clear();
    for (const CLI::Option* opt : app.get_options()) {
        if (opt->count() > 0 && !long_name(opt).empty()) c.given.insert(long_name(opt));
    }
    return std::nullopt;
}

std::string flags_json(const TrainConfig& c) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [name, text] : c.flag_texts) j[name] = text;
    return j.dump();
}

std::vector<FlagOverride> parse_resumed_command_line(int argc, const char* const* argv, const std::string& saved_json,
                                                     const std::string& checkpoint_root, TrainConfig& c) {
    nlohmann::json saved;
    try {
        saved = nlohmann::json::parse(saved_json);
        if (!saved.is_object()) fail("not a JSON object");
        for (const auto& [name, text] : saved.items()) {
            if (!text.is_string()) fail("flag %s is not a string", name.c_str());
        }
    } catch (const std::exception& e) {
        fail("the checkpoint's record of its run's flags is malformed: %s", e.what());
    }
    TrainConfig resumed;
    CLI::App app = make_app();
    add_flags(app, resumed);
    // the checkpoint's flags first, then this command line's: a flag given twice takes the last value
    std::vector<std::string> args = {argc > 0 ? argv[0] : "train_gpt"};
    for (const auto& [name, value] : saved.items()) {
        const std::string text = value.get<std::string>();
        const CLI::Option* opt = nullptr;
        for (const CLI::Option* o : app.get_options()) {
            if (long_name(o) == name) opt = o;
        }
        if (opt == nullptr || !restored_on_resume(name) || c.given.count(name)) continue;   // not a flag of this version
        if (is_flag(opt)) {
            args.push_back("--" + name + "=" + text);
        } else {
            args.push_back("--" + name);
            args.push_back(text);
        }
    }
    if (!c.given.count("checkpoint-dir")) {
        args.push_back("--checkpoint-dir");
        args.push_back(checkpoint_root);
    }
    for (int i = 1; i < argc; i++) args.push_back(argv[i]);
    std::vector<const char*> arg_ptrs;
    for (const std::string& a : args) arg_ptrs.push_back(a.c_str());
    try {
        app.parse((int)arg_ptrs.size(), arg_ptrs.data());
    } catch (const CLI::ParseError& e) {
        fail("the flags of the checkpoint's run, with this command line's, do not parse: %s", e.what());
    }
    record_flags(app, resumed);
    resumed.given = c.given;
    std::vector<FlagOverride> overrides;
    for (const std::string& name : c.given) {
        if (!saved.contains(name) || !restored_on_resume(name)) continue;
        const std::string was = saved[name].get<std::string>(), now = resumed.flag_texts[name];
        if (!same_value(was, now)) overrides.push_back({name, was, now});
    }
    c = resumed;
    return overrides;
}

std::string first_flag_difference(const std::string& flags, const std::string& reference) {
    const nlohmann::json a = nlohmann::json::parse(flags), b = nlohmann::json::parse(reference);
    for (const auto& [name, text] : b.items()) {
        if (!a.contains(name)) return format("rank 0 has --%s %s, this rank does not", name.c_str(), text.get<std::string>().c_str());
        if (a[name] != text) {
            return format("--%s is %s here, %s on rank 0", name.c_str(), a[name].get<std::string>().c_str(),
                          text.get<std::string>().c_str());
        }
    }
    for (const auto& [name, text] : a.items()) {
        if (!b.contains(name)) return format("this rank has --%s %s, rank 0 does not", name.c_str(), text.get<std::string>().c_str());
    }
    return "";
}

std::string schedule_change_notice(const LrSchedule& now, const std::string& saved_config_json, int64_t step) {
    nlohmann::json saved;
    try {
        saved = nlohmann::json::parse(saved_config_json);
    } catch (const nlohmann::json::exception&) {
        return "";
    }
    const char* keys[] = {"steps", "lr", "warmup_steps", "lr_schedule", "final_lr_frac", "wsd_decay_frac"};
    for (const char* key : keys) {
        if (!saved.contains(key)) return "";   // a checkpoint from before these were recorded
    }
    LrSchedule then;
    try {
        then.kind = parse_lr_schedule(saved["lr_schedule"].get<std::string>());
        then.lr = saved["lr"].get<float>();
        then.warmup_steps = saved["warmup_steps"].get<int>();
        then.total_steps = saved["steps"].get<int>();
        then.final_lr_frac = saved["final_lr_frac"].get<float>();
        then.decay_frac = saved["wsd_decay_frac"].get<float>();
    } catch (const std::exception&) {
        return "";
    }
    const double was = then.at((int)step), is = now.at((int)step);
    if (std::fabs(is - was) <= 1e-6 * std::max(std::fabs(was), std::fabs(is))) return "";
    return format("the learning-rate schedule now runs to step %d (the checkpoint's run: %d), so the learning rate "
                  "at step %lld is %.3g, %s from the %.3g of the checkpoint's schedule (a decay is stretched over "
                  "the new steps). To train on at the rate the run ended with instead, add --lr-schedule constant "
                  "--lr %.3g --warmup-steps 0",
                  now.total_steps, then.total_steps, (long long)step + 1, is, is > was ? "raised" : "lowered", was,
                  then.at(std::max(0, then.total_steps - 1)));
}

void validate_start(const TrainConfig& c) {
    if (c.resume && c.auto_resume) fail("--resume and --auto-resume: give one (--auto-resume also starts a fresh run)");
    if (c.resume && !c.init_from.empty()) {
        fail("--resume continues a run from its checkpoint, with its weights; --init-from %s starts one from other "
             "weights: give one of them", c.init_from.c_str());
    }
    if (c.resume_from_intact && !c.resume && !c.auto_resume) {
        fail("--resume-from-intact chooses the checkpoint a run resumes from: give it with --resume or --auto-resume");
    }
}

void validate(const TrainConfig& c) {
    if (c.train_data.empty()) fail("--train-data must not be empty");
    // the parser reads these as double, then stores a float: beyond FLT_MAX they would be inf
    const std::pair<const char*, float> reals[] = {
        {"lr", c.lr}, {"final-lr-frac", c.final_lr_frac}, {"wsd-decay-frac", c.wsd_decay_frac},
        {"weight-decay", c.weight_decay}, {"beta1", c.beta1}, {"beta2", c.beta2}, {"adam-eps", c.adam_eps},
        {"grad-clip", c.grad_clip}, {"loss-scale-init", c.loss_scale_init}, {"loss-scale-min", c.loss_scale_min},
        {"temperature", c.temperature}, {"top-p", c.top_p}, {"loss-spike-factor", c.loss_spike_factor}};
    for (const auto& [flag, value] : reals) {
        if (!std::isfinite(value)) fail("--%s %s is beyond the range of a float (%g)", flag, c.flag_texts.count(flag) ? c.flag_texts.at(flag).c_str() : "", FLT_MAX);
    }
    if (c.stop_on_loss_spike && c.loss_spike_factor == 0) {
        fail("--stop-on-loss-spike: --loss-spike-factor is 0, so no loss is ever a spike");
    }
    if (c.max_seq_len != 0 && c.max_seq_len < c.seq_len) {
        fail("--seq-len %d exceeds --max-seq-len %d", c.seq_len, c.max_seq_len);
    }
}

int grad_accum_steps_for(const TrainConfig& c, int world_size, int seq_len) {
    const int64_t per_micro_step = (int64_t)c.batch_size * (seq_len > 0 ? seq_len : c.seq_len) * world_size;
    if (c.total_batch_tokens == 0) return 1;
    if (c.total_batch_tokens % per_micro_step != 0) {
        fail("--total-batch-tokens %lld is not a multiple of batch-size * seq-len * ranks = %lld",
             (long long)c.total_batch_tokens, (long long)per_micro_step);
    }
    return (int)(c.total_batch_tokens / per_micro_step);
}

RunData run_data(const TrainConfig& c) {
    RunData d;
    if (c.steps > 0) d.train = c.train_data;
    if (c.val_every > 0 && (c.steps > 0 || c.given.count("val-data"))) d.val = c.val_data;
    return d;
}

int default_warmup_steps(int steps) { return std::min((steps + 5) / 6, 700); }

std::string checkpoint_dir_of(const TrainConfig& c) {
    return c.checkpoint_dir.empty() ? c.output_dir + "/checkpoints" : c.checkpoint_dir;
}

RunPlan resolve_run_plan(const TrainConfig& c, int world_size, int tokenizer_vocab, const GPTConfig* model,
                         const std::string& model_source) {
    RunPlan plan;
    int vocab_size = c.vocab_size;
    if (model != nullptr && vocab_size == 0) vocab_size = model->vocab_size;
    if (tokenizer_vocab > 0) {
        if (vocab_size == 0) vocab_size = tokenizer_vocab;
        const bool from_model = model != nullptr && c.vocab_size == 0;
        const char* what = from_model ? "the vocabulary of the model the run starts from" : "--vocab-size";
        if (vocab_size < tokenizer_vocab) fail("%s %d is smaller than the tokenizer's %d", what, vocab_size, tokenizer_vocab);
        // ids the tokenizer has no text for: samples could not be decoded
        if (vocab_size > tokenizer_vocab && (!from_model || c.sample_tokens > 0)) {
            fail("%s %d is larger than the tokenizer's %d (%s): the model could sample ids it cannot decode%s", what,
                 vocab_size, tokenizer_vocab, c.tokenizer.empty() ? "the run's tokenizer" : c.tokenizer.c_str(),
                 from_model ? "; give -g 0 to evaluate it without sampling" : "");
        }
    }
    if (vocab_size == 0) {
        fail("the run has no tokenizer (no --tokenizer, none beside the training shards): give --tokenizer, or "
             "--vocab-size to train without one");
    }
    if (model != nullptr) {
        // the model's shape; a shape flag given on the command line must describe the same model
        plan.model = *model;
        const GPTConfig flags = gpt_config_from_spec(c.model, vocab_size, c.max_seq_len > 0 ? c.max_seq_len : model->max_seq_len,
                                                     c.n_embd, c.n_head);
        auto check = [&](const char* flag, const char* field, int want, int got) {
            if (c.given.count(flag) && want != got) {
                fail("--%s: the model the run starts from (%s) has %s %d, the flags make %d", flag, model_source.c_str(),
                     field, got, want);
            }
        };
        check("model", "n_layer", flags.n_layer, model->n_layer);
        check("n-embd", "n_embd", flags.n_embd, model->n_embd);
        check("n-head", "n_head", flags.n_head, model->n_head);
        check("vocab-size", "vocab_size", flags.vocab_size, model->vocab_size);
        check("max-seq-len", "max_seq_len", flags.max_seq_len, model->max_seq_len);
        if (c.seq_len > model->max_seq_len && c.given.count("seq-len")) {
            fail("--seq-len %d exceeds the position table (%d) of the model the run starts from (%s)", c.seq_len,
                 model->max_seq_len, model_source.c_str());
        }
        // without -t: what the model has, when that is shorter or the run only evaluates
        if (!c.given.count("seq-len") && (c.seq_len > model->max_seq_len || c.steps == 0)) {
            plan.seq_len = model->max_seq_len;
        }
    } else {
        plan.model = gpt_config_from_spec(c.model, vocab_size, c.max_seq_len > 0 ? c.max_seq_len : c.seq_len, c.n_embd,
                                          c.n_head);
    }
    if (plan.seq_len == 0) plan.seq_len = c.seq_len;
    plan.world_size = world_size;
    plan.grad_accum_steps = grad_accum_steps_for(c, world_size, plan.seq_len);
    plan.tokens_per_step = (int64_t)c.batch_size * plan.seq_len * world_size * plan.grad_accum_steps;

    PrecisionConfig& p = plan.precision;
    p.precision = parse_precision(c.precision);
    p.master_weights = c.master_weights;
    p.fp8.amax_history = c.fp8_amax_history;
    p.fp8.algo = parse_fp8_amax_algo(c.fp8_amax_algo);
    p.fp8.margin = c.fp8_margin;
    p.fp8.recipe = parse_fp8_recipe(c.fp8_recipe);
    if (c.fp8_gemms != "auto") p.fp8.gemms = parse_fp8_gemms(c.fp8_gemms);   // auto: timed by the trainer

    plan.adamw = AdamWConfig{c.beta1, c.beta2, c.adam_eps, c.weight_decay};
    plan.schedule.kind = parse_lr_schedule(c.lr_schedule);
    plan.schedule.lr = c.lr;
    plan.schedule.warmup_steps = c.warmup_steps >= 0 ? c.warmup_steps : default_warmup_steps(c.steps);
    plan.schedule.total_steps = c.steps;
    plan.schedule.final_lr_frac = c.final_lr_frac;
    plan.schedule.decay_frac = c.wsd_decay_frac;
    plan.checkpoint_dir = checkpoint_dir_of(c);
    return plan;
}

std::vector<ConfigRow> describe(const TrainConfig& c, const RunPlan& p) {
    auto text = [](const char* key, const std::string& v) { return ConfigRow{ConfigRow::kText, key, v}; };
    auto integer = [](const char* key, int64_t v) { return ConfigRow{ConfigRow::kInteger, key, std::to_string(v)}; };
    auto number = [](const char* key, double v) { return ConfigRow{ConfigRow::kNumber, key, format("%g", v)}; };
    auto boolean = [](const char* key, bool v) { return ConfigRow{ConfigRow::kBool, key, v ? "true" : "false"}; };
    auto none = [](const char* key) { return ConfigRow{ConfigRow::kNone, key, "-"}; };
    const bool fp8 = p.precision.precision == Precision::FP8;
    const Fp8ScalingConfig& f = p.precision.fp8;
    return {
        text("device", p.device),
        text("attention", p.attention),
        boolean("fused_kernels", c.fused_kernels),
        boolean("gemm_autotune", c.gemm_autotune),
        text("model", c.model),
        integer("n_layer", p.model.n_layer),
        integer("n_head", p.model.n_head),
        integer("n_embd", p.model.n_embd),
        integer("vocab_size", p.model.vocab_size),
        integer("padded_vocab_size", p.model.padded_vocab_size),
        integer("max_seq_len", p.model.max_seq_len),
        integer("num_parameters", (int64_t)p.num_parameters),
        text("train_data", c.train_data),
        text("val_data", c.val_data),
        text("tokenizer", p.tokenizer),
        boolean("shuffle", c.shuffle),
        text("output_dir", c.output_dir),
        integer("batch_size", c.batch_size),
        integer("seq_len", p.seq_len),
        integer("world_size", p.world_size),
        integer("grad_accum_steps", p.grad_accum_steps),
        integer("tokens_per_step", p.tokens_per_step),
        integer("steps", c.steps),
        number("lr", p.schedule.lr),
        integer("warmup_steps", p.schedule.warmup_steps),
        text("lr_schedule", lr_schedule_name(p.schedule.kind)),
        number("final_lr_frac", p.schedule.final_lr_frac),
        number("wsd_decay_frac", p.schedule.decay_frac),
        number("weight_decay", p.adamw.weight_decay),
        number("beta1", p.adamw.beta1),
        number("beta2", p.adamw.beta2),
        number("adam_eps", p.adamw.eps),
        number("grad_clip", c.grad_clip),
        text("precision", precision_name(p.precision.precision)),
        boolean("master_weights", p.precision.master_weights),
        boolean("loss_scaling", p.precision.precision == Precision::FP16 && c.loss_scaling),
        fp8 ? text("fp8_recipe", fp8_recipe_name(f.recipe)) : none("fp8_recipe"),
        fp8 ? integer("fp8_amax_history", f.amax_history) : none("fp8_amax_history"),
        fp8 ? text("fp8_amax_algo", fp8_amax_algo_name(f.algo)) : none("fp8_amax_algo"),
        fp8 ? integer("fp8_margin", f.margin) : none("fp8_margin"),
        fp8 ? text("fp8_gemms", fp8_gemms_name(f.gemms)) : none("fp8_gemms"),
        integer("max_skipped_steps", c.max_skipped_steps),
        number("loss_spike_factor", c.loss_spike_factor),
        boolean("stop_on_loss_spike", c.stop_on_loss_spike),
        integer("val_every", c.val_every),
        integer("val_batches", c.val_batches),
        text("hellaswag", c.hellaswag),
        integer("eval_every", c.eval_every),
        integer("hellaswag_examples", c.hellaswag_examples),
        integer("sample_tokens", c.sample_tokens),
        integer("sample_every", c.sample_every),
        number("temperature", c.temperature),
        integer("top_k", c.top_k),
        number("top_p", c.top_p),
        integer("recompute", c.recompute),
        integer("lm_head_chunks", c.lm_head_chunks),
        integer("zero", c.zero),
        text("init_from", c.init_from),
        integer("checkpoint_every", c.checkpoint_every),
        text("checkpoint_dir", p.checkpoint_dir),
        integer("threads", c.threads),
        ConfigRow{ConfigRow::kInteger, "seed", std::to_string(c.seed)},
        boolean("profile", c.profile),
    };
}

void print_config_table(const TrainConfig& c, const RunPlan& p) {
    auto rows = describe(c, p);
    size_t key_width = 0, value_width = 0;
    for (const ConfigRow& r : rows) {
        key_width = std::max(key_width, r.key.size());
        value_width = std::max(value_width, r.value.size());
    }
    std::string rule = "+" + std::string(key_width + 2, '-') + "+" + std::string(value_width + 2, '-') + "+";
    std::printf("%s\n", rule.c_str());
    for (const ConfigRow& r : rows) {
        std::printf("| %-*s | %-*s |\n", (int)key_width, r.key.c_str(), (int)value_width, r.value.c_str());
    }
    std::printf("%s\n", rule.c_str());
}

std::string config_json(const TrainConfig& c, const RunPlan& p) {
    nlohmann::ordered_json j;
    for (const ConfigRow& r : describe(c, p)) {
        switch (r.kind) {
            case ConfigRow::kText: j[r.key] = r.value; break;
            case ConfigRow::kInteger:   // int64, or uint64 (the seed)
                if (r.value[0] == '-') j[r.key] = std::stoll(r.value); else j[r.key] = std::stoull(r.value);
                break;
            case ConfigRow::kNumber: j[r.key] = std::stod(r.value); break;
            case ConfigRow::kBool: j[r.key] = r.value == "true"; break;
            case ConfigRow::kNone: j[r.key] = nullptr; break;
        }
    }
    return j.dump(2) + "\n";
}

void save_config_json(const std::string& path, const TrainConfig& c, const RunPlan& p) {
    std::string text = config_json(c, p);
    write_file_atomic(path, text.data(), text.size());
}

}  // namespace train_gpt
