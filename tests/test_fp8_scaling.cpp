// test_fp8_scaling.cpp — the FP8 scale state machine against hand-computed tables (amax 0, inf,
// NaN, a tiny amax whose scale overflows, the history roll, the margin, max vs most_recent, the
// current recipe), the NaN-keeping amax combine, and the scaled casts with their telemetry.
#include "backend.h"
#include "precision/fp8_scaling.h"
#include "rng.h"
#include "test_util.h"

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Floats equal, or both NaN.
bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

std::string show(const std::vector<float>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
        s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}

}   // namespace

TEST(Fp8Scaling, ScaleFromAmaxTable) {
    struct Row {
        float amax, fp8_max;
        int margin;
        float previous, expected;
        const char* why;
    };
    const Row rows[] = {
        {1.0f, 448.0f, 0, 1.0f, 448.0f, "fp8_max / a"},
        {2.0f, 448.0f, 0, 1.0f, 224.0f, "fp8_max / a"},
        {3.5f, 448.0f, 0, 1.0f, 128.0f, "fp8_max / a"},
        {0.5f, 448.0f, 1, 1.0f, 448.0f, "896 · 2^-1"},
        {2.0f, 448.0f, 3, 1.0f, 28.0f, "224 · 2^-3"},
        {1.0f, 57344.0f, 0, 1.0f, 57344.0f, "E5M2 max"},
        {4.0f, 57344.0f, 2, 1.0f, 3584.0f, "14336 · 2^-2"},
        {0.0f, 448.0f, 0, 7.0f, 7.0f, "amax 0: keep the previous scale"},
        {-0.0f, 448.0f, 0, 7.0f, 7.0f, "amax -0: keep"},
        {kInf, 448.0f, 0, 7.0f, 7.0f, "amax inf: keep"},
        {kNaN, 448.0f, 0, 7.0f, 7.0f, "amax NaN: keep"},
        {-kNaN, 448.0f, 0, 7.0f, 7.0f, "amax -NaN: keep"},
        {0x1p-119f, 448.0f, 0, 1.0f, 0x1.cp127f, "448 · 2^119 = 1.75 · 2^127: the largest that fits"},
        {0x1p-120f, 448.0f, 0, 1.0f, FLT_MAX, "448 · 2^120 overflows: FLT_MAX"},
        {0x1p-120f, 448.0f, 1, 1.0f, FLT_MAX, "fp8_max / a overflows before the margin applies"},
        {1e-38f, 448.0f, 0, 1.0f, FLT_MAX, "tiny normal amax"},
        {1e-45f, 57344.0f, 0, 1.0f, FLT_MAX, "subnormal amax"},
        {0x1p127f, 448.0f, 0, 1.0f, 0x1.cp-119f, "448 / 2^127"},
        {0x1p127f, 448.0f, 10, 1.0f, FLT_MIN, "underflows below FLT_MIN: clamped so 1/s stays finite"},
    };
    for (const Row& r : rows) {
        EXPECT_EQ(fp8_scale_from_amax(r.amax, r.fp8_max, r.margin, r.previous), r.expected)
            << "amax " << r.amax << " margin " << r.margin << ": " << r.why;
    }
}

TEST(Fp8Scaling, FormatMaxima) {
    EXPECT_EQ(fp8_max(Fp8Format::E4M3), 448.0f);
    EXPECT_EQ(fp8_max(Fp8Format::E5M2), 57344.0f);
    EXPECT_STREQ(fp8_format_name(Fp8Format::E5M2), "e5m2");
}

TEST(Fp8Scaling, SelectAmaxMaxVersusMostRecent) {
    struct Row {
        std::vector<float> history;   // newest first
        float max, most_recent;
    };
    const Row rows[] = {
        {{}, 0.0f, 0.0f},           {{2.0f, 7.0f, 1.0f}, 7.0f, 2.0f},
        {{0.0f, 0.0f}, 0.0f, 0.0f}, {{3.0f, kNaN, 5.0f}, kNaN, 3.0f},   // a NaN anywhere poisons the max
        {{kNaN, 5.0f}, kNaN, kNaN}, {{1.0f, kInf}, kInf, 1.0f},
    };
    for (const Row& r : rows) {
        EXPECT_TRUE(same(fp8_select_amax(r.history, Fp8AmaxAlgo::Max), r.max)) << show(r.history);
        EXPECT_TRUE(same(fp8_select_amax(r.history, Fp8AmaxAlgo::MostRecent), r.most_recent)) << show(r.history);
    }
}

