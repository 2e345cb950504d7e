// test_cuda_gemm_epilogues.cu — the GEMMs of --gemm-epilogues (cuda/matmul_epilogues.cuh) against
// their CPU twins:
//   matmul_forward_gelu    pre = the GEMM + bias: matmul_forward's bound; out = gelu of the FP32
//                          result: the GEMM's difference through gelu (|gelu'| ≤ 1.13), GELU's own
//                          (gelu_forward_tol), then the store's flip. An erf GELU in cuBLASLt would
//                          fail fp32's bound (erf and tanh GELU differ by up to 2e-4 near |x| = 2);
//   matmul_backward_dgelu  gelu'(pre) · (dout · W): the GEMM's difference times |gelu'(pre)|, the
//                          gradient's own (gelu_backward_tol), then the store's flip;
//   matmul_backward_bgrad  (CudaOptions::gemm_epilogues, matmul_backward with dbias) matmul_backward's
//                          bounds, and the same bits from two runs of the same call.
// The shapes include an OC and a C that are not multiples of 8: cuBLASLt's aux needs one, so those
// run the fallback (an FP32 GEMM, then the epilogue kernel).
#include "tests/cuda/cuda_test_util.h"

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

struct Gemm {
    int N, C, OC;
};
const Gemm kGemms[] = {{154, 192, 768}, {154, 768, 192}, {33, 200, 100}, {33, 100, 200}, {1, 64, 256}};
std::string gemm_str(const Gemm& g) {
    return "N=" + std::to_string(g.N) + " C=" + std::to_string(g.C) + " OC=" + std::to_string(g.OC);
}
constexpr double kMaxGeluSlope = 1.13;   // max |gelu'(x)| of the tanh GELU (1.129 at x ≈ 2.4)

class CudaEpilogueTest : public CudaDTypeTest {};

}   // namespace

TEST_P(CudaEpilogueTest, MatmulForwardGeluRoundsOnce) {
    const DType d = GetParam();
    const bool tc = d != DType::F32;
    for (const Gemm& g : kGemms) {
        SCOPED_TRACE(gemm_str(g));
        Twin tw(d);
        Random r(seed_);
        Twin::Buf inp = tw.act(r.normal((size_t)g.N * g.C));
        Twin::Buf w = tw.act(r.normal((size_t)g.OC * g.C, 0.05)), b = tw.act(r.normal(g.OC, 0.5));
        Twin::Buf out = tw.poisoned_act((size_t)g.N * g.OC), pre = tw.poisoned_act((size_t)g.N * g.OC);
        tw.cpu().matmul_forward_gelu(out.c, pre.c, inp.c, w.c, b.c, g.N, g.C, g.OC);
        tw.gpu().matmul_forward_gelu(out.g, pre.g, inp.g, w.g, b.g, g.N, g.C, g.OC);
        std::vector<double> A = abs_matmul(tw.act_c(inp), tw.act_c(w), g.N, g.C, g.OC);
        const std::vector<float> bias = tw.act_c(b);
        for (size_t i = 0; i < A.size(); i++)
            A[i] += std::fabs(bias[i % g.OC]);
        const std::vector<double> dz = scaled(A, sum_coeff(g.C + 1, tc));   // |Δz| per element, before rounding
        tw.check_act("matmul_forward_gelu pre", pre, act_tol(d, normwise(dz, tw.act_c(pre)), 1));
        const std::vector<float> z = tw.act_c(pre), gelu_out = tw.act_c(out);
        tw.check_act("matmul_forward_gelu out", out,
                     act_tol(d, normwise(scaled(dz, kMaxGeluSlope), gelu_out) + gelu_forward_tol(z, gelu_out), 1));
    }
}

