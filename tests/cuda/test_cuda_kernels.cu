// test_cuda_kernels.cu — every op of backend.h on the CUDA kernel set against its CPU twin
// (cpu/kernels.h, cpu/fp8_kernels.h), forward and backward, in fp32, bf16 and fp16.
//
// Method and helpers: cuda_test_util.h (random inputs from a fixed seed, poisoned outputs, random
// starting values under +=, normwise errors). Each tolerance is derived, per op and from the
// test's own inputs, in twin_bounds.h (its header has the rules): what may legitimately differ is
// the order of FP32 sums, contraction, the device's libm, and, where those move a value across a
// rounding boundary, a 16-bit store that rounds to its neighbour (one ulp ≤ 2u of it, u = 2^-8
// bf16, 2^-11 fp16). So:
//   FP32 sums of K terms  sum_coeff(K)·Σ|terms| per element, normwise over max|cpu| (GEMMs: the
//                         Σ|a_i·b_i| computed on the host, abs_matmul; tensor-core GEMMs in 16 bits
//                         by the deterministic bound, FP32 ones by the probabilistic √K one);
//   16-bit outputs        that FP32 bound plus one flip of the store (act_tol, 2u normwise);
//   row ops, GELU,        their FP32 formula's roundings and sums, term by term (layernorm_*_tols,
//   classifier, AdamW     gelu_*_tol, classifier_tols, adamw_tols);
//   attention             the element-wise bounds of tests/attention_bounds.h for any head size
//                         (attention_*_bounds_any), normwise;
//   exact                 embedding forward, residual, conversions, FP8 casts and their statistics,
//                         amax, the scaling state (no arithmetic that can differ);
//   FP8 GEMMs             the products of FP8 values are exact; Hopper's FP8 tensor cores keep the
//                         accumulator to ~14 bits, truncating at each k = 32 step (fp8_gemm_coeff:
//                         ⌈K/32⌉·2^-13·Σ|terms|, with or without fast accumulation), plus one flip
//                         of a 16-bit output;
//   sum_squares           double sums of exact squares: 2γ_n = 2n·2^-53 relative, deterministic.
// Each of these still fails a wrong index or an unwritten element (O(1) normwise) and a wrong
// scale of a few percent or more.
#include "tests/cuda/cuda_test_util.h"
#include "cuda/fp8.cuh"
#include "tests/cuda/test_stream.h"

#include <cstring>

#include "cpu/fp8_kernels.h"
#include "cpu/kernels.h"

#include <algorithm>
#include <cstdio>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

// A scale slot (fp8_scaling.h) holding scale s, on both sides.
Twin::Buf scale_slot(Twin& tw, float s) { return tw.raw(std::vector<Fp8ScaleSlot>{Fp8ScaleSlot{1.0f / s, s, 0, {}}}); }

// Shapes: the model's (hs = 64, C a multiple of 64) with N = B·T not a multiple of any tile,
// a single-token batch (sampling), and a longer sequence.
struct Shape {
    int B, T, C, NH;
};
const Shape kShapes[] = {{2, 77, 192, 3}, {1, 1, 128, 2}, {4, 128, 128, 2}};
std::string shape_str(const Shape& s) {
    return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) +
           " NH=" + std::to_string(s.NH);
}

}   // namespace

// ---- memory and conversions ------------------------------------------------------------------

TEST_P(CudaDTypeTest, AllocIsZeroedAndCopiesRoundTrip) {
    Twin tw(GetParam());
    Random r(seed_);
    const size_t n = 100003;   // odd: tails of vectorised copies
    Twin::Buf b = tw.alloc(n * 4);
    std::vector<uint8_t> zeros(n * 4, 0);
    EXPECT_EQ(tw.bytes_g(b), zeros) << "alloc() must return zero-initialised memory";
    std::vector<float> x = r.normal(n);
    tw.upload(b, x);
    EXPECT_EQ(tw.f32_g(b), x);
    tw.gpu().zero(static_cast<char*>(b.g) + 4, 8);   // zero() of an interior range
    std::vector<float> y = tw.f32_g(b);
    EXPECT_EQ(y[0], x[0]);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_EQ(y[2], 0.0f);
    EXPECT_EQ(y[3], x[3]);
}

// copy_to_device returns with the host buffer free: a small copy (a micro-batch's tokens) is
// staged in pinned slots and queued, a large one waits. More copies than the staging has slots,
// each host buffer overwritten right after its call, must all arrive as they were at the call.
TEST_F(CudaTest, CopiesToTheDeviceTakeTheHostBytesAtTheCall) {
    Twin tw(DType::BF16);
    Backend& g = tw.gpu();
    const int kCopies = 11;                                         // past the staging's 4 slots, twice
    const size_t sizes[] = {4, 64 * 1024, (size_t(1) << 20) + 4};   // tokens, B·T = 16k, past a slot
    for (size_t bytes : sizes) {
        SCOPED_TRACE("bytes " + std::to_string(bytes));
        const size_t n = bytes / 4;
        std::vector<void*> dst(kCopies);
        std::vector<int32_t> host(n);
        for (int c = 0; c < kCopies; c++) {
            dst[c] = g.alloc(bytes);
            for (size_t i = 0; i < n; i++)
                host[i] = int32_t(c * 1000003 + i);
            g.copy_to_device(dst[c], host.data(), bytes);
            std::fill(host.begin(), host.end(), -1);   // reused at once, as the data loader does
        }
        for (int c = 0; c < kCopies; c++) {
            std::vector<int32_t> back(n);
            g.copy_to_host(back.data(), dst[c], bytes);
            size_t wrong = 0;
            for (size_t i = 0; i < n; i++)
                wrong += back[i] != int32_t(c * 1000003 + i);
            EXPECT_EQ(wrong, 0u) << "copy " << c << ": the device holds what the host buffer held later";
            g.release(dst[c]);
        }
    }
}

TEST_P(CudaDTypeTest, FloatToActAndBackAreBitIdentical) {
    Twin tw(GetParam());
    Random r(seed_);
    const size_t n = 1 << 20;
    // every magnitude class: normal, tiny (subnormal in fp16/bf16), huge (overflow), specials,
    // and exact rounding midpoints of the 16-bit formats
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) {
        const double e = -30 + 60 * r.rng.uniform();
        x[i] = (float)(std::ldexp(1.0 + r.rng.uniform(), (int)e) * (r.rng.uniform() < 0.5 ? -1 : 1));
    }
    const float specials[] = {0.0f,
                              -0.0f,
                              INFINITY,
                              -INFINITY,
                              NAN,
                              65504.0f,
                              65520.0f,
                              1e-8f,
                              1e-40f,
                              3.4e38f,
                              bits_float(0x3f808000u),
                              bits_float(0x3f818000u),
                              bits_float(0x3f801000u)};
    for (size_t i = 0; i < sizeof(specials) / sizeof(float); i++)
        x[i * 7919] = specials[i];
    Twin::Buf src = tw.f32(x);
    Twin::Buf act = tw.poisoned_act(n);
    tw.cpu().float_to_act(act.c, src.cp<float>(), n);
    tw.gpu().float_to_act(act.g, src.gp<float>(), n);
    tw.check_bytes("float_to_act", act, tw.act_size());
    // back to FP32 from identical bytes on both sides (the CPU's encoding)
    Twin::Buf act_in = tw.act(x);
    Twin::Buf back = tw.poisoned_f32(n);
    tw.cpu().act_to_float(back.cp<float>(), act_in.c, n);
    tw.gpu().act_to_float(back.gp<float>(), act_in.g, n);
    tw.check_bytes("act_to_float", back, 4);
}

