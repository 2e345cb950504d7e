// gpt.h — the GPT-2 model, written once against the Backend interface.
//
// Architecture: learned token + position embeddings, L pre-LN blocks
//   x = x + attn_proj(attention(ln1(x)));  x = x + fc_proj(gelu(fc(ln2(x))))
// a final layernorm, and a tied LM head (logits = lnf(x) · wteᵀ) over a vocabulary padded to
// a multiple of 128 whose padding rows stay zero and never receive a gradient.
//
// Memory: parameters, gradients and Adam moments are each one contiguous device buffer in the
// order of ParamTensor (the same order llm.c uses); per-layer tensors are stacked along a
// leading L dimension. Activations are sized for (max_B, max_T) once; forward() may be called
// with any B ≤ max_B, T ≤ max_T (sampling uses B = 1).
//
// Precision (precision.h): working weights and activations are stored in the backend's activation
// dtype; gradients, Adam moments and (except in fp32, and unless disabled for the ablation) the
// master weights are FP32. In fp8 mode the four GEMMs of each block (qkv, attn-proj, fc, fc-proj)
// run on FP8 operands with per-tensor delayed scaling (fp8_scaling.h); the LM head stays bf16.
//
// Data parallel: with a Comm of W ranks, reduce_gradients() sums every rank's gradients, and the
// update applies their mean. With zero = 1 (ZeRO-1) each rank keeps the master weights and Adam
// m, v of one contiguous 1/W of the flat parameter vector only, receives only that slice of the
// summed gradients (reduce-scatter), updates it, and all ranks all-gather the working weights.
//
// Gradient rules: forward() with a non-zero dloss writes dlogits over the logits buffer (the
// fused classifier works in place); backward() then ACCUMULATES into the parameter gradients,
// so several forward/backward pairs between zero_grad() and update() accumulate gradients.
#pragma once

#include "backend.h"
#include "distributed/comm.h"
#include "precision/fp8_scaling.h"
#include "precision/precision.h"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace train_gpt {

struct GPTConfig {
    int n_layer = 0;
    int n_head = 0;
    int n_embd = 0;
    int vocab_size = 0;         // V: real tokens
    int padded_vocab_size = 0;  // Vp: V rounded up to a multiple of 128
    int max_seq_len = 0;        // rows of the position table
};

// Shape from a depth dial "dN": GPT-2's sizes for d12 (124M), d24, d36, d48 (1.5B); otherwise
// n_embd = 64·N, n_head = N (head size 64). n_embd / n_head override when > 0.
GPTConfig gpt_config_from_spec(const std::string& spec, int vocab_size, int max_seq_len,
                               int n_embd_override = 0, int n_head_override = 0);
int pad_vocab(int vocab_size);   // round up to a multiple of 128

enum ParamTensor {
    kWte, kWpe, kLn1w, kLn1b, kQkvw, kQkvb, kAttprojw, kAttprojb,
    kLn2w, kLn2b, kFcw, kFcb, kFcprojw, kFcprojb, kLnfw, kLnfb, kNumParamTensors
};
const char* param_tensor_name(int i);
// Weight decay applies to the 2-D weights only: embeddings and the four matrices of each block.
bool param_tensor_decays(int i);
std::array<size_t, kNumParamTensors> param_tensor_sizes(const GPTConfig& cfg);
// Shape of each tensor as stored, e.g. qkvw → {L, 3C, C}.
std::vector<int> param_tensor_shape(const GPTConfig& cfg, int i);

struct PrecisionConfig {
    Precision precision = Precision::FP32;
    bool master_weights = true;   // keep an FP32 master copy (always, in effect, for fp32)
    Fp8ScalingConfig fp8;         // fp8 only
};

// One FP8 scaled tensor's state for telemetry, for the last completed step: its amax (MAX over
// the step's casts: micro-batches), the scale it was cast with, and the fractions of its values
// that saturated or flushed to zero over those casts.
struct Fp8TensorReport {
    std::string name;   // e.g. "h0.qkv.x", "h3.fc.dy", "h1.attproj.w"
    float amax = 0, scale = 0;
    double saturated_frac = 0, flushed_frac = 0;
};

struct AdamWConfig {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};

