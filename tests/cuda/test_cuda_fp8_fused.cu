// test_cuda_fp8_fused.cu — the FP8 casts fused into their producers (cuda/fp8_fused.cuh), through
// the CUDA backend with --fused-kernels, in fp32, bf16 and fp16:
//   gelu_forward_e4m3, layernorm_forward_e4m3, attention_forward_e4m3 (the flash epilogue),
//   gelu_backward_e5m2, layernorm_backward_e5m2, attention_backward_e5m2 (the flash epilogues),
//   adamw_update_e4m3;
// and the vectorised cast-with-transpose (cuda/fp8.cuh, quantize_transpose_vec_kernel) against the
// scalar one, bit for bit, on shapes of whole 64×64 tiles.
//
// Two properties each:
//   1. fused = unfused on the GPU, bit for bit: the producer op writing its output in the
//      activation dtype, then quantize_transpose_* of it. q, qt, the statistics (every counter),
//      and the producer's other outputs (layernorm's mean and rstd, GELU backward's dinp, AdamW's
//      master, working weights, m and v) are
//      identical bytes. This is the whole claim of the fusion: the same value, rounded the same
//      way, cast by the same instruction; it is exact, so the check is exact.
//   2. fused GPU = fused CPU twin, as far as the producers agree. Both sides cast their own
//      producer's values (in the activation dtype T) with the same scale, and that cast is
//      bit-identical given the same value (test_cuda_kernels.cu), so an FP8 byte may differ only
//      where the two producers' values differ; those are within the producer's bound of its twin
//      (twin_bounds.h: its FP32 bound plus one flip of T, 2u_T ≤ 2^-7 of the value), less than
//      the FP8 spacing (≥ u = 2^-4 of the value for E4M3, 2^-3 for E5M2), so at most one FP8
//      rounding boundary lies between them. Checked: every byte that differs has a producer value
//      that differs, and is one code from the CPU's (±0 counted as one code); the producers'
//      outputs within their bounds as in test_cuda_kernels.cu.
// Layouts: q only, qt only, both; and none (the statistics alone, for a just-in-time scale),
// whose amax must equal the full cast's.
#include "tests/cuda/cuda_test_util.h"

#include "cpu/fp8_kernels.h"
#include "cuda/fp8.cuh"
#include "tests/cuda/test_stream.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

// rows × cols: ragged 32×32 tiles on both sides, a GPT-2 (B·T, 4C) slice, more row tiles than
// one grid column holds
// whole 64×64 tiles (the vectorised cast-with-transpose) and shapes that are not (the scalar one)
const std::pair<int, int> kShapes[] = {{33, 47}, {256, 3072}, {128, 768}, {4100, 96}};

// the backend's fused ops run fused (CudaOptions::fused_kernels, --fused-kernels)
CudaOptions fused() {
    CudaOptions o;
    o.fused_kernels = true;
    return o;
}

Twin::Buf scale_slot(Twin& tw, float s) { return tw.raw(std::vector<Fp8ScaleSlot>{Fp8ScaleSlot{1.0f / s, s, 0, {}}}); }

Fp8Counters counters_g(Twin& tw, const Twin::Buf& k) {
    Fp8Counters c;
    tw.gpu().copy_to_host(&c, k.g, sizeof(c));
    return c;
}

// The GPU counters of the fused and the unfused cast: identical bytes.
void expect_same_counters(Twin& tw, const Twin::Buf& fused, const Twin::Buf& unfused) {
    const Fp8Counters f = counters_g(tw, fused), u = counters_g(tw, unfused);
    EXPECT_EQ(std::memcmp(&f, &u, sizeof(f)), 0)
        << "statistics: fused amax bits " << f.amax_bits << " count " << f.count << " saturated " << f.saturated
        << " flushed " << f.flushed << " nan " << f.nan << "; unfused " << u.amax_bits << " " << u.count << " "
        << u.saturated << " " << u.flushed << " " << u.nan;
}

// FP8 bytes of the GPU vs the CPU twin (see the top of the file): yg, yc are the values each side
// cast (its producer's output, in the layout of g and c). Each byte that differs must have a
// producer value that differs, and be one code from the CPU's: codes ordered as signed magnitudes,
// +0 and −0 the same.
void expect_fp8_close(const std::string& what, const std::vector<uint8_t>& g, const std::vector<uint8_t>& c,
                      const std::vector<float>& yg, const std::vector<float>& yc) {
    ASSERT_EQ(g.size(), c.size()) << what;
    ASSERT_EQ(yg.size(), c.size()) << what;
    ASSERT_EQ(yc.size(), c.size()) << what;
    auto position = [](uint8_t b) { return (b & 0x80) ? -(int)(b & 0x7f) : (int)(b & 0x7f); };
    size_t differ = 0, far = 0, unexplained = 0, first = 0;
    for (size_t i = 0; i < c.size(); i++) {
        if (g[i] == c[i]) continue;
        if (differ++ == 0) first = i;
        if (std::abs(position(g[i]) - position(c[i])) > 1) far++;
        if (float_bits(yg[i]) == float_bits(yc[i])) unexplained++;
    }
    EXPECT_EQ(far, 0u) << what << ": bytes more than one FP8 code from the CPU twin's (" << differ << " differ)";
    EXPECT_EQ(unexplained, 0u) << what << ": bytes that differ from the CPU twin's although both cast the same value";
    if (differ > 0) {
        std::printf("    %s: %zu of %zu bytes one code from the CPU twin's (first at %zu: value %.9g vs %.9g)\n",
                    what.c_str(), differ, c.size(), first, yg[first], yc[first]);
    }
}
// the same for a transposed cast: qt (cols, rows) of values y (rows, cols)
void expect_fp8t_close(const std::string& what, const std::vector<uint8_t>& g, const std::vector<uint8_t>& c,
                       const std::vector<float>& yg, const std::vector<float>& yc, int rows, int cols) {
    expect_fp8_close(what, g, c, transposed(yg, rows, cols), transposed(yc, rows, cols));
}