// ---- encoder ---------------------------------------------------------------------------------

TEST_P(CudaDTypeTest, EncoderForwardIsExact) {
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(shape_str(s));
        Twin tw(GetParam());
        Random r(seed_);
        const int V = 1000, Vp = 1024;
        Twin::Buf tokens = tw.raw(r.ints((size_t)s.B * s.T, V));
        Twin::Buf wte = tw.act(r.normal((size_t)Vp * s.C, 0.1));
        Twin::Buf wpe = tw.act(r.normal((size_t)s.T * s.C, 0.1));
        Twin::Buf out = tw.poisoned_act((size_t)s.B * s.T * s.C);
        tw.cpu().encoder_forward(out.c, tokens.cp<int32_t>(), wte.c, wpe.c, s.B, s.T, s.C);
        tw.gpu().encoder_forward(out.g, tokens.gp<int32_t>(), wte.g, wpe.g, s.B, s.T, s.C);
        tw.check_bytes("encoder_forward out", out, tw.act_size());   // one add, one rounding
    }
}

TEST_P(CudaDTypeTest, EncoderBackwardAccumulates) {
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(shape_str(s));
        Twin tw(GetParam());
        Random r(seed_);
        const int Vp = 1024, maxT = s.T + 3;
        // few distinct tokens: many rows scatter into the same dwte row (atomics, ordering)
        const std::vector<int32_t> tok = r.ints((size_t)s.B * s.T, 17);
        const std::vector<float> dy = r.normal((size_t)s.B * s.T * s.C);
        const std::vector<float> dwte0 = r.normal((size_t)Vp * s.C), dwpe0 = r.normal((size_t)maxT * s.C);
        Twin::Buf tokens = tw.raw(tok), dout = tw.act(dy), dwte = tw.f32(dwte0), dwpe = tw.f32(dwpe0);
        tw.cpu().encoder_backward(dwte.cp<float>(), dwpe.cp<float>(), dout.c, tokens.cp<int32_t>(), s.B, s.T, s.C);
        tw.gpu().encoder_backward(dwte.gp<float>(), dwpe.gp<float>(), dout.g, tokens.gp<int32_t>(), s.B, s.T, s.C);
        // each element: its start value plus the dout rows that scatter into it (K of them + 1)
        const std::vector<float> dyr = round_act(tw.dtype(), dy);
        std::vector<double> awte(dwte0.size()), awpe(dwpe0.size());
        for (size_t i = 0; i < awte.size(); i++)
            awte[i] = std::fabs(dwte0[i]);
        for (size_t i = 0; i < awpe.size(); i++)
            awpe[i] = std::fabs(dwpe0[i]);
        std::vector<int> count(Vp, 0);
        for (int i = 0; i < s.B * s.T; i++) {
            count[tok[i]]++;
            for (int c = 0; c < s.C; c++) {
                awte[(size_t)tok[i] * s.C + c] += std::fabs(dyr[(size_t)i * s.C + c]);
                awpe[(size_t)(i % s.T) * s.C + c] += std::fabs(dyr[(size_t)i * s.C + c]);
            }
        }
        const int most = *std::max_element(count.begin(), count.end());
        tw.check_f32("encoder_backward dwte", dwte, normwise(scaled(awte, sum_coeff(most + 1)), tw.f32_c(dwte)));
        tw.check_f32("encoder_backward dwpe", dwpe, normwise(scaled(awpe, sum_coeff(s.B + 1)), tw.f32_c(dwpe)));
    }
}

// ---- layernorm -------------------------------------------------------------------------------

TEST_P(CudaDTypeTest, LayernormForward) {
    const DType d = GetParam();
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(shape_str(s));
        Twin tw(d);
        Random r(seed_);
        const int N = s.B * s.T, C = s.C;
        Twin::Buf inp = tw.act(r.normal((size_t)N * C, 2.0, 0.5));   // an offset mean: variance cancellation
        Twin::Buf w = tw.act(r.normal(C, 0.2, 1.0)), b = tw.act(r.normal(C, 0.2));
        Twin::Buf out = tw.poisoned_act((size_t)N * C), mean = tw.poisoned_f32(N), rstd = tw.poisoned_f32(N);
        tw.cpu().layernorm_forward(out.c, mean.cp<float>(), rstd.cp<float>(), inp.c, w.c, b.c, N, C);
        tw.gpu().layernorm_forward(out.g, mean.gp<float>(), rstd.gp<float>(), inp.g, w.g, b.g, N, C);
        const LayernormForwardTols tol = layernorm_forward_tols(tw.act_c(inp), tw.act_c(w), tw.act_c(b), tw.f32_c(mean),
                                                                tw.f32_c(rstd), tw.act_c(out), N, C);
        tw.check_act("layernorm_forward out", out, act_tol(d, tol.out_fp32, 1));
        tw.check_f32("layernorm_forward mean", mean, tol.mean);
        tw.check_f32("layernorm_forward rstd", rstd, tol.rstd);
    }
}

TEST_P(CudaDTypeTest, LayernormBackwardAccumulates) {
    const DType d = GetParam();
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(shape_str(s));
        Twin tw(d);
        Random r(seed_);
        const int N = s.B * s.T, C = s.C;
        Twin::Buf inp = tw.act(r.normal((size_t)N * C, 2.0, 0.5));
        Twin::Buf w = tw.act(r.normal(C, 0.2, 1.0)), b = tw.act(r.normal(C, 0.2));
        // the statistics both backwards read: the CPU forward's, on both sides
        Twin::Buf out = tw.alloc((size_t)N * C * tw.act_size()), mean = tw.alloc(N * 4), rstd = tw.alloc(N * 4);
        tw.cpu().layernorm_forward(out.c, mean.cp<float>(), rstd.cp<float>(), inp.c, w.c, b.c, N, C);
        tw.upload(mean, tw.f32_c(mean));
        tw.upload(rstd, tw.f32_c(rstd));
        Twin::Buf dout = tw.act(r.normal((size_t)N * C));
        Twin::Buf dinp = tw.act(r.normal((size_t)N * C));
        Twin::Buf dw = tw.f32(r.normal(C)), db = tw.f32(r.normal(C));
        const std::vector<float> dinp0 = tw.act_c(dinp), dw0 = tw.f32_c(dw), db0 = tw.f32_c(db);
        tw.cpu().layernorm_backward(dinp.c, dw.cp<float>(), db.cp<float>(), dout.c, inp.c, w.c, mean.cp<float>(),
                                    rstd.cp<float>(), N, C, nullptr);
        tw.gpu().layernorm_backward(dinp.g, dw.gp<float>(), db.gp<float>(), dout.g, inp.g, w.g, mean.gp<float>(),
                                    rstd.gp<float>(), N, C, nullptr);
        const LayernormBackwardTols tol =
            layernorm_backward_tols(tw.act_c(dout), tw.act_c(inp), tw.act_c(w), tw.f32_c(mean), tw.f32_c(rstd), dinp0,
                                    dw0, db0, tw.act_c(dinp), tw.f32_c(dw), tw.f32_c(db), N, C);
        tw.check_act("layernorm_backward dinp", dinp, act_tol(d, tol.dinp_fp32, 1));
        tw.check_f32("layernorm_backward dweight", dw, tol.dweight);
        tw.check_f32("layernorm_backward dbias", db, tol.dbias);
    }
}

