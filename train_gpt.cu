// train_gpt.cu — GPT-2 pretraining, readable top to bottom:
//   command line → model → data → training loop (val loss, step, log) → sample.
//
// Launch:
//   make && ./train_gpt                                   small model on the bundled KJV corpus (CPU ok)
//   ./train_gpt -e d12 -i 'data/fw/train_*.bin' -j 'data/fw/val_*.bin' --tokenizer data/fw/tokenizer.bin
//   mpirun -np 8 ./train_gpt -e d12 -p bf16 --zero 1 ...  data parallel, one rank per GPU
//   scripts/run_multinode.sh, scripts/slurm_train.sbatch  several nodes (docs/distributed.md)
//   ./train_gpt --help                                    every flag with its default
//
// Where things are (include map):
//   llmc/train/config.h     TrainConfig (every flag), RunPlan, the start-up table and config.json
//   llmc/model/gpt.h        the model: parameter layout, forward, backward, AdamW update
//   llmc/precision/precision.h  fp32 | bf16 | fp16 | fp8: the dtype of every buffer
//   llmc/precision/fp8_scaling.h  FP8 delayed scaling (amax history → scale); llmc/precision/loss_scaler.h  fp16 loss scaling
//   llmc/precision/fp8_autotune.h  --fp8-gemms auto: the block GEMMs that run in FP8, chosen by timing them
//   llmc/backend.h    the kernel-set interface the model calls; llmc/cpu/ is the CPU kernel set,
//                     llmc/cpu/kernels.h documents every op (shapes, maths, += rules)
//   llmc/cuda/cuda_backend.h  the CUDA kernel set (llmc/cuda/: cuBLASLt GEMMs, flash attention, …)
//   llmc/distributed/comm.h       all-reduce / reduce-scatter / all-gather over ranks (single process or MPI)
//   llmc/distributed/comm_nccl.h  the same collectives between GPUs, over NCCL
//   llmc/checkpoint/checkpoint.h step_XXXXXXXX/ directories: HF safetensors weights, sharded optimizer state
//   llmc/data/dataloader.h batches of (B, T) tokens from a glob of llm.c token shards
//   llmc/data/tokenizer.h  decoding samples, encoding a prompt (llmc/data/bpe.h: the byte-level BPE)
//   llmc/train/schedule.h   learning-rate schedules
//   llmc/train/logger.h     the JSONL run log
//   llmc/rng.h        deterministic random numbers
#include "checkpoint/checkpoint.h"
#include "distributed/comm.h"
#include "distributed/comm_nccl.h"
#include "train/config.h"
#include "cuda/cuda_backend.h"
#include "data/dataloader.h"
#include "precision/fp8_autotune.h"
#include "model/gpt.h"
#include "train/logger.h"
#include "precision/loss_scaler.h"
#include "rng.h"
#include "train/schedule.h"
#include "data/tokenizer.h"
#include "checkpoint/train_state.h"
#include "utils.h"

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace train_gpt;

