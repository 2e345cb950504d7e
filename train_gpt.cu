// train_gpt.cu — GPT-2 pretraining, readable top to bottom:
//   configuration → model → data → training loop (val loss, HellaSwag, samples, train_step, log,
//   checkpoint) → sample → summary.
//
// Launch:
//   make && ./train_gpt                                   small model on the bundled KJV corpus (CPU ok)
//   ./train_gpt -e d12 -i 'data/fineweb/fw_train_*.bin' -j 'data/fineweb/fw_val_*.bin'   GPT-2 124M on FineWeb (dev/data/fineweb.sh)
//   mpirun -np 8 ./train_gpt -e d12 -p bf16 --zero 1 ...  data parallel, one rank per GPU
//   scripts/run_multinode.sh, scripts/slurm_train.sbatch  several nodes (docs/distributed.md)
//   ./train_gpt --resume                                  continue the newest checkpoint's run (its flags)
//   ./train_gpt --auto-resume ...                         the same if there is a checkpoint, else a fresh run (job scripts)
//   ./train_gpt --init-from out/checkpoints -x 0 -g 64    sample (and -j, --hellaswag: evaluate) a checkpoint
//   ./train_gpt --help                                    every flag with its default
//
// Where things are (include map; docs/walkthrough.md follows one step from here into every kernel):
//   llmc/train/config.h          TrainConfig (every flag), RunPlan (what they resolve to), config.json
//   llmc/model/gpt.h             the model: forward, backward, AdamW update, written against backend.h
//   llmc/model/layout.h          its shape: the parameter tensors and the four GEMMs of a block
//   llmc/backend.h               the kernel-set interface, and what every op computes
//   llmc/cpu/                    the CPU kernel set (the executable specification of every kernel)
//   llmc/cuda/cuda_backend.h     the CUDA kernel set (llmc/cuda/: cuBLASLt GEMMs and attention, …)
//   llmc/precision/precision.h   fp32 | bf16 | fp16 | fp8: the dtype of every buffer (-p auto:
//                                bf16 on a GPU, fp32 on the CPU)
//   llmc/precision/fp8_state.h   fp8 mode: the FP8 GEMMs and their delayed scaling (fp8_scaling.h)
//   llmc/precision/loss_scaler.h fp16 dynamic loss scaling
//   llmc/precision/fp8_autotune.h  --fp8-gemms auto: the block GEMMs that run in FP8, chosen by timing
//   llmc/distributed/comm.h      all-reduce / reduce-scatter / all-gather over ranks (single process or MPI);
//                                comm_nccl.h: the same between GPUs, over NCCL
//   llmc/checkpoint/checkpoint.h step_XXXXXXXX/ directories: HF safetensors weights, sharded optimizer state
//   llmc/data/dataloader.h       batches of (B, T) tokens from a glob of llm.c token shards
//   llmc/data/mapped_files.h     the shard a bus error (a file truncated while mapped) belongs to
//   llmc/data/tokenizer.h        decoding samples, encoding a prompt (data/bpe.h: the byte-level BPE);
//                                data/run_tokenizer.h: the run's tokenizer, checked against its shards
//   llmc/checkpoint/init_from.h  --init-from: a checkpoint or a transformers GPT-2 directory
//   llmc/train/resume.h          --resume: which checkpoint (verified), the checkpoint's run, its flags and its log
//   llmc/train/run_dirs.h        the output and checkpoint directories: checked, locked (run_lock.h), never taken over
//   llmc/train/divergence.h      non-finite streaks and loss spikes;  llmc/train/signals.h  SIGTERM / SIGUSR1 / SIGINT
//   llmc/model/generate.h        samples through a KV cache (model/sampling.h: temperature, top-k, top-p)
//   llmc/eval/hellaswag.h        HellaSwag as llm.c evaluates it
//   llmc/train/progress.h        the step line's elapsed time, ETA and MFU; the closing summary
//   llmc/train/schedule.h        learning-rate schedules;  llmc/train/logger.h  the JSONL run log
//   llmc/rng.h                   deterministic random numbers
#include "checkpoint/checkpoint.h"
#include "checkpoint/hf_tokenizer.h"
#include "checkpoint/init_from.h"
#include "checkpoint/train_state.h"
#include "cuda/attention_cudnn.h"
#include "cuda/cuda_backend.h"
#include "data/dataloader.h"
#include "data/run_tokenizer.h"
#include "data/tokenizer.h"
#include "data/mapped_files.h"
#include "distributed/comm.h"
#include "distributed/comm_nccl.h"
#include "eval/hellaswag.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "precision/fp8_autotune.h"
#include "precision/fp8_state.h"
#include "precision/loss_scaler.h"
#include "train/fault_injection.h"
#include "train/op_trace.h"
#include "rng.h"
#include "train/config.h"
#include "train/logger.h"
#include "train/progress.h"
#include "train/divergence.h"
#include "train/resume.h"
#include "train/run_dirs.h"
#include "train/run_lock.h"
#include "train/signals.h"
#include "utils.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <sys/stat.h>
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

// The attention the kernel set will run: the CPU kernel set has one (exact, row by row); the CUDA
// one runs --attention, but the flash attention only where it takes the head size and dtype.
std::string chosen_attention(const TrainConfig& cfg, const RunPlan& plan) {
    if (plan.device == "cpu") return "exact";
    const int head_size = plan.model.n_embd / plan.model.n_head;
    const DType dtype = activation_dtype(plan.precision.precision);
    if (cfg.attention == "cudnn") {
        std::string why;
        if (!cudnn_attention_available(&why))
            fail("--attention cudnn: %s; give --attention gemm or flash", why.c_str());
        if (dtype == DType::F32) {
            print0("notice: --attention cudnn takes bf16/fp16 (here fp32); using the GEMM attention\n");
            return "gemm";
        }
    }
    if (cfg.attention == "flash" && !cuda_flash_attention_supports(head_size, dtype)) {
        print0("notice: --attention flash takes head size 64 in bf16/fp16 (here %d, %s); using the GEMM attention\n",
               head_size, dtype_name(dtype));
        return "gemm";
    }
    return cfg.attention;
}

// The attention the run uses, its head size checked before anything is written (the kernels'
// launches check it again)
std::string choose_attention(const TrainConfig& cfg, const RunPlan& plan) {
    const std::string attention = chosen_attention(cfg, plan);
    if (plan.device != "cpu") check_cuda_attention_shape(attention, plan.model.n_embd, plan.model.n_head);
    return attention;
}

// --gemm-epilogues: fp32, bf16 or fp16 and no --recompute (model/epilogue_block_ops.h), checked
// once the precision is known (-p auto resolves with the device), before anything is built
void check_gemm_epilogues(const TrainConfig& cfg, const RunPlan& plan) {
    if (!cfg.gemm_epilogues) return;
    const Precision p = plan.precision.precision;
    if (p == Precision::FP8 || p == Precision::TF32) {
        fail(
            "--gemm-epilogues is for fp32, bf16 and fp16; -p %s has GEMMs of its own (%s). Give --gemm-epilogues "
            "false (a resumed run takes it from its checkpoint's run)",
            precision_name(p),
            p == Precision::FP8 ? "fp8 fuses its casts into the GELU" : "tf32's run on TF32 tensor cores");
    }
    if (cfg.recompute != 0) {
        fail(
            "--gemm-epilogues with --recompute %d: the GELU output computed again from the kept fch would differ "
            "from the epilogue's by a rounding; give --recompute 0 or --gemm-epilogues false (a resumed run takes "
            "both from its checkpoint's run)",
            cfg.recompute);
    }
}

// --flash-backward wide: the flash attention's backward, in 16 bits (the FP8 backward with its cast
// fused in, -p fp8 --fused-kernels true, runs the default kernels' epilogue)
void check_flash_backward(const TrainConfig& cfg, const RunPlan& plan) {
    if (cfg.flash_backward != "wide") return;
    if (cfg.attention != "flash")
        fail(
            "--flash-backward wide chooses the flash attention's backward kernels; give --attention flash too "
            "(here --attention %s), or --flash-backward default",
            cfg.attention.c_str());
    if (plan.precision.precision == Precision::FP8 && cfg.fused_kernels)
        fail(
            "--flash-backward wide with -p fp8 --fused-kernels true: the FP8 backward casts dqkv in the default "
            "kernels' epilogue, which the wide kernels have no registers for; give --fused-kernels false or "
            "--flash-backward default");
}

// Shards the run would read under two names (a symbolic or a hard link), warned of; not
// refusals. One -i or -j matches twice (round 30: those tokens were read twice per epoch, unsaid).
// Both -i and -j match one (a train glob wide enough to take the val shards too, or -j the train
// glob): the val loss is then measured on tokens the run trains on, a thing one may want.
void warn_of_shards_read_twice(const RunData& data) {
    if (!g_is_root) return;
    // a file by its device and inode: one file under two names (a symbolic or a hard link) is one
    using FileId = std::pair<uint64_t, uint64_t>;
    auto identity = [](const std::string& path) {
        struct stat st {};   // (0, 0) where it cannot be read: the loaders say why
        return ::stat(path.c_str(), &st) == 0 ? FileId((uint64_t)st.st_dev, (uint64_t)st.st_ino) : FileId(0, 0);
    };
    // the files a glob matches by identity; a warning for one matched twice
    auto files_of = [&](const std::string& glob, const char* flag) {
        std::map<FileId, std::string> files;
        if (glob.empty()) return files;
        try {
            for (const std::string& f : expand_glob(glob)) {
                const FileId id = identity(f);
                if (id.second == 0) continue;
                if (const auto [at, added] = files.emplace(id, f); !added) {
                    std::fprintf(stderr,
                                 "warning: %s %s matches %s and %s, one file under two names (a link): its tokens "
                                 "are read twice %s\n",
                                 flag, glob.c_str(), at->second.c_str(), f.c_str(),
                                 std::string(flag) == "-i" ? "per epoch" : "in each evaluation");
                }
            }
        } catch (const Error&) {   // a glob that matches nothing: the loaders say so, naming the flag
        }
        return files;
    };
    const std::map<FileId, std::string> train = files_of(data.train, "-i"), val = files_of(data.val, "-j");
    std::vector<std::string> both;
    for (const auto& [id, f] : val)
        if (train.count(id)) both.push_back(f);
    if (both.empty()) return;
    std::fprintf(stderr,
                 "warning: -i %s and -j %s both match %s%s: the val loss is measured on tokens the run trains on\n",
                 data.train.c_str(), data.val.c_str(), both[0].c_str(),
                 both.size() > 1 ? format(" and %zu more", both.size() - 1).c_str() : "");
}

// The kernel set of this rank: one GPU per rank (local rank mod the GPUs of the node), or the CPU.
// Under MPI the GPUs exchange gradients and weights over NCCL (*nccl), bootstrapped through comm.
std::unique_ptr<Backend> make_kernel_set(const TrainConfig& cfg, const RunPlan& plan, Comm& comm,
                                         std::unique_ptr<Comm>* nccl) {
    const DType act_dtype = activation_dtype(plan.precision.precision);
    if (plan.device == "cpu") {
        if (cfg.profile) print0("notice: --profile times the CUDA kernel set's ops; the CPU kernel set has none\n");
        return make_cpu_backend(act_dtype, plan.precision.precision == Precision::TF32);
    }
    CudaOptions options;
    options.flash_attention = plan.attention == "flash";
    options.cudnn_attention = plan.attention == "cudnn";
    options.flash_backward_wide = plan.attention == "flash" && cfg.flash_backward == "wide";
    options.fused_kernels = cfg.fused_kernels;
    options.gemm_autotune = cfg.gemm_autotune;
    options.log_gemm_autotune = g_is_root;
    options.profile = cfg.profile;
    options.tf32_gemms = plan.precision.precision == Precision::TF32;
    options.gemm_epilogues = cfg.gemm_epilogues;
    std::string reason;
    std::unique_ptr<Backend> backend =
        make_cuda_backend(act_dtype, comm.local_rank() % cuda_device_count(&reason), options);
    if (launched_by_mpi()) *nccl = make_nccl_comm(comm);
    return backend;
}

