// test_attention_tiled.cpp — the host twin of the flash attention kernels (tests/twins/attention_tiled.h:
// the kernel's tiles, schedule, fragments, online softmax, roundings, masking and skipping, run on
// the CPU) against the exact op, cpu::attention_forward / attention_backward, in bf16 and fp16;
// and the tiling rules of cuda/attention_flash_tiling.h (schedule coverage, skipping).
//
// The tolerance is a bound per element derived from the formats (tests/attention_bounds.h says
// how): one rounding of each probability to T on either side (the exact op rounds the normalised
// P, the kernel the unnormalised one) plus FP32 slack, the two stores, and for the backward the
// roundings of P and dS propagated through dq, dk, dv. Each check prints the worst ratio of
// measured error to bound (a worst case needs a rounding to fall on the other side of a tie-point
// for every term; the measured ones sit well inside).
#include "tests/twins/attention_tiled.h"

#include "cpu/kernels.h"
#include "cuda/attention_flash_tiling.h"
#include "precision/dtypes.h"
#include "rng.h"
#include "tests/attention_bounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace train_gpt;
namespace fl = train_gpt::flash;

namespace {

constexpr int kHs = fl::kHeadSize;

struct Shape {
    int B, T, NH;
};
// T = 1, T < a tile, T a tile multiple, T not a multiple of any tile, several query blocks;
// B·NH > 1 in most.
const Shape kShapes[] = {{1, 1, 1}, {2, 77, 3}, {1, 64, 2}, {1, 128, 1}, {2, 203, 2}, {1, 300, 1}};

std::string shape_str(const Shape& s) {
    return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " NH=" + std::to_string(s.NH);
}

template <typename T>
constexpr test::RoundingUnit rounding();
template <>
constexpr test::RoundingUnit rounding<bf16>() {
    return test::kBf16Rounding;
}
template <>
constexpr test::RoundingUnit rounding<fp16>() {
    return test::kFp16Rounding;
}

template <typename T>
std::vector<T> random_t(Rng& rng, size_t n, double stddev) {
    std::vector<T> v(n);
    for (T& x : v)
        x = T::from_float((float)(stddev * rng.normal()));
    return v;
}
template <typename T>
std::vector<T> poisoned(size_t n) {
    std::vector<T> v(n);
    std::memset(v.data(), 0xff, n * sizeof(T));   // NaN in bf16 and fp16
    return v;
}
template <typename T>
std::vector<float> floats(const std::vector<T>& v) {
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); i++)
        f[i] = v[i].to_float();
    return f;
}

// The inputs of one case: qkv (B,T,3C), dout (B,T,C), C = 64·NH.
template <typename T>
struct Case {
    int B, Tn, NH, C;
    std::vector<T> qkv, dout;
    Case(const Shape& s, uint64_t seed) : B(s.B), Tn(s.T), NH(s.NH), C(s.NH * kHs) {
        Rng rng(seed);
        qkv = random_t<T>(rng, (size_t)B * Tn * 3 * C, 1.5);   // peaked softmax rows too
        dout = random_t<T>(rng, (size_t)B * Tn * C, 1.0);
    }
};

void expect_within(const char* what, const std::vector<float>& got, const std::vector<float>& ref,
                   const std::vector<double>& bound) {
    const test::BoundCheck c = test::check_within(got.data(), ref.data(), bound.data(), ref.size());
    test::print_check(what, c);
    EXPECT_EQ(c.violations, 0u) << what << ": " << c.violations << " of " << c.checked
                                << " elements outside the bound; first at " << c.first_violation << ": "
                                << got[c.first_violation] << " vs " << ref[c.first_violation] << " (bound "
                                << bound[c.first_violation] << ")";
}

template <typename T>
void check_forward(const Shape& s, uint64_t seed) {
    SCOPED_TRACE(shape_str(s));
    const Case<T> c(s, seed);
    std::vector<T> out_cpu((size_t)c.B * c.Tn * c.C), out_twin = poisoned<T>(out_cpu.size());
    std::vector<float> lse_cpu((size_t)c.B * c.NH * c.Tn), lse_twin(lse_cpu.size(), NAN);
    cpu::attention_forward(out_cpu.data(), lse_cpu.data(), c.qkv.data(), c.B, c.Tn, c.C, c.NH);
    cpu::TiledStats stats;
    cpu::attention_forward_tiled(out_twin.data(), lse_twin.data(), c.qkv.data(), c.B, c.Tn, c.C, c.NH, &stats);

    const std::vector<float> qkv = floats(c.qkv), out_ref = floats(out_cpu);
    std::vector<double> out_bound, lse_bound;
    test::attention_forward_bounds(out_bound, lse_bound, qkv.data(), out_ref.data(), lse_cpu.data(), c.B, c.Tn, c.NH,
                                   rounding<T>());
    expect_within("out", floats(out_twin), out_ref, out_bound);
    expect_within("lse", lse_twin, lse_cpu, lse_bound);
    // the schedule visited every query block once; the skip rule was exact
    EXPECT_EQ(stats.blocks, (int64_t)c.B * c.NH * fl::ceil_div_int(c.Tn, fl::kFwdQueryRows));
    EXPECT_EQ(stats.computed_without_live, 0);
    EXPECT_EQ(stats.skipped_with_live, 0);
}

