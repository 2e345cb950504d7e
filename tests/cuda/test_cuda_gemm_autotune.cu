// test_cuda_gemm_autotune.cu — --gemm-autotune (cuda/matmul.cuh gemm(): every candidate algorithm
// of a new problem timed on a scratch output, the fastest kept). The GEMMs must still be the CPU
// twin's, and the caller's outputs written exactly once: the accumulating ones (dweight, dbias,
// beta = 1) must hold one product added, not one per timed launch. The second call of the same
// problem reuses the plan (no timing) and must add exactly once more. Bounds as
// test_cuda_kernels.cu's matmul tests (twin_bounds.h): the FP32 sums of each element's terms,
// Σ|a·b| from the host, by the tensor cores' deterministic bound, and one flip of a bf16 output;
// dweight and dbias hold their start value and two products' terms.
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
    const std::vector<float> dw0 = tw.f32_c(dw), db0 = tw.f32_c(db);
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
    const std::vector<float> x = tw.act_c(inp), wf = tw.act_c(w), bf = tw.act_c(b), dy = tw.act_c(dout);
    std::vector<double> Ao = abs_matmul(x, wf, N, C, OC);
    for (size_t i = 0; i < Ao.size(); i++)
        Ao[i] += std::fabs(bf[i % OC]);
    const std::vector<double> Ai = abs_matmul(dy, transposed(wf, OC, C), N, OC, C);
    std::vector<double> Aw = abs_matmul(transposed(dy, N, OC), transposed(x, N, C), OC, N, C), Ab(OC);
    for (size_t i = 0; i < Aw.size(); i++)
        Aw[i] = std::fabs(dw0[i]) + 2 * Aw[i];
    for (int o = 0; o < OC; o++) {
        Ab[o] = std::fabs(db0[o]);
        for (int n = 0; n < N; n++)
            Ab[o] += 2 * std::fabs(dy[(size_t)n * OC + o]);
    }
    tw.check_act("matmul_forward out (autotuned)", out,
                 act_tol(DType::BF16, normwise(scaled(Ao, sum_coeff(C + 1, true)), tw.act_c(out)), 1));
    tw.check_act("matmul_backward dinp (autotuned)", dinp,
                 act_tol(DType::BF16, normwise(scaled(Ai, sum_coeff(OC, true)), tw.act_c(dinp)), 1));
    tw.check_f32("matmul_backward dweight (autotuned, two calls)", dw,
                 normwise(scaled(Aw, sum_coeff(2 * N + 1, true)), tw.f32_c(dw)));
    tw.check_f32("matmul_backward dbias (autotuned, two calls)", db,
                 normwise(scaled(Ab, sum_coeff(2 * N + 1)), tw.f32_c(db)));
}