class CudaFp8FusedTest : public CudaDTypeTest {};

struct Layouts {
    bool q, qt;
    const char* name;
};
// an E4M3 output on one side of a Twin buffer, or none when that layout is not asked for
fp8e4m3* e4m3_or_null(const Twin::Buf& buf, bool want, bool gpu) {
    return want ? (gpu ? buf.gp<fp8e4m3>() : buf.cp<fp8e4m3>()) : nullptr;
}
const Layouts kLayouts[] = {{true, false, "q only"}, {false, true, "qt only"}, {true, true, "both layouts"}};

}   // namespace

TEST_P(CudaFp8FusedTest, GeluForwardCastIsTheUnfusedCast) {
    Twin tw(GetParam(), fused());
    Random r(seed_);
    for (auto [rows, cols] : kShapes) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
        const size_t n = (size_t)rows * cols;
        std::vector<float> x = r.normal(n, 3.0);
        x[n / 3] = NAN;
        Twin::Buf xb = tw.act(x), y = tw.poisoned_act(n);
        Twin::Buf sc = scale_slot(tw, 448.0f / 16.0f);   // gelu of N(0, 3²) stays below 16: few saturate
        tw.gpu().gelu_forward(y.g, xb.g, n);
        tw.cpu().gelu_forward(y.c, xb.c, n);   // the values each side casts
        tw.check_act("gelu out vs the CPU twin", y,
                     act_tol(tw.dtype(), gelu_forward_tol(tw.act_c(xb), tw.act_c(y)), 1));
        const std::vector<float> yg = tw.act_g(y), yc = tw.act_c(y);
        for (const Layouts& lay : kLayouts) {
            SCOPED_TRACE(lay.name);
            Twin::Buf qf = tw.poisoned(n), qtf = tw.poisoned(n), qu = tw.poisoned(n), qtu = tw.poisoned(n);
            Twin::Buf kf = tw.alloc(sizeof(Fp8Counters)), ku = tw.alloc(sizeof(Fp8Counters));
            tw.gpu().fp8()->gelu_forward_e4m3(e4m3_or_null(qf, lay.q, true), e4m3_or_null(qtf, lay.qt, true), xb.g,
                                              rows, cols, sc.gp<Fp8ScaleSlot>(), kf.gp<Fp8Counters>());
            tw.gpu().fp8()->quantize_transpose_e4m3(e4m3_or_null(qu, lay.q, true), e4m3_or_null(qtu, lay.qt, true), y.g,
                                                    rows, cols, sc.gp<Fp8ScaleSlot>(), ku.gp<Fp8Counters>());
            tw.cpu().fp8()->gelu_forward_e4m3(e4m3_or_null(qf, lay.q, false), e4m3_or_null(qtf, lay.qt, false), xb.c,
                                              rows, cols, sc.cp<Fp8ScaleSlot>(), kf.cp<Fp8Counters>());
            if (lay.q) expect_bytes_equal("gelu q: fused vs unfused", tw.bytes_g(qf), tw.bytes_g(qu));
            if (lay.qt) expect_bytes_equal("gelu qt: fused vs unfused", tw.bytes_g(qtf), tw.bytes_g(qtu));
            expect_same_counters(tw, kf, ku);
            if (lay.q) expect_fp8_close("gelu q vs the CPU twin", tw.bytes_g(qf), tw.bytes_c(qf), yg, yc);
            if (lay.qt)
                expect_fp8t_close("gelu qt vs the CPU twin", tw.bytes_g(qtf), tw.bytes_c(qtf), yg, yc, rows, cols);
        }
        // the statistics alone: the same amax and counts as a cast that writes
        Twin::Buf ks = tw.alloc(sizeof(Fp8Counters)), kw = tw.alloc(sizeof(Fp8Counters)), qw = tw.poisoned(n);
        tw.gpu().fp8()->gelu_forward_e4m3(nullptr, nullptr, xb.g, rows, cols, sc.gp<Fp8ScaleSlot>(),
                                          ks.gp<Fp8Counters>());
        tw.gpu().fp8()->gelu_forward_e4m3(qw.gp<fp8e4m3>(), nullptr, xb.g, rows, cols, sc.gp<Fp8ScaleSlot>(),
                                          kw.gp<Fp8Counters>());
        expect_same_counters(tw, ks, kw);
    }
}