template <typename T>
void check_backward(const Shape& s, uint64_t seed, fl::BwdKernels kernels = fl::BwdKernels::kDefault) {
    SCOPED_TRACE(shape_str(s) + (kernels == fl::BwdKernels::kWide ? " wide" : " default"));
    const Case<T> c(s, seed);
    const int B = c.B, Tn = c.Tn, NH = c.NH, C = c.C;
    // both backwards from the exact forward's out and lse
    std::vector<T> out((size_t)B * Tn * C);
    std::vector<float> lse((size_t)B * NH * Tn);
    cpu::attention_forward(out.data(), lse.data(), c.qkv.data(), B, Tn, C, NH);
    std::vector<T> dqkv_cpu((size_t)B * Tn * 3 * C, T::from_float(0.0f)), dqkv_twin = poisoned<T>(dqkv_cpu.size());
    cpu::attention_backward(dqkv_cpu.data(), c.dout.data(), c.qkv.data(), out.data(), lse.data(), B, Tn, C, NH);
    cpu::TiledStats stats;
    cpu::attention_backward_tiled(dqkv_twin.data(), c.dout.data(), c.qkv.data(), out.data(), lse.data(), B, Tn, C, NH,
                                  &stats, kernels);

    const std::vector<float> qkv = floats(c.qkv), dout = floats(c.dout), outf = floats(out), ref = floats(dqkv_cpu);
    std::vector<double> bound;
    test::attention_backward_bounds(bound, qkv.data(), dout.data(), outf.data(), lse.data(), ref.data(), B, Tn, NH,
                                    rounding<T>());
    expect_within("dqkv", floats(dqkv_twin), ref, bound);
    const int rows = kernels == fl::BwdKernels::kWide ? fl::BwdWideDkdvLayout::kBlockRows : fl::kBwdBlockRows;
    static_assert(fl::BwdWideDkdvLayout::kBlockRows == fl::BwdWideDqLayout::kBlockRows);
    EXPECT_EQ(stats.blocks, 2 * (int64_t)B * NH * fl::ceil_div_int(Tn, rows));   // dK/dV blocks, then dQ blocks
    EXPECT_EQ(stats.computed_without_live, 0);
    EXPECT_EQ(stats.skipped_with_live, 0);
}

constexpr uint64_t kSeed = 20240613;

}   // namespace

TEST(AttentionTiled, ForwardMatchesExactOpWithinRoundingBoundBf16) {
    for (const Shape& s : kShapes)
        check_forward<bf16>(s, kSeed);
}
TEST(AttentionTiled, ForwardMatchesExactOpWithinRoundingBoundFp16) {
    for (const Shape& s : kShapes)
        check_forward<fp16>(s, kSeed + 1);
}
TEST(AttentionTiled, BackwardMatchesExactOpWithinRoundingBoundBf16) {
    for (const Shape& s : kShapes)
        check_backward<bf16>(s, kSeed + 2);
}
TEST(AttentionTiled, BackwardMatchesExactOpWithinRoundingBoundFp16) {
    for (const Shape& s : kShapes)
        check_backward<fp16>(s, kSeed + 3);
}
// The wide kernels (--flash-backward wide) within the same bound, with exact skipping...
TEST(AttentionTiled, WideBackwardMatchesExactOpWithinRoundingBound) {
    for (const Shape& s : kShapes) {
        check_backward<bf16>(s, kSeed + 2, fl::BwdKernels::kWide);
        check_backward<fp16>(s, kSeed + 3, fl::BwdKernels::kWide);
    }
    check_backward<bf16>({1, 1024, 1}, kSeed + 5, fl::BwdKernels::kWide);
}