TEST(Fp8Scaling, CombineAmaxKeepsNaNThroughAMaxReduction) {
    EXPECT_EQ(combine_amax(2.0f, 5.0f), 5.0f);
    EXPECT_EQ(combine_amax(5.0f, 2.0f), 5.0f);
    EXPECT_EQ(combine_amax(kInf, 3.0f), kInf);
    EXPECT_TRUE(std::isnan(combine_amax(1.0f, kNaN)));
    EXPECT_TRUE(std::isnan(combine_amax(kNaN, 1.0f)));
    EXPECT_TRUE(std::isnan(combine_amax(kNaN, kInf)));
    // four ranks' amaxes, one NaN, reduced in every order a tree reduction might use
    const float ranks[4] = {1.0f, kNaN, 3.0f, 2.0f};
    float left = 0.0f, right = 0.0f;
    for (int i = 0; i < 4; ++i)
        left = combine_amax(left, ranks[i]), right = combine_amax(ranks[3 - i], right);
    EXPECT_TRUE(std::isnan(left));
    EXPECT_TRUE(std::isnan(right));
    EXPECT_TRUE(std::isnan(combine_amax(combine_amax(ranks[0], ranks[1]), combine_amax(ranks[2], ranks[3]))));
    // what it guards against: fmax (and MPI_MAX) drop the NaN
    EXPECT_EQ(std::fmax(std::fmax(1.0f, kNaN), 3.0f), 3.0f);
}

// One step of a hand-computed run: the amax recorded at the end of the step, then the history
// and the scale the next step will use.
struct StepRow {
    float amax;
    std::vector<float> history;
    float scale;
};

static void run_table(Fp8TensorScale& s, const std::vector<StepRow>& rows) {
    for (size_t t = 0; t < rows.size(); ++t) {
        s.end_step(rows[t].amax);
        const auto& h = s.history();
        bool ok = h.size() == rows[t].history.size();
        for (size_t i = 0; ok && i < h.size(); ++i)
            ok = same(h[i], rows[t].history[i]);
        EXPECT_TRUE(ok) << "step " << t << ": history " << show(h) << ", expected " << show(rows[t].history);
        EXPECT_EQ(s.scale(), rows[t].scale) << "step " << t << " (amax " << rows[t].amax << ")";
        EXPECT_EQ(s.inv_scale(), 1.0f / rows[t].scale);
        EXPECT_FALSE(s.needs_amax_now()) << "delayed: only step 0 needs a just-in-time amax";
    }
}

TEST(Fp8Scaling, DelayedMaxOverHistoryTable) {
    Fp8ScalingConfig c;
    c.amax_history = 3;
    c.algo = Fp8AmaxAlgo::Max;
    Fp8TensorScale s(Fp8Format::E4M3, c);
    EXPECT_EQ(s.scale(), 1.0f);
    EXPECT_TRUE(s.needs_amax_now()) << "step 0 has no history";
    s.scale_from_amax(2.0f);   // just in time for step 0's cast: 448 / 2
    EXPECT_EQ(s.scale(), 224.0f);
    run_table(s, {
                     {2.0f, {2.0f}, 224.0f},
                     {4.0f, {4.0f, 2.0f}, 112.0f},
                     {1.0f, {1.0f, 4.0f, 2.0f}, 112.0f},     // the 4 is still in the window
                     {1.0f, {1.0f, 1.0f, 4.0f}, 112.0f},     // the 2 rolled out (H = 3)
                     {0.5f, {0.5f, 1.0f, 1.0f}, 448.0f},     // the 4 rolled out
                     {kNaN, {kNaN, 0.5f, 1.0f}, 448.0f},     // NaN: keep the previous scale …
                     {0.25f, {0.25f, kNaN, 0.5f}, 448.0f},   // … while the NaN is in the window
                     {0.25f, {0.25f, 0.25f, kNaN}, 448.0f},
                     {0.25f, {0.25f, 0.25f, 0.25f}, 1792.0f},   // NaN gone: 448 / 0.25
                     {0.0f, {0.0f, 0.25f, 0.25f}, 1792.0f},     // a zero amax is just small
                     {0.0f, {0.0f, 0.0f, 0.25f}, 1792.0f},
                     {0.0f, {0.0f, 0.0f, 0.0f}, 1792.0f},   // all zero: keep
                     {kInf, {kInf, 0.0f, 0.0f}, 1792.0f},   // inf: keep
                     {8.0f, {8.0f, kInf, 0.0f}, 1792.0f},
                     {8.0f, {8.0f, 8.0f, kInf}, 1792.0f},
                     {8.0f, {8.0f, 8.0f, 8.0f}, 56.0f},
                     {1e-38f, {1e-38f, 8.0f, 8.0f}, 56.0f},
                     {1e-38f, {1e-38f, 1e-38f, 8.0f}, 56.0f},
                     {1e-38f, {1e-38f, 1e-38f, 1e-38f}, FLT_MAX},   // 448 / 1e-38 overflows
                 });
    EXPECT_EQ(s.steps(), 19);
}