TEST_P(CudaFp8FusedTest, LayerNormForwardCastIsTheUnfusedCast) {
    Twin tw(GetParam(), fused());
    Random r(seed_);
    for (auto [N, C] : kShapes) {
        SCOPED_TRACE(std::to_string(N) + "x" + std::to_string(C));
        const size_t n = (size_t)N * C;
        Twin::Buf xb = tw.act(r.normal(n, 2.0, 0.5)), w = tw.act(r.normal(C, 0.3, 1.0)), b = tw.act(r.normal(C, 0.2));
        Twin::Buf y = tw.poisoned_act(n), mean_u = tw.poisoned_f32(N), rstd_u = tw.poisoned_f32(N);
        Twin::Buf sc = scale_slot(tw, 448.0f / 8.0f);
        tw.gpu().layernorm_forward(y.g, mean_u.gp<float>(), rstd_u.gp<float>(), xb.g, w.g, b.g, N, C);
        tw.cpu().layernorm_forward(y.c, mean_u.cp<float>(), rstd_u.cp<float>(), xb.c, w.c, b.c, N,
                                   C);   // what it casts
        const LayernormForwardTols tol = layernorm_forward_tols(tw.act_c(xb), tw.act_c(w), tw.act_c(b),
                                                                tw.f32_c(mean_u), tw.f32_c(rstd_u), tw.act_c(y), N, C);
        tw.check_act("layernorm out vs the CPU twin", y, act_tol(tw.dtype(), tol.out_fp32, 1));
        const std::vector<float> yg = tw.act_g(y), yc = tw.act_c(y);
        for (const Layouts& lay : kLayouts) {
            SCOPED_TRACE(lay.name);
            Twin::Buf qf = tw.poisoned(n), qtf = tw.poisoned(n), qu = tw.poisoned(n), qtu = tw.poisoned(n);
            Twin::Buf kf = tw.alloc(sizeof(Fp8Counters)), ku = tw.alloc(sizeof(Fp8Counters));
            Twin::Buf mean = tw.poisoned_f32(N), rstd = tw.poisoned_f32(N);
            tw.gpu().fp8()->layernorm_forward_e4m3(e4m3_or_null(qf, lay.q, true), e4m3_or_null(qtf, lay.qt, true),
                                                   mean.gp<float>(), rstd.gp<float>(), xb.g, w.g, b.g, N, C,
                                                   sc.gp<Fp8ScaleSlot>(), kf.gp<Fp8Counters>(), false);
            tw.gpu().fp8()->quantize_transpose_e4m3(e4m3_or_null(qu, lay.q, true), e4m3_or_null(qtu, lay.qt, true), y.g,
                                                    N, C, sc.gp<Fp8ScaleSlot>(), ku.gp<Fp8Counters>());
            tw.cpu().fp8()->layernorm_forward_e4m3(e4m3_or_null(qf, lay.q, false), e4m3_or_null(qtf, lay.qt, false),
                                                   mean.cp<float>(), rstd.cp<float>(), xb.c, w.c, b.c, N, C,
                                                   sc.cp<Fp8ScaleSlot>(), kf.cp<Fp8Counters>(), false);
            expect_bytes_equal("layernorm mean: fused vs unfused", tw.bytes_g(mean), tw.bytes_g(mean_u), 4);
            expect_bytes_equal("layernorm rstd: fused vs unfused", tw.bytes_g(rstd), tw.bytes_g(rstd_u), 4);
            if (lay.q) expect_bytes_equal("layernorm q: fused vs unfused", tw.bytes_g(qf), tw.bytes_g(qu));
            if (lay.qt) expect_bytes_equal("layernorm qt: fused vs unfused", tw.bytes_g(qtf), tw.bytes_g(qtu));
            expect_same_counters(tw, kf, ku);
            tw.check_f32("layernorm mean vs the CPU twin", mean, tol.mean);
            tw.check_f32("layernorm rstd vs the CPU twin", rstd, tol.rstd);
            if (lay.q) expect_fp8_close("layernorm q vs the CPU twin", tw.bytes_g(qf), tw.bytes_c(qf), yg, yc);
            if (lay.qt)
                expect_fp8t_close("layernorm qt vs the CPU twin", tw.bytes_g(qtf), tw.bytes_c(qtf), yg, yc, N, C);
        }
        Twin::Buf ks = tw.alloc(sizeof(Fp8Counters)), kw = tw.alloc(sizeof(Fp8Counters)), qw = tw.poisoned(n);
        Twin::Buf mean = tw.poisoned_f32(N), rstd = tw.poisoned_f32(N);
        tw.gpu().fp8()->layernorm_forward_e4m3(nullptr, nullptr, mean.gp<float>(), rstd.gp<float>(), xb.g, w.g, b.g, N,
                                               C, sc.gp<Fp8ScaleSlot>(), ks.gp<Fp8Counters>(), false);
        tw.gpu().fp8()->layernorm_forward_e4m3(qw.gp<fp8e4m3>(), nullptr, mean.gp<float>(), rstd.gp<float>(), xb.g, w.g,
                                               b.g, N, C, sc.gp<Fp8ScaleSlot>(), kw.gp<Fp8Counters>(), false);
        expect_same_counters(tw, ks, kw);
        // the cast after a statistics-only call reads its statistics (stats_ready): the same bytes
        Twin::Buf qr = tw.poisoned(n), kr = tw.alloc(sizeof(Fp8Counters));
        tw.gpu().fp8()->layernorm_forward_e4m3(qr.gp<fp8e4m3>(), nullptr, mean.gp<float>(), rstd.gp<float>(), xb.g, w.g,
                                               b.g, N, C, sc.gp<Fp8ScaleSlot>(), kr.gp<Fp8Counters>(), true);
        expect_bytes_equal("layernorm q from ready statistics", tw.bytes_g(qr), tw.bytes_g(qw));
        expect_same_counters(tw, kr, kw);
    }
}

