// fp8_state.h — everything fp8 mode adds to the model: the block GEMMs that run on FP8 operands,
// their E4M3/E5M2 copies, and the delayed-scaling state of every scaled tensor.
//
// The model (model/gpt.cpp) owns an Fp8State only in fp8 mode. Its block ops (fp8_block_ops.h)
// call it where a block GEMM runs in FP8: one of the forward / backward calls below instead of
// the backend's 16-bit matmul; update() calls end_step() first and lets adamw_update() write the
// weights' E4M3 copies; checkpoints save to_json(). A bf16, fp16 or fp32 step never enters it.
//
// Each FP8 GEMM out = X · Wᵀ + b has three scaled operands (fp8_scaling.h has the recipe):
//   X   E4M3, cast by the kernel that produces it: layernorm (qkv, fc), GELU (fcproj), the
//       attention (attproj, whose 16-bit input atty attention backward keeps anyway), or, where a
//       scale is not known yet, a cast of its own; a 16-bit layernorm or GELU output is never written;
//   W   E4M3, W (out, in) for the forward and Wᵀ (in, out) for dX, written by AdamW itself where
//       the weight's scale is known (delayed scaling), else cast after the update;
//   dY  E5M2, dY (N, out) for dX and dYᵀ (out, N) for dW; the dY of fc is cast inside GELU backward,
//       those of attproj and fcproj (the residual stream's gradient) inside the layernorm backward
//       that produces it, that of qkv inside attention backward, once their scales are known
//       (delayed scaling).
// Hopper's FP8 GEMMs are TN only, hence both layouts. The backward of qkv and fc reads the Xᵀ its
// forward cast kept (one per layer), or, under --recompute 2, casts it again from the layernorm of
// the residual stream; attproj and fcproj cast their Xᵀ again in backward from atty and fch, which
// the model keeps anyway. The scale has not changed since the forward: the same bytes.
//
// State in the kernel set's memory, one slot per scaled tensor — the X slots of every
// (layer, GEMM), then the W slots, then the dY slots — with L·4 GEMM instances whether or not a
// GEMM runs in FP8 (so a checkpoint's state does not depend on --fp8-gemms): the scales
// (Fp8ScaleSlot), the amax histories, the casts' statistics of this step and of the last one
// (Fp8Counters; telemetry reads the last), a slot for just-in-time amaxes, and the amaxes reduced
// across ranks. Nothing here waits for the host: the host keeps only the history lengths and step
// counts, which it can count without reading anything back.
#pragma once

#include "backend.h"
#include "distributed/comm.h"
#include "model/layout.h"
#include "precision/fp8_scaling.h"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace train_gpt {

// One FP8 scaled tensor's state for telemetry, for the last completed step: its amax (MAX over
// the step's casts: micro-batches), the scale it was cast with, and the fractions of its values
// that saturated or flushed to zero over those casts.
struct Fp8TensorReport {
    std::string name;   // e.g. "h0.qkv.x", "h3.fc.dy", "h1.attproj.w"
    float amax = 0, scale = 0;
    double saturated_frac = 0, flushed_frac = 0;
};

// The kernel set's FP8 ops (Backend::fp8()); fails naming the kernel set where it has none.
Fp8Ops& fp8_ops_of(Backend& backend);

class Fp8State {
  public:
    // params: the model's working weights (bf16, the flat vector of layout.h), read for the
    // weights' casts and written by the fused AdamW; comm: the ranks whose amaxes are MAX-reduced
    // (null for one process). max_B·max_T bounds the tokens of a pass; recompute: the model's
    // --recompute level (2: qkv and fc keep no Xᵀ either). The backend must allow these FP8 GEMM
    // shapes (Fp8Ops::fp8_gemm_multiple): checked by the model before.
    Fp8State(const GPTConfig& cfg, Backend& backend, const Fp8ScalingConfig& config, void* params, int max_B, int max_T,
             Comm* comm, int recompute = 0);
    ~Fp8State();
    Fp8State(const Fp8State&) = delete;
    Fp8State& operator=(const Fp8State&) = delete;

    // GEMM g of every block runs in FP8 (--fp8-gemms).
    bool runs(int g) const { return config_.gemms >> g & 1u; }
    bool runs_any() const { return config_.gemms != 0; }
    // Bytes of the FP8 activation copies for max_B·max_T tokens (see activation_bytes_for).
    size_t activation_bytes() const { return activation_bytes_; }
    // The same without building one: the kept Xᵀ of qkv and fc (every layer; none under
    // --recompute 2), one layer's Xᵀ cast again in backward, one GEMM's E5M2 dY in both layouts
    // (the first also holds the forward's E4M3 X).
    static size_t activation_bytes_for(const GPTConfig& cfg, size_t tokens, unsigned gemms, int recompute = 0);