TEST(Fp8Scaling, DelayedMostRecentTable) {
    Fp8ScalingConfig c;
    c.amax_history = 3;
    c.algo = Fp8AmaxAlgo::MostRecent;
    Fp8TensorScale s(Fp8Format::E4M3, c);
    run_table(s, {
                     {2.0f, {2.0f}, 224.0f},
                     {4.0f, {4.0f, 2.0f}, 112.0f},
                     {1.0f, {1.0f, 4.0f, 2.0f}, 448.0f},   // only the newest counts
                     {0.5f, {0.5f, 1.0f, 4.0f}, 896.0f},
                     {kNaN, {kNaN, 0.5f, 1.0f}, 896.0f},   // NaN: keep, for one step only
                     {0.25f, {0.25f, kNaN, 0.5f}, 1792.0f},
                     {0.0f, {0.0f, 0.25f, kNaN}, 1792.0f},
                     {kInf, {kInf, 0.0f, 0.25f}, 1792.0f},
                     {1.0f, {1.0f, kInf, 0.0f}, 448.0f},
                 });
}

TEST(Fp8Scaling, MarginBacksOffByPowersOfTwo) {
    // E5M2 (gradients), H = 2, margin 2: s = 57344 / a / 4
    Fp8ScalingConfig c;
    c.amax_history = 2;
    c.margin = 2;
    Fp8TensorScale s(Fp8Format::E5M2, c);
    s.scale_from_amax(7.0f);
    EXPECT_EQ(s.scale(), 2048.0f);   // 57344 / 7 / 4
    run_table(s, {
                     {7.0f, {7.0f}, 2048.0f},
                     {14.0f, {14.0f, 7.0f}, 1024.0f},
                     {1.0f, {1.0f, 14.0f}, 1024.0f},
                     {1.0f, {1.0f, 1.0f}, 14336.0f},
                 });
}

TEST(Fp8Scaling, JustInTimeFirstStep) {
    Fp8ScalingConfig c;
    Fp8TensorScale zero(Fp8Format::E4M3, c);
    zero.scale_from_amax(0.0f);   // an all-zero tensor at step 0: nothing to scale by
    EXPECT_EQ(zero.scale(), 1.0f);
    EXPECT_TRUE(zero.needs_amax_now());
    zero.end_step(0.0f);
    EXPECT_EQ(zero.scale(), 1.0f);
    EXPECT_FALSE(zero.needs_amax_now());

    // the full step-0 flow on a tensor: amax just in time, cast, record
    std::vector<float> x = {0.25f, -0.5f, 0.125f, 0.375f};
    Fp8TensorScale s(Fp8Format::E4M3, c);
    ASSERT_TRUE(s.needs_amax_now());
    const float a = amax_of(x.data(), x.size());
    EXPECT_EQ(a, 0.5f);
    s.scale_from_amax(a);
    EXPECT_EQ(s.scale(), 896.0f);
    std::vector<fp8e4m3> q(x.size());
    const Fp8CastStats st = quantize(q.data(), x.data(), x.size(), s.scale());
    EXPECT_EQ(st.amax, a);
    EXPECT_EQ(st.saturated, 0u);
    EXPECT_EQ(std::fabs(q[1].to_float()), 448.0f) << "the largest value lands on the format's max";
    EXPECT_EQ(q[3].to_float(), 320.0f);   // 336 = 1.3125 · 2^8 lies halfway between 320 and 352: tie → even
    s.end_step(st.amax);
    EXPECT_EQ(s.scale(), 896.0f);
}

