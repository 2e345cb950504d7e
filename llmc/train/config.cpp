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

    app.add_option("-r,--recompute", c.recompute, "Activations recomputed in backward instead of kept for every "
                   "layer: 0 none, 1 GELU outputs, 2 GELU and layernorm outputs (less memory, the same result)")
        ->check(CLI::IsMember({0, 1, 2}))->group("Batch");
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

RunPlan resolve_run_plan(const TrainConfig& c, int world_size, int tokenizer_vocab) {
    RunPlan plan;
    int vocab_size = c.vocab_size;
    if (tokenizer_vocab > 0) {
        if (vocab_size == 0) vocab_size = tokenizer_vocab;
        if (vocab_size < tokenizer_vocab) {
            fail("--vocab-size %d is smaller than the tokenizer's %d (%s)", vocab_size, tokenizer_vocab,
                 c.tokenizer.c_str());
        }
    }
    plan.model = gpt_config_from_spec(c.model, vocab_size, c.max_seq_len > 0 ? c.max_seq_len : c.seq_len, c.n_embd,
                                      c.n_head);
    plan.world_size = world_size;
    plan.grad_accum_steps = grad_accum_steps_for(c, world_size);
    plan.tokens_per_step = (int64_t)c.batch_size * c.seq_len * world_size * plan.grad_accum_steps;

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
    plan.schedule.warmup_steps = c.warmup_steps;
    plan.schedule.total_steps = c.steps;
    plan.schedule.final_lr_frac = c.final_lr_frac;
    plan.schedule.decay_frac = c.wsd_decay_frac;
    plan.checkpoint_dir = c.checkpoint_dir.empty() ? c.output_dir + "/checkpoints" : c.checkpoint_dir;
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
        text("tokenizer", c.tokenizer),
        boolean("shuffle", c.shuffle),
        text("output_dir", c.output_dir),
        integer("batch_size", c.batch_size),
        integer("seq_len", c.seq_len),
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
        integer("val_every", c.val_every),
        integer("val_batches", c.val_batches),
        integer("sample_tokens", c.sample_tokens),
        number("temperature", c.temperature),
        integer("recompute", c.recompute),
        integer("zero", c.zero),
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
