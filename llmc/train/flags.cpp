// flags.cpp — the table of the trainer's flags (flags.h): spelling, field, help, range, and the
// rows each adds to the resolved configuration.
#include "train/flags.h"

#include "precision/fp8_scaling.h"
#include "train/schedule.h"
#include "utils.h"

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace train_gpt {

namespace {

// A numeric check that names the problem: "'abc' is not a number", "... must be >= 0", or a value
// that FP32 (every float flag's type) cannot hold: above FLT_MAX, or non-zero and below the
// smallest normal FLT_MIN, where it would become 0 or lose its precision silently.
FlagCheck numeric(double lo, double hi = 1e300, bool lo_exclusive = false, bool hi_exclusive = false) {
    return [=](const std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double x = std::strtod(text.c_str(), &end);
        const bool below_double = errno == ERANGE && x == 0;   // 1e-400: strtod's 0 is no 0 that was given
        if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(x))
            return "'" + text + "' is not a number";
        const bool underflows = (x != 0 || below_double) && std::fabs(x) < FLT_MIN;
        if (underflows && !(std::signbit(x) && lo >= 0)) {   // (a negative one is named by the range)
            return format("%s underflows FP32 (the smallest normal value is %g): give %sa larger value", text.c_str(),
                          (double)FLT_MIN, lo_exclusive && lo >= 0 ? "" : "0 or ");
        }
        if (lo_exclusive ? !(x > lo) : !(x >= lo))
            return format("%s must be %s %g", text.c_str(), lo_exclusive ? ">" : ">=", lo);
        if (hi_exclusive ? !(x < hi) : x > hi)
            return format("%s must be %s %g", text.c_str(), hi_exclusive ? "<" : "<=", hi);
        if (hi_exclusive && !((float)x < (float)hi)) {   // --beta2 0.99999999 is 1.0f: 0/0 in the bias correction
            return format("%s rounds to %g in FP32, which is excluded: give at most %.9g", text.c_str(),
                          (double)(float)x, (double)std::nextafter((float)hi, 0.0f));
        }
        if (std::fabs(x) > FLT_MAX)
            return format("%s is beyond FP32's range (at most %g)", text.c_str(), (double)FLT_MAX);
        return "";
    };
}

// --loss-spike-factor: 0 (off) or a factor above 1
std::string spike_factor_check(const std::string& text) {
    char* end = nullptr;
    errno = 0;
    const double x = std::strtod(text.c_str(), &end);
    const bool zero = x == 0 && errno != ERANGE;   // 1e-400 reads as 0, but is no 0 (off) that was given
    // above 1 in FP32 (the factor's type): 1.00000001 is 1.0f
    if (text.empty() || *end != '\0' || !(zero || ((float)x > 1.0f && x <= FLT_MAX))) {
        return "'" + text + "' must be 0 (off) or a number above 1 (in FP32: at least 1.00000012)";
    }
    return "";
}

// --model: a depth dial dN; a file or directory there is llm.c's habit (-e gpt2_124M.bin), which
// here is --init-from
std::string model_spec_check(const std::string& text) {
    if (text.size() >= 2 && text[0] == 'd' && text.find_first_not_of("0123456789", 1) == std::string::npos) return "";
    if (text.find_first_of("./") != std::string::npos) {
        return "'" + text +
               "' is not a depth dial dN (d12 = GPT-2 124M). To start from a model's weights, give "
               "--init-from DIR: a train_gpt checkpoint or a transformers GPT-2 directory (llm.c's .bin files are "
               "not read)";
    }
    return "'" + text + "' is not of the form dN (d12 = GPT-2 124M, d24, d36, d48)";
}

// --seed: decimal digits of a value in [0, 2^64) (before: a larger one saturated to 2^64 - 1 and a
// negative one wrapped, so a sweep over large seeds repeated one run)
std::string seed_check(const std::string& text) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
        return "'" + text + "' is not a seed: decimal digits, 0 to 18446744073709551615";
    errno = 0;
    std::strtoull(text.c_str(), nullptr, 10);
    if (errno == ERANGE) return text + " is beyond 2^64 - 1 (18446744073709551615)";
    return "";
}

