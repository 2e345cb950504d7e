// test_dtypes.cpp — llmc/precision/dtypes.h against an independent oracle: the host-callable conversion
// functions in CUDA's own headers (cuda_bf16.hpp, cuda_fp16.hpp, cuda_fp8.hpp; plain C++ on
// the host, no GPU and no libcudart needed). Every comparison is of exact bits, NaN included
// (dtypes.h produces CUDA's NaN encodings), so "zero mismatches" is bit-for-bit agreement.
//
//   decode       every 16-bit (bf16, fp16) and 8-bit (E4M3, E5M2) pattern → float
//   specials     ±0, ±inf, NaNs of every kind, float subnormals, FLT_MIN/MAX, each format's
//                extremes, with hand-written expectations for the ones that define the format
//   midpoints    around every representable value v: v, v's float neighbours, the midpoint to
//                the next value up (and past the largest finite) and the midpoint's neighbours
//   random       10^8 floats per format: half uniformly random bit patterns, half with the
//                exponent drawn from the format's range (where the rounding happens)
#include "precision/dtypes.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace train_gpt;

namespace {

uint32_t fbits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float bitsf(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// The oracle side: CUDA's conversions. Nothing here touches dtypes.h.
namespace oracle {
uint32_t from_bf16(float f) { return __nv_bfloat16_raw(__float2bfloat16_rn(f)).x; }
uint32_t from_fp16(float f) { return __half_raw(__float2half_rn(f)).x; }
uint32_t from_e4m3(float f) { return __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3); }
uint32_t from_e5m2(float f) { return __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2); }
float to_bf16(uint32_t b) {
    __nv_bfloat16_raw r;
    r.x = uint16_t(b);
    return __bfloat162float(__nv_bfloat16(r));
}
float to_fp16(uint32_t b) {
    __half_raw r;
    r.x = uint16_t(b);
    return __half2float(__half(r));
}
float to_e4m3(uint32_t b) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(b), __NV_E4M3))); }
float to_e5m2(uint32_t b) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(b), __NV_E5M2))); }
}   // namespace oracle

// One format: ours and the oracle's conversions, on raw bits. lo/hi_exp: the float biased
// exponents that bracket the format's range (smallest subnormal / 4 … largest finite · 4).
struct Bf16Fmt {
    static constexpr const char* name = "bf16";
    static constexpr int bits = 16;
    static constexpr uint32_t lo_exp = 0, hi_exp = 254;
    static constexpr uint32_t max_bits = 0x7f7fu, min_normal_bits = 0x0080u;
    static uint32_t mine(float f) { return bf16::from_float(f).bits; }
    static float mine_to(uint32_t b) { return bf16{uint16_t(b)}.to_float(); }
    static uint32_t oracle(float f) { return oracle::from_bf16(f); }
    static float oracle_to(uint32_t b) { return oracle::to_bf16(b); }
    static bool is_nan(uint32_t b) { return (b & 0x7fffu) > 0x7f80u; }
    static bool is_inf(uint32_t b) { return (b & 0x7fffu) == 0x7f80u; }
};
struct Fp16Fmt {
    static constexpr const char* name = "fp16";
    static constexpr int bits = 16;
    static constexpr uint32_t lo_exp = 127 - 26, hi_exp = 127 + 17;
    static constexpr uint32_t max_bits = 0x7bffu, min_normal_bits = 0x0400u;
    static uint32_t mine(float f) { return fp16::from_float(f).bits; }
    static float mine_to(uint32_t b) { return fp16{uint16_t(b)}.to_float(); }
    static uint32_t oracle(float f) { return oracle::from_fp16(f); }
    static float oracle_to(uint32_t b) { return oracle::to_fp16(b); }
    static bool is_nan(uint32_t b) { return (b & 0x7fffu) > 0x7c00u; }
    static bool is_inf(uint32_t b) { return (b & 0x7fffu) == 0x7c00u; }
};
struct E4m3Fmt {
    static constexpr const char* name = "e4m3";
    static constexpr int bits = 8;
    static constexpr uint32_t lo_exp = 127 - 11, hi_exp = 127 + 10;
    static constexpr uint32_t max_bits = 0x7eu, min_normal_bits = 0x08u;
    static uint32_t mine(float f) { return fp8e4m3::from_float(f).bits; }
    static float mine_to(uint32_t b) { return fp8e4m3{uint8_t(b)}.to_float(); }
    static uint32_t oracle(float f) { return oracle::from_e4m3(f); }
    static float oracle_to(uint32_t b) { return oracle::to_e4m3(b); }
    static bool is_nan(uint32_t b) { return (b & 0x7fu) == 0x7fu; }
    static bool is_inf(uint32_t) { return false; }
};
struct E5m2Fmt {
    static constexpr const char* name = "e5m2";
    static constexpr int bits = 8;
    static constexpr uint32_t lo_exp = 127 - 18, hi_exp = 127 + 17;
    static constexpr uint32_t max_bits = 0x7bu, min_normal_bits = 0x04u;
    static uint32_t mine(float f) { return fp8e5m2::from_float(f).bits; }
    static float mine_to(uint32_t b) { return fp8e5m2{uint8_t(b)}.to_float(); }
    static uint32_t oracle(float f) { return oracle::from_e5m2(f); }
    static float oracle_to(uint32_t b) { return oracle::to_e5m2(b); }
    static bool is_nan(uint32_t b) { return (b & 0x7fu) > 0x7cu; }
    static bool is_inf(uint32_t b) { return (b & 0x7fu) == 0x7cu; }
};

