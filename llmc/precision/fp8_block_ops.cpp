// fp8_block_ops.cpp — fp8 mode's block ops (fp8_block_ops.h): the Fp8State where the GEMM runs in
// FP8, else the 16-bit BlockOps.
#include "precision/fp8_block_ops.h"

#include "utils.h"

namespace train_gpt {

namespace {
// What an FP8 GEMM casts its Xᵀ again from in backward (Fp8State::Source): the layernorm of the
// residual stream with its parameters and saved statistics, or a tensor the model keeps.
Fp8State::Source source_of(const LayernormInput& x) { return {x.inp, x.weight, x.bias, x.mean, x.rstd}; }
Fp8State::Source source_of(const void* x) { return {x}; }
}   // namespace

Fp8BlockOps::Fp8BlockOps(Backend& backend, const ModelTensors& tensors, int recompute, Fp8State& fp8)
    : BlockOps(backend, tensors, recompute), fp8_(fp8) {}

void Fp8BlockOps::begin_forward(int B, int T, bool training) {
    // the weight gradients' FP8 GEMMs reduce over B·T
    const int multiple = fp8_ops_of(k_).fp8_gemm_multiple(), N = B * T;
    if (training && fp8_.runs_any() && N % multiple != 0) {
        fail("fp8 training on %s: B·T = %d·%d = %d must be a multiple of %d (FP8 tensor-core GEMMs reduce over it)",
             k_.name().c_str(), B, T, N, multiple);
    }
    fp8_.begin_forward(training);
}

// The first block's ln1: none when qkv runs in FP8 (its cast computes the layernorm).
void Fp8BlockOps::layernorm_forward(int g, const LayernormInput& x, int N) {
    if (!fp8_.runs(g)) BlockOps::layernorm_forward(g, x, N);
}

// The residual add alone where GEMM g runs in FP8: its cast computes the layernorm.
void Fp8BlockOps::residual_layernorm_forward(int g, void* residual, const void* a, const void* b,
                                             const LayernormInput& x, int N) {
    if (g == kNoBlockGemm || !fp8_.runs(g)) return BlockOps::residual_layernorm_forward(g, residual, a, b, x, N);
    k_.residual_forward(residual, a, b, (size_t)N * C_);
}

void Fp8BlockOps::layernorm_matmul_forward(int l, int g, void* out, const LayernormInput& x, int N) {
    if (!fp8_.runs(g)) return BlockOps::layernorm_matmul_forward(l, g, out, x, N);
    fp8_.layernorm_matmul_forward(l, g, out, x.mean, x.rstd, x.inp, x.weight, x.bias, tensors_.bias(l, g), N);
}

// The attention writes attproj's E4M3 X as it writes its output, where attproj runs in FP8 and
// the scale is known.
void Fp8BlockOps::attention_forward(int l, void* out, float* lse, const void* qkv, int B, int T) {
    if (fp8_.runs(kAttproj) && fp8_.attention_forward_cast(l, out, lse, qkv, B, T, NH_)) return;
    BlockOps::attention_forward(l, out, lse, qkv, B, T);
}

void Fp8BlockOps::matmul_forward(int l, int g, void* out, const void* inp, int N) {
    if (!fp8_.runs(g)) return BlockOps::matmul_forward(l, g, out, inp, N);
    fp8_.matmul_forward(l, g, out, inp, tensors_.bias(l, g), N);
}

// GELU writes fcproj's E4M3 X only (gelu_out is not written).
void Fp8BlockOps::gelu_matmul_forward(int l, int g, void* out, void* gelu_out, const void* inp, int N) {
    if (!fp8_.runs(g)) return BlockOps::gelu_matmul_forward(l, g, out, gelu_out, inp, N);
    fp8_.gelu_matmul_forward(l, g, out, inp, tensors_.bias(l, g), N);
}

// The layernorm backward casts projection g's dY to E5M2 as it writes it, where g runs in FP8 and
// the scale is known.
void Fp8BlockOps::layernorm_backward(int l, int g, void* dresidual, const void* dln, const LayernormInput& x, int N) {
    if (l >= 0 && fp8_.runs(g) &&
        fp8_.layernorm_backward_cast(l, g, dresidual, x.dweight, x.dbias, dln, x.inp, x.weight, x.mean, x.rstd, N,
                                     tensors_.dbias(l, g))) {
        return;
    }
    BlockOps::layernorm_backward(l, g, dresidual, dln, x, N);
}

// fcproj in FP8 casts its Xᵀ again from gelu_in, through GELU: nothing to recompute.
void Fp8BlockOps::gelu_matmul_backward(int l, int g, void* dinp, const void* dout, void* gelu_out, const void* gelu_in,
                                       int N) {
    if (!fp8_.runs(g)) return BlockOps::gelu_matmul_backward(l, g, dinp, dout, gelu_out, gelu_in, N);
    fp8_.matmul_backward(l, g, dinp, tensors_.dweight(l, g), nullptr, dout, source_of(gelu_in), N);
}

// fc in FP8: the E5M2 cast of dgelu_in fused into GELU backward.
void Fp8BlockOps::gelu_backward_layernorm_matmul_backward(int l, int g, void* dinp, void* dgelu_in,
                                                          const void* dgelu_out, const void* gelu_in,
                                                          const LayernormInput& x, int N) {
    if (!fp8_.runs(g)) {
        return BlockOps::gelu_backward_layernorm_matmul_backward(l, g, dinp, dgelu_in, dgelu_out, gelu_in, x, N);
    }
    fp8_.gelu_backward_matmul_backward(l, g, dinp, tensors_.dweight(l, g), tensors_.dbias(l, g), dgelu_in, gelu_in,
                                       dgelu_out, source_of(x), N);
}

void Fp8BlockOps::matmul_backward(int l, int g, void* dinp, const void* dout, const void* inp, int N) {
    if (!fp8_.runs(g)) return BlockOps::matmul_backward(l, g, dinp, dout, inp, N);
    fp8_.matmul_backward(l, g, dinp, tensors_.dweight(l, g), nullptr, dout, source_of(inp), N);
}

// The attention backward casts qkv's dY to E5M2 as it writes it, where qkv runs in FP8 and the
// scale is known.
void Fp8BlockOps::attention_backward(int l, void* dqkv, const void* dout, const void* qkv, const void* out,
                                     const float* lse, int B, int T) {
    if (fp8_.runs(kQkv) && fp8_.attention_backward_cast(l, dqkv, dout, qkv, out, lse, B, T, NH_)) return;
    BlockOps::attention_backward(l, dqkv, dout, qkv, out, lse, B, T);
}

void Fp8BlockOps::layernorm_matmul_backward(int l, int g, void* dinp, const void* dout, const LayernormInput& x,
                                            int N) {
    if (!fp8_.runs(g)) return BlockOps::layernorm_matmul_backward(l, g, dinp, dout, x, N);
    fp8_.matmul_backward(l, g, dinp, tensors_.dweight(l, g), tensors_.dbias(l, g), dout, source_of(x), N);
}

// The optimizer's half of delayed scaling: the step ends for every scaled tensor first, then AdamW
// writes an FP8 GEMM's weight copies in its own pass where it can (Fp8State::casts_in_update).
void Fp8BlockOps::begin_update() { fp8_.end_step(); }

void Fp8BlockOps::adamw_update(int tensor, bool whole, float* master, void* working, float* m, float* v,
                               const float* grads, size_t n, float lr, float beta1, float beta2, float eps,
                               float weight_decay, float grad_scale, int t) {
    if (!fp8_.casts_in_update(tensor, whole)) {   // the 16-bit update; weights_changed() casts the copies
        BlockOps::adamw_update(tensor, whole, master, working, m, v, grads, n, lr, beta1, beta2, eps, weight_decay,
                               grad_scale, t);
        return;
    }
    fp8_.adamw_update(tensor, master, m, v, grads, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}

void Fp8BlockOps::weights_changed() { fp8_.cast_weights(); }

void Fp8BlockOps::discard_step() { fp8_.discard_step(); }

}   // namespace train_gpt