// --fp8-gemms: auto, or a list parse_fp8_gemms takes
std::string fp8_gemms_check(const std::string& text) {
    try {
        if (text != "auto") parse_fp8_gemms(text);
    } catch (const Error& e) {
        const std::string what = e.what(), flag = "--fp8-gemms: ";   // the parser names the flag itself
        return what.rfind(flag, 0) == 0 ? what.substr(flag.size()) : what;
    }
    return "";
}

// --inject-nonfinite-step: N (-1 = never) or FIRST-LAST
std::string injected_steps_check(const std::string& text) {
    int first = 0, last = 0;
    if (parse_injected_steps(text, first, last)) return "";
    return "'" + text + "' is not a step (N, -1 = never) or a range FIRST-LAST";
}

ConfigRow text_row(const char* key, const std::string& v) { return {ConfigRow::kText, key, v}; }
ConfigRow integer_row(const char* key, int64_t v) { return {ConfigRow::kInteger, key, std::to_string(v)}; }
ConfigRow number_row(const char* key, double v) { return {ConfigRow::kNumber, key, format("%g", v)}; }

using Rows = std::vector<ConfigRow>;
using C = TrainConfig;
using P = RunPlan;

// The runs some flags apply to (Flag::only_for): the others show "-" for them.
bool fp8_run(const C&, const P& p) { return p.precision.precision == Precision::FP8; }
// the amax history sets the scales of the delayed recipe only (current scales each cast by its own)
bool fp8_delayed_run(const C&, const P& p) {
    return p.precision.precision == Precision::FP8 && p.precision.fp8.recipe == Fp8Recipe::Delayed;
}
bool fp16_scaled(const C& c, const P& p) { return p.precision.precision == Precision::FP16 && c.loss_scaling; }
bool fp16_run(const C&, const P& p) { return p.precision.precision == Precision::FP16; }
bool hellaswag_run(const C& c, const P&) { return !c.hellaswag.empty(); }
bool training_run(const C& c, const P&) { return c.steps > 0; }
bool checkpointing_run(const C& c, const P&) { return c.checkpoint_every > 0 && c.steps > 0; }
// a val set read: -j given, or the default's in a run that trains (a -x 0 run reads -j only when
// given: round 34, its -m and -v had no effect without a word)
bool validating_run(const C& c, const P&) { return !c.val_data.empty() && (c.steps > 0 || c.given.count("val-data")); }
bool cuda_run(const C&, const P& p) { return p.device == "cuda"; }
bool sampling_run(const C& c, const P&) { return c.sample_tokens > 0; }
bool sampling_while_training(const C& c, const P&) { return c.sample_tokens > 0 && c.steps > 0; }
bool random_sampling_run(const C& c, const P&) { return c.sample_tokens > 0 && c.temperature > 0; }
bool hellaswag_while_training(const C& c, const P&) { return !c.hellaswag.empty() && c.steps > 0; }
bool decaying_run(const C& c, const P&) { return c.lr_schedule != "constant"; }
bool wsd_run(const C& c, const P&) { return c.lr_schedule == "wsd"; }
bool sixteen_bit_run(const C&, const P& p) {
    return p.precision.precision != Precision::FP32 && p.precision.precision != Precision::TF32;
}

// FlagRows of a single row
template <class RowOf>
FlagRows one_row(RowOf row_of) {
    return [row_of](const C& c, const P& p) { return Rows{row_of(c, p)}; };
}

