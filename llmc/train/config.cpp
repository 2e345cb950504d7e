// config.cpp — command line (CLI11) and the resolved-configuration table / JSON (nlohmann-json).
#include "train/config.h"

#include "precision/fp8_scaling.h"

#include "train/schedule.h"
#include "utils.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace train_gpt {

namespace {

// A numeric check that names the problem: "'abc' is not a number" or "... outside [lo, hi]".
// (CLI11's own range validators report a non-number as out of range.)
CLI::Validator numeric(double lo, double hi = 1e300, bool lo_exclusive = false) {
    std::string desc = lo_exclusive ? "POSITIVE" : (hi < 1e300 ? format("[%g, %g]", lo, hi) : format(">= %g", lo));
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
            if (x > hi) return format("%s must be <= %g", text.c_str(), hi);
            return "";
        },
        desc);
}
const CLI::Validator kPositive = numeric(0.0, 1e300, true);
const CLI::Validator kNonNegative = numeric(0.0);
const CLI::Validator kFraction = numeric(0.0, 1.0);

}  // namespace

std::optional<int> parse_command_line(int argc, const char* const* argv, TrainConfig& c) {
    CLI::App app{
        "train_gpt: pretrain a GPT-2-style model from token shards.\n"
        "  single process:   ./train_gpt -e d12 -i 'data/fineweb/train_*.bin' -j 'data/fineweb/val_*.bin'\n"
        "  defaults train a small model on the bundled KJV corpus (scripts/run_default.sh prepares it).",
        "train_gpt"};
    app.option_defaults()->always_capture_default();
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);   // later flags override earlier ones
    app.get_formatter()->column_width(34);

    app.add_option("-i,--train-data", c.train_data, "Glob of training token shards")->group("Data");
    app.add_option("-j,--val-data", c.val_data, "Glob of validation token shards ('' = no validation)")->group("Data");
    app.add_option("--tokenizer", c.tokenizer, "Tokenizer file, for the vocabulary size and decoding samples ('' = none)")
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
    app.add_option("-u,--warmup-steps", c.warmup_steps, "Linear warmup steps")->check(kNonNegative)->group("Optimizer");
    app.add_option("--lr-schedule", c.lr_schedule, "After warmup: cosine | linear | constant | wsd")
        ->check(CLI::IsMember({"cosine", "linear", "constant", "wsd"}))->group("Optimizer");
    app.add_option("--final-lr-frac", c.final_lr_frac, "Final learning rate as a fraction of --lr")
        ->check(kFraction)->group("Optimizer");
    app.add_option("--wsd-decay-frac", c.wsd_decay_frac, "wsd: fraction of all steps spent in the final decay")
        ->check(kFraction)->group("Optimizer");
    app.add_option("-c,--weight-decay", c.weight_decay, "AdamW weight decay (2-D weights only)")
        ->check(kNonNegative)->group("Optimizer");
    app.add_option("--beta1", c.beta1, "AdamW beta1")->check(kFraction)->group("Optimizer");
    app.add_option("--beta2", c.beta2, "AdamW beta2")->check(kFraction)->group("Optimizer");
    app.add_option("--adam-eps", c.adam_eps, "AdamW epsilon")->check(kPositive)->group("Optimizer");
    app.add_option("--grad-clip", c.grad_clip, "Clip the global gradient norm to this (0 = off)")
        ->check(kNonNegative)->group("Optimizer");

    app.add_option("-p,--precision", c.precision, "fp32 | bf16 | fp16 | fp8 (bf16 storage, FP8 GEMMs)")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16", "fp8"}))->group("Precision");
    app.add_option("--master-weights", c.master_weights, "Keep FP32 master weights (bf16/fp16/fp8)")->group("Precision");
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
                   "Stop after this many consecutive steps with a non-finite loss or gradient")->check(kPositive)->group("Precision");
    app.add_option("--inject-nonfinite-step", c.inject_nonfinite_step,
                   "Testing: make a gradient +inf at this step to exercise the skip path (-1 = never)")->group("Precision");

    app.add_option("-v,--val-every", c.val_every, "Evaluate val loss every N steps and at the end (0 = never)")
        ->check(kNonNegative)->group("Evaluation");
    app.add_option("-m,--val-batches", c.val_batches, "Micro-batches per val-loss evaluation")
        ->check(kPositive)->group("Evaluation");
    app.add_option("-g,--sample-tokens", c.sample_tokens, "Tokens to sample at the end (0 = none)")
        ->check(kNonNegative)->group("Evaluation");
    app.add_option("--sample-prompt", c.sample_prompt, "Text to start the sample from (encoded with --tokenizer)")
        ->group("Evaluation");
    app.add_option("--temperature", c.temperature, "Sampling temperature")->check(kPositive)->group("Evaluation");

    app.add_option("--zero", c.zero, "0: every rank keeps the whole optimizer state; 1: ZeRO-1 (master weights and "
                   "Adam m, v sharded over ranks)")->check(CLI::IsMember({0, 1}))->group("Distributed and checkpoints");
    app.add_option("--checkpoint-every", c.checkpoint_every, "Write a checkpoint every N steps and at the end (0 = none)")
        ->check(kNonNegative)->group("Distributed and checkpoints");
    app.add_option("--checkpoint-dir", c.checkpoint_dir, "Where checkpoints go ('' = <output-dir>/checkpoints)")
        ->group("Distributed and checkpoints");
    app.add_option("--keep-checkpoints", c.keep_checkpoints, "Complete checkpoints to keep (older ones are deleted)")
        ->check(kPositive)->group("Distributed and checkpoints");
    app.add_flag("--resume", c.resume, "Continue from the newest complete checkpoint in --checkpoint-dir (none: start fresh)")
        ->group("Distributed and checkpoints");
    app.add_option("--init-from", c.init_from, "Start from this checkpoint directory's weights with a fresh optimizer")
        ->group("Distributed and checkpoints");

    app.add_option("--device", c.device, "Kernel set: auto (GPU if present, else CPU) | cpu | cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}))->group("Runtime");
    app.add_option("--threads", c.threads, "CPU threads, at most 1024 (0 = OpenMP default)")
        ->check(numeric(0, 1024))->group("Runtime");
    app.add_option("--seed", c.seed, "Seed for initialisation, shuffling and sampling")->group("Runtime");
    app.add_option("--log-every", c.log_every, "Print a step line every N steps")->check(kPositive)->group("Runtime");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    return std::nullopt;
}

