// train_gpt.cu — GPT-2 pretraining, readable top to bottom:
//   command line → model → data → training loop (val loss, step, log) → sample.
//
// Launch:
//   make && ./train_gpt                                   small model on the bundled KJV corpus (CPU ok)
//   ./train_gpt -e d12 -i 'data/fw/train_*.bin' -j 'data/fw/val_*.bin' --tokenizer data/fw/tokenizer.bin
//   ./train_gpt --help                                    every flag with its default
//
// Where things are (include map):
//   llmc/config.h     TrainConfig (every flag), RunPlan, the start-up table and config.json
//   llmc/gpt.h        the model: parameter layout, forward, backward, AdamW update
//   llmc/precision.h  fp32 | bf16 | fp16 | fp8: the dtype of every buffer
//   llmc/fp8_scaling.h  FP8 delayed scaling (amax history → scale); llmc/loss_scaler.h  fp16 loss scaling
//   llmc/backend.h    the kernel-set interface the model calls; llmc/cpu/ is the CPU kernel set,
//                     llmc/cpu/kernels.h documents every op (shapes, maths, += rules)
//   llmc/dataloader.h batches of (B, T) tokens from a glob of llm.c token shards
//   llmc/tokenizer.h  decoding samples (and byte-level encoding of a prompt)
//   llmc/schedule.h   learning-rate schedules
//   llmc/logger.h     the JSONL run log
//   llmc/rng.h        deterministic random numbers
#include "config.h"
#include "dataloader.h"
#include "gpt.h"
#include "logger.h"
#include "loss_scaler.h"
#include "rng.h"
#include "schedule.h"
#include "tokenizer.h"
#include "utils.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace train_gpt;

namespace {

// Number of usable CUDA devices; 0 (with the reason) when there is no GPU or no driver.
int cuda_device_count(std::string* reason) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        *reason = cudaGetErrorString(err);
        return 0;
    }
    if (count == 0) *reason = "no CUDA device";
    return count;
}

// --device auto|cpu|cuda → the kernel set to use.
std::string choose_device(const std::string& requested) {
    if (requested == "cpu") return "cpu";
    std::string reason;
    int gpus = cuda_device_count(&reason);
    if (requested == "cuda") {
        if (gpus == 0) fail("--device cuda: no usable GPU (%s)", reason.c_str());
        fail("--device cuda: this build has no CUDA kernel set yet; use --device cpu");
    }
    if (gpus == 0) {
        std::printf("notice: no GPU (%s); training on the CPU kernel set\n", reason.c_str());
    } else {
        std::printf("notice: %d GPU(s) found, but this build has no CUDA kernel set yet; using the CPU\n", gpus);
    }
    return "cpu";
}

// Mean loss over `batches` micro-batches from the start of the validation set.
float evaluate(GPT& model, DataLoader& loader, int batches, int B, int T) {
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    loader.reset();
    double sum = 0;
    for (int i = 0; i < batches; i++) {
        loader.next_batch(inputs.data(), targets.data());
        sum += model.forward(inputs.data(), targets.data(), B, T);
    }
    return (float)(sum / batches);
}

// Samples `count` tokens after `prompt`, one forward per token over the last ≤ T tokens.
std::vector<int> sample(GPT& model, std::vector<int> tokens, int count, int T, float temperature, Rng& rng) {
    const size_t prompt_len = tokens.size();
    for (int i = 0; i < count; i++) {
        int ctx = (int)std::min<size_t>(tokens.size(), (size_t)T);
        std::vector<int32_t> window(tokens.end() - ctx, tokens.end());   // (1, ctx)
        model.forward(window.data(), nullptr, 1, ctx);
        std::vector<float> logits = model.logits_at(0, ctx - 1);          // (V)
        float max_logit = logits[0];
        for (float x : logits) max_logit = std::max(max_logit, x);
        double sum = 0;
        std::vector<double> probs(logits.size());
        for (size_t v = 0; v < logits.size(); v++) sum += probs[v] = std::exp((logits[v] - max_logit) / temperature);
        double u = rng.uniform() * sum, cdf = 0;
        size_t next = logits.size() - 1;
        for (size_t v = 0; v < logits.size(); v++) {
            cdf += probs[v];
            if (u < cdf) { next = v; break; }
        }
        tokens.push_back((int)next);
    }
    return std::vector<int>(tokens.begin() + prompt_len, tokens.end());
}

std::string human_rate(double tokens_per_second) {
    if (tokens_per_second >= 1e6) return format("%.2fM", tokens_per_second / 1e6);
    if (tokens_per_second >= 1e3) return format("%.1fk", tokens_per_second / 1e3);
    return format("%.0f", tokens_per_second);
}

