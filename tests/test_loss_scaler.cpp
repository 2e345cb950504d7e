// test_loss_scaler.cpp — the fp16 dynamic loss scaler against hand-computed tables: halving on
// overflow (and the skip), doubling after the growth interval, the floor and the ceiling, the
// collapse warning, and the FP32 unscale-and-check pass.
#include "precision/loss_scaler.h"
#include "test_util.h"

#include <cmath>
#include <limits>
#include <vector>

using namespace train_gpt;
using namespace train_gpt::test;

TEST(LossScaler, DefaultsAreTwoToTheSixteenAndTwoThousandSteps) {
    LossScaler s;
    EXPECT_EQ(s.scale(), 65536.0f);
    EXPECT_EQ(s.inv_scale(), 0x1p-16f);
    for (int i = 0; i < 1999; ++i)
        ASSERT_EQ(s.update(false).scale, 65536.0f) << "clean step " << i + 1;
    EXPECT_EQ(s.clean_streak(), 1999);
    LossScaleUpdate u = s.update(false);   // the 2000th clean step
    EXPECT_FALSE(u.skip);
    EXPECT_EQ(u.scale, 131072.0f);
    EXPECT_EQ(s.clean_streak(), 0);
    u = s.update(true);
    EXPECT_TRUE(u.skip);
    EXPECT_EQ(u.scale, 65536.0f);
    EXPECT_EQ(s.skipped_steps(), 1);
}

TEST(LossScaler, HandComputedTable) {
    // init 8, double after 3 clean steps, floor 1, ceiling 32, warn after 2 steps at the floor
    LossScalerConfig c;
    c.init_scale = 8.0f;
    c.growth_interval = 3;
    c.min_scale = 1.0f;
    c.max_scale = 32.0f;
    c.collapse_steps = 2;
    LossScaler s(c);
    struct Row {
        bool overflow;
        bool skip;
        float scale;   // after the update: S for the next step
        int clean, floor;
        bool warn;
    };
    const std::vector<Row> rows = {
        {false, false, 8, 1, 0, false},  {false, false, 8, 2, 0, false},
        {false, false, 16, 0, 0, false},                                 // 3 clean: double
        {true, true, 8, 0, 0, false},                                    // overflow: skip, halve
        {false, false, 8, 1, 0, false},  {true, true, 4, 0, 0, false},   // an overflow restarts the clean count
        {false, false, 4, 1, 0, false},  {false, false, 4, 2, 0, false},
        {false, false, 8, 0, 0, false},  {false, false, 8, 1, 0, false},
        {false, false, 8, 2, 0, false},  {false, false, 16, 0, 0, false},
        {false, false, 16, 1, 0, false}, {false, false, 16, 2, 0, false},
        {false, false, 32, 0, 0, false},   // reaches the ceiling
        {false, false, 32, 1, 0, false}, {false, false, 32, 2, 0, false},
        {false, false, 32, 0, 0, false},   // would double: capped, the count restarts
        {true, true, 16, 0, 0, false},   {true, true, 8, 0, 0, false},
        {true, true, 4, 0, 0, false},    {true, true, 2, 0, 0, false},
        {true, true, 1, 0, 1, false},                                      // at the floor
        {true, true, 1, 0, 2, true},                                       // 2 steps at the floor: the warning, once
        {true, true, 1, 0, 3, false},    {false, false, 1, 1, 3, false},   // a clean step leaves the count
        {false, false, 1, 2, 3, false},  {false, false, 2, 0, 0, false},   // recovered: off the floor
        {true, true, 1, 0, 1, false},    {true, true, 1, 0, 2, true},      // a new stay at the floor warns again
    };
    int skipped = 0;
    for (size_t t = 0; t < rows.size(); ++t) {
        const Row& r = rows[t];
        const LossScaleUpdate u = s.update(r.overflow);
        skipped += r.skip;
        EXPECT_EQ(u.skip, r.skip) << "step " << t;
        EXPECT_EQ(u.scale, r.scale) << "step " << t;
        EXPECT_EQ(s.scale(), r.scale) << "step " << t;
        EXPECT_EQ(s.clean_streak(), r.clean) << "step " << t;
        EXPECT_EQ(s.floor_streak(), r.floor) << "step " << t;
        EXPECT_EQ(u.collapse_warning, r.warn) << "step " << t;
        EXPECT_EQ(s.collapsed(), r.floor >= 2) << "step " << t;
        EXPECT_EQ(s.skipped_steps(), skipped) << "step " << t;
    }
}