// ---- matmul ----------------------------------------------------------------------------------

namespace {
// (N, C, OC) of the model's GEMMs at C = 192 (qkv, attn-proj, fc, fc-proj, LM head), N odd.
struct Gemm {
    int N, C, OC;
};
const Gemm kGemms[] = {{154, 192, 576}, {154, 192, 192}, {154, 192, 768}, {154, 768, 192}, {77, 192, 1024}};
std::string gemm_str(const Gemm& g) {
    return "N=" + std::to_string(g.N) + " C=" + std::to_string(g.C) + " OC=" + std::to_string(g.OC);
}
}   // namespace

TEST_P(CudaDTypeTest, MatmulForward) {
    const DType d = GetParam();
    for (const Gemm& g : kGemms) {
        for (bool with_bias : {true, false}) {
            SCOPED_TRACE(gemm_str(g) + (with_bias ? " bias" : " no bias"));
            Twin tw(d);
            Random r(seed_);
            Twin::Buf inp = tw.act(r.normal((size_t)g.N * g.C));
            Twin::Buf w = tw.act(r.normal((size_t)g.OC * g.C, 0.05));
            Twin::Buf b = tw.act(r.normal(g.OC, 0.5));
            Twin::Buf out = tw.poisoned_act((size_t)g.N * g.OC);
            tw.cpu().matmul_forward(out.c, inp.c, w.c, with_bias ? b.c : nullptr, g.N, g.C, g.OC);
            tw.gpu().matmul_forward(out.g, inp.g, w.g, with_bias ? b.g : nullptr, g.N, g.C, g.OC);
            // C products and the bias: an FP32 sum of C + 1 terms, then the store's flip
            std::vector<double> A = abs_matmul(tw.act_c(inp), tw.act_c(w), g.N, g.C, g.OC);
            const std::vector<float> bias = tw.act_c(b);
            if (with_bias)
                for (size_t i = 0; i < A.size(); i++)
                    A[i] += std::fabs(bias[i % g.OC]);
            const double fp32 = normwise(scaled(A, sum_coeff(g.C + 1, d != DType::F32)), tw.act_c(out));
            tw.check_act("matmul_forward out", out, act_tol(d, fp32, 1));
        }
    }
}

// -p tf32: the matmul ops on TF32 tensor cores (cuBLASLt's FAST_TF32) against the CPU twin, which
// rounds each operand to nearest on the TF32 grid (cpu::matmul_forward_tf32). cuBLASLt does not
// say how it converts: a conversion that truncates differs from the twin's by up to one TF32 ulp
// (2u, u = 2^-11) per operand, 4u per product; on top, the two FP32 sums' orders (sum_coeff).
TEST_F(CudaTest, Tf32MatmulsMatchTheirTwin) {
    CudaOptions options;
    options.tf32_gemms = true;
    constexpr double kTf32PerProduct = 4 * 0x1p-11;
    for (const Gemm& g : kGemms) {
        SCOPED_TRACE(gemm_str(g));
        Twin tw(DType::F32, options);
        Random r(seed_);
        Twin::Buf inp = tw.act(r.normal((size_t)g.N * g.C)), w = tw.act(r.normal((size_t)g.OC * g.C, 0.05));
        Twin::Buf b = tw.act(r.normal(g.OC, 0.5)), dout = tw.act(r.normal((size_t)g.N * g.OC));
        Twin::Buf out = tw.poisoned_act((size_t)g.N * g.OC), dinp = tw.poisoned_act((size_t)g.N * g.C);
        Twin::Buf dw = tw.f32(r.normal((size_t)g.OC * g.C)), db = tw.f32(r.normal(g.OC));
        const std::vector<float> dw0 = tw.f32_c(dw), db0 = tw.f32_c(db);
        tw.cpu().matmul_forward(out.c, inp.c, w.c, b.c, g.N, g.C, g.OC);
        tw.gpu().matmul_forward(out.g, inp.g, w.g, b.g, g.N, g.C, g.OC);
        tw.cpu().matmul_backward(dinp.c, dw.cp<float>(), db.cp<float>(), dout.c, inp.c, w.c, g.N, g.C, g.OC);
        tw.gpu().matmul_backward(dinp.g, dw.gp<float>(), db.gp<float>(), dout.g, inp.g, w.g, g.N, g.C, g.OC);
        const std::vector<float> x = tw.act_c(inp), wf = tw.act_c(w), dy = tw.act_c(dout), bias = tw.act_c(b);
        std::vector<double> Ao = abs_matmul(x, wf, g.N, g.C, g.OC);
        for (size_t i = 0; i < Ao.size(); i++)
            Ao[i] += std::fabs(bias[i % g.OC]);
        const std::vector<double> Ai = abs_matmul(dy, transposed(wf, g.OC, g.C), g.N, g.OC, g.C);
        std::vector<double> Aw = abs_matmul(transposed(dy, g.N, g.OC), transposed(x, g.N, g.C), g.OC, g.N, g.C);
        for (size_t i = 0; i < Aw.size(); i++)
            Aw[i] += std::fabs(dw0[i]);
        tw.check_act("tf32 matmul_forward out", out,
                     normwise(scaled(Ao, sum_coeff(g.C + 1, true) + kTf32PerProduct), tw.act_c(out)));
        tw.check_act("tf32 matmul_backward dinp", dinp,
                     normwise(scaled(Ai, sum_coeff(g.OC, true) + kTf32PerProduct), tw.act_c(dinp)));
        tw.check_f32("tf32 matmul_backward dweight", dw,
                     normwise(scaled(Aw, sum_coeff(g.N + 1, true) + kTf32PerProduct), tw.f32_c(dw)));
        // dbias: FP32 column sums of dout as it is, fp32's bound
        std::vector<double> Ab(g.OC);
        for (int o = 0; o < g.OC; o++) {
            Ab[o] = std::fabs(db0[o]);
            for (int n = 0; n < g.N; n++)
                Ab[o] += std::fabs(dy[(size_t)n * g.OC + o]);
        }
        tw.check_f32("tf32 matmul_backward dbias", db, normwise(scaled(Ab, sum_coeff(g.N + 1)), tw.f32_c(db)));
    }
}

