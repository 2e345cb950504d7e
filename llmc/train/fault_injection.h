// train/fault_injection.h — --inject-nonfinite-step: a run's recovery path, exercised on purpose.
//
// The kernel set, with the sum of squares of the gradient norm made +inf at the steps the flag
// names: what a gradient that overflowed gives every rank. The run then takes its real recovery
// path: the step is skipped (no update, the FP8 amaxes dropped), fp16 halves its loss scale, and
// --max-skipped-steps in a row stop the run. It is a decorator of the Backend, as --trace-ops is,
// so the training step holds no testing branch. The gradient norm (GPT::gradient_norm) calls
// sum_squares once per optimizer step and nothing else does: its n-th call is step first_step + n,
// first_step being read at the call (the run's start, known once the checkpoint is loaded).
#pragma once

#include "backend.h"
#include "train/config.h"

#include <cstdint>
#include <memory>

namespace train_gpt {

std::unique_ptr<Backend> with_injected_nonfinite(std::unique_ptr<Backend> inner, const TrainConfig& cfg,
                                                 const int64_t& first_step);

}   // namespace train_gpt
