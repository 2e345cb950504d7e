// test_fp8_cast_tile.cpp — the geometry of the vectorised FP8 cast-with-transpose
// (llmc/cuda/fp8_cast_tile.h), checked on the CPU: what quantize_transpose_vec_kernel relies on for
// being right (every value cast once, every output byte written once, from the right place) and
// fast (16-byte-aligned global accesses, no shared-memory bank conflict within a warp).
#include "cuda/fp8_cast_tile.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

using namespace train_gpt::cuda;
namespace ct = train_gpt::cuda::cast_tile;

TEST(Fp8CastTile, LoadPhaseCastsEveryValueOnce) {
    std::vector<int> seen(ct::kRows * ct::kCols, 0);
    for (int p = 0; p < ct::kPasses; p++) {
        for (int t = 0; t < ct::kThreads; t++) {
            const ct::Coord at = ct::load_coord(t, p);
            ASSERT_GE(at.row, 0);
            ASSERT_LT(at.row, ct::kRows);
            ASSERT_EQ(at.col % ct::kVec, 0) << "a 16-byte load of bf16 and an 8-byte store of FP8 need it";
            for (int k = 0; k < ct::kVec; k++)
                seen[at.row * ct::kCols + at.col + k]++;
        }
    }
    for (int count : seen)
        EXPECT_EQ(count, 1);
}

// The transposed store: thread t writes qt[col][row .. row + 15] from the tile's column col; over the
// block, every (row, col) of the tile exactly once, in 16-byte aligned runs of qt.
TEST(Fp8CastTile, StorePhaseWritesEveryTransposedByteOnce) {
    std::vector<int> seen(ct::kRows * ct::kCols, 0);
    for (int t = 0; t < ct::kThreads; t++) {
        const ct::Coord at = ct::store_t_coord(t);
        ASSERT_EQ(at.row % ct::kTBytes, 0) << "16-byte aligned within qt's row (rows is a multiple of 64)";
        ASSERT_LT(at.col, ct::kCols);
        for (int j = 0; j < ct::kTBytes; j++)
            seen[(at.row + j) * ct::kCols + at.col]++;
    }
    for (int count : seen)
        EXPECT_EQ(count, 1);
}

namespace {
// Shared-memory banks: 32 banks of 4 bytes. A warp's access conflicts when two lanes touch different
// 4-byte words of the same bank (the same word is a broadcast). Returns the worst number of distinct
// words any bank serves: 1 = conflict-free.
int worst_bank_load(const std::vector<std::pair<int, int>>& lane_bytes) {   // (first byte, length)
    std::map<int, std::set<int>> words_of_bank;
    for (const auto& [first, length] : lane_bytes) {
        for (int b = first; b < first + length; b++)
            words_of_bank[(b / 4) % 32].insert(b / 4);
    }
    int worst = 0;
    for (const auto& [bank, words] : words_of_bank)
        worst = std::max(worst, (int)words.size());
    return worst;
}
}   // namespace

// The load phase's 8-byte writes into the tile: a warp writes 256 contiguous bytes (64 words, two
// per bank: the two halves of an 8-byte access, which the hardware serves in two wavefronts anyway).
TEST(Fp8CastTile, TileWritesAreConflictFree) {
    for (int p = 0; p < ct::kPasses; p++) {
        for (int warp = 0; warp < ct::kThreads / 32; warp++) {
            std::vector<std::pair<int, int>> lanes;
            for (int lane = 0; lane < 32; lane++) {
                const ct::Coord at = ct::load_coord(warp * 32 + lane, p);
                lanes.push_back({ct::smem_offset(at.row, at.col), ct::kVec});
                EXPECT_EQ(ct::smem_offset(at.row, at.col) % 8, 0) << "8-byte aligned shared store";
            }
            EXPECT_LE(worst_bank_load(lanes), 2) << "pass " << p << " warp " << warp;
        }
    }
}

// The store phase's gathers: for each byte j, a warp reads one byte per lane; all 32 must fall in
// distinct banks or share words.
TEST(Fp8CastTile, TransposedGathersAreConflictFree) {
    for (int warp = 0; warp < ct::kThreads / 32; warp++) {
        for (int j = 0; j < ct::kTBytes; j++) {
            std::vector<std::pair<int, int>> lanes;
            for (int lane = 0; lane < 32; lane++) {
                const ct::Coord at = ct::store_t_coord(warp * 32 + lane);
                lanes.push_back({ct::smem_offset(at.row + j, at.col), 1});
            }
            EXPECT_EQ(worst_bank_load(lanes), 1) << "warp " << warp << " byte " << j;
        }
    }
}

TEST(Fp8CastTile, FitsWholeTilesOnly) {
    EXPECT_TRUE(ct::fits(16384, 768));    // (B·T, C) at d12
    EXPECT_TRUE(ct::fits(16384, 3072));   // (B·T, 4C)
    EXPECT_TRUE(ct::fits(8192, 1600));    // d48
    EXPECT_FALSE(ct::fits(100, 768));
    EXPECT_FALSE(ct::fits(16384, 200));
    EXPECT_FALSE(ct::fits(0, 64));
}
