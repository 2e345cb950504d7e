// block_ops.cpp — the 16-bit block ops (block_ops.h): each one or two kernel-set calls.
#include "model/block_ops.h"

namespace train_gpt {

namespace {
const void* at(const void* base, size_t elements, size_t value_bytes) {
    return static_cast<const char*>(base) + elements * value_bytes;
}
}   // namespace

const void* ModelTensors::weight(int l, int g) const {
    const BlockGemmInfo& gemm = kBlockGemms[g];
    const size_t C = cfg.n_embd;
    return at(params, offsets[gemm.weight] + (size_t)l * gemm.out * C * gemm.in * C, act_size);
}
const void* ModelTensors::bias(int l, int g) const {
    return at(params, offsets[kBlockGemms[g].bias] + (size_t)l * kBlockGemms[g].out * cfg.n_embd, act_size);
}
float* ModelTensors::dweight(int l, int g) const {
    const BlockGemmInfo& gemm = kBlockGemms[g];
    const size_t C = cfg.n_embd;
    return grads + offsets[gemm.weight] + (size_t)l * gemm.out * C * gemm.in * C;
}
float* ModelTensors::dbias(int l, int g) const {
    return grads + offsets[kBlockGemms[g].bias] + (size_t)l * kBlockGemms[g].out * cfg.n_embd;
}

BlockOps::BlockOps(Backend& backend, const ModelTensors& tensors, int recompute)
    : k_(backend), tensors_(tensors), recompute_(recompute), C_(tensors.cfg.n_embd), NH_(tensors.cfg.n_head) {}

void BlockOps::begin_forward(int, int, bool) {}

void BlockOps::layernorm_forward(int, const LayernormInput& x, int N) {
    k_.layernorm_forward(x.out, x.mean, x.rstd, x.inp, x.weight, x.bias, N, C_);
}

void BlockOps::residual_layernorm_forward(int, void* residual, const void* a, const void* b, const LayernormInput& x,
                                          int N) {
    k_.residual_layernorm_forward(residual, x.out, x.mean, x.rstd, a, b, x.weight, x.bias, N, C_);
}

void BlockOps::layernorm_matmul_forward(int l, int g, void* out, const LayernormInput& x, int N) {
    BlockOps::matmul_forward(l, g, out, x.out, N);
}

void BlockOps::attention_forward(int, void* out, float* lse, const void* qkv, int B, int T) {
    k_.attention_forward(out, lse, qkv, B, T, C_, NH_);
}

void BlockOps::matmul_forward(int l, int g, void* out, const void* inp, int N) {
    k_.matmul_forward(out, inp, tensors_.weight(l, g), tensors_.bias(l, g), N, kBlockGemms[g].in * C_,
                      kBlockGemms[g].out * C_);
}

void BlockOps::gelu_matmul_forward(int l, int g, void* out, void* gelu_out, const void* inp, int N) {
    k_.gelu_forward(gelu_out, inp, (size_t)N * kBlockGemms[g].in * C_);
    BlockOps::matmul_forward(l, g, out, gelu_out, N);
}

void BlockOps::layernorm_backward(int l, int g, void* dresidual, const void* dln, const LayernormInput& x, int N) {
    k_.layernorm_backward(dresidual, x.dweight, x.dbias, dln, x.inp, x.weight, x.mean, x.rstd, N, C_,
                          l >= 0 ? tensors_.dbias(l, g) : nullptr);
}

// the 16-bit GEMM backward, its bias gradient summed elsewhere when dbias is null
static void gemm_backward(Backend& k, const ModelTensors& t, int l, int g, void* dinp, const void* dout,
                          const void* inp, float* dbias, int N) {
    const int C = t.cfg.n_embd;
    k.matmul_backward(dinp, t.dweight(l, g), dbias, dout, inp, t.weight(l, g), N, kBlockGemms[g].in * C,
                      kBlockGemms[g].out * C);
}

void BlockOps::gelu_matmul_backward(int l, int g, void* dinp, const void* dout, void* gelu_out, const void* gelu_in,
                                    int N) {
    if (recompute_ >= 1) k_.gelu_forward(gelu_out, gelu_in, (size_t)N * kBlockGemms[g].in * C_);
    gemm_backward(k_, tensors_, l, g, dinp, dout, gelu_out, nullptr, N);
}

void BlockOps::gelu_backward_layernorm_matmul_backward(int l, int g, void* dinp, void* dgelu_in, const void* dgelu_out,
                                                       const void* gelu_in, const LayernormInput& x, int N) {
    if (recompute_ >= 2) k_.layernorm_forward(x.out, x.mean, x.rstd, x.inp, x.weight, x.bias, N, C_);
    k_.gelu_backward_bias(dgelu_in, tensors_.dbias(l, g), gelu_in, dgelu_out, N, kBlockGemms[g].out * C_);
    gemm_backward(k_, tensors_, l, g, dinp, dgelu_in, x.out, nullptr, N);
}

void BlockOps::matmul_backward(int l, int g, void* dinp, const void* dout, const void* inp, int N) {
    gemm_backward(k_, tensors_, l, g, dinp, dout, inp, nullptr, N);
}

void BlockOps::attention_backward(int, void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse,
                                  int B, int T) {
    k_.attention_backward(dqkv, dout, qkv, out, lse, B, T, C_, NH_);
}

void BlockOps::layernorm_matmul_backward(int l, int g, void* dinp, const void* dout, const LayernormInput& x, int N) {
    if (recompute_ >= 2) k_.layernorm_forward(x.out, x.mean, x.rstd, x.inp, x.weight, x.bias, N, C_);
    gemm_backward(k_, tensors_, l, g, dinp, dout, x.out, tensors_.dbias(l, g), N);
}

void BlockOps::adamw_update(int, bool, float* master, void* working, float* m, float* v, const float* grads, size_t n,
                            float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                            int t) {
    k_.adamw_update(master, working, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}

}   // namespace train_gpt