std::vector<Flag> make_table() {
    const FlagCheck positive = numeric(0.0, 1e300, true), non_negative = numeric(0.0), fraction = numeric(0.0, 1.0);
    // Adam's β: 1 − β^t divides the bias correction, 0 at β = 1 (and the moments never move)
    const FlagCheck adam_beta = numeric(0.0, 1.0, false, true);

    const char* data = "Data";
    const char* model = "Model";
    const char* batch = "Batch";
    const char* optimizer = "Optimizer";
    const char* precision = "Precision";
    const char* evaluation = "Evaluation";
    const char* checkpoints = "Distributed and checkpoints";
    const char* runtime = "Runtime";
    const char* testing = "Testing";

    return {
        // data
        Flag("-i,--train-data", data, "GLOB", "Glob of training token shards", &C::train_data),
        Flag("-j,--val-data", data, "GLOB", "Glob of validation token shards ('' = no validation)", &C::val_data),
        Flag("--tokenizer", data, "FILE",
             "Tokenizer file (tokenizer.bin), for the vocabulary size, prompts and samples ('' = the model's, or the "
             "one beside the training shards; shards that record theirs are checked against it)",
             &C::tokenizer)
            .config([](const C&, const P& p) { return Rows{text_row("tokenizer", p.tokenizer)}; }),
        Flag("--shuffle,!--no-shuffle", data, "", "Shuffle training samples each epoch", &C::shuffle).no_value(),
        Flag("-o,--output-dir", data, "DIR", "Directory for log.jsonl and config.json", &C::output_dir),

        // model
        Flag("-e,--model", model, "dN", "Depth dial dN: d12 = GPT-2 124M, d24, d36, d48 = 1.5B; else C = 64N, N heads",
             &C::model)
            .checked(model_spec_check, "")
            .config([](const C& c, const P& p) {
                // a fine-tune without -e has its start model's shape, whose dN (if it is one) is
                // recorded, not the default's (round 34: "d2" beside n_layer 1)
                const GPTConfig& m = p.model;
                std::string model = c.model;
                if (!c.given.count("model") && !c.init_from.empty()) {
                    model = m.n_embd == 64 * m.n_layer && m.n_head == m.n_layer ? "d" + std::to_string(m.n_layer)
                                                                                : "from --init-from";
                }
                return Rows{text_row("model", model), integer_row("n_layer", p.model.n_layer)};
            }),
        Flag("--n-embd", model, "C", "Override the width C (0 = from --model)", &C::n_embd)
            .checked(non_negative, ">= 0")
            .config([](const C&, const P& p) { return Rows{integer_row("n_embd", p.model.n_embd)}; }),
        Flag("--n-head", model, "N", "Override the number of heads (0 = from --model)", &C::n_head)
            .checked(non_negative, ">= 0")
            .config([](const C&, const P& p) { return Rows{integer_row("n_head", p.model.n_head)}; }),
        Flag("--vocab-size", model, "V", "Vocabulary size (0 = from --tokenizer)", &C::vocab_size)
            .checked(non_negative, ">= 0")
            .config([](const C&, const P& p) {
                return Rows{integer_row("vocab_size", p.model.vocab_size),
                            integer_row("padded_vocab_size", p.model.padded_vocab_size)};
            }),
        Flag("--max-seq-len", model, "N", "Rows of the position table (0 = --seq-len)", &C::max_seq_len)
            .checked(non_negative, ">= 0")
            .config([](const C&, const P& p) {
                return Rows{integer_row("max_seq_len", p.model.max_seq_len),
                            integer_row("num_parameters", (int64_t)p.num_parameters)};
            }),

        // batch
        Flag("-b,--batch-size", batch, "B", "Micro-batch size B (sequences per rank)", &C::batch_size)
            .checked(positive, "> 0"),
        Flag("-t,--seq-len", batch, "T", "Sequence length T", &C::seq_len)
            .checked(positive, "> 0")
            .config([](const C&, const P& p) { return Rows{integer_row("seq_len", p.seq_len)}; }),
        Flag("-d,--total-batch-tokens", batch, "N",
             "Tokens per optimizer step, reached by gradient accumulation (0 = B*T*ranks)", &C::total_batch_tokens)
            .checked(non_negative, ">= 0")
            .config([](const C& c, const P& p) {
                return Rows{integer_row("total_batch_tokens", c.total_batch_tokens),
                            integer_row("world_size", p.world_size),
                            integer_row("grad_accum_steps", p.grad_accum_steps),
                            integer_row("tokens_per_step", p.tokens_per_step)};
            }),
        Flag("-r,--recompute", batch, "0|1|2",
             "Activations recomputed in backward instead of kept for every layer: 0 none, 1 GELU outputs, 2 GELU and "
             "layernorm outputs (less memory, the same result)",
             &C::recompute)
            .one_of({"0", "1", "2"}),
        Flag("--lm-head-chunks", batch, "N",
             "Run the LM head and the cross-entropy over the tokens in N chunks: the logits take 1/N of their memory, "
             "and the head's backward runs in the forward",
             &C::lm_head_chunks)
            .checked(numeric(1, 1024), "1 to 1024"),

        // optimizer
        Flag("-x,--steps", optimizer, "N", "Optimizer steps", &C::steps).checked(non_negative, ">= 0"),
        Flag("-l,--lr", optimizer, "LR", "Peak learning rate", &C::lr).checked(non_negative, ">= 0"),
        Flag("-u,--warmup-steps", optimizer, "N", "Linear warmup steps (-1 = a sixth of the steps, at most 700)",
             &C::warmup_steps)
            .checked(numeric(-1.0), ">= -1")
            .config([](const C&, const P& p) { return Rows{integer_row("warmup_steps", p.schedule.warmup_steps)}; }),
        Flag("-k,--lr-schedule", optimizer, "KIND", "After warmup: cosine | linear | constant | wsd", &C::lr_schedule)
            .one_of({"cosine", "linear", "constant", "wsd"}),
        Flag("-q,--final-lr-frac", optimizer, "F", "Final learning rate as a fraction of --lr", &C::final_lr_frac)
            .checked(fraction, "0 to 1")
            .effective_only_for(decaying_run, "-k cosine, linear or wsd"),
        Flag("--wsd-decay-frac", optimizer, "F", "wsd: fraction of all steps spent in the final decay",
             &C::wsd_decay_frac)
            .checked(fraction, "0 to 1")
            .effective_only_for(wsd_run, "-k wsd"),
        Flag("-c,--weight-decay", optimizer, "WD", "AdamW weight decay (2-D weights only)", &C::weight_decay)
            .checked(non_negative, ">= 0"),
        Flag("--beta1", optimizer, "B1", "AdamW beta1", &C::beta1).checked(adam_beta, "0 to below 1"),
        Flag("--beta2", optimizer, "B2", "AdamW beta2", &C::beta2).checked(adam_beta, "0 to below 1"),
        Flag("--adam-eps", optimizer, "EPS", "AdamW epsilon", &C::adam_eps).checked(positive, "> 0"),
        Flag("--grad-clip", optimizer, "NORM", "Clip the global gradient norm to this (0 = off)", &C::grad_clip)
            .checked(non_negative, ">= 0"),

        // precision
        Flag("-p,--precision", precision, "P",
             "auto (bf16 on a GPU, fp32 on the CPU) | fp32 | tf32 (fp32, the matmul GEMMs on TF32 tensor cores) | "
             "bf16 | fp16 | fp8 (bf16 storage, FP8 GEMMs)",
             &C::precision)
            .one_of({"auto", "fp32", "tf32", "bf16", "fp16", "fp8"})
            .config([](const C& c, const P& p) {
                return Rows{text_row("precision", precision_name(p.precision.precision)),
                            text_row("precision_from", precision_source(c, p))};
            }),
        Flag("-w,--master-weights", precision, "BOOL", "Keep FP32 master weights (bf16/fp16/fp8)", &C::master_weights)
            .effective_only_for(sixteen_bit_run, "-p bf16, fp16 or fp8"),
        Flag("--loss-scaling", precision, "BOOL", "fp16: dynamic loss scaling", &C::loss_scaling)
            .only_for(fp16_run, "-p fp16"),
        Flag("--loss-scale-init", precision, "S",
             "fp16: initial loss scale, between --loss-scale-min and the ceiling 2^24 (16777216)", &C::loss_scale_init)
            .checked(positive, "> 0")
            .config(one_row([](const C& c, const P&) { return number_row("loss_scale_init", c.loss_scale_init); }))
            .only_for(fp16_scaled, "-p fp16 with --loss-scaling"),
        Flag("--loss-scale-growth-interval", precision, "N", "fp16: clean steps before the loss scale doubles",
             &C::loss_scale_growth_interval)
            .checked(positive, "> 0")
            .config(one_row([](const C& c, const P&) {
                return integer_row("loss_scale_growth_interval", c.loss_scale_growth_interval);
            }))
            .only_for(fp16_scaled, "-p fp16 with --loss-scaling"),
        Flag("--loss-scale-min", precision, "S", "fp16: floor of the loss scale, at most the ceiling 2^24 (16777216)",
             &C::loss_scale_min)
            .checked(positive, "> 0")
            .config(one_row([](const C& c, const P&) { return number_row("loss_scale_min", c.loss_scale_min); }))
            .only_for(fp16_scaled, "-p fp16 with --loss-scaling"),
        Flag("--fp8-recipe", precision, "KIND", "fp8: delayed (amax history) | current (this step's amax)",
             &C::fp8_recipe)
            .one_of({"delayed", "current"})
            .config(one_row(
                [](const C&, const P& p) { return text_row("fp8_recipe", fp8_recipe_name(p.precision.fp8.recipe)); }))
            .only_for(fp8_run, "-p fp8"),
        Flag("--fp8-amax-history", precision, "N", "fp8: amax history length", &C::fp8_amax_history)
            .checked(numeric(1, kMaxAmaxHistory), "1 to " + std::to_string(kMaxAmaxHistory))
            .config(one_row(
                [](const C&, const P& p) { return integer_row("fp8_amax_history", p.precision.fp8.amax_history); }))
            .effective_only_for(fp8_delayed_run, "-p fp8 --fp8-recipe delayed"),
        Flag("--fp8-amax-algo", precision, "KIND", "fp8: scale from the history's max | most_recent", &C::fp8_amax_algo)
            .one_of({"max", "most_recent"})
            .config(one_row([](const C&, const P& p) {
                return text_row("fp8_amax_algo", fp8_amax_algo_name(p.precision.fp8.algo));
            }))
            .effective_only_for(fp8_delayed_run, "-p fp8 --fp8-recipe delayed"),
        Flag("--fp8-margin", precision, "N", "fp8: back the scale off by 2^-margin", &C::fp8_margin)
            .checked(numeric(0, 64), "0 to 64")
            .config(one_row([](const C&, const P& p) { return integer_row("fp8_margin", p.precision.fp8.margin); }))
            .only_for(fp8_run, "-p fp8"),
        Flag("--fp8-gemms", precision, "LIST",
             "fp8: the block GEMMs that run in FP8 (all, none, a comma list of qkv, attproj, fc, fcproj, or auto: "
             "those faster in FP8 on this GPU at this B·T, timed at start); the others run in bf16",
             &C::fp8_gemms)
            .checked(fp8_gemms_check, "")
            .config(one_row(
                [](const C&, const P& p) { return text_row("fp8_gemms", fp8_gemms_name(p.precision.fp8.gemms)); }))
            .only_for(fp8_run, "-p fp8"),
        Flag("--fp8-telemetry-every", precision, "N",
             "fp8: log per-tensor amax/scale/saturation every N steps (0 = never)", &C::fp8_telemetry_every)
            .checked(non_negative, ">= 0")
            .config(
                one_row([](const C& c, const P&) { return integer_row("fp8_telemetry_every", c.fp8_telemetry_every); }))
            .only_for(fp8_run, "-p fp8"),
        Flag("--max-skipped-steps", precision, "N",
             "Stop after this many consecutive steps with a non-finite loss or gradient (the streak is saved in "
             "checkpoints)",
             &C::max_skipped_steps)
            .checked(positive, "> 0"),
        Flag("--loss-spike-factor", precision, "F",
             "Warn when a step's loss exceeds this times its running level (an average of the earlier losses, weight "
             "0.1 per step); 0 = never",
             &C::loss_spike_factor)
            .checked(spike_factor_check, "0, or above 1"),
        Flag("--grad-norm-spike-factor", precision, "F",
             "Warn when a step's gradient norm exceeds this times its running level (an average of the earlier "
             "norms, weight 0.1 per step, from the 10th step); 0 = never",
             &C::grad_norm_spike_factor)
            .checked(spike_factor_check, "0, or above 1"),
        Flag("--stop-on-loss-spike", precision, "",
             "Stop the run (exit 1) at the first loss spike (see --loss-spike-factor)", &C::stop_on_loss_spike)
            .no_value(),

        // evaluation and sampling
        Flag("-v,--val-every", evaluation, "N", "Evaluate val loss every N steps and at the end (0 = never)",
             &C::val_every)
            .checked(non_negative, ">= 0")
            .only_for(validating_run, "-j GLOB"),
        Flag("-m,--val-batches", evaluation, "N", "Micro-batches per val-loss evaluation", &C::val_batches)
            .checked(positive, "> 0")
            .only_for(validating_run, "-j GLOB"),
        Flag("--hellaswag", evaluation, "FILE",
             "HellaSwag jsonl (dev/data/hellaswag.sh) to evaluate as llm.c does (acc_norm), at the end and every "
             "--eval-every steps ('' = none)",
             &C::hellaswag),
        Flag("--eval-every", evaluation, "N", "Evaluate HellaSwag every N steps and at the end (0 = at the end only)",
             &C::eval_every)
            .checked(non_negative, ">= 0")
            .only_for(hellaswag_while_training, "--hellaswag FILE and -x N (N > 0)"),
        Flag("--hellaswag-examples", evaluation, "N", "Evaluate the first N HellaSwag examples (0 = all)",
             &C::hellaswag_examples)
            .checked(non_negative, ">= 0")
            .only_for(hellaswag_run, "--hellaswag FILE"),
        Flag("-g,--sample-tokens", evaluation, "N", "Tokens per sample, at the end and every -s steps (0 = none)",
             &C::sample_tokens)
            .checked(non_negative, ">= 0"),
        Flag("-s,--sample-every", evaluation, "N", "Sample every N steps during training (0 = only at the end)",
             &C::sample_every)
            .checked(non_negative, ">= 0")
            .only_for(sampling_while_training, "-g N (N > 0) and -x N (N > 0)"),
        Flag("--sample-prompt", evaluation, "TEXT", "Text to start the sample from ('' = <|endoftext|>)",
             &C::sample_prompt)
            .only_for(sampling_run, "-g N (N > 0)"),
        Flag("--temperature", evaluation, "T", "Sampling temperature (0 = greedy)", &C::temperature)
            .checked(non_negative, ">= 0")
            .only_for(sampling_run, "-g N (N > 0)"),
        Flag("--top-k", evaluation, "K", "Sample from the k most likely tokens (0 = all)", &C::top_k)
            .checked(non_negative, ">= 0")
            .only_for(random_sampling_run, "-g N (N > 0) and --temperature above 0 (0 is greedy)"),
        Flag("--top-p", evaluation, "P",
             "Sample from the smallest set of tokens holding this much probability (1 = all)", &C::top_p)
            .checked(numeric(0.0, 1.0, true), "above 0, at most 1")
            .only_for(random_sampling_run, "-g N (N > 0) and --temperature above 0 (0 is greedy)"),
        Flag("--sample-seed", evaluation, "N", "Seed of the samples' draws (-1 = from --seed)", &C::sample_seed)
            .checked(numeric(-1.0), ">= -1")
            .config([](const C& c, const P&) {
                // the seed the draws use, which --sample-seed takes back (-1 where --seed's derived one
                // is beyond its range: -1 with the same --seed is that one)
                const uint64_t seed = c.samples_seed();
                return Rows{integer_row("sample_seed", seed <= (uint64_t)INT64_MAX ? (int64_t)seed : -1)};
            })
            .only_for(sampling_run, "-g N (N > 0)"),

        // data parallel and checkpoints
        Flag("-z,--zero", checkpoints, "0|1",
             "0: every rank keeps the whole optimizer state; 1: ZeRO-1 (master weights and Adam m, v sharded over "
             "ranks)",
             &C::zero)
            .one_of({"0", "1"}),
        Flag("-n,--checkpoint-every", checkpoints, "N", "Write a checkpoint every N steps and at the end (0 = none)",
             &C::checkpoint_every)
            .checked(non_negative, ">= 0")
            .effective_only_for(training_run, "-x N (N > 0)"),
        Flag("--checkpoint-dir", checkpoints, "DIR", "Where checkpoints go ('' = <output-dir>/checkpoints)",
             &C::checkpoint_dir)
            .config([](const C&, const P& p) { return Rows{text_row("checkpoint_dir", p.checkpoint_dir)}; }),
        Flag("--keep-checkpoints", checkpoints, "N", "Complete checkpoints to keep (older ones are deleted)",
             &C::keep_checkpoints)
            .checked(positive, "> 0")
            .only_for(checkpointing_run, "-n N (N > 0)"),
        Flag("--resume", checkpoints, "",
             "Continue the run of the newest checkpoint in --checkpoint-dir: its flags, with those given here on top. "
             "No checkpoint there, or a damaged one: an error (llm.c's -y 1 is the same)",
             &C::resume)
            .no_value(),
        Flag("--auto-resume", checkpoints, "",
             "As --resume when --checkpoint-dir holds a checkpoint, else start fresh: one command line for the first "
             "start and every restart (a requeued job). A checkpoint of another run is refused: one whose model, "
             "batch, optimizer, precision, seed, -i, -j, -o or --init-from differ from this command line's (given or "
             "default), or whose training data differs",
             &C::auto_resume)
            .no_value(),
        Flag("--resume-from-intact", checkpoints, "",
             "With --resume / --auto-resume: when the newest checkpoint is damaged, resume from the newest intact one "
             "(a warning names the damaged ones, which are kept, renamed to step_*.damaged)",
             &C::resume_from_intact)
            .no_value(),
        Flag("--overwrite-output", checkpoints, "",
             "A run that does not resume may replace the log.jsonl and config.json a previous run left in --output-dir "
             "(without it, that is an error)",
             &C::overwrite_output)
            .no_value(),
        Flag("--init-from", checkpoints, "DIR",
             "Start from these weights with a fresh optimizer (the model's shape and tokenizer come with them): a "
             "checkpoint directory (its newest step), a step directory, or a transformers GPT-2 directory. With -x 0: "
             "sample / evaluate it without training",
             &C::init_from),

        // runtime
        Flag("--device", runtime, "KIND", "Kernel set: auto (GPU if present, else CPU) | cpu | cuda", &C::device)
            .one_of({"auto", "cpu", "cuda"})
            .config([](const C&, const P& p) { return Rows{text_row("device", p.device)}; }),
        Flag("--attention", runtime, "KIND",
             "CUDA attention: gemm (cuBLASLt batched GEMMs, T×T scores in scratch) | flash (tensor-core flash "
             "attention, head size 64, bf16/fp16; experimental) | cudnn (cuDNN's fused attention, bf16/fp16, where "
             "the build found cuDNN; experimental). The CPU kernel set has one attention, exact. "
             "docs/gpu-results.md records what has run on a GPU",
             &C::attention)
            .one_of({"gemm", "flash", "cudnn"})
            .config([](const C&, const P& p) { return Rows{text_row("attention", p.attention)}; }),
        Flag("--flash-backward", runtime, "KIND",
             "With --attention flash: the backward's kernels. default (16 rows per warp) | wide (32 rows per warp: "
             "every fragment read from shared memory feeds two mma's, the same values; the 16-bit backward, not FP8's "
             "fused cast; experimental)",
             &C::flash_backward)
            .one_of({"default", "wide"}),
        Flag("--fused-kernels", runtime, "BOOL",
             "CUDA: run fused ops as one kernel (FP8 casts in their producers, residual add + layernorm, bias "
             "gradients in layernorm and GELU backward; experimental); false: the separate kernels, the same bits",
             &C::fused_kernels)
            .only_for(cuda_run, "the CUDA kernel set"),
        Flag("--gemm-epilogues", runtime, "BOOL",
             "Fold GELU and the bias gradients into the GEMMs: cuBLASLt's GELU_AUX_BIAS, DGELU and BGRADB epilogues "
             "on the CUDA kernel set, their twins on the CPU (fp32/bf16/fp16 with --recompute 0; in 16 bits the GELU "
             "rounds once instead of twice; experimental)",
             &C::gemm_epilogues),
        Flag("--gemm-autotune", runtime, "",
             "CUDA: time cuBLASLt's candidate algorithms once per GEMM shape and keep the fastest (logged); default: "
             "the heuristic's first (experimental)",
             &C::gemm_autotune)
            .no_value()
            .only_for(cuda_run, "the CUDA kernel set"),
        Flag("--threads", runtime, "N", "CPU threads, at most 1024 (0 = OpenMP default)", &C::threads)
            .checked(numeric(0, 1024), "0 to 1024"),
        Flag("--seed", runtime, "N", "Seed for initialisation, shuffling and sampling", &C::seed)
            .checked(seed_check, "0 to 2^64 - 1"),
        Flag("--log-every", runtime, "N", "Print a step line every N steps", &C::log_every).checked(positive, "> 0"),
        Flag("--profile", runtime, "",
             "CUDA: GPU time per kernel-set op (CUDA events, no added synchronisation), printed at exit", &C::profile)
            .no_value(),
        Flag("--trace-ops", runtime, "FILE",
             "Write every kernel-set op the run calls, in order, with its shapes, one line each, to FILE (rank 0; "
             "the 16-bit ops: FP8's are not traced)",
             &C::trace_ops),

        // testing
        Flag("--inject-nonfinite-step", testing, "N|FIRST-LAST",
             "Make a gradient +inf at this step, or at the steps FIRST-LAST (0-based), to exercise the skip path (-1 = "
             "never)",
             &C::inject_nonfinite_step)
            .checked(injected_steps_check, ""),
    };
}

}   // namespace

