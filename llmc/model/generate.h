// generate.h — sampling text from a GPT with a KV cache: each token costs one pass over one
// position, not over the whole context.
//
// The Generator runs the model's forward (gpt.h) for new positions only, on the model's kernel
// set and working weights: per block, layernorm → qkv GEMM into the cache rows of the new
// positions → Backend::attention_decode (the new queries against every cached key and value) →
// projection, residual, MLP, residual; then the final layernorm and the tied LM head for the last
// position. So the logits after token t are the full forward's at t up to the GEMMs' summation
// order on fewer rows (tests/test_generate.cpp measures it). In fp8 mode the block GEMMs run in
// 16 bits on the bf16 working weights (there are no FP8 scales for a sampled token's activations).
//
// Context: at most the model's position table (max_seq_len) tokens. Once a sequence is longer,
// the context is its last max_seq_len tokens, as a full forward over a sliding window sees them:
// each further token then re-runs those max_seq_len positions (the positions shift).
#pragma once

#include "backend.h"
#include "model/gpt.h"
#include "model/sampling.h"
#include "rng.h"

#include <cstdint>
#include <vector>

namespace train_gpt {

class Generator {
  public:
    // Buffers for one sequence of up to model.config().max_seq_len positions on `backend`, the
    // kernel set the model lives on. The model must outlive the generator (its weights are read
    // at every step, so a training model's current weights are the ones sampled).
    Generator(const GPT& model, Backend& backend);
    ~Generator();
    Generator(const Generator&) = delete;
    Generator& operator=(const Generator&) = delete;

    // Appends tokens to the sequence (all at once: a prompt is one pass) and returns the logits
    // (V, FP32) for the token after the last one.
    std::vector<float> feed(const std::vector<int>& tokens);
    void reset();                                                  // an empty sequence
    int cached() const { return cached_; }                         // positions in the cache
    const std::vector<int>& context() const { return context_; }   // the tokens those positions hold

    // `count` tokens sampled after `prompt` (non-empty), one draw of rng per token; starts from an
    // empty sequence.
    std::vector<int> generate(const std::vector<int>& prompt, int count, const SamplingParams& params, Rng& rng);

  private:
    void forward(const int* tokens, int n);   // positions cached_ .. cached_+n−1; logits_ for the last
    void* at(void* base, size_t elements) const;

    const GPT& model_;
    Backend& k_;
    GPTConfig cfg_;
    size_t act_size_;
    void* cache_ = nullptr;         // (L, maxT, 3C): every layer's [q | k | v] rows, by position
    void* x_ = nullptr;             // (maxT, C): the residual stream of the new positions
    void* x2_ = nullptr;            // (maxT, C): after the attention branch
    void* ln_ = nullptr;            // (maxT, C): a layernorm's output
    void* atty_ = nullptr;          // (maxT, C): attention output
    void* proj_ = nullptr;          // (maxT, C): a projection's output
    void* fch_ = nullptr;           // (maxT, 4C)
    void* fch_gelu_ = nullptr;      // (maxT, 4C)
    float* mean_ = nullptr;         // (maxT)
    float* rstd_ = nullptr;         // (maxT)
    void* logits_ = nullptr;        // (Vp): the last position's
    float* logits_f32_ = nullptr;   // (V)
    int32_t* tokens_ = nullptr;     // (maxT) device
    int cached_ = 0;
    std::vector<int> context_;   // the tokens of the cached positions
};

}   // namespace train_gpt