// Batches of B sequences the validation set holds (at least 1): more would wrap round and count
// its first tokens twice.
int64_t val_batches_in_one_pass(const DataLoader& loader) {
    return std::max<int64_t>(1, loader.samples_per_epoch() / loader.B());
}
// The batches an evaluation of at most `batches` (-m) covers: at most one pass over the set, in
// equal shares of the `world` ranks (a multiple of it, at least one batch each), so that no rank
// reads past the pass (before: ceil(batches / W) each, past the set and round again on 3 ranks).
int64_t val_batches_evaluated(const DataLoader& loader, int batches, int world) {
    const int64_t capped = std::min<int64_t>(batches, val_batches_in_one_pass(loader));
    return std::max<int64_t>(world, capped / world * world);
}

// Mean loss over `batches` micro-batches from the start of the validation set, split over the
// ranks (rank r takes batches r, r + W, ...), so every world size evaluates the same tokens when
// W divides `batches`.
struct ValLoss {
    float loss = 0;
    int64_t tokens = 0;   // the tokens it is the mean over
};
ValLoss evaluate(GPT& model, DataLoader& loader, int batches, int B, int T, Comm& comm) {
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    loader.reset();
    const int per_rank = (int)(val_batches_evaluated(loader, batches, comm.world_size()) / comm.world_size());
    double sum = 0;
    for (int i = 0; i < per_rank; i++) {
        loader.next_batch(inputs.data(), targets.data());
        sum += model.forward(inputs.data(), targets.data(), B, T);
    }
    return {(float)(comm.all_reduce_sum(sum) / (per_rank * comm.world_size())),
            (int64_t)per_rank * comm.world_size() * B * T};
}

// Rank 0: a sample of cfg.sample_tokens tokens after --sample-prompt (or <|endoftext|>) from the
// model's current weights, through a KV cache (model/generate.h), as printable text (ids without a
// tokenizer).
std::string sample_text(Generator& generator, const std::optional<Tokenizer>& tokenizer, const TrainConfig& cfg,
                        Rng& rng) {
    std::vector<int> prompt;
    if (!cfg.sample_prompt.empty()) prompt = tokenizer->encode(cfg.sample_prompt);   // run() checked it can
    if (prompt.empty()) prompt.push_back(tokenizer ? tokenizer->eot_token() : 0);
    SamplingParams params;
    params.temperature = cfg.temperature;
    params.top_k = cfg.top_k;
    params.top_p = cfg.top_p;
    const std::vector<int> generated = generator.generate(prompt, cfg.sample_tokens, params, rng);
    if (!tokenizer) {
        std::string ids;
        for (int id : generated)
            ids += std::to_string(id) + " ";
        return ids;
    }
    return cfg.sample_prompt + printable_text(tokenizer->decode(generated));
}

// The dense BF16 peak of this rank's GPU, for MFU; 0 on the CPU or a GPU whose peak is not known.
double peak_flops(const RunPlan& plan, const Comm& comm) {
    if (plan.device != "cuda") return 0.0;
    std::string reason;
    return gpu_peak_flops(cuda_device_name(comm.local_rank() % cuda_device_count(&reason)));
}

std::string human_rate(double tokens_per_second) {
    if (tokens_per_second >= 1e6) return format("%.2fM", tokens_per_second / 1e6);
    if (tokens_per_second >= 1e3) return format("%.1fk", tokens_per_second / 1e3);
    return format("%.0f", tokens_per_second);
}

// ---- checkpoints ----------------------------------------------------------------------------------

// Everything a checkpoint holds besides the model's tensors.
struct ResumeState {
    int64_t step = 0;
    TrainCounters counters;
    std::string sample_rng_state;   // the sampler's random numbers where the checkpoint left them ("": fresh)
};

bool all_finite(const std::vector<float>& x) {
    uint32_t bad = 0;   // an exponent of all ones: inf or NaN (an integer test, so the loop vectorises)
    for (float v : x) {
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        bad |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
    }
    return bad == 0;
}

// A checkpoint saved outside a streak of skipped steps and outside a series of loss spikes
// (train/divergence.h): pruning keeps the newest of these, whatever --keep-checkpoints says.
bool healthy_checkpoint(const CheckpointManifest& m) {
    if (m.extra_json.empty()) return true;
    const TrainCounters c = counters_from_json(m.extra_json);
    return DivergenceState{c.skip_streak, c.loss_level, c.spike_since}.healthy();
}

// Writes <dir>/step_XXXXXXXX/ (all ranks take part): BF16 HF weights split over the ranks, this
// rank's share of the FP32 optimizer state, the tokenizer's files (checkpoint/hf_tokenizer.h),
// then rank 0 hashes everything into the manifest, renames the directory into place and prunes
// the old ones (keeping the newest healthy one). A crash at any point leaves only a *.tmp
// directory behind. Never a checkpoint of a state that holds a non-finite value: then nothing is
// written and it returns false (the same on every rank).
bool save_checkpoint(const std::string& dir, int64_t step, GPT& model, Comm& comm, const TrainConfig& cfg,
                     const RunPlan& plan, const DataLoader& loader, const TrainCounters& counters,
                     const std::optional<LossScaler>& scaler, const std::optional<Tokenizer>& tokenizer, int keep,
                     const std::string& sample_rng_state, std::string* manifest_hash_written) {
    const std::vector<float> weights = model.weights();   // collective under ZeRO-1
    const GPT::StateShare share = model.checkpoint_share();
    float non_finite = all_finite(share.master) && all_finite(share.m) && all_finite(share.v) &&
                               (comm.rank() != 0 || all_finite(weights))
                           ? 0.0f
                           : 1.0f;
    comm.all_reduce_max(&non_finite, 1);   // any rank's share
    if (non_finite != 0) return false;
    if (comm.rank() == 0) {
        make_dirs(dir);
        begin_checkpoint(dir, step);
    }
    comm.barrier();
    const std::string tmp = checkpoint_tmp_dir(dir, step);
    write_weight_shards(tmp, plan.model, weights.data(), comm.rank(), comm.world_size());
    write_state_shard(tmp, plan.model, comm.rank(), share.begin, share.master.size(), share.master.data(),
                      share.m.data(), share.v.data());
    comm.barrier();
    if (comm.rank() == 0) {
        // the tokenizer beside the weights: the step directory is a complete Hugging Face model
        if (tokenizer) write_hf_tokenizer(tmp, *tokenizer, plan.model.max_seq_len);
        CheckpointManifest manifest;
        manifest.step = step;
        manifest.model = plan.model;
        manifest.world_size = comm.world_size();
        manifest.train_config_json = config_json(cfg, plan);
        manifest.data_position = loader.position();
        manifest.train_shards = loader.num_shards();
        manifest.train_tokens = loader.num_tokens();
        manifest.loss_scaler_json = scaler ? loss_scaler_to_json(*scaler) : "";
        manifest.fp8_json = model.fp8_state_json();
        manifest.extra_json = trainer_state_to_json(counters, flags_json(cfg), path_dirs_json(cfg));
        manifest.rng_state = sample_rng_state;
        // its identity in the log, from the text written (not read back by path: the directory
        // may be moved by then)
        *manifest_hash_written =
            format("%016llx", (unsigned long long)finalize_checkpoint(tmp, checkpoint_dir(dir, step), manifest));
        prune_checkpoints(dir, keep, healthy_checkpoint);
    }
    comm.barrier();
    return true;
}

// Restores everything save_checkpoint wrote, into a model of any world size. Rank 0 verified
// every file of the checkpoint when it chose it (train/resume.h); every other rank verifies the
// state files it reads (its ranks' storage may not be rank 0's), and every rank checks the shape.
// `restart` (--auto-resume, one command line): training data other than the checkpoint's is another
// run's, refused; a --resume says so and goes on.
ResumeState load_checkpoint(const ResumeChoice& from, GPT& model, const RunPlan& plan, DataLoader* loader,
                            std::optional<LossScaler>& scaler, const Comm& comm, bool restart) {
    const CheckpointManifest& manifest = from.manifest;
    check_model_config(manifest, plan.model, from.dir);
    const size_t begin = model.state_begin(), end = begin + model.state_size();
    if (comm.rank() != 0) {
        verify_checkpoint_files(from.dir, manifest, state_files_for_range(from.dir, plan.model, begin, end));
    }
    model.restore_optimizer_state(read_state_range(from.dir, plan.model, StateTensor::Master, begin, end),
                                  read_state_range(from.dir, plan.model, StateTensor::M, begin, end),
                                  read_state_range(from.dir, plan.model, StateTensor::V, begin, end));
    // -p fp8: the dY amax histories are in the saving run's gradient units, d(loss)/d(a token's
    // loss) = 1 / (a rank's tokens per step); another number of ranks, -b, -t or accumulation
    // changes them (1 → 2 ranks at one global batch doubles every gradient), and the histories follow
    const std::optional<int64_t> tokens_then = saved_rank_tokens_per_step(manifest.train_config_json);
    const int64_t tokens_now = plan.tokens_per_step / plan.world_size;   // B · T · grad_accum_steps
    model.restore_fp8_state(manifest.fp8_json.empty() ? "[]" : manifest.fp8_json,
                            tokens_then ? (double)*tokens_then / (double)tokens_now : 1.0);
    if (scaler && !manifest.loss_scaler_json.empty()) {
        loss_scaler_from_json(*scaler, manifest.loss_scaler_json);
        const float saved = scaler->scale();
        if (scaler->clamp_to_range()) {   // another --loss-scale-min now
            print0(
                "notice: the checkpoint's loss scale %g lies outside this run's range (--loss-scale-min %g to %g): it "
                "goes on from %g\n",
                saved, scaler->config().min_scale, scaler->config().max_scale, scaler->scale());
        }
    }
    if (loader) {   // at the checkpoint's place in the data, in this run's cut of it (another -t)
        const std::optional<SavedDataOrder> then = saved_data_order(manifest.train_config_json);
        const int64_t position =
            then ? loader->position_at_seq_len(manifest.data_position, then->seq_len) : manifest.data_position;
        loader->set_position(position);
        if (then) {
            const DataOrderNow now{plan.seq_len, loader->shuffled(), loader->seed(), loader->samples_per_epoch()};
            const std::string notice = data_order_change_notice(*then, now, manifest.data_position, position);
            if (!notice.empty()) print0("notice: %s\n", notice.c_str());
        }
        if (manifest.train_tokens >= 0 &&
            (manifest.train_shards != loader->num_shards() || manifest.train_tokens != loader->num_tokens())) {
            if (restart) {   // round 29: another job's checkpoint, sharing the directory, was trained on from
                fail(
                    "--auto-resume: %s is a checkpoint of another run: its run read %lld tokens in %d shard(s), this "
                    "command line's -i %s holds %lld in %d. --auto-resume restarts one command line: give this run "
                    "its own --checkpoint-dir (or -o), or --resume to continue that run on this data",
                    from.dir.c_str(), (long long)manifest.train_tokens, manifest.train_shards, loader->glob().c_str(),
                    (long long)loader->num_tokens(), loader->num_shards());
            }
            print0(
                "notice: the training data is not the checkpoint's: %s holds %lld tokens in %d shard(s), the "
                "checkpoint's run read %lld in %d; its data position (sample %lld) now falls elsewhere in the text\n",
                loader->glob().c_str(), (long long)loader->num_tokens(), loader->num_shards(),
                (long long)manifest.train_tokens, manifest.train_shards, (long long)loader->position());
        }
    }
    return ResumeState{manifest.step, counters_from_json(manifest.extra_json), manifest.rng_state};
}

// Collective: every rank read the same `what` (`mine`: its fingerprint of it), or the ranks where
// it differs fail naming it: the ranks see different `kind` under one path (node-local storage, one
// node's copy stale or another), and would train on, or save, a mix of them.
void require_what_rank0_read(Comm& comm, uint64_t mine, const std::string& what, const char* kind) {
    uint64_t rank0 = mine;
    comm.broadcast(&rank0, sizeof rank0, 0);
    if (mine != rank0)
        fail("%s differs from the one rank 0 read: the ranks see different %s under one path", what.c_str(), kind);
}