// ...and equal to the default kernels' values: both layouts add the same products in the same order
// (attention_flash_bwd_wide.cuh), so every element is the same number (== also takes −0 for +0: a
// pair one layout skips and the other computes adds zeros).
template <typename T>
void expect_wide_equals_default(const Shape& s, uint64_t seed) {
    SCOPED_TRACE(shape_str(s));
    const Case<T> c(s, seed);
    std::vector<T> out((size_t)c.B * c.Tn * c.C);
    std::vector<float> lse((size_t)c.B * c.NH * c.Tn);
    cpu::attention_forward_tiled(out.data(), lse.data(), c.qkv.data(), c.B, c.Tn, c.C, c.NH);
    std::vector<T> narrow = poisoned<T>(c.qkv.size()), wide = poisoned<T>(c.qkv.size());
    cpu::attention_backward_tiled(narrow.data(), c.dout.data(), c.qkv.data(), out.data(), lse.data(), c.B, c.Tn, c.C,
                                  c.NH, nullptr, fl::BwdKernels::kDefault);
    cpu::attention_backward_tiled(wide.data(), c.dout.data(), c.qkv.data(), out.data(), lse.data(), c.B, c.Tn, c.C,
                                  c.NH, nullptr, fl::BwdKernels::kWide);
    int64_t differ = 0;
    for (size_t i = 0; i < wide.size(); i++)
        differ += !(wide[i].to_float() == narrow[i].to_float());
    EXPECT_EQ(differ, 0) << "of " << wide.size() << " elements of dqkv";
}
TEST(AttentionTiled, WideBackwardEqualsDefaultBackward) {
    for (const Shape& s : kShapes) {
        expect_wide_equals_default<bf16>(s, kSeed + 7);
        expect_wide_equals_default<fp16>(s, kSeed + 8);
    }
    expect_wide_equals_default<bf16>({1, 1024, 1}, kSeed + 9);
}

// One long sequence (GPT-2's T): many key tiles per query block, so the online rescaling runs
// for 16 tiles and the diagonal skipping is exercised on every block.
TEST(AttentionTiled, ForwardAndBackwardAtT1024Bf16) {
    check_forward<bf16>({1, 1024, 1}, kSeed + 4);
    check_backward<bf16>({1, 1024, 1}, kSeed + 5);
}

// Both kernels' outputs are fully written (poisoned inputs, checked finite): the backward
// overwrites dqkv, every element exactly once (the values are already checked above; this checks
// no element is left as it was).
TEST(AttentionTiled, EveryOutputElementIsWritten) {
    const Shape s{2, 203, 2};
    const Case<bf16> c(s, kSeed + 6);
    std::vector<bf16> out = poisoned<bf16>((size_t)c.B * c.Tn * c.C), dqkv = poisoned<bf16>(c.qkv.size());
    std::vector<float> lse((size_t)c.B * c.NH * c.Tn, NAN);
    cpu::attention_forward_tiled(out.data(), lse.data(), c.qkv.data(), c.B, c.Tn, c.C, c.NH);
    cpu::attention_backward_tiled(dqkv.data(), c.dout.data(), c.qkv.data(), out.data(), lse.data(), c.B, c.Tn, c.C,
                                  c.NH);
    for (const bf16& x : out)
        ASSERT_TRUE(std::isfinite(x.to_float()));
    for (float x : lse)
        ASSERT_TRUE(std::isfinite(x));
    for (const bf16& x : dqkv)
        ASSERT_TRUE(std::isfinite(x.to_float()));
}

// ---- the tiling rules ------------------------------------------------------------------------------

// Forward / dQ: blocks 0 … BH·nq−1 map onto every (bh, query block) exactly once, and the number of
// key tiles a block visits never increases along the launch order (longest first, across all (b, h)).
TEST(AttentionTiling, QueryBlockScheduleCoversEveryBlockOnceLongestFirst) {
    for (int BH : {1, 3, 16 * 12, 8 * 25})
        for (int Tn : {1, 64, 77, 128, 203, 1024}) {
            // (query rows per block, key tile): forward, dQ, wide dQ
            for (auto [rows, key_tile] :
                 {std::pair{fl::kFwdQueryRows, fl::kFwdKeyTile}, std::pair{fl::kBwdBlockRows, fl::kBwdTile},
                  std::pair{fl::BwdWideDqLayout::kBlockRows, fl::BwdWideDqLayout::kStage}}) {
                const int nq = fl::ceil_div_int(Tn, rows);
                std::set<std::pair<int, int>> seen;
                int prev_work = 1 << 30;
                for (int block = 0; block < BH * nq; block++) {
                    const fl::TileIndex ti = fl::longest_first_query_block(block, BH, nq);
                    ASSERT_TRUE(ti.bh >= 0 && ti.bh < BH && ti.tile >= 0 && ti.tile < nq);
                    EXPECT_TRUE(seen.insert({ti.bh, ti.tile}).second) << "block " << block << " repeats";
                    const int work = fl::key_tiles_for_query_block(ti.tile * rows, rows, Tn, key_tile);
                    EXPECT_LE(work, prev_work) << "block " << block;
                    prev_work = work;
                }
                EXPECT_EQ(seen.size(), (size_t)BH * nq);
            }
        }
}

