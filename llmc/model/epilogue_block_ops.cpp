// epilogue_block_ops.cpp — the block ops of --gemm-epilogues (epilogue_block_ops.h).
#include "model/epilogue_block_ops.h"

#include "utils.h"

namespace train_gpt {

EpilogueBlockOps::EpilogueBlockOps(Backend& backend, const ModelTensors& tensors)
    : BlockOps(backend, tensors, /*recompute=*/0) {}

void EpilogueBlockOps::layernorm_matmul_forward(int l, int g, void* out, const LayernormInput& x, int N) {
    if (g != kFc) return BlockOps::layernorm_matmul_forward(l, g, out, x, N);
    fc_inp_ = x.out, fc_out_ = out, fc_layer_ = l;   // the GEMM runs with its GELU, in gelu_matmul_forward
}

void EpilogueBlockOps::gelu_matmul_forward(int l, int g, void* out, void* gelu_out, const void* inp, int N) {
    if (fc_layer_ != l || fc_out_ != inp) fail("EpilogueBlockOps: fcproj of layer %d without its fc before it", l);
    // fch (N, 4C) = ln2 · W_fcᵀ + b_fc, gelu_out = gelu(fch): one GEMM
    k_.matmul_forward_gelu(gelu_out, fc_out_, fc_inp_, tensors_.weight(l, kFc), tensors_.bias(l, kFc), N, C_,
                           kBlockGemms[kFc].out * C_);
    fc_layer_ = -1;
    BlockOps::matmul_forward(l, g, out, gelu_out, N);
}

void EpilogueBlockOps::layernorm_backward(int, int, void* dresidual, const void* dln, const LayernormInput& x, int N) {
    // the projection's bias gradient is its GEMM backward's (below), not summed here
    k_.layernorm_backward(dresidual, x.dweight, x.dbias, dln, x.inp, x.weight, x.mean, x.rstd, N, C_, nullptr);
}

void EpilogueBlockOps::gelu_matmul_backward(int l, int g, void* dinp, const void* dout, void* gelu_out,
                                            const void* gelu_in, int N) {
    const int in = kBlockGemms[g].in * C_, outc = kBlockGemms[g].out * C_;
    // dW_fcproj += doutᵀ · gelu_out, db_fcproj += Σ_rows dout
    k_.matmul_backward(nullptr, tensors_.dweight(l, g), tensors_.dbias(l, g), dout, gelu_out, tensors_.weight(l, g), N,
                       in, outc);
    // dinp = gelu'(fch) ∘ (dout · W_fcproj): fc's output gradient dfch, in the buffer of dfch_gelu
    k_.matmul_backward_dgelu(dinp, dout, tensors_.weight(l, g), gelu_in, N, in, outc);
}

void EpilogueBlockOps::gelu_backward_layernorm_matmul_backward(int l, int g, void* dinp, void*, const void* dgelu_out,
                                                               const void*, const LayernormInput& x, int N) {
    // dgelu_out holds dfch already (gelu_matmul_backward above): fc's GEMM backward with its bias gradient
    k_.matmul_backward(dinp, tensors_.dweight(l, g), tensors_.dbias(l, g), dgelu_out, x.out, tensors_.weight(l, g), N,
                       kBlockGemms[g].in * C_, kBlockGemms[g].out * C_);
}

void EpilogueBlockOps::matmul_backward(int l, int g, void* dinp, const void* dout, const void* inp, int N) {
    k_.matmul_backward(dinp, tensors_.dweight(l, g), tensors_.dbias(l, g), dout, inp, tensors_.weight(l, g), N,
                       kBlockGemms[g].in * C_, kBlockGemms[g].out * C_);
}

}   // namespace train_gpt