TEST(Fp8Scaling, CurrentRecipeScalesFromThisStepsAmax) {
    Fp8ScalingConfig c;
    c.recipe = Fp8Recipe::Current;
    c.amax_history = 2;
    c.margin = 1;
    Fp8TensorScale s(Fp8Format::E4M3, c);
    const float amaxes[] = {2.0f, 8.0f, 0.0f, kNaN, 1.0f};
    const float scales[] = {112.0f, 28.0f, 28.0f, 28.0f, 224.0f};   // 448 / a / 2; 0 and NaN keep
    for (int t = 0; t < 5; ++t) {
        EXPECT_TRUE(s.needs_amax_now());
        s.scale_from_amax(amaxes[t]);
        EXPECT_EQ(s.scale(), scales[t]) << "step " << t;
        s.end_step(amaxes[t]);
        EXPECT_EQ(s.scale(), scales[t]) << "end_step leaves the current recipe's scale alone";
    }
    ASSERT_EQ(s.history().size(), 2u);   // kept for telemetry
    EXPECT_EQ(s.history()[0], 1.0f);
    EXPECT_TRUE(std::isnan(s.history()[1]));
}

TEST(Fp8Scaling, RestoreTruncatesToTheHistoryLength) {
    Fp8ScalingConfig c;
    c.amax_history = 2;
    Fp8TensorScale s(Fp8Format::E4M3, c);
    s.restore(3.0f, {1.0f, 2.0f, 4.0f}, 10);
    EXPECT_EQ(s.scale(), 3.0f);
    EXPECT_EQ(s.history(), std::vector<float>({1.0f, 2.0f}));
    EXPECT_EQ(s.steps(), 10);
    EXPECT_FALSE(s.needs_amax_now());
    s.end_step(1.0f);
    EXPECT_EQ(s.scale(), 448.0f);   // the 2 rolled out: max(1, 1)
    EXPECT_EQ(s.history(), std::vector<float>({1.0f, 1.0f}));
}

TEST(Fp8Scaling, ConfigValidationAndNames) {
    Fp8ScalingConfig c;
    c.amax_history = 0;
    EXPECT_CONTAINS(error_of([&] { c.validate(); }), "--fp8-amax-history");
    c.amax_history = kMaxAmaxHistory + 1;
    EXPECT_CONTAINS(error_of([&] { c.validate(); }), "--fp8-amax-history must be in [1, 65536]");
    c.amax_history = 4;
    c.margin = -1;
    EXPECT_CONTAINS(error_of([&] { c.validate(); }), "--fp8-margin");
    EXPECT_CONTAINS(error_of([&] { Fp8TensorScale(Fp8Format::E4M3, c); }), "--fp8-margin");
    for (auto a : {Fp8AmaxAlgo::Max, Fp8AmaxAlgo::MostRecent})
        EXPECT_EQ(parse_fp8_amax_algo(fp8_amax_algo_name(a)), a);
    for (auto r : {Fp8Recipe::Delayed, Fp8Recipe::Current})
        EXPECT_EQ(parse_fp8_recipe(fp8_recipe_name(r)), r);
    EXPECT_CONTAINS(error_of([] { parse_fp8_amax_algo("mean"); }), "mean");
    EXPECT_CONTAINS(error_of([] { parse_fp8_recipe("jit"); }), "--fp8-recipe");
}

