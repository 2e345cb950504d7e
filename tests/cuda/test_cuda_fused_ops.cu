// test_cuda_fused_ops.cu — the ops that fuse two steps, against their CPU twins (which run the two
// steps in sequence), with the fused kernels (CudaOptions::fused_kernels, --fused-kernels) and with
// the separate validated kernels:
//   residual_layernorm_forward  residual = a + b, then its layernorm: residual bit-identical (one
//                               rounding of an FP32 add), out, mean, rstd within layernorm_forward's
//                               bounds (twin_bounds.h, layernorm_forward_tols) on that residual;
//   layernorm_backward's sums   the sums over rows of the new dinp (the projection's bias gradient),
//                               from random starting values (+=): FP32 sums of each side's own stored
//                               dinp, so within |Σ_n Δdinp| + sum_coeff(N + 1)·Σ|terms|
//                               (column_sums_tol); dinp, dweight, dbias as layernorm_backward;
//   gelu_backward_bias          dinp overwritten (gelu_backward's bound), dbias += the sums of dinp
//                               (column_sums_tol).
// Outputs poisoned first; odd row counts, a C that is not a multiple of 32, and a single row.
#include "tests/cuda/cuda_test_util.h"

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

struct Shape {
    int N, C;
};
const Shape kShapes[] = {{154, 192}, {77, 768}, {1, 128}, {33, 200}};

struct Case {
    DType dtype;
    bool fused;
};
class CudaFusedOpsTest : public CudaTest, public ::testing::WithParamInterface<Case> {
  protected:
    CudaOptions options() const {
        CudaOptions o;
        o.fused_kernels = GetParam().fused;
        return o;
    }
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
    return std::string(dtype_name(info.param.dtype)) + (info.param.fused ? "_fused" : "_separate");
}

}   // namespace

TEST_P(CudaFusedOpsTest, ResidualLayernormForward) {
    const DType d = GetParam().dtype;
    for (const Shape& s : kShapes) {
        SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C));
        Twin tw(d, options());
        Random r(seed_);
        const size_t n = (size_t)s.N * s.C;
        Twin::Buf a = tw.act(r.normal(n, 2.0, 0.5)), b = tw.act(r.normal(n));
        Twin::Buf w = tw.act(r.normal(s.C, 0.2, 1.0)), bias = tw.act(r.normal(s.C, 0.2));
        Twin::Buf res = tw.poisoned_act(n), out = tw.poisoned_act(n);
        Twin::Buf mean = tw.poisoned_f32(s.N), rstd = tw.poisoned_f32(s.N);
        tw.cpu().residual_layernorm_forward(res.c, out.c, mean.cp<float>(), rstd.cp<float>(), a.c, b.c, w.c, bias.c,
                                            s.N, s.C);
        tw.gpu().residual_layernorm_forward(res.g, out.g, mean.gp<float>(), rstd.gp<float>(), a.g, b.g, w.g, bias.g,
                                            s.N, s.C);
        EXPECT_EQ(tw.bytes_g(res), tw.bytes_c(res)) << "the residual add rounds once, as the CPU";
        const LayernormForwardTols tol = layernorm_forward_tols(
            tw.act_c(res), tw.act_c(w), tw.act_c(bias), tw.f32_c(mean), tw.f32_c(rstd), tw.act_c(out), s.N, s.C);
        tw.check_act("residual_layernorm_forward out", out, act_tol(d, tol.out_fp32, 1));
        tw.check_f32("residual_layernorm_forward mean", mean, tol.mean);
        tw.check_f32("residual_layernorm_forward rstd", rstd, tol.rstd);
    }
}