class GPT {
public:
    // The backend's activation dtype must be activation_dtype(precision.precision).
    // comm: null for a single process; zero: 0 (replicated optimizer state) or 1 (ZeRO-1).
    GPT(const GPTConfig& cfg, Backend& backend, int max_B, int max_T, const PrecisionConfig& precision = {},
        Comm* comm = nullptr, int zero = 0);
    ~GPT();
    GPT(const GPT&) = delete;
    GPT& operator=(const GPT&) = delete;

    const GPTConfig& config() const { return cfg_; }
    size_t num_parameters() const { return num_params_; }            // including vocab padding
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
    // Testing the recovery path: makes one gradient value +inf.
    void poison_gradient();
    std::vector<Fp8TensorReport> fp8_report() const;
    // Bytes of the activation buffers allocated for (max_B, max_T): every layer's saved
    // activations, the backward scratch, the logits, and in fp8 mode the E4M3/E5M2 copies.
    size_t activation_bytes() const { return activation_bytes_; }
    // GEMM g of every block runs in FP8 under `precision` (fp8 mode, selected by --fp8-gemms).
    static bool runs_in_fp8(const PrecisionConfig& precision, int g) {
        return precision.precision == Precision::FP8 && (precision.fp8.gemms >> g & 1u);
    }
    // What activation_bytes() would be for a model of cfg at (B, T), without building it.
    static size_t activation_bytes_for(const GPTConfig& cfg, int B, int T, const PrecisionConfig& precision);

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
    // FP8 scaling state (scales and amax histories) as JSON text, and back.
    std::string fp8_state_json() const;
    void restore_fp8_state(const std::string& json);
    // Host copy of the logits at (b, t) of the last forward, first V entries.
    std::vector<float> logits_at(int b, int t) const;

private:
    struct Activations;
    enum Gemm { kQkv, kAttproj, kFc, kFcproj, kNumGemms };   // the FP8 GEMMs of a block

    GPTConfig cfg_;
    Backend& k_;
    int max_B_, max_T_;
    PrecisionConfig prec_;
    size_t act_size_;   // bytes per activation / working-weight value
    size_t num_params_ = 0;
    std::array<size_t, kNumParamTensors> param_offsets_{};
    void* params_ = nullptr;    // working weights, activation dtype
    float* master_ = nullptr;   // FP32 master weights; null in fp32 (params_ is FP32) or without masters
    float* grads_ = nullptr;    // accumulated gradients, FP32
    float* adam_m_ = nullptr;
    float* adam_v_ = nullptr;
    // data parallel
    Comm* comm_ = nullptr;
    int world_ = 1, rank_ = 0;
    bool sharded_ = false;         // ZeRO-1 with more than one rank
    size_t padded_params_ = 0;     // num_params_ rounded up to a multiple of world_
    size_t state_begin_ = 0;       // this rank's slice of the flat vector: master, m, v, and the
    size_t state_len_ = 0;         //   reduced gradient under ZeRO-1
    float* grad_shard_ = nullptr;  // ZeRO-1: this rank's slice of the summed gradients
    // fp8: per (layer, GEMM) scaling state; the E4M3 weight copies in both layouts (W for the
    // forward, Wᵀ for dX); the transposed E4M3 inputs Xᵀ saved for dW; and, shared by all layers,
    // the E4M3 input being multiplied and the E5M2 output gradient in both layouts
    int fp8_n_ = 0;                  // FP8 GEMM instances: L × kNumGemms (0 unless fp8)
    fp8e4m3* fp8_weights_ = nullptr;
    fp8e4m3* fp8_weights_t_ = nullptr;
    fp8e4m3* fp8_inputs_t_ = nullptr;
    fp8e4m3* fp8_recast_t_ = nullptr;  // one layer's Xᵀ, cast again in backward (attproj, fcproj)
    fp8e4m3* fp8_x_ = nullptr;       // aliases fp8_dout_ (forward and backward never overlap)
    fp8e5m2* fp8_dout_ = nullptr;
    fp8e5m2* fp8_dout_t_ = nullptr;
    // The scaling state in backend memory, one slot per scaled tensor: the X slots of every
    // (layer, GEMM), then the W slots, then the dY slots (3·fp8_n_). Scales (Fp8ScaleSlot) and
    // amax histories (amax_history floats per slot); the casts' statistics of this step and of the
    // last one (Fp8Counters, + one slot for evaluation passes, never read), swapped at the end of
    // a step; a slot for just-in-time amaxes; the amaxes MAX-reduced across ranks. The host keeps
    // only the history lengths and step counts, which it can compute without reading anything.
    Fp8ScaleSlot* fp8_scales_ = nullptr;
    float* fp8_history_ = nullptr;
    Fp8Counters* fp8_counters_ = nullptr;
    Fp8Counters* fp8_counters_last_ = nullptr;
    Fp8Counters* fp8_jit_ = nullptr;
    float* fp8_amax_buffer_ = nullptr;
    std::vector<int>* fp8_hist_len_ = nullptr;
    std::vector<int64_t>* fp8_steps_ = nullptr;
    Activations* acts_ = nullptr;
    size_t activation_bytes_ = 0;
    int32_t* inputs_ = nullptr;    // (max_B, max_T) device
    int32_t* targets_ = nullptr;   // (max_B, max_T) device
    int last_B_ = 0, last_T_ = 0;
    bool have_dlogits_ = false;
    bool training_pass_ = false;   // the current forward will be followed by backward()