TEST_P(CudaFp8FusedTest, GeluBackwardCastIsTheUnfusedCast) {
    Twin tw(GetParam(), fused());
    Random r(seed_);
    for (auto [rows, cols] : kShapes) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
        const size_t n = (size_t)rows * cols;
        Twin::Buf xb = tw.act(r.normal(n, 2.0)), dout = tw.act(r.normal(n, 1e-3));
        Twin::Buf dinp_f = tw.poisoned_act(n), dinp_u = tw.poisoned_act(n);   // overwritten
        Twin::Buf qf = tw.poisoned(n), qtf = tw.poisoned(n), qu = tw.poisoned(n), qtu = tw.poisoned(n);
        Twin::Buf kf = tw.alloc(sizeof(Fp8Counters)), ku = tw.alloc(sizeof(Fp8Counters));
        Twin::Buf sc = scale_slot(tw, 57344.0f / 0.02f);
        tw.gpu().fp8()->gelu_backward_e5m2(dinp_f.g, qf.gp<fp8e5m2>(), qtf.gp<fp8e5m2>(), xb.g, dout.g, rows, cols,
                                           sc.gp<Fp8ScaleSlot>(), kf.gp<Fp8Counters>());
        tw.gpu().gelu_backward(dinp_u.g, xb.g, dout.g, n);
        tw.gpu().fp8()->quantize_transpose_e5m2(qu.gp<fp8e5m2>(), qtu.gp<fp8e5m2>(), dinp_u.g, rows, cols,
                                                sc.gp<Fp8ScaleSlot>(), ku.gp<Fp8Counters>());
        tw.cpu().fp8()->gelu_backward_e5m2(dinp_f.c, qf.cp<fp8e5m2>(), qtf.cp<fp8e5m2>(), xb.c, dout.c, rows, cols,
                                           sc.cp<Fp8ScaleSlot>(), kf.cp<Fp8Counters>());
        expect_bytes_equal("gelu backward dinp: fused vs unfused", tw.bytes_g(dinp_f), tw.bytes_g(dinp_u),
                           tw.act_size());
        expect_bytes_equal("gelu backward q: fused vs unfused", tw.bytes_g(qf), tw.bytes_g(qu));
        expect_bytes_equal("gelu backward qt: fused vs unfused", tw.bytes_g(qtf), tw.bytes_g(qtu));
        expect_same_counters(tw, kf, ku);
        tw.check_act("gelu backward dinp vs the CPU twin", dinp_f,   // as unfused
                     act_tol(tw.dtype(), gelu_backward_tol(tw.act_c(xb), tw.act_c(dout), tw.act_c(dinp_f)), 1));
        const std::vector<float> yg = tw.act_g(dinp_f), yc = tw.act_c(dinp_f);
        expect_fp8_close("gelu backward q vs the CPU twin", tw.bytes_g(qf), tw.bytes_c(qf), yg, yc);
        expect_fp8t_close("gelu backward qt vs the CPU twin", tw.bytes_g(qtf), tw.bytes_c(qtf), yg, yc, rows, cols);
    }
}