// Round 24: a scale that starts at its floor and never overflows is no collapse (before: the
// warning "gradients keep overflowing" after collapse_steps clean steps).
TEST(LossScaler, CleanStepsAtTheFloorAreNoCollapse) {
    LossScalerConfig c;
    c.init_scale = c.min_scale = 1.0f;
    c.collapse_steps = 2;
    LossScaler s(c);
    for (int t = 0; t < 10; ++t)
        EXPECT_FALSE(s.update(false).collapse_warning) << "step " << t;
    EXPECT_EQ(s.floor_streak(), 0);
    EXPECT_FALSE(s.collapsed());
    EXPECT_FALSE(s.update(true).collapse_warning);
    EXPECT_TRUE(s.update(true).collapse_warning);
}

TEST(LossScaler, FloorThatIsNotAPowerOfTwoClamps) {
    LossScalerConfig c;
    c.init_scale = 8.0f;
    c.min_scale = 3.0f;
    c.collapse_steps = 1;
    LossScaler s(c);
    EXPECT_EQ(s.update(true).scale, 4.0f);
    LossScaleUpdate u = s.update(true);
    EXPECT_EQ(u.scale, 3.0f);   // max(4 / 2, 3)
    EXPECT_TRUE(u.collapse_warning);
    EXPECT_EQ(s.update(true).scale, 3.0f);
}

TEST(LossScaler, RestoreResumesTheCounts) {
    LossScalerConfig c;
    c.growth_interval = 3;
    LossScaler s(c);
    s.restore(1024.0f, 2, 0, 5);
    EXPECT_EQ(s.skipped_steps(), 5);
    EXPECT_EQ(s.update(false).scale, 2048.0f);   // the third clean step in a row
}

TEST(LossScaler, ConfigValidation) {
    LossScalerConfig c;
    c.min_scale = 0.0f;
    EXPECT_CONTAINS(error_of([&] { LossScaler s(c); }), "floor");
    c = LossScalerConfig();
    c.init_scale = 1e9f;
    EXPECT_CONTAINS(error_of([&] { c.validate(); }), "initial loss scale");
    c = LossScalerConfig();
    c.growth_interval = 0;
    EXPECT_CONTAINS(error_of([&] { c.validate(); }), "growth interval");
    c = LossScalerConfig();
    c.collapse_steps = 0;
    EXPECT_CONTAINS(error_of([&] { c.validate(); }), "collapse");
    c = LossScalerConfig();
    c.max_scale = std::numeric_limits<float>::infinity();
    EXPECT_CONTAINS(error_of([&] { c.validate(); }), "ceiling");
}

TEST(LossScaler, UnscaleAndCheckInFp32) {
    std::vector<float> g = {1024.0f, -3.0f, 0.0f, 65504.0f};
    EXPECT_FALSE(unscale_and_check(g.data(), g.size(), 1.0f / 1024.0f));
    EXPECT_EQ(g, std::vector<float>({1.0f, -3.0f / 1024.0f, 0.0f, 65504.0f / 1024.0f}));   // exact: S is a power of two

    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> bad = {1.0f, -inf, 2.0f};
    EXPECT_TRUE(unscale_and_check(bad.data(), bad.size(), 0.5f));
    std::vector<float> nan = {1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN()};
    EXPECT_TRUE(unscale_and_check(nan.data(), nan.size(), 0.5f));

    // the parallel path: one inf among a million values is found
    std::vector<float> big(1 << 20, 2.0f);
    EXPECT_FALSE(unscale_and_check(big.data(), big.size(), 0.5f));
    EXPECT_EQ(big[12345], 1.0f);
    big[777777] = inf;
    EXPECT_TRUE(unscale_and_check(big.data(), big.size(), 0.5f));
}
