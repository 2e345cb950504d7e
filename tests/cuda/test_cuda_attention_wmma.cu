// test_cuda_attention_wmma.cu — the lab's tensor-core (WMMA) flash attention (dev/cuda/attention_wmma.cuh)
// against its CPU twin, cpu::attention_forward / cpu::attention_backward, in bf16 and fp16 (the
// WMMA version has no FP32 path: it fails, checked below).
//
// The launchers are called directly, on
// a stream of the test's own, on the Twin's device buffers. Method and tolerances as the attention
// tests of test_cuda_kernels.cu: out, lse and dqkv within tests/attention_bounds.h's element-wise
// bounds for the shape's head size (twin_bounds.h, attention_*_bounds_any: any implementation
// that rounds each probability once satisfies them), normwise; overwritten outputs poisoned
// first, dqkv starts from zeros (the lab kernel accumulates, the op overwrites). Shapes: test_cuda_kernels.cu's
// attention shapes (hs = 64; T = 77, 1, 128), T = 203 (not a multiple of 64) with hs = 64 and with
// hs = 96 (padded to the HSP = 128 kernels; scale 1/√96 not a power of two), hs = 128 with
// T = 150, hs = 32 with several heads. Determinism: two backward runs give bit-identical dqkv.
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/test_stream.h"

#include "cpu/kernels.h"
#include "dev/cuda/attention_wmma.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

using namespace train_gpt;
using namespace train_gpt::test;
namespace gpu = train_gpt::cuda;

namespace {

struct Shape {
    int B, T, C, NH;
};
const Shape kShapes[] = {{2, 77, 192, 3},  {1, 1, 128, 2},   {4, 128, 128, 2}, {3, 203, 128, 2},
                         {3, 203, 192, 2}, {2, 150, 256, 2}, {2, 100, 128, 4}};

std::string shape_str(const Shape& s) {
    return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) +
           " NH=" + std::to_string(s.NH) + " hs=" + std::to_string(s.C / s.NH);
}

// f(E{}) with E the device storage type of d (16-bit types only).
template <typename F>
void with_device_type(DType d, F f) {
    switch (d) {
        case DType::BF16: f(__nv_bfloat16{}); return;
        case DType::F16: f(__half{}); return;
        case DType::F32: break;
    }
    FAIL() << "the WMMA attention has no FP32 path";
}

void check_forward(DType d, const Shape& s, uint64_t seed) {
    Twin tw(d);
    Random r(seed);
    Twin::Buf qkv = tw.act(r.normal((size_t)s.B * s.T * 3 * s.C, 1.5));   // peaked softmax rows too
    Twin::Buf out = tw.poisoned_act((size_t)s.B * s.T * s.C);
    Twin::Buf lse = tw.poisoned_f32((size_t)s.B * s.NH * s.T);
    tw.cpu().attention_forward(out.c, lse.cp<float>(), qkv.c, s.B, s.T, s.C, s.NH);
    TestStream stream;
    with_device_type(d, [&](auto tag) {
        using E = decltype(tag);
        gpu::attention_forward_wmma<E>(out.gp<E>(), lse.gp<float>(), qkv.gp<E>(), s.B, s.T, s.C, s.NH, stream.s);
    });
    cudaCheck(cudaStreamSynchronize(stream.s));
    // tests/attention_bounds.h's element-wise bounds for this head size (twin_bounds.h), normwise
    const std::vector<float> oc = tw.act_c(out), lc = tw.f32_c(lse);
    std::vector<double> ob, lb;
    attention_forward_bounds_any(ob, &lb, tw.act_c(qkv), oc, &lc, s.B, s.T, s.C, s.NH, 0, rounding_unit(d));
    tw.check_act("attention_forward_wmma out", out, normwise(ob, oc));
    tw.check_f32("attention_forward_wmma lse", lse, normwise(lb, lc));
}