    void* act_at(void* base, size_t elements) const { return static_cast<char*>(base) + elements * act_size_; }
    void* param(int tensor, size_t offset = 0) const { return act_at(params_, param_offsets_[tensor] + offset); }
    float* grad(int tensor) const { return grads_ + param_offsets_[tensor]; }
    bool fp8() const { return prec_.precision == Precision::FP8; }
    // GEMM g of each block runs in FP8 (fp8 mode, selected by --fp8-gemms)
    bool fp8_gemm(int g) const { return runs_in_fp8(prec_, g); }
    // The input X (N,C) of a block GEMM: a tensor in the activation dtype, or, where the GEMM runs
    // in FP8 and the cast is fused into the producer, what the producer reads: the layernorm of x
    // (qkv, fc) or gelu(x) (fcproj), never written in the activation dtype.
    struct GemmInput {
        enum Kind { kTensor, kLayerNorm, kGelu } kind;
        const void* x;                       // the tensor, or the producer's input
        const void* ln_weight = nullptr;     // kLayerNorm: its parameters and the row statistics
        const void* ln_bias = nullptr;       //   (mean, rstd (N)) the cast writes for backward
        float* mean = nullptr;
        float* rstd = nullptr;
    };
    // The producers of GEMM g's input: run now into out (16-bit GEMM), or left to the cast (FP8)
    GemmInput layernorm_input(Gemm g, void* out, float* mean, float* rstd, const void* inp, const void* weight,
                              const void* bias, int N, int C);
    GemmInput gelu_input(Gemm g, void* out, const void* inp, size_t n);
    // q (N,C) and/or qt (C,N): the E4M3 cast of an input, with its producer fused
    void cast_input(const GemmInput& in, fp8e4m3* q, fp8e4m3* qt, int N, int C, const Fp8ScaleSlot* scale,
                    Fp8Counters* counters);
    // y (N,OC) = x (N,C) · W[l]ᵀ + b[l] for GEMM g of layer l, FP8 or not
    void linear_forward(int l, Gemm g, void* out, const GemmInput& inp, int N, int C, int OC);
    // dout_cast: the E5M2 dY is in fp8_dout_ / fp8_dout_t_ already (cast by its producer)
    void linear_backward(int l, Gemm g, void* dinp, const void* dout, const GemmInput& inp, int N, int C, int OC,
                         bool dout_cast = false);
    // the E4M3 copies of every FP8 GEMM's weights, but those the update wrote itself
    void cast_fp8_weights(const std::array<bool, kNumGemms>& already_cast = {});
    int fp8_gemm_of_weight(int param_tensor) const;
    void end_fp8_step();
    fp8e4m3* fp8_input_t(int l, int g, int N) const;
    fp8e4m3* fp8_weight(int l, int g, bool transposed) const;
    enum Fp8Operand { kFp8X = 0, kFp8W = 1, kFp8DY = 2 };
    size_t fp8_index(Fp8Operand operand, int l, int g) const;          // its slot in the state arrays
    Fp8Counters* fp8_slot(Fp8Operand operand, int l, int g) const;    // the counters of one scaled tensor
    Fp8Counters* fp8_spare_slot() const;   // counters nobody reads (evaluation passes, casts done twice)
    Fp8ScaleSlot* fp8_scale(Fp8Operand operand, int l, int g) const;  // its scale
    bool fp8_needs_amax_now(Fp8Operand operand, int l, int g) const;
    void fp8_scale_just_in_time(Fp8ScaleSlot* slot, float fp8_max, const std::function<void(Fp8Counters*)>& record_amax);
};

}  // namespace train_gpt