TEST_P(CudaDTypeTest, MatmulBackwardWritesDinpAccumulatesParameters) {
    const DType d = GetParam();
    for (const Gemm& g : kGemms) {
        for (bool with_bias : {true, false}) {
            SCOPED_TRACE(gemm_str(g) + (with_bias ? " bias" : " no bias"));
            Twin tw(d);
            Random r(seed_);
            Twin::Buf inp = tw.act(r.normal((size_t)g.N * g.C));
            Twin::Buf w = tw.act(r.normal((size_t)g.OC * g.C, 0.05));
            Twin::Buf dout = tw.act(r.normal((size_t)g.N * g.OC));
            Twin::Buf dinp = tw.poisoned_act((size_t)g.N * g.C);                                // overwritten
            Twin::Buf dw = tw.f32(r.normal((size_t)g.OC * g.C)), db = tw.f32(r.normal(g.OC));   // +=
            const std::vector<float> dw0 = tw.f32_c(dw), db0 = tw.f32_c(db);
            tw.cpu().matmul_backward(dinp.c, dw.cp<float>(), with_bias ? db.cp<float>() : nullptr, dout.c, inp.c, w.c,
                                     g.N, g.C, g.OC);
            tw.gpu().matmul_backward(dinp.g, dw.gp<float>(), with_bias ? db.gp<float>() : nullptr, dout.g, inp.g, w.g,
                                     g.N, g.C, g.OC);
            // dinp: OC products per element; dweight: N products and the start value; dbias: N
            // values and the start value
            const std::vector<float> x = tw.act_c(inp), wf = tw.act_c(w), dy = tw.act_c(dout);
            const bool tc = d != DType::F32;
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
            tw.check_act("matmul_backward dinp", dinp,
                         act_tol(d, normwise(scaled(Ai, sum_coeff(g.OC, tc)), tw.act_c(dinp)), 1));
            tw.check_f32("matmul_backward dweight", dw, normwise(scaled(Aw, sum_coeff(g.N + 1, tc)), tw.f32_c(dw)));
            // untouched (and equal) without bias
            tw.check_f32("matmul_backward dbias", db, normwise(scaled(Ab, sum_coeff(g.N + 1)), tw.f32_c(db)));
        }
    }
}

// ---- attention -------------------------------------------------------------------------------

TEST_P(CudaDTypeTest, AttentionForward) {
    const DType d = GetParam();
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(shape_str(s));
        Twin tw(d);
        Random r(seed_);
        Twin::Buf qkv = tw.act(r.normal((size_t)s.B * s.T * 3 * s.C, 1.5));   // peaked softmax rows too
        Twin::Buf out = tw.poisoned_act((size_t)s.B * s.T * s.C);
        Twin::Buf lse = tw.poisoned_f32((size_t)s.B * s.NH * s.T);
        tw.cpu().attention_forward(out.c, lse.cp<float>(), qkv.c, s.B, s.T, s.C, s.NH);
        tw.gpu().attention_forward(out.g, lse.gp<float>(), qkv.g, s.B, s.T, s.C, s.NH);
        const std::vector<float> oc = tw.act_c(out), lc = tw.f32_c(lse);
        std::vector<double> ob, lb;   // the stores' flips included
        attention_forward_bounds_any(ob, &lb, tw.act_c(qkv), oc, &lc, s.B, s.T, s.C, s.NH, 0, rounding_unit(d));
        tw.check_act("attention_forward out", out, normwise(ob, oc));
        tw.check_f32("attention_forward lse", lse, normwise(lb, lc));
    }
}

// Decoding against a KV cache: one new query (sampling), a whole prompt at once (prefill), a few
// new queries after a long cache. Cache rows past pos+n are NaN: reading one shows in out.
// Tolerance as attention_forward's (the same row maths, P rounded in 16 bits): its bound for the
// query rows pos … pos+n−1 of the pos+n cached ones.
TEST_P(CudaDTypeTest, AttentionDecode) {
    const DType d = GetParam();
    struct Decode {
        int pos, n, C, NH;
    };
    for (const Decode& s :
         {Decode{0, 1, 128, 2}, Decode{76, 1, 192, 3}, Decode{0, 77, 192, 3}, Decode{300, 5, 128, 2}}) {
        SCOPED_TRACE("pos=" + std::to_string(s.pos) + " n=" + std::to_string(s.n) + " C=" + std::to_string(s.C));
        Twin tw(d);
        Random r(seed_);
        const int rows = s.pos + s.n + 3;
        std::vector<float> cache = r.normal((size_t)rows * 3 * s.C, 1.5);
        std::fill(cache.begin() + (size_t)(s.pos + s.n) * 3 * s.C, cache.end(), NAN);
        Twin::Buf qkv = tw.act(cache);
        Twin::Buf out = tw.poisoned_act((size_t)s.n * s.C);
        tw.cpu().attention_decode(out.c, qkv.c, s.pos, s.n, s.C, s.NH);
        tw.gpu().attention_decode(out.g, qkv.g, s.pos, s.n, s.C, s.NH);
        const std::vector<float> oc = tw.act_c(out);
        std::vector<float> seq = tw.act_c(qkv);
        seq.resize((size_t)(s.pos + s.n) * 3 * s.C);   // the rows the queries see
        std::vector<double> ob;
        attention_forward_bounds_any(ob, nullptr, seq, oc, nullptr, 1, s.pos + s.n, s.C, s.NH, s.pos, rounding_unit(d));
        tw.check_act("attention_decode out", out, normwise(ob, oc));
    }
}

TEST_P(CudaDTypeTest, AttentionBackwardWritesDqkv) {
    const DType d = GetParam();
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(shape_str(s));
        Twin tw(d);
        Random r(seed_);
        Twin::Buf qkv = tw.act(r.normal((size_t)s.B * s.T * 3 * s.C, 1.5));
        // the forward's out and lse, the CPU's, on both sides
        Twin::Buf out = tw.alloc((size_t)s.B * s.T * s.C * tw.act_size()), lse = tw.alloc((size_t)s.B * s.NH * s.T * 4);
        tw.cpu().attention_forward(out.c, lse.cp<float>(), qkv.c, s.B, s.T, s.C, s.NH);
        tw.upload(out, tw.bytes_c(out));
        tw.upload(lse, tw.bytes_c(lse));
        Twin::Buf dout = tw.act(r.normal((size_t)s.B * s.T * s.C));
        Twin::Buf dqkv = tw.poisoned_act((size_t)s.B * s.T * 3 * s.C);   // overwritten
        tw.cpu().attention_backward(dqkv.c, dout.c, qkv.c, out.c, lse.cp<float>(), s.B, s.T, s.C, s.NH);
        tw.gpu().attention_backward(dqkv.g, dout.g, qkv.g, out.g, lse.gp<float>(), s.B, s.T, s.C, s.NH);
        const std::vector<float> dc = tw.act_c(dqkv);
        std::vector<double> bound;   // the store's flip included
        attention_backward_bounds_any(bound, tw.act_c(qkv), tw.act_c(dout), tw.act_c(out), tw.f32_c(lse), dc, s.B, s.T,
                                      s.C, s.NH, rounding_unit(d));
        tw.check_act("attention_backward dqkv", dqkv, normwise(bound, dc));
    }
}

// ---- elementwise -----------------------------------------------------------------------------

TEST_P(CudaDTypeTest, GeluForward) {
    const DType d = GetParam();
    Twin tw(d);
    Random r(seed_);
    const size_t n = 1000003;
    Twin::Buf inp = tw.act(r.normal(n, 3.0));
    Twin::Buf out = tw.poisoned_act(n);
    tw.cpu().gelu_forward(out.c, inp.c, n);
    tw.gpu().gelu_forward(out.g, inp.g, n);
    tw.check_act("gelu_forward out", out, act_tol(d, gelu_forward_tol(tw.act_c(inp), tw.act_c(out)), 1));
}

TEST_P(CudaDTypeTest, GeluBackwardWritesDinp) {
    const DType d = GetParam();
    Twin tw(d);
    Random r(seed_);
    const size_t n = 1000003;
    Twin::Buf inp = tw.act(r.normal(n, 3.0)), dout = tw.act(r.normal(n));
    Twin::Buf dinp = tw.poisoned_act(n);   // overwritten
    tw.cpu().gelu_backward(dinp.c, inp.c, dout.c, n);
    tw.gpu().gelu_backward(dinp.g, inp.g, dout.g, n);
    tw.check_act("gelu_backward dinp", dinp,
                 act_tol(d, gelu_backward_tol(tw.act_c(inp), tw.act_c(dout), tw.act_c(dinp)), 1));
}

