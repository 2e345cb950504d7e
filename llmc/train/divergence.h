// divergence.h — watching the loss for a run that diverges.
//
// Two rules, judged after every optimizer step from the step's loss (the mean over the step's
// tokens and ranks, the same on every rank):
//   * Non-finite steps. A step whose loss or gradient norm is not finite applies no update (the
//     trainer skips it). `max_skipped_steps` of them in a row stop the run. The streak is part of
//     the trainer's state: it is saved in checkpoints and restored on resume, so a resumed run that
//     keeps diverging stops after the same number of skipped steps in a row as an uninterrupted one.
//   * Loss spikes. The running level of the loss is an exponential moving average of the finite
//     step losses, level ← 0.9 · level + 0.1 · loss (the first finite loss starts it). A finite
//     loss above `spike_factor` × level is a spike: it is reported (the first of a series, then the
//     step where the loss is back under the bound) and does not move the level, so a loss that
//     stays up keeps being judged against the level before it rose. With `stop_on_spike` the
//     first spike stops the run. The level is saved and restored with the streak.
// A checkpoint is "healthy" when it was saved outside a streak of skipped steps and outside a
// series of spikes (a loss that blew up and stays finite is no healthier than a NaN); pruning
// always keeps the newest healthy one (train_gpt.cu: save_checkpoint). The series is part of the
// saved state too, so a resumed run goes on judging it.
#pragma once

#include <cstdint>
#include <string>

namespace train_gpt {

struct DivergenceConfig {
    int max_skipped_steps = 20;   // --max-skipped-steps
    double spike_factor = 2.0;    // --loss-spike-factor; 0: no spike detection
    bool stop_on_spike = false;   // --stop-on-loss-spike
};

// The part of the trainer's state these rules keep (saved in checkpoints: train_state.h).
struct DivergenceState {
    int64_t skip_streak = 0;   // non-finite steps in a row, up to the last step
    double loss_level = 0;     // the running level of the loss; 0: no finite step yet
    int64_t spike_since = 0;   // the first step of the series of spikes the last step is in; 0: none
    bool healthy() const { return skip_streak == 0 && spike_since == 0; }
};

// What one step's loss means.
struct StepVerdict {
    enum Kind {
        kOk,
        kSkipped,      // non-finite: skipped, the run goes on
        kSpike,        // a finite loss above the bound: warn (message)
        kSpikeEnded,   // the loss is back under the bound after a spike series (message)
        kStop,         // stop the run (message): too many skipped steps, or a spike with stop_on_spike
    } kind = kOk;
    std::string message;
};

class DivergenceMonitor {
  public:
    DivergenceMonitor(const DivergenceConfig& config, const DivergenceState& state) : config_(config), state_(state) {}
    // `step`: the 1-based number of the step just taken; finite: its loss and gradient norm were.
    StepVerdict observe(int64_t step, double loss, double norm, bool finite);
    const DivergenceState& state() const { return state_; }
    double spike_bound() const { return config_.spike_factor * state_.loss_level; }

  private:
    DivergenceConfig config_;
    DivergenceState state_;
};

// Gradient-norm spikes, a warning only: the running level of the norm is an exponential moving
// average of the finite steps' norms (level ← 0.9 · level + 0.1 · norm), judged from the 10th
// finite step on (the first steps' norms fall fast). A norm above `factor` × level is a spike: the
// first of a series is reported (the loss often follows a few steps later) and does not move the
// level. The state is saved in checkpoints (the trainer's counters, checkpoint/train_state.h), so
// a resumed run warns at the steps a run that never stopped would.
struct GradNormState {
    double level = 0;        // the running level of the norm
    int64_t seen = 0;        // finite steps that moved the level
    bool in_spike = false;   // the last finite step was a spike
};

class GradNormWatch {
  public:
    explicit GradNormWatch(double factor, GradNormState state = {}) : factor_(factor), state_(state) {}
    // "" or the warning for this step's norm (`step`: 1-based)
    std::string observe(int64_t step, double norm, bool finite);
    const GradNormState& state() const { return state_; }

  private:
    double factor_;   // --grad-norm-spike-factor; 0: never
    GradNormState state_;
};

}   // namespace train_gpt