// --resume / --auto-resume: the checkpoint the run continues (train/resume.h), the same on every
// rank: rank 0 reads and verifies it (and, with --resume-from-intact, steps back past damaged
// ones), the others take its choice. nullopt: start fresh (--auto-resume finding none).
std::optional<ResumeChoice> choose_resume(const TrainConfig& cfg, Comm& comm) {
    if (!cfg.resume && !cfg.auto_resume) return std::nullopt;
    const std::string root = checkpoint_dir_of(cfg);
    std::optional<ResumeChoice> choice;
    std::string chosen;   // "": none
    // a live run's checkpoints are being written and pruned: "in use", before they are read
    if (comm.rank() == 0) DirLock::fail_if_held(root);
    if (comm.rank() == 0 && (choice = choose_resume_checkpoint(root, cfg.resume_from_intact))) {
        chosen = choice->dir;
        for (const auto& [dir, problem] : choice->damaged) {
            std::fprintf(stderr,
                         "warning: %s is damaged (%s); resuming from %s instead (--resume-from-intact); it "
                         "will be kept as %s\n",
                         dir.c_str(), problem.c_str(), chosen.c_str(), damaged_checkpoint_name(dir).c_str());
        }
    }
    // the choice, and the damaged checkpoints passed over (which every rank's log check leaves out)
    std::string passed_over;   // their directories, each ended by '\0'
    if (choice) {
        for (const auto& damaged : choice->damaged)
            passed_over += damaged.first + '\0';
    }
    for (std::string* text : {&chosen, &passed_over}) {
        uint64_t length = text->size();
        comm.broadcast(&length, sizeof length, 0);
        text->resize(length);
        comm.broadcast(text->data(), length, 0);
    }
    if (comm.rank() != 0 && !chosen.empty()) {
        choice = ResumeChoice{chosen, read_manifest(chosen), {}};
        for (size_t at = 0, end; (end = passed_over.find('\0', at)) != std::string::npos; at = end + 1)
            choice->damaged.emplace_back(passed_over.substr(at, end - at), "damaged (rank 0 verified it)");
    }
    // every rank reads the manifest rank 0 verified: the same bytes, or the ranks see different
    // checkpoints under one name (node-local storage)
    if (!chosen.empty())
        require_what_rank0_read(comm, manifest_checksum(chosen), chosen + "/manifest.json", "checkpoints");
    if (!choice && cfg.resume) {
        fail(
            "--resume: no checkpoint in %s (no step_* directory). Start the run without --resume, or give the "
            "--checkpoint-dir (or -o) of the run to continue; --auto-resume resumes when there is one and starts "
            "fresh otherwise",
            root.c_str());
    }
    return choice;
}

// --auto-resume restarts one command line: a checkpoint whose run this command line (its flags
// `command_line_flags`, before the checkpoint's were restored) gives another model, data, -o,
// optimizer, precision or seed is another job's, sharing the directory, and is refused (round 28:
// it was taken over: trained on from, its checkpoints pruned, or its result reported as this run's
// and its config.json rewritten with values that never applied). The training data's token and
// shard counts are compared when the checkpoint is loaded (load_checkpoint).
void fail_if_another_runs_checkpoint(const ResumeChoice& from, const std::string& command_line_flags) {
    const std::string saved = run_flags_from_json(from.manifest.extra_json);
    if (saved.empty()) return;   // an older checkpoint, which records no flags: the run is this command line's
    // the flags of the model, batch, optimizer, precision and seed, given or left at their defaults
    // (round 29: a job on the defaults took over a run that gave others), ...
    std::string differences = run_identity_differences(command_line_flags, saved);
    // ... its data and output directory, and --init-from (which a resume does not apply: where the
    // run's weights began), given or left at their defaults
    std::vector<std::string> notices;
    const std::string root = from.dir.substr(0, from.dir.find_last_of('/'));
    const std::string paths =
        path_identity_differences(command_line_flags, saved, run_path_dirs_from_json(from.manifest.extra_json),
                                  root.empty() ? "." : root, &notices);
    if (!paths.empty()) differences += (differences.empty() ? "" : ", ") + paths;
    if (!differences.empty()) {
        fail(
            "--auto-resume: %s is a checkpoint of another run (this command line gives %s; the checkpoint's "
            "run, above, had others). --auto-resume restarts one command line: give this run its own "
            "--checkpoint-dir (or -o), or --resume to continue that run with these changes",
            from.dir.c_str(), differences.c_str());
    }
    for (const std::string& n : notices)
        print0("notice: --auto-resume: %s\n", n.c_str());
}

// Every rank's command-line flags are rank 0's (a resume then restores the same checkpoint's on
// every rank): ranks started with different flags would hang in a collective (another -x) or
// disagree silently (another -b).
void check_ranks_agree(const TrainConfig& cfg, Comm& comm) {
    if (comm.world_size() == 1) return;
    const std::string mine = flags_json(cfg);
    std::string rank0 = mine;
    uint64_t length = rank0.size();
    comm.broadcast(&length, sizeof length, 0);
    rank0.resize(length);
    comm.broadcast(rank0.data(), length, 0);
    const std::string difference = first_flag_difference(mine, rank0);
    float disagree = difference.empty() ? 0.0f : 1.0f;
    if (disagree)
        std::fprintf(stderr, "rank %d: its flags differ from rank 0's: %s\n", comm.rank(), difference.c_str());
    comm.all_reduce_max(&disagree, 1);
    if (disagree)
        fail(
            "the ranks were started with different flags (each rank that differs says how): start every "
            "rank with the same command line");
}

// ---- one training step ----------------------------------------------------------------------------

// What one optimizer step did; the same on every rank.
struct StepResult {
    double loss = 0;   // mean over the step's tokens and ranks
    double norm = 0;   // of the unscaled mean gradient, before clipping
    float lr = 0;
    float loss_scale = 1;   // fp16: the scale the step's loss was multiplied by
    bool finite = true;     // false: loss or norm not finite, the update skipped
};

// The gradients of one optimizer step: forward and backward over grad_accum_steps micro-batches
// (the gradients accumulate), summed over ranks, and their norm. loss_scale: fp16's (1 otherwise);
// the gradients come out multiplied by it, the loss and norm do not.
StepResult compute_gradients(GPT& model, DataLoader& loader, const TrainConfig& cfg, const RunPlan& plan, int step,
                             float loss_scale, Comm& comm) {
    const int B = cfg.batch_size, T = plan.seq_len;
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);   // (B, T) each
    const float dloss = 1.0f / ((float)B * T * plan.grad_accum_steps);    // d(mean loss)/d(each token's loss)
    StepResult r;
    r.loss_scale = loss_scale;
    model.zero_grad();
    for (int micro = 0; micro < plan.grad_accum_steps; micro++) {
        loader.next_batch(inputs.data(), targets.data());
        r.loss += model.forward(inputs.data(), targets.data(), B, T, dloss * loss_scale) / plan.grad_accum_steps;
        model.backward();
    }
    model.reduce_gradients();                                 // sum over ranks
    r.loss = comm.all_reduce_sum(r.loss) / plan.world_size;   // the mean over ranks
    r.norm = model.gradient_norm() / loss_scale;              // of the unscaled mean gradient
    r.lr = plan.schedule.at(step);
    r.finite = std::isfinite(r.loss) && std::isfinite(r.norm);   // the same on every rank
    return r;
}

// The update of a step whose gradients are r's, or its skip: fp16's loss scale follows the
// overflows (loss_scaler.h: halve on one, double after 2000 clean steps); a non-finite loss or
// norm applies no update at all (and the step's FP8 amaxes are dropped); else AdamW, with the
// gradients clipped to --grad-clip and the loss scale taken out.
void update_or_skip(GPT& model, const StepResult& r, const TrainConfig& cfg, const RunPlan& plan,
                    std::optional<LossScaler>& scaler, TrainCounters& counters) {
    if (scaler) {
        const LossScaleUpdate u = scaler->update(!r.finite);
        if (u.collapse_warning) {
            print0(
                "warning: the fp16 loss scale sits at its floor %g, and the gradients overflowed there %d times: "
                "they keep overflowing; consider bf16\n",
                scaler->scale(), scaler->floor_streak());
        }
    }
    if (!r.finite) {
        model.discard_step();
        counters.skipped++;
        return;
    }
    // torch.nn.utils.clip_grad_norm_: scale by clip/(norm + 1e-6) when that is below 1
    float clip_scale = 1.0f;
    if (cfg.grad_clip > 0) clip_scale = std::min(1.0f, (float)(cfg.grad_clip / (r.norm + 1e-6)));
    model.update(r.lr, plan.adamw, clip_scale / r.loss_scale, (int)++counters.updates);
}

// One optimizer step: its gradients, then its update (or skip).
StepResult train_step(GPT& model, DataLoader& loader, const TrainConfig& cfg, const RunPlan& plan, int step,
                      std::optional<LossScaler>& scaler, TrainCounters& counters, Comm& comm) {
    const StepResult r = compute_gradients(model, loader, cfg, plan, step, scaler ? scaler->scale() : 1.0f, comm);
    update_or_skip(model, r, cfg, plan, scaler, counters);
    return r;
}

// -x 0 from a checkpoint (evaluating it): the val loss as the checkpoint's run measured it
// (train/config.h, evaluation_flags_of).
void evaluate_as_trained(const ModelDir& model, TrainConfig& cfg) {
    const bool evaluates =
        (cfg.val_every > 0 && cfg.given.count("val-data") && !cfg.val_data.empty()) || !cfg.hellaswag.empty();
    if (!model.checkpoint || !evaluates) return;
    const std::string taken = evaluation_flags_of(read_manifest(model.dir).train_config_json, cfg);
    if (!taken.empty())
        print0("evaluating as the checkpoint's run did: %s (from %s)\n", taken.c_str(), model.dir.c_str());
}

// --resume: cfg becomes the checkpoint's run, with the flags given on this command line on top;
// the differences are printed (train/resume.h).
std::vector<FlagOverride> restore_run_flags(int argc, char** argv, const std::string& checkpoint, TrainConfig& cfg) {
    bool recorded = false;
    std::vector<std::string> notices;
    std::vector<FlagOverride> overrides = resume_run_flags(argc, argv, checkpoint, cfg, &recorded, &notices);
    for (const std::string& n : notices)
        print0("notice: %s\n", n.c_str());
    if (!recorded) {
        print0("notice: %s records no flags (an older checkpoint); the run is this command line's\n",
               checkpoint.c_str());
        return overrides;
    }
    print0("resuming the run of %s%s\n", checkpoint.c_str(), overrides.empty() ? "" : "; from this command line:");
    for (const FlagOverride& o : overrides) {
        // the initial loss scale is a fresh start's: a resumed run goes on from the checkpoint's scale
        const bool start_only = o.flag == "loss-scale-init";
        print0("  --%s %s (the checkpoint's run: %s%s)\n", o.flag.c_str(), o.now.c_str(), o.saved.c_str(),
               start_only ? "; it sets a fresh start's scale, and this run goes on from the checkpoint's" : "");
    }
    return overrides;
}