TEST_P(CudaDTypeTest, ResidualForwardIsExact) {
    Twin tw(GetParam());
    Random r(seed_);
    for (size_t n : {size_t(1), size_t(7), size_t(1000003)}) {
        SCOPED_TRACE("n=" + std::to_string(n));
        Twin::Buf a = tw.act(r.normal(n)), b = tw.act(r.normal(n, 0.01));
        Twin::Buf out = tw.poisoned_act(n);
        tw.cpu().residual_forward(out.c, a.c, b.c, n);
        tw.gpu().residual_forward(out.g, a.g, b.g, n);
        tw.check_bytes("residual_forward out", out, tw.act_size());   // one add, one rounding
    }
}

// ---- classifier ------------------------------------------------------------------------------

TEST_P(CudaDTypeTest, FusedClassifier) {
    const DType d = GetParam();
    const int V = 1000, Vp = 1024;
    for (int N : {1, 231}) {
        // in place (as the model calls it), into a separate buffer, and losses only
        for (const char* mode : {"in place", "separate", "losses only"}) {
            SCOPED_TRACE("N=" + std::to_string(N) + " " + mode);
            Twin tw(d);
            Random r(seed_);
            // the padding columns hold junk the kernel must ignore (and zero in dlogits)
            Twin::Buf logits = tw.act(r.normal((size_t)N * Vp, 3.0));
            const std::vector<int32_t> tgt = r.ints(N, V);
            Twin::Buf targets = tw.raw(tgt);
            const std::vector<float> z = tw.act_c(logits);   // before an in-place run overwrites them
            Twin::Buf losses = tw.poisoned_f32(N);
            const std::string m = mode;
            Twin::Buf dlogits = m == "in place"   ? logits
                                : m == "separate" ? tw.poisoned_act((size_t)N * Vp)
                                                  : Twin::Buf{};
            const float dloss = 1.0f / N;
            tw.cpu().fused_classifier(dlogits.c, losses.cp<float>(), logits.c, targets.cp<int32_t>(), N, V, Vp, dloss);
            tw.gpu().fused_classifier(dlogits.g, losses.gp<float>(), logits.g, targets.gp<int32_t>(), N, V, Vp, dloss);
            const std::vector<float> dl = m != "losses only" ? tw.act_c(dlogits) : std::vector<float>{};
            const ClassifierTols tol =
                classifier_tols(z, tgt, tw.f32_c(losses), m != "losses only" ? &dl : nullptr, N, V, Vp, dloss);
            tw.check_f32("fused_classifier losses", losses, tol.losses);
            if (m != "losses only") {
                tw.check_act("fused_classifier dlogits", dlogits, act_tol(d, tol.dlogits_fp32, 1));
                std::vector<float> g = tw.act_g(dlogits);
                size_t nonzero_pad = 0;
                for (int i = 0; i < N; i++)
                    for (int v = V; v < Vp; v++)
                        nonzero_pad += g[(size_t)i * Vp + v] != 0.0f;
                EXPECT_EQ(nonzero_pad, 0u) << "dlogits padding columns must be written as 0";
            } else {
                tw.check_act("fused_classifier logits (read only)", logits, 0.0);
            }
        }
    }
}

// ---- FP8 -------------------------------------------------------------------------------------

namespace {
// Values spanning every FP8 regime at the given scale: normal, subnormal, flushed, saturated.
std::vector<float> fp8_inputs(Random& r, size_t n) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) {
        const double e = -24 + 40 * r.rng.uniform();   // 2^-24 … 2^16
        x[i] = (float)(std::ldexp(1.0 + r.rng.uniform(), (int)std::floor(e)) * (r.rng.uniform() < 0.5 ? -1 : 1));
    }
    for (size_t i = 0; i < n; i += 977)
        x[i] = 0.0f;
    return x;
}
}   // namespace

TEST_P(CudaDTypeTest, AmaxIsExact) {
    Twin tw(GetParam());
    Random r(seed_);
    for (size_t n : {size_t(1), size_t(4099), size_t(3000017)}) {
        SCOPED_TRACE("n=" + std::to_string(n));
        std::vector<float> x = r.normal(n);
        x[r.rng.below(n)] = -37.5f;   // the largest magnitude, negative, anywhere
        Twin::Buf b = tw.act(x);
        TestStream stream;   // (tw.act waited for its copies)
        auto amaxes = [&](float* c, float* g) {
            with_storage_types(tw.dtype(), [&](auto ct, auto gt) {
                *c = cpu::amax(b.cp<decltype(ct)>(), n);
                *g = cuda::amax(b.gp<decltype(gt)>(), n, stream.s);
            });
        };
        float c = 0, g = 0;
        amaxes(&c, &g);
        EXPECT_EQ(float_bits(g), float_bits(c)) << "amax: cuda " << g << " vs cpu " << c;
        EXPECT_EQ(c, 37.5f);
        // a NaN anywhere must surface (never hidden by a max)
        x[r.rng.below(n)] = NAN;
        tw.upload(b, encode_act(tw.dtype(), x));
        amaxes(&c, &g);
        EXPECT_TRUE(std::isnan(g)) << "a NaN input must make the amax NaN";
        EXPECT_TRUE(std::isnan(c));
    }
}

TEST_P(CudaDTypeTest, Fp8CastsAreBitIdenticalWithTheirStatistics) {
    Twin tw(GetParam());
    Random r(seed_);
    const size_t n = 2000003;
    std::vector<float> x = fp8_inputs(r, n);
    x[5] = INFINITY;
    x[6] = -INFINITY;
    for (bool with_nan : {false, true}) {
        if (with_nan) x[r.rng.below(n)] = NAN;
        Twin::Buf xb = tw.act(x);
        // scales: saturate the top and flush the bottom (1), a typical delayed scale, a tiny one
        for (float scale : {1.0f, 448.0f / 4096.0f, 0x1p-20f}) {
            SCOPED_TRACE(std::string(with_nan ? "with NaN" : "finite") + " scale " + std::to_string(scale));
            Twin::Buf q4 = tw.poisoned(n), q5 = tw.poisoned(n);
            // the statistics accumulate in backend memory (zeroed by alloc); the second cast into
            // the same slot (a second micro-batch) must double the counts and keep the amax
            Twin::Buf k4 = tw.alloc(sizeof(Fp8Counters)), k5 = tw.alloc(sizeof(Fp8Counters));
            Twin::Buf sc = scale_slot(tw, scale);   // the cast reads its scale from backend memory
            TestStream stream;                      // (the Twin's buffers are ready: it waits for its copies)
            for (int cast = 0; cast < 2; cast++) {
                with_storage_types(tw.dtype(), [&](auto ct, auto gt) {
                    using C = decltype(ct);
                    using G = decltype(gt);
                    accumulate(*k4.cp<Fp8Counters>(), cpu::quantize_fp8(q4.cp<fp8e4m3>(), xb.cp<C>(), n, scale));
                    accumulate(*k5.cp<Fp8Counters>(), cpu::quantize_fp8(q5.cp<fp8e5m2>(), xb.cp<C>(), n, scale));
                    cuda::quantize_fp8<G, fp8e4m3>(q4.gp<fp8e4m3>(), xb.gp<G>(), n, &sc.gp<Fp8ScaleSlot>()->scale,
                                                   k4.gp<Fp8Counters>(), stream.s);
                    cuda::quantize_fp8<G, fp8e5m2>(q5.gp<fp8e5m2>(), xb.gp<G>(), n, &sc.gp<Fp8ScaleSlot>()->scale,
                                                   k5.gp<Fp8Counters>(), stream.s);
                });
            }
            cudaCheck(cudaStreamSynchronize(stream.s));
            auto read = [](Backend& be, const void* slot) {
                Fp8Counters c;
                be.copy_to_host(&c, slot, sizeof(c));
                return to_cast_stats(c);
            };
            const Fp8CastStats c4 = read(tw.cpu(), k4.c), g4 = read(tw.gpu(), k4.g);
            const Fp8CastStats c5 = read(tw.cpu(), k5.c), g5 = read(tw.gpu(), k5.g);
            tw.check_bytes("quantize_e4m3 q", q4, 1);
            tw.check_bytes("quantize_e5m2 q", q5, 1);
            for (auto [name, g, c] : {std::make_tuple("e4m3", g4, c4), std::make_tuple("e5m2", g5, c5)}) {
                SCOPED_TRACE(name);
                EXPECT_EQ(float_bits(g.amax), float_bits(c.amax)) << "amax: cuda " << g.amax << " vs cpu " << c.amax;
                EXPECT_EQ(c.count, 2 * n);
                EXPECT_EQ(g.count, c.count);
                EXPECT_EQ(g.saturated, c.saturated);
                EXPECT_EQ(g.flushed, c.flushed);
                EXPECT_EQ(g.nan, c.nan);
            }
            if (scale == 1.0f) {   // the inputs do reach every regime at this scale
                EXPECT_GT(c4.saturated, 0u);
                EXPECT_GT(c4.flushed, 0u);
            }
        }
    }
}

