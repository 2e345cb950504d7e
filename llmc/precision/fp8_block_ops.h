// fp8_block_ops.h — the block ops of fp8 mode (model/block_ops.h): a block GEMM selected by
// --fp8-gemms runs on FP8 operands through the Fp8State (precision/fp8_state.h), its input's cast
// fused into the op that produces it (the layernorm, the attention, GELU) and its output
// gradient's cast into the op that produces that (the layernorm backward, the attention backward,
// GELU backward); a 16-bit layernorm or GELU output that only an FP8 GEMM would read is never
// written. The other GEMMs, and the ops of a GEMM whose scale is not known yet, are BlockOps'.
#pragma once

#include "model/block_ops.h"
#include "precision/fp8_state.h"

namespace train_gpt {

class Fp8BlockOps : public BlockOps {
  public:
    Fp8BlockOps(Backend& backend, const ModelTensors& tensors, int recompute, Fp8State& fp8);

    void begin_forward(int B, int T, bool training) override;
    void layernorm_forward(int g, const LayernormInput& x, int N) override;
    void residual_layernorm_forward(int g, void* residual, const void* a, const void* b, const LayernormInput& x,
                                    int N) override;
    void layernorm_matmul_forward(int l, int g, void* out, const LayernormInput& x, int N) override;
    void attention_forward(int l, void* out, float* lse, const void* qkv, int B, int T) override;
    void matmul_forward(int l, int g, void* out, const void* inp, int N) override;
    void gelu_matmul_forward(int l, int g, void* out, void* gelu_out, const void* inp, int N) override;

    void layernorm_backward(int l, int g, void* dresidual, const void* dln, const LayernormInput& x, int N) override;
    void gelu_matmul_backward(int l, int g, void* dinp, const void* dout, void* gelu_out, const void* gelu_in,
                              int N) override;
    void gelu_backward_layernorm_matmul_backward(int l, int g, void* dinp, void* dgelu_in, const void* dgelu_out,
                                                 const void* gelu_in, const LayernormInput& x, int N) override;
    void matmul_backward(int l, int g, void* dinp, const void* dout, const void* inp, int N) override;
    void attention_backward(int l, void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse,
                            int B, int T) override;
    void layernorm_matmul_backward(int l, int g, void* dinp, const void* dout, const LayernormInput& x, int N) override;

    void begin_update() override;
    void adamw_update(int tensor, bool whole, float* master, void* working, float* m, float* v, const float* grads,
                      size_t n, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                      int t) override;
    void weights_changed() override;
    void discard_step() override;

  private:
    Fp8State& fp8_;
};

}   // namespace train_gpt