// A resumed run cuts the log in its --output-dir back to the checkpoint's step
// (truncate_log_for_resume). That is right for the log of the checkpoint's own run, whose records
// past the checkpoint the resumed run writes again; where it would destroy records it does not
// redo, the resume is refused, or with --overwrite-output the log is replaced (returns true).
// Every run writes its identity and its absolute --output-dir into its log (start and resume
// records; checkpoint records name absolute paths), so the verdict does not depend on how paths
// are spelled or from where the trainer runs:
//   * another run's log: the log carries identities, not the checkpoint's (a log or checkpoint
//     from before identities: the log records no save of this checkpoint, or of its step where
//     the log is a copy under another -o);
//   * this run's own log (in the directory it was written in) that does not record saving this
//     checkpoint and goes on past it (steps after it, or a summary at or after it): the checkpoint
//     is a branch's, and resuming would splice the branch onto this log;
//   * a continuation that was saved: in a log of this run, checkpoints past this one that still
//     exist (a branch from an earlier checkpoint would cut them from the only log that holds them;
//     a damaged newest checkpoint that --resume-from-intact passes over does not count). "Still
//     exist" looks for each save where the log recorded it and where a move of the run's directory
//     took it (later_save_state); it counts a save gone from another directory than the one
//     resumed from (checkpoints moved where the log cannot see), not one gone from that directory
//     (deleted, to roll the run back), nor one that another log of the run records too, in a
//     directory the log names (cutting a copy of the run's directory loses nothing: the original
//     keeps it; a symlink left at the old place leads back to this log, and a branch given the old
//     name logged no such save).
// "This run's own log" is the log in the directory it names, or one moved here with its run
// directory (by hand, or the trainer's move-aside of `out`): the directory its last start or
// resume record names no longer holds a log of this run.
std::string parent_directory(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool log_moved_here(const LoggedRun& logged, const std::string& here) {
    const std::string& was = logged.last_output_dir;
    if (was.empty() || logged.run_ids.empty() || resolved_path(was) == here) return false;
    if (!file_exists(was + "/log.jsonl")) return true;
    try {
        const LoggedRun there = read_logged_run(was + "/log.jsonl");
        return std::none_of(there.run_ids.begin(), there.run_ids.end(),
                            [&](const std::string& id) { return logged.run_ids.count(id) > 0; });
    } catch (const Error&) {
        return true;   // no log of this run there any more, only an unreadable file
    }
}

// path under directory `from` → the same place under `to` (else path as it is)
std::string rebased(const std::string& path, const std::string& from, const std::string& to) {
    if (path.compare(0, from.size(), from) != 0 || (path.size() > from.size() && path[from.size()] != '/')) return path;
    return to + path.substr(from.size());
}

// Where `path` is now if the run directory `was` (absolute) became `now`: the trailing components
// the two share are the directory's own, what precedes them moved (/w/prj/out → /w/prj2/out moves
// /w/prj to /w/prj2, and with it /w/prj/ckpt/step_30 to /w/prj2/ckpt/step_30).
std::string moved_path(const std::string& path, std::string was, std::string now) {
    for (;;) {
        const size_t a = was.find_last_of('/'), b = now.find_last_of('/');
        if (a == std::string::npos || b == std::string::npos || a == 0 || b == 0) break;
        if (was.compare(a, std::string::npos, now, b, std::string::npos) != 0) break;
        was.resize(a);
        now.resize(b);
    }
    return rebased(path, was, now);
}

// A later save the log records, at `recorded` (with its manifest's hash, "" in older logs): where
// it is now, at its recorded path or where a move of any of the run's directories took it (a
// directory there holding that checkpoint); found nowhere, whether it was in the directory the
// run resumes from (deleted there: a rollback) or elsewhere (moved where the log cannot see).
struct LaterSave {
    std::string found;           // where it is now; "" if nowhere
    bool deleted_here = false;   // gone from the directory the run resumes from
};
LaterSave later_save_state(const std::string& recorded, const std::string& hash, const LoggedRun& logged,
                           const std::string& this_dir, const std::string& from_parent) {
    std::vector<std::string> places{recorded};
    for (const std::string& dir : logged.output_dirs)
        places.push_back(moved_path(recorded, dir, this_dir));
    LaterSave s;
    for (const std::string& place : places) {
        if (!file_exists(place + "/manifest.json")) continue;
        if (hash.empty() || manifest_hash(place) == hash) return LaterSave{place, false};
    }
    for (const std::string& place : places)
        if (parent_directory(resolved_path(place)) == from_parent) s.deleted_here = true;
    return s;
}

bool log_must_be_replaced(const TrainConfig& cfg, const ResumeChoice& from,
                          const std::vector<FlagOverride>& overrides) {
    const std::string log = cfg.output_dir + "/log.jsonl";
    if (cfg.output_dir.empty()) return false;
    if (!file_exists(log)) {   // deleted, moved away, left out of a backup: the records before are elsewhere
        print0("notice: %s does not exist: the resumed run's records start a new one, at step %lld\n", log.c_str(),
               (long long)from.manifest.step);
        return false;
    }
    const LoggedRun logged = read_logged_run(log);   // fails naming a line that is no record
    if (logged.record_count == 0) {   // an empty file (a disk that filled up): no run's records to mix or lose
        print0("notice: %s holds no record (an empty file): the resumed run's records start it\n", log.c_str());
        return false;
    }
    const std::string id = counters_from_json(from.manifest.extra_json, from.dir + "/manifest.json").run_id;
    const int64_t step = from.manifest.step;
    const auto recorded =
        std::find_if(overrides.begin(), overrides.end(), [](const FlagOverride& o) { return o.flag == "output-dir"; });
    const std::string this_dir = resolved_path(cfg.output_dir);
    const bool named_here = !logged.output_dirs.empty()
                                ? logged.output_dirs.count(this_dir) > 0
                                : recorded == overrides.end() || resolved_path(recorded->saved) == this_dir;
    const bool own_dir = named_here || (!logged.output_dirs.empty() && log_moved_here(logged, this_dir));
    // the log knows this checkpoint: it records saving it or resuming from it (at this path, or
    // moved: by its manifest's hash); a copy of the log under another -o may name the original's
    const std::string hash = manifest_hash(from.dir);
    const bool saved_here =
        own_dir ? logged.knows(from.dir, hash) : logged.knows(from.dir, hash) || logged.saved_step(step, hash);
    const bool ids_known = !id.empty() && !logged.run_ids.empty();
    const bool elsewhere =   // the checkpoint's run logged under another -o (for the message)
        recorded != overrides.end() && resolved_path(recorded->saved) != resolved_path(cfg.output_dir);
    if (ids_known ? logged.run_ids.count(id) == 0 : !saved_here && !own_dir) {   // another run's log
        if (cfg.overwrite_output) return true;
        fail(
            "--output-dir %s holds the log.jsonl of another run (it records no save of %s%s): resuming would cut "
            "it back to step %lld and mix the two runs' records. Give another --output-dir%s, or --overwrite-output "
            "to replace it",
            cfg.output_dir.c_str(), from.dir.c_str(),
            elsewhere ? format("; the checkpoint's run wrote to %s", recorded->saved.c_str()).c_str() : "",
            (long long)step,
            elsewhere ? format(" (-o %s logs where that run did)", recorded->saved.c_str()).c_str() : "");
    }
    if (!ids_known && !own_dir) return false;   // an older copy of the run's directory: as before identities
    // a later save of this run that still exists: a branch from an earlier checkpoint would cut it
    const std::string from_parent = parent_directory(resolved_path(from.dir));
    // the other logs of this run where its directories were: a save one of them records too is
    // kept there when this log is cut (this is a copy); a symlink left at an old place leads back
    // here, and a log another run of it wrote there (a branch given the old name) lacks the save
    std::vector<LoggedRun> others;
    for (const std::string& dir : logged.output_dirs) {
        const std::string other = dir + "/log.jsonl";
        if (!file_exists(other) || resolved_path(other) == resolved_path(log)) continue;
        try {
            others.push_back(read_logged_run(other));
        } catch (const Error&) {   // unreadable: keeps nothing
        }
    }
    std::optional<std::pair<int64_t, std::string>> later;
    bool later_gone = false;
    for (const auto& save : logged.checkpoints) {
        const int64_t at = save.first;
        const std::string& recorded = save.second;
        if (at <= step) continue;
        const std::string hash = logged.hash_of(recorded);
        const LaterSave now = later_save_state(recorded, hash, logged, this_dir, from_parent);
        if (now.found.empty() && now.deleted_here) continue;   // deleted to roll the run back
        if (std::any_of(others.begin(), others.end(), [&](const LoggedRun& o) { return o.records(recorded, hash); }))
            continue;   // kept in another log of the run
        const std::string path = now.found.empty() ? recorded : now.found;
        const bool damaged = std::any_of(from.damaged.begin(), from.damaged.end(),
                                         [&](const auto& d) { return resolved_path(d.first) == resolved_path(path); });
        if (!damaged && resolved_path(path) != resolved_path(from.dir) && (!later || at > later->first)) {
            later = std::pair{at, path};
            later_gone = now.found.empty();
        }
    }
    if (later) {
        if (cfg.overwrite_output) return true;
        fail(
            "--output-dir %s: its log.jsonl records a later save of this run, %s (step %lld), which resuming from %s "
            "(step %lld) would cut from it. To branch a run from a checkpoint, give the branch a new --output-dir; to "
            "continue the run, resume its newest checkpoint%s; --overwrite-output replaces the log",
            cfg.output_dir.c_str(), later->second.c_str(), (long long)later->first, from.dir.c_str(), (long long)step,
            later_gone ? format("; to roll it back (its later checkpoints deleted), resume it from the checkpoints "
                                "in %s, where it saved them",
                                parent_directory(later->second).c_str())
                             .c_str()
                       : "");
    }
    // a copy of a checkpoint this log saved, the original still where the log recorded it: the
    // copy's continuation is another history, which the original's log must not take (round 21:
    // it went into that log, and the original could not be resumed afterwards)
    // (the original looked for where the log recorded it and where a move of the run took it: a
    // copy taken after a move was let in, round 22)
    if (own_dir && !hash.empty()) {
        for (const auto& [path, saved_hash] : logged.saves) {
            if (saved_hash != hash) continue;
            const std::string original = later_save_state(path, hash, logged, this_dir, from_parent).found;
            if (!original.empty() && resolved_path(original) != resolved_path(from.dir)) {
                fail(
                    "%s is a copy of %s, which the log.jsonl in --output-dir %s saved and which is still there: "
                    "resuming the copy would write its continuation into that run's log. Give the copy its own "
                    "--output-dir, or resume the original",
                    from.dir.c_str(), original.c_str(), cfg.output_dir.c_str());
            }
        }
    }
    // this run's log, which never saved or resumed this checkpoint: only a crash between its save
    // and the log's record of it leaves that (the log then ends at its step, unfinished); a log
    // that goes on past it holds a branch's history, a log that ends before it misses the steps a
    // continuation logged elsewhere
    if (ids_known && !saved_here && !(logged.last_step == step && logged.summary_step < step)) {
        if (cfg.overwrite_output) return true;
        const bool past = logged.last_step > step || logged.summary_step >= step;
        fail(
            "--output-dir %s holds this run's log.jsonl, which records neither saving nor resuming %s and %s: "
            "resuming it here would %s. Give it its own --output-dir, or --overwrite-output to replace the log",
            cfg.output_dir.c_str(), from.dir.c_str(),
            past ? format("goes on past its step %lld (the checkpoint of a branch?)", (long long)step).c_str()
                 : format("ends at step %lld, before its step %lld (a continuation logged elsewhere?)",
                          (long long)logged.last_step, (long long)step)
                       .c_str(),
            past ? "splice it onto this run's history" : "leave a gap in this run's history");
    }
    return false;
}

// The command line, for the lock files that name a directory's holder.
std::string command_line(int argc, char** argv) {
    std::string text;
    for (int i = 0; i < argc; i++)
        text += (i ? " " : "") + std::string(argv[i]);
    return text;
}

// ---- the run: set up, the step loop, logging, the summary --------------------------------------

// Everything a run holds once it is set up, in the order it is built (and destroyed in reverse:
// the model before its kernel set).
struct Run {
    std::string program;   // argv[0]: how this trainer was started, for the summary's next: commands
    TrainConfig cfg;       // the run's flags (a resumed run's: the checkpoint's, with this command line's on top)
    RunPlan plan;          // what they resolve to
    RunData data;          // the shards it reads
    RunDirs dirs;          // where it writes
    std::optional<ResumeChoice> resume_from;   // the checkpoint it continues, if any
    bool replace_log = false;                  // a resume with --overwrite-output over another run's log
    // a resumed run's best val loss before this process, from its log (the summary's "best" covers
    // the whole run: round 30), where the val set is the checkpoint's run's
    std::optional<std::pair<double, int64_t>> best_val_before;
    std::optional<ModelDir> start_model;   // the weights it starts from, if not fresh
    std::optional<Tokenizer> tokenizer;
    std::string tokenizer_how;                 // which tokenizer, and why (printed)
    std::vector<HellaSwagExample> hellaswag;   // tokenised, checked against T
    std::unique_ptr<Comm> nccl;                // between GPUs, under MPI
    std::unique_ptr<Backend> backend;          // the kernel set
    std::shared_ptr<OpTraceFile> trace;        // rank 0, --trace-ops: the ops' lines, written once dirs are held
    std::unique_ptr<GPT> model;
    int model_B = 1, model_T = 1;       // the (B, T) its activations are sized for
    std::optional<LossScaler> scaler;   // fp16
    std::unique_ptr<DataLoader> train_loader, val_loader;
    ResumeState start;                      // step 0, or the checkpoint's step and counters
    HeldRunDirs held;                       // rank 0: the locked output and checkpoint directories
    std::optional<JsonlLog> log;            // rank 0: log.jsonl
    std::unique_ptr<Generator> generator;   // rank 0: samples, made at the first one
    Rng sample_rng{0};                      // the samples' random numbers (train() seeds or restores them)
    Comm* model_comm = nullptr;             // NCCL where there is one, else the ranks' Comm

    void write_log(const LogRecord& r) {
        if (log) log->write(r);
    }
};

// --auto-resume found no checkpoint: the run starts fresh. It replaces the log.jsonl and config.json
// of a start that saved none: the same command line's, killed early; not another run's (round 29:
// replaced; round 30: one that differed in its paths or --init-from, or whose config.json is gone
// or unreadable, was replaced too). A log of a run that saved or resumed from a checkpoint, or
// finished, was refused before (check_run_dirs).
void start_fresh_after_auto_resume(const TrainConfig& cfg, const RunPlan& plan, const RunDirs& dirs) {
    const std::string config = dirs.output + "/config.json", log = dirs.output + "/log.jsonl";
    const bool earlier = !dirs.output.empty() && !cfg.overwrite_output && (file_exists(log) || file_exists(config));
    if (earlier) {
        // what tells a start of this command line (round 31: another program's log.jsonl, with no
        // config.json or one of other names, was replaced): a log whose records are train_gpt's (a
        // start record naming its run), beside a config.json of train_gpt's whose values are this
        // command line's; no config.json where the start was killed before writing it (its log
        // holds no step then)
        const LoggedRun before = read_logged_run(log);   // fails naming a line that is no record
        std::string why;
        if (before.record_count > 0 && before.run_ids.empty()) {
            why = "its log.jsonl holds no record of a train_gpt run's start";
        } else if (file_exists(config)) {
            const std::optional<std::string> differences =
                config_identity_differences(read_json_file_text(config, size_t(16) << 20, "a config.json"), cfg, plan);
            why = !differences        ? "its config.json is unreadable or not a train_gpt run's"
                  : !file_exists(log) ? "a config.json without the log.jsonl a start writes before it"
                                      : *differences;
        } else if (before.last_step >= 0) {
            why = "its config.json is gone, so whose run it is cannot be told";
        }
        if (!why.empty()) {
            fail(
                "--auto-resume found no checkpoint, and %s holds the log.jsonl and config.json of another run (%s): "
                "it replaces only those of a start of this command line. Give this run another --output-dir, or add "
                "--overwrite-output to replace them",
                dirs.output.c_str(), why.c_str());
        }
    }
    print0("notice: --auto-resume: no checkpoint in %s; starting a fresh run%s\n", plan.checkpoint_dir.c_str(),
           earlier ? format(" (it replaces the log.jsonl and config.json in %s of a start that wrote no checkpoint)",
                            dirs.output.c_str())
                         .c_str()
                   : "");
}

// The configuration: the flags, and what they resolve to on this machine; every check before
// anything is built or written. --resume / --auto-resume: the run of the newest checkpoint, with
// the flags given now on top.
void resolve_configuration(Run& run, int argc, char** argv, Comm& comm) {
    TrainConfig& cfg = run.cfg;
    validate_start(cfg);
    check_ranks_agree(cfg, comm);   // before any other collective, and before anything is read or written
    run.resume_from = choose_resume(cfg, comm);
    const std::optional<ResumeChoice>& resume_from = run.resume_from;
    if (resume_from && !cfg.init_from.empty()) {   // --auto-resume (--resume with it is refused above)
        print0("notice: --auto-resume resumes %s; --init-from %s applies to a fresh start only\n",
               resume_from->dir.c_str(), cfg.init_from.c_str());
    }
    if (resume_from) {
        const std::string command_line_flags = flags_json(cfg);   // before the checkpoint's run's are restored
        const std::vector<FlagOverride> overrides = restore_run_flags(argc, argv, resume_from->dir, cfg);
        if (cfg.auto_resume) fail_if_another_runs_checkpoint(*resume_from, command_line_flags);
        // the checkpoint's run logged to a directory that is gone (moved, with the checkpoints the
        // run resumes from?): said, since its log is made there again, not where the run went
        if (!cfg.given.count("output-dir") && !cfg.output_dir.empty() && !file_exists(cfg.output_dir))
            print0(
                "notice: --output-dir %s, the checkpoint's run's, no longer exists: the run logs there afresh (if the "
                "run's directory was moved, give its new place as -o)\n",
                cfg.output_dir.c_str());
        run.replace_log = log_must_be_replaced(cfg, *resume_from, overrides);
    }
    validate(cfg);
    if (resume_from && cfg.steps < resume_from->manifest.step) {
        fail(
            "%s: %s is at step %lld, past --steps %d: there is nothing to train. Give --steps above %lld to "
            "train on, or --init-from %s -x 0 to evaluate or sample it",
            cfg.auto_resume ? "--auto-resume" : "--resume", resume_from->dir.c_str(),
            (long long)resume_from->manifest.step, cfg.steps, (long long)resume_from->manifest.step,
            resume_from->dir.c_str());
    }
    if (cfg.threads > 0) set_cpu_threads(cfg.threads);
    // the model the run starts from, if not a fresh one: the checkpoint it resumes, or --init-from
    if (resume_from)
        run.start_model = find_model_dir(resume_from->dir);
    else if (!cfg.init_from.empty())
        run.start_model = find_model_dir(cfg.init_from);
    const std::optional<ModelDir>& start_model = run.start_model;
    if (start_model && !resume_from) {   // round 40: each rank read its own copy of --init-from, unchecked
        const GPTConfig& m = start_model->model;
        const std::string found =
            format("%s %d %d %d %d %d %d %016llx", start_model->dir.c_str(), m.n_layer, m.n_head, m.n_embd,
                   m.vocab_size, m.padded_vocab_size, m.max_seq_len,
                   start_model->checkpoint ? (unsigned long long)manifest_checksum(start_model->dir) : 0ull);
        require_what_rank0_read(comm, hash_bytes(found.data(), found.size()),
                                "--init-from " + cfg.init_from + ": the model found (" + start_model->dir + ")",
                                "models");
    }
    if (start_model && start_model->checkpoint && start_model->manifest_version < 2) {   // resumed or --init-from
        print0(
            "notice: %s/manifest.json is of version 1, written before manifests held their own checksum: its "
            "files are verified, its own values cannot be\n",
            start_model->dir.c_str());
    }
    if (start_model && !resume_from && cfg.steps == 0) evaluate_as_trained(*start_model, cfg);
    run.data = run_data(cfg);   // the shards it reads: none to train on with -x 0
    warn_of_shards_read_twice(run.data);
    // -i given without -j (or the reverse): the other is the bundled KJV set's default, which data
    // of the same tokenizer passes every check with (round 28: the val loss was KJV's, unsaid)
    if (!run.data.train.empty() && !run.data.val.empty() && !resume_from &&
        cfg.given.count("train-data") != cfg.given.count("val-data")) {
        const bool train_given = cfg.given.count("train-data") > 0;
        print0("notice: %s %s is given, %s is the default, %s: give %s for this data's%s\n", train_given ? "-i" : "-j",
               (train_given ? cfg.train_data : cfg.val_data).c_str(), train_given ? "-j" : "-i",
               (train_given ? cfg.val_data : cfg.train_data).c_str(), train_given ? "-j" : "-i",
               train_given ? " val shards (-j '' for none)" : " training shards");
    }
    // the tokenizer: --tokenizer, the model's, or the one beside the shards; checked against what
    // the shards that the run reads record (no training data with -x 0)
    // (-x 0 from a fresh model reads no training data, but its samples take the tokenizer beside it)
    std::vector<std::string> tokenizer_globs = {run.data.train, run.data.val};
    if (!start_model && run.data.train.empty() && !cfg.train_data.empty()) {
        try {
            expand_glob(cfg.train_data);
            tokenizer_globs[0] = cfg.train_data;
        } catch (const Error&) {
        }
    }
    const std::optional<Tokenizer> models_tokenizer =
        start_model ? read_model_dir_tokenizer(*start_model) : std::optional<Tokenizer>();
    run.tokenizer = choose_run_tokenizer(cfg.tokenizer, models_tokenizer, tokenizer_globs, &run.tokenizer_how);
    const std::optional<Tokenizer>& tokenizer = run.tokenizer;
    // a model without tokenizer files (transformers' save_pretrained writes none): its ids are taken to
    // be the run's tokenizer's, which only the vocabulary size checks (round 28: said nowhere)
    if (start_model && !models_tokenizer && tokenizer) {
        print0("notice: %s brings no tokenizer: its token ids are taken to be those of %s\n",
               start_model->description.c_str(), tokenizer->origin().c_str());
    }
    run.plan = resolve_run_plan(cfg, comm.world_size(), tokenizer ? tokenizer->vocab_size() : 0,
                                start_model ? &start_model->model : nullptr, start_model ? start_model->dir : "");
    RunPlan& plan = run.plan;
    plan.tokenizer = tokenizer ? tokenizer->origin() : "none";
    if (cfg.given.count("val-data") && !cfg.val_data.empty() && cfg.val_every == 0) {
        print0("notice: -j %s is given, but -v 0: the val loss is never evaluated\n", cfg.val_data.c_str());
    }
    if (cfg.auto_resume && cfg.checkpoint_every == 0 && cfg.steps > 0) {   // a requeue loop that never gains
        print0(
            "warning: --auto-resume without --checkpoint-every: a stop (exit 75) writes no checkpoint, so every "
            "restart trains from the start again; give -n N\n");
    }
    if (cfg.steps > 0 && plan.schedule.warmup_steps > cfg.steps) {
        print0("notice: --warmup-steps %d is longer than the run's %d steps: the learning rate never reaches --lr %g\n",
               plan.schedule.warmup_steps, cfg.steps, cfg.lr);
    }
    if (!cfg.sample_prompt.empty() && cfg.sample_tokens > 0 && (!tokenizer || !tokenizer->can_encode())) {
        fail("--sample-prompt needs a tokenizer that encodes text; the run's %s",
             tokenizer ? ("(" + tokenizer->origin() +
                          ") only decodes: give --tokenizer a tokenizer.bin with encoder.json and vocab.bpe beside it")
                             .c_str()
                       : "has none: give --tokenizer");
    }
    run.dirs = run_dirs(cfg, plan, resume_from.has_value());   // train/run_dirs.h
    check_run_dirs(run.dirs, cfg, resume_from.has_value());
    if (g_is_root && !cfg.trace_ops.empty()) check_trace_path(cfg.trace_ops, run.dirs);
    plan.device = choose_device(cfg.device);
    if (cfg.precision == "auto") plan.precision.precision = default_precision_for(plan.device);
    plan.attention = choose_attention(cfg, plan);
    check_gemm_epilogues(cfg, plan);
    check_flash_backward(cfg, plan);
    // HellaSwag's examples, tokenised once (eval/hellaswag.h), and checked against the window
    // before anything is built or trained (it evaluates at T)
    if (!cfg.hellaswag.empty()) {
        if (!tokenizer) fail("--hellaswag needs a tokenizer (the run has none)");
        run.hellaswag = load_hellaswag(cfg.hellaswag, *tokenizer, cfg.hellaswag_examples);
        check_hellaswag_fits(run.hellaswag, plan.seq_len, plan.model.max_seq_len);
    }
    // the tokenizer and HellaSwag's examples as tokenised: the same on every rank (each rank
    // evaluates its share of the examples, with what its node holds)
    require_what_rank0_read(comm, tokenizer ? tokenizer->fingerprint() : 0,
                            "the tokenizer " + (tokenizer ? tokenizer->origin() : std::string("(none)")), "tokenizers");
    if (!run.hellaswag.empty()) {
        std::vector<int> tokens;   // label, then each part's length and ids, example by example
        for (const HellaSwagExample& e : run.hellaswag) {
            tokens.push_back(e.label);
            for (const std::vector<int>* part :
                 {&e.context, &e.endings[0], &e.endings[1], &e.endings[2], &e.endings[3]}) {
                tokens.push_back((int)part->size());
                tokens.insert(tokens.end(), part->begin(), part->end());
            }
        }
        require_what_rank0_read(comm, hash_bytes(tokens.data(), tokens.size() * sizeof(int)),
                                format("--hellaswag %s (%zu examples)", cfg.hellaswag.c_str(), run.hellaswag.size()),
                                "files");
    }
    // what config.json and every checkpoint will hold can be written (UTF-8 text), before anything is
    config_json(cfg, plan);
    path_dirs_json(cfg);
    if (cfg.auto_resume && !resume_from) start_fresh_after_auto_resume(cfg, plan, run.dirs);
}

// The kernel set and the model (its weights initialised; a checkpoint's come later), and fp16's
// loss scaler.
void build_model(Run& run, Comm& comm) {
    const TrainConfig& cfg = run.cfg;
    RunPlan& plan = run.plan;
    const int B = cfg.batch_size, T = plan.seq_len;
    run.backend = make_kernel_set(cfg, plan, comm, &run.nccl);
    // decorators of the kernel set (backend_decorator.h): a run observed or a fault injected, with
    // no branch in the step
    if (cfg.inject_nonfinite_step != "-1") {
        run.backend = with_injected_nonfinite(std::move(run.backend), cfg, run.start.step);
    }
    if (!cfg.trace_ops.empty() && comm.rank() == 0) {
        run.trace = std::make_shared<OpTraceFile>();
        run.backend = traced_kernel_set(std::move(run.backend), run.trace);
    }
    run.model_comm = run.nccl ? run.nccl.get() : &comm;   // device buffers go over NCCL; host scalars stay on `comm`
    if (plan.precision.precision == Precision::FP8 && cfg.fp8_gemms == "auto") {   // fp8_autotune.h
        const std::optional<std::string> resumed_dir =
            run.resume_from ? std::optional<std::string>(run.resume_from->dir) : std::nullopt;
        const Fp8AutoChoice choice = choose_fp8_gemms_auto(*run.backend, plan.model, B, T, resumed_dir, comm);
        plan.precision.fp8.gemms = choice.gemms;   // config.json and checkpoints record the choice
        print0("%s\n", choice.how.c_str());
    }
    // FP8 training's B·T, checked here too by its first forward: refused now, before anything is written
    if (plan.precision.precision == Precision::FP8 && plan.precision.fp8.gemms != 0 && !run.data.train.empty()) {
        check_fp8_training_shape(B, T, fp8_ops_of(*run.backend).fp8_gemm_multiple(), run.backend->name());
    }
    // activations for (B, T) where the run trains or evaluates; sampling alone has buffers of its own
    const bool forwards = !run.data.train.empty() || !run.data.val.empty() || !cfg.hellaswag.empty();
    run.model_B = forwards ? B : 1;
    run.model_T = forwards ? T : 1;
    // an allocation that fails names what asked for it: the model, its source, its sizes
    try {
        run.model =
            std::make_unique<GPT>(plan.model, *run.backend, run.model_B, run.model_T, plan.precision, run.model_comm,
                                  cfg.zero, cfg.recompute, cfg.lm_head_chunks, cfg.gemm_epilogues);
    } catch (const Error& e) {
        fail("building the model (%s; %d layers, %d wide, %zu parameters; activations for B=%d, T=%d: %.2f GiB): %s",
             run.start_model ? run.start_model->description.c_str() : "a fresh one", plan.model.n_layer,
             plan.model.n_embd, (size_t)param_tensor_offsets(plan.model)[kNumParamTensors], run.model_B, run.model_T,
             GPT::activation_bytes_for(plan.model, run.model_B, run.model_T, plan.precision, cfg.recompute,
                                       cfg.lm_head_chunks) /
                 1073741824.0,
             e.what());
    }
    run.model->init_weights(cfg.seed);
    plan.num_parameters = run.model->num_parameters();
    // fp16: dynamic loss scaling keeps small gradients above fp16's smallest subnormal
    if (plan.precision.precision == Precision::FP16 && cfg.loss_scaling) {
        LossScalerConfig lsc;
        lsc.init_scale = cfg.loss_scale_init;
        lsc.growth_interval = cfg.loss_scale_growth_interval;
        lsc.min_scale = cfg.loss_scale_min;
        run.scaler.emplace(lsc);
    }
}

// The data: every shard's header checked, and every token against the vocabulary (each rank
// scans its share); none to train on with -x 0. Then where to start: fresh, from a checkpoint's
// weights, or resuming a run.
void open_data_and_start(Run& run, Comm& comm) {
    const TrainConfig& cfg = run.cfg;
    const RunPlan& plan = run.plan;
    const int B = cfg.batch_size, T = plan.seq_len, vocab_size = plan.model.vocab_size;
    if (!run.data.train.empty()) {
        run.train_loader = std::make_unique<DataLoader>(run.data.train, B, T, comm.rank(), plan.world_size, cfg.shuffle,
                                                        cfg.seed, vocab_size);
    }
    if (!run.data.val.empty()) {
        run.val_loader =
            std::make_unique<DataLoader>(run.data.val, B, T, comm.rank(), plan.world_size, false, cfg.seed, vocab_size);
    }
    // the same data on every rank, as far as its counts tell (round 40: a node's own copy under one -i)
    for (const auto& [loader, flag, glob] : {std::tuple{run.train_loader.get(), "-i", cfg.train_data},
                                             std::tuple{run.val_loader.get(), "-j", cfg.val_data}}) {
        const std::string found =
            loader ? format("%lld tokens in %d shard(s)", (long long)loader->num_tokens(), loader->num_shards())
                   : "none";
        require_what_rank0_read(comm, hash_bytes(found.data(), found.size()),
                                format("%s %s: the data found (%s)", flag, glob.c_str(), found.c_str()), "data");
    }
    if (run.resume_from) {
        run.start = load_checkpoint(*run.resume_from, *run.model, plan, run.train_loader.get(), run.scaler, comm,
                                    cfg.auto_resume);
    } else if (run.start_model) {   // fine-tuning, or sampling / evaluating with -x 0: the weights, not the optimizer
        const std::vector<float> weights = read_model_weights(*run.start_model);
        require_what_rank0_read(comm, hash_bytes(weights.data(), weights.size() * sizeof(float)),
                                "--init-from " + cfg.init_from + ": the model read from " + run.start_model->dir,
                                "models");
        run.model->set_weights(weights);
    }
    // the run's identity: the checkpoint's, or new (a fresh start, or a checkpoint from before it)
    if (run.start.counters.run_id.empty()) run.start.counters.run_id = new_run_id();
    if (run.val_loader) {
        const int64_t pass = val_batches_in_one_pass(*run.val_loader);
        const int64_t evaluated = val_batches_evaluated(*run.val_loader, cfg.val_batches, plan.world_size);
        if (cfg.val_batches > pass) {
            print0(
                "notice: -m %d: the validation set holds %lld batches of %dx%d; each evaluation covers %lld%s\n",
                cfg.val_batches, (long long)pass, B, T, (long long)evaluated,
                evaluated == pass ? " (it once)" : format(" (equal shares of the %d ranks)", plan.world_size).c_str());
        } else if (evaluated != cfg.val_batches) {
            print0("notice: -m %d: each evaluation covers %lld batches of %dx%d, equal shares of the %d ranks\n",
                   cfg.val_batches, (long long)evaluated, B, T, plan.world_size);
        }
    }
    if (cfg.inject_nonfinite_step != "-1") {   // a testing flag that would do nothing says so
        bool injects = false;
        for (int64_t step = run.start.step; step < cfg.steps && !injects; step++)
            injects = cfg.injects_nonfinite_at((int)step);
        if (!injects) {
            const std::string trains = cfg.steps > run.start.step ? format("steps %lld to %d (0-based)",
                                                                           (long long)run.start.step, cfg.steps - 1)
                                                                  : std::string("no step");
            print0("notice: --inject-nonfinite-step %s injects nothing: this run trains %s\n",
                   cfg.inject_nonfinite_step.c_str(), trains.c_str());
        }
    }
    comm.barrier();   // every rank's checks have passed: from here on, files are written
}

// The evaluations due at `step` (before its update): val loss every -v steps and at the end,
// HellaSwag every --eval-every steps and at the end; their results go into the summary.
bool val_due(const Run& run, int step) {
    return run.val_loader && (step % run.cfg.val_every == 0 || step == run.cfg.steps);
}
bool hellaswag_due(const Run& run, int step) {
    return !run.hellaswag.empty() &&
           ((run.cfg.eval_every > 0 && step % run.cfg.eval_every == 0) || step == run.cfg.steps);
}

// The records a resumed run writes again at its first step, `step`: its evaluations when due, and
// its sample (every --sample-every steps, and at the end)
std::set<std::string> written_again_at(const Run& run, int step) {
    std::set<std::string> again;
    if (val_due(run, step)) again.insert("val");
    if (hellaswag_due(run, step)) again.insert("hellaswag");
    const TrainConfig& cfg = run.cfg;
    if (cfg.sample_tokens > 0 &&
        (step == cfg.steps || (cfg.sample_every > 0 && step > 0 && step % cfg.sample_every == 0)))
        again.insert("sample");
    return again;
}

// The outputs (rank 0): the directories locked, the config table, config.json, the JSONL log
// (continued on resume); then what the run starts from, its data and its memory.
void open_outputs(Run& run, int argc, char** argv) {
    const TrainConfig& cfg = run.cfg;
    const std::optional<ResumeChoice>& resume_from = run.resume_from;
    if (g_is_root) {
        run.held = hold_run_dirs(run.dirs, cfg, resume_from.has_value(), command_line(argc, argv));
        // the checkpoint verified before the directories were locked is still there: another command
        // did not move it meanwhile (round 32: a default run moved out, with a resume's out/mine,
        // which then trained on in a new, empty out/mine)
        if (resume_from && !file_exists(resume_from->dir + "/manifest.json")) {
            fail(
                "the checkpoint %s was moved or removed while this run started (before it held its directories): "
                "nothing was trained or written. Find where it went (another command moved its directory?) and "
                "resume from there",
                resume_from->dir.c_str());
        }
        if (run.trace) run.trace->open(cfg.trace_ops);   // checked with the directories, now held
        for (const std::string& w : run.held.warnings)
            std::fprintf(stderr, "warning: %s\n", w.c_str());
        if (!run.held.moved_to.empty()) {
            const bool resumable = latest_checkpoint(run.held.moved_to + "/checkpoints").has_value();
            print0("notice: %s held a previous run; it is now %s, whole%s\n", run.dirs.output.c_str(),
                   run.held.moved_to.c_str(),
                   resumable ? format(" (to continue it: --resume -o %s)", run.held.moved_to.c_str()).c_str() : "");
        }
        if (resume_from) {
            for (const auto& damaged : resume_from->damaged) {
                print0("kept the damaged checkpoint as %s\n", set_aside_damaged_checkpoint(damaged.first).c_str());
            }
        }
        if (run.dirs.output.empty() && cfg.steps > 0) {
            print0("notice: -o '': this run writes no log.jsonl or config.json\n");
        }
        if (!run.dirs.output.empty()) {
            const std::string log_path = run.dirs.output + "/log.jsonl";
            if (run.replace_log) {
                print0(
                    "notice: --overwrite-output: the log.jsonl in %s is replaced (resuming would have cut it "
                    "back and mixed two histories)\n",
                    run.dirs.output.c_str());
            } else if (resume_from) {
                // no step twice
                truncate_log_for_resume(log_path, run.start.step, written_again_at(run, (int)run.start.step));
            }
            run.log.emplace(log_path, /*append=*/resume_from.has_value() && !run.replace_log);
            if (!resume_from) {   // the run's identity, first: a resume can tell this log from another's
                run.write_log(LogRecord("start")
                                  .num("step", 0)
                                  .str("run_id", run.start.counters.run_id)
                                  .str("output_dir", resolved_path(run.dirs.output))
                                  .boolean("auto_resume", cfg.auto_resume));
            }
            save_config_json(run.dirs.output + "/config.json", cfg, run.plan);
        }
        if (cfg.steps > 0) {
            print_config_table(cfg, run.plan);
        } else {   // nothing trains: what is evaluated and sampled (config.json has every row)
            const GPTConfig& m = run.plan.model;
            print0("model: %d layers, %d wide, %d heads, vocab %d, %d positions, %zu parameters (%s, on the %s)\n",
                   m.n_layer, m.n_embd, m.n_head, m.vocab_size, m.max_seq_len, run.plan.num_parameters,
                   precision_name(run.plan.precision.precision), run.plan.device.c_str());
        }
        for (const std::string& unused : unused_flag_notices(cfg, run.plan))
            print0("notice: %s\n", unused.c_str());
    }
    if (resume_from) {
        print0("resuming from %s (step %lld)\n", resume_from->dir.c_str(), (long long)run.start.step);
        const std::string change =
            schedule_change_notice(run.plan.schedule, resume_from->manifest.train_config_json, run.start.step);
        if (!change.empty()) print0("notice: %s\n", change.c_str());
        const std::string batch = batch_change_notice(cfg, run.plan, resume_from->manifest.train_config_json);
        if (!batch.empty()) print0("notice: %s\n", batch.c_str());
        const std::string val = val_set_change_notice(cfg, run.plan, resume_from->manifest.train_config_json);
        if (!val.empty()) print0("notice: %s\n", val.c_str());
        if (val.empty() && run.log) {   // cut back to the checkpoint's step: the run's history before it
            const LoggedRun before = read_logged_run(run.log->path());
            if (before.best_val_loss) run.best_val_before = std::make_pair(*before.best_val_loss, before.best_val_step);
        }
        run.write_log(LogRecord("resume")
                          .num("step", run.start.step)
                          .str("checkpoint", resolved_path(resume_from->dir))
                          .str("manifest", manifest_hash(resume_from->dir))
                          .str("run_id", run.start.counters.run_id)
                          .str("output_dir", resolved_path(cfg.output_dir))
                          .boolean("auto_resume", cfg.auto_resume));
    } else if (run.start_model) {
        print0("initialised from the weights of %s\n", run.start_model->description.c_str());
    }
    if (run.train_loader) {
        print0("train: %lld tokens in %d shard(s) | ", (long long)run.train_loader->num_tokens(),
               run.train_loader->num_shards());
    }
    if (run.val_loader) print0("val: %lld tokens | ", (long long)run.val_loader->num_tokens());
    if (!run.hellaswag.empty()) print0("hellaswag: %zu examples | ", run.hellaswag.size());
    print0("%d rank(s), %s\n", run.plan.world_size, run.model_comm->name().c_str());
    print0("%s\n", run.tokenizer_how.c_str());
    if (!run.tokenizer && cfg.sample_tokens > 0) {
        print0(
            "notice: the run has no tokenizer%s: samples are printed as token ids; give --tokenizer to decode them\n",
            run.start_model ? format(" (none in %s)", run.start_model->dir.c_str()).c_str() : "");
    }
    print0("memory: activations %.3f GiB for B=%d, T=%d (per rank)\n", run.model->activation_bytes() / 1073741824.0,
           run.model_B, run.model_T);
}

// Rank 0: a sample of -g tokens from the model's current weights, through a KV cache, printed and logged.
void sample(Run& run, Rng& rng, int step) {
    if (!g_is_root || run.cfg.sample_tokens == 0) return;
    if (!run.generator) run.generator = std::make_unique<Generator>(*run.model, *run.backend);
    const std::string text = sample_text(*run.generator, run.tokenizer, run.cfg, rng);
    std::printf("---- sample (%d tokens, step %d) ----\n%s\n---------------------------\n", run.cfg.sample_tokens, step,
                text.c_str());
    run.write_log(LogRecord("sample").num("step", step).str("text", text));
}

// The steps after `step` at which an evaluation is due (for the ETA): the multiples of -v (with a
// val set) and of --eval-every (with HellaSwag) in (step, steps], each once, and the last step.
// Counted, not walked: every step line asks (before: a loop over the steps left, 60 ms a line at
// -x 1e8).
int evaluations_after(const Run& run, int step) {
    const int64_t last = run.cfg.steps;
    const bool val = run.val_loader != nullptr, hellaswag = !run.hellaswag.empty();
    if (step >= last || (!val && !hellaswag)) return 0;
    const int64_t v = val ? run.cfg.val_every : 0, e = hellaswag ? run.cfg.eval_every : 0;
    auto multiples = [&](int64_t k) { return k > 0 ? last / k - step / k : 0; };   // of k in (step, last]
    int64_t n = multiples(v) + multiples(e) - (v > 0 && e > 0 ? multiples(std::lcm(v, e)) : 0);
    if (!((v > 0 && last % v == 0) || (e > 0 && last % e == 0))) n++;   // the last step, off the multiples
    return (int)n;
}

void evaluate_if_due(Run& run, int step, RunClock& clock, const TrainCounters& counters, RunSummary& summary,
                     Comm& comm) {
    const TrainConfig& cfg = run.cfg;
    const bool last = step == cfg.steps;
    if (!val_due(run, step) && !hellaswag_due(run, step)) return;
    const double started = clock.here();
    if (val_due(run, step)) {
        const ValLoss val =
            evaluate(*run.model, *run.val_loader, cfg.val_batches, cfg.batch_size, run.plan.seq_len, comm);
        const float val_loss = val.loss;
        print0("step %d/%d | val loss %.4f | %lld tokens (%d batches of %dx%d)\n", step, cfg.steps, val_loss,
               (long long)val.tokens, (int)(val.tokens / ((int64_t)cfg.batch_size * run.plan.seq_len)), cfg.batch_size,
               run.plan.seq_len);
        run.write_log(LogRecord("val")
                          .num("step", step)
                          .num("loss", val_loss)
                          .num("tokens", (double)counters.tokens)
                          .num("val_tokens", (double)val.tokens)
                          .num("elapsed_s", clock.elapsed())
                          .num("time", unix_time()));
        if (!summary.best_val_loss || val_loss < *summary.best_val_loss) {
            summary.best_val_loss = val_loss;
            summary.best_val_step = step;
        }
        if (last) summary.final_val_loss = val_loss;
    }
    if (hellaswag_due(run, step)) {
        const HellaSwagResult h = evaluate_hellaswag(*run.model, run.hellaswag, run.model_B, run.model_T, comm);
        print0(
            "step %d/%d | hellaswag acc_norm %.4f (%lld/%lld), acc %.4f%s\n", step, cfg.steps, h.acc_norm(),
            (long long)h.correct_norm, (long long)h.examples, h.acc(),
            h.truncated ? format(" | %lld example(s) cut to T = %d", (long long)h.truncated, run.model_T).c_str() : "");
        run.write_log(LogRecord("hellaswag")
                          .num("step", step)
                          .num("acc_norm", h.acc_norm())
                          .num("acc", h.acc())
                          .num("examples", (double)h.examples)
                          .num("truncated", (double)h.truncated)
                          .str("choices", h.choices)
                          .str("choices_acc", h.choices_acc));
        if (last) summary.hellaswag_acc_norm = h.acc_norm();
    }
    clock.evaluation_took(clock.here() - started);
}

// What a step's line and log record show besides the StepResult.
struct StepTiming {
    double ms = 0, tok_per_s = 0, mfu = 0;   // mfu 0: no known peak
};

// The step's line (every --log-every steps, the last, and every skipped one) and its log record,
// with FP8 telemetry every --fp8-telemetry-every steps.
void log_step(Run& run, int step, const StepResult& r, const StepTiming& t, const TrainCounters& counters,
              const RunClock& clock) {
    const TrainConfig& cfg = run.cfg;
    if (step % cfg.log_every == 0 || step == cfg.steps - 1 || !r.finite) {
        std::string extra = t.mfu > 0 ? format(" | MFU %.1f%%", 100 * t.mfu) : "";
        extra += format(" | %s elapsed", human_duration(counters.seconds).c_str());
        if (step + 1 < cfg.steps) {
            const double eta = clock.eta(cfg.steps - (step + 1), evaluations_after(run, step + 1));
            extra += format(", ETA %s", human_duration(eta).c_str());
        }
        if (run.scaler) extra += format(" | scale %g", r.loss_scale);
        if (!r.finite) extra += " | SKIPPED (non-finite)";
        print0("step %d/%d | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %s tok/s%s\n", step + 1, cfg.steps, r.loss,
               r.lr, r.norm, t.ms, human_rate(t.tok_per_s).c_str(), extra.c_str());
    }
    LogRecord record("step");
    record.num("step", step + 1)
        .num("loss", r.loss)
        .num("lr", r.lr)
        .num("grad_norm", r.norm)
        .num("ms", t.ms)
        .num("tok_per_s", t.tok_per_s)
        .num("skipped", r.finite ? 0 : 1)
        .num("tokens", (double)counters.tokens)
        .num("elapsed_s", counters.seconds)
        .num("time", unix_time());
    if (t.mfu > 0) record.num("mfu", t.mfu);
    if (run.scaler) record.num("loss_scale", r.loss_scale);
    run.write_log(record);
    if (run.model->fp8() && cfg.fp8_telemetry_every > 0 &&
        (step % cfg.fp8_telemetry_every == 0 || step == cfg.steps - 1)) {
        for (const Fp8TensorReport& f : run.model->fp8()->report()) {
            run.write_log(LogRecord("fp8")
                              .num("step", step + 1)
                              .str("tensor", f.name)
                              .num("amax", f.amax)
                              .num("scale", f.scale)
                              .num("saturated", f.saturated_frac)
                              .num("flushed", f.flushed_frac));
        }
    }
}

// After step `step`: a checkpoint every --checkpoint-every steps and at the end, and when a signal
// asks for one; then, after a signal, the exit code of the stop (nullopt: train on).
std::optional<int> checkpoint_or_stop(Run& run, int step, const TrainCounters& counters, RunSummary& summary,
                                      Comm& comm) {
    const TrainConfig& cfg = run.cfg;
    const RunPlan& plan = run.plan;
    const bool due = cfg.checkpoint_every > 0 && ((step + 1) % cfg.checkpoint_every == 0 || step + 1 == cfg.steps);
    StopRequest stop = stop_request_of_all(comm);   // train/signals.h
    bool saved = false;
    if (due || (stop == StopRequest::Checkpoint && cfg.checkpoint_every > 0)) {
        const std::string path = checkpoint_dir(plan.checkpoint_dir, step + 1);
        if (comm.rank() == 0) fail_if_checkpoint_dir_moved(run.held, run.dirs.checkpoints, step + 1);
        // the steps logged so far on disk before the checkpoint is: after a power loss a durable
        // checkpoint never has its steps missing from the log (a resume would see a gap)
        if (run.log) run.log->sync();
        std::string written;
        saved = save_checkpoint(plan.checkpoint_dir, step + 1, *run.model, comm, cfg, plan, *run.train_loader, counters,
                                run.scaler, run.tokenizer, cfg.keep_checkpoints, run.sample_rng.state(), &written);
        if (saved) {
            // one pruning passes over (healthy_checkpoint): said as it is saved
            const int64_t streak = counters.skip_streak, spikes_since = counters.spike_since;
            print0("checkpoint: %s%s\n", path.c_str(),
                   streak > 0
                       ? format(" (during a streak of %lld skipped step(s): not counted as healthy)", (long long)streak)
                             .c_str()
                   : spikes_since > 0
                       ? format(" (during a series of loss spikes since step %lld: not counted as healthy)",
                                (long long)spikes_since)
                             .c_str()
                       : "");
            summary.checkpoint = path;
            run.write_log(LogRecord("checkpoint")
                              .num("step", step + 1)
                              .str("path", resolved_path(path))
                              .str("manifest", written)
                              .str("run_id", counters.run_id));
            if (run.log) run.log->sync();   // the log, up to this checkpoint, on disk with it
        } else {
            print0(
                "warning: no checkpoint at step %d: the model's state holds a non-finite value; the newest "
                "checkpoint stays %s\n",
                step + 1, summary.checkpoint ? summary.checkpoint->c_str() : "(none)");
            run.write_log(LogRecord("checkpoint_skipped").num("step", step + 1).str("reason", "non-finite state"));
            summary.checkpoints_refused++;
        }
    }
    // a signal that came during this step's save stops here, with the checkpoint just written (not
    // after one more step and a second save, twice the time a preemption's grace period must hold)
    if (stop == StopRequest::None && due) stop = stop_request_of_all(comm);   // due: the same on every rank
    if (stop == StopRequest::None) return std::nullopt;
    std::string what = format("stopped by %s after step %d", stop_signal_name(), step + 1);
    if (stop == StopRequest::Checkpoint && saved) what += "; resume with --resume (or --auto-resume)";
    if (stop == StopRequest::Checkpoint && cfg.checkpoint_every == 0)
        what += "; no checkpoint: --checkpoint-every is 0";
    if (stop == StopRequest::Checkpoint && cfg.checkpoint_every > 0 && !saved) what += "; no checkpoint written";
    if (stop == StopRequest::Interrupt)
        what += saved ? "; resume with --resume (or --auto-resume)" : " (Ctrl-C: no checkpoint)";
    print0("%s\n", what.c_str());
    run.write_log(LogRecord("stop")
                      .num("step", step + 1)
                      .str("reason", what)
                      .str("checkpoint", saved ? checkpoint_dir(plan.checkpoint_dir, step + 1) : ""));
    if (run.log) run.log->sync();
    std::fflush(stdout);
    return stop == StopRequest::Checkpoint ? kStopExitCode : kInterruptExitCode;
}

// After the last step (its checkpoint written, or not due), once `phase` has run: the stop a signal
// asked for during it, as checkpoint_or_stop does after a step. Exit 75 (130 for SIGINT), so that
// the requeue of a preempted job resumes the last checkpoint and finishes the run; nullopt: none.
std::optional<int> stop_after_last_step(Run& run, const char* phase, const RunSummary& summary, Comm& comm) {
    const StopRequest stop = stop_request_of_all(comm);   // train/signals.h
    if (stop == StopRequest::None) return std::nullopt;
    const int steps = run.cfg.steps;
    const std::string last = checkpoint_dir(run.plan.checkpoint_dir, steps);
    const bool saved = summary.checkpoint && *summary.checkpoint == last;
    std::string what = format("stopped by %s during %s, after step %d (the last)", stop_signal_name(), phase, steps);
    what += saved ? format("; its checkpoint %s is written: --resume (or --auto-resume) finishes the run", last.c_str())
                  : std::string("; no checkpoint of it: --checkpoint-every is 0, or it was not written");
    print0("%s\n", what.c_str());
    run.write_log(LogRecord("stop").num("step", steps).str("reason", what).str("checkpoint", saved ? last : ""));
    if (run.log) run.log->sync();
    std::fflush(stdout);
    return stop == StopRequest::Checkpoint ? kStopExitCode : kInterruptExitCode;
}

// The closing summary: time, losses, where the checkpoint is, what to run next; printed and logged.
void finish(Run& run, RunSummary& summary, const TrainCounters& counters, const RunClock& clock,
            double this_process_tokens, double this_process_step_seconds, double peak, double step_flops) {
    const TrainConfig& cfg = run.cfg;
    summary.steps = cfg.steps;
    summary.tokens = counters.tokens;
    summary.seconds = clock.elapsed();   // the final evaluation and sample included
    summary.process_seconds = clock.here();
    summary.max_seq_len = run.plan.model.max_seq_len;
    summary.tokenizer_encodes = run.tokenizer && run.tokenizer->can_encode();
    if (!run.tokenizer) {
        summary.checkpoint_holds = "weights (the run has no tokenizer)";
    } else if (!hf_tokenizer_writable(*run.tokenizer)) {
        summary.checkpoint_holds =
            "weights, and the tokenizer as tokenizer.bin only (it has no merges list, as one read from a .tiktoken "
            "file: transformers' tokenizer files cannot be written)";
    }
    summary.sample_tokens = cfg.sample_tokens;
    if (this_process_step_seconds > 0) {
        summary.mean_tokens_per_second = this_process_tokens / this_process_step_seconds;
        if (peak > 0) summary.mfu = step_flops / run.plan.tokens_per_step * summary.mean_tokens_per_second / peak;
    }
    summary.log_path = run.log ? run.log->path() : "";
    summary.output_dir = cfg.output_dir;
    summary.checkpoint_dir = run.plan.checkpoint_dir;
    for (const std::string& line : summary_lines(summary))
        print0("%s\n", line.c_str());
    LogRecord end("summary");
    end.num("step", cfg.steps)
        .str("run_id", counters.run_id)
        .num("tokens", (double)counters.tokens)
        .num("elapsed_s", summary.seconds)
        .num("time", unix_time());
    if (summary.mean_tokens_per_second > 0) end.num("tok_per_s", summary.mean_tokens_per_second);
    if (summary.final_val_loss) end.num("val_loss", *summary.final_val_loss);
    if (summary.best_val_loss)
        end.num("best_val_loss", *summary.best_val_loss).num("best_val_step", summary.best_val_step);
    run.write_log(end);
    if (run.log) run.log->sync();
}

// The step loop, from the start step to --steps: the evaluations due, train_step, its line and
// record, the divergence verdict, checkpoints and signals; then the last sample and the summary.
// Returns the exit code.
int train(Run& run, Comm& comm) {
    const TrainConfig& cfg = run.cfg;
    const RunPlan& plan = run.plan;
    // the samples' random numbers: seeded, or where the checkpoint resumed from left them (so that a
    // resumed run samples what the uninterrupted one does), unless --sample-seed is given now
    Rng& sample_rng = run.sample_rng;
    sample_rng = Rng(cfg.samples_seed());
    if (!run.start.sample_rng_state.empty() && !cfg.given.count("sample-seed"))
        sample_rng.set_state(run.start.sample_rng_state);   // checked when the manifest was read
    // a stop that every rank decides together (divergence): said once, exit 1 on every rank
    auto stop_run = [&](const std::string& message, int step) {
        std::fflush(stdout);
        if (g_is_root) std::fprintf(stderr, "error: %s\n", message.c_str());
        run.write_log(LogRecord("stop").num("step", step).str("reason", message));
        return 1;
    };
    TrainCounters counters = run.start.counters;
    DivergenceMonitor divergence(
        {cfg.max_skipped_steps, cfg.loss_spike_factor, cfg.stop_on_loss_spike},
        {counters.skip_streak, counters.loss_level, counters.spike_since});   // train/divergence.h
    GradNormWatch norm_watch(cfg.grad_norm_spike_factor,                      // a warning only (train/divergence.h)
                             {counters.grad_norm_level, counters.grad_norm_seen, counters.grad_norm_in_spike});
    RunClock clock(counters.seconds);                               // the run's time, earlier processes included
    const double peak = peak_flops(plan, comm) * plan.world_size;   // all ranks' (0: no MFU)
    const double step_flops = flops_per_token(plan.model, plan.num_parameters, plan.seq_len) * plan.tokens_per_step;
    RunSummary summary;
    summary.program = run.program;
    summary.plot_script = path_beside_program(run.program, "scripts/plot_run.py", summary.plot_script);
    summary.ranks = plan.world_size;
    summary.first_step = (int)run.start.step;
    if (run.best_val_before) {
        summary.best_val_loss = run.best_val_before->first;
        summary.best_val_step = (int)run.best_val_before->second;
    }
    if (run.resume_from) summary.checkpoint = run.resume_from->dir;
    double this_process_tokens = 0, this_process_step_seconds = 0;
    // SIGTERM / SIGUSR1 / SIGINT: stop after a step, from the first step on. The evaluations at the
    // start come before any step: a signal ends them at once, as it ends the start-up (signals.h).
    std::optional<StopSignals> stop_signals;
    for (int step = (int)run.start.step; step <= cfg.steps; step++) {
        evaluate_if_due(run, step, clock, counters, summary, comm);
        if (step == cfg.steps) break;
        if (cfg.sample_every > 0 && step > 0 && step % cfg.sample_every == 0) sample(run, sample_rng, step);
        if (!stop_signals) stop_signals.emplace();

        const auto t0 = std::chrono::steady_clock::now();
        const StepResult r = train_step(*run.model, *run.train_loader, cfg, plan, step, run.scaler, counters, comm);
        const StepVerdict verdict = divergence.observe(step + 1, r.loss, r.norm, r.finite);
        counters.skip_streak = divergence.state().skip_streak;
        counters.loss_level = divergence.state().loss_level;
        counters.spike_since = divergence.state().spike_since;
        StepTiming timing;
        timing.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        timing.tok_per_s = plan.tokens_per_step / (timing.ms / 1000.0);
        timing.mfu = peak > 0 ? step_flops / (timing.ms / 1000.0) / peak : 0.0;
        counters.tokens += plan.tokens_per_step;
        counters.seconds = clock.elapsed();
        this_process_tokens += plan.tokens_per_step;
        this_process_step_seconds += timing.ms / 1000.0;
        clock.step_took(timing.ms / 1000.0);
        summary.final_loss = r.loss;
        log_step(run, step, r, timing, counters, clock);
        // divergence (train/divergence.h): the same verdict on every rank
        if (verdict.kind == StepVerdict::kSpike || (verdict.kind == StepVerdict::kStop && r.finite)) {
            run.write_log(LogRecord("loss_spike")
                              .num("step", step + 1)
                              .num("loss", r.loss)
                              .num("level", divergence.state().loss_level)
                              .num("factor", cfg.loss_spike_factor));
        }
        if (verdict.kind == StepVerdict::kStop) return stop_run(verdict.message, step + 1);
        const std::string norm_spike = norm_watch.observe(step + 1, r.norm, r.finite);
        counters.grad_norm_level = norm_watch.state().level;
        counters.grad_norm_seen = norm_watch.state().seen;
        counters.grad_norm_in_spike = norm_watch.state().in_spike;
        if (!norm_spike.empty()) {
            print0("warning: %s\n", norm_spike.c_str());
            run.write_log(LogRecord("grad_norm_spike")
                              .num("step", step + 1)
                              .num("grad_norm", r.norm)
                              .num("factor", cfg.grad_norm_spike_factor));
        }
        if (!verdict.message.empty())
            print0("%s%s\n", verdict.kind == StepVerdict::kSpike ? "warning: " : "", verdict.message.c_str());
        if (g_is_root && run.log) keep_output_dir_locked(run.held, run.dirs.output);   // train/run_dirs.h
        if (const std::optional<int> stopped = checkpoint_or_stop(run, step, counters, summary, comm)) return *stopped;
        flush_stdout_or_warn(run.log.has_value());
    }
    // a signal during the final evaluation or sample: that phase runs to its end, then the run stops
    // with the last step's checkpoint, so that a requeued --auto-resume does the rest
    if (stop_signals)
        if (const std::optional<int> stopped = stop_after_last_step(run, "the final evaluation", summary, comm))
            return *stopped;
    if (counters.skipped > 0)
        print0("%lld step(s) skipped for a non-finite loss or gradient norm\n", (long long)counters.skipped);
    sample(run, sample_rng, cfg.steps);
    if (stop_signals)
        if (const std::optional<int> stopped = stop_after_last_step(run, "the final sample", summary, comm))
            return *stopped;
    stop_signals.reset();   // from here on (the summary) a signal ends the process at once
    finish(run, summary, counters, clock, this_process_tokens, this_process_step_seconds, peak, step_flops);
    flush_stdout_or_warn(run.log.has_value() || !g_is_root);   // (only rank 0 prints)
    return 0;
}

// cfg: this command line's flags, parsed; comm: the ranks (one process, or MPI). Returns the
// exit code: 0, 1 (a collective stop: divergence), kStopExitCode / kInterruptExitCode (a
// signal). A failure of this rank alone throws (main ends the job).
int run(TrainConfig cfg, int argc, char** argv, Comm& comm, bool stdout_closed) {
    g_is_root = comm.rank() == 0;
    Run run;
    run.program = argv[0];
    run.cfg = std::move(cfg);
    resolve_configuration(run, argc, argv, comm);
    // a closed stdout: fatal where it is the run's only record, before the model is built
    if (g_is_root && stdout_closed) warn_that_stdout_is_closed(!run.dirs.output.empty());
    build_model(run, comm);
    open_data_and_start(run, comm);
    open_outputs(run, argc, argv);
    const int exit_code = train(run, comm);
    if (run.trace) run.trace->finish();   // a trace not written whole fails the run
    return exit_code;
}

}   // namespace