namespace {
// Random FP8 operands: values x·s cast on the host (the CPU twin's cast), inverse scales 1/s.
template <typename Q>
std::vector<Q> random_fp8(Random& r, size_t n, double stddev, float scale) {
    std::vector<Q> q(n);
    for (Q& v : q)
        v = Q::from_float((float)(stddev * r.rng.normal() * scale));
    return q;
}
// the values an FP8 GEMM multiplies: q / s
template <typename Q>
std::vector<float> dequantized(const std::vector<Q>& q, float scale) {
    std::vector<float> f(q.size());
    for (size_t i = 0; i < q.size(); i++)
        f[i] = q[i].to_float() / scale;
    return f;
}
// Training-path GEMMs: C, OC and N multiples of 16, as FP8 tensor-core GEMMs require (N is the
// reduction dimension of dW in backward). The forward also runs at any N (sampling, N = T).
const Gemm kFp8Gemms[] = {{256, 192, 576}, {256, 768, 192}, {64, 128, 512}};
const Gemm kFp8SamplingGemm = {37, 128, 384};
}   // namespace

// One cast, two layouts (quantize_transpose_fp8): q and qᵀ bit-identical to the CPU twin's, whose
// qᵀ is its q transposed; the statistics counted once per value; either layout alone works too.
TEST_P(CudaDTypeTest, Fp8CastWithTransposeIsBitIdentical) {
    Twin tw(GetParam());
    Random r(seed_);
    // shapes: ragged tiles on both sides, a GPT-2 weight, and more row tiles than one grid column
    const std::pair<int, int> shapes[] = {{33, 47}, {768, 2304}, {4100, 96}};
    for (auto [rows, cols] : shapes) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
        const size_t n = (size_t)rows * cols;
        std::vector<float> x = fp8_inputs(r, n);
        x[n / 2] = NAN;
        Twin::Buf xb = tw.act(x);
        const float scale = 448.0f / 1024.0f;
        for (int layouts = 1; layouts <= 3; layouts++) {   // 1: q only, 2: qᵀ only, 3: both
            const bool want_q = layouts & 1, want_qt = layouts & 2;
            SCOPED_TRACE(want_q && want_qt ? "both layouts" : want_q ? "q only" : "qt only");
            Twin::Buf q4 = tw.poisoned(n), qt4 = tw.poisoned(n), q5 = tw.poisoned(n), qt5 = tw.poisoned(n);
            Twin::Buf k4 = tw.alloc(sizeof(Fp8Counters)), k5 = tw.alloc(sizeof(Fp8Counters));
            Twin::Buf sc = scale_slot(tw, scale);
            tw.cpu().fp8()->quantize_transpose_e4m3(want_q ? q4.cp<fp8e4m3>() : nullptr,
                                                    want_qt ? qt4.cp<fp8e4m3>() : nullptr, xb.c, rows, cols,
                                                    sc.cp<Fp8ScaleSlot>(), k4.cp<Fp8Counters>());
            tw.gpu().fp8()->quantize_transpose_e4m3(want_q ? q4.gp<fp8e4m3>() : nullptr,
                                                    want_qt ? qt4.gp<fp8e4m3>() : nullptr, xb.g, rows, cols,
                                                    sc.gp<Fp8ScaleSlot>(), k4.gp<Fp8Counters>());
            tw.cpu().fp8()->quantize_transpose_e5m2(want_q ? q5.cp<fp8e5m2>() : nullptr,
                                                    want_qt ? qt5.cp<fp8e5m2>() : nullptr, xb.c, rows, cols,
                                                    sc.cp<Fp8ScaleSlot>(), k5.cp<Fp8Counters>());
            tw.gpu().fp8()->quantize_transpose_e5m2(want_q ? q5.gp<fp8e5m2>() : nullptr,
                                                    want_qt ? qt5.gp<fp8e5m2>() : nullptr, xb.g, rows, cols,
                                                    sc.gp<Fp8ScaleSlot>(), k5.gp<Fp8Counters>());
            if (want_q) {
                tw.check_bytes("quantize_transpose_e4m3 q", q4, 1);
                tw.check_bytes("quantize_transpose_e5m2 q", q5, 1);
            }
            if (want_qt) {
                tw.check_bytes("quantize_transpose_e4m3 qt", qt4, 1);
                tw.check_bytes("quantize_transpose_e5m2 qt", qt5, 1);
            }
            for (const Twin::Buf* k : {&k4, &k5}) {
                // compared as statistics: a NaN amax is any NaN (the payload of |x|'s bits differs
                // between a widened bf16/fp16 NaN and the CPU's canonical NaN)
                Fp8Counters cc, gc;
                tw.cpu().copy_to_host(&cc, k->c, sizeof(cc));
                tw.gpu().copy_to_host(&gc, k->g, sizeof(gc));
                const Fp8CastStats c = to_cast_stats(cc), g = to_cast_stats(gc);
                EXPECT_EQ(float_bits(g.amax), float_bits(c.amax)) << "amax: cuda " << g.amax << " vs cpu " << c.amax;
                EXPECT_EQ(g.count, c.count);
                EXPECT_EQ(g.saturated, c.saturated);
                EXPECT_EQ(g.flushed, c.flushed);
                EXPECT_EQ(g.nan, c.nan);
                EXPECT_EQ(c.count, n);
                EXPECT_EQ(c.nan, 1u);
            }
        }
    }
}