// layernorm backward with the E5M2 cast of its new dinp (the dY of attproj / fcproj): fused, it is
// the layernorm backward followed by the cast, bit for bit (dinp, dweight, dbias, the dinp sums, q,
// qt, statistics); rows in whole 16-row blocks take the fused kernel, ragged ones the fallback.
TEST_P(CudaFp8FusedTest, LayernormBackwardCastIsTheUnfusedCast) {
    Twin tw(GetParam(), fused());
    Random r(seed_);
    for (auto [N, C] : {std::pair<int, int>{256, 768}, {64, 192}, {33, 47}}) {
        SCOPED_TRACE(std::to_string(N) + "x" + std::to_string(C));
        const size_t n = (size_t)N * C;
        Twin::Buf x = tw.act(r.normal(n, 2.0, 0.5)), w = tw.act(r.normal(C, 0.2, 1.0)), b = tw.act(r.normal(C, 0.2));
        Twin::Buf y = tw.alloc(n * tw.act_size()), mean = tw.alloc(N * 4), rstd = tw.alloc(N * 4);
        tw.cpu().layernorm_forward(y.c, mean.cp<float>(), rstd.cp<float>(), x.c, w.c, b.c, N, C);
        tw.upload(mean, tw.f32_c(mean));
        tw.upload(rstd, tw.f32_c(rstd));
        Twin::Buf dout = tw.act(r.normal(n));
        const std::vector<float> d0 = r.normal(n, 1e-2), dw0 = r.normal(C), db0 = r.normal(C), s0 = r.normal(C);
        Twin::Buf dinp_f = tw.act(d0), dinp_u = tw.act(d0);   // += from the same start
        Twin::Buf dw_f = tw.f32(dw0), dw_u = tw.f32(dw0), db_f = tw.f32(db0), db_u = tw.f32(db0);
        Twin::Buf sums_f = tw.f32(s0), sums_u = tw.f32(s0);
        Twin::Buf qf = tw.poisoned(n), qtf = tw.poisoned(n), qu = tw.poisoned(n), qtu = tw.poisoned(n);
        Twin::Buf kf = tw.alloc(sizeof(Fp8Counters)), ku = tw.alloc(sizeof(Fp8Counters));
        Twin::Buf sc = scale_slot(tw, 57344.0f / 4.0f);
        tw.gpu().fp8()->layernorm_backward_e5m2(
            dinp_f.g, dw_f.gp<float>(), db_f.gp<float>(), dout.g, x.g, w.g, mean.gp<float>(), rstd.gp<float>(), N, C,
            sums_f.gp<float>(), qf.gp<fp8e5m2>(), qtf.gp<fp8e5m2>(), sc.gp<Fp8ScaleSlot>(), kf.gp<Fp8Counters>());
        tw.gpu().layernorm_backward(dinp_u.g, dw_u.gp<float>(), db_u.gp<float>(), dout.g, x.g, w.g, mean.gp<float>(),
                                    rstd.gp<float>(), N, C, sums_u.gp<float>());
        tw.gpu().fp8()->quantize_transpose_e5m2(qu.gp<fp8e5m2>(), qtu.gp<fp8e5m2>(), dinp_u.g, N, C,
                                                sc.gp<Fp8ScaleSlot>(), ku.gp<Fp8Counters>());
        tw.cpu().fp8()->layernorm_backward_e5m2(
            dinp_f.c, dw_f.cp<float>(), db_f.cp<float>(), dout.c, x.c, w.c, mean.cp<float>(), rstd.cp<float>(), N, C,
            sums_f.cp<float>(), qf.cp<fp8e5m2>(), qtf.cp<fp8e5m2>(), sc.cp<Fp8ScaleSlot>(), kf.cp<Fp8Counters>());
        expect_bytes_equal("layernorm backward dinp: fused vs unfused", tw.bytes_g(dinp_f), tw.bytes_g(dinp_u),
                           tw.act_size());
        expect_bytes_equal("layernorm backward dweight: fused vs unfused", tw.bytes_g(dw_f), tw.bytes_g(dw_u), 4);
        expect_bytes_equal("layernorm backward dbias: fused vs unfused", tw.bytes_g(db_f), tw.bytes_g(db_u), 4);
        expect_bytes_equal("layernorm backward sums: fused vs unfused", tw.bytes_g(sums_f), tw.bytes_g(sums_u), 4);
        expect_bytes_equal("layernorm backward q: fused vs unfused", tw.bytes_g(qf), tw.bytes_g(qu));
        expect_bytes_equal("layernorm backward qt: fused vs unfused", tw.bytes_g(qtf), tw.bytes_g(qtu));
        expect_same_counters(tw, kf, ku);
        const LayernormBackwardTols tol = layernorm_backward_tols(
            tw.act_c(dout), tw.act_c(x), tw.act_c(w), tw.f32_c(mean), tw.f32_c(rstd), round_act(tw.dtype(), d0), dw0,
            db0, tw.act_c(dinp_f), tw.f32_c(dw_f), tw.f32_c(db_f), N, C);
        tw.check_act("layernorm backward dinp vs the CPU twin", dinp_f, act_tol(tw.dtype(), tol.dinp_fp32, 1));
        tw.check_f32("layernorm backward sums vs the CPU twin", sums_f,
                     column_sums_tol(tw.act_g(dinp_f), tw.act_c(dinp_f), s0, tw.f32_c(sums_f), N, C));
        const std::vector<float> yg = tw.act_g(dinp_f), yc = tw.act_c(dinp_f);
        expect_fp8_close("layernorm backward q vs the CPU twin", tw.bytes_g(qf), tw.bytes_c(qf), yg, yc);
        expect_fp8t_close("layernorm backward qt vs the CPU twin", tw.bytes_g(qtf), tw.bytes_c(qtf), yg, yc, N, C);
    }
}