void validate(const TrainConfig& c) {
    if (c.train_data.empty()) fail("--train-data must not be empty");
    if (c.tokenizer.empty() && c.vocab_size == 0) fail("--vocab-size is required when --tokenizer is ''");
    if (c.max_seq_len != 0 && c.max_seq_len < c.seq_len) {
        fail("--seq-len %d exceeds --max-seq-len %d", c.seq_len, c.max_seq_len);
    }
}

int grad_accum_steps_for(const TrainConfig& c, int world_size) {
    const int64_t per_micro_step = (int64_t)c.batch_size * c.seq_len * world_size;
    if (c.total_batch_tokens == 0) return 1;
    if (c.total_batch_tokens % per_micro_step != 0) {
        fail("--total-batch-tokens %lld is not a multiple of batch-size * seq-len * ranks = %lld",
             (long long)c.total_batch_tokens, (long long)per_micro_step);
    }
    return (int)(c.total_batch_tokens / per_micro_step);
}

std::vector<std::pair<std::string, std::string>> describe(const TrainConfig& c, const RunPlan& p) {
    auto num = [](double v) { return format("%g", v); };
    return {
        {"device", p.device},
        {"model", c.model},
        {"n_layer", std::to_string(p.model.n_layer)},
        {"n_head", std::to_string(p.model.n_head)},
        {"n_embd", std::to_string(p.model.n_embd)},
        {"vocab_size", std::to_string(p.model.vocab_size)},
        {"padded_vocab_size", std::to_string(p.model.padded_vocab_size)},
        {"max_seq_len", std::to_string(p.model.max_seq_len)},
        {"num_parameters", std::to_string(p.num_parameters)},
        {"train_data", c.train_data},
        {"val_data", c.val_data},
        {"tokenizer", c.tokenizer},
        {"shuffle", c.shuffle ? "true" : "false"},
        {"output_dir", c.output_dir},
        {"batch_size", std::to_string(c.batch_size)},
        {"seq_len", std::to_string(c.seq_len)},
        {"world_size", std::to_string(p.world_size)},
        {"grad_accum_steps", std::to_string(p.grad_accum_steps)},
        {"tokens_per_step", std::to_string(p.tokens_per_step)},
        {"steps", std::to_string(c.steps)},
        {"lr", num(c.lr)},
        {"warmup_steps", std::to_string(c.warmup_steps)},
        {"lr_schedule", c.lr_schedule},
        {"final_lr_frac", num(c.final_lr_frac)},
        {"wsd_decay_frac", num(c.wsd_decay_frac)},
        {"weight_decay", num(c.weight_decay)},
        {"beta1", num(c.beta1)},
        {"beta2", num(c.beta2)},
        {"adam_eps", num(c.adam_eps)},
        {"grad_clip", num(c.grad_clip)},
        {"precision", c.precision},
        {"master_weights", c.master_weights ? "true" : "false"},
        {"loss_scaling", c.precision == "fp16" && c.loss_scaling ? "true" : "false"},
        {"fp8_recipe", c.precision == "fp8" ? c.fp8_recipe : "-"},
        {"fp8_amax_history", c.precision == "fp8" ? std::to_string(c.fp8_amax_history) : "-"},
        {"fp8_amax_algo", c.precision == "fp8" ? c.fp8_amax_algo : "-"},
        {"fp8_margin", c.precision == "fp8" ? std::to_string(c.fp8_margin) : "-"},
        {"fp8_gemms", c.precision == "fp8" ? c.fp8_gemms : "-"},
        {"val_every", std::to_string(c.val_every)},
        {"val_batches", std::to_string(c.val_batches)},
        {"sample_tokens", std::to_string(c.sample_tokens)},
        {"temperature", num(c.temperature)},
        {"zero", std::to_string(c.zero)},
        {"checkpoint_every", std::to_string(c.checkpoint_every)},
        {"threads", std::to_string(c.threads)},
        {"seed", std::to_string(c.seed)},
    };
}