// The scaling state's ops: amax_into, the just-in-time scale, the end-of-step roll of every
// history and scale, and fp8_amaxes, bit-identical on both sides (the same TG_HD rules), over
// amaxes that reach every branch (0, subnormal, huge, inf, NaN) and more steps than the history.
TEST_P(CudaDTypeTest, Fp8ScaleStateIsBitIdentical) {
    Twin tw(GetParam());
    Random r(seed_);
    const int n = 37, n_e4m3 = 25, H = 4;
    std::vector<Fp8ScaleSlot> init(n);
    for (int i = 0; i < n; i++)
        init[i] = Fp8ScaleSlot{1.0f, 1.0f, 0, {}};
    for (bool delayed : {true, false}) {
        for (bool most_recent : {false, true}) {
            SCOPED_TRACE(std::string(delayed ? "delayed" : "current") + (most_recent ? " most_recent" : " max"));
            Twin::Buf slots = tw.raw(init), hist = tw.alloc((size_t)n * H * sizeof(float));
            Twin::Buf amaxes = tw.alloc((size_t)n * sizeof(float));
            for (int step = 0; step < 7; step++) {
                std::vector<Fp8Counters> counters(n, Fp8Counters{});
                for (int i = 0; i < n; i++) {
                    const float special[] = {0.0f, 1e-40f, 3e38f, INFINITY, NAN};
                    const float a = (i + step) % 9 < 5 ? special[(i + step) % 9]
                                                       : (float)std::fabs(r.rng.normal() * std::pow(10.0, i % 7 - 3));
                    Fp8CastStats st;
                    st.amax = a;
                    accumulate(counters[i], st);
                }
                Twin::Buf k = tw.raw(counters);
                const bool reduced = step % 2 == 1;   // odd steps: through fp8_amaxes, as under MPI
                if (reduced) {
                    tw.cpu().fp8()->fp8_amaxes(amaxes.cp<float>(), k.cp<Fp8Counters>(), n);
                    tw.gpu().fp8()->fp8_amaxes(amaxes.gp<float>(), k.gp<Fp8Counters>(), n);
                }
                tw.cpu().fp8()->fp8_end_step(slots.cp<Fp8ScaleSlot>(), hist.cp<float>(), k.cp<Fp8Counters>(),
                                             reduced ? amaxes.cp<float>() : nullptr, n, n_e4m3, H, most_recent, 1,
                                             delayed);
                tw.gpu().fp8()->fp8_end_step(slots.gp<Fp8ScaleSlot>(), hist.gp<float>(), k.gp<Fp8Counters>(),
                                             reduced ? amaxes.gp<float>() : nullptr, n, n_e4m3, H, most_recent, 1,
                                             delayed);
                tw.check_bytes("fp8_end_step slots", slots, 1);
                tw.check_bytes("fp8_end_step history", hist, 1);
            }
            // just in time: the amax of a tensor (amax_into), then its scale
            std::vector<float> x = r.normal(100003, 3.0);
            x[17] = -250.0f;
            Twin::Buf xb = tw.act(x), jit = tw.alloc(sizeof(Fp8Counters));
            tw.cpu().fp8()->amax_into(xb.c, x.size(), jit.cp<Fp8Counters>());
            tw.gpu().fp8()->amax_into(xb.g, x.size(), jit.gp<Fp8Counters>());
            tw.check_bytes("amax_into", jit, 1);
            tw.cpu().fp8()->fp8_scale_from_counters(slots.cp<Fp8ScaleSlot>() + 3, jit.cp<Fp8Counters>(), 448.0f, 2);
            tw.gpu().fp8()->fp8_scale_from_counters(slots.gp<Fp8ScaleSlot>() + 3, jit.gp<Fp8Counters>(), 448.0f, 2);
            tw.check_bytes("fp8_scale_from_counters", slots, 1);
        }
    }
}

TEST_P(CudaDTypeTest, MatmulForwardFp8) {
    const DType d = GetParam();
    std::vector<Gemm> gemms(std::begin(kFp8Gemms), std::end(kFp8Gemms));
    gemms.push_back(kFp8SamplingGemm);
    for (const Gemm& g : gemms) {
        for (bool with_bias : {true, false}) {
            SCOPED_TRACE(gemm_str(g) + (with_bias ? " bias" : " no bias"));
            Twin tw(d);
            Random r(seed_);
            const float sx = 64.0f, sw = 2048.0f;
            const std::vector<fp8e4m3> x8 = random_fp8<fp8e4m3>(r, (size_t)g.N * g.C, 1.0, sx);
            const std::vector<fp8e4m3> w8 = random_fp8<fp8e4m3>(r, (size_t)g.OC * g.C, 0.05, sw);
            Twin::Buf xq = tw.raw(x8), wq = tw.raw(w8);
            Twin::Buf b = tw.act(r.normal(g.OC, 0.5));
            Twin::Buf out = tw.poisoned_act((size_t)g.N * g.OC);
            Twin::Buf ssx = scale_slot(tw, sx), ssw = scale_slot(tw, sw);   // 1/s from the slots
            tw.cpu().fp8()->matmul_forward_fp8(out.c, xq.cp<fp8e4m3>(), ssx.cp<Fp8ScaleSlot>(), wq.cp<fp8e4m3>(),
                                               ssw.cp<Fp8ScaleSlot>(), with_bias ? b.c : nullptr, g.N, g.C, g.OC);
            tw.gpu().fp8()->matmul_forward_fp8(out.g, xq.gp<fp8e4m3>(), ssx.gp<Fp8ScaleSlot>(), wq.gp<fp8e4m3>(),
                                               ssw.gp<Fp8ScaleSlot>(), with_bias ? b.g : nullptr, g.N, g.C, g.OC);
            // C exact products in the FP8 accumulator, the bias added in FP32, the store's flip
            std::vector<double> A = abs_matmul(dequantized(x8, sx), dequantized(w8, sw), g.N, g.C, g.OC);
            const std::vector<float> bias = tw.act_c(b);
            if (with_bias)
                for (size_t i = 0; i < A.size(); i++)
                    A[i] += std::fabs(bias[i % g.OC]);
            const double fp32 = normwise(scaled(A, fp8_gemm_coeff(g.C + 1)), tw.act_c(out));
            tw.check_act("matmul_forward_fp8 out", out, act_tol(d, fp32, 1));
        }
    }
}