// Compare our encoding of every float in `xs` with the oracle's; report the first few misses.
template <class F>
size_t encode_mismatches(const std::vector<float>& xs) {
    size_t misses = 0;
    for (float x : xs) {
        const uint32_t m = F::mine(x), o = F::oracle(x);
        if (m != o && misses++ < 5)
            ADD_FAILURE() << F::name << " from float 0x" << std::hex << fbits(x) << " (" << x << "): ours 0x" << m
                          << ", CUDA 0x" << o;
    }
    return misses;
}

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}   // namespace

TEST(Dtypes, StorageTypesHaveTheCudaTypesLayout) {
    EXPECT_EQ(sizeof(bf16), sizeof(__nv_bfloat16));
    EXPECT_EQ(sizeof(fp16), sizeof(__half));
    EXPECT_EQ(sizeof(fp8e4m3), sizeof(__nv_fp8_e4m3));
    EXPECT_EQ(sizeof(fp8e5m2), sizeof(__nv_fp8_e5m2));
    EXPECT_LE(alignof(bf16), alignof(__nv_bfloat16));
    EXPECT_LE(alignof(fp16), alignof(__half));
    // a buffer written as ours reads back as CUDA's, element by element
    const float xs[3] = {1.5f, -0.1f, 300.0f};
    bf16 b[3];
    fp8e4m3 q[3];
    for (int i = 0; i < 3; ++i)
        b[i] = bf16::from_float(xs[i]), q[i] = fp8e4m3::from_float(xs[i]);
    __nv_bfloat16 cb[3];
    __nv_fp8_e4m3 cq[3];
    std::memcpy(cb, b, sizeof(b));
    std::memcpy(cq, q, sizeof(q));
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(__bfloat162float(cb[i]), b[i].to_float());
        EXPECT_EQ(float(cq[i]), q[i].to_float());
    }
}

