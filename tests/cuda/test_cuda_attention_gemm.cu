// test_cuda_attention_gemm.cu — the cuBLASLt attention (llmc/cuda/attention_gemm.cuh) against its
// CPU twin, cpu::attention_forward / cpu::attention_backward, in fp32, bf16 and fp16.
//
// The launchers are called directly, on
// a stream of the test's own, on the Twin's device buffers; the CPU side runs through the CPU
// backend. Method and tolerances as the attention tests of test_cuda_kernels.cu (same shapes,
// same bounds): out, lse and dqkv within tests/attention_bounds.h's element-wise bounds for the
// shape's head size (twin_bounds.h, attention_*_bounds_any), normwise; overwritten outputs
// poisoned first (dqkv is overwritten; a second run into random values must give the same bits).
// Added here:
//   * a shape with T not a multiple of 64 (nor of 8: the T×T buffers' padded rows) and hs = 96
//     (scale = 1/√96 is not a power of two: the GEMM path applies it to the FP32 sum, the CPU to
//     each term);
//   * a shape processed in several chunks (a scratch budget of two sequences, B = 5: chunks of
//     2, 2 and 1), forward and backward;
//   * determinism: two backward runs give bit-identical dqkv.
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/test_stream.h"

#include "cpu/kernels.h"
#include "cuda/attention_gemm.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

using namespace train_gpt;
using namespace train_gpt::test;
namespace gpu = train_gpt::cuda;   // as the dev/cuda harnesses name it

namespace {

struct Shape {
    int B, T, C, NH;
};
// test_cuda_kernels.cu's attention shapes, then T = 203 with hs = 96
const Shape kShapes[] = {{2, 77, 192, 3}, {1, 1, 128, 2}, {4, 128, 128, 2}, {3, 203, 192, 2}};
// several chunks: a budget of exactly two sequences' scratch
const Shape kChunked = {5, 67, 128, 2};
constexpr int kChunkSequences = 2;

std::string shape_str(const Shape& s) {
    return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) +
           " NH=" + std::to_string(s.NH);
}

// f(E{}) with E the device storage type of d.
template <typename F>
void with_device_type(DType d, F f) {
    switch (d) {
        case DType::F32: f(float{}); return;
        case DType::BF16: f(__nv_bfloat16{}); return;
        case DType::F16: f(__half{}); return;
    }
}

size_t budget_for(const Shape& s, DType d, bool backward, int sequences) {
    return gpu::attention_gemm_detail::scratch_bytes(sequences, s.T, s.C, s.NH, dtype_size(d), backward);
}

// out and lse from the GEMM forward against the CPU twin's.
void check_forward(DType d, const Shape& s, uint64_t seed, size_t budget) {
    Twin tw(d);
    Random r(seed);
    Twin::Buf qkv = tw.act(r.normal((size_t)s.B * s.T * 3 * s.C, 1.5));   // peaked softmax rows too
    Twin::Buf out = tw.poisoned_act((size_t)s.B * s.T * s.C);
    Twin::Buf lse = tw.poisoned_f32((size_t)s.B * s.NH * s.T);
    tw.cpu().attention_forward(out.c, lse.cp<float>(), qkv.c, s.B, s.T, s.C, s.NH);
    TestStream stream;
    with_device_type(d, [&](auto tag) {
        using E = decltype(tag);
        gpu::attention_forward_gemm<E>(out.gp<E>(), lse.gp<float>(), qkv.gp<E>(), s.B, s.T, s.C, s.NH, stream.s,
                                       budget);
    });
    cudaCheck(cudaStreamSynchronize(stream.s));
    // tests/attention_bounds.h's element-wise bounds for this head size (twin_bounds.h), normwise
    const std::vector<float> oc = tw.act_c(out), lc = tw.f32_c(lse);
    std::vector<double> ob, lb;
    attention_forward_bounds_any(ob, &lb, tw.act_c(qkv), oc, &lc, s.B, s.T, s.C, s.NH, 0, rounding_unit(d));
    tw.check_act("attention_forward_gemm out", out, normwise(ob, oc));
    tw.check_f32("attention_forward_gemm lse", lse, normwise(lb, lc));
}