    // ---- forward (out (N, out·C) of block GEMM g of layer l) ----------------------------------
    // A training pass (followed by backward) keeps the Xᵀ its backward reads and records every
    // cast's statistics; an evaluation or sampling pass does neither.
    void begin_forward(bool training) { training_ = training; }
    // out = layernorm(inp; ln_weight, ln_bias) · W[l]ᵀ + bias (qkv, fc): the layernorm writes
    // E4M3 (and its row mean, rstd (N) for backward), never 16-bit values.
    void layernorm_matmul_forward(int l, int g, void* out, float* mean, float* rstd, const void* inp,
                                  const void* ln_weight, const void* ln_bias, const void* bias, int N);
    // out = inp · W[l]ᵀ + bias (attproj: inp is the attention output; its E4M3 cast comes from the
    // attention itself where attention_forward_cast ran)
    void matmul_forward(int l, int g, void* out, const void* inp, const void* bias, int N);
    // The attention of layer l (Backend::attention_forward) whose output is attproj's X, with that
    // X's E4M3 cast for attproj's forward done as it is written (Fp8Ops::attention_forward_e4m3).
    // Returns false, having done nothing, where attproj does not run in FP8 or X's scale is not
    // known yet.
    bool attention_forward_cast(int l, void* out, float* lse, const void* qkv, int B, int T, int NH);
    // out = gelu(inp) · W[l]ᵀ + bias (fcproj: inp is fc's output): GELU writes E4M3 only
    void gelu_matmul_forward(int l, int g, void* out, const void* inp, const void* bias, int N);

    // ---- backward (as Backend::matmul_backward: dinp (N, in·C) written, dweight, dbias accumulated)
    // What the forward's X came from, where backward casts Xᵀ again: attproj: the attention output
    // (x); fcproj: fc's output (x), through GELU; qkv and fc, under --recompute 2 only: the residual
    // stream (x) through the layernorm with its parameters and saved row statistics.
    struct Source {
        const void* x = nullptr;
        const void* ln_weight = nullptr;
        const void* ln_bias = nullptr;
        const float* mean = nullptr;
        const float* rstd = nullptr;
    };
    void matmul_backward(int l, int g, void* dinp, float* dweight, float* dbias, const void* dout, const Source& inp,
                         int N);
    // The layernorm backward that produces the residual stream's gradient, which is the dY of
    // projection g (attproj, fcproj) of layer l, casting it to E5M2 for g's backward on the way
    // (Fp8Ops::layernorm_backward_e5m2; arguments as Backend::layernorm_backward). Returns false,
    // having done nothing, where g does not run in FP8 or its dY scale is not known yet.
    bool layernorm_backward_cast(int l, int g, void* dinp, float* dweight, float* dbias, const void* dout,
                                 const void* inp, const void* weight, const float* mean, const float* rstd, int N,
                                 float* dinp_sums);
    // The attention backward of layer l (Backend::attention_backward) whose output dqkv is qkv's dY,
    // casting it to E5M2 for qkv's backward on the way (Fp8Ops::attention_backward_e5m2). Returns
    // false, having done nothing, where qkv does not run in FP8 or its dY scale is not known yet.
    bool attention_backward_cast(int l, void* dqkv, const void* dout, const void* qkv, const void* out,
                                 const float* lse, int B, int T, int NH);
    // GELU backward into fc's backward: dfch (N, 4C) = gelu'(fch) ∘ dfch_gelu, as
    // Backend::gelu_backward (the bias gradient reads it), with its E5M2 cast fused in where the
    // scale is known; then fc's backward as matmul_backward with dout = dfch.
    void gelu_backward_matmul_backward(int l, int g, void* dinp, float* dweight, float* dbias, void* dfch,
                                       const void* fch, const void* dfch_gelu, const Source& inp, int N);

    // ---- the optimizer's half ----------------------------------------------------------------
    // End of step for every scaled tensor, before the update: the amaxes are MAX-reduced across
    // ranks, enter the histories, and the next scales follow; the step's statistics become the
    // last step's (telemetry).
    void end_step();
    // A skipped step (non-finite loss or gradients): forget this step's X and dY statistics.
    void discard_step();
    // AdamW of weight tensor param_tensor (all layers) can write its E4M3 copies in the same pass:
    // it is an FP8 GEMM's weight whose scales are known and `whole` (this rank updates all of it).
    bool casts_in_update(int param_tensor, bool whole) const;
    // Backend::adamw_update of that tensor, layer by layer, with the E4M3 W and Wᵀ written too.
    // master/m/v/grads point at the tensor's first value (master may be null).
    void adamw_update(int param_tensor, float* master, float* m, float* v, const float* grads, float lr, float beta1,
                      float beta2, float eps, float weight_decay, float grad_scale, int t);
    // The E4M3 copies of every FP8 GEMM's weights not written by adamw_update since the last call.
    void cast_weights();