namespace {

bool g_is_root = true;   // rank 0 prints; the others stay quiet

// printf on rank 0 only
void print0(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void print0(const char* fmt, ...) {
    if (!g_is_root) return;
    va_list args;
    va_start(args, fmt);
    std::vprintf(fmt, args);
    va_end(args);
}

// --device auto|cpu|cuda → the kernel set to use: "cuda" when a GPU is there (auto, cuda),
// else "cpu" (auto, with a notice; --device cuda without a GPU is an error).
std::string choose_device(const std::string& requested) {
    if (requested == "cpu") return "cpu";
    std::string reason;
    if (cuda_device_count(&reason) > 0) return "cuda";
    if (requested == "cuda") fail("--device cuda: no usable GPU (%s)", reason.c_str());
    print0("notice: no GPU (%s); training on the CPU kernel set\n", reason.c_str());
    return "cpu";
}

// Mean loss over `batches` micro-batches from the start of the validation set, split over the
// ranks (rank r takes batches r, r + W, ...), so every world size evaluates the same tokens when
// W divides `batches`.
float evaluate(GPT& model, DataLoader& loader, int batches, int B, int T, Comm& comm) {
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    loader.reset();
    const int per_rank = (batches + comm.world_size() - 1) / comm.world_size();
    double sum = 0;
    for (int i = 0; i < per_rank; i++) {
        loader.next_batch(inputs.data(), targets.data());
        sum += model.forward(inputs.data(), targets.data(), B, T);
    }
    return (float)(comm.all_reduce_sum(sum) / (per_rank * comm.world_size()));
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

// Everything a checkpoint holds besides the model's tensors.
struct ResumeState {
    int64_t step = 0;
    TrainCounters counters;
};

// Writes <dir>/step_XXXXXXXX/ (all ranks take part): BF16 HF weights split over the ranks, this
// rank's slice of the FP32 optimizer state, then rank 0 hashes everything into the manifest and
// renames the directory into place. A crash at any point leaves only a *.tmp directory behind.
void save_checkpoint(const std::string& dir, int64_t step, GPT& model, Comm& comm, const TrainConfig& cfg,
                     const RunPlan& plan, const DataLoader& loader, const TrainCounters& counters,
                     const std::optional<LossScaler>& scaler, int keep) {
    if (comm.rank() == 0) {
        make_dirs(dir);
        begin_checkpoint(dir, step);
    }
    comm.barrier();
    const std::string tmp = checkpoint_tmp_dir(dir, step);
    std::vector<float> weights = model.weights();   // collective under ZeRO-1
    write_weight_shards(tmp, plan.model, weights.data(), comm.rank(), comm.world_size());
    // this rank's range of the optimizer state: its ZeRO-1 slice, or 1/W of the replicated state
    std::vector<float> master = model.optimizer_state("master"), m = model.optimizer_state("m"),
                       v = model.optimizer_state("v");
    size_t begin = model.state_begin(), offset = 0, n = model.state_size();
    if (model.state_size() == model.num_parameters() && comm.world_size() > 1) {
        const size_t per_rank = (n + comm.world_size() - 1) / comm.world_size();
        offset = std::min(n, per_rank * comm.rank());
        n = std::min(n - offset, per_rank);
        begin = offset;
    }
    write_state_shard(tmp, plan.model, comm.rank(), begin, n, master.data() + offset, m.data() + offset,
                      v.data() + offset);
    comm.barrier();
    if (comm.rank() == 0) {
        CheckpointManifest manifest;
        manifest.step = step;
        manifest.model = plan.model;
        manifest.world_size = comm.world_size();
        manifest.train_config_json = config_json(cfg, plan);
        manifest.data_position = loader.position();
        manifest.loss_scaler_json = scaler ? loss_scaler_to_json(*scaler) : "";
        manifest.fp8_json = model.fp8_state_json();
        manifest.extra_json = counters_to_json(counters);
        finalize_checkpoint(tmp, checkpoint_dir(dir, step), manifest);
        prune_checkpoints(dir, keep);
    }
    comm.barrier();
}

// Restores everything save_checkpoint wrote, into a model of any world size.
ResumeState load_checkpoint(const std::string& path, GPT& model, const RunPlan& plan, DataLoader& loader,
                            std::optional<LossScaler>& scaler, Comm& comm) {
    // rank 0 verifies every file's checksum (one read of the whole checkpoint); all check the shape
    CheckpointManifest manifest = comm.rank() == 0 ? open_checkpoint(path, plan.model) : read_manifest(path);
    check_model_config(manifest, plan.model, path);
    comm.barrier();
    const size_t begin = model.state_begin(), end = begin + model.state_size();
    model.restore_optimizer_state(read_state_range(path, plan.model, StateTensor::Master, begin, end),
                                  read_state_range(path, plan.model, StateTensor::M, begin, end),
                                  read_state_range(path, plan.model, StateTensor::V, begin, end));
    model.restore_fp8_state(manifest.fp8_json.empty() ? "[]" : manifest.fp8_json);
    if (scaler && !manifest.loss_scaler_json.empty()) loss_scaler_from_json(*scaler, manifest.loss_scaler_json);
    loader.set_position(manifest.data_position);
    return ResumeState{manifest.step, counters_from_json(manifest.extra_json)};
}

int run(int argc, char** argv) {
    // ---- configuration ----
    TrainConfig cfg;
    if (std::optional<int> exit_code = parse_command_line(argc, argv, cfg)) return *exit_code;
    validate(cfg);
    if (cfg.threads > 0) set_cpu_threads(cfg.threads);
    std::unique_ptr<Comm> comm = make_comm();   // MPI under mpirun / srun, else one process
    g_is_root = comm->rank() == 0;

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
    plan.world_size = comm->world_size();
    plan.grad_accum_steps = grad_accum_steps_for(cfg, plan.world_size);
    plan.tokens_per_step = (int64_t)B * T * plan.world_size * plan.grad_accum_steps;

    // ---- data (every shard's header is checked before any work starts) ----
    DataLoader train_loader(cfg.train_data, B, T, comm->rank(), plan.world_size, cfg.shuffle, cfg.seed, vocab_size);
    std::unique_ptr<DataLoader> val_loader;
    if (!cfg.val_data.empty() && cfg.val_every > 0) {
        val_loader = std::make_unique<DataLoader>(cfg.val_data, B, T, comm->rank(), plan.world_size, false, cfg.seed,
                                                  vocab_size);
    }

    // ---- model ----
    PrecisionConfig precision;
    precision.precision = parse_precision(cfg.precision);
    precision.master_weights = cfg.master_weights;
    precision.fp8.amax_history = cfg.fp8_amax_history;
    precision.fp8.algo = parse_fp8_amax_algo(cfg.fp8_amax_algo);
    precision.fp8.margin = cfg.fp8_margin;
    precision.fp8.recipe = parse_fp8_recipe(cfg.fp8_recipe);
    if (cfg.fp8_gemms != "auto") precision.fp8.gemms = parse_fp8_gemms(cfg.fp8_gemms);
    // the kernel set: one GPU per rank (local rank mod the GPUs of the node), or the CPU; under
    // MPI the GPUs exchange gradients and weights over NCCL, bootstrapped through the MPI Comm
    const DType act_dtype = activation_dtype(precision.precision);
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Comm> nccl;
    if (plan.device == "cuda") {
        std::string reason;
        backend = make_cuda_backend(act_dtype, comm->local_rank() % cuda_device_count(&reason));
        if (launched_by_mpi()) nccl = make_nccl_comm(*comm);
    } else {
        backend = make_cpu_backend(act_dtype);
    }
    Comm& model_comm = nccl ? *nccl : *comm;   // device buffers go over NCCL; host scalars stay on `comm`
    const std::string checkpoints = cfg.checkpoint_dir.empty() ? cfg.output_dir + "/checkpoints" : cfg.checkpoint_dir;
    std::optional<std::string> resume_from = cfg.resume ? latest_checkpoint(checkpoints) : std::nullopt;
    if (precision.precision == Precision::FP8 && cfg.fp8_gemms == "auto") {   // fp8_autotune.h
        const Fp8AutoChoice choice = choose_fp8_gemms_auto(*backend, plan.model, B, T, resume_from, *comm);
        precision.fp8.gemms = choice.gemms;
        cfg.fp8_gemms = fp8_gemms_name(choice.gemms);   // config.json and checkpoints record the choice
        print0("%s\n", choice.how.c_str());
    }
    GPT model(plan.model, *backend, B, T, precision, &model_comm, cfg.zero);
    model.init_weights(cfg.seed);
    plan.num_parameters = model.num_parameters();
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

    // ---- where to start: fresh, from a checkpoint's weights, or resuming a run ----
    ResumeState start;
    if (resume_from) {
        start = load_checkpoint(*resume_from, model, plan, train_loader, scaler, *comm);
        print0("resuming from %s (step %lld)\n", resume_from->c_str(), (long long)start.step);
    } else {
        if (cfg.resume) print0("notice: no complete checkpoint in %s; starting from scratch\n", checkpoints.c_str());
        // a fresh run must not collide with (or prune) another run's checkpoints
        if (cfg.checkpoint_every > 0 && latest_checkpoint(checkpoints)) {
            fail("%s already holds checkpoints (newest: %s); continue that run with --resume, or give another "
                 "--checkpoint-dir", checkpoints.c_str(), latest_checkpoint(checkpoints)->c_str());
        }
        if (!cfg.init_from.empty()) {   // fine-tuning: the weights, not the optimizer
            open_checkpoint(cfg.init_from, plan.model);
            model.set_weights(read_state_range(cfg.init_from, plan.model, StateTensor::Master, 0,
                                               model.num_parameters()));
            print0("initialised from the weights of %s\n", cfg.init_from.c_str());
        }
    }

    // ---- output (rank 0): config table, config.json, the JSONL log (continued on resume) ----
    std::optional<JsonlLog> log;
    if (g_is_root) {
        make_dirs(cfg.output_dir);
        log.emplace(cfg.output_dir + "/log.jsonl", /*append=*/resume_from.has_value());
        save_config_json(cfg.output_dir + "/config.json", cfg, plan);
        print_config_table(cfg, plan);
    }
    auto write_log = [&](const LogRecord& r) { if (log) log->write(r); };
    print0("train: %lld tokens in %d shard(s)", (long long)train_loader.num_tokens(), train_loader.num_shards());
    if (val_loader) print0(" | val: %lld tokens", (long long)val_loader->num_tokens());
    print0(" | %d rank(s), %s\n", plan.world_size, model_comm.name().c_str());
    print0("memory: activations %.3f GiB for B=%d, T=%d (per rank)\n", model.activation_bytes() / 1073741824.0,
           cfg.batch_size, cfg.seq_len);

    LrSchedule schedule;
    schedule.kind = parse_lr_schedule(cfg.lr_schedule);
    schedule.lr = cfg.lr;
    schedule.warmup_steps = cfg.warmup_steps;
    schedule.total_steps = cfg.steps;
    schedule.final_lr_frac = cfg.final_lr_frac;
    schedule.decay_frac = cfg.wsd_decay_frac;

    // ---- training loop ----
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);   // (B, T) each
    const float dloss = 1.0f / ((float)B * T * plan.grad_accum_steps);     // d(mean loss)/d(each token's loss)
    TrainCounters counters = start.counters;
    int skipped_in_a_row = 0;
    for (int step = (int)start.step; step <= cfg.steps; step++) {
        const bool last = step == cfg.steps;
        if (val_loader && (step % cfg.val_every == 0 || last)) {
            float val_loss = evaluate(model, *val_loader, cfg.val_batches, B, T, *comm);
            print0("step %d/%d | val loss %.4f\n", step, cfg.steps, val_loss);
            write_log(LogRecord("val").num("step", step).num("loss", val_loss));
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
        model.reduce_gradients();                                   // sum over ranks
        loss = comm->all_reduce_sum(loss) / plan.world_size;        // the mean over ranks
        const double norm = model.gradient_norm() / loss_scale;     // of the unscaled mean gradient
        const float lr = schedule.at(step);
        const bool finite = std::isfinite(loss) && std::isfinite(norm);   // the same on every rank
        if (scaler) {
            LossScaleUpdate u = scaler->update(!finite);   // overflow: halve; 2000 clean steps: double
            if (u.collapse_warning) {
                print0("warning: the fp16 loss scale has sat at its floor %g for %d steps: gradients keep "
                       "overflowing; consider bf16\n", scaler->scale(), scaler->floor_streak());
            }
        }
        if (finite) {
            // torch.nn.utils.clip_grad_norm_: scale by clip/(norm + 1e-6) when that is below 1
            float clip_scale = 1.0f;
            if (cfg.grad_clip > 0) clip_scale = std::min(1.0f, (float)(cfg.grad_clip / (norm + 1e-6)));
            model.update(lr, adamw, clip_scale / loss_scale, (int)++counters.updates);
            skipped_in_a_row = 0;
        } else {
            model.discard_step();
            counters.skipped++;
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
            print0("step %d/%d | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %s tok/s%s\n", step + 1, cfg.steps, loss,
                   lr, norm, ms, human_rate(tok_per_s).c_str(), extra.c_str());
        }
        LogRecord record("step");
        record.num("step", step + 1).num("loss", loss).num("lr", lr).num("grad_norm", norm).num("ms", ms)
            .num("tok_per_s", tok_per_s).num("skipped", finite ? 0 : 1);
        if (scaler) record.num("loss_scale", loss_scale);
        write_log(record);
        if (model.fp8() && cfg.fp8_telemetry_every > 0 && (step % cfg.fp8_telemetry_every == 0 || step == cfg.steps - 1)) {
            for (const Fp8TensorReport& r : model.fp8()->report()) {
                write_log(LogRecord("fp8").num("step", step + 1).str("tensor", r.name).num("amax", r.amax)
                              .num("scale", r.scale).num("saturated", r.saturated_frac).num("flushed", r.flushed_frac));
            }
        }
        if (cfg.checkpoint_every > 0 && ((step + 1) % cfg.checkpoint_every == 0 || step + 1 == cfg.steps)) {
            save_checkpoint(checkpoints, step + 1, model, *comm, cfg, plan, train_loader, counters, scaler,
                            cfg.keep_checkpoints);
            print0("checkpoint: %s\n", checkpoint_dir(checkpoints, step + 1).c_str());
        }
        std::fflush(stdout);
    }
    if (counters.skipped > 0) print0("%lld step(s) skipped for a non-finite loss or gradient norm\n", (long long)counters.skipped);

    // ---- sample (rank 0) ----
    if (cfg.sample_tokens > 0 && g_is_root) {
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
        write_log(LogRecord("sample").num("step", cfg.steps).str("text", text));
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