TEST_P(CudaEpilogueTest, MatmulBackwardDgeluWritesDinp) {
    const DType d = GetParam();
    const bool tc = d != DType::F32;
    for (const Gemm& g : kGemms) {
        SCOPED_TRACE(gemm_str(g));
        Twin tw(d);
        Random r(seed_);
        Twin::Buf dout = tw.act(r.normal((size_t)g.N * g.OC)), w = tw.act(r.normal((size_t)g.OC * g.C, 0.05));
        Twin::Buf pre = tw.act(r.normal((size_t)g.N * g.C, 2.0));
        Twin::Buf dinp = tw.poisoned_act((size_t)g.N * g.C);   // overwritten
        tw.cpu().matmul_backward_dgelu(dinp.c, dout.c, w.c, pre.c, g.N, g.C, g.OC);
        tw.gpu().matmul_backward_dgelu(dinp.g, dout.g, w.g, pre.g, g.N, g.C, g.OC);
        const std::vector<float> dy = tw.act_c(dout), wf = tw.act_c(w), x = tw.act_c(pre);
        const std::vector<float> wt = transposed(wf, g.OC, g.C);
        const std::vector<double> A = abs_matmul(dy, wt, g.N, g.OC, g.C);
        std::vector<float> gemm(A.size());   // dout · W in double: GELU's bound takes the product as its dout
        for (int n = 0; n < g.N; n++) {
            for (int c = 0; c < g.C; c++) {
                double s = 0;
                for (int o = 0; o < g.OC; o++)
                    s += (double)dy[(size_t)n * g.OC + o] * wt[(size_t)c * g.OC + o];
                gemm[(size_t)n * g.C + c] = (float)s;
            }
        }
        const std::vector<double> dg = scaled(A, sum_coeff(g.OC, tc) * kMaxGeluSlope);
        const std::vector<float> dx = tw.act_c(dinp);
        tw.check_act("matmul_backward_dgelu dinp", dinp,
                     act_tol(d, normwise(dg, dx) + gelu_backward_tol(x, gemm, dx), 1));
    }
}

TEST_P(CudaEpilogueTest, BiasGradientFromTheWeightGradientGemm) {
    const DType d = GetParam();
    const bool tc = d != DType::F32;
    CudaOptions options;
    options.gemm_epilogues = true;
    for (const Gemm& g : kGemms) {
        SCOPED_TRACE(gemm_str(g));
        Twin tw(d, options);
        Random r(seed_);
        Twin::Buf inp = tw.act(r.normal((size_t)g.N * g.C)), w = tw.act(r.normal((size_t)g.OC * g.C, 0.05));
        Twin::Buf dout = tw.act(r.normal((size_t)g.N * g.OC));
        Twin::Buf dinp = tw.poisoned_act((size_t)g.N * g.C);
        const std::vector<float> dw0 = r.normal((size_t)g.OC * g.C), db0 = r.normal(g.OC);
        Twin::Buf dw = tw.f32(dw0), db = tw.f32(db0);
        tw.cpu().matmul_backward(dinp.c, dw.cp<float>(), db.cp<float>(), dout.c, inp.c, w.c, g.N, g.C, g.OC);
        tw.gpu().matmul_backward(dinp.g, dw.gp<float>(), db.gp<float>(), dout.g, inp.g, w.g, g.N, g.C, g.OC);
        const std::vector<float> x = tw.act_c(inp), wf = tw.act_c(w), dy = tw.act_c(dout);
        const std::vector<double> Ai = abs_matmul(dy, transposed(wf, g.OC, g.C), g.N, g.OC, g.C);
        std::vector<double> Aw = abs_matmul(transposed(dy, g.N, g.OC), transposed(x, g.N, g.C), g.OC, g.N, g.C);
        for (size_t i = 0; i < Aw.size(); i++)
            Aw[i] += std::fabs(dw0[i]);
        std::vector<double> Ab(g.OC);
        for (int o = 0; o < g.OC; o++) {
            Ab[o] = std::fabs(db0[o]);
            for (int n = 0; n < g.N; n++)
                Ab[o] += std::fabs(dy[(size_t)n * g.OC + o]);
        }
        tw.check_act("bgrad dinp", dinp, act_tol(d, normwise(scaled(Ai, sum_coeff(g.OC, tc)), tw.act_c(dinp)), 1));
        tw.check_f32("bgrad dweight", dw, normwise(scaled(Aw, sum_coeff(g.N + 1, tc)), tw.f32_c(dw)));
        // cuBLASLt's sum of N values in an order of its own, then the add into the start value
        tw.check_f32("bgrad dbias", db, normwise(scaled(Ab, sum_coeff(g.N + 1, true)), tw.f32_c(db)));
        // the same call again from the same start: the same bits (one algorithm, one GPU)
        const std::vector<uint8_t> first = tw.bytes_g(db);
        Twin::Buf db_again = tw.f32(db0), dw_again = tw.f32(dw0);
        tw.gpu().matmul_backward(dinp.g, dw_again.gp<float>(), db_again.gp<float>(), dout.g, inp.g, w.g, g.N, g.C,
                                 g.OC);
        expect_bytes_equal("bgrad dbias, run twice", tw.bytes_g(db_again), first, sizeof(float));
    }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CudaEpilogueTest, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         dtype_param_name);