TEST(Dtypes, HandTableOfDefiningValues) {
    // the values that define each format, written out (the oracle tests below cover the rest)
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(bf16::from_float(1.0f).bits, 0x3f80);
    EXPECT_EQ(bf16::from_float(1.00390625f).bits, 0x3f80);   // 1 + 2^-8: tie → even (down)
    EXPECT_EQ(bf16::from_float(1.01171875f).bits, 0x3f82);   // 1 + 3·2^-8: tie → even (up)
    EXPECT_EQ(bf16::from_float(FLT_MAX).bits, 0x7f80);       // above max + ½ulp → inf
    EXPECT_EQ(bf16::from_float(nan).bits, 0x7fff);
    EXPECT_EQ(bf16::from_float(-0.0f).bits, 0x8000);
    EXPECT_EQ(fp16::from_float(65504.0f).bits, 0x7bff);
    EXPECT_EQ(fp16::from_float(65519.99f).bits, 0x7bff);
    EXPECT_EQ(fp16::from_float(65520.0f).bits, 0x7c00);     // max + ½ulp: tie → even = inf
    EXPECT_EQ(fp16::from_float(0x1p-24f).bits, 0x0001);     // smallest subnormal
    EXPECT_EQ(fp16::from_float(0x1p-25f).bits, 0x0000);     // half of it: tie → even (0)
    EXPECT_EQ(fp16::from_float(0x1.8p-24f).bits, 0x0002);   // 1.5 · 2^-24: tie → even (2)
    EXPECT_EQ(fp16::from_float(-inf).bits, 0xfc00);
    EXPECT_EQ(fp16{0x3c00}.to_float(), 1.0f);
    EXPECT_EQ(fp16{0x0001}.to_float(), 0x1p-24f);
    EXPECT_EQ(fp8e4m3::from_float(448.0f).bits, 0x7e);
    EXPECT_EQ(fp8e4m3::from_float(464.0f).bits, 0x7e);   // max + ½ulp: tie → even (448)
    EXPECT_EQ(fp8e4m3::from_float(1e6f).bits, 0x7e);     // saturates
    EXPECT_EQ(fp8e4m3::from_float(inf).bits, 0x7e);      // no inf in E4M3: saturates
    EXPECT_EQ(fp8e4m3::from_float(-inf).bits, 0xfe);
    EXPECT_EQ(fp8e4m3::from_float(nan).bits, 0x7f);
    EXPECT_EQ(fp8e4m3::from_float(-nan).bits, 0x7f);          // NaN sign dropped, as CUDA does
    EXPECT_EQ(fp8e4m3::from_float(0x1p-9f).bits, 0x01);       // smallest subnormal
    EXPECT_EQ(fp8e4m3::from_float(0x1p-10f).bits, 0x00);      // half of it → 0
    EXPECT_EQ(fp8e4m3::from_float(-0x1p-10f).bits, 0x80);     // → −0
    EXPECT_EQ(fp8e4m3::from_float(0x1.08p-10f).bits, 0x01);   // just above half → 2^-9
    EXPECT_EQ(fp8e4m3{0x7e}.to_float(), 448.0f);
    EXPECT_EQ(fp8e4m3{0x08}.to_float(), 0x1p-6f);
    EXPECT_TRUE(std::isnan(fp8e4m3{0xff}.to_float()));
    EXPECT_EQ(fp8e5m2::from_float(57344.0f).bits, 0x7b);
    EXPECT_EQ(fp8e5m2::from_float(inf).bits, 0x7b);   // satfinite
    EXPECT_EQ(fp8e5m2::from_float(-1e30f).bits, 0xfb);
    EXPECT_EQ(fp8e5m2::from_float(nan).bits, 0x7f);
    EXPECT_EQ(fp8e5m2::from_float(0x1p-16f).bits, 0x01);
    EXPECT_EQ(fp8e5m2::from_float(1.125f).bits, 0x3c);   // 1 + ⅛: tie → even (1.0)
    EXPECT_EQ(fp8e5m2::from_float(1.375f).bits, 0x3e);   // 1 + ⅜: tie → even (1.5)
    EXPECT_EQ(fp8e5m2{0x7c}.to_float(), inf);
    EXPECT_EQ(fp8e5m2{0x7b}.to_float(), 57344.0f);
    // the generic spellings
    EXPECT_EQ(from_float<float>(0.1f), 0.1f);
    EXPECT_EQ(to_float(from_float<bf16>(2.0f)), 2.0f);
    EXPECT_EQ(to_float(from_float<fp8e5m2>(-3.0f)), -3.0f);
}

template <class F>
class DtypesOracle : public ::testing::Test {};
using Formats = ::testing::Types<Bf16Fmt, Fp16Fmt, E4m3Fmt, E5m2Fmt>;
struct FormatName {
    template <class F>
    static std::string GetName(int) {
        return F::name;
    }
};
TYPED_TEST_SUITE(DtypesOracle, Formats, FormatName);

TYPED_TEST(DtypesOracle, DecodeEveryPattern) {
    using F = TypeParam;
    size_t misses = 0;
    for (uint32_t p = 0; p < (1u << F::bits); ++p) {
        const uint32_t m = fbits(F::mine_to(p)), o = fbits(F::oracle_to(p));
        if (m != o && misses++ < 5)
            ADD_FAILURE() << F::name << " 0x" << std::hex << p << " → ours 0x" << m << ", CUDA 0x" << o;
    }
    EXPECT_EQ(misses, 0u) << "of " << (1u << F::bits) << " patterns";
}