void check_backward(DType d, const Shape& s, uint64_t seed) {
    Twin tw(d);
    Random r(seed);
    Twin::Buf qkv = tw.act(r.normal((size_t)s.B * s.T * 3 * s.C, 1.5));
    // the forward's out and lse, the CPU's, on both sides
    Twin::Buf out = tw.alloc((size_t)s.B * s.T * s.C * tw.act_size()), lse = tw.alloc((size_t)s.B * s.NH * s.T * 4);
    tw.cpu().attention_forward(out.c, lse.cp<float>(), qkv.c, s.B, s.T, s.C, s.NH);
    tw.upload(out, tw.bytes_c(out));
    tw.upload(lse, tw.bytes_c(lse));
    Twin::Buf dout = tw.act(r.normal((size_t)s.B * s.T * s.C));
    // this lab kernel accumulates (+=) where the op now overwrites: both start from zeros
    const std::vector<float> dqkv0((size_t)s.B * s.T * 3 * s.C, 0.0f);
    Twin::Buf dqkv = tw.act(dqkv0), dqkv_again = tw.act(dqkv0);
    tw.cpu().attention_backward(dqkv.c, dout.c, qkv.c, out.c, lse.cp<float>(), s.B, s.T, s.C, s.NH);
    TestStream stream;
    with_device_type(d, [&](auto tag) {
        using E = decltype(tag);
        for (const Twin::Buf* b : {&dqkv, &dqkv_again}) {
            gpu::attention_backward_wmma<E>(b->gp<E>(), dout.gp<E>(), qkv.gp<E>(), out.gp<E>(), lse.gp<float>(), s.B,
                                            s.T, s.C, s.NH, stream.s);
        }
    });
    cudaCheck(cudaStreamSynchronize(stream.s));
    const std::vector<float> dc = tw.act_c(dqkv);
    std::vector<double> bound;
    attention_backward_bounds_any(bound, tw.act_c(qkv), tw.act_c(dout), tw.act_c(out), tw.f32_c(lse), dc, s.B, s.T, s.C,
                                  s.NH, rounding_unit(d));
    tw.check_act("attention_backward_wmma dqkv", dqkv, normwise(bound, dc));
    EXPECT_EQ(tw.bytes_g(dqkv), tw.bytes_g(dqkv_again)) << "attention_backward_wmma is not deterministic";
}

}   // namespace

class CudaAttentionWmmaTest : public CudaTest, public ::testing::WithParamInterface<DType> {};

TEST_P(CudaAttentionWmmaTest, Forward) {
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(shape_str(s));
        check_forward(GetParam(), s, seed_);
    }
}

TEST_P(CudaAttentionWmmaTest, BackwardFromZeros) {
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(shape_str(s));
        check_backward(GetParam(), s, seed_);
    }
}

INSTANTIATE_TEST_SUITE_P(Float16Types, CudaAttentionWmmaTest, ::testing::Values(DType::BF16, DType::F16),
                         dtype_param_name);

// FP32 and unsupported head sizes fail with a message instead of running.
class CudaAttentionWmmaArgsTest : public CudaTest {};

TEST_F(CudaAttentionWmmaArgsTest, RejectsFp32AndBadHeadSizes) {
    EXPECT_THROW(gpu::attention_forward_wmma<float>(nullptr, nullptr, nullptr, 1, 1, 128, 2, nullptr), Error);
    EXPECT_THROW(
        gpu::attention_backward_wmma<float>(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 128, 2, nullptr), Error);
    // hs = 8 (not a multiple of 16) and hs = 256 (> 128): rejected before any launch
    EXPECT_THROW(gpu::attention_forward_wmma<__nv_bfloat16>(nullptr, nullptr, nullptr, 1, 1, 16, 2, nullptr), Error);
    EXPECT_THROW(gpu::attention_forward_wmma<__half>(nullptr, nullptr, nullptr, 1, 1, 256, 1, nullptr), Error);
}
