// divergence.cpp — see divergence.h.
#include "train/divergence.h"

#include "utils.h"

#include <cmath>

namespace train_gpt {

namespace {
constexpr double kLevelWeight = 0.1;   // the new loss's weight in the running level
}

StepVerdict DivergenceMonitor::observe(int64_t step, double loss, double norm, bool finite) {
    StepVerdict v;
    if (!finite) {
        state_.skip_streak++;
        if (state_.skip_streak >= config_.max_skipped_steps) {
            v.kind = StepVerdict::kStop;
            v.message = format(
                "%lld steps in a row had a non-finite loss or gradient norm (last: loss %g, norm %g, step "
                "%lld); stopping. Try a lower --lr, --precision bf16, or a larger --max-skipped-steps",
                (long long)state_.skip_streak, loss, norm, (long long)step);
        } else {
            v.kind = StepVerdict::kSkipped;
        }
        return v;
    }
    state_.skip_streak = 0;
    const bool judged = config_.spike_factor > 0 && state_.loss_level > 0;
    if (judged && loss > spike_bound()) {
        const std::string what = format(
            "loss spike at step %lld: loss %.4g is %.1fx its running level %.4g "
            "(the bound is --loss-spike-factor %g x the level)",
            (long long)step, loss, loss / state_.loss_level, state_.loss_level, config_.spike_factor);
        if (config_.stop_on_spike) {
            v.kind = StepVerdict::kStop;
            v.message = what + "; stopping (--stop-on-loss-spike)";
        } else if (state_.spike_since == 0) {
            v.kind = StepVerdict::kSpike;
            v.message = what;
        } else {
            v.kind = StepVerdict::kSpike;   // a series goes on: logged, not printed again
        }
        if (state_.spike_since == 0) state_.spike_since = step;
        return v;   // the level keeps its value from before the spike
    }
    if (state_.spike_since > 0) {
        v.kind = StepVerdict::kSpikeEnded;
        v.message = format("loss back under the spike bound at step %lld (%.4g; spikes since step %lld)",
                           (long long)step, loss, (long long)state_.spike_since);
        state_.spike_since = 0;
    }
    state_.loss_level = state_.loss_level > 0 ? (1 - kLevelWeight) * state_.loss_level + kLevelWeight * loss : loss;
    return v;
}

std::string GradNormWatch::observe(int64_t step, double norm, bool finite) {
    if (factor_ <= 0 || !finite) return "";
    GradNormState& s = state_;
    if (s.seen >= 10 && norm > factor_ * s.level) {
        const bool first = !s.in_spike;
        s.in_spike = true;
        if (!first) return "";
        return format(
            "step %lld: the gradient norm %.4g is %.1fx its running level %.4g (--grad-norm-spike-factor "
            "%g): a spike, which the loss often follows; lower the learning rate or --grad-clip if it does",
            (long long)step, norm, norm / s.level, s.level, factor_);
    }
    s.in_spike = false;
    s.level = s.seen == 0 ? norm : 0.9 * s.level + 0.1 * norm;
    s.seen++;
    return "";
}

}   // namespace train_gpt