    // ---- telemetry and checkpoints --------------------------------------------------------------
    std::vector<Fp8TensorReport> report() const;
    // Per GEMM instance (layer-major), its three tensors' scale, history (newest first) and steps.
    std::string to_json() const;
    // Then cast_weights(). dy_factor: the gradients of this run are the saving run's times this
    // (their unit, d(loss)/d(a token's loss) = 1 / (a rank's tokens per step), changed with the
    // number of ranks, -b, -t or the accumulation): every dY amax history is multiplied by it and
    // its scale follows by the delayed rule, so the casts map the same values onto the same FP8
    // codes. 1 restores exactly what was saved.
    void restore_json(const std::string& json, double dy_factor = 1.0);

  private:
    enum Operand { kX = 0, kW = 1, kDY = 2 };
    // The input X of a block GEMM, as its cast reads it: a tensor, or the producer's input with
    // the producer (layernorm, GELU) fused into the cast.
    struct CastInput {
        enum Kind { kTensor, kLayerNorm, kGelu } kind;
        const void* x;
        const void* ln_weight = nullptr;   // kLayerNorm: its parameters and the row statistics
        const void* ln_bias = nullptr;     //   (mean, rstd (N)) the cast writes for backward
        float* mean = nullptr;
        float* rstd = nullptr;
        bool stats_ready = false;   // kLayerNorm: mean, rstd hold the statistics (a cast before computed them)
    };

    GPTConfig cfg_;
    Backend& k_;
    Fp8Ops& f_;   // k_'s FP8 ops
    Fp8ScalingConfig config_;
    void* params_;
    std::array<size_t, kNumParamTensors + 1> offsets_;
    size_t max_tokens_;
    Comm* comm_;
    int recompute_;
    int instances_;   // L · kNumBlockGemms
    bool training_ = false;
    size_t activation_bytes_ = 0;
    std::array<bool, kNumBlockGemms> cast_by_update_{};
    long dy_cast_slot_ = -1;
    long x_cast_slot_ =
        -1;   // the X slot whose E4M3 copy a producer wrote for the next forward         // the dY slot whose E5M2 copies a producer wrote for the next backward
    // copies
    fp8e4m3* weights_ = nullptr;     // W of every FP8 GEMM, GEMM by GEMM, L layers each
    fp8e4m3* weights_t_ = nullptr;   // Wᵀ, likewise
    fp8e4m3* inputs_t_ = nullptr;    // the kept Xᵀ (qkv, fc), GEMM by GEMM, L layers each
    fp8e4m3* recast_t_ = nullptr;    // one layer's Xᵀ, cast again in backward (attproj, fcproj)
    fp8e4m3* x_ = nullptr;           // the forward's X; aliases dout_ (forward and backward never overlap)
    fp8e5m2* dout_ = nullptr;        // dY (N, out)
    fp8e5m2* dout_t_ = nullptr;      // dYᵀ (out, N)
    // scaling state, 3·instances_ slots (see the top of the file)
    Fp8ScaleSlot* scales_ = nullptr;
    float* history_ = nullptr;          // H floats per slot
    Fp8Counters* counters_ = nullptr;   // this step's, + one spare slot nobody reads
    Fp8Counters* counters_last_ = nullptr;
    Fp8Counters* jit_ = nullptr;     // just-in-time amaxes
    float* amax_buffer_ = nullptr;   // the amaxes MAX-reduced across ranks
    std::vector<int> hist_len_;      // host mirror: history lengths per slot
    std::vector<int64_t> steps_;     // host mirror: end_step calls per slot

    bool keeps_input_t(int g) const;
    CastInput recast_input(int g, const Source& s) const;
    size_t width(int g, bool out) const { return (size_t)(out ? kBlockGemms[g].out : kBlockGemms[g].in) * cfg_.n_embd; }
    size_t slot_index(Operand operand, int l, int g) const;
    Fp8Counters* counters(Operand operand, int l, int g) const { return counters_ + slot_index(operand, l, g); }
    Fp8Counters* spare_counters() const;   // evaluation passes, casts done twice
    Fp8ScaleSlot* scale(Operand operand, int l, int g) const { return scales_ + slot_index(operand, l, g); }
    bool needs_amax_now(Operand operand, int l, int g) const;
    void scale_just_in_time(Fp8ScaleSlot* slot, float fp8_max, const std::function<void(Fp8Counters*)>& record_amax);
    fp8e4m3* input_t(int l, int g, int N) const;
    fp8e4m3* weight(int l, int g, bool transposed) const;
    const void* working_weight(int l, int g) const;
    void cast_input(const CastInput& in, fp8e4m3* q, fp8e4m3* qt, int N, int C, const Fp8ScaleSlot* scale,
                    Fp8Counters* counters);
    void forward(int l, int g, void* out, const CastInput& inp, const void* bias, int N);
    void backward(int l, int g, void* dinp, float* dweight, float* dbias, const void* dout, bool dout_cast,
                  const Source& inp, int N);
};

}   // namespace train_gpt