void print_config_table(const TrainConfig& c, const RunPlan& p) {
    auto rows = describe(c, p);
    size_t key_width = 0, value_width = 0;
    for (auto& [k, v] : rows) {
        key_width = std::max(key_width, k.size());
        value_width = std::max(value_width, v.size());
    }
    std::string rule = "+" + std::string(key_width + 2, '-') + "+" + std::string(value_width + 2, '-') + "+";
    std::printf("%s\n", rule.c_str());
    for (auto& [k, v] : rows) std::printf("| %-*s | %-*s |\n", (int)key_width, k.c_str(), (int)value_width, v.c_str());
    std::printf("%s\n", rule.c_str());
}

std::string config_json(const TrainConfig& c, const RunPlan& p) {
    nlohmann::ordered_json j;
    for (auto& [k, v] : describe(c, p)) {
        // numbers as numbers, everything else as strings
        char* end = nullptr;
        double x = std::strtod(v.c_str(), &end);
        if (!v.empty() && end != nullptr && *end == '\0') j[k] = x; else j[k] = v;
    }
    return j.dump(2) + "\n";
}

void save_config_json(const std::string& path, const TrainConfig& c, const RunPlan& p) {
    std::string text = config_json(c, p);
    write_file_atomic(path, text.data(), text.size());
}

}  // namespace train_gpt