TYPED_TEST(DtypesOracle, EveryFinitePatternRoundTrips) {
    using F = TypeParam;
    for (uint32_t p = 0; p < (1u << F::bits); ++p) {
        if (F::is_nan(p)) {
            EXPECT_TRUE(std::isnan(F::mine_to(p)));
        } else if (F::is_inf(p) && F::bits == 8) {   // E5M2 ±inf saturates on the way back
            EXPECT_EQ(F::mine(F::mine_to(p)), (p & 0x80u) | 0x7bu);
        } else {
            ASSERT_EQ(F::mine(F::mine_to(p)), p) << F::name << " 0x" << std::hex << p;
        }
    }
}

TYPED_TEST(DtypesOracle, EncodeSpecialValues) {
    using F = TypeParam;
    std::vector<uint32_t> bits = {
        0x00000000, 0x7f800000,                           // 0, inf
        0x7fc00000, 0x7fffffff, 0x7f800001, 0x7fbfffff,   // quiet / signalling NaNs, payloads
        0x7fa00000, 0x7f900000, 0x7fe00000, 0x7fd00001,
        0x00000001, 0x00000002, 0x007fffff, 0x00400000,   // float subnormals
        0x00800000, 0x00800001, 0x7f7fffff, 0x7f7f0000,   // FLT_MIN, FLT_MAX and near
        0x3f800000, 0x3f800001, 0x3f7fffff,               // 1 and its neighbours
    };
    std::vector<float> xs;
    for (uint32_t b : bits)
        xs.push_back(bitsf(b)), xs.push_back(bitsf(b | 0x80000000u));
    // the format's extremes (largest finite, smallest normal, smallest subnormal) times a few
    // factors around 1, with their float neighbours
    for (uint32_t p : {F::max_bits, F::min_normal_bits, 1u}) {
        const float v = F::oracle_to(p);
        for (float s : {1.0f, 0.5f, 0.25f, 2.0f, 4.0f, 1.0f + 0x1p-10f, 1.0f - 0x1p-10f}) {
            const float y = v * s;
            for (float x : {y, std::nextafter(y, 0.0f), std::nextafter(y, INFINITY)})
                xs.push_back(x), xs.push_back(-x);
        }
    }
    for (float x : {1e-45f, 1e-30f, 1e-10f, 1e10f, 1e30f, 1e38f})
        xs.push_back(x), xs.push_back(-x);
    EXPECT_EQ(encode_mismatches<F>(xs), 0u) << "of " << xs.size() << " special values";
}

TYPED_TEST(DtypesOracle, EncodeAroundEveryRoundingMidpoint) {
    using F = TypeParam;
    // positive finite patterns in increasing order of value: 0 … largest finite
    std::vector<uint32_t> ps;
    for (uint32_t p = 0; p < (1u << (F::bits - 1)); ++p)
        if (!F::is_nan(p) && !F::is_inf(p)) ps.push_back(p);
    std::vector<float> xs;
    for (size_t k = 0; k < ps.size(); ++k) {
        const double v = F::oracle_to(ps[k]);
        double next;
        if (k + 1 < ps.size()) {
            next = F::oracle_to(ps[k + 1]);
        } else {   // past the largest finite: one more ulp (the value the next pattern would have)
            next = v + (v - double(F::oracle_to(ps[k - 1])));
        }
        const double mid_d = 0.5 * (v + next);
        const float mid = float(mid_d);
        ASSERT_EQ(double(mid), mid_d) << "midpoints of a narrow format are floats";
        for (float x : {float(v), std::nextafter(float(v), 0.0f), std::nextafter(float(v), INFINITY), mid,
                        std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
            xs.push_back(x);
            xs.push_back(-x);
        }
    }
    EXPECT_EQ(encode_mismatches<F>(xs), 0u)
        << "of " << xs.size() << " values around " << ps.size() << " representable magnitudes";
    std::printf("[ %s ] %zu values around every representable value and midpoint: agree with CUDA\n", F::name,
                xs.size());
}

TYPED_TEST(DtypesOracle, EncodeRandomFloats) {
    using F = TypeParam;
    constexpr int64_t n = 100'000'000;
    const uint32_t span = F::hi_exp - F::lo_exp + 1;
    int64_t misses = 0;
    uint32_t first_miss = 0;
#pragma omp parallel for schedule(static) reduction(+ : misses)
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t r = splitmix64(uint64_t(i) * 2 + (F::bits == 16 ? 1 : 7));
        uint32_t b;
        if (i & 1) {
            b = uint32_t(r);   // any float at all: every exponent, NaNs, infs, subnormals
        } else {               // sign, an exponent in the format's range, any mantissa
            b = (uint32_t(r >> 63) << 31) | ((F::lo_exp + uint32_t((r >> 32) % span)) << 23) |
                (uint32_t(r) & 0x7fffffu);
        }
        const float x = bitsf(b);
        if (F::mine(x) != F::oracle(x)) {
            if (misses == 0) {
#pragma omp critical
                first_miss = b;
            }
            ++misses;
        }
    }
    EXPECT_EQ(misses, 0) << F::name << ": first mismatch at float bits 0x" << std::hex << first_miss;
    std::printf("[ %s ] %lld random floats: %lld mismatches with CUDA\n", F::name, (long long)n, (long long)misses);
}