TEST(Fp8Scaling, QuantizeTable) {
    // E4M3, s = 2: each x · 2 rounded, saturated at 448, with its telemetry class
    const std::vector<float> x = {1.0f, -3.0f, 300.0f, -250.0f, 1e-4f, 0.0f, -0.0f, kInf, 0.3f, 224.0f};
    const std::vector<uint8_t> expect = {
        0x40,   //  2
        0xcc,   // -6 = -1.5 · 2^2
        0x7e,   //  600 → 448 (saturated)
        0xfe,   // -500 → -448 (saturated)
        0x00,   //  2e-4 < 2^-10: flushed to zero
        0x00, 0x80,
        0x7e,   //  inf → 448 (saturated)
        0x32,   //  0.6 → 0.625 = 1.25 · 2^-1
        0x7e,   //  448 exactly: not saturated
    };
    std::vector<fp8e4m3> q(x.size());
    const Fp8CastStats st = quantize(q.data(), x.data(), x.size(), 2.0f);
    for (size_t i = 0; i < x.size(); ++i)
        EXPECT_EQ(q[i].bits, expect[i]) << "x = " << x[i];
    EXPECT_EQ(st.amax, kInf);
    EXPECT_EQ(st.count, x.size());
    EXPECT_EQ(st.saturated, 3u);
    EXPECT_EQ(st.flushed, 1u);
    EXPECT_EQ(st.nan, 0u);
    EXPECT_DOUBLE_EQ(st.saturated_frac(), 0.3);
    EXPECT_DOUBLE_EQ(st.flushed_frac(), 0.1);
    std::vector<float> back(x.size());
    dequantize(back.data(), q.data(), q.size(), 0.5f);
    EXPECT_EQ(back[0], 1.0f);
    EXPECT_EQ(back[1], -3.0f);
    EXPECT_EQ(back[2], 224.0f);
    EXPECT_EQ(back[8], 0.3125f);

    // E5M2 with a NaN: the NaN is cast to 0x7f, counted, and makes the amax NaN
    const std::vector<float> y = {1.0f, kNaN, -1e5f, 1e-6f};
    std::vector<fp8e5m2> r(y.size());
    const Fp8CastStats st2 = quantize(r.data(), y.data(), y.size(), 1.0f);
    EXPECT_EQ(r[0].bits, 0x3c);
    EXPECT_EQ(r[1].bits, 0x7f);
    EXPECT_EQ(r[2].bits, 0xfb);   // -57344
    EXPECT_EQ(r[3].bits, 0x00);   // 1e-6 < 2^-17
    EXPECT_TRUE(std::isnan(st2.amax));
    EXPECT_EQ(st2.nan, 1u);
    EXPECT_EQ(st2.saturated, 1u);
    EXPECT_EQ(st2.flushed, 1u);
    EXPECT_TRUE(std::isnan(amax_of(y.data(), y.size())));
}

TEST(Fp8Scaling, ParallelQuantizeMatchesElementwiseAndBoundsTheError) {
    // big enough for the OpenMP path; values over ~12 binades around 1
    const size_t n = 300000;
    std::vector<float> x(n);
    uint64_t state = 12345;
    for (size_t i = 0; i < n; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const double u = double(state >> 11) * 0x1p-53;
        x[i] = float((u - 0.5) * std::exp2(12.0 * u - 6.0));
    }
    x[n / 2] = 40.0f;   // the amax
    const float a = amax_of(x.data(), n);
    EXPECT_EQ(a, 40.0f);
    const float scale = fp8_scale_from_amax(a, 448.0f, 0, 1.0f);
    std::vector<fp8e4m3> q(n);
    const Fp8CastStats st = quantize(q.data(), x.data(), n, scale);
    EXPECT_EQ(st.amax, a);
    EXPECT_EQ(st.saturated, 0u);
    size_t flushed = 0;
    for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(q[i].bits, fp8e4m3::from_float(x[i] * scale).bits) << i;
        flushed += x[i] != 0.0f && (q[i].bits & 0x7f) == 0;
    }
    EXPECT_EQ(st.flushed, flushed);
    std::vector<float> back(n);
    dequantize(back.data(), q.data(), n, 1.0f / scale);
    for (size_t i = 0; i < n; ++i) {
        // normal range: relative error ≤ 2^-4 (half an ulp of 3 mantissa bits); subnormal range:
        // absolute error ≤ half the subnormal step 2^-10, in unscaled units
        const float err = std::fabs(back[i] - x[i]);
        ASSERT_LE(err, std::fmax(std::fabs(x[i]) * 0x1p-4f, 0x1p-10f / scale) * 1.0001f) << "x = " << x[i];
    }
    // and with a scale 2^6 too large, the top values saturate and are counted
    const Fp8CastStats hot = quantize(q.data(), x.data(), n, scale * 64.0f);
    size_t over = 0;
    for (size_t i = 0; i < n; ++i)
        over += std::fabs(x[i] * scale * 64.0f) > 448.0f;
    EXPECT_GT(over, 0u);
    EXPECT_EQ(hot.saturated, over);
}

TEST(Fp8Scaling, CastStatsAccumulate) {
    Fp8CastStats a, b;
    a.amax = 2.0f, a.count = 10, a.saturated = 1, a.flushed = 2;
    b.amax = kNaN, b.count = 5, b.nan = 1;
    a += b;
    EXPECT_TRUE(std::isnan(a.amax));
    EXPECT_EQ(a.count, 15u);
    EXPECT_EQ(a.saturated, 1u);
    EXPECT_EQ(a.flushed, 2u);
    EXPECT_EQ(a.nan, 1u);
}

