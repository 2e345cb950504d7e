// loss_scaler.cpp — see loss_scaler.h.
#include "precision/loss_scaler.h"

#include "utils.h"

#include <algorithm>
#include <cmath>

namespace train_gpt {

void LossScalerConfig::validate() const {
    if (!(min_scale > 0.0f) || !std::isfinite(min_scale))
        fail("the loss scale floor (--loss-scale-min) must be positive and finite (got %g)", min_scale);
    if (!(max_scale >= min_scale) || !std::isfinite(max_scale))
        fail("the loss scale ceiling must be finite and at least the floor (--loss-scale-min) %g (got %g)", min_scale,
             max_scale);
    if (!(init_scale >= min_scale && init_scale <= max_scale))
        fail("the initial loss scale (--loss-scale-init) %g must lie in [--loss-scale-min %g, the ceiling %g]",
             init_scale, min_scale, max_scale);
    if (growth_interval < 1)
        fail("the loss scale growth interval (--loss-scale-growth-interval) must be at least 1 (got %d)",
             growth_interval);
    if (collapse_steps < 1) fail("loss scale collapse steps must be at least 1 (got %d)", collapse_steps);
}

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config), scale_(config.init_scale) {
    config_.validate();
}

LossScaleUpdate LossScaler::update(bool found_nonfinite) {
    LossScaleUpdate u;
    if (found_nonfinite) {
        u.skip = true;
        ++skipped_;
        scale_ = std::max(scale_ * 0.5f, config_.min_scale);
        clean_streak_ = 0;
    } else if (++clean_streak_ >= config_.growth_interval) {
        scale_ = std::min(scale_ * 2.0f, config_.max_scale);
        clean_streak_ = 0;
    }
    // overflows while S sits at its floor; a clean step there leaves the count, leaving the floor ends it
    floor_streak_ = scale_ > config_.min_scale ? 0 : floor_streak_ + (found_nonfinite ? 1 : 0);
    u.collapse_warning = found_nonfinite && floor_streak_ == config_.collapse_steps;
    u.scale = scale_;
    return u;
}

void LossScaler::restore(float scale, int clean_streak, int floor_streak, int64_t skipped) {
    scale_ = scale;
    clean_streak_ = clean_streak;
    floor_streak_ = floor_streak;
    skipped_ = skipped;
}

bool LossScaler::clamp_to_range() {
    const float clamped = std::min(std::max(scale_, config_.min_scale), config_.max_scale);
    if (clamped == scale_) return false;
    scale_ = clamped;
    clean_streak_ = 0;
    floor_streak_ = 0;
    return true;
}

bool unscale_and_check(float* g, size_t n, float inv_scale) {
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n >= (size_t(1) << 16))
    for (size_t i = 0; i < n; ++i) {
        g[i] *= inv_scale;
        bad |= !std::isfinite(g[i]);
    }
    return bad != 0;
}

}   // namespace train_gpt
