// block_ops.h — the ops of a transformer block as the model's step calls them: each block GEMM
// together with the op that produces its input ("layernorm → GEMM", "attention → GEMM",
// "GELU → GEMM") and the op that produces its output gradient (a layernorm backward, the
// attention backward, a GELU backward).
//
// BlockOps is the 16-bit implementation (fp32, bf16, fp16): each call is one or two ops of the
// kernel set (backend.h), and --recompute's second forward of a layernorm or GELU output happens
// here, just before the backward that reads it. fp8 mode builds an Fp8BlockOps instead
// (precision/fp8_block_ops.h), which runs the GEMMs selected by --fp8-gemms on FP8 operands and
// fuses each operand's cast into its producer; the model's step is the same in every precision.
//
// Shapes: N = B·T rows, C = n_embd; block GEMM g (model/layout.h) of layer l maps (N, in·C) to
// (N, out·C) with the weight W[l] (out·C, in·C) and bias b[l] (out·C). Gradients follow
// backend.h: dW, db accumulate (+=), activation gradients are overwritten, a layernorm backward
// adds into the residual stream's gradient.
#pragma once

#include "backend.h"
#include "model/layout.h"

#include <array>
#include <cstddef>

namespace train_gpt {

// A block GEMM's input that a layernorm produces: out (N, C) = layernorm(inp) with its row
// statistics mean, rstd (N), and the layernorm's parameters with their gradients. out is none
// (and never written) where the GEMM runs in FP8: its cast computes the layernorm.
struct LayernormInput {
    const void* inp = nullptr;                       // (N, C) the residual stream
    void* out = nullptr;                             // (N, C)
    float* mean = nullptr;                           // (N)
    float* rstd = nullptr;                           // (N)
    const void *weight = nullptr, *bias = nullptr;   // (C)
    float *dweight = nullptr, *dbias = nullptr;      // (C)
};

// Where the model's parameters are: the working weights (activation dtype) and their FP32
// gradients, as flat vectors in the order of layout.h.
struct ModelTensors {
    GPTConfig cfg;
    void* params = nullptr;
    float* grads = nullptr;
    std::array<size_t, kNumParamTensors + 1> offsets{};
    size_t act_size = 0;   // bytes per working-weight value

    const void* weight(int l, int g) const;   // W[l] of block GEMM g, (out·C, in·C)
    const void* bias(int l, int g) const;     // b[l], (out·C)
    float* dweight(int l, int g) const;       // their gradients
    float* dbias(int l, int g) const;
};

// The consumer of a layernorm's output that is not a block GEMM: the LM head after lnf.
inline constexpr int kNoBlockGemm = -1;

class BlockOps {
  public:
    // recompute: --recompute (1: GELU outputs, 2: also layernorm outputs are kept for one layer
    // only and computed again in backward)
    BlockOps(Backend& backend, const ModelTensors& tensors, int recompute);
    virtual ~BlockOps() = default;

    // The start of a forward pass over (B, T) (training: backward follows).
    virtual void begin_forward(int B, int T, bool training);

    // ---- forward ----
    // The first block's ln1: x.out, mean, rstd = layernorm(x.inp), the input of GEMM g.
    virtual void layernorm_forward(int g, const LayernormInput& x, int N);
    // residual (N, C) = a + b, and x.out, mean, rstd = layernorm(residual) (x.inp is residual):
    // the input of GEMM g (kNoBlockGemm: the LM head's), the residual add fused into the layernorm.
    virtual void residual_layernorm_forward(int g, void* residual, const void* a, const void* b,
                                            const LayernormInput& x, int N);
    // out (N, out·C) = layernorm(x) · W[l]ᵀ + b[l] (qkv, fc), from x.out where the layernorm wrote it
    virtual void layernorm_matmul_forward(int l, int g, void* out, const LayernormInput& x, int N);
    // causal self-attention of layer l: out (B, T, C), lse (B, NH, T) from qkv (B, T, 3C): the
    // input of attproj
    virtual void attention_forward(int l, void* out, float* lse, const void* qkv, int B, int T);
    // out (N, out·C) = inp · W[l]ᵀ + b[l] (attproj)
    virtual void matmul_forward(int l, int g, void* out, const void* inp, int N);
    // gelu_out (N, in·C) = gelu(inp), out (N, out·C) = gelu_out · W[l]ᵀ + b[l] (fcproj)
    virtual void gelu_matmul_forward(int l, int g, void* out, void* gelu_out, const void* inp, int N);