// The statistics slot the kernel sets accumulate into (Fp8Counters): zero bytes are empty, casts
// add up (the micro-batches of a step), the amax is the NaN-propagating max in any order.
TEST(Fp8Counters, AccumulateCastsIntoOneSlotInAnyOrder) {
    Fp8CastStats a, b, c;
    a.amax = 3.0f, a.count = 10, a.saturated = 1, a.flushed = 2;
    b.amax = 7.5f, b.count = 5, b.flushed = 1;
    c.amax = NAN, c.count = 4, c.nan = 1;
    Fp8Counters ab{}, ba{};
    accumulate(ab, a);
    accumulate(ab, b);
    accumulate(ba, b);
    accumulate(ba, a);
    for (const Fp8Counters& k : {ab, ba}) {
        const Fp8CastStats s = to_cast_stats(k);
        EXPECT_EQ(s.amax, 7.5f);
        EXPECT_EQ(s.count, 15u);
        EXPECT_EQ(s.saturated, 1u);
        EXPECT_EQ(s.flushed, 3u);
        EXPECT_EQ(s.nan, 0u);
    }
    Fp8Counters abc = ab, cab{};
    accumulate(abc, c);
    accumulate(cab, c);
    accumulate(cab, a);
    accumulate(cab, b);
    EXPECT_TRUE(std::isnan(to_cast_stats(abc).amax)) << "a NaN amax must survive later casts";
    EXPECT_TRUE(std::isnan(to_cast_stats(cab).amax));
    EXPECT_EQ(to_cast_stats(abc).nan, 1u);
    const Fp8CastStats empty = to_cast_stats(Fp8Counters{});
    EXPECT_EQ(empty.amax, 0.0f);
    EXPECT_EQ(empty.count, 0u);
}

// The scale state in backend memory (Fp8ScaleSlot, Fp8Ops::fp8_end_step) follows Fp8TensorScale
// step for step, bit for bit: the same rules (fp8_scale_rule, fp8_select_rule) on both.
TEST(Fp8ScaleSlots, EndStepFollowsFp8TensorScale) {
    auto backend = make_cpu_backend();
    Rng rng(5);
    for (Fp8Recipe recipe : {Fp8Recipe::Delayed, Fp8Recipe::Current}) {
        for (Fp8AmaxAlgo algo : {Fp8AmaxAlgo::Max, Fp8AmaxAlgo::MostRecent}) {
            Fp8ScalingConfig cfg;
            cfg.amax_history = 3;
            cfg.algo = algo;
            cfg.margin = 1;
            cfg.recipe = recipe;
            const int n = 4, n_e4m3 = 2;   // two E4M3 tensors, two E5M2
            std::vector<Fp8TensorScale> ref;
            for (int i = 0; i < n; i++)
                ref.emplace_back(i < n_e4m3 ? Fp8Format::E4M3 : Fp8Format::E5M2, cfg);
            std::vector<Fp8ScaleSlot> slots(n, Fp8ScaleSlot{1.0f, 1.0f, 0, {}});
            std::vector<float> history((size_t)n * cfg.amax_history, 0.0f);
            for (int step = 0; step < 8; step++) {
                std::vector<Fp8Counters> counters(n, Fp8Counters{});
                for (int i = 0; i < n; i++) {
                    const float special[] = {0.0f, kInf, kNaN};
                    Fp8CastStats st;
                    st.amax = (step + i) % 5 < 3 && step > 2 ? special[(step + i) % 5]
                                                             : (float)std::fabs(rng.normal() * 10.0);
                    accumulate(counters[i], st);
                    ref[i].end_step(to_cast_stats(counters[i]).amax);
                }
                backend->fp8()->fp8_end_step(slots.data(), history.data(), counters.data(), nullptr, n, n_e4m3,
                                             cfg.amax_history, algo == Fp8AmaxAlgo::MostRecent, cfg.margin,
                                             recipe == Fp8Recipe::Delayed);
                for (int i = 0; i < n; i++) {
                    SCOPED_TRACE("step " + std::to_string(step) + " tensor " + std::to_string(i));
                    EXPECT_EQ(float_bits(slots[i].scale), float_bits(ref[i].scale()));
                    EXPECT_EQ(float_bits(slots[i].inv_scale), float_bits(ref[i].inv_scale()));
                    ASSERT_EQ((size_t)slots[i].hist_len, ref[i].history().size());
                    for (int h = 0; h < slots[i].hist_len; h++) {
                        EXPECT_EQ(float_bits(history[(size_t)i * cfg.amax_history + h]),
                                  float_bits(ref[i].history()[h]));
                    }
                }
            }
        }
    }
}
