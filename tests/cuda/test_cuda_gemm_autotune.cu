// test_cuda_gemm_autotune.cu — --gemm-autotune (cuda/matmul.cuh gemm(): every candidate algorithm
// of a new problem timed on a scratch output, the fastest kept). The GEMMs must still be the CPU
// twin's, and the caller's outputs written exactly once: the accumulating ones (dweight, dbias,
// beta = 1) must hold one product added, not one per timed launch. The second call of the same
// problem reuses the plan (no timing) and must add exactly once more.
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/test_stream.h"

#include "cpu/kernels.h"
#include "cuda/matmul.cuh"

#include <cuda_bf16.h>

using namespace train_gpt;
using namespace train_gpt::test;
namespace gpu = train_gpt::cuda;

TEST_F(CudaTest, GemmAutotuneKeepsTheMathsAndWritesOnce) {
    Twin tw(DType::BF16);
    Random r(seed_);
    const int N = 154, C = 192, OC = 576;   // the qkv GEMM of test_cuda_kernels.cu, N odd
    Twin::Buf inp = tw.act(r.normal((size_t)N * C)), w = tw.act(r.normal((size_t)OC * C, 0.05));
    Twin::Buf b = tw.act(r.normal(OC, 0.5)), dout = tw.act(r.normal((size_t)N * OC));
    Twin::Buf out = tw.poisoned_act((size_t)N * OC), dinp = tw.poisoned_act((size_t)N * C);
    Twin::Buf dw = tw.f32(r.normal((size_t)OC * C)), db = tw.f32(r.normal(OC));   // +=
    for (int call = 0; call < 2; call++) {   // the second: the plan found by the first
        tw.cpu().matmul_forward(out.c, inp.c, w.c, b.c, N, C, OC);
        tw.cpu().matmul_backward(dinp.c, dw.cp<float>(), db.cp<float>(), dout.c, inp.c, w.c, N, C, OC);
    }
    TestStream stream;
    gpu::set_gemm_autotune(stream.s, /*autotune=*/true, /*log=*/true);
    using E = __nv_bfloat16;
    for (int call = 0; call < 2; call++) {
        gpu::matmul_forward<E>(out.gp<E>(), inp.gp<E>(), w.gp<E>(), b.gp<E>(), N, C, OC, stream.s);
        gpu::matmul_backward<E>(dinp.gp<E>(), dw.gp<float>(), db.gp<float>(), dout.gp<E>(), inp.gp<E>(), w.gp<E>(), N,
                                C, OC, stream.s);
    }
    cudaCheck(cudaStreamSynchronize(stream.s));
    tw.check_act("matmul_forward out (autotuned)", out, act_tol(DType::BF16, 1e-5, 2));
    tw.check_act("matmul_backward dinp (autotuned)", dinp, act_tol(DType::BF16, 1e-5, 2));
    tw.check_f32("matmul_backward dweight (autotuned, two calls)", dw, 1e-5);
    tw.check_f32("matmul_backward dbias (autotuned, two calls)", db, 1e-5);
}