    // ---- backward ----
    // The backward of layernorm x (dinp += into the residual stream's gradient dresidual, from
    // dout = dln): the residual stream's gradient is the output gradient of projection g of layer l
    // (attproj, fcproj), whose bias gradient sums its rows in the same pass. l < 0: the embeddings'
    // (no projection below).
    virtual void layernorm_backward(int l, int g, void* dresidual, const void* dln, const LayernormInput& x, int N);
    // dinp (N, in·C) = dout · W[l]; dW[l] += doutᵀ · gelu_out; gelu_out = gelu(gelu_in), computed
    // again first under --recompute ≥ 1 (fcproj; its bias gradient: the layernorm backward's)
    virtual void gelu_matmul_backward(int l, int g, void* dinp, const void* dout, void* gelu_out, const void* gelu_in,
                                      int N);
    // dgelu_in (N, out·C) = gelu'(gelu_in) ∘ dgelu_out, the output gradient of GEMM g, whose bias
    // gradient sums it in the same pass; then dinp = dgelu_in · W[l], dW[l] += dgelu_inᵀ · layernorm(x)
    // (fc; x.out computed again first under --recompute 2)
    virtual void gelu_backward_layernorm_matmul_backward(int l, int g, void* dinp, void* dgelu_in,
                                                         const void* dgelu_out, const void* gelu_in,
                                                         const LayernormInput& x, int N);
    // dinp (N, in·C) = dout · W[l]; dW[l] += doutᵀ · inp (attproj; its bias gradient: the
    // layernorm backward's)
    virtual void matmul_backward(int l, int g, void* dinp, const void* dout, const void* inp, int N);
    // dqkv (B, T, 3C) = the attention backward of layer l from dout (B, T, C): qkv's output gradient
    virtual void attention_backward(int l, void* dqkv, const void* dout, const void* qkv, const void* out,
                                    const float* lse, int B, int T);
    // dinp (N, C) = dout · W[l]; dW[l] += doutᵀ · layernorm(x); db[l] += Σ_rows dout (qkv; x.out
    // computed again first under --recompute 2)
    virtual void layernorm_matmul_backward(int l, int g, void* dinp, const void* dout, const LayernormInput& x, int N);

    // ---- the optimizer step (GPT::update) ----
    // Before the update (fp8 mode: every scaled tensor's step ends, so the weights' next scales are
    // known when AdamW writes their E4M3 copies).
    virtual void begin_update() {}
    // AdamW of this rank's n values of parameter tensor `tensor` (all of it: `whole`) at
    // master/working/m/v/grads: Backend::adamw_update (fp8 mode: with the weight's E4M3 copies
    // written in the same pass, where it can).
    virtual void adamw_update(int tensor, bool whole, float* master, void* working, float* m, float* v,
                              const float* grads, size_t n, float lr, float beta1, float beta2, float eps,
                              float weight_decay, float grad_scale, int t);
    // The working weights changed (an update, new weights, a restored checkpoint): fp8 mode casts
    // the E4M3 copies AdamW did not write.
    virtual void weights_changed() {}
    // A skipped step (non-finite loss or gradients): fp8 mode forgets the step's amaxes.
    virtual void discard_step() {}

  protected:
    Backend& k_;
    const ModelTensors& tensors_;
    int recompute_;
    int C_, NH_;
};

}   // namespace train_gpt