// The attention output's E4M3 cast (attproj's X) in the flash attention's epilogue: the bytes and
// statistics of the attention followed by the plain cast (cuda::quantize_fp8), and out, lse
// unchanged by it. The GEMM
// attention (and FP32) run the attention then the cast: the same check holds trivially there.
TEST_P(CudaFp8FusedTest, AttentionCastIsTheUnfusedCast) {
    CudaOptions options = fused();
    options.flash_attention = true;
    Twin tw(GetParam(), options);
    Random r(seed_);
    struct Shape {
        int B, T, C, NH;
    };
    for (const Shape& s : {Shape{2, 77, 128, 2}, Shape{1, 256, 192, 3}}) {   // head size 64; T ragged and whole
        SCOPED_TRACE("B=" + std::to_string(s.B) + " T=" + std::to_string(s.T));
        const size_t n = (size_t)s.B * s.T * s.C;
        Twin::Buf qkv = tw.act(r.normal((size_t)s.B * s.T * 3 * s.C, 1.5));
        Twin::Buf out_f = tw.poisoned_act(n), out_u = tw.poisoned_act(n);
        Twin::Buf lse_f = tw.poisoned_f32((size_t)s.B * s.NH * s.T), lse_u = tw.poisoned_f32((size_t)s.B * s.NH * s.T);
        Twin::Buf qf = tw.poisoned(n), qu = tw.poisoned(n);
        Twin::Buf kf = tw.alloc(sizeof(Fp8Counters)), ku = tw.alloc(sizeof(Fp8Counters));
        Twin::Buf sc = scale_slot(tw, 448.0f / 2.0f);
        tw.gpu().fp8()->attention_forward_e4m3(out_f.g, lse_f.gp<float>(), qf.gp<fp8e4m3>(), qkv.g, s.B, s.T, s.C, s.NH,
                                               sc.gp<Fp8ScaleSlot>(), kf.gp<Fp8Counters>());
        tw.gpu().attention_forward(out_u.g, lse_u.gp<float>(), qkv.g, s.B, s.T, s.C, s.NH);
        tw.gpu().synchronize();   // out_u is ready for the cast on a stream of the test's own
        {
            TestStream stream;
            with_storage_types(tw.dtype(), [&](auto, auto gt) {
                using G = decltype(gt);
                cuda::quantize_fp8<G, fp8e4m3>(qu.gp<fp8e4m3>(), out_u.gp<G>(), n, &sc.gp<Fp8ScaleSlot>()->scale,
                                               ku.gp<Fp8Counters>(), stream.s);
            });
            cudaCheck(cudaStreamSynchronize(stream.s));
        }
        tw.cpu().fp8()->attention_forward_e4m3(out_f.c, lse_f.cp<float>(), qf.cp<fp8e4m3>(), qkv.c, s.B, s.T, s.C, s.NH,
                                               sc.cp<Fp8ScaleSlot>(), kf.cp<Fp8Counters>());
        expect_bytes_equal("attention out: fused vs unfused", tw.bytes_g(out_f), tw.bytes_g(out_u), tw.act_size());
        expect_bytes_equal("attention lse: fused vs unfused", tw.bytes_g(lse_f), tw.bytes_g(lse_u), 4);
        expect_bytes_equal("attention q: fused vs unfused", tw.bytes_g(qf), tw.bytes_g(qu));
        expect_same_counters(tw, kf, ku);
        {
            const std::vector<float> oc = tw.act_c(out_f);
            std::vector<double> ob;
            attention_forward_bounds_any(ob, nullptr, tw.act_c(qkv), oc, nullptr, s.B, s.T, s.C, s.NH, 0,
                                         rounding_unit(tw.dtype()));
            tw.check_act("attention out vs the CPU twin", out_f, normwise(ob, oc));
        }
        expect_fp8_close("attention q vs the CPU twin", tw.bytes_g(qf), tw.bytes_c(qf), tw.act_g(out_f),
                         tw.act_c(out_f));
    }
}

// qkv's dY cast to E5M2 in the flash attention backward's epilogues (q and, through a shared tile,
// qt): the bytes and statistics of the backward followed by quantize_transpose_e5m2, dqkv unchanged
// by it. T = 77 (tail tiles, qt's columns not 16-byte aligned: byte stores), 80 (aligned, a partial
// last tile), 256 (whole tiles).
TEST_P(CudaFp8FusedTest, AttentionBackwardCastIsTheUnfusedCast) {
    CudaOptions options = fused();
    options.flash_attention = true;
    Twin tw(GetParam(), options);
    Random r(seed_);
    struct Shape {
        int B, T, C, NH;
    };
    for (const Shape& s : {Shape{2, 77, 128, 2}, Shape{1, 80, 192, 3}, Shape{1, 256, 128, 2}}) {
        SCOPED_TRACE("B=" + std::to_string(s.B) + " T=" + std::to_string(s.T));
        const size_t n = (size_t)s.B * s.T * s.C, n3 = 3 * n;
        Twin::Buf qkv = tw.act(r.normal(n3, 1.5)), dout = tw.act(r.normal(n));
        Twin::Buf out = tw.alloc(n * tw.act_size()), lse = tw.alloc((size_t)s.B * s.NH * s.T * 4);
        tw.cpu().attention_forward(out.c, lse.cp<float>(), qkv.c, s.B, s.T, s.C, s.NH);
        tw.upload(out, tw.bytes_c(out));
        tw.upload(lse, tw.bytes_c(lse));
        Twin::Buf dqkv_f = tw.poisoned_act(n3), dqkv_u = tw.poisoned_act(n3);
        Twin::Buf qf = tw.poisoned(n3), qtf = tw.poisoned(n3), qu = tw.poisoned(n3), qtu = tw.poisoned(n3);
        Twin::Buf kf = tw.alloc(sizeof(Fp8Counters)), ku = tw.alloc(sizeof(Fp8Counters));
        Twin::Buf sc = scale_slot(tw, 57344.0f / 0.5f);
        tw.gpu().fp8()->attention_backward_e5m2(dqkv_f.g, qf.gp<fp8e5m2>(), qtf.gp<fp8e5m2>(), dout.g, qkv.g, out.g,
                                                lse.gp<float>(), s.B, s.T, s.C, s.NH, sc.gp<Fp8ScaleSlot>(),
                                                kf.gp<Fp8Counters>());
        tw.gpu().attention_backward(dqkv_u.g, dout.g, qkv.g, out.g, lse.gp<float>(), s.B, s.T, s.C, s.NH);
        tw.gpu().fp8()->quantize_transpose_e5m2(qu.gp<fp8e5m2>(), qtu.gp<fp8e5m2>(), dqkv_u.g, s.B * s.T, 3 * s.C,
                                                sc.gp<Fp8ScaleSlot>(), ku.gp<Fp8Counters>());
        tw.cpu().fp8()->attention_backward_e5m2(dqkv_f.c, qf.cp<fp8e5m2>(), qtf.cp<fp8e5m2>(), dout.c, qkv.c, out.c,
                                                lse.cp<float>(), s.B, s.T, s.C, s.NH, sc.cp<Fp8ScaleSlot>(),
                                                kf.cp<Fp8Counters>());
        expect_bytes_equal("attention backward dqkv: fused vs unfused", tw.bytes_g(dqkv_f), tw.bytes_g(dqkv_u),
                           tw.act_size());
        expect_bytes_equal("attention backward q: fused vs unfused", tw.bytes_g(qf), tw.bytes_g(qu));
        expect_bytes_equal("attention backward qt: fused vs unfused", tw.bytes_g(qtf), tw.bytes_g(qtu));
        expect_same_counters(tw, kf, ku);
        {
            const std::vector<float> dc = tw.act_c(dqkv_f);
            std::vector<double> bound;
            attention_backward_bounds_any(bound, tw.act_c(qkv), tw.act_c(dout), tw.act_c(out), tw.f32_c(lse), dc, s.B,
                                          s.T, s.C, s.NH, rounding_unit(tw.dtype()));
            tw.check_act("attention backward dqkv vs the CPU twin", dqkv_f, normwise(bound, dc));
        }
        expect_fp8_close("attention backward q vs the CPU twin", tw.bytes_g(qf), tw.bytes_c(qf), tw.act_g(dqkv_f),
                         tw.act_c(dqkv_f));
    }
}

