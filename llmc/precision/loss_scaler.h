// loss_scaler.h — dynamic loss scaling for fp16 training (DESIGN §3).
//
// fp16 stops at 65504 and its smallest subnormal is 2^-24 ≈ 6e-8: many activation gradients
// are smaller than that and would flush to zero. So the loss is multiplied by S before backward
// (every gradient comes out × S, lifted into fp16's range) and the FP32 weight gradients are
// multiplied by 1/S before clipping and the update. S is a power of two by default, so the
// scaling and unscaling are exact.
//
// Too large an S overflows some gradient to inf (or makes NaN); too small a one loses the tiny
// ones. S is found by trial, one step at a time:
//   after backward, if any gradient on any rank is inf/NaN: skip the step, S ← max(S/2, floor),
//                                                           and the clean-step count restarts;
//   otherwise: count one clean step; after `growth_interval` clean steps in a row,
//              S ← min(2S, ceiling) and the count restarts.
// Start at S = 2^16. If the gradients overflow `collapse_steps` times while S sits at its floor
// (clean steps there do not count: S grows from the floor after `growth_interval` of them), they
// overflow even barely scaled: update() raises a one-time collapse warning (per stay at the floor)
// and collapsed() reports it, for the trainer to log or stop on.
#pragma once

#include <cstddef>
#include <cstdint>

namespace train_gpt {

struct LossScalerConfig {
    float init_scale = 65536.0f;     // 2^16
    int growth_interval = 2000;      // clean steps in a row before S doubles (≥ 1)
    float min_scale = 1.0f;          // the floor S never halves below (> 0)
    float max_scale = 16777216.0f;   // 2^24, the ceiling S never doubles above (apex's default)
    int collapse_steps = 100;        // overflows at the floor (in one stay) that trigger the warning (≥ 1)

    void validate() const;   // fails naming the value at fault
};

// What update() decided for this step.
struct LossScaleUpdate {
    bool skip = false;               // a gradient was inf/NaN: do not apply this step
    bool collapse_warning = false;   // the gradients have now overflowed collapse_steps times at the floor
    float scale = 0.0f;              // S for the next step
};

class LossScaler {
  public:
    explicit LossScaler(const LossScalerConfig& config = LossScalerConfig());

    float scale() const { return scale_; }              // multiply the loss (its gradient) by this
    float inv_scale() const { return 1.0f / scale_; }   // multiply the FP32 gradients by this
    // After backward: `found_nonfinite` = any gradient inf/NaN on any rank (OR-reduced).
    LossScaleUpdate update(bool found_nonfinite);

    int64_t skipped_steps() const { return skipped_; }   // total overflow steps
    int clean_streak() const { return clean_streak_; }   // clean steps since the last change of S
    int floor_streak() const { return floor_streak_; }   // overflows at the floor since S came to it
    bool collapsed() const { return floor_streak_ >= config_.collapse_steps; }
    // Checkpoint restore.
    void restore(float scale, int clean_streak, int floor_streak, int64_t skipped);
    // S brought into [floor, ceiling] (a restored S, where the run has another floor now): true if it moved.
    bool clamp_to_range();
    const LossScalerConfig& config() const { return config_; }

  private:
    LossScalerConfig config_;
    float scale_;
    int clean_streak_ = 0;
    int floor_streak_ = 0;
    int64_t skipped_ = 0;
};

// g[i] *= inv_scale in FP32; returns true if any g[i] is inf or NaN (the overflow check and
// the unscaling in one pass: inf · 1/S stays inf, NaN stays NaN).
bool unscale_and_check(float* g, size_t n, float inv_scale);

}   // namespace train_gpt
