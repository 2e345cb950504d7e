// gpt.h — the GPT-2 model, written once against the Backend interface.
//
// Architecture: learned token + position embeddings, L pre-LN blocks
//   x = x + attn_proj(attention(ln1(x)));  x = x + fc_proj(gelu(fc(ln2(x))))
// a final layernorm, and a tied LM head (logits = lnf(x) · wteᵀ) over a vocabulary padded to
// a multiple of 128 whose padding rows stay zero and never receive a gradient. The parameter
// tensors and the block GEMMs are tabled in layout.h.
//
// Memory: parameters, gradients and Adam moments are each one contiguous device buffer in the
// order of ParamTensor (the same order llm.c uses); per-layer tensors are stacked along a
// leading L dimension. Activations are sized for (max_B, max_T) once; forward() may be called
// with any B ≤ max_B, T ≤ max_T (sampling uses B = 1).
//
// Precision (precision/precision.h): working weights and activations are stored in the backend's
// activation dtype; gradients, Adam moments and (except in fp32, and unless disabled for the
// ablation) the master weights are FP32. In fp8 mode the block GEMMs selected by --fp8-gemms run
// on FP8 operands through an Fp8State (precision/fp8_state.h), which owns every FP8 buffer and
// the delayed-scaling state; the LM head stays bf16.
//
// Data parallel: with a Comm of W ranks, reduce_gradients() sums every rank's gradients, and the
// update applies their mean. With zero = 1 (ZeRO-1) each rank keeps the master weights and Adam
// m, v of one contiguous 1/W of the flat parameter vector only, receives only that slice of the
// summed gradients (reduce-scatter), updates it, and all ranks all-gather the working weights.
//
// Gradient rules: forward() with targets and a non-zero dloss also runs the LM head's backward
// (dlogits exists only while the head's chunk does: the fused classifier writes it over the
// logits); backward() then ACCUMULATES the rest into the parameter gradients, so several
// forward/backward pairs between zero_grad() and update() accumulate gradients.
#pragma once

#include "backend.h"
#include "distributed/comm.h"
#include "model/block_ops.h"
#include "model/layout.h"
#include "precision/fp8_scaling.h"
#include "precision/fp8_state.h"
#include "precision/precision.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace train_gpt {

struct PrecisionConfig {
    Precision precision = Precision::FP32;
    bool master_weights = true;   // keep an FP32 master copy (always, in effect, for fp32)
    Fp8ScalingConfig fp8;         // fp8 only
};
// Block GEMM g (layout.h) runs in FP8 under `precision`: fp8 mode, and selected by --fp8-gemms.
inline bool gemm_runs_in_fp8(const PrecisionConfig& precision, int g) {
    return precision.precision == Precision::FP8 && (precision.fp8.gemms >> g & 1u);
}

struct AdamWConfig {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};

class GPT {
  public:
    // The backend's activation dtype must be activation_dtype(precision.precision).
    // comm: null for a single process; zero: 0 (replicated optimizer state) or 1 (ZeRO-1).
    // recompute (--recompute): which activations backward computes again instead of keeping every
    // layer's: 0 none; 1 the GELU output; 2 also the layernorm outputs (and, in fp8 mode, the E4M3
    // Xᵀ of qkv and fc). The same ops on the same inputs: every bit of training is unchanged.
    // lm_head_chunks (--lm-head-chunks): the LM head and the cross-entropy run over the tokens in
    // this many chunks, so the logits buffer holds one chunk's rows, (⌈B·T / chunks⌉, Vp), not
    // (B·T, Vp); a forward without targets then computes no logits. The same values, except that
    // wte's head gradient is summed chunk by chunk.
    // gemm_epilogues (--gemm-epilogues): GELU and the bias gradients folded into the GEMMs
    // (model/epilogue_block_ops.h); fp32/bf16/fp16 without recompute only.
    GPT(const GPTConfig& cfg, Backend& backend, int max_B, int max_T, const PrecisionConfig& precision = {},
        Comm* comm = nullptr, int zero = 0, int recompute = 0, int lm_head_chunks = 1, bool gemm_epilogues = false);
    ~GPT();
    GPT(const GPT&) = delete;
    GPT& operator=(const GPT&) = delete;

    const GPTConfig& config() const { return cfg_; }
    size_t num_parameters() const { return num_params_; }   // including vocab padding
    size_t offset_of(int tensor) const { return param_offsets_[tensor]; }

    // GPT-2 / nanoGPT initialisation: N(0, 0.02) weights, residual projections N(0, 0.02/√(2L)),
    // zero biases, unit layernorm gains, zero padding rows. Deterministic in `seed`.
    void init_weights(uint64_t seed);
    void set_weights(const std::vector<float>& host);   // num_parameters() floats, tensor order
    std::vector<float> weights() const;
    std::vector<float> gradients() const;