// TF32 (tf32_round, the tf32 precision's GEMM operands): against an oracle in double arithmetic,
// round to nearest with ties away from zero on the TF32 grid of x's binade (ulp 2^(e−10), e ≥
// −126: fp32's subnormals keep their spacing, 2^-136 on TF32's grid), on random floats of every
// binade, on every tie and its neighbours, and on the specials.
namespace {
float tf32_oracle(float x) {
    if (!std::isfinite(x)) return x;
    if (x == 0.0f) return x;
    int e = 0;
    std::frexp((double)x, &e);   // |x| = m · 2^e, m in [0.5, 1): the binade's exponent is e − 1
    const double ulp = std::ldexp(1.0, std::max(e - 1, -126) - 10);
    const double q = std::fabs((double)x) / ulp;
    const double r = std::floor(q + 0.5);              // ties away from zero (on the magnitude)
    return (float)std::copysign(r * ulp, (double)x);   // exact, or ±inf past FLT_MAX's grid
}
}   // namespace

TEST(Dtypes, Tf32RoundingIsToNearestTiesAwayOnTheTf32Grid) {
    EXPECT_EQ(fbits(tf32_round(1.0f)), fbits(1.0f));
    EXPECT_EQ(tf32_round(1.0f + 0x1p-11f), 1.0f + 0x1p-10f);   // a tie rounds away
    EXPECT_EQ(tf32_round(-(1.0f + 0x1p-11f)), -(1.0f + 0x1p-10f));
    EXPECT_EQ(tf32_round(1.0f + 0x1p-11f - 0x1p-23f), 1.0f);   // below the tie
    EXPECT_EQ(tf32_round(FLT_MAX), INFINITY);                  // the carry out of the last binade
    EXPECT_EQ(fbits(tf32_round(-0.0f)), fbits(-0.0f));
    EXPECT_TRUE(std::isnan(tf32_round(NAN)));
    EXPECT_EQ(tf32_round(-INFINITY), -INFINITY);
    int64_t misses = 0, ties = 0;
    for (int64_t i = 0; i < 20'000'000; ++i) {
        const uint64_t r = splitmix64(uint64_t(i) * 2 + 11);
        uint32_t b = uint32_t(r);
        if (i % 4 == 1) b = (b & ~0x1fffu) | 0x1000u;   // a tie
        if (i % 4 == 2) b = (b & ~0x1fffu) | 0x0fffu;   // just below one
        if (i % 4 == 3) b = (b & ~0x1fffu) | 0x1001u;   // just above one
        const float x = bitsf(b);
        if (!std::isfinite(x)) continue;
        ties += i % 4 == 1;
        const float mine = tf32_round(x), ref = tf32_oracle(x);
        misses += fbits(mine) != fbits(ref);
        if (std::isfinite(mine) && std::isnormal(x)) {   // |error| ≤ u |x|, u = 2^-11
            EXPECT_LE(std::fabs((double)mine - x), 0x1p-11 * std::fabs((double)x)) << std::hexfloat << x;
        }
    }
    EXPECT_EQ(misses, 0);
    EXPECT_GT(ties, 1'000'000);
}