TEST_P(CudaFp8FusedTest, AdamWCastIsTheUnfusedCast) {
    Twin tw(GetParam(), fused());
    Random r(seed_);
    const std::pair<int, int> shapes[] = {{33, 47}, {3072, 768}};   // ragged tiles; GPT-2's fc weight
    for (auto [rows, cols] : shapes) {
        for (bool with_master : {true, false}) {
            SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) +
                         (with_master ? ", master" : ", no master"));
            const size_t n = (size_t)rows * cols;
            const std::vector<float> w0 = r.normal(n, 0.02), m0 = r.normal(n, 1e-3), g0 = r.normal(n, 1e-2);
            std::vector<float> v0 = r.normal(n, 1e-5);
            for (float& x : v0)
                x = std::fabs(x);
            // two copies of the whole state: one for the fused op, one for the unfused pair
            Twin::Buf mf = tw.f32(w0), wf = tw.act(w0), m_f = tw.f32(m0), v_f = tw.f32(v0);
            Twin::Buf mu = tw.f32(w0), wu = tw.act(w0), m_u = tw.f32(m0), v_u = tw.f32(v0), g = tw.f32(g0);
            Twin::Buf qf = tw.poisoned(n), qtf = tw.poisoned(n), qu = tw.poisoned(n), qtu = tw.poisoned(n);
            Twin::Buf kf = tw.alloc(sizeof(Fp8Counters)), ku = tw.alloc(sizeof(Fp8Counters));
            Twin::Buf sc = scale_slot(tw, 448.0f / 0.1f);
            const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
            const int t = 7;
            tw.gpu().fp8()->adamw_update_e4m3(with_master ? mf.gp<float>() : nullptr, wf.g, m_f.gp<float>(),
                                              v_f.gp<float>(), g.gp<float>(), rows, cols, lr, b1, b2, eps, wd, gs, t,
                                              qf.gp<fp8e4m3>(), qtf.gp<fp8e4m3>(), sc.gp<Fp8ScaleSlot>(),
                                              kf.gp<Fp8Counters>());
            tw.gpu().adamw_update(with_master ? mu.gp<float>() : nullptr, wu.g, m_u.gp<float>(), v_u.gp<float>(),
                                  g.gp<float>(), n, lr, b1, b2, eps, wd, gs, t);
            tw.gpu().fp8()->quantize_transpose_e4m3(qu.gp<fp8e4m3>(), qtu.gp<fp8e4m3>(), wu.g, rows, cols,
                                                    sc.gp<Fp8ScaleSlot>(), ku.gp<Fp8Counters>());
            tw.cpu().fp8()->adamw_update_e4m3(with_master ? mf.cp<float>() : nullptr, wf.c, m_f.cp<float>(),
                                              v_f.cp<float>(), g.cp<float>(), rows, cols, lr, b1, b2, eps, wd, gs, t,
                                              qf.cp<fp8e4m3>(), qtf.cp<fp8e4m3>(), sc.cp<Fp8ScaleSlot>(),
                                              kf.cp<Fp8Counters>());
            expect_bytes_equal("adamw master: fused vs unfused", tw.bytes_g(mf), tw.bytes_g(mu), 4);
            expect_bytes_equal("adamw working: fused vs unfused", tw.bytes_g(wf), tw.bytes_g(wu), tw.act_size());
            expect_bytes_equal("adamw m: fused vs unfused", tw.bytes_g(m_f), tw.bytes_g(m_u), 4);
            expect_bytes_equal("adamw v: fused vs unfused", tw.bytes_g(v_f), tw.bytes_g(v_u), 4);
            expect_bytes_equal("adamw q: fused vs unfused", tw.bytes_g(qf), tw.bytes_g(qu));
            expect_bytes_equal("adamw qt: fused vs unfused", tw.bytes_g(qtf), tw.bytes_g(qtu));
            expect_same_counters(tw, kf, ku);
            // the CPU twin: as adamw_update (FP32 up to FMA contraction, one flip of the working dtype)
            const std::vector<float> p0 = with_master ? w0 : round_act(tw.dtype(), w0);
            const std::vector<float> p1 = with_master ? tw.f32_c(mf) : tw.act_c(wf);
            const AdamWTols tol =
                adamw_tols(p0, m0, v0, g0, tw.f32_c(m_f), tw.f32_c(v_f), p1, lr, b1, b2, eps, wd, gs, t);
            tw.check_act("adamw working vs the CPU twin", wf, act_tol(tw.dtype(), tol.p_fp32, 1));
            const std::vector<float> yg = tw.act_g(wf), yc = tw.act_c(wf);
            expect_fp8_close("adamw q vs the CPU twin", tw.bytes_g(qf), tw.bytes_c(qf), yg, yc);
            expect_fp8t_close("adamw qt vs the CPU twin", tw.bytes_g(qtf), tw.bytes_c(qtf), yg, yc, rows, cols);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CudaFp8FusedTest, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         dtype_param_name);

