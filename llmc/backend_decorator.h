// backend_decorator.h — a Backend that forwards every op to another one, unchanged: the base of
// the kernel-set decorators that observe a run or alter one op for a test (train/op_trace.h,
// train/fault_injection.h), so the model and the step need no branch of theirs.
#pragma once

#include "backend.h"

#include <memory>
#include <utility>

namespace train_gpt {

class BackendDecorator : public Backend {
  public:
    explicit BackendDecorator(std::unique_ptr<Backend> inner) : k_(std::move(inner)) {}

    std::string name() const override { return k_->name(); }
    DType act_dtype() const override { return k_->act_dtype(); }
    Fp8Ops* fp8() override { return k_->fp8(); }

    void* alloc(size_t bytes) override { return k_->alloc(bytes); }
    void release(void* ptr) override { k_->release(ptr); }
    void copy_to_device(void* dst, const void* src, size_t bytes) override { k_->copy_to_device(dst, src, bytes); }
    void copy_to_host(void* dst, const void* src, size_t bytes) override { k_->copy_to_host(dst, src, bytes); }
    void zero(void* dst, size_t bytes) override { k_->zero(dst, bytes); }
    void synchronize() override { k_->synchronize(); }
    void float_to_act(void* dst, const float* src, size_t n) override { k_->float_to_act(dst, src, n); }
    void act_to_float(float* dst, const void* src, size_t n) override { k_->act_to_float(dst, src, n); }

    void encoder_forward(void* out, const int32_t* tokens, const void* wte, const void* wpe, int B, int T,
                         int C) override {
        k_->encoder_forward(out, tokens, wte, wpe, B, T, C);
    }
    void encoder_backward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens, int B, int T,
                          int C) override {
        k_->encoder_backward(dwte, dwpe, dout, tokens, B, T, C);
    }
    void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* weight, const void* bias,
                           int N, int C) override {
        k_->layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
    }
    void layernorm_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                            const void* weight, const float* mean, const float* rstd, int N, int C,
                            float* dinp_sums) override {
        k_->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, dinp_sums);
    }
    void residual_layernorm_forward(void* residual, void* out, float* mean, float* rstd, const void* a, const void* b,
                                    const void* weight, const void* bias, int N, int C) override {
        k_->residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C);
    }
    void matmul_forward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                        int OC) override {
        k_->matmul_forward(out, inp, weight, bias, N, C, OC);
    }
    void matmul_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                         const void* weight, int N, int C, int OC) override {
        k_->matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    }
    void attention_forward(void* out, float* lse, const void* qkv, int B, int T, int C, int NH) override {
        k_->attention_forward(out, lse, qkv, B, T, C, NH);
    }
    void attention_decode(void* out, const void* qkv, int pos, int n, int C, int NH) override {
        k_->attention_decode(out, qkv, pos, n, C, NH);
    }
    void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, int B,
                            int T, int C, int NH) override {
        k_->attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH);
    }
    void gelu_forward(void* out, const void* inp, size_t n) override { k_->gelu_forward(out, inp, n); }
    void gelu_backward(void* dinp, const void* inp, const void* dout, size_t n) override {
        k_->gelu_backward(dinp, inp, dout, n);
    }
    void matmul_forward_gelu(void* out, void* pre, const void* inp, const void* weight, const void* bias, int N, int C,
                             int OC) override {
        k_->matmul_forward_gelu(out, pre, inp, weight, bias, N, C, OC);
    }
    void matmul_backward_dgelu(void* dinp, const void* dout, const void* weight, const void* pre, int N, int C,
                               int OC) override {
        k_->matmul_backward_dgelu(dinp, dout, weight, pre, N, C, OC);
    }
    void gelu_backward_bias(void* dinp, float* dbias, const void* inp, const void* dout, int rows, int cols) override {
        k_->gelu_backward_bias(dinp, dbias, inp, dout, rows, cols);
    }
    void residual_forward(void* out, const void* a, const void* b, size_t n) override {
        k_->residual_forward(out, a, b, n);
    }
    void fused_classifier(void* dlogits, float* losses, const void* logits, const int32_t* targets, int N, int V,
                          int Vp, float dloss) override {
        k_->fused_classifier(dlogits, losses, logits, targets, N, V, Vp, dloss);
    }
    double sum_squares(const float* g, size_t n) override { return k_->sum_squares(g, n); }
    void adamw_update(float* master, void* working, float* m, float* v, const float* grads, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) override {
        k_->adamw_update(master, working, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    }

  protected:
    std::unique_ptr<Backend> k_;
};

}   // namespace train_gpt
