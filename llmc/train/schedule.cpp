// schedule.cpp — see schedule.h.
#include "train/schedule.h"

#include "utils.h"

#include <algorithm>
#include <cmath>

namespace train_gpt {

float LrSchedule::at(int step) const {
    if (step < warmup_steps) return lr * (float)(step + 1) / (float)warmup_steps;
    const float lr_min = final_lr_frac * lr;
    // progress from `start` (inclusive) to the last step (inclusive) in [0, 1]
    auto progress = [&](int start) {
        int span = total_steps - 1 - start;
        if (span <= 0) return 1.0f;
        return std::clamp((float)(step - start) / (float)span, 0.0f, 1.0f);
    };
    switch (kind) {
        case LrScheduleKind::Constant: return lr;
        case LrScheduleKind::Cosine: {
            float p = progress(warmup_steps);
            return lr_min + 0.5f * (1.0f + std::cos((float)M_PI * p)) * (lr - lr_min);
        }
        case LrScheduleKind::Linear: return lr - (lr - lr_min) * progress(warmup_steps);
        case LrScheduleKind::WSD: {
            int decay_start = std::max(warmup_steps, total_steps - (int)std::lround(decay_frac * total_steps));
            if (step < decay_start) return lr;
            return lr - (lr - lr_min) * progress(decay_start);
        }
    }
    return lr;
}

LrScheduleKind parse_lr_schedule(const std::string& name) {
    if (name == "constant") return LrScheduleKind::Constant;
    if (name == "cosine") return LrScheduleKind::Cosine;
    if (name == "linear") return LrScheduleKind::Linear;
    if (name == "wsd") return LrScheduleKind::WSD;
    fail("unknown learning-rate schedule '%s' (expected constant, cosine, linear or wsd)", name.c_str());
}

const char* lr_schedule_name(LrScheduleKind kind) {
    switch (kind) {
        case LrScheduleKind::Constant: return "constant";
        case LrScheduleKind::Cosine: return "cosine";
        case LrScheduleKind::Linear: return "linear";
        case LrScheduleKind::WSD: return "wsd";
    }
    return "?";
}

}   // namespace train_gpt
