// train_state.h — the trainer's own resumable state, as JSON text for the checkpoint manifest
// (its "extra" and "loss_scaler" fields): the step counters with the run's flags, and the fp16
// loss scaler. (The model's state — weights, Adam moments, FP8 scaling — and the data position
// are saved by their owners.)
//
// Reading checks every field's type and range (llmc/json_fields.h) and fails naming `origin`
// (the manifest) and the field: "<origin>: \"extra.updates\" must be an integer in [0, ...]".
#pragma once

#include "precision/loss_scaler.h"

#include <cstdint>
#include <map>
#include <string>

namespace train_gpt {

struct TrainCounters {
    int64_t updates = 0;               // optimizer updates applied (AdamW's t)
    int64_t skipped = 0;               // steps skipped for a non-finite loss or gradient
    int64_t tokens = 0;                // training tokens of every step so far, all ranks
    double seconds = 0;                // wall time of those steps, over every run that resumed this one
    int64_t skip_streak = 0;           // non-finite steps in a row up to this step (train/divergence.h)
    double loss_level = 0;             // the running level of the loss (train/divergence.h); 0: none yet
    int64_t spike_since = 0;           // the first step of a series of loss spikes going on (divergence.h); 0: none
    double grad_norm_level = 0;        // the gradient norm's running level (divergence.h: GradNormState)
    int64_t grad_norm_seen = 0;        // finite steps that moved it
    bool grad_norm_in_spike = false;   // the last finite step's norm was a spike
    // The run's identity: 16 hex digits drawn when a run starts fresh, kept by every resume of it
    // and written into its log's checkpoint and resume records, so that a resume can tell its own
    // run's log from another's (train_gpt.cu, check_resumed_log). "": a checkpoint from before it.
    std::string run_id;
};
// A new run identity (16 hex digits from the system's random device and the clock).
std::string new_run_id();

// The manifest's trainer record: the counters, the run's flags and the directories its relative
// paths are relative to (train/config.h: flags_json, path_dirs_json).
std::string trainer_state_to_json(const TrainCounters& c, const std::string& flags_json,
                                  const std::string& path_dirs_json = "");
// The counters (tokens, seconds, skip_streak, loss_level, spike_since and grad_norm_* 0 where a
// checkpoint has none).
TrainCounters counters_from_json(const std::string& json, const std::string& origin = "checkpoint");
// The directories the run's relative path flags are relative to, by flag ("train-data" →
// "/home/me/project"; {} for a checkpoint from before they were recorded).
std::map<std::string, std::string> run_path_dirs_from_json(const std::string& json,
                                                           const std::string& origin = "checkpoint");
// The run's flags as flags_json() wrote them, or "" where the checkpoint records none.
std::string run_flags_from_json(const std::string& json, const std::string& origin = "checkpoint");
std::string loss_scaler_to_json(const LossScaler& s);
void loss_scaler_from_json(LossScaler& s, const std::string& json, const std::string& origin = "checkpoint");

}   // namespace train_gpt