TEST_P(CudaDTypeTest, MatmulBackwardFp8WritesDinpAccumulatesParameters) {
    const DType d = GetParam();
    for (const Gemm& g : kFp8Gemms) {
        for (bool with_bias : {true, false}) {
            SCOPED_TRACE(gemm_str(g) + (with_bias ? " bias" : " no bias"));
            Twin tw(d);
            Random r(seed_);
            const float sx = 64.0f, sw = 2048.0f, sdy = 4096.0f;
            std::vector<float> dy = r.normal((size_t)g.N * g.OC, 0.01);
            std::vector<fp8e5m2> dyq(dy.size());
            for (size_t i = 0; i < dy.size(); i++)
                dyq[i] = fp8e5m2::from_float(dy[i] * sdy);
            // the backward takes the layouts the casts write: dY (N,OC), dYᵀ (OC,N), Xᵀ (C,N), Wᵀ (C,OC)
            const std::vector<fp8e4m3> x8 = random_fp8<fp8e4m3>(r, (size_t)g.N * g.C, 1.0, sx);
            const std::vector<fp8e4m3> w8 = random_fp8<fp8e4m3>(r, (size_t)g.OC * g.C, 0.05, sw);
            Twin::Buf dout = tw.act(dy), dout_q = tw.raw(dyq), dout_qt = tw.raw(transposed(dyq, g.N, g.OC));
            Twin::Buf xqt = tw.raw(transposed(x8, g.N, g.C)), wqt = tw.raw(transposed(w8, g.OC, g.C));
            Twin::Buf dinp = tw.poisoned_act((size_t)g.N * g.C);   // overwritten
            const std::vector<float> dw0 = r.normal((size_t)g.OC * g.C, 0.1), db0 = r.normal(g.OC, 0.1);
            Twin::Buf dw = tw.f32(dw0), db = tw.f32(db0);   // +=
            Twin::Buf ssx = scale_slot(tw, sx), ssw = scale_slot(tw, sw), ssdy = scale_slot(tw, sdy);
            tw.cpu().fp8()->matmul_backward_fp8(dinp.c, dw.cp<float>(), with_bias ? db.cp<float>() : nullptr,
                                                dout_q.cp<fp8e5m2>(), dout_qt.cp<fp8e5m2>(), ssdy.cp<Fp8ScaleSlot>(),
                                                dout.c, xqt.cp<fp8e4m3>(), ssx.cp<Fp8ScaleSlot>(), wqt.cp<fp8e4m3>(),
                                                ssw.cp<Fp8ScaleSlot>(), g.N, g.C, g.OC);
            tw.gpu().fp8()->matmul_backward_fp8(dinp.g, dw.gp<float>(), with_bias ? db.gp<float>() : nullptr,
                                                dout_q.gp<fp8e5m2>(), dout_qt.gp<fp8e5m2>(), ssdy.gp<Fp8ScaleSlot>(),
                                                dout.g, xqt.gp<fp8e4m3>(), ssx.gp<Fp8ScaleSlot>(), wqt.gp<fp8e4m3>(),
                                                ssw.gp<Fp8ScaleSlot>(), g.N, g.C, g.OC);
            // dinp: OC exact products per element; dweight: N of them and the start value; dbias:
            // an FP32 sum of the 16-bit dout and the start value
            const std::vector<float> dyf = dequantized(dyq, sdy), xf = dequantized(x8, sx), wf = dequantized(w8, sw);
            const std::vector<double> Ai = abs_matmul(dyf, transposed(wf, g.OC, g.C), g.N, g.OC, g.C);
            std::vector<double> Aw = abs_matmul(transposed(dyf, g.N, g.OC), transposed(xf, g.N, g.C), g.OC, g.N, g.C);
            for (size_t i = 0; i < Aw.size(); i++)
                Aw[i] += std::fabs(dw0[i]);
            const std::vector<float> dyr = tw.act_c(dout);
            std::vector<double> Ab(g.OC);
            for (int o = 0; o < g.OC; o++) {
                Ab[o] = std::fabs(db0[o]);
                for (int n = 0; n < g.N; n++)
                    Ab[o] += std::fabs(dyr[(size_t)n * g.OC + o]);
            }
            tw.check_act("matmul_backward_fp8 dinp", dinp,
                         act_tol(d, normwise(scaled(Ai, fp8_gemm_coeff(g.OC)), tw.act_c(dinp)), 1));
            tw.check_f32("matmul_backward_fp8 dweight", dw,
                         normwise(scaled(Aw, fp8_gemm_coeff(g.N + 1)), tw.f32_c(dw)));
            tw.check_f32("matmul_backward_fp8 dbias", db, normwise(scaled(Ab, sum_coeff(g.N + 1)), tw.f32_c(db)));
        }
    }
}

// ---- optimizer -------------------------------------------------------------------------------

TEST_P(CudaDTypeTest, SumSquares) {
    Twin tw(GetParam());
    Random r(seed_);
    for (size_t n : {size_t(1), size_t(1025), size_t(5000011)}) {
        SCOPED_TRACE("n=" + std::to_string(n));
        std::vector<float> g = r.normal(n, 1e-3);
        for (size_t i = 0; i < n; i += 1001)
            g[i] = (float)(r.rng.normal() * 10.0);   // a wide range of magnitudes
        Twin::Buf b = tw.f32(g);
        const double c = tw.cpu().sum_squares(b.cp<float>(), n), gs = tw.gpu().sum_squares(b.gp<float>(), n);
        // squares of floats are exact in double; n double additions in two orders, of
        // non-negative terms: each side within γ_n·Σ = n·2^-53/(1 − n·2^-53) of it (deterministic)
        const double gamma = n * 0x1p-53 / (1 - n * 0x1p-53);
        EXPECT_LE(std::fabs(gs - c), 2 * gamma * c) << "sum_squares: cuda " << gs << " vs cpu " << c;
        g[r.rng.below(n)] = INFINITY;
        tw.upload(b, g);
        EXPECT_TRUE(std::isinf(tw.gpu().sum_squares(b.gp<float>(), n))) << "an inf gradient must propagate";
        g[r.rng.below(n)] = NAN;
        tw.upload(b, g);
        const double with_nan = tw.gpu().sum_squares(b.gp<float>(), n);
        EXPECT_FALSE(std::isfinite(with_nan)) << "a NaN gradient must make the sum non-finite";
    }
}

TEST_P(CudaDTypeTest, AdamWUpdate) {
    const DType d = GetParam();
    Random r(seed_);
    const size_t n = 1000003;
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, grad_scale = 0.5f;
    for (bool with_master : {true, false}) {
        for (int t : {1, 7}) {
            SCOPED_TRACE(std::string(with_master ? "FP32 master" : "working weights only") + " t=" + std::to_string(t));
            Twin tw(d);
            std::vector<float> p = r.normal(n, 0.05);
            Twin::Buf master = tw.f32(p);
            Twin::Buf working = tw.act(p);   // round(master)
            const std::vector<float> m0 = r.normal(n, 1e-3);
            Twin::Buf m = tw.f32(m0);
            std::vector<float> v0 = r.normal(n, 1e-3);
            for (float& x : v0)
                x = x * x;   // v ≥ 0
            Twin::Buf v = tw.f32(v0);
            const std::vector<float> g0 = r.normal(n, 1e-2);
            Twin::Buf grads = tw.f32(g0);
            const std::vector<float> p_start = with_master ? p : tw.act_c(working);   // the p the update reads
            tw.cpu().adamw_update(with_master ? master.cp<float>() : nullptr, working.c, m.cp<float>(), v.cp<float>(),
                                  grads.cp<float>(), n, lr, b1, b2, eps, wd, grad_scale, t);
            tw.gpu().adamw_update(with_master ? master.gp<float>() : nullptr, working.g, m.gp<float>(), v.gp<float>(),
                                  grads.gp<float>(), n, lr, b1, b2, eps, wd, grad_scale, t);
            // the same FP32 formula per element: only contraction (FMA) differs (twin_bounds.h)
            const std::vector<float> p1 = with_master ? tw.f32_c(master) : tw.act_c(working);
            const AdamWTols tol =
                adamw_tols(p_start, m0, v0, g0, tw.f32_c(m), tw.f32_c(v), p1, lr, b1, b2, eps, wd, grad_scale, t);
            tw.check_f32("adamw m", m, tol.m);
            tw.check_f32("adamw v", v, tol.v);
            if (with_master) tw.check_f32("adamw master", master, tol.p_fp32);
            // working = round(p): one flip
            tw.check_act("adamw working weights", working, act_tol(d, tol.p_fp32, 1));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CudaDTypeTest, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         dtype_param_name);