// dqkv from the GEMM backward against the CPU twin's, from the CPU forward's out and lse on both
// sides; a second run from the same starting dqkv must give the same bits.
void check_backward(DType d, const Shape& s, uint64_t seed, size_t budget) {
    Twin tw(d);
    Random r(seed);
    Twin::Buf qkv = tw.act(r.normal((size_t)s.B * s.T * 3 * s.C, 1.5));
    Twin::Buf out = tw.alloc((size_t)s.B * s.T * s.C * tw.act_size()), lse = tw.alloc((size_t)s.B * s.NH * s.T * 4);
    tw.cpu().attention_forward(out.c, lse.cp<float>(), qkv.c, s.B, s.T, s.C, s.NH);
    tw.upload(out, tw.bytes_c(out));
    tw.upload(lse, tw.bytes_c(lse));
    Twin::Buf dout = tw.act(r.normal((size_t)s.B * s.T * s.C));
    // overwritten: poisoned, and the second run into random values
    Twin::Buf dqkv = tw.poisoned_act((size_t)s.B * s.T * 3 * s.C);
    Twin::Buf dqkv_again = tw.act(r.normal((size_t)s.B * s.T * 3 * s.C, 0.1));
    tw.cpu().attention_backward(dqkv.c, dout.c, qkv.c, out.c, lse.cp<float>(), s.B, s.T, s.C, s.NH);
    TestStream stream;
    with_device_type(d, [&](auto tag) {
        using E = decltype(tag);
        for (const Twin::Buf* b : {&dqkv, &dqkv_again}) {
            gpu::attention_backward_gemm<E>(b->gp<E>(), dout.gp<E>(), qkv.gp<E>(), out.gp<E>(), lse.gp<float>(), s.B,
                                            s.T, s.C, s.NH, stream.s, budget);
        }
    });
    cudaCheck(cudaStreamSynchronize(stream.s));
    const std::vector<float> dc = tw.act_c(dqkv);
    std::vector<double> bound;
    attention_backward_bounds_any(bound, tw.act_c(qkv), tw.act_c(dout), tw.act_c(out), tw.f32_c(lse), dc, s.B, s.T, s.C,
                                  s.NH, rounding_unit(d));
    tw.check_act("attention_backward_gemm dqkv", dqkv, normwise(bound, dc));
    EXPECT_EQ(tw.bytes_g(dqkv), tw.bytes_g(dqkv_again)) << "attention_backward_gemm is not deterministic";
}

}   // namespace

class CudaAttentionGemmTest : public CudaTest, public ::testing::WithParamInterface<DType> {};

TEST_P(CudaAttentionGemmTest, Forward) {
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(shape_str(s));
        check_forward(GetParam(), s, seed_, gpu::attention_gemm_detail::kScratchBudget);
    }
}

TEST_P(CudaAttentionGemmTest, BackwardWritesDqkv) {
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(shape_str(s));
        check_backward(GetParam(), s, seed_, gpu::attention_gemm_detail::kScratchBudget);
    }
}

TEST_P(CudaAttentionGemmTest, ForwardInChunks) {
    const DType d = GetParam();
    const Shape& s = kChunked;
    SCOPED_TRACE(shape_str(s) + ", a scratch budget of " + std::to_string(kChunkSequences) + " sequences");
    const size_t budget = budget_for(s, d, false, kChunkSequences);
    ASSERT_EQ(gpu::attention_gemm_detail::chunk_sequences(s.B, s.T, s.C, s.NH, dtype_size(d), false, budget),
              kChunkSequences);
    check_forward(d, s, seed_, budget);
}

TEST_P(CudaAttentionGemmTest, BackwardInChunks) {
    const DType d = GetParam();
    const Shape& s = kChunked;
    SCOPED_TRACE(shape_str(s) + ", a scratch budget of " + std::to_string(kChunkSequences) + " sequences");
    const size_t budget = budget_for(s, d, true, kChunkSequences);
    ASSERT_EQ(gpu::attention_gemm_detail::chunk_sequences(s.B, s.T, s.C, s.NH, dtype_size(d), true, budget),
              kChunkSequences);
    check_backward(d, s, seed_, budget);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CudaAttentionGemmTest, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         dtype_param_name);
