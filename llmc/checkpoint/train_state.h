// train_state.h — the trainer's own resumable state, as JSON text for the checkpoint manifest:
// the step counters and the fp16 loss scaler. (The model's state — weights, Adam moments, FP8
// scaling — and the data position are saved by their owners.)
#pragma once

#include "precision/loss_scaler.h"

#include <cstdint>
#include <string>

namespace train_gpt {

struct TrainCounters {
    int64_t updates = 0;   // optimizer updates applied (AdamW's t)
    int64_t skipped = 0;   // steps skipped for a non-finite loss or gradient
};

std::string counters_to_json(const TrainCounters& c);
TrainCounters counters_from_json(const std::string& json);   // fails on a malformed text
std::string loss_scaler_to_json(const LossScaler& s);
void loss_scaler_from_json(LossScaler& s, const std::string& json);

}  // namespace train_gpt