int run(int argc, char** argv) {
    // ---- configuration ----
    TrainConfig cfg;
    if (std::optional<int> exit_code = parse_command_line(argc, argv, cfg)) return *exit_code;
    validate(cfg);
    if (cfg.threads > 0) set_cpu_threads(cfg.threads);

    RunPlan plan;
    plan.device = choose_device(cfg.device);
    std::optional<Tokenizer> tokenizer;
    int vocab_size = cfg.vocab_size;
    if (!cfg.tokenizer.empty()) {
        tokenizer = Tokenizer::load(cfg.tokenizer);
        if (vocab_size == 0) vocab_size = tokenizer->vocab_size();
        if (vocab_size < tokenizer->vocab_size()) {
            fail("--vocab-size %d is smaller than the tokenizer's %d (%s)", vocab_size, tokenizer->vocab_size(),
                 cfg.tokenizer.c_str());
        }
    }
    const int B = cfg.batch_size, T = cfg.seq_len;
    plan.model = gpt_config_from_spec(cfg.model, vocab_size, cfg.max_seq_len > 0 ? cfg.max_seq_len : T,
                                      cfg.n_embd, cfg.n_head);
    plan.world_size = 1;
    plan.grad_accum_steps = grad_accum_steps_for(cfg, plan.world_size);
    plan.tokens_per_step = (int64_t)B * T * plan.world_size * plan.grad_accum_steps;

    // ---- data (every shard's header is checked before any work starts) ----
    DataLoader train_loader(cfg.train_data, B, T, /*rank=*/0, plan.world_size, cfg.shuffle, cfg.seed, vocab_size);
    std::unique_ptr<DataLoader> val_loader;
    if (!cfg.val_data.empty() && cfg.val_every > 0) {
        val_loader = std::make_unique<DataLoader>(cfg.val_data, B, T, 0, plan.world_size, false, cfg.seed, vocab_size);
    }

    // ---- model ----
    PrecisionConfig precision;
    precision.precision = parse_precision(cfg.precision);
    precision.master_weights = cfg.master_weights;
    precision.fp8.amax_history = cfg.fp8_amax_history;
    precision.fp8.algo = parse_fp8_amax_algo(cfg.fp8_amax_algo);
    precision.fp8.margin = cfg.fp8_margin;
    precision.fp8.recipe = parse_fp8_recipe(cfg.fp8_recipe);
    std::unique_ptr<Backend> backend = make_cpu_backend(activation_dtype(precision.precision));
    GPT model(plan.model, *backend, B, T, precision);
    model.init_weights(cfg.seed);
    plan.num_parameters = model.num_parameters();

    make_dirs(cfg.output_dir);
    JsonlLog log(cfg.output_dir + "/log.jsonl");
    save_config_json(cfg.output_dir + "/config.json", cfg, plan);
    print_config_table(cfg, plan);
    std::printf("train: %lld tokens in %d shard(s)", (long long)train_loader.num_tokens(), train_loader.num_shards());
    if (val_loader) std::printf(" | val: %lld tokens", (long long)val_loader->num_tokens());
    std::printf("\n");

    LrSchedule schedule;
    schedule.kind = parse_lr_schedule(cfg.lr_schedule);
    schedule.lr = cfg.lr;
    schedule.warmup_steps = cfg.warmup_steps;
    schedule.total_steps = cfg.steps;
    schedule.final_lr_frac = cfg.final_lr_frac;
    schedule.decay_frac = cfg.wsd_decay_frac;
    AdamWConfig adamw{cfg.beta1, cfg.beta2, cfg.adam_eps, cfg.weight_decay};
    // fp16: dynamic loss scaling keeps small gradients above fp16's smallest subnormal
    std::optional<LossScaler> scaler;
    if (precision.precision == Precision::FP16 && cfg.loss_scaling) {
        LossScalerConfig lsc;
        lsc.init_scale = cfg.loss_scale_init;
        lsc.growth_interval = cfg.loss_scale_growth_interval;
        lsc.min_scale = cfg.loss_scale_min;
        scaler.emplace(lsc);
    }

    // ---- training loop ----
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);   // (B, T) each
    const float dloss = 1.0f / ((float)B * T * plan.grad_accum_steps);     // d(mean loss)/d(each token's loss)
    int updates = 0, skipped = 0, skipped_in_a_row = 0;
    for (int step = 0; step <= cfg.steps; step++) {
        const bool last = step == cfg.steps;
        if (val_loader && (step % cfg.val_every == 0 || last)) {
            float val_loss = evaluate(model, *val_loader, cfg.val_batches, B, T);
            std::printf("step %d/%d | val loss %.4f\n", step, cfg.steps, val_loss);
            log.write(LogRecord("val").num("step", step).num("loss", val_loss));
        }
        if (last) break;

        auto t0 = std::chrono::steady_clock::now();
        model.zero_grad();
        const float loss_scale = scaler ? scaler->scale() : 1.0f;   // gradients come out × loss_scale
        double loss = 0;
        for (int micro = 0; micro < plan.grad_accum_steps; micro++) {
            train_loader.next_batch(inputs.data(), targets.data());
            loss += model.forward(inputs.data(), targets.data(), B, T, dloss * loss_scale) / plan.grad_accum_steps;
            model.backward();
        }
        if (step == cfg.inject_nonfinite_step) model.poison_gradient();
        const double norm = model.gradient_norm() / loss_scale;   // of the unscaled gradients
        const float lr = schedule.at(step);
        const bool finite = std::isfinite(loss) && std::isfinite(norm);
        if (scaler) {
            LossScaleUpdate u = scaler->update(!finite);   // overflow: halve; 2000 clean steps: double
            if (u.collapse_warning) {
                std::printf("warning: the fp16 loss scale has sat at its floor %g for %d steps: gradients keep "
                            "overflowing; consider bf16\n", scaler->scale(), scaler->floor_streak());
            }
        }
        if (finite) {
            // torch.nn.utils.clip_grad_norm_: scale by clip/(norm + 1e-6) when that is below 1
            float clip_scale = 1.0f;
            if (cfg.grad_clip > 0) clip_scale = std::min(1.0f, (float)(cfg.grad_clip / (norm + 1e-6)));
            model.update(lr, adamw, clip_scale / loss_scale, ++updates);
            skipped_in_a_row = 0;
        } else {
            model.discard_step();
            skipped++;
            if (++skipped_in_a_row >= cfg.max_skipped_steps) {
                fail("%d steps in a row had a non-finite loss or gradient norm (last: loss %g, norm %g, step %d); "
                     "stopping. Try a lower --lr, --precision bf16, or a larger --max-skipped-steps",
                     skipped_in_a_row, loss, norm, step + 1);
            }
        }
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const double tok_per_s = plan.tokens_per_step / (ms / 1000.0);
        if (step % cfg.log_every == 0 || step == cfg.steps - 1 || !finite) {
            std::string extra = scaler ? format(" | scale %g", loss_scale) : "";
            if (!finite) extra += " | SKIPPED (non-finite)";
            std::printf("step %d/%d | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %s tok/s%s\n", step + 1, cfg.steps,
                        loss, lr, norm, ms, human_rate(tok_per_s).c_str(), extra.c_str());
        }
        LogRecord record("step");
        record.num("step", step + 1).num("loss", loss).num("lr", lr).num("grad_norm", norm).num("ms", ms)
            .num("tok_per_s", tok_per_s).num("skipped", finite ? 0 : 1);
        if (scaler) record.num("loss_scale", loss_scale);
        log.write(record);
        if (cfg.fp8_telemetry_every > 0 && (step % cfg.fp8_telemetry_every == 0 || step == cfg.steps - 1)) {
            for (const Fp8TensorReport& r : model.fp8_report()) {
                log.write(LogRecord("fp8").num("step", step + 1).str("tensor", r.name).num("amax", r.amax)
                              .num("scale", r.scale).num("saturated", r.saturated_frac).num("flushed", r.flushed_frac));
            }
        }
        std::fflush(stdout);
    }
    if (skipped > 0) std::printf("%d step(s) skipped for a non-finite loss or gradient norm\n", skipped);

    // ---- sample ----
    if (cfg.sample_tokens > 0) {
        std::vector<int> prompt;
        if (!cfg.sample_prompt.empty()) {
            if (!tokenizer) fail("--sample-prompt needs a --tokenizer");
            prompt = tokenizer->encode(cfg.sample_prompt);
        } else {
            prompt.push_back(tokenizer ? tokenizer->eot_token() : 0);
        }
        Rng rng(cfg.seed ^ 0x5eed5eedULL);
        std::vector<int> generated = sample(model, prompt, cfg.sample_tokens, T, cfg.temperature, rng);
        std::string text;
        if (tokenizer) {
            text = cfg.sample_prompt + printable(tokenizer->decode(generated));
        } else {
            for (int id : generated) text += std::to_string(id) + " ";
        }
        std::printf("---- sample (%d tokens) ----\n%s\n---------------------------\n", cfg.sample_tokens, text.c_str());
        log.write(LogRecord("sample").num("step", cfg.steps).str("text", text));
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const Error& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
