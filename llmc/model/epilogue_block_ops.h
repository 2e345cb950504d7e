// epilogue_block_ops.h — the 16-bit block ops with GELU and the bias gradients folded into the
// GEMMs (--gemm-epilogues; experimental until a GPU run validates it): on the CUDA kernel set,
// cuBLASLt's epilogues (cuda/matmul_epilogues.cuh), on the CPU kernel set their twins.
//
//   forward   fc's GEMM writes fch and fch_gelu = gelu(fch) at once (matmul_forward_gelu): the
//             GELU pass before fcproj goes
//   backward  fcproj's dinp GEMM applies gelu'(fch) to its result (matmul_backward_dgelu), so it
//             writes fc's output gradient dfch directly: the GELU backward pass goes
//             every bias gradient is summed by its GEMM's backward (matmul_backward with dbias;
//             the CUDA kernel set sums it in the dW GEMM's BGRADB epilogue), none by a layernorm
//             or GELU backward
//
// The GELU epilogues round once where the separate ops round twice (backend.h,
// matmul_forward_gelu): in fp32 every bit is the same as BlockOps', in bf16/fp16 the GELU output
// and fc's output gradient differ by about one rounding. 16-bit and fp32 precisions only (fp8
// fuses its casts into the GELU instead), and not with --recompute: the GELU output computed
// again from the rounded fch would not be the one the forward used.
//
// The model's step is unchanged: it calls layernorm_matmul_forward (fc) and then
// gelu_matmul_forward (fcproj) as for BlockOps. Here the first only notes fc's input and output,
// and the second runs fc's GEMM with the GELU epilogue, then fcproj's; in backward,
// gelu_matmul_backward (fcproj) leaves dfch, not dfch_gelu, in the buffer it is given, and
// gelu_backward_layernorm_matmul_backward (fc) reads it from there.
#pragma once

#include "model/block_ops.h"

namespace train_gpt {

class EpilogueBlockOps final : public BlockOps {
  public:
    EpilogueBlockOps(Backend& backend, const ModelTensors& tensors);

    void layernorm_matmul_forward(int l, int g, void* out, const LayernormInput& x, int N) override;
    void gelu_matmul_forward(int l, int g, void* out, void* gelu_out, const void* inp, int N) override;

    void layernorm_backward(int l, int g, void* dresidual, const void* dln, const LayernormInput& x, int N) override;
    void gelu_matmul_backward(int l, int g, void* dinp, const void* dout, void* gelu_out, const void* gelu_in,
                              int N) override;
    void gelu_backward_layernorm_matmul_backward(int l, int g, void* dinp, void* dgelu_in, const void* dgelu_out,
                                                 const void* gelu_in, const LayernormInput& x, int N) override;
    void matmul_backward(int l, int g, void* dinp, const void* dout, const void* inp, int N) override;

  private:
    // fc of the layer being run forward: its input (ln2's output) and its output buffer (fch),
    // noted by layernorm_matmul_forward for gelu_matmul_forward
    const void* fc_inp_ = nullptr;
    void* fc_out_ = nullptr;
    int fc_layer_ = -1;
};

}   // namespace train_gpt
