// fuzz_manifest.cpp — a checkpoint manifest (checkpoint/checkpoint.h: parse_manifest), the JSON
// the trainer resumes from, with the trainer's state in it (checkpoint/train_state.h).
// Invariants of a manifest that parses: every count and position is in its documented range, and
// the state the trainer reads from it next (counters, loss scaler) reads without error.
#include "checkpoint/checkpoint.h"
#include "checkpoint/train_state.h"
#include "fuzz_util.h"

#include <cmath>

using namespace train_gpt;
using namespace train_gpt::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    CheckpointManifest m;
    try {
        m = parse_manifest(text, "manifest.json");
    } catch (const Error&) {
        return 0;
    }
    if (m.step < 0 || m.world_size < 1 || m.data_position < 0) invariant_broken("a count or position out of range");
    const GPTConfig& g = m.model;
    if (g.n_layer < 1 || g.n_head < 1 || g.n_embd < 1 || g.vocab_size < 1 || g.padded_vocab_size < 1 ||
        g.max_seq_len < 1) {
        invariant_broken("a model dimension below 1");
    }
    if (!m.extra_json.empty()) {
        const TrainCounters c = counters_from_json(m.extra_json);
        if (c.updates < 0 || c.skipped < 0) invariant_broken("a negative counter");
    }
    if (!m.loss_scaler_json.empty()) {
        LossScaler s;
        loss_scaler_from_json(s, m.loss_scaler_json);
        if (!(s.scale() > 0.0f) || !std::isfinite(s.scale()))
            invariant_broken("a loss scale that is not finite and positive");
    }
    return 0;
}