TEST_P(CudaFusedOpsTest, LayernormBackwardSumsItsOutput) {
    const DType d = GetParam().dtype;
    for (const Shape& s : kShapes) {
        SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C));
        Twin tw(d, options());
        Random r(seed_);
        const int N = s.N, C = s.C;
        Twin::Buf inp = tw.act(r.normal((size_t)N * C, 2.0, 0.5));
        Twin::Buf w = tw.act(r.normal(C, 0.2, 1.0)), b = tw.act(r.normal(C, 0.2));
        Twin::Buf out = tw.alloc((size_t)N * C * tw.act_size()), mean = tw.alloc(N * 4), rstd = tw.alloc(N * 4);
        tw.cpu().layernorm_forward(out.c, mean.cp<float>(), rstd.cp<float>(), inp.c, w.c, b.c, N, C);
        tw.upload(mean, tw.f32_c(mean));
        tw.upload(rstd, tw.f32_c(rstd));
        Twin::Buf dout = tw.act(r.normal((size_t)N * C)), dinp = tw.act(r.normal((size_t)N * C));   // +=
        Twin::Buf dw = tw.f32(r.normal(C)), db = tw.f32(r.normal(C)), sums = tw.f32(r.normal(C));   // +=
        const std::vector<float> dinp0 = tw.act_c(dinp), dw0 = tw.f32_c(dw), db0 = tw.f32_c(db), sums0 = tw.f32_c(sums);
        tw.cpu().layernorm_backward(dinp.c, dw.cp<float>(), db.cp<float>(), dout.c, inp.c, w.c, mean.cp<float>(),
                                    rstd.cp<float>(), N, C, sums.cp<float>());
        tw.gpu().layernorm_backward(dinp.g, dw.gp<float>(), db.gp<float>(), dout.g, inp.g, w.g, mean.gp<float>(),
                                    rstd.gp<float>(), N, C, sums.gp<float>());
        const LayernormBackwardTols tol =
            layernorm_backward_tols(tw.act_c(dout), tw.act_c(inp), tw.act_c(w), tw.f32_c(mean), tw.f32_c(rstd), dinp0,
                                    dw0, db0, tw.act_c(dinp), tw.f32_c(dw), tw.f32_c(db), N, C);
        tw.check_act("layernorm_backward dinp", dinp, act_tol(d, tol.dinp_fp32, 1));
        tw.check_f32("layernorm_backward dweight", dw, tol.dweight);
        tw.check_f32("layernorm_backward dbias", db, tol.dbias);
        tw.check_f32("layernorm_backward dinp sums", sums,
                     column_sums_tol(tw.act_g(dinp), tw.act_c(dinp), sums0, tw.f32_c(sums), N, C));
    }
}

TEST_P(CudaFusedOpsTest, GeluBackwardBias) {
    const DType d = GetParam().dtype;
    for (const Shape& s : kShapes) {
        SCOPED_TRACE("rows=" + std::to_string(s.N) + " cols=" + std::to_string(4 * s.C));
        Twin tw(d, options());
        Random r(seed_);
        const int rows = s.N, cols = 4 * s.C;
        const size_t n = (size_t)rows * cols;
        Twin::Buf inp = tw.act(r.normal(n, 3.0)), dout = tw.act(r.normal(n));
        const std::vector<float> dbias0 = r.normal(cols);
        Twin::Buf dinp = tw.poisoned_act(n), dbias = tw.f32(dbias0);   // overwritten; +=
        tw.cpu().gelu_backward_bias(dinp.c, dbias.cp<float>(), inp.c, dout.c, rows, cols);
        tw.gpu().gelu_backward_bias(dinp.g, dbias.gp<float>(), inp.g, dout.g, rows, cols);
        tw.check_act("gelu_backward_bias dinp", dinp,
                     act_tol(d, gelu_backward_tol(tw.act_c(inp), tw.act_c(dout), tw.act_c(dinp)), 1));
        tw.check_f32("gelu_backward_bias dbias", dbias,
                     column_sums_tol(tw.act_g(dinp), tw.act_c(dinp), dbias0, tw.f32_c(dbias), rows, cols));
    }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CudaFusedOpsTest,
                         ::testing::Values(Case{DType::F32, false}, Case{DType::F32, true}, Case{DType::BF16, false},
                                           Case{DType::BF16, true}, Case{DType::F16, false}, Case{DType::F16, true}),
                         case_name);