// The vectorised cast-with-transpose writes the scalar kernel's bytes, and the same statistics, for
// both formats, both layouts, one layout, and values that saturate, flush and are NaN.
TEST_F(CudaTest, VectorisedCastIsTheScalarCast) {
    for (DType d : {DType::BF16, DType::F16}) {
        for (const std::pair<int, int>& shape : {std::pair<int, int>{64, 64}, {128, 768}, {256, 3072}, {192, 320}}) {
            const int rows = shape.first, cols = shape.second;   // (a lambda below captures them)
            SCOPED_TRACE(std::string(dtype_name(d)) + " " + std::to_string(rows) + "x" + std::to_string(cols));
            Twin tw(d);
            Random r(seed_);
            const size_t n = (size_t)rows * cols;
            std::vector<float> x = r.normal(n, 3.0);
            for (size_t i = 0; i < n; i += 97)
                x[i] = 1e-9f;   // flushes at this scale
            for (size_t i = 5; i < n; i += 1009)
                x[i] = 1e6f;   // saturates
            x[n / 2] = NAN;
            Twin::Buf xb = tw.act(x);
            Twin::Buf sc = scale_slot(tw, 448.0f / 8.0f);
            TestStream stream;
            for (bool e4m3 : {true, false}) {
                for (int layouts : {3, 2}) {   // q and qt; qt only
                    Twin::Buf qs = tw.poisoned(n), qts = tw.poisoned(n), qv = tw.poisoned(n), qtv = tw.poisoned(n);
                    Twin::Buf ks = tw.alloc(sizeof(Fp8Counters)), kv = tw.alloc(sizeof(Fp8Counters));
                    auto cast = [&](Twin::Buf& q, Twin::Buf& qt, Twin::Buf& k, bool vectorised) {
                        auto run = [&](auto tag) {
                            using E = decltype(tag);
                            const E* src = xb.gp<E>();
                            if (e4m3) {
                                cuda::quantize_transpose_fp8<E, fp8e4m3>(
                                    layouts & 1 ? q.gp<fp8e4m3>() : nullptr, qt.gp<fp8e4m3>(), src, rows, cols,
                                    &sc.gp<Fp8ScaleSlot>()->scale, k.gp<Fp8Counters>(), stream.s, cuda::Unchanged{},
                                    vectorised);
                            } else {
                                cuda::quantize_transpose_fp8<E, fp8e5m2>(
                                    layouts & 1 ? q.gp<fp8e5m2>() : nullptr, qt.gp<fp8e5m2>(), src, rows, cols,
                                    &sc.gp<Fp8ScaleSlot>()->scale, k.gp<Fp8Counters>(), stream.s, cuda::Unchanged{},
                                    vectorised);
                            }
                        };
                        if (d == DType::BF16)
                            run(__nv_bfloat16{});
                        else
                            run(__half{});
                    };
                    cast(qs, qts, ks, false);
                    cast(qv, qtv, kv, true);
                    cudaCheck(cudaStreamSynchronize(stream.s));
                    if (layouts & 1) expect_bytes_equal("q: vectorised vs scalar", tw.bytes_g(qv), tw.bytes_g(qs));
                    expect_bytes_equal("qt: vectorised vs scalar", tw.bytes_g(qtv), tw.bytes_g(qts));
                    expect_same_counters(tw, kv, ks);
                }
            }
        }
    }
}