// One rank's failure ends the whole job (distributed/comm.h): this rank's message first, named
// with its rank, then abort_job() stops every rank wherever it is — never MPI_Finalize, which
// would wait for ranks that are waiting for this one.
int main(int argc, char** argv) {
    std::unique_ptr<Comm> comm;
    try {
        const bool stdout_closed = keep_standard_descriptors_open();   // before any file is opened
        TrainConfig cfg;
        if (std::optional<int> exit_code = parse_command_line(argc, argv, cfg)) {
            if (*exit_code == 0 && stdout_closed) {   // --help, into the /dev/null standing in for stdout
                std::fprintf(stderr, "error: cannot write to stdout: it is closed\n");
                return 1;
            }
            return *exit_code;
        }
        ignore_output_signals();       // a file-size limit or a closed stdout is no kill (train/signals.h)
        install_bus_error_handler();   // a shard truncated while mapped is named (data/mapped_files.h)
        comm = make_comm();            // MPI under mpirun / srun, else one process
        return run(std::move(cfg), argc, argv, *comm, stdout_closed);
    } catch (const std::exception& e) {   // train_gpt::Error (fail()) and anything else
        std::fflush(stdout);
        const bool ranks = comm && comm->world_size() > 1;
        const std::string what = printable(e.what());   // a message may quote a binary file's bytes
        if (ranks)
            std::fprintf(stderr, "rank %d: error: %s\n", comm->rank(), what.c_str());
        else
            std::fprintf(stderr, "error: %s\n", what.c_str());
        std::fflush(stderr);
        if (ranks) comm->abort_job(1);
        return 1;
    }
}
