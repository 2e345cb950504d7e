// schedule.h — learning-rate schedules. Every schedule starts with a linear warmup
// lr·(step+1)/warmup over the first `warmup_steps` steps (0-based step), then:
//   constant  lr
//   cosine    lr_min + ½(1 + cos(π·p))(lr − lr_min),  p = progress through the post-warmup steps ∈ [0, 1]
//   linear    lr − (lr − lr_min)·p
//   wsd       warmup-stable-decay: lr until the last `decay_frac` of all steps, then linear to lr_min
// with lr_min = final_lr_frac · lr.
#pragma once

#include <string>

namespace train_gpt {

enum class LrScheduleKind { Constant, Cosine, Linear, WSD };

struct LrSchedule {
    LrScheduleKind kind = LrScheduleKind::Cosine;
    float lr = 1e-3f;
    int warmup_steps = 0;
    int total_steps = 1;
    float final_lr_frac = 0.1f;
    float decay_frac = 0.2f;   // wsd only

    float at(int step) const;
};

LrScheduleKind parse_lr_schedule(const std::string& name);   // constant|cosine|linear|wsd, else fails
const char* lr_schedule_name(LrScheduleKind kind);

}   // namespace train_gpt