    // Runs the model on inputs (B,T) (host ids). With targets (B,T) it returns the mean loss,
    // else 0. With dloss != 0 it also leaves dlogits = dloss · ∂(Σ losses)/∂logits for backward().
    float forward(const int32_t* inputs, const int32_t* targets, int B, int T, float dloss = 0.0f);
    void backward();
    void zero_grad();
    // Sum the gradients over ranks (all-reduce, or reduce-scatter under ZeRO-1). No-op for one rank.
    void reduce_gradients();
    // √(Σ g²) of the mean gradient over ranks, all parameters, double accumulation; call after
    // reduce_gradients(). The same value on every rank.
    double gradient_norm();
    // One AdamW step over every tensor; gradients are multiplied by grad_scale first (clipping,
    // loss-scale removal). In fp8 mode this also ends the step for every scaled tensor (its amax
    // enters the history, delayed scales are recomputed) and re-casts the FP8 weight copies.
    void update(float lr, const AdamWConfig& opt, float grad_scale, int t);
    // A skipped step (non-finite loss or gradients): forget this step's FP8 amaxes.
    void discard_step();
    // The FP8 state in fp8 mode (telemetry, checkpoints), else null.
    const Fp8State* fp8() const { return fp8_.get(); }
    // Bytes of the activation buffers allocated for (max_B, max_T): every layer's saved
    // activations, the backward scratch, the logits, and in fp8 mode the E4M3/E5M2 copies.
    size_t activation_bytes() const { return activation_bytes_; }
    // What activation_bytes() would be for a model of cfg at (B, T), without building it.
    static size_t activation_bytes_for(const GPTConfig& cfg, int B, int T, const PrecisionConfig& precision,
                                       int recompute = 0, int lm_head_chunks = 1);

    // Optimizer state of this rank, for checkpoints: the flat FP32 range [state_begin, +state_size)
    // of the parameter vector (all of it without ZeRO-1). which: "master" (the FP32 master weights,
    // or the working weights widened when there are none), "m", "v". Restoring also rewrites the
    // working weights from the master (all-gathered under ZeRO-1: every rank calls it) and
    // re-casts the FP8 copies.
    size_t state_begin() const { return state_begin_; }
    size_t state_size() const { return state_len_; }
    std::vector<float> optimizer_state(const std::string& which) const;
    void restore_optimizer_state(const std::vector<float>& master, const std::vector<float>& m,
                                 const std::vector<float>& v);
    // The part of the optimizer state this rank writes into a checkpoint, so that the ranks write
    // disjoint ranges that together cover the whole vector: its ZeRO-1 slice, or, when every rank
    // holds all of it, the rank-th of W equal shares. begin is its flat offset.
    struct StateShare {
        size_t begin = 0;
        std::vector<float> master, m, v;
    };
    StateShare checkpoint_share() const;
    // FP8 scaling state (scales and amax histories) as JSON text ("[]" outside fp8 mode), and back;
    // dy_factor: what the gradients are now multiplied by against the saving run's (Fp8State::
    // restore_json).
    std::string fp8_state_json() const;
    void restore_fp8_state(const std::string& json, double dy_factor = 1.0);
    // Host copy of the logits at (b, t) of the last forward, first V entries (lm_head_chunks 1 only).
    std::vector<float> logits_at(int b, int t) const;
    // Each token's loss (B, T) of the last forward with targets (evaluations that score parts of
    // a sequence: eval/hellaswag.h).
    const std::vector<float>& token_losses() const { return token_losses_; }
    // The working weights of parameter tensor i (activation dtype, every layer's, on the kernel
    // set): for code that runs the model another way, decoding with a KV cache (generate.h).
    const void* parameter(int tensor) const { return param(tensor); }

    struct Activations;

  private:
    GPTConfig cfg_;
    Backend& k_;
    int max_B_, max_T_;
    PrecisionConfig prec_;
    size_t act_size_;   // bytes per activation / working-weight value
    size_t num_params_ = 0;
    std::array<size_t, kNumParamTensors + 1> param_offsets_{};
    void* params_ = nullptr;    // working weights, activation dtype
    float* master_ = nullptr;   // FP32 master weights; null in fp32 (params_ is FP32) or without masters
    float* grads_ = nullptr;    // accumulated gradients, FP32
    float* adam_m_ = nullptr;
    float* adam_v_ = nullptr;
    // data parallel
    Comm* comm_ = nullptr;
    int recompute_ = 0;        // --recompute: 1 GELU output, 2 also layernorm outputs
    int lm_head_chunks_ = 1;   // --lm-head-chunks: the logits buffer holds 1/chunks of the tokens
    int world_ = 1, rank_ = 0;
    bool sharded_ = false;          // ZeRO-1 with more than one rank
    size_t padded_params_ = 0;      // num_params_ rounded up to a multiple of world_
    size_t state_begin_ = 0;        // this rank's slice of the flat vector: master, m, v, and the
    size_t state_len_ = 0;          //   reduced gradient under ZeRO-1
    float* grad_shard_ = nullptr;   // ZeRO-1: this rank's slice of the summed gradients
    std::unique_ptr<Activations> acts_;
    size_t activation_bytes_ = 0;
    std::unique_ptr<Fp8State> fp8_;   // fp8 mode only
    int32_t* inputs_ = nullptr;       // (max_B, max_T) device
    int32_t* targets_ = nullptr;      // (max_B, max_T) device
    int last_B_ = 0, last_T_ = 0;
    bool have_dlogits_ = false;
    std::vector<float> token_losses_;   // (B, T) of the last forward with targets

    ModelTensors tensors_;            // where the weights and gradients are, for the block ops
    std::unique_ptr<BlockOps> ops_;   // the block's ops: 16-bit, or fp8 mode's (block_ops.h)

    // Layer l's activations for N = B·T rows, where forward and backward find them.
    struct LayerActivations;
    LayerActivations layer(int l, int N) const;
    LayernormInput lnf_input(int N) const;
    void lm_head(int N, float dloss);
    void* act_at(void* base, size_t elements) const { return static_cast<char*>(base) + elements * act_size_; }
    void* param(int tensor, size_t offset = 0) const { return act_at(params_, param_offsets_[tensor] + offset); }
    float* grad(int tensor) const { return grads_ + param_offsets_[tensor]; }
};

}   // namespace train_gpt