std::string Flag::long_name() const {
    const size_t at = names.find("--");
    if (at == std::string::npos) return "";
    const size_t end = names.find(',', at);
    return names.substr(at + 2, end == std::string::npos ? std::string::npos : end - at - 2);
}

std::string Flag::key() const {
    std::string k = long_name();
    for (char& ch : k) {
        if (ch == '-') ch = '_';
    }
    return k;
}

const std::vector<Flag>& flag_table() {
    static const std::vector<Flag> table = make_table();
    return table;
}

std::string field_text(const Flag& flag, const TrainConfig& cfg) {
    return std::visit(
        [&](auto member) -> std::string {
            const auto& v = cfg.*member;
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>) {
                return v;
            } else if constexpr (std::is_same_v<T, bool>) {
                return v ? "true" : "false";
            } else if constexpr (std::is_same_v<T, float>) {
                return format("%g", (double)v);
            } else {
                return std::to_string(v);
            }
        },
        flag.field);
}

ConfigRow field_row(const Flag& flag, const TrainConfig& cfg) {
    const ConfigRow::Kind kind = std::visit(
        [](auto member) {
            using T = std::decay_t<decltype(TrainConfig{}.*member)>;
            if constexpr (std::is_same_v<T, std::string>) return ConfigRow::kText;
            if constexpr (std::is_same_v<T, bool>) return ConfigRow::kBool;
            if constexpr (std::is_same_v<T, float>) return ConfigRow::kNumber;
            return ConfigRow::kInteger;
        },
        flag.field);
    return {kind, flag.key(), field_text(flag, cfg)};
}

}   // namespace train_gpt
