// sampling.h — the next token from a row of logits: temperature, top-k, top-p (nucleus), and one
// uniform draw.
//
// The distribution: p_i ∝ exp((logit_i − max) / temperature) over the V logits, in double.
// Candidates are the ids in order of decreasing probability (ties: lower id first); top_k > 0
// keeps the first top_k, top_p < 1 the shortest prefix whose mass reaches top_p of the total.
// The draw u ∈ [0, 1) picks by inverse CDF over the candidates, in that order: the first candidate
// whose cumulative mass exceeds u times the candidates' own total. So every draw lands in the
// slice of one candidate of non-zero probability, and a draw near 1 picks among the least likely
// candidates of this distribution (never an id merely because it is the last one).
// temperature 0 is greedy: the most likely id (the lowest one on ties), u unused.
#pragma once

#include <vector>

namespace train_gpt {

struct SamplingParams {
    float temperature = 1.0f;   // 0: greedy
    int top_k = 0;              // 0: every id
    float top_p = 1.0f;         // 1: no nucleus cut
};

// The sampled id for logits (V,) and a draw u in [0, 1). Fails on a non-finite logit (a diverged
// model has no distribution to sample from) or bad parameters.
int sample_token(const std::vector<float>& logits, const SamplingParams& params, double u);

}   // namespace train_gpt
