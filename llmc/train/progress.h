// progress.h — what the step lines and the end of a run say about its progress: elapsed time,
// ETA, MFU, and the closing summary with what to run next.
//
// MFU (model FLOPs utilisation) = achieved model FLOP/s / the GPU's peak, llm.c's way: a token
// costs 6N + 6·L·C·T FLOPs to train (N parameters: forward and backward of every weight, plus the
// attention's QKᵀ and PV over the causal half of T×T), the peak is the dense BF16 tensor-core rate
// of the GPU (989 TFLOP/s on H100 and H200), in every precision. Without a known peak (the CPU,
// another GPU) there is no MFU.
#pragma once

#include "model/layout.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace train_gpt {

// Model FLOPs to train on one token: 6N + 6·L·C·T.
double flops_per_token(const GPTConfig& cfg, size_t num_parameters, int T);

// Dense BF16 peak FLOP/s of a GPU by its CUDA device name ("NVIDIA H100 80GB HBM3", "NVIDIA H200"),
// or 0 where it is not known (then no MFU is shown).
double gpu_peak_flops(const std::string& device_name);

// Seconds since the Unix epoch (the log's wall-clock "time").
double unix_time();

// "42s", "3m05s", "1h02m", "2d04h"
std::string human_duration(double seconds);

// The time of a run: this process's wall time on top of what the run's earlier processes (before
// a resume) took, and the ETA from what this process measured: its mean time per training step
// and per evaluation (val loss, HellaSwag), so that start-up and the step-0 evaluation do not
// count as training time, and a resumed run's ETA is its own.
class RunClock {
  public:
    // earlier_seconds: the run's time before this process
    explicit RunClock(double earlier_seconds);
    double elapsed() const;   // the whole run's, in seconds
    double here() const;      // this process's
    void step_took(double seconds) { step_seconds_ += seconds, steps_++; }
    void evaluation_took(double seconds) { eval_seconds_ += seconds, evals_++; }
    // the time left for `steps` more training steps and `evaluations` more evaluations; < 0: unknown
    // (no step measured yet)
    double eta(int steps, int evaluations) const;

  private:
    double earlier_;
    double start_;   // monotonic seconds at construction
    double step_seconds_ = 0, eval_seconds_ = 0;
    int steps_ = 0, evals_ = 0;
};

// The closing lines of a run.
struct RunSummary {
    std::string program = "./train_gpt";   // the trainer as it was started (argv[0]), for the next: commands
    std::string plot_script = "scripts/plot_run.py";   // beside the trainer (path_beside_program)
    int ranks = 1;                                     // the run's processes: next: runs under its launcher
    int steps = 0, first_step = 0;                     // the run's steps, and where this process started
    int64_t tokens = 0;                                // trained on, the whole run
    double seconds = 0;                                // the whole run, to the end of its last sample
    double process_seconds = 0;                        // this process's (after a resume: less than seconds)
    double mean_tokens_per_second = 0;                 // this process's, over its training steps
    double mfu = 0;                                    // this process's mean, 0: none
    int max_seq_len = 0;                               // the model's position table (the export's n_positions)
    // what a checkpoint's step directory holds besides the weights ("and tokenizer", ...)
    std::string checkpoint_holds = "weights and tokenizer";
    bool tokenizer_encodes = true;   // a prompt can be given to sample from a checkpoint
    int sample_tokens = 0;           // tokens per sample (-g); a run that trains nothing says so
    std::optional<double> final_loss, final_val_loss, best_val_loss, hellaswag_acc_norm;
    int best_val_step = 0;
    std::optional<std::string> checkpoint;              // the newest one written
    int checkpoints_refused = 0;                        // saves left out: the state held a non-finite value
    std::string log_path, output_dir, checkpoint_dir;   // log_path "": the run wrote no log
};
std::vector<std::string> summary_lines(const RunSummary& s);

}   // namespace train_gpt