// dK/dV: every (bh, key block) once; the number of query tiles walked never increases.
TEST(AttentionTiling, KeyBlockScheduleCoversEveryBlockOnceLongestFirst) {
    for (int BH : {1, 3, 16 * 12, 8 * 25})
        for (int Tn : {1, 64, 77, 203, 1024})
            // (keys per block, query stage): dK/dV, wide dK/dV
            for (auto [rows, stage] : {std::pair{fl::kBwdBlockRows, fl::kBwdTile},
                                       std::pair{fl::BwdWideDkdvLayout::kBlockRows, fl::BwdWideDkdvLayout::kStage}}) {
                const int nk = fl::ceil_div_int(Tn, rows), nq = fl::ceil_div_int(Tn, stage);
                std::set<std::pair<int, int>> seen;
                int prev_work = 1 << 30;
                for (int block = 0; block < BH * nk; block++) {
                    const fl::TileIndex ti = fl::longest_first_key_block(block, BH);
                    ASSERT_TRUE(ti.bh >= 0 && ti.bh < BH && ti.tile >= 0 && ti.tile < nk);
                    EXPECT_TRUE(seen.insert({ti.bh, ti.tile}).second);
                    const int work = nq - fl::first_query_tile_for_key(ti.tile * rows, stage);
                    EXPECT_LE(work, prev_work);
                    prev_work = work;
                }
                EXPECT_EQ(seen.size(), (size_t)BH * nk);
            }
}

// The tiles a query block visits are exactly those holding a key some of its rows (< T) can see.
TEST(AttentionTiling, QueryBlocksVisitExactlyTheKeyTilesTheyCanSee) {
    for (int Tn : {1, 63, 64, 65, 77, 128, 203, 1024})
        for (auto [rows, key_tile] :
             {std::pair{fl::kFwdQueryRows, fl::kFwdKeyTile}, std::pair{fl::kBwdBlockRows, fl::kBwdTile},
              std::pair{fl::BwdWideDqLayout::kBlockRows, fl::BwdWideDqLayout::kStage}})
            for (int q0 = 0; q0 < Tn; q0 += rows) {
                const int last_row = std::min(q0 + rows, Tn) - 1;
                const int n = fl::key_tiles_for_query_block(q0, rows, Tn, key_tile);
                EXPECT_LE((n - 1) * key_tile, last_row);   // the last tile holds a visible key
                EXPECT_GT(n * key_tile, last_row);         // and no visible key is beyond it
            }
}

// The fully-masked predicates against brute force over small ranges.
TEST(AttentionTiling, SkipPredicatesAreExact) {
    // warps of 16 and 32 rows (default, wide) against tiles / slices of 16 and 32 columns
    for (int Tn : {1, 20, 40, 70})
        for (int rows : {16, 32})
            for (int cols : {16, 32})
                for (int r0 = 0; r0 < 80; r0 += 4)
                    for (int k0 = 0; k0 < 80; k0 += 4) {
                        bool live_q = false, live_k = false, need = false;
                        for (int t = r0; t < r0 + rows; t++)
                            for (int j = k0; j < k0 + cols; j++) {
                                live_q |= fl::causal_keep_bwd(t, j, Tn);   // rows are queries
                                live_k |= fl::causal_keep_bwd(j, t, Tn);   // rows are keys: query j, key t
                                need |= t == r0 && !fl::causal_keep(t, j);
                            }
                        SCOPED_TRACE(::testing::Message()
                                     << r0 << " " << k0 << " " << rows << "x" << cols << " T=" << Tn);
                        EXPECT_EQ(fl::query_rows_fully_masked(r0, rows, k0, Tn), !live_q);
                        EXPECT_EQ(fl::key_rows_fully_masked(r0, k0, cols, Tn), !live_k);
                        // the mask is needed exactly when the first row cannot see the whole tile
                        EXPECT_EQ(fl::query_rows_need_mask(r0, k0, cols), need);
                    }
}
